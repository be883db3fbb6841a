"""Every stage name tracer records, with its meaning, formula and shape (``tracer stages``).

The catalogue is built from the step lists themselves (blocks.py): the entry
steps, the pre-norm and post-norm layers, the encoder-decoder's decoder layers,
the attention internals, the final norm and the output head.  So a name and its
meaning here are exactly what a trace records, and one name that means
different things in different blocks (``norm1`` is LN_1(X) before attention in
pre-norm, LN_1(X + U) after it in post-norm) is listed once per meaning.
Nothing here imports NumPy.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tracer.errors import UsageError
from tracer.messages import Message, join, msg
from tracer.model import blocks
from tracer.model.activations import DEFAULT_ACTIVATION, activation_of, spec_activations
from tracer.model.blocks import ATTN_MEANINGS, StackSettings, Step
from tracer.model.ops import OPS
from tracer.model.shapes import Shape


@dataclass(frozen=True)
class StageInfo:
    name: str  # as a trace records it (layer stages of a stack get blocks.N. in front)
    section: str  # where it appears
    meaning: str  # the words the trace table prints
    formula: str
    axes: tuple[str, ...]

    @property
    def shape(self) -> str:
        return f"[{','.join(self.axes)}]"

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "section": self.section, "meaning": self.meaning, "formula": self.formula,
                "shape": self.shape, "axes": list(self.axes)}


INTERNAL_FORMULAS = {
    "q": "{0} W_Q + b_Q, split into H heads: head h takes columns h*d .. (h+1)*d - 1",
    "k": "{1} W_K + b_K, split into heads",
    "v": "{1} W_V + b_V, split into heads",
    "scores": "Q_h K_h^T / sqrt(d), one row per query, one column per key",
    "weights": "softmax over keys of the scores, masked keys set to -inf first (so their weight is 0)",
    "heads": "weights_h V_h for every head, concatenated back to width C",
}
SIZES = {"B": 2, "T": 3, "S": 4, "C": 8, "H": 2, "d": 4, "F": 16, "V": 5, "T_max": 6, "E": 4, "L": 3}  # only the axes are used

SECTIONS = (
    "before the block",
    "pre-norm layer (norm_order: pre, Example 17.2)",
    "post-norm layer (norm_order: post, section 17.6)",
    "attention internals (shown with --all)",
    "after the last layer",
    "encoder-decoder (model: encoder-decoder)",
    "variants (block.norm, block.activation)",
    "parallel layers (norm_order: parallel, GPT-NeoX; parallel_shared, Phi)",
)
STACK_NOTE = ("In a stack (block.layers > 1) every layer stage is prefixed with its layer: blocks.0.norm1, "
              "blocks.1.norm1, ...; in an encoder-decoder with encoder.blocks.N. and decoder.blocks.N.")


def formula_template(template: str) -> str:
    """A formula's template with named fields, as the catalogue of messages keys it: {0} -> {a}, {1} -> {b}."""
    return template.replace("{0}", "{a}").replace("{1}", "{b}")


def filled(template: str, a: object = "", b: object = "") -> Message:
    """A formula (an op's or an activation's record's, INTERNAL_FORMULAS') as a message: {0} and {1} are the stages it reads."""
    return msg(formula_template(template), a=a, b=b)


def formula(step: Step) -> Message:
    template = activation_of(step.activation).formula if step.op == "ffn_hidden" else OPS[step.op].formula  # an FFN's first half: its activation's
    return filled(template, *step.inputs[:2])


def _infos(section: str, steps: Iterable[Step], shapes: dict[str, Shape], prefix: str = "") -> list[StageInfo]:
    """Entries for steps whose shapes were inferred; attention steps bring their internals."""
    out = []
    for step in steps:
        out.append(StageInfo(prefix + step.name, section, step.meaning, formula(step), shapes[step.name][0]))
    return out


def _shapes(steps: Sequence[Step], known: dict[str, Shape], pos: str = "T", sizes: dict[str, int] = SIZES) -> dict[str, Shape]:
    shapes = dict(known)
    for step in steps:
        ins = [shapes[i] for i in step.inputs]
        shapes[step.name] = blocks.output_shape(step, ins, sizes, pos)
        if step.op in ("mha", "cross_mha"):
            shapes.update(blocks.attention_internals(step, ins[0], ins[1] if step.op == "cross_mha" else ins[0], sizes))
    return shapes


def _internals(section: str, step: Step, shapes: dict[str, Shape], prefix: str = "") -> list[StageInfo]:
    p = blocks.internal_prefix(step)
    kv = step.inputs[-1]
    return [StageInfo(f"{prefix}{p}.{key}", section, meaning, filled(INTERNAL_FORMULAS[key], step.inputs[0], kv),
                      shapes[f"{p}.{key}"][0]) for key, meaning in ATTN_MEANINGS.items()]


def _layer(template: tuple[Step, ...], settings: StackSettings, memory: bool = False) -> tuple[tuple[Step, ...], dict[str, Shape]]:
    layer = blocks.configure(template, settings, preset=True)
    known: dict[str, Shape] = {"x": (("B", "T", "C"), (SIZES["B"], SIZES["T"], SIZES["C"]))}
    if memory:
        known["memory"] = (("B", "S", "C"), (SIZES["B"], SIZES["S"], SIZES["C"]))
    return layer, _shapes(layer, known)


def build() -> list[StageInfo]:
    entries: list[StageInfo] = []
    before, pre, post, internals, after, seq2seq, variants, parallel = SECTIONS
    plain = StackSettings()

    # before the block: tokens or x, learned or sinusoidal positions, or none (rotary acts inside attention)
    for uses_tokens, positions in ((True, "learned"), (False, "learned"), (True, "sinusoidal"), (True, "none"), (True, "rotary")):
        steps, _ = blocks.entry("", "tokens" if uses_tokens else "x", plain._replace(positions=positions), uses_tokens)
        entries += _infos(before, steps, _shapes(steps, {}))
    # BERT and RoBERTa: token + position (from row padding_idx + 1) + token type, then the embeddings' LayerNorm
    bert = plain._replace(embedding_norm=True, token_types=True, position_offset=2)
    steps, _ = blocks.entry("", "tokens", bert, True)
    entries += _infos(before, steps, _shapes(steps, {}))
    # Gemma: the token embeddings times sqrt(C) (block.embedding_scale), X itself with rotary positions
    for positions in ("rotary", "learned"):
        steps, _ = blocks.entry("", "tokens", plain._replace(positions=positions, embedding_scale=True), True)
        entries += _infos(before, steps, _shapes(steps, {}))

    layer, shapes = _layer(blocks.PRE_NORM, plain)
    entries += _infos(pre, layer, shapes)
    attention = next(s for s in layer if s.op == "mha")
    entries += _internals(internals, attention, shapes)
    layer, shapes = _layer(blocks.POST_NORM, plain)
    entries += _infos(post, layer, shapes)
    for template in (blocks.PARALLEL, blocks.PARALLEL_SHARED):  # the stages a parallel layer adds or reads otherwise
        par, par_shapes = _layer(template, plain)
        entries += _infos(parallel, par, par_shapes)

    last = layer[-1].name
    tail_shapes = _shapes([], {last: shapes[last]})
    tail = [blocks.final_norm("", last, plain)] + blocks.head_steps("final_norm")
    entries += _infos(after, tail, _shapes(tail, tail_shapes))
    # OPT with word_embed_proj_dim != C: the embedding is C_e wide, projected to C after it and back before the head
    projected = SIZES | {"C_e": 6}
    steps, _ = blocks.entry("", "tokens", plain, True, projected=True)
    entries += _infos(before, [s for s in steps if s.name == blocks.PROJECT_IN], _shapes(steps, {}, sizes=projected))
    out = blocks.project_out("final_norm")
    entries += _infos(after, [out], _shapes([out], {"final_norm": (("B", "T", "C"), (SIZES["B"], SIZES["T"], SIZES["C"]))}, sizes=projected))

    # encoder-decoder: the encoder reads the source (S positions), the decoder's layers read the encoder output
    for side, stream, pos in (("encoder.", "source", "S"), ("decoder.", "target", "T")):
        steps, _ = blocks.entry(side, stream, plain._replace(positions="sinusoidal"), True)
        shapes = _shapes(steps, {}, pos)
        entries += _infos(seq2seq, steps, shapes)
    seen: set[tuple[str, str, str]] = set()
    for order in ("pre", "post"):
        layer, shapes = _layer(blocks.DECODER_NORM_ORDERS[order], plain, memory=True)
        for info in _infos(seq2seq, layer, shapes, prefix="decoder.blocks.N."):
            if (info.name, info.meaning, info.formula) not in seen:  # post-norm: only what differs from pre-norm
                seen.add((info.name, info.meaning, info.formula))
                decoder = (msg("{meaning} (pre-norm decoder layer)", meaning=info.meaning) if order == "pre"
                           else msg("{meaning} (post-norm decoder layer)", meaning=info.meaning))
                entries.append(dataclasses.replace(info, meaning=decoder))
        if order == "pre":  # the attention internals: self-attention (attn.*) and cross-attention (cross.*)
            for step in (s for s in layer if s.op in ("mha", "cross_mha")):
                entries += _internals(seq2seq, step, shapes, prefix="decoder.blocks.N.")
    entries.append(StageInfo("encoder.blocks.N.<stage>", seq2seq, msg("an encoder layer: the pre-norm or post-norm layer's "
                             "stages over the S source positions, attention unmasked"), msg("as the layer stage of that name"),
                             ("B", "S", "C")))
    for side, pos in (("encoder.", "S"), ("decoder.", "T")):
        step = blocks.final_norm(side, "output", plain)
        if side == "encoder.":
            meaning, output = msg("{meaning} (the encoder output: the memory cross-attention reads)", meaning=step.meaning), msg("the encoder output")
        else:
            meaning, output = msg("{meaning} (the decoder output)", meaning=step.meaning), msg("the decoder output")
        entries.append(StageInfo(step.name, seq2seq, meaning, filled(OPS["layer_norm"].formula, output), ("B", pos, "C")))

    # variants: the same names, other arithmetic
    others = [("activation", name) for name in spec_activations() if name != DEFAULT_ACTIVATION]
    for field, value in [("norm", "rmsnorm"), ("norm", "batchnorm"), ("norm", "rmsnorm_offset"), *others]:
        variant = StackSettings(norm=value) if field == "norm" else StackSettings(activation=value)
        layer, shapes = _layer(blocks.PRE_NORM, variant)
        base = {s.name: s for s in blocks.configure(blocks.PRE_NORM, plain, preset=True)}
        for step in layer:
            if formula(step) != formula(base[step.name]):
                entries.append(StageInfo(step.name, variants, msg("{meaning} (block.{field}: {value})", meaning=step.meaning, field=field, value=value),
                                         formula(step), shapes[step.name][0]))
    entries += _attention_variants(variants)
    entries += _moe_variant(variants)
    entries += _head_width_variants(variants)
    entries += _qk_norm_variants(variants)
    entries += _gemma2_variants(variants, after)
    entries += _relative_entries(seq2seq)
    entries += _head_scale_entries(seq2seq)
    entries += _granite_variants(before, variants, after)
    entries += _post_sublayer_variants(variants)
    entries += _task_head_entries(after)
    unique: dict[tuple[str, ...], StageInfo] = {}
    for e in sorted(entries, key=lambda e: SECTIONS.index(e.section)):  # stable: catalogue order within a section  # one entry per meaning within a section
        unique.setdefault((e.section, e.name, e.meaning, e.formula), e)
    return list(unique.values())


ROTARY_PAIRS = {"interleaved": "(2i, 2i+1)", "half": "(i, i + d/2)"}


def _attention_variants(section: str) -> list[StageInfo]:
    """attn.q and attn.k turned by rotary positions (either pairing), and k, v with fewer heads (grouped-query)."""
    out = []
    for pairing, pair in ROTARY_PAIRS.items():
        layer, shapes = _layer(blocks.PRE_NORM, StackSettings(positions="rotary", rotary_pairing=pairing))
        attention = next(s for s in layer if s.op == "mha")
        for info in _internals(section, attention, shapes):
            if info.name in ("attn.q", "attn.k"):
                turn = msg("pair i = {pair} of each head turned by the angle t * base^(-2i/d) at position t", pair=pair)
                meaning = msg("{meaning}, turned by rotary positions", meaning=info.meaning)
                if pairing != "interleaved":
                    meaning = msg("{meaning} (block.{field}: {value})", meaning=meaning, field="rotary_pairing", value=pairing)
                out.append(dataclasses.replace(info, meaning=meaning, formula=join([info.formula, turn])))
    layer, _ = _layer(blocks.PRE_NORM, StackSettings())
    attention = next(s for s in layer if s.op == "mha")
    x = (("B", "T", "C"), (SIZES["B"], SIZES["T"], SIZES["C"]))
    grouped = blocks.attention_internals(attention, x, x, {**SIZES, "H_kv": 1})
    for key in ("k", "v"):
        axes = grouped[f"attn.{key}"][0]
        split = (msg("{a} W_K + b_K, split into H_kv heads of width d", a=attention.inputs[0]) if key == "k"
                 else msg("{a} W_V + b_V, split into H_kv heads of width d", a=attention.inputs[0]))
        out.append(StageInfo(f"attn.{key}", section, msg("{meaning} (grouped-query attention, dims.H_kv < H)", meaning=ATTN_MEANINGS[key]),
                             join([split, msg("query head h reads head h // (H / H_kv)")]), axes))
    return out


def _moe_variant(section: str) -> list[StageInfo]:
    """A mixture of experts in place of the FFN (block.ffn: {experts: E, top_k: k}): the router's stages and the mix."""
    layer, shapes = _layer(blocks.PRE_NORM_MOE, StackSettings(activation="swiglu"))
    moe = {s.name for s in blocks.MOE_STEPS}
    return [StageInfo(step.name, section, msg("{meaning} (block.{field}: {value})", meaning=step.meaning, field="ffn", value="{experts: E, top_k: k}"),
                      formula(step), shapes[step.name][0]) for step in layer if step.name in moe]


def _head_width_variants(section: str) -> list[StageInfo]:
    """dims.d: heads of a width of their own, so the heads side by side are C_q = H * d wide, not C."""
    layer, _ = _layer(blocks.PRE_NORM, StackSettings())
    attention = next(s for s in layer if s.op == "mha")
    x = (("B", "T", "C"), (SIZES["B"], SIZES["T"], SIZES["C"]))
    axes = blocks.attention_internals(attention, x, x, {**SIZES, "C_q": SIZES["H"] * SIZES["d"]})["attn.heads"][0]
    return [StageInfo("attn.heads", section, msg("{meaning} (a head width of its own, dims.d)", meaning=ATTN_MEANINGS["heads"]),
                      msg("weights_h V_h for every head, concatenated to width C_q = H * d; W_O [C_q,C] takes them back to C"), axes)]



def _qk_norm_variants(section: str) -> list[StageInfo]:
    """block.qk_norm (Qwen3): attn.q and attn.k recorded after the per-head RMSNorm and the rotary turn."""
    layer, shapes = _layer(blocks.PRE_NORM, StackSettings(positions="rotary", rotary_pairing="half", qk_norm=True))
    attention = next(s for s in layer if s.op == "mha")
    out = []
    for info in _internals(section, attention, shapes):
        if info.name in ("attn.q", "attn.k"):
            key = info.name[-1]
            meaning = msg("{meaning}, RMS-normalised per head, then turned by rotary positions (block.qk_norm)", meaning=info.meaning)
            norm = msg("each head's d coordinates RMS-normalised, {key} / sqrt(mean({key}^2) + eps) * {key}_norm (weights attn.{key}_norm [d]), "
                       "before the rotary turn",
                       key=key)
            out.append(dataclasses.replace(info, meaning=meaning, formula=join([info.formula, norm])))
    layer, shapes = _layer(blocks.PRE_NORM, StackSettings(positions="rotary", rotary_pairing="half", qk_norm=True, qk_projection=True))
    attention = next(s for s in layer if s.op == "mha")
    for info in _internals(section, attention, shapes):
        if info.name in ("attn.q", "attn.k"):
            key = info.name[-1]
            meaning = msg("{meaning}, after the RMS norm of the whole projection, then turned by rotary positions (block.qk_norm: projection)",
                          meaning=info.meaning)
            norm = msg("the whole projection RMS-normalised at each position, over all its heads' coordinates (weights attn.{key}_norm), "
                       "before the split into heads and the rotary turn", key=key)
            out.append(dataclasses.replace(info, meaning=meaning, formula=join([info.formula, norm])))
    return out


def _post_sublayer_variants(section: str) -> list[StageInfo]:
    """OLMo 2 (block.norm_order: post_sublayer): the stages that read or are other than the pre-norm layer's."""
    layer, shapes = _layer(blocks.POST_SUBLAYER, StackSettings(norm="rmsnorm"))
    pre = {s.name: s for s in blocks.configure(blocks.PRE_NORM, StackSettings(norm="rmsnorm"), preset=True)}
    return [StageInfo(step.name, section, msg("{meaning} (block.{field}: {value})", meaning=step.meaning, field="norm_order", value="post_sublayer"),
                      formula(step), shapes[step.name][0])
            for step in layer if step.name not in pre or step.inputs != pre[step.name].inputs]


def _gemma2_variants(section: str, after: str) -> list[StageInfo]:
    """Gemma 2: the sandwich layer's stages (block.norm_order: sandwich), the capped scores
    (block.attention_softcap) and the capped logits after the head's raw_logits (block.head_softcap)."""
    out = []
    layer, shapes = _layer(blocks.SANDWICH, StackSettings(norm="rmsnorm_offset"))
    pre = {s.name: s for s in blocks.configure(blocks.PRE_NORM, StackSettings(norm="rmsnorm_offset"), preset=True)}
    for step in layer:
        if step.name not in pre or step.inputs != pre[step.name].inputs:
            out.append(StageInfo(step.name, section, msg("{meaning} (block.{field}: {value})", meaning=step.meaning, field="norm_order", value="sandwich"),
                                 formula(step), shapes[step.name][0]))
    layer, shapes = _layer(blocks.PRE_NORM, StackSettings(attention_softcap=50.0))
    attention = next(s for s in layer if s.op == "mha")
    for info in _internals(section, attention, shapes):
        if info.name == "attn.scores":
            out.append(dataclasses.replace(info, meaning=blocks.softcapped_scores(attention),
                                           formula=join([info.formula, msg("then cap * tanh(scores / cap), block.attention_softcap = cap, before the mask")])))
    tail = blocks.head_steps("final_norm", 30.0)
    shapes = _shapes(tail, {"final_norm": (("B", "T", "C"), (SIZES["B"], SIZES["T"], SIZES["C"]))})
    for step in tail[:2]:
        out.append(StageInfo(step.name, after, msg("{meaning} (block.{field}: {value})", meaning=step.meaning, field="head_softcap", value="30"),
                             formula(step), shapes[step.name][0]))
    return out


def _relative_entries(section: str) -> list[StageInfo]:
    """positions: relative (T5): each stack's position bias [H,S,S] / [H,T,T], made once and added to every self-attention."""
    out: list[StageInfo] = []
    for side, stream, pos, mask in (("encoder.", "source", "S", "none"), ("decoder.", "target", "T", "causal")):
        steps, _ = blocks.entry(side, stream, StackSettings(positions="relative", mask=mask), True)
        shapes = _shapes(steps, {}, pos)
        out += _infos(section, [s for s in steps if s.op == "relative_bias"], shapes)
    return out


def _granite_variants(before: str, section: str, after: str) -> list[StageInfo]:
    """Granite's multipliers: the embeddings times m (block.embedding_multiplier), each sublayer's output times m before its
    residual add (block.residual_multiplier: attention_scaled, ffn_scaled) and the logits divided by s (block.logits_divisor)."""
    out: list[StageInfo] = []
    for positions in ("rotary", "learned"):
        steps, _ = blocks.entry("", "tokens", StackSettings(positions=positions, embedding_multiplier=12.0), True)
        out += [dataclasses.replace(i, meaning=msg("{meaning} (block.{field}: {value})", meaning=i.meaning, field="embedding_multiplier", value="12"))
                for i in _infos(before, [s for s in steps if s.op == "scale"], _shapes(steps, {}))]
    layer, shapes = _layer(blocks.PRE_NORM, StackSettings(residual_multiplier=0.22))
    pre = {s.name: s for s in blocks.configure(blocks.PRE_NORM, StackSettings(), preset=True)}
    for step in layer:
        if step.name not in pre or step.inputs != pre[step.name].inputs:
            out.append(StageInfo(step.name, section, msg("{meaning} (block.{field}: {value})", meaning=step.meaning, field="residual_multiplier",
                                                         value="0.22"), formula(step), shapes[step.name][0]))
    tail = blocks.head_steps("final_norm", None, 8.0)
    shapes = _shapes(tail, {"final_norm": (("B", "T", "C"), (SIZES["B"], SIZES["T"], SIZES["C"]))})
    for step in tail[:2]:
        out.append(StageInfo(step.name, after, msg("{meaning} (block.{field}: {value})", meaning=step.meaning, field="logits_divisor", value="8"),
                             formula(step), shapes[step.name][0]))
    return out


def _head_scale_entries(section: str) -> list[StageInfo]:
    """block.head_scale (T5's tied head): decoder.head_scale [B,T,C], the decoder's output times C^-1/2 before the head."""
    step = blocks.head_scale("decoder.", "decoder.final_norm")
    shapes = _shapes([step], {"decoder.final_norm": (("B", "T", "C"), (SIZES["B"], SIZES["T"], SIZES["C"]))})
    return _infos(section, [step], shapes)


def _task_head_entries(section: str) -> list[StageInfo]:
    """The heads after the stack (block.pooler, block.classifier, block.mlm): BERT's pooler, a classifier's scores as BERT,
    RoBERTa, DistilBERT and a decoder pool them, the next-sentence head, and the masked-LM head before the output head."""
    last = "output"
    known: dict[str, Shape] = {last: (("B", "T", "C"), (SIZES["B"], SIZES["T"], SIZES["C"]))}
    pooler = blocks.pooler_steps(last)
    known = _shapes(pooler, known)
    out = _infos(section, pooler, known)
    for task, reads, pad, hidden in (("sequence", "pooled", None, None), ("sequence", "first", None, "tanh"), ("sequence", "last", 0, None),
                                     ("sequence", "last", None, None), ("next_sentence", "pooled", None, None)):
        steps = blocks.classifier_steps(last, task, reads, pad, hidden)
        out += _infos(section, steps, _shapes(steps, known))
    mlm = blocks.mlm_steps(last, "gelu", StackSettings())
    mlm += blocks.head_steps(mlm[-1].name, prefix=blocks.MLM)
    return out + _infos(section, mlm, _shapes(mlm, known))


CATALOGUE: tuple[StageInfo, ...] = tuple(build())


def base_name(name: str) -> str:
    """'blocks.3.norm1' -> 'norm1'; 'decoder.blocks.0.cross.q' -> 'decoder.blocks.N.cross.q'."""
    if name.startswith("decoder.blocks."):
        return re.sub(r"^decoder\.blocks\.\d+\.", "decoder.blocks.N.", name)
    if name.startswith("encoder.blocks."):
        return re.sub(r"^encoder\.blocks\.\d+\.", "", name)
    return re.sub(r"^blocks\.\d+\.", "", name)


def lookup(name: str) -> list[StageInfo]:
    """Every meaning a recorded stage name can have; UsageError (exit 2) with the closest names if none."""
    base = base_name(name)
    wanted = {name, base} | ({"encoder.blocks.N.<stage>"} if name.startswith("encoder.blocks.") else set())
    found = [e for e in CATALOGUE if e.name in wanted]
    if not found:
        raise UsageError(msg("no stage is called {name}{name2} (`tracer stages` lists every name)", name=repr(name), name2=suggest(name, names())))
    return found


def names() -> list[str]:
    return list(dict.fromkeys(e.name for e in CATALOGUE))


def suggest(name: str, known: Iterable[str]) -> Message | str:
    """'; did you mean ...?': names that end in '.NAME' (norm1 -> blocks.0.norm1), else the closest spellings."""
    known = list(known)
    close = [repr(k) for k in known if k.endswith("." + name)][:3] or [repr(c) for c in difflib.get_close_matches(name, known, n=3, cutoff=0.6)]
    if not close:
        return ""
    names = (close[0] if len(close) == 1 else msg("{a} or {b}", a=close[0], b=close[1]) if len(close) == 2
             else msg("{a} or {b} or {c}", a=close[0], b=close[1], c=close[2]))
    return msg("; did you mean {names}?", names=names)


def select(requested: Sequence[str], known: Sequence[str], where: str) -> list[str] | None:
    """``--stage`` names checked against the stages a run records; None when none were asked for.

    An unknown name is a UsageError (exit 2) naming the closest known ones.
    """
    if not requested:
        return None
    for name in requested:
        if name not in known:
            raise UsageError(msg("--stage {name}: no stage of that name in {where}{name2} (`tracer run SPEC --steps` lists a spec's stages, `tracer stages` "
                                 "what each name means)", name=name, where=where, name2=suggest(name, known)))
    return list(dict.fromkeys(requested))

