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

from tracer.engine import blas
from tracer.errors import BrokenContract, ShapeError
from tracer.messages import msg
from tracer.model import contracts, rope
from tracer.model.activations import activation_of
from tracer.model.contracts import ROW_BLOCK

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
    if axis in (-1, x.ndim - 1):
        return _by_rows(lambda rows, out: _affine(standardise(rows, -1, eps, out=out), gamma, beta), x, gamma, beta)
    return _affine(standardise(x, axis, eps), gamma, beta)


def _by_rows(norm: Callable[[np.ndarray, np.ndarray | None], np.ndarray], x: np.ndarray, *vectors: np.ndarray) -> np.ndarray:
    """A norm over the last axis, ``norm(rows, out)``, of a big x: the rows shared out between threads, each
    writing its part of one result (every row is computed alone: the same numbers as in one piece).  Else in one piece."""
    fits = x.flags.c_contiguous and x.ndim >= 2 and all(v.shape == x.shape[-1:] and v.dtype == x.dtype for v in vectors)
    n = blas.workers(2, x.size, at_least=ROWS_ON_THREADS) if fits else 1
    if n < 2:
        return norm(x, None)
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    cut = [len(rows) * i // n for i in range(n + 1)]
    blas.on_threads(lambda part: norm(rows[part], out[part]), [slice(a, b) for a, b in zip(cut, cut[1:])])
    return out.reshape(x.shape)


ROWS_ON_THREADS = 1 << 18  # values from which a norm over the last axis shares its rows between threads


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


def check_norm_axis(x: np.ndarray, axis: int, labels: tuple[str, ...]) -> None:  # statistics over the last axis only
    contracts.norm_axis(x.shape, axis, labels)


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


def relu(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], in x itself when ``inplace``
    return np.maximum(x, 0.0, out=x if inplace else None)


def relu2(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], max(x, 0)^2, Primer's squared ReLU
    """relu(x) ** 2, as relu(x) * relu(x) (the same rounding as the power), in x itself when ``inplace``."""
    y = np.maximum(x, 0.0, out=x if inplace else None)
    return np.multiply(y, y, out=y)


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], exact: x * Phi(x) = x/2 (1 + erf(x / sqrt 2))
    """Always a new array (``inplace`` would save nothing: math.erf goes through an object array of Python floats)."""
    return (0.5 * x * (1.0 + np.asarray(_erf(x * (1.0 / math.sqrt(2.0)))).astype(x.dtype))).astype(x.dtype, copy=False)


def gelu_tanh(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], GPT-2's tanh approximation
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), each operation in that order, in x itself when ``inplace``
    (an x that is ours): the same roundings as the expression, without its six temporaries; a big array a block at a
    time (_elementwise)."""
    if _by_blocks(x):
        return _elementwise(_gelu_tanh_into, x, inplace)
    return _gelu_tanh_into(x, x if inplace else None, None)


def _gelu_tanh_into(x: np.ndarray, y: np.ndarray | None, t: np.ndarray | None) -> np.ndarray:
    """gelu_tanh(x) into y, with t as scratch (each None: a new array, of NumPy's result dtype)."""
    t = np.multiply(x, 0.044715, out=t)
    t *= x
    t *= x
    t += x
    t *= math.sqrt(2.0 / math.pi)
    np.tanh(t, out=t)
    t += 1.0
    y = np.multiply(x, 0.5, out=y)  # last: y may be x itself
    y *= t
    return y


def silu(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], x * sigmoid(x) = x / (1 + exp(-x))
    if _by_blocks(x):
        return _elementwise(_silu_into, x, inplace)
    return _silu_into(x, x if inplace else None, None)


def _silu_into(x: np.ndarray, y: np.ndarray | None, t: np.ndarray | None) -> np.ndarray:
    """x / (1 + exp(-x)) into y, with t as scratch (t None: a new array; y None: the result in t)."""
    t = np.negative(x, out=t)
    np.exp(t, out=t)
    t += 1.0
    return np.divide(x, t, out=t if y is None else y)


def _by_blocks(x: np.ndarray) -> bool:
    """A big C-contiguous array of native float16, float32 or float64: an activation works through it by blocks
    (_elementwise); anything else (small, strided, other dtypes, --keep-going's odd operands) as one NumPy expression."""
    return (isinstance(x, np.ndarray) and x.dtype in (np.float16, np.float32, np.float64) and x.dtype.isnative
            and x.flags.c_contiguous and x.size > ELEMENTWISE_BLOCK)


def _elementwise(kernel: Callable[[np.ndarray, np.ndarray | None, np.ndarray | None], np.ndarray], x: np.ndarray,
                inplace: bool) -> np.ndarray:
    """kernel(x, y, scratch) for an activation, ELEMENTWISE_BLOCK values at a time: its scratch and the block stay in
    the cache instead of each operation streaming the whole array through memory, and the blocks are shared out
    between threads (as many as the BLAS has).  Every value goes through the same operations in the same order,
    and the blocks start at multiples of the block, so the SIMD loops see the same lanes: the same numbers, to the bit,
    as the operations on the whole array (for the arrays _by_blocks picks)."""
    y = x if inplace else np.empty_like(x)
    xs, ys = x.reshape(-1), y.reshape(-1)
    blocks = -(-x.size // ELEMENTWISE_BLOCK)

    def part(span: tuple[int, int]) -> None:
        t = np.empty(ELEMENTWISE_BLOCK, dtype=x.dtype)
        for b in range(*span):
            lo, hi = b * ELEMENTWISE_BLOCK, min(x.size, (b + 1) * ELEMENTWISE_BLOCK)
            kernel(xs[lo:hi], ys[lo:hi], t[:hi - lo])

    blas.by_spans(part, blocks, x.size, ROWS_ON_THREADS)
    return y


ELEMENTWISE_BLOCK = 1 << 17  # values of an activation computed at a time (_elementwise): 512 kB of float32 for the block,
# as much for its scratch, in a core's L2 cache beside the result


def softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:  # [..., T_q, T_k] -> same, normalised over keys (axis -1)
    m = s.max(axis=axis, keepdims=True)  # subtract the max so exp never overflows
    e = np.exp(s - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_inplace(s: np.ndarray, axis: int = -1) -> None:  # like softmax, in the array itself (no [B,H,T,T] temporaries)
    m = s.max(axis=axis, keepdims=True)
    np.subtract(s, m, out=s)  # subtract the max so exp never overflows
    np.exp(s, out=s)
    np.divide(s, s.sum(axis=axis, keepdims=True), out=s)


def softmax_by_rows(x: np.ndarray, rows: int) -> np.ndarray:  # [..., V] -> same, normalised over V, ``rows`` rows at a time
    """softmax over the last axis, made in its result ``rows`` rows at a time: each row's max, exps and sum are the same
    operations on the same values, so the same numbers, without [..., V] temporaries (GPT-2's logits at T = 1024: 206 MB
    each in float32).  The blocks of rows are shared out between threads (as many as the BLAS has): a row is
    computed by one thread, start to end, so again the same numbers."""
    if x.ndim < 2 or x.shape[-1] == 0 or x.size <= rows * x.shape[-1]:
        return softmax(x)
    out = np.empty(x.shape, dtype=x.dtype)
    src, into = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
    blocks = -(-src.shape[0] // rows)

    def part(span: tuple[int, int]) -> None:
        for b in range(*span):
            block = into[b * rows:(b + 1) * rows]
            block[...] = src[b * rows:(b + 1) * rows]
            softmax_inplace(block)

    blas.by_spans(part, blocks, x.size, ROWS_ON_THREADS)
    return out


def causal_mask(T: int) -> np.ndarray:  # -> [T,T] bool, True where key j is after query i
    return np.triu(np.ones((T, T), dtype=bool), k=1)


def split_heads(x: np.ndarray, H: int) -> np.ndarray:  # [B,T,C] -> [B,H,T,d]
    B, T, C = x.shape
    return x.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,C]
    B, H, T, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, H * d)


def check_rotary_width(d: int, rotary_dim: int | None) -> None:  # partial rotary: an even width of at most d
    contracts.rotary_width(d, rotary_dim)


def rotary(x: np.ndarray, base: float, pairing: str = "interleaved", dim: int | None = None, strict: Strict = True,
           scaling: tuple[object, ...] | None = None) -> np.ndarray:  # [B,H,T,d] -> [B,H,T,d], pair i turned by t * base^(-2i/r)
    """Pair i of a head's d coordinates is (2i, 2i+1) when interleaved (Meta's LLaMA), (i, i + d/2) when half (Hugging Face).

    ``dim`` (partial rotary, GPT-NeoX's rotary_pct): only the first r = dim coordinates are turned, paired within them
    and at speeds base^(-2i/r); the other d - r pass unchanged.  None: r = d.  ``scaling`` changes the turning speeds
    as a rope type does (tracer/model/rope.py)."""
    enforce(strict, check_rotary_width, x.shape[-1], dim)
    return _turn(x, base, pairing, 1.0, dim, scaling)


def _turn(x: np.ndarray, base: float, pairing: str, sign: float, dim: int | None = None,
          scaling: tuple[object, ...] | None = None) -> np.ndarray:  # sign -1 turns back
    if dim is not None and dim != x.shape[-1]:
        # as NumPy's slicing would (with the contract off): x[..., :dim] is at most d wide, and a pair needs two coordinates
        width = min(dim, x.shape[-1]) // 2 * 2
        out = x.copy()
        out[..., :width] = _turn_at(x[..., :width], base, pairing, sign, dim, scaling)
        return out
    return _turn_at(x, base, pairing, sign, x.shape[-1], scaling)


def _turn_at(x: np.ndarray, base: float, pairing: str, sign: float, r: int,
             scaling: tuple[object, ...] | None = None) -> np.ndarray:  # [B,H,T,w] -> [B,H,T,w], speeds base^(-2i/r)
    T, d = x.shape[-2], x.shape[-1]
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / r)  # [d/2] turning speeds: fast first, slow last
    if scaling is not None:
        inv = np.array(rope.scaled(inv.tolist(), scaling), dtype=np.float64)
    angle = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]  # [T, d/2]
    cos, sin = np.cos(angle).astype(x.dtype), (sign * np.sin(angle)).astype(x.dtype)
    first, second = (slice(0, d // 2), slice(d // 2, d)) if pairing == "half" else (slice(0, d, 2), slice(1, d, 2))
    x1, x2 = x[..., first], x[..., second]
    out = np.empty_like(x)
    out[..., first] = x1 * cos - x2 * sin
    out[..., second] = x1 * sin + x2 * cos
    return out


def sinusoidal(T: int, C: int, base: float, dtype: np.dtype) -> np.ndarray:  # -> [T,C]; even columns sin, odd cos
    i2 = np.arange(0, C, 2, dtype=np.float64)  # 2i
    angle = np.arange(T, dtype=np.float64)[:, None] / base ** (i2 / C)[None, :]  # [T, ceil(C/2)]
    pe = np.empty((T, C), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : C // 2])
    return pe.astype(dtype, copy=False)


# contracts.ROW_BLOCK query rows per block: under a causal mask, keys after the block are never touched


def check_softmax_axis(scores: tuple[int, ...], over_queries: bool) -> None:  # attention weights [B,H,T,S]: softmax over keys
    contracts.softmax_axis(scores, over_queries)


def score_scale(d: int, scale: float | None) -> float:  # the factor of q.k: block.attention_scale, or 1/sqrt(d) when None
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def qk_scores(q: np.ndarray, k: np.ndarray, scale: float | None = None) -> np.ndarray:  # [B,H,T,d], [B,H_kv,S,d] -> [B,H,T,S], times scale (None: 1/sqrt(d))
    B, H, T, d = q.shape
    group = H // k.shape[1]  # query heads per key head: query head h reads key head h // group
    scores = np.empty((B, H, T, k.shape[2]), dtype=np.result_type(q, k))
    for b in range(B):
        for h in range(H):  # one head at a time: contiguous operands for BLAS, cache-sized temporaries
            np.matmul(np.ascontiguousarray(q[b, h]), np.ascontiguousarray(k[b, h // group]).T, out=scores[b, h])
    scores *= score_scale(d, scale)
    return scores


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, visible: np.ndarray | None, causal: bool,
           keep: bool = True, scale: float | None = None, softcap: float | None = None,
           bias: np.ndarray | None = None) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """Scores, masked softmax over keys and the mix of values, a block of query rows at a time:
    [B,H,T,d], [B,H_kv,S,d], [B,H_kv,S,d] -> scores [B,H,T,S], weights [B,H,T,S], heads [B,T,C] (the mixes merged).

    Query head h reads key and value head h // (H / H_kv).  Under a causal mask each block of rows reads
    only the keys up to its last row: the weights after it stay exactly 0 and are never exponentiated or
    multiplied, and their scores are a separate product (kept, they are recorded; they are never read).
    ``keep=False`` returns (None, None, mixed): a block's scores and weights live in one scratch buffer,
    reused, instead of two [B,H,T,S] arrays, and the scores after the mask are not computed.  Every value
    that is read is the same call on the same operands either way, so ``mixed`` is the same to the last bit.
    Without keep, q or k not finite, a product q.k that could overflow, or a mixed value that is not finite
    makes it start again with keep=True: the executor then records and flags where it began.
    ``scale``: the factor of every q.k (block.attention_scale); None: 1/sqrt(d).
    ``softcap`` (Gemma 2's attn_logit_softcapping): each score becomes cap * tanh(score / cap) after the scale and
    before the mask (the recorded scores are the capped ones).
    ``bias`` [H,T,S] (T5's relative position bias, positions: relative): added to every sample's scores, after the scale.
    No family has both, and a spec asking for both is refused (tracer/spec), so their order is never in question.
    """
    B, H, T, d = q.shape
    S = k.shape[2]
    group = H // k.shape[1]
    dtype = np.result_type(q, k)
    factor = score_scale(d, scale)
    if not keep and not _products_fit(q, k, factor, bias):  # a score could be inf or NaN: make them all, to be recorded and flagged
        return attend(q, k, v, visible, causal, keep=True, scale=scale, softcap=softcap, bias=bias)
    scores = np.empty((B, H, T, S), dtype=dtype) if keep else None
    weights = np.zeros((B, H, T, S), dtype=dtype) if keep else None  # calloc: pages the mask leaves at 0 are never written
    mixed = np.empty((B, T, H, d), dtype=np.result_type(dtype, v))  # [B,T,H,d]: the heads side by side, merged as they are made
    blocked = None if visible is None else ~visible  # a causal mask's visible: a sliding window

    def heads(pairs: list[tuple[int, int]]) -> None:
        scratch = None if keep else np.empty((min(ROW_BLOCK, T), S), dtype=dtype)  # reused by every block
        for b, h in pairs:  # a head at a time: cache-sized temporaries; BLAS reads the strided [T,d] views as they are
            qh, kt, vh = q[b, h], k[b, h // group].T, v[b, h // group]
            for r0 in range(0, T, ROW_BLOCK):
                r1 = min(r0 + ROW_BLOCK, T)
                n = min(r1, S) if causal else S  # keys this block of rows may read
                s = scores[b, h, r0:r1] if scores is not None else scratch[: r1 - r0]  # type: ignore[index]
                read = s[:, :n]
                _scaled_scores(qh[r0:r1], kt[:, :n], factor, read, softcap)
                if bias is not None:
                    read += bias[h, r0:r1, :n]
                if scores is not None and weights is not None:
                    if n < S:  # the scores after the mask: recorded, never read
                        _scaled_scores(qh[r0:r1], kt[:, n:], factor, s[:, n:], softcap)
                        if bias is not None:
                            s[:, n:] += bias[h, r0:r1, n:]
                    w = weights[b, h, r0:r1, :n]
                    np.copyto(w, read)
                else:  # every score is finite: q and k are, and no product can overflow (_products_fit)
                    w = read
                _masked_softmax(w, r0, r1, n, causal, blocked)
                np.matmul(w, vh[:n], out=mixed[b, r0:r1, h])

    blas.by_heads(heads, [(b, h) for b in range(B) for h in range(H)], B * H * T * S * d)
    if not keep and not all_finite(mixed):  # a row that may read no key at all: 0/0
        return attend(q, k, v, visible, causal, keep=True, scale=scale, softcap=softcap, bias=bias)
    return scores, weights, mixed.reshape(B, T, H * d)


def _scaled_scores(q_rows: np.ndarray, kt: np.ndarray, scale: float, out: np.ndarray,
                   softcap: float | None = None) -> None:  # [r,d], [d,n] -> out [r,n] = q k^T * scale (then soft-capped)
    np.matmul(q_rows, kt, out=out)
    out *= scale
    if softcap is not None:  # Gemma 2: cap * tanh(scores / cap), as Hugging Face computes it
        cap_inplace(out, softcap)


def cap_inplace(a: np.ndarray, cap: float) -> None:  # a -> cap * tanh(a / cap), in the array itself
    a /= cap
    np.tanh(a, out=a)
    a *= cap


def _masked_softmax(w: np.ndarray, r0: int, r1: int, n: int, causal: bool, blocked: np.ndarray | None) -> None:  # [r,n] scores of rows r0:r1 -> weights, in place
    """The block's scores masked (-inf where ``blocked`` [T,S] is True; else, under causal, after each row) and softmaxed.
    Under causal the block holds the keys up to its last row (n of them); a sliding window's ``blocked`` also hides
    the keys before each row's window, the keys after it as causal does."""
    if blocked is not None:
        np.copyto(w, -np.inf, where=blocked[r0:r1, :n])
    elif causal and r0 < n:  # only the diagonal square of the block has keys after its rows
        np.copyto(w[:, r0:n], -np.inf, where=_after(r1 - r0, n - r0))
    softmax_inplace(w)


def _after(rows: int, cols: int) -> np.ndarray:  # [rows, cols] bool: True where key j comes after query i
    return np.triu(np.ones((rows, cols), dtype=bool), k=1)


def _products_fit(q: np.ndarray, k: np.ndarray, scale: float, bias: np.ndarray | None = None) -> bool:
    """Whether every score q.k * scale (+ bias) is finite: q and k are, and no product can overflow (one pass over each)."""
    with np.errstate(all="ignore"):
        bound = _largest(q) * _largest(k) * q.shape[-1] * scale + (0.0 if bias is None else _largest(bias))
    return math.isfinite(bound) and bound < float(np.finfo(np.result_type(q, k)).max) / 4  # a margin for rounding


def _largest(a: np.ndarray) -> float:  # max |a| (0 when empty; NaN when a holds one), with no |a| array made
    return float(np.maximum(a.max(initial=0.0), -a.min(initial=0.0)))


def all_finite(a: np.ndarray) -> bool:
    """One pass without a temporary: a finite sum means every entry is finite; otherwise look closely."""
    with np.errstate(all="ignore"):
        if np.isfinite(a.sum()):
            return True
    return bool(np.isfinite(a).all())


def mha(xq: np.ndarray, xkv: np.ndarray | None = None, *, w_q: np.ndarray, b_q: np.ndarray, w_k: np.ndarray, b_k: np.ndarray,
        w_v: np.ndarray, b_v: np.ndarray, w_o: np.ndarray, b_o: np.ndarray, H: int, visible: np.ndarray | None = None,
        causal: bool = False, softmax_over_queries: bool = False, rotary_base: float | None = None,
        rotary_pairing: str = "interleaved", H_kv: int | None = None, keep_weights: bool = True,
        strict: Strict = True, rotary_scaling: tuple[object, ...] | None = None,
        rotary_dim: int | None = None, q_norm: np.ndarray | None = None, k_norm: np.ndarray | None = None,
        qk_eps: float = 1e-6, scale: float | None = None, softcap: float | None = None,
        bias: np.ndarray | None = None) -> dict[str, np.ndarray]:  # [B,T,C], [B,S,C] -> [B,T,C]; k, v [B,H_kv,S,d]; q_norm, k_norm [d]
    """Multi-head attention (self when xkv is None; cross: keys and values from xkv); every intermediate, by stage suffix.

    ``causal`` masks keys after each query (block by block: no [T,S] mask is made); ``visible`` ([T,S] bool, True where
    a query may read a key) is any other mask, or, with ``causal``, a sliding window's (the blocks still stop at the diagonal).
    ``H_kv`` (grouped-query attention, a divisor of H; None: H) key/value heads, each read by H / H_kv query heads in turn.
    ``keep_weights=False``: no "scores" and "weights" in the result (two [B,H,T,S] arrays never made), unless a
    score or a mixed value is not finite; the output is the same to the last bit.
    ``q_norm``, ``k_norm`` (Qwen3's block.qk_norm): each head's query and key RMS-normalised over its d coordinates
    with these weights [d] and ``qk_eps``, after the split and before the rotary turn.
    ``scale`` (block.attention_scale): the scores are q.k * scale; None: q.k / sqrt(d).
    ``softcap`` (Gemma 2's block.attention_softcap): the scores cap * tanh(scores / cap), after the scale, before the mask.
    ``bias`` [H,T,S] (positions: relative, T5's position bias): added to the scores of every sample, before the mask.
    """
    if xkv is None:
        xkv = xq
    H_kv = H if H_kv is None else H_kv
    if H % H_kv:
        raise ShapeError(msg("H_kv = {H_kv} key/value heads cannot be shared evenly by H = {H} query heads", H_kv=H_kv, H=H))
    own = w_q.shape[1] != xq.shape[-1]  # a head width d of its own (dims.d): q is C_q = H * d wide, k and v C_kv = H_kv * d
    kv_bias = "C_kv" if H_kv != H or own else "C"
    q = split_heads(linear(xq, w_q, b_q, strict, ("b_q", "C_q" if own else "C")), H)  # [B,H,T,d]
    k = split_heads(linear(xkv, w_k, b_k, strict, ("b_k", kv_bias)), H_kv)  # [B,H_kv,S,d]
    v = split_heads(linear(xkv, w_v, b_v, strict, ("b_v", kv_bias)), H_kv)
    if q_norm is not None and k_norm is not None:  # Qwen3: per-head RMSNorm of q and k, before the turn
        q, k = head_norm(q, q_norm, qk_eps, strict, "q_norm"), head_norm(k, k_norm, qk_eps, strict, "k_norm")
    if rotary_base is not None:  # positions enter as rotations of q and k, so scores see only offsets
        q = rotary(q, rotary_base, rotary_pairing, rotary_dim, strict, rotary_scaling)
        k = rotary(k, rotary_base, rotary_pairing, rotary_dim, False, rotary_scaling)
    enforce(strict, check_softmax_axis, q.shape[:3] + k.shape[2:3], softmax_over_queries)
    parts = {"q": q, "k": k, "v": v}
    if softmax_over_queries:  # the violation, computed as NumPy would (only with strict=False)
        if causal and visible is None:
            visible = ~causal_mask(q.shape[2])
        scores = qk_scores(q, k, scale)  # [B,H,T,S]
        if softcap is not None:
            cap_inplace(scores, softcap)
        if bias is not None:
            scores += bias
        weights = np.where(visible, scores, -np.inf) if visible is not None else scores.copy()
        softmax_inplace(weights, axis=-2)
        mixed = weights @ np.repeat(v, H // H_kv, axis=1)  # each value head to the query heads that read it
        parts.update(scores=scores, weights=weights)
        heads = merge_heads(mixed)  # [B,H,T,d] -> [B,T,C]
    else:
        kept_scores, kept_weights, heads = attend(q, k, v, visible, causal, keep_weights, scale, softcap, bias)
        if kept_scores is not None and kept_weights is not None:
            parts.update(scores=kept_scores, weights=kept_weights)
    parts.update(heads=heads, output=linear(heads, w_o, b_o, strict, ("b_o", "C")))
    return parts


def head_norm(x: np.ndarray, gamma: np.ndarray, eps: float, strict: Strict = True,
              name: str = "q_norm") -> np.ndarray:  # [B,H,T,d], [d] -> [B,H,T,d], RMSNorm over each head's d coordinates
    enforce(strict, check_vector, name, gamma, x.shape[-1], "d")
    return _affine(standardise(x, -1, eps, center=False), gamma)


def check_batch_norm(x: np.ndarray) -> None:  # a text block never normalises over samples and positions
    contracts.batch_norm(x.shape)


def rms_norm(x: np.ndarray, gamma: np.ndarray, eps: float, strict: Strict = True) -> np.ndarray:  # [B,T,C], [C] -> [B,T,C], over C
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    # no mean subtracted: RMSNorm only rescales
    return _by_rows(lambda rows, out: _affine(standardise(rows, -1, eps, center=False, out=out), gamma), x, gamma)


def batch_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, strict: Strict = True) -> np.ndarray:  # [B,T,C] -> [B,T,C], stats over B and T
    enforce(strict, check_batch_norm, x)
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    enforce(strict, check_vector, "beta", beta, x.shape[-1], "C")
    return _affine(standardise(x, (0, 1), eps), gamma, beta)


def ffn_hidden(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, activation: str | None = None, w3: np.ndarray | None = None,
               b3: np.ndarray | None = None, strict: Strict = True) -> np.ndarray:  # [B,T,C], [C,F], [F] -> [B,T,F]
    """act(x W_1 + b_1), the activation's kernel by its record; gated (SwiGLU, GeGLU): gate(x W_1 + b_1) * (x W_3 + b_3)."""
    record = activation_of(activation)
    h = record.run_forward()(linear(x, w1, b1, strict, ("b1", "F")), inplace=True)  # in place: the product is ours
    if record.gate is not None:
        assert w3 is not None and b3 is not None
        h *= linear(x, w3, b3, strict, ("b3", "F"))
    return h


def ffn_out(h: np.ndarray, w2: np.ndarray, b2: np.ndarray, strict: Strict = True) -> np.ndarray:  # [B,T,F], [F,C], [C] -> [B,T,C]
    return linear(h, w2, b2, strict, ("b2", "C"))


# -- a mixture of experts (router, router_softmax, top_k, expert_mix) --------------------------
def router(x: np.ndarray, w_g: np.ndarray) -> np.ndarray:  # [B,T,C], [C,E] -> [B,T,E], one logit per expert, no bias
    if x.shape[-1] != w_g.shape[0]:
        raise ShapeError(msg("cannot multiply [..., {shape}] by a [{shape2}, {shape3}] matrix", shape=x.shape[-1], shape2=w_g.shape[0], shape3=w_g.shape[1]))
    return x @ w_g


def check_router_softmax_axis(logits: np.ndarray, over_tokens: bool) -> None:  # softmax over experts (the last axis)
    contracts.router_softmax_axis(logits.shape, over_tokens)


def router_softmax(logits: np.ndarray, over_tokens: bool = False, strict: Strict = True) -> np.ndarray:  # [B,T,E] -> [B,T,E], over E
    """``over_tokens``: the slip of a softmax over the positions (axis T), flagged, and computed as NumPy would."""
    enforce(strict, check_router_softmax_axis, logits, over_tokens)
    return softmax(logits, axis=-2 if over_tokens else -1)


def top_k_order(p: np.ndarray, k: int) -> np.ndarray:  # [B,T,E] -> [B,T,k] int: the k largest experts, largest first
    """Ties go to the lower expert (a stable sort of -p), as torch.topk's CPU kernel does."""
    return np.argsort(-p, axis=-1, kind="stable")[..., :k]


def top_k(p: np.ndarray, k: int) -> np.ndarray:  # [B,T,E] -> [B,T,E]: the k chosen renormalised to sum to 1, 0 elsewhere
    order = top_k_order(p, k)
    top = np.take_along_axis(p, order, axis=-1)
    gates = np.zeros_like(p)
    np.put_along_axis(gates, order, top / top.sum(axis=-1, keepdims=True), axis=-1)
    return gates


def _expert_rows(gates: np.ndarray, e: int) -> np.ndarray:  # [N,E] -> the rows sent to expert e
    return np.flatnonzero(gates[:, e] != 0)


def expert_mix(x: np.ndarray, gates: np.ndarray, w1: list[np.ndarray], w3: list[np.ndarray], w2: list[np.ndarray]
               ) -> np.ndarray:  # [B,T,C], [B,T,E], E x ([C,F], [C,F], [F,C]) -> [B,T,C]
    """sum over the chosen experts e of gates[e] * (silu(x W1_e) * (x W3_e)) W2_e; each expert runs on its own rows only."""
    if gates.shape[-1] != len(w1) or gates.shape[:-1] != x.shape[:-1]:
        raise ShapeError(msg("expert_mix reads gates [B,T,E] for E = {E} experts, received {shape}", E=len(w1), shape=list(gates.shape)))
    C = x.shape[-1]
    x2, g2 = x.reshape(-1, C), gates.reshape(-1, gates.shape[-1])
    out = np.zeros_like(x2)
    for e in range(len(w1)):
        rows = _expert_rows(g2, e)
        if rows.size == 0:
            continue
        xr = x2[rows]
        y = (silu(xr @ w1[e]) * (xr @ w3[e])) @ w2[e]
        out[rows] += y * g2[rows, e, None]
    return out.reshape(x.shape)


# -- backward kernels (tracer grad) -----------------------------------------------
# One per forward kernel above, in the same order: each takes the gradient of the loss with respect to the
# forward kernel's output (dy) and what the forward read, and returns the gradients with respect to its
# inputs and weights.  Nothing is recorded here; tracer/grad/backward.py walks the step list.
# Every weight gradient a kernel returns is a fresh array (or a view of one) that nothing else holds.
# Speed: fresh memory is expensive to touch, so a kernel works in place in the temporaries it made
# (``out=``) and hands GEMMs strided or transposed views rather than copies (BLAS reads both as they are).

def reduce_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:  # [...] -> shape: the sum over what a broadcast stretched
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead > 0 else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def add_backward(dy: np.ndarray, a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:  # [B,T,C] -> da, db
    return reduce_to(dy, a_shape), reduce_to(dy, b_shape)


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


def linear_backward(dy: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # [..., n_out], [..., n_in], [n_in, n_out], [n_out] -> dx, dw, db
    """Two GEMMs on 2-D operands: x and w enter transposed as views (BLAS reads them so), never copied; big ones at once,
    each on its own thread (blas.both: the same numbers)."""
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    dw, dx2 = blas.both(lambda: x2.T @ dy2, lambda: dy2 @ w.T, 2 * dy2.shape[0] * w.size)  # [n_in, n_out], [rows, n_in]
    return dx2.reshape(*dy.shape[:-1], w.shape[0]), dw, reduce_to(dy2.sum(axis=0), b.shape)


def relu_backward(dy: np.ndarray, z: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:  # [...], [...] pre-activation -> [...]
    """``out``: an array to write the result into (it may be z itself: the mask is taken first)."""
    return np.multiply(dy, z > 0, out=out)


def gelu_backward(dy: np.ndarray, z: np.ndarray) -> np.ndarray:  # [...] -> [...], d/dz z Phi(z) = Phi(z) + z phi(z)
    cdf = 0.5 * (1.0 + np.asarray(_erf(z * (1.0 / math.sqrt(2.0)))).astype(z.dtype))
    pdf = np.exp(-0.5 * z * z) * (1.0 / math.sqrt(2.0 * math.pi))
    return dy * (cdf + z * pdf)


def gelu_tanh_backward(dy: np.ndarray, z: np.ndarray) -> np.ndarray:  # [...] -> [...]
    k = math.sqrt(2.0 / math.pi)
    t = np.tanh(k * (z + 0.044715 * z * z * z))
    return dy * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * z * z))


def silu_backward(dy: np.ndarray, z: np.ndarray) -> np.ndarray:  # [...] -> [...], d/dz z s(z) = s (1 + z (1 - s))
    s = 1.0 / (1.0 + np.exp(-z))
    return dy * (s * (1.0 + z * (1.0 - s)))


def relu2_backward(dy: np.ndarray, z: np.ndarray) -> np.ndarray:  # [...] -> [...], d/dz max(z, 0)^2 = 2 max(z, 0)
    return dy * (2.0 * np.maximum(z, 0.0))


def softmax_backward(dy: np.ndarray, p: np.ndarray, axis: int = -1) -> np.ndarray:  # dy, p = softmax output -> ds, same shape
    """p * (dy - sum(dy * p)), computed in one fresh array, stably (``_dominant_shift``).  A weight of exactly 0
    (a masked key) passes exactly 0."""
    ds = _dominant_shift(dy, p, axis, np.empty(np.broadcast_shapes(dy.shape, p.shape), dtype=np.result_type(dy, p)))
    ds -= np.multiply(ds, p).sum(axis=axis, keepdims=True)
    return np.multiply(ds, p, out=ds)


def _dominant_shift(dy: np.ndarray, p: np.ndarray, axis: int, out: np.ndarray) -> np.ndarray:
    """dy minus, along ``axis``, its value at the largest weight p: the softmax's gradient, p * (dy - sum(dy * p)),
    is the same for dy shifted by a constant (the weights sum to 1), and with this shift it is computed without
    cancellation.  Unshifted, the dominant key's dy - sum(dy * p) subtracts two nearly equal numbers: when the
    softmax is saturated (huge scores: weights 1 and 0) the true gradient is 0, or below 1e-300, while the two
    roundings of the same sum leave about 1e-16 of dy, which q and k (huge too) then multiply into the gradients
    of w_q and w_k (1e-2 at inputs of 1e10).  Shifted, the dominant key's difference is 0 exactly, and the sum is
    a sum of small terms: each score's gradient is right to a few units in the last place of its own size."""
    top = np.take_along_axis(dy, np.expand_dims(p.argmax(axis=axis), axis), axis=axis)
    return np.subtract(dy, top, out=out)


def split_heads_backward(dx: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,C]
    return merge_heads(dx)


def merge_heads_backward(dx: np.ndarray, H: int) -> np.ndarray:  # [B,T,C] -> [B,H,T,d]
    return split_heads(dx, H)


def rotary_backward(dy: np.ndarray, base: float, pairing: str = "interleaved", dim: int | None = None,
                    scaling: tuple[object, ...] | None = None) -> np.ndarray:  # [B,H,T,d] -> [B,H,T,d]: each pair turned back by its angle
    return _turn(dy, base, pairing, -1.0, dim, scaling)  # the transpose of a rotation is the rotation back (the same pairs)


def _heads_last(B: int, n: int, H: int, d: int, dtype: np.dtype, zero: bool = False) -> np.ndarray:
    """A [B,H,n,d] array laid out as [B,n,H*d]: merge_heads of it is a view, no copy, and each head's rows are strided."""
    return (np.zeros if zero else np.empty)((B, n, H, d), dtype=dtype).transpose(0, 2, 1, 3)


def qk_scores_backward(ds: np.ndarray, q: np.ndarray, k: np.ndarray, causal: bool = False, scale: float | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:  # [B,H,T,S], [B,H,T,d], [B,H_kv,S,d] -> dq, dk
    """dq = ds k s, dk = ds^T q s with s the scores' factor (``scale``; None: 1/sqrt(d)), one head at a time; dk of a key head sums what each of the
    H / H_kv query heads that read it sends back.  Under a causal mask ds is exactly 0 after the diagonal,
    so a block of query rows reads only the keys up to its last row, and a block of keys only the queries
    from its first one on: those zeros are never multiplied."""
    B, H, T, d = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    group = H // H_kv
    dtype = np.result_type(ds, q, k)
    dq, dk = _heads_last(B, T, H, d, dtype), _heads_last(B, S, H_kv, d, dtype, zero=True)
    step = ROW_BLOCK if causal else max(T, S)

    def heads(pairs: list[tuple[int, int]]) -> None:  # whole key heads, as attention_backward deals them: the same numbers
        for b, g in pairs:
            for h in range(g * group, (g + 1) * group):
                _qk_head_backward(ds[b, h], q[b, h], k[b, g], dq[b, h], dk[b, g], causal, step)

    blas.by_heads(heads, [(b, g) for b in range(B) for g in range(H_kv)], B * H * T * S * d)
    factor = score_scale(d, scale)
    dq *= factor
    dk *= factor
    return dq, dk


def _qk_head_backward(ds: np.ndarray, q: np.ndarray, k: np.ndarray, dq: np.ndarray, dk: np.ndarray, causal: bool,
                      step: int) -> None:  # [T,S], [T,d], [S,d] -> dq [T,d] written, dk [S,d] added to; unscaled
    T, S = ds.shape
    for r0 in range(0, T, step):
        r1 = min(r0 + step, T)
        np.matmul(ds[r0:r1, :r1 if causal else S], k[:r1 if causal else S], out=dq[r0:r1])  # the keys these rows read
    _keys_backward(ds, q, dk, causal, step)


def _keys_backward(ds: np.ndarray, q: np.ndarray, dk: np.ndarray, causal: bool, step: int) -> None:  # [T,S], [T,d] -> dk [S,d] added to
    S = ds.shape[1]
    for c0 in range(0, S, step):
        c1 = min(c0 + step, S)
        first = c0 if causal else 0  # queries that read this block of keys
        dk[c0:c1] += ds[first:, c0:c1].T @ q[first:]


def attend_backward(dmixed: np.ndarray, weights: np.ndarray, v: np.ndarray, causal: bool = False,
                    over_queries: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[B,H,T,d] dmixed, [B,H,T,S] weights, [B,H_kv,S,d] v -> dscores [B,H,T,S], dv [B,H_kv,S,d], dweights [B,H,T,S].

    dweights = dmixed v^T in full, masked keys included (the weights are a stage: their gradient is shown).
    The softmax's gradient, dscores = weights * (dweights - D), with each row's D = sum_j dweights * weights, is
    computed from the row's dweights less their value at the row's top weight (``_dominant_shift``): the same
    numbers, without the cancellation that leaves rounding noise where a saturated softmax's gradient is 0.
    A masked weight is exactly 0, so its score gets exactly 0: nothing flows to a key the query may not read.
    Under a causal mask those zeros are never computed (dscores is calloc'd and only the blocks of rows up
    to the diagonal are written, as ``attend`` does) and never multiplied (dv reads each key block's later
    rows only).  Value head g is read by the H / H_kv query heads h with h // (H / H_kv) = g: its gradient
    sums theirs.
    """
    B, H, T, S = weights.shape
    H_kv, d = v.shape[1], v.shape[-1]
    group = H // H_kv
    dtype = np.result_type(dmixed, weights, v)
    dweights = np.empty((B, H, T, S), dtype=dtype)
    by_rows = not over_queries  # the softmax was over keys: its gradient row by row, in blocks of rows
    blocked = causal and by_rows
    dscores = (np.zeros if blocked else np.empty)((B, H, T, S), dtype=dtype) if by_rows else None
    dv = _heads_last(B, S, H_kv, d, dtype, zero=True)
    step = ROW_BLOCK if blocked else max(T, S)

    def heads(pairs: list[tuple[int, int]]) -> None:  # whole value heads, as attention_backward deals them: the same numbers
        for b, g in pairs:
            for h in range(g * group, (g + 1) * group):
                _softmax_head_backward(dmixed[b, h], weights[b, h], v[b, g], dweights[b, h],
                                       None if dscores is None else dscores[b, h], dv[b, g], blocked, step)

    blas.by_heads(heads, [(b, g) for b in range(B) for g in range(H_kv)], B * H * T * S * d)
    if dscores is None:  # a softmax over queries (the violation, with --keep-going): over the whole array
        dscores = softmax_backward(dweights, weights, axis=-2)
    return dscores, dv, dweights


def _softmax_head_backward(dm: np.ndarray, w: np.ndarray, v: np.ndarray, dw: np.ndarray,
                           ds: np.ndarray | None, dv: np.ndarray, blocked: bool, step: int) -> None:
    """One head: [T,d] dmixed, [T,S] weights, [S,d] v -> dw [T,S] = dm v^T written in full (unless it is ds), ds [T,S] written
    in the blocks of rows up to the diagonal when ``blocked`` (else in full; None: not at all), dv [S,d] added to.
    ``ds`` may be ``dw`` itself: each block of dw is then made, read once and overwritten (_softmax_rows_backward)."""
    T, S = w.shape
    if ds is not dw:
        np.matmul(dm, v.T, out=dw)
    if ds is not None:
        for r0 in range(0, T, step):
            r1 = min(r0 + step, T)
            _softmax_rows_backward(dm, w, v, dw, ds, r0, r1, r1 if blocked else S)
    _values_backward(w, dm, dv, blocked, step)


def _softmax_rows_backward(dm: np.ndarray, w: np.ndarray, v: np.ndarray, dw: np.ndarray, ds: np.ndarray, r0: int, r1: int,
                           n: int, made: bool = False) -> None:  # rows r0:r1 of ds [T,S], their first n keys (those the rows may read)
    """When ``ds`` is ``dw`` (a scratch buffer, not a stage) and not ``made`` already, the block of dw is made here
    first, only where it is read (a softmax over keys without a causal mask: the block is the whole head)."""
    if ds is dw and not made:
        np.matmul(dm[r0:r1], v[:n].T, out=dw[r0:r1, :n])
    wb = w[r0:r1, :n]
    dsb = _dominant_shift(dw[r0:r1, :n], wb, -1, ds[r0:r1, :n])  # each row's dw, less its value at the top weight
    dsb -= np.einsum("ts,ts->t", dsb, wb)[:, None]  # less D, the weighted mean of the row (of shifted numbers)
    dsb *= wb


def _values_backward(w: np.ndarray, dm: np.ndarray, dv: np.ndarray, blocked: bool, step: int) -> None:  # [T,S], [T,d] -> dv [S,d] added to
    S = w.shape[1]
    for c0 in range(0, S, step):
        c1 = min(c0 + step, S)
        first = c0 if blocked else 0  # queries that may read this block of keys
        dv[c0:c1] += w[first:, c0:c1].T @ dm[first:]


def attention_backward(dmixed: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                       visible: np.ndarray | None, causal: bool, scale: float | None = None,
                       bias: np.ndarray | None = None, dbias: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # [B,H,T,d] dmixed, q, [B,H_kv,S,d] k, v -> dq, dk, dv
    """attend_backward and qk_scores_backward in one, without the [B,H,T,S] weights: each head's weights are made
    again from q and k by the very calls ``attend`` made them with (so to the last bit), into a [T,S] buffer
    reused head after head, and the head's dweights and dscores share a second one.  The numbers are those of
    the two kernels to the last bit (a test checks it); only the [B,H,T,S] arrays are never made: for a
    caller that shows neither the weights nor their gradient.  ``visible`` is attend's mask other than causal.

    Whole key heads (with the H / H_kv query heads that read each) run on Python threads, each calling a
    one-thread BLAS, as ``attend`` does: each head is computed by one thread, start to end, in the same order.
    """
    B, H, T, d = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    group = H // H_kv
    wtype = np.result_type(q, k)
    dtype = np.result_type(dmixed, wtype, v)
    dq = _heads_last(B, T, H, d, np.result_type(dtype, q, k))
    dk = _heads_last(B, S, H_kv, d, np.result_type(dtype, q, k), zero=True)
    dv = _heads_last(B, S, H_kv, d, dtype, zero=True)
    factor = score_scale(d, scale)
    blocked = None if visible is None else ~visible  # a causal mask's visible: a sliding window
    step = ROW_BLOCK if causal else max(T, S)

    def heads(pairs: list[tuple[int, int]]) -> None:
        w, ds = np.empty((T, S), dtype=wtype), np.empty((T, S), dtype=dtype)  # reused by every head
        for b, g in pairs:
            kt = k[b, g].T
            for h in range(g * group, (g + 1) * group):
                if causal:  # dweights = dm v^T by the one call attend_backward makes (a BLAS may round a block of it otherwise)
                    np.matmul(dmixed[b, h], v[b, g].T, out=ds)
                for r0 in range(0, T, ROW_BLOCK):  # the weights, as attend makes them (after the diagonal: not written, not read)
                    r1 = min(r0 + ROW_BLOCK, T)
                    n = min(r1, S) if causal else S
                    _scaled_scores(q[b, h, r0:r1], kt[:, :n], factor, w[r0:r1, :n])
                    if bias is not None:
                        w[r0:r1, :n] += bias[h, r0:r1, :n]
                    _masked_softmax(w[r0:r1, :n], r0, r1, n, causal, blocked)
                    if causal:  # the block's dscores and dq at once, while its rows are at hand (step is ROW_BLOCK)
                        _softmax_rows_backward(dmixed[b, h], w, v[b, g], ds, ds, r0, r1, r1, made=True)
                        np.matmul(ds[r0:r1, :r1], k[b, g][:r1], out=dq[b, h, r0:r1])
                if causal:
                    _values_backward(w, dmixed[b, h], dv[b, g], causal, step)
                else:
                    _softmax_head_backward(dmixed[b, h], w, v[b, g], ds, ds, dv[b, g], causal, step)
                if dbias is not None:  # the position bias is every sample's: its gradient sums their dscores
                    dbias[h] += np.tril(ds) if causal else ds  # under causal, ds after the diagonal is not written
                if causal:
                    _keys_backward(ds, q[b, h], dk[b, g], causal, step)
                else:
                    _qk_head_backward(ds, q[b, h], k[b, g], dq[b, h], dk[b, g], causal, step)

    blas.by_heads(heads, [(b, g) for b in range(B) for g in range(H_kv)], B * H * T * S * d)  # whole key heads
    dq *= factor
    dk *= factor
    return dq, dk, dv


def mha_backward(dout: np.ndarray, xq: np.ndarray, xkv: np.ndarray, parts: dict[str, np.ndarray], w: dict[str, np.ndarray],
                 H: int, rotary_base: float | None = None, over_queries: bool = False, rotary_pairing: str = "interleaved",
                 causal: bool = False, visible: np.ndarray | None = None, rotary_scaling: tuple[object, ...] | None = None,
                 rotary_dim: int | None = None, qk_eps: float | None = None, scale: float | None = None,
                 softcap: float | None = None, bias: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """dout [B,T,C], xq [B,T,C], xkv [B,S,C], the forward's q [B,H,T,d], k, v [B,H_kv,S,d], weights, heads -> dxq, dxkv,
    the gradient of every internal (heads, weights, scores, q, k, v) and of every weight (w_q, b_q, ...;
    w_k, w_v [C,C_kv] under grouped-query attention, H_kv read from k).  Self-attention (xkv is xq):
    dxkv is None, its part already added into dxq.  ``causal``: the forward masked with attend's causal blocks.
    Without ``parts["weights"]`` the weights are made again head by head (attention_backward, with attend's mask
    ``visible`` when not causal) and the result has no "weights" and "scores": the same numbers otherwise.
    ``qk_eps`` (block.qk_norm, with w["q_norm"], w["k_norm"] [d]): q and k were RMS-normalised per head before the turn;
    their gradients go back through the norms (q and k before them made again from xq, xkv), and dw has q_norm, k_norm.
    ``scale`` (block.attention_scale): the forward's factor of q.k; None: 1/sqrt(d).
    ``softcap`` (block.attention_softcap): the scores were cap * tanh(s / cap); the weights are made again when not at
    hand ([B,H,T,S], with the mask), the recorded scores' gradient is that of the capped scores, and it reaches q and k
    times 1 - tanh(s / cap)^2.
    ``bias`` [H,T,S] (positions: relative): the forward's position bias; its gradient, every sample's dscores summed,
    is g["bias"]."""
    g: dict[str, np.ndarray] = {}
    dw: dict[str, np.ndarray] = {}
    g["heads"], dw["w_o"], dw["b_o"] = linear_backward(dout, parts["heads"], w["w_o"], w["b_o"])
    dmixed = merge_heads_backward(g["heads"], H)
    if softcap is not None:
        raw = qk_scores(parts["q"], parts["k"], scale)  # before the cap
        slope = 1.0 - np.tanh(raw / softcap) ** 2
        if "weights" not in parts:
            weights = raw.copy()
            cap_inplace(weights, softcap)
            n_q, n_k = weights.shape[-2:]
            blocked = ~visible if visible is not None else (_after(n_q, n_k) if causal else None)
            if blocked is not None:
                np.copyto(weights, -np.inf, where=blocked)
            softmax_inplace(weights, axis=-2 if over_queries else -1)
            parts = dict(parts, weights=weights)
        g["scores"], g["v"], g["weights"] = attend_backward(dmixed, parts["weights"], parts["v"], causal, over_queries)
        g["q"], g["k"] = qk_scores_backward(g["scores"] * slope, parts["q"], parts["k"], causal, scale)
    elif "weights" in parts:
        g["scores"], g["v"], g["weights"] = attend_backward(dmixed, parts["weights"], parts["v"], causal, over_queries)
        g["q"], g["k"] = qk_scores_backward(g["scores"], parts["q"], parts["k"], causal, scale)
        if bias is not None:
            g["bias"] = g["scores"].sum(axis=0)
    else:
        assert not over_queries, "a softmax over queries is traced with its weights"
        dbias = None if bias is None else np.zeros(bias.shape, dtype=np.result_type(dmixed, bias))
        g["q"], g["k"], g["v"] = attention_backward(dmixed, parts["q"], parts["k"], parts["v"], visible, causal, scale, bias, dbias)
        if dbias is not None:
            g["bias"] = dbias
    dq, dk = g["q"], g["k"]
    if rotary_base is not None:  # the recorded q and k are the turned ones: turn their gradients back
        dq = rotary_backward(dq, rotary_base, rotary_pairing, rotary_dim, rotary_scaling)
        dk = rotary_backward(dk, rotary_base, rotary_pairing, rotary_dim, rotary_scaling)
    if qk_eps is not None:  # back through the per-head RMSNorms, from q and k as the projections made them
        H_kv = parts["k"].shape[1]
        q_raw = split_heads(linear(xq, w["w_q"], w["b_q"], False), H)
        k_raw = split_heads(linear(xkv, w["w_k"], w["b_k"], False), H_kv)
        dq, dw["q_norm"] = rms_norm_backward(dq, q_raw, w["q_norm"], qk_eps)
        dk, dw["k_norm"] = rms_norm_backward(dk, k_raw, w["k_norm"], qk_eps)
    dxq, dw["w_q"], dw["b_q"] = linear_backward(split_heads_backward(dq), xq, w["w_q"], w["b_q"])
    dxkv, dw["w_k"], dw["b_k"] = linear_backward(split_heads_backward(dk), xkv, w["w_k"], w["b_k"])
    dxv, dw["w_v"], dw["b_v"] = linear_backward(split_heads_backward(g["v"]), xkv, w["w_v"], w["b_v"])
    dxkv += dxv
    if xkv is xq:
        dxq += dxkv
        return dxq, None, g, dw
    return dxq, dxkv, g, dw


def rms_norm_backward(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float
                      ) -> tuple[np.ndarray, np.ndarray]:  # [B,T,C] x2, [C] -> dx [B,T,C], dgamma [C]
    dx, dgamma, _ = _norm_backward(dy, x, gamma, eps, -1, centred=False)
    return dx, dgamma


def batch_norm_backward(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # [B,T,C] x2, [C], [C] -> dx [B,T,C], dgamma [C], dbeta [C]
    dx, dgamma, dbeta = _norm_backward(dy, x, gamma, eps, (0, 1), centred=True)
    return dx, dgamma, reduce_to(dbeta, beta.shape)


def ffn_hidden_backward(dh: np.ndarray, x: np.ndarray, w1: np.ndarray, b1: np.ndarray, activation: str | None = None,
                        w3: np.ndarray | None = None, b3: np.ndarray | None = None, h: np.ndarray | None = None,
                        spare_h: bool = False) -> tuple[np.ndarray, dict[str, np.ndarray]]:  # [B,T,F], [B,T,C], [C,F], [F] -> dx [B,T,C], {w1, b1, (w3, b3)}
    """``h``: the forward's output, when at hand.  An activation whose record ``reads_output`` (ReLU: h > 0 exactly
    where z > 0, NaN included) has its gradient read from it, so the pre-activation z is not computed again; the
    others recompute z.  ``spare_h``: no one needs h afterwards: that gradient is written over it instead of into a
    fresh [B,T,F] array."""
    dw: dict[str, np.ndarray] = {}
    record = activation_of(activation)
    act_backward = record.run_backward()
    if record.reads_output and h is not None:
        dz = act_backward(dh, h, out=h) if spare_h else act_backward(dh, h)
        dx, dw["w1"], dw["b1"] = linear_backward(dz, x, w1, b1)
        return dx, dw
    z = x @ w1 + b1  # the pre-activation, recomputed (it is not a recorded stage)
    if record.gate is not None:
        assert w3 is not None and b3 is not None
        gate = x @ w3 + b3
        dx, dw["w1"], dw["b1"] = linear_backward(act_backward(dh * gate, z), x, w1, b1)
        dx3, dw["w3"], dw["b3"] = linear_backward(dh * record.run_forward()(z), x, w3, b3)
        dx += dx3
        return dx, dw
    dx, dw["w1"], dw["b1"] = linear_backward(act_backward(dh, z), x, w1, b1)
    return dx, dw


def ffn_out_backward(dy: np.ndarray, h: np.ndarray, w2: np.ndarray, b2: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # [B,T,C], [B,T,F], [F,C], [C] -> dh [B,T,F], dw2 [F,C], db2 [C]
    return linear_backward(dy, h, w2, b2)


def embedding_backward(dy: np.ndarray, ids: np.ndarray, V: int) -> np.ndarray:  # [B,T,C], [B,T] ids -> dE [V,C]: rows summed per id
    dE = np.zeros((V, dy.shape[-1]), dtype=dy.dtype)
    np.add.at(dE, ids.reshape(-1), dy.reshape(-1, dy.shape[-1]))
    return dE


def position_backward(dy: np.ndarray, T_max: int) -> np.ndarray:  # [T,C] -> dP [T_max,C]: rows past T get nothing
    dP = np.zeros((T_max, dy.shape[-1]), dtype=dy.dtype)
    dP[: dy.shape[0]] = dy
    return dP


def add_position_backward(dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [B,T,C] -> dtokens [B,T,C], dpositions [T,C]
    return dy, dy.sum(axis=0)


def head_backward(dy: np.ndarray, h: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [B,T,V], [B,T,C], [C,V] -> dh [B,T,C], dw [C,V]
    return dy @ w.T, h.reshape(-1, h.shape[-1]).T @ dy.reshape(-1, dy.shape[-1])


def select_backward(dy: np.ndarray, shape: tuple[int, ...], axis: int, start: int, stop: int) -> np.ndarray:  # slice -> [input shape], zeros outside
    dx = np.zeros(shape, dtype=dy.dtype)
    index = tuple(slice(start, stop) if j == axis else slice(None) for j in range(len(shape)))
    dx[index] = dy
    return dx


# -- i23-bert: BERT's embeddings -------------------------------------------------------
def token_type_rows(table: np.ndarray, types: np.ndarray) -> np.ndarray:  # [V_type,C], [B,T] type ids -> [B,T,C]
    return table[types]


def position_rows(P: np.ndarray, offset: int, T: int) -> np.ndarray:  # [T_max,C] -> [T,C]: rows offset .. offset+T-1
    return P[offset: offset + T]


def position_offset_backward(dy: np.ndarray, T_max: int, offset: int) -> np.ndarray:  # [T,C] -> dP [T_max,C]: only rows offset .. offset+T-1
    dP = np.zeros((T_max, dy.shape[-1]), dtype=dy.dtype)
    dP[offset: offset + dy.shape[0]] = dy
    return dP
# -- a mixture of experts, backward -------------------------------------------------------
def router_backward(dy: np.ndarray, x: np.ndarray, w_g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [B,T,E], [B,T,C], [C,E] -> dx, dw_g
    dy2, x2 = dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1])
    return (dy2 @ w_g.T).reshape(x.shape), x2.T @ dy2


def top_k_backward(dg: np.ndarray, p: np.ndarray, gates: np.ndarray) -> np.ndarray:  # [B,T,E] x3 -> dp [B,T,E]
    """gates_i = p_i / S over the chosen i (S their sum): dp_j = (dg_j - sum_i dg_i gates_i) / S for j chosen; the choice
    itself is piecewise constant, so an expert not chosen passes nothing back."""
    chosen = gates != 0
    S = np.where(chosen, p, 0.0).sum(axis=-1, keepdims=True)
    inner = (dg * gates).sum(axis=-1, keepdims=True)
    return np.where(chosen, (dg - inner) / S, 0.0)


def expert_mix_backward(dy: np.ndarray, x: np.ndarray, gates: np.ndarray, w1: list[np.ndarray], w3: list[np.ndarray],
                        w2: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """[B,T,C] dy, x, [B,T,E] gates -> dx [B,T,C], dgates [B,T,E] (0 for the experts not chosen), {w1_e, w3_e, w2_e}."""
    C = x.shape[-1]
    x2, g2, dy2 = x.reshape(-1, C), gates.reshape(-1, gates.shape[-1]), dy.reshape(-1, C)
    dx = np.zeros_like(x2)
    dg = np.zeros_like(g2)
    dw: dict[str, np.ndarray] = {}
    for e in range(len(w1)):
        rows = _expert_rows(g2, e)
        xr, dyr = x2[rows], dy2[rows]
        z1, z3 = xr @ w1[e], xr @ w3[e]
        a = silu(z1) * z3
        dg[rows, e] = ((a @ w2[e]) * dyr).sum(axis=-1)
        dout = dyr * g2[rows, e, None]
        dw[f"w2_{e}"] = a.T @ dout
        da = dout @ w2[e].T
        dz1, dz3 = silu_backward(da * z3, z1), da * silu(z1)
        dw[f"w1_{e}"], dw[f"w3_{e}"] = xr.T @ dz1, xr.T @ dz3
        dx[rows] += dz1 @ w1[e].T + dz3 @ w3[e].T
    return dx.reshape(x.shape), dg.reshape(gates.shape), dw


# -- i23-gemma: Gemma's scaled embeddings and its RMSNorm with (1 + gamma) -------------------------
def embed_scale(x: np.ndarray) -> np.ndarray:  # [B,T,C] -> [B,T,C], times sqrt(C)
    """x * sqrt(C), the factor C ** 0.5 (as Hugging Face's hidden_size**0.5) rounded to x's dtype first: Gemma's normaliser
    is a tensor of the hidden states' dtype, so a float32 run multiplies by float32(sqrt(C))."""
    return x * np.asarray(float(x.shape[-1]) ** 0.5, dtype=x.dtype)


def embed_scale_backward(dy: np.ndarray) -> np.ndarray:  # [B,T,C] -> [B,T,C]
    return dy * np.asarray(float(dy.shape[-1]) ** 0.5, dtype=dy.dtype)


def rms_norm_offset(x: np.ndarray, gamma: np.ndarray, eps: float, strict: Strict = True) -> np.ndarray:  # [B,T,C], [C] -> [B,T,C], over C
    """Gemma's RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + gamma), the scale 1 + gamma formed in the run's dtype (as Hugging Face
    forms 1.0 + weight), then one product, as rms_norm's gamma."""
    enforce(strict, check_vector, "gamma", gamma, x.shape[-1], "C")
    scale = 1.0 + gamma
    return _by_rows(lambda rows, out: _affine(standardise(rows, -1, eps, center=False, out=out), scale), x, scale)


def rms_norm_offset_backward(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float
                             ) -> tuple[np.ndarray, np.ndarray]:  # [B,T,C] x2, [C] -> dx [B,T,C], dgamma [C]
    """d(1 + gamma)/dgamma = 1: dgamma is RMSNorm's, and dx is RMSNorm's with the scale 1 + gamma."""
    dx, dgamma, _ = _norm_backward(dy, x, 1.0 + gamma, eps, -1, centred=False)
    return dx, dgamma


# -- i23-gemma2: Gemma 2's soft cap (the logits' block.head_softcap; the scores' cap is inside attend) --------------
def softcap(x: np.ndarray, cap: float) -> np.ndarray:  # [..] -> [..], cap * tanh(x / cap), as Hugging Face computes it
    out = x / cap
    np.tanh(out, out=out)
    out *= cap
    return out


def softcap_backward(dy: np.ndarray, x: np.ndarray, cap: float) -> np.ndarray:  # d/dx cap * tanh(x / cap) = 1 - tanh(x / cap)^2
    t = np.tanh(x / cap)
    return dy * (1.0 - t * t)
# -- i23-t5: T5's relative position bias (positions: relative) --------------------------------------
def relative_buckets(n_q: int, n_k: int, bidirectional: bool, buckets: int, max_distance: int) -> np.ndarray:  # -> [n_q,n_k] int64
    """The bucket of every (query i, key j), of j - i, as tracer.model.relative.bucket (Hugging Face's
    _relative_position_bucket): the logarithm in float32, as Hugging Face computes it, so the integers are its own."""
    rel = np.arange(n_k, dtype=np.int64)[None, :] - np.arange(n_q, dtype=np.int64)[:, None]
    n, out = buckets, np.zeros((n_q, n_k), dtype=np.int64)
    if bidirectional:
        n //= 2
        out += (rel > 0).astype(np.int64) * n
        rel = np.abs(rel)
    else:
        rel = -np.minimum(rel, 0)
    max_exact = n // 2
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) where the distance is small: that branch is not taken
        ratio = rel.astype(np.float32) / np.float32(max_exact)
        large = max_exact + (np.log(ratio) / np.float32(math.log(max_distance / max_exact)) * np.float32(n - max_exact)).astype(np.int64)
    return out + np.where(rel < max_exact, rel, np.minimum(large, n - 1))


def relative_bias(table: np.ndarray, idx: np.ndarray) -> np.ndarray:  # [K_rel,H], [T,S] buckets -> [H,T,S]
    """Each pair's bucket's row of the table, one plane per head.  A bucket past the table's last row (a violation,
    flagged before this runs) reads the last row under --keep-going, where NumPy would raise or, negative, wrap."""
    rows = np.minimum(idx, table.shape[0] - 1)
    return np.ascontiguousarray(table[rows].transpose(2, 0, 1))


def relative_bias_backward(dbias: np.ndarray, idx: np.ndarray, rows: int) -> np.ndarray:  # [H,T,S], [T,S] -> dtable [K_rel,H]
    """The table's gradient: every pair's dbias, summed into its bucket's row (a scatter-add over the buckets)."""
    H = dbias.shape[0]
    dtable = np.zeros((rows, H), dtype=dbias.dtype)
    np.add.at(dtable, np.minimum(idx, rows - 1).reshape(-1), dbias.transpose(1, 2, 0).reshape(-1, H))
    return dtable


# -- i23-t5: T5's tied head, the decoder's output times C ** -0.5 (block.head_scale) ---------------
def head_scale(x: np.ndarray) -> np.ndarray:  # [B,T,C] -> [B,T,C], times C ** -0.5
    """x * C ** -0.5, the factor a Python float as Hugging Face's model_dim**-0.5, rounded to x's dtype (a float32 run
    multiplies by float32(C ** -0.5), as torch does with a Python scalar)."""
    return x * np.asarray(float(x.shape[-1]) ** -0.5, dtype=x.dtype)


def head_scale_backward(dy: np.ndarray) -> np.ndarray:  # [B,T,C] -> [B,T,C]
    return dy * np.asarray(float(dy.shape[-1]) ** -0.5, dtype=dy.dtype)
