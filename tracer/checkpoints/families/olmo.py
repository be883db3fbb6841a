"""The olmo family: Hugging Face OLMo (OlmoForCausalLM, OLMo 1), LLaMA's block with norms that have no weights.

OlmoLayerNorm is F.layer_norm(x, None, None, eps=1e-5): a LayerNorm without a weight or a bias, its epsilon fixed (no
config key sets it).  tracer writes it as ``norm: layernorm`` with ``eps: 1e-05``, and its gamma and beta are not in
the checkpoint: the spec fills them, gamma at one and beta at zero, which multiply and add exactly (x * 1 + 0 = x),
so the trace is OlmoLayerNorm's.  The rest is LLaMA's: SwiGLU (down(silu(gate) * up)), rotary positions turned as
rotate_half does, grouped-query attention, and q/k/v/o biases when attention_bias is true.

clip_qkv (q, k and v clamped to [-clip, clip] after their projections) is not modelled: refused by name.  OLMo 2
(model_type olmo2) is its own family (olmo2.py).
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import llama
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Refusal, Take, refuse, stored_dtype
from tracer.checkpoints.families.gpt_neox import rotary_notes, tied_head
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg

OLMO_EPS = 1e-5  # OlmoLayerNorm's epsilon: fixed in its forward, read from no config key


def table() -> dict[str, Take]:
    """LLaMA's keys without the norms' weights (OlmoLayerNorm has none: the spec fills gamma 1, beta 0) and without the MLP's
    biases (OlmoMLP has none); q/k/v/o_proj's biases are optional (attention_bias)."""
    return {k: v for k, v in llama.table().items() if ".gamma" not in k and ".ffn.b" not in k}


OLMO_KEYS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                       "hidden_act", "tie_word_embeddings", "rope_parameters", "rope_scaling", "rope_theta", "attention_bias", "clip_qkv"})

OLMO_DIFFERENT = {"olmo2": msg("OLMo 2 normalises each sublayer's output and the whole of q and k with RMSNorm (the olmo2 layout reads it)"),
                  "olmo3": msg("OLMo 3 adds sliding-window layers to OLMo 2's block, which the olmo layout does not model"),
                  "olmoe": msg("OLMoE's MLP is a mixture of experts, which the olmo layout does not model")}

# what the olmo reader reads: config.json's keys (any other refused by name) and the tensors they describe
OLMO_READS = Family("olmo", differ=OLMO_DIFFERENT,
                    needs=msg("an OLMo checkpoint needs its config.json (heads, key/value heads, rope_theta are not in the tensors); "
                              "put it beside the weights"),
                    known=OLMO_KEYS, embedding=msg("holds no OLMo token embedding (model.embed_tokens.weight); is it an OLMo checkpoint?"),
                    layer=msg("holds no OLMo layer (model.layers.0.self_attn.q_proj.weight)"), layer_of="blocks.0.attn.w_q",
                    fields=(Field("hidden_act", "text"), Field("num_key_value_heads"), Field("clip_qkv", "number")),
                    refusals=(Refusal("hidden_act", lambda v: v not in (None, "silu"), msg("hidden_act {act}: tracer's SwiGLU gates with silu", act="")),
                              Refusal("clip_qkv", lambda v: v is not None,
                                      msg("clip_qkv = {value}: q, k and v clamped after their projections, which tracer's attention does not model",
                                          value=""))))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face OLMo: LLaMA's block with LayerNorms that have no weight or bias (eps 1e-5), and the q/k/v/o biases
    attention_bias switches on."""
    block = {"norm_order": "pre", "norm": "layernorm", "eps": OLMO_EPS}
    notes = {"norm": "OlmoLayerNorm: LayerNorm without a weight or a bias (gamma 1 and beta 0, filled: not in the checkpoint)",
             "eps": "OlmoLayerNorm's own 1e-5 (no config key sets it)", "final_norm": "model.norm (an OlmoLayerNorm, no weights)"}
    return read_olmo(config, ckpt, layout, options, OLMO_READS, block, notes, "Olmo")


def read_olmo(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options, reads: Family, own: dict[str, Any],
              own_notes: dict[str, str], name: str) -> ModelConfig:
    """An OLMo or an OLMo 2 (``name``: the prefix of its classes): LLaMA's heads, rotary positions, SwiGLU, attention_bias
    and head, with the family's own norm settings ``own`` (noted ``own_notes``) put in before the positions; a Field of ``reads``
    that settles eps (OLMo 2's rms_norm_eps) gives the block's eps."""
    read = reads.read(config, ckpt, layout, options)
    cfg, V, C, H, F, layers = read.cfg, read.V, read.C, read.H, read.F, read.layers
    H_kv = read.values["num_key_value_heads"] or H
    theta, rope_type, theta_from, rope_key = llama._rope(cfg)
    refuse(cfg, [
        (H % H_kv != 0, msg("num_key_value_heads = {H_kv} must divide num_attention_heads = {H}", H_kv=H_kv, H=H)),
        (rope_type != "default", msg("{key}: rope type {rope}: the {family} layout's rotary positions are the default RoPE",
                                     key=rope_key, rope=repr(rope_type), family=layout.name)),
    ] + llama.bias_rules(cfg, ckpt, layout, layers, ("attention_bias",)))
    theta = cfg.setting("position_base", theta_from, theta, 10000.0, f"{name}Config's default rope_theta")
    tied = tied_head(cfg, ckpt, layout)
    dims = {"C": C, "H": H} | ({"H_kv": H_kv} if H_kv != H else {}) | {"F": F, "V": V}
    notes = {"C": "hidden_size", "H_kv": "num_key_value_heads (grouped-query attention)", "F": "intermediate_size (gate_proj, up_proj)",
             "V": "vocab_size (rows of embed_tokens)"} | cfg.notes
    if not cfg.has("num_key_value_heads"):
        notes["H_kv"] = f"assumed: not in config.json (= num_attention_heads, as {name}Config does)"
    own = own | ({"eps": read.settings["eps"]} if "eps" in read.settings else {})  # OLMo 2's rms_norm_eps (OLMo's is fixed)
    block: dict[str, Any] = {"norm_order": own["norm_order"], "layers": layers} | {k: v for k, v in own.items() if k != "norm_order"}
    block |= {"activation": "swiglu", "positions": "rotary", "position_base": theta, "rotary_pairing": "half", "mask": "causal", "final_norm": True,
              "head": "tied" if tied else "separate"}
    notes |= own_notes | rotary_notes(tied, False)
    llama.swiglu_note(cfg, notes, f"{name}MLP", f"{name}Config")
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())

LAYOUT = Layout("olmo", "Hugging Face OLMo (OlmoForCausalLM): LLaMA's block with LayerNorms that have no weights", table(), read_config,
                aliases=(("model.", ""),), model_types=("olmo",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(OLMO_DIFFERENT))
