"""tracer patch: activation patching over stages x positions, each cell checked against a run of its own.

A cell is the corrupt run with the stage's value at one position taken from the clean run; its logit is computed here
again with --set (the whole corrupt stage, that position replaced), so the sweep's shortcut (starting each run at the
patched stage, the earlier stages reused) is held to the full run.  Patching the last layer's output at the last
position gives exactly the clean run's logit there.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from conftest import EXAMPLES, PRE, SPECS, assert_refused, run_app, run_cli

import tracer

CLEAN = str(EXAMPLES / "interventions" / "clean.yaml")
CORRUPT = str(EXAMPLES / "interventions" / "corrupt.yaml")


def test_every_cell_is_the_full_corrupt_run_with_that_position_set_from_the_clean_run(tmp_path):
    g = tracer.patch(CLEAN, CORRUPT, stage=["blocks.*.output", "blocks.0.attention"], token="cat")
    assert g.stages == ["blocks.0.attention", "blocks.0.output", "blocks.1.output"]
    clean, corrupt = tracer.trace(CLEAN), tracer.trace(CORRUPT)
    tok = clean.spec.vocab.index("cat")
    assert g.token == tok and g.logit_corrupt == corrupt["logits"][0, -1, tok] and g.logit_clean == clean["logits"][0, -1, tok]
    for i, name in enumerate(g.stages):
        for t in range(5):
            value = corrupt[name].copy()
            value[:, t] = clean[name][:, t]
            np.savez(tmp_path / "cell.npz", v=value)
            full = tracer.trace(CORRUPT, set=f"{name}={tmp_path}/cell.npz:v")
            assert g.logits[i, t] == full["logits"][0, -1, tok], (name, t)
            assert g.delta[i, t] == full["logits"][0, -1, tok] - corrupt["logits"][0, -1, tok]
    assert g.logits[2, 4] == clean["logits"][0, -1, tok]  # the last layer at the last position: the clean logit exactly
    assert np.all(g.delta[2, :4] == 0.0)  # the last layer's earlier positions never reach the last logit: causal


def test_the_token_defaults_to_the_clean_runs_top_next_token():
    g = tracer.patch(CLEAN, CORRUPT)
    clean = tracer.trace(CLEAN)
    assert g.token == int(np.argmax(clean["logits"][0, -1]))
    assert g.stages == ["blocks.0.output", "blocks.1.output"]


def test_table_heatmap_json_and_csv():
    r = run_app("patch", CLEAN, CORRUPT, "--token", "cat")
    assert r.returncode == 0, r.stderr
    assert "activation patching: the logit of 'cat' at b=0, t=4, patched run minus corrupt run" in r.stdout
    assert "t=2 (mat)" in r.stdout  # the positions named by the corrupt run's tokens
    assert "shade: |change| against the largest" in r.stdout and any(c in r.stdout for c in "░▒▓█")
    assert r.stdout.strip().splitlines()[-1].startswith("logit of 'cat' at b=0, t=4: clean ")
    doc = json.loads(run_app("patch", CLEAN, CORRUPT, "--token", "cat", "--json").stdout)
    g = tracer.patch(CLEAN, CORRUPT, token="cat")
    assert doc["kind"] == "patch" and doc["token"] == {"id": g.token, "text": "cat"} and doc["stages"] == g.stages
    assert len(doc["cells"]) == 2 * 5
    assert all(c["delta"] == g.delta[g.stages.index(c["stage"]), c["t"]] for c in doc["cells"])
    rows = list(csv.reader(io.StringIO(run_app("patch", CLEAN, CORRUPT, "--token", "cat", "--format", "csv").stdout)))
    assert rows[0] == ["stage", "t", "token", "logit", "delta"] and len(rows) == 11
    assert float(rows[10][4]) == g.delta[1, 4]


def test_mistakes_are_refused():
    assert_refused(run_app("patch", CLEAN, str(SPECS / "stack-2-layers.yaml")), "clean and corrupt must trace the same stages",
                   "[B,T,C] = [2,4,8]", "[B,T,C] = [1,5,8]")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--stage", "blocks.*.outptu"), "--stage blocks.*.outptu", "did you mean")
    assert_refused(run_app("patch", PRE, PRE), "needs an output head")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--token", "dog"), "--token 'dog'")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--format", "markdown"), "--format markdown")


def test_the_notebook_shows_the_grid_as_the_terminal_does():
    g = tracer.patch(CLEAN, CORRUPT, token=2)
    html = g._repr_html_()
    assert "<pre" in html and "activation patching" in html and "blocks.1.output" in html
    assert "PatchGrid 2 stages x 5 positions" in repr(g)


@pytest.mark.parametrize("args, code", [((), 0), (("--stage", "nope"), 2)])
def test_a_real_process_exits_as_documented(args, code):
    r = run_cli("patch", CLEAN, CORRUPT, *args)
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr


def test_a_violation_in_either_run_is_exit_1_and_json_says_why(tmp_path):
    text = ("name: beyond\nvocab: [a, b, c]\ndims: {C: 2, H: 2, F: 3, T_max: 3}\nseed: 1\n"
            "block: {norm_order: pre, mask: causal, head: tied, layers: 2, positions: learned}\ninput:\n  tokens: [[a, b, c, a, %s]]\n")
    (tmp_path / "a.yaml").write_text(text % "b")
    (tmp_path / "b.yaml").write_text(text % "c")
    r = run_app("patch", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"))
    assert r.returncode == 1 and "CLEAN (" in r.stderr and "position violation" in r.stderr and "Traceback" not in r.stderr
    r = run_app("patch", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["ok"] is False and doc["error"]["exit_code"] == 1
