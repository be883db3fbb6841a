"""The helium family: Hugging Face Helium (HeliumForCausalLM, Kyutai's Helium-1), LLaMA's block with interleaved rotary pairs.

HeliumDecoderLayer is LLaMA's (RMSNorm, Pre-Norm, SwiGLU, grouped-query attention, head_dim), but its rotary positions
pair coordinates (2i, 2i+1) (its rotate_half takes x[..., 0::2] and x[..., 1::2], and its cos and sin repeat each
frequency twice): tracer's ``rotary_pairing: interleaved``, where LLaMA's is ``half``.  attention_bias gives q_proj,
k_proj and v_proj a bias but never o_proj; mlp_bias gives gate, up and down_proj theirs.  o_proj reads hidden_size
inputs, so the heads are hidden_size wide together: a head_dim with num_attention_heads * head_dim != hidden_size is
refused by name.  The rest is read by llama.read_decoder; a key it does not model is refused by name.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Take, refuse
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """LLaMA's keys; o_proj has no bias (HeliumAttention's is bias=False whatever attention_bias says)."""
    return {k: v for k, v in llama.table().items() if not k.endswith(".attn.b_o")}


HELIUM_KEYS = frozenset({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                         "head_dim", "hidden_act", "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta", "tie_word_embeddings",
                         "attention_bias", "mlp_bias"})
HELIUM_DIFFERENT = dict(llama.LLAMA_DIFFERENT)

HELIUM_READS = Family("helium", needs=msg("a Helium checkpoint needs its config.json (heads, key/value heads, rope_theta are not in the tensors); "
                                          "put it beside the weights"),
                      reads=("helium",), differ=HELIUM_DIFFERENT, known=HELIUM_KEYS,
                      fields=(Field("head_dim"), Field("hidden_size"), Field("num_attention_heads")))


def _no_window(cfg: Any, model_type: str | None, layers: int) -> tuple[dict[str, Any] | None, str]:
    return None, ""  # HeliumModel's mask is causal (its config has no sliding_window: refused by name if given)


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Helium: LLaMA's settings (llama.read_decoder) with the rotary pairs interleaved."""
    read = HELIUM_READS.read(config, ckpt, layout, options)
    got = read.values
    head_dim, C, H = got["head_dim"], got["hidden_size"], got["num_attention_heads"]
    refuse(read.cfg, [(head_dim is not None and C is not None and H is not None and head_dim * H != C,
                       msg("head_dim = {head_dim}: Helium's o_proj reads hidden_size = {C} inputs, so num_attention_heads * head_dim must be {C}",
                           head_dim=head_dim, C=C))])
    base = llama.read_decoder(config, ckpt, layout, options, ("attention_bias", "mlp_bias"), _no_window, HELIUM_DIFFERENT)
    block = dict(base.block, rotary_pairing="interleaved")
    notes = dict(base.notes, norm="HeliumRMSNorm: x / sqrt(mean(x^2) + eps) * weight",
                 rotary_pairing="Helium's rotate_half: pairs (2i, 2i+1), each frequency repeated twice (repeat_interleave)")
    return base._replace(block=block, notes=notes)


LAYOUT = Layout("helium", "Hugging Face Helium (HeliumForCausalLM): LLaMA's block with the rotary pairs interleaved",
                table(), read_config, aliases=(("model.", ""),), model_types=("helium",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(HELIUM_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
