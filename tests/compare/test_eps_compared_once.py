"""A norm's eps is on its step and is its stack's setting: tracer diff names a different eps once, as block.eps (or
encoder.eps), never again on each norm step; a step whose eps is not its stack's (a hand-edited trace) is named."""

from __future__ import annotations

import json

from conftest import PRE, PRE_TEXT, SPECS, run_app, write_spec


def _diff(*args: str) -> dict:
    r = run_app("diff", *args, "--json")
    assert r.returncode in (0, 1), r.stderr[-2000:]
    return json.loads(r.stdout)


def test_a_different_eps_is_one_setting_and_no_step_differs(tmp_path):
    other = write_spec(tmp_path, PRE_TEXT.replace("  eps: 1e-5\n", "  eps: 1e-6\n"), "eps.yaml")
    doc = _diff(PRE, str(other))
    assert doc["settings"]["differences"] == [{"field": "block.eps", "a": 1e-05, "b": 1e-06}]
    assert doc["structure"]["same"] and doc["structure"]["differences"] == []
    for row in doc["structure"]["steps"]:
        assert "eps" not in row["a"]["settings"] and not row["settings_differ"], row


def test_an_encoders_eps_is_named_as_the_encoders(tmp_path):
    text = (SPECS / "encoder-decoder.yaml").read_text(encoding="utf-8")
    other = write_spec(tmp_path, text.replace("encoder: {layers: 1,", "encoder: {eps: 1e-3, layers: 1,"), "ed.yaml")
    doc = _diff(str(SPECS / "encoder-decoder.yaml"), str(other))
    assert [d["field"] for d in doc["settings"]["differences"]] == ["encoder.eps"] and doc["structure"]["same"]


def test_a_saved_trace_compares_as_its_spec(tmp_path):
    saved = tmp_path / "pre.json"
    saved.write_text(run_app("run", PRE, "--json").stdout, encoding="utf-8")
    assert _diff(str(saved), PRE)["structure"]["same"]
    other = write_spec(tmp_path, PRE_TEXT.replace("  eps: 1e-5\n", "  eps: 1e-6\n"), "eps.yaml")
    doc = _diff(str(saved), str(other))
    assert [d["field"] for d in doc["settings"]["differences"]] == ["block.eps"] and doc["structure"]["same"]


def test_a_step_eps_that_is_not_its_stacks_is_named(tmp_path):
    doc = json.loads(run_app("run", PRE, "--json").stdout)
    norm2 = next(s for s in doc["steps"] if s["name"] == "norm2")
    norm2["eps"] = 1e-3  # a hand-edited trace: this norm computed with another eps than its block's
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc), encoding="utf-8")
    result = _diff(PRE, str(edited))
    row = next(r for r in result["structure"]["steps"] if r["name"] == "norm2")
    assert row["settings_differ"] == ["eps"] and row["status"] == "differs"
    assert any("eps: " in line for line in result["structure"]["differences"])
