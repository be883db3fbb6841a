"""A stage recomputed from the student's own inputs, as the book writes each op, with any of its knobs turned.

What tracer diff's diagnoses read (compare/hints.py, compare/search.py): a Context holds the stage, its step,
tracer's stages and weights and the student's own arrays (an input the student did not record is tracer's, and
``borrowed`` names it).  Each op family here computes its stage plainly, in float64, from those inputs, with
knobs that make one mistake each: ``layer_norm(ctx, axis="T")`` is a LayerNorm over the positions,
``attention(ctx, scale="1")`` attention without its 1/sqrt(d), ``add(ctx, b="none")`` a residual add without its
second term.  With no knob turned, each is the correct computation, the one the student's array is measured
against first.

``distance`` measures two arrays in units of the tolerance: at most 1 where they agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tracer.model.activations import ACTIVATIONS, DEFAULT_ACTIVATION
from tracer.model.blocks import Step, internal_prefix

if TYPE_CHECKING:
    from tracer.compare.align import Side

Arrays = dict[str, np.ndarray]


class Tolerance(NamedTuple):
    atol: float
    rtol: float


# The student's array must equal the mistake recomputed from their own inputs to within rounding, and must not equal
# the correct computation from the same inputs: far below the smallest effect of a classic mistake (ddof=1 changes a
# LayerNorm by 1/(2C): 6e-5 at C = 8192), far above the rounding of a float64 (1e-13) or a float32 (1e-6) program.
DIAGNOSIS_TOLERANCE = {"float64": Tolerance(1e-10, 1e-8), "float32": Tolerance(1e-6, 1e-5), "float16": Tolerance(1e-3, 1e-2)}
EXACT = DIAGNOSIS_TOLERANCE["float64"]  # two recomputations give "the same numbers" at float64's rounding


def diagnosis_tolerance(dtype: str | None) -> Tolerance:
    return DIAGNOSIS_TOLERANCE.get(dtype or "float64", DIAGNOSIS_TOLERANCE["float64"])


def distance(a: np.ndarray | None, b: np.ndarray | None, tol: Tolerance, where: np.ndarray | None = None) -> float:
    """max |a - b| / (atol + rtol * max(|a|, |b|)): at most 1 where the two agree within ``tol`` (infinite when a shape
    differs or one is missing); NaN against NaN and an infinity against the same one agree.  ``where``: compare there only."""
    if a is None or b is None or np.shape(a) != np.shape(b):
        return math.inf
    with np.errstate(all="ignore"):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        d = np.abs(a - b) / (tol.atol + tol.rtol * np.maximum(np.abs(a), np.abs(b)))
        same = (np.isnan(a) & np.isnan(b)) | (a == b)
        d = np.where(same, 0.0, d)
        d = np.where(np.isnan(d), math.inf, d)
        if where is not None:
            d = d[where]
    return float(d.max()) if d.size else 0.0


def close(a: np.ndarray | None, b: np.ndarray | None, tol: Tolerance) -> bool:
    return distance(a, b, tol) <= 1.0


class Run(NamedTuple):
    """A run as a Context reads it, where there is no diff's Side (a spec's own trace: what it cannot show)."""

    stages: dict[str, Any]  # name -> Stage
    weights: dict[str, np.ndarray]
    spec: Any
    block: dict[str, Any]
    dims: dict[str, int]
    steps: tuple[Step, ...]


class Context:
    """What a recomputation reads: the stage, its step, tracer's stages and weights, and the student's own arrays
    (an input the student did not record is tracer's, and ``borrowed`` names it)."""

    def __init__(self, name: str, ref: Side | Run, mine: Side | Run, tol: Tolerance) -> None:
        self.name = name
        self.tol = tol
        self.ours = {n: s.array for n, s in ref.stages.items() if s.data is not None}
        self.theirs = {n: s.array for n, s in mine.stages.items() if s.data is not None}
        self.internal = {n for n, s in ref.stages.items() if s.internal}
        self.params = ref.weights or {}
        self.spec = ref.spec
        self.block = ref.block
        self.dims = ref.dims
        self.steps = {s.name: s for s in ref.steps}
        self.order = [s.name for s in ref.steps]
        self.step = self.steps.get(name)
        self.key = "out"  # which array of an attention: scores, weights, heads, or its output
        if self.step is None and "." in name:
            prefix, _, self.key = name.rpartition(".")
            self.step = next((s for s in ref.steps if s.op == "mha" and internal_prefix(s) == prefix), None)
        self.borrowed: list[str] = []
        self._cache: dict[tuple[object, ...], Any] = {}

    def at(self, step: Step) -> Context:
        """This context at another step (its output): what a diagnosis reads to recompute an earlier sublayer."""
        other = object.__new__(Context)
        other.__dict__.update(self.__dict__)
        other.step, other.key, other._cache = step, "out", {}
        return other

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

    def weight(self, name: str, group: str | None = None) -> np.ndarray | None:
        group = group or (self.step.weights if self.step is not None else None)
        return self.params.get(f"{group}.{name}") if group else None

    def clear(self) -> None:
        """Forget what was computed (the next recomputation reads its inputs again, and notes what it borrows)."""
        self._cache.clear()

    def memo(self, key: tuple[object, ...], make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @property
    def eps(self) -> float:
        if self.step is not None and self.step.eps is not None:  # a spec's norm step carries its stack's eps
            return self.step.eps
        eps = self.block.get("eps") if self.block else None
        return float(eps) if isinstance(eps, (int, float)) and not isinstance(eps, bool) else 1e-5

    def activation(self) -> str:
        step = self.step
        said = step.params().get("activation") if step is not None else None
        if said:
            return str(said)
        if self.spec is not None:
            return self.spec.block_for(self.name).activation
        return str((self.block or {}).get("activation") or DEFAULT_ACTIVATION)

    def visible(self, step: Step, n: int) -> np.ndarray:
        """[T,T] bool, True where query i reads key j: the spec's mask (a saved trace's, from its settings)."""
        return visible_for(self.spec, self.block, step, n)

    def hidden(self) -> np.ndarray | None:
        """For an attention's scores: where the mask hides a key (broadcast over B and H); None for any other stage."""
        if self.kind != "scores" or self.step is None or self.step.inputs[0] not in self.ours:
            return None
        n = self.ours[self.step.inputs[0]].shape[1]
        return ~self.visible(self.step, n)[None, None]

    def earlier(self, shape: tuple[int, ...], than: str | None = None) -> list[str]:
        """The main stages computed before ``than`` (this stage) with this shape: what a step may read by mistake."""
        stop = than or (self.step.name if self.step is not None else self.name)
        names = self.order[: self.order.index(stop)] if stop in self.order else []
        return [n for n in names if n not in self.internal and n in self.ours and self.ours[n].shape == shape]


def visible_for(spec: Any, block: dict[str, Any] | None, step: Step, n: int) -> np.ndarray:
    """[n,n] bool, True where query i reads key j under ``step``'s mask: the spec's (a saved trace's, from its
    block's settings: the word, the window, an explicit matrix)."""
    from tracer.model import masks

    if spec is not None:
        from tracer.engine.executor import visible_keys

        found = visible_keys(spec, step, n)
        return np.ones((n, n), dtype=bool) if found is None else np.asarray(found, dtype=bool)
    matrix = (block or {}).get("mask_matrix")
    try:
        return np.asarray(masks.visible(step.mask or "none", n, window=step.window, explicit=matrix), dtype=bool)
    except ValueError:
        return np.ones((n, n), dtype=bool)


# -- the pieces, written out as the book writes them ------------------------------------------------------------

def softmax(s: np.ndarray, axis: int, stable: bool = True) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(s - np.max(s, axis=axis, keepdims=True)) if stable else np.exp(s)
        return e / e.sum(axis=axis, keepdims=True)


def act(name: str, z: np.ndarray) -> np.ndarray | None:
    """An activation by name: a plain activation's record's kernel (relu, gelu (erf), gelu_tanh, silu, relu2, ...), or
    what a diagnosis also tries (NOT_ACTIVATIONS: sigmoid, none); None for one it does not know."""
    record = ACTIVATIONS.get(name)
    with np.errstate(all="ignore"):
        if record is not None and record.gate is None:
            return np.asarray(record.run_forward()(z))
        if name == "sigmoid":
            return 1.0 / (1.0 + np.exp(-z))
        if name == "none":
            return z
    return None


def merge(heads: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,H*d]
    B, H, T, d = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(B, T, H * d)


LN_AXES = {"C": (-1,), "T": (1,), "B": (0,), "TC": (1, 2), "BTC": (0, 1, 2)}


def norm(ctx: Context, reads: str | None = None, axis: str = "C", ddof: int = 0, eps: float | None = None, place: str = "inside",
         divide: bool = True, gamma: str = "on", beta: str = "on", center: bool | None = None, group: str | None = None,
         x: np.ndarray | None = None) -> Arrays | None:
    """LayerNorm (or RMSNorm: no mean subtracted) of the step's input: gamma (x - mu) / sqrt(var + eps) + beta, with
    the statistics over ``axis`` (C; T, B, TC, BTC by mistake), ``ddof`` 1 (C - 1), ``eps``, ε ``place``d inside the
    square root (outside: sqrt(var) + ε; no_sqrt: var + ε), ``divide`` False (never divided), ``gamma`` on | off |
    swapped (with beta), ``beta`` on | off, ``center`` (None: as the op, LayerNorm centres and RMSNorm does not),
    the weights of ``group`` (a sibling norm's)."""
    step = ctx.step
    if step is None or step.op not in ("layer_norm", "rms_norm") or not step.inputs:
        return None
    x = ctx.inp(reads or step.inputs[0]) if x is None else x
    if x is None or x.ndim != 3:
        return None
    g, b = ctx.weight("gamma", group), ctx.weight("beta", group)
    if g is None:
        return None
    b = np.zeros_like(g) if b is None else b
    if gamma == "swapped":
        g, b = b, g
    if gamma == "off":
        g = np.ones_like(g)
    if beta == "off":
        b = np.zeros_like(b)
    centred = step.op == "layer_norm" if center is None else center
    axes = LN_AXES[axis]
    n = math.prod(x.shape[a] for a in axes)
    with np.errstate(all="ignore"):
        mu = x.mean(axis=axes, keepdims=True) if centred else 0.0
        dev = x - mu
        if n - ddof <= 0:
            return None
        var = (dev * dev).sum(axis=axes, keepdims=True) / (n - ddof)
        e = ctx.eps if eps is None else eps
        if not divide:
            y = dev
        elif place == "outside":
            y = dev / (np.sqrt(var) + e)
        elif place == "no_sqrt":
            y = dev / (var + e)
        else:
            y = dev / np.sqrt(var + e)
        return {"out": g * y + b}


def attention(ctx: Context, reads: str | None = None, q_from: str = "w_q", k_from: str = "w_k", v_from: str = "w_v",
              b_q: str = "on", b_k: str = "on", b_v: str = "on", b_o: str = "on", split: str = "transpose",
              merged: str = "transpose", scale: str = "spec", scores: str = "qk", mask: str = "spec", mode: str = "before",
              softmax_over: str = "keys", stable: bool = True, mix: str = "weights", order: str = "forward",
              w_o: str = "on") -> Arrays | None:
    """Self-attention of the step's input (or ``reads``), every array it makes (scores, weights, heads, out), with
    the knobs: each projection from another weight (``q_from`` w_k, ``v_from`` none: the input itself), a bias
    left out, the heads ``split`` by a reshape without the transpose (and merged back so) or only ``merged`` so, the
    ``scale`` (1, 1/sqrt(C), 1/d, 1/C, sqrt(d)), the ``scores`` K Q^T, the ``mask`` (none, causal, diagonal: the
    diagonal hidden too, diagonal_1e9: so with -1e9, one_future: the next key seen, transposed) applied in ``mode``
    before | after the softmax | zero (hidden scores set to 0), the softmax over keys | queries | heads | none, without
    its max subtracted (``stable`` False: overflow), ``mix`` transposed weights times V, the heads' ``order``
    reversed, ``w_o`` off | transposed.  None where the step is not the classic block's attention (rotary positions,
    grouped keys, soft-capped or normalised scores)."""
    step = ctx.step
    if step is None or step.op != "mha" or not step.inputs or step.base is not None or step.softcap is not None or step.qk_norm:
        return None
    x = ctx.inp(reads or step.inputs[0])
    names = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")
    p = {k: ctx.params.get(f"{step.weights}.{k}") for k in names}
    H = int(ctx.dims.get("H", 0) or 0)
    if x is None or x.ndim != 3 or any(v is None for v in p.values()) or H <= 0:
        return None
    if int(ctx.dims.get("H_kv") or H) != H:
        return None
    w = {k: v for k, v in p.items() if v is not None}
    B, T, C = x.shape
    width = w["w_q"].shape[-1]
    if width % H or w["w_k"].shape[-1] != width or w["w_v"].shape[-1] != width:
        return None
    d = width // H

    def project(role: str, source: str, bias: str) -> np.ndarray | None:
        def make() -> np.ndarray | None:
            if source == "none":
                return x if width == C else None
            return x @ w[source] + (w[f"b_{source[-1]}"] if bias == "on" else 0.0)
        y = ctx.memo(("proj", reads, source, bias), make)
        if y is None:
            return None
        if split == "transpose":
            return y.reshape(B, T, H, d).transpose(0, 2, 1, 3)
        return y.reshape(B, H, T, d)

    q, k, v = project("q", q_from, b_q), project("k", k_from, b_k), project("v", v_from, b_v)
    if q is None or k is None or v is None:
        return None
    factors = {"spec": step.scale if step.scale is not None else 1.0 / math.sqrt(d), "1": 1.0, "1/sqrt(d)": 1.0 / math.sqrt(d),
               "1/sqrt(C)": 1.0 / math.sqrt(C), "1/d": 1.0 / d, "1/C": 1.0 / C, "sqrt(d)": math.sqrt(d)}
    with np.errstate(all="ignore"):
        s = (k @ q.swapaxes(-1, -2)) if scores == "kq" else (q @ k.swapaxes(-1, -2))
        s = s * factors[scale]
        seen = ctx.visible(step, T)
        if mask == "none":
            seen = np.ones((T, T), dtype=bool)
        elif mask == "causal":
            seen = np.tril(np.ones((T, T), dtype=bool))
        elif mask in ("diagonal", "diagonal_1e9"):
            seen = seen & ~np.eye(T, dtype=bool)
        elif mask == "one_future":
            seen = seen | np.eye(T, k=1, dtype=bool)
        elif mask == "transposed":
            seen = seen.T
        fill = -1e9 if mask == "diagonal_1e9" else -np.inf
        axis = {"keys": -1, "queries": -2, "heads": 1}.get(softmax_over, -1)
        if softmax_over == "none":
            a = np.where(seen, s, 0.0)
        elif mode == "after":
            a = softmax(s, axis, stable) * seen
        elif mode == "zero":
            a = softmax(np.where(seen, s, 0.0), axis, stable)
        elif softmax_over == "queries":
            a = np.nan_to_num(softmax(np.where(seen, s, -np.inf), axis, stable))
        else:
            a = softmax(np.where(seen, s, fill), axis, stable)
        mixed = (a.swapaxes(-1, -2) if mix == "transposed" else a) @ v  # [B,H,T,d]
        if order == "reversed":
            mixed = mixed[:, ::-1]
        heads = mixed.reshape(B, T, H * d) if split == "reshape" or merged == "reshape" else merge(mixed)
        if w_o == "off":
            out = heads
        else:
            wo = w["w_o"].T if w_o == "transposed" else w["w_o"]
            if heads.shape[-1] != wo.shape[0]:
                return None
            out = heads @ wo + (w["b_o"] if b_o == "on" else 0.0)
    return {"scores": s, "weights": a, "heads": heads, "out": out}


def _layer(ctx: Context, x: np.ndarray | None, own: str, sibling: str, transposed: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """An FFN layer's weight (its sibling's transposed, by mistake) and bias (zeros when it has none), when they fit ``x``."""
    other = ctx.weight(sibling)
    weight = other.T if transposed and other is not None else ctx.weight(own)
    if x is None or weight is None or x.shape[-1] != weight.shape[0]:
        return None
    bias = ctx.weight("b" + own[1:])
    return weight, np.zeros(weight.shape[-1]) if bias is None else bias


def ffn_hidden(ctx: Context, reads: str | None = None, activation: str | None = None, b1: str = "on", w1: str = "w1",
               gate: str | None = None, gated: str = "on") -> Arrays | None:
    """The FFN's first layer, act(N W_1 + b_1) (gated: gate(N W_1 + b_1) * (N W_3 + b_3)), with the knobs: ``reads``
    another stage, another ``activation`` (a gated FFN's ``gate``), ``b1`` off | after the activation, ``w1`` w2T
    (W_2 transposed), ``gated`` off (no W_3 half) | swapped (the activation on the W_3 half)."""
    step = ctx.step
    if step is None or step.op != "ffn_hidden" or not step.inputs:
        return None
    n = ctx.inp(reads or step.inputs[0])
    layer = _layer(ctx, n, "w1", "w2", w1 == "w2T")
    if n is None or layer is None:
        return None
    weight_1, bias_1 = layer
    spec_act = ctx.activation()
    own = ACTIVATIONS.get(spec_act)

    with np.errstate(all="ignore"):
        z = n @ weight_1 + (bias_1 if b1 == "on" else 0.0)
        if own is not None and own.gate is not None:
            w3, b3 = ctx.weight("w3"), ctx.weight("b3")
            if w3 is None:
                return None
            other = n @ w3 + (0.0 if b3 is None else b3)
            name = gate or own.gate
            if gated == "swapped":
                z, other = other, z
            g = act(name, z)
            if g is None:
                return None
            h = g if gated == "off" else g * other
        else:
            h = act(activation or spec_act, z)
            if h is None:
                return None
        if b1 == "after":
            h = h + bias_1
    return {"out": h}


def ffn_out(ctx: Context, reads: str | None = None, b2: str = "on", after: str | None = None, w2: str = "w2") -> Arrays | None:
    """The FFN's second layer, hidden W_2 + b_2, with the knobs: ``reads`` another stage (pre: the first layer's
    values before its activation), ``b2`` off, an activation ``after`` it, ``w2`` w1T (W_1 transposed)."""
    step = ctx.step
    if step is None or step.op != "ffn_out" or not step.inputs:
        return None
    if reads == "pre":
        first = ctx.steps.get(step.inputs[0])
        n = ctx.inp(first.inputs[0]) if first is not None and first.inputs else None
        w1, b1 = ctx.weight("w1"), ctx.weight("b1")
        h = None if n is None or w1 is None or n.shape[-1] != w1.shape[0] else n @ w1 + (0.0 if b1 is None else b1)
    else:
        h = ctx.inp(reads or step.inputs[0])
    layer = _layer(ctx, h, "w2", "w1", w2 == "w1T")
    if h is None or layer is None:
        return None
    weight_2, bias_2 = layer
    with np.errstate(all="ignore"):
        out = h @ weight_2 + (bias_2 if b2 == "on" else 0.0)
        if after is not None:
            out = act(after, out)
    return None if out is None else {"out": out}


def add(ctx: Context, a: str | None = None, b: str | None = None, times_a: float = 1.0, times_b: float = 1.0) -> Arrays | None:
    """A residual add a + b, with the knobs: either term read from another stage (``a``/``b``: a stage name, or
    "none": left out), either term doubled or subtracted (``times_a``, ``times_b``: 2, -1)."""
    step = ctx.step
    if step is None or step.op != "add" or len(step.inputs) != 2:
        return None
    terms = []
    for given, default, times in ((a, step.inputs[0], times_a), (b, step.inputs[1], times_b)):
        if given == "none":
            continue
        t = ctx.inp(given or default)
        if t is None:
            return None
        terms.append(times * t)
    if not terms or any(t.shape != terms[0].shape for t in terms):
        return None
    return {"out": terms[0] + terms[1] if len(terms) == 2 else terms[0]}


def add_position(ctx: Context, position: str = "on") -> Arrays | None:
    """X = E + P, with the knobs: ``position`` off | doubled | shifted (the rows from 1, as if counted from 1)."""
    step = ctx.step
    if step is None or step.op != "add_position" or len(step.inputs) != 2:
        return None
    e, p = ctx.inp(step.inputs[0]), ctx.inp(step.inputs[1])
    if e is None or p is None:
        return None
    if position == "off":
        return {"out": e}
    if position == "doubled":
        return {"out": e + 2 * p}
    table = ctx.params.get("position")
    T = p.shape[-2]
    if position == "shifted":
        if table is None or table.shape[0] < T + 1:
            return None
        return {"out": e + table[1:T + 1]}
    return {"out": e + p}


RECOMPUTED: dict[str, Callable[..., Arrays | None]] = {
    "layer_norm": norm, "rms_norm": norm, "mha": attention, "ffn_hidden": ffn_hidden, "ffn_out": ffn_out, "add": add,
    "add_position": add_position,
}


def recompute(ctx: Context, **knobs: Any) -> np.ndarray | None:
    """The stage (its ``key`` of an attention) recomputed from the student's inputs with these knobs; None where its
    op has no family here or the inputs are not there."""
    if ctx.step is None:
        return None
    family = RECOMPUTED.get(ctx.step.op)
    if family is None:
        return None
    found = family(ctx, **knobs)
    return None if found is None else found.get(ctx.key)
