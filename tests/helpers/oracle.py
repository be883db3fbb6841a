"""A whole Transformer written straight from the formulas, for the tests to compare tracer with.

Nothing here imports tracer.  Each function is the textbook formula (the reader's guide, Chapter
17, the RoPE and SwiGLU papers), written for plainness rather than speed: attention loops over
samples and heads, rotary positions are complex multiplications, the sinusoidal table is filled
entry by entry.  Layers are written out one function per layout (pre-norm, post-norm, and the
decoder's two with cross-attention), the way the book writes them, not generated from tracer's
step lists.  Stage names follow tracer's documented names so the tests can compare stage by
stage; weights are looked up by their documented YAML paths (``blocks.1.attn.w_q``, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


# -- the pieces ----------------------------------------------------------------
def layer_norm(x, gamma, beta, eps):  # statistics over the last axis (C) of each sample's each position
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)  # ddof 0: the mean of squared deviations
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def rms_norm(x, gamma, eps):
    return x / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + eps) * gamma


def batch_norm(x, gamma, beta, eps):  # [B,T,C]: one mean and variance per coordinate, over B and T together
    flat = x.reshape(-1, x.shape[-1])  # [B*T, C]
    mean = flat.mean(axis=0)
    var = ((flat - mean) ** 2).mean(axis=0)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu(x):  # x * Phi(x), Phi the standard normal CDF = erfc(-x / sqrt 2) / 2
    return x * 0.5 * _erfc(-x / math.sqrt(2.0))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):  # x * sigmoid(x), sigmoid(x) = (1 + tanh(x / 2)) / 2
    return x * 0.5 * (1.0 + np.tanh(x / 2.0))


def relu(x):
    return np.where(x > 0, x, 0.0)


def softmax(z, axis=-1):
    e = np.exp(z - np.max(z, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def sinusoidal_table(T, C, base):  # PE[p, 2i] = sin(p / base^(2i/C)), PE[p, 2i+1] = cos(p / base^(2i/C))
    pe = np.zeros((T, C))
    for p in range(T):
        for c in range(C):
            i = c // 2
            angle = p / base ** (2 * i / C)
            pe[p, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return pe


def rope(x, base, pairing="interleaved"):  # [..., T, d]: pair i read as a complex number, turned by t * base^(-2i/d)
    """Pair i is (2i, 2i+1) when interleaved (the RoPE paper, Meta's LLaMA); (i, i + d/2) when half (Hugging Face)."""
    T, d = x.shape[-2], x.shape[-1]
    if pairing == "half":
        z = x[..., : d // 2] + 1j * x[..., d // 2:]
    else:
        z = x[..., 0::2] + 1j * x[..., 1::2]  # [..., T, d/2]
    theta = np.array([base ** (-2 * i / d) for i in range(d // 2)])
    turn = np.exp(1j * np.arange(T)[:, None] * theta[None, :])  # [T, d/2], unit complex numbers
    z = z * turn
    out = np.empty(x.shape)
    if pairing == "half":
        out[..., : d // 2], out[..., d // 2:] = z.real, z.imag
    else:
        out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def attention(xq, xkv, w, H, mask, rope_base=None, H_kv=None, pairing="interleaved"):
    """Multi-head attention, one sample and one head at a time: [B,T,C], [B,S,C] -> dict of stages.

    mask: "causal" (query i reads keys 0..i), "none", or a [T,S] 0/1 matrix.  H_kv key/value heads
    (grouped-query attention): the key and value heads are repeated, each H / H_kv times in a row,
    so that query head h meets a copy of key head h // (H / H_kv), as Hugging Face's repeat_kv does.
    """
    B, T, C = xq.shape
    S = xkv.shape[1]
    d = C // H
    H_kv = H if H_kv is None else H_kv
    q_all = xq @ w["w_q"] + w["b_q"]
    k_all = xkv @ w["w_k"] + w["b_k"]
    v_all = xkv @ w["w_v"] + w["b_v"]
    q = np.zeros((B, H, T, d))
    k = np.zeros((B, H_kv, S, d))
    v = np.zeros((B, H_kv, S, d))
    for b in range(B):
        for g in range(H_kv):
            cols = slice(g * d, (g + 1) * d)  # key/value head g reads columns g*d .. (g+1)*d - 1
            k[b, g] = rope(k_all[b, :, cols], rope_base, pairing) if rope_base is not None else k_all[b, :, cols]
            v[b, g] = v_all[b, :, cols]
    k_rep = np.concatenate([np.stack([k[:, g]] * (H // H_kv), axis=1) for g in range(H_kv)], axis=1)  # [B,H,S,d]
    v_rep = np.concatenate([np.stack([v[:, g]] * (H // H_kv), axis=1) for g in range(H_kv)], axis=1)
    scores = np.zeros((B, H, T, S))
    weights = np.zeros((B, H, T, S))
    heads = np.zeros((B, T, C))
    if isinstance(mask, str):
        allowed = np.tril(np.ones((T, S), dtype=bool)) if mask == "causal" else np.ones((T, S), dtype=bool)
    else:
        allowed = np.asarray(mask, dtype=bool)
    for b in range(B):
        for h in range(H):
            cols = slice(h * d, (h + 1) * d)  # head h reads columns h*d .. (h+1)*d - 1
            qh, kh, vh = q_all[b, :, cols], k_rep[b, h], v_rep[b, h]
            if rope_base is not None:
                qh = rope(qh, rope_base, pairing)
            s = qh @ kh.T / math.sqrt(d)
            wts = np.zeros((T, S))
            for i in range(T):
                keys = np.flatnonzero(allowed[i])
                wts[i, keys] = softmax(s[i, keys])
            q[b, h] = qh
            scores[b, h], weights[b, h] = s, wts
            heads[b, :, cols] = wts @ vh
    out = heads @ w["w_o"] + w["b_o"]
    return {"q": q, "k": k, "v": v, "scores": scores, "weights": weights, "heads": heads, "output": out}


# -- configuration -------------------------------------------------------------
@dataclass
class Stack:
    """One stack's settings, with tracer's documented defaults."""

    norm_order: str = "pre"
    layers: int = 1
    mask: object = "causal"
    eps: float = 1e-5
    norm: str = "layernorm"
    activation: str = "relu"
    positions: str = "none"
    base: float = 10000.0
    final_norm: bool = False
    head: str = "none"
    pairing: str = "interleaved"


@dataclass
class Model:
    H: int
    block: Stack = field(default_factory=Stack)  # decoder-only: the block; encoder-decoder: the decoder
    encoder: Stack | None = None
    H_kv: int | None = None


def stack_from_yaml(section: dict | None, default_mask: str, has_table: bool) -> Stack:
    s = section or {}
    return Stack(
        norm_order=s.get("norm_order", "pre"), layers=s.get("layers", 1), mask=s.get("mask", default_mask),
        eps=float(s.get("eps", 1e-5)), norm=s.get("norm", "layernorm"), activation=s.get("activation", "relu"),
        positions=s.get("positions", "learned" if has_table else "none"), base=float(s.get("position_base", 10000.0)),
        final_norm=s.get("final_norm", False), head=s.get("head", "none"), pairing=s.get("rotary_pairing", "interleaved"),
    )


def model_from_yaml(doc: dict) -> Model:
    """The settings of a spec document (a dict from yaml.safe_load), with the documented defaults."""
    has_table = "position" in (doc.get("weights") or {})
    H, H_kv = doc["dims"]["H"], doc["dims"].get("H_kv")
    if doc.get("model") == "encoder-decoder":
        return Model(H, stack_from_yaml(doc.get("decoder"), "causal", has_table),
                     stack_from_yaml(doc.get("encoder"), "none", has_table), H_kv)
    return Model(H, stack_from_yaml(doc.get("block"), "causal", has_table), H_kv=H_kv)


# -- the model -------------------------------------------------------------------
def _group(p, name):
    prefix = name + "."
    return {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}


def _norm(st, name, x, p, s: Stack):
    g = _group(p, name)
    if s.norm == "layernorm":
        y = layer_norm(x, g["gamma"], g["beta"], s.eps)
    elif s.norm == "rmsnorm":
        y = rms_norm(x, g["gamma"], s.eps)
    else:
        y = batch_norm(x, g["gamma"], g["beta"], s.eps)
    st[name] = y
    return y


def _attend(st, pre, name, xq, xkv, p, H, mask, rope):
    """H: (query heads, key/value heads); rope: (base, pairing), or None without rotary positions."""
    base, pairing = rope if rope is not None else (None, "interleaved")
    r = attention(xq, xkv, _group(p, pre + ("cross_attn" if name == "cross_attention" else "attn")), H[0], mask, base, H[1], pairing)
    inner = "cross" if name == "cross_attention" else "attn"
    for key in ("q", "k", "v", "scores", "weights", "heads"):
        st[f"{pre}{inner}.{key}"] = r[key]
    st[pre + name] = r["output"]
    return r["output"]


def _ffn(st, pre, x, p, s: Stack):
    g = _group(p, pre + "ffn")
    a = x @ g["w1"] + g["b1"]
    if s.activation == "swiglu":
        hidden = silu(a) * (x @ g["w3"] + g["b3"])
    else:
        hidden = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh}[s.activation](a)
    st[pre + "hidden"] = hidden
    out = hidden @ g["w2"] + g["b2"]
    st[pre + "ffn"] = out
    return out


def _rope(s: Stack):
    return (s.base, s.pairing) if s.positions == "rotary" else None


def pre_norm_layer(st, pre, x, p, s: Stack, H):  # N1 = LN1(X), R = X + MHA(N1), Y = R + FFN(LN2(R))
    n1 = _norm(st, pre + "norm1", x, p, s)
    r = x + _attend(st, pre, "attention", n1, n1, p, H, s.mask, _rope(s))
    st[pre + "residual1"] = r
    n2 = _norm(st, pre + "norm2", r, p, s)
    y = r + _ffn(st, pre, n2, p, s)
    st[pre + "output"] = y
    return y


def post_norm_layer(st, pre, x, p, s: Stack, H):  # R = LN1(X + MHA(X)), Y = LN2(R + FFN(R))
    st[pre + "residual1"] = x + _attend(st, pre, "attention", x, x, p, H, s.mask, _rope(s))
    r = _norm(st, pre + "norm1", st[pre + "residual1"], p, s)
    st[pre + "residual2"] = r + _ffn(st, pre, r, p, s)
    y = _norm(st, pre + "norm2", st[pre + "residual2"], p, s)
    st[pre + "output"] = y
    return y


def decoder_pre_norm_layer(st, pre, x, memory, p, s: Stack, H):
    n1 = _norm(st, pre + "norm1", x, p, s)
    r1 = x + _attend(st, pre, "attention", n1, n1, p, H, s.mask, _rope(s))
    st[pre + "residual1"] = r1
    n2 = _norm(st, pre + "norm2", r1, p, s)
    r2 = r1 + _attend(st, pre, "cross_attention", n2, memory, p, H, "none", None)
    st[pre + "residual2"] = r2
    n3 = _norm(st, pre + "norm3", r2, p, s)
    y = r2 + _ffn(st, pre, n3, p, s)
    st[pre + "output"] = y
    return y


def decoder_post_norm_layer(st, pre, x, memory, p, s: Stack, H):
    st[pre + "residual1"] = x + _attend(st, pre, "attention", x, x, p, H, s.mask, _rope(s))
    n1 = _norm(st, pre + "norm1", st[pre + "residual1"], p, s)
    st[pre + "residual2"] = n1 + _attend(st, pre, "cross_attention", n1, memory, p, H, "none", None)
    n2 = _norm(st, pre + "norm2", st[pre + "residual2"], p, s)
    st[pre + "residual3"] = n2 + _ffn(st, pre, n2, p, s)
    y = _norm(st, pre + "norm3", st[pre + "residual3"], p, s)
    st[pre + "output"] = y
    return y


def _entry(st, pre, first, p, s: Stack):
    T = first.shape[1]
    if s.positions == "learned":
        st[pre + "position"] = p["position"][:T]
    elif s.positions == "sinusoidal":
        st[pre + "position"] = sinusoidal_table(T, first.shape[2], s.base)
    x = first + st[pre + "position"] if pre + "position" in st else first
    st[pre + "x"] = x
    return x


def _layer_prefixes(pre, s: Stack, plain):
    return [pre] if plain else [f"{pre}blocks.{i}." for i in range(s.layers)]


def _exit(st, pre, h, p, s: Stack):
    if s.final_norm:
        h = _norm(st, pre + "final_norm", h, p, s)
    if s.head != "none":
        w = p["embedding"].T if s.head == "tied" else p["head"]  # tied: logits = h E^T
        st["logits"] = h @ w
        st["probs"] = softmax(st["logits"])
    return h


def decoder_only(m: Model, p, tokens=None, x=None) -> dict[str, np.ndarray]:
    """Every stage of a decoder-only model: tokens [B,T] ids or x [B,T,C]."""
    st: dict[str, np.ndarray] = {}
    s = m.block
    if tokens is not None:
        first = p["embedding"][np.asarray(tokens)]  # row t of E for token t
        st["embed"] = first
    else:
        first = np.asarray(x, dtype=np.float64)
        st["input"] = first
    h = _entry(st, "", first, p, s)
    layer = pre_norm_layer if s.norm_order == "pre" else post_norm_layer
    for pre in _layer_prefixes("", s, plain=s.layers == 1):
        h = layer(st, pre, h, p, s, (m.H, m.H_kv))
    _exit(st, "", h, p, s)
    return st


def encoder_decoder(m: Model, p, source, target) -> dict[str, np.ndarray]:
    """Every stage of an encoder-decoder: the encoder reads source [B,S], the decoder target [B,T]."""
    assert m.encoder is not None
    st: dict[str, np.ndarray] = {}
    e, d = m.encoder, m.block
    st["encoder.embed"] = p["embedding"][np.asarray(source)]
    h = _entry(st, "encoder.", st["encoder.embed"], p, e)
    layer = pre_norm_layer if e.norm_order == "pre" else post_norm_layer
    for pre in _layer_prefixes("encoder.", e, plain=False):
        h = layer(st, pre, h, p, e, (m.H, m.H_kv))
    memory = _exit(st, "encoder.", h, p, replace(e, head="none"))
    st["decoder.embed"] = p["embedding"][np.asarray(target)]
    h = _entry(st, "decoder.", st["decoder.embed"], p, d)
    layer = decoder_pre_norm_layer if d.norm_order == "pre" else decoder_post_norm_layer
    for pre in _layer_prefixes("decoder.", d, plain=False):
        h = layer(st, pre, h, memory, p, d, (m.H, m.H_kv))
    _exit(st, "decoder.", h, p, d)
    return st


# -- comparing -------------------------------------------------------------------
def max_stage_diffs(trace, expected: dict[str, np.ndarray]) -> dict[str, float]:
    """Largest |tracer - independent| per stage, over every stage both have; every tracer stage must be covered."""
    missing = [name for name in trace.stages if name not in expected]
    assert not missing, f"the independent model has no stage {missing}"
    out = {}
    for name, stage in trace.stages.items():
        got, want = np.asarray(stage.array, dtype=np.float64), expected[name]
        assert got.shape == want.shape, f"{name}: tracer {got.shape}, independent {want.shape}"
        out[name] = float(np.max(np.abs(got - want))) if got.size else 0.0
    return out


def assert_matches(trace, expected: dict[str, np.ndarray], tol: float = 1e-10) -> None:
    diffs = max_stage_diffs(trace, expected)
    bad = {k: v for k, v in diffs.items() if not v <= tol}
    assert not bad, f"stages differing by more than {tol}: {bad}"
