"""Hostile inputs (tests/hostile/make_cases.py): every one refused with exit 2 and one line, in bounded time and memory,
nothing read past what the guard allows, no input file changed, and no byte of the file quoted.

The quick suite runs each command once over all the cases (``tracer validate`` and ``tracer run`` take many specs and
report each on a line); --slow runs every case on its own, as its own bounded process.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import make_cases as cases
import pytest
from conftest import PRE
from helpers import hostile

HAS_TORCH = importlib.util.find_spec("torch") is not None
CHECKPOINTS = [c for c in cases.CHECKPOINTS if HAS_TORCH or not c.torch]
PLAIN = [c for c in CHECKPOINTS if not c.torch]


def _specs(folder: Path, chosen: list[cases.Case]) -> list[str]:
    return [str(cases.make_checkpoint(c, folder).relative_to(folder)) for c in chosen]


def _lines_by_spec(text: str, specs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        for spec in specs:
            if spec in line and spec not in out:
                out[spec] = line
    return out


@pytest.mark.parametrize("command", ["validate", "run"])
def test_every_hostile_checkpoint_is_refused_on_one_line_within_bounds(tmp_path: Path, command: str) -> None:
    specs = _specs(tmp_path, PLAIN)
    o = hostile.bounded([command, *specs, "--max-memory", "100MB"], tmp_path)
    assert o.returncode == 2, (o.returncode, o.stdout[-3000:], o.stderr[-3000:])
    assert "Traceback" not in o.stdout + o.stderr and "internal error" not in o.stdout + o.stderr, o.stdout + o.stderr
    hostile.assert_bounded(o, command)
    lines = _lines_by_spec(o.stdout, specs)
    for case, spec in zip(PLAIN, specs):
        assert spec in lines, (case.name, o.stdout)
        assert case.fragment in lines[spec], (case.name, lines[spec])
    assert "allow_pickle" not in o.stdout and "pickle.load" not in o.stdout  # no refusal advises loading a pickle


@pytest.mark.slow  # one process per case and command: about a second each
@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("case", CHECKPOINTS, ids=lambda c: c.name)
def test_each_hostile_checkpoint_alone(tmp_path: Path, case: cases.Case, command: str) -> None:
    spec = cases.make_checkpoint(case, tmp_path)
    extra = ["--max-memory", "100MB"]
    o = hostile.bounded([command, str(spec), *extra], tmp_path, address_space=None if case.torch else hostile.ADDRESS_SPACE)
    hostile.assert_bounded(o, case.name)
    if command == "validate":  # validate reports on stdout, one line a spec
        assert o.returncode == 2 and o.stderr == "", (o.returncode, o.stdout, o.stderr)
        assert len(o.stdout.strip().splitlines()) == 1 and case.fragment in o.stdout, o.stdout
    else:
        hostile.assert_one_line(o, 2, case.fragment)


def test_no_byte_of_the_file_is_quoted(tmp_path: Path) -> None:
    """A file named *.safetensors whose first 8 bytes are a secret: the refusal neither prints them nor their number."""
    case = next(c for c in cases.CHECKPOINTS if c.name == "safetensors-secret-length")
    spec = cases.make_checkpoint(case, tmp_path)
    line = hostile.check(["run", str(spec)], tmp_path, 2, case.fragment).stderr
    assert "hunter2" not in line
    assert f"{int.from_bytes(cases.SECRET, 'little'):,}" not in line and str(int.from_bytes(cases.SECRET, "little")) not in line


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_sparse_and_meta_tensors_in_a_pt_are_refused(tmp_path: Path) -> None:
    specs = _specs(tmp_path, [c for c in CHECKPOINTS if c.torch])
    o = hostile.bounded(["validate", *specs], tmp_path, address_space=None, timeout=90)
    assert o.returncode == 2 and "Traceback" not in o.stdout + o.stderr, (o.stdout, o.stderr)
    lines = _lines_by_spec(o.stdout, specs)
    for case, spec in zip([c for c in CHECKPOINTS if c.torch], specs):
        assert case.fragment in lines.get(spec, ""), (case.name, o.stdout)


@pytest.mark.parametrize("side", [s for s in cases.ARRAYS if s.name != "huge.npz"], ids=lambda s: s.name)  # huge: below
def test_a_hostile_diff_side_is_refused_before_it_is_read(tmp_path: Path, side: cases.Side) -> None:
    side.make(tmp_path / side.name)
    hostile.check(["diff", PRE, side.name, "--max-memory", "200MB"], tmp_path, 2, side.fragment, side.name)


def test_a_diff_side_is_refused_on_its_declared_size_with_no_member_unpacked(tmp_path: Path) -> None:
    """200 MB of zeros in a 200 KB archive, over --max-memory 200MB as float64: refused in a fraction of its size."""
    side = next(s for s in cases.ARRAYS if s.name == "huge.npz")
    side.make(tmp_path / side.name)
    assert (tmp_path / side.name).stat().st_size < 2**20
    o = hostile.check(["diff", PRE, side.name, "--max-memory", "200MB"], tmp_path, 2, "over --max-memory 200MB")
    assert o.peak_rss < 150 * 2**20, o.peak_rss  # the 200 MB member was never unpacked


@pytest.mark.parametrize("which", ["model.safetensors", "config.json"])
def test_import_of_a_folder_with_a_fifo_is_refused_at_once(tmp_path: Path, which: str) -> None:
    folder = cases.model_folder(tmp_path / "m", fifo=which)
    hostile.check(["import", str(folder)], tmp_path, 2, "is not a regular file", which)


def test_import_and_run_of_a_non_ascii_path_in_the_c_locale(tmp_path: Path) -> None:
    """LC_ALL=C without UTF-8 mode: the system gives the name as undecodable bytes; the spec still says modèle."""
    cases.model_folder(tmp_path / "modèle")
    c_locale = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
    hostile.check(["import", "modèle", "-o", "m.yaml"], tmp_path, 0, env=c_locale)
    text = (tmp_path / "m.yaml").read_text(encoding="utf-8")
    assert "file: modèle " in text, text
    hostile.check(["run", "m.yaml"], tmp_path, 0, env=c_locale)
    hostile.check(["run", "m.yaml"], tmp_path, 0)  # and in a UTF-8 locale


def test_a_nul_byte_in_a_file_reference_is_exit_2(tmp_path: Path) -> None:
    case = next(c for c in cases.CHECKPOINTS if c.name == "nul-in-path")
    spec = cases.make_checkpoint(case, tmp_path)
    hostile.check(["run", str(spec)], tmp_path, 2, "NUL byte", "weights.attn.w_q")


@pytest.mark.slow  # two processes on a 6 MB header of 100,000 names: about 20 s on a loaded machine
def test_many_names_cost_names_plus_weights(tmp_path: Path) -> None:
    """24 layers and 100,000 names no layout maps: refusing them as unread, importing them with --allow-unread and
    validating the imported spec each read each name once, not once a weight."""
    folder = cases.extra_names(tmp_path / "wide")
    o = hostile.check(["import", str(folder), "-o", "wide.yaml"], tmp_path, 2, timeout=90)  # read whole, or refused
    assert o.cpu_seconds < 6, ("import", o.cpu_seconds)
    for args in (["import", str(folder), "-o", "wide.yaml", "--allow-unread"], ["validate", "wide.yaml"]):
        o = hostile.check(args, tmp_path, 0, timeout=90)
        assert o.cpu_seconds < 6, (args[0], o.cpu_seconds)  # about 2 s; 12 s when each weight's lookup went through every name


@pytest.mark.slow  # makes every case, torch's too
def test_the_case_script_writes_every_case(tmp_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(Path(cases.__file__)), str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) >= len(PLAIN) + len(cases.ARRAYS)


def test_the_grading_script_grades_a_class_with_hostile_hand_ins(tmp_path: Path) -> None:
    """One student's file: holds a NUL byte, another's is a FIFO, a third's an .npz with a 20 MB header: each is a row
    of the sheet with its error, and the class is graded, in bounded time and memory."""
    import shutil

    from conftest import EXAMPLES

    students = tmp_path / "students"
    shutil.copytree(EXAMPLES / "coursework" / "students" / "alice", students / "alice")
    chosen = {"dave": "nul-in-path", "erin": "npz-fifo", "frank": "npz-huge-member-header"}
    for student, name in chosen.items():
        case = next(c for c in cases.CHECKPOINTS if c.name == name)
        home = students / student
        home.mkdir()
        if "\0" not in case.file:
            case.make(home / case.file)
        (home / "prenorm.yaml").write_text(cases.spec_text(case), encoding="utf-8")
    before = hostile.snapshot(students)
    script = str(EXAMPLES / "coursework" / "grade.py")
    import sys

    o = hostile.bounded([str(students), str(EXAMPLES / "coursework" / "reference")], tmp_path, program=[sys.executable, script])
    assert o.returncode == 0 and "Traceback" not in o.stdout + o.stderr, (o.stdout, o.stderr)
    hostile.assert_bounded(o, "grade.py")
    rows = {line.split()[0]: line for line in o.stdout.splitlines()[1:] if "prenorm" in line.split()[1:2]}  # the graded rows
    assert rows["alice"].split()[2] == "10/10", o.stdout
    for student, name in chosen.items():
        case = next(c for c in cases.CHECKPOINTS if c.name == name)
        assert case.fragment in rows[student], (student, rows[student])
    assert hostile.snapshot(students) == before
