"""The grading's corners a review found: a float32 student's arrays at float32's tolerance, a broken reference stops
the grading, arrays without the block's output earn no stages part, sandwich norms cost what any other norm order
costs, a linked student folder is named a link."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from conftest import EXAMPLES, SPECS, assert_refused, run_app
from helpers import student

import tracer

COURSE = EXAMPLES / "coursework"
REFERENCE = str(COURSE / "reference")


def _chapter(dtype=np.float64) -> dict[str, np.ndarray]:
    t = tracer.trace(str(SPECS / "ch17-prenorm.yaml"))
    arrays = student.numpy_block(np.asarray(t["x"])[0], dict(t.params), 2)
    return {k: v.astype(dtype) for k, v in arrays.items() if k in student.MAIN}


def _rows(r) -> dict[str, dict]:
    assert r.returncode == 0, r.stderr
    return {row["student"]: row for row in map(json.loads, r.stdout.splitlines()) if row["verdict"] != "not graded"}


def test_a_float32_students_arrays_are_graded_at_float32s_tolerance(tmp_path: Path):
    flat = tmp_path / "hand-in"
    flat.mkdir()
    np.savez(flat / "npz32.npz", **_chapter(np.float32))
    (flat / "json32.json").write_text(json.dumps({k: v.tolist() for k, v in _chapter(np.float32).items()}))
    rows = _rows(run_app("grade", str(flat), REFERENCE, "--json"))
    assert rows["npz32"]["verdict"] == rows["json32"]["verdict"] == "same"
    assert rows["npz32"]["score"] == rows["json32"]["score"] == 6
    # a tolerance the teacher gives is every diff's
    strict = _rows(run_app("grade", str(flat), REFERENCE, "--json", "--atol", "1e-9", "--rtol", "1e-9"))
    assert strict["npz32"]["verdict"] == "different"


def test_a_broken_reference_stops_the_grading_before_any_student(tmp_path: Path):
    refs = tmp_path / "reference"
    refs.mkdir()
    (refs / "prenorm.json").write_text("{")
    r = run_app("grade", str(COURSE / "students"), str(refs))
    assert_refused(r, "prenorm.json", "the reference cannot be read")
    (refs / "prenorm.json").write_text(json.dumps({"x": [[1.0, 0.0]]}))  # arrays, not a trace
    assert_refused(run_app("grade", str(COURSE / "students"), str(refs)), "a reference is a trace tracer saved")


def test_arrays_without_the_output_earn_no_stages_part(tmp_path: Path):
    flat = tmp_path / "hand-in"
    flat.mkdir()
    arrays = _chapter()
    np.savez(flat / "onlyx.npz", x=arrays["x"])
    np.savez(flat / "whole.npz", **arrays)
    rows = _rows(run_app("grade", str(flat), REFERENCE, "--json"))
    assert rows["onlyx"]["verdict"] == "incomplete" and rows["onlyx"]["lost"] == ["stages"] and rows["onlyx"]["score"] == 4
    assert "do not hold the block's output (output)" in rows["onlyx"]["note"]
    assert rows["whole"]["verdict"] == "same" and rows["whole"]["score"] == 6


def test_sandwich_norms_cost_what_another_norm_order_costs(tmp_path: Path):
    solution = "dims: {B: 1, T: 4, C: 8, H: 2, F: 16}\nseed: 3\nblock: {norm_order: pre}\ninput: {x: random}\n"
    refs, flat = tmp_path / "reference", tmp_path / "hand-in"
    refs.mkdir()
    flat.mkdir()
    (tmp_path / "s.yaml").write_text(solution)
    (refs / "t.json").write_text(run_app("run", str(tmp_path / "s.yaml"), "--json", "--with-weights").stdout)
    for order in ("post", "sandwich", "parallel"):
        (flat / f"{order}.yaml").write_text(solution.replace("norm_order: pre", f"norm_order: {order}"))
    rows = _rows(run_app("grade", str(flat), str(refs), "--json"))
    for order in ("post", "sandwich", "parallel"):
        assert rows[order]["score"] == 6 and rows[order]["lost"] == ["structure", "stages"], (order, rows[order])


def test_a_linked_student_folder_is_named_a_link(tmp_path: Path):
    students = tmp_path / "students"
    shutil.copytree(COURSE / "students", students)
    (students / "linked").symlink_to(students / "alice", target_is_directory=True)
    r = run_app("grade", str(students), REFERENCE, "--json")
    assert r.returncode == 0, r.stderr
    row = next(json.loads(line) for line in r.stdout.splitlines() if json.loads(line)["file"] == "linked")
    assert row["verdict"] == "not graded" and "symbolic link" in row["note"]
