"""The stablelm family: Hugging Face StableLM (StableLmForCausalLM), its layout table and its config reader.

What StableLmDecoderLayer computes, each a tracer setting: LayerNorm with a bias (``norm: layernorm``, input_layernorm,
post_attention_layernorm and model.norm each a weight and a bias), a SwiGLU MLP without biases (down(silu(gate) * up)),
partial rotary (rope_parameters.partial_rotary_factor, 0.25 by default: each head's first r = int(d * factor)
coordinates turned as rotate_half pairs them, ``rotary_dim``), grouped-query attention, q/k/v biases when
use_qkv_bias is true (o_proj never has one), and, with use_parallel_residual, one LayerNorm feeding the attention and
the MLP in parallel (``norm_order: parallel_shared``; StableLM then has no post_attention_layernorm).

qk_layernorm (a LayerNorm of each head of q and k, with weights of its own per head) is not modelled: refused by name.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Refusal, Take, group, norm, refuse, shape_of, stored_dtype
from tracer.checkpoints.families.gpt_neox import rope, rotary_dim, rotary_notes, tied_head
from tracer.checkpoints.families.llama import bias_rules, swiglu_note
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """nn.Linear stores [out, in]: transposed.  q/k/v_proj's biases are optional (use_qkv_bias); o_proj and the MLP have none."""
    L = "model.layers.{i}."
    table = {"embedding": Take("model.embed_tokens.weight"), "head": Take("lm_head.weight", transpose=True)}
    table |= group("blocks.{i}.", "norm1", norm(L + "input_layernorm"))
    attn = {f"w_{x}": Take(f"{L}self_attn.{x}_proj.weight", transpose=True) for x in "qkvo"}
    attn |= {f"b_{x}": Take(f"{L}self_attn.{x}_proj.bias", optional=True) for x in "qkv"}
    table |= group("blocks.{i}.", "attn", attn)
    table |= group("blocks.{i}.", "norm2", {k: t._replace(optional=True) for k, t in norm(L + "post_attention_layernorm").items()})
    table |= group("blocks.{i}.", "ffn", {w: Take(f"{L}mlp.{proj}_proj.weight", transpose=True)
                                          for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))})
    table |= group("", "final_norm", norm("model.norm"))
    return table


STABLELM_KEYS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                           "hidden_act", "layer_norm_eps", "tie_word_embeddings", "rope_parameters", "rope_scaling", "partial_rotary_factor",
                           "rope_theta", "use_qkv_bias", "qk_layernorm", "use_parallel_residual", "head_dim"})

# what the stablelm reader reads: config.json's keys (any other refused by name) and the tensors they describe
STABLELM_READS = Family("stablelm", needs=msg("a StableLM checkpoint needs its config.json (heads, key/value heads, partial_rotary_factor are not "
                                              "in the tensors); put it beside the weights"),
                        known=STABLELM_KEYS, embedding=msg("holds no StableLM token embedding (model.embed_tokens.weight); is it a StableLM checkpoint?"),
                        layer=msg("holds no StableLM layer (model.layers.0.input_layernorm.weight)"),
                        fields=(Field("hidden_act", "text"), Field("layer_norm_eps", "number", "eps", 1e-5, "StableLmConfig's layer_norm_eps"),
                                Field("num_key_value_heads"), Field("head_dim"), Field("qk_layernorm", "flag"), Field("use_parallel_residual", "flag"),
                                Field("use_qkv_bias", "flag")),
                        refusals=(Refusal("hidden_act", lambda v: v not in (None, "silu"), msg("hidden_act {act}: tracer's SwiGLU gates with silu", act="")),
                                  Refusal("qk_layernorm", bool, msg("qk_layernorm = true: a LayerNorm of each head of q and k, with weights per head, "
                                                                    "which tracer's attention does not model"))))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face StableLM: LayerNorm with a bias, SwiGLU, partial rotary positions, grouped-query attention, optional q/k/v
    biases and an optional parallel block under one norm."""
    read = STABLELM_READS.read(config, ckpt, layout, options)
    cfg, V, C, H, F, layers, head_dim = read.cfg, read.V, read.C, read.H, read.F, read.layers, read.values["head_dim"]
    H_kv = read.values["num_key_value_heads"] or H
    theta, pct, rope_type, theta_from, pct_from = rope(cfg)
    parallel = bool(read.values["use_parallel_residual"])
    d = C // H
    norm2 = shape_of(ckpt, layout, "blocks.0.norm2.gamma") is not None
    refuse(cfg, [
        (H % H_kv != 0, msg("num_key_value_heads = {H_kv} must divide num_attention_heads = {H}", H_kv=H_kv, H=H)),
        (head_dim not in (None, d), msg("head_dim = {head_dim}: StableLM's heads have width d = C / H = {d}", head_dim=head_dim, d=d)),
        (rope_type != "default", msg("rope type {rope}: tracer's rotary positions are the default RoPE (no scaling)", rope=repr(rope_type))),
        (pct is not None and pct > 1, msg("{key} = {value}: at most 1 (the whole head turned)", key=pct_from, value=pct)),
        (parallel and norm2, msg("use_parallel_residual = true, but the checkpoint holds post_attention_layernorm, which StableLM's parallel block does "
                                 "not read")),
        (not parallel and not norm2, msg("use_parallel_residual = {value}, but the checkpoint holds no post_attention_layernorm",
                                         value=repr(read.values["use_parallel_residual"] or False))),
    ] + bias_rules(cfg, ckpt, layout, layers, ("use_qkv_bias",)))
    eps = read.settings["eps"]
    theta = cfg.setting("position_base", theta_from, theta, 10000.0, "StableLmConfig's default rope_theta")
    r = rotary_dim(cfg, pct, pct_from, d, 0.25, "StableLmConfig's default partial_rotary_factor")
    if not cfg.has("num_key_value_heads"):
        cfg.notes["H_kv"] = "assumed: not in config.json (= num_attention_heads)"
    tied = tied_head(cfg, ckpt, layout)
    dims = {"C": C, "H": H} | ({"H_kv": H_kv} if H_kv != H else {}) | {"F": F, "V": V}
    notes = {"C": "hidden_size" if cfg.has("hidden_size") else "the width of embed_tokens",
             "H_kv": "num_key_value_heads (grouped-query attention)",
             "F": "intermediate_size (gate_proj, up_proj)" if cfg.has("intermediate_size") else "the width of gate_proj",
             "V": "vocab_size (rows of embed_tokens)" if cfg.has("vocab_size") else "rows of embed_tokens"} | cfg.notes
    block: dict[str, Any] = {"norm_order": "parallel_shared" if parallel else "pre", "layers": layers, "norm": "layernorm", "eps": eps,
                             "activation": "swiglu", "positions": "rotary", "position_base": theta, "rotary_pairing": "half"}
    if r != d:
        block["rotary_dim"] = r
    block |= {"mask": "causal", "final_norm": True, "head": "tied" if tied else "separate"}
    notes |= {"norm_order": ("use_parallel_residual: one input_layernorm, attention and MLP in parallel, Y = X + MHA(LN(X)) + FFN(LN(X))"
                             if parallel else "StableLmDecoderLayer: the pre-norm block"),
              "norm": "nn.LayerNorm with a weight and a bias", "final_norm": "model.norm"} | rotary_notes(tied, r != d)
    swiglu_note(cfg, notes, "StableLmMLP", "StableLmConfig")
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())


LAYOUT = Layout("stablelm", "Hugging Face StableLM (StableLmForCausalLM): LayerNorm, SwiGLU, partial rotary positions", table(), read_config,
                aliases=(("model.", ""),), model_types=("stablelm",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), float32=base.ROTARY_SOFTMAX)
