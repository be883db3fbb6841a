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
- positions beyond the learned table's T_max rows.
Violations that depend on the values (NaN, Inf) are only known by running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from tracer.errors import BrokenContract, ShapeError, Violation
from tracer.model import contracts
from tracer.model.blocks import Step, internal_prefix
from tracer.model.contracts import operand_axes, position_violation, violation
from tracer.spec import Spec


def _enforce(broken: list[BrokenContract], check: Callable[..., None], *args: Any) -> None:
    try:
        check(*args)
    except BrokenContract as bc:
        broken.append(bc)


def _vector(spec: Spec, broken: list[BrokenContract], group: str | None, key: str, width: int, axis: str) -> None:
    w = spec.weights.get(f"{group}.{key}")
    if w is not None:
        _enforce(broken, contracts.vector, key, w.given_shape or w.shape, width, axis)


def broken_contracts(spec: Spec, step: Step) -> list[BrokenContract]:
    """The contracts `step` breaks, in the order its kernel checks them."""
    broken: list[BrokenContract] = []
    shapes = spec.stage_shapes
    ins = [shapes[i] for i in step.inputs]
    C, F = spec.dims.C, spec.dims.F
    g = step.weights
    if step.op == "layer_norm":
        labels, sizes = ins[0]
        _enforce(broken, contracts.norm_axis, sizes, labels.index(step.axis or "C"), labels)
        for key in ("gamma", "beta"):
            _vector(spec, broken, g, key, sizes[-1], "C")
    elif step.op == "rms_norm":
        _vector(spec, broken, g, "gamma", ins[0][1][-1], "C")
    elif step.op == "batch_norm":
        _enforce(broken, contracts.batch_norm, ins[0][1])
        for key in ("gamma", "beta"):
            _vector(spec, broken, g, key, ins[0][1][-1], "C")
    elif step.op == "add" and len(ins) == 2:
        names = (step.inputs[0], step.inputs[1]) if step.inputs[0] != step.inputs[1] else ("left", "right")
        with contextlib.suppress(ShapeError):  # shapes NumPy cannot combine at all: the spec validator's business, not a violation
            _enforce(broken, contracts.same_shape, ins[0][1], ins[1][1], names)
    elif step.op in ("mha", "cross_mha"):
        grouped = spec.dims.kv_heads != spec.dims.H  # k and v are H_kv heads wide: [C_kv]
        kv_width, kv_axis = (spec.dims.size("C_kv"), "C_kv") if grouped else (C, "C")
        _vector(spec, broken, g, "b_q", C, "C")
        for key in ("b_k", "b_v"):
            _vector(spec, broken, g, key, kv_width, kv_axis)
        _enforce(broken, contracts.softmax_axis, shapes[f"{internal_prefix(step)}.scores"][1], step.axis == "queries")
        _vector(spec, broken, g, "b_o", C, "C")
    elif step.op in ("ffn", "ffn_hidden"):
        for key in ("b1", "b3"):
            _vector(spec, broken, g, key, F or 0, "F")
        if step.op == "ffn":
            _vector(spec, broken, g, "b2", C, "C")
    elif step.op == "ffn_out":
        _vector(spec, broken, g, "b2", C, "C")
    elif step.op == "linear":
        _vector(spec, broken, g, "b", shapes[step.name][1][-1], step.out or "C")
    return broken


def step_violations(spec: Spec, step: Step) -> list[Violation]:
    """What the run flags at `step`: the broken contracts as the executor words them, and positions beyond T_max."""
    if step.op == "position_table":
        v = position_violation(spec, step)
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
