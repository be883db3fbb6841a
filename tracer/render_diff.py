"""Renderers for `tracer diff`: structure, settings, then the stage table.  They never print."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .diff import DIFFERS, EQUAL, STATUS_WORDS, DiffResult, expr
from .render import fmt_number, fmt_value

STATUS_STYLE = {EQUAL: "green", DIFFERS: "bold red"}  # the others (shapes, only in one side): yellow
MISSING = "—"


def _status(status: str, suffix: str = "") -> Text:
    return Text(STATUS_WORDS[status] + suffix, style=STATUS_STYLE.get(status, "yellow"))


def _diff_number(d: float | None, precision: int) -> str:
    """A difference to `precision` significant digits (0 prints as 0, not 0.000000)."""
    return MISSING if d is None else f"{d:.{max(precision, 1)}g}"


def _setting(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else str(value)


def header(r: DiffResult) -> Text:
    return Text("\n".join(s.describe() for s in (r.a, r.b)))


def structure_view(r: DiffResult) -> RenderableType:
    if r.structure_same:
        names = ", ".join(row.name for row in r.steps)
        return Text(f"Structure: the same {len(r.steps)} steps ({names})")
    table = Table(title="Structure: the two step lists, aligned by step name", title_justify="left")
    table.add_column("step", no_wrap=True)
    table.add_column("A", overflow="fold")
    table.add_column("B", overflow="fold")
    table.add_column("", overflow="fold")
    for row in r.steps:
        a = MISSING if row.a is None else expr(row.a)
        b = MISSING if row.b is None else expr(row.b)
        table.add_row(row.name, a, b, "" if row.status == EQUAL else _status(row.status))
    lines = Text("What differs:\n" + "\n".join(f"  - {line}" for line in r.structure))
    return Group(table, lines)


def settings_view(r: DiffResult, precision: int) -> RenderableType:
    parts: list[RenderableType] = []
    if r.settings_same:
        compared = ["dims", "block settings"] + (["dtype"] if r.a.dtype and r.b.dtype else [])
        if r.weights is not None:
            compared.append(f"all {len(r.weights)} weights (within {r.tolerance()})")
        return Text(f"Settings: the same {', '.join(compared[:-1])} and {compared[-1]}")
    if r.settings:
        table = Table(title="Settings that differ", title_justify="left")
        for col in ("setting", "A", "B"):
            table.add_column(col, overflow="fold")
        for s in r.settings:
            table.add_row(s.field, _setting(s.a), _setting(s.b))
        parts.append(table)
    if r.weights_differ:
        others = len(r.weights or []) - len(r.weights_differ)
        rest = "none equal" if not others else f"{others} other{'s' if others > 1 else ''} equal within {r.tolerance()}"
        table = Table(title=f"Weights that differ ({rest})", title_justify="left")
        for col in ("weight", "shape A", "shape B", "largest |A - B|", "at", "A there", "B there", "status"):
            table.add_column(col, overflow="fold", justify="right" if col == "largest |A - B|" else "left")
        for w in r.weights_differ:
            table.add_row(
                w.name,
                MISSING if w.shape_a is None else str(list(w.shape_a)),
                MISSING if w.shape_b is None else str(list(w.shape_b)),
                _diff_number(w.max_abs_diff, precision),
                MISSING if w.where is None else str(list(w.where)),
                MISSING if w.value_a is None else fmt_number(w.value_a, precision),
                MISSING if w.value_b is None else fmt_number(w.value_b, precision),
                _status(w.status),
            )
        parts.append(table)
    elif r.weights is not None:
        parts.append(Text(f"Weights: all {len(r.weights)} the same within {r.tolerance()}"))
    return Group(*parts)


def _value(v: np.ndarray | None, precision: int) -> str:
    return MISSING if v is None else fmt_value(v, precision)


def stage_table(r: DiffResult, precision: int) -> Table:
    first = r.first_diverging
    at = f"b={r.batch}, t={r.pos}"
    table = Table(title=f"Stages, aligned by name (equal: |A - B| <= atol + rtol * max(|A|, |B|), {r.tolerance()})",
                  title_justify="left")
    # On a narrow terminal cells wrap (fold), never cut a number short with an ellipsis.
    table.add_column("stage", no_wrap=True)
    for header in ("shape in A", "shape in B", f"A at {at}", f"B at {at}"):
        table.add_column(header, overflow="fold")
    table.add_column("largest |A - B|", justify="right", overflow="fold")
    table.add_column("status", overflow="fold")
    for row in r.stages:
        is_first = first is not None and row.name == first.name
        table.add_row(
            Text(row.name, style="bold" if is_first else ""),
            MISSING if row.a is None else row.a.shape_label,
            MISSING if row.b is None else row.b.shape_label,
            _value(row.value_a, precision),
            _value(row.value_b, precision),
            _diff_number(row.max_abs_diff, precision),
            _status(row.status, "  ← first difference" if is_first else ""),
        )
    return table


def diff_view(r: DiffResult, precision: int) -> Group:
    parts: list[RenderableType] = [header(r), structure_view(r), settings_view(r, precision)]
    parts += [Text(f"note: {n}", style="yellow") for n in r.notes]
    parts.append(stage_table(r, precision))
    parts.append(Text(r.summary(), style="bold green" if r.same else "bold red"))
    return Group(*parts)
