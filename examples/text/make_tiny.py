"""Make a tiny tokenizer and a tiny GPT-2 checkpoint that reads it, for text in and the logit lens; no download.

    python examples/text/make_tiny.py [FOLDER]

writes FOLDER (default: tiny-text) with tokenizer.json (a byte-level BPE, GPT-2's kind, trained here on a few
sentences, one of them Chinese, with <s> added in front of every text by its post-processor), config.json
and model.safetensors (random GPT-2 weights whose vocabulary is the tokenizer's).  Then

    tracer import FOLDER --text "The capital of France is" -o tiny-text.yaml
    tracer run tiny-text.yaml
    tracer lens tiny-text.yaml --token " Paris"

Needs the tokenizers package (pip install 'tracer[checkpoints]') and safetensors.
"""

from __future__ import annotations

import json
import os
import sys

SENTENCES = [
    "The capital of France is Paris.",
    "Paris is the capital of France, and Berlin is the capital of Germany.",
    "The cat sat on the mat.",
    "我爱巴黎。巴黎是法国的首都。",
    "我是学生，我爱读书。",
    "我们在巴黎。",
]


def make_tokenizer(path: str, vocab_size: int = 400) -> int:
    """Train a byte-level BPE on SENTENCES and save it as ``path``; return its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(SENTENCES * 20, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    tok.save(path)
    return int(tok.get_vocab_size())


def make(folder: str, layers: int = 2, C: int = 32, H: int = 4, T_max: int = 64, seed: int = 0) -> None:
    """tokenizer.json, config.json and model.safetensors of a tiny random GPT-2 in ``folder``."""
    import numpy as np
    from safetensors.numpy import save_file

    os.makedirs(folder, exist_ok=True)
    V = make_tokenizer(os.path.join(folder, "tokenizer.json"))
    rng = np.random.default_rng(seed)
    F = 4 * C

    def w(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype("float32")

    t = {"transformer.wte.weight": w(V, C, scale=1.0), "transformer.wpe.weight": w(T_max, C),
         "transformer.ln_f.weight": 1 + w(C), "transformer.ln_f.bias": w(C)}
    for i in range(layers):
        p = f"transformer.h.{i}."
        t |= {p + "ln_1.weight": 1 + w(C), p + "ln_1.bias": w(C),
              p + "attn.c_attn.weight": w(C, 3 * C), p + "attn.c_attn.bias": w(3 * C),
              p + "attn.c_proj.weight": w(C, C), p + "attn.c_proj.bias": w(C),
              p + "ln_2.weight": 1 + w(C), p + "ln_2.bias": w(C),
              p + "mlp.c_fc.weight": w(C, F), p + "mlp.c_fc.bias": w(F),
              p + "mlp.c_proj.weight": w(F, C), p + "mlp.c_proj.bias": w(C)}
    save_file(t, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": layers, "n_embd": C, "n_head": H,
              "n_inner": None, "vocab_size": V, "n_positions": T_max, "layer_norm_epsilon": 1e-5,
              "activation_function": "gelu_new", "tie_word_embeddings": True}
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2)


def main() -> int:
    folder = sys.argv[1] if len(sys.argv) > 1 else "tiny-text"
    make(folder)
    print(f"wrote {folder}/tokenizer.json, {folder}/config.json and {folder}/model.safetensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
