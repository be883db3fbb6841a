"""Mistakes beyond the worded records: a Pre-Norm block as a student writes it in NumPy ([T,C], no batch axis),
with one (or two) of many plausible mistakes made, none of them one of tracer's 18 worded records.

Written from the chapter, not from tracer's code (tracer/compare/recompute.py is what it tests).  ``NEW`` maps
each mistake to the diagnoses tracer may give for it (the variant's ``bug`` names: any one of them is right, as
variants that give the same numbers on a spec are named together) and the stage that first differs; a mistake
whose names are empty is one tracer must not name wrongly (it may say nothing).
"""

from __future__ import annotations

import math

import numpy as np

MAIN = ("x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output")

# mistake -> (the bug names that are right, the first diverging stage)
NEW: dict[str, tuple[frozenset[str], str]] = {
    "ln_no_gamma": (frozenset({"gamma=off"}), "norm1"),
    "ln_no_beta": (frozenset({"beta=off"}), "norm1"),
    "ln_eps_outside": (frozenset({"place=outside"}), "norm1"),
    "ln_var_no_sqrt": (frozenset({"place=no_sqrt"}), "norm1"),
    "ln_no_center": (frozenset({"center=False"}), "norm1"),
    "ln_over_all": (frozenset({"axis=TC"}), "norm1"),
    "ln_eps_1e-6": (frozenset({"eps=1e-06"}), "norm1"),
    "ln_eps_1e-12": (frozenset({"eps=1e-12", "no_eps"}), "norm1"),
    "ln_no_divide": (frozenset({"divide=False"}), "norm1"),
    "norm2_with_norm1_weights": (frozenset({"group=norm1"}), "norm2"),
    "norm2_reads_x": (frozenset({"reads=x"}), "norm2"),
    "ln_ddof_and_no_eps": (frozenset({"ddof=1+eps=0", "ddof=1+eps=1e-12"}), "norm1"),
    "scale_sqrt_c": (frozenset({"scale=1/sqrt(C)", "scale=1/d"}), "attention"),
    "scale_d": (frozenset({"scale=1/d", "scale=1/sqrt(C)"}), "attention"),  # C = 4, d = 2: the same numbers, both named
    "scale_c": (frozenset({"scale=1/C"}), "attention"),
    "scale_times_sqrt_d": (frozenset({"scale=sqrt(d)"}), "attention"),
    "qk_swapped": (frozenset({"scores=kq"}), "attention"),
    "k_from_w_q": (frozenset({"k_from=w_q"}), "attention"),
    "v_from_w_k": (frozenset({"v_from=w_k"}), "attention"),
    "q_from_w_v": (frozenset({"q_from=w_v"}), "attention"),
    "v_is_x": (frozenset({"v_from=none"}), "attention"),
    "no_b_q": (frozenset({"b_q=off"}), "attention"),
    "no_b_v": (frozenset({"b_v=off"}), "attention"),
    "no_b_o": (frozenset({"b_o=off"}), "attention"),
    "w_o_transposed": (frozenset({"w_o=transposed"}), "attention"),
    "mask_transposed": (frozenset({"mask=transposed"}), "attention"),
    "mask_zero_fill": (frozenset({"mode=zero"}), "attention"),
    "no_mask": (frozenset({"mask=none"}), "attention"),
    "mask_one_future": (frozenset({"mask=one_future"}), "attention"),
    "softmax_over_heads": (frozenset({"softmax_over=heads"}), "attention"),
    "no_softmax": (frozenset({"softmax_over=none"}), "attention"),
    "merge_without_transpose": (frozenset({"merged=reshape"}), "attention"),
    "weights_transposed": (frozenset({"mix=transposed"}), "attention"),
    "attention_reads_x_and_no_b_o": (frozenset({"reads=x+b_o=off"}), "attention"),
    "scale_sqrt_c_and_no_b_o": (frozenset({"b_o=off+scale=1/sqrt(C)", "b_o=off+scale=1/d"}), "attention"),
    "gelu_not_relu": (frozenset({"activation=gelu", "activation=gelu_tanh"}), "hidden"),
    "silu_not_relu": (frozenset({"activation=silu"}), "hidden"),
    "no_activation": (frozenset({"activation=none"}), "hidden"),
    "bias_after_relu": (frozenset({"b1=after"}), "hidden"),
    "ffn_reads_residual": (frozenset({"reads=residual1"}), "hidden"),
    "ffn_reads_norm1": (frozenset({"reads=norm1"}), "hidden"),
    "no_b2": (frozenset({"b2=off", "ffn_no_bias"}), "ffn"),
    "relu_after_w2": (frozenset({"after=relu"}), "ffn"),
    "ffn_reads_pre_activation": (frozenset({"reads=pre"}), "ffn"),
    "residual_doubled": (frozenset({"times_a=2"}), "residual1"),
    "residual_subtracted": (frozenset({"times_b=-1"}), "residual1"),
    "output_from_x": (frozenset({"a=x"}), "output"),
    "output_adds_attention": (frozenset({"a=attention"}), "output"),
}


def _erf(z):
    return np.vectorize(math.erf, otypes=[np.float64])(z)


def block(x, w, H, bug, eps=1e-5, dtype=np.float64):
    """x [T,C]; w: tracer's weight names -> arrays; one mistake of NEW made.  Returns the main stages ([T,C], [T,F])."""
    x = np.asarray(x, dtype=dtype)
    w = {k: np.asarray(v, dtype=dtype) for k, v in w.items()}
    T, C = x.shape
    d = C // H

    def layer_norm(v, g, b, which):
        g, b = (w["norm1.gamma"], w["norm1.beta"]) if (bug == "norm2_with_norm1_weights" and which == 2) else (g, b)
        axis = None if bug == "ln_over_all" else -1
        mu = v.mean(axis=axis, keepdims=True)
        if bug == "ln_no_center":
            mu = 0.0
        n = v.size if axis is None else v.shape[-1]
        ddof = 1 if bug == "ln_ddof_and_no_eps" else 0
        var = ((v - mu) ** 2).sum(axis=axis, keepdims=True) / (n - ddof)
        e = {"ln_eps_1e-6": 1e-6, "ln_eps_1e-12": 1e-12, "ln_ddof_and_no_eps": 0.0}.get(bug, eps)
        if bug == "ln_eps_outside":
            y = (v - mu) / (np.sqrt(var) + e)
        elif bug == "ln_var_no_sqrt":
            y = (v - mu) / (var + e)
        elif bug == "ln_no_divide":
            y = v - mu
        else:
            y = (v - mu) / np.sqrt(var + e)
        if bug != "ln_no_gamma":
            y = y * g
        if bug != "ln_no_beta":
            y = y + b
        return y

    def project(n, m):
        source = {("k_from_w_q", "k"): "q", ("v_from_w_k", "v"): "k", ("q_from_w_v", "q"): "v"}.get((bug, m), m)
        if bug == "v_is_x" and m == "v":
            return n
        bias = 0.0 if (bug, m) in (("no_b_q", "q"), ("no_b_v", "v")) else w[f"attn.b_{source}"]
        return n @ w[f"attn.w_{source}"] + bias

    def attention(n):
        q, k, v = (project(n, m).reshape(T, H, d).transpose(1, 0, 2) for m in "qkv")
        scores = (k @ q.transpose(0, 2, 1)) if bug == "qk_swapped" else (q @ k.transpose(0, 2, 1))
        scale = {"scale_sqrt_c": 1 / math.sqrt(C), "scale_sqrt_c_and_no_b_o": 1 / math.sqrt(C), "scale_d": 1 / d, "scale_c": 1 / C,
                 "scale_times_sqrt_d": math.sqrt(d)}.get(bug, 1 / math.sqrt(d))
        scores = scores * scale
        future = np.triu(np.ones((T, T), dtype=bool), k=2 if bug == "mask_one_future" else 1)
        if bug == "mask_transposed":
            future = future.T
        if bug == "no_mask":
            future = np.zeros((T, T), dtype=bool)
        if bug == "mask_zero_fill":
            masked = np.where(future, 0.0, scores)
        else:
            masked = np.where(future, -np.inf, scores)
        if bug == "no_softmax":
            weights = np.where(future, 0.0, scores)
        else:
            axis = 0 if bug == "softmax_over_heads" else -1
            e = np.exp(masked - masked.max(axis=axis, keepdims=True))
            weights = e / e.sum(axis=axis, keepdims=True)
        if bug == "weights_transposed":
            weights = weights.transpose(0, 2, 1)
        mixed = weights @ v
        heads = mixed.reshape(T, C) if bug == "merge_without_transpose" else mixed.transpose(1, 0, 2).reshape(T, C)
        w_o = w["attn.w_o"].T if bug == "w_o_transposed" else w["attn.w_o"]
        b_o = 0.0 if bug in ("no_b_o", "attention_reads_x_and_no_b_o", "scale_sqrt_c_and_no_b_o") else w["attn.b_o"]
        return heads @ w_o + b_o

    def act(z):
        if bug == "gelu_not_relu":
            return 0.5 * z * (1 + _erf(z / math.sqrt(2)))
        if bug == "silu_not_relu":
            return z / (1 + np.exp(-z))
        if bug == "no_activation":
            return z
        return np.maximum(z, 0)

    n1 = layer_norm(x, w["norm1.gamma"], w["norm1.beta"], 1)
    u = attention(x if bug == "attention_reads_x_and_no_b_o" else n1)
    r = {"residual_doubled": 2 * x + u, "residual_subtracted": x - u}.get(bug, x + u)
    n2 = layer_norm(x if bug == "norm2_reads_x" else r, w["norm2.gamma"], w["norm2.beta"], 2)
    reads = {"ffn_reads_residual": r, "ffn_reads_norm1": n1}.get(bug, n2)
    pre = reads @ w["ffn.w1"] + w["ffn.b1"]
    hidden = act(reads @ w["ffn.w1"]) + w["ffn.b1"] if bug == "bias_after_relu" else act(pre)
    f = (pre if bug == "ffn_reads_pre_activation" else hidden) @ w["ffn.w2"] + (0.0 if bug == "no_b2" else w["ffn.b2"])
    if bug == "relu_after_w2":
        f = np.maximum(f, 0)
    y = {"output_from_x": x + f, "output_adds_attention": u + f}.get(bug, r + f)
    return {"x": x, "norm1": n1, "attention": u, "residual1": r, "norm2": n2, "hidden": hidden, "ffn": f, "output": y}
