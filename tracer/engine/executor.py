"""Run a spec's step list through the kernels and record every stage.

Recording is an identity wrap: ``x = rec("norm1", layer_norm(x, ...))``.
The StageKeeper keeps each stage in full, as statistics plus the value the table
shows, as that value alone, or not at all, as the RecordPolicy says (``--record``); that changes what
is kept, never what is computed.  A step's output is let go after the last step
that reads it, so an array not recorded in full does not outlive its use.
A kernel's BrokenContract becomes a Violation naming the stage; by default the
run stops there, with ``keep_going`` NumPy's result is recorded and the run
goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from tracer.engine import interventions, kernels
from tracer.engine.kernels import embeddings, ffn, multihead, norms
from tracer.engine.params import LayerWeights, load_inputs, load_params
from tracer.errors import BrokenContract, ShapeError, Violation
from tracer.messages import Message, at, join, message_of, msg, nmsg
from tracer.model import masks
from tracer.model.activations import activation_of, is_gated
from tracer.model.blocks import ATTN_MEANINGS, QK_OFFSET, Step, internal_prefix, scores_meaning, shown_internal, softcapped_scores
from tracer.model.contracts import operand_axes, position_violation, relative_violation, violation
from tracer.model.ops import OPS, SOFTMAX_ROWS
from tracer.model.shapes import shape_label
from tracer.spec import Spec
from tracer.spec.memory import RecordPolicy, plan_stages


class Stats(NamedTuple):
    """A stage kept as statistics (--record stats): shape, mean, std, min, max, and the value at (b, t)."""

    shape: tuple[int, ...]
    mean: float
    std: float
    min: float
    max: float
    b: int
    t: int
    value: np.ndarray  # the stage's value at (b, t), as Stage.at gives it

    def as_json(self) -> dict[str, float | int]:
        return {"mean": self.mean, "std": self.std, "min": self.min, "max": self.max, "b": self.b, "t": self.t}


class Point(NamedTuple):
    """A stage kept as its value at one (b, t) alone (the plain table under --record auto): its shape and that value."""

    shape: tuple[int, ...]
    b: int
    t: int
    value: np.ndarray | None  # the stage's value at (b, t), as Stage.at gives it; None: the stage has no such (b, t)


class Stage:  # plain classes here, not dataclasses: tracer starts on every call, and each dataclass costs ~0.3 ms
    def __init__(self, name: str, data: np.ndarray | None, axes: tuple[str, ...], meaning: str, internal: bool = False,
                 summary: Stats | None = None, point: Point | None = None) -> None:
        self.name = name
        self.data = data  # the whole array; None when the stage was kept as statistics (summary) or one value (point)
        self.axes = axes
        self.meaning = meaning
        self.internal = internal  # attention internals: shown with --all
        self.summary = summary
        self.point = point
        self.intervention: str | None = None  # what --ablate/--set/--from did to it (tracer.engine.interventions)

    def __repr__(self) -> str:
        kept = ", statistics" if self.summary is not None else ", one value" if self.point is not None else ""
        return f"Stage({self.name!r}, {self.shape_label}{kept})"

    @property
    def array(self) -> np.ndarray:
        """The whole array; a stage kept as statistics (--record stats) or as one value (the table) has none: LookupError."""
        if self.data is None:
            how = "as statistics (--record stats)" if self.summary is not None else "as its value at one position (--record auto)"
            raise LookupError(f"{self.name} was kept {how}, not in full")
        return self.data

    @array.setter
    def array(self, value: np.ndarray) -> None:
        self.data = value

    @property
    def shape(self) -> tuple[int, ...]:
        if self.data is not None:
            return tuple(self.data.shape)
        kept = self.summary or self.point
        assert kept is not None, "a stage holds its array, its summary or its point"
        return kept.shape

    @property
    def shape_label(self) -> str:
        return shape_label(self.axes, self.shape)

    def at(self, b: int, t: int) -> np.ndarray:
        """The stage's value for sample b at (query) position t: [C], [F], [H,d] or [H,T].

        A stage kept as statistics holds the value at the (b, t) it was recorded for only;
        asking for another raises LookupError.
        """
        if self.data is None:
            kept = self.summary or self.point
            assert kept is not None
            if (b, t) != (kept.b, kept.t):
                raise LookupError(f"{self.name} was kept {'as statistics, ' if self.summary is not None else ''}"
                                  f"with its value at b={kept.b}, t={kept.t} only")
            if kept.value is None:
                raise IndexError(f"{self.name} {self.shape_label} has no value at b={b}, t={t}")
            return kept.value
        return value_at(self.data, self.axes, b, t)


def value_at(array: np.ndarray, axes: tuple[str, ...], b: int, t: int) -> np.ndarray:
    index: list[int | slice] = []
    seen_t = False
    for axis in axes:
        if axis == "B":
            index.append(b)
        elif axis in ("T", "S") and not seen_t:
            index.append(t)
            seen_t = True
        else:
            index.append(slice(None))
    return array[tuple(index)]


def _blocks(a: np.ndarray, limit: int = 1 << 20) -> Iterator[np.ndarray]:
    """Sub-arrays along the leading axes of at most ~limit values: statistics without a full-size temporary."""
    if a.size <= limit or a.ndim <= 1:
        yield a
        return
    for part in a:
        yield from _blocks(part, limit)


def _value_copy(array: np.ndarray, axes: tuple[str, ...], b: int, t: int) -> np.ndarray | None:
    try:
        return np.array(value_at(array, axes, b, t))  # a copy: the big array can go
    except IndexError:  # a stage cut short (T beyond the position table), or one sample selected (B = 1)
        return None


def summarise(array: np.ndarray, axes: tuple[str, ...], b: int, t: int) -> Stats:
    n = max(array.size, 1)
    total, lo, hi = 0.0, np.inf, -np.inf
    for part in _blocks(array):
        total += float(part.sum(dtype=np.float64))
        lo, hi = float(np.minimum(lo, part.min(initial=np.inf))), float(np.maximum(hi, part.max(initial=-np.inf)))  # NaN wins
    mean = total / n
    sq = sum(float(np.square(part - mean, dtype=np.float64).sum()) for part in _blocks(array))
    value = _value_copy(array, axes, b, t)
    return Stats(tuple(array.shape), mean, float(np.sqrt(sq / n)), lo, hi, b, t, np.full(0, np.nan) if value is None else value)


class Recording:
    def __init__(self, spec: Spec, stages: dict[str, Stage] | None = None, violations: list[Violation] | None = None,
                 policy: RecordPolicy | None = None) -> None:
        self.spec = spec
        self.stages: dict[str, Stage] = {} if stages is None else stages
        self.violations: list[Violation] = [] if violations is None else violations
        self.policy = RecordPolicy() if policy is None else policy
        self.originals: dict[str, np.ndarray] = {}  # a stage ablated to its mean: its value before (the backward pass reads it)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def last(self) -> Stage:
        return next(reversed(self.stages.values()))

    @property
    def output(self) -> Stage:
        """The block's result: the last step's stage (or the last stage recorded, if the run stopped early)."""
        return self.stages.get(self.spec.steps[-1].name) or self.last


_HOW: list[tuple[Any, Any, str, RecordPolicy, dict[str, str]]] = []  # the last plans made: (steps, shapes, dtype, policy, how)


def planned_how(spec: Spec, policy: RecordPolicy) -> dict[str, str]:
    """How each stage is kept (plan_stages), made once for the same steps and shapes under the same policy: a sweep
    (tracer patch, the lens) starts an executor per cell on variants of one spec (spec._replace keeps those objects)."""
    for steps, shapes, dtype, pol, how in _HOW:
        if steps is spec.steps and shapes is spec.stage_shapes and dtype == spec.dtype and pol == policy:
            return how
    how = {s.name: s.how for s in plan_stages(spec, policy)}
    _HOW.insert(0, (spec.steps, spec.stage_shapes, spec.dtype, policy, how))
    del _HOW[8:]
    return how


class StageKeeper:
    """Keeps each stage as the policy says (full, statistics, or not at all); returns the array unchanged."""

    def __init__(self, trace: Recording) -> None:
        self.trace = trace
        self.how = planned_how(trace.spec, trace.policy)

    def __call__(self, name: str, array: np.ndarray, axes: tuple[str, ...], meaning: str, internal: bool = False) -> np.ndarray:
        how = self.how.get(name, "full")
        if how == "full":
            self.trace.stages[name] = Stage(name, array, axes, meaning, internal)
        elif how == "stats":
            p = self.trace.policy
            self.trace.stages[name] = Stage(name, None, axes, meaning, internal, summarise(array, axes, p.b, p.t))
        elif how == "point":
            self.point(name, array, axes, meaning, internal)
        return array

    def point(self, name: str, array: np.ndarray, axes: tuple[str, ...], meaning: str, internal: bool = False) -> None:
        """Keep the stage's value at the policy's (b, t) alone."""
        p = self.trace.policy
        self.trace.stages[name] = Stage(name, None, axes, meaning, internal, point=Point(tuple(array.shape), p.b, p.t,
                                                                                         _value_copy(array, axes, p.b, p.t)))


def visible_keys(spec: Spec, step: Step, n_q: int) -> np.ndarray | None:
    """[T,T] bool, True where query i may read key j (tracer/model/masks.py); None when every key is visible."""
    if step.mask == "causal":
        return masks.visible("causal", n_q, window=step.window)
    if step.mask == "explicit":
        blk = spec.block_for(step.name)
        assert blk.mask_matrix is not None
        return masks.visible("explicit", n_q, explicit=blk.mask_matrix)  # fewer rows when cut at T_max
    return None


def attention_mask(spec: Spec, step: Step, n_q: int, over_queries: bool) -> tuple[bool, np.ndarray | None]:
    """What multihead.mha takes: ``causal`` (keys after each query are skipped, block by block) and ``visible``, the
    [T,T] mask when attend needs one: any mask but plain causal (a sliding window that hides keys included)."""
    causal = step.mask == "causal"
    plain = causal and not masks.windowed("causal", step.window, n_q)
    return causal, None if plain and not over_queries else visible_keys(spec, step, n_q)


class Executor:
    def __init__(self, spec: Spec, keep_going: bool = False, overrides: dict[str, np.ndarray] | None = None,
                 policy: RecordPolicy | None = None, params: dict[str, np.ndarray] | None = None,
                 inputs: dict[str, np.ndarray] | None = None, by_layer: bool = False, into: dict[str, np.ndarray] | None = None) -> None:
        """``params``, ``inputs``: every weight and input stream, already loaded (a run that repeats the forward pass,
        such as grad --verify, or drawn meanwhile: tracer run, params.draw_params).  ``by_layer`` (tracer run, whose
        weights nothing reads after the run): a layer's weights from files are read when it starts, if ``params``
        left them out (draw_params(by_layer=True)), and every layer's weights are let go after its last step.
        ``into``: by stage name, the array a head or softmax stage writes its value into instead of a new one (the
        lens's stacked tail: its logits, then its probabilities over them, straight into the lens's [layers, T, V]);
        the same numbers either way.  A stage whose value has another shape or dtype makes a new array as usual."""
        self.spec = spec
        self.keep_going = keep_going
        self.overrides = overrides or {}
        self.trace = Recording(spec, policy=policy or RecordPolicy())
        self.recorder = StageKeeper(self.trace)
        self.params = load_params(spec, for_run=True) if params is None else params
        self.inputs = load_inputs(spec) if inputs is None else inputs
        self.seen_nonfinite = False
        self.interventions = {k: interventions.mean_of(iv, reference_stage) for k, iv in interventions.by_stage(spec).items()}
        self.layers = LayerWeights(spec, self.params) if by_layer else None
        self.into = into or {}

    def rec(self, name: str, array: np.ndarray, axes: tuple[str, ...], meaning: str, internal: bool = False) -> np.ndarray:
        self.recorder(name, array, axes, meaning, internal)
        if not self.seen_nonfinite and array.dtype.kind == "f" and not kernels.all_finite(array):
            self.seen_nonfinite = True
            self.flag(self.nonfinite(name, array, axes))
            if name not in self.trace.stages and self.trace.policy.mode == "table":  # the table shows the flagged stage
                self.recorder.point(name, array, axes, meaning, internal)
        return array

    def axes(self, stage: str) -> tuple[str, ...]:
        return self.spec.stage_shapes[stage][0]

    def target(self, stage: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """The array ``into`` gives this stage to write its value into, where it has the value's shape and dtype and is
        C-ordered; else None (a new array, as without ``into``)."""
        out = self.into.get(stage)
        if out is None or out.shape != tuple(shape) or out.dtype != dtype or not out.flags.c_contiguous:
            return None
        return out

    # -- violations -------------------------------------------------------
    def guarded(self, stage: str, axes: tuple[str, ...], compute: Callable[[kernels.Strict], np.ndarray],
                operands: dict[str, tuple[str, ...]] | None = None) -> np.ndarray:
        """Run ``compute`` collecting every broken contract; flag each; the result is what NumPy computes."""
        broken: list[BrokenContract] = []
        out = compute(broken)
        for bc in broken:
            self.flag(violation(bc, stage, axes, operands))
        return out

    def flag(self, v: Violation) -> None:
        """Record a violation; the run stops after the current step unless keep_going."""
        self.trace.violations.append(v)

    @property
    def stopped(self) -> bool:
        if self.keep_going:
            return False
        # NaN and Inf a spec studies on purpose (allow_nonfinite) are flagged but do not end the run
        return any(v.kind != "nonfinite" or not self.spec.allow_nonfinite for v in self.trace.violations)

    def nonfinite(self, name: str, a: np.ndarray, axes: tuple[str, ...]) -> Violation:
        n_nan, n_inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        first = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        where = ", ".join(f"{letter}={i}" for letter, i in zip(axes, first))
        why: Message = msg("NaN and Inf spread to every later stage that reads them")
        blk = self.spec.block_for(name)
        if name.endswith(".weights") and blk.mask_matrix is not None:
            visible = np.array(blk.mask_matrix, dtype=bool)
            rows = [int(i) for i in np.flatnonzero(~visible.any(axis=-1))]
            if rows:
                why = nmsg("query position {rows} may read no key at all: the softmax of a row that is entirely -inf is 0/0 = NaN",
                           "query positions {rows} may read no key at all: the softmax of a row that is entirely -inf is 0/0 = NaN", len(rows),
                           rows=', '.join(map(str, rows)))
        elif self.spec.dtype == "float32":
            why = join([why, msg("float32 overflows above about 3.4e38")])
        return Violation(
            kind="nonfinite", stage=name,
            message=at(name, msg("first stage with non-finite values: {n_nan} NaN and {n_inf} Inf, the first at {where}", n_nan=n_nan, n_inf=n_inf,
                                 where=where)),
            shapes={name: shape_label(axes, a.shape)},
            rule=msg("every stage of a block must be finite"),
            numpy_would=msg("carry on quietly, printing at most a RuntimeWarning"),
            why=why,
        )

    def visible(self, step: Step, n_q: int) -> np.ndarray | None:
        return visible_keys(self.spec, step, n_q)

    # -- the run ----------------------------------------------------------
    def run(self, start: int = 0, live: dict[str, np.ndarray] | None = None) -> Recording:
        """Every step in order; ``start``, ``live``: from step ``start`` on, the stages before it that later steps
        read given (grad --verify's passes, where a perturbed weight cannot change the steps before its layer)."""
        stages: dict[str, np.ndarray] = dict(live or {})
        last_use = {name: i for i, step in enumerate(self.spec.steps) for name in step.inputs}
        start = max(start, interventions.start_of(self.spec))  # --from: the steps before its stage are not computed
        try:
            if self.layers is not None:
                self.layers.begin(start)
            self._steps(start, stages, last_use)
        finally:
            if self.layers is not None:
                self.layers.close()
        return self.trace

    def _steps(self, start: int, stages: dict[str, np.ndarray], last_use: dict[str, int]) -> None:
        for i, step in enumerate(self.spec.steps):
            if i < start:
                continue
            if self.stopped:
                break
            iv = self.interventions.get(step.name)
            if self.layers is not None:
                self.layers.before(i)
            try:
                if step.name in self.overrides:  # the probe's perturbed or permuted stage
                    stages[step.name] = self.rec(step.name, self.overrides[step.name], self.axes(step.name), step.meaning)
                elif iv is not None and iv.kind in ("zero", "set", "from"):  # the stage replaced: its step is not computed
                    stages[step.name] = self.rec(step.name, self.replaced(step, iv), self.axes(step.name), step.meaning)
                else:
                    stages[step.name] = OPS[step.op].run_forward()(self, step, [stages[n] for n in step.inputs])
                    if iv is not None and iv.kind == "mean":
                        axes = self.axes(step.name)
                        self.trace.originals[step.name] = stages[step.name]
                        stages[step.name] = self.rec(step.name, interventions.mean_over_positions(stages[step.name], axes), axes, step.meaning)
                if iv is not None:
                    self.mark(step, iv)
            except ShapeError as e:
                raise ShapeError(msg("stage {name} ({formula}): {e}", name=step.name, formula=step.formula(), e=message_of(e))) from None
            for name in step.inputs:
                if last_use[name] == i:
                    stages.pop(name, None)  # no later step reads it: it lives on only if recorded
            if self.layers is not None:
                self.layers.after(i)

    def replaced(self, step: Step, iv: interventions.Intervention) -> np.ndarray:
        if iv.value is not None:
            return iv.value
        return np.zeros(self.spec.stage_shapes[step.name][1], dtype=np.dtype(self.spec.dtype))

    def mark(self, step: Step, iv: interventions.Intervention) -> None:
        """The intervened stage (and, for a head, the heads stage) says so: the table marks it, JSON names it."""
        names = [step.name] + ([f"{internal_prefix(step)}.heads"] if iv.kind == "heads" else [])
        for name in names:
            stage = self.trace.stages.get(name)
            if stage is not None:
                stage.intervention = iv.describe()

    def record_step(self, step: Step, compute: Callable[[kernels.Strict], np.ndarray]) -> np.ndarray:
        axes = self.axes(step.name)
        return self.rec(step.name, self.guarded(step.name, axes, compute, operand_axes(step, self.axes)), axes, step.meaning)


# -- each op's step, forward_NAME, as its record names it (tracer.model.ops) ---
# entry and exit
def forward_embed(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    table, ids = ex.params["embedding"], ex.inputs[step.stream or "tokens"]
    return ex.record_step(step, lambda strict: table[ids])  # [V,C] rows -> [B,T,C]


def forward_input(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    return ex.record_step(step, lambda strict: ex.inputs[step.stream or "x"])


def forward_position_table(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    P = ex.params["position"]
    axes = ex.axes(step.name)
    T = ex.spec.stage_shapes[step.name][1][0]
    beyond = position_violation(ex.spec, step)
    if beyond is not None:
        ex.flag(beyond)
        return ex.rec(step.name, P, ("T_max", "C"), step.meaning)  # --keep-going traces the T_max positions it covers
    return ex.rec(step.name, P[:T], axes, step.meaning)  # [T,C], shared by every sample


def forward_sinusoidal(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    T, C = ex.spec.stage_shapes[step.name][1]
    base = step.base
    assert base is not None, "spec validation sets the base of a sinusoidal step"
    return ex.record_step(step, lambda strict: embeddings.sinusoidal(T, C, base, np.dtype(ex.spec.dtype)))


def forward_add_position(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    h, pos = inputs
    if h.shape[1] > pos.shape[0]:  # after a position violation: only the positions the table covers
        h = h[:, : pos.shape[0]]
    return ex.record_step(step, lambda strict: h + pos)  # [B,T,C] + [T,C]: the contract broadcast over B


def forward_head(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (h,) = inputs
    w = ex.params["embedding"].T if ex.spec.block.head == "tied" else ex.params["head"]  # [C,V]
    if ex.spec.block.head_bias:  # Phi's lm_head: logits + b_head
        b = ex.params["head_bias"]
        return ex.record_step(step, lambda strict: kernels.linear(h, w, b, strict, ("head_bias", "V")))
    out = ex.target(step.name, (*h.shape[:-1], w.shape[1]), np.result_type(h, w)) if h.ndim >= 2 and h.shape[-1] == w.shape[0] else None
    if out is not None:
        return ex.record_step(step, lambda strict: np.matmul(h, w, out=out))  # the same product, in the array given
    return ex.record_step(step, lambda strict: h @ w)


def forward_softmax(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    x = inputs[0]
    out = ex.target(step.name, x.shape, x.dtype)
    return ex.record_step(step, lambda strict: kernels.softmax_by_rows(x, SOFTMAX_ROWS, out=out))


# -- block ops ---------------------------------------------------------------
def forward_layer_norm(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    g, b = ex.params[f"{step.weights}.gamma"], ex.params[f"{step.weights}.beta"]
    labels = ex.axes(step.inputs[0])
    axis = labels.index(step.axis or "C")
    return ex.record_step(step, lambda strict: norms.layer_norm(x, g, b, step.epsilon(), axis, strict, labels))


def forward_rms_norm(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    g = ex.params[f"{step.weights}.gamma"]
    return ex.record_step(step, lambda strict: norms.rms_norm(x, g, step.epsilon(), strict))


def forward_batch_norm(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    g, b = ex.params[f"{step.weights}.gamma"], ex.params[f"{step.weights}.beta"]
    return ex.record_step(step, lambda strict: norms.batch_norm(x, g, b, step.epsilon(), strict))


def forward_add(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    a, b = inputs
    names = (step.inputs[0], step.inputs[1]) if step.inputs[0] != step.inputs[1] else ("left", "right")
    return ex.record_step(step, lambda strict: kernels.add(a, b, strict, names))


def forward_identity(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    return ex.record_step(step, lambda strict: inputs[0])


def forward_relu(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    return ex.record_step(step, lambda strict: ffn.relu(inputs[0]))


def forward_select(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    i = ex.axes(step.inputs[0]).index(step.axis or "B")
    index = tuple(slice(step.start, step.stop) if j == i else slice(None) for j in range(x.ndim))
    return ex.record_step(step, lambda strict: x[index])  # keeps the axis: [B,T,C] -> [1,T,C]


def forward_linear(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    w, b = ex.params[f"{step.weights}.w"], ex.params[f"{step.weights}.b"]
    return ex.record_step(step, lambda strict: kernels.linear(x, w, b, strict, ("b", step.out or "C")))


def forward_mha(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    xq = inputs[0]
    xkv = inputs[1] if step.op == "cross_mha" else xq
    bias = inputs[1] if step.op == "mha" and len(inputs) > 1 else None  # positions: relative: the stack's position bias [H,T,T]
    g = step.weights
    w = {k: ex.params[f"{g}.{k}"] for k in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")}
    # Qwen3's block.qk_norm: q and k RMS-normalised per head, with the block's eps (the step's); Gemma 3's scale by (1 + w)
    q_norm, k_norm = (qk_scale(step, ex.params[f"{g}.q_norm"]), qk_scale(step, ex.params[f"{g}.k_norm"])) if step.qk_norm else (None, None)
    ablated = ex.interventions.get(step.name)
    if ablated is not None and ablated.kind == "heads":  # --ablate ATTN.head.N: the head's rows of W_O meet zeros
        w["w_o"] = w["w_o"] * ablated.head_mask(w["w_o"].shape[:1], w["w_o"].dtype)[:, None]
    over_queries = step.axis == "queries"
    causal, visible = attention_mask(ex.spec, step, xq.shape[1], over_queries)  # attend masks plain causal blocks itself
    parts: dict[str, np.ndarray] = {}
    prefix = internal_prefix(step)
    # scores and weights ([B,H,T,S] each) are made only when they are kept; the output is the same either way
    keep = any(ex.recorder.how.get(f"{prefix}.{key}", "full") != "skip" for key in ("scores", "weights"))
    edits = ablated.kernel_edits() if ablated is not None and ablated.kind == "head" else None  # --set ATTN.head.N[.PART], tracer patch

    def compute(strict: kernels.Strict) -> np.ndarray:
        parts.update(multihead.mha(xq, xkv, **w, H=ex.spec.dims.H, H_kv=ex.spec.dims.H_kv, visible=visible,
                                 softmax_over_queries=over_queries, rotary_base=step.base,
                                 rotary_pairing=step.pairing or "interleaved", causal=causal, keep_weights=keep, strict=strict,
                                 rotary_scaling=step.scaling, rotary_dim=step.rotary_dim,
                                 q_norm=q_norm, k_norm=k_norm, qk_eps=step.epsilon() if step.qk_norm else None, scale=step.scale,
                                 softcap=step.softcap, bias=bias, qk_projection=bool(step.qk_projection), edits=edits))
        return parts["output"]

    out = ex.guarded(step.name, ex.axes(f"{prefix}.scores") if over_queries else ex.axes(step.name), compute)
    if ablated is not None and ablated.kind == "heads" and "heads" in parts:  # the heads as W_O reads them: the ablated ones zero
        parts["heads"] = parts["heads"] * ablated.head_mask(parts["heads"].shape, parts["heads"].dtype)
    for key, meaning in ATTN_MEANINGS.items():
        if key not in parts:  # scores and weights not made: not kept, and finite (attend makes them when not)
            continue
        if key == "scores":
            meaning = scores_meaning(step)  # QK^T * s under block.attention_scale
            if bias is not None:
                meaning = msg("{meaning}, plus the position bias {bias}", meaning=meaning, bias=step.inputs[1])
        if step.qk_norm and key in ("q", "k"):
            meaning = (msg("{meaning}, after the RMS norm of the whole projection", meaning=meaning) if step.qk_projection
                       else msg("{meaning}, RMS-normalised per head", meaning=meaning))
        if step.base is not None and key in ("q", "k"):
            meaning = msg("{meaning}, turned by rotary positions", meaning=meaning)
        if step.softcap is not None and key == "scores":  # Gemma 2: the scores soft-capped before the mask
            meaning = softcapped_scores(step)
        shown = shown_internal(step, key)  # the cross-attention weights are in the default table
        ex.rec(f"{prefix}.{key}", parts[key], ex.axes(f"{prefix}.{key}"), meaning, internal=not shown)
    return ex.rec(step.name, out, ex.axes(step.name), step.meaning)


def _ffn_params(ex: Executor, step: Step) -> dict[str, np.ndarray]:
    keys = ("w1", "b1", "w2", "b2") + (("w3", "b3") if is_gated(step.activation) else ())
    return {k: ex.params[f"{step.weights}.{k}"] for k in keys}


def forward_ffn(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    p = _ffn_params(ex, step)

    def compute(strict: kernels.Strict) -> np.ndarray:
        h = ffn.ffn_hidden(x, p["w1"], p["b1"], step.activation, p.get("w3"), p.get("b3"), strict)
        return ffn.ffn_out(h, p["w2"], p["b2"], strict)

    return ex.record_step(step, compute)


def forward_ffn_hidden(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    p = _ffn_params(ex, step)
    return ex.record_step(step, lambda strict: ffn.ffn_hidden(x, p["w1"], p["b1"], step.activation, p.get("w3"), p.get("b3"), strict))


def forward_ffn_out(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (h,) = inputs
    w2, b2 = ex.params[f"{step.weights}.w2"], ex.params[f"{step.weights}.b2"]
    return ex.record_step(step, lambda strict: ffn.ffn_out(h, w2, b2, strict))


# a mixture of experts
def experts_of(params: dict[str, np.ndarray], group: str | None, E: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """A mixture of experts' matrices, expert by expert: W1_e, W3_e, W2_e."""
    return tuple([params[f"{group}.{k}_{e}"] for e in range(E)] for k in ("w1", "w3", "w2"))  # type: ignore[return-value]


def forward_router(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    w_g = ex.params[f"{step.weights}.router"]
    return ex.record_step(step, lambda strict: ffn.router(inputs[0], w_g))


def forward_router_probs(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    return ex.record_step(step, lambda strict: ffn.router_softmax(inputs[0], step.axis == "T", strict))


def forward_top_k(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    k = ex.spec.block_for(step.name).top_k or 1
    return ex.record_step(step, lambda strict: ffn.top_k(inputs[0], k))


def forward_expert_mix(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    x, gates = inputs
    w1, w3, w2 = experts_of(ex.params, step.weights, ex.spec.dims.E or 0)
    return ex.record_step(step, lambda strict: ffn.expert_mix(x, gates, w1, w3, w2))


def reference_stage(spec: Spec, stage: str) -> np.ndarray | None:
    """A reference run's stage in full (--ablate X=mean-over:REF); None when the run has a violation."""
    with np.errstate(all="ignore"):
        rec = Executor(spec, policy=RecordPolicy("table", frozenset({stage}))).run()
    return rec.stages[stage].array if rec.ok and stage in rec.stages else None


def run(spec: Spec, keep_going: bool = False, overrides: dict[str, np.ndarray] | None = None,
        policy: RecordPolicy | None = None, params: dict[str, np.ndarray] | None = None,
        inputs: dict[str, np.ndarray] | None = None, by_layer: bool = False) -> Recording:
    with np.errstate(all="ignore"):  # NaN and Inf are reported as violations, not as warnings on stderr
        return Executor(spec, keep_going, overrides, policy, params, inputs, by_layer).run()


# -- BERT's embeddings ---------------------------------------------
def forward_token_type_table(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    table, types = ex.params["token_type"], ex.inputs["token_types"]
    return ex.record_step(step, lambda strict: embeddings.token_type_rows(table, types))  # [V_type,C] rows -> [B,T,C]


def forward_position_offset(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    P = ex.params["position"]
    axes = ex.axes(step.name)
    T = ex.spec.stage_shapes[step.name][1][0]
    offset = step.start or 0
    beyond = position_violation(ex.spec, step)
    if beyond is not None:
        ex.flag(beyond)
        rows = embeddings.position_rows(P, offset, T)
        return ex.rec(step.name, rows, ("T_max", "C"), step.meaning)  # --keep-going traces the rows the table has
    return ex.rec(step.name, embeddings.position_rows(P, offset, T), axes, step.meaning)  # [T,C], shared by every sample


# -- Gemma's scaled embeddings and its RMSNorm with (1 + gamma) -------------------------
def forward_embed_scale(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    return ex.record_step(step, lambda strict: embeddings.embed_scale(inputs[0]))


def forward_rms_norm_offset(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    g = ex.params[f"{step.weights}.gamma"]
    return ex.record_step(step, lambda strict: norms.rms_norm_offset(x, g, step.epsilon(), strict))


# -- Gemma 2's soft cap of the logits (the scores' is attention.attend's) ------------------------------
def forward_softcap(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    cap = step.softcap
    assert cap is not None, "a softcap step has its cap"
    return ex.record_step(step, lambda strict: embeddings.softcap(inputs[0], cap))


def qk_scale(step: Step, w: np.ndarray) -> np.ndarray:
    """The factor of a per-head q or k norm: its weight, or 1 + weight where the block's norms are Gemma's (qk_norm offset)."""
    return 1.0 + w if step.qk_norm == QK_OFFSET else w



# -- T5's relative position bias (positions: relative) -------------------------------------
def relative_buckets_of(step: Step, n_q: int, n_k: int) -> np.ndarray:
    assert step.relative is not None
    buckets, distance, bidirectional = step.relative
    return embeddings.relative_buckets(n_q, n_k, bidirectional, buckets, distance)


def forward_relative_bias(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    table = ex.params[step.weights or "relative_bias"]
    _, n_q, n_k = ex.spec.stage_shapes[step.name][1]
    beyond = relative_violation(ex.spec, step)
    if beyond is not None:  # a bucket past the table's rows: flagged; --keep-going reads the last row for it
        ex.flag(beyond)
    return ex.rec(step.name, embeddings.relative_bias(table, relative_buckets_of(step, n_q, n_k)), ex.axes(step.name), step.meaning)


# -- Granite's multipliers (block.embedding_multiplier, residual_multiplier, logits_divisor) ------------------
def forward_scale(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    s = step.scale
    assert s is not None, "a scale step has its number"
    return ex.record_step(step, lambda strict: embeddings.scale(inputs[0], s))


def forward_divide(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    s = step.scale
    assert s is not None, "a divide step has its number"
    return ex.record_step(step, lambda strict: embeddings.divide(inputs[0], s))


# -- the task heads (block.pooler, block.classifier, block.mlm) -------------------------------
def pool_index_of(spec: Spec, step: Step, inputs: dict[str, np.ndarray], T: int) -> np.ndarray:
    return embeddings.pool_index(step.pool or "first", T, inputs.get("tokens"), step.pad)


def forward_pool(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    index = pool_index_of(ex.spec, step, ex.inputs, x.shape[1])
    return ex.record_step(step, lambda strict: embeddings.pool(x, index))


def forward_dense(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    w, b = ex.params[f"{step.weights}.w"], ex.params[f"{step.weights}.b"]
    act = activation_of(step.activation).run_forward()
    return ex.record_step(step, lambda strict: act(kernels.linear(x, w, b, strict, ("b", step.out or "C")), inplace=True))


forward_score = forward_linear  # x W + b, at any rank


# -- T5's tied head, the decoder's output times C ** -0.5 (block.head_scale) ---------------
def forward_head_scale(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    return ex.record_step(step, lambda strict: embeddings.head_scale(inputs[0]))
