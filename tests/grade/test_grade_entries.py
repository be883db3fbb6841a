"""tracer grade accounts for every entry of the class folder: each hand-in graded (a spec, a saved trace, recorded
arrays; the suffix in any case), every other entry listed as not graded with its reason, and the summary counts them."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, SPECS, run_app
from helpers import student

import tracer

COURSE = EXAMPLES / "coursework"
REFERENCE = str(COURSE / "reference")
ALICE = COURSE / "students" / "alice" / "prenorm.yaml"
BOB = COURSE / "students" / "bob" / "prenorm.yaml"


def _arrays(bug: str | None = None) -> dict[str, np.ndarray]:
    """The chapter's block as a student's NumPy records it, with one classic mistake made (None: none)."""
    t = tracer.trace(str(SPECS / "ch17-prenorm.yaml"))
    arrays = student.numpy_block(np.asarray(t["x"])[0], dict(t.params), 2, bug=bug)
    return {k: v for k, v in arrays.items() if k in student.MAIN}


def _json_lines(r) -> list[dict]:
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_a_flat_folder_grades_every_suffix_in_any_case_and_lists_the_rest(tmp_path: Path):
    flat = tmp_path / "hand-in"
    flat.mkdir()
    shutil.copy(ALICE, flat / "alice.yaml")
    shutil.copy(BOB, flat / "Bob.YAML")
    np.savez(flat / "carl.npz", **_arrays())
    (flat / "dora.json").write_text(json.dumps({k: v.tolist() for k, v in _arrays("no_w_o").items()}), encoding="utf-8")
    (flat / "notes.txt").write_text("my answer is in the .yaml\n", encoding="utf-8")
    (flat / "old").mkdir()
    os.mkfifo(flat / "pipe.yaml")
    (flat / "link.yaml").symlink_to(ALICE)
    rows = _json_lines(run_app("grade", str(flat), REFERENCE, "--json"))
    graded = {row["student"]: row for row in rows if row["verdict"] != "not graded"}
    skipped = {row["file"]: row for row in rows if row["verdict"] == "not graded"}
    assert set(graded) == {"alice", "Bob", "carl", "dora"}
    assert graded["alice"]["score"] == 10 and graded["Bob"]["verdict"] == "different"
    # recorded arrays: graded against the reference's stages as tracer diff does, on the parts arrays can show
    assert graded["carl"] == {**graded["carl"], "score": 6, "max": 6, "verdict": "same", "lost": []}
    assert graded["dora"]["verdict"] == "different" and graded["dora"]["first_diverging"] == "attention"
    assert graded["dora"]["lost"] == ["stages"] and graded["dora"]["max"] == 6
    assert set(skipped) == {"notes.txt", "old", "pipe.yaml", "link.yaml"}
    assert "unknown suffix .txt" in skipped["notes.txt"]["note"]
    assert "is not a regular file" in skipped["pipe.yaml"]["note"]
    assert "symbolic link" in skipped["link.yaml"]["note"]
    assert "a folder" in skipped["old"]["note"]
    assert all(row["score"] is None for row in skipped.values())
    text = run_app("grade", str(flat), REFERENCE)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-1] == "4 graded: 2 same as the reference, mean score 8.2/10; 4 entries not graded"


def test_a_per_student_folder_lists_what_it_does_not_grade(tmp_path: Path):
    students = tmp_path / "students"
    shutil.copytree(COURSE / "students", students)
    (students / "README.txt").write_text("the class\n", encoding="utf-8")
    (students / "alice" / "prenorm.npz").write_bytes(b"")  # a second hand-in for one task: the spec is graded
    (students / "bob" / "draft").mkdir()
    (students / "carol" / "PRENORM.yml").unlink(missing_ok=True)
    (students / "dave").mkdir()
    shutil.copy(ALICE, students / "dave" / "PRENORM.YML")  # the task's name in another case: still that task
    (students / ".git").mkdir()
    refs = students / "reference"  # the reference folder kept inside the class folder
    shutil.copytree(COURSE / "reference", refs)
    rows = _json_lines(run_app("grade", str(students), str(refs), "--json"))
    graded = {(row["student"], row["task"]): row for row in rows if row["verdict"] != "not graded"}
    skipped = {row["file"]: row["note"] for row in rows if row["verdict"] == "not graded"}
    assert graded[("dave", "prenorm")]["score"] == 10
    assert graded[("alice", "prenorm")]["file"] == "alice/prenorm.yaml"
    assert "a second hand-in for prenorm: alice/prenorm.yaml is graded" in skipped["alice/prenorm.npz"]
    assert "beside the student folders" in skipped["README.txt"]
    assert "inside a student's folder" in skipped["bob/draft"]
    assert "hidden" in skipped[".git"] and "the reference folder" in skipped["reference"]
    assert not any(student == "reference" for student, _ in graded)


def test_an_unreadable_hand_in_is_listed_not_dropped(tmp_path: Path, monkeypatch):
    from tracer.grade import sheet

    flat = tmp_path / "hand-in"
    flat.mkdir()
    shutil.copy(ALICE, flat / "alice.yaml")
    shutil.copy(ALICE, flat / "eve.yaml")
    real_open = os.open

    def refuse(path, flags, *args):  # as a file without read permission is to a user who is not root
        if str(path).endswith("eve.yaml"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(sheet.os, "open", refuse)
    layout, grades = sheet.sheet(flat, Path(REFERENCE))
    by = {g.file: g for g in grades}
    assert by["alice.yaml"].score == 10
    assert by["eve.yaml"].verdict == "not graded" and "unreadable (Permission denied)" in by["eve.yaml"].note


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root reads a file without read permission")
def test_a_file_without_read_permission_is_listed(tmp_path: Path):
    flat = tmp_path / "hand-in"
    flat.mkdir()
    shutil.copy(ALICE, flat / "alice.yaml")
    shutil.copy(ALICE, flat / "eve.yaml")
    (flat / "eve.yaml").chmod(0)
    rows = _json_lines(run_app("grade", str(flat), REFERENCE, "--json"))
    assert any(row["file"] == "eve.yaml" and "unreadable" in row["note"] for row in rows)


def test_only_entries_that_are_not_hand_ins_is_a_sheet_of_them(tmp_path: Path):
    flat = tmp_path / "hand-in"
    flat.mkdir()
    (flat / "answer.docx").write_bytes(b"PK")
    r = run_app("grade", str(flat), REFERENCE, "--csv", "-")
    assert r.returncode == 0, r.stderr
    import csv
    import io

    row = list(csv.reader(io.StringIO(r.stdout)))[1]
    assert row[:6] == ["answer", "", "", "", "not graded", ""] and row[6].startswith("unknown suffix .docx") and row[7] == "answer.docx"
    assert r.stdout.count("\n") == 2
