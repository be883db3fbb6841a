"""The qwen3 family: Hugging Face Qwen3 (Qwen3ForCausalLM), LLaMA's block with each head's q and k RMS-normalised.

Qwen3Attention (transformers' modeling_qwen3) splits q_proj's and k_proj's outputs into heads of width head_dim,
normalises each head with Qwen3RMSNorm (q_norm, k_norm: a weight [head_dim] each, eps rms_norm_eps) and only then
turns them by the rotary positions: tracer's ``block.qk_norm: true``, with the weights ``attn.q_norm`` and
``attn.k_norm`` [d].  head_dim is usually not hidden_size / num_attention_heads (``dims.d``).  Its projections
have biases only when attention_bias is true (q, k, v and o_proj alike), the MLP never; the sliding window follows
Qwen2's rule (qwen.qwen2_window).  Everything else is LLaMA's (llama.py's reader, its refusals included).
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama, qwen
from tracer.checkpoints.families.base import Layout, ModelConfig, Options, Take, group
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def table() -> dict[str, Take]:
    """LLaMA's keys (q/k/v/o_proj's biases read when attention_bias switches them on; the MLP has none), with
    self_attn.q_norm and k_norm read as attn.q_norm and attn.k_norm [d]."""
    out = {name: take for name, take in llama.table().items() if ".ffn.b" not in name}  # Qwen3MLP has no biases
    L = "model.layers.{i}."
    out |= group("blocks.{i}.", "attn", {"q_norm": Take(L + "self_attn.q_norm.weight"), "k_norm": Take(L + "self_attn.k_norm.weight")})
    return out


# what the qwen3 layout refuses by name: LLaMA's list (Qwen3 aside), and the relatives whose maths differ
QWEN3_DIFFERENT = {k: v for k, v in llama.LLAMA_DIFFERENT.items() if k not in ("qwen3", "qwen2")} | {
    "qwen2": msg("Qwen2 does not normalise q and k, and always adds q, k and v biases (the qwen2 layout reads it)"),
    "qwen3_": msg("a mixture-of-experts MLP or a multimodal model")}


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Qwen3: LLaMA's reader with attention_bias as its only bias switch, Qwen2's sliding-window rule,
    and the per-head q/k RMSNorm (block.qk_norm)."""
    read = llama.read_decoder(config, ckpt, layout, options, ("attention_bias",), qwen.qwen2_window, QWEN3_DIFFERENT)
    found = layout.locate("blocks.0.attn.q_norm", ckpt.key_set())
    if found is None or not found[1]:
        raise CheckpointError(at(ckpt.path, msg("holds no Qwen3 q_norm (model.layers.0.self_attn.q_norm.weight); is it a Qwen3 checkpoint?")))
    block = read.block | {"qk_norm": True}
    notes = read.notes | {"qk_norm": "Qwen3RMSNorm of each head's q and k (self_attn.q_norm, k_norm [head_dim]), eps rms_norm_eps, before the rotary turn"}
    return read._replace(block=block, notes=notes)


LAYOUT = Layout("qwen3", "Hugging Face Qwen3 models (Qwen3ForCausalLM): LLaMA's block with q and k RMS-normalised per head",
                table(), read_config, aliases=(("model.", ""),), model_types=("qwen3",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(QWEN3_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
