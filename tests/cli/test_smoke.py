"""The chapter's worked example through the installed command: the first acceptance test."""

import json

from conftest import PRE_REL, run_cli


def test_prenorm_table_and_y():
    r = run_cli("run", PRE_REL)
    assert r.returncode == 0, r.stderr
    assert "[1.999980, 2.999940]" in r.stdout
    assert "t=1: [0.999912, 1.476742]" in r.stdout
    assert "t=2: [2.999964, 3.746396]" in r.stdout
    assert "\x1b[" not in r.stdout  # piped: no colour codes


def test_prenorm_json_output_stage():
    r = run_cli("run", PRE_REL, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    out = next(s for s in doc["stages"] if s["name"] == "output")
    assert [round(v, 6) for v in out["values"][0][1]] == [0.999912, 1.476742]
