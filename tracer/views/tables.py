"""Renderers: turn a Recording into rich renderables.  They never print."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tracer.engine.executor import Recording, Stage
from tracer.errors import Violation
from tracer.i18n import tr
from tracer.messages import render
from tracer.spec import Spec
from tracer.views.text import (  # noqa: F401  (fmt_number, fmt_value: the formats render_diff and others import from here)
    DEFAULT_TOP,
    VERIFY_HEADER,
    caption,
    experts_note,
    fmt_number,
    fmt_value,
    fmt_vector,
    kind_word,
    matrix_lines,
    reached_end,
    stage_header,
    stage_rows,
    step_header,
    step_list_title,
    step_rows,
    token_label,
    unreached_note,
    violation_lines,
    violation_title,
    visible_stages,
)


def trace_table(trace: Recording, b: int, t: int, precision: int, show_all: bool,
                verify_diffs: dict[str, float] | None = None, marks: frozenset[str] = frozenset(),
                only: Sequence[str] | None = None) -> Table:
    spec = trace.spec
    # Text, not str: rich would read "[nan, 1.0]" or a spec name with "[/]" as console markup.
    # The settings line goes under the table in run_view: it wraps at the console's width, not the table's.
    table = Table(title=Text(spec.name), title_justify="left")
    for header in stage_header(spec, b, t, verify_diffs is not None):
        table.add_column(header, overflow="fold", justify="right" if header == tr(VERIFY_HEADER) else "left")
    stages = visible_stages(trace, show_all, only)
    for stage, row in zip(stages, stage_rows(stages, b, t, precision, verify_diffs)):
        name = Text(stage.name, style="bold red" if stage.name in marks else "")
        if stage.name in marks:
            name.append(tr("  ← violation"))
        if stage.intervention is not None:  # --ablate, --set, --from: this stage was replaced
            name.stylize("bold magenta")
            name.append("  ← " + render(stage.intervention), style="magenta")
        table.add_row(name, *map(Text, row[1:]))  # Text: a '[...]' in a meaning or value is never read as markup
    return table


def matrix(trace: Recording, stage: Stage, b: int, precision: int, top: int = DEFAULT_TOP) -> RenderableType:
    """The full [T, C] matrix of one sample (rows and columns elided when large); the probs: their top next tokens."""
    return Text("\n".join(matrix_lines(trace, stage, b, precision, top)))


def stats_note(trace: Recording, precision: int) -> Text:
    """The stages kept as statistics (--record stats): their mean, std, min and max."""
    lines = [tr("kept as statistics (--record stats; --keep STAGE keeps one in full):")]
    for stage in trace.stages.values():
        s = stage.summary
        if s is not None:
            lines.append(tr("  {name} {shape}: mean {mean}, std {std}, min {min}, max {max}", name=stage.name,
                            shape=stage.shape_label, mean=fmt_number(s.mean, precision), std=fmt_number(s.std, precision),
                            min=fmt_number(s.min, precision), max=fmt_number(s.max, precision)))
    return Text("\n".join(lines))


def violation_panel(v: Violation) -> RenderableType:
    from rich.panel import Panel  # here: a clean run never draws one

    body = Text()
    body.append(violation_title(v) + "\n", style="bold red")
    for label, text in violation_lines(v):
        if label:
            body.append(tr("{label}: ", label=label), style="bold")
        body.append(text + "\n")
    body.rstrip()
    return Panel(body, title=tr("violation: {kind}", kind=kind_word(v.kind)), expand=False, border_style="red")


class Pairs:
    """A line of settings wrapped at the console's width between its 'X = n' pairs, never inside one.

    (rich breaks at any whitespace, a no-break space too, so the line is filled here, unit by unit.)
    """

    UNIT = re.compile(r"\S+ = \S+|\S+")

    def __init__(self, text: str, style: str = "") -> None:
        self.text, self.style = text, style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines: list[str] = []
        for unit in self.UNIT.findall(self.text):
            if lines and cell_len(f"{lines[-1]} {unit}") <= options.max_width:
                lines[-1] += f" {unit}"
            else:
                lines.append(unit)
        yield Text("\n".join(lines), style=self.style)  # a unit wider than the console still folds

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        units = [cell_len(u) for u in self.UNIT.findall(self.text)] or [0]
        return Measurement(max(units), cell_len(self.text))


def run_view(trace: Recording, b: int, t: int, precision: int, show_all: bool,
             verify_diffs: dict[str, float] | None = None, verify_note: str = "",
             only: Sequence[str] | None = None, top: int = DEFAULT_TOP) -> Group:
    """The table, then (unless --stage chose the rows) the output matrix, then any violation and the verify note."""
    marks = frozenset(v.stage for v in trace.violations)
    # the settings line under the table: wrapped at the console's width (80 columns keep d and T_max), never cut
    parts: list[RenderableType] = [trace_table(trace, b, t, precision, show_all, verify_diffs, marks, only),
                                   Pairs(caption(trace.spec), style="dim")]
    chosen = experts_note(trace, b, t)
    if chosen:
        parts.append(Text(chosen))
    if any(s.summary is not None for s in visible_stages(trace, show_all, only)):
        parts.append(stats_note(trace, precision))
    if reached_end(trace) and only is None:
        parts.append(matrix(trace, trace.output, b, precision, top))
    if unreached_note(trace, only):
        parts.append(Text(unreached_note(trace, only), style="yellow"))
    for v in trace.violations:
        parts.append(violation_panel(v))
    if verify_note:
        parts.append(Text(verify_note))
    return Group(*parts)


def steps_table(spec: Spec, only: Sequence[str] | None = None) -> Table:
    """The step list a spec runs (``tracer run --steps``), with every stage's shape."""
    table = Table(title=Text(step_list_title(spec)), title_justify="left")
    for col in step_header():
        table.add_column(col, overflow="fold")
    for row in step_rows(spec, only):
        table.add_row(*map(Text, row))
    return table


def catalogue_view(entries: Sequence[object], note: str) -> Group:  # Sequence[catalogue.StageInfo]
    """``tracer stages``: one table per section (before the block, pre-norm layer, ...)."""
    from tracer.views.text import CATALOGUE_HEADER, by_section

    parts: list[RenderableType] = []
    for section, rows in by_section(entries).items():
        table = Table(title=Text(section), title_justify="left")
        for col in CATALOGUE_HEADER:
            table.add_column(tr(col), overflow="fold", no_wrap=col == "stage")
        for row in rows:
            table.add_row(*map(Text, row))
        parts.append(table)
    if note:
        parts.append(Text(tr(note)))
    return Group(*parts)
