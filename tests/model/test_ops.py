"""Every op is one record (tracer.model.ops) and every record is whole: a part left out fails here, by name.

The schema's op enum and axes are checked against the records in test_schema."""

from __future__ import annotations

import inspect
import string

import pytest

from tracer import i18n
from tracer.messages import given
from tracer.model.blocks import Step
from tracer.model.named import resolve
from tracer.model.ops import OPS, TABLES, WEIGHT_GROUPS, Op

# The fields each view fills a record's templates with.
GRAPH_FIELDS = {"x", "a", "b", "hidden", "axis", "out", "start", "stop", "stream", "base", "pos", "ins", "mask", "rotary", "over",
                "tokens", "head", "cap",  # cap: the softcap op's (Gemma 2)
                "scale",  # scale: the scale and divide ops' number (Granite's multipliers, Cohere's logit_scale)
                "buckets", "distance", "direction",  # buckets, distance, direction: T5's relative_bias
                "act"}  # act: the dense op's activation (a task head's dense layer)
EXPR_FIELDS = {"w", "act", "gate", "head"}  # what compare.align.expr fills in: the weights, the activation, SwiGLU's gate, E^T | W_head


def _fields(template: str) -> tuple[set[str], int]:
    """The named fields of a format template, and how many positional ones ({0}, {1}) it reads."""
    named, positional = set(), 0
    for _, field, _, _ in string.Formatter().parse(template):
        if field is None:
            continue
        if field.isdigit():
            positional = max(positional, int(field) + 1)
        else:
            named.add(field)
    return named, positional


def _engine_part(ref: str | None) -> str | None:
    """What is wrong with an engine part named ``module:function`` (None: it resolves to a function)."""
    if ref is None:
        return "no function"
    if ":" not in ref:
        return f"{ref!r} is not module:function"
    try:
        fn = resolve(ref)
    except (ImportError, AttributeError) as e:
        return f"{ref!r} does not resolve ({type(e).__name__})"
    if not callable(fn):
        return f"{ref!r} is not a function"
    return None


def missing_parts(op: Op) -> list[str]:
    """Every part the record lacks or gets wrong, worded for the developer who wrote it."""
    out = []
    for part in ("meaning", "formula", "expr", "graph"):
        if not getattr(op, part).strip():
            out.append(f"{part} is empty")
    if not getattr(op.meaning, "zh", "").strip():  # the record's Chinese beside its English (messages.given)
        out.append("zh is empty")
    if not callable(op.shape):
        out.append("shape is not a function")
    for part in ("forward", "backward"):
        why = _engine_part(getattr(op, part))
        if why:
            out.append(f"{part}: {why}")
    if op.reference is None:
        if not op.reference_skip:
            out.append("reference: no function and no reason (reference_skip) why the scalar reference cannot follow it")
    else:
        why = _engine_part(op.reference)
        if why:
            out.append(f"reference: {why}")
        if op.reference_skip:
            out.append("reference and reference_skip both given")
    if op.weights is not None and op.weights not in WEIGHT_GROUPS and op.weights not in TABLES:
        out.append(f"weights {op.weights!r} is neither a weight group nor a table")
    keys = set(WEIGHT_GROUPS.get(op.weights or "", {})) | (set(WEIGHT_GROUPS["ffn_gated"]) if op.weights == "ffn" else set())
    if not set(op.graph_weights) <= keys:
        out.append(f"graph_weights {sorted(set(op.graph_weights) - keys)} are not keys of its weight group")
    named, positional = _fields(op.formula)
    if named or positional > max(op.arity, 1):
        out.append(f"formula reads {sorted(named)} and {positional} stages; it may read only its {op.arity} input stages")
    named, positional = _fields(op.expr)
    if named - EXPR_FIELDS or positional > max(op.arity, 1):
        out.append(f"expr reads {sorted(named - EXPR_FIELDS)}, which diff does not fill in")
    named, positional = _fields(op.graph)
    if named - GRAPH_FIELDS or positional:
        out.append(f"graph reads {sorted(named - GRAPH_FIELDS)}, which the graph does not fill in")
    if op.view not in (None, "input", "given"):
        out.append(f"view {op.view!r} is not input or given")
    if op.axes and op.axes[0] not in ("C", "keys", "B", "E"):
        out.append(f"axes {op.axes}: the first is the contract")
    return out


@pytest.mark.parametrize("name", list(OPS))
def test_every_record_is_whole(name: str) -> None:
    assert missing_parts(OPS[name]) == []


def test_a_record_with_a_part_missing_is_named() -> None:
    whole = OPS["layer_norm"]
    broken = whole._replace(forward="tracer.engine.executor:forward_nothing_here", meaning=given(whole.meaning.template, ""), reference=None,
                            graph="{x} over {axes}", graph_weights=("gamma", "w_q"))
    found = " | ".join(missing_parts(broken))
    for part in ("forward", "zh is empty", "reference_skip", "graph reads ['axes']", "graph_weights ['w_q']"):
        assert part in found


def test_the_engine_steps_take_what_the_engine_hands_them() -> None:
    for op in OPS.values():
        assert list(inspect.signature(op.run_forward()).parameters) == ["ex", "step", "inputs"], op.name
        assert list(inspect.signature(op.run_backward()).parameters) == ["bw", "step", "g"], op.name
        if op.reference is not None:
            assert list(inspect.signature(op.run_reference()).parameters) == ["r", "step", "b", "positions", "ins", "st"], op.name


def test_no_engine_step_is_left_without_a_record() -> None:
    """A forward_/backward_/reference_ function no record names is an op half added (or one half removed)."""
    from tracer.engine import backward, executor, reference

    named = {ref.partition(":")[2] for op in OPS.values() for ref in (op.forward, op.backward, op.reference) if ref}
    for module, prefix in ((executor, "forward_"), (backward, "backward_"), (reference, "reference_")):
        defined = {n for n, v in vars(module).items() if n.startswith(prefix) and callable(v)}
        aliases = {n for n in defined if getattr(module, n).__name__ != n}  # one step serving two ops (add_position = add)
        assert defined - aliases <= named | {getattr(module, n).__name__ for n in aliases}, module.__name__
        assert {n for n in named if n.startswith(prefix)} <= defined, module.__name__


def test_each_meaning_reads_in_chinese() -> None:
    with i18n.using("zh"):
        for op in OPS.values():
            assert op.meaning.render("zh") != op.meaning, op.name


def test_shapes_come_from_the_record() -> None:
    from tracer.model.blocks import output_shape

    sizes = {"B": 2, "T": 3, "C": 4, "F": 8, "V": 5}
    x = (("B", "T", "C"), (2, 3, 4))
    assert output_shape(Step("h", "ffn_hidden", ("x",), "ffn"), [x], sizes) == (("B", "T", "F"), (2, 3, 8))
    with pytest.raises(ValueError, match="unknown op"):
        output_shape(Step("h", "no_such_op", ("x",)), [x], sizes)
    with pytest.raises(ValueError, match="reads"):
        output_shape(Step("h", "ffn_out", ("x",), "ffn"), [x], sizes)  # ffn_out reads [B,T,F]
