"""tracer probe --exact: causality proved with the backward pass."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, PRE, SPECS, run_app

from tracer.probe import exact
from tracer.probe.result import FAIL, NOT_APPLICABLE, PASS
from tracer.spec import load_spec, load_spec_text

VIOLATIONS = EXAMPLES / "violations"


@pytest.mark.parametrize("name, stage", [
    ("ex3-layernorm-over-positions.yaml", "norm1"),  # LayerNorm over T: the mask is right and still position 0 reads 1
    ("softmax-over-queries.yaml", "attn.weights"),
])
def test_catches_the_leaking_examples(name, stage):
    r = run_app("probe", str(VIOLATIONS / name), "--exact", "--json")
    assert r.returncode == 1
    p = json.loads(r.stdout)["properties"][0]
    assert (p["name"], p["result"], p["stage"], p["position"]) == ("causality", FAIL, stage, 0)
    assert "is not zero" in p["evidence"]


def test_batchnorm_leaks():
    p = exact.causality(load_spec(str(SPECS / "variants" / "batchnorm.yaml")))
    assert p.result == FAIL and p.stage in ("norm1", "norm2")


@pytest.mark.parametrize("name", ["ch17-prenorm.yaml", "ch17-postnorm.yaml", "stack-2-layers.yaml", "encoder-decoder.yaml",
                                  "variants/rotary.yaml", "variants/grouped-query.yaml"])
def test_causal_specs_are_proved(name):
    p = exact.causality(load_spec(str(SPECS / name)))
    assert p.result == PASS and "exactly 0.0" in p.evidence and "all " in p.evidence


def test_examples_that_do_not_leak_pass():
    for name in ("ex5-residual-broadcast.yaml", "beta-typo.yaml", "position-beyond-table.yaml"):
        assert exact.causality(load_spec(str(VIOLATIONS / name))).result == PASS, name


def test_no_mask_is_not_applicable():
    spec = load_spec_text("dims: {T: 3, C: 4, H: 2, F: 6}\nseed: 1\nblock: {mask: none}\ninput: {x: random}\n")
    assert exact.causality(spec).result == NOT_APPLICABLE


def test_a_big_spec_is_checked_on_a_sample_and_says_so(monkeypatch):
    monkeypatch.setattr(exact, "MAX_PASSES", 6)
    p = exact.causality(load_spec(str(SPECS / "stack-2-layers.yaml")))
    assert p.result == PASS and "sampled" in p.evidence
    monkeypatch.setattr(exact, "MAX_PASSES", 1)
    assert exact.causality(load_spec(str(VIOLATIONS / "ex3-layernorm-over-positions.yaml"))).result == FAIL


def test_table_output_and_exit_code():
    r = run_app("probe", PRE, "--exact")
    assert r.returncode == 0 and "backward passes" in r.stdout
