"""The chapter's Pre-Norm block (Example 17.2, specs/ch17-prenorm.yaml) written by hand in NumPy, recording each stage.

    python examples/your-implementation/numpy_block.py mine.npz
    tracer diff specs/ch17-prenorm.yaml mine.npz        # exit 0: every recorded stage agrees

Shapes are the book's [T,C] for one sentence (no batch axis: tracer diff reads [T,C] as [B,T,C] with B = 1).
"""

from __future__ import annotations

import sys

import numpy as np

import tracer

# The weights of specs/ch17-prenorm.yaml
E = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # [V,C] token embeddings
P = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])  # [T_max,C] learned positions
W_Q = W_K = W_V = np.eye(2)
W_O = np.array([[1.0, 1.0], [1.0, -1.0]])
W1 = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, 1.0]])  # [C,F]
W2 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]])  # [F,C]
H, EPS = 2, 1e-5
TOKENS = [0, 1, 2]


def layer_norm(x: np.ndarray) -> np.ndarray:  # [T,C] -> [T,C], statistics over C
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # divide by C
    return (x - mu) / np.sqrt(var + EPS)  # gamma = 1, beta = 0


def softmax(s: np.ndarray) -> np.ndarray:  # over the last axis, the keys
    e = np.exp(s - s.max(axis=-1, keepdims=True))  # minus the max: no overflow
    return e / e.sum(axis=-1, keepdims=True)


def attention(n: np.ndarray, rec: tracer.Recorder) -> np.ndarray:  # [T,C] -> [T,C]
    T, C = n.shape
    d = C // H
    q, k, v = n @ W_Q, n @ W_K, n @ W_V
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    heads = []
    for h in range(H):
        cols = slice(h * d, (h + 1) * d)
        scores = q[:, cols] @ k[:, cols].T / np.sqrt(d)  # [T,T]
        heads.append(softmax(np.where(future, -np.inf, scores)) @ v[:, cols])  # mask, then softmax
    mixed = rec("attn.heads", np.concatenate(heads, axis=-1))  # [T,C], before W_O
    return mixed @ W_O


def block(x: np.ndarray, rec: tracer.Recorder, norm=layer_norm) -> np.ndarray:  # [T,C] -> [T,C]
    n1 = rec("norm1", norm(x))
    u = rec("attention", attention(n1, rec))
    r = rec("residual1", x + u)
    n2 = rec("norm2", norm(r))
    hidden = rec("hidden", np.maximum(n2 @ W1, 0.0))
    f = rec("ffn", hidden @ W2)
    return rec("output", r + f)


def main(path: str, norm=layer_norm) -> None:
    with tracer.recorder(path) as rec:
        x = rec("x", E[TOKENS] + P[: len(TOKENS)])
        block(x, rec, norm)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "numpy-block.npz")
