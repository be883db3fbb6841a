"""``tracer patch``: the command line's options, checked, then the library's call, rendered once."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import TracerError, UsageError
from tracer.messages import msg

if TYPE_CHECKING:
    pass


def patch(
    clean: Annotated[str, typer.Argument(metavar="CLEAN", help="The spec of the clean run: its stage values are patched in.", show_default=False)],
    corrupt: Annotated[str, typer.Argument(metavar="CORRUPT", help="The spec of the corrupt run (the same model on another input): patched at each cell.",
                                           show_default=False)],
    stage: Annotated[list[str] | None, typer.Option("--stage", metavar="PATTERN", show_default=False,
                                                    help="The stages to patch, by name or pattern (default 'blocks.*.output'); repeatable.")] = None,
    token: Annotated[list[str] | None, typer.Option("--token", metavar="ID|TEXT", show_default=False,
                                                    help="The token followed, once or once a sample (default: the clean run's top next token there).")] = None,
    metric: Annotated[str, typer.Option("--metric", metavar="logit|logit-diff|prob|logprob",
                                        help="What is read at the last position: the token's logit, its logit minus --against's, "
                                             "its probability or its log.")] = "logit",
    against: Annotated[list[str] | None, typer.Option("--against", metavar="ID|TEXT", show_default=False,
                                                      help="--metric logit-diff: the token whose logit is taken off (once, or once a sample).")
                                                      ] = None,
    normalise: Annotated[bool, typer.Option("--normalise",
                                            help="Each change as a share of clean minus corrupt: 0 the corrupt run, 1 the clean one.")] = False,
    positions: Annotated[str, typer.Option("--positions", metavar="each|all",
                                           help="A column a position, or one column patching every position at once.")] = "each",
    sender: Annotated[list[str] | None, typer.Option("--sender", metavar="HEAD", show_default=False,
                                                     help="Path patching: the sender head (blocks.L.attn.head.H, or a pattern); repeatable.")] = None,
    receiver: Annotated[list[str] | None, typer.Option("--receiver", metavar="q|k|v", show_default=False,
                                                       help="Path patching: the later heads' input the sender is patched into (default: q, k and v).")
                                                       ] = None,
    batch: Annotated[int | None, typer.Option("--batch", "-b", metavar="B", show_default=False,
                                              help="The sample whose metric is read (default: every sample, their mean and spread).")] = None,
    precision: Annotated[int, typer.Option("--precision", "-p", metavar="N", help="Decimals printed (0 to 17).")] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json: one JSON object instead of the table and heatmap.")] = False,
    fmt: Annotated[str | None, typer.Option("--format", metavar="table|json|csv", show_default=False,
                                            help="Output format (default: table, with the heatmap).")] = None,
    no_color: shared.NoColorOption = False,
    svg: shared.SvgOption = None,
    html: shared.HtmlOption = None,
    force: shared.ForceOption = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE",
                                            help="Refuse a sweep whose runs are estimated to need more.")] = shared.DEFAULT_MAX_MEMORY,
    confine: shared.ConfineOption = None,
    lang: shared.LangOption = None,
) -> None:
    """Activation patching: each stage at each position patched from CLEAN into CORRUPT, and the change in a token's logit.

    Exit codes: 0 the sweep ran, 1 a run had a violation, 2 bad input.
    """

    def body() -> int:
        from tracer.front.prepare import load_checked
        from tracer.patching.run import DEFAULT_STAGE, Ask
        from tracer.patching.run import patch as sweep
        from tracer.run.command import output_format

        form = output_format(fmt, as_json)
        if form == "markdown":
            raise UsageError(msg("--format markdown: tracer patch writes table, json or csv"))
        shared.check_precision(precision)
        targets = shared.export_targets(svg, html, [clean, corrupt], form, force)
        try:
            ask = Ask(metric, token or None, against or None, normalise, batch)
            if receiver and not sender:
                raise UsageError(msg("--receiver is for path patching: give --sender HEAD too"))
            if sender:
                from tracer.patching.path import path_patch

                if stage or positions != "each":
                    raise UsageError(msg("--sender: path patching patches the sender at every position into the later heads; --stage and --positions are for "
                                         "activation patching"))
                grid = path_patch(load_checked(clean, max_memory=max_memory), load_checked(corrupt, max_memory=max_memory), tuple(sender),
                                  tuple(receiver or ()), ask, max_memory)
            else:
                grid = sweep(load_checked(clean, max_memory=max_memory), load_checked(corrupt, max_memory=max_memory), tuple(stage or (DEFAULT_STAGE,)),
                             max_memory=max_memory, ask=ask, positions=positions)
        except TracerError as e:
            if form == "json":  # the error object on stdout too, as tracer run and tracer diff write it
                from tracer.views.trace_json import SCHEMA_VERSION, dumps

                sys.stdout.write(dumps({"schema_version": SCHEMA_VERSION, "kind": "patch", "ok": False,
                                                "error": {"exit_code": e.exit_code, "message": e.message}}))
            raise
        if form == "json":
            from tracer.views.trace_json import SCHEMA_VERSION, dumps

            sys.stdout.write(dumps(grid.as_json()))
        elif form == "csv":
            from tracer.patching.view import patch_csv

            sys.stdout.write(patch_csv(grid))
        else:
            from tracer.patching.view import patch_view

            shared.show(patch_view(grid, precision), no_color, targets, "tracer patch", force)
        return grid.exit_code

    shared.guarded(body, lang, confine)
