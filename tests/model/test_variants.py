"""Today's variants (guide section 12.3) and BatchNorm (guide section 5), each against a
straightforward implementation written in the test, and against PyTorch where it is installed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import SPECS, run_app, write_spec
from helpers import oracle as ind
from helpers.tracing import check_against_independent, flow, independent_stages, trace_text

from tracer.engine.params import load_params
from tracer.spec import load_spec_text


def layer_spec(block: str, x: np.ndarray, weights: str = "", seed: int = 31, C: int = 8, H: int = 2, F: int = 12) -> str:
    return (f"dims: {{C: {C}, H: {H}, F: {F}}}\nseed: {seed}\nblock: {{{block}}}\ninput: {{x: {flow(x)}}}\n"
            + (f"weights: {weights}\n" if weights else ""))


def some_x(seed: int, B: int = 2, T: int = 5, C: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(B, T, C))


def nonzero_norms(rng, C, names=("norm1", "norm2"), beta=True):
    parts = []
    for n in names:
        g = rng.normal(size=C) + 1
        parts.append(f"{n}: {{gamma: {flow(g)}" + (f", beta: {flow(rng.normal(size=C))}}}" if beta else "}"))
    return parts


# -- RMSNorm ----------------------------------------------------------------------------------------

def test_rmsnorm_by_hand():
    rng = np.random.default_rng(1)
    x = some_x(1)
    text = layer_spec("norm: rmsnorm, eps: 1e-3", x, "{" + ", ".join(nonzero_norms(rng, 8, beta=False)) + "}")
    trace = check_against_independent(text)
    g = load_params(trace.spec)["norm1.gamma"]
    for b in range(2):
        for t in range(5):
            row = x[b, t]
            rms = math.sqrt(sum(v * v for v in row) / 8 + 1e-3)  # no mean subtracted, no beta
            want = [row[c] / rms * g[c] for c in range(8)]
            assert np.max(np.abs(trace.stages["norm1"].array[b, t] - want)) <= 1e-12
    assert "RMS" in trace.stages["norm1"].meaning


def test_rmsnorm_group_has_no_beta(tmp_path):
    p = write_spec(tmp_path, layer_spec("norm: rmsnorm", some_x(0), "{norm1: {gamma: ones, beta: zeros}}"))
    r = run_app("run", str(p))
    assert r.returncode == 2 and "weights.norm1.beta: unknown key 'beta'" in r.stderr


# -- GELU -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "relu"])
def test_activation_matches_formula(act):
    x = 3 * some_x(2)  # wide inputs, so the exact and tanh GELUs part
    trace = check_against_independent(layer_spec(f"activation: {act}", x))
    p = load_params(trace.spec)
    pre = trace.stages["norm2"].array @ p["ffn.w1"] + p["ffn.b1"]
    f = {"gelu": lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))),
         "gelu_tanh": lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
         "relu": lambda v: max(v, 0.0)}[act]
    want = np.vectorize(f)(pre)
    assert np.max(np.abs(trace.stages["hidden"].array - want)) <= 1e-12


def test_exact_gelu_is_not_the_tanh_approximation():
    x = 3 * some_x(2)
    exact = trace_text(layer_spec("activation: gelu", x)).stages["hidden"].array
    approx = trace_text(layer_spec("activation: gelu_tanh", x)).stages["hidden"].array
    gap = np.max(np.abs(exact - approx))
    assert 1e-6 < gap < 1e-2  # they differ, by the approximation's few 1e-4 at most


# -- SwiGLU -----------------------------------------------------------------------------------------

def test_swiglu_gated_ffn_with_three_matrices():
    rng = np.random.default_rng(3)
    C, F = 8, 12
    ffn = {"w1": rng.normal(size=(C, F)), "b1": rng.normal(size=F), "w3": rng.normal(size=(C, F)),
           "b3": rng.normal(size=F), "w2": rng.normal(size=(F, C)), "b2": rng.normal(size=C)}
    weights = "{ffn: {" + ", ".join(f"{k}: {flow(v)}" for k, v in ffn.items()) + "}}"
    trace = check_against_independent(layer_spec("activation: swiglu", some_x(3), weights))
    n2 = trace.stages["norm2"].array
    want = ind.ffn_hidden(n2, ffn, "swiglu")  # silu(x W1 + b1) * (x W3 + b3)
    assert np.max(np.abs(trace.stages["hidden"].array - want)) <= 1e-12
    assert np.max(np.abs(trace.stages["ffn"].array - (want @ ffn["w2"] + ffn["b2"]))) <= 1e-12


def test_swiglu_draws_w3_and_relu_has_none(tmp_path):
    p = load_params(load_spec_text(layer_spec("activation: swiglu", some_x(0)), "s.yaml"))
    assert p["ffn.w3"].shape == (8, 12) and not np.array_equal(p["ffn.w3"], p["ffn.w1"])
    assert np.array_equal(p["ffn.b3"], np.zeros(12))
    path = write_spec(tmp_path, layer_spec("activation: relu", some_x(0), "{ffn: {w3: zeros}}"))
    r = run_app("run", str(path))
    assert r.returncode == 2 and "weights.ffn.w3: unknown key 'w3'" in r.stderr


# -- rotary, and all of them together ----------------------------------------------------------------

@pytest.mark.parametrize("block", [
    "positions: rotary",
    "positions: rotary, position_base: 500, mask: none",
    "norm: rmsnorm, positions: rotary, activation: swiglu, layers: 2, final_norm: true",
    "norm_order: post, norm: rmsnorm, activation: gelu, positions: rotary",
])
def test_variant_layers_match_independent(block):
    check_against_independent(layer_spec(block, some_x(7), seed=37))


# -- PyTorch --------------------------------------------------------------------------------------------

def torch_layer(trace, act: str, norm_first: bool):
    """nn.TransformerEncoderLayer with tracer's weights: torch's Linear computes x W^T + b, so W is transposed."""
    torch = pytest.importorskip("torch")
    C, H, F = trace.spec.dims.C, trace.spec.dims.H, trace.spec.dims.F
    p = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in load_params(trace.spec).items()}
    layer = torch.nn.TransformerEncoderLayer(C, H, F, dropout=0.0, activation=act, layer_norm_eps=trace.spec.block.eps,
                                             batch_first=True, norm_first=norm_first, dtype=torch.float64)
    with torch.no_grad():
        a = layer.self_attn
        a.in_proj_weight.copy_(torch.cat([p["attn.w_q"].T, p["attn.w_k"].T, p["attn.w_v"].T]))
        a.in_proj_bias.copy_(torch.cat([p["attn.b_q"], p["attn.b_k"], p["attn.b_v"]]))
        a.out_proj.weight.copy_(p["attn.w_o"].T)
        a.out_proj.bias.copy_(p["attn.b_o"])
        layer.linear1.weight.copy_(p["ffn.w1"].T)
        layer.linear1.bias.copy_(p["ffn.b1"])
        layer.linear2.weight.copy_(p["ffn.w2"].T)
        layer.linear2.bias.copy_(p["ffn.b2"])
        for ours, theirs in (("norm1", layer.norm1), ("norm2", layer.norm2)):
            theirs.weight.copy_(p[f"{ours}.gamma"])
            theirs.bias.copy_(p[f"{ours}.beta"])
    return torch, layer.eval()


@pytest.mark.parametrize("act,norm_first,mask", [("relu", True, "causal"), ("gelu", True, "causal"),
                                                 ("relu", True, "none"), ("relu", False, "causal")])
def test_one_layer_matches_torch_encoder_layer(act, norm_first, mask):
    rng = np.random.default_rng(11)
    x = some_x(11, B=3, T=6)
    weights = "{" + ", ".join(nonzero_norms(rng, 8)) + ", attn: {b_q: " + flow(rng.normal(size=8)) + ", b_o: " \
        + flow(rng.normal(size=8)) + "}, ffn: {b1: " + flow(rng.normal(size=12)) + "}}"
    order = "pre" if norm_first else "post"
    trace = trace_text(layer_spec(f"norm_order: {order}, mask: {mask}, activation: {act}, eps: 1e-4", x, weights))
    torch, layer = torch_layer(trace, act, norm_first)
    src_mask = torch.nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.float64) if mask == "causal" else None
    with torch.no_grad():
        want = layer(torch.from_numpy(x), src_mask=src_mask, is_causal=mask == "causal").numpy()
    assert np.max(np.abs(trace.stages["output"].array - want)) <= 1e-10


def test_norms_and_activations_match_torch_functional():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(12)
    x = some_x(12)
    weights = "{" + ", ".join(nonzero_norms(rng, 8, beta=False)) + "}"
    trace = trace_text(layer_spec("norm: rmsnorm, activation: swiglu, eps: 1e-6", x, weights))
    p = {k: torch.from_numpy(v) for k, v in load_params(trace.spec).items()}
    xt = torch.from_numpy(x)
    n1 = F.rms_norm(xt, (8,), p["norm1.gamma"], eps=1e-6).numpy()
    assert np.max(np.abs(trace.stages["norm1"].array - n1)) <= 1e-12
    n2 = torch.from_numpy(trace.stages["norm2"].array)
    hidden = F.silu(n2 @ p["ffn.w1"] + p["ffn.b1"]) * (n2 @ p["ffn.w3"] + p["ffn.b3"])
    assert np.max(np.abs(trace.stages["hidden"].array - hidden.numpy())) <= 1e-12
    for act, approx in (("gelu", "none"), ("gelu_tanh", "tanh")):
        t = trace_text(layer_spec(f"activation: {act}", 3 * x))
        pre = torch.from_numpy(t.stages["norm2"].array @ load_params(t.spec)["ffn.w1"])
        assert np.max(np.abs(t.stages["hidden"].array - F.gelu(pre, approximate=approx).numpy())) <= 1e-12


# -- BatchNorm: traced, flagged -----------------------------------------------------------------------

BATCHNORM = SPECS / "variants" / "batchnorm.yaml"


def test_batchnorm_is_flagged_as_an_axis_violation():
    r = run_app("run", str(BATCHNORM))
    assert r.returncode == 1
    assert "axis violation at stage norm1" in r.stdout
    assert "BatchNorm statistics taken over samples and positions (B x T = 2 x 4)" in r.stdout
    rows = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("│ ")]
    assert rows[:3] == ["input", "x", "norm1"] and "attention" not in rows  # the run stopped after norm1


def test_batchnorm_keep_going_uses_batch_statistics():
    r = run_app("run", str(BATCHNORM), "--keep-going", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert [(v["kind"], v["stage"]) for v in doc["violations"]] == [("axis", "norm1"), ("axis", "norm2")]
    stages = {s["name"]: np.array(s["values"]) for s in doc["stages"]}
    x = stages["x"]
    B, T, C = x.shape
    for c in range(C):  # one mean and one variance per coordinate, over all B x T entries
        col = [x[b, t, c] for b in range(B) for t in range(T)]
        mu = sum(col) / len(col)
        var = sum((v - mu) ** 2 for v in col) / len(col)
        want = (x[:, :, c] - mu) / math.sqrt(var + 1e-5)  # gamma 1, beta 0
        assert np.max(np.abs(stages["norm1"][:, :, c] - want)) <= 1e-12
    r1 = stages["residual1"]
    assert np.max(np.abs(stages["norm2"] - ind.batch_norm(r1, np.ones(C), np.zeros(C), 1e-5))) <= 1e-12


def test_batchnorm_mixes_samples_and_the_rest_matches_independent():
    rng = np.random.default_rng(13)
    x = some_x(13)
    text = layer_spec("norm: batchnorm", x, "{" + ", ".join(nonzero_norms(rng, 8)) + "}")
    trace = trace_text(text, keep_going=True)
    ind.assert_matches(trace, independent_stages(trace, text))
    x2 = x.copy()
    x2[1, 3] += 10.0  # change only sample 1's last position
    other = trace_text(text.replace(flow(x), flow(x2)), keep_going=True)
    moved = np.abs(other.stages["norm1"].array[0, 0] - trace.stages["norm1"].array[0, 0]).max()
    assert moved > 1e-3  # sample 0's first position moved: statistics mix samples and positions
