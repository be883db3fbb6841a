"""OLMo 2's two settings: norm_order post_sublayer (a norm on each sublayer's output only) and qk_norm: projection
(q and k RMS-normalised over their whole projections before the split into heads)."""

from __future__ import annotations

import numpy as np
from conftest import assert_refused, load_text, run_app, trace_of, write_spec

from tracer.engine.params import load_params

SPEC = """dims: {C: 8, H: 2, H_kv: 1, F: 16, V: 11}
seed: 0
block:
  norm_order: post_sublayer
  norm: rmsnorm
  activation: swiglu
  positions: rotary
  rotary_pairing: half
  qk_norm: projection
  head: tied
input: {tokens: [1, 2, 3, 4, 5]}
"""


def _rms(x: np.ndarray, w: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def test_the_sublayers_read_the_stream_and_their_outputs_are_normalised():
    trace = trace_of(SPEC)
    a, p = {name: stage.array for name, stage in trace.stages.items()}, load_params(load_text(SPEC))
    assert "norm1" not in a and "norm2" not in a
    assert np.allclose(a["attention_norm"], _rms(a["attention"], p["attention_norm.gamma"]), rtol=0, atol=1e-14)
    assert np.array_equal(a["residual1"], a["x"] + a["attention_norm"])
    assert np.allclose(a["ffn_norm"], _rms(a["ffn"], p["ffn_norm.gamma"]), rtol=0, atol=1e-14)


def test_q_and_k_are_normalised_over_their_whole_projections():
    spec = load_text(SPEC)
    assert spec.weights["attn.q_norm"].shape == (8,) and spec.weights["attn.k_norm"].shape == (4,)  # [C], [C_kv]: not [d]
    plain = SPEC.replace("positions: rotary\n  rotary_pairing: half\n", "positions: none\n")
    trace = trace_of(plain)
    p, x = load_params(load_text(plain)), trace.stages["x"].array
    q = _rms(x @ p["attn.w_q"] + p["attn.b_q"], p["attn.q_norm"])  # [B,T,C]: the norm over all of q's columns, then the heads
    assert np.allclose(trace.stages["attn.q"].array, q.reshape(1, 5, 2, 4).transpose(0, 2, 1, 3), rtol=0, atol=1e-14)


def test_a_per_head_sized_weight_is_refused_and_the_order_is_for_a_decoder_only_block(tmp_path):
    given = SPEC + "weights:\n  attn:\n    q_norm: [1, 1, 1, 1]\n"
    assert_refused(run_app("run", str(write_spec(tmp_path, given))), "q_norm")
    seq2seq = ("model: encoder-decoder\ndims: {C: 8, H: 2, F: 16, V: 11}\nseed: 0\nencoder: {norm_order: post_sublayer}\n"
               "decoder: {head: tied}\ninput: {source: [1, 2], target: [3, 4]}\n")
    assert_refused(run_app("run", str(write_spec(tmp_path, seq2seq, "s.yaml"))), "norm_order")
