"""The phi family: Hugging Face Phi (PhiForCausalLM, Phi-1 / Phi-1.5 / Phi-2), its layout table and its config reader.

What is new: a parallel block under one LayerNorm (tracer's norm_order parallel_shared: Y = X + MHA(LN(X)) + FFN(LN(X))),
partial rotary (partial_rotary_factor: each head's first r = int(d * factor) coordinates turned, as rotate_half pairs
them), the attention's output projection named dense, and an output head with a bias (head_bias).
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Refusal, Take, group, norm, refuse, shape_of, stored_dtype
from tracer.checkpoints.families.gpt_neox import repeated, rope, rotary_dim, tied_head
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg
from tracer.model.activations import HF_ACTIVATIONS


def table() -> dict[str, Take]:
    """nn.Linear stores [out, in]: transposed.  q_proj, k_proj, v_proj and dense all have biases; so has lm_head."""
    L = "model.layers.{i}."
    table = {"embedding": Take("model.embed_tokens.weight"), "head": Take("lm_head.weight", transpose=True), "head_bias": Take("lm_head.bias")}
    table |= group("blocks.{i}.", "norm1", norm(L + "input_layernorm"))
    attn = {f"w_{x}": Take(f"{L}self_attn.{x}_proj.weight", transpose=True) for x in "qkv"}
    attn |= {f"b_{x}": Take(f"{L}self_attn.{x}_proj.bias") for x in "qkv"}
    attn |= {"w_o": Take(L + "self_attn.dense.weight", transpose=True), "b_o": Take(L + "self_attn.dense.bias")}
    table |= group("blocks.{i}.", "attn", attn)
    table |= group("blocks.{i}.", "ffn", {"w1": Take(L + "mlp.fc1.weight", transpose=True), "b1": Take(L + "mlp.fc1.bias"),
                                          "w2": Take(L + "mlp.fc2.weight", transpose=True), "b2": Take(L + "mlp.fc2.bias")})
    table |= group("", "final_norm", norm("model.final_layernorm"))
    return table


PHI_KEYS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                   "hidden_act", "layer_norm_eps", "tie_word_embeddings", "rope_parameters", "rope_scaling", "partial_rotary_factor",
                   "rope_theta", "qk_layernorm", "head_dim"})


# what the phi reader reads: config.json's keys (any other refused by name) and the tensors they describe
PHI_READS = Family("phi", needs=msg("a Phi checkpoint needs its config.json (heads, partial_rotary_factor are not in the tensors); put it beside the weights"),
                   known=PHI_KEYS, embedding=msg("holds no Phi token embedding (model.embed_tokens.weight); is it a Phi checkpoint?"),
                   layer=msg("holds no Phi layer (model.layers.0.input_layernorm.weight)"),
                   fields=(Field("hidden_act", "text", "activation", "gelu_tanh", "Phi's default hidden_act gelu_new", "hidden_act: {value}", HF_ACTIVATIONS,
                                 check=repeated("gelu_new")),
                           Field("layer_norm_eps", "number", "eps", 1e-5, "Phi's layer_norm_eps"), Field("num_key_value_heads"), Field("head_dim"),
                           Field("qk_layernorm", "flag")),
                   refusals=(Refusal("qk_layernorm", bool, msg("qk_layernorm = true: tracer's attention does not normalise q and k")),))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Phi: one LayerNorm before a parallel attention and MLP, partial rotary positions, a biased head."""
    read = PHI_READS.read(config, ckpt, layout, options)
    cfg, V, C, H, F, layers, head_dim = read.cfg, read.V, read.C, read.H, read.F, read.layers, read.values["head_dim"]
    H_kv = read.values["num_key_value_heads"] or H
    theta, pct, rope_type, theta_from, pct_from = rope(cfg)
    d = C // H
    refuse(cfg, [
        (H % H_kv != 0, msg("num_key_value_heads = {H_kv} must divide num_attention_heads = {H}", H_kv=H_kv, H=H)),
        (head_dim not in (None, d), msg("head_dim = {head_dim}: tracer's heads have width d = C / H = {d}", head_dim=head_dim, d=d)),
        (rope_type != "default", msg("rope type {rope}: tracer's rotary positions are the default RoPE (no scaling)", rope=repr(rope_type))),
        (pct is not None and pct > 1, msg("{key} = {value}: at most 1 (the whole head turned)", key=pct_from, value=pct)),
    ])
    activation, eps = read.settings["activation"], read.settings["eps"]
    theta = cfg.setting("position_base", theta_from, theta, 10000.0, "Phi's default rope_theta")
    r = rotary_dim(cfg, pct, pct_from, d, 0.5, "Phi's default partial_rotary_factor")
    if not cfg.has("num_key_value_heads"):
        cfg.notes["H_kv"] = "assumed: not in config.json (= num_attention_heads, as Hugging Face does)"
    tied = tied_head(cfg, ckpt, layout)
    has_bias = shape_of(ckpt, layout, "head_bias") is not None
    dims = {"C": C, "H": H} | ({"H_kv": H_kv} if H_kv != H else {}) | {"F": F, "V": V}
    notes = {"C": "hidden_size" if cfg.has("hidden_size") else "the width of embed_tokens",
             "H_kv": "num_key_value_heads (grouped-query attention)",
             "F": "intermediate_size (fc1)" if cfg.has("intermediate_size") else "the width of fc1",
             "V": "vocab_size (rows of embed_tokens)" if cfg.has("vocab_size") else "rows of embed_tokens"} | cfg.notes
    block: dict[str, Any] = {"norm_order": "parallel_shared", "layers": layers, "norm": "layernorm", "eps": eps,
                             "activation": activation, "positions": "rotary", "position_base": theta, "rotary_pairing": "half"}
    if r != d:
        block["rotary_dim"] = r
    block |= {"mask": "causal", "final_norm": True, "head": "tied" if tied else "separate"}
    if has_bias:
        block["head_bias"] = True
    notes |= {"norm_order": "PhiDecoderLayer: one input_layernorm, attention and MLP in parallel, Y = X + MHA(LN(X)) + FFN(LN(X))",
              "positions": "rotary (RoPE) on part of each head, inside each attention",
              "rotary_pairing": "Hugging Face's rotate_half over the rotary part: pairs (i, i + r/2)",
              "final_norm": "model.final_layernorm",
              "head": "lm_head = embed_tokens (tie_word_embeddings)" if tied else "lm_head.weight, untied",
              "head_bias": "lm_head.bias: logits = x W_head + b_head"}
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())


LAYOUT = Layout("phi", "Hugging Face Phi (PhiForCausalLM)", table(), read_config,
                aliases=(("model.", ""),), model_types=("phi",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), float32=base.ROTARY_SOFTMAX)
