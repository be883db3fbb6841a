"""A Pre-Norm block as a student writes it, in NumPy and in PyTorch, with any one of the classic mistakes made.

Written the way the exercise is written ([T,C], no batch axis, the heads split with a reshape and a transpose),
not from tracer's code: the arrays it records are what ``tracer diff SPEC mine.npz`` reads, and each planted
mistake is what tracer's diagnoses (tracer/compare/hints.py) must name.  Weights come by tracer's names
(``attn.w_q``, ``ffn.b1``, ``norm1.gamma``, ...) from a traced spec, the input is the spec's ``x`` stage.

``MISTAKES`` lists every mistake by the diagnosis tracer should give, and the stage that first differs when
only the main stages are recorded.
"""

from __future__ import annotations

import math

import numpy as np

MISTAKES = {  # the diagnosis's name -> the first diverging stage, main stages recorded
    "ddof": "norm1",
    "ln_over_t": "norm1",
    "no_eps": "norm1",
    "gamma_beta_swapped": "norm1",
    "post_norm": "norm1",
    "no_residual": "residual1",
    "residual_from_norm": "residual1",
    "no_w_o": "attention",
    "softmax_queries": "attention",
    "mask_after": "attention",
    "no_scale": "attention",
    "split_without_transpose": "attention",
    "heads_reversed": "attention",
    "mask_off_by_one": "attention",
    "gelu_exact": "hidden",
    "gelu_tanh": "hidden",
    "ffn_no_bias": "hidden",
}
HEADS = ("split_without_transpose", "heads_reversed")  # need H > 1
MAIN = ("x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output")


def _erf(z):
    return np.vectorize(math.erf, otypes=[np.float64])(z)


def numpy_block(x, w, H, eps=1e-5, activation="relu", bug=None, fill=-np.inf, dtype=np.float64):
    """x [T,C]; w: tracer's weight names -> arrays. Returns every stage the student records ([T,C], heads [H,T,T])."""
    x = np.asarray(x, dtype=dtype)
    w = {k: np.asarray(v, dtype=dtype) for k, v in w.items()}
    T, C = x.shape
    d = C // H

    def layer_norm(v, g, b):
        if bug == "ln_over_t":
            mu, var = v.mean(axis=0, keepdims=True), v.var(axis=0, keepdims=True)
        else:
            mu, var = v.mean(axis=-1, keepdims=True), v.var(axis=-1, keepdims=True, ddof=1 if bug == "ddof" else 0)
        e = 0.0 if bug == "no_eps" else eps
        if bug == "gamma_beta_swapped":
            g, b = b, g
        return g * (v - mu) / np.sqrt(var + e) + b

    def split(y):  # [T,C] -> [H,T,d]
        if bug == "split_without_transpose":
            return y.reshape(H, T, d)
        return y.reshape(T, H, d).transpose(1, 0, 2)

    def attention(n):
        q, k, v = (split(n @ w[f"attn.w_{m}"] + w[f"attn.b_{m}"]) for m in "qkv")
        scores = q @ k.transpose(0, 2, 1)
        if bug != "no_scale":
            scores = scores / np.sqrt(d)
        future = np.triu(np.ones((T, T), dtype=bool), k=0 if bug == "mask_off_by_one" else 1)
        if bug == "mask_after":
            e = np.exp(scores - scores.max(axis=-1, keepdims=True))
            weights = np.where(future, 0.0, e / e.sum(axis=-1, keepdims=True))
        else:
            masked = np.where(future, fill if bug == "mask_off_by_one" else -np.inf, scores)
            with np.errstate(all="ignore"):
                axis = -2 if bug == "softmax_queries" else -1
                e = np.exp(masked - masked.max(axis=axis, keepdims=True))
                weights = np.nan_to_num(e / e.sum(axis=axis, keepdims=True)) if bug == "softmax_queries" else e / e.sum(axis=axis, keepdims=True)
        mixed = weights @ v  # [H,T,d]
        if bug == "heads_reversed":
            mixed = mixed[::-1]
        heads = mixed.reshape(T, C) if bug == "split_without_transpose" else mixed.transpose(1, 0, 2).reshape(T, C)
        out = heads if bug == "no_w_o" else heads @ w["attn.w_o"] + w["attn.b_o"]
        return masked if bug != "mask_after" else scores, weights, heads, out

    def act(z):
        name = {"gelu_exact": "gelu", "gelu_tanh": "gelu_tanh"}.get(bug or "", activation)
        if name == "relu":
            return np.maximum(z, 0)
        if name == "gelu":
            return 0.5 * z * (1 + _erf(z / math.sqrt(2)))
        return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))

    if bug == "post_norm":  # R = LN1(X + MHA(X)), Y = LN2(R + FFN(R)), recorded under the Pre-Norm names
        scores, weights, heads, u = attention(x)
        n1 = layer_norm(x + u, w["norm1.gamma"], w["norm1.beta"])
        r = n1
        n2 = r
    else:
        n1 = layer_norm(x, w["norm1.gamma"], w["norm1.beta"])
        scores, weights, heads, u = attention(n1)
        r = {"no_residual": u, "residual_from_norm": n1 + u}.get(bug or "", x + u)
        n2 = layer_norm(r, w["norm2.gamma"], w["norm2.beta"])
    hidden = act(n2 @ w["ffn.w1"] + (0.0 if bug == "ffn_no_bias" else w["ffn.b1"]))
    f = hidden @ w["ffn.w2"] + w["ffn.b2"]
    y = r + f
    return {"x": x, "norm1": n1, "attn.scores": scores, "attn.weights": weights, "attn.heads": heads, "attention": u,
            "residual1": r, "norm2": n2, "hidden": hidden, "ffn": f, "output": y}


def torch_block(x, w, H, eps=1e-5, activation="relu", bug=None, dtype="float64"):
    """The same block in PyTorch, as a student writes it with torch's own functions (F.layer_norm, F.softmax,
    F.gelu, masked_fill); returns NumPy arrays of each recorded stage."""
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    x = torch.tensor(np.asarray(x), dtype=dt)
    w = {k: torch.tensor(np.asarray(v), dtype=dt) for k, v in w.items()}
    T, C = x.shape
    d = C // H

    def layer_norm(v, g, b):
        if bug == "gamma_beta_swapped":
            g, b = b, g
        if bug in ("ddof", "ln_over_t", "no_eps"):
            dim = 0 if bug == "ln_over_t" else -1
            mu = v.mean(dim=dim, keepdim=True)
            var = v.var(dim=dim, keepdim=True, unbiased=bug == "ddof")
            return g * (v - mu) / torch.sqrt(var + (0.0 if bug == "no_eps" else eps)) + b
        return F.layer_norm(v, (C,), g, b, eps)

    def split(y):
        return y.reshape(H, T, d) if bug == "split_without_transpose" else y.view(T, H, d).transpose(0, 1)

    def attention(n):
        q, k, v = (split(n @ w[f"attn.w_{m}"] + w[f"attn.b_{m}"]) for m in "qkv")
        scores = q @ k.transpose(-2, -1)
        if bug != "no_scale":
            scores = scores / math.sqrt(d)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0 if bug == "mask_off_by_one" else 1)
        if bug == "mask_after":
            weights = F.softmax(scores, dim=-1).masked_fill(future, 0.0)
        elif bug == "softmax_queries":
            weights = torch.nan_to_num(F.softmax(scores.masked_fill(future, float("-inf")), dim=-2))
        else:
            weights = F.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        mixed = weights @ v
        if bug == "heads_reversed":
            mixed = mixed.flip(0)
        heads = mixed.reshape(T, C) if bug == "split_without_transpose" else mixed.transpose(0, 1).reshape(T, C)
        out = heads if bug == "no_w_o" else heads @ w["attn.w_o"] + w["attn.b_o"]
        return scores, weights, heads, out

    def act(z):
        name = {"gelu_exact": "gelu", "gelu_tanh": "gelu_tanh"}.get(bug or "", activation)
        if name == "relu":
            return F.relu(z)
        return F.gelu(z) if name == "gelu" else F.gelu(z, approximate="tanh")

    with torch.no_grad():
        if bug == "post_norm":
            scores, weights, heads, u = attention(x)
            n1 = layer_norm(x + u, w["norm1.gamma"], w["norm1.beta"])
            r = n2 = n1
        else:
            n1 = layer_norm(x, w["norm1.gamma"], w["norm1.beta"])
            scores, weights, heads, u = attention(n1)
            r = {"no_residual": u, "residual_from_norm": n1 + u}.get(bug or "", x + u)
            n2 = layer_norm(r, w["norm2.gamma"], w["norm2.beta"])
        hidden = act(n2 @ w["ffn.w1"] + (0.0 if bug == "ffn_no_bias" else w["ffn.b1"]))
        f = hidden @ w["ffn.w2"] + w["ffn.b2"]
        y = r + f
    stages = {"x": x, "norm1": n1, "attn.scores": scores, "attn.weights": weights, "attn.heads": heads, "attention": u,
              "residual1": r, "norm2": n2, "hidden": hidden, "ffn": f, "output": y}
    return {k: v.numpy() for k, v in stages.items()}


def spec_text(C, H, T=3, activation="relu", seed=3):
    """A Pre-Norm block with every weight, bias, gamma and beta drawn (so each classic mistake shows), x random."""
    act = "gelu_tanh" if activation == "gelu_tanh" else activation
    return (f"name: student {C}\ndims: {{B: 1, T: {T}, C: {C}, H: {H}, F: {2 * C if C > 2 else 3}}}\nseed: {seed}\ninput: {{x: random}}\n"
            f"block: {{norm_order: pre, mask: causal, eps: 1e-5, activation: {act}}}\n"
            "weights:\n  attn: {b_q: random, b_k: random, b_v: random, b_o: random}\n  ffn: {b1: random, b2: random}\n"
            "  norm1: {gamma: random, beta: random}\n  norm2: {gamma: random, beta: random}\n")
