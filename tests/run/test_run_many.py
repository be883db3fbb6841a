"""`tracer run A B ...`: many specs in one process, a status line each, a summary, the worst exit code."""

from __future__ import annotations

import csv
import io
import json

from conftest import POST_REL, PRE_REL, REPO, run_app, write_spec

from tracer.engine import executor
from tracer.run import command as runs

BETA = "examples/violations/beta-typo.yaml"
EX5 = "examples/violations/ex5-residual-broadcast.yaml"


def test_status_lines_summary_and_the_worst_exit_code():
    r = run_app("run", PRE_REL, BETA, "no-such-spec.yaml", POST_REL)
    assert r.returncode == 2, r.stderr
    assert r.stdout.splitlines() == [
        "ok         specs/ch17-prenorm.yaml",
        "violation  examples/violations/beta-typo.yaml: broadcast at norm1",
        "error      no-such-spec.yaml: no such file",
        "ok         specs/ch17-postnorm.yaml",
        "4 specs: 2 ok, 1 with a violation, 1 error; exit code 2",
    ]
    assert r.stderr == ""


def test_exit_code_is_the_worst_of_the_specs():
    assert run_app("run", PRE_REL, POST_REL).returncode == 0
    assert run_app("run", PRE_REL, BETA, EX5).returncode == 1
    zero = run_app("run", PRE_REL, BETA, "--exit-zero")
    assert zero.returncode == 0
    assert "violation  examples/violations/beta-typo.yaml: broadcast at norm1" in zero.stdout  # still reported


def test_a_spec_error_names_file_line_and_field(tmp_path):
    bad = write_spec(tmp_path, "dims: {C: 2, H: 3, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n", "bad.yaml")
    r = run_app("run", PRE_REL, str(bad))
    assert r.returncode == 2
    line = r.stdout.splitlines()[1]
    assert line.startswith(f"error      {bad}:1:")
    assert "dims.H: H = 3 must divide C = 2" in line


def test_json_is_one_object_per_line_status_on_stderr():
    r = run_app("run", PRE_REL, BETA, "missing.yaml", "--json")
    assert r.returncode == 2
    lines = r.stdout.splitlines()
    assert len(lines) == 3
    single = run_app("run", PRE_REL, "--json").stdout
    assert lines[0] + "\n" == single  # the same object a single run writes
    second = json.loads(lines[1])
    assert (second["ok"], second["violations"][0]["kind"], second["violations"][0]["stage"]) == (False, "broadcast", "norm1")
    third = json.loads(lines[2])
    assert third == {"schema_version": 1, "spec": {"path": "missing.yaml", "name": None}, "ok": False,
                     "error": {"exit_code": 2, "message": "missing.yaml: no such file"}}
    assert "3 specs: 1 ok, 1 with a violation, 1 error; exit code 2" in r.stderr


def test_csv_has_one_header_for_all_specs():
    r = run_app("run", PRE_REL, POST_REL, "--format", "csv", "--stage", "output")
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["spec", "stage", "b", "h", "t", "axis", "v0", "v1"]
    assert [(row[0], row[4]) for row in rows[1:]] == [(PRE_REL, "0"), (PRE_REL, "1"), (PRE_REL, "2"), (POST_REL, "0"), (POST_REL, "1"), (POST_REL, "2")]
    assert r.stderr.splitlines()[-1] == "2 specs: 2 ok, 0 with violations, 0 errors; exit code 0"


def test_markdown_has_a_section_per_spec():
    r = run_app("run", PRE_REL, "missing.yaml", "--format", "markdown")
    assert r.returncode == 2
    assert "### Example 17.2, pre-norm" in r.stdout
    assert "### missing.yaml\n\n> **error**: missing.yaml: no such file" in r.stdout


def test_one_spec_prints_its_table_and_no_status_line():
    r = run_app("run", PRE_REL)
    assert r.returncode == 0
    assert not r.stdout.startswith("ok")
    assert "spec: " not in r.stdout and "exit code" not in r.stdout


def test_steps_takes_one_spec():
    r = run_app("run", PRE_REL, POST_REL, "--steps")
    assert r.returncode == 2
    assert "--steps shows one spec's step list; give one spec (received 2)" in r.stderr


def test_two_hundred_specs_in_one_process(tmp_path):
    texts = {name: (REPO / name).read_text(encoding="utf-8") for name in (PRE_REL, BETA)}
    paths = []
    for i in range(200):
        p = tmp_path / f"s{i:03d}.yaml"
        p.write_text(texts[BETA if i % 50 == 0 else PRE_REL], encoding="utf-8")
        paths.append(str(p))
    r = run_app("run", *paths)
    assert r.returncode == 1
    assert len(r.stdout.splitlines()) == 201
    assert r.stdout.splitlines()[-1] == "200 specs: 196 ok, 4 with violations, 0 errors; exit code 1"


def test_a_bug_in_one_spec_is_exit_3_and_the_others_still_run(monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.delenv("TRACER_DEBUG", raising=False)
    monkeypatch.setattr(executor, "run", broken)
    o = runs.attempt(PRE_REL, runs.RunOptions())
    assert o.code == 3
    assert o.status() == ("error", f"{PRE_REL}: internal error: ZeroDivisionError: division by zero (a bug in tracer; please report it)")
    s = runs.RunSummary([o, runs.Outcome("x.yaml", 2, error="x.yaml: no such file")])
    assert s.exit_code == 3
