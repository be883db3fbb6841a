"""What ``tracer grad`` shows: the gradient table (backward order), the weights view, the per-layer picture.

Rows are built once (``*_rows``) and drawn as a rich table, CSV, Markdown or JSON, as ``tracer run`` does;
the rich views return renderables and never print.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracer.engine.executor import Stage
from tracer.grad.run import GradTrace, weights_by_layer
from tracer.i18n import tr
from tracer.messages import render
from tracer.model.shapes import shape_label
from tracer.views.text import MISSING, fmt_value, markdown_table, md_text, token_label, trace_csv

BAR_WIDTH = 40


def shown_grads(g: GradTrace, show_all: bool, only: Sequence[str] | None) -> list[Stage]:
    """The gradients a view shows, in backward order: those named by --stage, else the steps' (internals with --all)."""
    if only is not None:
        return [s for s in g.grads.values() if s.name in only]
    return [s for s in g.grads.values() if show_all or not s.internal]


def grad_header(g: GradTrace, b: int, t: int) -> list[str]:
    return [tr("stage"), tr("what it is"), tr("gradient at b={b}, t={t}{word}", b=b, t=t, word=token_label(g.spec, b, t)),
            tr("|gradient|"), tr("|gradient| / |value|"), tr("shape")]


def fmt_norm(v: float) -> str:
    return "inf" if math.isinf(v) else ("nan" if math.isnan(v) else f"{v:.4g}")


def grad_rows(g: GradTrace, stages: Sequence[Stage], b: int, t: int, precision: int) -> list[list[str]]:
    rows = []
    for stage in stages:
        try:
            value = fmt_value(stage.at(b, t), precision)
        except (IndexError, LookupError):
            value = MISSING
        rows.append([stage.name, render(stage.meaning), value, fmt_norm(g.grad_norm(stage.name)), fmt_norm(g.ratio(stage.name)),
                     stage.shape_label])
    return rows


def loss_line(g: GradTrace) -> str:
    assert g.loss is not None
    return tr("loss {name} = {value}: {formula}; gradients in backward order, from the loss to the input",
              name=g.loss.name, value=f"{g.loss.value:.10g}", formula=render(g.loss.formula))


def grad_table(g: GradTrace, stages: Sequence[Stage], b: int, t: int, precision: int) -> Table:
    table = Table(title=Text(tr("{name}: the training signal (gradients), stage by stage", name=g.spec.name)),
                  caption=Text(loss_line(g), no_wrap=True, overflow="ignore"), title_justify="left", caption_justify="left")
    for header in grad_header(g, b, t):
        table.add_column(header, overflow="fold", justify="right" if header.startswith("|") else "left")
    for row in grad_rows(g, stages, b, t, precision):
        table.add_row(*map(Text, row))
    return table


WEIGHT_HEADER = ["layer", "weight", "shape", "|dL/dW|"]


def weight_rows(g: GradTrace) -> list[list[str]]:
    rows = []
    for group in weights_by_layer(g):
        for short, n in group.norms.items():
            full = short if short == group.layer or short in g.weights else f"{group.layer}.{short}"
            w = g.spec.weights.get(full)
            shape = shape_label(w.axes, g.weights[full].shape) if w is not None else str(list(g.weights[full].shape))
            rows.append([group.layer, short, shape, fmt_norm(n)])
    return rows


def weights_table(g: GradTrace) -> Table:
    table = Table(title=Text(tr("weight gradients, grouped by layer")), title_justify="left")
    for h in WEIGHT_HEADER:
        table.add_column(tr(h), justify="right" if h.startswith("|") else "left")
    last = None
    for row in weight_rows(g):
        layer = row[0] if row[0] != last else ""
        last = row[0]
        table.add_row(Text(layer, style="bold"), *map(Text, row[1:]))
    return table


def grad_view(g: GradTrace, stages: Sequence[Stage], b: int, t: int, precision: int, weights: bool, note: str = "") -> Group:
    parts: list[RenderableType] = [grad_table(g, stages, b, t, precision)]
    if weights:
        parts.append(weights_table(g))
    if note:
        parts.append(Text(render(note)))
    return Group(*parts)


# -- the per-layer picture ------------------------------------------------------------
def bar(value: float, top: float, width: int = BAR_WIDTH) -> str:
    if not top or not math.isfinite(value):
        return ""
    n = value / top * width
    full = int(n)
    return "█" * full + ("▌" if n - full >= 0.5 else "")


def per_layer_rows(rows: list[tuple[str, float]]) -> list[list[str]]:
    first = rows[0][1]
    return [[layer, fmt_norm(n), fmt_norm(n / first) if first else MISSING] for layer, n in rows]


def per_layer_view(g: GradTrace, weight: str, rows: list[tuple[str, float]]) -> Group:
    assert g.loss is not None
    top = max((n for _, n in rows if math.isfinite(n)), default=0.0)
    table = Table(title=Text(tr("{name}: |dL/d {weight}| of each layer", name=g.spec.name, weight=weight)),
                  caption=Text(tr("loss {name}; last / first layer = {ratio}", name=g.loss.name,
                                  ratio=fmt_norm(rows[-1][1] / rows[0][1]) if rows[0][1] else MISSING), no_wrap=True, overflow="ignore"),
                  title_justify="left", caption_justify="left")
    for h in ("layer", f"|dL/d {weight}|", "/ layer 0", ""):
        table.add_column(tr(h) if h else "", justify="left" if h in ("layer", "") else "right")
    for (layer, n), row in zip(rows, per_layer_rows(rows)):
        table.add_row(Text(layer), Text(row[1]), Text(row[2]), Text(bar(n, top), style="cyan"))
    return Group(table)


def per_layer_markdown(g: GradTrace, weight: str, rows: list[tuple[str, float]]) -> str:
    return (f"### {md_text(g.spec.name)}\n\n"
            + markdown_table([tr("layer"), f"|dL/d {weight}|", tr("/ layer 0")], per_layer_rows(rows)))


# -- text formats ------------------------------------------------------------------------
def grad_markdown(g: GradTrace, stages: Sequence[Stage], b: int, t: int, precision: int, weights: bool, note: str = "") -> str:
    rows = grad_rows(g, stages, b, t, precision)
    for row in rows:
        row[0] = f"`{row[0]}`"
    parts = [f"### {md_text(g.spec.name)}\n", markdown_table(grad_header(g, b, t), rows), md_text(loss_line(g)) + "\n"]
    if weights:
        parts.append(markdown_table([tr(h) for h in WEIGHT_HEADER], weight_rows(g)))
    if note:
        parts.append(md_text(render(note)) + "\n")
    return "\n".join(parts)


def grad_csv(g: GradTrace, stages: Sequence[Stage]) -> str:
    """The gradients in run's CSV layout: one row per stage and position, the gradient's values."""
    return trace_csv([(g.spec.path, stages)])


def grad_json(g: GradTrace, stages: Sequence[Stage], verify: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's JSON (schema_version 1) with each stage also carrying "grad", plus "loss" and "weight_grads"."""
    from tracer.views.trace_json import array_json, trace_json

    assert g.loss is not None
    fwd = [g.forward.stages[s.name] for s in stages]
    out = trace_json(g.forward, fwd, verify)
    for entry, stage in zip(out["stages"], stages):
        entry["grad"] = array_json(stage.array)
        entry["grad_norm"] = _number(g.grad_norm(stage.name))
    out["loss"] = {"name": g.loss.name, "value": _number(g.loss.value), "stage": g.loss.stage, "formula": g.loss.formula}
    out["weight_grads"] = [{"name": n, "shape": list(dw.shape), "values": array_json(dw)} for n, dw in g.weight_grads.items()]
    return out


def _number(v: float) -> Any:
    return v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))


def npz_arrays(g: GradTrace) -> dict[str, Any]:
    """--save: the forward stages under their names (as run saves them), every stage's gradient as grad/<stage>,
    every weight's as grad/weights/<weight>, and the loss as loss."""
    import numpy as np

    from tracer.views.npz import npz_arrays as forward_arrays

    assert g.loss is not None
    out: dict[str, Any] = dict(forward_arrays(g.forward))
    out.update({f"grad/{n}": s.array for n, s in g.grads.items()})
    out.update({f"grad/weights/{n}": dw for n, dw in g.weight_grads.items()})
    out["loss"] = np.array(g.loss.value)
    return out
