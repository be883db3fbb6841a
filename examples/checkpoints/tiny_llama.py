"""Make a tiny LLaMA checkpoint, as Hugging Face saves one, with NumPy and safetensors alone; import and trace it.

    python examples/checkpoints/tiny_llama.py [FOLDER]

writes FOLDER (default: tiny-llama in the current folder) with config.json and model.safetensors,
named and shaped exactly as LlamaForCausalLM.save_pretrained writes them (every projection an
nn.Linear [out, in] without bias, grouped-query attention: 4 query heads share 2 key/value heads,
an untied lm_head), then runs `tracer import` and `tracer run` on it.  No download and no torch are
needed: the weights are random, drawn from a fixed seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np


def make(folder: str, layers: int = 2, C: int = 16, H: int = 4, H_kv: int = 2, F: int = 24, V: int = 40, tied: bool = False,
         prefix: str = "model.", seed: int = 0, config: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Write a random LLaMA (LlamaForCausalLM's keys and config; ``prefix=""`` and no lm_head: a bare LlamaModel) into
    ``folder``; return its tensors.  ``config`` overrides config.json's entries (None removes one)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    d = C // H

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape) * 0.3

    t = {f"{prefix}embed_tokens.weight": w(V, C), f"{prefix}norm.weight": 1 + w(C)}
    for i in range(layers):
        p = f"{prefix}layers.{i}."
        t |= {p + "input_layernorm.weight": 1 + w(C), p + "post_attention_layernorm.weight": 1 + w(C),
              p + "self_attn.q_proj.weight": w(H * d, C), p + "self_attn.k_proj.weight": w(H_kv * d, C),  # [out, in]
              p + "self_attn.v_proj.weight": w(H_kv * d, C), p + "self_attn.o_proj.weight": w(C, H * d),
              p + "mlp.gate_proj.weight": w(F, C), p + "mlp.up_proj.weight": w(F, C), p + "mlp.down_proj.weight": w(C, F)}
    if not tied and prefix:
        t["lm_head.weight"] = w(V, C)
    os.makedirs(folder, exist_ok=True)
    save_file(t, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    cfg: dict[str, Any] = {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": C, "num_attention_heads": H,
        "num_key_value_heads": H_kv, "intermediate_size": F, "num_hidden_layers": layers, "vocab_size": V,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None, "hidden_act": "silu",
        "tie_word_embeddings": tied, "attention_bias": False, "mlp_bias": False, "max_position_embeddings": 64}
    cfg.update(config or {})
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
        json.dump({k: v for k, v in cfg.items() if v is not None}, fh, indent=2)
    return t


def main() -> int:
    folder = sys.argv[1] if len(sys.argv) > 1 else "tiny-llama"
    make(folder)
    spec = os.path.join(os.path.dirname(os.path.abspath(folder)), "tiny-llama.yaml")
    tracer = [sys.executable, "-m", "tracer"]
    for args in (["import", folder, "--tokens", "5,17,3,8", "-o", spec], ["run", spec, "--stage", "blocks.0.attn.k"]):
        print("$ tracer " + " ".join(args), flush=True)
        code = subprocess.call(tracer + args)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
