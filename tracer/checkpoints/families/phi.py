"""The phi family: Hugging Face Phi (PhiForCausalLM, Phi-1 / Phi-1.5 / Phi-2), its layout table and its config reader.

What is new: a parallel block under one LayerNorm (tracer's norm_order parallel_shared: Y = X + MHA(LN(X)) + FFN(LN(X))),
partial rotary (partial_rotary_factor: each head's first r = int(d * factor) coordinates turned, as rotate_half pairs
them), the attention's output projection named dense, and an output head with a bias (head_bias).
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import (
    Config,
    Layout,
    ModelConfig,
    Options,
    Take,
    group,
    layer_count,
    need_heads,
    norm,
    refuse,
    refuse_unknown,
    shape_of,
    stored_dtype,
)
from tracer.checkpoints.families.gpt_neox import rope
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg
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


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Phi: one LayerNorm before a parallel attention and MLP, partial rotary positions, a biased head."""
    if not config:
        raise CheckpointError(at(ckpt.path, msg("a Phi checkpoint needs its config.json (heads, partial_rotary_factor are not in the tensors); put it beside the weights")))
    cfg = Config(config, ckpt, options, "phi")
    cfg.model_type(layout.model_types, {})
    embed = shape_of(ckpt, layout, "embedding")
    if embed is None:
        raise CheckpointError(at(ckpt.path, msg("holds no Phi token embedding (model.embed_tokens.weight); is it a Phi checkpoint?")))
    V, C = embed
    found = layout.locate("blocks.0.norm1.gamma", ckpt.key_set())
    pattern = found[0].key.replace(".0.", ".{i}.", 1) if found else "model.layers.{i}.input_layernorm.weight"
    layers = layer_count(ckpt.keys(), pattern)
    if layers == 0:
        raise CheckpointError(at(ckpt.path, msg("holds no Phi layer (model.layers.0.input_layernorm.weight)")))
    embedding_key = layout.locate("embedding", ckpt.keys())[0].key  # type: ignore[index]
    cfg.same("hidden_size", C, "C", embedding_key, embed)
    cfg.same("vocab_size", V, "V", embedding_key, embed)
    cfg.same("num_hidden_layers", layers, "layers")
    refuse_unknown(cfg, PHI_KEYS, "phi")
    heads = cfg.integer("num_attention_heads")
    if heads is None:
        need_heads(options.heads, C, "config.json")
    H = cfg.setting("H", "num_attention_heads", heads, None, "")
    H_kv = cfg.integer("num_key_value_heads") or H
    act = cfg.text("hidden_act")
    head_dim = cfg.integer("head_dim")
    theta, pct, rope_type, theta_from, pct_from = rope(cfg)
    d = C // H
    r = int(d * pct) if pct is not None else d // 2  # Hugging Face: int(head_dim * partial_rotary_factor), 0.5 by default
    refuse(cfg, [
        (C % H != 0, msg("num_attention_heads = {H} does not divide hidden_size = {C} (each head has width d = C / H)", H=H, C=C)),
        (H % H_kv != 0, msg("num_key_value_heads = {H_kv} must divide num_attention_heads = {H}", H_kv=H_kv, H=H)),
        (head_dim not in (None, d), msg("head_dim = {head_dim}: tracer's heads have width d = C / H = {d}", head_dim=head_dim, d=d)),
        (act is not None and act not in HF_ACTIVATIONS, msg("hidden_act {act}: expected one of {join}", act=repr(act), join=", ".join(HF_ACTIVATIONS))),
        (bool(cfg.flag("qk_layernorm")), msg("qk_layernorm = true: tracer's attention does not normalise q and k")),
        (rope_type != "default", msg("rope type {rope}: tracer's rotary positions are the default RoPE (no scaling)", rope=repr(rope_type))),
        (pct is not None and pct > 1, msg("{key} = {value}: at most 1 (the whole head turned)", key=pct_from, value=pct)),
    ])
    if options.activation is not None and options.activation != HF_ACTIVATIONS.get(act or "gelu_new"):
        raise CheckpointError(at(f"--activation {options.activation}", msg("{path} gives hidden_act = {act}: leave --activation out, or correct config.json",
                                                                             path=cfg.path, act=act or "gelu_new")))
    activation = cfg.setting("activation", "hidden_act", HF_ACTIVATIONS.get(act) if act else None, "gelu_tanh", "Phi's default hidden_act gelu_new",
                             note=f"hidden_act: {act}", shown=act)
    eps = cfg.setting("eps", "layer_norm_eps", cfg.number("layer_norm_eps"), 1e-5, "Phi's layer_norm_eps")
    theta = cfg.setting("position_base", theta_from, theta, 10000.0, "Phi's default rope_theta")
    if pct is None:
        cfg.notes["rotary_dim"] = f"assumed: {cfg.why_assumed()} (Phi's default partial_rotary_factor 0.5: int(d * 0.5) = {r})"
        cfg.assumed.append(("rotary_dim", r))
    else:
        cfg.notes["rotary_dim"] = f"{pct_from} {pct:g}: int(d * {pct:g}) = {r} of each head's d = {d} coordinates turned"
    if not cfg.has("num_key_value_heads"):
        cfg.notes["H_kv"] = "assumed: not in config.json (= num_attention_heads, as Hugging Face does)"
    w1 = shape_of(ckpt, layout, "blocks.0.ffn.w1")
    if w1 is not None:
        cfg.same("intermediate_size", w1[1], "F")
    F = w1[1] if w1 else cfg.integer("intermediate_size")
    if F is None:
        raise cfg.fail("intermediate_size", msg("a whole number"), None)
    tie = cfg.flag("tie_word_embeddings")
    has_head = shape_of(ckpt, layout, "head") is not None
    tied = bool(tie) or (tie is None and not has_head)
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
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",))
