#!/usr/bin/env python3
"""Grade student specs against reference traces and print a score sheet.

Usage:
    python examples/coursework/grade.py STUDENTS REFERENCE [--task TASK] [--csv] [--atol X] [--rtol X] [--lang zh|en]

REFERENCE is a folder of reference traces, one per task, each saved with
    tracer run TASK-SOLUTION.yaml --json --with-weights > REFERENCE/TASK.json
STUDENTS is laid out one of two ways; the script says on stderr which one it found:
- one subfolder per student, each holding that student's spec for each task under the task's name
  (STUDENTS/alice/prenorm.yaml is Alice's answer to task prenorm);
- a flat folder of NAME.yaml files, one per student, all answers to one task (the usual hand-in):
  STUDENTS/alice.yaml is Alice's answer; the task is the only reference, or --task TASK.
Every spec is diffed against the reference of its task
(`tracer diff REFERENCE/TASK.json STUDENT/TASK.yaml --keep-going`), all in this one process, and
scored with RUBRIC below (edit it to taste):

    runs        2  the spec loads and runs (otherwise the score is 0 and the error is shown)
    contract    2  no violation (broadcast, axis, position, nonfinite)
    structure   2  the same step list as the reference (norm order, what each step reads, each op with its settings)
    settings    2  the same dims, dtype, weights and every setting of the block (eps, activation, norm, head,
                   mask by its matrix, ...): a changed activation loses this point as a changed eps does
    stages      2  every stage equal to the reference within the tolerance

A task a student did not hand in scores 0 ("missing"); a student file with no reference of its
name is listed as "no reference" and not scored.  The sheet goes to stdout (plain text, or CSV
with --csv), its words in English or, with --lang zh (default: the locale, as tracer's), the book's
Chinese; CSV headers and verdicts stay English for scripts.  Exit 0 when the sheet was written, 2 when a
folder is missing or empty or the flat layout's task is not clear.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path

from tracer.compare.core import DEFAULT_ATOL, DEFAULT_RTOL, diff
from tracer.errors import TracerError
from tracer.files import confined
from tracer.messages import given, join
from tracer.model.contracts import kind_word

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
            return [self.student, self.task, *score, self.verdict, self.first, " ".join(str(self.note).split())]
        score = "—" if self.score is None else f"{self.score}/{total}"
        return [self.student, self.task, score, self.verdict, self.first or "—", " ".join(str(self.note).split())]


def grade(student: str, task: str, spec: Path, reference: Path, atol: float, rtol: float) -> Grade:
    try:
        with confined(str(spec.parent)):  # the spec may read only its own folder (as tracer run --confine does)
            r = diff(str(reference), str(spec), atol=atol, rtol=rtol, keep_going=True)
    except TracerError as e:
        return Grade(student, task, 0, "error", "", e.message)
    earned = {
        "runs": True,
        "contract": not r.b.violations,
        "structure": r.structure_same,
        "settings": r.settings_same,
        "stages": not r.stages_differ,
    }
    score = sum(points for part, points in RUBRIC.items() if earned[part])
    first = r.first_diverging.name if r.first_diverging else ""
    # the notes are tracer's messages (translated where tracer makes them) and this sheet's own, given with their Chinese
    lost = given("lost: {parts}", "失分：{parts}", parts=", ".join(part for part in RUBRIC if not earned[part]))
    if r.b.violations:
        v = r.b.violations[0]
        violation = given("{kind} violation: {rest}", "{kind}违规：{rest}", kind=kind_word(v["kind"]), rest=v["message"])
        return Grade(student, task, score, "violation", first, join([violation, r.summary(), lost]))
    if r.same:
        return Grade(student, task, score, "same", "", "")
    return Grade(student, task, score, "different", first, join([r.summary(), lost]))


PER_STUDENT = "one folder per student (NAME/TASK.yaml)"
FLAT = "a flat folder of NAME.yaml files, one student each"


def submissions(students: Path, tasks: list[str], task: str | None) -> tuple[str, dict[str, dict[str, Path]]]:
    """(the layout found, {student: {task: spec}})."""
    folders = sorted(p for p in students.iterdir() if p.is_dir() and not p.name.startswith("."))
    if folders:
        return PER_STUDENT, {f.name: {p.stem: p for p in sorted(f.iterdir()) if p.suffix in SPEC_SUFFIXES} for f in folders}
    specs = sorted(p for p in students.iterdir() if p.suffix in SPEC_SUFFIXES)
    if not specs:
        raise SystemExit(f"grade.py: error: {students}: no student folders and no specs (*.yaml) in this folder")
    if task is None:
        if len(tasks) != 1:
            raise SystemExit(f"grade.py: error: {students} is {FLAT}, and {len(tasks)} reference tasks could be meant: "
                             f"give --task, one of {', '.join(tasks)}")
        task = tasks[0]
    return FLAT, {p.stem: {task: p} for p in specs}


def sheet(students: Path, references: Path, atol: float, rtol: float, task: str | None = None) -> tuple[str, list[Grade]]:
    tasks = {p.stem: p for p in sorted(references.glob("*.json"))}
    if not tasks:
        raise SystemExit(f"grade.py: error: {references}: no reference traces (*.json) in this folder")
    if task is not None and task not in tasks:
        raise SystemExit(f"grade.py: error: --task {task}: no {task}.json in {references}")
    layout, handed_in = submissions(students, list(tasks), task)
    if layout == FLAT:
        tasks = {t: p for t, p in tasks.items() if t == next(iter(next(iter(handed_in.values()))))}
    grades = []
    for student, specs in handed_in.items():
        for name, ref in tasks.items():
            if name in specs:
                grades.append(grade(student, name, specs[name], ref, atol, rtol))
            else:
                grades.append(Grade(student, name, 0, "missing", "", f"no {name}.yaml handed in"))
        for name in specs:
            if name not in tasks:
                grades.append(Grade(student, name, None, "no reference", "", f"no {name}.json in {references}"))
    return layout, grades


HEADER = ["student", "task", "score", "verdict", "first diverging", "note"]


ZH = {  # the sheet's own words in the book's Chinese; the notes are tracer's messages, translated by tracer
    "student": "学生", "task": "任务", "score": "得分", "verdict": "结论", "first diverging": "最先分歧的阶段", "note": "说明",
    "same": "相同", "different": "不同", "violation": "违规", "error": "错误", "missing": "未提交", "no reference": "无参考",
    "{n} graded: {same} same as the reference, mean score {mean}/{total}": "已评 {n} 份：{same} 份与参考相同，平均分 {mean}/{total}",
    PER_STUDENT: "每个学生一个文件夹（NAME/TASK.yaml）", FLAT: "一个平铺的文件夹，每个 NAME.yaml 是一个学生",
    "{folder}: {layout}; {n} students": "{folder}：{layout}；{n} 个学生",
}


def words(text: str, lang: str, **fields: object) -> str:
    return (ZH.get(text, text) if lang == "zh" else text).format(**fields)


def as_text(grades: list[Grade], lang: str = "en") -> str:
    from tracer.i18n import cells, ljust
    from tracer.messages import render

    rows = [[words(h, lang) for h in HEADER]] + [[*g.row()[:3], words(g.verdict, lang), g.row()[4], " ".join(render(g.note, lang).split())]
                                               for g in grades]
    widths = [max(cells(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    lines = ["  ".join(ljust(cell, w) for cell, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
    scored = [g for g in grades if g.score is not None]
    lines.append(words("{n} graded: {same} same as the reference, mean score {mean}/{total}", lang, n=len(scored),
                       same=sum(g.verdict == "same" for g in scored), total=sum(RUBRIC.values()),
                       mean=f"{sum(g.score or 0 for g in scored) / max(len(scored), 1):.1f}"))
    return "\n".join(line.rstrip() for line in lines) + "\n"


def as_csv(grades: list[Grade]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", "task", "score", "max", "verdict", "first_diverging", "note"])
    writer.writerows(g.row(numeric=True) for g in grades)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Grade student specs against reference traces (tracer diff).")
    ap.add_argument("students", type=Path, help="folder: one subfolder per student (NAME/TASK.yaml), or NAME.yaml files for one task")
    ap.add_argument("reference", type=Path, help="folder: one reference trace TASK.json per task")
    ap.add_argument("--task", help="the task a flat folder of NAME.yaml answers (needed when REFERENCE holds several)")
    ap.add_argument("--csv", action="store_true", help="write the sheet as CSV")
    ap.add_argument("--lang", choices=("zh", "en"), help="words of the text sheet: zh (the book's Chinese) or en; default: the locale")
    ap.add_argument("--atol", type=float, default=DEFAULT_ATOL, help=f"absolute tolerance (default {DEFAULT_ATOL:g})")
    ap.add_argument("--rtol", type=float, default=DEFAULT_RTOL, help=f"relative tolerance (default {DEFAULT_RTOL:g})")
    args = ap.parse_args(argv)
    for folder in (args.students, args.reference):
        if not folder.is_dir():
            ap.error(f"{folder}: no such folder")
    from tracer.i18n import from_locale

    lang = args.lang or from_locale()
    layout, grades = sheet(args.students, args.reference, args.atol, args.rtol, args.task)
    students = len({g.student for g in grades})
    sys.stderr.write("grade.py: " + words("{folder}: {layout}; {n} students", lang, folder=args.students,
                                          layout=words(layout, lang), n=students) + "\n")
    sys.stdout.write(as_csv(grades) if args.csv else as_text(grades, lang))
    return 0


if __name__ == "__main__":
    sys.exit(main())
