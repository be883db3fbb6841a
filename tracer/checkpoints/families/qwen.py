"""The qwen2 family: Hugging Face Qwen2 (Qwen2ForCausalLM), LLaMA's block with q/k/v biases and a per-layer sliding window.

Qwen2's q_proj, k_proj and v_proj always have a bias, o_proj and the MLP never (transformers'
modeling_qwen2), so the table maps the three biases as tensors every checkpoint holds; everything else
is LLaMA's (llama.py's reader, its refusals included).  Qwen3 normalises q and k per head before the
rotary positions: its own family (qwen3.py), refused through this layout by name.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama
from tracer.checkpoints.families.base import Config, Layout, ModelConfig, Options, Take, refuse
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """Hugging Face Qwen2 (Qwen2ForCausalLM): LLaMA's keys, with q_proj, k_proj and v_proj's biases read as b_q, b_k, b_v
    (tensors every Qwen2 checkpoint holds); o_proj and the MLP have none (zeros)."""
    return llama.table(qkv_bias=True)


def qwen2_window(cfg: Config, model_type: str | None, layers: int) -> tuple[dict[str, Any] | None, str]:
    """Qwen2's sliding window, as Qwen2Config sets it: none unless use_sliding_window is true; then layer i slides when
    i >= max_window_layers (or as config.json's layer_types says).  Every layer sliding is the spec's mask
    {causal: true, window: W}; some layers sliding and not others adds sliding_layers (as Gemma 2's alternate layers)."""
    use = cfg.flag("use_sliding_window")
    window = cfg.integer("sliding_window") if use else None
    lowest = cfg.integer("max_window_layers", lo=0)
    types = cfg.raw.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or any(t not in ("full_attention", "sliding_attention") for t in types):
            raise cfg.fail("layer_types", msg("a list of {n} entries, each 'full_attention' or 'sliding_attention'", n=layers), types)
        sliding = [t == "sliding_attention" for t in types]
    else:
        first = 28 if lowest is None else lowest  # Qwen2Config's default max_window_layers
        sliding = [window is not None and i >= first for i in range(layers)]
    if window is None:
        refuse(cfg, [(any(sliding), msg("layer_types: sliding_attention layers without a sliding_window (use_sliding_window is not true)"))])
        return None, ""
    if not any(sliding):
        return None, ""
    if all(sliding):
        return ({"causal": True, "window": window},
                f"sliding_window (use_sliding_window, every layer from max_window_layers on): each position reads itself and the {window - 1} before it")
    slide = [i for i, s in enumerate(sliding) if s]
    rule = "layer_types" if types is not None else f"max_window_layers {first}"
    return ({"causal": True, "window": window, "sliding_layers": slide},
            f"sliding_window {window} on layers {slide} ({rule}), causal on the others: a sliding layer's position reads itself and the {window - 1} before it")


# what the qwen2 layout refuses by name: LLaMA's list (Qwen2 aside), and Qwen2's relatives whose maths differ
QWEN2_DIFFERENT = {k: v for k, v in llama.LLAMA_DIFFERENT.items() if k != "qwen2"} | {
    "qwen2_moe": msg("a mixture of experts beside a shared expert behind a sigmoid gate, its top k not renormalised unless norm_topk_prob, "
                     "which tracer does not model"), "qwen2_": msg("Qwen2's multimodal models read more than tokens")}


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Qwen2: LLaMA's reader with q/k/v biases always there and Qwen2's sliding-window rule."""
    return llama.read_decoder(config, ckpt, layout, options, (), qwen2_window, QWEN2_DIFFERENT)


LAYOUT = Layout("qwen2", "Hugging Face Qwen2 models (Qwen2ForCausalLM): LLaMA's block with q, k and v biases", table(),
                read_config, aliases=(("model.", ""),), model_types=("qwen2",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(QWEN2_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
