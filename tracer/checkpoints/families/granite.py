"""The granite family: Hugging Face Granite (GraniteForCausalLM), LLaMA's block with four multipliers made visible.

Granite's tensors are LLaMA's (model.embed_tokens, q/k/v/o_proj, gate/up/down_proj, input_layernorm,
post_attention_layernorm, model.norm, lm_head; the biases attention_bias and mlp_bias switch on), and so is the rest
of its maths (RMSNorm, SwiGLU, rotate_half, grouped-query heads), read by llama.read_decoder.  What differs, each a
tracer setting and a stage of its own:

- ``embedding_multiplier: m``: GraniteModel multiplies the embeddings by m (``x`` = ``embed * m``, op scale);
- ``attention_scale: s`` (attention_multiplier): GraniteAttention's scaling is attention_multiplier itself, in place
  of 1/sqrt(head_dim) (GraniteConfig's default 1.0: the scores QK^T unscaled);
- ``residual_multiplier: m``: each sublayer's output times m before its residual add (stages ``attention_scaled``,
  ``ffn_scaled``, op scale): R = X + m MHA(N_1), Y = R + m FFN(N_2);
- ``logits_divisor: s`` (logits_scaling): the head's ``raw_logits``, then ``logits = raw_logits / s`` (op divide).

A multiplier of 1 (GraniteConfig's default for the embedding, the residuals and the logits) changes nothing and is not
written.  Granite's mixture-of-experts relatives are refused by name.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, gemma, llama
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Take
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """LLaMA's table: Granite's tensors are named as LLaMA's, with the same optional biases (attention_bias, mlp_bias)."""
    return llama.table()


# the multipliers: config.json's key, the spec setting, how Hugging Face applies it, and GraniteConfig's default
MULTIPLIERS = (("embedding_multiplier", "embedding_multiplier", "GraniteModel: inputs_embeds * embedding_multiplier", 1.0),
               ("attention_multiplier", "attention_scale", "GraniteAttention's scaling: scores QK^T * attention_multiplier, not 1/sqrt(d)", 1.0),
               ("residual_multiplier", "residual_multiplier", "GraniteDecoderLayer: residual + sublayer output * residual_multiplier", 1.0),
               ("logits_scaling", "logits_divisor", "GraniteForCausalLM: logits = lm_head(x) / logits_scaling", 1.0))
GRANITE_KEYS = frozenset({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                          "head_dim", "hidden_act", "rms_norm_eps", "rope_theta", "rope_parameters", "rope_scaling", "tie_word_embeddings",
                          "attention_bias", "mlp_bias"} | {key for key, _, _, _ in MULTIPLIERS})
GRANITE_DIFFERENT = {"granitemoe": msg("GraniteMoE's MLP is a mixture of experts, which the granite layout does not model"),
                     "granite_": msg("a multimodal or speech model built on Granite reads more than tokens")}


# what the granite reader reads before LLaMA's reader reads the rest: Granite's keys (any other refused by name) and its multipliers
GRANITE_READS = Family("", needs=msg("a Granite checkpoint needs its config.json (heads, the multipliers, rope_theta are not in the tensors); "
                                     "put it beside the weights"),
                       reads=("granite",), differ=GRANITE_DIFFERENT, known=GRANITE_KEYS,
                       others=msg("the granite layout reads model_type granite only (another family's multipliers differ)"),
                       fields=tuple(Field(key, "number") for key, _, _, _ in MULTIPLIERS))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Granite: LLaMA's settings (llama.read_decoder, on the keys it knows) and Granite's four multipliers."""
    read = GRANITE_READS.read(config, ckpt, layout, options)
    cfg = read.cfg
    rest = {k: v for k, v in cfg.raw.items() if k not in ("model_type",) and k not in read.values}
    # GraniteForCausalLM has no sliding window, as Gemma's (its config no sliding_window key: refused if given)
    base = llama.read_decoder(rest, ckpt, layout, options, ("attention_bias", "mlp_bias"), gemma.no_window, {})
    block, notes = dict(base.block), dict(base.notes)
    notes |= {"norm": "GraniteRMSNorm: x / sqrt(mean(x^2) + eps) * weight", "activation": "GraniteMLP: down_proj(silu(gate_proj(x)) * up_proj(x))"}
    assumed = list(base.assumed)
    added: dict[str, Any] = {}
    for key, setting, how, default in MULTIPLIERS:
        value = read.values[key]
        if value is None:
            value = default
            assumed.append((setting, value))
            how += f" (assumed: not in config.json; GraniteConfig's default {default:g})"
        if value != 1.0 or setting == "attention_scale":  # a factor of 1 changes nothing; the scores' 1 stands in for 1/sqrt(d)
            added[setting] = value
            notes[setting] = how
    if "logits_divisor" in added and block.get("head") == "none":
        added.pop("logits_divisor")
    out: dict[str, Any] = {}
    for k, v in block.items():
        out[k] = v
        if k == "positions" and "embedding_multiplier" in added:
            out["embedding_multiplier"] = added["embedding_multiplier"]
        if k == "mask":
            out |= {s: added[s] for s in ("attention_scale", "residual_multiplier") if s in added}
        if k == "head" and "logits_divisor" in added:
            out["logits_divisor"] = added["logits_divisor"]
    return base._replace(block=out, notes=notes, assumed=tuple(assumed))


LAYOUT = Layout("granite", "Hugging Face Granite (GraniteForCausalLM): LLaMA's block with embedding, attention, residual and logit multipliers",
                table(), read_config, aliases=(("model.", ""),), model_types=("granite",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(GRANITE_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
