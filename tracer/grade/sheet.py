"""The grading of a class: who handed in what (the two layouts), each hand-in diffed against its task's
reference as `tracer diff --keep-going` does, under --confine to its own folder, and scored with RUBRIC.

No process per student: every diff runs in this one (a class of 30 in well under two seconds).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tracer.compare.core import DEFAULT_ATOL, DEFAULT_RTOL, diff
from tracer.errors import EXIT_INTERNAL, TracerError, UsageError
from tracer.files import confined
from tracer.messages import Message, join, msg
from tracer.model.contracts import kind_word

# part -> points (docs/coursework.md): runs, keeps every contract, the same step list, the same settings and
# weights, every stage equal within the tolerance
RUBRIC = {"runs": 2, "contract": 2, "structure": 2, "settings": 2, "stages": 2}
TOTAL = sum(RUBRIC.values())
SPEC_SUFFIXES = (".yaml", ".yml")
VERDICTS = ("same", "different", "violation", "error", "missing", "no reference")
PER_STUDENT = "per-student"  # STUDENTS/NAME/TASK.yaml
FLAT = "flat"  # STUDENTS/NAME.yaml, one task


@dataclass
class Grade:
    student: str
    task: str
    score: int | None  # None: not scored (no reference)
    verdict: str  # one of VERDICTS
    first: str  # the first diverging stage, or ""
    note: Message | str  # tracer's messages, rendered in the sheet's language (English in CSV and JSON)
    lost: tuple[str, ...] = ()  # the rubric's parts not earned
    exit_code: int | None = None  # an error's exit code (2 a bad spec, 3 a bug in tracer)

    def as_json(self) -> dict[str, object]:
        return {"student": self.student, "task": self.task, "score": self.score, "max": TOTAL if self.score is not None else None,
                "verdict": self.verdict, "first_diverging": self.first or None, "lost": list(self.lost),
                "note": " ".join(str(self.note).split()),
                "error": {"exit_code": self.exit_code, "message": " ".join(str(self.note).split())} if self.verdict == "error" else None}


def grade_one(student: str, task: str, spec: Path, reference: Path, atol: float, rtol: float) -> Grade:
    """One hand-in against its task's reference; every trouble with the hand-in is its grade, never the sheet's."""
    try:
        with confined(str(spec.parent)):  # the spec may read only its own folder (as tracer run --confine does)
            r = diff(str(reference), str(spec), atol=atol, rtol=rtol, keep_going=True)
    except TracerError as e:
        return Grade(student, task, 0, "error", "", e.message, tuple(RUBRIC), e.exit_code)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # a bug in tracer: this hand-in's grade says so, the others are still graded
        if os.environ.get("TRACER_DEBUG"):
            raise
        return Grade(student, task, 0, "error", "", msg("internal error: {what} (a bug in tracer; please report it)",
                                                        what=f"{type(e).__name__}: {e}"), tuple(RUBRIC), EXIT_INTERNAL)
    earned = {
        "runs": True,
        "contract": not r.b.violations,
        "structure": r.structure_same,
        "settings": r.settings_same,
        "stages": not r.stages_differ,
    }
    score = sum(points for part, points in RUBRIC.items() if earned[part])
    first = r.first_diverging.name if r.first_diverging else ""
    lost = tuple(part for part in RUBRIC if not earned[part])
    lost_note = msg("lost: {parts}", parts=", ".join(lost))
    if r.b.violations:
        v = r.b.violations[0]
        violation = msg("{kind} violation: {rest}", kind=kind_word(v["kind"]), rest=v["message"])
        return Grade(student, task, score, "violation", first, join([violation, r.summary(), lost_note]), lost)
    if r.same:
        return Grade(student, task, score, "same", "", "", lost)
    return Grade(student, task, score, "different", first, join([r.summary(), lost_note]), lost)


def submissions(students: Path, tasks: list[str], task: str | None) -> tuple[str, dict[str, dict[str, Path]]]:
    """(the layout found, {student: {task: spec}})."""
    folders = sorted(p for p in students.iterdir() if p.is_dir() and not p.name.startswith("."))
    if folders:
        return PER_STUDENT, {f.name: {p.stem: p for p in sorted(f.iterdir()) if p.suffix in SPEC_SUFFIXES} for f in folders}
    specs = sorted(p for p in students.iterdir() if p.suffix in SPEC_SUFFIXES)
    if not specs:
        raise UsageError(msg("{folder}: no student folders and no specs (*.yaml) in this folder", folder=str(students)))
    if task is None:
        if len(tasks) != 1:
            raise UsageError(msg("{folder} is a flat folder of NAME.yaml files, and {n} reference tasks could be meant: give --task, one of {names}",
                                 folder=str(students), n=len(tasks), names=", ".join(tasks)))
        task = tasks[0]
    return FLAT, {p.stem: {task: p} for p in specs}


def folder(path: str) -> Path:
    """STUDENTS or REFERENCE: a folder that exists."""
    p = Path(path)
    if not p.is_dir():
        raise UsageError(msg("{path}: no such folder", path=path))
    return p


def inputs(students: Path, references: Path) -> list[str]:
    """The files a grading reads first (hand-ins and references), which no output may replace: checked before any is graded."""
    found = [str(p) for p in sorted(references.glob("*.json"))]
    for pattern in ("*", "*/*"):
        found += [str(p) for p in sorted(students.glob(pattern)) if p.suffix in SPEC_SUFFIXES and p.is_file()]
    return found


def sheet(students: Path, references: Path, atol: float = DEFAULT_ATOL, rtol: float = DEFAULT_RTOL,
          task: str | None = None) -> tuple[str, list[Grade]]:
    """(the layout found, one grade per student and task)."""
    tasks = {p.stem: p for p in sorted(references.glob("*.json"))}
    if not tasks:
        raise UsageError(msg("{folder}: no reference traces (*.json) in this folder", folder=str(references)))
    if task is not None and task not in tasks:
        raise UsageError(msg("--task {task}: no {task}.json in {folder}", task=task, folder=str(references)))
    layout, handed_in = submissions(students, list(tasks), task)
    if layout == FLAT:
        only = next(iter(next(iter(handed_in.values()))))
        tasks = {t: p for t, p in tasks.items() if t == only}
    grades = []
    for student, specs in handed_in.items():
        for name, ref in tasks.items():
            if name in specs:
                grades.append(grade_one(student, name, specs[name], ref, atol, rtol))
            else:
                grades.append(Grade(student, name, 0, "missing", "", msg("no {name}.yaml handed in", name=name), tuple(RUBRIC)))
        for name in specs:
            if name not in tasks:
                grades.append(Grade(student, name, None, "no reference", "", msg("no {name}.json in {folder}", name=name, folder=str(references))))
    return layout, grades
