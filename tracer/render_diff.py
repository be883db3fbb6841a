"""Renderers for `tracer diff`: structure, settings, then the stage table.  They never print.

The rows and sentences come from textout (shared with the CSV and Markdown writers); this
module only draws them with rich and colours the statuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .diff import DIFFERS, EQUAL, NOT_RECORDED, STATUS_WORDS, DiffResult
from .i18n import tr
from .textout import (
    FIRST_MARK,
    MISSING,
    SETTINGS_HEADER,
    SETTINGS_TITLE,
    STRUCTURE_HEADER,
    STRUCTURE_TITLE,
    WEIGHTS_HEADER,
    arrays_lines,
    diff_notes,
    diff_sides,
    diff_stage_header,
    diff_stage_rows,
    diff_stage_title,
    diff_summary,
    hint_text,
    setting_rows,
    settings_same_text,
    structure_lines,
    structure_rows,
    structure_same_text,
    table_words,
    weight_rows,
    weights_same_text,
    weights_title,
)

STATUS_STYLE = {EQUAL: "green", DIFFERS: "bold red", NOT_RECORDED: "dim"}  # the others (shapes, only in one side): yellow
LARGEST = "largest |A - B|"


def _status(text: str) -> Text:
    """A status cell coloured by its word (in the current language)."""
    word = text.removesuffix(tr(FIRST_MARK))
    style = {tr(STATUS_WORDS[k]): v for k, v in STATUS_STYLE.items()}
    return Text(text, style=style.get(word, "yellow") if word else "")


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
    table = _table(tr(STRUCTURE_TITLE), table_words(STRUCTURE_HEADER), structure_rows(r), status_column=3, no_wrap=(tr("step"),))
    lines = Text(tr("What differs:") + "\n" + "\n".join(f"  - {line}" for line in structure_lines(r)))
    return Group(table, lines)


def settings_view(r: DiffResult, precision: int) -> RenderableType:
    if r.settings_same:
        return Text(settings_same_text(r))
    parts: list[RenderableType] = []
    if r.settings:
        parts.append(_table(tr(SETTINGS_TITLE), table_words(SETTINGS_HEADER), setting_rows(r)))
    if r.weights_differ:
        parts.append(_table(weights_title(r), table_words(WEIGHTS_HEADER), weight_rows(r, precision), status_column=7,
                            right=(tr(LARGEST),)))
    elif r.weights is not None:
        parts.append(Text(weights_same_text(r)))
    return Group(*parts)


def stage_table(r: DiffResult, precision: int) -> Table:
    # On a narrow terminal cells wrap (fold), never cut a number short with an ellipsis.
    # Every shape the same on both sides (the usual case): one shape column, so a C = 2 table fits 100 columns.
    first = r.first_diverging
    header, text_rows = diff_stage_header(r), diff_stage_rows(r, precision)
    if all(row[1] == row[2] or MISSING in (row[1], row[2]) for row in text_rows):  # a stage on one side only: its shape
        header = [header[0], tr("shape"), *header[3:]]
        text_rows = [[row[0], row[2] if row[1] == MISSING else row[1], *row[3:]] for row in text_rows]
    rows: list[list[RenderableType]] = []
    for row in text_rows:
        is_first = first is not None and row[0] == first.name
        rows.append([Text(row[0], style="bold" if is_first else ""), *row[1:]])
    return _table(diff_stage_title(r), header, rows, status_column=len(header) - 1, right=(tr(LARGEST),),
                  no_wrap=(tr("stage"), tr("shape")))


def diff_view(r: DiffResult, precision: int) -> Group:
    parts: list[RenderableType] = [header(r)]
    if r.arrays is not None:  # another program's arrays: no steps or settings to compare
        parts.append(Text("\n".join(arrays_lines(r))))
    else:
        parts += [structure_view(r), settings_view(r, precision)]
    parts += [Text(tr("note: {note}", note=n), style="yellow") for n in diff_notes(r)]
    parts.append(stage_table(r, precision))
    parts.append(Text(diff_summary(r), style="bold green" if r.same else "bold red"))
    if r.hint is not None:
        parts.append(Text(hint_text(r), style="bold yellow"))
    return Group(*parts)
