"""The sheet: a text table in the chosen language, CSV (English headers and verdicts, for spreadsheets), or JSON Lines
(one object per student and task, and one per entry not graded, English, for scripts)."""

from __future__ import annotations

import csv
import io
import json

from tracer.grade.sheet import FLAT, NOT_GRADED, TOTAL, Grade
from tracer.i18n import cells, ljust, tr
from tracer.messages import Message, join, msg, nmsg, render

HEADER = ("student", "task", "score", "verdict", "first diverging", "note")
CSV_HEADER = ["student", "task", "score", "max", "verdict", "first_diverging", "note", "file"]


def _verdict(word: str) -> str:
    words = {"same": tr("same"), "different": tr("different"), "incomplete": tr("incomplete"), "violation": tr("violation"), "error": tr("error"),
             "missing": tr("missing"), "no reference": tr("no reference"), NOT_GRADED: tr("not graded")}
    return words.get(word, word)


def _headers() -> list[str]:
    return [tr("student"), tr("task"), tr("score"), tr("verdict"), tr("first diverging"), tr("note")]


def layout_line(students: str, layout: str, grades: list[Grade]) -> Message:
    """What grade found, for stderr: 'hand-in: a flat folder of NAME.yaml files, one student each; 3 students'."""
    n = len({g.student for g in grades if g.verdict != NOT_GRADED})
    if layout == FLAT:
        return nmsg("{folder}: a flat folder of NAME.yaml files, one student each; {n} student",
                    "{folder}: a flat folder of NAME.yaml files, one student each; {n} students", n, folder=students)
    return nmsg("{folder}: one folder per student (NAME/TASK.yaml); {n} student", "{folder}: one folder per student (NAME/TASK.yaml); {n} students",
                n, folder=students)


def summary(grades: list[Grade]) -> Message:
    """'3 graded: 1 same as the reference, mean score 6.7/10; 2 not graded' (the mean of each score out of 10)."""
    scored = [g for g in grades if g.score is not None]
    mean = sum((g.score or 0) * TOTAL / g.total for g in scored) / max(len(scored), 1)
    line = msg("{n} graded: {same} same as the reference, mean score {mean}/{total}", n=len(scored),
               same=sum(g.verdict == "same" for g in scored), mean=f"{mean:.1f}", total=TOTAL)
    skipped = sum(g.verdict == NOT_GRADED for g in grades)
    return join([line, nmsg("{n} entry not graded", "{n} entries not graded", skipped)]) if skipped else line


def _note(g: Grade) -> Message | str:
    return msg("{file}: {reason}", file=g.file, reason=g.note) if g.verdict == NOT_GRADED else g.note


def as_text(grades: list[Grade]) -> str:
    """The sheet as aligned columns (terminal cells: 学生 takes four), its words in the current language."""
    rows = [_headers()]
    for g in grades:
        score = "—" if g.score is None else f"{g.score}/{g.total}"
        rows.append([g.student or "—", g.task or "—", score, _verdict(g.verdict), g.first or "—", " ".join(render(_note(g)).split())])
    widths = [max(cells(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    lines = ["  ".join(ljust(cell, w) for cell, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
    lines.append(render(summary(grades)))
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _csv_row(g: Grade) -> list[str]:
    score = ["", ""] if g.score is None else [str(g.score), str(g.total)]
    return [g.student, g.task, *score, g.verdict, g.first, " ".join(str(g.note).split()), g.file]


def as_csv(grades: list[Grade]) -> str:
    """English in both languages: the columns student,task,score,max,verdict,first_diverging,note,file."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    writer.writerows(_csv_row(g) for g in grades)
    return buf.getvalue()


def as_json_lines(grades: list[Grade]) -> str:
    """One JSON object a line, one per student and task and one per entry not graded (English in both languages)."""
    return "".join(json.dumps(g.as_json(), ensure_ascii=False) + "\n" for g in grades)


