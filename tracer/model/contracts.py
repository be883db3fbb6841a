"""The axis contracts of the kernels, stated on shapes alone (no NumPy): the facts a run flags.

kernels.check_* call these with their arrays' shapes while running; tracer.spec.preflight calls them with
the spec's shapes before anything runs (`tracer validate`, `tracer graph`).  One wording, one
kind, whichever asks.  ``violation`` turns a broken contract into the Violation the run reports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tracer.errors import BrokenContract, ShapeError, Violation
from tracer.messages import Message, at, join, msg, nmsg
from tracer.model.shapes import shape_label

if TYPE_CHECKING:
    from tracer.model.blocks import Step
    from tracer.spec import Spec

Shape = tuple[int, ...]
ROW_BLOCK = 256  # attention works a block of query rows at a time (kernels.attention.attend); tracer.spec.memory counts one block
# A violation's kind as a word inside a sentence ('a broadcast violation'): the JSON's kind stays the English word.
KIND_WORDS: dict[str, Message] = {"broadcast": msg("broadcast"), "axis": msg("axis"), "position": msg("position"),
                                  "nonfinite": msg("nonfinite"), "causality": msg("causality"), "verify": msg("verify")}


def kind_word(kind: str) -> Message | str:
    """The kind's word (a hand-edited trace's unknown kind as written)."""
    return KIND_WORDS.get(kind, kind)


AXIS_WORDS = {"B": "samples", "T": "positions", "C": "coordinates", "F": "hidden units", "H": "heads"}


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy's broadcasting rule on shapes; ValueError when they cannot be combined."""
    n = max(len(s) for s in shapes)
    out = []
    for i in range(n):
        sizes = {s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(msg("shapes {x} cannot be broadcast", x=[list(s) for s in shapes]))
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def same_shape(a: Shape, b: Shape, names: tuple[str, str] = ("left", "right")) -> None:  # residual: full shapes equal
    if a == b:
        return
    try:
        out = broadcast_shapes(a, b)
    except ValueError:
        raise ShapeError(msg("cannot add {names} {a} and {names2} {b}: the shapes do not match and NumPy cannot broadcast them", names=names[0], a=list(a),
                             names2=names[1], b=list(b))) from None
    raise BrokenContract(
        "broadcast",
        msg("{names} {a} and {names2} {b} differ; an elementwise add needs equal shapes", names=names[0], a=list(a), names2=names[1], b=list(b)),
        {names[0]: a, names[1]: b},
        numpy_would=msg("stretch the size-1 axes and return {out} without complaint", out=list(out)),
        rule=msg("a residual add takes two arrays of exactly the same shape: same samples, same positions, same width (section 17.2)"),
    )


def vector(name: str, shape: Shape, width: int, axis: str) -> None:  # exactly [width] along the last axis
    if shape == (width,):
        return
    try:
        broadcast_shapes(shape, (width,))
    except ValueError:
        raise ShapeError(msg("{name} has shape {shape}, expected [{axis}] = [{width}]", name=name, shape=list(shape), axis=axis, width=width)) from None
    raise BrokenContract(
        "broadcast",
        msg("{name} has shape {shape} where [{axis}] = [{width}] is due", name=name, shape=list(shape), axis=axis, width=width),
        {name: shape},
        numpy_would=msg("repeat {name}'s single value across all {width} coordinates without complaint", name=name, width=width),
        why=msg("{name} should hold one learned value per coordinate; a stretched value silently ties all {width} together", name=name, width=width),
        rule=msg("{name} holds exactly one value per coordinate: [{axis}] = [{width}]", name=name, axis=axis, width=width),
        axes={name: ("?",) * len(shape)},  # its size is not the axis's: no letter would be true
    )


def norm_axis(shape: Shape, axis: int, labels: tuple[str, ...]) -> None:  # statistics over the last axis only
    if axis % len(shape) == len(shape) - 1:
        return
    name = labels[axis] if len(labels) == len(shape) else f"axis {axis}"
    last = labels[-1] if len(labels) == len(shape) else "the last axis"
    n = shape[axis]
    if name == "T":
        why = msg("each position's result now depends on all {n} positions: position 0 changes when positions 1..{m} do, "
                  "so the future leaks into earlier positions even though the attention mask is right (section 17.3)", n=n, m=n - 1)
    elif name == "B":
        why = nmsg("each sample's result now depends on the other {n} sample of the batch: statistics mix samples",
                   "each sample's result now depends on the other {n} samples of the batch: statistics mix samples", n - 1)
    else:
        why = msg("the statistics mix entries that must be normalised separately")
    raise BrokenContract(
        "axis",
        msg("LayerNorm statistics taken over {name} ({n} entries) instead of {last} ({shape} coordinates)", name=name, n=n, last=last, shape=shape[-1]),
        {"x": shape},
        numpy_would=msg("average over the {n} entries along {name} and normalise without complaint", n=n, name=name),
        why=why,
        rule=msg("LayerNorm normalises each sample's each position on its own: statistics over C only (section 17.3)"),
    )


def softmax_axis(scores: Shape, over_queries: bool) -> None:  # attention weights: softmax over keys
    if over_queries:
        raise BrokenContract(
            "axis",
            msg("softmax taken over queries (axis -2) instead of keys (axis -1)"),
            {"scores": scores},
            numpy_would=msg("normalise each key's column instead of each query's row, without complaint"),
            why=(msg("a query's weights no longer sum to 1 over what it reads, and each weight depends on the other queries' scores, "
                     "later positions included")),
            rule=msg("attention weights are a softmax over keys: each query's row sums to 1"),
        )


def rotary_width(d: int, rotary_dim: int | None) -> None:  # partial rotary: pairs of coordinates within a head
    if rotary_dim is None or (rotary_dim % 2 == 0 and 2 <= rotary_dim <= d):
        return
    odd = rotary_dim % 2 == 1
    raise BrokenContract(
        "axis",
        msg("rotary_dim = {r} coordinates turned in heads of width d = {d}", r=rotary_dim, d=d),
        {"q": (d,), "k": (d,)},
        numpy_would=(msg("turn {n} coordinates paired for a width of {r}, leaving one without its partner, without complaint", n=min(rotary_dim, d) // 2 * 2,
                         r=rotary_dim)
                     if odd else msg("slice q[..., :{r}] to all {d} coordinates and turn them at speeds meant for {r}, without complaint", r=rotary_dim, d=d)),
        why=msg("rotary positions turn pairs of coordinates: an odd width leaves one unpaired, and a width beyond d pairs coordinates a head does not "
                "have at the wrong speeds"),
        rule=msg("a partial rotary width is even and at most the head width d"),
        axes={"q": ("d",), "k": ("d",)},
    )


def batch_norm(x: Shape) -> None:  # a text block never normalises over samples and positions
    raise BrokenContract(
        "axis",
        msg("BatchNorm statistics taken over samples and positions (B x T = {x} x {x2}) for each coordinate", x=x[0], x2=x[1]),
        {"x": x},
        numpy_would=msg("average each coordinate over the whole batch and every position, without complaint"),
        why=(msg("one sample's result depends on the other samples and on later positions; sentences differ in length and content, so the same position in "
                 "different sentences is not comparable (guide, section 5)")),
        rule=msg("text blocks normalise each sample's each position over its own C coordinates (LayerNorm)"),
    )


def router_softmax_axis(logits: Shape, over_tokens: bool) -> None:  # router probabilities [B,T,E]: softmax over experts
    if over_tokens:
        raise BrokenContract(
            "axis",
            msg("router softmax taken over positions (axis T) instead of experts (axis E)"),
            {"logits": logits},
            numpy_would=msg("normalise each expert's column over the positions instead of each position's row, without complaint"),
            why=msg("a position's expert probabilities no longer sum to 1, and which experts it is sent to depends on the other "
                    "positions, later ones included"),
            rule=msg("router probabilities are a softmax over the experts: each position's row sums to 1"),
        )


# -- as the run reports them --------------------------------------------------------------------

def axes_label(shape: Shape, axes: tuple[str, ...]) -> str:
    axes = axes[-len(shape):] if len(axes) >= len(shape) else axes
    return shape_label(axes, shape) if len(axes) == len(shape) else str(list(shape))


def broadcast_why(axes: tuple[str, ...], shapes: list[Shape]) -> Message:
    """Say, in the axes' own words, whose values a stretched operand hands to whom."""
    reasons = []
    for i, letter in enumerate(axes):
        sizes = [s[i] for s in shapes if len(s) == len(axes)]
        if len(set(sizes)) > 1 and 1 in sizes:
            n = max(sizes)
            word = msg(AXIS_WORDS[letter]) if letter in AXIS_WORDS else msg("entries along {letter}", letter=letter)
            if letter == "B":  # which sample or position the single row came from is not known here
                reasons.append(msg("one sample's update would be handed to all {n} samples, so the other sample would receive an update that is not its own",
                                   n=n) if n == 2 else
                               msg("one sample's update would be handed to all {n} samples, so the other {m} samples would receive an update "
                                   "that is not their own", n=n, m=n - 1))
            elif letter == "T":
                reasons.append(msg("one position's update would be handed to all {n} positions, so the other position would receive an "
                                   "update that is not its own", n=n) if n == 2 else
                               msg("one position's update would be handed to all {n} positions, so the other {m} positions would receive an update "
                                   "that is not their own", n=n, m=n - 1))
            else:
                reasons.append(msg("all {n} {what} would receive the same value", n=n, what=word))
    if not reasons:
        return msg("each sample and position must add its own update")
    return msg("{last} (a residual adds each sample's and position's own update, section 17.2)", last=join(reasons))


def operand_axes(step: Step, axes_of: Callable[[str], tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """The axis letters of each operand a kernel may name: the stages the step reads ('left' and 'right' when
    it adds a stage to itself), so a [B,T,F] operand is labelled [B,T,F], not with the step's own letters."""
    out = {name: axes_of(name) for name in step.inputs}
    if len(step.inputs) == 2:
        out.update(left=axes_of(step.inputs[0]), right=axes_of(step.inputs[1]))
    return out


def violation(bc: BrokenContract, stage: str, axes: tuple[str, ...], operands: dict[str, tuple[str, ...]] | None = None) -> Violation:
    """A broken contract as the run flags it at `stage` (whose axes are `axes`).  Every shape carries the
    letters of its own axes: an operand's stage's, a weight's due letters, else the step's; a weight whose
    size is not its axis's (beta [1] where [C] = [2] is due) is printed [?] = [1]."""
    operands = operands or {}

    def label(name: str, shape: Shape) -> str:
        own = bc.axes.get(name) or operands.get(name)
        if own is not None and len(own) == len(shape):
            return shape_label(own, shape)
        if len(operands) == 0 or name not in operands:
            return axes_label(shape, axes)
        return shape_label(("?",) * len(shape), shape)

    why = bc.why or (broadcast_why(axes, list(bc.operands.values())) if bc.kind == "broadcast" else "")
    return Violation(
        kind=bc.kind, stage=stage, message=at(stage, bc.fact),
        shapes={name: label(name, shape) for name, shape in bc.operands.items()},
        rule=bc.rule or bc.fact, numpy_would=bc.numpy_would, why=why,
    )


def position_violation(spec: Spec, step: Step) -> Violation | None:
    """T positions but a learned table of fewer rows: known from the shapes alone."""
    pos = spec.weights.get("position")
    if pos is None:
        return None
    axes = spec.stage_shapes[step.name][0]
    T, (T_max, C) = spec.stage_shapes[step.name][1][0], pos.given_shape or pos.shape
    offset = step.start or 0  # position_offset: rows o .. o+T-1
    if T_max >= T + offset:
        return None
    if offset:
        return Violation(
            kind="position", stage=step.name,
            message=at(step.name,
                       msg("{axes} = {T} positions from row {o} need rows {o} to {last}, but the learned table has T_max = {T_max} rows (indices 0 to {x})",
                                      axes=axes[0], T=T, o=offset, last=offset + T - 1, T_max=T_max, x=T_max - 1)),
            shapes={"position": shape_label(("T_max", "C"), (T_max, C)), "x": shape_label(("B", axes[0], "C"), (spec.dims.B, T, C))},
            rule=msg("a learned position table has one row for each position 0 .. T_max-1, and no more"),
            numpy_would=msg("slice P[{o}:{end}] to fewer rows without complaint", o=offset, end=offset + T),
            why=msg("the rows past T_max - 1 were never trained; the table cannot invent them (section 17.1)"),
        )
    return Violation(
        kind="position", stage=step.name,
        message=at(step.name, msg("{axes} = {T} positions but the learned table has T_max = {T_max} rows (indices 0 to {x})", axes=axes[0], T=T, T_max=T_max,
                                  x=T_max - 1)),
        shapes={"position": shape_label(("T_max", "C"), (T_max, C)), "x": shape_label(("B", axes[0], "C"), (spec.dims.B, T, C))},
        rule=msg("a learned position table has one row for each position 0 .. T_max-1, and no more"),
        numpy_would=msg("slice P[:{T}] to just {T_max} rows without complaint (and, for a one-row table, broadcast that row to every position)", T=T,
                        T_max=T_max),
        why=msg("positions {T_max} to {x} were never trained; the table cannot invent them (section 17.1)", T_max=T_max, x=T - 1),
    )


# -- T5's relative position bias ------------------------------------------------------
def relative_violation(spec: Spec, step: Step) -> Violation | None:
    """A bucket beyond the relative-bias table (fewer rows K_rel than the buckets the positions reach): known from the
    shapes and the bucket settings alone."""
    from tracer.model.relative import largest_bucket

    table = spec.weights.get(step.weights or "")
    if table is None or step.relative is None:
        return None
    rows, H = table.given_shape or table.shape
    buckets, distance, bidirectional = step.relative
    axes, (_, n_q, n_k) = spec.stage_shapes[step.name]
    top = largest_bucket(n_q, n_k, bidirectional, buckets, distance)
    if top < rows:
        return None
    return Violation(
        kind="position", stage=step.name,
        message=at(step.name,
                   msg("{n} positions reach bucket {top} of {buckets}, but the relative-bias table {table} has K_rel = {rows} rows (buckets 0 to {x})",
                                  n=n_q, top=top, buckets=buckets, table=step.weights, rows=rows, x=rows - 1)),
        shapes={step.weights or "relative_bias": shape_label(("K_rel", "H"), (rows, H)), step.name: shape_label(axes, (H, n_q, n_k))},
        rule=msg("the relative-bias table has one row for each bucket 0 .. buckets-1"),
        numpy_would=msg("index past the last row and stop with an IndexError, or, for a negative index, wrap to another bucket's row without complaint"),
        why=msg("a bucket without its row has no learned bias: another row would stand in for it silently"),
    )
