"""tracer diff in words: what differs between the two step lists, one sentence each (section 17.6: pre-norm attention
reads norm1(x), post-norm reads x; hidden = ReLU(...) in A, GELU(...) in B), and each block's design choices
(post-norm, rotary positions, SwiGLU, ...) where the structures differ."""

from __future__ import annotations

from typing import Any

from tracer.compare.align import Side, StepRow, setting_text, step_rows
from tracer.compare.status import EQUAL
from tracer.messages import Message, join, msg
from tracer.model.activations import ACTIVATIONS
from tracer.model.blocks import Step

SUBLAYERS = ("mha", "ffn_hidden")  # the ops a norm feeds in pre-norm order


def _reads(name: str, steps: dict[str, Step]) -> str:
    """What a sublayer reads: a norm is shown with its own input, norm1(x)."""
    s = steps.get(name)
    return f"{name}({s.inputs[0]})" if s is not None and s.op == "layer_norm" and s.inputs else name


def _stream_norms(steps: dict[str, Step]) -> list[Step]:
    """Norms that normalise a residual add and carry the stream on (post-norm order)."""
    readers: dict[str, list[Step]] = {}
    for s in steps.values():
        for i in s.inputs:
            readers.setdefault(i, []).append(s)
    out = []
    for s in steps.values():
        if s.op != "layer_norm" or not s.inputs:
            continue
        source = steps.get(s.inputs[0])
        feeds_stream = any(r.op not in SUBLAYERS for r in readers.get(s.name, []))
        if source is not None and source.op == "add" and feeds_stream:
            out.append(s)
    return out


def _sublayer_norms(steps: dict[str, Step]) -> list[tuple[Step, str]]:
    """Norms read only by sublayers (pre-norm order): (norm, the sublayer that reads it)."""
    out = []
    for s in steps.values():
        if s.op != "layer_norm":
            continue
        readers = [r for r in steps.values() if s.name in r.inputs]
        if readers and all(r.op in SUBLAYERS for r in readers):
            out.append((s, readers[0].name))
    return out


def _changes(r: StepRow) -> Message:
    """'activation: relu | gelu; mask: causal | none': each setting of a step that differs, named."""
    sa, sb = r.settings_a or {}, r.settings_b or {}
    return join([msg("{field}: {a} | {b}", field=k, a=setting_text(sa.get(k, "—")), b=setting_text(sb.get(k, "—"))) for k in r.changed])


def structure_lines(a_steps: tuple[Step, ...], b_steps: tuple[Step, ...], settings_a: dict[str, dict[str, Any]] | None = None,
                    settings_b: dict[str, dict[str, Any]] | None = None) -> list[Message]:
    """What differs between the two step lists, one sentence each; empty when they are the same."""
    A = {s.name: s for s in a_steps}
    B = {s.name: s for s in b_steps}
    rows = step_rows(a_steps, b_steps, settings_a, settings_b)
    lines: list[Message] = []
    told: set[str] = set()
    for r in rows:  # what each sublayer reads
        a, b = r.a, r.b
        if a is not None and b is not None and a.op == b.op and a.op in SUBLAYERS and a.inputs != b.inputs and a.inputs and b.inputs:
            lines.append(msg("{name} reads {a} in A, {b} in B", name=r.name, a=_reads(a.inputs[0], A), b=_reads(b.inputs[0], B)))
            told.add(r.name)
    stream = {"A": _stream_norms(A), "B": _stream_norms(B)}
    if [s.name for s in stream["A"]] != [s.name for s in stream["B"]]:  # where each side normalises
        for label, steps in (("A", A), ("B", B)):
            norms = stream[label]
            adds = [s for s in steps.values() if s.op == "add"]
            told.update(s.name for s in norms)
            if norms:
                listed = ", ".join(f"{s.name}({s.inputs[0]})" for s in norms)
                lines.append(msg("{label} normalises after each residual add: {norms}", label=label, norms=listed) if len(norms) == len(adds)
                             else msg("{label} normalises after a residual add: {norms}", label=label, norms=listed))
            else:
                fed = _sublayer_norms(steps)
                told.update(s.name for s, _ in fed)
                where = join([msg("{norm} feeds {reader}", norm=f"{s.name}({s.inputs[0]})", reader=reader) for s, reader in fed], ", ")
                never = msg("the residual stream is never normalised: {where}", where=where) if fed else msg("the residual stream is never normalised")
                lines.append(join([msg("{label} normalises only what the sublayers read", label=label), never]))
    for r in rows:  # every other step computed differently
        a, b = r.a, r.b
        if b is None and a is not None:
            lines.append(msg("{name} = {expr} only in A", name=r.name, expr=r.expr_a()))
        elif a is None and b is not None:
            lines.append(msg("{name} = {expr} only in B", name=r.name, expr=r.expr_b()))
        elif a is not None and b is not None and r.status != EQUAL and r.name in told and r.changed:
            lines.append(msg("{name}: {what}", name=r.name, what=_changes(r)))  # what it reads is said above; its settings too
        elif a is not None and b is not None and r.status != EQUAL and r.name not in told:
            if a.weights != b.weights:
                lines.append(msg("{name} = {a} in A, {b} in B (weights {wa} in A, {wb} in B)", name=r.name, a=r.expr_a(), b=r.expr_b(), wa=a.weights,
                                 wb=b.weights))
            elif r.changed and a.op == b.op:
                lines.append(msg("{name} = {a} in A, {b} in B ({what})", name=r.name, a=r.expr_a(), b=r.expr_b(), what=_changes(r)))
            else:
                lines.append(msg("{name} = {a} in A, {b} in B", name=r.name, a=r.expr_a(), b=r.expr_b()))
    common_a = [n for n in A if n in B]
    common_b = [n for n in B if n in A]
    if common_a != common_b:
        lines.append(msg("step order differs: A {a}; B {b}", a=", ".join(A), b=", ".join(B)))
    return lines


_DESIGN_WORDS: dict[tuple[str, Any], Message] = {  # a block setting's value that is a design choice -> its words
    ("block.norm_order", "post"): msg("post-norm"),
    ("block.norm_order", "parallel"): msg("parallel residual"),
    ("block.norm_order", "parallel_shared"): msg("parallel residual, one norm"),
    ("block.norm_order", "sandwich"): msg("sandwich norms (each sublayer's output normalised before its residual add)"),
    ("block.norm_order", "post_sublayer"): msg("post-sublayer norms (only each sublayer's output normalised, before its residual add)"),
    ("block.qk_projection", True): msg("q and k normalised over their whole projections"),
    ("block.mask", "none"): msg("bidirectional"),
    ("block.positions", "rotary"): msg("rotary positions"),
    ("block.positions", "sinusoidal"): msg("sinusoidal positions"),
    ("block.positions", "none"): msg("no positions"),
    ("block.norm", "rmsnorm"): msg("RMSNorm"),
    ("block.norm", "batchnorm"): msg("BatchNorm"),
    ("block.token_types", True): msg("token types"),
    ("block.embedding_norm", True): msg("a norm on the embeddings"),
    ("block.head_bias", True): msg("a biased head"),
}


def design_words(steps: tuple[Step, ...], settings: dict[str, Any] | None = None) -> list[Message]:
    """The block's design choices, in words (the chapter's block has none of them): from the derived settings (norm
    order, mask, positions, norm, activation, token types, grouped heads, experts, partial rotary, rope scaling, a
    sliding window); a spec of its own steps (or a side without settings) from its step list: a parallel residual (an
    add of an attention output and an FFN output) and a partial rotary width."""
    settings = settings or {}
    words: list[Message] = [w for key, value in settings.items() if (w := _design_word(key, value)) is not None]
    mask = settings.get("block.mask")
    if isinstance(mask, str) and "window" in mask:
        words.append(msg("sliding window ({mask})", mask=mask))
    if settings.get("dims.H_kv") is not None and settings.get("dims.H_kv") != settings.get("dims.H"):
        words.append(msg("grouped-query attention (H_kv = {n})", n=settings["dims.H_kv"]))
    if settings.get("block.experts") is not None:
        words.append(msg("a mixture of {E} experts, top {k}", E=settings["block.experts"], k=settings.get("block.top_k")))
    if settings.get("block.position_offset"):
        words.append(msg("positions from row {o}", o=settings["block.position_offset"]))
    scaling = settings.get("block.rope_scaling")
    if scaling:
        words.append(msg("rope scaling {kind}", kind=str(scaling[0] if isinstance(scaling, (list, tuple)) else scaling)))
    by_name = {s.name: s for s in steps}
    if not any(settings.get("block.norm_order") == order for order in ("parallel", "parallel_shared")):
        for s in steps:
            ops = sorted(by_name[i].op for i in s.inputs if i in by_name)
            if s.op == "add" and len(ops) == 2 and ops[0] in ("ffn", "ffn_out") and ops[1] in ("cross_mha", "mha"):
                words.append(msg("parallel residual"))
                break
    widths = sorted({s.rotary_dim for s in steps if s.op == "mha" and s.base is not None and s.rotary_dim is not None})
    if widths:
        words.append(msg("partial rotary ({n} coordinates of each head turned)", n=", ".join(map(str, widths))))
    return words + scaled_words(steps) + attention_scale_words(steps) + capped_words(steps, settings)


def _design_word(key: str, value: Any) -> Message | None:
    """A block setting's words as a design choice: _DESIGN_WORDS', or, for block.activation, its record's."""
    if key == "block.activation" and isinstance(value, str):
        record = ACTIVATIONS.get(value)
        return record.design if record is not None and record.design_from == "settings" else None
    return _DESIGN_WORDS.get((key, value)) if isinstance(value, (str, bool)) else None


def attention_scale_words(steps: tuple[Step, ...]) -> list[Message]:
    """block.attention_scale in words: 'attention scale 1 (not 1/sqrt(d))' (T5), one phrase per scale the steps use."""
    scales = sorted({s.scale for s in steps if s.op in ("mha", "cross_mha") and s.scale is not None})
    return [msg("attention scale {s} (not 1/sqrt(d))", s=f"{s:g}") for s in scales]


def scaled_words(steps: tuple[Step, ...]) -> list[Message]:
    """Gemma's choices in words: embeddings scaled by sqrt(C), an RMSNorm scaled by (1 + gamma), a GeGLU FFN."""
    words: list[Message] = []
    if any(s.op == "embed_scale" for s in steps):
        words.append(msg("embeddings times sqrt(C)"))
    if any(s.op == "rms_norm_offset" for s in steps):
        words.append(msg("RMSNorm with (1 + gamma)"))
    branch = ("attention_scaled", "ffn_scaled")  # blocks.N.attention_scaled: a sublayer output scaled (the others: the embeddings)
    embedding = sorted({s.scale for s in steps if s.op == "scale" and s.scale is not None and s.name.rsplit(".", 1)[-1] not in branch + ("logits",)})
    if embedding:  # Granite's embedding_multiplier
        words.append(msg("embeddings times {m}", m=", ".join(f"{m:g}" for m in embedding)))
    residual = sorted({s.scale for s in steps if s.op == "scale" and s.scale is not None and s.name.rsplit(".", 1)[-1] in branch})
    if residual:  # Granite's residual_multiplier
        words.append(msg("sublayer outputs times {m} before the residual add", m=", ".join(f"{m:g}" for m in residual)))
    divisors = sorted({s.scale for s in steps if s.op == "divide" and s.scale is not None})
    if divisors:  # Granite's logits_scaling
        words.append(msg("logits divided by {s}", s=", ".join(f"{d:g}" for d in divisors)))
    for name in dict.fromkeys(s.activation for s in steps if s.op in ("ffn", "ffn_hidden") and s.activation in ACTIVATIONS):
        record = ACTIVATIONS[name]  # GeGLU: named with Gemma's other choices
        if record.design is not None and record.design_from == "steps":
            words.append(record.design)
    return words


def capped_words(steps: tuple[Step, ...], settings: dict[str, Any]) -> list[Message]:
    """Gemma 2's choices in words: soft-capped scores and logits, a window on some layers only; sandwich
    norms from the step list when the settings do not say it (a spec of its own steps)."""
    words: list[Message] = []
    normed = any(s.name.endswith("attention_norm") and s.inputs and s.inputs[0].endswith("attention") for s in steps)
    if settings.get("block.norm_order") not in ("sandwich", "post_sublayer") and normed:
        words.append(msg("sandwich norms (each sublayer's output normalised before its residual add)"))
    caps = sorted({s.softcap for s in steps if s.op in ("mha", "cross_mha") and s.softcap is not None})
    if caps:
        words.append(msg("scores soft-capped (cap {cap})", cap=", ".join(f"{c:g}" for c in caps)))
    logits = sorted({s.softcap for s in steps if s.op == "softcap" and s.softcap is not None})
    if logits:
        words.append(msg("logits soft-capped (cap {cap})", cap=", ".join(f"{c:g}" for c in logits)))
    scales = sorted({s.scale for s in steps if s.op == "scale" and s.name.rsplit(".", 1)[-1] == "logits" and s.scale is not None})  # Cohere's
    if scales:
        words.append(msg("logits scaled (s = {scale})", scale=", ".join(f"{c:g}" for c in scales)))
    sliding = settings.get("block.sliding_layers")
    if sliding:
        words.append(msg("the window on layers {layers} only", layers=", ".join(map(str, sliding))))
    turned = settings.get("block.rotary_layers")
    if turned is not None:  # SmolLM3's no_rope_layers: the other layers' attention has no positions
        words.append(msg("rotary positions on layers {layers} only", layers=", ".join(map(str, turned)) or "none"))
    return words


def with_design(lines: list[Message], a: Side, b: Side) -> list[Message]:
    """The structure's sentences, the design in words first when the structures differ (GPT-2 against Pythia: 'parallel
    residual'); two blocks of one design that differ in a setting say so in the settings table instead."""
    line = design_line(a, b) if lines else None
    return [line, *lines] if line is not None else lines


def design_line(a: Side, b: Side) -> Message | None:
    """'the design: A GELU (tanh); B post-norm, bidirectional, token types, ...': the choices one side makes and the other
    does not (None when both make the same ones)."""
    words_a, words_b = design_words(a.steps, a.settings), design_words(b.steps, b.settings)
    only_a = [w for w in words_a if w not in words_b]
    only_b = [w for w in words_b if w not in words_a]
    if not only_a and not only_b:
        return None
    if not only_a:
        return msg("the design: only B has {b}", b=join(only_b, ", "))
    if not only_b:
        return msg("the design: only A has {a}", a=join(only_a, ", "))
    return msg("the design: A {a}; B {b}", a=join(only_a, ", "), b=join(only_b, ", "))
