"""The gemma3 family: Hugging Face Gemma 3's text model (Gemma3ForCausalLM, model_type gemma3_text), Gemma 2's block and three more.

Everything Gemma 2 does (gemma2.py: sandwich norms, the scores scaled by query_pre_attn_scalar ** -0.5, soft caps where
set, sliding layers from ``layer_types``, and Gemma's scaled embeddings, (1 + w) RMSNorm and GeGLU), and what
Gemma3Attention and Gemma3RotaryEmbedding add, each a tracer setting:

- ``qk_norm: true``: each head's q and k normalised by Gemma3RMSNorm (self_attn.q_norm, k_norm [head_dim]) before the
  turn; the block's norm being ``rmsnorm_offset``, these scale by (1 + w) too (the attention step's qk_norm=offset);
- ``local_position_base: B``: the sliding layers turn at rope_parameters.sliding_attention.rope_theta (the released
  models' 10000, unscaled), the full layers at rope_parameters.full_attention's theta with its scaling (linear, factor 8
  in the 4B and larger models): position_base and rope_scaling;
- ``layer_types`` absent: Gemma3TextConfig's own pattern, every _sliding_window_pattern-th layer (6) full, the rest sliding.

Gemma 3's multimodal checkpoint (model_type gemma3, Gemma3ForConditionalGeneration) nests its text model under
text_config and model.language_model: refused by name, as is any key not modelled and a sliding rope type other than
the default.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import gemma, gemma2
from tracer.checkpoints.families.base import Config, Family, Layout, ModelConfig, Options, Take, group, refuse
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def table() -> dict[str, Take]:
    """Gemma 2's table and the per-head norms self_attn.q_norm, k_norm as attn.q_norm, attn.k_norm [d]."""
    L = "model.layers.{i}."
    return gemma2.table() | group("blocks.{i}.", "attn", {"q_norm": Take(L + "self_attn.q_norm.weight"), "k_norm": Take(L + "self_attn.k_norm.weight")})


# what Gemma 3's config writes on top of Gemma 2's keys: the per-layer-type rope and the sliding pattern
GEMMA3_ONLY = frozenset({"rope_local_base_freq", "_sliding_window_pattern", "sliding_window_pattern"})
GEMMA3_DIFFERENT = {k: v for k, v in gemma.GEMMA_DIFFERENT.items() if k not in ("gemma3",)} | {
    "gemma2": gemma.GEMMA2, "gemma3n": msg("Gemma 3n's layers differ (per-layer embeddings, AltUp), which tracer does not model"),
    "gemma3": msg("Gemma 3's multimodal checkpoint nests its text model (text_config, model.language_model); the gemma3 layout reads "
                  "Gemma3ForCausalLM's (model_type gemma3_text)")}

GEMMA3_READS = Family("gemma3", needs=msg("a Gemma 3 checkpoint needs its config.json (heads, head_dim, layer_types and the rotary bases are not in "
                                          "the tensors); put it beside the weights"),
                      reads=("gemma3_text",), differ=GEMMA3_DIFFERENT, known=gemma.GEMMA_KEYS | gemma2.GEMMA2_KEYS | GEMMA3_ONLY)


def _ropes(cfg: Config) -> tuple[dict[str, Any], float, str]:
    """The full layers' rope parameters (as LLaMA's reader reads them), the sliding layers' base, and where it came from:
    transformers 5 writes rope_parameters per layer type, earlier versions rope_theta, rope_scaling and rope_local_base_freq."""
    params = cfg.mapping("rope_parameters")
    if "sliding_attention" in params or "full_attention" in params:
        full, local = (params.get(t) or {} for t in ("full_attention", "sliding_attention"))
        if not isinstance(full, dict) or not isinstance(local, dict):
            raise cfg.fail("rope_parameters", msg("a mapping of each layer type to its rope parameters"), params)
        kind = local.get("rope_type") or "default"
        extra = sorted(set(local) - {"rope_type", "rope_theta"})
        refuse(cfg, [(kind != "default" or bool(extra), msg("rope_parameters.sliding_attention: rope type {rope}{extra}: the sliding layers' "
                                                             "rotary positions are read as the default RoPE only",
                                                             rope=repr(kind), extra=f" with {extra[0]}" if extra else ""))])
        base = cfg.number("rope_parameters.sliding_attention.rope_theta", value=local.get("rope_theta"))
        return dict(full), 10000.0 if base is None else base, "rope_parameters.sliding_attention.rope_theta"
    base = cfg.number("rope_local_base_freq")
    return dict(params), 10000.0 if base is None else base, "rope_local_base_freq"


def _layer_types(cfg: Config, layers: int) -> tuple[Any, int]:
    """config.json's layer_types (checked by Gemma 2's reader), or Gemma3TextConfig's own pattern; and that pattern (0: not assumed)."""
    if cfg.raw.get("layer_types") is not None:
        return cfg.raw["layer_types"], 0
    key = "_sliding_window_pattern" if cfg.has("_sliding_window_pattern") else "sliding_window_pattern"
    pattern = cfg.integer(key) or 6
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)], pattern


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Gemma 3 (text): Gemma 2's settings (gemma2.read_config, on the full layers' rope), the per-head q/k norms
    and the sliding layers' own rotary base."""
    read = GEMMA3_READS.read(config, ckpt, layout, options)
    cfg = read.cfg
    found = layout.locate("blocks.0.attn.q_norm", ckpt.key_set())
    if found is None or not found[1]:
        raise CheckpointError(at(ckpt.path, msg("holds no Gemma 3 q_norm (model.layers.0.self_attn.q_norm.weight); is it a Gemma 3 checkpoint?")))
    full, local_base, local_from = _ropes(cfg)
    layers = cfg.integer("num_hidden_layers") or 0
    types, own = _layer_types(cfg, layers)
    rest = {k: v for k, v in cfg.raw.items() if k not in GEMMA3_ONLY and k not in ("model_type", "rope_parameters", "layer_types")}
    rest |= {"layer_types": types} | ({"rope_parameters": full} if full else {})
    base = gemma2.read_config(rest, ckpt, layout, options)
    block: dict[str, Any] = {}
    notes = dict(base.notes)
    slides = isinstance(types, list) and "sliding_attention" in types
    for key, value in base.block.items():
        block[key] = value
        if key == "rotary_pairing" and slides and (local_base != base.block.get("position_base") or "rope_scaling" in base.block):
            block["local_position_base"] = local_base
            notes["local_position_base"] = f"{local_from}: the sliding layers' rotary base, their speeds unscaled (Gemma3RotaryEmbedding)"
        if key == "mask":
            block["qk_norm"] = True
    notes |= {"qk_norm": "Gemma3RMSNorm of each head's q and k (self_attn.q_norm, k_norm [head_dim]): x / rms * (1 + w), before the turn",
              "position_base": notes.get("position_base", "").replace("rope_parameters.", "rope_parameters.full_attention.")}
    if own:
        notes["mask"] = notes.get("mask", "") + f" (layer_types assumed: Gemma3TextConfig's own, every {own}-th layer full)"
    return base._replace(block=block, notes=notes)


LAYOUT = Layout("gemma3", "Hugging Face Gemma 3 text (Gemma3ForCausalLM): Gemma 2's block with q and k normalised per head and the sliding "
                "layers' own rotary base", table(), read_config, aliases=(("model.", ""),), model_types=("gemma3_text",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(GEMMA3_DIFFERENT))
