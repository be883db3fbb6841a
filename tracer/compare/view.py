"""Renderers for `tracer diff`: structure, settings, then the stage table.  They never print.

The rows and sentences come from textout (shared with the CSV and Markdown writers); this
module only draws them with rich and colours the statuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tracer.compare.judge import DiffResult
from tracer.compare.status import DIFFERS, EQUAL, NOT_RECORDED, STATUS_WORDS
from tracer.compare.text import (
    FIRST_MARK,
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
from tracer.i18n import tr
from tracer.messages import render
from tracer.views.text import MISSING

STATUS_STYLE = {EQUAL: "green", DIFFERS: "bold red", NOT_RECORDED: "dim"}  # the others (shapes, only in one side): yellow
LARGEST = "largest |A - B|"
NARROW_LARGEST = "|A - B|"  # the narrow table's header for the same column (the title defines |A - B|)
NARROW_FIRST = " ←"  # the narrow table's first-difference mark (the summary line names the stage)


def _status(text: str) -> Text:
    """A status cell coloured by its word (in the current language)."""
    word = text.removesuffix(tr(FIRST_MARK)).removesuffix(NARROW_FIRST)
    style = {tr(STATUS_WORDS[k]): v for k, v in STATUS_STYLE.items()}
    return Text(text, style=style.get(word, "yellow") if word else "")


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[RenderableType]], status_column: int | None = None,
           right: Sequence[str] = (), no_wrap: Sequence[str] = ()) -> Table:
    table = Table(title=Text(title), title_justify="left")
    for col in header:
        if col in no_wrap:
            table.add_column(col, no_wrap=True, justify="right" if col in right else "left")
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


class StageTable:
    """The stage table at the console's width: a C = 2 table fits 100 columns with no cell wrapped.

    Where the full table is wider than the console, a narrow one: no outer border, a short header for
    |A - B|, and the first difference marked by an arrow alone (the summary line names it).  Only a value
    wider than its column (an [F] row, say) wraps, between its numbers; no number is cut.
    """

    def __init__(self, r: DiffResult, precision: int) -> None:
        self.r, self.precision = r, precision

    def table(self, narrow: bool) -> Table:
        r = self.r
        first = r.first_diverging
        header, text_rows = diff_stage_header(r), diff_stage_rows(r, self.precision)
        # Every shape the same on both sides (the usual case): one shape column.
        if all(row[1] == row[2] or MISSING in (row[1], row[2]) for row in text_rows):  # a stage on one side only: its shape
            header = [header[0], tr("shape"), *header[3:]]
            text_rows = [[row[0], row[2] if row[1] == MISSING else row[1], *row[3:]] for row in text_rows]
        largest = tr(LARGEST)
        if narrow:
            header[-2] = largest = NARROW_LARGEST
            mark = tr(FIRST_MARK)
            text_rows = [[*row[:-1], row[-1].removesuffix(mark) + NARROW_FIRST if row[-1].endswith(mark) else row[-1]]
                         for row in text_rows]
        rows: list[list[RenderableType]] = []
        for row in text_rows:
            is_first = first is not None and row[0] == first.name
            rows.append([Text(row[0], style="bold" if is_first else ""), *row[1:]])
        values = header[-4:-2]
        table = _table(diff_stage_title(r), header, rows, status_column=len(header) - 1, right=(largest,),
                       no_wrap=[h for h in header if h not in values])
        if narrow:
            table.show_edge, table.collapse_padding = False, True
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table(narrow=False)
        if Measurement.get(console, options.update(width=10**6), table).maximum > options.max_width:
            table = self.table(narrow=True)
        yield table

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table(narrow=True))


def stage_table(r: DiffResult, precision: int) -> StageTable:
    return StageTable(r, precision)


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
    if r.effect is not None:  # --ablate, --set, --from: what the intervention does to the chosen token
        parts.append(Text(render(r.effect.sentence), style="bold"))
    return Group(*parts)
