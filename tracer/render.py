"""Renderers: turn a Trace into rich renderables.  They never print."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .errors import Violation
from .executor import Stage, Trace
from .spec import Spec, shape_label

MAX_VALUES = 8  # a vector longer than this prints its first HEAD values and a count
HEAD = 3
MAX_ROWS = 6  # a matrix taller than this prints its first HEAD rows, a count, and its last row


def fmt_number(v: float, precision: int) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    s = f"{v:.{precision}f}"
    if s.startswith("-") and not s.strip("-0."):  # -0.000000 prints as 0.000000
        s = s[1:]
    return s


def fmt_vector(values: Iterable[float], precision: int, limit: int = MAX_VALUES) -> str:
    vals = [float(v) for v in values]
    if len(vals) > limit:
        head = ", ".join(fmt_number(v, precision) for v in vals[:HEAD])
        return f"[{head}, … {len(vals)} values]"
    return "[" + ", ".join(fmt_number(v, precision) for v in vals) + "]"


def fmt_value(a: np.ndarray, precision: int) -> str:
    """A stage's value at one position: a vector, or one row per head."""
    a = np.asarray(a)
    if a.ndim == 0:
        return fmt_number(float(a), precision)
    if a.ndim == 1:
        return fmt_vector(a.tolist(), precision)
    rows = [fmt_value(r, precision) for r in a[:HEAD]] if len(a) > MAX_ROWS else [fmt_value(r, precision) for r in a]
    if len(a) > MAX_ROWS:
        rows.append(f"… {len(a)} rows")
    return "[" + ", ".join(rows) + "]"


def token_label(spec: Spec, b: int, t: int) -> str:
    """' (我)': the word at sample b, position t, when the spec has a vocab."""
    words = spec.tokens_text()
    if words is None or t >= len(words[b]):
        return ""
    return f" ({words[b][t]})"


def visible_stages(trace: Trace, show_all: bool) -> list[Stage]:
    flagged = {v.stage for v in trace.violations}
    return [s for s in trace.stages.values() if show_all or not s.internal or s.name in flagged]


def trace_table(trace: Trace, b: int, t: int, precision: int, show_all: bool,
                verify_diffs: dict[str, float] | None = None, marks: frozenset[str] = frozenset()) -> Table:
    spec = trace.spec
    # Text, not str: rich would read "[nan, 1.0]" or a spec name with "[/]" as console markup.
    title = Text(spec.name)
    order = "custom steps" if spec.block.norm_order == "custom" else f"{spec.block.norm_order}-norm"
    caption = Text(f"{order}, mask {spec.block.mask}, eps {spec.block.eps:g}; "
                   + ", ".join(f"{k} = {v}" for k, v in spec.dims.as_dict().items()))
    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    table.add_column("stage", overflow="fold")
    table.add_column("what it is", overflow="fold")
    table.add_column(f"value at b={b}, t={t}{token_label(spec, b, t)}", overflow="fold")
    table.add_column("shape", overflow="fold")
    if verify_diffs is not None:
        table.add_column("max |NumPy - reference|", justify="right", overflow="fold")
    for stage in visible_stages(trace, show_all):
        name = Text(stage.name, style="bold red" if stage.name in marks else "")
        if stage.name in marks:
            name.append("  ← violation")
        try:
            value = fmt_value(stage.at(b, t), precision)
        except (IndexError, LookupError):  # a stage cut short (T beyond the position table)
            value = "—"
        row: list[RenderableType] = [name, Text(stage.meaning), Text(value), Text(stage.shape_label)]
        if verify_diffs is not None:
            d = verify_diffs.get(stage.name)
            row.append("not checked" if d is None else f"{d:.3g}")
        table.add_row(*row)
    return table


def matrix(trace: Trace, stage: Stage, b: int, precision: int) -> RenderableType:
    """The full [T, C] matrix of one sample (rows and columns elided when large)."""
    if stage.axes[0] == "B" and b >= stage.array.shape[0]:  # a select along B kept fewer samples
        n = stage.array.shape[0]
        return Text(f"{stage.name} holds {n} sample{'s' if n > 1 else ''} (b = 0 to {n - 1}): there is no sample b={b} to show")
    a = np.asarray(stage.array[b]) if stage.axes[0] == "B" else np.asarray(stage.array)
    lines = []
    rows = list(range(len(a)))
    if len(rows) > MAX_ROWS:
        rows = rows[:HEAD] + [-1] + rows[-1:]
    for i in rows:
        if i == -1:
            lines.append(f"  … {len(a)} rows")
            continue
        word = token_label(trace.spec, b, i) if stage.axes[1:2] == ("T",) else ""
        lines.append(f"  t={i}{word}: " + fmt_vector(np.ravel(a[i]).tolist(), precision))
    header = f"{stage.name} for sample b={b}, {stage.meaning}:"
    return Text("\n".join([header] + lines))


def stats_note(trace: Trace, precision: int) -> Text:
    """The stages kept as statistics (--record stats): their mean, std, min and max."""
    lines = ["kept as statistics (--record stats; --keep STAGE keeps one in full):"]
    for stage in trace.stages.values():
        s = stage.summary
        if s is not None:
            lines.append(f"  {stage.name} {stage.shape_label}: mean {fmt_number(s.mean, precision)}, std {fmt_number(s.std, precision)}, "
                         f"min {fmt_number(s.min, precision)}, max {fmt_number(s.max, precision)}")
    return Text("\n".join(lines))


def violation_panel(v: Violation) -> RenderableType:
    from rich.panel import Panel  # here: a clean run never draws one

    body = Text()
    body.append(f"{v.kind} violation at stage {v.stage}\n", style="bold red")
    body.append(v.message + "\n")
    if v.rule:
        body.append("rule: ", style="bold")
        body.append(v.rule + "\n")
    for name, shape in v.shapes.items():
        body.append(f"  {name}: {shape}\n")
    if v.numpy_would:
        body.append("NumPy would: ", style="bold")
        body.append(v.numpy_would + "\n")
    if v.why:
        body.append("why it is wrong here: ", style="bold")
        body.append(v.why)
    return Panel(body, title=f"violation: {v.kind}", expand=False, border_style="red")


def run_view(trace: Trace, b: int, t: int, precision: int, show_all: bool,
             verify_diffs: dict[str, float] | None = None, verify_note: str = "") -> Group:
    marks = frozenset(v.stage for v in trace.violations)
    parts: list[RenderableType] = [trace_table(trace, b, t, precision, show_all, verify_diffs, marks)]
    if any(s.summary is not None for s in visible_stages(trace, show_all)):
        parts.append(stats_note(trace, precision))
    if trace.spec.steps[-1].name in trace.stages:  # the run reached the end (clean, or --keep-going)
        parts.append(matrix(trace, trace.output, b, precision))
    for v in trace.violations:
        parts.append(violation_panel(v))
    if verify_note:
        parts.append(Text(verify_note))
    return Group(*parts)


def steps_table(spec: Spec) -> Table:
    """The step list a spec runs, with every stage's shape (``tracer run --steps``)."""
    kind = "preset " + spec.block.norm_order + "-norm" if spec.block.norm_order != "custom" else "the spec's own steps"
    if spec.model == "encoder-decoder":
        kind = "encoder-decoder"
    table = Table(title=Text(f"{spec.name}: {kind}"), title_justify="left")
    for col in ("#", "stage", "op", "reads", "weights", "settings", "shape"):
        table.add_column(col, overflow="fold")
    for i, step in enumerate(spec.steps, 1):
        settings = ", ".join(f"{k}={v}" for k, v in step.params().items() if k != "stream")
        if step.op == "select":
            settings = f"axis={step.axis}, {step.start}:{step.stop}"
        cells = (str(i), step.name, step.op, ", ".join(step.inputs), step.weights or "", settings, shape_label(*spec.stage_shapes[step.name]))
        table.add_row(*(Text(c) for c in cells))
    return table


def probe_table(spec: Spec, props: list) -> Table:  # list[probe.Property]
    table = Table(title=Text(f"{spec.name}: properties"), title_justify="left")
    table.add_column("property", overflow="fold")
    table.add_column("result", overflow="fold")
    table.add_column("evidence", overflow="fold")
    style = {"pass": "green", "fail": "bold red", "not applicable": "dim"}
    for p in props:
        table.add_row(Text(p.name), Text(p.result, style=style.get(p.result, "")), Text(p.evidence))
    return table
