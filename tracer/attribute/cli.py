"""``tracer attribute``: the command line's options, checked, then the library's call, rendered once."""

import sys
from typing import Annotated

import typer

from tracer.cli import shared
from tracer.errors import EXIT_OK

ATTRIBUTE_SECTIONS = {
    "What is split": ("--token", "--against", "--position", "--batch", "--text", "--no-special"),
    "Attribution patching": ("--corrupt", "--stage", "--real"),
    "Output": ("--format", "--json", "--precision", "--svg", "--html", "--page", "--page-budget", "--force", "--no-color", "--lang"),
    "Checks and limits": ("--max-memory", "--confine"),
}


def attribute(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec whose logit is split (it needs a head); with --corrupt, the clean run.",
                                        show_default=False)],
    token: Annotated[str | None, typer.Option("--token", metavar="ID|TEXT", show_default=False,
                                              help="The token whose logit is split: its id, a vocab word or its text in the spec's tokenizer. "
                                                   "Default: the run's top token there.")] = None,
    against: Annotated[str | None, typer.Option("--against", metavar="ID|TEXT", show_default=False,
                                                help="Split the logit difference logit[--token] - logit[--against] instead.")] = None,
    position: Annotated[int, typer.Option("--position", "-t", metavar="T", help="The position whose logit is split (-1: the last).")] = -1,
    batch: Annotated[int, typer.Option("--batch", "-b", metavar="B", help="The sample whose logit is split (-1: the last).")] = 0,
    text: Annotated[str | None, typer.Option("--text", metavar="TEXT", show_default=False,
                                             help="Split the logit of this text instead of the spec's input, tokenized with the spec's tokenizer.")] = None,
    no_special: shared.NoSpecialOption = False,
    corrupt: Annotated[str | None, typer.Option("--corrupt", metavar="CORRUPT", show_default=False,
                                                help="Attribution patching: every cell of `tracer patch SPEC CORRUPT` estimated from one backward "
                                                     "pass.")] = None,
    stage: Annotated[list[str] | None, typer.Option("--stage", metavar="PATTERN", show_default=False,
                                                    help="With --corrupt: the stages to patch, by name or pattern (default 'blocks.*.output'); "
                                                         "repeatable.")] = None,
    real: Annotated[bool, typer.Option("--real", help="With --corrupt: also run the real patch of every cell (tracer patch) and show the error.")] = False,
    precision: shared.PrecisionOption = 4,
    as_json: shared.JsonOption = False,
    fmt: shared.TableFormatOption = None,
    max_memory: shared.MaxMemoryOption = shared.DEFAULT_MAX_MEMORY,
    no_color: shared.NoColorOption = False,
    svg: shared.SvgOption = None,
    html: shared.HtmlOption = None,
    force: shared.ForceOption = False,
    confine: shared.ConfineOption = None,
    lang: shared.LangOption = None,
    page: shared.PageOption = None,
    page_budget: shared.PageBudgetOption = 20.0,
) -> None:
    """Direct logit attribution: a token's logit split into the embeddings, every head, every bias, every FFN and the final norm's offset.

    The final norm's scale is taken from the whole residual stream (frozen), so the parts sum to the logit exactly.
    Exit codes: 0 split, 1 the run flagged a violation, 2 bad input (or a stack whose stream is not a sum).
    """

    def body() -> int:
        from tracer.attribute.command import attribute_spec, attribute_text, check_modes, estimate_spec
        from tracer.lens.command import lens_format

        form = lens_format(fmt, as_json)
        check_modes(corrupt, stage, real, text, page)
        targets = shared.export_targets(svg, html, [spec] + ([corrupt] if corrupt else []), form, force)
        if page is not None:
            shared.page_checked(page, page_budget, [spec], force, {"--svg": svg, "--html": html})
        if corrupt is not None:
            grid = estimate_spec(spec, corrupt, stages=tuple(stage or ()), token=shared.int_or_text(token), against=shared.int_or_text(against),
                                 position=position, batch=batch, real=real, max_memory=max_memory, precision=precision)
            if form == "table":
                from tracer.attribute.view import estimate_view

                shared.show(estimate_view(grid, precision), no_color, targets, "tracer attribute --corrupt", force)
            else:
                sys.stdout.write(attribute_text(grid, form))
            return grid.exit_code
        result, run = attribute_spec(spec, token=shared.int_or_text(token), against=shared.int_or_text(against), position=position, batch=batch,
                                     max_memory=max_memory, precision=precision, text=text, special=not no_special,
                                     record="all" if page is not None else "main")  # the page draws every stage
        if form == "table":
            from tracer.attribute.view import attribution_view

            shared.show(attribution_view(result), no_color, targets, result.spec.name, force)
        else:
            sys.stdout.write(attribute_text(result, form))
        if page is not None:
            from tracer.page.writer import run_page

            shared.write_page_file(page, run_page(run, b=result.b, t=result.t, precision=precision, lang=shared.page_language(), budget_mb=page_budget,
                                                  attribution=result), force)
        return EXIT_OK

    shared.guarded(body, lang, confine)
