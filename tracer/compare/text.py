"""Plain text of a diff: its CSV and Markdown, and the rows and words the rich view shares with them (no rich).

The primitives (number formats, CSV and Markdown tables) are the views' (tracer.views.text).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from tracer.i18n import tr
from tracer.messages import msg, nmsg, render
from tracer.views.text import LEAD_COLUMN, MISSING, csv_text, exact, fmt_diff, fmt_number, fmt_setting, fmt_value, markdown_table, md_text, position_cells

if TYPE_CHECKING:
    from tracer.compare.judge import DiffResult


DIFF_CSV_COLUMNS = ["spec_a", "spec_b", "stage", "stage_status", "b", "h", "t", "status", "max_abs_diff"]


def diff_csv(r: DiffResult) -> str:
    """One row per stage and position: is this row of the stage equal in A and B, and by how much does it differ.

    A stage whose shapes differ, or that only one side has, is one row with empty b, h, t.
    """
    from tracer.compare.judge import differences
    from tracer.compare.status import DIFFERS, EQUAL

    def rows() -> Iterator[list[str]]:
        for row in r.stages:
            head = [r.a.path, r.b.path, row.name, row.status]
            if row.status not in (EQUAL, DIFFERS):
                yield head + ["", "", "", row.status, ""]
                continue
            assert row.a is not None and row.b is not None
            d, tol = differences(row.a.array, row.b.array, r.atol, r.rtol)
            lead = [LEAD_COLUMN.get(axis, "t") for axis in row.a.axes[:-1]]
            width = d.shape[-1] if d.ndim else 1
            flat_d, flat_tol = d.reshape(-1, width), tol.reshape(-1, width)
            for index, dr, tol_row in zip(np.ndindex(*d.shape[:-1]), flat_d, flat_tol):
                status = EQUAL if bool(np.all(dr <= tol_row)) else DIFFERS
                yield head + [*position_cells(lead, index), status, exact(float(dr.max()) if dr.size else 0.0)]

    return csv_text(DIFF_CSV_COLUMNS, rows())


def diff_sides(r: DiffResult) -> list[str]:
    return [render(s.describe()) for s in (r.a, r.b)]


def structure_same_text(r: DiffResult) -> str:
    return render(msg("Structure: the same {n} steps ({names})", n=len(r.steps), names=", ".join(row.name for row in r.steps)))


def table_words(words: Sequence[str]) -> list[str]:
    """Headers and titles in the current language (the module's constants stay English for CSV and JSON)."""
    return [tr(w) for w in words]


def structure_lines(r: DiffResult) -> list[str]:
    """What differs between the step lists, one sentence each, in the current language."""
    return [render(line) for line in r.structure]


def diff_notes(r: DiffResult) -> list[str]:
    return [render(n) for n in r.notes]


def arrays_lines(r: DiffResult) -> list[str]:
    """A diff against another program's arrays: which arrays became which stages (instead of structure and settings)."""
    assert r.arrays is not None
    x = r.arrays
    renamed = ", ".join(f"{theirs} = {ours}" for ours, theirs in x.renamed.items())
    lines = [render(msg("Compared {n} arrays of {label} with the stages of the same name in {ref}: {names}", n=len(x.matched), label=x.label,
                        ref=x.reference, names=", ".join(x.matched)))]
    if renamed:
        lines.append(render(msg("named with --map: {pairs}", pairs=renamed)))
    return lines


def hint_text(r: DiffResult) -> str:
    return tr("hint: {hint}", hint=r.hint.text()) if r.hint is not None else ""


def diff_summary(r: DiffResult) -> str:
    """The closing line (the JSON's "summary" stays English)."""
    return render(r.summary())


STRUCTURE_TITLE = "Structure: the two step lists, aligned by step name"
STRUCTURE_HEADER = ["step", "A", "B", ""]


def structure_rows(r: DiffResult) -> list[list[str]]:
    from tracer.compare.status import EQUAL, STATUS_WORDS

    return [[row.name, MISSING if row.a is None else tr(row.expr_a()), MISSING if row.b is None else tr(row.expr_b()),
             "" if row.status == EQUAL else tr(STATUS_WORDS[row.status])] for row in r.steps]


def settings_same_text(r: DiffResult) -> str:
    compared = [tr("dims"), tr("block settings")] + (["dtype"] if r.a.dtype and r.b.dtype else [])
    if r.weights is not None:
        compared.append(tr("all {n} weights (within {tol})", n=len(r.weights), tol=r.tolerance()))
    return tr("Settings: the same {first} and {last}", first=tr(", ").join(compared[:-1]), last=compared[-1])


SETTINGS_TITLE = "Settings that differ"
SETTINGS_HEADER = ["setting", "A", "B"]
WEIGHTS_HEADER = ["weight", "shape A", "shape B", "largest |A - B|", "at", "A there", "B there", "status"]


def setting_rows(r: DiffResult) -> list[list[str]]:
    return [[s.field, fmt_setting(s.a), fmt_setting(s.b)] for s in r.settings]


def weights_title(r: DiffResult) -> str:
    others = len(r.weights or []) - len(r.weights_differ)
    rest = msg("none equal") if not others else nmsg("{n} other equal within {tol}", "{n} others equal within {tol}", others, tol=r.tolerance())
    return render(msg("Weights that differ ({rest})", rest=rest))


def weights_same_text(r: DiffResult) -> str:
    return render(msg("Weights: all {n} the same within {tol}", n=len(r.weights or []), tol=r.tolerance()))


def weight_rows(r: DiffResult, precision: int) -> list[list[str]]:
    from tracer.compare.status import STATUS_WORDS

    return [[w.name,
             MISSING if w.shape_a is None else str(list(w.shape_a)),
             MISSING if w.shape_b is None else str(list(w.shape_b)),
             fmt_diff(w.max_abs_diff, precision),
             MISSING if w.where is None else str(list(w.where)),
             MISSING if w.value_a is None else fmt_number(w.value_a, precision),
             MISSING if w.value_b is None else fmt_number(w.value_b, precision),
             tr(STATUS_WORDS[w.status])] for w in r.weights_differ]


def diff_stage_title(r: DiffResult) -> str:
    return render(msg("Stages, aligned by name (equal: |A - B| <= atol + rtol * max(|A|, |B|), {tol})", tol=r.tolerance()))


def diff_stage_header(r: DiffResult) -> list[str]:
    at = f"b={r.batch}, t={r.pos}"
    return [tr("stage"), tr("shape in A"), tr("shape in B"), tr("A at {at}", at=at), tr("B at {at}", at=at),
            tr("largest |A - B|"), tr("status")]


FIRST_MARK = "  ← first difference"


def diff_stage_rows(r: DiffResult, precision: int) -> list[list[str]]:
    from tracer.compare.status import STATUS_WORDS

    first = r.first_diverging
    rows = []
    for row in r.stages:
        mark = tr(FIRST_MARK) if first is not None and row.name == first.name else ""
        rows.append([row.name,
                     MISSING if row.a is None else row.a.shape_label,
                     MISSING if row.b is None else row.b.shape_label,
                     MISSING if row.value_a is None else fmt_value(row.value_a, precision),
                     MISSING if row.value_b is None else fmt_value(row.value_b, precision),
                     fmt_diff(row.max_abs_diff, precision),
                     tr(STATUS_WORDS[row.status]) + mark])
    return rows


def diff_markdown(r: DiffResult, precision: int) -> str:
    """The diff as Markdown: sides, structure, settings, notes, the stage table and the summary."""
    parts = ["### tracer diff\n", "\n".join(f"- {md_text(line)}" for line in diff_sides(r)) + "\n"]
    if r.arrays is not None:
        parts.append("\n".join(md_text(line) for line in arrays_lines(r)) + "\n")
    elif r.structure_same:
        parts.append(md_text(structure_same_text(r)) + "\n")
    else:
        parts.append(f"**{md_text(tr(STRUCTURE_TITLE))}**\n\n" + markdown_table(table_words(STRUCTURE_HEADER), structure_rows(r)))
        parts.append(tr("What differs:") + "\n\n" + "\n".join(f"- {md_text(line)}" for line in structure_lines(r)) + "\n")
    if r.arrays is not None:
        pass
    elif r.settings_same:
        parts.append(md_text(settings_same_text(r)) + "\n")
    else:
        if r.settings:
            parts.append(f"**{tr(SETTINGS_TITLE)}**\n\n" + markdown_table(table_words(SETTINGS_HEADER), setting_rows(r)))
        if r.weights_differ:
            parts.append(f"**{md_text(weights_title(r))}**\n\n" + markdown_table(table_words(WEIGHTS_HEADER), weight_rows(r, precision)))
        elif r.weights is not None:
            parts.append(md_text(weights_same_text(r)) + "\n")
    parts += [f"> {md_text(tr('note: {note}', note=n))}\n" for n in diff_notes(r)]
    rows = diff_stage_rows(r, precision)
    for row in rows:
        row[0] = f"`{row[0]}`"
    parts.append(f"**{md_text(diff_stage_title(r))}**\n\n" + markdown_table(diff_stage_header(r), rows))
    parts.append(f"**{md_text(diff_summary(r))}**\n")
    if r.hint is not None:
        parts.append(md_text(hint_text(r)) + "\n")
    if r.effect is not None:  # --ablate, --set, --from: what the intervention does to the chosen token
        parts.append(md_text(render(r.effect.sentence)) + "\n")
    return "\n".join(parts)
