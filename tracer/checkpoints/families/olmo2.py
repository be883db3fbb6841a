"""The olmo2 family: Hugging Face OLMo 2 (Olmo2ForCausalLM), OLMo's block with its norms moved and q and k normalised.

What Olmo2DecoderLayer and Olmo2Attention compute, each a tracer setting:

- ``norm_order: post_sublayer``: no norm before a sublayer, an RMSNorm on its output before the residual add:
  R = X + RMS_U(MHA(X)), Y = R + RMS_F(FFN(R)) (post_attention_layernorm is attention_norm, post_feedforward_layernorm
  ffn_norm; Gemma 2's sandwich without its norm1 and norm2);
- ``qk_norm: projection``: q_proj's and k_proj's outputs RMS-normalised over their whole width (q_norm [H*d],
  k_norm [H_kv*d], eps rms_norm_eps) before they are split into heads and turned; Qwen3's qk_norm is per head instead;
- ``norm: rmsnorm`` (Olmo2RMSNorm, eps rms_norm_eps) for those norms and the final norm.

The rest is OLMo's (olmo.read_olmo): SwiGLU, rotary positions turned as rotate_half does, grouped-query attention, the
q/k/v/o biases attention_bias switches on, the head.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama, olmo
from tracer.checkpoints.families.base import Field, Layout, ModelConfig, Options, Take, group
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """LLaMA's keys without input_layernorm and the MLP's biases; post_attention_layernorm is attention_norm,
    post_feedforward_layernorm ffn_norm, and self_attn.q_norm, k_norm are attn.q_norm [C_q], attn.k_norm [C_kv]."""
    L = "model.layers.{i}."
    out = {k: v for k, v in llama.table().items() if ".norm1." not in k and ".norm2." not in k and ".ffn.b" not in k}
    out |= group("blocks.{i}.", "attention_norm", {"gamma": Take(L + "post_attention_layernorm.weight")})
    out |= group("blocks.{i}.", "ffn_norm", {"gamma": Take(L + "post_feedforward_layernorm.weight")})
    out |= group("blocks.{i}.", "attn", {"q_norm": Take(L + "self_attn.q_norm.weight"), "k_norm": Take(L + "self_attn.k_norm.weight")})
    return out


OLMO2_KEYS = (olmo.OLMO_KEYS - {"clip_qkv"}) | {"rms_norm_eps"}
OLMO2_DIFFERENT = {k: v for k, v in olmo.OLMO_DIFFERENT.items() if k != "olmo2"} | {
    "olmo": msg("OLMo's norms come before each sublayer and have no weights, and it does not normalise q and k (the olmo layout reads it)")}

# what the olmo2 reader reads: OLMo's declaration with OLMo 2's keys (any other refused by name), rms_norm_eps, and its tensors
OLMO2_READS = olmo.OLMO_READS._replace(
    name="olmo2", differ=OLMO2_DIFFERENT, known=OLMO2_KEYS, layer_of="blocks.0.attention_norm.gamma",
    needs=msg("an OLMo 2 checkpoint needs its config.json (heads, key/value heads, rope_theta, rms_norm_eps are not in the tensors); "
              "put it beside the weights"),
    embedding=msg("holds no OLMo 2 token embedding (model.embed_tokens.weight); is it an OLMo 2 checkpoint?"),
    layer=msg("holds no OLMo 2 layer (model.layers.0.post_attention_layernorm.weight)"),
    fields=olmo.OLMO_READS.fields[:2] + (Field("rms_norm_eps", "number", "eps", 1e-5, "Olmo2Config's rms_norm_eps"),),
    refusals=olmo.OLMO_READS.refusals[:1])


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face OLMo 2: RMSNorms on each sublayer's output only (post_sublayer), q and k RMS-normalised over their
    whole projections, the rest OLMo's."""
    block = {"norm_order": "post_sublayer", "norm": "rmsnorm", "eps": 1e-5, "qk_norm": "projection"}
    notes = {"norm_order": "Olmo2DecoderLayer: post_attention_layernorm on the attention output and post_feedforward_layernorm on the MLP "
                           "output, each before its residual add; no norm before a sublayer",
             "norm": "Olmo2RMSNorm: x / sqrt(mean(x^2) + eps) * weight",
             "qk_norm": "Olmo2Attention: q_norm(q_proj(x)), k_norm(k_proj(x)), RMSNorms over the whole projections (q_norm [H*d], k_norm [H_kv*d]), "
                        "before the split into heads and the rotary turn",
             "final_norm": "model.norm (an Olmo2RMSNorm)"}
    return olmo.read_olmo(config, ckpt, layout, options, OLMO2_READS, block, notes, "Olmo2")


LAYOUT = Layout("olmo2", "Hugging Face OLMo 2 (Olmo2ForCausalLM): RMSNorms on each sublayer's output, q and k normalised over their projections",
                table(), read_config, aliases=(("model.", ""),), model_types=("olmo2",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(OLMO2_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
