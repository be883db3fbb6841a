"""examples/coursework/grade.py on its sample students, and on a class with trouble in it."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys

from conftest import EXAMPLES, PRE_REL, REPO, run_cli

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
    # Bob's post-norm block runs cleanly (2 + 2) but loses structure and stages (the norm order is the step list's,
    # not a setting as well); norm1 parts first.
    assert bob.split()[:5] == ["bob", "prenorm", "6/10", "different", "norm1"]
    assert "structure differs" in bob and "lost: structure, stages" in bob
    # Carol's beta: [0] is a broadcast violation and a weight of the wrong shape; NumPy's numbers still agree, so the
    # weight costs nothing and the violation costs the contract.
    assert carol.split()[:4] == ["carol", "prenorm", "8/10", "violation"]
    assert "broadcast violation: norm1" in carol and "lost: contract" in carol and "change no number" in carol
    assert lines[4] == "3 graded: 1 same as the reference, mean score 8.0/10"


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
    assert rows[0] == ["student", "task", "score", "max", "verdict", "first_diverging", "note", "file"]
    by = {(row[0], row[1]): row for row in rows[1:]}
    assert by[("alice", "prenorm")][2:5] == ["10", "10", "same"]
    assert by[("alice", "extra")][2:5] == ["", "", "no reference"]
    assert by[("dave", "prenorm")][2:5] == ["0", "10", "error"]
    assert "prenorm.yaml:1:" in by[("dave", "prenorm")][6] and "H = 3 must divide C = 2" in by[("dave", "prenorm")][6]
    assert by[("erin", "prenorm")][2:5] == ["0", "10", "missing"]


def test_the_reference_is_the_chapter_block():
    r = run_cli("diff", str(COURSE / "reference" / "prenorm.json"), PRE_REL)
    assert r.returncode == 0, r.stdout


def test_missing_folder_is_exit_2():
    r = grade(str(COURSE / "no-such-folder"), str(COURSE / "reference"))
    assert r.returncode == 2
    assert "no-such-folder: no such folder" in r.stderr


# -- the two hand-in layouts, and the sheet in the book's Chinese ----------------------------------------
def _flat(tmp_path):
    flat = tmp_path / "hand-in"
    if flat.exists():
        return flat
    flat.mkdir()
    for name in ("alice", "bob", "carol"):
        shutil.copy(COURSE / "students" / name / "prenorm.yaml", flat / f"{name}.yaml")
    return flat


def test_a_flat_folder_of_name_yaml_is_one_student_a_file(tmp_path):
    r = grade(str(_flat(tmp_path)), str(COURSE / "reference"))
    assert r.returncode == 0, r.stderr
    assert "a flat folder of NAME.yaml files, one student each; 3 students" in r.stderr
    rows = [line.split()[:4] for line in r.stdout.splitlines()[1:4]]
    assert rows == [["alice", "prenorm", "10/10", "same"], ["bob", "prenorm", "6/10", "different"],
                    ["carol", "prenorm", "8/10", "violation"]]
    assert "no reference" not in r.stdout
    per_student = grade(str(COURSE / "students"), str(COURSE / "reference"))
    assert "one folder per student (NAME/TASK.yaml); 3 students" in per_student.stderr


def test_a_flat_folder_needs_its_task_when_there_are_several(tmp_path):
    refs = tmp_path / "reference"
    shutil.copytree(COURSE / "reference", refs)
    shutil.copy(refs / "prenorm.json", refs / "other.json")
    r = grade(str(_flat(tmp_path)), str(refs))
    assert r.returncode != 0 and "give --task, one of other, prenorm" in r.stderr
    r = grade(str(_flat(tmp_path)), str(refs), "--task", "prenorm")
    assert r.returncode == 0 and r.stdout.count("prenorm") == 3 and "other" not in r.stdout


def test_the_sheet_in_chinese(tmp_path):
    r = grade(str(_flat(tmp_path)), str(COURSE / "reference"), "--lang", "zh")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["学生", "任务", "得分", "结论", "最先分歧的阶段", "说明"]
    assert lines[1].split()[:4] == ["alice", "prenorm", "10/10", "相同"] and "失分" in lines[2]
    assert lines[-1] == "已评 3 份：1 份与参考相同，平均分 8.0/10"
    assert "平铺" in r.stderr


def test_a_changed_activation_costs_what_a_changed_eps_does(tmp_path):
    students = tmp_path / "students"
    students.mkdir()
    alice = (COURSE / "students" / "alice" / "prenorm.yaml").read_text(encoding="utf-8")
    assert "eps: 0.00001" in alice and "activation" not in alice
    (students / "gelu.yaml").write_text(alice.replace("eps: 0.00001", "eps: 0.00001\n  activation: gelu"), encoding="utf-8")
    (students / "eps.yaml").write_text(alice.replace("eps: 0.00001", "eps: 0.001"), encoding="utf-8")
    r = grade(str(students), str(COURSE / "reference"), "--csv")
    assert r.returncode == 0, r.stderr
    by = {row[0]: row for row in list(csv.reader(io.StringIO(r.stdout)))[1:]}
    assert "settings differ: block.eps" in by["eps"][6] and "lost: settings, stages" in by["eps"][6]
    gelu = by["gelu"][6]
    # the activation is a setting (of the block, and of the step that applies it): the settings point, once
    assert "settings differ: block.activation" in gelu and "lost: settings, stages" in gelu
    assert by["gelu"][2] == by["eps"][2] == "6" and by["gelu"][4] == "different"
