"""``tracer page``: the command line's options, checked, then the library's call, rendered once."""

from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import EXIT_OK, EXIT_VIOLATION, UsageError
from tracer.messages import msg

if TYPE_CHECKING:
    pass


PAGE_SECTIONS = {
    "What the page shows": ("--pos", "--batch", "--precision", "--text", "--no-special"),
    "Output": ("--output", "--page-budget", "--force", "--lang"),
    "Checks and limits": ("--keep-going", "--max-memory", "--confine"),
    "Interventions": ("--ablate", "--set", "--from"),
}


def page_command(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec to trace and show.", show_default=False)],
    output: Annotated[str | None, typer.Option("--output", "-o", metavar="FILE", show_default=False,
                                               help="The HTML file to write (never over a file tracer did not write, unless --force).")] = None,
    pos: Annotated[int, typer.Option("--pos", "-t", metavar="T", help="The position the page opens at (-1: the last).")] = 0,
    batch: Annotated[int, typer.Option("--batch", "-b", metavar="B", help="The sample the page opens at (-1: the last).")] = 0,
    precision: shared.PrecisionOption = 6,
    text: Annotated[str | None, typer.Option("--text", metavar="TEXT", show_default=False,
                                             help="Trace this text instead of the spec's input, tokenized with the spec's tokenizer.")] = None,
    no_special: Annotated[bool, typer.Option("--no-special", help="With --text: do not add the tokenizer's special tokens (BOS, EOS).")] = False,
    page_budget: shared.PageBudgetOption = 20.0,
    force: shared.ForceOption = False,
    lang: Annotated[str | None, typer.Option("--lang", metavar="zh|en", autocompletion=shared.complete_lang, show_default=False,
                                             help="The language the page opens in (it switches between both) and of the messages: zh (the book's Chinese) or "
                                                  "en. Default: the locale.")] = None,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Record NumPy's result at a violation and go on, flagging every violation.")] = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE",
                                            help="Refuse a run estimated to need more (every stage is kept).")] = shared.DEFAULT_MAX_MEMORY,
    confine: shared.ConfineOption = None,
    ablate: shared.AblateOption = None,
    set_: shared.SetOption = None,
    start: shared.FromOption = None,
) -> None:
    """Write the worked example as one explorable HTML page: the block diagram, every stage as a heatmap and a
    table with its exact values, Table 17.1, the attention heads, in English and Chinese.

    Exit codes as tracer run: 0 clean, 1 a violation (the page shows it), 2 bad input or over budget.
    """

    def body() -> int:
        from tracer.front.run_trace import trace

        if output is None:
            raise UsageError(msg("give the page's file: tracer page SPEC -o FILE"))
        shared.check_precision(precision)
        shared.page_checked(output, page_budget, [spec], force, {}, "--output")
        t = trace(spec, keep_going=keep_going, record="all", max_memory=max_memory, batch=batch, pos=pos, precision=precision,
                  text=text, special=not no_special, ablate=ablate or None, set=set_ or None, start=start)
        from tracer.page.writer import run_page

        shared.write_page_file(output, run_page(t.run, b=t.batch, t=t.pos, precision=precision, lang=shared.page_language(), budget_mb=page_budget),
                        force, "--output")
        return EXIT_OK if t.ok else EXIT_VIOLATION

    shared.guarded(body, lang, confine)
