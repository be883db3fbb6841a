"""Pure NumPy kernels: no I/O, no recording.  The contract sits on the def line.

Each kernel checks its operands against its axis contract before computing and
raises BrokenContract (a short fact) where NumPy would silently broadcast.
``strict=False`` skips the checks and returns what NumPy would have computed;
``strict`` given as a list collects every broken contract into it and computes
what NumPy would have (the executor's way: one stage may break several rules).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import contracts
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
    contracts.same_shape(a.shape, b.shape, names)


def check_vector(name: str, v: np.ndarray, width: int, axis: str) -> None:  # v must be exactly [width] along the last axis
    contracts.vector(name, v.shape, width, axis)


def add(a: np.ndarray, b: np.ndarray, strict: Strict = True, names: tuple[str, str] = ("left", "right")) -> np.ndarray:  # [B,T,C], [B,T,C] -> [B,T,C]
    enforce(strict, check_same_shape, a, b, names)
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
    contracts.norm_axis(x.shape, axis, labels)


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, strict: Strict = True,
           bias: tuple[str, str] = ("bias", "out")) -> np.ndarray:  # [..., n_in], [n_in, n_out], [n_out] -> [..., n_out]
    if x.shape[-1] != w.shape[0]:
        raise ShapeError(f"cannot multiply [..., {x.shape[-1]}] by a [{w.shape[0]}, {w.shape[1]}] matrix")
    enforce(strict, check_vector, bias[0], b, w.shape[1], bias[1])  # bias: its name in the spec and its axis letter
    if b.shape == (w.shape[1],):
        y = x @ w
        y += b  # in place: no second [..., n_out] array
        return y
    return x @ w + b  # NumPy's own broadcast, for --keep-going


def relu(x: np.ndarray) -> np.ndarray:  # [...] -> [...]
    return np.maximum(x, 0.0)


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray) -> np.ndarray:  # [...] -> [...], exact: x * Phi(x) = x/2 (1 + erf(x / sqrt 2))
    return (0.5 * x * (1.0 + np.asarray(_erf(x * (1.0 / math.sqrt(2.0)))).astype(x.dtype))).astype(x.dtype, copy=False)


def gelu_tanh(x: np.ndarray) -> np.ndarray:  # [...] -> [...], GPT-2's tanh approximation
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def silu(x: np.ndarray) -> np.ndarray:  # [...] -> [...], x * sigmoid(x)
    return x / (1.0 + np.exp(-x))


ACTIVATIONS = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh}


def softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:  # [..., T_q, T_k] -> same, normalised over keys (axis -1)
    m = s.max(axis=axis, keepdims=True)  # subtract the max so exp never overflows
    e = np.exp(s - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_inplace(s: np.ndarray, axis: int = -1) -> None:  # like softmax, in the array itself (no [B,H,T,T] temporaries)
    m = s.max(axis=axis, keepdims=True)
    np.subtract(s, m, out=s)  # subtract the max so exp never overflows
    np.exp(s, out=s)
    np.divide(s, s.sum(axis=axis, keepdims=True), out=s)


def causal_mask(T: int) -> np.ndarray:  # -> [T,T] bool, True where key j is after query i
    return np.triu(np.ones((T, T), dtype=bool), k=1)


def split_heads(x: np.ndarray, H: int) -> np.ndarray:  # [B,T,C] -> [B,H,T,d]
    B, T, C = x.shape
    return x.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,C]
    B, H, T, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, H * d)


def rotary(x: np.ndarray, base: float) -> np.ndarray:  # [B,H,T,d] -> [B,H,T,d], pairs (2i, 2i+1) turned by t * base^(-2i/d)
    T, d = x.shape[-2], x.shape[-1]
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # [d/2] turning speeds: fast first, slow last
    angle = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]  # [T, d/2]
    cos, sin = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out


def sinusoidal(T: int, C: int, base: float, dtype: np.dtype) -> np.ndarray:  # -> [T,C]; even columns sin, odd cos
    i2 = np.arange(0, C, 2, dtype=np.float64)  # 2i
    angle = np.arange(T, dtype=np.float64)[:, None] / base ** (i2 / C)[None, :]  # [T, ceil(C/2)]
    pe = np.empty((T, C), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : C // 2])
    return pe.astype(dtype, copy=False)


ROW_BLOCK = 256  # query rows per block under a causal mask: keys after the block are never touched


def check_softmax_axis(scores: np.ndarray, over_queries: bool) -> None:  # attention weights: softmax over keys
    contracts.softmax_axis(scores.shape, over_queries)


def qk_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:  # [B,H,T,d], [B,H,S,d] -> [B,H,T,S], scaled by 1/sqrt(d)
    B, H, T, d = q.shape
    scores = np.empty((B, H, T, k.shape[2]), dtype=np.result_type(q, k))
    for b in range(B):
        for h in range(H):  # one head at a time: contiguous operands for BLAS, cache-sized temporaries
            np.matmul(np.ascontiguousarray(q[b, h]), np.ascontiguousarray(k[b, h]).T, out=scores[b, h])
    scores *= 1.0 / math.sqrt(d)
    return scores


def attend(scores: np.ndarray, v: np.ndarray, visible: np.ndarray | None, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Masked softmax over keys and the mix of values: [B,H,T,S], [B,H,S,d] -> weights [B,H,T,S], mixed [B,H,T,d].

    Under a causal mask each block of query rows only reads the keys up to its last row: the weights
    after it stay exactly 0 and are never exponentiated or multiplied.
    """
    B, H, T, S = scores.shape
    weights = np.zeros(scores.shape, dtype=scores.dtype)  # calloc: pages the mask leaves at 0 are never written
    mixed = np.empty((B, H, T, v.shape[-1]), dtype=np.result_type(scores, v))
    blocked = None if visible is None else ~visible
    step = ROW_BLOCK if causal else T
    for b in range(B):
        for h in range(H):
            vh = np.ascontiguousarray(v[b, h])
            for r0 in range(0, T, step):
                r1 = min(r0 + step, T)
                n = r1 if causal else S  # keys this block of rows may read
                w = weights[b, h, r0:r1, :n]
                np.copyto(w, scores[b, h, r0:r1, :n])
                if causal:
                    np.copyto(w, -np.inf, where=np.triu(np.ones((r1 - r0, n), dtype=bool), k=r0 + 1))
                elif blocked is not None:
                    np.copyto(w, -np.inf, where=blocked)
                softmax_inplace(w)
                np.matmul(w, vh[:n], out=mixed[b, h, r0:r1])
    return weights, mixed


def mha(xq: np.ndarray, xkv: np.ndarray | None = None, *, w_q: np.ndarray, b_q: np.ndarray, w_k: np.ndarray, b_k: np.ndarray,
        w_v: np.ndarray, b_v: np.ndarray, w_o: np.ndarray, b_o: np.ndarray, H: int, visible: np.ndarray | None = None,
        causal: bool = False, softmax_over_queries: bool = False, rotary_base: float | None = None,
        strict: Strict = True) -> dict[str, np.ndarray]:  # [B,T,C], [B,S,C] -> [B,T,C]
    """Multi-head attention (self when xkv is None; cross: keys and values from xkv); every intermediate, by stage suffix.

    ``causal`` masks keys after each query; ``visible`` ([T,S] bool, True where a query may read a key) is any other mask.
    """
    if xkv is None:
        xkv = xq
    q = split_heads(linear(xq, w_q, b_q, strict, ("b_q", "C")), H)  # [B,H,T,d]
    k = split_heads(linear(xkv, w_k, b_k, strict, ("b_k", "C")), H)  # [B,H,S,d]
    v = split_heads(linear(xkv, w_v, b_v, strict, ("b_v", "C")), H)
    if rotary_base is not None:  # positions enter as rotations of q and k, so scores see only offsets
        q, k = rotary(q, rotary_base), rotary(k, rotary_base)
    scores = qk_scores(q, k)  # [B,H,T,S]
    enforce(strict, check_softmax_axis, scores, softmax_over_queries)
    if softmax_over_queries:  # the violation, computed as NumPy would (only with strict=False)
        weights = np.where(visible, scores, -np.inf) if visible is not None else scores.copy()
        softmax_inplace(weights, axis=-2)
        mixed = weights @ v
    else:
        weights, mixed = attend(scores, v, visible, causal)
    heads = merge_heads(mixed)  # [B,H,T,d] -> [B,T,C]
    out = linear(heads, w_o, b_o, strict, ("b_o", "C"))
    return {"q": q, "k": k, "v": v, "scores": scores, "weights": weights, "heads": heads, "output": out}


def check_batch_norm(x: np.ndarray) -> None:  # a text block never normalises over samples and positions
    contracts.batch_norm(x.shape)


def rms_norm(x: np.ndarray, gamma: np.ndarray, eps: float, strict: Strict = True) -> np.ndarray:  # [B,T,C], [C] -> [B,T,C], over C
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    ms = (x * x).mean(axis=-1, keepdims=True)  # no mean subtracted: RMSNorm only rescales
    return gamma * (x / np.sqrt(ms + eps))


def batch_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, strict: Strict = True) -> np.ndarray:  # [B,T,C] -> [B,T,C], stats over B and T
    enforce(strict, check_batch_norm, x)
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    enforce(strict, check_vector, "beta", beta, x.shape[-1], "C")
    mu = x.mean(axis=(0, 1), keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=(0, 1), keepdims=True)
    return gamma * (xc / np.sqrt(var + eps)) + beta


def ffn_hidden(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, activation: str = "relu", w3: np.ndarray | None = None,
               b3: np.ndarray | None = None, strict: Strict = True) -> np.ndarray:  # [B,T,C], [C,F], [F] -> [B,T,F]
    if activation == "swiglu":  # gated: silu(x W_1 + b_1) * (x W_3 + b_3)
        assert w3 is not None and b3 is not None
        return silu(linear(x, w1, b1, strict, ("b1", "F"))) * linear(x, w3, b3, strict, ("b3", "F"))
    h = linear(x, w1, b1, strict, ("b1", "F"))
    if activation == "relu":
        return np.maximum(h, 0.0, out=h)  # in place: h is ours
    return ACTIVATIONS[activation](h)


def ffn_out(h: np.ndarray, w2: np.ndarray, b2: np.ndarray, strict: Strict = True) -> np.ndarray:  # [B,T,F], [F,C], [C] -> [B,T,C]
    return linear(h, w2, b2, strict, ("b2", "C"))
