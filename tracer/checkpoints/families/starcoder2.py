"""The starcoder2 family: Hugging Face StarCoder2 (Starcoder2ForCausalLM), its layout table and its config reader.

What Starcoder2DecoderLayer computes, each a tracer setting: LayerNorm with a bias (``norm: layernorm``, eps
norm_epsilon), a plain two-matrix MLP c_proj(act(c_fc(x))) with GELU's tanh approximation by default
(hidden_act gelu_pytorch_tanh: ``activation: gelu_tanh``), biases on q/k/v/o_proj, c_fc and c_proj when use_bias is true
(its default), rotary positions turned as rotate_half does, grouped-query attention, a sliding window on every
layer when sliding_window is set (``mask: {causal: true, window: W}``), and a head tied to the embeddings by default.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama, stablelm
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Take, group, norm, refuse, stored_dtype
from tracer.checkpoints.families.gpt_neox import repeated, rotary_notes, tied_head
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg
from tracer.model.activations import HF_ACTIVATIONS


def table() -> dict[str, Take]:
    """StableLM's keys (LayerNorms with a bias, q/k/v/o_proj), with post_attention_layernorm always there, o_proj's bias as optional
    as q/k/v_proj's (use_bias), and the MLP c_fc (W_1), c_proj (W_2), each with its optional bias."""
    L = "model.layers.{i}."
    out = {k: v for k, v in stablelm.table().items() if ".ffn." not in k and ".norm2." not in k}
    out |= group("blocks.{i}.", "attn", {"b_o": Take(L + "self_attn.o_proj.bias", optional=True)})
    out |= group("blocks.{i}.", "norm2", norm(L + "post_attention_layernorm"))
    out |= group("blocks.{i}.", "ffn", {"w1": Take(L + "mlp.c_fc.weight", transpose=True), "b1": Take(L + "mlp.c_fc.bias", optional=True),
                                        "w2": Take(L + "mlp.c_proj.weight", transpose=True), "b2": Take(L + "mlp.c_proj.bias", optional=True)})
    return out


STARCODER2_KEYS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                             "hidden_act", "norm_epsilon", "tie_word_embeddings", "rope_parameters", "rope_scaling", "rope_theta", "use_bias",
                             "sliding_window", "residual_dropout", "embedding_dropout"})

# what the starcoder2 reader reads: config.json's keys (any other refused by name) and the tensors they describe
STARCODER2_READS = Family("starcoder2", needs=msg("a StarCoder2 checkpoint needs its config.json (heads, key/value heads, the sliding window are not in "
                                                  "the tensors); put it beside the weights"),
                          known=STARCODER2_KEYS, embedding=msg("holds no StarCoder2 token embedding (model.embed_tokens.weight); "
                                                               "is it a StarCoder2 checkpoint?"),
                          layer=msg("holds no StarCoder2 layer (model.layers.0.input_layernorm.weight)"),
                          fields=(Field("hidden_act", "text", "activation", "gelu_tanh", "Starcoder2Config's default hidden_act gelu_pytorch_tanh",
                                        "hidden_act: {value}", HF_ACTIVATIONS, check=repeated("gelu_pytorch_tanh")),
                                  Field("norm_epsilon", "number", "eps", 1e-5, "Starcoder2Config's norm_epsilon"), Field("num_key_value_heads"),
                                  Field("use_bias", "flag")))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face StarCoder2: LayerNorm, a GELU MLP, biases everywhere (use_bias), rotary positions, grouped-query
    attention and a sliding window."""
    read = STARCODER2_READS.read(config, ckpt, layout, options)
    cfg, V, C, H, F, layers = read.cfg, read.V, read.C, read.H, read.F, read.layers
    H_kv = read.values["num_key_value_heads"] or H
    theta, rope_type, theta_from, rope_key = llama._rope(cfg)
    if read.values["use_bias"] is None:  # Starcoder2Config's default: true
        cfg.raw = cfg.raw | {"use_bias": True}
    refuse(cfg, [
        (C % H != 0, msg("num_attention_heads = {H} does not divide hidden_size = {C} (each head has width d = C / H)", H=H, C=C)),
        (H % H_kv != 0, msg("num_key_value_heads = {H_kv} must divide num_attention_heads = {H}", H_kv=H_kv, H=H)),
        (rope_type != "default", msg("{key}: rope type {rope}: the {family} layout's rotary positions are the default RoPE",
                                     key=rope_key, rope=repr(rope_type), family="starcoder2")),
    ] + llama.bias_rules(cfg, ckpt, layout, layers, ("use_bias",)))
    activation, eps = read.settings["activation"], read.settings["eps"]
    theta = cfg.setting("position_base", theta_from, theta, 10000.0, "Starcoder2Config's default rope_theta")
    tie = cfg.flag("tie_word_embeddings")
    tied = tied_head(cfg, ckpt, layout) if tie is not None else True  # Starcoder2Config's default: tied
    dims = {"C": C, "H": H} | ({"H_kv": H_kv} if H_kv != H else {}) | {"F": F, "V": V}
    notes = {"C": "hidden_size", "H_kv": "num_key_value_heads (grouped-query attention)", "F": "intermediate_size (c_fc)",
             "V": "vocab_size (rows of embed_tokens)"} | cfg.notes
    if not cfg.has("num_key_value_heads"):
        notes["H_kv"] = "assumed: not in config.json (= num_attention_heads)"
    window, window_note = llama.mistral_window(cfg, "starcoder2", layers)
    block: dict[str, Any] = {"norm_order": "pre", "layers": layers, "norm": "layernorm", "eps": eps, "activation": activation,
                             "positions": "rotary", "position_base": theta, "rotary_pairing": "half", "mask": window or "causal",
                             "final_norm": True, "head": "tied" if tied else "separate"}
    notes |= {"norm": "nn.LayerNorm with a weight and a bias", "final_norm": "model.norm", "mask": window_note} | rotary_notes(tied, False)
    if tie is None:
        notes["head"] += " (tie_word_embeddings assumed: not in config.json; Starcoder2Config's default is true)"
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())


LAYOUT = Layout("starcoder2", "Hugging Face StarCoder2 (Starcoder2ForCausalLM): LayerNorm, a GELU MLP, biases, a sliding window", table(), read_config,
                aliases=(("model.", ""),), model_types=("starcoder2",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), float32=base.ROTARY_SOFTMAX)
