"""Zero-ablating a head agrees with Hugging Face's forward with that head's slice of W_O zeroed.

A tiny random GPT-2 and LLaMA (saved with save_pretrained in tmp_path, imported with `tracer import`) are traced
with ``--ablate blocks.L.attn.head.h``; the same model in Hugging Face has the head's part of its output projection
set to zero (GPT-2's Conv1D c_proj keeps W as [in, out]: rows h d .. (h + 1) d; LLaMA's o_proj as [out, in]:
those columns).  Every layer's output, the final norm and the logits agree in float64 to 1e-10 (HF's float32
rotary angles, softmax and RMSNorm lifted to float64, as the parity tests do).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_app
from helpers.hf_parity import IDS, hf_forward, imported, lift_float32, need_torch, saved

TOL = 1e-10


def traced(spec: Path, *args: str) -> dict[str, np.ndarray]:
    r = run_app("run", str(spec), "--json", "--all", *args)
    assert r.returncode == 0, r.stderr
    return {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}


def largest(st: dict[str, np.ndarray], hidden: list[np.ndarray], outputs: list[np.ndarray], logits: np.ndarray) -> float:
    L = len(outputs)
    pairs = {"final_norm": hidden[L], "logits": logits, **{f"blocks.{i}.output": outputs[i] for i in range(L)}}
    found = 0.0
    for name, want in pairs.items():
        assert st[name].shape == want.shape, name
        found = max(found, float(np.max(np.abs(st[name] - want))))
    return found


@pytest.mark.parametrize("layer, head", [(0, 1), (1, 3)])
def test_gpt2_head_ablation_is_hugging_face_with_its_rows_of_c_proj_zeroed(tmp_path, layer, head):
    torch, transformers = need_torch()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=48, n_positions=16, attn_implementation="eager")
    model = saved(torch, transformers.GPT2LMHeadModel, cfg, tmp_path / "gpt2")
    spec = imported(tmp_path, tmp_path / "gpt2", "--tokens", ",".join(map(str, IDS)))
    clean = traced(spec)
    st = traced(spec, "--ablate", f"blocks.{layer}.attn.head.{head}")
    d = 32 // 4
    with torch.no_grad():
        model.transformer.h[layer].attn.c_proj.weight[head * d:(head + 1) * d, :] = 0.0
    found = largest(st, *hf_forward(torch, model, model.transformer.h, IDS))
    assert found <= TOL, found
    assert float(np.max(np.abs(clean["logits"] - st["logits"]))) > 1e3 * TOL  # the ablation changed the logits


def test_llama_head_ablation_is_hugging_face_with_its_columns_of_o_proj_zeroed(tmp_path, monkeypatch):
    torch, transformers = need_torch()
    from transformers.models.llama import modeling_llama as ml

    lift_float32(monkeypatch, torch, ml, "Llama")

    def rms_norm(self, x):  # HF's RMSNorm runs in float32 even in a float64 model: the same formula in float64
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    monkeypatch.setattr(ml.LlamaRMSNorm, "forward", rms_norm)
    cfg = transformers.LlamaConfig(vocab_size=48, hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=32, rms_norm_eps=1e-5,
                                   rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, initializer_range=0.2)
    model = saved(torch, transformers.LlamaForCausalLM, cfg, tmp_path / "llama")
    spec = imported(tmp_path, tmp_path / "llama", "--tokens", ",".join(map(str, IDS)))
    clean = traced(spec)
    st = traced(spec, "--ablate", "blocks.1.attn.head.2", "--ablate", "blocks.0.attn.head.0")
    d = 32 // 4
    with torch.no_grad():
        model.model.layers[1].self_attn.o_proj.weight[:, 2 * d:3 * d] = 0.0
        model.model.layers[0].self_attn.o_proj.weight[:, 0:d] = 0.0
    found = largest(st, *hf_forward(torch, model, model.model.layers, IDS))
    assert found <= TOL, found
    assert float(np.max(np.abs(clean["logits"] - st["logits"]))) > 1e3 * TOL
