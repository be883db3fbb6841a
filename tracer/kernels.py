"""Pure NumPy kernels: no I/O, no recording.  The contract sits on the def line.

Each kernel checks its operands against its axis contract before computing and
raises BrokenContract (a short fact) where NumPy would silently broadcast.
``strict=False`` skips the checks and returns what NumPy would have computed;
``strict`` given as a list collects every broken contract into it and computes
what NumPy would have (the executor's way: one stage may break several rules).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import BrokenContract, ShapeError

Strict = bool | list[BrokenContract]  # raise at the first broken contract | no checks | collect them all


def enforce(strict: Strict, check: Callable[..., None], *args: Any) -> None:
    """Run one contract check as ``strict`` says: raise, skip, or collect into the list."""
    if strict is False:
        return
    try:
        check(*args)
    except BrokenContract as bc:
        if not isinstance(strict, list):
            raise
        strict.append(bc)


def check_same_shape(a: np.ndarray, b: np.ndarray, names: tuple[str, str] = ("left", "right")) -> None:  # residual: full shapes equal
    if a.shape == b.shape:
        return
    try:
        out = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"cannot add {names[0]} {list(a.shape)} and {names[1]} {list(b.shape)}: the shapes do not match and NumPy cannot broadcast them") from None
    raise BrokenContract(
        "broadcast",
        f"{names[0]} {list(a.shape)} and {names[1]} {list(b.shape)} differ; an elementwise add needs equal shapes",
        {names[0]: a.shape, names[1]: b.shape},
        numpy_would=f"stretch the size-1 axes and return {list(out)} without complaint",
        rule="a residual add takes two arrays of exactly the same shape: same samples, same positions, same width (section 17.2)",
    )


def check_vector(name: str, v: np.ndarray, width: int, axis: str) -> None:  # v must be exactly [width] along the last axis
    if v.shape == (width,):
        return
    try:
        np.broadcast_shapes(v.shape, (width,))
    except ValueError:
        raise ShapeError(f"{name} has shape {list(v.shape)}, expected [{axis}] = [{width}]") from None
    raise BrokenContract(
        "broadcast",
        f"{name} has shape {list(v.shape)} where [{axis}] = [{width}] is due",
        {name: v.shape},
        numpy_would=f"repeat {name}'s single value across all {width} coordinates without complaint",
        why=f"{name} should hold one learned value per coordinate; a stretched value silently ties all {width} together",
        rule=f"{name} holds exactly one value per coordinate: [{axis}] = [{width}]",
        axes={name: (axis,)},
    )


def add(a: np.ndarray, b: np.ndarray, strict: Strict = True) -> np.ndarray:  # [B,T,C], [B,T,C] -> [B,T,C]
    enforce(strict, check_same_shape, a, b)
    return a + b


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, axis: int = -1, strict: Strict = True,
               labels: tuple[str, ...] = ()) -> np.ndarray:  # [B,T,C], [C], [C] -> [B,T,C], stats over C
    enforce(strict, check_norm_axis, x, axis, labels)
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    enforce(strict, check_vector, "beta", beta, x.shape[-1], "C")
    mu = x.mean(axis=axis, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=axis, keepdims=True)  # divide by the count: the values at hand, not a sample estimate
    return gamma * (xc / np.sqrt(var + eps)) + beta  # eps keeps the denominator positive when var = 0


def check_norm_axis(x: np.ndarray, axis: int, labels: tuple[str, ...]) -> None:  # statistics over the last axis only
    if axis % x.ndim != x.ndim - 1:
        raise _axis_contract(x, axis, labels)


def _axis_contract(x: np.ndarray, axis: int, labels: tuple[str, ...]) -> BrokenContract:
    name = labels[axis] if len(labels) == x.ndim else f"axis {axis}"
    last = labels[-1] if len(labels) == x.ndim else "the last axis"
    n = x.shape[axis]
    if name == "T":
        why = (f"each position's result now depends on all {n} positions: position 0 changes when positions 1..{n - 1} do, "
               "so the future leaks into earlier positions even though the attention mask is right (section 17.3)")
    elif name == "B":
        why = f"each sample's result now depends on the other {n - 1} sample{'s' if n > 2 else ''} of the batch: statistics mix samples"
    else:
        why = "the statistics mix entries that must be normalised separately"
    return BrokenContract(
        "axis",
        f"LayerNorm statistics taken over {name} ({n} entries) instead of {last} ({x.shape[-1]} coordinates)",
        {"x": x.shape},
        numpy_would=f"average over the {n} entries along {name} and normalise without complaint",
        why=why,
        rule="LayerNorm normalises each sample's each position on its own: statistics over C only (section 17.3)",
    )


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, strict: Strict = True,
           bias: tuple[str, str] = ("bias", "out")) -> np.ndarray:  # [..., n_in], [n_in, n_out], [n_out] -> [..., n_out]
    if x.shape[-1] != w.shape[0]:
        raise ShapeError(f"cannot multiply [..., {x.shape[-1]}] by a [{w.shape[0]}, {w.shape[1]}] matrix")
    enforce(strict, check_vector, bias[0], b, w.shape[1], bias[1])  # bias: its name in the spec and its axis letter
    return x @ w + b


def relu(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    return np.maximum(x, 0.0)


def softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:  # [..., T_q, T_k] -> same, normalised over keys (axis -1)
    m = s.max(axis=axis, keepdims=True)  # subtract the max so exp never overflows
    e = np.exp(s - m)
    return e / e.sum(axis=axis, keepdims=True)


def causal_mask(T: int) -> np.ndarray:  # -> [T,T] bool, True where key j is after query i
    return np.triu(np.ones((T, T), dtype=bool), k=1)


def split_heads(x: np.ndarray, H: int) -> np.ndarray:  # [B,T,C] -> [B,H,T,d]
    B, T, C = x.shape
    return x.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,C]
    B, H, T, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, H * d)


def check_softmax_axis(scores: np.ndarray, over_queries: bool) -> None:  # attention weights: softmax over keys
    if over_queries:
        raise BrokenContract(
            "axis",
            "softmax taken over queries (axis -2) instead of keys (axis -1)",
            {"scores": scores.shape},
            numpy_would="normalise each key's column instead of each query's row, without complaint",
            why=("a query's weights no longer sum to 1 over what it reads, and each weight depends on the other "
                 "queries' scores, later positions included"),
            rule="attention weights are a softmax over keys: each query's row sums to 1",
        )


def mha(x: np.ndarray, w_q: np.ndarray, b_q: np.ndarray, w_k: np.ndarray, b_k: np.ndarray, w_v: np.ndarray, b_v: np.ndarray,
        w_o: np.ndarray, b_o: np.ndarray, H: int, visible: np.ndarray | None, softmax_over_queries: bool = False,
        strict: Strict = True) -> dict[str, np.ndarray]:  # [B,T,C] -> [B,T,C]; visible [T,T] or None
    """Multi-head self-attention; returns every intermediate, keyed by stage suffix."""
    q = split_heads(linear(x, w_q, b_q, strict, ("b_q", "C")), H)  # [B,H,T,d]
    k = split_heads(linear(x, w_k, b_k, strict, ("b_k", "C")), H)
    v = split_heads(linear(x, w_v, b_v, strict, ("b_v", "C")), H)
    d = q.shape[-1]
    scores = (q @ k.swapaxes(-1, -2)) * (1.0 / np.sqrt(d))  # [B,H,T,T]
    enforce(strict, check_softmax_axis, scores, softmax_over_queries)
    masked = scores if visible is None else np.where(visible, scores, -np.inf)
    weights = softmax(masked, axis=-2 if softmax_over_queries else -1)
    heads = merge_heads(weights @ v)  # [B,H,T,d] -> [B,T,C]
    out = linear(heads, w_o, b_o, strict, ("b_o", "C"))
    return {"q": q, "k": k, "v": v, "scores": scores, "weights": weights, "heads": heads, "output": out}


def ffn_hidden(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, strict: Strict = True) -> np.ndarray:  # [B,T,C], [C,F], [F] -> [B,T,F]
    return relu(linear(x, w1, b1, strict, ("b1", "F")))


def ffn_out(h: np.ndarray, w2: np.ndarray, b2: np.ndarray, strict: Strict = True) -> np.ndarray:  # [B,T,F], [F,C], [C] -> [B,T,C]
    return linear(h, w2, b2, strict, ("b2", "C"))
