"""Pure NumPy kernels: no I/O, no recording.  The contract sits on the def line.

Each kernel checks its operands against its axis contract before computing and
raises BrokenContract (a short fact) where NumPy would silently broadcast.
``strict=False`` skips the checks and returns what NumPy would have computed;
``strict`` given as a list collects every broken contract into it and computes
what NumPy would have (the executor's way: one stage may break several rules).

The kernels are in modules by family of op, each with its backward kernels (tracer grad): ``norms`` (LayerNorm,
RMSNorm, BatchNorm), ``attention`` (scores, the masked softmax over keys and the mix of values, head by head),
``multihead`` (multi-head attention as a layer: the projections, the heads split and merged), ``ffn`` (the FFN, its
activations and a mixture of experts) and ``embeddings`` (token and position vectors, rotary and relative positions,
the output head).  This module holds what they share: the contract checks, the residual add, the linear layer, the
softmax, reductions, and their gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tracer.engine import blas
from tracer.errors import BrokenContract, ShapeError
from tracer.messages import msg
from tracer.model import contracts

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


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, strict: Strict = True,
           bias: tuple[str, str] = ("bias", "out")) -> np.ndarray:  # [..., n_in], [n_in, n_out], [n_out] -> [..., n_out]
    if x.shape[-1] != w.shape[0]:
        raise ShapeError(msg("cannot multiply [..., {shape}] by a [{shape2}, {shape3}] matrix", shape=x.shape[-1], shape2=w.shape[0], shape3=w.shape[1]))
    enforce(strict, check_vector, bias[0], b, w.shape[1], bias[1])  # bias: its name in the spec and its axis letter
    if b.shape == (w.shape[1],):
        y = x @ w
        y += b  # in place: no second [..., n_out] array
        return y
    return x @ w + b  # NumPy's own broadcast, for --keep-going


ROWS_ON_THREADS = 1 << 18  # values from which a kernel shares its work between threads (a norm's rows, an activation's blocks, a softmax's rows)


def softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:  # [..., T_q, T_k] -> same, normalised over keys (axis -1)
    m = s.max(axis=axis, keepdims=True)  # subtract the max so exp never overflows
    e = np.exp(s - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_inplace(s: np.ndarray, axis: int = -1) -> None:  # like softmax, in the array itself (no [B,H,T,T] temporaries)
    softmax_into(s, s, axis)


def softmax_into(s: np.ndarray, out: np.ndarray, axis: int = -1) -> None:  # like softmax, written into out (s itself: in place)
    m = s.max(axis=axis, keepdims=True)
    np.subtract(s, m, out=out)  # subtract the max so exp never overflows
    np.exp(out, out=out)
    np.divide(out, out.sum(axis=axis, keepdims=True), out=out)


def softmax_by_rows(x: np.ndarray, rows: int, out: np.ndarray | None = None) -> np.ndarray:  # [..., V] -> same, normalised over V, ``rows`` rows at a time
    """softmax over the last axis, made in its result ``rows`` rows at a time: each row's max, exps and sum are the same
    operations on the same values, so the same numbers, without [..., V] temporaries (GPT-2's logits at T = 1024: 206 MB
    each in float32).  The blocks of rows are shared out between threads (as many as the BLAS has): a row is
    computed by one thread, start to end, so again the same numbers.  ``out``: a C-ordered array of x's shape and dtype
    to write the result into (the lens's stacked tail: straight into its [layers, T, V]), returned."""
    if out is None and (x.ndim < 2 or x.shape[-1] == 0 or x.size <= rows * x.shape[-1]):
        return softmax(x)
    if out is None:
        out = np.empty(x.shape, dtype=x.dtype)
    elif out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(f"softmax_by_rows: out is {out.dtype}{list(out.shape)}, expected a C-ordered {x.dtype}{list(x.shape)}")
    if x.size == 0:
        return out
    src, into = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
    blocks = -(-src.shape[0] // rows)

    def part(span: tuple[int, int]) -> None:
        for b in range(*span):
            softmax_into(src[b * rows:(b + 1) * rows], into[b * rows:(b + 1) * rows])

    blas.by_spans(part, blocks, x.size, ROWS_ON_THREADS)
    return out


def all_finite(a: np.ndarray) -> bool:
    """One pass without a temporary: a finite sum means every entry is finite; otherwise look closely."""
    with np.errstate(all="ignore"):
        if np.isfinite(a.sum()):
            return True
    return bool(np.isfinite(a).all())


# -- backward kernels (tracer grad) -----------------------------------------------------------------------------
# One per forward kernel above: each takes the gradient of the loss with respect to the forward kernel's output (dy)
# and what the forward read, and returns the gradients with respect to its inputs and weights.  Nothing is recorded
# here; tracer/engine/backward.py walks the step list.  Every weight gradient a kernel returns is a fresh array (or a
# view of one) that nothing else holds.  Speed: fresh memory is expensive to touch, so a kernel works in place in the
# temporaries it made (``out=``) and hands GEMMs strided or transposed views rather than copies (BLAS reads both as
# they are).

def reduce_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:  # [...] -> shape: the sum over what a broadcast stretched
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead > 0 else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def add_backward(dy: np.ndarray, a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:  # [B,T,C] -> da, db
    return reduce_to(dy, a_shape), reduce_to(dy, b_shape)


def linear_backward(dy: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # [..., n_out], [..., n_in], [n_in, n_out], [n_out] -> dx, dw, db
    """Two GEMMs on 2-D operands: x and w enter transposed as views (BLAS reads them so), never copied; big ones at once,
    each on its own thread (blas.both: the same numbers)."""
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    dw, dx2 = blas.both(lambda: x2.T @ dy2, lambda: dy2 @ w.T, 2 * dy2.shape[0] * w.size)  # [n_in, n_out], [rows, n_in]
    return dx2.reshape(*dy.shape[:-1], w.shape[0]), dw, reduce_to(dy2.sum(axis=0), b.shape)


def softmax_backward(dy: np.ndarray, p: np.ndarray, axis: int = -1) -> np.ndarray:  # dy, p = softmax output -> ds, same shape
    """p * (dy - sum(dy * p)), computed in one fresh array, stably (``dominant_shift``).  A weight of exactly 0
    (a masked key) passes exactly 0."""
    ds = dominant_shift(dy, p, axis, np.empty(np.broadcast_shapes(dy.shape, p.shape), dtype=np.result_type(dy, p)))
    ds -= np.multiply(ds, p).sum(axis=axis, keepdims=True)
    return np.multiply(ds, p, out=ds)


def dominant_shift(dy: np.ndarray, p: np.ndarray, axis: int, out: np.ndarray) -> np.ndarray:
    """dy minus, along ``axis``, its value at the largest weight p: the softmax's gradient, p * (dy - sum(dy * p)),
    is the same for dy shifted by a constant (the weights sum to 1), and with this shift it is computed without
    cancellation.  Unshifted, the dominant key's dy - sum(dy * p) subtracts two nearly equal numbers: when the
    softmax is saturated (huge scores: weights 1 and 0) the true gradient is 0, or below 1e-300, while the two
    roundings of the same sum leave about 1e-16 of dy, which q and k (huge too) then multiply into the gradients
    of w_q and w_k (1e-2 at inputs of 1e10).  Shifted, the dominant key's difference is 0 exactly, and the sum is
    a sum of small terms: each score's gradient is right to a few units in the last place of its own size."""
    top = np.take_along_axis(dy, np.expand_dims(p.argmax(axis=axis), axis), axis=axis)
    return np.subtract(dy, top, out=out)


def select_backward(dy: np.ndarray, shape: tuple[int, ...], axis: int, start: int, stop: int) -> np.ndarray:  # slice -> [input shape], zeros outside
    dx = np.zeros(shape, dtype=dy.dtype)
    index = tuple(slice(start, stop) if j == axis else slice(None) for j in range(len(shape)))
    dx[index] = dy
    return dx
