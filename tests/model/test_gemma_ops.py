"""Gemma's three choices as tracer settings, each against the oracle and the scalar reference: the embeddings times
sqrt(C) (block.embedding_scale, op embed_scale), the RMSNorm scaled by (1 + gamma) (block.norm: rmsnorm_offset, op
rms_norm_offset) and the GeGLU FFN (block.activation: geglu); their contracts, errors, formulas, graph boxes and memory."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import assert_refused, run_app, write_spec
from helpers import oracle as ind
from helpers.tracing import check_against_independent, flow, trace_text

from tracer.engine import reference
from tracer.engine.kernels import embeddings, norms
from tracer.engine.params import load_params
from tracer.model.ops import OPS
from tracer.spec import load_spec_text


def token_spec(block: str, weights: str = "", C: int = 8, H: int = 2, F: int = 12, dtype: str = "float64", seed: int = 5) -> str:
    return (f"dims: {{C: {C}, H: {H}, F: {F}, V: 9}}\nseed: {seed}\ndtype: {dtype}\nblock: {{{block}}}\n"
            f"input: {{tokens: [[1, 4, 2, 8, 0], [3, 3, 7, 5, 6]]}}\n" + (f"weights: {weights}\n" if weights else ""))


GEMMA = "norm: rmsnorm_offset, activation: geglu, positions: rotary, rotary_pairing: half, embedding_scale: true, final_norm: true, head: tied"


def _gammas(rng, names) -> str:
    return "{" + ", ".join(f"{n}: {{gamma: {flow(rng.normal(scale=0.5, size=8))}}}" for n in names) + "}"


# -- the ops against the oracle and the scalar reference ---------------------------------------

@pytest.mark.parametrize("block", [
    GEMMA,
    GEMMA + ", layers: 2",
    GEMMA.replace("positions: rotary, rotary_pairing: half", "positions: learned"),  # scaled, then the positions added
    "norm_order: post, norm: rmsnorm_offset, activation: geglu, positions: none, embedding_scale: true",
])
def test_gemma_blocks_match_the_oracle_and_the_reference(tmp_path, block):
    names = ["norm1", "norm2", "final_norm"] if "layers" not in block and "final_norm" in block else []
    text = token_spec(block, _gammas(np.random.default_rng(2), names) if names else "")
    trace = check_against_independent(text, tol=1e-12)
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", "--verify", cwd=tmp_path)
    assert r.returncode == 0 and "verify: largest |NumPy - reference| over all stages = " in r.stdout, r.stdout + r.stderr
    stages = trace.stages
    x = stages["embed_scaled" if "learned" in block else "x"].array
    assert np.array_equal(x, stages["embed"].array * np.float64(8 ** 0.5))


def test_rmsnorm_offset_by_hand_and_its_gamma_defaults_to_zeros():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 8))
    g = rng.normal(scale=0.5, size=8)
    text = (f"dims: {{C: 8, H: 2, F: 12}}\nseed: 3\nblock: {{norm: rmsnorm_offset, eps: 1e-3}}\ninput: {{x: {flow(x)}}}\n"
            f"weights: {{norm1: {{gamma: {flow(g)}}}}}\n")
    trace = check_against_independent(text)
    for b in range(2):
        for t in range(5):
            row = x[b, t]
            rms = math.sqrt(sum(v * v for v in row) / 8 + 1e-3)
            want = [row[c] / rms * (1.0 + g[c]) for c in range(8)]
            assert np.max(np.abs(trace.stages["norm1"].array[b, t] - want)) <= 1e-12
    assert "(1 + gamma)" in trace.stages["norm1"].meaning
    drawn = load_params(load_spec_text(text.replace(f"weights: {{norm1: {{gamma: {flow(g)}}}}}\n", "")))
    assert np.array_equal(drawn["norm2.gamma"], np.zeros(8))  # not given: zeros, the scale 1 + 0 (a plain RMSNorm's ones)
    plain = trace_text(text.replace("rmsnorm_offset", "rmsnorm").replace(f"{{gamma: {flow(g)}}}", f"{{gamma: {flow(1 + g)}}}"))
    assert np.max(np.abs(plain.stages["norm1"].array - trace.stages["norm1"].array)) <= 1e-15  # gamma' = 1 + gamma, the same


def test_the_kernels_and_the_scalar_reference_agree():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(1, 3, 6))
    g = rng.normal(size=6)
    got = norms.rms_norm_offset(x, g, 1e-6)
    for t in range(3):
        want = reference.rms_norm(list(x[0, t]), [1.0 + v for v in g], 1e-6)
        assert np.max(np.abs(got[0, t] - want)) <= 1e-15
    assert np.array_equal(embeddings.embed_scale(x), x * 6 ** 0.5)
    x32 = x.astype(np.float32)
    scaled = embeddings.embed_scale(x32)  # the factor rounded to float32 first, as Gemma's normaliser is a float32 tensor there
    assert scaled.dtype == np.float32 and np.array_equal(scaled, x32 * np.float32(6 ** 0.5))


def test_geglu_gated_ffn_with_three_matrices():
    rng = np.random.default_rng(3)
    C, F = 8, 12
    ffn = {"w1": rng.normal(size=(C, F)), "b1": rng.normal(size=F), "w3": rng.normal(size=(C, F)),
           "b3": rng.normal(size=F), "w2": rng.normal(size=(F, C)), "b2": rng.normal(size=C)}
    x = rng.normal(size=(2, 4, C))
    weights = "{ffn: {" + ", ".join(f"{k}: {flow(v)}" for k, v in ffn.items()) + "}}"
    trace = check_against_independent(f"dims: {{C: 8, H: 2, F: 12}}\nseed: 1\nblock: {{activation: geglu}}\ninput: {{x: {flow(x)}}}\n"
                                      f"weights: {weights}\n")
    n2 = trace.stages["norm2"].array
    want = ind.gelu_tanh(n2 @ ffn["w1"] + ffn["b1"]) * (n2 @ ffn["w3"] + ffn["b3"])
    assert np.max(np.abs(trace.stages["hidden"].array - want)) <= 1e-12
    swiglu = trace_text(f"dims: {{C: 8, H: 2, F: 12}}\nseed: 1\nblock: {{activation: swiglu}}\ninput: {{x: {flow(x)}}}\nweights: {weights}\n")
    assert np.abs(swiglu.stages["hidden"].array - trace.stages["hidden"].array).max() > 1e-3  # a different gate
    assert "GeGLU" in trace.stages["hidden"].meaning


def test_gemma_in_float32_runs_in_float32():
    trace = trace_text(token_spec(GEMMA, dtype="float32"))
    assert trace.stages["x"].array.dtype == np.float32
    assert np.array_equal(trace.stages["x"].array, trace.stages["embed"].array * np.float32(8 ** 0.5))


# -- what a spec may not say ----------------------------------------------------------------------

def test_embedding_scale_needs_token_input_and_a_decoder_only_block(tmp_path):
    x = np.zeros((1, 2, 8))
    write_spec(tmp_path, f"dims: {{C: 8, H: 2, F: 12}}\nblock: {{embedding_scale: true}}\ninput: {{x: {flow(x)}}}\n")
    assert_refused(run_app("run", "spec.yaml", cwd=tmp_path), "block.embedding_scale", "it needs input.tokens")
    write_spec(tmp_path, token_spec("embedding_scale: yes please"))
    assert_refused(run_app("run", "spec.yaml", cwd=tmp_path), "block.embedding_scale", "expected true or false")
    write_spec(tmp_path, "model: encoder-decoder\ndims: {C: 8, H: 2, F: 12, V: 9}\nencoder: {embedding_scale: true}\ndecoder: {head: tied}\n"
                         "input: {source: [[1, 2]], target: [[3, 4]]}\n")
    assert_refused(run_app("run", "spec.yaml", cwd=tmp_path), "encoder.embedding_scale", "decoder-only")


def test_an_offset_norm_gamma_of_one_value_is_a_broadcast_violation(tmp_path):
    write_spec(tmp_path, token_spec(GEMMA, "{norm2: {gamma: [0.5]}}"))  # one layer: the groups are norm1, norm2
    r = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    [v] = json.loads(r.stdout)["violations"]
    assert (v["kind"], v["stage"]) == ("broadcast", "norm2")


def test_custom_steps_may_use_rms_norm_offset(tmp_path):
    steps = ("[{name: n, op: rms_norm_offset, in: x, weights: n}, {name: a, op: mha, in: n, weights: attn}, "
             "{name: output, op: add, in: [x, a]}]")
    write_spec(tmp_path, f"dims: {{T: 4, C: 8, H: 2, F: 12}}\nseed: 2\nblock: {{steps: {steps}}}\ninput: {{x: random}}\n")
    r = run_app("run", "spec.yaml", "--verify", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "RMSNorm with (1 + gamma)" in r.stdout


# -- stages, graph, diff, memory ----------------------------------------------------------------

def test_stages_graph_and_memory_show_gemmas_choices(tmp_path):
    r = run_app("stages", "--json")
    assert r.returncode == 0, r.stderr
    entries = json.loads(r.stdout)["stages"]
    assert any(e["name"] == "x" and e["formula"].startswith("embed * sqrt(C)") for e in entries)
    assert any(e["name"] == "embed_scaled" for e in entries)  # scaled, before the learned positions are added
    assert any("block.norm: rmsnorm_offset" in e["meaning"] and "(1 + gamma)" in e["formula"] for e in entries)
    assert any("block.activation: geglu" in e["meaning"] and e["formula"].startswith("GELU_tanh(") for e in entries)
    write_spec(tmp_path, token_spec(GEMMA))
    g = run_app("graph", "spec.yaml", cwd=tmp_path)
    assert g.returncode == 0, g.stderr
    for fragment in ("embed * sqrt(C)", "GELU_tanh(norm2 W_1 + b_1) * (norm2 W_3 + b_3)", "times (1 + gamma)"):
        assert fragment in g.stdout, (fragment, g.stdout)
    spec = load_spec_text(token_spec(GEMMA))
    hidden = next(s for s in spec.steps if s.op == "ffn_hidden")
    swiglu = hidden._replace(activation="swiglu")
    op = OPS["ffn_hidden"]
    assert op.temporary_bytes(spec, hidden, 0, 80) > op.temporary_bytes(spec, swiglu, 0, 80) > 0  # the tanh GELU's temporaries
