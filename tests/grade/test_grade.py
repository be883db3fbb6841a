"""tracer grade STUDENTS REFERENCE: the class graded in one process, as a text sheet, JSON Lines or CSV."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

from conftest import EXAMPLES, assert_refused, run_app, run_cli

COURSE = EXAMPLES / "coursework"
STUDENTS, REFERENCE = str(COURSE / "students"), str(COURSE / "reference")


def test_the_sheet_of_the_samples_from_the_installed_command():
    r = run_cli("grade", STUDENTS, REFERENCE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["student", "task", "score", "verdict", "first", "diverging", "note"]
    assert lines[1].split()[:5] == ["alice", "prenorm", "10/10", "same", "—"]
    assert lines[2].split()[:5] == ["bob", "prenorm", "6/10", "different", "norm1"]
    assert lines[3].split()[:4] == ["carol", "prenorm", "8/10", "violation"]
    assert lines[4] == "3 graded: 1 same as the reference, mean score 8.0/10"
    assert r.stderr == "tracer: note: " + STUDENTS + ": one folder per student (NAME/TASK.yaml); 3 students\n"


def test_json_lines_one_object_per_student_and_task(tmp_path: Path):
    students = tmp_path / "students"
    shutil.copytree(COURSE / "students", students)
    (students / "dave").mkdir()
    (students / "dave" / "prenorm.yaml").write_text("dims: {C: 2, H: 3, F: 3}\n", encoding="utf-8")  # H does not divide C
    (students / "erin").mkdir()
    r = run_app("grade", str(students), REFERENCE, "--json", "--lang", "zh")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    by = {row["student"]: row for row in rows}
    assert list(by) == ["alice", "bob", "carol", "dave", "erin"]
    assert by["alice"] == {"student": "alice", "task": "prenorm", "score": 10, "max": 10, "verdict": "same", "first_diverging": None,
                           "lost": [], "note": "", "error": None, "file": "alice/prenorm.yaml"}
    assert by["bob"]["first_diverging"] == "norm1" and by["bob"]["lost"] == ["structure", "stages"]
    assert by["dave"]["verdict"] == "error" and by["dave"]["score"] == 0 and by["dave"]["error"]["exit_code"] == 2
    assert "H = 3 must divide C = 2" in by["dave"]["error"]["message"]  # English in both languages, as CSV
    assert by["erin"]["verdict"] == "missing"


def test_csv_file_written_through_the_output_rules(tmp_path: Path):
    out = tmp_path / "sheet.csv"
    r = run_app("grade", STUDENTS, REFERENCE, "--csv", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split()[:2] == ["student", "task"]  # the sheet still on stdout
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[0] == ["student", "task", "score", "max", "verdict", "first_diverging", "note", "file"]
    assert [row[:5] for row in rows[1:]] == [["alice", "prenorm", "10", "10", "same"], ["bob", "prenorm", "6", "10", "different"],
                                            ["carol", "prenorm", "8", "10", "violation"]]
    # a CSV carries no mark of tracer's: an existing file is replaced only with --force
    before = out.read_bytes()
    refused = run_app("grade", STUDENTS, REFERENCE, "--csv", str(out))
    assert_refused(refused, "--csv", "--force")
    assert out.read_bytes() == before
    assert run_app("grade", STUDENTS, REFERENCE, "--csv", str(out), "--force").returncode == 0
    # never over an input
    assert_refused(run_app("grade", STUDENTS, REFERENCE, "--csv", str(COURSE / "students" / "alice" / "prenorm.yaml"), "--force"))


def test_csv_on_stdout_and_not_with_json():
    r = run_app("grade", STUDENTS, REFERENCE, "--csv", "-")
    assert r.returncode == 0 and r.stdout.startswith("student,task,score,max,verdict,first_diverging,note,file\n")
    assert_refused(run_app("grade", STUDENTS, REFERENCE, "--csv", "-", "--json"), "--json and --csv -")


def test_each_hand_in_is_confined_to_its_own_folder(tmp_path: Path):
    students = tmp_path / "students"
    (students / "mallory").mkdir(parents=True)
    secret = tmp_path / "w.npz"
    secret.write_bytes(b"not read")
    alice = (COURSE / "students" / "alice" / "prenorm.yaml").read_text(encoding="utf-8")
    (students / "mallory" / "prenorm.yaml").write_text(alice.replace("gamma: [1, 1], beta", "gamma: {file: ../../w.npz, key: g}, beta", 1), encoding="utf-8")
    r = run_app("grade", str(students), REFERENCE, "--csv", "-")
    assert r.returncode == 0, r.stderr
    row = list(csv.reader(io.StringIO(r.stdout)))[1]
    assert row[:5] == ["mallory", "prenorm", "0", "10", "error"] and "--confine" in row[6], row


def test_the_sheet_in_chinese(tmp_path: Path):
    flat = tmp_path / "hand-in"
    flat.mkdir()
    for name in ("alice", "bob"):
        shutil.copy(COURSE / "students" / name / "prenorm.yaml", flat / f"{name}.yaml")
    r = run_app("grade", str(flat), REFERENCE, "--lang", "zh")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["学生", "任务", "得分", "结论", "最先分歧的阶段", "说明"]
    assert lines[1].split()[:4] == ["alice", "prenorm", "10/10", "相同"] and "失分" in lines[2]
    assert lines[-1] == "已评 2 份：1 份与参考相同，平均分 8.0/10"
    assert "平铺" in r.stderr and "2 个学生" in r.stderr


def test_folders_missing_empty_or_a_task_unclear_are_exit_2(tmp_path: Path):
    assert_refused(run_app("grade", str(tmp_path / "nope"), REFERENCE), "nope: no such folder")
    (tmp_path / "empty").mkdir()
    assert_refused(run_app("grade", str(tmp_path / "empty"), REFERENCE), "no student folders and no hand-ins")
    assert_refused(run_app("grade", STUDENTS, str(tmp_path / "empty")), "no reference traces (*.json)")
    assert_refused(run_app("grade", STUDENTS, REFERENCE, "--task", "other"), "--task other: no other.json in")
    assert_refused(run_app("grade", STUDENTS, REFERENCE, "--atol", "-1"), "--atol")
