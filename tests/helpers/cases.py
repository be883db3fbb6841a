"""An independent NumPy model of the block, for tests: written from the chapter's formulas, not from tracer's code.

Attention loops over heads and slices columns (head h reads columns h*d .. (h+1)*d - 1) instead of
reshaping, and the mask is applied with an explicit loop, so a shared mistake with the kernels is unlikely.
Also: random small specs with every weight written out, so the same numbers feed tracer and this model.
"""

from __future__ import annotations

import json
import math
import random

import numpy as np


def layer_norm(x, gamma, beta, eps, axis=-1):  # statistics over `axis`; gamma/beta broadcast as NumPy would
    mu = x.mean(axis=axis, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axis, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def attention(x, w, H, visible=None):  # x [B,T,C]; w: w_q.. b_o; visible [T,T] bool or None
    B, T, C = x.shape
    d = C // H
    q, k, v = (x @ w[f"w_{n}"] + w[f"b_{n}"] for n in "qkv")
    heads = np.zeros((B, T, C))
    for h in range(H):
        cols = slice(h * d, (h + 1) * d)
        for b in range(B):
            s = q[b][:, cols] @ k[b][:, cols].T / math.sqrt(d)  # [T,T]
            for i in range(T):
                row = [s[i, j] if visible is None or visible[i, j] else -np.inf for j in range(T)]
                m = max(row)
                e = np.array([math.exp(r - m) for r in row])
                heads[b, i, cols] = (e / e.sum()) @ v[b][:, cols]
    return heads @ w["w_o"] + w["b_o"]


def ffn(x, w):
    return np.maximum(x @ w["w1"] + w["b1"], 0.0) @ w["w2"] + w["b2"]


def causal(T):
    return np.array([[j <= i for j in range(T)] for i in range(T)])


# -- the blocks, as the book and the brief write them ------------------------------------------------
def pre_norm(x, W, H, eps, visible):
    r = x + attention(layer_norm(x, **W["norm1"], eps=eps), W["attn"], H, visible)
    return r + ffn(layer_norm(r, **W["norm2"], eps=eps), W["ffn"])


def post_norm(x, W, H, eps, visible):
    r = layer_norm(x + attention(x, W["attn"], H, visible), **W["norm1"], eps=eps)
    return layer_norm(r + ffn(r, W["ffn"]), **W["norm2"], eps=eps)


def sandwich(x, W, H, eps, visible):  # a LayerNorm before and after each sublayer
    r = x + layer_norm(attention(layer_norm(x, **W["norm1"], eps=eps), W["attn"], H, visible), **W["norm_a"], eps=eps)
    return r + layer_norm(ffn(layer_norm(r, **W["norm2"], eps=eps), W["ffn"]), **W["norm_f"], eps=eps)


def parallel(x, W, H, eps, visible):  # attention and FFN both read norm1; their outputs are summed
    n = layer_norm(x, **W["norm1"], eps=eps)
    return x + (attention(n, W["attn"], H, visible) + ffn(n, W["ffn"]))


SANDWICH_STEPS = """\
    - {name: norm1, op: layer_norm, in: x, weights: norm1}
    - {name: attention, op: mha, in: norm1, weights: attn}
    - {name: attn_norm, op: layer_norm, in: attention, weights: norm_a}
    - {name: residual1, op: add, in: [x, attn_norm]}
    - {name: norm2, op: layer_norm, in: residual1, weights: norm2}
    - {name: ffn, op: ffn, in: norm2, weights: ffn}
    - {name: ffn_norm, op: layer_norm, in: ffn, weights: norm_f}
    - {name: output, op: add, in: [residual1, ffn_norm]}
"""

PARALLEL_STEPS = """\
    - {name: norm1, op: layer_norm, in: x, weights: norm1}
    - {name: attention, op: mha, in: norm1, weights: attn}
    - {name: ffn, op: ffn, in: norm1, weights: ffn}
    - {name: both, op: add, in: [attention, ffn]}
    - {name: output, op: add, in: [x, both]}
"""

BLOCKS = {"pre": pre_norm, "post": post_norm, "sandwich": sandwich, "parallel": parallel}
STEPS = {"sandwich": SANDWICH_STEPS, "parallel": PARALLEL_STEPS}
NORMS = {"pre": ("norm1", "norm2"), "post": ("norm1", "norm2"), "sandwich": ("norm1", "norm_a", "norm2", "norm_f"),
         "parallel": ("norm1",)}


def random_case(seed: int, kind: str | None = None, mask: str | None = None) -> dict:
    """A random small valid block: dims with H | C, every weight drawn here and written into the spec."""
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    H, d = rnd.randint(1, 3), rnd.randint(1, 3)
    B, T, C, F = rnd.randint(1, 3), rnd.randint(1, 6), H * d, rnd.randint(1, 8)
    kind = kind or rnd.choice(list(BLOCKS))
    mask = mask or rnd.choice(["causal", "none"])
    eps = rnd.choice([1e-5, 1e-6, 0.1])

    def m(*shape, scale=1.0):
        return rng.uniform(-scale, scale, shape)

    W = {"attn": {**{f"w_{n}": m(C, C, scale=1 / math.sqrt(C)) for n in "qkvo"}, **{f"b_{n}": m(C, scale=0.1) for n in "qkvo"}},
         "ffn": {"w1": m(C, F, scale=1 / math.sqrt(C)), "b1": m(F, scale=0.1), "w2": m(F, C, scale=1 / math.sqrt(F)), "b2": m(C, scale=0.1)}}
    for n in NORMS[kind]:
        W[n] = {"gamma": 1 + m(C, scale=0.2), "beta": m(C, scale=0.2)}
    x = m(B, T, C)
    if kind in STEPS:
        block = f"{{mask: {mask}, eps: {eps!r}, steps: [{', '.join(flow(STEPS[kind]))}]}}"
    else:
        block = json.dumps({"mask": mask, "eps": eps, "norm_order": kind})
    visible = causal(T) if mask == "causal" else None
    return {"text": spec_text(f"random case {seed} ({kind}, mask {mask})", x, W, H, F, block),
            "x": x, "W": W, "H": H, "eps": eps, "visible": visible, "kind": kind,
            "dims": (B, T, C, H, F), "mask": mask, "expected": BLOCKS[kind](x, W, H, eps, visible)}


def spec_text(name: str, x, W: dict, H: int, F: int, block: str) -> str:
    """A spec giving x and every weight explicitly (JSON flow style, floats written to round-trip exactly)."""
    weights = {g: {k: np.asarray(v).tolist() for k, v in ws.items()} for g, ws in W.items()}
    return "\n".join([f"name: {name}", f"dims: {json.dumps({'C': x.shape[-1], 'H': H, 'F': F})}", f"block: {block}",
                      f"input: {{x: {json.dumps(x.tolist())}}}", f"weights: {json.dumps(weights)}"]) + "\n"


def flow(steps: str) -> list[str]:
    """Block-style step lines ('    - {...}') as flow items ('{...}')."""
    return [line.strip()[2:] for line in steps.splitlines() if line.strip()]
