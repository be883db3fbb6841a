"""What a run would flag, known from the spec's shapes and settings alone, before anything runs.

`tracer validate` reports these with the violation kind and exit code 1 that `tracer run` gives;
`tracer graph` marks the steps that break them.  Each check is the kernel's own (kernels.check_* and
the position check), stated on shapes in tracer.model.contracts: the kernels call the same functions with
their arrays' shapes while running, so the fact, kind and shapes are exactly what the run reports.
No NumPy is imported (graph and validate stay quick):
- a weight vector NumPy would stretch (`beta: [0]` where [C] is due), in every norm, linear and bias;
- LayerNorm statistics over another axis than C, BatchNorm in a text block;
- softmax over queries;
- an elementwise add of two differently shaped stages;
- positions beyond the learned table's T_max rows, and relative-position buckets beyond T5's bias table.
Violations that depend on the values (NaN, Inf) are only known by running.
"""

from __future__ import annotations

from tracer.errors import BrokenContract, Violation
from tracer.model.blocks import Step, internal_prefix
from tracer.model.contracts import operand_axes, position_violation, relative_violation, violation
from tracer.model.ops import OPS
from tracer.spec import Spec


def broken_contracts(spec: Spec, step: Step) -> list[BrokenContract]:
    """The contracts `step` breaks, in the order its kernel checks them (its op's record states them on shapes)."""
    return OPS[step.op].broken_contracts(spec, step)


def step_violations(spec: Spec, step: Step) -> list[Violation]:
    """What the run flags at `step`: the broken contracts as the executor words them, and positions beyond T_max."""
    if step.op in ("position_table", "position_offset"):
        v = position_violation(spec, step)
        return [] if v is None else [v]
    if step.op == "relative_bias":  # T5: a bucket beyond the relative-bias table
        v = relative_violation(spec, step)
        return [] if v is None else [v]
    over_queries = step.op in ("mha", "cross_mha") and step.axis == "queries"
    axes = spec.stage_shapes[f"{internal_prefix(step)}.scores" if over_queries else step.name][0]  # as the executor labels them
    operands = None if over_queries else operand_axes(step, lambda name: spec.stage_shapes[name][0])
    return [violation(bc, step.name, axes, operands) for bc in broken_contracts(spec, step)]


def violations(spec: Spec) -> list[Violation]:
    """What `tracer run SPEC` would flag, step by step: it stops after the first step with any (exit 1)."""
    for step in spec.steps:
        found = step_violations(spec, step)
        if found:
            return found
    return []
