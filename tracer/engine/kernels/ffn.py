"""The position-wise FFN and its activations (each by its record, tracer/model/activations.py), and a mixture of
experts (router, router_softmax, top_k, expert_mix), with their backward kernels."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tracer.engine import blas, kernels
from tracer.engine.kernels import Strict, enforce, linear, linear_backward, softmax
from tracer.errors import ShapeError
from tracer.messages import msg
from tracer.model import contracts
from tracer.model.activations import activation_of

# -- the activations ----------------------------------------------------------------------------------------

def relu(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], in x itself when ``inplace``
    return np.maximum(x, 0.0, out=x if inplace else None)


def relu2(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], max(x, 0)^2, Primer's squared ReLU
    """relu(x) ** 2, as relu(x) * relu(x) (the same rounding as the power), in x itself when ``inplace``."""
    y = np.maximum(x, 0.0, out=x if inplace else None)
    return np.multiply(y, y, out=y)


def tanh(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], in x itself when ``inplace``
    return np.tanh(x, out=x if inplace else None)


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

    blas.by_spans(part, blocks, x.size, kernels.ROWS_ON_THREADS)
    return y


ELEMENTWISE_BLOCK = 1 << 17  # values of an activation computed at a time (_elementwise): 512 kB of float32 for the block,
# as much for its scratch, in a core's L2 cache beside the result


# -- the FFN ------------------------------------------------------------------------------------------------

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


# -- backward kernels (tracer grad) ---------------------------------------------------------------------------

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


def tanh_backward(dy: np.ndarray, z: np.ndarray) -> np.ndarray:  # [...] -> [...], d/dz tanh(z) = 1 - tanh(z)^2
    t = np.tanh(z)
    return dy * (1.0 - t * t)


def relu2_backward(dy: np.ndarray, z: np.ndarray) -> np.ndarray:  # [...] -> [...], d/dz max(z, 0)^2 = 2 max(z, 0)
    return dy * (2.0 * np.maximum(z, 0.0))


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


# -- a mixture of experts (router, router_softmax, top_k, expert_mix) ---------------------------------------

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


# -- a mixture of experts, backward -------------------------------------------------------------------------

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
