"""Attention head by head: the scores q.k, the masked softmax over keys and the mix of values, a block of query
rows at a time, and their backward kernels.  Under a causal mask each block of contracts.ROW_BLOCK query rows reads
only the keys up to its last row: the keys after the block are never touched."""

from __future__ import annotations

import functools
import math

import numpy as np

from tracer.engine import blas
from tracer.engine.kernels import all_finite, dominant_shift, softmax_backward, softmax_inplace
from tracer.model import contracts
from tracer.model.contracts import ROW_BLOCK


def causal_mask(T: int) -> np.ndarray:  # -> [T,T] bool, True where key j is after query i
    return np.triu(np.ones((T, T), dtype=bool), k=1)


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


def _masked_softmax(w: np.ndarray, r0: int, r1: int, n: int, causal: bool,
                    blocked: np.ndarray | None) -> None:  # [r,n] scores of rows r0:r1 -> weights, in place
    """The block's scores masked (-inf where ``blocked`` [T,S] is True; else, under causal, after each row) and softmaxed.
    Under causal the block holds the keys up to its last row (n of them); a sliding window's ``blocked`` also hides
    the keys before each row's window, the keys after it as causal does."""
    if blocked is not None:
        np.copyto(w, -np.inf, where=blocked[r0:r1, :n])
    elif causal and r0 < n:  # only the diagonal square of the block has keys after its rows
        np.copyto(w[:, r0:n], -np.inf, where=keys_after(r1 - r0, n - r0))
    softmax_inplace(w)


def keys_after(rows: int, cols: int) -> np.ndarray:  # [rows, cols] bool: True where key j comes after query i
    """Read-only.  A block's square (at most ROW_BLOCK x ROW_BLOCK) is made once for each shape: every head of every
    layer reads the same few."""
    return _small_keys_after(rows, cols) if rows * cols <= ROW_BLOCK * ROW_BLOCK else _keys_after(rows, cols)


def _keys_after(rows: int, cols: int) -> np.ndarray:
    a = np.triu(np.ones((rows, cols), dtype=bool), k=1)
    a.flags.writeable = False
    return a


_small_keys_after = functools.lru_cache(maxsize=256)(_keys_after)


def _products_fit(q: np.ndarray, k: np.ndarray, scale: float, bias: np.ndarray | None = None) -> bool:
    """Whether every score q.k * scale (+ bias) is finite: q and k are, and no product can overflow (one pass over each)."""
    with np.errstate(all="ignore"):
        bound = _largest(q) * _largest(k) * q.shape[-1] * scale + (0.0 if bias is None else _largest(bias))
    return math.isfinite(bound) and bound < float(np.finfo(np.result_type(q, k)).max) / 4  # a margin for rounding


def _largest(a: np.ndarray) -> float:  # max |a| (0 when empty; NaN when a holds one), with no |a| array made
    return float(np.maximum(a.max(initial=0.0), -a.min(initial=0.0)))


# -- backward kernels (tracer grad) -----------------------------------------------------------------------------
# One per forward kernel above: each takes the gradient of the loss with respect to the forward kernel's output (dy)
# and what the forward read, and returns the gradients with respect to its inputs and weights.  Nothing is recorded
# here; tracer/engine/backward.py walks the step list.  Every weight gradient a kernel returns is a fresh array (or a
# view of one) that nothing else holds.  Speed: fresh memory is expensive to touch, so a kernel works in place in the
# temporaries it made (``out=``) and hands GEMMs strided or transposed views rather than copies (BLAS reads both as
# they are).

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
    computed from the row's dweights less their value at the row's top weight (``dominant_shift``): the same
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
    dsb = dominant_shift(dw[r0:r1, :n], wb, -1, ds[r0:r1, :n])  # each row's dw, less its value at the top weight
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
