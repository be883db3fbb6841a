"""Save a tiny random Hugging Face model of one family, as save_pretrained writes it (needs torch and transformers).

    python examples/checkpoints/tiny_hf.py FAMILY [FOLDER]

FAMILY is one of FAMILIES below (gpt2, llama, mistral, qwen2, qwen3, mixtral, bert, roberta, distilbert, gpt_neox, phi, gemma, \
gemma2 (sliding window 3 on layers 0 and 2 of 3, soft caps 50 and 30), opt, opt-post (OPT-350m's shape: Post-Norm, an embedding 16 wide \
projected to 32 and back), t5 (T5ForConditionalGeneration, gated-gelu, d_kv 6 != C/H), stablelm, olmo, olmo2, \
starcoder2 (sliding window 4), granite (multipliers 12, 0.0625, 0.22, 8)); FOLDER defaults to tiny-FAMILY.  \
The weights are random from a fixed seed,
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
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                "num_key_value_heads": 2, "intermediate_size": 64}),
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                      "num_key_value_heads": 2, "intermediate_size": 64,
                                                                                      "sliding_window": 4}),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                "num_key_value_heads": 2, "intermediate_size": 64}),
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64}),
        "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                      "num_key_value_heads": 2, "intermediate_size": 64,
                                                                                      "num_local_experts": 4, "num_experts_per_tok": 2}),
        "bert": (transformers.BertConfig, transformers.BertModel, small | {"hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64}),
        "roberta": (transformers.RobertaConfig, transformers.RobertaModel, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                "intermediate_size": 64, "pad_token_id": 1}),
        "distilbert": (transformers.DistilBertConfig, transformers.DistilBertModel, {"vocab_size": 64, "dim": 32, "n_heads": 4, "n_layers": 2,
                                                                                     "hidden_dim": 64, "max_position_embeddings": 32}),
        "gemma": (transformers.GemmaConfig, transformers.GemmaForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
                                                                                 "head_dim": 8, "intermediate_size": 64}),
        "gemma2": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
                                                                                    "head_dim": 8, "intermediate_size": 64, "num_hidden_layers": 3,
                                                                                    "sliding_window": 3, "query_pre_attn_scalar": 8}),
        "opt": (transformers.OPTConfig, transformers.OPTForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "ffn_dim": 64}),
        "opt-post": (transformers.OPTConfig, transformers.OPTForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "ffn_dim": 64,
                                                                               "do_layer_norm_before": False, "word_embed_proj_dim": 16}),
        "t5": (transformers.T5Config, transformers.T5ForConditionalGeneration, {"vocab_size": 64, "d_model": 32, "num_heads": 4, "d_kv": 6,
                                                                             "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2,
                                                                             "relative_attention_num_buckets": 8, "relative_attention_max_distance": 16,
                                                                             "feed_forward_proj": "gated-gelu", "decoder_start_token_id": 0}),
    }
    configs |= {  # StableLM, OLMo, OLMo 2, Granite, StarCoder2
        "stablelm": (transformers.StableLmConfig, transformers.StableLmForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                         "num_key_value_heads": 2, "intermediate_size": 64}),
        "olmo": (transformers.OlmoConfig, transformers.OlmoForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
                                                                             "intermediate_size": 64, "pad_token_id": 1, "eos_token_id": 2}),
        "starcoder2": (transformers.Starcoder2Config, transformers.Starcoder2ForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                               "num_key_value_heads": 2, "intermediate_size": 64,
                                                                                               "sliding_window": 4, "bos_token_id": 0,
                                                                                               "eos_token_id": 0}),
        "granite": (transformers.GraniteConfig, transformers.GraniteForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4,
                                                                                      "num_key_value_heads": 2, "intermediate_size": 64,
                                                                                      "embedding_multiplier": 12.0, "attention_multiplier": 0.0625,
                                                                                      "residual_multiplier": 0.22, "logits_scaling": 8.0,
                                                                                      "bos_token_id": 0, "eos_token_id": 0}),
        "olmo2": (transformers.Olmo2Config, transformers.Olmo2ForCausalLM, small | {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
                                                                               "intermediate_size": 64, "pad_token_id": 1, "eos_token_id": 2}),
    }
    encoders = {"bert", "roberta"}  # saved without the pooler, which tracer does not trace
    config_class, model_class, settings = configs[family]
    torch.manual_seed(0)
    model = model_class(config_class(**settings), add_pooling_layer=False) if family in encoders else model_class(config_class(**settings))
    model = model.double()
    if family in ("gemma", "gemma2"):  # Gemma's norm weights start at 0 (the scale 1 + 0): random ones, so that (1 + w) shows
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.normal_(0.0, 0.5)
    model.save_pretrained(folder)
    print(f"wrote {folder} ({family}); import it with: tracer import {folder}")


FAMILIES = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "mixtral", "bert", "roberta", "distilbert", "gpt_neox", "phi", "gemma", "gemma2", "opt", "opt-post",
            "t5") + ("stablelm", "olmo", "olmo2", "starcoder2", "granite")

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in FAMILIES:
        sys.exit(f"usage: python examples/checkpoints/tiny_hf.py {'|'.join(FAMILIES)} [FOLDER]")
    make(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else f"tiny-{sys.argv[1]}")
