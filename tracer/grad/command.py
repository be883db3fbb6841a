"""``tracer grad SPEC``: the options checked, the spec run forward and backward, the result drawn in the chosen format."""

from __future__ import annotations

from typing import NamedTuple

from rich.console import RenderableType

from tracer.errors import EXIT_OK, EXIT_VIOLATION, UsageError
from tracer.front.prepare import load_checked, select_stages
from tracer.grad import view
from tracer.grad.run import GradOptions, GradTrace, grad, per_layer
from tracer.messages import msg
from tracer.spec import memory
from tracer.spec.choices import position
from tracer.views.trace_json import dumps


class GradRequest(NamedTuple):
    path: str
    form: str = "table"  # table | json | csv | markdown
    loss: str | None = None
    batch: int = 0
    pos: int = 0
    precision: int = 6
    show_all: bool = False
    stages: tuple[str, ...] = ()
    per_layer: bool = False
    weight: str = "ffn.w2"  # --per-layer's weight
    verify: bool = False
    keep_going: bool = False
    save: str | None = None
    max_memory: str = memory.DEFAULT_MAX_MEMORY
    force: bool = False  # --force: --save may replace a file tracer cannot prove it wrote (docs/files.md)
    intervene: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = ((), (), ())  # --ablate, --set, --from as given
    full: bool = False  # keep every stage and its gradient in full (--page shows them all)


class GradResult(NamedTuple):
    output: RenderableType | str  # a renderable for the terminal, text for the other formats
    code: int
    title: str
    notes: tuple[str, ...] = ()
    trace: GradTrace | None = None  # the forward and backward traces (--page draws them)
    batch: int = 0  # the position shown, -1 resolved
    pos: int = 0


def execute(r: GradRequest) -> GradResult:
    from tracer.engine.interventions import Requests

    # the backward pass runs through the intervened forward
    s = load_checked(r.path, max_memory=r.max_memory, intervene=Requests(*r.intervene) if any(r.intervene) else None)
    only = select_stages(s, r.stages)
    batch, pos = position(s, r.batch, r.pos)
    r = r._replace(batch=batch, pos=pos)
    if r.per_layer and r.form in ("json", "csv"):
        raise UsageError(msg("--per-layer draws a table and bars; with --format {form} use --json's weight_grads instead", form=r.form))
    if r.save is not None:
        from tracer.files import check_output

        check_output(r.save, "--save", [r.path], "npz", r.force)
    # the [B,H,T,S] attention scores and weights and their gradients are kept only for an output that shows them
    internals = r.full or r.show_all or r.form == "json" or r.save is not None or any(n.endswith((".scores", ".weights")) for n in only or ())
    # the plain table and Markdown show each stage's gradient at (b, t) and its norm only
    point = (r.batch, r.pos) if r.form in ("table", "markdown") and not internals else None
    g = grad(s, GradOptions(r.loss, r.keep_going, r.max_memory, r.form == "json", internals, point))

    def done(result: GradResult) -> GradResult:
        return result._replace(trace=g, batch=r.batch, pos=r.pos)

    if g.loss is None:  # the forward pass stopped at a violation: show it as run does
        from tracer.run.command import Outcome, RunOptions, render_text

        outcome = Outcome(r.path, EXIT_VIOLATION, g.forward, only=only, show_all=r.show_all)
        opts = RunOptions(r.batch, r.pos, r.precision, r.show_all, form=r.form)
        note: str = msg("no gradient: the forward pass stopped at the violation (--keep-going takes the gradient of what NumPy computed)")
        if r.form == "table":
            from tracer.views.tables import run_view

            return done(GradResult(run_view(g.forward, r.batch, r.pos, r.precision, r.show_all, only=only), EXIT_VIOLATION, s.name, (note,)))
        return done(GradResult(render_text(outcome, r.form, opts), EXIT_VIOLATION, s.name, (note,)))
    code = EXIT_OK if g.forward.ok else EXIT_VIOLATION
    check = None
    if r.verify:
        from tracer.grad.finite_diff import verify

        check = verify(g)
        code = max(code, EXIT_OK if check.ok else EXIT_VIOLATION)
    note = check.note() if check is not None else ""
    if r.save is not None:
        from tracer.files import write_atomic
        from tracer.views.npz import write_npz

        arrays = view.npz_arrays(g)
        write_atomic(r.save, lambda fh: write_npz(fh, arrays), "--save", "npz", r.force)
    if r.per_layer:
        rows = per_layer(g, r.weight)
        if r.form == "markdown":
            return done(GradResult(view.per_layer_markdown(g, r.weight, rows), code, s.name))
        return done(GradResult(view.per_layer_view(g, r.weight, rows), code, s.name))
    stages = view.shown_grads(g, r.show_all, only)
    if r.form == "json":
        return done(GradResult(dumps(view.grad_json(g, stages, check.as_json() if check else None)), code, s.name))
    if r.form == "csv":
        return done(GradResult(view.grad_csv(g, stages), code, s.name, (note,) if note else ()))
    if r.form == "markdown":
        return done(GradResult(view.grad_markdown(g, stages, r.batch, r.pos, r.precision, only is None, note), code, s.name))
    return done(GradResult(view.grad_view(g, stages, r.batch, r.pos, r.precision, only is None, note), code, s.name))
