"""The stream's two ends: token vectors (BERT's token types, Gemma's scale), position vectors (learned, from an
offset, sinusoidal, rotary, T5's relative bias), and the output head (T5's scale, Gemma 2's soft cap), each with its
backward kernel."""

from __future__ import annotations

import math

import numpy as np

from tracer.engine.kernels import Strict, enforce
from tracer.model import contracts, rope


def token_type_rows(table: np.ndarray, types: np.ndarray) -> np.ndarray:  # [V_type,C], [B,T] type ids -> [B,T,C]
    return table[types]


def embedding_backward(dy: np.ndarray, ids: np.ndarray, V: int) -> np.ndarray:  # [B,T,C], [B,T] ids -> dE [V,C]: rows summed per id
    dE = np.zeros((V, dy.shape[-1]), dtype=dy.dtype)
    np.add.at(dE, ids.reshape(-1), dy.reshape(-1, dy.shape[-1]))
    return dE


def embed_scale(x: np.ndarray) -> np.ndarray:  # [B,T,C] -> [B,T,C], times sqrt(C)
    """x * sqrt(C), the factor C ** 0.5 (as Hugging Face's hidden_size**0.5) rounded to x's dtype first: Gemma's normaliser
    is a tensor of the hidden states' dtype, so a float32 run multiplies by float32(sqrt(C))."""
    return x * np.asarray(float(x.shape[-1]) ** 0.5, dtype=x.dtype)


def embed_scale_backward(dy: np.ndarray) -> np.ndarray:  # [B,T,C] -> [B,T,C]
    return dy * np.asarray(float(dy.shape[-1]) ** 0.5, dtype=dy.dtype)


# -- positions ----------------------------------------------------------------------------------------------

def position_rows(P: np.ndarray, offset: int, T: int) -> np.ndarray:  # [T_max,C] -> [T,C]: rows offset .. offset+T-1
    return P[offset: offset + T]


def position_backward(dy: np.ndarray, T_max: int) -> np.ndarray:  # [T,C] -> dP [T_max,C]: rows past T get nothing
    dP = np.zeros((T_max, dy.shape[-1]), dtype=dy.dtype)
    dP[: dy.shape[0]] = dy
    return dP


def position_offset_backward(dy: np.ndarray, T_max: int, offset: int) -> np.ndarray:  # [T,C] -> dP [T_max,C]: only rows offset .. offset+T-1
    dP = np.zeros((T_max, dy.shape[-1]), dtype=dy.dtype)
    dP[offset: offset + dy.shape[0]] = dy
    return dP


def add_position_backward(dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [B,T,C] -> dtokens [B,T,C], dpositions [T,C]
    return dy, dy.sum(axis=0)


def sinusoidal(T: int, C: int, base: float, dtype: np.dtype) -> np.ndarray:  # -> [T,C]; even columns sin, odd cos
    i2 = np.arange(0, C, 2, dtype=np.float64)  # 2i
    angle = np.arange(T, dtype=np.float64)[:, None] / base ** (i2 / C)[None, :]  # [T, ceil(C/2)]
    pe = np.empty((T, C), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : C // 2])
    return pe.astype(dtype, copy=False)


# -- rotary positions (in attention) --------------------------------------------------------------------------

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


def rotary_backward(dy: np.ndarray, base: float, pairing: str = "interleaved", dim: int | None = None,
                    scaling: tuple[object, ...] | None = None) -> np.ndarray:  # [B,H,T,d] -> [B,H,T,d]: each pair turned back by its angle
    return _turn(dy, base, pairing, -1.0, dim, scaling)  # the transpose of a rotation is the rotation back (the same pairs)


# -- T5's relative position bias (positions: relative) ---------------------------------------------------------

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


# -- the output head -----------------------------------------------------------------------------------------

def head_backward(dy: np.ndarray, h: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [B,T,V], [B,T,C], [C,V] -> dh [B,T,C], dw [C,V]
    return dy @ w.T, h.reshape(-1, h.shape[-1]).T @ dy.reshape(-1, dy.shape[-1])


def head_scale(x: np.ndarray) -> np.ndarray:  # [B,T,C] -> [B,T,C], times C ** -0.5
    """x * C ** -0.5, the factor a Python float as Hugging Face's model_dim**-0.5, rounded to x's dtype (a float32 run
    multiplies by float32(C ** -0.5), as torch does with a Python scalar)."""
    return x * np.asarray(float(x.shape[-1]) ** -0.5, dtype=x.dtype)


def head_scale_backward(dy: np.ndarray) -> np.ndarray:  # [B,T,C] -> [B,T,C]
    return dy * np.asarray(float(dy.shape[-1]) ** -0.5, dtype=dy.dtype)


def scale(x: np.ndarray, s: float) -> np.ndarray:  # [..] -> [..], x * s, s rounded to x's dtype (torch's tensor times a Python float)
    return x * np.asarray(s, dtype=x.dtype)


def divide(x: np.ndarray, s: float) -> np.ndarray:  # [..] -> [..], x / s, s rounded to x's dtype (Granite's logits / logits_scaling)
    return x / np.asarray(s, dtype=x.dtype)


def softcap(x: np.ndarray, cap: float) -> np.ndarray:  # [..] -> [..], cap * tanh(x / cap), as Hugging Face computes it
    out = x / cap
    np.tanh(out, out=out)
    out *= cap
    return out


def softcap_backward(dy: np.ndarray, x: np.ndarray, cap: float) -> np.ndarray:  # d/dx cap * tanh(x / cap) = 1 - tanh(x / cap)^2
    t = np.tanh(x / cap)
    return dy * (1.0 - t * t)


# -- the task heads (block.pooler, block.classifier): one position of each sample -------------------------
def pool_index(kind: str, T: int, ids: np.ndarray | None, pad: int | None) -> np.ndarray:  # -> [B] positions, or [1] for all alike
    """Each sample's position: 0 (``first``, BERT's [CLS]); T - 1 (``last`` without a pad token); else the last position
    whose token is not ``pad``, as Hugging Face's sequence classification finds it, argmax of t * (id != pad) (0 when
    every token is pad)."""
    if kind == "first":
        return np.zeros(1, dtype=np.intp)
    if pad is None or ids is None:
        return np.full(1, T - 1, dtype=np.intp)
    return np.argmax(np.arange(T) * (ids != pad), axis=-1).astype(np.intp)


def pool(x: np.ndarray, index: np.ndarray) -> np.ndarray:  # [B,T,C], [B] (or [1]) positions -> [B,C]
    return x[np.arange(x.shape[0]), np.broadcast_to(index, (x.shape[0],))]


def pool_backward(dy: np.ndarray, shape: tuple[int, ...], index: np.ndarray) -> np.ndarray:  # [B,C] -> [B,T,C], zeros elsewhere
    dx = np.zeros(shape, dtype=dy.dtype)
    dx[np.arange(shape[0]), np.broadcast_to(index, (shape[0],))] = dy
    return dx
