"""Make a tiny GPT-2 checkpoint, as Hugging Face saves one, with NumPy and safetensors alone; import and trace it.

    python examples/checkpoints/tiny_gpt2.py [FOLDER]

writes FOLDER (default: tiny-gpt2 in the current folder) with config.json and model.safetensors,
named and shaped exactly as GPT2LMHeadModel.save_pretrained writes them (Conv1D weights [in, out],
q, k, v packed in c_attn, the head tied to wte so lm_head.weight is not stored), then runs
`tracer import` and `tracer run` on it.  No download and no torch are needed: the weights are
random, drawn from a fixed seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np


def make(folder: str, layers: int = 2, C: int = 32, H: int = 4, V: int = 64, T_max: int = 32, seed: int = 0,
         dtype: str = "float32") -> dict[str, np.ndarray]:
    """Write a random GPT-2 (GPT2LMHeadModel's keys and config) into ``folder``; return its tensors."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    F = 4 * C

    def w(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(dtype)

    t = {"transformer.wte.weight": w(V, C), "transformer.wpe.weight": w(T_max, C),
         "transformer.ln_f.weight": 1 + w(C), "transformer.ln_f.bias": w(C)}
    for i in range(layers):
        p = f"transformer.h.{i}."
        t |= {p + "ln_1.weight": 1 + w(C), p + "ln_1.bias": w(C),
              p + "attn.c_attn.weight": w(C, 3 * C), p + "attn.c_attn.bias": w(3 * C),  # Conv1D: [in, out], q|k|v side by side
              p + "attn.c_proj.weight": w(C, C), p + "attn.c_proj.bias": w(C),
              p + "ln_2.weight": 1 + w(C), p + "ln_2.bias": w(C),
              p + "mlp.c_fc.weight": w(C, F), p + "mlp.c_fc.bias": w(F),
              p + "mlp.c_proj.weight": w(F, C), p + "mlp.c_proj.bias": w(C)}
    os.makedirs(folder, exist_ok=True)
    save_file(t, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": layers, "n_embd": C, "n_head": H,
              "n_inner": None, "vocab_size": V, "n_positions": T_max, "layer_norm_epsilon": 1e-5,
              "activation_function": "gelu_new", "tie_word_embeddings": True}
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2)
    return t


def main() -> int:
    folder = sys.argv[1] if len(sys.argv) > 1 else "tiny-gpt2"
    make(folder)
    spec = os.path.join(os.path.dirname(os.path.abspath(folder)), "tiny-gpt2.yaml")
    tracer = [sys.executable, "-m", "tracer"]
    for args in (["import", folder, "--layers", "0-0", "--tokens", "5,17,42", "-o", spec], ["run", spec]):
        print("$ tracer " + " ".join(args), flush=True)
        code = subprocess.call(tracer + args)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
