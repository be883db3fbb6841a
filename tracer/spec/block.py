"""The block section: one stack's settings (block:, or an encoder-decoder's encoder: and decoder:) as a BlockSpec.

Each part of a stack is read by its own function, in the order the settings depend on one another: the norm
order, the mask, the positions (rotary, its scaling, T5's relative bias), the head, the FFN's experts, the
embeddings, the attention's scale and caps.  A setting that its stack cannot use is an error naming both.
"""

from __future__ import annotations

import math
from typing import Any

from tracer.messages import join, msg
from tracer.model import blocks, rope
from tracer.model.activations import DEFAULT_ACTIVATION, spec_activations
from tracer.model.blocks import NORMS
from tracer.spec.checks import Checks, nested_shape, positive
from tracer.spec.keys import (
    BLOCK_KEYS,
    CLASSIFIER_KEYS,
    CLASSIFIER_READS,
    CLASSIFIER_TASKS,
    FFN_KEYS,
    MASK_KEYS,
    MAX_DIM,
    PAIRINGS,
    POSITIONS,
    RELATIVE_KEYS,
    ROPE_SCALING_KEYS,
)
from tracer.spec.typed import BlockSpec
from tracer.spec.yamlio import Path


def stacks(c: Checks, doc: dict[str, Any], model: str, has_table: bool) -> tuple[BlockSpec, BlockSpec | None, Any]:
    """The decoder-only model's block, or an encoder-decoder's decoder and encoder; and the custom steps, as written."""
    if model == "decoder":
        for key in ("encoder", "decoder"):
            if key in doc:
                raise c.fail((key,), join([msg("'{key}' belongs to model: encoder-decoder", key=key), msg("a decoder-only model has one 'block'")]))
        block, steps_raw = block_settings(c, doc.get("block", {}), ("block",), has_table, "causal")
        return block, None, steps_raw
    if "block" in doc:
        raise c.fail(("block",), msg("an encoder-decoder has 'encoder' and 'decoder' sections instead of 'block'"))
    encoder, enc_steps_raw = block_settings(c, doc.get("encoder", {}), ("encoder",), has_table, "none")
    block, steps_raw = block_settings(c, doc.get("decoder", {}), ("decoder",), has_table, "causal")
    for sec, st in (("encoder", enc_steps_raw), ("decoder", steps_raw)):
        if st is not None:
            raise c.fail((sec, "steps"), join([msg("custom steps are for decoder-only models"), msg("use norm_order here")]))
    if "head" in (doc.get("encoder") or {}):  # an encoder has no head: a setting nothing reads is an error
        raise c.fail_key(("encoder", "head"), msg("the output head belongs to the decoder: write head under decoder (an encoder has none)"))
    return block, encoder, steps_raw


def block_settings(c: Checks, raw: Any, p: Path, has_table: bool, default_mask: str) -> tuple[BlockSpec, Any]:
    raw = c.keys(raw if raw is not None else {}, p, BLOCK_KEYS, msg("block settings"))
    norm_order = norm_order_of(c, raw, p)
    mask, mask_matrix, window, sliding = mask_of(c, raw, p, default_mask)
    eps = raw.get("eps", 1e-5)
    if not positive(eps):
        raise c.fail(p + ("eps",), msg("expected a positive number such as 1e-5, received {got}", got=c.received(p + ('eps',), eps)))
    final_norm = c.boolean(raw.get("final_norm", False), p + ("final_norm",))
    positions, base, pairing, scaling, rotary_dim = positions_of(c, raw, p, has_table)
    layers = c.integer(raw.get("layers", 1), p + ("layers",), 1, 1000)
    norm = c.choice(raw.get("norm", "layernorm"), p + ("norm",), tuple(NORMS))
    activation = c.choice(raw.get("activation", DEFAULT_ACTIVATION), p + ("activation",), spec_activations())
    head = c.choice(raw.get("head", "none"), p + ("head",), ("none", "tied", "separate"))
    head_bias = c.boolean(raw.get("head_bias", False), p + ("head_bias",))
    if head_bias and head == "none":
        raise c.fail(p + ("head_bias",), msg("head_bias is a bias of the output head, but head is none"))
    if norm_order == "custom" and ("norm" in raw):
        raise c.fail(p + ("norm",), msg("with custom steps, name the norm op in each step (layer_norm, rms_norm, batch_norm)"))
    experts, top_k = experts_of(c, raw, p, norm_order, activation)
    if experts is not None:
        activation = "swiglu"
    embedding_norm, token_types, offset, embedding_scale = embeddings_of(c, raw, p, positions)
    qk_norm, attention_scale, qk_projection = attention_of(c, raw, p)
    if sliding is not None and any(i >= layers for i in sliding):
        raise c.fail(p + ("mask", "sliding_layers"), msg("layer {i} is not one of the {n} layers (0 .. {last})",
                                                         i=max(sliding), n=layers, last=layers - 1))
    attention_softcap, head_softcap = softcaps(c, raw, p, head, norm_order)
    relative = relative_of(c, raw, p, positions)
    rotary_layers = rotary_layers_of(c, raw, p, positions, layers)
    logit_scale = logit_scale_of(c, raw, p, head, head_softcap)
    local_base = local_base_of(c, raw, p, positions, window)
    head_scale = c.boolean(raw.get("head_scale", False), p + ("head_scale",))
    if head_scale and head == "none":
        raise c.fail(p + ("head_scale",), msg("head_scale scales what the output head reads, but head is none"))
    if attention_softcap is not None and relative is not None:  # no family has both: their order is not guessed
        raise c.fail(p + ("attention_softcap",), msg("attention_softcap (Gemma 2's) with positions: relative (T5's): no model has both, "
                                                     "so tracer does not guess whether the bias is added before or after the cap"))
    multipliers = multipliers_of(c, raw, p, norm_order, experts, head, embedding_scale, head_softcap)
    if multipliers[2] is not None and logit_scale is not None:  # no family has both: their order is not guessed
        raise c.fail(p + ("logit_scale",), msg("logit_scale (Cohere's) with logits_divisor (Granite's): no model has both; give one"))
    pooler, classifier, mlm = task_heads(c, raw, p, head)
    tasks = pooler or classifier is not None or mlm is not None
    if tasks and (head_scale or head_softcap is not None):  # no family has both
        key = "head_scale" if head_scale else "head_softcap"
        raise c.fail(p + (key,), msg("{key} acts on what the output head reads, and no model with a pooler, a classifier or a masked-LM head has it: "
                                     "tracer does not guess where it goes", key=key))
    if tasks and (multipliers[2] is not None or logit_scale is not None):  # no family has both
        key = "logits_divisor" if multipliers[2] is not None else "logit_scale"
        raise c.fail(p + (key,), msg("{key} scales the output head's logits, and no model with a pooler, a classifier or a masked-LM head has it: "
                                     "tracer does not guess which logits it scales", key=key))
    spec = BlockSpec(norm_order, mask, float(eps), final_norm, positions, mask_matrix, layers, norm, activation,
                     float(base), head, pairing, window, embedding_norm, token_types, offset, scaling, rotary_dim, head_bias,
                     experts, top_k, embedding_scale, qk_norm, attention_scale, attention_softcap, head_softcap, sliding,
                     relative, head_scale, rotary_layers, logit_scale, local_base, embedding_multiplier=multipliers[0],
                     residual_multiplier=multipliers[1], logits_divisor=multipliers[2], qk_projection=qk_projection,
                     pooler=pooler, classifier=classifier, mlm=mlm)
    return spec, raw.get("steps")


def norm_order_of(c: Checks, raw: dict[str, Any], p: Path) -> str:
    """A preset step list (pre, post, ...) or the block's own steps (custom)."""
    if "steps" in raw and raw["steps"] is None:
        raise c.fail(p + ("steps",), msg("expected a list of steps such as {name: norm1, op: layer_norm, in: x, weights: norm1}, received nothing (null)"))
    if "steps" in raw and "norm_order" in raw:
        raise c.fail(p + ("steps",), msg("give either norm_order (a preset step list) or steps (your own list), not both"))
    orders = tuple(blocks.NORM_ORDERS) if p == ("block",) else ("pre", "post")  # a parallel block is a decoder-only layer
    return "custom" if "steps" in raw else c.choice(raw.get("norm_order", "pre"), p + ("norm_order",), orders)


# -- the mask -------------------------------------------------------------
def mask_of(c: Checks, raw: dict[str, Any], p: Path, default_mask: str
            ) -> tuple[str, tuple[tuple[bool, ...], ...] | None, int | None, tuple[int, ...] | None]:
    """causal | none, a [T,T] matrix written out, or {causal: true, window: W, sliding_layers: [...]}:
    (mask, its matrix, the window, the layers that read the window)."""
    mask_raw = raw.get("mask", default_mask)
    mask_matrix, window, sliding = None, None, None
    if isinstance(mask_raw, list):
        mask_matrix = mask_matrix_of(c, mask_raw, p + ("mask",))
        mask = "explicit"
    elif isinstance(mask_raw, dict):
        mask, window = mask_window(c, mask_raw, p + ("mask",))
        if "sliding_layers" in mask_raw:
            sliding = sliding_layers(c, mask_raw["sliding_layers"], p + ("mask", "sliding_layers"), window)
    else:
        mask = c.choice(mask_raw, p + ("mask",), ("causal", "none"))
    return mask, mask_matrix, window, sliding


def mask_matrix_of(c: Checks, raw: list[Any], path: Path) -> tuple[tuple[bool, ...], ...]:
    shape = c.rect(mask_entries(c, raw, path), path)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise c.fail(path, msg("expected causal, none, or a square [T,T] matrix of 0 and 1, received {shape}", shape=nested_shape(shape)))
    return tuple(tuple(bool(v) for v in row) for row in raw)


def mask_window(c: Checks, raw: dict[str, Any], path: Path) -> tuple[str, int | None]:
    """``{causal: true, window: W}``: the causal mask, each query reading itself and the W - 1 keys before it."""
    c.keys(raw, path, MASK_KEYS, msg("mask settings"))
    if "causal" not in raw:
        raise c.fail(path, msg("expected {causal: true, window: W}, received no causal (a sliding window is causal: write causal: true)"))
    if raw["causal"] is not True:
        got = c.received(path + ("causal",), raw["causal"])
        raise c.fail(path + ("causal",), msg("expected true (a sliding window is causal, as Mistral's is: the keys after each query stay hidden), "
                                             "received {got}", got=got))
    if "window" not in raw:
        return "causal", None
    return "causal", c.integer(raw["window"], path + ("window",), 1, MAX_DIM)


def mask_entries(c: Checks, value: Any, path: Path) -> Any:
    """A mask's nested lists: every leaf 0 or 1 (checked before the shape, so 0.5 or true is named as such)."""
    if isinstance(value, list):
        if not value:
            raise c.fail(path, msg("expected rows of 0 and 1, received an empty list"))
        for i, item in enumerate(value):
            mask_entries(c, item, path + (i,))
    elif isinstance(value, bool) or value not in (0, 1):
        raise c.fail(path, msg("expected 0 (masked) or 1 (may attend), received {got}", got=c.received(path, value)))
    return value


def sliding_layers(c: Checks, raw: Any, path: Path, window: int | None) -> tuple[int, ...]:
    """``sliding_layers: [0, 2]``: the layers whose attention reads the sliding window (the others: plain causal)."""
    if window is None:
        raise c.fail(path, msg("sliding_layers names the layers that read the sliding window, but the mask has no window"))
    return layer_list(c, raw, path)


def layer_list(c: Checks, raw: Any, path: Path) -> tuple[int, ...]:
    """A list of layer numbers, each once, in increasing order (sliding_layers, rotary_layers)."""
    if not isinstance(raw, list):
        raise c.fail(path, msg("expected a list of layer numbers such as [0, 2], received {got}", got=c.received(path, raw)))
    out = tuple(c.integer(v, path + (i,), 0, 1000) for i, v in enumerate(raw))
    if len(set(out)) != len(out) or list(out) != sorted(out):
        raise c.fail(path, msg("expected each layer once, in increasing order, received {got}", got=c.received(path, raw)))
    return out


# -- positions --------------------------------------------------------------
def positions_of(c: Checks, raw: dict[str, Any], p: Path, has_table: bool
                 ) -> tuple[str, float | int, str, tuple[object, ...] | None, int | None]:
    """positions, and the settings of sinusoidal or rotary positions: (positions, position_base, rotary_pairing,
    rope_scaling, rotary_dim); each setting only with the positions it is for."""
    positions = c.choice(raw.get("positions", "learned" if has_table else "none"), p + ("positions",), POSITIONS)
    base = raw.get("position_base", 10000.0)
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1:
        raise c.fail(p + ("position_base",), msg("expected a number above 1 such as 10000, received {got}", got=c.received(p + ('position_base',), base)))
    if "position_base" in raw and positions not in ("sinusoidal", "rotary"):
        raise c.fail(p + ("position_base",), msg("position_base is for sinusoidal or rotary positions, but positions is {positions}", positions=positions))
    pairing = c.choice(raw.get("rotary_pairing", "interleaved"), p + ("rotary_pairing",), PAIRINGS)
    if "rotary_pairing" in raw and positions != "rotary":
        raise c.fail(p + ("rotary_pairing",), msg("rotary_pairing is for rotary positions, but positions is {positions}", positions=positions))
    scaling = rope_scaling(c, raw["rope_scaling"], p + ("rope_scaling",)) if "rope_scaling" in raw else None
    if "rope_scaling" in raw and positions != "rotary":
        raise c.fail(p + ("rope_scaling",), msg("rope_scaling is for rotary positions, but positions is {positions}", positions=positions))
    rotary_dim = None
    if "rotary_dim" in raw:
        if positions != "rotary":
            raise c.fail(p + ("rotary_dim",), msg("rotary_dim is for rotary positions, but positions is {positions}", positions=positions))
        rotary_dim = c.integer(raw["rotary_dim"], p + ("rotary_dim",), 1, MAX_DIM)  # even and at most d: the rotary op's contract
    return positions, base, pairing, scaling, rotary_dim


def rotary_layers_of(c: Checks, raw: dict[str, Any], p: Path, positions: str, layers: int) -> tuple[int, ...] | None:
    """``rotary_layers: [0, 1, 2]`` (SmolLM3's no_rope_layers): the layers whose attention is turned, each once, in
    increasing order, every one of the stack's; the others have no positions.  Absent: every layer."""
    if "rotary_layers" not in raw:
        return None
    path = p + ("rotary_layers",)
    if positions != "rotary":
        raise c.fail(path, msg("rotary_layers is for rotary positions, but positions is {positions}", positions=positions))
    out = layer_list(c, raw["rotary_layers"], path)
    if out and out[-1] >= layers:
        raise c.fail(path, msg("layer {i} is not one of the {n} layers (0 .. {last})", i=out[-1], n=layers, last=layers - 1))
    return out


def local_base_of(c: Checks, raw: dict[str, Any], p: Path, positions: str, window: int | None) -> float | None:
    """``local_position_base: B`` (Gemma 3's rope_local_base_freq): the sliding layers' rotary base, their speeds unscaled."""
    if "local_position_base" not in raw:
        return None
    path = p + ("local_position_base",)
    base = raw["local_position_base"]
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1:
        raise c.fail(path, msg("expected a number above 1 such as 10000, received {got}", got=c.received(path, base)))
    if positions != "rotary":
        raise c.fail(path, msg("local_position_base is for rotary positions, but positions is {positions}", positions=positions))
    if window is None:
        raise c.fail(path, msg("local_position_base is the base of the sliding layers, but the mask has no window"))
    return float(base)


def rope_scaling(c: Checks, raw: Any, path: Path) -> tuple[object, ...]:
    """``{type: linear, factor: F}`` or ``{type: llama3, factor, low_freq_factor, high_freq_factor,
    original_max_position_embeddings}``: every number positive, llama3's high_freq_factor above its low one."""
    c.keys(raw, path, ROPE_SCALING_KEYS, msg("rope scaling settings"))
    kind = c.choice(raw.get("type"), path + ("type",), rope.ROPE_TYPES)
    need = rope.LLAMA3_KEYS if kind == "llama3" else ("factor",)
    values: list[float] = []
    for key in need:
        value = raw.get(key)
        if not positive(value):
            raise c.fail(path + (key,), msg("expected a positive number, received {got}", got=c.received(path + (key,), value)))
        values.append(float(value))
    extra = [k for k in raw if k not in need and k != "type"]
    if extra:
        raise c.fail(path + (extra[0],), msg("{key} is a llama3 setting, but type is {kind}", key=extra[0], kind=kind))
    if kind == "llama3" and values[2] <= values[1]:
        raise c.fail(path + ("high_freq_factor",), msg("expected a number above low_freq_factor = {low}, received {got}",
                                                       low=f"{values[1]:g}", got=f"{values[2]:g}"))
    return (kind, *values)


def relative_of(c: Checks, raw: dict[str, Any], p: Path, positions: str) -> tuple[int, int] | None:
    """``positions: relative`` with ``relative: {buckets: K, max_distance: D}`` (T5's; defaults 32 and 128)."""
    if positions != "relative":
        if "relative" in raw:
            raise c.fail(p + ("relative",), msg("relative is for positions: relative (T5's position bias), but positions is {positions}", positions=positions))
        return None
    path = p + ("relative",)
    rel = c.keys(raw.get("relative") or {}, path, RELATIVE_KEYS, msg("relative position settings"))
    buckets = c.integer(rel.get("buckets", 32), path + ("buckets",), 4, MAX_DIM)
    distance = c.integer(rel.get("max_distance", 128), path + ("max_distance",), 1, MAX_DIM)
    if distance <= buckets // 2:  # the logarithmic buckets span max_exact .. max_distance: it must lie above max_exact
        raise c.fail(path + ("max_distance",), msg("expected a distance above buckets / 2 = {half}, received {got}", half=buckets // 2, got=distance))
    return buckets, distance


# -- the FFN, the embeddings, the attention -----------------------------------
def experts_of(c: Checks, raw: dict[str, Any], p: Path, norm_order: str, activation: str) -> tuple[int | None, int | None]:
    """``ffn: {experts: E, top_k: k}``: a mixture of E SwiGLU experts, k of them for each position (None, None: none)."""
    if "ffn" not in raw:
        return None, None
    ffn = c.keys(raw["ffn"], p + ("ffn",), FFN_KEYS, msg("FFN settings"))
    for key in FFN_KEYS:
        if key not in ffn:
            raise c.fail(p + ("ffn",), msg("a mixture of experts needs {key} (e.g. ffn: {experts: 4, top_k: 2})", key=key))
    experts = c.integer(ffn["experts"], p + ("ffn", "experts"), 1, 1024)
    top_k = c.integer(ffn["top_k"], p + ("ffn", "top_k"), 1, 1024)
    if top_k > experts:
        raise c.fail(p + ("ffn", "top_k"), msg("top_k = {k} chooses more experts than there are (experts = {E})", k=top_k, E=experts))
    if norm_order not in ("pre", "custom"):  # the preset replaces the pre-norm block's FFN; custom steps place their own
        raise c.fail(p + ("ffn",), msg("a mixture of experts is in the pre-norm block (norm_order: pre), as Mixtral's is"))
    if "activation" in raw and activation != "swiglu":
        raise c.fail(p + ("activation",), msg("each expert is a SwiGLU FFN: expected swiglu with ffn.experts, received {got}", got=activation))
    return experts, top_k


def embeddings_of(c: Checks, raw: dict[str, Any], p: Path, positions: str) -> tuple[bool, bool, int, bool]:
    """BERT's embedding norm and token types, RoBERTa's position offset, Gemma's embedding scale: (embedding_norm,
    token_types, position_offset, embedding_scale), each for a decoder-only spec's block."""
    embedding_norm = c.boolean(raw.get("embedding_norm", False), p + ("embedding_norm",))
    token_types = c.boolean(raw.get("token_types", False), p + ("token_types",))
    offset = c.integer(raw.get("position_offset", 0), p + ("position_offset",), 0, MAX_DIM)
    if offset and positions != "learned":
        raise c.fail(p + ("position_offset",), msg("position_offset is for learned positions, but positions is {positions}", positions=positions))
    if (embedding_norm or token_types) and p != ("block",):
        raise c.fail(p + ("embedding_norm" if embedding_norm else "token_types",), msg("embedding_norm and token_types are for a decoder-only spec's block"))
    embedding_scale = c.boolean(raw.get("embedding_scale", False), p + ("embedding_scale",))
    if embedding_scale and p != ("block",):
        raise c.fail(p + ("embedding_scale",), msg("embedding_scale is for a decoder-only spec's block"))
    return embedding_norm, token_types, offset, embedding_scale


def attention_of(c: Checks, raw: dict[str, Any], p: Path) -> tuple[bool, float | None, bool]:
    """Qwen3's qk_norm (true: per head) or OLMo 2's (projection: over the whole projections) and the scores' scale:
    (qk_norm, attention_scale; None: 1/sqrt(d), qk_projection)."""
    projection = raw.get("qk_norm") == "projection"
    qk_norm = True if projection else c.boolean(raw.get("qk_norm", False), p + ("qk_norm",))
    if qk_norm and p != ("block",):
        raise c.fail(p + ("qk_norm",), msg("qk_norm (Qwen3's per-head RMSNorm of q and k) is for a decoder-only spec's block"))
    attention_scale = None
    if "attention_scale" in raw:  # absent: 1/sqrt(d), as every spec before it
        attention_scale = raw["attention_scale"]
        if not positive(attention_scale):
            raise c.fail(p + ("attention_scale",), msg("expected a positive number such as 1 (the scores QK^T * s; absent: 1/sqrt(d)), received {got}",
                                                       got=c.received(p + ("attention_scale",), attention_scale)))
        attention_scale = float(attention_scale)
    return qk_norm, attention_scale, projection


def softcaps(c: Checks, raw: dict[str, Any], p: Path, head: str, norm_order: str) -> tuple[float | None, float | None]:
    """Gemma 2's caps of the attention scores and of the logits, and its sandwich norms: a decoder-only spec's block."""
    attention_softcap, head_softcap = (softcap(c, raw, key, p) for key in ("attention_softcap", "head_softcap"))
    if head_softcap is not None and head == "none":
        raise c.fail(p + ("head_softcap",), msg("head_softcap caps the output head's logits, but head is none"))
    if (attention_softcap is not None or head_softcap is not None or norm_order in ("sandwich", "post_sublayer")) and p != ("block",):
        key = "attention_softcap" if attention_softcap is not None else "head_softcap" if head_softcap is not None else "norm_order"
        raise c.fail(p + (key,), msg("{key} (Gemma 2's) is for a decoder-only spec's block", key=key))
    return attention_softcap, head_softcap


def multipliers_of(c: Checks, raw: dict[str, Any], p: Path, norm_order: str, experts: int | None, head: str, embedding_scale: bool,
                   head_softcap: float | None) -> tuple[float | None, float | None, float | None]:
    """Granite's ``embedding_multiplier``, ``residual_multiplier`` and ``logits_divisor``: positive numbers, each for a
    decoder-only spec's block; the residual multiplier in the pre-norm block (Granite's), the divisor with a head."""
    out: list[float | None] = []
    for key in ("embedding_multiplier", "residual_multiplier", "logits_divisor"):
        value = raw.get(key)
        if key in raw and not positive(value):
            raise c.fail(p + (key,), msg("expected a positive number such as 0.25, received {got}", got=c.received(p + (key,), value)))
        if key in raw and p != ("block",):
            raise c.fail(p + (key,), msg("{key} (Granite's) is for a decoder-only spec's block", key=key))
        out.append(float(raw[key]) if key in raw else None)
    if out[0] is not None and embedding_scale:
        raise c.fail(p + ("embedding_multiplier",), msg("embedding_multiplier and embedding_scale both scale the embeddings: give one"))
    if out[1] is not None and (norm_order != "pre" or experts is not None):
        raise c.fail(p + ("residual_multiplier",), msg("residual_multiplier scales the pre-norm block's sublayer outputs (Granite's): "
                                                       "expected norm_order: pre without ffn experts"))
    if out[2] is not None and head == "none":
        raise c.fail(p + ("logits_divisor",), msg("logits_divisor divides the output head's logits, but head is none"))
    if out[2] is not None and head_softcap is not None:
        raise c.fail(p + ("logits_divisor",), msg("logits_divisor with head_softcap: no model has both, so tracer does not guess their order"))
    return out[0], out[1], out[2]


def logit_scale_of(c: Checks, raw: dict[str, Any], p: Path, head: str, head_softcap: float | None) -> float | None:
    """``logit_scale: s`` (Cohere's): the logits times s, a decoder-only spec's block with a head; absent: none."""
    if "logit_scale" not in raw:
        return None
    path = p + ("logit_scale",)
    value = raw["logit_scale"]
    if not positive(value):
        raise c.fail(path, msg("expected a positive number such as 0.0625 (logits = s * raw_logits), received {got}", got=c.received(path, value)))
    if head == "none":
        raise c.fail(path, msg("logit_scale scales the output head's logits, but head is none"))
    if p != ("block",):
        raise c.fail(path, msg("logit_scale (Cohere's) is for a decoder-only spec's block"))
    if head_softcap is not None:  # no family has both: their order is not guessed
        raise c.fail(path, msg("logit_scale with head_softcap: no model has both, so tracer does not guess which comes first"))
    return float(value)


def softcap(c: Checks, raw: dict[str, Any], key: str, p: Path) -> float | None:
    """``attention_softcap: 50`` / ``head_softcap: 30`` (Gemma 2's): a positive cap, or absent (no cap)."""
    if key not in raw:
        return None
    value = raw[key]
    if not positive(value):
        raise c.fail(p + (key,), msg("expected a positive number such as 50 (the cap of cap * tanh(x / cap)), received {got}",
                                     got=c.received(p + (key,), value)))
    return float(value)


# -- the task heads after the stack ------------------------------------------------------
def task_heads(c: Checks, raw: dict[str, Any], p: Path, head: str) -> tuple[bool, tuple[str, str, int | None, str | None] | None, str | None]:
    """BERT's pooler, a classifier ``{task, reads, pad, hidden}`` and a masked-LM head's activation (``mlm: gelu``), each for a
    decoder-only spec's block: (pooler, classifier, mlm)."""
    pooler = c.boolean(raw.get("pooler", False), p + ("pooler",))
    classifier = classifier_of(c, raw["classifier"], p + ("classifier",), pooler) if "classifier" in raw else None
    mlm = c.choice(raw["mlm"], p + ("mlm",), spec_activations()) if "mlm" in raw else None
    if mlm is not None and head == "none":
        raise c.fail(p + ("mlm",), msg("mlm is the transform a masked-LM head applies before its decoder, but head is none"))
    for key, on in (("pooler", pooler), ("classifier", classifier is not None), ("mlm", mlm is not None)):
        if on and p != ("block",):
            raise c.fail(p + (key,), msg("{key} is for a decoder-only spec's block", key=key))
    return pooler, classifier, mlm


def classifier_of(c: Checks, raw: Any, path: Path, pooler: bool) -> tuple[str, str, int | None, str | None]:
    """``{task: sequence | next_sentence, reads: pooled | first | last, pad: ID, hidden: ACTIVATION}``: (task, reads, pad, hidden)."""
    raw = c.keys(raw if raw is not None else {}, path, CLASSIFIER_KEYS, msg("classifier settings"))
    task = c.choice(raw.get("task", "sequence"), path + ("task",), CLASSIFIER_TASKS)
    reads = c.choice(raw.get("reads", "pooled" if pooler else "first"), path + ("reads",), CLASSIFIER_READS)
    if reads == "pooled" and not pooler:
        raise c.fail(path + ("reads",), msg("reads pooled is the pooler's output, but the block has no pooler (pooler: true)"))
    pad = None
    if "pad" in raw:
        if reads != "last":
            raise c.fail(path + ("pad",), msg("pad is the token the last position passed over (reads: last), but reads is {reads}", reads=reads))
        pad = c.integer(raw["pad"], path + ("pad",), 0, MAX_DIM)
    hidden = c.choice(raw["hidden"], path + ("hidden",), spec_activations()) if "hidden" in raw else None
    return task, reads, pad, hidden
