"""A model is a flat list of named steps, written out like the book's small_block.

A layer is a short template of steps; pre-norm and post-norm are two templates,
not branches inside one function, and a spec may write its own (``block.steps``).
A stack repeats the template with stage names prefixed ``blocks.0.``,
``blocks.1.``, ...; entry steps (embedding, positions) come before it and the
final norm and output head after it.  Each step names the stage it records,
the op that computes it, the stages it reads, the weight group it uses and,
where it matters, its axis.  This module also knows each op's output shape, so
a spec's shapes are checked before anything runs.  Nothing here imports NumPy.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tracer.messages import msg

Shape = tuple[tuple[str, ...], tuple[int, ...]]  # (axis letters, sizes)


class Step(NamedTuple):  # a NamedTuple, not a dataclass: cheaper to create at every start; variants via _replace
    name: str  # the stage this step records
    op: str  # an op of OPS
    inputs: tuple[str, ...]  # stage names read
    weights: str | None = None  # weight group: norm1, attn, ffn, blocks.0.attn, embedding, ...
    meaning: str = ""  # what the stage is, as Table 17.1 words it
    axis: str | None = None  # layer_norm: statistics axis; select: axis sliced; mha: softmax over keys | queries
    start: int | None = None  # select: first index kept
    stop: int | None = None  # select: one past the last index kept
    out: str | None = None  # linear: output width letter (C or F)
    mask: str | None = None  # mha: causal | none | explicit
    activation: str | None = None  # ffn, ffn_hidden: relu | gelu | gelu_tanh | swiglu
    base: float | None = None  # sinusoidal: the base; mha: the rotary base (None: no rotary positions)
    stream: str | None = None  # embed, input: which input the step reads (tokens | x | source | target)
    pairing: str | None = None  # mha with rotary positions: half pairs (i, i + d/2); None: interleaved (2i, 2i+1)

    def formula(self) -> str:
        args = ", ".join(self.inputs)
        extra = [f"weights={self.weights}"] if self.weights else []
        for key, value in self.params().items():
            extra.append(f"{key}={value}")
        return f"{self.name} = {self.op}({', '.join([args] + extra) if args else ', '.join(extra)})"

    def params(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for key in ("axis", "start", "stop", "out", "mask", "activation", "base", "stream", "pairing"):
            value = getattr(self, key)
            if key == "activation" and self.op == "ffn_out":
                continue  # kept only so the step shares its weight group's keys; the second half has no activation
            if value is not None:
                out[key] = value
        return out


class OpInfo(NamedTuple):  # NamedTuples, not dataclasses: a tenth of the import time, and tracer starts on every call
    arity: int
    group: str | None  # kind of weight group the op reads, a key of GROUP_KEYS (or a table name)
    meaning: str
    axes: tuple[str, ...] = ()  # allowed 'axis' values; the first is the contract
    user: bool = True  # may a spec's own steps use it


OPS: dict[str, OpInfo] = {
    "layer_norm": OpInfo(1, "norm", "LayerNorm", ("C", "T", "B")),
    "rms_norm": OpInfo(1, "rms", "RMSNorm, x / sqrt(mean(x^2) + eps) * gamma"),
    "batch_norm": OpInfo(1, "norm", "BatchNorm, statistics over samples and positions"),
    "mha": OpInfo(1, "attn", "multi-head self-attention", ("keys", "queries")),
    "cross_mha": OpInfo(2, "attn", "cross-attention: queries from the decoder, keys and values from the encoder"),
    "add": OpInfo(2, None, "elementwise add (residual)"),
    "ffn": OpInfo(1, "ffn", "position-wise FFN, act(x W_1 + b_1) W_2 + b_2"),
    "ffn_hidden": OpInfo(1, "ffn", "FFN first half, act(x W_1 + b_1)"),
    "ffn_out": OpInfo(1, "ffn", "FFN second half, h W_2 + b_2"),
    "linear": OpInfo(1, "linear", "x W + b"),
    "relu": OpInfo(1, None, "ReLU, max(x, 0)"),
    "select": OpInfo(1, None, "a slice start:stop along one axis (keeps the axis)", ("B", "T", "C", "F")),
    "identity": OpInfo(1, None, "the input, unchanged"),
    # entry and exit steps, built from the spec's settings
    "embed": OpInfo(0, "embedding", "token embeddings, rows of E", user=False),
    "input": OpInfo(0, None, "input matrix given in the spec", user=False),
    "position_table": OpInfo(0, "position", "position vectors, rows of P", user=False),
    "sinusoidal": OpInfo(0, None, "sinusoidal position vectors", user=False),
    "add_position": OpInfo(2, None, "token + position, X", user=False),
    "head": OpInfo(1, "head", "output head: logits over the vocabulary", user=False),
    "softmax": OpInfo(1, None, "softmax over the vocabulary", user=False),
}

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swiglu")
ACTIVATION_NAMES = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU (tanh)", "swiglu": "SwiGLU"}
NORMS = {"layernorm": "layer_norm", "rmsnorm": "rms_norm", "batchnorm": "batch_norm"}

GROUP_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "norm": {"gamma": ("C",), "beta": ("C",)},
    "rms": {"gamma": ("C",)},
    "attn": {
        "w_q": ("C", "C"), "w_k": ("C", "C"), "w_v": ("C", "C"), "w_o": ("C", "C"),
        "b_q": ("C",), "b_k": ("C",), "b_v": ("C",), "b_o": ("C",),
    },
    "ffn": {"w1": ("C", "F"), "b1": ("F",), "w2": ("F", "C"), "b2": ("C",)},
    "ffn_gated": {"w1": ("C", "F"), "b1": ("F",), "w3": ("C", "F"), "b3": ("F",), "w2": ("F", "C"), "b2": ("C",)},
    "linear": {"w": ("in", "out"), "b": ("out",)},  # letters filled in from the step
}
# Grouped-query attention (dims.H_kv < H): keys and values have H_kv heads, C_kv = H_kv * d columns.
GROUPED_KV_KEYS: dict[str, tuple[str, ...]] = {"w_k": ("C", "C_kv"), "w_v": ("C", "C_kv"), "b_k": ("C_kv",), "b_v": ("C_kv",)}
TABLES: dict[str, tuple[str, ...]] = {"embedding": ("V", "C"), "position": ("T_max", "C"), "head": ("C", "V")}


def group_keys(kind: str, grouped: bool) -> dict[str, tuple[str, ...]]:
    """A weight group's keys and their axes; ``grouped``: the model has fewer key/value heads than query heads."""
    keys = GROUP_KEYS[kind]
    return {**keys, **GROUPED_KV_KEYS} if grouped and kind == "attn" else keys


def group_kind(step: Step) -> str | None:
    kind = OPS[step.op].group
    if kind == "ffn" and step.activation == "swiglu":
        return "ffn_gated"
    return kind


# -- layer templates -------------------------------------------------------
# Example 17.2 / section 17.5: N1 = LN1(X), U = MHA(N1), R = X + U, N2 = LN2(R), Y = R + FFN(N2)
PRE_NORM: tuple[Step, ...] = (
    Step("norm1", "layer_norm", ("x",), "norm1", "first normalisation, N_1 = LN_1(X)"),
    Step("attention", "mha", ("norm1",), "attn", "attention output, U = MHA(N_1)"),
    Step("residual1", "add", ("x", "attention"), None, "first residual add, R = X + U"),
    Step("norm2", "layer_norm", ("residual1",), "norm2", "second normalisation, N_2 = LN_2(R)"),
    Step("hidden", "ffn_hidden", ("norm2",), "ffn", "FFN after the activation, act(N_2 W_1 + b_1)"),
    Step("ffn", "ffn_out", ("hidden",), "ffn", "FFN output, hidden W_2 + b_2"),
    Step("output", "add", ("residual1", "ffn"), None, "block output, Y = R + FFN(N_2)"),
)

# Section 17.6: R_post = LN1(X + MHA(X)), Y_post = LN2(R_post + FFN(R_post))
POST_NORM: tuple[Step, ...] = (
    Step("attention", "mha", ("x",), "attn", "attention output, U = MHA(X)"),
    Step("residual1", "add", ("x", "attention"), None, "first residual add, X + U"),
    Step("norm1", "layer_norm", ("residual1",), "norm1", "first normalisation, R_post = LN_1(X + U)"),
    Step("hidden", "ffn_hidden", ("norm1",), "ffn", "FFN after the activation, act(R_post W_1 + b_1)"),
    Step("ffn", "ffn_out", ("hidden",), "ffn", "FFN output, hidden W_2 + b_2"),
    Step("residual2", "add", ("norm1", "ffn"), None, "second residual add, R_post + FFN(R_post)"),
    Step("norm2", "layer_norm", ("residual2",), "norm2", "second normalisation, LN_2(R_post + FFN)"),
    Step("output", "identity", ("norm2",), None, "block output, Y_post"),
)

# Guide section 9: a decoder layer of an encoder-decoder has masked self-attention, cross-attention
# (queries from the decoder, keys and values from the encoder output "memory") and the FFN.
DECODER_PRE_NORM: tuple[Step, ...] = (
    Step("norm1", "layer_norm", ("x",), "norm1", "first normalisation, LN_1(X)"),
    Step("attention", "mha", ("norm1",), "attn", "masked self-attention"),
    Step("residual1", "add", ("x", "attention"), None, "first residual add"),
    Step("norm2", "layer_norm", ("residual1",), "norm2", "second normalisation"),
    Step("cross_attention", "cross_mha", ("norm2", "memory"), "cross_attn", "cross-attention: decoder queries, encoder keys and values"),
    Step("residual2", "add", ("residual1", "cross_attention"), None, "second residual add"),
    Step("norm3", "layer_norm", ("residual2",), "norm3", "third normalisation"),
    Step("hidden", "ffn_hidden", ("norm3",), "ffn", "FFN after the activation"),
    Step("ffn", "ffn_out", ("hidden",), "ffn", "FFN output"),
    Step("output", "add", ("residual2", "ffn"), None, "decoder layer output"),
)

DECODER_POST_NORM: tuple[Step, ...] = (
    Step("attention", "mha", ("x",), "attn", "masked self-attention"),
    Step("residual1", "add", ("x", "attention"), None, "first residual add"),
    Step("norm1", "layer_norm", ("residual1",), "norm1", "first normalisation, LN_1(X + U)"),
    Step("cross_attention", "cross_mha", ("norm1", "memory"), "cross_attn", "cross-attention: decoder queries, encoder keys and values"),
    Step("residual2", "add", ("norm1", "cross_attention"), None, "second residual add"),
    Step("norm2", "layer_norm", ("residual2",), "norm2", "second normalisation"),
    Step("hidden", "ffn_hidden", ("norm2",), "ffn", "FFN after the activation"),
    Step("ffn", "ffn_out", ("hidden",), "ffn", "FFN output"),
    Step("residual3", "add", ("norm2", "ffn"), None, "third residual add"),
    Step("norm3", "layer_norm", ("residual3",), "norm3", "third normalisation"),
    Step("output", "identity", ("norm3",), None, "decoder layer output"),
)

PRESETS: dict[str, tuple[Step, ...]] = {"pre": PRE_NORM, "post": POST_NORM}
DECODER_PRESETS: dict[str, tuple[Step, ...]] = {"pre": DECODER_PRE_NORM, "post": DECODER_POST_NORM}


class StackSettings(NamedTuple):  # variants via _replace
    """What a stack's steps take from the spec's block (or encoder/decoder) section."""

    norm: str = "layernorm"  # layernorm | rmsnorm | batchnorm
    activation: str = "relu"
    mask: str = "causal"  # causal | none | explicit
    positions: str = "learned"  # learned | sinusoidal | rotary | none
    position_base: float = 10000.0
    layers: int = 1
    final_norm: bool = False
    rotary_pairing: str = "interleaved"  # interleaved | half


def configure(template: tuple[Step, ...], s: StackSettings, preset: bool) -> tuple[Step, ...]:
    """Give a layer template the stack's norm, activation, mask and rotary settings."""
    out = []
    for step in template:
        changes: dict[str, Any] = {}
        if preset and step.op == "layer_norm" and s.norm != "layernorm":
            changes["op"] = NORMS[s.norm]
            word, letters = {"rmsnorm": ("RMS normalisation", "RMS_"), "batchnorm": ("batch normalisation (over B and T)", "BN_")}[s.norm]
            changes["meaning"] = step.meaning.replace("normalisation", word).replace("LN_", letters)
        if step.op in ("ffn", "ffn_hidden", "ffn_out") and step.activation is None:
            changes["activation"] = s.activation
            name = ACTIVATION_NAMES[s.activation]
            changes["meaning"] = step.meaning.replace("after the activation", f"after {name}").replace("act(", f"{name}(")
        if step.op == "mha":
            if step.mask is None:
                changes["mask"] = s.mask
            if s.positions == "rotary" and step.base is None:
                changes["base"] = s.position_base
                if s.rotary_pairing != "interleaved":  # the default stays unnamed: step lists read as before
                    changes["pairing"] = s.rotary_pairing
        if step.op == "cross_mha":
            changes["mask"] = "none"
        out.append(step._replace(**changes) if changes else step)
    return tuple(out)


def expand(template: tuple[Step, ...], prefix: str, layers: int, first_input: str, memory: str | None,
           plain: bool) -> tuple[list[Step], str]:
    """Repeat a layer template ``layers`` times; return the steps and the last stage's name.

    With ``plain`` (one layer of a decoder-only model, the chapter's case) names are not prefixed.
    """
    steps: list[Step] = []
    layer_input = first_input
    for i in range(layers):
        lp = prefix if plain else f"{prefix}blocks.{i}."

        def rename(stage: str, lp: str = lp, layer_input: str = layer_input) -> str:
            if stage == "x":
                return layer_input
            if stage == "memory":
                assert memory is not None
                return memory
            return lp + stage

        for step in template:
            steps.append(step._replace(
                name=lp + step.name, inputs=tuple(rename(s) for s in step.inputs),
                weights=(lp + step.weights) if step.weights else None,
            ))
        layer_input = steps[-1].name
    return steps, layer_input


def entry(prefix: str, stream: str, s: StackSettings, uses_tokens: bool) -> tuple[list[Step], str]:
    """Steps before the stack: embedding (or the given input), positions, X."""
    steps = []
    if uses_tokens:
        first = Step(prefix + "embed", "embed", (), "embedding", OPS["embed"].meaning, stream=stream)
    else:
        first = Step(prefix + "input", "input", (), None, OPS["input"].meaning, stream=stream)
    steps.append(first)
    if s.positions == "learned":
        steps.append(Step(prefix + "position", "position_table", (), "position", OPS["position_table"].meaning))
    elif s.positions == "sinusoidal":
        steps.append(Step(prefix + "position", "sinusoidal", (), None, f"sinusoidal positions, base {s.position_base:g}",
                          base=s.position_base))
    if s.positions in ("learned", "sinusoidal"):
        steps.append(Step(prefix + "x", "add_position", (first.name, prefix + "position"), None, "token + position, X"))
    else:
        why = "rotary positions act inside attention" if s.positions == "rotary" else "no positions"
        steps.append(Step(prefix + "x", "identity", (first.name,), None, f"X ({why})"))
    return steps, prefix + "x"


def final_norm(prefix: str, last: str, s: StackSettings) -> Step:
    op = NORMS[s.norm]
    return Step(prefix + "final_norm", op, (last,), prefix + "final_norm", "final normalisation after the stack")


def head_steps(last: str) -> list[Step]:
    return [
        Step("logits", "head", (last,), "head", "logits over the vocabulary"),
        Step("probs", "softmax", ("logits",), None, "next-token probabilities, softmax over V"),
    ]


ATTN_MEANINGS: dict[str, str] = {
    "q": "queries, split into heads",
    "k": "keys, split into heads",
    "v": "values, split into heads",
    "scores": "scores QK^T / sqrt(d), before the mask",
    "weights": "attention weights, softmax over keys after the mask",
    "heads": "heads mixed and concatenated, before W_O",
}


ENCODER = "encoder."  # the prefix of every encoder stage of an encoder-decoder


def position_axis(stage: str) -> str:
    """The axis a stage's positions run along: S (the source) for an encoder stage, else T."""
    return "S" if stage.startswith(ENCODER) else "T"


def internal_prefix(step: Step) -> str:
    """Internals of a step named 'attention' are '<prefix>attn.*', of 'cross_attention' '<prefix>cross.*'."""
    head, _, last = step.name.rpartition(".")
    head = head + "." if head else ""
    return head + {"attention": "attn", "cross_attention": "cross"}.get(last, last)


def shown_internal(step: Step, key: str) -> bool:
    """Whether the default table shows this attention internal (``key`` as in ATTN_MEANINGS): the cross-attention weights."""
    return step.op == "cross_mha" and key == "weights"


def attention_internals(step: Step, q: Shape, kv: Shape, sizes: dict[str, int]) -> dict[str, Shape]:
    """Axes and sizes of q, k, v, scores, weights, heads for an attention step.

    With grouped-query attention (sizes has H_kv) k and v have their own H_kv heads.
    """
    (qa, qs), (ka, ks) = q, kv
    H, d = sizes["H"], sizes["d"]
    kv_letter = "H_kv" if "H_kv" in sizes else "H"
    H_kv = sizes[kv_letter]
    tq, tk = qa[1], ka[1]
    B = qs[0]
    n_q, n_k = qs[1], ks[1]
    p = internal_prefix(step)
    return {
        f"{p}.q": (("B", "H", tq, "d"), (B, H, n_q, d)),
        f"{p}.k": (("B", kv_letter, tk, "d"), (ks[0], H_kv, n_k, d)),
        f"{p}.v": (("B", kv_letter, tk, "d"), (ks[0], H_kv, n_k, d)),
        f"{p}.scores": (("B", "H", tq, tk), (B, H, n_q, n_k)),
        f"{p}.weights": (("B", "H", tq, tk), (B, H, n_q, n_k)),
        f"{p}.heads": (("B", tq, "C"), (B, n_q, H * d)),
    }


def output_shape(step: Step, ins: list[Shape], sizes: dict[str, int], pos: str = "T") -> Shape:
    """The stage's axes and sizes; raises ValueError with a short fact if the op cannot apply."""
    op = step.op
    if op == "embed" or op == "input":
        return ("B", pos, "C"), (sizes["B"], sizes[pos], sizes["C"])
    if op in ("position_table", "sinusoidal"):
        return (pos, "C"), (sizes[pos], sizes["C"])
    axes, shape = ins[0]
    if op in ("relu", "identity", "softmax"):
        return axes, shape
    if op in ("layer_norm", "rms_norm", "batch_norm", "mha", "cross_mha", "ffn", "ffn_hidden"):  # weights are [C] or [C,*]
        _need_width(op, axes, shape, "C", sizes)
    if op in ("layer_norm", "rms_norm", "batch_norm"):
        return axes, shape
    if op in ("add", "add_position"):
        (a_axes, a), (b_axes, b) = ins
        if op == "add_position":
            return a_axes, a
        if len(a) != len(b) or not all(x == y or 1 in (x, y) for x, y in zip(a, b)):
            raise ValueError(msg("cannot add {a_axes} and {b_axes}: NumPy cannot broadcast them either", a_axes=shape_label(a_axes, a), b_axes=shape_label(b_axes, b)))
        return a_axes, tuple(max(x, y) for x, y in zip(a, b))
    if op in ("mha", "cross_mha", "ffn", "ffn_hidden"):
        if op == "mha" and shape[1] != sizes[axes[1]]:
            raise ValueError(msg("mha reads all {axes} = {sizes} positions (its mask is [{axes},{axes}]), received {axes2}", axes=axes[1], sizes=sizes[axes[1]], axes2=shape_label(axes, shape)))
        if op == "cross_mha":
            m_axes, m_shape = ins[1]
            if m_axes[-1:] != ("C",) or len(m_axes) != 3 or m_shape[0] != shape[0]:
                raise ValueError(msg("cross_mha reads memory [B,S,C], received {m_axes}", m_axes=shape_label(m_axes, m_shape)))
        if op == "ffn_hidden":
            return axes[:-1] + ("F",), shape[:-1] + (sizes["F"],)
        return axes, shape
    if op == "ffn_out":
        _need_width(op, axes, shape, "F", sizes)
        return axes[:-1] + ("C",), shape[:-1] + (sizes["C"],)
    if op == "linear":
        _need_width(op, axes, shape, axes[-1], sizes)  # W is [in,out], in = the input's last axis
        out = step.out or "C"
        return axes[:-1] + (out,), shape[:-1] + (sizes[out],)
    if op == "head":
        _need_width(op, axes, shape, "C", sizes)
        return axes[:-1] + ("V",), shape[:-1] + (sizes["V"],)
    if op == "select":
        assert step.axis is not None and step.start is not None and step.stop is not None
        if step.axis not in axes:
            raise ValueError(msg("select along {axis}, but the input is {axes}", axis=step.axis, axes=shape_label(axes, shape)))
        i = axes.index(step.axis)
        if not 0 <= step.start < step.stop <= shape[i]:
            raise ValueError(msg("select {start}:{stop} along {axis}, which has size {shape}", start=step.start, stop=step.stop, axis=step.axis, shape=shape[i]))
        return axes, shape[:i] + (step.stop - step.start,) + shape[i + 1:]
    raise ValueError(msg("unknown op {op}", op=repr(op)))


def _need_width(op: str, axes: tuple[str, ...], shape: tuple[int, ...], letter: str, sizes: dict[str, int]) -> None:
    """The op's weights are sized for a full last axis: a slice of it (select along C or F) does not fit."""
    if len(axes) != 3 or axes[-1] != letter or shape[-1] != sizes[letter]:
        raise ValueError(msg("{op} reads [B,{x},{letter}] with {letter} = {sizes}, received {axes}", op=op, x=axes[1] if len(axes) == 3 else 'T', letter=letter, sizes=sizes[letter], axes=shape_label(axes, shape)))


def shape_label(axes: tuple[str, ...], shape: tuple[int, ...]) -> str:
    return f"[{','.join(axes)}] = [{','.join(str(n) for n in shape)}]"
