"""Renderers for `tracer diff`: structure, settings, then the stage table.  They never print.

The rows and sentences come from textout (shared with the CSV and Markdown writers); this
module only draws them with rich and colours the statuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .diff import DIFFERS, EQUAL, STATUS_WORDS, DiffResult
from .textout import (
    FIRST_MARK,
    SETTINGS_HEADER,
    SETTINGS_TITLE,
    STRUCTURE_HEADER,
    STRUCTURE_TITLE,
    WEIGHTS_HEADER,
    diff_sides,
    diff_stage_header,
    diff_stage_rows,
    diff_stage_title,
    setting_rows,
    settings_same_text,
    structure_rows,
    structure_same_text,
    weight_rows,
    weights_same_text,
    weights_title,
)

STATUS_STYLE = {EQUAL: "green", DIFFERS: "bold red"}  # the others (shapes, only in one side): yellow
STYLE_BY_WORD = {STATUS_WORDS[k]: v for k, v in STATUS_STYLE.items()}


def _status(text: str) -> Text:
    word = text.removesuffix(FIRST_MARK)
    return Text(text, style=STYLE_BY_WORD.get(word, "yellow") if word else "")


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[RenderableType]], status_column: int | None = None,
           right: Sequence[str] = (), no_wrap: Sequence[str] = ()) -> Table:
    table = Table(title=Text(title), title_justify="left")
    for col in header:
        if col in no_wrap:
            table.add_column(col, no_wrap=True)
        else:
            table.add_column(col, overflow="fold", justify="right" if col in right else "left")
    for row in rows:
        cells = [Text(c) if isinstance(c, str) else c for c in row]  # never read as markup
        if status_column is not None:
            cells[status_column] = _status(str(row[status_column]))
        table.add_row(*cells)
    return table


def header(r: DiffResult) -> Text:
    return Text("\n".join(diff_sides(r)))


def structure_view(r: DiffResult) -> RenderableType:
    if r.structure_same:
        return Text(structure_same_text(r))
    table = _table(STRUCTURE_TITLE, STRUCTURE_HEADER, structure_rows(r), status_column=3, no_wrap=("step",))
    lines = Text("What differs:\n" + "\n".join(f"  - {line}" for line in r.structure))
    return Group(table, lines)


def settings_view(r: DiffResult, precision: int) -> RenderableType:
    if r.settings_same:
        return Text(settings_same_text(r))
    parts: list[RenderableType] = []
    if r.settings:
        parts.append(_table(SETTINGS_TITLE, SETTINGS_HEADER, setting_rows(r)))
    if r.weights_differ:
        parts.append(_table(weights_title(r), WEIGHTS_HEADER, weight_rows(r, precision), status_column=7,
                            right=("largest |A - B|",)))
    elif r.weights is not None:
        parts.append(Text(weights_same_text(r)))
    return Group(*parts)


def stage_table(r: DiffResult, precision: int) -> Table:
    # On a narrow terminal cells wrap (fold), never cut a number short with an ellipsis.
    first = r.first_diverging
    rows: list[list[RenderableType]] = []
    for row in diff_stage_rows(r, precision):
        is_first = first is not None and row[0] == first.name
        rows.append([Text(row[0], style="bold" if is_first else ""), *row[1:]])
    return _table(diff_stage_title(r), diff_stage_header(r), rows, status_column=6, right=("largest |A - B|",),
                  no_wrap=("stage",))


def diff_view(r: DiffResult, precision: int) -> Group:
    parts: list[RenderableType] = [header(r), structure_view(r), settings_view(r, precision)]
    parts += [Text(f"note: {n}", style="yellow") for n in r.notes]
    parts.append(stage_table(r, precision))
    parts.append(Text(r.summary(), style="bold green" if r.same else "bold red"))
    return Group(*parts)
