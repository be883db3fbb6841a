"""``tracer lens``: the command line's options, checked, then the library's call, rendered once."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import EXIT_OK

if TYPE_CHECKING:
    pass


LENS_SECTIONS = {
    "What the lens shows": ("--token", "--top", "--batch", "--precision", "--text", "--no-special"),
    "Interventions": ("--ablate", "--set"),
    "Output": ("--format", "--json", "--svg", "--html", "--page", "--page-budget", "--force", "--no-color", "--lang"),
    "Checks and limits": ("--max-memory", "--confine"),
}


def lens(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec to read out layer by layer (it needs a head).", show_default=False)],
    token: Annotated[str | None, typer.Option("--token", metavar="TEXT|ID", show_default=False,
                                              help="The token whose probability each cell shows: its text (e.g. Paris) or its id. Default: the model's own "
                                                   "next token at each position.")] = None,
    top: Annotated[int, typer.Option("--top", metavar="K", help="The most probable tokens each cell lists.")] = 3,
    batch: shared.BatchOption = 0,
    precision: Annotated[int, typer.Option("--precision", "-p", metavar="N", help="Decimals printed (0 to 17).")] = 4,
    text: Annotated[str | None, typer.Option("--text", metavar="TEXT", show_default=False,
                                             help="Read out this text instead of the spec's input, tokenized with the spec's tokenizer.")] = None,
    no_special: Annotated[bool, typer.Option("--no-special", help="With --text: do not add the tokenizer's special tokens (BOS, EOS).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    fmt: Annotated[str | None, typer.Option("--format", "-f", metavar="FORMAT", show_default=False, help="table (default) | json | csv.")] = None,
    no_color: shared.NoColorOption = False,
    svg: shared.SvgOption = None,
    html: shared.HtmlOption = None,
    force: shared.ForceOption = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE",
                                            help="Refuse a run estimated to need more (4GB, 512MB, 2GiB, or none).")] = shared.DEFAULT_MAX_MEMORY,
    confine: shared.ConfineOption = None,
    lang: shared.LangOption = None,
    ablate: shared.AblateOption = None,
    set_: shared.SetOption = None,
    page: shared.PageOption = None,
    page_budget: shared.PageBudgetOption = 20.0,
) -> None:
    """The logit lens: every layer's residual stream through the final norm (with that layer's own statistics) and the head.

    A table (layer x position: p(token) and the top tokens) and a heatmap of p(token), layers x positions.
    """

    def body() -> int:
        from tracer.lens.command import lens_format, lens_spec, lens_text

        form = lens_format(fmt, as_json)
        targets = shared.export_targets(svg, html, [spec], "table" if form == "table" else form, force)
        if page is not None:
            shared.page_checked(page, page_budget, [spec], force, {"--svg": svg, "--html": html})
        result, run = lens_spec(spec, token=shared.int_or_text(token), top=top, batch=batch, max_memory=max_memory, precision=precision,
                                       text=text, special=not no_special, ablate=tuple(ablate or ()), set_=tuple(set_ or ()),
                                       record="all" if page is not None else "main")  # the page draws every stage
        if form == "table":
            from tracer.lens.view import lens_view

            shared.show(lens_view(result), no_color, targets, result.spec.name, force)
        else:
            sys.stdout.write(lens_text(result, form))
        if page is not None:
            from tracer.page.writer import run_page

            shared.write_page_file(page, run_page(run, b=result.batch, t=0, lang=shared.page_language(), budget_mb=page_budget, lens=result), force)
        return EXIT_OK

    shared.guarded(body, lang, confine)
