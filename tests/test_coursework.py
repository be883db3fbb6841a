"""examples/coursework/grade.py on its sample students, and on a class with trouble in it."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys

from conftest import EXAMPLES, REPO, run_cli

COURSE = EXAMPLES / "coursework"


def grade(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(COURSE / "grade.py"), *args], check=False, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_score_sheet_of_the_samples():
    r = grade(str(COURSE / "students"), str(COURSE / "reference"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["student", "task", "score", "verdict", "first", "diverging", "note"]
    alice, bob, carol = lines[1:4]
    # Alice wrote every matrix out in full: the same block, full marks.
    assert alice.split()[:5] == ["alice", "prenorm", "10/10", "same", "—"]
    # Bob's post-norm block runs cleanly (2 + 2) but loses structure, settings and stages; norm1 parts first.
    assert bob.split()[:5] == ["bob", "prenorm", "4/10", "different", "norm1"]
    assert "settings differ: block.norm_order" in bob and "lost: structure, settings, stages" in bob
    # Carol's beta: [0] is a broadcast violation and a weight of the wrong shape; NumPy's numbers still agree.
    assert carol.split()[:4] == ["carol", "prenorm", "6/10", "violation"]
    assert "broadcast violation: norm1" in carol and "lost: contract, settings" in carol
    assert lines[4] == "3 graded: 1 same as the reference, mean score 6.7/10"


def test_csv_sheet_and_a_class_with_an_error_a_missing_and_an_extra_task(tmp_path):
    students = tmp_path / "students"
    shutil.copytree(COURSE / "students", students)
    (students / "dave").mkdir()
    (students / "dave" / "prenorm.yaml").write_text("dims: {C: 2, H: 3, F: 3}\n", encoding="utf-8")  # H does not divide C
    (students / "erin").mkdir()  # handed in nothing
    (students / "alice" / "extra.yaml").write_text("dims: {C: 2, H: 1, F: 1}\n", encoding="utf-8")
    r = grade(str(students), str(COURSE / "reference"), "--csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["student", "task", "score", "max", "verdict", "first_diverging", "note"]
    by = {(row[0], row[1]): row for row in rows[1:]}
    assert by[("alice", "prenorm")][2:5] == ["10", "10", "same"]
    assert by[("alice", "extra")][2:5] == ["", "", "no reference"]
    assert by[("dave", "prenorm")][2:5] == ["0", "10", "error"]
    assert "prenorm.yaml:1:" in by[("dave", "prenorm")][6] and "H = 3 must divide C = 2" in by[("dave", "prenorm")][6]
    assert by[("erin", "prenorm")][2:5] == ["0", "10", "missing"]


def test_the_reference_is_the_chapter_block():
    r = run_cli("diff", str(COURSE / "reference" / "prenorm.json"), "specs/ch17-prenorm.yaml")
    assert r.returncode == 0, r.stdout


def test_missing_folder_is_exit_2():
    r = grade(str(COURSE / "no-such-folder"), str(COURSE / "reference"))
    assert r.returncode == 2
    assert "no-such-folder: no such folder" in r.stderr
