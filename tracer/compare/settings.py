"""What tracer diff compares as settings: every setting of a side's computation, derived, not listed, and normalised.

Two sides compute the same when their steps (each op with all its settings), dims, dtype, weights and input are
the same.  The settings come from the spec itself: every field of each stack's BlockSpec (through block_json, the
function that writes them into a saved trace, so a trace and its spec give the same settings), the Spec's fields
that spec.SPEC_SETTINGS names, and every field of each step (blocks.STEP_SETTINGS).  Nothing is a hand-kept list
of what to compare: a new field is compared from the day it exists.

Normalised: a mask is the matrix it gives for the positions the attention reads (``mask: causal`` and the same
lower-triangular matrix written out are one mask), described as ``causal``, ``none``, ``causal, window W`` or the
matrix itself; a default left out is the default; a setting nothing reads (a stack's mask where it has no
attention) is dropped; a value that means the default is the default (``attention_scale: 0.25`` where d = 16:
1/sqrt(d), as if it were left out).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tracer.engine.executor import visible_keys
from tracer.model.blocks import STACK_GIVEN, Step, position_axis
from tracer.model.ops import OPS
from tracer.spec.typed import SPEC_SETTINGS, Spec
from tracer.views.trace_json import block_json, input_words

STACKS = ("block", "encoder")  # the sections a spec's settings of a stack are named under (block.eps, encoder.mask)


def mask_fields(block: Mapping[str, Any]) -> list[str]:
    """The settings of a stack that make its mask: the word, an explicit matrix, a window (compared as the matrix)."""
    return [k for k in block if k.startswith("mask") or "window" in k]


def describe_mask(visible: np.ndarray | None) -> str:
    """A mask by its matrix (True where query i reads key j): causal | none | causal, window W | the rows as 0 and 1."""
    if visible is None or bool(np.all(visible)):
        return "none"
    visible = np.asarray(visible, dtype=bool)
    n_q, n_k = visible.shape
    if n_q == n_k:  # bool arrays only, no index grids: a long context's [T,T] is compared in T*T bytes
        lower = np.tril(np.ones((n_q, n_k), dtype=bool))
        if np.array_equal(visible, lower):
            return "causal"
        w = int(visible[-1].sum())
        if 0 < w < n_k and np.array_equal(visible, np.triu(lower, -(w - 1))):
            return f"causal, window {w}"
    return "[" + ",".join("[" + ",".join(str(int(v)) for v in row) + "]" for row in visible) + "]"


def saved_mask(word: Any, block: Mapping[str, Any] | None, n: int) -> Any:
    """A saved trace's mask (its word and, when explicit, the matrix its block records) as describe_mask gives it."""
    if word == "causal":
        lower = np.tril(np.ones((n, n), dtype=bool))
        windows = [v for k, v in (block or {}).items() if "window" in k and isinstance(v, int) and not isinstance(v, bool) and v > 0]
        return describe_mask(np.triu(lower, -(windows[0] - 1)) if windows else lower)  # a sliding window, where the block has one
    if word == "none":
        return "none"
    matrix = None if block is None else block.get("mask_matrix")
    if word == "explicit" and isinstance(matrix, list):
        try:
            return describe_mask(np.array(matrix, dtype=bool)[:n, :n])
        except ValueError:  # a hand-edited trace's ragged matrix: compared as written
            return matrix
    return word  # a word this tracer does not know (another version's): compared as written


def default_scale(scale: Any, d: Any) -> bool:
    """Is ``attention_scale`` the scale the scores get without it, 1/sqrt(d) (to the last bits a YAML number keeps)?"""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or isinstance(d, bool) or not isinstance(d, int) or d <= 0:
        return False
    return math.isclose(float(scale), 1.0 / math.sqrt(d), rel_tol=1e-12, abs_tol=0.0)


def _plain_scale(block: Mapping[str, Any], d: Any) -> Mapping[str, Any]:
    """A stack's settings with an attention_scale of 1/sqrt(d) read as none given."""
    if default_scale(block.get("attention_scale"), d):
        return {**block, "attention_scale": None}
    return block


def stack_of(step: Step) -> str:
    """The section whose settings a step takes: the encoder's for an encoder stage, else the block's."""
    return "encoder" if position_axis(step.name) == "S" else "block"


def step_settings(steps: tuple[Step, ...], mask_of: Callable[[Step], Any], head: Any, d: Any = None,
                  stacks: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Each step's own settings (Step.params: every field but its name, meaning, op, inputs and weights), its
    attention's mask as a matrix, and the output head's tied | separate; a scale of 1/sqrt(d) is no scale given.
    ``stacks``: each stack's settings (block, encoder): a setting a step takes from its stack alike (blocks.STACK_GIVEN:
    a norm's eps) is compared as the stack's (block.eps), so it is left out where it is the stack's, and named once."""
    out: dict[str, dict[str, Any]] = {}
    for step in steps:
        s = dict(step.params())
        stack = (stacks or {}).get(stack_of(step))
        if stack is not None:
            for key in STACK_GIVEN:
                if key in s and s[key] == stack.get(key):
                    del s[key]
        op = OPS.get(step.op)
        if op is not None and op.attention:
            for key in mask_fields(s):  # the mask's word and window: compared as the one matrix they make
                del s[key]
            s["mask"] = mask_of(step)
            if default_scale(s.get("scale"), d):
                del s["scale"]
        if step.op == "head" and head is not None:
            s["head"] = head
        out[step.name] = s
    return out


def flat_settings(dims: Mapping[str, Any], stacks: Mapping[str, Mapping[str, Any]], masks: Mapping[str, Any],
                  top: Mapping[str, Any]) -> dict[str, Any]:
    """One flat mapping, field name -> value: dims.C, block.activation, block.mask (the matrix), encoder.eps, dtype, ...

    ``masks``: each stack's mask, described (see describe_mask); a stack without attention has none, and its mask
    settings are dropped."""
    out: dict[str, Any] = {f"dims.{k}": v for k, v in dims.items()}
    for section, block in stacks.items():
        folded = mask_fields(block)
        for key, value in block.items():
            if key not in folded:
                out[f"{section}.{key}"] = value
            elif key == folded[0] and section in masks:
                out[f"{section}.mask"] = masks[section]
    out.update(top)
    return out


def _first_attention(steps: tuple[Step, ...], section: str) -> Step | None:
    return next((s for s in steps if s.op == "mha" and stack_of(s) == section), None)


def _input_words(value: Any) -> str | None:
    """A spec's input as compared: its kind and values (a nested list), or 'random' (drawn from the seed), as a saved
    trace records it (trace_json.input_words)."""
    return None if value is None else input_words(value)  # tokens: [[0, 1, 2]]; x: random (the values are the input stage's)


def of_spec(spec: Spec) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A spec's settings (flat) and each step's, normalised."""
    from tracer.grad import losses

    def mask_of(step: Step) -> str:
        n_q = spec.stage_shapes[step.name][1][1] if step.name in spec.stage_shapes else spec.dims.T
        return describe_mask(visible_keys(spec, step, n_q))

    stacks: dict[str, dict[str, Any]] = {}
    masks: dict[str, Any] = {}
    top: dict[str, Any] = {}
    for field in SPEC_SETTINGS:
        value = getattr(spec, field)
        if field == "dims":
            continue
        if field in STACKS:
            if value is not None:
                stacks[field] = dict(_plain_scale(block_json(value), spec.dims.d))
                first = _first_attention(spec.steps, field)
                if first is not None:
                    masks[field] = mask_of(first)
        elif field in ("input", "source"):
            top[field] = _input_words(value)
        elif field == "loss":
            top[field] = losses.choose(spec, None)  # the default filled in: what tracer grad differentiates
        elif field == "targets":
            top[field] = None if value is None else [list(row) for row in value]
        else:
            top[field] = value
    steps = step_settings(spec.steps, mask_of, spec.block.head if spec.block.head != "none" else None, spec.dims.d, stacks)
    return flat_settings(spec.dims.as_dict(), stacks, masks, top), steps


def of_trace(dims: Mapping[str, Any], block: Mapping[str, Any], top: Mapping[str, Any], dtype: str | None,
             steps: tuple[Step, ...]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A saved trace's settings and each step's, normalised as of_spec normalises a spec's."""
    d = _head_width(dims)
    stacks: dict[str, Mapping[str, Any]] = {"block": _plain_scale(block, d)}
    if isinstance(top.get("encoder"), Mapping):
        stacks["encoder"] = _plain_scale(top["encoder"], d)

    def mask_of(step: Step) -> Any:
        section = stack_of(step)
        n = int(dims.get("S" if section == "encoder" else "T", 1))
        return saved_mask(step.mask, stacks.get(section), n)

    masks: dict[str, Any] = {}
    for section, blk in stacks.items():
        first = _first_attention(steps, section)
        if first is not None:
            n = int(dims.get("S" if section == "encoder" else "T", 1))
            masks[section] = saved_mask(blk.get("mask"), blk, n)
    rest: dict[str, Any] = {"model": top.get("model", "decoder")}
    if dtype is not None:
        rest["dtype"] = dtype
    for key in ("init", "input", "source"):
        if key in top:
            rest[key] = top[key]
    head = block.get("head")
    return flat_settings(dims, stacks, masks, rest), step_settings(steps, mask_of, head if head != "none" else None, d, stacks)


def _head_width(dims: Mapping[str, Any]) -> int | None:
    """A saved trace's d: dims.d when it records one, else C // H."""
    d, C, H = dims.get("d"), dims.get("C"), dims.get("H")
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    return C // H if isinstance(C, int) and isinstance(H, int) and H > 0 else None


def complete(block: Mapping[str, Any], top: Mapping[str, Any]) -> bool:
    """Does a saved trace record every setting (written since traces carry them all), or only some (an older one)?"""
    from tracer.spec.typed import BlockSpec

    return all(k in block for k in BlockSpec._fields) and "init" in top
