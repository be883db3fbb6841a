"""Diagnosis as a search: at the first diverging stage, the stage recomputed from the student's own inputs under a
family of variants of its op (compare/recompute.py: each knob of each op turned, one at a time, then two at a
time), and a mistake named only when it is the one that matches.

- a variant that gives the correct numbers on this spec (b_Q left out where b_Q is zero) can show nothing: it is
  set aside, and it is what the spec cannot show (``blind_spots``);
- a variant matches when the student's array equals it within the dtype's tolerance and the correct computation is
  at least ten times further off;
- variants that give the same numbers here (dividing by sqrt(C) and by d when C = 4, d = 2) are one finding, named
  together;
- exactly one finding is named (or one far closer than any other, at rounding level); pairs are tried only when no
  single variant matches, and only within a budget of arithmetic (a GPT-2-sized stage tries the single variants).

Each knob carries its words (a fragment: "the scores divided by sqrt(C) = sqrt(4)") and, where it is one of the
worded classic mistakes (compare/hints.py DIAGNOSES), that record's name.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from tracer.compare.recompute import EXACT, Context, Tolerance, distance, recompute
from tracer.messages import Message, join, msg
from tracer.model.activations import ACTIVATIONS, DEFAULT_ACTIVATION

COMMON_EPS = (1e-12, 1e-8, 1e-6, 1e-5, 1e-3)  # the epsilons libraries use (BERT 1e-12, PyTorch 1e-5, ...)
PAIR_BUDGET = 3e9  # multiply-adds the pairs of one search may cost (a chapter-sized stage: a few thousand each)
SINGLE_BUDGET = 3e10  # ... and its single knobs (a GPT-2-sized attention at T = 1024: the worded records alone)


class Knob(NamedTuple):
    """One mistake an op can be made with: the recomputation's keyword and value, its words, the classic mistake
    (record) it is, whether it shows only on an overflow, and the spec property that hides it (for the note)."""

    key: str
    value: Any
    words: Message
    record: str | None = None
    overflow_only: bool = False
    hidden_by: str | None = None  # "d1", "h1", "t1", "bias0", "gamma1": spec_blind_spots names that property instead


class Finding(NamedTuple):
    """What the search names: the variants (each one knob or two) that give the student's numbers, the first the
    closest, and how close (in tolerances)."""

    variants: tuple[tuple[Knob, ...], ...]
    distance: float

    @property
    def record(self) -> str | None:
        return next((k.record for v in self.variants for k in v if len(v) == 1 and k.record), None)

    @property
    def bug(self) -> str:
        """A stable name: the record's, else 'key=value' (and '+' for a pair), as in the JSON's diagnosis.bug."""
        return self.record or variant_name(self.variants[0])

    def names(self) -> list[str]:
        """Every variant's name, the first the bug's: the JSON's diagnosis.same_numbers holds the others."""
        out = [self.bug] + [variant_name(v) for v in self.variants]
        return list(dict.fromkeys(out))

    def words(self) -> Message:
        """'the scores divided by sqrt(C) = sqrt(4) (or, the same numbers here, the scores divided by d = 2)'."""
        first = variant_words(self.variants[0])
        if len(self.variants) == 1:
            return first
        return msg("{first} (or, giving the same numbers here, {others})", first=first,
                   others=join([variant_words(v) for v in self.variants[1:]], msg(" or ")))


def variant_name(variant: tuple[Knob, ...]) -> str:
    """'scale=1/sqrt(C)', 'b_o=off+scale=1/sqrt(C)', or a worded record's own name."""
    return "+".join(str(k.value) if k.key == "record" else f"{k.key}={_value_name(k.value)}" for k in variant)


def _value_name(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def variant_words(variant: tuple[Knob, ...]) -> Message:
    return join([k.words for k in variant], msg(" and "))


# -- the knobs of each op -----------------------------------------------------------------------------------------

def _reads(ctx: Context, default: str, key: str = "reads") -> list[Knob]:
    """Another earlier stage of the same shape read in place of ``default``; of stages that hold the same numbers
    (input and x, where x is the input itself), the later one."""
    ours = ctx.ours.get(default)
    if ours is None:
        return []
    names = [s for s in ctx.earlier(ours.shape) if s != default]
    kept = [s for i, s in enumerate(names)
            if not any(np.array_equal(ctx.ours[s], ctx.ours[later]) for later in names[i + 1:]) and not np.array_equal(ctx.ours[s], ours)]
    return [Knob(key, s, msg("{stage} read where {default} was due", stage=s, default=default)) for s in kept]


def norm_knobs(ctx: Context) -> list[Knob]:
    step = ctx.step
    assert step is not None
    layer = step.op == "layer_norm"
    eps = ctx.eps
    knobs = _reads(ctx, step.inputs[0])
    knobs += [Knob("axis", "T", msg("the mean and variance taken over T (the positions), not over C"), "ln_over_t" if layer else None, hidden_by="t1"),
              Knob("axis", "B", msg("the mean and variance taken over B (the samples), not over C"), "ln_over_b" if layer else None),
              Knob("axis", "TC", msg("the mean and variance taken over T and C together, not over C alone"), hidden_by="t1")]
    if layer:
        knobs.append(Knob("ddof", 1, msg("the variance divided by C-1 (ddof=1), not by C"), "ddof"))
    knobs.append(Knob("eps", 0.0, msg("no ε in the square root"), "no_eps"))
    tried = [e for e in COMMON_EPS if not math.isclose(e, eps)]
    fitted = _fitted_eps(ctx)
    if fitted is not None and not any(math.isclose(fitted, e, rel_tol=0.2) for e in (*tried, eps)):  # 9.9e-07 is 1e-06
        tried.append(fitted)
    knobs += [Knob("eps", e, msg("ε = {e} where the spec says {eps}", e=f"{e:g}", eps=f"{eps:g}")) for e in tried]
    knobs += [Knob("place", "outside", msg("ε added outside the square root, sqrt(var) + ε")),
              Knob("place", "no_sqrt", msg("a division by var + ε, not by its square root")),
              Knob("divide", False, msg("no division by the standard deviation"))]
    knobs.append(Knob("gamma", "off", msg("gamma left out"), hidden_by="gamma1"))
    if layer:
        knobs += [Knob("beta", "off", msg("beta left out"), hidden_by="gamma1"),
                  Knob("gamma", "swapped", msg("gamma and beta swapped"), "gamma_beta_swapped"),
                  Knob("center", False, msg("no mean subtracted (RMSNorm where the spec asks for LayerNorm)"))]
    else:
        knobs.append(Knob("center", True, msg("the mean subtracted (LayerNorm where the spec asks for RMSNorm)")))
    siblings = [s for s in ctx.steps.values() if s.op == step.op and s.weights and s.weights != step.weights]
    knobs += [Knob("group", s.weights, msg("the weights of {other} (its gamma and beta)", other=s.weights)) for s in siblings]
    return knobs


def _fitted_eps(ctx: Context) -> float | None:
    """The ε the student's LayerNorm would have used, solved from their array (gamma (x - mu) / sqrt(var + ε) + beta),
    to two significant digits as a person writes it; None where it cannot be solved (one row, or no clear value)."""
    step = ctx.step
    theirs = ctx.theirs.get(ctx.name)
    x = ctx.inp(step.inputs[0]) if step is not None and step.inputs else None
    g, b = ctx.weight("gamma"), ctx.weight("beta")
    if step is None or step.op != "layer_norm" or theirs is None or x is None or g is None or x.shape != theirs.shape:
        return None
    b = np.zeros_like(g) if b is None else b
    with np.errstate(all="ignore"):
        dev = x - x.mean(axis=-1, keepdims=True)
        var = (dev * dev).mean(axis=-1, keepdims=True)
        scaled = (theirs - b) / g  # dev / sqrt(var + eps)
        keep = np.abs(scaled) > 0.5
        rows = (dev / scaled) ** 2 - var  # eps, element by element
        values = rows[keep & np.isfinite(rows)]
    if values.size < 2 or len({float(v) for v in np.unique(var)}) < 2:
        return None
    e = float(np.median(values))
    if not math.isfinite(e) or e <= 0:
        return None
    return float(f"{e:.2g}")


def attention_knobs(ctx: Context) -> list[Knob]:
    step = ctx.step
    assert step is not None
    H = int(ctx.dims.get("H", 1) or 1)
    C = int(ctx.dims.get("C", 0) or 0)
    d = int(ctx.dims.get("d") or (C // H if H else 0))
    knobs = _reads(ctx, step.inputs[0])
    for role, others in (("q", ("w_k", "w_v")), ("k", ("w_q", "w_v")), ("v", ("w_q", "w_k"))):
        for w in others:
            knobs.append(Knob(f"{role}_from", w, msg("the {what} made with {w}", what=_ROLE[role], w="W_" + w[2:].upper())))
    knobs.append(Knob("v_from", "none", msg("the values taken as the input itself, without W_V")))
    for b in ("b_q", "b_k", "b_v", "b_o"):
        knobs.append(Knob(b, "off", msg("{b} left out", b="b_" + b[2:].upper()), hidden_by="bias0"))
    knobs += [Knob("split", "reshape", msg("the heads split by a reshape without the transpose"), "split_without_transpose", hidden_by="h1"),
              Knob("merged", "reshape", msg("the heads merged back by a reshape without the transpose"), hidden_by="h1")]
    default = "the spec's scale" if step.scale is not None else "1/sqrt(d)"
    scales = {"1": (msg("the scores not scaled (no 1/sqrt(d))"), "no_scale"),
              "1/sqrt(C)": (msg("the scores divided by sqrt(C) = sqrt({C}), not by sqrt(d) = sqrt({d})", C=C, d=d), None),
              "1/d": (msg("the scores divided by d = {d}, not by sqrt(d)", d=d), None),
              "1/C": (msg("the scores divided by C = {C}, not by sqrt(d)", C=C), None),
              "sqrt(d)": (msg("the scores multiplied by sqrt(d), not divided by it"), None)}
    if step.scale is not None:
        scales["1/sqrt(d)"] = (msg("the scores divided by sqrt(d) where the spec scales them by {s}", s=f"{step.scale:g}"), None)
    plain = step.scale if step.scale is not None else 1.0 / math.sqrt(d) if d else 0.0
    factors = {"1": 1.0, "1/sqrt(C)": 1.0 / math.sqrt(C) if C else 0.0, "1/d": 1.0 / d if d else 0.0, "1/C": 1.0 / C if C else 0.0,
               "sqrt(d)": math.sqrt(d), "1/sqrt(d)": 1.0 / math.sqrt(d) if d else 0.0}
    for value, (words, record) in scales.items():
        if math.isclose(factors[value], plain, rel_tol=1e-12) and value != "1":  # C = d (one head): 1/sqrt(C) is 1/sqrt(d) itself
            continue
        knobs.append(Knob("scale", value, words, record if default == "1/sqrt(d)" else None, hidden_by="d1" if value in ("1", "1/d", "sqrt(d)") else None))
    knobs.append(Knob("scores", "kq", msg("the scores K Q^T (the queries and keys swapped)")))
    causal = step.mask == "causal"
    if causal:
        knobs += [Knob("mask", "none", msg("no causal mask"), hidden_by="t1"),
                  Knob("mask", "diagonal", msg("the causal mask off by one: the diagonal hidden too"), "mask_off_by_one", hidden_by="t1"),
                  Knob("mask", "diagonal_1e9", msg("the causal mask off by one: the diagonal hidden too"), "mask_off_by_one", hidden_by="t1"),
                  Knob("mask", "one_future", msg("the causal mask off by one the other way: each query also reads the next key"), hidden_by="t1"),
                  Knob("mask", "transposed", msg("the mask transposed: each query reads the keys after it, not before"), hidden_by="t1"),
                  Knob("mode", "after", msg("the mask applied after the softmax"), "mask_after", hidden_by="t1"),
                  Knob("mode", "zero", msg("the hidden scores set to 0, not -inf, before the softmax"), hidden_by="t1")]
    elif step.mask in (None, "none"):
        knobs.append(Knob("mask", "causal", msg("a causal mask where the spec has none"), hidden_by="t1"))
    knobs += [Knob("softmax_over", "queries", msg("the softmax taken over the queries, not the keys"), "softmax_queries", hidden_by="t1"),
              Knob("softmax_over", "heads", msg("the softmax taken over the heads, not the keys")),
              Knob("softmax_over", "none", msg("no softmax: the masked scores used as weights")),
              Knob("stable", False, msg("the softmax without each row's largest score subtracted: exp overflows (a score above about 709, "
                                        "88 in float32, gives inf, and inf / inf is NaN); subtract the row's max before exp"), overflow_only=True),
              Knob("mix", "transposed", msg("the weights transposed before they mix the values"), hidden_by="t1"),
              Knob("order", "reversed", msg("the heads concatenated in the wrong order"), "heads_reversed", hidden_by="h1"),
              Knob("w_o", "off", msg("no W_O (the heads as they are)"), "no_w_o"),
              Knob("w_o", "transposed", msg("W_O transposed"))]
    return knobs


_ROLE = {"q": msg("queries"), "k": msg("keys"), "v": msg("values")}


def ffn_hidden_knobs(ctx: Context) -> list[Knob]:
    step = ctx.step
    assert step is not None
    spec_act = ctx.activation()
    own = ACTIVATIONS.get(spec_act)  # the spec's activation's record: the neighbours a student writes instead

    knobs = _reads(ctx, step.inputs[0])
    knobs += [Knob("b1", "off", msg("b_1 left out"), "ffn_no_bias", hidden_by="bias0"),
              Knob("b1", "after", msg("b_1 added after the activation, not before"), hidden_by="bias0"),
              Knob("w1", "w2T", msg("W_2 transposed where W_1 was due"))]
    if own is not None and own.gate is not None:
        gate = own.gate
        records = dict(own.diagnoses)
        knobs += [Knob("gate", a, msg("the gate through {act} where {spec} uses {gate}", act=a, spec=spec_act, gate=gate), records.get(a))
                  for a in own.neighbours]
        knobs += [Knob("gated", "off", msg("no gate: the W_3 half left out")),
                  Knob("gated", "swapped", msg("the activation on the W_3 half, not the W_1 half"))]
    else:
        records = dict(own.diagnoses) if own is not None else {}
        for a in own.neighbours if own is not None else _every_activation():
            if a == spec_act:
                continue
            words = msg("no activation") if a == "none" else msg("{act} where the spec asks for {spec}", act=_act_words(a), spec=_act_words(spec_act))
            knobs.append(Knob("activation", a, words, records.get(a)))
    return knobs


def _act_words(name: str) -> Message | str:
    """An activation in words: its record's meaning; the sigmoid, no activation of tracer's, or a name as written."""
    record = ACTIVATIONS.get(name)
    return record.meaning if record is not None else "the sigmoid" if name == "sigmoid" else name


def _every_activation() -> tuple[str, ...]:
    """What a spec's activation this tracer does not know (another version's saved trace) is tried against: every
    plain activation and its neighbours."""
    return tuple(dict.fromkeys(n for a in ACTIVATIONS.values() if a.gate is None for n in (a.name, *a.neighbours)))


def ffn_out_knobs(ctx: Context) -> list[Knob]:
    step = ctx.step
    assert step is not None
    knobs = _reads(ctx, step.inputs[0])
    knobs += [Knob("reads", "pre", msg("the first layer's values before the activation read, not {hidden}", hidden=step.inputs[0])),
              Knob("b2", "off", msg("b_2 left out"), "ffn_no_bias", hidden_by="bias0"),
              Knob("after", ctx.activation() if _plain(ctx.activation()) else DEFAULT_ACTIVATION, msg("the activation applied again after W_2")),
              Knob("w2", "w1T", msg("W_1 transposed where W_2 was due"))]
    return knobs


def _plain(name: str) -> bool:  # an activation with a record, not gated: what the FFN's output may go through again
    record = ACTIVATIONS.get(name)
    return record is not None and record.gate is None


def add_knobs(ctx: Context) -> list[Knob]:
    step = ctx.step
    assert step is not None
    a, b = step.inputs
    knobs = [Knob("a", "none", msg("{term} left out (only {other} kept)", term=a, other=b), "no_residual"),
             Knob("b", "none", msg("{term} left out (only {other} kept)", term=b, other=a), "no_residual")]
    knobs += _reads(ctx, a, "a") + _reads(ctx, b, "b")
    knobs += [Knob("times_a", 2.0, msg("{term} added twice", term=a)), Knob("times_b", 2.0, msg("{term} added twice", term=b)),
              Knob("times_b", -1.0, msg("{term} subtracted, not added", term=b)), Knob("times_a", -1.0, msg("{term} subtracted, not added", term=a))]
    return knobs


def add_position_knobs(ctx: Context) -> list[Knob]:
    return [Knob("position", "off", msg("no positions added (X = E)")), Knob("position", "doubled", msg("the positions added twice")),
            Knob("position", "shifted", msg("the position rows counted from 1, not 0"))]


KNOBS: dict[str, Callable[[Context], list[Knob]]] = {
    "layer_norm": norm_knobs, "rms_norm": norm_knobs, "mha": attention_knobs, "ffn_hidden": ffn_hidden_knobs, "ffn_out": ffn_out_knobs,
    "add": add_knobs, "add_position": add_position_knobs,
}
ATTENTION_KEYS = {  # which knobs can change which array of an attention
    "scores": {"reads", "q_from", "k_from", "b_q", "b_k", "split", "scale", "scores"},
}


def knobs_for(ctx: Context) -> list[Knob]:
    if ctx.step is None or ctx.step.op not in KNOBS:
        return []
    found = KNOBS[ctx.step.op](ctx)
    if ctx.key == "scores":
        found = [k for k in found if k.key in ATTENTION_KEYS["scores"]]
    elif ctx.key in ("weights", "heads"):
        found = [k for k in found if k.key not in ("w_o", "b_o") and not (ctx.key == "weights" and k.key in ("v_from", "b_v", "mix", "order", "merged"))]
    return found


def _cost(ctx: Context) -> float:
    """Multiply-adds of one recomputation of the stage: the projections and T x T products of an attention, the two
    products of an FFN layer, a few per value of a norm or an add."""
    step = ctx.step
    read = ctx.ours.get(step.inputs[0]) if step is not None and step.inputs else None
    if step is None or read is None or read.ndim != 3:
        return 1.0
    shape = read.shape
    B, T, C = shape
    if step.op == "mha":
        return float(4 * B * T * C * C + 2 * B * T * T * C)
    if step.op in ("ffn_hidden", "ffn_out"):
        F = max((a.shape[-1] for k, a in ctx.params.items() if k.startswith(f"{step.weights}.") and a.ndim == 2), default=C)
        return float(2 * B * T * C * F)
    return float(10 * B * T * C)


# -- the search ---------------------------------------------------------------------------------------------------

class SearchOutcome(NamedTuple):
    finding: Finding | None
    invisible: list[Knob]  # single variants that give the correct numbers here
    searched: bool  # some variant could be computed


def variant_of(ctx: Context, variant: tuple[Knob, ...]) -> np.ndarray | None:
    """The stage recomputed with this variant's knobs (None where they do not combine)."""
    return _forms(ctx, variant)


def _forms(ctx: Context, variant: tuple[Knob, ...]) -> np.ndarray | None:
    kwargs = {k.key: k.value for k in variant}
    if len(kwargs) != len(variant):
        return None
    return recompute(ctx, **kwargs)


def search(ctx: Context, theirs: np.ndarray, tol: Tolerance | None = None, extra: Sequence[tuple[tuple[Knob, ...], np.ndarray]] | None = None,
           near: bool = False, correct: np.ndarray | None = None) -> SearchOutcome:
    """The variants of the stage's op that give the student's ``theirs``; ``extra``: more candidates already computed
    (the worded records' forms, each under a knob of its own); ``near``: the stage agrees within the diff's tolerance
    but is suspiciously far off (the correct computation then only needs to be ten times further than the variant);
    ``correct``: the stage computed correctly, for an op this module has no family for (Gemma's norm)."""
    tol = tol or ctx.tol
    correct = recompute(ctx) if correct is None else correct
    if correct is None or correct.shape != theirs.shape:
        return SearchOutcome(None, [], False)
    where = _where(ctx, theirs)
    dc = distance(theirs, correct, tol, where)
    if dc <= 1.0 and not near:
        return SearchOutcome(None, [], True)
    knobs = knobs_for(ctx)
    cost = _cost(ctx)
    if cost * len(knobs) > SINGLE_BUDGET:  # a checkpoint-sized stage: the worded records alone, as they always were
        knobs = []
    singles: list[tuple[tuple[Knob, ...], np.ndarray]] = []
    invisible: list[Knob] = []
    for k in knobs:
        v = _forms(ctx, (k,))
        if v is None or v.shape != theirs.shape:
            continue
        if distance(v, correct, EXACT, where) <= 1.0:
            invisible.append(k)
            continue
        singles.append(((k,), v))
    singles += [(variant, v) for variant, v in extra or [] if v is not None and v.shape == theirs.shape and distance(v, correct, EXACT, where) > 1.0]
    found = _best(_matches(singles, theirs, dc, tol, where), where, tol)
    if found is None and cost * len(singles) ** 2 / 2 <= PAIR_BUDGET:
        visible = [variant[0] for variant, _ in singles if len(variant) == 1 and variant[0].key != "record"]
        pairs: list[tuple[tuple[Knob, ...], np.ndarray]] = []
        for a, b in itertools.combinations(visible, 2):
            if a.key == b.key:
                continue
            v = _forms(ctx, (a, b))  # (a pair that gives a single's numbers cannot match: no single did)
            if v is not None and v.shape == theirs.shape:
                pairs.append(((a, b), v))
        found = _best(_matches(pairs, theirs, dc, tol, where), where, tol)
    return SearchOutcome(found, invisible, bool(singles) or bool(invisible))


def _where(ctx: Context, theirs: np.ndarray) -> np.ndarray | None:
    """Scores are compared where the mask lets a key through (the student may record them after the mask)."""
    hidden = ctx.hidden()
    return None if hidden is None else np.broadcast_to(~hidden, theirs.shape)


def _matches(candidates: Sequence[tuple[tuple[Knob, ...], np.ndarray]], theirs: np.ndarray, dc: float, tol: Tolerance,
             where: np.ndarray | None) -> list[tuple[tuple[Knob, ...], np.ndarray, float]]:
    out = []
    for variant, v in candidates:
        dv = distance(theirs, v, tol, where)
        if dv <= 1.0 and dc >= 10.0 * dv and dc > 0.1:
            out.append((variant, v, dv))
    return out


def _best(matched: list[tuple[tuple[Knob, ...], np.ndarray, float]], where: np.ndarray | None, tol: Tolerance = EXACT) -> Finding | None:
    """One finding: the matches that give the same numbers as one another (at float64's rounding; values of one knob
    that SAME_KNOB names, such as ε = 0 and 1e-12, at the student's tolerance too) grouped; one group, or one far
    closer than every other (a hundredth of the next, at rounding level)."""
    if not matched:
        return None
    groups: list[list[tuple[tuple[Knob, ...], np.ndarray, float]]] = []
    for m in sorted(matched, key=lambda m: m[2]):
        for g in groups:
            same_knob = [_knob_key(k) for k in g[0][0]] == [_knob_key(k) for k in m[0]] and all(_knob_key(k) in SAME_KNOB for k in m[0])
            if distance(g[0][1], m[1], EXACT, where) <= 1.0 or (same_knob and distance(g[0][1], m[1], tol, where) <= 1.0):
                g.append(m)
                break
        else:
            groups.append([m])
    if len(groups) > 1:
        best, runner = groups[0][0][2], groups[1][0][2]
        if not (best <= 0.01 and best * 100 <= runner):
            return None
    group = groups[0]
    ordered = sorted(group, key=lambda m: (0 if len(m[0]) == 1 and m[0][0].record else 1, m[2]))
    variants = tuple(dict.fromkeys(m[0] for m in ordered))
    return Finding(_dedupe(variants), group[0][2])


SAME_KNOB = ("eps",)  # values of one knob that the student's dtype cannot tell apart are named together (ε = 0 or 1e-12)
RECORD_KNOB = {"no_eps": "eps"}  # the worded record that is a value of a knob


def _knob_key(k: Knob) -> str:
    return RECORD_KNOB.get(str(k.value), "record") if k.key == "record" else k.key


def _dedupe(variants: tuple[tuple[Knob, ...], ...]) -> tuple[tuple[Knob, ...], ...]:
    """One entry per wording (the mask off by one, filled with -inf or -1e9, is one mistake)."""
    seen: set[str] = set()
    out = []
    for v in variants:
        key = "+".join(str(k.words) for k in v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return tuple(out)


# -- what a spec cannot show ------------------------------------------------------------------------------------

# b_K adds q . b_K to every score of a query's row, and a softmax is unchanged by a constant added to a row: leaving
# b_K out never changes a number, on any spec (it is searched, and never named)
NEVER_SHOWN = {("mha", "b_k")}
BLIND_BUDGET = 2e8  # multiply-adds the note may spend on a spec's every stage (a teaching spec; a checkpoint's is skipped)


def blind_spots(contexts: Iterator[Context]) -> list[Knob] | None:
    """The single mistakes that give the correct numbers at every stage of their op (W_O transposed where W_O is
    symmetric): what this spec's numbers cannot show; None when the spec is too big to search (the note is left to
    the properties)."""
    by_op: dict[tuple[str, str, str], list[bool]] = {}
    words: dict[tuple[str, str, str], Knob] = {}
    spent = 0.0
    for ctx in contexts:
        knobs = [k for k in knobs_for(ctx) if not k.overflow_only and k.key not in ("reads", "a", "b", "group")
                 and (ctx.step.op if ctx.step else "", k.key) not in NEVER_SHOWN]
        spent += _cost(ctx) * len(knobs)
        if spent > BLIND_BUDGET:
            return None
        correct = recompute(ctx)
        if correct is None or ctx.step is None:  # (a NaN the run computes hides a variant that only moves it: that is so)
            continue
        for k in knobs:
            v = _forms(ctx, (k,))
            if v is None or v.shape != correct.shape:
                continue
            key = (ctx.step.op, k.key, _value_name(k.value))
            by_op.setdefault(key, []).append(distance(v, correct, EXACT) <= 1.0)
            words.setdefault(key, k)
    return [words[key] for key, seen in by_op.items() if seen and all(seen)]
