"""The qwen3 layout: Hugging Face Qwen3 (Qwen3ForCausalLM), each head's q and k RMS-normalised (block.qk_norm).

Without torch: tracer's own block.qk_norm against the independent model and the scalar reference, its refusals, and
a checkpoint without q_norm refused by name.  With torch and transformers: tiny random Qwen3ForCausalLM (head_dim != C / H,
grouped-query attention; with attention_bias; with a sliding window on every layer) saved by transformers, imported with
no flags and traced: every layer's output, the final norm, the logits and the attention weights agree with HF's forward
to 1e-10 in float64 once HF's float32 internals are lifted (test_llama.py's _float64_internals: the q/k norms are
Qwen3RMSNorm too), and `tracer grad`'s weight gradients, q_norm and k_norm included, agree with torch autograd through
HF's own model to 1e-10.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, run_app, where, write_spec
from helpers.hf_parity import measured
from helpers.tracing import check_against_independent, trace_text
from test_llama import IDS, RTOL_FLOAT32, _compare, _float64_internals, _hf_forward, _traced, imported, write_llama

from tracer.spec import load_spec
from tracer.views import reference_check as verify

TOL = 1e-10

QK = """name: qk norm
dims: {{B: 2, T: 5, C: 10, H: 4, H_kv: 2, d: 6, F: 12}}
seed: 7
block: {{norm: rmsnorm, activation: swiglu, positions: {positions}, final_norm: true, head: tied, layers: 2, eps: 1e-6,
        qk_norm: true{extra}}}
input: {{tokens: [[0, 1, 2, 3, 4], [5, 4, 3, 2, 1]]}}
{weights}"""


def qk_spec(positions: str = "rotary", extra: str = ", rotary_pairing: half", weights: str = "") -> str:
    if not weights:  # norm weights away from their ones, so that a missing or misplaced one shows
        rng = np.random.default_rng(3)
        def norms() -> str:
            q, k = ((1 + 0.3 * rng.standard_normal(6)).round(4).tolist() for _ in range(2))
            return f"{{attn: {{q_norm: {q}, k_norm: {k}}}}}"

        weights = f"weights:\n  blocks: [{norms()}, {norms()}]\n"
    return QK.format(positions=positions, extra=extra, weights=weights)


# -- tracer's own block.qk_norm, no torch ---------------------------------------------------

@pytest.mark.parametrize("positions", ["rotary", "none"])
def test_qk_norm_matches_the_independent_model(positions):
    extra = ", rotary_pairing: half" if positions == "rotary" else ""
    trace = check_against_independent(qk_spec(positions, extra), tol=1e-12)
    q = trace.stages["blocks.0.attn.q"]
    assert q.array.shape == (2, 4, 5, 6) and "RMS-normalised per head" in str(q.meaning)
    w = trace.spec.weights["blocks.1.attn.k_norm"]
    assert (w.axes, w.shape) == (("d",), (6,))


def test_qk_norm_without_rotary_positions_is_unit_rms_times_the_weight():
    trace = trace_text(qk_spec("none", ""))
    q = trace.stages["blocks.0.attn.q"].array
    gamma = np.asarray(trace.spec.weights["blocks.0.attn.q_norm"].value)
    rms = np.sqrt(np.mean((q / gamma) ** 2, axis=-1))
    assert np.allclose(rms, 1.0, atol=1e-4)  # eps 1e-6: a unit RMS up to eps's share


def test_the_scalar_reference_follows_qk_norm():
    v = verify.verify(trace_text(qk_spec()))
    assert v.plan.full and v.max_abs_diff < 1e-13


def test_grad_verify_through_qk_norm(tmp_path):
    r = run_app("grad", str(write_spec(tmp_path, qk_spec())), "--verify")
    assert r.returncode == 0, r.stderr
    assert "all agree" in r.stdout and "q_norm" in r.stdout and "k_norm" in r.stdout


def test_a_norm_weight_of_width_c_is_refused_naming_d(tmp_path):
    text = qk_spec(weights="weights:\n  blocks: [{attn: {q_norm: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}}, {}]\n")
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert_refused(r, f"spec.yaml:{where(text, '[1, 1, 1')}: weights.blocks[0].attn.q_norm: expected [d] = [6], received [10]")


def test_qk_norm_weights_without_qk_norm_are_read_by_nothing(tmp_path):
    text = qk_spec().replace("qk_norm: true", "qk_norm: false")
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert_refused(r, "weights.blocks[0].attn.q_norm: q_norm is a weight of block.qk_norm", "but block.qk_norm is false")


def test_qk_norm_is_for_a_decoder_only_block(tmp_path):
    text = ("model: encoder-decoder\ndims: {C: 8, H: 2, F: 8}\nseed: 0\nencoder: {qk_norm: true}\ndecoder: {head: tied}\n"
            "input: {source: [[0, 1]], target: [[1, 2]]}\n")
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert_refused(r, "encoder.qk_norm: qk_norm (Qwen3's per-head RMSNorm of q and k) is for a decoder-only spec's block")


def test_graph_stages_and_json_say_where_the_norm_is(tmp_path):
    path = write_spec(tmp_path, qk_spec())
    graph = run_app("graph", str(path))
    assert graph.returncode == 0, graph.stderr
    assert "q and k RMS-normalised per head (q_norm, k_norm)" in graph.stdout and "attn.q_norm [d] = [6]" in graph.stdout
    stages = run_app("stages")
    assert "RMS-normalised per head, then turned by rotary positions (block.qk_norm)" in stages.stdout
    doc = json.loads(run_app("run", str(path), "--json").stdout)
    assert doc["block"]["qk_norm"] is True


def test_the_memory_estimate_counts_the_normalised_copies():
    from tracer.spec import load_spec_text
    from tracer.spec.memory import RecordPolicy, estimate

    on, off = load_spec_text(qk_spec()), load_spec_text(qk_spec().replace("qk_norm: true", "qk_norm: false").split("weights:")[0])
    assert estimate(on, RecordPolicy()).working > estimate(off, RecordPolicy()).working


# -- the qwen3 layout without torch ---------------------------------------------------------

def test_a_qwen3_config_without_q_norm_tensors_is_refused_by_name(tmp_path):
    write_llama(tmp_path / "q3", model_type="qwen3")
    assert_refused(run_app("import", str(tmp_path / "q3")), "holds no Qwen3 q_norm (model.layers.0.self_attn.q_norm.weight)")


def test_qwen2_through_the_qwen3_layout_is_refused_by_name(tmp_path):
    write_llama(tmp_path / "q2", model_type="qwen2")
    assert_refused(run_app("import", str(tmp_path / "q2"), "--layout", "qwen3"), "model_type 'qwen2'", "the qwen3 layout would trace it wrong")


# -- against Hugging Face (torch and transformers) ------------------------------------------

def _hf(tmp_path: Path, **extra):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face needs transformers (optional extra)")
    torch.manual_seed(0)
    config = transformers.Qwen3Config(vocab_size=96, hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=10, max_position_embeddings=64, rms_norm_eps=1e-6,
                                      initializer_range=0.3, tie_word_embeddings=False,
                                      rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, **extra)
    model = transformers.Qwen3ForCausalLM(config).double()
    with torch.no_grad():  # norms and biases away from their 1 / 0 start: a q_norm read as k_norm, or skipped, shows
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    folder = tmp_path / "qwen3"
    model.save_pretrained(str(folder))
    model = transformers.Qwen3ForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    return torch, model, folder


def _module():
    from transformers.models.qwen3 import modeling_qwen3 as m
    return m


CASES = {"qwen3": {}, "qwen3-bias": {"attention_bias": True},
         "qwen3-window": {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 0}}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_hugging_face_in_float64(tmp_path, monkeypatch, case, request):
    torch, model, folder = _hf(tmp_path, **CASES[case])
    ids = IDS + [7, 50]  # T = 10 > the window of 3
    shipped = _hf_forward(torch, model, ids)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, ids)))  # no flags: the layout from model_type
    text = spec.read_text()
    assert "layout: qwen3" in text and "qk_norm: true" in text and "  d: 10" in text
    assert ("window: 3" in text) == (case == "qwen3-window")
    st = _traced(spec)
    assert st["blocks.0.attn.q"].shape == (1, 4, 10, 10) and st["blocks.1.attn.k"].shape == (1, 2, 10, 10)
    _compare(st, *shipped, RTOL_FLOAT32)  # HF as shipped: within float32's rounding
    _float64_internals(monkeypatch, torch, _module(), "Qwen3")
    found = _compare(st, *_hf_forward(torch, model, ids), rtol=None, atol=TOL)
    assert max(found.values()) <= TOL
    measured(request, case, found)
    # without the norms the model is another one: far outside the tolerance
    spec.write_text(text.replace("qk_norm: true", "qk_norm: false"))
    r = run_app("run", str(spec), "--json")
    assert r.returncode == 2 and "q_norm" in r.stderr  # the checkpoint's q_norm would be left unread: refused


@pytest.mark.parametrize("case", ["qwen3", "qwen3-bias"])
def test_grad_matches_torch_autograd_through_hugging_face(tmp_path, monkeypatch, case):
    torch, model, folder = _hf(tmp_path, **CASES[case])
    _float64_internals(monkeypatch, torch, _module(), "Qwen3")
    logits = model(torch.tensor([IDS])).logits[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(IDS[1:]))
    loss.backward()
    hf = dict(model.named_parameters())
    from tracer.grad.run import GradOptions, grad

    spec = load_spec(str(imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))))
    gt = grad(spec, GradOptions(loss="next-token"))
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    pairs = {"embedding": ("model.embed_tokens.weight", False), "head": ("lm_head.weight", True), "final_norm.gamma": ("model.norm.weight", False)}
    for i in range(2):
        p = f"model.layers.{i}."
        pairs |= {f"blocks.{i}.attn.w_{x}": (f"{p}self_attn.{x}_proj.weight", True) for x in "qkvo"}
        pairs |= {f"blocks.{i}.attn.{x}_norm": (f"{p}self_attn.{x}_norm.weight", False) for x in "qk"}
        if CASES[case].get("attention_bias"):
            pairs |= {f"blocks.{i}.attn.b_{x}": (f"{p}self_attn.{x}_proj.bias", False) for x in "qkvo"}
        pairs |= {f"blocks.{i}.ffn.{w}": (f"{p}mlp.{proj}_proj.weight", True) for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))}
        pairs |= {f"blocks.{i}.norm1.gamma": (p + "input_layernorm.weight", False), f"blocks.{i}.norm2.gamma": (p + "post_attention_layernorm.weight", False)}
    for name, (key, transpose) in pairs.items():
        want = hf[key].grad.numpy()
        want = want.T if transpose else want
        got = gt.weight_grads[name]
        assert got.shape == want.shape, name
        assert np.max(np.abs(got - want)) <= TOL * max(1.0, float(np.max(np.abs(want)))), name
    assert np.max(np.abs(hf["model.layers.0.self_attn.q_norm.weight"].grad.numpy())) > 1e-6  # a gradient that could be wrong
