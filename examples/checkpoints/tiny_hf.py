"""Save a tiny random Hugging Face model of one family, as save_pretrained writes it (needs torch and transformers).

    python examples/checkpoints/tiny_hf.py FAMILY [FOLDER]

FAMILY is gpt2, gpt_neox (Pythia), phi or opt (opt-post: OPT-350m's shape, Post-Norm with
an embedding 16 wide projected to 32 and back); FOLDER defaults to tiny-FAMILY.  The weights are random from a fixed seed,
in float64, so that `tracer import FOLDER` and `tracer run` can be compared with the model's own forward.
"""

from __future__ import annotations

import sys


def make(family: str, folder: str) -> None:
    import torch
    import transformers

    small = {"vocab_size": 64, "num_hidden_layers": 2, "max_position_embeddings": 32}
    configs = {
        "gpt2": (transformers.GPT2Config, transformers.GPT2LMHeadModel, {"n_embd": 32, "n_head": 4, "n_layer": 2, "vocab_size": 64,
                                                                         "n_positions": 32, "bos_token_id": 0, "eos_token_id": 0}),
        "gpt_neox": (transformers.GPTNeoXConfig, transformers.GPTNeoXForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                       "intermediate_size": 64}),
        "phi": (transformers.PhiConfig, transformers.PhiForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64}),
        "opt": (transformers.OPTConfig, transformers.OPTForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "ffn_dim": 64}),
        "opt-post": (transformers.OPTConfig, transformers.OPTForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "ffn_dim": 64,
                                                                               "do_layer_norm_before": False, "word_embed_proj_dim": 16}),
    }
    config_class, model_class, settings = configs[family]
    torch.manual_seed(0)
    model_class(config_class(**settings)).double().save_pretrained(folder)
    print(f"wrote {folder} ({family}); import it with: tracer import {folder}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("gpt2", "gpt_neox", "phi", "opt", "opt-post"):
        sys.exit("usage: python examples/checkpoints/tiny_hf.py gpt2|gpt_neox|phi|opt|opt-post [FOLDER]")
    make(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else f"tiny-{sys.argv[1]}")
