"""--verify: run the scalar reference beside the NumPy path and compare stage by stage."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import reference
from .executor import Trace
from .params import load_inputs, load_params


@dataclass
class Verification:
    plan: reference.Plan
    stages: dict[str, float]  # stage -> largest absolute difference over what was verified

    @property
    def max_abs_diff(self) -> float:
        return max(self.stages.values(), default=0.0)

    def as_json(self) -> dict[str, object]:
        p = self.plan
        return {
            "max_abs_diff": self.max_abs_diff if self.stages else None,  # null: nothing was verified
            "stages": dict(self.stages),
            "full": p.full,
            "samples": list(p.samples),
            "positions": list(p.positions),
            "note": p.reason,
        }


    def note(self) -> str:
        """The line (two when partial) printed under the table, in the current language."""
        from .i18n import message

        p = self.plan
        if p.skipped:
            return message(f"verify: skipped: {p.reason}")
        head = f"verify: largest |NumPy - reference| over all stages = {self.max_abs_diff:.3g}"
        if p.full:
            return message(head + " (every sample and position)")
        return message(head + f"\nverify: partial: {p.reason}")


def verify(trace: Trace, budget: int = reference.DEFAULT_BUDGET) -> Verification:
    spec = trace.spec
    plan = reference.plan(spec, budget)
    if trace.violations:
        # The reference computes the block its contracts define; a run that broke one has no faithful counterpart.
        v = trace.violations[0]
        why = f" ({plan.reason})" if plan.skipped and plan.reason else ""
        reason = f"the run flagged a {v.kind} violation at stage {v.stage}{why}; the reference only computes blocks that keep every contract"
        return Verification(reference.Plan([], [], False, 0, plan.full_cost, reason), {})
    if plan.skipped:
        return Verification(plan, {})
    params = {k: v.tolist() for k, v in load_params(spec).items()}
    inputs = {k: v.tolist() for k, v in load_inputs(spec).items()}
    ref = reference.Reference(spec, params, inputs).run(plan.samples, plan.positions)
    diffs: dict[str, float] = {}
    for name, stage in trace.stages.items():
        cells = ref.get(name)
        if cells is None or stage.data is None:  # kept as statistics: nothing to compare position by position
            continue
        worst = 0.0
        for (b, t), expected in cells.items():
            got = np.asarray(stage.at(b, t)).tolist()
            worst = max(worst, reference.max_abs_diff(got, expected))
        diffs[name] = worst
    return Verification(plan, diffs)
