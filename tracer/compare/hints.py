"""What a first divergence means, for a student diffing their own block (``tracer diff SPEC mine.npz``).

Three parts, each plain data:

- advice by what the stage computes (English; rendered in the current language at the edge): a
  LayerNorm stage points at the LayerNorm's usual mistakes (divide by C, not C-1; ε inside the square
  root; statistics over C), a residual add at a missing term, attention at the softmax's axis, the
  mask and W_O.  "norm2 differs but residual1 agrees" says the bug sits between the two.
- a diagnosis, a tested claim: DIAGNOSES holds one record per classic mistake (its name, the stages it
  shows at, the stage recomputed with the mistake made, the sentence naming it and its fix).  The
  recomputation reads the student's own arrays of the stages it needs (tracer's where they did not
  record them, and the sentence says so); a mistake is named when the student's array matches it at a
  tolerance set by their dtype (DIAGNOSIS_TOLERANCE, far below the smallest effect of a mistake) while
  the correct computation from the same inputs does not, and when no other mistake matches too.
- spec_blind_spots: the classic mistakes a spec's numbers cannot show (d = 1, H = 1, T = 1, zero
  biases, gamma 1 and beta 0), for tracer diff's notes and tracer check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tracer.engine.executor import Stage
from tracer.i18n import tr
from tracer.messages import Message, join, msg, render
from tracer.model.blocks import Step

if TYPE_CHECKING:
    from tracer.compare.core import DiffResult, Side
    from tracer.spec import Spec

LN = ("LayerNorm (divide by C, not C-1; ε inside the square root; mean and variance over the C coordinates of each position, "
      "not over T or B)")
ADVICE = {
    "layer_norm": LN,
    "rms_norm": "RMSNorm (the mean of the squares over C, ε inside the square root, no mean subtracted)",
    "batch_norm": "BatchNorm (mean and variance over B and T, per coordinate)",
    "mha": "attention: the softmax over the keys (the last axis), not the queries; the mask before the softmax, not after; "
           "the scores divided by sqrt(d); the heads times W_O. Record attn.weights and attn.heads to see which",
    "cross_mha": "cross-attention: queries from the decoder, keys and values from the encoder output; the softmax over the keys",
    "scores": "the scores: Q_h K_h^T / sqrt(d) for each head, queries as rows, before the mask",
    "weights": "the softmax: over the keys (the last axis), not the queries, with the mask applied before it (each row sums to 1)",
    "heads": "the mixing: the weights times V for each head, the heads concatenated in order, before W_O",
    "q": "the projections: X W_Q + b_Q (likewise K and V), split into H heads of width d",
    "add": "the residual add: both terms, the stream and the sublayer's output",
    "ffn_hidden": "the FFN's first layer: act(N_2 W_1 + b_1), reading the second normalisation",
    "ffn_out": "the FFN's second layer: hidden W_2 + b_2",
    "ffn": "the FFN: act(N_2 W_1 + b_1) W_2 + b_2, reading the second normalisation",
    "input": "the input: the rows of E for the token ids, plus the rows of P (X = E + P)",
    "shape": "the array's shape: record it with tracer's axes, in the book's order (see the shape columns)",
    "other": "the step that computes it",
}
ADVICE["k"] = ADVICE["v"] = ADVICE["q"]
for _op in ("embed", "position_table", "sinusoidal", "add_position"):
    ADVICE[_op] = ADVICE["input"]

LEAD_AGREES = "{stage} differs but {prev} agrees"
LEAD_FIRST = "{stage} differs and no stage before it was compared"
LEAD_SHAPE = "{stage} has another shape than tracer's"


class Hint(NamedTuple):
    stage: str
    prev: str | None  # the last stage before it that agrees
    lead: str
    advice: str
    diagnosis: Message | None = None  # one sentence: the mistake and its fix
    bug: str | None = None  # the Diagnosis record's name ("no_scale"), None when no known mistake matches
    searched: bool = False  # some diagnosis was tried (then "no known mistake matches" is said)

    def text(self) -> str:
        """In the current language."""
        lead = tr(self.lead, stage=self.stage, prev=self.prev or "")
        if self.diagnosis is None:
            if self.searched:
                return tr("{lead}: no known mistake matches; look at {advice}", lead=lead, advice=tr(self.advice))
            return tr("{lead}: look at {advice}", lead=lead, advice=tr(self.advice))
        # the tested claim, alone: the stage's general checklist would send the student past the mistake it names
        return tr("{lead}. {diagnosis}", lead=lead, diagnosis=render(self.diagnosis))

    def english(self) -> str:
        from tracer.i18n import using

        with using("en"):
            return self.text()

    def diagnosis_json(self) -> dict[str, str] | None:
        """``{"bug": "no_scale", "text": "..."}`` (English), or None when no known mistake matches."""
        if self.diagnosis is None or self.bug is None:
            return None
        return {"bug": self.bug, "text": render(self.diagnosis, "en")}


def _kind(name: str, stage: Stage | None, steps: dict[str, Step]) -> str:
    step = steps.get(name)
    if step is not None:
        return step.op if step.op in ADVICE else "other"
    last = name.rsplit(".", 1)[-1]
    return last if stage is not None and stage.internal and last in ADVICE else "other"


def hint_for(result: DiffResult, ref: Side, mine: Side) -> Hint | None:
    """The hint for the first diverging stage of a diff against another program's arrays; None when all agree."""
    from tracer.compare.status import EQUAL, SHAPES_DIFFER

    first = result.first_diverging
    if first is None:
        return None
    rows = result.stages[: result.stages.index(first)]
    prev = next((r.name for r in reversed(rows) if r.status == EQUAL), None)
    ours = ref.stages.get(first.name)
    theirs = mine.stages.get(first.name)
    steps = {s.name: s for s in ref.steps}
    if first.status == SHAPES_DIFFER:
        return Hint(first.name, prev, LEAD_SHAPE, ADVICE["shape"])
    kind = _kind(first.name, ours, steps)
    lead = LEAD_AGREES if prev else LEAD_FIRST
    if theirs is None or ours is None:
        return Hint(first.name, prev, lead, ADVICE[kind])
    ctx = Context(first.name, ref, mine, diagnosis_tolerance(mine.dtype))
    found = diagnose(ctx, theirs.array)
    if found is None:
        return Hint(first.name, prev, lead, ADVICE[kind], searched=True)
    sentence = found.say(ctx)
    if ctx.borrowed:
        sentence = msg("{diagnosis} (worked out from tracer's {names}: your file does not hold them)", diagnosis=sentence,
                       names=", ".join(ctx.borrowed))
    return Hint(first.name, prev, lead, ADVICE[kind], sentence, found.bug, True)


# -- diagnoses: a classic mistake recomputed from the student's own inputs, matched against their array ---------

class Tolerance(NamedTuple):
    atol: float
    rtol: float


# The student's array must equal the mistake recomputed from their own inputs to within rounding, and must not equal
# the correct computation from the same inputs: far below the smallest effect of a classic mistake (ddof=1 changes a
# LayerNorm by 1/(2C): 6e-5 at C = 8192), far above the rounding of a float64 (1e-13) or a float32 (1e-6) program.
DIAGNOSIS_TOLERANCE = {"float64": Tolerance(1e-10, 1e-8), "float32": Tolerance(1e-6, 1e-5), "float16": Tolerance(1e-3, 1e-2)}


def diagnosis_tolerance(dtype: str | None) -> Tolerance:
    return DIAGNOSIS_TOLERANCE.get(dtype or "float64", DIAGNOSIS_TOLERANCE["float64"])


def _close(a: np.ndarray | None, b: np.ndarray | None, tol: Tolerance) -> bool:
    if a is None or b is None or a.shape != b.shape:
        return False
    with np.errstate(all="ignore"):
        return bool(np.allclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=True))


class Context:
    """What a diagnosis reads: the stage, its step, tracer's stages and weights, and the student's own arrays
    (an input the student did not record is tracer's, and ``borrowed`` names it)."""

    def __init__(self, name: str, ref: Side, mine: Side, tol: Tolerance) -> None:
        self.name = name
        self.tol = tol
        self.ours = {n: s.array for n, s in ref.stages.items() if s.data is not None}
        self.theirs = {n: s.array for n, s in mine.stages.items() if s.data is not None}
        self.params = ref.weights or {}
        self.spec = ref.spec
        self.steps = {s.name: s for s in ref.steps}
        self.step = self.steps.get(name)
        self.key = "out"  # which array of an attention: scores, weights, heads, or its output
        if self.step is None and "." in name:
            prefix, _, self.key = name.rpartition(".")
            self.step = next((s for s in ref.steps if s.op == "mha" and _prefix(s) == prefix), None)
        self.borrowed: list[str] = []
        self._cache: dict[tuple[object, ...], dict[str, np.ndarray] | None] = {}

    @property
    def kind(self) -> str:
        """The step's op, or for an attention internal its key (scores, weights, heads)."""
        if self.step is None:
            return ""
        return self.step.op if self.key == "out" else self.key

    def inp(self, stage: str) -> np.ndarray | None:
        """The student's array for ``stage`` when they recorded it (in tracer's shape), else tracer's (noted)."""
        ours = self.ours.get(stage)
        theirs = self.theirs.get(stage)
        if theirs is not None and ours is not None and theirs.shape == ours.shape:
            return theirs
        if ours is not None and stage not in self.borrowed:
            self.borrowed.append(stage)
        return ours

    def weight(self, name: str) -> np.ndarray | None:
        return self.params.get(f"{self.step.weights}.{name}") if self.step is not None and self.step.weights else None

    def attention(self, **bug: Any) -> np.ndarray | None:
        """The attention (its ``key``: scores, weights, heads or output) with a mistake made, from the student's input."""
        if self.step is None or self.step.op != "mha" or not self.step.inputs:
            return None
        key = tuple(sorted(bug.items()))
        if key not in self._cache:
            self._cache[key] = _attention(self, self.step, **bug)
        found = self._cache[key]
        return None if found is None else found.get(self.key)

    def hidden(self) -> np.ndarray | None:
        """For an attention's scores: where tracer's mask hides a key (its weights 0); None for any other stage."""
        if self.kind != "scores" or self.step is None:
            return None
        weights = self.ours.get(f"{_prefix(self.step)}.weights")
        return None if weights is None else weights <= 0

    @property
    def eps(self) -> float:
        return self.spec.block_for(self.name).eps if self.spec is not None else 1e-5


def _prefix(step: Step) -> str:
    from tracer.model.blocks import internal_prefix

    return internal_prefix(step)


class Diagnosis(NamedTuple):
    """One classic mistake: the stages it shows at (ops, or an attention's scores/weights/heads), the stage recomputed
    with the mistake made (one array or several forms of it; None: it cannot apply here), the sentence naming it."""

    bug: str
    kinds: tuple[str, ...]
    recompute: Callable[[Context], np.ndarray | list[np.ndarray | None] | None]
    say: Callable[[Context], Message]


def diagnose(ctx: Context, theirs: np.ndarray) -> Diagnosis | None:
    """The one classic mistake the student's array is: it matches the mistake recomputed from their inputs, and not the
    correct computation; None when no known mistake matches (or several do: then none is named)."""
    if ctx.step is None:
        return None
    with np.errstate(all="ignore"):
        correct = _correct(ctx)
        hidden = ctx.hidden()
        if correct is not None and _close(correct if hidden is None or correct.shape != theirs.shape else np.where(hidden, theirs, correct), theirs, ctx.tol):
            return None
        found = [d for d in DIAGNOSES if ctx.kind in d.kinds and _matches(d, ctx, theirs, correct)]
    return found[0] if len(found) == 1 else None


def matching(ctx: Context, theirs: np.ndarray) -> list[str]:
    """Every diagnosis whose check matches (the tests: one mistake, one match)."""
    with np.errstate(all="ignore"):
        correct = _correct(ctx)
        return [d.bug for d in DIAGNOSES if ctx.step is not None and ctx.kind in d.kinds and _matches(d, ctx, theirs, correct)]


def _matches(d: Diagnosis, ctx: Context, theirs: np.ndarray, correct: np.ndarray | None) -> bool:
    got = d.recompute(ctx)
    forms = got if isinstance(got, list) else [got]
    hidden = ctx.hidden()
    if hidden is not None:  # scores: compared where the mask lets a key through (recorded after the mask or before)
        forms = [None if f is None or f.shape != theirs.shape else np.where(hidden, theirs, f) for f in forms]
        correct = None if correct is None or correct.shape != theirs.shape else np.where(hidden, theirs, correct)
    return any(f is not None and _close(f, theirs, ctx.tol) and not _close(f, correct, ctx.tol) for f in forms)


def _correct(ctx: Context) -> np.ndarray | None:
    step = ctx.step
    if step is None:
        return None
    if step.op == "mha":
        return ctx.attention()
    if step.op == "layer_norm":
        return _ln(ctx)
    if step.op == "add" and len(step.inputs) == 2:
        a, b = ctx.inp(step.inputs[0]), ctx.inp(step.inputs[1])
        return None if a is None or b is None else a + b
    if step.op == "ffn_hidden":
        return _hidden(ctx)
    if step.op == "ffn_out":
        return _ffn_out(ctx)
    return _gemma_correct(ctx)


# -- the pieces, written out as the book writes them ------------------------------------------------------------

def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, axis: int = -1, ddof: int = 0) -> np.ndarray:
    mu = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True, ddof=ddof)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def _ln(ctx: Context, axis: int = -1, ddof: int = 0, eps: float | None = None, swap: bool = False, x: np.ndarray | None = None) -> np.ndarray | None:
    step = ctx.step
    if step is None or step.op != "layer_norm" or not step.inputs:
        return None
    x = ctx.inp(step.inputs[0]) if x is None else x
    gamma, beta = ctx.weight("gamma"), ctx.weight("beta")
    if x is None or gamma is None or beta is None or x.ndim != 3:
        return None
    if swap:
        gamma, beta = beta, gamma
    return _layer_norm(x, gamma, beta, ctx.eps if eps is None else eps, axis, ddof)


def _softmax(s: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(s - np.max(s, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _merge(heads: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,H*d]
    B, H, T, d = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(B, T, H * d)


def _attention(ctx: Context, step: Step, scale: bool = True, split: str = "transpose", order: str = "forward",
               softmax: str = "keys", mask: str = "before", fill: float = -np.inf, w_o: bool = True,
               reads: str | None = None) -> dict[str, np.ndarray] | None:
    """Self-attention from the student's input (or ``reads``: another stage, Post-Norm's X), with a mistake made:
    ``scale`` False: no 1/sqrt(d); ``split`` reshape: heads split by a reshape without the transpose (and merged back
    by one, ``reshape_merge``: split so, merged correctly); ``order`` reversed: heads concatenated last first;
    ``softmax`` queries; ``mask`` after (the softmax first) or diagonal (the diagonal masked too, filled with
    ``fill``); ``w_o`` False: the heads without W_O.  The visible keys are read off tracer's weights (0 where masked)."""
    x = ctx.inp(reads or step.inputs[0])
    found = {k: ctx.params.get(f"{step.weights}.{k}") for k in ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")}
    ours_w = ctx.ours.get(f"{_prefix(step)}.weights")
    ours_q = ctx.ours.get(f"{_prefix(step)}.q")
    if x is None or ours_w is None or ours_q is None or any(v is None for v in found.values()) or x.ndim != 3 or step.base is not None:
        return None  # (rotary positions: not the classic block's attention)
    if step.scale is not None:  # block.attention_scale: not the classic block's 1/sqrt(d)
        return None
    p = {k: v for k, v in found.items() if v is not None}
    B, H, T, d = ours_q.shape
    if p["w_q"].shape[-1] != H * d or p["w_k"].shape[-1] != H * d:  # grouped keys: not the classic block
        return None

    def heads(w: np.ndarray, b: np.ndarray) -> np.ndarray:
        y = x @ w + b  # [B,T,C]
        if split == "transpose":
            return y.reshape(B, T, H, d).transpose(0, 2, 1, 3)
        return y.reshape(B, H, T, d)

    q, k, v = heads(p["w_q"], p["b_q"]), heads(p["w_k"], p["b_k"]), heads(p["w_v"], p["b_v"])
    scores = q @ k.swapaxes(-1, -2)
    if scale:
        scores = scores / np.sqrt(d)
    visible = ours_w > 0
    if mask == "diagonal":
        visible = visible & ~np.eye(T, dtype=bool)
    if mask == "after":
        weights = _softmax(scores, -1) * visible
    elif softmax == "queries":
        weights = np.nan_to_num(_softmax(np.where(visible, scores, -np.inf), -2))
    else:
        weights = _softmax(np.where(visible, scores, fill), -1)
    mixed = weights @ v  # [B,H,T,d]
    if order == "reversed":
        mixed = mixed[:, ::-1]
    merged = mixed.reshape(B, T, H * d) if split == "reshape" else _merge(mixed)
    out = merged @ p["w_o"] + p["b_o"] if w_o else merged
    return {"scores": scores, "weights": weights, "heads": merged, "out": out}


def _act(name: str, z: np.ndarray) -> np.ndarray | None:
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "gelu":
        return 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)))
    if name == "gelu_tanh":
        return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))
    return None


def _erf(z: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(z)


def _activation(ctx: Context) -> str:
    step = ctx.step
    if step is None:
        return "relu"
    return str(step.params().get("activation") or (ctx.spec.block_for(ctx.name).activation if ctx.spec is not None else "relu"))


def _hidden(ctx: Context, act: str | None = None, bias: bool = True) -> np.ndarray | None:
    step = ctx.step
    if step is None or step.op != "ffn_hidden" or not step.inputs:
        return None
    n, w1, b1 = ctx.inp(step.inputs[0]), ctx.weight("w1"), ctx.weight("b1")
    if n is None or w1 is None or b1 is None:
        return None
    return _act(act or _activation(ctx), n @ w1 + (b1 if bias else 0.0))


def _ffn_out(ctx: Context, bias: bool = True) -> np.ndarray | None:
    step = ctx.step
    if step is None or step.op != "ffn_out" or not step.inputs:
        return None
    h, w2, b2 = ctx.inp(step.inputs[0]), ctx.weight("w2"), ctx.weight("b2")
    if h is None or w2 is None or b2 is None:
        return None
    return h @ w2 + (b2 if bias else 0.0)


def _other_gelu(ctx: Context) -> np.ndarray | None:
    act = _activation(ctx)
    other = {"gelu": "gelu_tanh", "gelu_tanh": "gelu"}.get(act)
    return None if other is None else _hidden(ctx, act=other)


def _no_residual(ctx: Context) -> list[np.ndarray | None]:
    step = ctx.step
    if step is None or step.op != "add" or len(step.inputs) != 2:
        return []
    return [ctx.inp(term) for term in step.inputs]


def _missing_term(ctx: Context) -> Message:
    step = ctx.step
    assert step is not None
    theirs = ctx.theirs.get(ctx.name)
    for i, term in enumerate(step.inputs):
        if _close(ctx.inp(term), theirs, ctx.tol):
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
    stream, sub = step.inputs
    norm = _norm_of(ctx, stream)
    if norm is None:
        return None
    n, u = ctx.inp(norm.name), ctx.inp(sub)
    return None if n is None or u is None else n + u


def _post_norm(ctx: Context) -> np.ndarray | None:
    """Post-Norm where Pre-Norm was asked: the first LayerNorm is LN(X + MHA(X)), and attention reads X, not N1."""
    if ctx.spec is None or ctx.spec.block_for(ctx.name).norm_order != "pre" or ctx.step is None:
        return None
    step = ctx.step
    if step.op == "mha" and ctx.key == "out" and step.inputs:
        norm = ctx.steps.get(step.inputs[0])
        if norm is None or norm.op != "layer_norm" or not norm.inputs:
            return None
        return ctx.attention(reads=norm.inputs[0])
    if step.op == "layer_norm" and step.inputs:
        sub = next((s for s in ctx.steps.values() if s.op == "mha" and s.inputs[:1] == (ctx.name,)), None)
        found = None if sub is None else _attention(ctx, sub, reads=step.inputs[0])
        x = ctx.inp(step.inputs[0])
        return None if found is None or x is None else _ln(ctx, x=x + found["out"])
    return None


def _off_by_one(ctx: Context) -> list[np.ndarray | None]:
    if ctx.step is None or ctx.step.params().get("mask", "causal") != "causal":
        return []
    return [ctx.attention(mask="diagonal"), ctx.attention(mask="diagonal", fill=-1e9)]


ATTN = ("mha", "scores", "weights", "heads")
DIAGNOSES: tuple[Diagnosis, ...] = (
    Diagnosis("ddof", ("layer_norm",), lambda c: _ln(c, ddof=1),
              lambda c: msg("Your {stage} equals LayerNorm with the variance divided by C-1 (ddof=1): divide by C", stage=c.name)),
    Diagnosis("ln_over_t", ("layer_norm",), lambda c: _ln(c, axis=1),
              lambda c: msg("Your {stage} equals LayerNorm with its mean and variance taken over {axis} instead of over C", stage=c.name,
                            axis=msg("T (the positions)"))),
    Diagnosis("ln_over_b", ("layer_norm",), lambda c: _ln(c, axis=0),
              lambda c: msg("Your {stage} equals LayerNorm with its mean and variance taken over {axis} instead of over C", stage=c.name,
                            axis=msg("B (the samples)"))),
    Diagnosis("no_eps", ("layer_norm",), lambda c: _ln(c, eps=0.0),
              lambda c: msg("Your {stage} equals LayerNorm without ε: add ε to the variance inside the square root, sqrt(var + ε)", stage=c.name)),
    Diagnosis("gamma_beta_swapped", ("layer_norm",), lambda c: _ln(c, swap=True),
              lambda c: msg("Your {stage} equals LayerNorm with gamma and beta swapped: multiply by gamma, then add beta", stage=c.name)),
    Diagnosis("post_norm", ("layer_norm", "mha"), _post_norm,
              lambda c: msg("Your {stage} is what a Post-Norm block computes (LN(X + MHA(X))): this spec asks for Pre-Norm, "
                            "N1 = LN1(X), R = X + MHA(N1), normalise before each sublayer, not after the add", stage=c.name)),
    Diagnosis("no_residual", ("add",), _no_residual, lambda c: _missing_term(c)),
    Diagnosis("residual_from_norm", ("add",), _normed_residual,
              lambda c: msg("Your {stage} adds the normalised input to the sublayer's output (N + U): the residual adds the stream itself, "
                            "R = X + U, not LN(X) + U", stage=c.name)),
    Diagnosis("no_w_o", ("mha",), lambda c: c.attention(w_o=False),
              lambda c: msg("Your {stage} equals the heads before W_O: multiply by W_O (and add b_O)", stage=c.name)),
    Diagnosis("softmax_queries", ("mha", "weights", "heads"), lambda c: c.attention(softmax="queries"),
              lambda c: msg("Your {stage} equals attention with the softmax taken over the queries: take it over the keys (the last axis)", stage=c.name)),
    Diagnosis("mask_after", ("mha", "weights", "heads"), lambda c: c.attention(mask="after"),
              lambda c: msg("Your {stage} equals attention with the mask applied after the softmax: mask the scores first (-inf on future keys), then the softmax", stage=c.name)),
    Diagnosis("no_scale", ATTN, lambda c: c.attention(scale=False),
              lambda c: msg("Your {stage} equals attention without the 1/sqrt(d) scale: divide the scores Q K^T by sqrt(d) = sqrt({d})", stage=c.name,
                            d=c.ours[f"{_prefix(c.step)}.q"].shape[-1] if c.step is not None and f"{_prefix(c.step)}.q" in c.ours else "d")),
    Diagnosis("split_without_transpose", ATTN, lambda c: c.attention(split="reshape"),
              lambda c: msg("Your {stage} equals attention with the heads split by a reshape without the transpose: reshape [T,C] to [T,H,d], "
                            "then swap T and H (and back before W_O)", stage=c.name)),
    Diagnosis("heads_reversed", ("mha", "heads"), lambda c: c.attention(order="reversed"),
              lambda c: msg("Your {stage} equals attention with the heads concatenated in the wrong order: head 0 first, then head 1, ..., "
                            "before W_O", stage=c.name)),
    Diagnosis("mask_off_by_one", ("mha", "weights", "heads"), _off_by_one,
              lambda c: msg("Your {stage} equals attention with the causal mask off by one: the diagonal is masked too (row 0 then has no key: "
                            "NaN with -inf, uniform with -1e9); mask only the keys after the query, np.triu(..., k=1)", stage=c.name)),
    Diagnosis("gelu_exact", ("ffn_hidden",), lambda c: _other_gelu(c) if _activation(c) == "gelu_tanh" else None,
              lambda c: msg("Your {stage} uses the exact GELU (erf) where the spec asks for the tanh approximation: "
                            "0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))", stage=c.name)),
    Diagnosis("gelu_tanh", ("ffn_hidden",), lambda c: _other_gelu(c) if _activation(c) == "gelu" else None,
              lambda c: msg("Your {stage} uses GELU's tanh approximation where the spec asks for the exact GELU: x Φ(x) = 0.5 x (1 + erf(x/√2))",
                            stage=c.name)),
    Diagnosis("ffn_no_bias", ("ffn_hidden", "ffn_out"), lambda c: _hidden(c, bias=False) if c.kind == "ffn_hidden" else _ffn_out(c, bias=False),
              lambda c: msg("Your {stage} leaves the FFN's bias out: add {bias}", stage=c.name, bias="b_1" if c.kind == "ffn_hidden" else "b_2")),
)


# -- what a spec cannot show -------------------------------------------------------------------------------------

SHOWS_ALL = "specs/variants/diagnose.yaml"  # a block in which every classic mistake changes a stage


def spec_blind_spots(spec: Spec, params: Mapping[str, np.ndarray]) -> list[Message]:
    """The classic mistakes this spec's numbers cannot reveal, each named by the property that hides it, and a spec
    that can (one note; none when the spec shows them all).  tracer diff says it; tracer check can call it too."""
    found: list[Message] = []
    attn = [s for s in spec.steps if s.op == "mha"]
    dims = spec.dims
    if attn and dims.H and dims.C // dims.H == 1:
        found.append(msg("d = 1 (a missing 1/sqrt(d) changes nothing)"))
    if attn and dims.H == 1:
        found.append(msg("H = 1 (heads split without the transpose or concatenated out of order change nothing)"))
    if dims.T == 1:
        found.append(msg("T = 1 (the mask, its place and the softmax's axis change nothing)"))
    biases = [a for k, a in params.items() if k.rsplit(".", 1)[-1] in ("b_q", "b_k", "b_v", "b_o", "b1", "b2")]
    if biases and not any(np.any(a != 0) for a in biases):
        found.append(msg("every bias is zero (a bias left out changes nothing)"))
    gammas = [a for k, a in params.items() if k.endswith(".gamma")]
    betas = [a for k, a in params.items() if k.endswith(".beta")]
    if gammas and all(np.all(g == 1) for g in gammas) and all(np.all(b == 0) for b in betas):
        found.append(msg("gamma = 1 and beta = 0 (a LayerNorm that leaves gamma or beta out changes nothing)"))
    if not found:
        return []
    return [msg("this spec cannot show every classic mistake: {props}; {spec} can", props=join(found), spec=SHOWS_ALL)]


# -- Gemma's ways to get it wrong (i23-gemma) ------------------------------------------------------------------
# A port of Hugging Face's Gemma that scales by the stored weight w instead of 1 + w, forgets the sqrt(C) of the
# embeddings, or gates its FFN with the exact GELU or with SiLU: each recomputed from the student's inputs.
ADVICE["rms_norm_offset"] = ("Gemma's RMSNorm (the mean of the squares over C, ε inside the square root, then times 1 + gamma, "
                             "not gamma: the stored weight is the offset from 1)")
ADVICE["embed_scale"] = "the scaled embeddings: the rows of E for the token ids, times sqrt(C)"


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


def _gated(ctx: Context, gate: str | None = None) -> np.ndarray | None:
    """A gated FFN's hidden layer, act(N W_1 + b_1) * (N W_3 + b_3), its gate through ``gate`` (default: the spec's)."""
    step = ctx.step
    act = _activation(ctx)
    if step is None or step.op != "ffn_hidden" or not step.inputs or act not in ("swiglu", "geglu"):
        return None
    n, w1, b1, w3, b3 = ctx.inp(step.inputs[0]), ctx.weight("w1"), ctx.weight("b1"), ctx.weight("w3"), ctx.weight("b3")
    if n is None or w1 is None or b1 is None or w3 is None or b3 is None:
        return None
    z = n @ w1 + b1
    name = gate or {"swiglu": "silu", "geglu": "gelu_tanh"}[act]
    g = z / (1.0 + np.exp(-z)) if name == "silu" else _act(name, z)
    return None if g is None else g * (n @ w3 + b3)


def _gemma_correct(ctx: Context) -> np.ndarray | None:
    step = ctx.step
    if step is None:
        return None
    if step.op == "rms_norm_offset":
        return _rms_offset(ctx)
    if step.op == "embed_scale":
        return _embed(ctx)
    return None


DIAGNOSES += (
    Diagnosis("norm_without_offset", ("rms_norm_offset",), lambda c: _rms_offset(c, offset=0.0),
              lambda c: msg("Your {stage} scales by gamma where Gemma's RMSNorm scales by (1 + gamma): the stored weight is the offset from 1, "
                            "x / sqrt(mean(x^2) + eps) * (1 + w)", stage=c.name)),
    Diagnosis("no_embedding_scale", ("embed_scale",), lambda c: _embed(c, scale=False),
              lambda c: msg("Your {stage} is the embeddings unscaled: Gemma multiplies them by sqrt(C) = sqrt({C})", stage=c.name,
                            C=c.spec.dims.C if c.spec is not None else "C")),
    Diagnosis("geglu_exact", ("ffn_hidden",), lambda c: _gated(c, gate="gelu") if _activation(c) == "geglu" else None,
              lambda c: msg("Your {stage} gates with the exact GELU (erf) where GeGLU uses GELU's tanh approximation (Hugging Face's "
                            "gelu_pytorch_tanh, which Gemma's hidden_act means, even when it says gelu)", stage=c.name)),
    Diagnosis("geglu_silu", ("ffn_hidden",), lambda c: _gated(c, gate="silu") if _activation(c) == "geglu" else None,
              lambda c: msg("Your {stage} gates with SiLU (SwiGLU) where the spec asks for GeGLU: the gate is GELU's tanh approximation, "
                            "gelu_tanh(N W_1 + b_1) * (N W_3 + b_3)", stage=c.name)),
)
