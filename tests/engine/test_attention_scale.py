"""block.attention_scale: the scores are QK^T * s instead of QK^T / sqrt(d) (T5: s = 1; Gemma 2: query_pre_attn_scalar ** -0.5).

Checked against the independent model (tests/helpers/oracle.py, its own ``scale``), the scalar reference (--verify),
finite differences of tracer grad, the lean backward pass, and by what validate, graph, diff and the memory estimate say.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import assert_refused, compared, run_app, write_spec
from helpers.tracing import check_against_independent, trace_text

from tracer.compare import explain
from tracer.grad.finite_diff import verify as verify_grad
from tracer.grad.run import GradOptions, grad
from tracer.messages import render
from tracer.spec import load_spec_text
from tracer.spec.memory import RecordPolicy, estimate
from tracer.views import reference_check

DECODER = """name: scaled
dims: {{B: 2, T: 5, C: 8, H: 2, F: 12}}
seed: 3
block: {{norm_order: {order}, layers: 2, norm: rmsnorm, head: tied, final_norm: true{extra}}}
input: {{tokens: [[0, 1, 2, 3, 4], [5, 4, 3, 2, 1]]}}
"""

SEQ2SEQ = """name: scaled seq2seq
model: encoder-decoder
dims: {{C: 8, H: 2, F: 12, V: 9}}
seed: 4
encoder: {{norm_order: pre, layers: 2, final_norm: true{enc}}}
decoder: {{norm_order: pre, layers: 2, final_norm: true, head: tied{dec}}}
input: {{source: [[0, 1, 2, 3]], target: [[4, 5, 6]]}}
"""


def decoder(order: str = "pre", scale: float | None = 1.0) -> str:
    return DECODER.format(order=order, extra="" if scale is None else f", attention_scale: {scale!r}")


@pytest.mark.parametrize("order", ["pre", "post", "parallel"])
@pytest.mark.parametrize("scale", [1.0, 0.3])
def test_a_scaled_attention_matches_the_independent_model(order, scale):
    trace = check_against_independent(decoder(order, scale), tol=1e-12)
    q, k = trace.stages["blocks.0.attn.q"].array, trace.stages["blocks.0.attn.k"].array
    assert np.allclose(trace.stages["blocks.0.attn.scores"].array, (q @ k.transpose(0, 1, 3, 2)) * scale, rtol=0, atol=1e-13)


def test_an_encoder_decoder_scales_every_attention_of_its_stack_cross_attention_too():
    trace = check_against_independent(SEQ2SEQ.format(enc=", attention_scale: 1", dec=", attention_scale: 0.5"), tol=1e-12)
    for name, s in (("encoder.blocks.1.attn", 1.0), ("decoder.blocks.0.attn", 0.5), ("decoder.blocks.1.cross", 0.5)):
        q, k = trace.stages[f"{name}.q"].array, trace.stages[f"{name}.k"].array
        assert np.allclose(trace.stages[f"{name}.scores"].array, (q @ k.transpose(0, 1, 3, 2)) * s, rtol=0, atol=1e-13), name
    steps = {s.name: s for s in trace.spec.steps}
    assert steps["encoder.blocks.0.attention"].scale == 1.0 and steps["decoder.blocks.0.cross_attention"].scale == 0.5


def test_no_attention_scale_is_one_over_the_root_of_d_to_the_bit():
    """Absent, nothing changes; written as 1/sqrt(d) it is the same function, to the last bit."""
    plain = trace_text(decoder(scale=None))
    given = trace_text(decoder(scale=1.0 / math.sqrt(4)))
    assert all(s.scale is None for s in plain.spec.steps)
    for name, stage in plain.stages.items():
        assert np.array_equal(stage.array, given.stages[name].array), name
    assert str(plain.stages["blocks.0.attn.scores"].meaning) == "scores QK^T / sqrt(d), before the mask"


def test_the_scores_meaning_says_the_scale():
    trace = trace_text(decoder(scale=1.0))
    assert "QK^T * 1" in str(trace.stages["blocks.0.attn.scores"].meaning)


def test_the_scalar_reference_follows_the_scale():
    v = reference_check.verify(trace_text(decoder(scale=1.0)))
    assert v.plan.full and any(name.endswith(".scores") for name in v.stages)
    assert v.max_abs_diff < 1e-12


@pytest.mark.parametrize("text", [decoder(scale=1.0), SEQ2SEQ.format(enc=", attention_scale: 1", dec=", attention_scale: 0.5")])
def test_the_gradient_agrees_with_finite_differences(text):
    g = grad(load_spec_text(text), GradOptions())
    check = verify_grad(g)
    assert check.ok, [(c.weight, c.index, c.analytic, c.numeric) for c in check.failed][:5]


def test_the_lean_backward_pass_makes_the_scaled_weights_again_to_the_bit():
    """tracer grad's plain table keeps no weights: the backward pass makes them again with the same scale."""
    spec = load_spec_text(decoder(scale=1.0))
    full, lean = grad(spec, GradOptions()), grad(spec, GradOptions(internals=False))
    assert "blocks.0.attn.weights" not in lean.grads and "blocks.0.attn.weights" in full.grads
    for name, dw in full.weight_grads.items():
        assert np.array_equal(dw, lean.weight_grads[name]), name


def test_the_gradient_differs_from_the_unscaled_one():
    a = grad(load_spec_text(decoder(scale=None)), GradOptions()).weight_grads["blocks.0.attn.w_q"]
    b = grad(load_spec_text(decoder(scale=1.0)), GradOptions()).weight_grads["blocks.0.attn.w_q"]
    assert not np.allclose(a, b)


@pytest.mark.parametrize("value", ["0", "-1", "x", "true", ".nan"])
def test_a_bad_attention_scale_is_refused_with_its_place(tmp_path, value):
    r = run_app("run", str(write_spec(tmp_path, decoder(scale=None).replace("final_norm: true", f"final_norm: true, attention_scale: {value}"))))
    assert_refused(r, "attention_scale", "positive number")


def test_diff_names_the_setting_and_the_design(tmp_path):
    a, b = write_spec(tmp_path, decoder(scale=None), "a.yaml"), write_spec(tmp_path, decoder(scale=1.0), "b.yaml")
    r = compared(str(a), str(b), keep_going=True)
    assert r.exit_code == 1
    assert "block.attention_scale" in [s.field for s in r.settings]
    words = [render(w) for w in explain.design_words(r.b.steps, r.b.settings)]
    assert "attention scale 1 (not 1/sqrt(d))" in words
    assert (explain.design_words(r.a.steps, r.a.settings) == []
            or "attention scale" not in " ".join(render(w) for w in explain.design_words(r.a.steps, r.a.settings)))
    doc = json.loads(run_app("diff", str(a), str(b), "--json").stdout)
    row = next(s for s in doc["structure"]["steps"] if s["name"] == "blocks.0.attention")
    assert "scale" in row["settings_differ"]


def test_graph_shows_the_scale(tmp_path):
    r = run_app("graph", str(write_spec(tmp_path, decoder(scale=1.0))))
    assert r.returncode == 0, r.stderr
    assert "q kᵀ · 1" in r.stdout and "q kᵀ / √d" not in r.stdout


def test_the_memory_estimate_is_unchanged():
    plain, scaled = load_spec_text(decoder(scale=None)), load_spec_text(decoder(scale=1.0))
    assert estimate(plain, RecordPolicy()).total == estimate(scaled, RecordPolicy()).total
