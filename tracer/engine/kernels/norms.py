"""The norms: LayerNorm, RMSNorm (and Gemma's, with 1 + gamma), BatchNorm and the per-head RMSNorm of q and k, with
their backward kernels.  Every one shares ``standardise``, which no finite input overflows."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tracer.engine import blas, kernels
from tracer.engine.kernels import Strict, check_vector, enforce, reduce_to
from tracer.model import contracts


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, axis: int = -1, strict: Strict = True,
               labels: tuple[str, ...] = ()) -> np.ndarray:  # [B,T,C], [C], [C] -> [B,T,C], stats over C
    enforce(strict, check_norm_axis, x, axis, labels)
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    enforce(strict, check_vector, "beta", beta, x.shape[-1], "C")
    if axis in (-1, x.ndim - 1):
        return _by_rows(lambda rows, out: _affine(standardise(rows, -1, eps, out=out), gamma, beta), x, gamma, beta)
    return _affine(standardise(x, axis, eps), gamma, beta)


def check_norm_axis(x: np.ndarray, axis: int, labels: tuple[str, ...]) -> None:  # statistics over the last axis only
    contracts.norm_axis(x.shape, axis, labels)


def rms_norm(x: np.ndarray, gamma: np.ndarray, eps: float, strict: Strict = True) -> np.ndarray:  # [B,T,C], [C] -> [B,T,C], over C
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    # no mean subtracted: RMSNorm only rescales
    return _by_rows(lambda rows, out: _affine(standardise(rows, -1, eps, center=False, out=out), gamma), x, gamma)


def rms_norm_offset(x: np.ndarray, gamma: np.ndarray, eps: float, strict: Strict = True) -> np.ndarray:  # [B,T,C], [C] -> [B,T,C], over C
    """Gemma's RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + gamma), the scale 1 + gamma formed in the run's dtype (as Hugging Face
    forms 1.0 + weight), then one product, as rms_norm's gamma."""
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    scale = 1.0 + gamma
    return _by_rows(lambda rows, out: _affine(standardise(rows, -1, eps, center=False, out=out), scale), x, scale)


def check_batch_norm(x: np.ndarray) -> None:  # a text block never normalises over samples and positions
    contracts.batch_norm(x.shape)


def batch_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, strict: Strict = True) -> np.ndarray:  # [B,T,C] -> [B,T,C], stats over B and T
    enforce(strict, check_batch_norm, x)
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    enforce(strict, check_vector, "beta", beta, x.shape[-1], "C")
    return _affine(standardise(x, (0, 1), eps), gamma, beta)


def head_norm(x: np.ndarray, gamma: np.ndarray, eps: float, strict: Strict = True,
              name: str = "q_norm", letter: str = "d") -> np.ndarray:  # [B,H,T,d], [d] -> [B,H,T,d], RMSNorm over each head's d coordinates
    """Also OLMo 2's norm of a whole projection, [B,T,C_q] with gamma [C_q] (``letter``: the axis gamma runs along)."""
    enforce(strict, check_vector, name, gamma, x.shape[-1], letter)
    return _affine(standardise(x, -1, eps, center=False), gamma)


def _by_rows(norm: Callable[[np.ndarray, np.ndarray | None], np.ndarray], x: np.ndarray, *vectors: np.ndarray) -> np.ndarray:
    """A norm over the last axis, ``norm(rows, out)``, of a big x: the rows shared out between threads, each
    writing its part of one result (every row is computed alone: the same numbers as in one piece).  Else in one piece."""
    fits = x.flags.c_contiguous and x.ndim >= 2 and all(v.shape == x.shape[-1:] and v.dtype == x.dtype for v in vectors)
    n = blas.workers(2, x.size, at_least=kernels.ROWS_ON_THREADS) if fits else 1
    if n < 2:
        return norm(x, None)
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    cut = [len(rows) * i // n for i in range(n + 1)]
    blas.on_threads(lambda part: norm(rows[part], out[part]), [slice(a, b) for a, b in zip(cut, cut[1:])])
    return out.reshape(x.shape)


def _affine(y: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None = None) -> np.ndarray:  # gamma * y + beta
    """gamma * y (+ beta), in y's own buffer when the vectors fit it (the same numbers); else NumPy's broadcast (--keep-going)."""
    fits = all(v.shape == y.shape[-1:] and v.dtype == y.dtype for v in (gamma, beta) if v is not None)
    if not fits:
        return gamma * y if beta is None else gamma * y + beta
    y *= gamma
    if beta is not None:
        y += beta
    return y


def standardise(x: np.ndarray, axes: int | tuple[int, ...], eps: float, center: bool = True,
                out: np.ndarray | None = None) -> np.ndarray:  # (x - mean) / sqrt(var + eps) over axes, into out if given
    """The normalisation every norm shares, computed so that no finite input overflows; a new array (or out).

    Each slice is first divided by 2^k, the power of two at or above its largest magnitude (k >= 0):
    (x - mu) / sqrt(var + eps) = (y - mu_y) / sqrt(var_y + eps / 4^k) with y = x / 2^k.  Dividing by a
    power of two is exact, so wherever the plain formula does not overflow the result is the same to the
    last bit; where it would (|x| above ~1e154 in float64, ~1e19 in float32) it stays right instead of 0.
    The mean is refined once (mu += mean(y - mu)), so a constant slice centres to exactly 0.
    Two arrays the size of x are made (the result, or ``out`` when given, and one scratch), each written in place.
    """
    with np.errstate(invalid="ignore"):  # NaN slices: their k is 0 below and NaN spreads as it should
        top = np.maximum(x.max(axis=axes, keepdims=True), -x.min(axis=axes, keepdims=True))  # max |x| without |x|
    _, k = np.frexp(top)  # top = f 2^k, f in [0.5, 1); NaN, inf, 0 give k = 0
    k = np.maximum(k, 0)  # only scale down: small values cannot overflow
    y = np.ldexp(x, -k, out=out)
    scratch = np.empty_like(y)
    if center:
        mu = y.mean(axis=axes, keepdims=True)
        mu += np.subtract(y, mu, out=scratch).mean(axis=axes, keepdims=True)  # the rounding error of the first mean, taken back
        np.subtract(y, mu, out=y)
    var = np.multiply(y, y, out=scratch).mean(axis=axes, keepdims=True)  # divide by the count: the values at hand, not a sample estimate
    del scratch
    den = np.sqrt(var + np.ldexp(np.asarray(eps, dtype=x.dtype), -2 * k))  # eps keeps the denominator positive when var = 0
    # eps / 4^k underflows to 0 only for slices near 1e154 or more; a constant one then has var = 0 and y = 0: 0, not 0/0
    zero = den == 0
    np.divide(y, den, out=y, where=~zero)
    if zero.any():
        np.copyto(y, 0, where=np.broadcast_to(zero, y.shape))
    return y


# -- backward kernels (tracer grad) ---------------------------------------------------------------------------

def _norm_backward(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float, axis: int | tuple[int, ...],
                   centred: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LayerNorm (centred) or RMSNorm over ``axis``: dx, dgamma, dbeta from xhat and 1/sigma.

    Three arrays of x's size in all (xhat, dxhat, one scratch), each op written into one of them: the
    same arithmetic as the plain formulas, without a fresh temporary per operation.
    """
    xhat = x - x.mean(axis=axis, keepdims=True) if centred else np.array(x, copy=True)
    scratch = np.multiply(xhat, xhat)
    inv = 1.0 / np.sqrt(scratch.mean(axis=axis, keepdims=True) + eps)
    xhat *= inv
    dxhat = np.multiply(dy, gamma)
    lead = tuple(range(dy.ndim - 1))  # gamma and beta are per coordinate: sum over every other axis
    dgamma = reduce_to(np.multiply(dy, xhat, out=scratch).sum(axis=lead), gamma.shape)
    mean_dxhat = dxhat.mean(axis=axis, keepdims=True) if centred else None
    np.multiply(xhat, np.multiply(dxhat, xhat, out=scratch).mean(axis=axis, keepdims=True), out=scratch)
    inner = np.subtract(dxhat, scratch, out=dxhat)  # dxhat - xhat * mean(dxhat * xhat)
    if mean_dxhat is not None:
        inner -= mean_dxhat
    return np.multiply(inner, inv, out=inner), dgamma, (dy.sum(axis=lead))


def layer_norm_backward(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float,
                        axis: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # [B,T,C] x2, [C], [C] -> dx [B,T,C], dgamma [C], dbeta [C]
    dx, dgamma, dbeta = _norm_backward(dy, x, gamma, eps, axis, centred=True)
    return dx, dgamma, reduce_to(dbeta, beta.shape)


def rms_norm_backward(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float
                      ) -> tuple[np.ndarray, np.ndarray]:  # [B,T,C] x2, [C] -> dx [B,T,C], dgamma [C]
    dx, dgamma, _ = _norm_backward(dy, x, gamma, eps, -1, centred=False)
    return dx, dgamma


def rms_norm_offset_backward(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float
                             ) -> tuple[np.ndarray, np.ndarray]:  # [B,T,C] x2, [C] -> dx [B,T,C], dgamma [C]
    """d(1 + gamma)/dgamma = 1: dgamma is RMSNorm's, and dx is RMSNorm's with the scale 1 + gamma."""
    dx, dgamma, _ = _norm_backward(dy, x, 1.0 + gamma, eps, -1, centred=False)
    return dx, dgamma


def batch_norm_backward(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # [B,T,C] x2, [C], [C] -> dx [B,T,C], dgamma [C], dbeta [C]
    dx, dgamma, dbeta = _norm_backward(dy, x, gamma, eps, (0, 1), centred=True)
    return dx, dgamma, reduce_to(dbeta, beta.shape)
