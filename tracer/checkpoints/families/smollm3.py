"""The smollm3 family: Hugging Face SmolLM3 (SmolLM3ForCausalLM), LLaMA's block with rotary positions on some layers only.

SmolLM3Attention turns q and k by the rotary positions only where ``no_rope_layers[i]`` is 1 (the name says the
opposite: 1 keeps the rotary positions); SmolLM3Config's default leaves every ``no_rope_layer_interval``-th layer
(3, 7, 11, ... for 4) without them.  tracer's ``rotary_layers: [...]`` lists the layers turned, the others' attention
has no positions.  A layer is sliding when ``layer_types`` says sliding_attention (SmolLM3Model picks each layer's mask
by it), with ``sliding_window`` W: Qwen2's rule (qwen.qwen2_window), so sliding layers without use_sliding_window
are refused by name (Hugging Face's eager and flash attention would disagree).  Biases as LLaMA's (attention_bias
on q, k, v and o_proj, mlp_bias on the MLP); the rest is read by llama.read_decoder, any other key refused by name.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama, qwen
from tracer.checkpoints.families.base import Config, Family, Field, Layout, ModelConfig, Options, Take
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """LLaMA's keys and optional biases (SmolLM3's projections are LLaMA's)."""
    return llama.table()


SMOLLM3_KEYS = frozenset({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                          "head_dim", "hidden_act", "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta", "tie_word_embeddings",
                          "attention_bias", "mlp_bias", "use_sliding_window", "sliding_window", "layer_types", "no_rope_layers",
                          "no_rope_layer_interval"})
SMOLLM3_DIFFERENT = dict(llama.LLAMA_DIFFERENT)

SMOLLM3_READS = Family("smollm3", needs=msg("a SmolLM3 checkpoint needs its config.json (heads, no_rope_layers, rope_theta are not in the tensors); "
                                            "put it beside the weights"),
                       reads=("smollm3",), differ=SMOLLM3_DIFFERENT, known=SMOLLM3_KEYS,
                       fields=(Field("num_hidden_layers", required=True), Field("no_rope_layer_interval", kind="integer"), Field("sliding_window"),
                               Field("use_sliding_window", "flag")))


def _rotary(cfg: Config, layers: int, interval: int | None) -> tuple[list[int], str]:
    """The layers turned by the rotary positions (no_rope_layers[i] = 1), and the note saying where that came from."""
    value = cfg.raw.get("no_rope_layers")
    if value is None:
        every = 4 if interval is None else interval
        turned = [i for i in range(layers) if (i + 1) % every]
        return turned, f"assumed: {cfg.why_assumed()} (SmolLM3Config's own: every layer but each no_rope_layer_interval {every}-th)"
    if not isinstance(value, list) or len(value) != layers or any(v not in (0, 1) or isinstance(v, bool) for v in value):
        raise cfg.fail("no_rope_layers", msg("a list of {n} entries, each 1 (rotary positions) or 0 (none)", n=layers), value)
    return [i for i, v in enumerate(value) if v], "no_rope_layers: the layers whose entry is 1 are turned, the others have no positions"


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face SmolLM3: LLaMA's settings (llama.read_decoder), Qwen2's sliding-window rule and rotary_layers."""
    read = SMOLLM3_READS.read(config, ckpt, layout, options)
    cfg, got = read.cfg, read.values
    layers = got["num_hidden_layers"] or 0
    turned, note = _rotary(cfg, layers, got["no_rope_layer_interval"])
    rest = {k: v for k, v in cfg.raw.items() if k not in ("no_rope_layers", "no_rope_layer_interval")}
    own_types = cfg.raw.get("layer_types") is None and got["use_sliding_window"] and got["sliding_window"]
    if own_types:  # SmolLM3Config's own layer_types: the layers without rotary positions slide
        rest["layer_types"] = ["full_attention" if i in turned else "sliding_attention" for i in range(layers)]
    base = llama.read_decoder(rest, ckpt, layout, options, ("attention_bias", "mlp_bias"), qwen.qwen2_window, SMOLLM3_DIFFERENT)
    block, notes = dict(base.block), dict(base.notes)
    if own_types:
        notes["mask"] += " (layer_types assumed: SmolLM3Config's own, the layers without rotary positions sliding)"
    if len(turned) < base.layers:
        block = {k: v for key, value in block.items() for k, v in ((key, value), ("rotary_layers", turned))[:2 if key == "rotary_pairing" else 1]}
        notes["rotary_layers"] = note
    if "assumed" in note:
        base = base._replace(assumed=base.assumed + (("rotary_layers", turned),))
    return base._replace(block=block, notes=notes)


LAYOUT = Layout("smollm3", "Hugging Face SmolLM3 (SmolLM3ForCausalLM): LLaMA's block with rotary positions on some layers only",
                table(), read_config, aliases=(("model.", ""),), model_types=("smollm3",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(SMOLLM3_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
