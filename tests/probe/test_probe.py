"""`tracer probe`: causality (perturb the positions after t) and permutation equivariance (Example 17.1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SPECS, run_app, run_cli, write_spec
from helpers.cases import random_case

from tracer.probe import properties as probe
from tracer.spec import load_spec_text

LEAK = """\
name: LayerNorm over positions
dims: {B: 2, T: 5, C: 16, H: 2, F: 64}
seed: 3
input: {x: random}
block:
  mask: %(mask)s
  steps:
    - {name: norm1, op: layer_norm, in: x, weights: norm1, axis: %(axis)s}
    - {name: attention, op: mha, in: norm1, weights: attn}
    - {name: residual1, op: add, in: [x, attention]}
    - {name: norm2, op: layer_norm, in: residual1, weights: norm2}
    - {name: ffn, op: ffn, in: norm2, weights: ffn}
    - {name: output, op: add, in: [residual1, ffn]}
"""


def props(doc: dict) -> dict[str, dict]:
    return {p["name"]: p for p in doc["properties"]}


def test_probe_catches_the_layer_norm_over_positions_leak(tmp_path):
    write_spec(tmp_path, LEAK % {"mask": "causal", "axis": "T"})
    r = run_app("probe", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    c = props(doc)["causality"]
    assert (c["result"], c["stage"], c["position"]) == ("fail", "norm1", 0)
    assert c["evidence"].startswith("perturbing positions 1..4 changed stage norm1 at position 0 by up to ")
    assert c["evidence"].endswith("position 0 depends on later ones, although the mask is causal")
    # the leak is real: an LN over T at position 0 reads all five positions
    assert props(doc)["permutation equivariance"]["result"] == "pass"

    table = run_app("probe", "spec.yaml", cwd=tmp_path)
    assert table.returncode == 1
    row = next(line for line in table.stdout.splitlines() if line.startswith("│ causality"))
    assert [c.strip() for c in row.strip("│").split("│")][:2] == ["causality", "fail"]
    assert run_app("probe", "spec.yaml", "--exit-zero", cwd=tmp_path).returncode == 0


def test_probe_passes_the_same_block_with_layer_norm_over_C(tmp_path):
    write_spec(tmp_path, LEAK % {"mask": "causal", "axis": "C"})
    doc = json.loads(run_app("probe", "spec.yaml", "--json", cwd=tmp_path).stdout)
    assert doc["ok"] is True
    c = props(doc)["causality"]
    assert c["result"] == "pass" and c["stage"] is None
    assert "checked t = 0, 1, 2, 3" in c["evidence"]


@pytest.mark.parametrize("spec", ["ch17-prenorm.yaml", "ch17-postnorm.yaml"])
def test_probe_passes_the_chapter_specs(spec):
    r = run_cli("probe", str(SPECS / spec), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True
    assert {n: p["result"] for n, p in props(doc).items()} == {"causality": "pass", "permutation equivariance": "pass"}


def test_softmax_over_queries_leaks_the_future():
    spec = load_spec_text((LEAK % {"mask": "causal", "axis": "C"}).replace("weights: attn}", "weights: attn, axis: queries}"))
    c = probe.causality(spec)
    # query i < t reads key j <= i, but the column of key j is normalised over every later query as well
    assert (c.result, c.stage, c.position) == ("fail", "attn.weights", 0)


def test_layer_norm_over_B_does_not_leak_positions():
    spec = load_spec_text(LEAK % {"mask": "causal", "axis": "B"})
    assert probe.causality(spec).result == "pass"


def test_causality_is_not_applicable_without_a_causal_mask(tmp_path):
    write_spec(tmp_path, LEAK % {"mask": "none", "axis": "T"})
    r = run_app("probe", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0
    c = props(json.loads(r.stdout))["causality"]
    assert c["result"] == "not applicable" and "mask is none" in c["evidence"]


SELECT_T = """\
dims: {B: 2, T: 4, C: 4, H: 2, F: 6}
seed: 9
input: {x: random}
block:
  mask: %(mask)s
  steps:
    - {name: norm1, op: layer_norm, in: x, weights: norm1}
    - {name: row, op: select, in: norm1, axis: T, index: %(index)d}
    - {name: shifted, op: add, in: [x, row]}
    - {name: attention, op: mha, in: shifted, weights: attn}
    - {name: output, op: add, in: [shifted, attention]}
"""


def test_permutation_equivariance_fails_when_one_position_is_added_to_all(tmp_path):
    # Every position gets row 0's LayerNorm added: moving the rows moves which row that is.
    write_spec(tmp_path, SELECT_T % {"mask": "none", "index": 0})
    r = run_app("probe", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    p = props(json.loads(r.stdout))["permutation equivariance"]
    assert (p["result"], p["stage"]) == ("fail", "shifted")
    assert p["evidence"].startswith("with positions and mask removed, moving row 3 of X to the front did not move stage shifted")


@pytest.mark.parametrize("index, result, stage", [(0, "pass", None), (2, "fail", "shifted")])
def test_causality_of_a_selected_position(index, result, stage):
    # Adding position 0 to every position reads only the past; adding position 2 lets 0 and 1 read the future.
    c = probe.causality(load_spec_text(SELECT_T % {"mask": "causal", "index": index}))
    assert (c.result, c.stage) == (result, stage)


def test_probe_with_positions_beyond_the_table_probes_the_traced_positions(tmp_path):
    # Regression: exit 3 (a [5,5] mask against [3,3] scores).
    text = """dims: {C: 2, H: 2, F: 3}
block: {norm_order: pre, mask: causal}
input: {tokens: [0, 1, 2, 0, 1]}
weights: {embedding: [[1, 0], [0, 1], [1, 1]], position: [[0, 0], [0, 1], [1, 0]]}
seed: 0
"""
    write_spec(tmp_path, text)
    r = run_app("probe", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    c = props(json.loads(r.stdout))["causality"]
    assert c["result"] == "pass" and "checked t = 0, 1;" in c["evidence"]


# -- no false alarms on random valid blocks --------------------------------------------------------
@pytest.mark.parametrize("seed", range(40))
def test_random_valid_causal_block_passes_both_properties(seed):
    case = random_case(500 + seed, mask="causal")
    spec = load_spec_text(case["text"])
    if spec.dims.T == 1:
        assert probe.causality(spec).result == "not applicable"
        return
    c, p = probe.probe(spec)
    assert c.result == "pass", c.evidence
    assert p.result == "pass", p.evidence


@pytest.mark.parametrize("seed", range(20))
def test_random_seeded_spec_with_tokens_and_learned_positions_is_clean(seed):
    rnd = np.random.default_rng(seed)
    H, d = int(rnd.integers(1, 4)), int(rnd.integers(1, 4))
    B, T, F, V = int(rnd.integers(1, 4)), int(rnd.integers(2, 7)), int(rnd.integers(1, 9)), int(rnd.integers(2, 9))
    order = ["pre", "post"][seed % 2]
    text = (f"dims: {{B: {B}, T: {T}, C: {H * d}, H: {H}, F: {F}, V: {V}, T_max: {T + seed % 3}}}\n"
            f"seed: {seed}\ninput: {{tokens: random}}\n"
            f"block: {{norm_order: {order}, mask: causal, positions: learned, final_norm: {str(seed % 3 == 0).lower()}}}\n")
    from tracer.engine import executor

    spec = load_spec_text(text)
    trace = executor.run(spec)
    assert trace.violations == [], [v.message for v in trace.violations]
    assert probe.causality(spec).result == "pass"


# -- a probe that cannot measure says so -------------------------------------------------------
NAN_ROW = """\
dims: {C: 2, H: 2, F: 3}
input: {x: [[1, 2], [%s, %s], [3, -1]]}
allow_nonfinite: true
seed: 0
block:
  steps:
    - {name: n, op: layer_norm, in: x, weights: n, axis: T}
"""


def test_a_nan_row_makes_the_probe_unable_to_measure_not_pass(tmp_path):
    spec = write_spec(tmp_path, NAN_ROW % (".nan", ".nan"))
    r = run_app("probe", str(spec), "--json")
    assert r.returncode == 2, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert not doc["ok"]
    assert {p["name"]: p["result"] for p in doc["properties"]} == {"causality": "cannot measure", "permutation equivariance": "cannot measure"}
    assert props(doc)["causality"]["stage"] == "n"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracer: error: ") and "cannot measure" in lines[0], r.stderr
    assert run_app("probe", str(spec), "--exit-zero").returncode == 2  # not a failure to excuse: nothing was measured
    text = run_app("probe", str(spec))
    assert text.returncode == 2 and "cannot measure" in text.stdout


def test_without_the_nan_the_same_block_fails(tmp_path):
    r = run_app("probe", str(write_spec(tmp_path, NAN_ROW % ("0.5", "7"))), "--json")
    assert r.returncode == 1 and props(json.loads(r.stdout))["causality"]["result"] == "fail"


def test_a_nan_in_one_run_only_is_a_change():
    a = np.array([1.0, np.nan, np.inf, np.nan])
    b = np.array([1.0, 2.0, np.inf, np.nan])
    with np.errstate(invalid="ignore"):
        assert probe._compare(a, b) == (np.inf, 1)
        assert probe._compare(a[[0, 2, 3]], a[[0, 2, 3]]) == (0.0, 1)


def test_no_numpy_warning_reaches_stderr(tmp_path):
    spec = write_spec(tmp_path, NAN_ROW % (".nan", ".nan"))
    r = run_app("probe", str(spec))
    assert r.returncode == 2
    assert "Warning" not in r.stderr and "All-NaN" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


WINDOW = "{causal: true, window: 2}"


@pytest.mark.parametrize("exact", [False, True])
def test_a_sliding_window_is_causal_and_a_leak_under_it_is_caught(tmp_path, exact):
    """A window hides earlier keys too, but never a later one: causality holds, empirically and by the backward pass;
    a LayerNorm over T under the same window still leaks the future, and is caught at position 0."""
    flags = ["--exact"] if exact else []
    write_spec(tmp_path, LEAK % {"mask": WINDOW, "axis": "C"})
    r = run_app("probe", "spec.yaml", "--json", *flags, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert props(json.loads(r.stdout))["causality"]["result"] == "pass"
    write_spec(tmp_path, LEAK % {"mask": WINDOW, "axis": "T"})
    r = run_app("probe", "spec.yaml", "--json", *flags, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    c = props(json.loads(r.stdout))["causality"]
    assert (c["result"], c["stage"]) == ("fail", "norm1")
    assert c["position"] == 0 or exact  # --exact names the first position whose gradient is not zero


def test_a_window_the_other_way_would_be_caught(tmp_path, monkeypatch):
    """If the window were applied to the later keys (a mask reading t..t + W - 1), causality would fail: the probe
    measures the mask, it does not take the word for it."""
    from tracer.model import masks

    real = masks.visible
    monkeypatch.setattr(masks, "visible", lambda kind, n_q, n_k=None, window=None, explicit=None:
                        real(kind, n_q, n_k, window, explicit).T if window is not None else real(kind, n_q, n_k, window, explicit))
    write_spec(tmp_path, LEAK % {"mask": WINDOW, "axis": "C"})
    r = run_app("probe", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 1 and props(json.loads(r.stdout))["causality"]["result"] == "fail", r.stdout


LOWER = "[[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]"
WINDOW_MATRIX = "[[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]"
AHEAD = "[[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]"


@pytest.mark.parametrize("mask", [LOWER, WINDOW_MATRIX])
def test_causality_is_probed_on_an_explicit_lower_triangular_mask(tmp_path, mask):
    """An explicit matrix with nothing above the diagonal is causal: probed, both ways, as mask: causal is."""
    from tracer.probe import exact

    write_spec(tmp_path, LEAK % {"mask": mask, "axis": "C"})
    r = run_app("probe", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout
    assert props(json.loads(r.stdout))["causality"]["result"] == "pass"
    leaky = load_spec_text(LEAK % {"mask": mask, "axis": "T"})  # LayerNorm over T leaks whatever the mask
    assert probe.causality(leaky).result == "fail" and exact.causality(leaky).result == "fail"


def test_an_explicit_mask_that_reads_ahead_is_not_causal(tmp_path):
    write_spec(tmp_path, LEAK % {"mask": AHEAD, "axis": "C"})
    c = props(json.loads(run_app("probe", "spec.yaml", "--json", cwd=tmp_path).stdout))["causality"]
    assert c["result"] == "not applicable" and "lets position 0 read the later position 1" in c["evidence"]
