"""LLaMA and Mistral with head_dim set apart from hidden_size / num_attention_heads, imported as dims.d and traced.

Without torch: the import writes dims.d (and nothing when head_dim is C / H), and a head_dim the tensors contradict is
refused by name.  With torch and transformers: tiny random LlamaForCausalLM and MistralForCausalLM with head_dim != C / H,
saved by transformers, imported with no flags and traced: every layer's output, the final norm, the logits and the
attention weights agree with HF's forward to 1e-10 in float64 once HF's float32 internals are lifted (test_llama.py's
_float64_internals), and `tracer grad`'s weight gradients agree with torch autograd through HF's own model to 1e-10.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, run_app
from test_llama import IDS, RTOL_FLOAT32, _compare, _float64_internals, _hf_forward, _traced, imported, write_llama

from tracer.spec import load_spec

TOL = 1e-10


# -- without torch -----------------------------------------------------------------------

def test_head_dim_equal_to_c_over_h_writes_no_d(tmp_path):
    write_llama(tmp_path / "ckpt", head_dim=4)  # C = 16, H = 4
    text = imported(tmp_path, tmp_path / "ckpt").read_text()
    assert "  d:" not in text
    assert load_spec(str(tmp_path / "spec.yaml")).dims.head_dim is None


def test_a_head_dim_the_tensors_contradict_is_refused(tmp_path):
    write_llama(tmp_path / "ckpt", head_dim=6)
    assert_refused(run_app("import", str(tmp_path / "ckpt")),
                   "config.json: head_dim = 6, but the checkpoint's tensors have d = 4 (model.layers.0.self_attn.q_proj.weight is [16,16])")


# -- against Hugging Face (torch and transformers) ------------------------------------------

def _hf(tmp_path: Path, model_type: str = "llama", **extra):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face needs transformers (optional extra)")
    torch.manual_seed(0)
    config_class, model_class = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                                 "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM)}[model_type]
    # C = 24 with H = 4 heads of width d = 10: H * d = 40 != C, and H_kv = 2 key/value heads of width 10
    config = config_class(vocab_size=96, hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=10, max_position_embeddings=64, rms_norm_eps=1e-5, initializer_range=0.3,
                          rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, **extra)
    model = model_class(config).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "norm" in name:
                p.add_(0.3 * torch.randn_like(p))  # biases and norms away from their 0 / 1 start
    folder = tmp_path / model_type
    model.save_pretrained(str(folder))
    model = model_class.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    return torch, model, folder


def _module(model_type: str):
    if model_type == "mistral":
        from transformers.models.mistral import modeling_mistral as m
        return m, "Mistral"
    from transformers.models.llama import modeling_llama as m
    return m, "Llama"


CASES = {"llama": ("llama", {}), "llama-biases": ("llama", {"attention_bias": True}), "mistral": ("mistral", {"sliding_window": None})}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_hugging_face_in_float64(tmp_path, monkeypatch, case):
    model_type, extra = CASES[case]
    torch, model, folder = _hf(tmp_path, model_type, **extra)
    shipped = _hf_forward(torch, model, IDS)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))  # no flags
    text = spec.read_text()
    assert "  d: 10" in text and "head_dim" in text
    st = _traced(spec)
    assert st["blocks.0.attn.q"].shape == (1, 4, 8, 10) and st["blocks.0.attn.k"].shape == (1, 2, 8, 10)
    assert st["blocks.1.attn.heads"].shape == (1, 8, 40)
    _compare(st, *shipped, RTOL_FLOAT32)  # HF as shipped: within float32's rounding
    module, prefix = _module(model_type)
    _float64_internals(monkeypatch, torch, module, prefix)
    found = _compare(st, *_hf_forward(torch, model, IDS), rtol=None, atol=TOL)
    assert max(found.values()) <= TOL


@pytest.mark.parametrize("case", ["llama", "llama-biases"])
def test_grad_matches_torch_autograd_through_hugging_face(tmp_path, monkeypatch, case):
    model_type, extra = CASES[case]
    torch, model, folder = _hf(tmp_path, model_type, **extra)
    module, prefix = _module(model_type)
    _float64_internals(monkeypatch, torch, module, prefix)
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
        if extra.get("attention_bias"):
            pairs |= {f"blocks.{i}.attn.b_{x}": (f"{p}self_attn.{x}_proj.bias", False) for x in "qkvo"}
        pairs |= {f"blocks.{i}.ffn.{w}": (f"{p}mlp.{proj}_proj.weight", True) for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))}
        pairs |= {f"blocks.{i}.norm1.gamma": (p + "input_layernorm.weight", False), f"blocks.{i}.norm2.gamma": (p + "post_attention_layernorm.weight", False)}
    for name, (key, transpose) in pairs.items():
        want = hf[key].grad.numpy()
        want = want.T if transpose else want
        got = gt.weight_grads[name]
        assert got.shape == want.shape, name
        assert np.max(np.abs(got - want)) <= TOL * max(1.0, float(np.max(np.abs(want)))), name
    assert gt.weight_grads["blocks.0.attn.w_o"].shape == (40, 24)


def test_mixtral_with_a_head_dim_of_its_own_matches_hugging_face_in_float64(tmp_path, monkeypatch):
    """Mixtral reads its attention through LLaMA's reader: head_dim = 6 for hidden_size 16 and 4 heads is dims.d too."""
    from test_mixtral import IDS as MIXTRAL_IDS
    from test_mixtral import _lift, _mixtral

    torch, model, folder = _mixtral(tmp_path, head_dim=6)
    _lift(monkeypatch, torch)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, MIXTRAL_IDS)))
    text = spec.read_text()
    assert "layout: mixtral" in text and "  d: 6" in text
    st = _traced(spec)
    assert st["blocks.0.attn.heads"].shape == (1, len(MIXTRAL_IDS), 24)
    found = _compare(st, *_hf_forward(torch, model, MIXTRAL_IDS), rtol=None, atol=TOL)
    assert max(found.values()) <= TOL
