"""Every op tracer knows, one record each: everything the code knows about an op, declared once.

A record holds:

- ``arity``, ``weights`` (the kind of weight group it reads: a key of WEIGHT_GROUPS, or a table of TABLES),
  ``axes`` (the values its ``axis`` may take, the first being the contract) and ``user`` (may a spec's own
  ``block.steps`` use it): what the spec validator checks;
- ``shape``: the stage's axes and sizes from its inputs' (raises ValueError with a short fact when the op cannot
  apply), so a spec's shapes are known before anything runs;
- ``preflight``: the kernel's axis contracts stated on the spec's shapes (``tracer validate``, ``tracer graph``);
- ``meaning`` and ``zh``: the op in a few words, in English and in the book's Chinese (a custom step that writes
  no meaning of its own is shown with these);
- ``formula`` (``tracer stages``: what it computes from the stages it reads, ``{0}``, ``{1}``), ``expr``
  (``tracer diff``: its right-hand side in the book's notation; ``{act}`` the activation's name (SiLU for SwiGLU's gate),
  ``{gate}`` SwiGLU's `` * (x W3 + b3)``, ``{head}`` E^T or W_head), ``graph`` and ``graph_weights`` (``tracer graph``:
  what its box computes, and which of its weights the box lists);
- ``temporaries``: the bytes its kernel holds at its peak beyond its inputs, output and recorded internals (the
  memory estimate); ``view``: its stage is a view of an array that exists anyway (its input, or a given array);
- ``forward``, ``backward``, ``reference``: where its engine code is, as ``module:function``: the executor's step,
  the backward pass's step and the scalar reference's step.  The engine is the NumPy layer above this one, so the
  record names its code instead of importing it; ``tests/model/test_ops.py`` resolves every name.  An op the
  scalar reference cannot follow per position says why in ``reference_skip`` instead.

Adding an op: write its record here, its kernels (tracer/engine/kernels/, by family of op) and its three engine steps, and
its tests; the completeness test says what is missing.  Nothing here imports NumPy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer.errors import BrokenContract, ShapeError
from tracer.messages import Message, given, msg
from tracer.model import contracts, masks
from tracer.model.activations import activation_of
from tracer.model.contracts import ROW_BLOCK
from tracer.model.named import resolve
from tracer.model.shapes import ITEMSIZE, Shape, shape_label

if TYPE_CHECKING:
    from tracer.model.blocks import Step
    from tracer.spec import Spec

ShapeRule = Callable[["Step", "list[Shape]", "Mapping[str, int]", str], Shape]
Preflight = Callable[["Spec", "Step", "list[BrokenContract]"], None]
Temporaries = Callable[["Spec", "Step", int, int], int]


class Op(NamedTuple):  # NamedTuples, not dataclasses: a tenth of the import time, and tracer starts on every call
    name: str
    arity: int
    meaning: Message  # its English and, beside it, its Chinese (messages.given)
    formula: str
    expr: str
    graph: str
    shape: ShapeRule
    forward: str
    backward: str
    reference: str | None
    weights: str | None = None
    axes: tuple[str, ...] = ()
    user: bool = True
    graph_weights: tuple[str, ...] = ()
    preflight: Preflight | None = None
    temporaries: Temporaries | None = None
    view: str | None = None  # "input": a view of the stage it reads; "given": of an input or a weight table
    reference_skip: str = ""  # why the scalar reference cannot follow the op per position (with reference None)
    attention: bool = False  # records the attention internals (q, k, v, scores, weights, heads)

    def run_forward(self) -> Callable[..., Any]:
        return resolve(self.forward)

    def run_backward(self) -> Callable[..., Any]:
        return resolve(self.backward)

    def run_reference(self) -> Callable[..., Any]:
        if self.reference is None:
            raise KeyError(f"the reference has no op {self.name!r}: {self.reference_skip}")
        return resolve(self.reference)

    def temporary_bytes(self, spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
        return 0 if self.temporaries is None else self.temporaries(spec, step, in_bytes, out_bytes)

    def broken_contracts(self, spec: Spec, step: Step) -> list[BrokenContract]:
        broken: list[BrokenContract] = []
        if self.preflight is not None:
            self.preflight(spec, step, broken)
        return broken


def internal_prefix(step: Step) -> str:  # attention records its internals under this prefix
    """Internals of a step named 'attention' are '<prefix>attn.*', of 'cross_attention' '<prefix>cross.*'."""
    head, _, last = step.name.rpartition(".")
    head = head + "." if head else ""
    return head + {"attention": "attn", "cross_attention": "cross"}.get(last, last)


# -- weights ----------------------------------------------------------------------------
# A weight group's keys and their axes, by the kind of group an op reads.
WEIGHT_GROUPS: dict[str, dict[str, tuple[str, ...]]] = {
    "norm": {"gamma": ("C",), "beta": ("C",)},
    "rms": {"gamma": ("C",)},
    "rms_offset": {"gamma": ("C",)},  # Gemma's RMSNorm scales by (1 + gamma): its gamma, when not given, is zeros (the scale 1)
    "attn": {
        "w_q": ("C", "C"), "w_k": ("C", "C"), "w_v": ("C", "C"), "w_o": ("C", "C"),
        "b_q": ("C",), "b_k": ("C",), "b_v": ("C",), "b_o": ("C",),
    },
    "ffn": {"w1": ("C", "F"), "b1": ("F",), "w2": ("F", "C"), "b2": ("C",)},
    "ffn_gated": {"w1": ("C", "F"), "b1": ("F",), "w3": ("C", "F"), "b3": ("F",), "w2": ("F", "C"), "b2": ("C",)},
    "linear": {"w": ("in", "out"), "b": ("out",)},  # letters filled in from the step
}
# A mixture of experts (block.ffn.experts = E): the router [C,E] and, per expert e, a SwiGLU FFN without biases,
# its matrices named w1_e, w3_e, w2_e (blocks.group_keys lists them for the spec's E).
MOE_ROUTER_KEYS: dict[str, tuple[str, ...]] = {"router": ("C", "E")}
MOE_EXPERT_KEYS: dict[str, tuple[str, ...]] = {"w1": ("C", "F"), "w3": ("C", "F"), "w2": ("F", "C")}
# the group as a record names it: the router and the first expert's (every expert's matrices have its shapes)
WEIGHT_GROUPS["moe"] = {**MOE_ROUTER_KEYS, **{f"{k}_0": axes for k, axes in MOE_EXPERT_KEYS.items()}}
# Grouped-query attention (dims.H_kv < H): keys and values have H_kv heads, C_kv = H_kv * d columns.
GROUPED_KV_KEYS: dict[str, tuple[str, ...]] = {"w_k": ("C", "C_kv"), "w_v": ("C", "C_kv"), "b_k": ("C_kv",), "b_v": ("C_kv",)}
# A head width set apart from C / H (dims.d): q and the heads side by side are C_q = H * d wide, k and v C_kv = H_kv * d.
HEAD_WIDTH_KEYS: dict[str, tuple[str, ...]] = {"w_q": ("C", "C_q"), "b_q": ("C_q",), "w_o": ("C_q", "C"), **GROUPED_KV_KEYS}
# Qwen3's per-head RMSNorm of q and k (block.qk_norm): one weight [d] each, shared by every head.
QK_NORM_KEYS: dict[str, tuple[str, ...]] = {"q_norm": ("d",), "k_norm": ("d",)}
# The tables entry and exit ops read, by their weight name.
TABLES: dict[str, tuple[str, ...]] = {"embedding": ("V", "C"), "position": ("T_max", "C"), "head": ("C", "V"),
                                      "token_type": ("V_type", "C"),  # BERT's token-type table: one row per type id
                                      "head_bias": ("V",),  # head_bias: block.head_bias (Phi's lm_head.bias)
                                      "relative_bias": ("K_rel", "H")}  # T5's relative position bias: one row per bucket


# -- shapes -------------------------------------------------------------------------------

def _need_width(op: str, axes: tuple[str, ...], shape: tuple[int, ...], letter: str, sizes: Mapping[str, int]) -> None:
    """The op's weights are sized for a full last axis: a slice of it (select along C or F) does not fit."""
    if len(axes) != 3 or axes[-1] != letter or shape[-1] != sizes[letter]:
        raise ValueError(msg("{op} reads [B,{x},{letter}] with {letter} = {sizes}, received {axes}", op=op, x=axes[1] if len(axes) == 3 else "T",
                             letter=letter, sizes=sizes[letter], axes=shape_label(axes, shape)))


def _stream(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # embed, input: [B,T,C]
    width = "C_e" if step.op == "embed" and "C_e" in sizes else "C"  # OPT's embedding, C_e wide, projected to C after it
    return ("B", pos, width), (sizes["B"], sizes[pos], sizes[width])


def _table(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # positions: [T,C]
    return (pos, "C"), (sizes[pos], sizes["C"])


def _same(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:
    return ins[0]


def _same_over_c(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # norms, ffn: weights [C] or [C,*]
    axes, shape = ins[0]
    _need_width(step.op, axes, shape, "C", sizes)
    return axes, shape


def _first(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # add_position: [B,T,C] + [T,C]
    return ins[0]


def _add_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:
    (a_axes, a), (b_axes, b) = ins
    if len(a) != len(b) or not all(x == y or 1 in (x, y) for x, y in zip(a, b)):
        raise ValueError(msg("cannot add {a_axes} and {b_axes}: NumPy cannot broadcast them either", a_axes=shape_label(a_axes, a),
                             b_axes=shape_label(b_axes, b)))
    return a_axes, tuple(max(x, y) for x, y in zip(a, b))


def _mha_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:
    axes, shape = _same_over_c(step, ins, sizes, pos)
    if shape[1] != sizes[axes[1]]:
        raise ValueError(msg("mha reads all {axes} = {sizes} positions (its mask is [{axes},{axes}]), received {axes2}", axes=axes[1], sizes=sizes[axes[1]],
                             axes2=shape_label(axes, shape)))
    return axes, shape


def _cross_mha_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:
    axes, shape = _same_over_c(step, ins, sizes, pos)
    m_axes, m_shape = ins[1]
    if m_axes[-1:] != ("C",) or len(m_axes) != 3 or m_shape[0] != shape[0]:
        raise ValueError(msg("cross_mha reads memory [B,S,C], received {m_axes}", m_axes=shape_label(m_axes, m_shape)))
    return axes, shape


def _to_f(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # ffn_hidden: [B,T,C] -> [B,T,F]
    axes, shape = _same_over_c(step, ins, sizes, pos)
    return axes[:-1] + ("F",), shape[:-1] + (sizes["F"],)


def _f_to_c(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # ffn_out: [B,T,F] -> [B,T,C]
    axes, shape = ins[0]
    _need_width(step.op, axes, shape, "F", sizes)
    return axes[:-1] + ("C",), shape[:-1] + (sizes["C"],)


def _linear_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:
    axes, shape = ins[0]
    _need_width(step.op, axes, shape, axes[-1], sizes)  # W is [in,out], in = the input's last axis
    out = step.out or "C"
    return axes[:-1] + (out,), shape[:-1] + (sizes[out],)


def _head_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # [B,T,C] -> [B,T,V]
    axes, shape = ins[0]
    _need_width(step.op, axes, shape, "C_e" if "C_e" in sizes else "C", sizes)  # C_e: after OPT's project_out
    return axes[:-1] + ("V",), shape[:-1] + (sizes["V"],)


def _select_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:
    axes, shape = ins[0]
    if step.axis is None or step.start is None or step.stop is None:
        raise ValueError(msg("select needs its axis, start and stop"))
    if step.axis not in axes:
        raise ValueError(msg("select along {axis}, but the input is {axes}", axis=step.axis, axes=shape_label(axes, shape)))
    i = axes.index(step.axis)
    if not 0 <= step.start < step.stop <= shape[i]:
        raise ValueError(msg("select {start}:{stop} along {axis}, which has size {shape}", start=step.start, stop=step.stop, axis=step.axis, shape=shape[i]))
    return axes, shape[:i] + (step.stop - step.start,) + shape[i + 1:]


def _to_experts(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # router: [B,T,C] -> [B,T,E]
    axes, shape = _same_over_c(step, ins, sizes, pos)
    if "E" not in sizes:
        raise ValueError(msg("{op} needs the number of experts (the block setting ffn.experts)", op=step.op))
    return axes[:-1] + ("E",), shape[:-1] + (sizes["E"],)


def _over_experts(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # router softmax, top-k: [B,T,E]
    axes, shape = ins[0]
    _need_width(step.op, axes, shape, "E", sizes)
    return axes, shape


def _expert_mix_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # [B,T,C], [B,T,E] -> [B,T,C]
    axes, shape = _same_over_c(step, ins, sizes, pos)
    g_axes, g_shape = ins[1]
    if g_axes[-1:] != ("E",) or g_shape[:-1] != shape[:-1]:
        raise ValueError(msg("expert_mix reads the gates of the chosen experts [B,{x},E], received {axes}", x=axes[1], axes=shape_label(g_axes, g_shape)))
    return axes, shape


# -- contracts on the spec's shapes (tracer validate, tracer graph) ----------------------------

def _enforce(broken: list[BrokenContract], check: Callable[..., None], *args: Any) -> None:
    try:
        check(*args)
    except BrokenContract as bc:
        broken.append(bc)


def _vector(spec: Spec, broken: list[BrokenContract], group: str | None, key: str, width: int, axis: str) -> None:
    w = spec.weights.get(f"{group}.{key}")
    if w is not None:
        _enforce(broken, contracts.vector, key, w.given_shape or w.shape, width, axis)


def _ins(spec: Spec, step: Step) -> list[Shape]:
    return [spec.stage_shapes[i] for i in step.inputs]


def _layer_norm_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    labels, sizes = _ins(spec, step)[0]
    _enforce(broken, contracts.norm_axis, sizes, labels.index(step.axis or "C"), labels)
    for key in ("gamma", "beta"):
        _vector(spec, broken, step.weights, key, sizes[-1], "C")


def _rms_norm_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    _vector(spec, broken, step.weights, "gamma", _ins(spec, step)[0][1][-1], "C")


def _batch_norm_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    sizes = _ins(spec, step)[0][1]
    _enforce(broken, contracts.batch_norm, sizes)
    for key in ("gamma", "beta"):
        _vector(spec, broken, step.weights, key, sizes[-1], "C")


def _add_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    ins = _ins(spec, step)
    if len(ins) == 2:
        names = (step.inputs[0], step.inputs[1]) if step.inputs[0] != step.inputs[1] else ("left", "right")
        with contextlib.suppress(ShapeError):  # shapes NumPy cannot combine at all: the spec validator's business, not a violation
            _enforce(broken, contracts.same_shape, ins[0][1], ins[1][1], names)


def _attention_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    C, g = spec.dims.C, step.weights
    own = spec.dims.own_head_width  # dims.d: q is C_q = H * d wide, k and v C_kv = H_kv * d
    grouped = spec.dims.kv_heads != spec.dims.H or own  # k and v are H_kv heads wide: [C_kv]
    kv_width, kv_axis = (spec.dims.size("C_kv"), "C_kv") if grouped else (C, "C")
    q_width, q_axis = (spec.dims.size("C_q"), "C_q") if own else (C, "C")
    _vector(spec, broken, g, "b_q", q_width, q_axis)
    for key in ("b_k", "b_v"):
        _vector(spec, broken, g, key, kv_width, kv_axis)
    _enforce(broken, contracts.softmax_axis, spec.stage_shapes[f"{internal_prefix(step)}.scores"][1], step.axis == "queries")
    if step.base is not None:
        _enforce(broken, contracts.rotary_width, spec.dims.d, step.rotary_dim)
    if step.qk_norm and step.qk_projection:  # OLMo 2: q and k normalised over their whole projections: [C_q], [C_kv]
        _vector(spec, broken, g, "q_norm", q_width, q_axis)
        _vector(spec, broken, g, "k_norm", kv_width, kv_axis)
    elif step.qk_norm:  # each head's q and k normalised over its d coordinates: the weights are [d]
        for key in ("q_norm", "k_norm"):
            _vector(spec, broken, g, key, spec.dims.d, "d")
    _vector(spec, broken, g, "b_o", C, "C")


def _ffn_hidden_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    for key in ("b1", "b3"):
        _vector(spec, broken, step.weights, key, spec.dims.F or 0, "F")


def _ffn_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    _ffn_hidden_contracts(spec, step, broken)
    _vector(spec, broken, step.weights, "b2", spec.dims.C, "C")


def _ffn_out_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    _vector(spec, broken, step.weights, "b2", spec.dims.C, "C")


def _linear_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    _vector(spec, broken, step.weights, "b", spec.stage_shapes[step.name][1][-1], step.out or "C")


def _router_softmax_contracts(spec: Spec, step: Step, broken: list[BrokenContract]) -> None:
    _enforce(broken, contracts.router_softmax_axis, _ins(spec, step)[0][1], step.axis == "T")


# -- working memory (the memory estimate) ---------------------------------------------------

def _rms_norm_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    return in_bytes  # the squares before their mean, then x / rms


def _norm_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    return 2 * in_bytes  # x - mean and its squares, then (x - mean) / std


def _attention_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    axes, shape = spec.stage_shapes[f"{internal_prefix(step)}.scores"]
    T, S = shape[-2], shape[-1]
    block = min(T, ROW_BLOCK)
    # the mask: [T,S] bool and its complement (any mask but plain causal: a sliding window's too), or a causal block's
    # square; weights @ V before the heads merge
    plain = step.mask == "causal" and not masks.windowed(step.mask, step.window, T)
    heads = out_bytes // spec.dims.C * spec.dims.size("C_q")  # [B,T,H*d]: as wide as the output unless dims.d sets d apart
    extra = (block * block if plain and step.axis != "queries" else 2 * T * S) + heads
    extra += block * S * ITEMSIZE[spec.dtype]  # one block of rows' scores, when they are not kept
    if step.base is not None:
        extra += 2 * heads  # rotary positions: turned copies of q and k
    if step.qk_norm:
        extra += 3 * heads  # block.qk_norm: normalised copies of q and k, and one scratch array while each is made
    if step.softcap is not None:
        extra += block * S * ITEMSIZE[spec.dtype]  # block.attention_softcap: a block of rows' tanh, before the cap's product
    return extra


def _ffn_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    F = spec.dims.F
    hidden = out_bytes // (spec.dims.C if step.op == "ffn" else F) * F  # [B,T,F]
    extra = activation_of(step.activation).temporaries(hidden, ITEMSIZE[spec.dtype])  # the activation's record says
    if step.op == "ffn":
        extra += hidden  # the hidden layer itself is not a stage of this step
    return extra


def _softmax_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    return in_bytes  # x - max, then exp of it (the row sums are small)


SOFTMAX_ROWS = 4  # rows the vocabulary softmax takes at a time (executor.forward_softmax): its temporaries stay small, and
# a block (4 x V values: 800 kB of float32 at GPT-2's V) stays in a core's L2 cache from the subtract to the divide
# (GPT-2's [192, 50257] in float32: 11 ms against 16 ms in blocks of 64 rows; benchmarks/transformerlens.py's lens)


def _vocab_softmax_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    """The rows' maxima and sums: the softmax works in its result, SOFTMAX_ROWS rows at a time (a small input at once)."""
    V = spec.dims.V or 1
    return 2 * min(in_bytes, SOFTMAX_ROWS * V * ITEMSIZE[spec.dtype])


def _top_k_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    return in_bytes  # the indices that sort each row (int64, as wide as float64)


def _expert_mix_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    F = spec.dims.F
    rows = out_bytes // spec.dims.C  # B*T rows, in bytes per value
    return 3 * rows * F + 2 * out_bytes  # one expert at a time: gate, up and their product [rows,F]; its output and the tokens it reads


# -- the records ---------------------------------------------------------------------------------
_EX, _BW, _REF = "tracer.engine.executor:forward_", "tracer.engine.backward:backward_", "tracer.engine.reference:reference_"
_PER_POSITION = "breaks the per-position contract the reference is written for"


def _op(name: str, arity: int, meaning: str, zh: str, formula: str, expr: str, graph: str, shape: ShapeRule, *,
        preflight: Preflight | None, temporaries: Temporaries | None, reference: bool = True, impl: str = "",
        **parts: Any) -> Op:
    """A record whose engine steps are forward_NAME, backward_NAME and reference_NAME (``impl``: another op's NAME).

    ``preflight`` and ``temporaries`` are always stated, None where the op has no contract on shapes or holds no
    temporary array, so that a record cannot leave them out by accident."""
    impl = impl or name
    words = given(meaning, zh, actf="act") if "{actf}" in meaning else given(meaning, zh)
    return Op(name, arity, words, formula, expr, graph, shape, _EX + impl, _BW + impl,
              (_REF + impl) if reference else None, preflight=preflight, temporaries=temporaries, **parts)


def _embed_scale_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # [B,T,C] -> [B,T,C]
    return _same_over_c(step, ins, sizes, pos)


def _scale_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    return 0  # one product into the output
def _softcap_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    return 0  # x / cap, tanh and times cap, in place in the output
def _relative_bias_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # () -> [H,T,T]
    return ("H", pos, pos), (sizes["H"], sizes[pos], sizes[pos])


def _relative_bias_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    n = out_bytes // ITEMSIZE[spec.dtype] // spec.dims.H  # T * T pairs
    return n * 8 * 3  # the distances, the buckets (int64) and the float32 logarithm's scratch, [T,T] each (8 bytes: a margin)


def _pool_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # [B,T,C] -> [B,C]
    axes, shape = ins[0]
    if len(axes) != 3:
        raise ValueError(msg("{op} reads [B,{x},C], received {axes}", op=step.op, x=pos, axes=shape_label(axes, shape)))
    return (axes[0], axes[-1]), (shape[0], shape[-1])


def _dense_shape(step: Step, ins: list[Shape], sizes: Mapping[str, int], pos: str) -> Shape:  # [..., in] -> [..., out]
    axes, shape = ins[0]
    if shape[-1] != sizes.get(axes[-1]):
        raise ValueError(msg("{op} reads [..., {letter}] with {letter} = {size}, received {axes}", op=step.op, letter=axes[-1],
                             size=sizes.get(axes[-1]), axes=shape_label(axes, shape)))
    out = step.out or "C"
    if out not in sizes:
        raise ValueError(msg("{op} writes width {out}, which the dims do not give", op=step.op, out=out))
    return axes[:-1] + (out,), shape[:-1] + (sizes[out],)


def _dense_bytes(spec: Spec, step: Step, in_bytes: int, out_bytes: int) -> int:
    return activation_of(step.activation).temporaries(out_bytes, ITEMSIZE[spec.dtype])  # its activation's, over the output


_RECORDS: tuple[Op, ...] = (
    # entry and exit steps, built from the spec's settings
    _op("embed", 0, "token embeddings, rows of E", "token 嵌入，取 E 的行",
        "E[token id]: one row of the token table E per position", "rows of E", "rows of E for the {tokens}", _stream,
        weights="embedding", user=False, preflight=None, temporaries=None),
    _op("input", 0, "input matrix given in the spec", "spec 中直接给出的输入矩阵",
        "the matrix given as input.x", "the given input", "input.{stream}, as given", _stream, user=False, view="given", preflight=None, temporaries=None),
    _op("position_table", 0, "position vectors, rows of P", "位置向量，取 P 的行",
        "P[0:T]: rows 0 .. T-1 of the learned table P [T_max,C]", "rows of P", "rows 0 .. {pos}-1 of P", _table,
        weights="position", user=False, view="given", preflight=None, temporaries=None),
    _op("sinusoidal", 0, "sinusoidal position vectors", "正余弦位置向量",
        "PE[t, 2i] = sin(t / base^(2i/C)), PE[t, 2i+1] = cos(t / base^(2i/C))", "sinusoidal table",
        "sin / cos of the position, base {base:g}", _table, user=False, preflight=None, temporaries=None),
    _op("add_position", 2, "token + position, X", "token 与位置相加，X",
        "{0} + {1} (the position table added to every sample)", "{0} + {1}", "{a} + {b}", _first, user=False, preflight=None, temporaries=None),
    _op("head", 1, "output head: logits over the vocabulary", "输出层：词表上的 logits",
        "{0} E^T (head: tied) or {0} W_head (head: separate)", "{0} {head}", "{x} {head}", _head_shape,
        weights="head", user=False, preflight=None, temporaries=None),
    _op("softmax", 1, "softmax over the vocabulary", "沿词表做 softmax",
        "exp({0} - max) / sum over V of exp({0} - max)", "softmax({0})", "softmax({x}) over V", _same, user=False, preflight=None,
        temporaries=_vocab_softmax_bytes),
    # the block's ops
    _op("layer_norm", 1, "LayerNorm", "层归一化（LayerNorm）",
        "gamma * ({0} - mean) / sqrt(var + eps) + beta, mean and var over the C coordinates of each row", "LayerNorm[{w}]({0})",
        "layer_norm({x}) over {axis}", _same_over_c, weights="norm", axes=("C", "T", "B"), graph_weights=("gamma", "beta"),
        preflight=_layer_norm_contracts, temporaries=_norm_bytes),
    _op("rms_norm", 1, "RMSNorm, x / sqrt(mean(x^2) + eps) * gamma", "RMSNorm，x / sqrt(mean(x^2) + eps) * gamma",
        "gamma * {0} / sqrt(mean({0}^2) + eps), over the C coordinates of each row (no mean subtracted, no beta)", "RMSNorm[{w}]({0})",
        "rms_norm({x}) over C", _same_over_c, weights="rms", graph_weights=("gamma",), preflight=_rms_norm_contracts,
        temporaries=_rms_norm_bytes),
    _op("batch_norm", 1, "BatchNorm, statistics over samples and positions", "BatchNorm，统计量跨样本和位置",
        "gamma * ({0} - mean) / sqrt(var + eps) + beta, mean and var over samples and positions (B and T)", "BatchNorm[{w}]({0})",
        "batch_norm({x}) over B and T", _same_over_c, weights="norm", graph_weights=("gamma", "beta"),
        preflight=_batch_norm_contracts, temporaries=_norm_bytes, reference=False, reference_skip=_PER_POSITION),
    _op("mha", 1, "multi-head self-attention", "多头自注意力",
        "concat over heads h of softmax(mask(Q_h K_h^T / sqrt(d))) V_h, times W_O, plus b_O; "
        "Q = {0} W_Q + b_Q, K = {0} W_K + b_K, V = {0} W_V + b_V", "MHA({0})", "mha({ins}), {mask}{rotary}{over}", _mha_shape,
        weights="attn", axes=("keys", "queries"), graph_weights=("w_o", "b_o"), preflight=_attention_contracts,
        temporaries=_attention_bytes, attention=True),
    _op("cross_mha", 2, "cross-attention: queries from the decoder, keys and values from the encoder",
        "交叉注意力：查询来自解码器，键和值来自编码器",
        "as MHA, with Q = {0} W_Q + b_Q and K, V from {1} (the encoder output); no mask", "MHA({0}, memory {1})",
        "cross_mha({ins}), {mask}{rotary}{over}", _cross_mha_shape, weights="attn", graph_weights=("w_o", "b_o"),
        preflight=_attention_contracts, temporaries=_attention_bytes, attention=True, impl="mha"),
    _op("add", 2, "elementwise add (residual)", "逐元素相加（残差）",
        "{0} + {1}, the same shape on both sides (a residual add)", "{0} + {1}", "{a} + {b}", _add_shape,
        preflight=_add_contracts, temporaries=None),
    _op("ffn", 1, "position-wise FFN, {actf}(x W_1 + b_1) W_2 + b_2", "逐位置前馈网络，{actf}(x W_1 + b_1) W_2 + b_2",
        "act({0} W_1 + b_1) W_2 + b_2", "FFN_{act}({0})", "{hidden} W_2 + b_2", _same_over_c, weights="ffn",
        graph_weights=("w1", "b1", "w3", "b3", "w2", "b2"), preflight=_ffn_contracts, temporaries=_ffn_bytes),
    _op("ffn_hidden", 1, "FFN first half, {actf}(x W_1 + b_1)", "FFN 前半部分，{actf}(x W_1 + b_1)",
        "act({0} W_1 + b_1)", "{act}({0} W1 + b1){gate}", "{hidden}", _to_f, weights="ffn", graph_weights=("w1", "b1", "w3", "b3"),
        preflight=_ffn_hidden_contracts, temporaries=_ffn_bytes),
    _op("ffn_out", 1, "FFN second half, h W_2 + b_2", "FFN 后半部分，h W_2 + b_2",
        "{0} W_2 + b_2", "{0} W2 + b2", "{x} W_2 + b_2", _f_to_c, weights="ffn", graph_weights=("w2", "b2"),
        preflight=_ffn_out_contracts, temporaries=None),
    _op("linear", 1, "x W + b", "线性变换，x W + b",
        "{0} W + b", "{0} W + b", "{x} W + b, to width {out}", _linear_shape, weights="linear", graph_weights=("w", "b"),
        preflight=_linear_contracts, temporaries=None),
    _op("relu", 1, "ReLU, max(x, 0)", "ReLU，max(x, 0)", "max({0}, 0)", "ReLU({0})", "ReLU({x})", _same, preflight=None, temporaries=None),
    _op("select", 1, "a slice start:stop along one axis (keeps the axis)", "沿一个轴取切片 start:stop（保留该轴）",
        "{0}[start:stop] along one axis", "select({0})", "{x}, {axis} {start}:{stop} (the axis kept)", _select_shape,
        axes=("B", "T", "C", "F"), view="input", reference=False, reference_skip=_PER_POSITION, preflight=None, temporaries=None),
    # a mixture of experts (block ffn: {experts: E, top_k: k}): router logits, softmax over experts, top-k, expert mix
    _op("router", 1, "router logits, one score per expert", "路由器 logits，每个专家一个分数",
        "{0} W_g: one logit per expert (W_g [C,E], no bias)", "{0} W_g", "{x} W_g, one logit per expert", _to_experts,
        weights="moe", graph_weights=("router",), preflight=None, temporaries=None),
    _op("router_probs", 1, "router probabilities, softmax over the experts", "路由概率，沿专家做 softmax",
        "exp({0} - max) / sum over E of exp({0} - max): each position's probabilities over the experts sum to 1",
        "softmax_E({0})", "softmax({x}) over {axis}", _over_experts, axes=("E", "T"),
        preflight=_router_softmax_contracts, temporaries=_softmax_bytes),
    _op("top_k", 1, "gates of the k chosen experts (0 for the others)", "所选 k 个专家的门控权重（其余为 0）",
        "the k largest of {0} at each position, renormalised to sum to 1 (ties: the lower expert); 0 for the others",
        "top_k({0})", "the k largest of {x}, renormalised", _over_experts,
        preflight=None, temporaries=_top_k_bytes),
    _op("expert_mix", 2, "mixture of experts: the chosen experts' SwiGLU FFNs, weighted by their gates",
        "专家混合：所选专家的 SwiGLU FFN，按门控权重加权求和",
        "sum over the chosen experts e of {1}[e] * (silu({0} W1_e) * ({0} W3_e)) W2_e", "MoE[{w}]({0}, {1})",
        "the chosen SwiGLU experts of {x}, weighted by {b}", _expert_mix_shape, weights="moe",
        graph_weights=("w1_0", "w3_0", "w2_0"), preflight=None, temporaries=_expert_mix_bytes),
    _op("identity", 1, "the input, unchanged", "输入，原样不变", "{0}", "{0}", "{x}", _same, view="input", preflight=None, temporaries=None),
    # BERT's embeddings, E[token] + P[o + t] + E_type[type], then a LayerNorm (a layer_norm step, embed_norm)
    _op("token_type_table", 0, "token-type vectors, rows of E_type", "token 类型向量，取 E_type 的行",
        "E_type[token type]: one row of the token-type table E_type [V_type,C] per position (input.token_types; zeros when not given)",
        "rows of E_type", "rows of E_type for the token types", _stream, weights="token_type", user=False, preflight=None, temporaries=None),
    _op("position_offset", 0, "position vectors, rows of P from an offset", "位置向量，从偏移处取 P 的行",
        "P[o:o+T]: rows o .. o+T-1 of the learned table P [T_max,C] (RoBERTa: o = padding_idx + 1)", "rows of P",
        "rows {start} .. {start}+{pos}-1 of P", _table, weights="position", user=False, view="given", preflight=None, temporaries=None),
    # Gemma's scaled embeddings (block.embedding_scale) and its RMSNorm with (1 + gamma) (block.norm: rmsnorm_offset)
    _op("embed_scale", 1, "token embeddings scaled by sqrt(C)", "按 sqrt(C) 缩放的 token 嵌入",
        "{0} * sqrt(C): every embedding times the square root of the width C, sqrt(C) rounded to the run's dtype (Gemma's normaliser)",
        "{0} * sqrt(C)", "{x} * sqrt(C)", _embed_scale_shape, user=False, preflight=None, temporaries=_scale_bytes),
    _op("rms_norm_offset", 1, "RMSNorm with (1 + gamma), x / sqrt(mean(x^2) + eps) * (1 + gamma)",
        "带 (1 + gamma) 的 RMSNorm，x / sqrt(mean(x^2) + eps) * (1 + gamma)",
        "(1 + gamma) * {0} / sqrt(mean({0}^2) + eps), over the C coordinates of each row (Gemma's RMSNorm: gamma = 0 is the identity scale)",
        "RMSNorm_(1+gamma)[{w}]({0})", "rms_norm({x}) over C, times (1 + gamma)", _same_over_c, weights="rms_offset", graph_weights=("gamma",),
        preflight=_rms_norm_contracts, temporaries=_rms_norm_bytes),
    # Gemma 2's soft cap of the logits (block.head_softcap, final_logit_softcapping); the scores' cap is the
    # mha step's softcap setting (block.attention_softcap)
    _op("softcap", 1, "soft cap, cap * tanh(x / cap)", "软上限，cap * tanh(x / cap)",
        "cap * tanh({0} / cap): every value squashed smoothly into (-cap, cap), nearly unchanged where |{0}| << cap",
        "cap*tanh({0}/cap)", "cap * tanh({x} / cap), cap = {cap}", _same, user=False, preflight=None, temporaries=_softcap_bytes),
    # T5's relative position bias (positions: relative), made once per stack and added to every self-attention's scores
    _op("relative_bias", 0, "relative position bias, one row of the table per bucket of key - query",
        "相对位置偏置：按 键 - 查询 的桶取表中的一行",
        "B[h, i, j] = table[bucket(j - i), h]: T5's buckets of the distance (exact below max_exact, logarithmic up to max_distance), "
        "one bias per head, added to the scores of every self-attention of the stack",
        "table[bucket(j - i)]", "table[bucket(j - i)], {buckets} buckets up to distance {distance}{direction}", _relative_bias_shape,
        weights="relative_bias", user=False, preflight=None, temporaries=_relative_bias_bytes),
    # Granite's multipliers: the embeddings and each sublayer's output times a number (block.embedding_multiplier,
    # block.residual_multiplier), the logits divided by one (block.logits_divisor); the number is the step's scale
    _op("scale", 1, "times a number, x * s", "乘以一个数，x * s",
        "{0} * s: every value times the step's scale s, s rounded to the run's dtype (Granite's embedding_multiplier, residual_multiplier)",
        "{0} * s", "{x} * {scale}", _same, user=False, preflight=None, temporaries=_scale_bytes),
    _op("divide", 1, "divided by a number, x / s", "除以一个数，x / s",
        "{0} / s: every value divided by the step's scale s, s rounded to the run's dtype (Granite's logits_scaling)",
        "{0} / s", "{x} / {scale}", _same, user=False, preflight=None, temporaries=_scale_bytes),
    # T5's tied head reads the decoder's output times C ** -0.5 (block.head_scale), a stage of its own
    _op("head_scale", 1, "the decoder's output scaled by C^-1/2, for the tied head", "解码器输出乘以 C^-1/2，供共享权重的输出层使用",
        "{0} * C^-1/2: every coordinate times 1 / sqrt(C), C ** -0.5 rounded to the run's dtype (T5's tied head: sequence_output * model_dim**-0.5)",
        "{0} * C^-1/2", "{x} * C^-1/2", _embed_scale_shape, user=False, preflight=None, temporaries=_scale_bytes),
    # the task heads after an encoder or a decoder (block.pooler, block.classifier, block.mlm): one position of each sample,
    # a dense layer with its activation, and a projection to the classes
    _op("pool", 1, "one position of each sample, [B,T,C] -> [B,C]", "每个样本取一个位置，[B,T,C] -> [B,C]",
        "{0}[b, t_b]: t_b = 0 (pool first: BERT's [CLS]) or the last position whose token is not pad (pool last: Hugging Face's "
        "sequence classification; the last position when no pad is given)", "pool({0})", "{x} at one position of each sample",
        _pool_shape, user=False, reference=False, reference_skip=_PER_POSITION, preflight=None, temporaries=None),
    _op("dense", 1, "a dense layer and its activation, act(x W + b)", "全连接层及其激活函数，act(x W + b)",
        "act({0} W + b): W [in,out], b [out], then the step's activation", "{act}({0} W + b)", "{act}({x} W + b), to width {out}",
        _dense_shape, weights="linear", graph_weights=("w", "b"), user=False, preflight=_linear_contracts, temporaries=_dense_bytes),
    _op("score", 1, "scores of a task head, x W + b", "任务头的分数，x W + b",
        "{0} W + b: W [in,out], b [out] (zeros when the checkpoint has no bias)", "{0} W + b", "{x} W + b, to width {out}",
        _dense_shape, weights="linear", graph_weights=("w", "b"), user=False, preflight=_linear_contracts, temporaries=None),
)

OPS: dict[str, Op] = {op.name: op for op in _RECORDS}
USER_OPS: tuple[str, ...] = tuple(name for name, op in OPS.items() if op.user)

