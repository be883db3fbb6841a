"""The mixtral layout: Hugging Face Mixtral checkpoints imported with no flags, traced, and compared with its forward.

With torch and transformers: a random MixtralForCausalLM (2 layers, 4 experts, top 2, grouped-query attention,
float64) is saved with save_pretrained, imported and traced; every layer's output, the final norm, the logits and
the router's choices match Hugging Face's forward to 1e-10 once its float32 steps (RMSNorm, the rotary angles, the
attention softmax and the router softmax) are computed in float64; tracer grad's weight gradients match torch
autograd through the same model.  Without torch: the config reader's refusals, on a config.json written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, run_app, run_cli
from helpers.hf_parity import measured
from test_llama import _float64_internals, _hf_forward, _largest, _traced, imported

from tracer.spec import load_spec

TOL = 1e-10
IDS = [5, 17, 42, 88, 3, 61, 0, 29, 7, 50]


def _mixtral(tmp_path: Path, **overrides):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face's Mixtral needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face's Mixtral needs transformers (optional extra)")
    torch.manual_seed(0)
    settings = {"vocab_size": 96, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "num_local_experts": 4,
                    "num_experts_per_tok": 2, "initializer_range": 0.3, "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}}
    config = transformers.MixtralConfig(**(settings | overrides))
    model = transformers.MixtralForCausalLM(config).double().eval()
    folder = tmp_path / "mixtral"
    model.save_pretrained(str(folder))
    model = transformers.MixtralForCausalLM.from_pretrained(str(folder), attn_implementation="eager", experts_implementation="eager",
                                                              dtype=torch.float64).eval()
    return torch, model, folder


def _float64_router(monkeypatch, torch, mm) -> None:
    """MixtralTopKRouter as Hugging Face writes it, with its softmax in float64 instead of float32."""

    def forward(self, hidden_states):
        hidden_states = hidden_states.reshape(-1, self.hidden_dim)
        logits = torch.nn.functional.linear(hidden_states, self.weight)
        probs = torch.nn.functional.softmax(logits, dim=-1, dtype=torch.float64)
        top, index = torch.topk(probs, self.top_k, dim=-1)
        return logits, top / top.sum(dim=-1, keepdim=True), index

    monkeypatch.setattr(mm.MixtralTopKRouter, "forward", forward)


def _lift(monkeypatch, torch) -> None:
    from transformers.models.mixtral import modeling_mixtral as mm

    _float64_internals(monkeypatch, torch, mm, "Mixtral")
    _float64_router(monkeypatch, torch, mm)


def _hf_router(torch, model, ids) -> list[np.ndarray]:
    """Each layer's router probabilities [T,E] in Hugging Face's forward (a hook on the router)."""
    probs = []
    hooks = [layer.mlp.gate.register_forward_hook(lambda mod, args, out: probs.append(torch.softmax(out[0], -1).numpy()))
             for layer in model.model.layers]
    try:
        with torch.no_grad():
            model(torch.tensor([ids]))
    finally:
        for h in hooks:
            h.remove()
    return probs


def test_mixtral_matches_hugging_face_to_1e_10(tmp_path, monkeypatch, request):
    torch, model, folder = _mixtral(tmp_path)
    _lift(monkeypatch, torch)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))  # no flags: layout from model_type
    text = spec.read_text()
    assert "layout: mixtral" in text and "ffn: {experts: 4, top_k: 2}" in text and "# num_local_experts 4" in text
    st = _traced(spec)
    hidden, outputs, logits, attentions = _hf_forward(torch, model, IDS)
    found = {"final_norm": _largest(st["final_norm"], hidden[2]), "logits": _largest(st["logits"], logits)}
    for i in range(2):
        found[f"blocks.{i}.output"] = _largest(st[f"blocks.{i}.output"], hidden[i + 1] if i == 0 else outputs[i])
        found[f"blocks.{i}.attn.weights"] = _largest(st[f"blocks.{i}.attn.weights"], attentions[i])
    assert max(found.values()) <= TOL, found
    measured(request, "mixtral", found)
    for i, probs in enumerate(_hf_router(torch, model, IDS)):
        assert _largest(st[f"blocks.{i}.moe.router.weights"][0], probs) <= TOL
        chosen = np.sort(np.argsort(-probs, axis=-1, kind="stable")[:, :2], axis=-1)  # HF's top 2 at every position
        assert np.array_equal(np.sort(np.argsort(-st[f"blocks.{i}.moe.chosen"][0], axis=-1, kind="stable")[:, :2], axis=-1), chosen)
        assert np.all((st[f"blocks.{i}.moe.chosen"][0] > 0).sum(axis=-1) == 2)
        assert np.allclose(st[f"blocks.{i}.moe.chosen"][0].sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    # top 1 instead of 2 is a real difference, far outside the tolerance
    spec.write_text(text.replace("ffn: {experts: 4, top_k: 2}", "ffn: {experts: 4, top_k: 1}"))
    assert _largest(_traced(spec)["logits"], logits) > 1e3 * TOL


def test_mixtral_as_shipped_float32_internals_within_1e_5(tmp_path):
    torch, model, folder = _mixtral(tmp_path)
    st = _traced(imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS))))
    hidden, outputs, logits, attentions = _hf_forward(torch, model, IDS)
    assert _largest(st["logits"], logits) <= 1e-5 * max(1.0, float(np.max(np.abs(logits))))


def test_tracer_grad_on_mixtral_matches_torch_autograd(tmp_path, monkeypatch):
    """The next-token loss's gradient with respect to every weight, tracer grad against autograd through HF's model."""
    torch, model, folder = _mixtral(tmp_path)
    _lift(monkeypatch, torch)
    spec = load_spec(str(imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))))
    from tracer.grad.run import GradOptions, grad

    gt = grad(spec, GradOptions(loss="next-token"))
    ids = torch.tensor([IDS])
    logits = model(ids).logits[0]
    logp = torch.log_softmax(logits[:-1], dim=-1)  # float64: HF's own loss casts the logits to float32
    loss = -logp.gather(-1, ids[0, 1:, None]).mean()
    model.zero_grad()
    loss.backward()
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    F = 24
    for i, layer in enumerate(model.model.layers):
        p, experts = f"blocks.{i}.moe.", layer.mlp.experts
        want = {p + "router": layer.mlp.gate.weight.grad.T}
        for e in range(4):
            gate_up = experts.gate_up_proj.grad[e]  # [2F, C]: gate (W_1) then up (W_3)
            want |= {f"{p}w1_{e}": gate_up[:F].T, f"{p}w3_{e}": gate_up[F:].T, f"{p}w2_{e}": experts.down_proj.grad[e].T}
        want |= {f"blocks.{i}.attn.w_{x}": getattr(layer.self_attn, f"{x}_proj").weight.grad.T for x in "qkvo"}
        want |= {f"blocks.{i}.norm1.gamma": layer.input_layernorm.weight.grad, f"blocks.{i}.norm2.gamma": layer.post_attention_layernorm.weight.grad}
        for name, g in want.items():
            g = g.numpy()
            assert np.max(np.abs(gt.weight_grads[name] - g)) <= TOL * max(1.0, float(np.max(np.abs(g)))), name
    assert np.max(np.abs(gt.weight_grads["head"] - model.lm_head.weight.grad.T.numpy())) <= TOL
    assert any(np.any(gt.weight_grads[f"blocks.0.moe.w1_{e}"] != 0) for e in range(4))


def test_mixtral_grad_verify_by_finite_differences(tmp_path):
    _, _, folder = _mixtral(tmp_path)
    r = run_cli("grad", str(imported(tmp_path, folder, "--tokens", "5,17,42,88")), "--verify")
    assert r.returncode == 0, r.stderr
    assert "all agree" in r.stdout


# -- the config reader, without torch ------------------------------------------------------

def _write(folder: Path, config: dict) -> None:
    """A tiny Mixtral-keyed checkpoint (one layer, 2 experts) with ``config`` as its config.json."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    C, F, V, E = 8, 12, 20, 2
    L = "model.layers.0."
    t = {"model.embed_tokens.weight": (V, C), "lm_head.weight": (V, C), "model.norm.weight": (C,),
         L + "input_layernorm.weight": (C,), L + "post_attention_layernorm.weight": (C,),
         L + "self_attn.q_proj.weight": (C, C), L + "self_attn.k_proj.weight": (C, C), L + "self_attn.v_proj.weight": (C, C),
         L + "self_attn.o_proj.weight": (C, C), L + "block_sparse_moe.gate.weight": (E, C)}
    for e in range(E):
        t |= {f"{L}block_sparse_moe.experts.{e}.w1.weight": (F, C), f"{L}block_sparse_moe.experts.{e}.w3.weight": (F, C),
              f"{L}block_sparse_moe.experts.{e}.w2.weight": (C, F)}
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: rng.uniform(-0.5, 0.5, s).astype(np.float32) for k, s in t.items()}, str(folder / "model.safetensors"))
    base = {"model_type": "mixtral", "hidden_size": C, "intermediate_size": F, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 2, "vocab_size": V, "rms_norm_eps": 1e-5, "num_local_experts": E, "num_experts_per_tok": 1,
            "hidden_act": "silu", "tie_word_embeddings": False, "router_jitter_noise": 0.0, "router_aux_loss_coef": 0.001}
    (folder / "config.json").write_text(json.dumps({k: v for k, v in (base | config).items() if v is not ...}))


def test_a_mixtral_checkpoint_imports_and_runs_without_torch(tmp_path):
    _write(tmp_path / "m", {})
    spec = imported(tmp_path, tmp_path / "m", "--tokens", "1,2,3")
    s = load_spec(str(spec))
    assert (s.block.experts, s.block.top_k, s.dims.E) == (2, 1, 2)
    assert s.weights["moe.w2_1"].value.key == "model.layers.0.block_sparse_moe.experts.1.w2.weight"
    r = run_cli("run", str(spec), "--verify")
    assert r.returncode == 0, r.stderr
    assert "moe.chosen" in r.stdout


@pytest.mark.parametrize("config, fragment", [
    ({"num_experts_per_tok": ...}, "num_experts_per_tok is missing"),
    ({"num_experts_per_tok": 3}, "num_experts_per_tok = 3 is more than num_local_experts = 2"),
    ({"num_local_experts": 3}, "num_local_experts = 3, but the checkpoint's tensors have E = 2"),
    ({"num_local_experts": "2"}, "num_local_experts: expected a whole number, received text '2'"),
    ({"norm_topk_prob": False}, "norm_topk_prob = false"),
    ({"router_jitter_noise": "x"}, "router_jitter_noise: expected a number"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"attention_bias": True}, "attention_bias = true"),
])
def test_what_the_mixtral_layout_cannot_trace_is_refused_by_name(tmp_path, config, fragment):
    _write(tmp_path / "m", config)
    assert_refused(run_app("import", str(tmp_path / "m")), fragment)


def test_the_llama_layout_refuses_a_mixtral_checkpoint(tmp_path):
    _write(tmp_path / "m", {})
    assert_refused(run_app("import", str(tmp_path / "m"), "--layout", "llama"), "num_local_experts")
