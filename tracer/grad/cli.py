"""``tracer grad``: the command line's options, checked, then the library's call, rendered once."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared

if TYPE_CHECKING:
    pass


GRAD_SECTIONS = {
    "What is traced": ("--loss", "--pos", "--batch", "--precision", "--all", "--stage", "--per-layer", "--weight"),
    "Output": ("--format", "--json", "--save", "--svg", "--html", "--page", "--page-budget", "--force", "--no-color", "--lang"),
    "Checks": ("--verify", "--keep-going", "--confine"),
    "Memory": ("--max-memory",),
    "Interventions": ("--ablate", "--set", "--from"),
}


def grad(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec to run forward and backward.", show_default=False)],
    loss: Annotated[str | None, typer.Option("--loss", metavar="next-token|sum-squares", show_default=False,
                                             help="The scalar whose gradient is traced. Default: the spec's loss:, else next-token with an output head, "
                                                  "sum-squares (0.5·ΣY²) without.")] = None,
    pos: shared.PosOption = 0,
    batch: shared.BatchOption = 0,
    precision: shared.PrecisionOption = 6,
    show_all: Annotated[bool, typer.Option("--all", help="Also show the gradients of the attention internals (attn.q, attn.k, ...).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json: run's JSON, each stage with its grad, plus loss and weight_grads.")] = False,
    fmt: shared.FormatOption = None,
    stage: shared.StageOption = None,
    per_layer: Annotated[bool, typer.Option("--per-layer", help="Show one weight's gradient norm in every layer of the stack (--weight), with bars.")] = False,
    weight: Annotated[str, typer.Option("--weight", metavar="NAME", help="The weight --per-layer compares across layers.")] = "ffn.w2",
    verify: Annotated[bool, typer.Option("--verify", help="Check a sample of every weight's gradient by central finite differences.")] = False,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Take the gradient of what NumPy computed even after a violation.")] = False,
    save: Annotated[str | None, typer.Option("--save", metavar="FILE.npz", help="Write the stages, their gradients (grad/STAGE) and the weights' "
                                                                                "(grad/weights/NAME) to an .npz archive.")] = None,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE",
                                            help="Refuse a run (forward and backward) estimated to need more.")] = shared.DEFAULT_MAX_MEMORY,
    no_color: shared.NoColorOption = False,
    svg: shared.SvgOption = None,
    html: shared.HtmlOption = None,
    page: shared.PageOption = None,
    page_budget: shared.PageBudgetOption = 20.0,
    force: shared.ForceOption = False,
    confine: shared.ConfineOption = None,
    lang: shared.LangOption = None,
    ablate: shared.AblateOption = None,
    set_: shared.SetOption = None,
    start: shared.FromOption = None,
) -> None:
    """The training signal, stage by stage: a loss's gradient with respect to every stage and weight, in backward order."""

    def body() -> int:
        from tracer.grad.command import GradRequest, execute
        from tracer.run.command import output_format

        form = output_format(fmt, as_json)
        shared.check_precision(precision)
        targets = shared.export_targets(svg, html, [spec], form, force, save)
        if page is not None:
            shared.page_checked(page, page_budget, [spec], force, {"--save": save, "--svg": svg, "--html": html})
        result = execute(GradRequest(spec, form, loss, batch, pos, precision, show_all, tuple(stage or ()), per_layer,
                                     weight, verify, keep_going, save, max_memory, force, shared.intervene(ablate, set_, start), full=page is not None))
        if isinstance(result.output, str):
            sys.stdout.write(result.output)
        else:
            shared.show(result.output, no_color, targets, result.title)
        for note in result.notes:
            shared.note_line(note)
        if page is not None and result.trace is not None:
            from tracer.page.writer import run_page

            g = result.trace
            shared.write_page_file(page, run_page(g.forward, b=result.batch, t=result.pos, precision=precision, lang=shared.page_language(),
                                           budget_mb=page_budget, grad=g if g.loss is not None else None, grad_weight=weight), force)
        return result.code

    shared.guarded(body, lang, confine)
