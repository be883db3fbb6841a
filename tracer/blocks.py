"""A block is a short list of named steps, written out like the book's small_block.

Pre-norm and post-norm are two preset lists, not branches inside one function;
a spec may also write its own list (``block.steps``).  Each step names the
stage it records, the op that computes it, the stages it reads, the weight
group it uses and, where it matters, its axis.  This module also knows each
op's output shape, so a spec's shapes are checked before anything runs.
Nothing here imports NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass

Shape = tuple[tuple[str, ...], tuple[int, ...]]  # (axis letters, sizes)


@dataclass(frozen=True)
class Step:
    name: str  # the stage this step records
    op: str  # an op of OPS
    inputs: tuple[str, ...]  # stage names read
    weights: str | None = None  # weight group: norm1, attn, ffn, ...
    meaning: str = ""  # what the stage is, as Table 17.1 words it
    axis: str | None = None  # layer_norm: statistics axis; select: axis sliced; mha: softmax axis (keys | queries)
    start: int | None = None  # select: first index kept
    stop: int | None = None  # select: one past the last index kept
    out: str | None = None  # linear: output width letter (C or F)

    def formula(self) -> str:
        args = ", ".join(self.inputs)
        extra = [f"weights={self.weights}"] if self.weights else []
        if self.axis is not None:
            extra.append(f"axis={self.axis}")
        if self.start is not None:
            extra.append(f"{self.start}:{self.stop}")
        if self.out is not None:
            extra.append(f"out={self.out}")
        return f"{self.name} = {self.op}({', '.join([args] + extra)})"

    def params(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for key in ("axis", "start", "stop", "out"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class OpInfo:
    arity: int
    group: str | None  # kind of weight group the op reads, a key of GROUP_KEYS
    meaning: str
    axes: tuple[str, ...] = ()  # allowed 'axis' values; the first is the contract


OPS: dict[str, OpInfo] = {
    "layer_norm": OpInfo(1, "norm", "LayerNorm", ("C", "T", "B")),
    "mha": OpInfo(1, "attn", "multi-head self-attention", ("keys", "queries")),
    "add": OpInfo(2, None, "elementwise add (residual)"),
    "ffn": OpInfo(1, "ffn", "position-wise FFN, ReLU(x W_1 + b_1) W_2 + b_2"),
    "ffn_hidden": OpInfo(1, "ffn", "FFN first half, ReLU(x W_1 + b_1)"),
    "ffn_out": OpInfo(1, "ffn", "FFN second half, h W_2 + b_2"),
    "linear": OpInfo(1, "linear", "x W + b"),
    "relu": OpInfo(1, None, "ReLU, max(x, 0)"),
    "select": OpInfo(1, None, "a slice start:stop along one axis (keeps the axis)", ("B", "T", "C", "F")),
    "identity": OpInfo(1, None, "the input, unchanged"),
}

NORM_KEYS: dict[str, tuple[str, ...]] = {"gamma": ("C",), "beta": ("C",)}
GROUP_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "norm": NORM_KEYS,
    "attn": {
        "w_q": ("C", "C"), "w_k": ("C", "C"), "w_v": ("C", "C"), "w_o": ("C", "C"),
        "b_q": ("C",), "b_k": ("C",), "b_v": ("C",), "b_o": ("C",),
    },
    "ffn": {"w1": ("C", "F"), "b1": ("F",), "w2": ("F", "C"), "b2": ("C",)},
    "linear": {"w": ("in", "out"), "b": ("out",)},  # letters filled in from the step
}


# Example 17.2 / section 17.5: N1 = LN1(X), U = MHA(N1), R = X + U, N2 = LN2(R), Y = R + FFN(N2)
PRE_NORM: tuple[Step, ...] = (
    Step("norm1", "layer_norm", ("x",), "norm1", "first normalisation, N_1 = LN_1(X)"),
    Step("attention", "mha", ("norm1",), "attn", "attention output, U = MHA(N_1)"),
    Step("residual1", "add", ("x", "attention"), None, "first residual add, R = X + U"),
    Step("norm2", "layer_norm", ("residual1",), "norm2", "second normalisation, N_2 = LN_2(R)"),
    Step("hidden", "ffn_hidden", ("norm2",), "ffn", "FFN after ReLU, ReLU(N_2 W_1 + b_1)"),
    Step("ffn", "ffn_out", ("hidden",), "ffn", "FFN output, hidden W_2 + b_2"),
    Step("output", "add", ("residual1", "ffn"), None, "block output, Y = R + FFN(N_2)"),
)

# Section 17.6: R_post = LN1(X + MHA(X)), Y_post = LN2(R_post + FFN(R_post))
POST_NORM: tuple[Step, ...] = (
    Step("attention", "mha", ("x",), "attn", "attention output, U = MHA(X)"),
    Step("residual1", "add", ("x", "attention"), None, "first residual add, X + U"),
    Step("norm1", "layer_norm", ("residual1",), "norm1", "first normalisation, R_post = LN_1(X + U)"),
    Step("hidden", "ffn_hidden", ("norm1",), "ffn", "FFN after ReLU, ReLU(R_post W_1 + b_1)"),
    Step("ffn", "ffn_out", ("hidden",), "ffn", "FFN output, hidden W_2 + b_2"),
    Step("residual2", "add", ("norm1", "ffn"), None, "second residual add, R_post + FFN(R_post)"),
    Step("norm2", "layer_norm", ("residual2",), "norm2", "second normalisation, LN_2(R_post + FFN)"),
    Step("output", "identity", ("norm2",), None, "block output, Y_post"),
)

FINAL_NORM = Step("final_norm", "layer_norm", ("output",), "final_norm", "final normalisation after the block (Mini GPT)")

PRESETS: dict[str, tuple[Step, ...]] = {"pre": PRE_NORM, "post": POST_NORM}


def block_steps(norm_order: str, final_norm: bool) -> tuple[Step, ...]:
    steps = PRESETS[norm_order]
    return steps + (FINAL_NORM,) if final_norm else steps


def with_final_norm(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    last = steps[-1].name
    return steps + (Step("final_norm", "layer_norm", (last,), "final_norm", FINAL_NORM.meaning),)


# Stages recorded before the block and inside attention (their meaning and axes).
ENTRY_STAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "embed": ("token embeddings, rows of E", ("B", "T", "C")),
    "input": ("input matrix given in the spec", ("B", "T", "C")),
    "position": ("position vectors, rows of P", ("T", "C")),
    "x": ("token + position, X", ("B", "T", "C")),
}

ATTN_STAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "q": ("queries, split into heads", ("B", "H", "T", "d")),
    "k": ("keys, split into heads", ("B", "H", "T", "d")),
    "v": ("values, split into heads", ("B", "H", "T", "d")),
    "scores": ("scores QK^T / sqrt(d), before the mask", ("B", "H", "T", "T")),
    "weights": ("attention weights, softmax over keys after the mask", ("B", "H", "T", "T")),
    "heads": ("heads mixed and concatenated, before W_O", ("B", "T", "C")),
}


def internal_prefix(step: Step) -> str:
    """Attention internals of the step named 'attention' are 'attn.*'; of any other step, '<name>.*'."""
    return "attn" if step.name == "attention" else step.name


def output_shape(step: Step, ins: list[Shape], sizes: dict[str, int]) -> Shape:
    """The stage's axes and sizes; raises ValueError with a short fact if the op cannot apply."""
    axes, shape = ins[0]
    op = step.op
    if op in ("relu", "identity"):
        return axes, shape
    if op in ("layer_norm", "mha", "ffn", "ffn_hidden"):  # their weights are [C] or [C,*]
        _need_width(op, axes, shape, "C", sizes)
    if op == "layer_norm":
        return axes, shape
    if op == "add":
        (a_axes, a), (b_axes, b) = ins
        if len(a) != len(b) or not all(x == y or 1 in (x, y) for x, y in zip(a, b)):
            raise ValueError(f"cannot add {_label(a_axes, a)} and {_label(b_axes, b)}: NumPy cannot broadcast them either")
        return a_axes, tuple(max(x, y) for x, y in zip(a, b))
    if op in ("mha", "ffn", "ffn_hidden"):
        if op == "mha" and shape[1] != sizes["T"]:
            raise ValueError(f"mha reads all T = {sizes['T']} positions (its mask is [T,T]), received {_label(axes, shape)}")
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
    if op == "select":
        assert step.axis is not None and step.start is not None and step.stop is not None
        if step.axis not in axes:
            raise ValueError(f"select along {step.axis}, but the input is {_label(axes, shape)}")
        i = axes.index(step.axis)
        if not 0 <= step.start < step.stop <= shape[i]:
            raise ValueError(f"select {step.start}:{step.stop} along {step.axis}, which has size {shape[i]}")
        return axes, shape[:i] + (step.stop - step.start,) + shape[i + 1:]
    raise ValueError(f"unknown op {op!r}")


def _need_width(op: str, axes: tuple[str, ...], shape: tuple[int, ...], letter: str, sizes: dict[str, int]) -> None:
    """The op's weights are sized for a full last axis: a slice of it (select along C or F) does not fit."""
    if len(axes) != 3 or axes[-1] != letter or shape[-1] != sizes[letter]:
        raise ValueError(f"{op} reads [B,T,{letter}] with {letter} = {sizes[letter]}, received {_label(axes, shape)}")


def _label(axes: tuple[str, ...], shape: tuple[int, ...]) -> str:
    return f"[{','.join(axes)}] = [{','.join(str(n) for n in shape)}]"
