"""``tracer diff``: the command line's options, checked, then the library's call, rendered once."""

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import TracerError, UsageError
from tracer.messages import msg

if TYPE_CHECKING:
    from tracer.compare.judge import DiffResult


def diff(
    a: Annotated[str, typer.Argument(metavar="A", help="Side A: a YAML spec, a trace saved by `tracer run SPEC --json`, or arrays (as B).",
                                     show_default=False)],
    sides: Annotated[list[str], typer.Argument(metavar="B...", help="Side B: a YAML spec, a saved JSON trace, or your own arrays: an .npz "
                                                       "(one array per stage; a --save archive too) or a JSON object of stage name -> nested list. "
                                                       "Several (or a folder of them): each compared with A, a status line each, or JSON Lines.",
                                               show_default=False)],
    atol: Annotated[float | None, typer.Option("--atol", show_default=False, help="Absolute tolerance: equal when |A - B| <= atol + rtol * max(|A|, |B|); "
                                                                                  "default 1e-9, or 1e-5 against float32 arrays (1e-2 float16).")] = None,
    rtol: Annotated[float | None, typer.Option("--rtol", show_default=False,
                                               help="Relative tolerance (see --atol): default 1e-9, or 1e-5 against float32 arrays.")] = None,
    pos: shared.PosOption = 0,
    batch: shared.BatchOption = 0,
    precision: shared.PrecisionOption = 6,
    show_all: Annotated[bool, typer.Option("--all", help="Also compare attention internals (attn.q, attn.k, ...).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json: one JSON object instead of the tables.")] = False,
    fmt: shared.FormatOption = None,
    stage: shared.StageOption = None,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Compare even when a side has a violation (else exit 2).")] = False,
    names: Annotated[list[str] | None, typer.Option("--map", metavar="THEIRS=OURS", show_default=False,
                                                    help="Your array THEIRS is tracer's stage OURS (repeatable), or a YAML file of "
                                                         "'theirs: ours' lines.")] = None,
    grad: Annotated[bool, typer.Option("--grad",
                                       help="Compare the backward traces: each stage's and weight's gradient of the side's loss (as tracer grad).")] = False,
    no_color: shared.NoColorOption = False,
    svg: shared.SvgOption = None,
    html: shared.HtmlOption = None,
    force: shared.ForceOption = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE",
                                            help="Refuse a diff estimated to need more (both sides count).")] = shared.DEFAULT_MAX_MEMORY,
    confine: shared.ConfineOption = None,
    lang: shared.LangOption = None,
    ablate: shared.AblateOption = None,
    set_: shared.SetOption = None,
    start: shared.FromOption = None,
    ablate_a: Annotated[list[str] | None, typer.Option("--ablate-a", metavar="STAGE[=mean]", show_default=False, help="As --ablate, on side A only.")] = None,
    ablate_b: Annotated[list[str] | None, typer.Option("--ablate-b", metavar="STAGE[=mean]", show_default=False, help="As --ablate, on side B only.")] = None,
    set_a: Annotated[list[str] | None, typer.Option("--set-a", metavar="STAGE=FILE:KEY", show_default=False, help="As --set, on side A only.")] = None,
    set_b: Annotated[list[str] | None, typer.Option("--set-b", metavar="STAGE=FILE:KEY", show_default=False, help="As --set, on side B only.")] = None,
    start_a: Annotated[str | None, typer.Option("--from-a", metavar="STAGE=FILE:KEY", show_default=False, help="As --from, on side A only.")] = None,
    start_b: Annotated[str | None, typer.Option("--from-b", metavar="STAGE=FILE:KEY", show_default=False, help="As --from, on side B only.")] = None,
    token: Annotated[str | None, typer.Option("--token", metavar="ID|WORD", show_default=False,
                                              help="The token whose probability the effect sentence follows (default: the clean side's top next token "
                                                   "at the last position).")] = None,
    page: shared.PageOption = None,
    page_budget: shared.PageBudgetOption = 20.0,
) -> None:
    """Compare two blocks stage by stage: structure, settings, and where the numbers first diverge.

    Either side may be the arrays your own implementation recorded (.npz or JSON): the diff then
    names the first stage where they leave tracer's, and what that usually means.

    Exit codes as diff(1): 0 the same within tolerance, 1 different, 2 trouble; with several B, the worst of them.
    """

    def body() -> int:
        from tracer.compare.text import diff_csv, diff_markdown
        from tracer.front.comparison import diff as diff_sides
        from tracer.run.command import output_format
        from tracer.views.trace_json import SCHEMA_VERSION, dumps

        form = output_format(fmt, as_json)
        shared.check_precision(precision)

        both = shared.intervene(ablate, set_, start)  # both sides, then each side's own
        sides_asked = (shared.intervene([*both[0], *(ablate_a or ())], [*both[1], *(set_a or ())], start_a or start),
                       shared.intervene([*both[0], *(ablate_b or ())], [*both[1], *(set_b or ())], start_b or start))
        asked = None
        if any(any(x) for x in sides_asked):
            from tracer.engine.interventions import Requests

            asked = (Requests(*sides_asked[0]), Requests(*sides_asked[1]))

        def compared(b: str) -> "DiffResult":
            return diff_sides(a, b, atol=atol, rtol=rtol, batch=batch, pos=pos, show_all=show_all, keep_going=keep_going,
                              stages=tuple(stage or ()), names=tuple(names or ()), grad=grad, max_memory=max_memory,
                              intervene=asked, token=token, precision=precision).result

        if len(sides) > 1 or os.path.isdir(sides[0]):
            if page is not None:
                raise UsageError(msg("--page shows one diff: give one side B"))
            return diff_many(a, sides, form, bool(svg or html), compared)
        b = sides[0]
        targets = shared.export_targets(svg, html, [a, b], form, force)
        if page is not None:
            shared.page_checked(page, page_budget, [a, b], force, {"--svg": svg, "--html": html})
        try:
            result = compared(b)
        except TracerError as e:
            if form == "json":  # the error object on stdout too, as with several sides
                from tracer.compare.many import error_json

                sys.stdout.write(dumps(error_json(a, b, e.exit_code, e.message, SCHEMA_VERSION)))
            raise
        if form == "table":
            from tracer.compare.view import diff_view

            shared.show(diff_view(result, precision), no_color, targets, f"tracer diff {a} {b}", force)
        else:
            writers = {"json": lambda: dumps(result.as_json()), "csv": lambda: diff_csv(result),
                       "markdown": lambda: diff_markdown(result, precision)}
            sys.stdout.write(writers[form]())
        if page is not None:
            from tracer.page.writer import diff_page

            shared.write_page_file(page, diff_page(result, precision=precision, lang=shared.page_language(), budget_mb=page_budget), force)
        return result.exit_code

    shared.guarded(body, lang, confine)


def diff_many(a: str, paths: list[str], form: str, exports: bool, compared: "Callable[[str], DiffResult]") -> int:
    """Each hand-in against A, in this process: a status line each and a summary (table), or JSON Lines, one object
    per hand-in, an error as an object too (json; the status lines then on stderr)."""
    from tracer.compare import many
    from tracer.views.trace_json import dumps

    if form not in ("table", "json"):
        raise UsageError(msg("--format {form} compares two sides; with several, give the table or --json (JSON Lines)", form=form))
    if exports:
        raise UsageError(msg("--svg and --html export one diff's view: give one side B"))
    sides = many.hand_ins(paths)
    outcomes = []
    for path in sides:
        h = many.compare_each(a, [path], compared)[0]
        outcomes.append(h)
        line = many.status_line(h)
        if form == "json":
            sys.stdout.write(dumps(h.json(a)))
            sys.stdout.flush()
            sys.stderr.write(line + "\n")
        else:
            sys.stdout.write(line + "\n")
    (sys.stderr if form == "json" else sys.stdout).write(many.summary_line(outcomes) + "\n")
    return many.exit_code(outcomes)
