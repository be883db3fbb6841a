"""A mixture of experts (block ffn: {experts: E, top_k: k}): the router, its softmax over the experts, the top-k gates
and the expert mix, against the oracle's dense MoE (every expert on every position, the gates picked one by one);
the kernels against the scalar reference (--verify); the slip of a router softmax over the positions flagged as an
axis violation, before the run (validate) and in it; the spec's errors one line each."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLES, assert_refused, run_app, write_spec
from helpers import oracle

from tracer.engine.params import load_params
from tracer.spec import load_spec_text

MOE = """\
dims: {B: 2, T: 5, C: 8, H: 2, F: 6}
seed: 7
input: {x: random}
block: {norm: rmsnorm, layers: 2, positions: rotary, ffn: {experts: %(E)d, top_k: %(k)d}}
"""


def _stages(tmp_path, text: str) -> dict[str, np.ndarray]:
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", "--json", "--all", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}


@pytest.mark.parametrize("E, k", [(4, 2), (3, 1), (3, 3), (1, 1)])
def test_the_moe_stages_are_the_oracles(tmp_path, E, k):
    text = MOE % {"E": E, "k": k}
    st = _stages(tmp_path, text)
    p = load_params(load_spec_text(text))
    for i in range(2):
        g = f"blocks.{i}.moe"
        experts = [{w: p[f"{g}.{w}_{e}"] for w in ("w1", "w3", "w2")} for e in range(E)]
        want = oracle.moe(st[f"blocks.{i}.norm2"], p[f"{g}.router"], experts, k)
        assert st[f"{g}.router.logits"].shape == (2, 5, E)
        for stage, key in (("router.logits", "logits"), ("router.weights", "weights"), ("chosen", "chosen"), ("", "output")):
            name = f"{g}.{stage}" if stage else g
            assert np.max(np.abs(st[name] - want[key])) <= 1e-14, name
        assert np.all((st[f"{g}.chosen"] > 0).sum(axis=-1) == k)
        assert np.array_equal(st[f"blocks.{i}.output"], st[f"blocks.{i}.residual1"] + st[g])


def test_moe_kernels_agree_with_the_scalar_reference(tmp_path):
    write_spec(tmp_path, MOE % {"E": 4, "k": 2})
    r = run_app("run", "spec.yaml", "--verify", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "verify: largest |NumPy - reference|" in r.stdout


def test_the_moe_table_and_the_stages_it_names(tmp_path):
    write_spec(tmp_path, MOE % {"E": 4, "k": 2})
    r = run_app("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ("blocks.0.moe.router.logits", "blocks.0.moe.router.weights", "blocks.0.moe.chosen", "blocks.1.moe "):
        assert name in r.stdout
    assert "E = 4" in r.stdout


def test_grad_verify_agrees_with_finite_differences_away_from_ties(tmp_path):
    write_spec(tmp_path, MOE % {"E": 4, "k": 2})
    r = run_app("grad", "spec.yaml", "--verify", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "all agree" in r.stdout and "moe.w1_3" in r.stdout


def test_a_router_softmax_over_positions_is_an_axis_violation(tmp_path):
    trap = EXAMPLES / "violations" / "router-softmax-over-positions.yaml"
    r = run_app("run", str(trap), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["violations"] == [{"kind": "axis", "stage": "gates", "shapes": {"logits": "[B,T,E] = [1,4,3]"},
                                  "message": "gates: router softmax taken over positions (axis T) instead of experts (axis E)"}]
    gates = np.array(next(s["values"] for s in doc["stages"] if s["name"] == "gates"))
    assert np.allclose(gates.sum(axis=-2), 1.0) and not np.allclose(gates.sum(axis=-1), 1.0)  # NumPy's columns
    v = run_app("validate", str(trap))
    assert v.returncode == 1 and "router softmax taken over positions" in v.stdout + v.stderr
    fixed = trap.read_text().replace("axis: T", "axis: E")
    write_spec(tmp_path, fixed)
    clean = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
    assert clean.returncode == 0 and json.loads(clean.stdout)["violations"] == []


@pytest.mark.parametrize("block, fragment", [
    ("{ffn: {experts: 2, top_k: 3}}", "block.ffn.top_k: top_k = 3 chooses more experts than there are (experts = 2)"),
    ("{ffn: {experts: 2}}", "block.ffn: a mixture of experts needs top_k"),
    ("{ffn: {experts: 0, top_k: 1}}", "block.ffn.experts: expected a whole number from 1 to 1,024"),
    ("{ffn: {experts: 2, top_k: 1, bias: true}}", "unknown key 'bias'"),
    ("{norm_order: post, ffn: {experts: 2, top_k: 1}}", "a mixture of experts is in the pre-norm block"),
    ("{norm_order: parallel, ffn: {experts: 2, top_k: 1}}", "a mixture of experts is in the pre-norm block"),
    ("{activation: relu, ffn: {experts: 2, top_k: 1}}", "each expert is a SwiGLU FFN"),
])
def test_a_wrong_ffn_setting_is_one_line(tmp_path, block, fragment):
    text = "dims: {B: 1, T: 2, C: 4, H: 2, F: 4}\nseed: 0\ninput: {x: random}\nblock: " + block + "\n"
    write_spec(tmp_path, text)
    assert_refused(run_app("run", "spec.yaml", cwd=tmp_path), fragment)


def test_moe_weights_can_be_given_by_hand(tmp_path):
    text = ("dims: {B: 1, T: 2, C: 2, H: 1, F: 2}\nseed: 0\ninput: {x: [[[1, 0], [0, 1]]]}\n"
            "block: {ffn: {experts: 2, top_k: 1}}\n"
            "weights:\n  moe: {router: [[1, 0], [0, 1]], w1_0: identity, w3_0: identity, w2_0: identity,"
            " w1_1: identity, w3_1: identity, w2_1: [[2, 0], [0, 2]]}\n")
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    st = {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}
    n2 = st["norm2"][0]
    chosen = np.argmax(n2, axis=-1)  # router = identity: the larger coordinate picks the expert
    assert np.array_equal(np.argmax(st["moe.chosen"][0], axis=-1), chosen)
    h = oracle.silu(n2) * n2
    want = np.where(chosen[:, None] == 1, 2 * h, h)
    assert np.max(np.abs(st["moe"][0] - want)) <= 1e-15


def test_stages_graph_and_diff_name_the_moe(tmp_path):
    r = run_app("stages", "blocks.3.moe.router.weights")
    assert r.returncode == 0 and "softmax over the experts" in r.stdout and "[B,T,E]" in r.stdout
    write_spec(tmp_path, MOE % {"E": 3, "k": 2})
    g = run_app("graph", "spec.yaml", cwd=tmp_path)
    assert g.returncode == 0, g.stderr
    assert "softmax(blocks.0.moe.router.logits) over E" in g.stdout and "blocks.0.moe.router [C,E] = [8,3]" in g.stdout
    (tmp_path / "k1.yaml").write_text(MOE % {"E": 3, "k": 1})
    d = run_app("diff", "spec.yaml", "k1.yaml", cwd=tmp_path)
    assert d.returncode == 1 and "block.top_k" in d.stdout


def test_the_table_names_the_experts_chosen_at_the_traced_position(tmp_path):
    write_spec(tmp_path, MOE % {"E": 4, "k": 2})
    r = run_app("run", "spec.yaml", "--pos", "3", "--batch", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    js = {s["name"]: np.array(s["values"]) for s in json.loads(run_app("run", "spec.yaml", "--json", cwd=tmp_path).stdout)["stages"]}
    parts = []
    for i in range(2):
        g = js[f"blocks.{i}.moe.chosen"][1, 3]
        order = sorted(np.flatnonzero(g), key=lambda e: (-g[e], e))
        parts.append(f"blocks.{i}.moe.chosen " + ", ".join(f"{e} ({g[e]:.2f})" for e in order))
    assert "experts chosen at b=1, t=3: " + "; ".join(parts) in r.stdout
