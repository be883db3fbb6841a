"""Three classic mistakes, each written into a Pre-Norm block the way students write it, on a spec that can show them.

    python examples/your-implementation/classic_mistakes.py no_scale scale.npz
    tracer diff specs/variants/diagnose.yaml scale.npz        # exit 1: attention, and "without the 1/sqrt(d) scale"

The mistakes: ``no_scale`` (the scores not divided by sqrt(d)), ``reshape`` (the heads split by a reshape without
the transpose), ``normed_residual`` (R = N1 + U: the residual taken from the normalised input); ``none`` writes
the block correctly.  The chapter's own spec has d = 1, zero biases, gamma 1 and beta 0, so a missing scale shows
nowhere: specs/variants/diagnose.yaml has d = 2, two heads, and every bias, gamma and beta drawn from its seed.
The weights and the input are read from tracer's trace of that spec, as an exercise hands them out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import tracer

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "variants" / "diagnose.yaml")
MISTAKES = ("none", "no_scale", "reshape", "normed_residual")


def layer_norm(x, gamma, beta, eps=1e-5):  # [T,C] -> [T,C], statistics over C
    mu = x.mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) + beta


def softmax(s):  # over the keys
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(n, w, H, mistake):  # [T,C] -> [T,C]
    T, C = n.shape
    d = C // H

    def split(y):  # [T,C] -> [H,T,d]
        if mistake == "reshape":
            return y.reshape(H, T, d)  # the mistake: no transpose, rows of different positions end up in one head
        return y.reshape(T, H, d).transpose(1, 0, 2)

    q, k, v = (split(n @ w[f"attn.w_{m}"] + w[f"attn.b_{m}"]) for m in "qkv")
    scores = q @ k.transpose(0, 2, 1)
    if mistake != "no_scale":
        scores = scores / np.sqrt(d)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    mixed = softmax(np.where(future, -np.inf, scores)) @ v  # [H,T,d]
    heads = mixed.reshape(T, C) if mistake == "reshape" else mixed.transpose(1, 0, 2).reshape(T, C)
    return heads @ w["attn.w_o"] + w["attn.b_o"]


def main(mistake: str, path: str) -> None:
    t = tracer.trace(SPEC)
    w = dict(t.params)
    H = t.spec.dims.H
    with tracer.recorder(path) as rec:
        x = rec("x", np.asarray(t["x"])[0])  # [T,C]
        n1 = rec("norm1", layer_norm(x, w["norm1.gamma"], w["norm1.beta"]))
        u = rec("attention", attention(n1, w, H, mistake))
        r = rec("residual1", n1 + u if mistake == "normed_residual" else x + u)
        n2 = rec("norm2", layer_norm(r, w["norm2.gamma"], w["norm2.beta"]))
        hidden = rec("hidden", np.maximum(n2 @ w["ffn.w1"] + w["ffn.b1"], 0.0))
        f = rec("ffn", hidden @ w["ffn.w2"] + w["ffn.b2"])
        rec("output", r + f)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in MISTAKES:
        sys.exit(f"usage: classic_mistakes.py {{{'|'.join(MISTAKES)}}} OUT.npz")
    main(sys.argv[1], sys.argv[2])
