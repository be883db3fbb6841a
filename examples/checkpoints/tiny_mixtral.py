"""Make a tiny Mixtral checkpoint, as Hugging Face saves one, with NumPy and safetensors alone; import and trace it.

    python examples/checkpoints/tiny_mixtral.py [FOLDER]

writes FOLDER (default: tiny-mixtral in the current folder) with config.json and model.safetensors, named
and shaped as MixtralForCausalLM.save_pretrained writes them: LLaMA's attention and norms, and in place of
the MLP a router (block_sparse_moe.gate [E,C]) and E SwiGLU experts (block_sparse_moe.experts.{e}.w1, w3,
w2), 2 of the 4 chosen at each position; then runs `tracer import` and `tracer run` on it.  No download and
no torch are needed: the weights are random, drawn from a fixed seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np


def make(folder: str, layers: int = 2, C: int = 16, H: int = 4, H_kv: int = 2, F: int = 24, V: int = 40, E: int = 4, k: int = 2,
         seed: int = 0, config: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Write a random Mixtral (MixtralForCausalLM's keys and config) into ``folder``; return its tensors.
    ``config`` overrides config.json's entries (None removes one)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    d = C // H

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape) * 0.3

    t = {"model.embed_tokens.weight": w(V, C), "model.norm.weight": 1 + w(C), "lm_head.weight": w(V, C)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t |= {p + "input_layernorm.weight": 1 + w(C), p + "post_attention_layernorm.weight": 1 + w(C),
              p + "self_attn.q_proj.weight": w(H * d, C), p + "self_attn.k_proj.weight": w(H_kv * d, C),  # [out, in]
              p + "self_attn.v_proj.weight": w(H_kv * d, C), p + "self_attn.o_proj.weight": w(C, H * d),
              p + "block_sparse_moe.gate.weight": w(E, C)}
        for e in range(E):
            x = f"{p}block_sparse_moe.experts.{e}."
            t |= {x + "w1.weight": w(F, C), x + "w3.weight": w(F, C), x + "w2.weight": w(C, F)}
    os.makedirs(folder, exist_ok=True)
    save_file(t, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    cfg: dict[str, Any] = {
        "model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": C, "num_attention_heads": H,
        "num_key_value_heads": H_kv, "intermediate_size": F, "num_hidden_layers": layers, "vocab_size": V,
        "rms_norm_eps": 1e-5, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "hidden_act": "silu",
        "tie_word_embeddings": False, "num_local_experts": E, "num_experts_per_tok": k, "router_jitter_noise": 0.0,
        "router_aux_loss_coef": 0.001, "output_router_logits": False, "sliding_window": None, "max_position_embeddings": 64}
    cfg.update(config or {})
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
        json.dump({k: v for k, v in cfg.items() if v is not None}, fh, indent=2)
    return t


def main() -> int:
    folder = sys.argv[1] if len(sys.argv) > 1 else "tiny-mixtral"
    make(folder)
    spec = os.path.join(os.path.dirname(os.path.abspath(folder)), "tiny-mixtral.yaml")
    tracer = [sys.executable, "-m", "tracer"]
    for args in (["import", folder, "--tokens", "5,17,3,8", "-o", spec], ["run", spec, "--stage", "blocks.0.moe.chosen"]):
        print("$ tracer " + " ".join(args), flush=True)
        code = subprocess.call(tracer + args)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
