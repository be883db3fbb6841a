"""``tracer grad --verify``: the backward pass checked against central finite differences, without torch.

For a sample of coordinates of every weight (all of a small weight, SAMPLES drawn from the seed of a
larger one) the loss is run forward at w + h and w - h; (L(w+h) - L(w-h)) / 2h must agree with the
gradient the backward pass gives within

    |numeric - backward| <= GRAD_RTOL * (|numeric| + |backward|) + GRAD_ATOL * max(1, |L|)

with h = STEP * max(1, |w|).  The truncation error of a central difference is O(h^2) and its rounding
error about 1e-16 * |L| / h, so in float64 both stay far below the tolerance unless a perturbation
crosses a kink (ReLU at 0), which the sample makes unlikely.  A float32 spec is checked in float64: the
check is of the backward formulas, not of float32 rounding.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tracer.engine import executor
from tracer.engine.params import uniform_ints
from tracer.grad import losses
from tracer.grad.run import LAYER, GradTrace, backward
from tracer.messages import Message, msg
from tracer.spec import Spec
from tracer.spec.memory import RecordPolicy

STEP = 1e-6
GRAD_RTOL = 1e-6
GRAD_ATOL = 1e-8
SAMPLES = 4  # coordinates per weight


class Check(NamedTuple):
    weight: str
    at: tuple[int, ...]  # the coordinate
    backward: float
    numeric: float

    @property
    def error(self) -> float:
        return abs(self.numeric - self.backward)


class GradientCheck(NamedTuple):
    checks: list[Check]
    loss: float

    def tolerance(self, c: Check) -> float:
        return GRAD_RTOL * (abs(c.numeric) + abs(c.backward)) + GRAD_ATOL * max(1.0, abs(self.loss))

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.error <= self.tolerance(c)]

    @property
    def ok(self) -> bool:
        return not self.failed

    def note(self) -> Message:
        worst = max(self.checks, key=lambda c: c.error / self.tolerance(c), default=None)
        weights = len({c.weight for c in self.checks})
        if worst is None:
            result = msg("nothing to check")
        elif self.ok:
            result = msg("all agree; the largest difference {d} ({where})", d=f"{worst.error:.3g}", where=f"{worst.weight}{list(worst.at)}")
        else:
            bad = self.failed[0]
            result = msg("{n} disagree, the first {where}: backward {backward}, numeric {numeric}", n=len(self.failed),
                         where=f"{bad.weight}{list(bad.at)}", backward=repr(bad.backward), numeric=repr(bad.numeric))
        return msg("--verify: {n} coordinates of {w} weights by central differences (h = {h} * max(1, |w|)), "
                   "tolerance {rtol} * (|numeric| + |backward|) + {atol} * max(1, |loss|): {result}",
                   n=len(self.checks), w=weights, h=f"{STEP:g}", rtol=f"{GRAD_RTOL:g}", atol=f"{GRAD_ATOL:g}", result=result)

    def as_json(self) -> dict[str, object]:
        return {"ok": self.ok, "step": STEP, "rtol": GRAD_RTOL, "atol": GRAD_ATOL,
                "checks": [{"weight": c.weight, "index": list(c.at), "backward": c.backward, "numeric": c.numeric,
                            "ok": c.error <= self.tolerance(c)} for c in self.checks]}


class Forward:
    """The loss of forward passes with perturbed weights.  A weight of layer l (``blocks.l.``...) cannot change the
    steps before that layer's first step, so a pass starts there, from the stages one unperturbed pass recorded;
    it keeps in full only the stages the loss reads."""

    def __init__(self, spec: Spec, params: dict[str, np.ndarray], loss_name: str) -> None:
        self.spec, self.params, self.loss_name = spec, params, loss_name
        self.keep = losses.stages_read(spec)
        with np.errstate(all="ignore"):
            trace = executor.Executor(spec, keep_going=True, params=params).run()  # every stage kept in full
        self.recorded = {name: st.data for name, st in trace.stages.items() if st.data is not None}

    def start(self, weight: str) -> tuple[int, dict[str, np.ndarray]]:
        """The first step the weight can change, and the stages before it that the steps from there read."""
        m = LAYER.match(weight)  # a stack's layer: blocks.3, encoder.blocks.0
        steps = self.spec.steps
        first = next((i for i, st in enumerate(steps) if m and st.name.startswith(m.group(1) + ".")), 0)
        before = {st.name for st in steps[:first]}
        read = {n for st in steps[first:] for n in st.inputs if n in before}
        if not read <= self.recorded.keys():
            return 0, {}
        return first, {n: self.recorded[n] for n in read}

    def loss(self, weight: str) -> float:
        first, live = self.start(weight)
        ex = executor.Executor(self.spec, keep_going=True, policy=RecordPolicy("table", self.keep), params=self.params)
        with np.errstate(all="ignore"):
            return losses.compute(ex.run(first, live), self.loss_name, ex.inputs).value


def coordinates(spec: Spec, name: str, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    n = int(np.prod(shape))
    if n <= SAMPLES:
        flat = list(range(n))
    else:
        flat = sorted(set(uniform_ints(spec.seed or 0, f"grad.verify.{name}", (SAMPLES,), n).tolist()))
    return [tuple(int(i) for i in np.unravel_index(f, shape)) for f in flat]


def verify(g: GradTrace) -> GradientCheck:
    assert g.loss is not None
    spec = g.spec._replace(dtype="float64")
    base = backward(executor.run(spec, keep_going=True), g.loss.name) if g.spec.dtype != "float64" else g
    params = {k: v.astype(np.float64) for k, v in base.weights.items()}
    checks = []
    forward = Forward(spec, params, g.loss.name)
    for name, w in params.items():
        for index in coordinates(spec, name, w.shape):
            h = STEP * max(1.0, abs(float(w[index])))
            old = w[index]
            w[index] = old + h
            up = forward.loss(name)
            w[index] = old - h
            down = forward.loss(name)
            w[index] = old
            checks.append(Check(name, index, float(base.weight_grads[name][index]), (up - down) / (2 * h)))
    assert base.loss is not None
    return GradientCheck(checks, base.loss.value)
