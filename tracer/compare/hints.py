"""What a first divergence means, for a student diffing their own block (``tracer diff SPEC mine.npz``).

Three parts, each plain data:

- advice by what the stage computes (a message, rendered in the current language at the edge): a
  LayerNorm stage points at the LayerNorm's usual mistakes (divide by C, not C-1; ε inside the square
  root; statistics over C), a residual add at a missing term, attention at the softmax's axis, the
  mask and W_O, the FFN at the stage it reads.  "norm2 differs but residual1 agrees" says the bug sits
  between the two.
- a diagnosis, a tested claim: DIAGNOSES holds one record per classic mistake, worded (its name, the
  stages it shows at, the stage recomputed with the mistake made, the sentence naming it and its fix);
  compare/search.py searches every variant of the stage's op besides (each knob, then pairs).  Every
  recomputation reads the student's own arrays of the stages it needs (tracer's where they did not
  record them, and the sentence says so); a mistake is named when the student's array matches it at a
  tolerance set by their dtype (DIAGNOSIS_TOLERANCE) while the correct computation from the same inputs
  does not, and when nothing else matches too.  A stage that agrees within the diff's tolerance but
  only just, far more off than the stages before it, is searched too: a float32 student's other ε.
- spec_blind_spots: the mistakes a spec's numbers cannot show (d = 1, H = 1, T = 1, zero biases, gamma 1
  and beta 0, and every variant that gives its correct numbers), for tracer diff's notes and tracer check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tracer.compare import search
from tracer.compare.recompute import Context, Tolerance, close, diagnosis_tolerance, distance, recompute
from tracer.engine.executor import Stage
from tracer.messages import Message, join, msg, render
from tracer.model.activations import ACTIVATIONS
from tracer.model.blocks import Step, internal_prefix

if TYPE_CHECKING:
    from tracer.compare.align import Side
    from tracer.compare.judge import DiffResult
    from tracer.spec import Spec


ADVICE: dict[str, Message] = {
    "layer_norm": msg("LayerNorm (divide by C, not C-1; ε inside the square root; mean and variance over the C coordinates of each position, "
                      "not over T or B)"),
    "rms_norm": msg("RMSNorm (the mean of the squares over C, ε inside the square root, no mean subtracted)"),
    "batch_norm": msg("BatchNorm (mean and variance over B and T, per coordinate)"),
    "mha": msg("attention: the softmax over the keys (the last axis), not the queries; the mask before the softmax, not after; "
               "the scores divided by sqrt(d); the heads times W_O. Record attn.weights and attn.heads to see which"),
    "cross_mha": msg("cross-attention: queries from the decoder, keys and values from the encoder output; the softmax over the keys"),
    "scores": msg("the scores: Q_h K_h^T / sqrt(d) for each head, queries as rows, before the mask"),
    "weights": msg("the softmax: over the keys (the last axis), not the queries, with the mask applied before it (each row sums to 1)"),
    "heads": msg("the mixing: the weights times V for each head, the heads concatenated in order, before W_O"),
    "q": msg("the projections: X W_Q + b_Q (likewise K and V), split into H heads of width d"),
    "add": msg("the residual add: both terms, the stream and the sublayer's output"),
    "ffn_out": msg("the FFN's second layer: hidden W_2 + b_2"),
    "input": msg("the input: the rows of E for the token ids, plus the rows of P (X = E + P)"),
    "shape": msg("the array's shape: record it with tracer's axes, in the book's order (see the shape columns)"),
    "other": msg("the step that computes it"),
    "rms_norm_offset": msg("Gemma's RMSNorm (the mean of the squares over C, ε inside the square root, then times 1 + gamma, "
                           "not gamma: the stored weight is the offset from 1)"),
    "embed_scale": msg("the scaled embeddings: the rows of E for the token ids, times sqrt(C)"),
}
ADVICE["k"] = ADVICE["v"] = ADVICE["q"]
for _op in ("embed", "position_table", "sinusoidal", "add_position"):
    ADVICE[_op] = ADVICE["input"]
ADVICE_KINDS = (*ADVICE, "ffn_hidden", "ffn")  # the kinds with advice of their own (advice() words the FFN's by what it reads)


def advice(kind: str, step: Step | None, recorded: set[str]) -> Message:
    """What to look at for a stage of this kind: the FFN's by the stage it reads (norm2 in pre-norm, norm1 in post-norm);
    attention's asks to record its internals only when they are not recorded."""
    if kind in ("ffn_hidden", "ffn"):
        reads = step.inputs[0] if step is not None and step.inputs else "N_2"
        if kind == "ffn":
            return msg("the FFN: act({reads} W_1 + b_1) W_2 + b_2, reading {reads2}", reads=reads, reads2=reads)
        return msg("the FFN's first layer: act({reads} W_1 + b_1), reading {reads2}", reads=reads, reads2=reads)
    if kind == "mha" and step is not None:
        prefix = internal_prefix(step)
        missing = [name for name in (f"{prefix}.weights", f"{prefix}.heads") if name not in recorded]
        if not missing:
            return msg("attention: the softmax over the keys (the last axis), not the queries; the mask before the softmax, not after; "
                       "the scores divided by sqrt(d); the heads times W_O")
        return msg("attention: the softmax over the keys (the last axis), not the queries; the mask before the softmax, not after; "
                   "the scores divided by sqrt(d); the heads times W_O. Record {names} to see which", names=" and ".join(missing))
    return ADVICE.get(kind, ADVICE["other"])



class Hint(NamedTuple):
    stage: str  # the stage the hint is about (the first diverging one, or one before it that agrees only just)
    prev: str | None  # the last stage before it that agrees
    lead: Message  # "norm2 differs but residual1 agrees"
    advice: Message
    diagnosis: Message | None = None  # one sentence: the mistake and its fix
    bug: str | None = None  # the record's name ("no_scale") or the variant's ("scale=1/sqrt(C)"), None when nothing matches
    searched: bool = False  # some diagnosis was tried (then "no known mistake matches" is said)
    same_numbers: tuple[str, ...] = ()  # the other mistakes that give the student's numbers here, by name
    cause: Message | None = None  # a cause that is no mistake (Hugging Face's float32 rounding, compare/hf_float32.py), said in place of the advice

    def message(self) -> Message:
        """The hint as a message (rendered in the current language at the edge)."""
        if self.cause is not None:
            return msg("{lead}: {cause}", lead=self.lead, cause=self.cause)
        if self.diagnosis is None:
            if self.searched:
                return msg("{lead}: no known mistake matches; look at {advice}", lead=self.lead, advice=self.advice)
            return msg("{lead}: look at {advice}", lead=self.lead, advice=self.advice)
        # the tested claim, alone: the stage's general checklist would send the student past the mistake it names
        return msg("{lead}. {diagnosis}", lead=self.lead, diagnosis=self.diagnosis)

    def text(self) -> str:
        """In the current language."""
        return render(self.message())

    def english(self) -> str:
        return render(self.message(), "en")

    def diagnosis_json(self) -> dict[str, object] | None:
        """``{"bug": "no_scale", "stage": "attention", "text": "...", "same_numbers": [...]}`` (English), or None when nothing
        matches; same_numbers names the other mistakes that give the student's numbers here."""
        if self.diagnosis is None or self.bug is None:
            return None
        return {"bug": self.bug, "stage": self.stage, "text": render(self.diagnosis, "en"), "same_numbers": list(self.same_numbers)}


def _kind(name: str, stage: Stage | None, steps: dict[str, Step]) -> str:
    step = steps.get(name)
    if step is not None:
        return step.op if step.op in ADVICE_KINDS else "other"
    last = name.rsplit(".", 1)[-1]
    return last if stage is not None and stage.internal and last in ADVICE_KINDS else "other"


def _attention_of(name: str, steps: tuple[Step, ...]) -> Step | None:
    """The attention step an internal stage (attn.weights) belongs to."""
    prefix = name.rpartition(".")[0]
    return next((s for s in steps if s.op == "mha" and internal_prefix(s) == prefix), None) if prefix else None


NEAR = 0.1  # a stage within the tolerance but at least this share of it ...
JUMP = 30.0  # ... and this many times further off than every stage before it: the mistake may be there


def near_limit(result: DiffResult, ref: Side, mine: Side) -> tuple[str, float, float] | None:
    """(stage, its share of the tolerance, how many times the stages before it) for the first stage before the first
    diverging one whose error jumps close to the tolerance (a float32 student's other ε at norm1), else None."""
    first = result.first_diverging
    if first is None:
        return None
    tol = Tolerance(result.atol, result.rtol)
    before = 1e-3  # rounding: a float32 program's stages sit near a thousandth of float32's tolerance or below
    for row in result.stages[: result.stages.index(first)]:
        ours, theirs = ref.stages.get(row.name), mine.stages.get(row.name)
        if row.max_abs_diff is None or ours is None or theirs is None or ours.array.shape != theirs.array.shape:
            continue
        share = distance(theirs.array, ours.array, tol)
        if share >= NEAR and share >= JUMP * before:
            return row.name, share, share / before
        before = max(before, share)
    return None


def hint_for(result: DiffResult, ref: Side, mine: Side) -> Hint | None:
    """The hint for the first diverging stage of a diff against another program's arrays; None when all agree.
    A stage before it that agrees only just (near_limit) is diagnosed first: a mistake named there is the hint.
    When no mistake is named and every difference is the size of float32's rounding in a float64 import of a family
    whose Hugging Face code keeps steps in float32 (compare/hf_float32.py), that is the hint, with the tolerance that
    fits, in place of the stage's checklist."""
    from tracer.compare.hf_float32 import float32_rounding

    hint = _hint_for(result, ref, mine)
    if hint is None or hint.diagnosis is not None:
        return hint
    rounding = float32_rounding(result, ref, mine)
    if rounding is None:
        return hint
    first = result.first_diverging
    assert first is not None
    lead = msg("{stage} differs but {prev} agrees", stage=first.name, prev=hint.prev) if hint.prev else \
        msg("{stage} differs and no stage before it was compared", stage=first.name)
    return Hint(first.name, hint.prev, lead, hint.advice, cause=rounding.message(mine.label))


def _hint_for(result: DiffResult, ref: Side, mine: Side) -> Hint | None:
    from tracer.compare.status import EQUAL, SHAPES_DIFFER

    first = result.first_diverging
    if first is None:
        return None
    rows = result.stages[: result.stages.index(first)]
    prev = next((r.name for r in reversed(rows) if r.status == EQUAL), None)
    if first.status == SHAPES_DIFFER:
        return Hint(first.name, prev, msg("{stage} has another shape than tracer's", stage=first.name), ADVICE["shape"])
    near = near_limit(result, ref, mine)
    if near is not None:
        name, share, times = near
        found = _diagnosed(name, ref, mine, near=True)
        if found is not None:
            earlier = next((r.name for r in reversed(result.stages[: [r.name for r in result.stages].index(name)]) if r.status == EQUAL), None)
            lead = msg("{stage} agrees within the tolerance, but only just ({share} of it, {times} times the stages before it)", stage=name,
                       share=f"{share:.2g}", times=f"{times:.0f}")
            return Hint(name, earlier, lead, _advice_at(name, ref, mine), found[0], found[1], True, found[2])
    lead = msg("{stage} differs but {prev} agrees", stage=first.name, prev=prev) if prev else \
        msg("{stage} differs and no stage before it was compared", stage=first.name)
    if near is not None:
        lead = msg("{lead}; {near} agrees but only just ({share} of the tolerance, {times} times the stages before it): the mistake may be there",
                   lead=lead, near=near[0], share=f"{near[1]:.2g}", times=f"{near[2]:.0f}")
    words = _advice_at(first.name, ref, mine)
    if mine.stages.get(first.name) is None or ref.stages.get(first.name) is None:
        return Hint(first.name, prev, lead, words)
    found = _diagnosed(first.name, ref, mine)
    if found is None:
        return Hint(first.name, prev, lead, words, searched=True)
    return Hint(first.name, prev, lead, words, found[0], found[1], True, found[2])


def _advice_at(name: str, ref: Side, mine: Side) -> Message:
    steps = {s.name: s for s in ref.steps}
    kind = _kind(name, ref.stages.get(name), steps)
    return advice(kind, steps.get(name) or _attention_of(name, ref.steps), set(mine.stages))


def _diagnosed(name: str, ref: Side, mine: Side, near: bool = False) -> tuple[Message, str, tuple[str, ...]] | None:
    """(the sentence, the bug's name, the other names that give the same numbers) for the stage, or None when no
    mistake, or more than one, matches."""
    theirs = mine.stages.get(name)
    if theirs is None:
        return None
    ctx = Context(name, ref, mine, diagnosis_tolerance(mine.dtype))
    found = diagnose(ctx, theirs.array, near=near)
    if found is None:
        return None
    ctx.borrowed.clear()  # what the finding itself reads, not every variant tried
    ctx.clear()
    first = found.variants[0]
    record = next((d for d in DIAGNOSES if len(first) == 1 and d.bug == first[0].value and first[0].key == "record"), None)
    if record is not None:
        record.recompute(ctx)
    else:
        search.variant_of(ctx, first)
    sentence = say(ctx, found)
    if ctx.borrowed:
        sentence = msg("{diagnosis} (worked out from tracer's {names}: your file does not hold them)", diagnosis=sentence,
                       names=", ".join(ctx.borrowed))
    return sentence, found.bug, tuple(found.names()[1:])


# -- the worded classic mistakes: one record each -----------------------------------------------------------------

class Diagnosis(NamedTuple):
    """One classic mistake: the stages it shows at (ops, or an attention's scores/weights/heads), the stage recomputed
    with the mistake made (one array or several forms of it; None: it cannot apply here), the sentence naming it."""

    bug: str
    kinds: tuple[str, ...]
    recompute: Callable[[Context], np.ndarray | list[np.ndarray | None] | None]
    say: Callable[[Context], Message]


def _forms(d: Diagnosis, ctx: Context) -> list[np.ndarray]:
    got = d.recompute(ctx)
    return [f for f in (got if isinstance(got, list) else [got]) if f is not None]


def diagnose(ctx: Context, theirs: np.ndarray, near: bool = False) -> search.Finding | None:
    """The one mistake the student's array is, a worded record's or a searched variant's (compare/search.py): it
    matches the mistake recomputed from their inputs, and not the correct computation; None when none matches, or
    several that give different numbers do."""
    if ctx.step is None:
        return None
    with np.errstate(all="ignore"):
        extra = [((search.Knob("record", d.bug, msg("{bug}", bug=d.bug), d.bug),), form)
                 for d in DIAGNOSES if ctx.kind in d.kinds for form in _forms(d, ctx)]
        correct = None if ctx.step.op in ("layer_norm", "rms_norm", "mha", "add", "add_position", "ffn_hidden", "ffn_out") else _gemma_correct(ctx)
        return search.search(ctx, theirs, extra=extra, near=near, correct=correct).finding


def say(ctx: Context, found: search.Finding) -> Message:
    """The finding in one sentence: the record's own words, else 'Your {stage} equals {what} computed with ...'."""
    record = next((d for d in DIAGNOSES if d.bug == found.record), None)
    others = [v for v in found.variants if not (len(v) == 1 and v[0].record == found.record)]
    if record is not None:
        sentence = record.say(ctx)
        if others:
            sentence = msg("{diagnosis} (the same numbers here as {others})", diagnosis=sentence,
                           others=join([search.variant_words(v) for v in others], msg(" or ")))
        return sentence
    return msg("Your {stage} equals {what} computed with {mistakes}", stage=ctx.name, what=_WHAT.get(ctx.kind, msg("the stage")),
               mistakes=found.words())


_WHAT = {"layer_norm": msg("LayerNorm"), "rms_norm": msg("RMSNorm"), "mha": msg("attention"), "scores": msg("the attention scores"),
         "weights": msg("the attention weights"), "heads": msg("the attention heads"), "ffn_hidden": msg("the FFN's first layer"),
         "ffn_out": msg("the FFN's second layer"), "add": msg("the residual add"), "add_position": msg("X = E + P")}


def matching(ctx: Context, theirs: np.ndarray) -> list[str]:
    """Every worded record whose check matches (the tests: one mistake, one match)."""
    with np.errstate(all="ignore"):
        correct = recompute(ctx) if ctx.step is not None and ctx.step.op in ("layer_norm", "mha", "add", "ffn_hidden", "ffn_out") \
            else _gemma_correct(ctx)
        hidden = ctx.hidden()
        where = None if hidden is None else np.broadcast_to(~hidden, theirs.shape)
        out = []
        for d in DIAGNOSES:
            if ctx.step is None or ctx.kind not in d.kinds:
                continue
            forms = _forms(d, ctx)
            if any(distance(f, theirs, ctx.tol, where) <= 1.0 and distance(f, correct, ctx.tol, where) > 1.0 for f in forms):
                out.append(d.bug)
        return out


# -- the pieces a record needs beyond compare/recompute.py --------------------------------------------------------

def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, axis: int = -1, ddof: int = 0) -> np.ndarray:
    mu = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True, ddof=ddof)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def _missing_term(ctx: Context) -> Message:
    step = ctx.step
    assert step is not None
    theirs = ctx.theirs.get(ctx.name)
    for i, term in enumerate(step.inputs):
        if close(ctx.inp(term), theirs, ctx.tol):
            return msg("Your {stage} equals {term} alone: the residual add is missing (add {other})", stage=ctx.name, term=term,
                       other=step.inputs[1 - i])
    return msg("Your {stage} equals {term} alone: the residual add is missing (add {other})", stage=ctx.name, term=step.inputs[-1],
               other=step.inputs[0])


def _norm_of(ctx: Context, stage: str) -> Step | None:
    """The LayerNorm step that reads ``stage`` (the stream a Pre-Norm sublayer normalises)."""
    return next((s for s in ctx.steps.values() if s.op in ("layer_norm", "rms_norm") and s.inputs[:1] == (stage,)), None)


def _normed_residual(ctx: Context) -> np.ndarray | None:
    step = ctx.step
    if step is None or step.op != "add" or len(step.inputs) != 2:
        return None
    norm = _norm_of(ctx, step.inputs[0])
    return None if norm is None else recompute(ctx, a=norm.name)


def _normed_words(ctx: Context) -> Message:
    step = ctx.step
    assert step is not None
    stream, sub = step.inputs
    norm = _norm_of(ctx, stream)
    if stream == "x":  # the first residual add: the book's own letters
        return msg("Your {stage} adds the normalised input to the sublayer's output (N + U): the residual adds the stream itself, "
                   "R = X + U, not LN(X) + U", stage=ctx.name)
    return msg("Your {stage} adds the normalised stream to the sublayer's output ({norm} + {sub}): the residual adds the stream itself, "
               "{stream} + {sub2}, not {norm2} + {sub3}", stage=ctx.name, norm=norm.name if norm else "N", sub=sub, stream=stream, sub2=sub,
               norm2=norm.name if norm else "N", sub3=sub)


def _pre_norm(ctx: Context) -> bool:
    if ctx.spec is not None:
        return ctx.spec.block_for(ctx.name).norm_order == "pre"
    return (ctx.block or {}).get("norm_order") == "pre"


def _post_norm(ctx: Context) -> np.ndarray | None:
    """Post-Norm where Pre-Norm was asked: the first LayerNorm is LN(X + MHA(X)), and attention reads X, not N1."""
    step = ctx.step
    if step is None or not _pre_norm(ctx):
        return None
    if step.op == "mha" and ctx.key == "out" and step.inputs:
        norm = ctx.steps.get(step.inputs[0])
        if norm is None or norm.op != "layer_norm" or not norm.inputs or norm.name in ctx.theirs:
            return None  # a norm1 the student recorded, and that agrees, is no Post-Norm's (theirs would be LN(X + U))
        return recompute(ctx, reads=norm.inputs[0])
    if step.op == "layer_norm" and step.inputs:
        sub = next((s for s in ctx.steps.values() if s.op == "mha" and s.inputs[:1] == (ctx.name,)), None)
        if sub is None:
            return None
        found = recompute(ctx.at(sub), reads=step.inputs[0])
        x = ctx.inp(step.inputs[0])
        if found is None or x is None:
            return None
        from tracer.compare.recompute import norm as norm_of_sum

        out = norm_of_sum(ctx, x=x + found)
        return None if out is None else out["out"]
    return None


def _d(ctx: Context) -> object:
    H = int(ctx.dims.get("H", 0) or 0)
    width = ctx.weight("w_q")
    return width.shape[-1] // H if width is not None and H else "d"


def _classic_scale(ctx: Context) -> bool:
    return ctx.step is not None and ctx.step.scale is None


def _neighbour(ctx: Context, diagnosis: str) -> np.ndarray | None:
    """The FFN's first layer with the activation (a gated one's gate) that the record of the spec's activation says
    this worded diagnosis names (its ``diagnoses``: gelu_tanh's gelu is gelu_exact); None where it names none."""
    record = ACTIVATIONS.get(ctx.activation())
    other = next((a for a, named in record.diagnoses if named == diagnosis), None) if record is not None else None
    if record is None or other is None:
        return None
    return recompute(ctx, gate=other) if record.gate is not None else recompute(ctx, activation=other)


ATTN = ("mha", "scores", "weights", "heads")
DIAGNOSES: tuple[Diagnosis, ...] = (
    Diagnosis("ddof", ("layer_norm",), lambda c: recompute(c, ddof=1),
              lambda c: msg("Your {stage} equals LayerNorm with the variance divided by C-1 (ddof=1): divide by C", stage=c.name)),
    Diagnosis("ln_over_t", ("layer_norm",), lambda c: recompute(c, axis="T"),
              lambda c: msg("Your {stage} equals LayerNorm with its mean and variance taken over {axis} instead of over C", stage=c.name,
                            axis=msg("T (the positions)"))),
    Diagnosis("ln_over_b", ("layer_norm",), lambda c: recompute(c, axis="B"),
              lambda c: msg("Your {stage} equals LayerNorm with its mean and variance taken over {axis} instead of over C", stage=c.name,
                            axis=msg("B (the samples)"))),
    Diagnosis("no_eps", ("layer_norm",), lambda c: recompute(c, eps=0.0),
              lambda c: msg("Your {stage} equals LayerNorm without ε: add ε to the variance inside the square root, sqrt(var + ε)", stage=c.name)),
    Diagnosis("gamma_beta_swapped", ("layer_norm",), lambda c: recompute(c, gamma="swapped"),
              lambda c: msg("Your {stage} equals LayerNorm with gamma and beta swapped: multiply by gamma, then add beta", stage=c.name)),
    Diagnosis("post_norm", ("layer_norm", "mha"), _post_norm,
              lambda c: msg("Your {stage} is what a Post-Norm block computes (LN(X + MHA(X))): this spec asks for Pre-Norm, "
                            "N1 = LN1(X), R = X + MHA(N1), normalise before each sublayer, not after the add", stage=c.name)),
    Diagnosis("no_residual", ("add",), lambda c: [recompute(c, a="none"), recompute(c, b="none")], lambda c: _missing_term(c)),
    Diagnosis("residual_from_norm", ("add",), _normed_residual, lambda c: _normed_words(c)),
    Diagnosis("no_w_o", ("mha",), lambda c: recompute(c, w_o="off"),
              lambda c: msg("Your {stage} equals the heads before W_O: multiply by W_O (and add b_O)", stage=c.name)),
    Diagnosis("softmax_queries", ("mha", "weights", "heads"), lambda c: recompute(c, softmax_over="queries"),
              lambda c: msg("Your {stage} equals attention with the softmax taken over the queries: take it over the keys (the last axis)", stage=c.name)),
    Diagnosis("mask_after", ("mha", "weights", "heads"), lambda c: recompute(c, mode="after"),
              lambda c: msg("Your {stage} equals attention with the mask applied after the softmax: mask the scores first (-inf on future "
                            "keys), then the softmax", stage=c.name)),
    Diagnosis("no_scale", ATTN, lambda c: recompute(c, scale="1") if _classic_scale(c) else None,
              lambda c: msg("Your {stage} equals attention without the 1/sqrt(d) scale: divide the scores Q K^T by sqrt(d) = sqrt({d})", stage=c.name,
                            d=_d(c))),
    Diagnosis("split_without_transpose", ATTN, lambda c: recompute(c, split="reshape"),
              lambda c: msg("Your {stage} equals attention with the heads split by a reshape without the transpose: reshape [T,C] to [T,H,d], "
                            "then swap T and H (and back before W_O)", stage=c.name)),
    Diagnosis("heads_reversed", ("mha", "heads"), lambda c: recompute(c, order="reversed"),
              lambda c: msg("Your {stage} equals attention with the heads concatenated in the wrong order: head 0 first, then head 1, ..., "
                            "before W_O", stage=c.name)),
    Diagnosis("mask_off_by_one", ("mha", "weights", "heads"),
              lambda c: [recompute(c, mask="diagonal"), recompute(c, mask="diagonal_1e9")] if c.step is not None and c.step.mask == "causal" else None,
              lambda c: msg("Your {stage} equals attention with the causal mask off by one: the diagonal is masked too (row 0 then has no key: "
                            "NaN with -inf, uniform with -1e9); mask only the keys after the query, np.triu(..., k=1)", stage=c.name)),
    Diagnosis("gelu_exact", ("ffn_hidden",), lambda c: _neighbour(c, "gelu_exact"),
              lambda c: msg("Your {stage} uses the exact GELU (erf) where the spec asks for the tanh approximation: "
                            "0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))", stage=c.name)),
    Diagnosis("gelu_tanh", ("ffn_hidden",), lambda c: _neighbour(c, "gelu_tanh"),
              lambda c: msg("Your {stage} uses GELU's tanh approximation where the spec asks for the exact GELU: x Φ(x) = 0.5 x (1 + erf(x/√2))",
                            stage=c.name)),
    Diagnosis("ffn_no_bias", ("ffn_hidden", "ffn_out"), lambda c: recompute(c, b1="off") if c.kind == "ffn_hidden" else recompute(c, b2="off"),
              lambda c: msg("Your {stage} leaves the FFN's bias out: add {bias}", stage=c.name, bias="b_1" if c.kind == "ffn_hidden" else "b_2")),
)


# -- Gemma's ways to get it wrong -------------------------------------------------------------------------------
# A port of Hugging Face's Gemma that scales by the stored weight w instead of 1 + w, forgets the sqrt(C) of the
# embeddings, or gates its FFN with the exact GELU or with SiLU: each recomputed from the student's inputs.

def _rms_offset(ctx: Context, offset: float = 1.0) -> np.ndarray | None:
    step = ctx.step
    if step is None or step.op != "rms_norm_offset" or not step.inputs:
        return None
    x, gamma = ctx.inp(step.inputs[0]), ctx.weight("gamma")
    if x is None or gamma is None:
        return None
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + ctx.eps) * (offset + gamma)


def _embed(ctx: Context, scale: bool = True) -> np.ndarray | None:
    step = ctx.step
    if step is None or step.op != "embed_scale" or not step.inputs:
        return None
    e = ctx.inp(step.inputs[0])
    return None if e is None else (e * math.sqrt(e.shape[-1]) if scale else e)


def _gemma_correct(ctx: Context) -> np.ndarray | None:
    step = ctx.step
    if step is None:
        return None
    if step.op == "rms_norm_offset":
        return _rms_offset(ctx)
    if step.op == "embed_scale":
        return _embed(ctx)
    return recompute(ctx)


DIAGNOSES += (
    Diagnosis("norm_without_offset", ("rms_norm_offset",), lambda c: _rms_offset(c, offset=0.0),
              lambda c: msg("Your {stage} scales by gamma where Gemma's RMSNorm scales by (1 + gamma): the stored weight is the offset from 1, "
                            "x / sqrt(mean(x^2) + eps) * (1 + w)", stage=c.name)),
    Diagnosis("no_embedding_scale", ("embed_scale",), lambda c: _embed(c, scale=False),
              lambda c: msg("Your {stage} is the embeddings unscaled: Gemma multiplies them by sqrt(C) = sqrt({C})", stage=c.name,
                            C=c.dims.get("C", "C"))),
    Diagnosis("geglu_exact", ("ffn_hidden",), lambda c: _neighbour(c, "geglu_exact"),
              lambda c: msg("Your {stage} gates with the exact GELU (erf) where GeGLU uses GELU's tanh approximation (Hugging Face's "
                            "gelu_pytorch_tanh, which Gemma's hidden_act means, even when it says gelu)", stage=c.name)),
    Diagnosis("geglu_silu", ("ffn_hidden",), lambda c: _neighbour(c, "geglu_silu"),
              lambda c: msg("Your {stage} gates with SiLU (SwiGLU) where the spec asks for GeGLU: the gate is GELU's tanh approximation, "
                            "gelu_tanh(N W_1 + b_1) * (N W_3 + b_3)", stage=c.name)),
)


# -- what a spec cannot show -------------------------------------------------------------------------------------

SHOWS_ALL = "specs/variants/diagnose.yaml"  # a block in which every classic mistake changes a stage
ROLES = ("q_from", "k_from", "v_from")


def spec_blind_spots(spec: Spec, params: Mapping[str, np.ndarray], stages: Mapping[str, Stage] | None = None) -> list[Message]:
    """The mistakes this spec's numbers cannot reveal, each named by the property that hides it (d = 1, H = 1, T = 1,
    zero biases, gamma 1 and beta 0), then, from the run's ``stages``, every other variant of its ops that gives
    its correct numbers (compare/search.py: W_O transposed where W_O is symmetric), and a spec that can show them
    all (one note; none when the spec shows them all).  tracer diff says it; tracer check too."""
    found: list[Message] = []
    holds: set[str] = set()
    attn = [s for s in spec.steps if s.op == "mha"]
    dims = spec.dims
    if attn and dims.H and dims.d == 1:
        found.append(msg("d = 1 (a missing 1/sqrt(d) changes nothing)"))
        holds.add("d1")
    if attn and dims.H == 1:
        found.append(msg("H = 1 (heads split without the transpose or concatenated out of order change nothing)"))
        holds.add("h1")
    if dims.T == 1:
        found.append(msg("T = 1 (the mask, its place and the softmax's axis change nothing)"))
        holds.add("t1")
    biases = [a for k, a in params.items() if k.rsplit(".", 1)[-1] in ("b_q", "b_k", "b_v", "b_o", "b1", "b2")]
    if biases and not any(np.any(a != 0) for a in biases):
        found.append(msg("every bias is zero (a bias left out changes nothing)"))
        holds.add("bias0")
    gammas = [a for k, a in params.items() if k.endswith(".gamma")]
    betas = [a for k, a in params.items() if k.endswith(".beta")]
    if gammas and all(np.all(g == 1) for g in gammas) and all(np.all(b == 0) for b in betas):
        found.append(msg("gamma = 1 and beta = 0 (a LayerNorm that leaves gamma or beta out changes nothing)"))
        holds.add("gamma1")
    if stages is not None:
        more = [k for k in search.blind_spots(_contexts(spec, params, stages)) or [] if k.hidden_by not in holds]
        roles = [k for k in more if k.key in ROLES and str(k.value).startswith("w_")]
        words = [k.words for k in more if k not in roles]
        if len(roles) == 6:  # W_Q = W_K = W_V
            words.insert(0, msg("the queries, keys or values made with another of W_Q, W_K and W_V (they are equal here)"))
        else:
            words[:0] = [k.words for k in roles]
        if words:
            found.append(msg("these mistakes give its numbers unchanged: {mistakes}", mistakes=join(words, ", ")))
    if not found:
        return []
    return [msg("this spec cannot show every classic mistake: {props}; {spec} can", props=join(found), spec=SHOWS_ALL)]


def _contexts(spec: Spec, params: Mapping[str, np.ndarray], stages: Mapping[str, Stage]) -> Iterator[Context]:
    from tracer.compare.recompute import EXACT, Run
    from tracer.views.trace_json import block_json

    run = Run(dict(stages), dict(params), spec, block_json(spec.block), spec.dims.as_dict(), spec.steps)
    for step in spec.steps:
        if step.op in search.KNOBS and step.name in stages:
            yield Context(step.name, run, run, EXACT)
