"""The model of independent.py written again in PyTorch, so autograd can give every gradient.

Nothing here imports tracer's kernels or step lists: layers are written out per layout as the book
writes them (independent.py's functions, in torch).  Every stage tensor keeps its gradient
(``retain_grad``), under tracer's documented stage names; weights are leaf tensors under their YAML
paths.  The tests import this only after ``pytest.importorskip("torch")``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from helpers import oracle as ind


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def rms_norm(x, gamma, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * gamma


def batch_norm(x, gamma, beta, eps):
    mean = x.mean(dim=(0, 1), keepdim=True)
    var = ((x - mean) ** 2).mean(dim=(0, 1), keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def rope_turn(x, base, pairing="interleaved", dim=None):  # [B,H,T,d]: pair i turned by t * base^(-2i/d)
    """interleaved: pairs (2i, 2i+1) as complex numbers (the RoPE paper); half: Hugging Face's rotate_half,
    x cos + rotate_half(x) sin with the angles repeated over both halves, so pair i is (i, i + d/2).
    dim (partial rotary): the first dim coordinates turned as a vector of their own, the rest passed through."""
    if dim is not None and dim != x.shape[-1]:
        return torch.cat([rope_turn(x[..., :dim], base, pairing), x[..., dim:]], dim=-1)
    T, d = x.shape[-2], x.shape[-1]
    theta = torch.tensor([base ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta  # [T, d/2]
    if pairing == "half":
        cos, sin = torch.cat([angle.cos(), angle.cos()], dim=-1), torch.cat([angle.sin(), angle.sin()], dim=-1)
        rotated = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
        return x * cos + rotated * sin
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    turn = torch.polar(torch.ones(T, d // 2, dtype=torch.float64), angle)
    return torch.view_as_real(z * turn).reshape(x.shape)


class Recorder:
    def __init__(self):
        self.stages: dict[str, torch.Tensor] = {}

    def __call__(self, name, t):
        if t.requires_grad:
            t.retain_grad()
        self.stages[name] = t
        return t


def attention(st, prefix, xq, xkv, w, H, mask, rope, qk_eps=None):
    """H: (query heads, key/value heads or None); rope: (base, pairing), or None.  Grouped-query attention as
    Hugging Face's repeat_kv: each key/value head repeated H / H_kv times in a row, after k and v are recorded.
    The head width d is W_Q's columns over H (C / H unless set apart); qk_eps (Qwen3): q and k RMS-normalised per
    head over d, with w["q_norm"], w["k_norm"], before the rotary turn."""
    H, H_kv = H[0], H[1] or H[0]
    B, T, C = xq.shape
    S = xkv.shape[1]
    d = w["w_q"].shape[1] // H

    def heads(x, n, count):
        return x.reshape(B, n, count, d).transpose(1, 2)

    q, k = heads(xq @ w["w_q"] + w["b_q"], T, H), heads(xkv @ w["w_k"] + w["b_k"], S, H_kv)
    v = heads(xkv @ w["w_v"] + w["b_v"], S, H_kv)
    if qk_eps is not None:
        q, k = rms_norm(q, w["q_norm"], qk_eps), rms_norm(k, w["k_norm"], qk_eps)
    if rope is not None:
        q, k = rope_turn(q, *rope), rope_turn(k, *rope)
    q, k, v = st(prefix + ".q", q), st(prefix + ".k", k), st(prefix + ".v", v)
    k, v = k.repeat_interleave(H // H_kv, dim=1), v.repeat_interleave(H // H_kv, dim=1)  # query head h reads h // (H/H_kv)
    scores = st(prefix + ".scores", q @ k.transpose(-1, -2) / math.sqrt(d))
    if isinstance(mask, str):
        allowed = torch.tril(torch.ones(T, S, dtype=torch.bool)) if mask == "causal" else torch.ones(T, S, dtype=torch.bool)
    else:
        allowed = torch.tensor(mask, dtype=torch.bool)
    weights = st(prefix + ".weights", torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1))
    mixed = st(prefix + ".heads", (weights @ v).transpose(1, 2).reshape(B, T, H * d))
    return mixed @ w["w_o"] + w["b_o"]


def group(p, name):
    prefix = name + "."
    return {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}


def norm(st, name, x, p, s):
    g = group(p, name)
    if s.norm == "layernorm":
        return st(name, layer_norm(x, g["gamma"], g["beta"], s.eps))
    if s.norm == "rmsnorm":
        return st(name, rms_norm(x, g["gamma"], s.eps))
    if s.norm == "rmsnorm_offset":  # Gemma's: the scale is 1 + gamma
        return st(name, rms_norm(x, 1.0 + g["gamma"], s.eps))
    return st(name, batch_norm(x, g["gamma"], g["beta"], s.eps))


def attend(st, pre, name, xq, xkv, p, H, mask, rope, qk_eps=None):
    inner = "cross" if name == "cross_attention" else "attn"
    w = group(p, pre + ("cross_attn" if name == "cross_attention" else "attn"))
    return st(pre + name, attention(st, pre + inner, xq, xkv, w, H, mask, rope, qk_eps))


def ffn(st, pre, x, p, s):
    g = group(p, pre + "ffn")
    a = x @ g["w1"] + g["b1"]
    if s.activation == "swiglu":
        hidden = F.silu(a) * (x @ g["w3"] + g["b3"])
    elif s.activation == "geglu":  # Gemma's gate: torch's tanh GELU
        hidden = F.gelu(a, approximate="tanh") * (x @ g["w3"] + g["b3"])
    elif s.activation == "relu":
        hidden = torch.relu(a)
    else:
        hidden = F.gelu(a, approximate="tanh" if s.activation == "gelu_tanh" else "none")
    hidden = st(pre + "hidden", hidden)
    return st(pre + "ffn", hidden @ g["w2"] + g["b2"])


def rope_base(s):  # (base, pairing, rotary width or None) with rotary positions, else None
    return (s.base, s.pairing, s.rotary_dim) if s.positions == "rotary" else None


def pre_norm_layer(st, pre, x, p, s, H):
    n1 = norm(st, pre + "norm1", x, p, s)
    r = st(pre + "residual1", x + attend(st, pre, "attention", n1, n1, p, H, s.mask, rope_base(s), s.eps if s.qk_norm else None))
    n2 = norm(st, pre + "norm2", r, p, s)
    return st(pre + "output", r + ffn(st, pre, n2, p, s))


def parallel_layer(st, pre, x, p, s, H, shared=False):  # Y = X + (MHA(LN1(X)) + FFN(LN2(X))); shared: one norm
    n1 = norm(st, pre + "norm1", x, p, s)
    n2 = n1 if shared else norm(st, pre + "norm2", x, p, s)
    u = attend(st, pre, "attention", n1, n1, p, H, s.mask, rope_base(s))
    branches = st(pre + "branches", u + ffn(st, pre, n2, p, s))
    return st(pre + "output", x + branches)


def parallel_shared_layer(st, pre, x, p, s, H):
    return parallel_layer(st, pre, x, p, s, H, shared=True)


def post_norm_layer(st, pre, x, p, s, H):
    r1 = st(pre + "residual1", x + attend(st, pre, "attention", x, x, p, H, s.mask, rope_base(s), s.eps if s.qk_norm else None))
    n1 = norm(st, pre + "norm1", r1, p, s)
    r2 = st(pre + "residual2", n1 + ffn(st, pre, n1, p, s))
    return st(pre + "output", norm(st, pre + "norm2", r2, p, s) * 1.0)  # output = norm2, a stage of its own


def decoder_pre_norm_layer(st, pre, x, memory, p, s, H):
    n1 = norm(st, pre + "norm1", x, p, s)
    r1 = st(pre + "residual1", x + attend(st, pre, "attention", n1, n1, p, H, s.mask, rope_base(s), s.eps if s.qk_norm else None))
    n2 = norm(st, pre + "norm2", r1, p, s)
    r2 = st(pre + "residual2", r1 + attend(st, pre, "cross_attention", n2, memory, p, H, "none", None))
    n3 = norm(st, pre + "norm3", r2, p, s)
    return st(pre + "output", r2 + ffn(st, pre, n3, p, s))


def decoder_post_norm_layer(st, pre, x, memory, p, s, H):
    r1 = st(pre + "residual1", x + attend(st, pre, "attention", x, x, p, H, s.mask, rope_base(s), s.eps if s.qk_norm else None))
    n1 = norm(st, pre + "norm1", r1, p, s)
    r2 = st(pre + "residual2", n1 + attend(st, pre, "cross_attention", n1, memory, p, H, "none", None))
    n2 = norm(st, pre + "norm2", r2, p, s)
    r3 = st(pre + "residual3", n2 + ffn(st, pre, n2, p, s))
    return st(pre + "output", norm(st, pre + "norm3", r3, p, s) * 1.0)


def entry(st, pre, first, p, s):
    T, C = first.shape[1], first.shape[2]
    if s.positions == "learned":
        pos = st(pre + "position", p["position"][:T])
    elif s.positions == "sinusoidal":
        pos = st(pre + "position", torch.tensor(ind.sinusoidal_table(T, C, s.base), requires_grad=True))  # a leaf: its gradient is kept
    else:
        return st(pre + "x", first * 1.0)  # X is the first stage itself (a stage of its own name)
    return st(pre + "x", first + pos)


def exit_(st, pre, h, p, s, head=True):
    if s.final_norm:
        h = norm(st, pre + "final_norm", h, p, s)
    if head and s.head != "none":
        w = p["embedding"].T if s.head == "tied" else p["head"]
        logits = st("logits", h @ w + p["head_bias"] if s.head_bias else h @ w)
        st("probs", torch.softmax(logits, dim=-1))
    return h


def decoder_only(m, p, tokens=None, x=None):
    st = Recorder()
    s = m.block
    if tokens is not None:
        first = st("embed", p["embedding"][torch.as_tensor(tokens)])
    else:
        first = st("input", torch.tensor(x, dtype=torch.float64, requires_grad=True))
    if s.embedding_scale and s.positions in ("rotary", "none"):  # Gemma: X = E[token] * sqrt(C)
        h = st("x", first * first.shape[-1] ** 0.5)
    elif s.embedding_scale:
        h = entry(st, "", st("embed_scaled", first * first.shape[-1] ** 0.5), p, s)
    else:
        h = entry(st, "", first, p, s)
    layer = {"pre": pre_norm_layer, "post": post_norm_layer, "parallel": parallel_layer, "parallel_shared": parallel_shared_layer}[s.norm_order]
    prefixes = [""] if s.layers == 1 else [f"blocks.{i}." for i in range(s.layers)]
    for pre in prefixes:
        h = layer(st, pre, h, p, s, (m.H, m.H_kv))
    exit_(st, "", h, p, s)
    return st.stages


def encoder_decoder(m, p, source, target):
    st = Recorder()
    e, d = m.encoder, m.block
    h = entry(st, "encoder.", st("encoder.embed", p["embedding"][torch.as_tensor(source)]), p, e)
    layer = pre_norm_layer if e.norm_order == "pre" else post_norm_layer
    for i in range(e.layers):
        h = layer(st, f"encoder.blocks.{i}.", h, p, e, (m.H, m.H_kv))
    memory = exit_(st, "encoder.", h, p, e, head=False)
    h = entry(st, "decoder.", st("decoder.embed", p["embedding"][torch.as_tensor(target)]), p, d)
    layer = decoder_pre_norm_layer if d.norm_order == "pre" else decoder_post_norm_layer
    for i in range(d.layers):
        h = layer(st, f"decoder.blocks.{i}.", h, memory, p, d, (m.H, m.H_kv))
    exit_(st, "decoder.", h, p, d)
    return st.stages
