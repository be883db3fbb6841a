"""The chapter's pre-norm block (specs/ch17-prenorm.yaml) as a student writes it in NumPy, with the typical bugs on request.

Written from the chapter's formulas (Example 17.2), not from tracer's code; the head loop and the
mask follow tests/helpers/cases.py.  Each bug is one flag, so a test builds exactly one wrong block.
"""

from __future__ import annotations

import math

import numpy as np

E = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
P = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
TOKENS = [0, 1, 2]
W_O = np.array([[1.0, 1.0], [1.0, -1.0]])
W1 = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, 1.0]])
W2 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]])
H, EPS = 2, 1e-5

BUGS = ("ddof", "ln_axis", "no_residual", "softmax_queries", "mask_after", "no_w_o")


def layer_norm(x, ddof=False, axis=-1):  # [T,C] -> [T,C]
    mu = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True, ddof=1 if ddof else 0)
    return (x - mu) / np.sqrt(var + EPS)


def softmax(s, axis):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention(n, bugs):  # [T,C] -> ([T,T] weights per head, heads [T,C], output [T,C])
    T, C = n.shape
    d = C // H
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    heads = np.zeros((T, C))
    weights = []
    for h in range(H):
        q = k = v = n[:, h * d:(h + 1) * d]  # W_Q = W_K = W_V = identity
        s = q @ k.T / math.sqrt(d)
        if "mask_after" in bugs:
            w = np.where(future, 0.0, softmax(s, -1))
        else:
            w = softmax(np.where(future, -np.inf, s), -2 if "softmax_queries" in bugs else -1)
        weights.append(w)
        heads[:, h * d:(h + 1) * d] = w @ v
    out = heads if "no_w_o" in bugs else heads @ W_O
    return np.stack(weights), heads, out


def block(bugs=()):
    """Every stage of the chapter's block, [T,C] (no batch axis, as a student writes it)."""
    bugs = set(bugs)
    x = E[TOKENS] + P[: len(TOKENS)]
    n1 = layer_norm(x, "ddof" in bugs, 0 if "ln_axis" in bugs else -1)
    weights, heads, u = attention(n1, bugs)
    r = u if "no_residual" in bugs else x + u
    n2 = layer_norm(r)
    hidden = np.maximum(n2 @ W1, 0.0)
    f = hidden @ W2
    return {"x": x, "norm1": n1, "attn.weights": weights, "attn.heads": heads, "attention": u, "residual1": r,
            "norm2": n2, "hidden": hidden, "ffn": f, "output": r + f}
