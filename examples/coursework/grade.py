#!/usr/bin/env python3
"""Grade student specs against reference traces and print a score sheet.

Usage:
    python examples/coursework/grade.py STUDENTS REFERENCE [--csv] [--atol X] [--rtol X]

REFERENCE is a folder of reference traces, one per task, each saved with
    tracer run TASK-SOLUTION.yaml --json --with-weights > REFERENCE/TASK.json
STUDENTS is a folder with one subfolder per student, each holding that student's spec for each
task under the task's name (STUDENTS/alice/prenorm.yaml is Alice's answer to task prenorm); a
folder of specs with no subfolders is graded as one student.  Every spec is diffed against the
reference of the same name (`tracer diff REFERENCE/TASK.json STUDENT/TASK.yaml --keep-going`),
all in this one process, and scored with RUBRIC below (edit it to taste):

    runs        2  the spec loads and runs (otherwise the score is 0 and the error is shown)
    contract    2  no violation (broadcast, axis, position, nonfinite)
    structure   2  the same step list as the reference (norm order, what each step reads)
    settings    2  the same dims, block settings, dtype and weights
    stages      2  every stage equal to the reference within the tolerance

A task a student did not hand in scores 0 ("missing"); a student file with no reference of its
name is listed as "no reference" and not scored.  The sheet goes to stdout (plain text, or CSV
with --csv); exit 0 when the sheet was written, 2 when a folder is missing or empty.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path

from tracer.diff import DEFAULT_ATOL, DEFAULT_RTOL, diff
from tracer.errors import TracerError

RUBRIC = {"runs": 2, "contract": 2, "structure": 2, "settings": 2, "stages": 2}
SPEC_SUFFIXES = (".yaml", ".yml")


@dataclass
class Grade:
    student: str
    task: str
    score: int | None  # None: not scored (no reference)
    verdict: str  # same | different | violation | error | missing | no reference
    first: str  # the first diverging stage, or ""
    note: str

    def row(self, numeric: bool = False) -> list[str]:
        """Text: score as '6/10'; CSV (numeric): the score and the maximum in two cells, empty when not scored."""
        total = sum(RUBRIC.values())
        if numeric:
            score = ["", ""] if self.score is None else [str(self.score), str(total)]
            return [self.student, self.task, *score, self.verdict, self.first, self.note]
        score = "—" if self.score is None else f"{self.score}/{total}"
        return [self.student, self.task, score, self.verdict, self.first or "—", self.note]


def grade(student: str, task: str, spec: Path, reference: Path, atol: float, rtol: float) -> Grade:
    try:
        r = diff(str(reference), str(spec), atol=atol, rtol=rtol, keep_going=True)
    except TracerError as e:
        return Grade(student, task, 0, "error", "", " ".join(str(e).split()))
    earned = {
        "runs": True,
        "contract": not r.b.violations,
        "structure": r.structure_same,
        "settings": r.settings_same,
        "stages": not r.stages_differ,
    }
    score = sum(points for part, points in RUBRIC.items() if earned[part])
    first = r.first_diverging.name if r.first_diverging else ""
    lost = "; lost: " + ", ".join(part for part in RUBRIC if not earned[part])
    if r.b.violations:
        v = r.b.violations[0]
        return Grade(student, task, score, "violation", first, f"{v['kind']} violation: {v['message']}; {r.summary()}{lost}")
    if r.same:
        return Grade(student, task, score, "same", "", "")
    return Grade(student, task, score, "different", first, r.summary() + lost)


def submissions(students: Path) -> dict[str, dict[str, Path]]:
    """{student: {task: spec}}; a folder of specs without subfolders is one student."""
    folders = sorted(p for p in students.iterdir() if p.is_dir())
    if not folders:
        folders = [students]
    return {f.name: {p.stem: p for p in sorted(f.iterdir()) if p.suffix in SPEC_SUFFIXES} for f in folders}


def sheet(students: Path, references: Path, atol: float, rtol: float) -> list[Grade]:
    tasks = {p.stem: p for p in sorted(references.glob("*.json"))}
    if not tasks:
        raise SystemExit(f"grade.py: error: {references}: no reference traces (*.json) in this folder")
    grades = []
    for student, specs in submissions(students).items():
        for task, ref in tasks.items():
            if task in specs:
                grades.append(grade(student, task, specs[task], ref, atol, rtol))
            else:
                grades.append(Grade(student, task, 0, "missing", "", f"no {task}.yaml handed in"))
        for task in specs:
            if task not in tasks:
                grades.append(Grade(student, task, None, "no reference", "", f"no {task}.json in {references}"))
    return grades


HEADER = ["student", "task", "score", "verdict", "first diverging", "note"]


def as_text(grades: list[Grade]) -> str:
    rows = [HEADER] + [g.row() for g in grades]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
    scored = [g for g in grades if g.score is not None]
    total = sum(RUBRIC.values())
    lines.append(f"{len(scored)} graded: {sum(g.verdict == 'same' for g in scored)} same as the reference, "
                 f"mean score {sum(g.score or 0 for g in scored) / max(len(scored), 1):.1f}/{total}")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def as_csv(grades: list[Grade]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", "task", "score", "max", "verdict", "first_diverging", "note"])
    writer.writerows(g.row(numeric=True) for g in grades)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Grade student specs against reference traces (tracer diff).")
    ap.add_argument("students", type=Path, help="folder: one subfolder per student, one spec per task")
    ap.add_argument("reference", type=Path, help="folder: one reference trace TASK.json per task")
    ap.add_argument("--csv", action="store_true", help="write the sheet as CSV")
    ap.add_argument("--atol", type=float, default=DEFAULT_ATOL, help=f"absolute tolerance (default {DEFAULT_ATOL:g})")
    ap.add_argument("--rtol", type=float, default=DEFAULT_RTOL, help=f"relative tolerance (default {DEFAULT_RTOL:g})")
    args = ap.parse_args(argv)
    for folder in (args.students, args.reference):
        if not folder.is_dir():
            ap.error(f"{folder}: no such folder")
    grades = sheet(args.students, args.reference, args.atol, args.rtol)
    sys.stdout.write(as_csv(grades) if args.csv else as_text(grades))
    return 0


if __name__ == "__main__":
    sys.exit(main())
