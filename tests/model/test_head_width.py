"""A head width set apart from C / H (dims.d, LLaMA's and Qwen3's head_dim): no torch needed.

tracer is checked against the independent model (tests/helpers/oracle.py reads d from W_Q's columns), against the
scalar reference (--verify), and by the shapes and messages every command shows.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_refused, compared, run_app, where, write_spec
from helpers.tracing import check_against_independent, trace_text

from tracer.spec import load_spec_text
from tracer.spec.memory import RecordPolicy, estimate
from tracer.views import reference_check as verify

HEAD_WIDTH = """name: head width
dims: {{B: 2, T: 5, C: 10, H: 4, {kv}d: {d}, F: 12}}
seed: 5
block: {{norm: rmsnorm, positions: {positions}, activation: swiglu, final_norm: true, head: tied, layers: 2,
        norm_order: {order}{extra}}}
input: {{tokens: [[0, 1, 2, 3, 4], [5, 4, 3, 2, 1]]}}
"""


def head_width(d: int = 6, H_kv: int | None = None, order: str = "pre", positions: str = "rotary", extra: str = "") -> str:
    kv = f"H_kv: {H_kv}, " if H_kv is not None else ""
    return HEAD_WIDTH.format(kv=kv, d=d, order=order, positions=positions, extra=extra)


@pytest.mark.parametrize("H_kv", [None, 2, 1])
@pytest.mark.parametrize("order", ["pre", "post", "parallel"])
def test_a_head_width_apart_from_c_over_h_matches_the_independent_model(H_kv, order):
    # C = 10 is not a multiple of H = 4: with d given it need not be
    trace = check_against_independent(head_width(6, H_kv, order, extra=", rotary_pairing: half"), tol=1e-12)
    B, H, T, d = 2, 4, 5, 6
    assert trace.stages["blocks.0.attn.q"].array.shape == (B, H, T, d)
    assert trace.stages["blocks.1.attn.k"].array.shape == (B, H_kv or H, T, d)
    assert trace.stages["blocks.0.attn.heads"].array.shape == (B, T, H * d)
    assert trace.stages["blocks.0.attention"].array.shape == (B, T, 10)
    w = trace.spec.weights
    assert (w["blocks.0.attn.w_q"].axes, w["blocks.0.attn.w_q"].shape) == (("C", "C_q"), (10, 24))
    assert (w["blocks.0.attn.w_k"].axes, w["blocks.0.attn.w_k"].shape) == (("C", "C_kv"), (10, (H_kv or H) * d))
    assert (w["blocks.0.attn.w_o"].axes, w["blocks.0.attn.w_o"].shape) == (("C_q", "C"), (24, 10))
    assert (w["blocks.0.attn.b_q"].axes, w["blocks.0.attn.b_v"].axes) == (("C_q",), ("C_kv",))


@pytest.mark.parametrize("d", [2, 6, 8])
def test_the_scores_are_scaled_by_one_over_the_root_of_d(d):
    trace = trace_text(head_width(d, positions="none"))
    q, k = trace.stages["blocks.0.attn.q"].array, trace.stages["blocks.0.attn.k"].array
    assert np.allclose(trace.stages["blocks.0.attn.scores"].array, q @ k.transpose(0, 1, 3, 2) / np.sqrt(d), rtol=0, atol=1e-13)


@pytest.mark.parametrize("H_kv", [None, 2])
def test_the_scalar_reference_follows_a_head_width_of_its_own(H_kv):
    trace = trace_text(head_width(6, H_kv))
    v = verify.verify(trace)
    assert v.plan.full and any(name.endswith(".k") for name in v.stages)
    assert v.max_abs_diff < 1e-13


def test_d_equal_to_c_over_h_is_the_plain_heads():
    plain = load_spec_text("dims: {C: 8, H: 2, F: 6}\nseed: 0\ninput: {tokens: [[0, 1]]}\n")
    given = load_spec_text("dims: {C: 8, H: 2, d: 4, F: 6}\nseed: 0\ninput: {tokens: [[0, 1]]}\n")
    assert given.dims == plain.dims and given.dims.as_dict() == plain.dims.as_dict()
    assert given.weights["attn.w_q"].axes == ("C", "C")
    assert "C_q" not in given.dims.as_dict()


def test_the_dims_say_the_widths(tmp_path):
    spec = load_spec_text(head_width(6, 2))
    assert spec.dims.as_dict() == {"B": 2, "T": 5, "C": 10, "H": 4, "H_kv": 2, "F": 12, "V": 6, "d": 6, "C_q": 24, "C_kv": 12}
    path = write_spec(tmp_path, head_width(6, 2))
    r = run_app("run", str(path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["dims"]["d"] == 6 and doc["dims"]["C_q"] == 24 and doc["dims"]["C_kv"] == 12
    r = run_app("run", str(path), "--json", "--all")
    assert r.returncode == 0, r.stderr
    heads = next(s for s in json.loads(r.stdout)["stages"] if s["name"] == "blocks.0.attn.heads")
    assert heads["axes"] == ["B", "T", "C_q"] and heads["shape"] == [2, 5, 24]


def test_h_must_divide_c_only_without_d(tmp_path):
    r = run_app("run", str(write_spec(tmp_path, "dims: {C: 10, H: 4, F: 6}\nseed: 0\ninput: {tokens: [[0, 1]]}\n")))
    assert_refused(r, "dims.H: H = 4 must divide C = 10")
    r = run_app("validate", str(write_spec(tmp_path, "dims: {C: 10, H: 4, d: 3, F: 6}\nseed: 0\ninput: {tokens: [[0, 1]]}\n")))
    assert r.returncode == 0, r.stderr


def test_an_odd_head_width_under_rotary_positions_is_refused_at_dims_d(tmp_path):
    text = head_width(5)
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert_refused(r, f"spec.yaml:{where(text, '5, F')}: dims.d: rotary positions rotate pairs of coordinates: d = 5 must be even")


@pytest.mark.parametrize("key, given, want", [
    ("w_q", "[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]", "[C,C_q] = [4,6], received [4,4]"),
    ("w_o", "[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]", "[C_q,C] = [6,4], received [4,4]"),
    ("w_k", "[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]", "[C,C_kv] = [4,6], received [4,4]"),
    ("b_q", "[0, 0, 0, 0]", "[C_q] = [6], received [4]"),
])
def test_a_weight_of_the_plain_width_is_refused_naming_the_shape_expected(tmp_path, key, given, want):
    text = f"dims: {{C: 4, H: 2, d: 3, F: 6}}\nseed: 0\nweights:\n  attn:\n    {key}: {given}\ninput: {{tokens: [[0, 1, 2]]}}\n"
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert_refused(r, f"spec.yaml:{where(text, given[:4])}: weights.attn.{key}: expected {want}")


def test_graph_and_stages_show_the_widths(tmp_path):
    path = write_spec(tmp_path, head_width(6, 2))
    graph = run_app("graph", str(path))
    assert graph.returncode == 0, graph.stderr
    assert "d = 6, C_q = 24, C_kv = 12" in graph.stdout
    assert "[C,C_q] = [10,24]" in graph.stdout and "[C_q,C] = [24,10]" in graph.stdout and "[B,T,C_q] = [2,5,24]" in graph.stdout
    stages = run_app("stages")
    assert "[B,T,C_q]" in stages.stdout and "C_q = H * d" in stages.stdout


def test_the_memory_estimate_counts_the_wider_heads():
    narrow = load_spec_text(head_width(2, positions="none"))
    wide = load_spec_text(head_width(64, positions="none"))
    a, b = estimate(narrow, RecordPolicy()), estimate(wide, RecordPolicy())
    heads = 2 * 5 * 4 * 64 * 8  # one [B,T,H*d] float64 array
    assert b.recorded - a.recorded >= heads and b.working >= heads


def test_diff_names_the_head_width(tmp_path):
    a = write_spec(tmp_path, head_width(6, positions="none"), "a.yaml")
    b = write_spec(tmp_path, head_width(8, positions="none"), "b.yaml")
    r = compared(str(a), str(b), keep_going=True)
    assert r.exit_code == 1
    assert "dims.d" in [s.field for s in r.settings]


def test_grad_verify_on_a_head_width_of_its_own(tmp_path):
    r = run_app("grad", str(write_spec(tmp_path, head_width(6, 2))), "--verify")
    assert r.returncode == 0, r.stderr
    assert "all agree" in r.stdout and "[C,C_q] = [10,24]" in r.stdout
