"""Run a spec's step list through the kernels and record every stage.

Recording is an identity wrap: ``x = rec("norm1", layer_norm(x, ...))``.
A kernel's BrokenContract becomes a Violation naming the stage; by default the
run stops there, with ``keep_going`` NumPy's result is recorded and the run
goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import kernels
from .blocks import ATTN_STAGES, ENTRY_STAGES, OP_AXES, Step
from .errors import BrokenContract, ShapeError, Violation
from .params import load_input, load_params
from .spec import Spec, shape_label


@dataclass
class Stage:
    name: str
    array: np.ndarray
    axes: tuple[str, ...]
    meaning: str
    internal: bool = False  # attention internals: shown with --all

    @property
    def shape_label(self) -> str:
        return shape_label(self.axes, self.array.shape)

    def at(self, b: int, t: int) -> np.ndarray:
        """The stage's value for sample b at (query) position t: [C], [F], [H,d] or [H,T]."""
        index: list[int | slice] = []
        seen_t = False
        for axis in self.axes:
            if axis == "B":
                index.append(b)
            elif axis == "T" and not seen_t:
                index.append(t)
                seen_t = True
            else:
                index.append(slice(None))
        return self.array[tuple(index)]


@dataclass
class Trace:
    spec: Spec
    stages: dict[str, Stage] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def last(self) -> Stage:
        return next(reversed(self.stages.values()))


class Recorder:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def __call__(self, name: str, array: np.ndarray, axes: tuple[str, ...], meaning: str, internal: bool = False) -> np.ndarray:
        self.trace.stages[name] = Stage(name, array, axes, meaning, internal)
        return array


def _axes_label(shape: tuple[int, ...], axes: tuple[str, ...]) -> str:
    return shape_label(axes, shape) if len(axes) == len(shape) else str(list(shape))


class Executor:
    def __init__(self, spec: Spec, keep_going: bool = False) -> None:
        self.spec = spec
        self.keep_going = keep_going
        self.trace = Trace(spec)
        self.rec = Recorder(self.trace)
        self.params = load_params(spec)

    # -- violations -------------------------------------------------------
    def guarded(self, stage: str, axes: tuple[str, ...], compute: Callable[[bool], np.ndarray]) -> np.ndarray:
        """Run ``compute(strict=True)``; on a broken contract record it, then stop or go on."""
        try:
            return compute(True)
        except BrokenContract as bc:
            self.flag(Violation(
                kind=bc.kind, stage=stage, message=f"{stage}: {bc.fact}",
                shapes={name: _axes_label(shape, axes if len(shape) == len(axes) else axes[-len(shape):]) for name, shape in bc.operands.items()},
                rule=bc.fact, numpy_would=bc.numpy_would, why=bc.why,
            ))
            return compute(False)

    def flag(self, v: Violation) -> None:
        """Record a violation; the run stops after the current stage unless keep_going."""
        self.trace.violations.append(v)

    @property
    def stopped(self) -> bool:
        return bool(self.trace.violations) and not self.keep_going

    # -- the run ----------------------------------------------------------
    def run(self) -> Trace:
        stages = {"x": self.entry()}
        for step in self.spec.steps:
            if self.stopped:
                break
            try:
                stages[step.name] = self.step(step, [stages[i] for i in step.inputs])
            except ShapeError as e:
                raise ShapeError(f"stage {step.name} ({step.formula()}): {e}") from None
        return self.trace

    def entry(self) -> np.ndarray:  # tokens [B,T] or input [B,T,C] -> X [B,T,C]
        spec, p, rec = self.spec, self.params, self.rec
        inp = load_input(spec)
        if spec.input.kind == "tokens":
            h = self.rec_entry("embed", p["embedding"][inp])  # [V,C] rows -> [B,T,C]
        else:
            h = self.rec_entry("input", inp)
        if spec.block.positions == "none":
            return self.rec_entry("x", h)
        T, T_max = spec.dims.T, p["position"].shape[0]
        if T > T_max:
            self.flag(Violation(
                kind="position", stage="position",
                message=f"position: T = {T} positions but the learned table has T_max = {T_max} rows (indices 0 to {T_max - 1})",
                shapes={"position": shape_label(("T_max", "C"), p["position"].shape), "x": shape_label(("B", "T", "C"), h.shape)},
                rule="a learned position table has one row per position 0 .. T_max-1",
                numpy_would="fail to slice rows that do not exist, or (with index arithmetic) reuse earlier rows",
                why=f"position {T_max} and later were never trained; the table cannot invent them (section 17.1)",
            ))
            T = T_max  # trace only the positions the table covers
            h = h[:, :T]
            self.rec_entry("embed" if spec.input.kind == "tokens" else "input", h)
        pos = self.rec_entry("position", p["position"][:T])  # [T,C], shared by every sample
        return self.rec_entry("x", h + pos)  # [B,T,C] + [T,C]: the contract broadcast over B

    def rec_entry(self, name: str, array: np.ndarray) -> np.ndarray:
        meaning, axes = ENTRY_STAGES[name]
        return self.rec(name, array, axes, meaning)

    def step(self, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
        op = OPS[step.op]
        return op(self, step, inputs)


def _op_layer_norm(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    p, eps = ex.params, ex.spec.block.eps
    g, b = p[f"{step.weights}.gamma"], p[f"{step.weights}.beta"]
    y = ex.guarded(step.name, OP_AXES["layer_norm"], lambda strict: kernels.layer_norm(x, g, b, eps, strict))
    return ex.rec(step.name, y, OP_AXES["layer_norm"], step.meaning)


def _op_add(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    a, b = inputs
    y = ex.guarded(step.name, OP_AXES["add"], lambda strict: kernels.add(a, b, strict))
    return ex.rec(step.name, y, OP_AXES["add"], step.meaning)


def _op_identity(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    return ex.rec(step.name, inputs[0], OP_AXES["identity"], step.meaning)


def _op_mha(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    g = step.weights
    w = {k: ex.params[f"{g}.{k}"] for k in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")}
    causal = ex.spec.block.mask == "causal"
    parts = ex.guarded(step.name, OP_AXES["mha"], lambda strict: kernels.mha(x, **w, H=ex.spec.dims.H, causal=causal, strict=strict))
    prefix = "attn" if step.name == "attention" else step.name
    for key in ("q", "k", "v", "scores", "weights", "heads"):
        meaning, axes = ATTN_STAGES[f"attn.{key}"]
        ex.rec(f"{prefix}.{key}", parts[key], axes, meaning, internal=True)
    return ex.rec(step.name, parts["output"], OP_AXES["mha"], step.meaning)


def _op_ffn_hidden(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (x,) = inputs
    w1, b1 = ex.params[f"{step.weights}.w1"], ex.params[f"{step.weights}.b1"]
    y = ex.guarded(step.name, OP_AXES["ffn_hidden"], lambda strict: kernels.ffn_hidden(x, w1, b1, strict))
    return ex.rec(step.name, y, OP_AXES["ffn_hidden"], step.meaning)


def _op_ffn_out(ex: Executor, step: Step, inputs: list[np.ndarray]) -> np.ndarray:
    (h,) = inputs
    w2, b2 = ex.params[f"{step.weights}.w2"], ex.params[f"{step.weights}.b2"]
    y = ex.guarded(step.name, OP_AXES["ffn_out"], lambda strict: kernels.ffn_out(h, w2, b2, strict))
    return ex.rec(step.name, y, OP_AXES["ffn_out"], step.meaning)


OPS: dict[str, Callable[[Executor, Step, list[np.ndarray]], np.ndarray]] = {
    "layer_norm": _op_layer_norm,
    "add": _op_add,
    "identity": _op_identity,
    "mha": _op_mha,
    "ffn_hidden": _op_ffn_hidden,
    "ffn_out": _op_ffn_out,
}


def run(spec: Spec, keep_going: bool = False) -> Trace:
    with np.errstate(all="ignore"):  # NaN and Inf are reported as stages, not as warnings on stderr
        return Executor(spec, keep_going).run()
