"""Gemma 2's block as tracer settings: norm_order sandwich, block.attention_softcap, block.head_softcap and
mask.sliding_layers.

Checked against the independent model (tests/helpers/oracle.py: its own sandwich layer, soft caps and per-layer
mask), the scalar reference (--verify), finite differences of tracer grad, the lean backward pass (the capped
weights made again), and by what validate, graph, diff, stages and the memory estimate say.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_refused, compared, run_app, write_spec
from helpers.tracing import check_against_independent, trace_text

from tracer.compare import explain
from tracer.grad.finite_diff import verify as verify_grad
from tracer.grad.run import GradOptions, grad
from tracer.messages import render
from tracer.model.ops import OPS
from tracer.spec import load_spec_text
from tracer.spec.memory import RecordPolicy, estimate
from tracer.views import reference_check

GEMMA2 = """name: gemma 2
dims: {{B: 2, T: 6, C: 8, H: 2, H_kv: 1, F: 12, d: 6}}
seed: 5
block:
  norm_order: {order}
  layers: 3
  norm: rmsnorm_offset
  activation: geglu
  positions: rotary
  rotary_pairing: half
  embedding_scale: true
  mask: {mask}
  final_norm: true
  head: tied{extra}
input: {{tokens: [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]]}}
"""
CAPS = "\n  attention_softcap: 0.8\n  head_softcap: 1.5\n  attention_scale: 0.3"


def gemma2(order: str = "sandwich", mask: str = "{causal: true, window: 2, sliding_layers: [0, 2]}", extra: str = CAPS) -> str:
    return GEMMA2.format(order=order, mask=mask, extra=extra)


@pytest.mark.parametrize("text", [gemma2(), gemma2(extra=""), gemma2("pre"), gemma2(mask="causal"),
                                  gemma2(mask="{causal: true, window: 2}")])
def test_gemma_2s_block_matches_the_independent_model(text):
    trace = check_against_independent(text, tol=1e-12)
    assert "blocks.0.attention_norm" in trace.stages or "sandwich" not in text


def test_the_caps_bend_the_scores_and_the_logits():
    trace = trace_text(gemma2())
    scores = trace.stages["blocks.0.attn.scores"].array
    assert np.nanmax(np.abs(scores[np.isfinite(scores)])) < 0.8
    raw, logits = trace.stages["raw_logits"].array, trace.stages["logits"].array
    assert np.max(np.abs(logits)) < 1.5 and np.allclose(logits, 1.5 * np.tanh(raw / 1.5), rtol=0, atol=1e-15)
    assert "soft-capped at 0.8" in str(trace.stages["blocks.0.attn.scores"].meaning)
    assert "QK^T * 0.3" in str(trace.stages["blocks.0.attn.scores"].meaning)
    plain = trace_text(gemma2(extra=""))
    assert "raw_logits" not in plain.stages and str(plain.stages["blocks.0.attn.scores"].meaning) == "scores QK^T / sqrt(d), before the mask"


def test_only_the_sliding_layers_read_the_window():
    trace = trace_text(gemma2())
    windows = {s.name: s.window for s in trace.spec.steps if s.op == "mha"}
    assert windows == {"blocks.0.attention": 2, "blocks.1.attention": None, "blocks.2.attention": 2}
    w0, w1 = trace.stages["blocks.0.attn.weights"].array, trace.stages["blocks.1.attn.weights"].array
    assert w0[0, 0, 5, 0] == 0.0 and w1[0, 0, 5, 0] > 0.0


def test_the_scalar_reference_follows_every_choice():
    v = reference_check.verify(trace_text(gemma2()))
    assert v.plan.full and "raw_logits" in v.stages and "blocks.0.attention_norm" in v.stages
    assert v.max_abs_diff < 1e-12


@pytest.mark.parametrize("text", [gemma2(), gemma2(mask="causal")])
def test_the_gradient_agrees_with_finite_differences(text):
    check = verify_grad(grad(load_spec_text(text), GradOptions()))
    assert check.ok, [(c.weight, c.index, c.analytic, c.numeric) for c in check.failed][:5]


def test_the_lean_backward_pass_makes_the_capped_weights_again():
    """tracer grad's plain table keeps no weights: the backward pass makes the capped, masked weights again."""
    spec = load_spec_text(gemma2())
    full, lean = grad(spec, GradOptions()), grad(spec, GradOptions(internals=False))
    assert "blocks.0.attn.weights" not in lean.grads and "blocks.0.attn.weights" in full.grads
    for name, dw in full.weight_grads.items():
        assert np.allclose(dw, lean.weight_grads[name], rtol=0, atol=1e-13), name
    assert "blocks.1.attention_norm.gamma" in full.weight_grads and "blocks.2.ffn_norm.gamma" in full.weight_grads


def test_the_next_token_loss_reads_the_capped_logits():
    capped = grad(load_spec_text(gemma2()), GradOptions(loss="next-token"))
    uncapped = grad(load_spec_text(gemma2(extra="\n  attention_softcap: 0.8\n  attention_scale: 0.3")), GradOptions(loss="next-token"))
    assert capped.loss is not None and uncapped.loss is not None and abs(capped.loss.value - uncapped.loss.value) > 1e-3


@pytest.mark.parametrize("edit, fragments", [
    (("attention_softcap: 0.8", "attention_softcap: 0"), ("block.attention_softcap", "positive number")),
    (("head_softcap: 1.5", "head_softcap: true"), ("block.head_softcap", "positive number")),
    (("head: tied", "head: none"), ("block.head_softcap", "head is none")),
    (("sliding_layers: [0, 2]", "sliding_layers: [0, 3]"), ("block.mask.sliding_layers", "layer 3 is not one of the 3 layers")),
    (("sliding_layers: [0, 2]", "sliding_layers: [2, 0]"), ("block.mask.sliding_layers", "each layer once, in increasing order")),
    (("sliding_layers: [0, 2]", "sliding_layers: 0"), ("block.mask.sliding_layers", "a list of layer numbers")),
    (("window: 2, sliding_layers", "sliding_layers"), ("block.mask.sliding_layers", "the mask has no window")),
    (("norm_order: sandwich", "norm_order: sideways"), ("block.norm_order", "sandwich")),
])
def test_a_bad_gemma_2_setting_is_refused_with_its_place(tmp_path, edit, fragments):
    r = run_app("run", str(write_spec(tmp_path, gemma2().replace(*edit))))
    assert_refused(r, *fragments)


def test_an_encoder_decoder_stack_refuses_the_caps(tmp_path):
    text = """name: seq2seq
model: encoder-decoder
dims: {C: 8, H: 2, F: 12, V: 9}
encoder: {norm_order: pre, attention_softcap: 5}
decoder: {norm_order: pre, head: tied}
input: {source: [[0, 1, 2]], target: [[3, 4]]}
"""
    assert_refused(run_app("run", str(write_spec(tmp_path, text))), "encoder.attention_softcap", "decoder-only")


def test_diff_names_gemma_2s_design(tmp_path):
    a = write_spec(tmp_path, gemma2("pre", mask="causal", extra=""), "a.yaml")
    b = write_spec(tmp_path, gemma2(), "b.yaml")
    r = compared(str(a), str(b), keep_going=True)
    assert r.exit_code == 1
    fields = [s.field for s in r.settings]
    for field in ("block.norm_order", "block.attention_softcap", "block.head_softcap", "block.sliding_layers"):
        assert field in fields, (field, fields)
    words = [render(w) for w in explain.design_words(r.b.steps, r.b.settings)]
    assert "sandwich norms (each sublayer's output normalised before its residual add)" in words
    assert "scores soft-capped (cap 0.8)" in words and "logits soft-capped (cap 1.5)" in words
    assert "the window on layers 0, 2 only" in words
    doc = json.loads(run_app("diff", str(a), str(b), "--json").stdout)
    row = next(s for s in doc["structure"]["steps"] if s["name"] == "blocks.0.attention")
    assert "softcap" in row["settings_differ"]


def test_graph_stages_and_caption_show_it(tmp_path):
    path = write_spec(tmp_path, gemma2())
    g = run_app("graph", str(path))
    assert g.returncode == 0, g.stderr
    for text in ("sandwich norms", "cap · tanh(q kᵀ · 0.3 / cap), cap = 0.8", "blocks.0.attention_norm", "blocks.2.ffn_norm", "raw_logits",
                 "cap * tanh(raw_logits / cap), cap = 1.5", "sliding-window causal mask, W = 2"):
        assert text in g.stdout, text
    run = run_app("run", str(path))
    assert "mask causal (window 2 on layers 0, 2)" in run.stdout
    stages = run_app("stages", "--json")
    names = {(e["name"], e["meaning"]) for e in json.loads(stages.stdout)["stages"]}
    assert any(n == "attention_norm" for n, _ in names) and any(n == "raw_logits" for n, _ in names)
    zh = run_app("run", str(path), "--lang", "zh")
    assert "夹心归一化" in zh.stdout and "软上限" in zh.stdout


def test_the_memory_estimate_counts_the_capped_scores():
    """The attention's working memory holds a block of rows' tanh under the cap; the softcap op works in its output."""
    plain, capped = load_spec_text(gemma2(extra="")), load_spec_text(gemma2(extra="\n  attention_softcap: 0.8\n  head_softcap: 1.5"))
    step = {s.name: s for s in capped.steps}
    a, b = OPS["mha"].temporary_bytes(plain, {s.name: s for s in plain.steps}["blocks.0.attention"], 0, 768), \
        OPS["mha"].temporary_bytes(capped, step["blocks.0.attention"], 0, 768)
    assert b > a
    assert OPS["softcap"].temporary_bytes(capped, step["logits"], 768, 768) == 0
    assert estimate(capped, RecordPolicy()).total > estimate(plain, RecordPolicy()).total  # two stages more: raw_logits
