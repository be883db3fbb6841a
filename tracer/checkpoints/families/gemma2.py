"""The gemma2 family: Hugging Face Gemma 2 (Gemma2ForCausalLM), Gemma's block with four more choices made visible.

Everything Gemma does (gemma.py: embeddings times sqrt(C), RMSNorm with (1 + w), GeGLU, a tied head, head_dim as
``dims.d``) and what Gemma2DecoderLayer and Gemma2Attention add, each a tracer setting:

- ``norm_order: sandwich``: a norm on each sublayer's output before its residual add.  input_layernorm is norm1,
  post_attention_layernorm (on the attention output, not the residual) attention_norm, pre_feedforward_layernorm
  norm2, post_feedforward_layernorm ffn_norm: R = X + LN_U(MHA(LN1(X))), Y = R + LN_F(FFN(LN2(R)));
- ``attention_softcap: cap`` (attn_logit_softcapping): the scores cap * tanh(scores / cap) after the scale and before
  the mask;
- ``head_softcap: cap`` (final_logit_softcapping): the head's raw_logits, then logits = cap * tanh(raw_logits / cap);
- ``mask: {causal: true, window: W, sliding_layers: [...]}`` (sliding_window, layer_types): the sliding_attention
  layers read a window of W keys, the full_attention layers every key up to the query.  Without layer_types,
  Gemma2Config makes layer i sliding when i is even (0, 2, ...), as here.

- ``attention_scale: s`` (query_pre_attn_scalar): Gemma2Attention scales the scores by query_pre_attn_scalar ** -0.5;
  where that is not 1/sqrt(head_dim), the spec says so (when it is, 1/sqrt(d) is the same number and nothing is written).

Every other key not modelled is refused by name (gemma.py's list and this file's), and a tensor not read is refused
by the import.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, gemma
from tracer.checkpoints.families.base import Config, Family, Field, Layout, ModelConfig, Options, Take, group, refuse
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import Message, msg


def table() -> dict[str, Take]:
    """Gemma's table with Gemma 2's four norms: input_layernorm (norm1), post_attention_layernorm (attention_norm),
    pre_feedforward_layernorm (norm2) and post_feedforward_layernorm (ffn_norm)."""
    L = "model.layers.{i}."
    out = {k: v for k, v in gemma.table().items() if not k.startswith("blocks.{i}.norm2.")}
    out |= group("blocks.{i}.", "attention_norm", {"gamma": Take(L + "post_attention_layernorm.weight")})
    out |= group("blocks.{i}.", "norm2", {"gamma": Take(L + "pre_feedforward_layernorm.weight")})
    out |= group("blocks.{i}.", "ffn_norm", {"gamma": Take(L + "post_feedforward_layernorm.weight")})
    return out


# config.json keys this reader reads on top of Gemma's (gemma.GEMMA_KEYS, read by gemma.read_config)
GEMMA2_KEYS = frozenset({"query_pre_attn_scalar", "sliding_window", "layer_types", "attn_logit_softcapping", "final_logit_softcapping",
                         "cache_implementation"})  # cache_implementation (the released configs' 'hybrid'): generation's cache only
GEMMA2_DIFFERENT: dict[str, Message] = {k: v for k, v in gemma.GEMMA_DIFFERENT.items() if k != "gemma2"}
LAYER_TYPES = ("sliding_attention", "full_attention")


def _layer_types(cfg: Config, layers: int) -> list[str]:
    """config.json's layer_types, or Gemma2Config's own: layer i sliding when i is even."""
    value = cfg.raw.get("layer_types")
    if value is None:
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    if not isinstance(value, list) or len(value) != layers or any(v not in LAYER_TYPES for v in value):
        raise cfg.fail("layer_types", msg("a list of {n} entries, each 'full_attention' or 'sliding_attention'", n=layers), value)
    return list(value)


# what the gemma2 reader reads on top of Gemma's (gemma.read_config): its keys (any other refused by name), the soft caps and the window
GEMMA2_READS = Family("", needs=msg("a Gemma 2 checkpoint needs its config.json (heads, head_dim, the soft caps and the sliding window are not in "
                                    "the tensors); put it beside the weights"),
                      reads=("gemma2",), differ=GEMMA2_DIFFERENT, known=gemma.GEMMA_KEYS | GEMMA2_KEYS,
                      others=msg("the gemma2 layout reads model_type gemma2 only (Gemma's block has no sandwich norms, soft caps or sliding layers)"),
                      fields=(Field("query_pre_attn_scalar", "number"), Field("head_dim"), Field("hidden_size"), Field("num_attention_heads"),
                              Field("sliding_window"), Field("attn_logit_softcapping", "number"), Field("final_logit_softcapping", "number")))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Gemma 2: Gemma's settings (gemma.read_config, with the keys Gemma 2 adds taken out first), then the
    sandwich norms, the two soft caps and the per-layer sliding window; every key not modelled refused by name."""
    read = GEMMA2_READS.read(config, ckpt, layout, options)
    cfg, raw, got = read.cfg, read.cfg.raw, read.values
    scalar, head_dim, C, H = got["query_pre_attn_scalar"], got["head_dim"], got["hidden_size"], got["num_attention_heads"]
    window, attn_cap, final_cap = got["sliding_window"], got["attn_logit_softcapping"], got["final_logit_softcapping"]
    d = head_dim if head_dim is not None else (C // H if C is not None and H else None)
    # Gemma2Attention's scaling, query_pre_attn_scalar ** -0.5: block.attention_scale where it is not 1/sqrt(head_dim)
    scale = scalar ** -0.5 if scalar is not None and scalar != d else None
    refuse(cfg, [
        (cfg.text("hidden_act") is not None and cfg.raw.get("hidden_activation") is None,
         msg("hidden_act {act}: Gemma2MLP computes with hidden_activation (gelu_pytorch_tanh by default), not hidden_act",
             act=repr(cfg.raw.get("hidden_act")))),
    ])
    # Gemma's reader on the keys it knows: the MLP's activation is hidden_activation (Gemma2MLP reads nothing else)
    rest = {k: v for k, v in raw.items() if k not in GEMMA2_KEYS and k not in ("model_type", "hidden_act")}
    rest["hidden_act"] = raw.get("hidden_activation") or "gelu_pytorch_tanh"
    base = gemma.read_config(rest, ckpt, layout, options)
    layers = base.layers
    types = _layer_types(cfg, layers)
    sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    if sliding and window is None:
        raise cfg.refuse(msg("layer_types: sliding_attention layers {layers} without a sliding_window", layers=list(sliding)))
    assumed = [a for a in base.assumed if a[0] != "activation"]
    notes = dict(base.notes)
    notes["activation"] = ("hidden_activation " + str(raw["hidden_activation"]) if raw.get("hidden_activation") is not None
                           else "assumed: not in config.json (Gemma2Config's default hidden_activation gelu_pytorch_tanh)")
    if raw.get("hidden_activation") is None:
        assumed.append(("activation", "geglu"))
    block: dict[str, Any] = {}
    for key, value in base.block.items():
        block[key] = "sandwich" if key == "norm_order" else value
        if key == "mask" and sliding:
            block["mask"] = ({"causal": True, "window": window} if len(sliding) == layers
                             else {"causal": True, "window": window, "sliding_layers": list(sliding)})
        if key == "mask" and scale is not None:
            block["attention_scale"] = scale
        if key == "mask" and attn_cap is not None:
            block["attention_softcap"] = attn_cap
        if key == "head" and final_cap is not None and value != "none":
            block["head_softcap"] = final_cap
    notes |= {"norm_order": "Gemma2DecoderLayer: input_layernorm, then post_attention_layernorm on the attention output before the "
                            "residual add; pre_feedforward_layernorm, then post_feedforward_layernorm on the MLP output (sandwich)",
              "mask": (f"sliding_window {window} on layer_types' sliding_attention layers {list(sliding)}, causal on the others"
                       + ("" if cfg.has("layer_types") else " (layer_types assumed: Gemma2Config's own, every even layer sliding)")) if sliding
              else "causal: every layer is full_attention (layer_types)",
              "attention_softcap": "attn_logit_softcapping: scores = cap * tanh(scores / cap), after the scale, before the mask",
              "head_softcap": "final_logit_softcapping: logits = cap * tanh(lm_head(x) / cap)"}
    if scalar is not None and scale is None:
        notes["d"] = notes.get("d", "head_dim") + f"; query_pre_attn_scalar {scalar:g} = head_dim: the scale 1/sqrt(d)"
    if scale is not None:
        notes["attention_scale"] = f"query_pre_attn_scalar ** -0.5 = {scalar:g} ** -0.5 (Gemma2Attention's scaling), not 1/sqrt(head_dim)"
    return base._replace(block=block, notes=notes, assumed=tuple(assumed))


LAYOUT = Layout("gemma2", "Hugging Face Gemma 2 (Gemma2ForCausalLM): Gemma's block with sandwich norms, soft-capped scores and logits, "
                "alternating sliding-window layers", table(), read_config, aliases=(("model.", ""),), model_types=("gemma2",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(GEMMA2_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
