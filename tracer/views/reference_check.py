"""--verify: run the scalar reference beside the NumPy path and compare stage by stage."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracer.engine import reference
from tracer.engine.executor import Recording
from tracer.engine.params import load_inputs, load_params
from tracer.errors import Violation
from tracer.messages import join, msg
from tracer.model.contracts import kind_word

# A stage fails verification when its largest |NumPy - reference| exceeds REFERENCE_RTOL[dtype] x max(1, the largest
# |reference value| of the stage).  The chapter specs agree to 1e-15 in float64 and GPT-2-size blocks to
# about 1e-6 in float32 (the reference computes in float64), so these bounds leave a wide margin.
REFERENCE_RTOL = {"float64": 1e-9, "float32": 1e-4}


@dataclass
class ReferenceCheck:
    plan: reference.Plan
    stages: dict[str, float]  # stage -> largest absolute difference over what was verified
    scales: dict[str, float] = field(default_factory=dict)  # stage -> largest |reference value| verified
    rtol: float = REFERENCE_RTOL["float64"]

    @property
    def max_abs_diff(self) -> float:
        return max(self.stages.values(), default=0.0)

    def allowed(self, stage: str) -> float:
        return self.rtol * max(1.0, self.scales.get(stage, 0.0))

    @property
    def failing(self) -> list[str]:
        """Stages whose difference is above the tolerance (NaN where the reference has a number counts as inf)."""
        return [name for name, d in self.stages.items() if not d <= self.allowed(name)]

    def violation(self) -> Violation | None:
        """The first failing stage as a violation of kind "verify" (exit 1), or None."""
        failing = self.failing
        if not failing:
            return None
        name = failing[0]
        more = f"; {len(failing) - 1} more stage{'s' if len(failing) > 2 else ''} differ too" if len(failing) > 1 else ""
        return Violation(
            "verify", name,
            msg("NumPy and the scalar reference differ by {stages} at stage {name}, above the tolerance {name2}{more}", stages=f"{self.stages[name]:.3g}",
                name=name, name2=f"{self.allowed(name):.3g}", more=more),
            rule=msg("--verify: every stage agrees with tracer/reference.py to within {rtol} x max(1, largest |value|)", rtol=f"{self.rtol:g}"),
            why=msg("one of the two computations is wrong for this input: the trace's numbers cannot be trusted"),
        )

    def as_json(self) -> dict[str, object]:
        p = self.plan
        return {
            "max_abs_diff": _number(self.max_abs_diff) if self.stages else None,  # null: nothing was verified
            "stages": {name: _number(d) for name, d in self.stages.items()},
            "rtol": self.rtol,
            "failing": self.failing,
            "full": p.full,
            "samples": list(p.samples),
            "positions": list(p.positions),
            "note": p.reason,
        }


    def note(self) -> str:
        """The line (two when partial) printed under the table, in the current language."""
        from tracer.messages import render

        p = self.plan
        if p.skipped:
            return render(msg("verify: skipped: {reason}", reason=p.reason))
        x = f"{self.max_abs_diff:.3g}"
        if p.full:
            return render(msg("verify: largest |NumPy - reference| over all stages = {x} (every sample and position)", x=x))
        return render(join([msg("verify: largest |NumPy - reference| over all stages = {x}", x=x), msg("verify: partial: {reason}", reason=p.reason)], "\n"))


def _number(x: float) -> object:
    """A difference as JSON has it: infinity (NaN where the reference has a number) as the string "Infinity"."""
    from tracer.views.trace_json import array_json

    return array_json(np.float64(x))


def verify(trace: Recording, budget: int = reference.DEFAULT_BUDGET) -> ReferenceCheck:
    spec = trace.spec
    plan = reference.plan(spec, budget)
    if trace.violations:
        # The reference computes the block its contracts define; a run that broke one has no faithful counterpart.
        v = trace.violations[0]
        if plan.skipped and plan.reason:
            reason = msg("the run flagged a {kind} violation at stage {stage} ({reason}); the reference only computes blocks that keep every contract",
                         kind=kind_word(v.kind), stage=v.stage, reason=plan.reason)
        else:
            reason = msg("the run flagged a {kind} violation at stage {stage}; the reference only computes blocks that keep every contract",
                         kind=kind_word(v.kind), stage=v.stage)
        return ReferenceCheck(reference.Plan([], [], False, 0, plan.full_cost, reason), {})
    if plan.skipped:
        return ReferenceCheck(plan, {})
    arrays = load_params(spec)
    by_columns = [k for k, v in arrays.items() if v.ndim == 2 and k not in ("embedding", "position", "token_type")
                  and not k.endswith("relative_bias")]  # tables are read by rows (T5's relative-bias tables too)  # read a column at a time
    columns = {k: arrays[k].T.tolist() for k in by_columns}  # W.T made by NumPy: a copy the reference would make in Python
    params = {k: v.tolist() for k, v in arrays.items() if k not in columns}
    del arrays
    inputs = {k: v.tolist() for k, v in load_inputs(spec).items()}
    ref = reference.Reference(spec, params, inputs, columns).run(plan.samples, plan.positions)
    diffs: dict[str, float] = {}
    scales: dict[str, float] = {}
    for name, stage in trace.stages.items():
        cells = ref.get(name)
        if cells is None or stage.data is None:  # kept as statistics: nothing to compare position by position
            continue
        worst = scale = 0.0
        for (b, t), expected in cells.items():
            got = np.asarray(stage.at(b, t)).tolist()
            worst = max(worst, reference.max_abs_diff(got, expected))
            scale = max(scale, reference.max_abs(expected))
        diffs[name] = worst
        scales[name] = scale
    return ReferenceCheck(plan, diffs, scales, REFERENCE_RTOL.get(spec.dtype, REFERENCE_RTOL["float32"]))
