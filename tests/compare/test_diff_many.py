"""tracer diff REF B1 B2 ... (or REF and a folder): each hand-in against the reference in one process; two sides as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import EXAMPLES, POST, PRE, run_app

COURSE = EXAMPLES / "coursework"
REF = str(COURSE / "reference" / "prenorm.json")
ALICE, BOB, CAROL = (str(COURSE / "students" / n / "prenorm.yaml") for n in ("alice", "bob", "carol"))


def test_several_sides_a_status_line_each_and_the_worst_exit_code(tmp_path: Path):
    r = run_app("diff", REF, ALICE, BOB)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["same", ALICE + ":"] and lines[1].split()[:2] == ["different", BOB + ":"]
    assert "first diverging stage: norm1" in lines[1]
    assert lines[2] == "2 hand-ins: 1 same, 1 different, 0 errors; exit code 1"
    missing = str(tmp_path / "nope.npz")
    r = run_app("diff", REF, ALICE, missing, CAROL)  # an unreadable hand-in and a violation: errors, the others still compared
    assert r.returncode == 2
    words = [line.split()[0] for line in r.stdout.splitlines()[:3]]
    assert words == ["same", "error", "error"] and "nope.npz" in r.stdout.splitlines()[1]
    assert r.stdout.splitlines()[3] == "3 hand-ins: 1 same, 0 different, 2 errors; exit code 2"
    assert run_app("diff", REF, ALICE, ALICE).returncode == 0


def test_json_lines_one_object_per_hand_in_errors_included(tmp_path: Path):
    missing = str(tmp_path / "nope.npz")
    r = run_app("diff", REF, ALICE, BOB, missing, "--json")
    assert r.returncode == 2
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o["b"]["path"] for o in objs] == [ALICE, BOB, missing]
    assert objs[0]["same"] is True and objs[1]["same"] is False and objs[1]["first_diverging"] == "norm1"
    assert objs[2]["same"] is None and objs[2]["error"]["exit_code"] == 2 and "nope.npz" in objs[2]["error"]["message"]
    assert all(o["kind"] == "diff" and o["a"]["path"] == REF for o in objs)
    assert "3 hand-ins: 1 same, 1 different, 1 error; exit code 2" in r.stderr  # the status lines go to stderr


def test_a_folder_of_hand_ins(tmp_path: Path):
    folder = tmp_path / "hand-in"
    folder.mkdir()
    shutil.copy(ALICE, folder / "alice.yaml")
    shutil.copy(BOB, folder / "bob.yaml")
    (folder / "notes.txt").write_text("not a hand-in", encoding="utf-8")
    r = run_app("diff", REF, str(folder))
    assert r.returncode == 1
    assert [line.split()[0] for line in r.stdout.splitlines()] == ["same", "different", "2"]
    assert "alice.yaml" in r.stdout and "notes.txt" not in r.stdout
    (tmp_path / "empty").mkdir()
    r = run_app("diff", REF, str(tmp_path / "empty"))
    assert r.returncode == 2 and "holds no .npz, .json or .yaml file" in r.stderr


def test_several_sides_take_the_table_or_json_only():
    r = run_app("diff", REF, ALICE, BOB, "--format", "csv")
    assert r.returncode == 2 and "--format csv compares two sides" in r.stderr


def test_two_sides_as_before_and_a_failing_one_with_json_prints_its_error_object(tmp_path: Path):
    r = run_app("diff", PRE, POST)
    assert r.returncode == 1 and "2 hand-ins" not in r.stdout
    missing = str(tmp_path / "nope.yaml")
    r = run_app("diff", PRE, missing, "--json")
    assert r.returncode == 2 and "nope.yaml" in r.stderr
    obj = json.loads(r.stdout)
    assert obj["kind"] == "diff" and obj["a"]["path"] == PRE and obj["b"]["path"] == missing and obj["error"]["exit_code"] == 2
    r = run_app("diff", PRE, missing)  # the table: nothing on stdout, as before
    assert r.returncode == 2 and r.stdout == ""
