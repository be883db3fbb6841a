"""The grading of a class: who handed in what (the two layouts), each hand-in diffed against its task's
reference as `tracer diff --keep-going` does, under --confine to its own folder, and scored with RUBRIC.

Every entry of the class folder ends on the sheet: a hand-in graded (a spec, .yaml or .yml; a saved trace or a
JSON object of arrays, .json; arrays, .npz; suffixes in any case), or an entry listed as not graded with its
reason (an unknown suffix, a file that cannot be read, a link, a FIFO or a device, a folder where none belongs, a
second hand-in for one task).  Nothing in the class folder is followed through a link or opened to wait.

No process per student: every diff runs in this one (a class of 30 in well under two seconds).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tracer.compare.judge import DiffResult
from tracer.compare.status import NOT_RECORDED, SHAPES_DIFFER
from tracer.errors import EXIT_INTERNAL, TracerError, UsageError
from tracer.files import confined
from tracer.front.comparison import diff, read_side
from tracer.messages import Message, at, join, msg
from tracer.model.contracts import kind_word

# part -> points (docs/coursework.md): runs, keeps every contract, the same step list, the same settings and
# weights where they change a number, every stage equal within the tolerance
RUBRIC = {"runs": 2, "contract": 2, "structure": 2, "settings": 2, "stages": 2}
TOTAL = sum(RUBRIC.values())
# recorded arrays (.npz, a JSON object of arrays) show no step list and no settings: the parts they can show
ARRAYS_RUBRIC = {"runs": 2, "contract": 2, "stages": 2}
SPEC, JSON, ARRAYS = "spec", "json", "arrays"
KIND_OF_SUFFIX = {".yaml": SPEC, ".yml": SPEC, ".json": JSON, ".npz": ARRAYS}  # compare.many.HAND_IN_SUFFIXES, in any case
SUFFIXES_SAID = ".yaml, .yml, .json or .npz"
NOT_GRADED = "not graded"
VERDICTS = ("same", "different", "incomplete", "violation", "error", "missing", "no reference", NOT_GRADED)
PER_STUDENT = "per-student"  # STUDENTS/NAME/TASK.yaml
FLAT = "flat"  # STUDENTS/NAME.yaml, one task


@dataclass
class Grade:
    student: str
    task: str
    score: int | None  # None: not scored (no reference, not graded)
    verdict: str  # one of VERDICTS
    first: str  # the first diverging stage, or ""
    note: Message | str  # tracer's messages, rendered in the sheet's language (English in CSV and JSON)
    lost: tuple[str, ...] = ()  # the rubric's parts not earned
    exit_code: int | None = None  # an error's exit code (2 a bad spec, 3 a bug in tracer)
    total: int = TOTAL  # the points this hand-in could earn (recorded arrays: ARRAYS_RUBRIC's)
    file: str = ""  # the entry, relative to the class folder

    @property
    def scored(self) -> bool:
        return self.score is not None

    def as_json(self) -> dict[str, object]:
        note = " ".join(str(self.note).split())
        return {"student": self.student or None, "task": self.task or None, "score": self.score,
                "max": self.total if self.score is not None else None, "verdict": self.verdict,
                "first_diverging": self.first or None, "lost": list(self.lost), "note": note,
                "error": {"exit_code": self.exit_code, "message": note} if self.verdict == "error" else None,
                "file": self.file or None}


@dataclass
class Submission:
    path: Path
    kind: str  # SPEC, JSON or ARRAYS
    file: str  # relative to the class folder


@dataclass
class Survey:
    """What a class folder holds: the layout, each student's hand-ins by task, and every entry not graded."""

    layout: str
    handed_in: dict[str, dict[str, Submission]]
    skipped: list[Grade] = field(default_factory=list)


def _rubric_for(kind: str, r: DiffResult | None) -> dict[str, int]:
    return ARRAYS_RUBRIC if kind == ARRAYS or (r is not None and r.arrays is not None) else RUBRIC


def grade_one(student: str, task: str, hand_in: Submission | Path, reference: Path, atol: float | None, rtol: float | None) -> Grade:
    """One hand-in against its task's reference; every trouble with the hand-in is its grade, never the sheet's."""
    h = hand_in if isinstance(hand_in, Submission) else Submission(hand_in, SPEC, hand_in.name)
    rubric = _rubric_for(h.kind, None)
    total = sum(rubric.values())
    try:
        with confined(str(h.path.parent)):  # the hand-in may read only its own folder (as tracer run --confine does)
            r = diff(str(reference), str(h.path), atol=atol, rtol=rtol, keep_going=True).result
    except TracerError as e:
        return Grade(student, task, 0, "error", "", e.message, tuple(rubric), e.exit_code, total, h.file)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # a bug in tracer: this hand-in's grade says so, the others are still graded
        if os.environ.get("TRACER_DEBUG"):
            raise
        return Grade(student, task, 0, "error", "", msg("internal error: {what} (a bug in tracer; please report it)",
                                                        what=f"{type(e).__name__}: {e}"), tuple(rubric), EXIT_INTERNAL, total, h.file)
    if r.arrays is not None:
        return _arrays_grade(student, task, h, r)
    stages_same = not r.stages_differ
    changed = r.setting_fields
    earned = {
        "runs": True,
        "contract": not r.b.violations,
        "structure": r.steps_same,
        "settings": not changed or stages_same,  # a setting that changes no number costs nothing
        "stages": stages_same,
    }
    score = sum(points for part, points in RUBRIC.items() if earned[part])
    first = r.first_diverging.name if r.first_diverging else ""
    lost = tuple(part for part in RUBRIC if not earned[part])
    notes: list[Message] = [r.summary()]
    if changed and stages_same:
        notes.append(msg("{fields} differ but change no number of this run: no point lost", fields=", ".join(changed)))
    if lost:
        notes.append(msg("lost: {parts}", parts=", ".join(lost)))
    if r.b.violations:
        v = r.b.violations[0]
        violation = msg("{kind} violation: {rest}", kind=kind_word(v["kind"]), rest=v["message"])
        return Grade(student, task, score, "violation", first, join([violation, *notes]), lost, file=h.file)
    if r.same:
        return Grade(student, task, score, "same", "", "", lost, file=h.file)
    return Grade(student, task, score, "different", first, join(notes), lost, file=h.file)


def _arrays_grade(student: str, task: str, h: Submission, r: DiffResult) -> Grade:
    """Recorded arrays: runs (they are read and name the reference's stages), contract (each has its stage's shape),
    stages (every stage they record agrees); they show no step list and no settings, so those are not scored."""
    rows = r.compared
    output = r.a.steps[-1].name if r.a.steps else None
    recorded = output is None or any(row.name == output and row.status != NOT_RECORDED for row in r.stages)
    earned = {"runs": True, "contract": not any(row.status == SHAPES_DIFFER for row in rows), "stages": not r.stages_differ and recorded}
    score = sum(points for part, points in ARRAYS_RUBRIC.items() if earned[part])
    lost = tuple(part for part in ARRAYS_RUBRIC if not earned[part])
    total = sum(ARRAYS_RUBRIC.values())
    first = r.first_diverging.name if r.first_diverging else ""
    notes: list[Message] = [r.summary()]
    if not recorded:
        notes.append(msg("the arrays do not hold the block's output ({stage}): the stages part needs it", stage=output))
    if r.hint is not None:
        notes.append(msg("hint: {hint}", hint=r.hint.message()))
    notes.append(msg("recorded arrays: graded on runs, contract and stages ({n} points); arrays show no structure or settings", n=total))
    if lost:
        notes.append(msg("lost: {parts}", parts=", ".join(lost)))
    verdict = "same" if r.same and recorded else "incomplete" if r.same else "different"
    return Grade(student, task, score, verdict, first, join(notes), lost, total=total, file=h.file)


# -- the class folder ------------------------------------------------------------------------------------------

def _skip(path: Path, root: Path, reason: Message, student: str = "") -> Grade:
    return Grade(student, "", None, NOT_GRADED, "", reason, file=_relative(path, root))


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError as e:
        raise UsageError(msg("{folder}: cannot list this folder ({why})", folder=str(folder), why=e.strerror or type(e).__name__)) from None


def _link_reason(path: Path, root: Path) -> Message:
    """Why a link in the class folder is not graded (it is never followed): where it leads, as far as that is the folder's."""
    try:
        target = os.path.realpath(path)
        inside = os.path.commonpath([target, os.path.realpath(root)]) == os.path.realpath(root)
    except (OSError, ValueError):
        inside = False
    if not inside:
        return msg("a symbolic link to a file outside the folder: not followed")
    return msg("a symbolic link: tracer does not follow links in a class folder (copy the file in instead)")


def classify(path: Path, root: Path) -> tuple[str | None, Message | None]:
    """(the hand-in's kind, None), or (None, why it is not graded); a folder is (None, None): the caller decides."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return None, msg("unreadable ({why})", why=e.strerror or type(e).__name__)
    if stat.S_ISLNK(st.st_mode):
        return None, _link_reason(path, root)
    if stat.S_ISDIR(st.st_mode):
        return None, None
    if path.name.startswith("."):
        return None, msg("a hidden file")
    if not stat.S_ISREG(st.st_mode):
        return None, msg("is not a regular file (a FIFO, a socket or a device): never opened")
    kind = KIND_OF_SUFFIX.get(path.suffix.lower())
    if kind is None:
        said = path.suffix or msg("none")
        return None, msg("unknown suffix {suffix} (a hand-in is {suffixes})", suffix=said, suffixes=SUFFIXES_SAID)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        os.close(fd)
    except OSError as e:
        return None, msg("unreadable ({why})", why=e.strerror or type(e).__name__)
    return kind, None


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _preferred(kind: str, path: Path) -> tuple[int, str]:
    """Which of two hand-ins for one task is graded: a spec before a saved trace before arrays, then by name."""
    return (list(dict.fromkeys(KIND_OF_SUFFIX.values())).index(kind), path.name)


def _read_by_specs(files: list[Path]) -> dict[Path, Path]:
    """The files some spec among ``files`` reads (a weight's ``file:``), each with that spec: data, not hand-ins."""
    import yaml

    read: dict[Path, Path] = {}
    for p in files:
        if KIND_OF_SUFFIX.get(p.suffix.lower()) != SPEC or classify(p, p.parent)[0] is None:
            continue
        try:
            with open(p, "rb") as fh:
                doc = yaml.safe_load(fh.read(1 << 20))
        except (OSError, yaml.YAMLError, ValueError):
            continue
        stack = [doc]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                target = node.get("file")
                if isinstance(target, str):
                    read.setdefault(Path(os.path.normpath(p.parent / target)), p)
                stack += list(node.values())
            elif isinstance(node, list):
                stack += node
    return read


def _file_hand_ins(files: list[Path], root: Path, student: str | None) -> tuple[dict[str, dict[str, Submission]], list[Grade]]:
    """Files -> {student: {task: hand-in}} (``student`` None: each file is a student, NAME.yaml; else TASK.yaml of
    that student), and the entries not graded (a file a spec of theirs reads is its data, not a hand-in)."""
    found: dict[str, dict[str, list[Submission]]] = {}
    skipped: list[Grade] = []
    data = _read_by_specs(files)
    for p in files:
        kind, reason = classify(p, root)
        if kind is not None and kind != SPEC and Path(os.path.normpath(p)) in data:
            skipped.append(_skip(p, root, msg("a file {spec} reads, not a hand-in", spec=_relative(data[Path(os.path.normpath(p))], root)),
                                 student or p.stem))
            continue
        if kind is None:
            skipped.append(_skip(p, root, reason or (msg("a hidden folder") if p.name.startswith(".") else msg("a folder")), student or p.stem))
            continue
        who, task = (p.stem, "") if student is None else (student, p.stem)
        found.setdefault(who, {}).setdefault(task, []).append(Submission(p, kind, _relative(p, root)))
    out: dict[str, dict[str, Submission]] = {}
    for who, tasks in found.items():
        for task, hand_ins in tasks.items():
            hand_ins.sort(key=lambda h: _preferred(h.kind, h.path))
            out.setdefault(who, {})[task] = hand_ins[0]
            for other in hand_ins[1:]:
                skipped.append(_skip(other.path, root, msg("a second hand-in for {what}: {kept} is graded", what=task or who,
                                                           kept=hand_ins[0].file), who))
    return out, skipped


def survey(students: Path, refs: Path | None = None) -> Survey:
    """The layout and the hand-ins.  One folder per student when a subfolder (not hidden) holds a hand-in, or when
    there are subfolders and no hand-in beside them; else a flat folder of NAME.SUFFIX files.  Every other entry
    is listed as not graded; the reference folder, when it lies in the class folder, too."""
    entries = _entries(students)
    skipped_refs: list[Grade] = []
    if refs is not None:
        home = os.path.realpath(refs)
        skipped_refs = [_skip(p, students, msg("the reference folder")) for p in entries if _is_folder(p) and os.path.realpath(p) == home]
        entries = [p for p in entries if not (_is_folder(p) and os.path.realpath(p) == home)]
    folders = [p for p in entries if _is_folder(p) and not p.name.startswith(".")]
    files = [p for p in entries if p not in folders]
    top_hand_ins = [p for p in files if classify(p, students)[0] is not None]
    with_hand_ins = [f for f in folders if any(classify(p, students)[0] is not None for p in _entries(f))]
    if with_hand_ins or (folders and not top_hand_ins):
        handed_in: dict[str, dict[str, Submission]] = {}
        skipped: list[Grade] = []
        for p in files:
            reason = classify(p, students)[1]
            beside = msg("a file beside the student folders (one folder per student: NAME/TASK.yaml)")
            if p.is_symlink():
                beside = reason or _link_reason(p, students)
            elif p.name.startswith("."):
                beside = msg("a hidden folder") if _is_folder(p) else msg("a hidden file")
            skipped.append(_skip(p, students, beside))
        for f in folders:
            inner = _entries(f)
            sub = [p for p in inner if _is_folder(p)]
            skipped += [_skip(p, students, msg("a folder inside a student's folder (a hand-in is NAME/TASK.yaml)"), f.name) for p in sub]
            found, more = _file_hand_ins([p for p in inner if p not in sub], students, f.name)
            handed_in[f.name] = found.get(f.name, {})
            skipped += more
        return Survey(PER_STUDENT, handed_in, skipped_refs + skipped)
    found, skipped = _file_hand_ins(files, students, None)
    skipped += [_skip(f, students, msg("a folder in a flat folder of hand-ins (NAME.yaml files)")) for f in folders]
    return Survey(FLAT, found, skipped_refs + sorted(skipped, key=lambda g: g.file))


def folder(path: str) -> Path:
    """STUDENTS or REFERENCE: a folder that exists."""
    p = Path(path)
    if not p.is_dir():
        raise UsageError(msg("{path}: no such folder", path=path))
    return p


def check_reference(ref: Path) -> None:
    """A reference must be a trace tracer saved (`tracer run SOLUTION.yaml --json --with-weights`): one that is not, or
    cannot be read, stops the grading (exit 2) before any student is graded against it."""
    try:
        doc, spec, arrays, _ = read_side(str(ref))
    except TracerError as e:
        raise UsageError(join([msg("{path}: the reference cannot be read, so no hand-in is graded against it", path=str(ref)), e.message])) from None
    if doc is None:
        raise UsageError(at(str(ref), msg("a reference is a trace tracer saved (tracer run SOLUTION.yaml --json --with-weights), "
                                          "not {what}", what=msg("a spec") if spec is not None else msg("arrays"))))


def references(folder: Path) -> dict[str, Path]:
    """The reference traces, TASK.json (the suffix in any case), by task."""
    return {p.stem: p for p in _entries(folder) if p.suffix.lower() == ".json" and p.is_file()}


def inputs(students: Path, refs: Path) -> list[str]:
    """The files a grading reads first (hand-ins and references), which no output may replace: checked before any is graded."""
    found = [str(p) for p in references(refs).values()]
    for p in _entries(students):
        if classify(p, students)[0] is not None:
            found.append(str(p))
        elif _is_folder(p):
            found += [str(q) for q in _entries(p) if classify(q, students)[0] is not None]
    return found


def _task_of(name: str, tasks: dict[str, Path]) -> str | None:
    """The reference a hand-in's TASK names: the same name, else the one name that differs only in case."""
    if name in tasks:
        return name
    same = [t for t in tasks if t.lower() == name.lower()]
    return same[0] if len(same) == 1 else None


def sheet(students: Path, refs: Path, atol: float | None = None, rtol: float | None = None,
          task: str | None = None) -> tuple[str, list[Grade]]:
    """(the layout found, one grade per student and task, then each entry not graded).  ``atol``/``rtol`` None: each
    diff's own default (float64's, or float32's against a float32 program's arrays), as tracer diff chooses."""
    tasks = references(refs)
    if not tasks:
        raise UsageError(msg("{folder}: no reference traces (*.json) in this folder", folder=str(refs)))
    if task is not None and task not in tasks:
        raise UsageError(msg("--task {task}: no {task}.json in {folder}", task=task, folder=str(refs)))
    for name, ref in tasks.items():  # the teacher's files first: a broken reference is the sheet's trouble, not a student's
        if task is None or name == task:
            check_reference(ref)
    found = survey(students, refs)
    if not found.handed_in and not found.skipped:
        raise UsageError(msg("{folder}: no student folders and no hand-ins ({suffixes}) in this folder", folder=str(students),
                             suffixes=SUFFIXES_SAID))
    grades: list[Grade] = []
    if found.layout == FLAT:
        if task is None and found.handed_in:
            if len(tasks) != 1:
                raise UsageError(msg("{folder} is a flat folder of NAME.yaml files, and {n} reference tasks could be meant: give --task, one of {names}",
                                     folder=str(students), n=len(tasks), names=", ".join(tasks)))
            task = next(iter(tasks))
        for student, by_task in found.handed_in.items():
            assert task is not None
            grades.append(grade_one(student, task, by_task[""], tasks[task], atol, rtol))
        return found.layout, grades + found.skipped
    for student, by_task in found.handed_in.items():
        named = {t: h for t, h in by_task.items() if _task_of(t, tasks) is None}
        answered = {_task_of(t, tasks): h for t, h in by_task.items() if _task_of(t, tasks) is not None}
        for name, ref in tasks.items():
            h = answered.get(name)
            if h is not None:
                grades.append(grade_one(student, name, h, ref, atol, rtol))
            else:
                grades.append(Grade(student, name, 0, "missing", "", msg("no {name}.yaml handed in", name=name), tuple(RUBRIC)))
        for name, h in named.items():
            grades.append(Grade(student, name, None, "no reference", "", msg("no {name}.json in {folder}", name=name, folder=str(refs)),
                                file=h.file))
    return found.layout, grades + found.skipped
