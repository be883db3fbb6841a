"""The tests' one independent oracle: a whole Transformer written straight from the formulas, to compare tracer with.

Nothing here imports tracer.  Each function is the textbook formula (the reader's guide, Chapter
17, the RoPE and SwiGLU papers), written for plainness rather than speed: attention loops over
samples and heads and applies the mask query by query, rotary positions are complex multiplications,
the sinusoidal table is filled entry by entry.  Layers are written out one function per layout
(pre-norm, post-norm, sandwich, parallel, and the decoder's two with cross-attention), the way the
book writes them, not generated from tracer's step lists.  Stage names follow tracer's documented
names so the tests can compare stage by stage; weights are looked up by their documented YAML paths
(``blocks.1.attn.w_q``, ...).

Three ways in:
- ``decoder_only`` / ``encoder_decoder``: every stage of a model, from a spec's settings (``model_from_yaml``)
  and its weights by YAML path;
- ``pre_norm``, ``post_norm``, ``sandwich``, ``parallel``: one block's output from weights grouped as
  ``{"norm1": {"gamma": ...}, "attn": {...}, "ffn": {...}}`` and a mask matrix (or None);
- ``chapter_block``: the chapter's Example 17.2 as a student writes it ([T,C], no batch axis), with any of the
  typical bugs of ``STUDENT_BUGS`` (what tracer diff's hints must recognise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


# -- the pieces ----------------------------------------------------------------
def layer_norm(x, gamma, beta, eps, axis=-1, ddof=0):
    """Statistics over the last axis (C) of each sample's each position; gamma and beta broadcast as NumPy would.
    Another axis or ddof=1 (dividing by C-1) are the mistakes tracer flags or diagnoses."""
    mean = np.mean(x, axis=axis, keepdims=True)
    var = np.var(x, axis=axis, keepdims=True, ddof=ddof)  # ddof 0: the mean of squared deviations
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def rms_norm(x, gamma, eps):
    return x / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + eps) * gamma


def rms_norm_offset(x, gamma, eps):  # Gemma's RMSNorm: the scale is 1 + gamma (gamma = 0: no rescaling)
    return x / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + eps) * (1.0 + gamma)


def softcap_of(x, cap):  # Gemma 2's soft cap: cap * tanh(x / cap), each value squashed into (-cap, cap)
    return cap * np.tanh(x / cap)


softcap = softcap_of


def embedding_scale(e):  # Gemma's embeddings [..., C], times sqrt(C)
    return e * math.sqrt(e.shape[-1])


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


def causal(T):  # [T,T]: query i sees keys 0..i
    return np.tril(np.ones((T, T), dtype=bool))


def sinusoidal_table(T, C, base):  # PE[p, 2i] = sin(p / base^(2i/C)), PE[p, 2i+1] = cos(p / base^(2i/C))
    pe = np.zeros((T, C))
    for p in range(T):
        for c in range(C):
            i = c // 2
            angle = p / base ** (2 * i / C)
            pe[p, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return pe


def rope(x, base, pairing="interleaved", dim=None):  # [..., T, d]: pair i read as a complex number, turned by t * base^(-2i/d)
    """Pair i is (2i, 2i+1) when interleaved (the RoPE paper, Meta's LLaMA); (i, i + d/2) when half (Hugging Face).
    ``dim`` (partial rotary, GPT-NeoX and Phi): only the first dim coordinates are a rotary vector of their own; the rest pass."""
    if dim is not None and dim != x.shape[-1]:
        return np.concatenate([rope(x[..., :dim], base, pairing), x[..., dim:]], axis=-1)
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


def attention(xq, xkv, w, H, mask, rope_base=None, H_kv=None, pairing="interleaved", softmax_over="keys", mask_after=False,
              rope_dim=None, qk_eps=None, scale=None, softcap=None, bias=None):
    """Multi-head attention, one sample and one head at a time: [B,T,C], [B,S,C] -> dict of stages.

    mask: "causal" (query i reads keys 0..i), {"causal": True, "window": W} (keys i - W + 1 .. i), "none", or a [T,S]
    0/1 matrix (None: none).  H_kv key/value heads
    (grouped-query attention): the key and value heads are repeated, each H / H_kv times in a row,
    so that query head h meets a copy of key head h // (H / H_kv), as Hugging Face's repeat_kv does.
    Two mistakes on request: softmax_over="queries" normalises each key's column over the queries that see it
    instead of each query's row; mask_after=True takes the softmax over every key and zeroes the hidden ones after.
    The head width d is read from W_Q ([C, H*d]): C / H unless the model sets it apart (LLaMA's and Qwen3's head_dim).
    qk_eps (Qwen3): each head's query and key are RMS-normalised over their d coordinates, with w["q_norm"] and
    w["k_norm"] [d], before the rotary turn.
    scale: the scores are q.k * scale (T5: 1); None: q.k / sqrt(d), the textbook's.
    softcap (Gemma 2): the scores cap * tanh(scores / cap), after the scale, before the mask.
    bias [H,T,S] (T5's relative position bias): added to each head's scores before the mask.
    """
    B, T, C = xq.shape
    S = xkv.shape[1]
    d = w["w_q"].shape[1] // H
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
            kh = k_all[b, :, cols] if qk_eps is None else rms_norm(k_all[b, :, cols], w["k_norm"], qk_eps)
            k[b, g] = rope(kh, rope_base, pairing, rope_dim) if rope_base is not None else kh
            v[b, g] = v_all[b, :, cols]
    k_rep = np.concatenate([np.stack([k[:, g]] * (H // H_kv), axis=1) for g in range(H_kv)], axis=1)  # [B,H,S,d]
    v_rep = np.concatenate([np.stack([v[:, g]] * (H // H_kv), axis=1) for g in range(H_kv)], axis=1)
    scores = np.zeros((B, H, T, S))
    weights = np.zeros((B, H, T, S))
    heads = np.zeros((B, T, H * d))
    if isinstance(mask, dict):  # {causal: true, window: W}: query i reads keys i - W + 1 .. i (Mistral's sliding window)
        W = mask.get("window", T + S)
        allowed = np.array([[i - W < j <= i for j in range(S)] for i in range(T)], dtype=bool)
    elif mask is None or isinstance(mask, str):
        allowed = np.tril(np.ones((T, S), dtype=bool)) if mask == "causal" else np.ones((T, S), dtype=bool)
    else:
        allowed = np.asarray(mask, dtype=bool)
    for b in range(B):
        for h in range(H):
            cols = slice(h * d, (h + 1) * d)  # head h reads columns h*d .. (h+1)*d - 1
            qh, kh, vh = q_all[b, :, cols], k_rep[b, h], v_rep[b, h]
            if qk_eps is not None:
                qh = rms_norm(qh, w["q_norm"], qk_eps)
            if rope_base is not None:
                qh = rope(qh, rope_base, pairing, rope_dim)
            s = qh @ kh.T / math.sqrt(d) if scale is None else (qh @ kh.T) * scale
            if softcap is not None:
                s = softcap_of(s, softcap)
            if bias is not None:
                s = s + bias[h]
            wts = np.zeros((T, S))
            if softmax_over == "queries":
                for j in range(S):
                    queries = np.flatnonzero(allowed[:, j])
                    wts[queries, j] = softmax(s[queries, j])
            elif mask_after:
                wts = np.where(allowed, softmax(s), 0.0)
            else:
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
    rotary_dim: int | None = None  # partial rotary: each head's first rotary_dim coordinates turned
    head_bias: bool = False  # logits = h W_head + b_head
    embedding_scale: bool = False  # Gemma: the token embeddings times sqrt(C) before the positions
    qk_norm: bool = False  # Qwen3: each head's q and k RMS-normalised over d (attn.q_norm, attn.k_norm), eps the block's
    attention_scale: float | None = None  # the scores' factor (T5: 1); None: 1/sqrt(d)
    attention_softcap: float | None = None  # Gemma 2: the scores cap * tanh(scores / cap), before the mask
    head_softcap: float | None = None  # Gemma 2: raw_logits, then logits = cap * tanh(raw_logits / cap)
    sliding_layers: tuple | None = None  # Gemma 2: only these layers read mask's window; the others plain causal
    relative: tuple | None = None  # positions: relative: (buckets, max_distance) of T5's relative position bias


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
        rotary_dim=s.get("rotary_dim"), head_bias=s.get("head_bias", False), embedding_scale=s.get("embedding_scale", False),
        qk_norm=s.get("qk_norm", False), attention_scale=s.get("attention_scale"),
        attention_softcap=s.get("attention_softcap"), head_softcap=s.get("head_softcap"),
        sliding_layers=tuple(s["mask"]["sliding_layers"]) if isinstance(s.get("mask"), dict) and "sliding_layers" in s["mask"] else None,
        relative=((s.get("relative") or {}).get("buckets", 32), (s.get("relative") or {}).get("max_distance", 128))
        if s.get("positions") == "relative" else None,
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


def _norm(st, name, x, p, s: Stack, group=None):  # the stage `name`, its weights those of `group` (default: name)
    g = _group(p, group or name)
    if s.norm == "layernorm":
        y = layer_norm(x, g["gamma"], g["beta"], s.eps)
    elif s.norm == "rmsnorm":
        y = rms_norm(x, g["gamma"], s.eps)
    elif s.norm == "rmsnorm_offset":
        y = rms_norm_offset(x, g["gamma"], s.eps)
    else:
        y = batch_norm(x, g["gamma"], g["beta"], s.eps)
    st[name] = y
    return y


def _attend(st, pre, name, xq, xkv, p, H, mask, rope, qk_eps=None, scale=None, softcap=None):
    bias = st.get(_stack_of(pre) + "position_bias") if name == "attention" else None  # T5: the stack's, self-attention only
    """H: (query heads, key/value heads); rope: (base, pairing, rotary width or None), or None without rotary positions;
    qk_eps: the eps of Qwen3's per-head q/k RMSNorm (None: none); scale: the scores' factor (None: 1/sqrt(d))."""
    base, pairing, dim = rope if rope is not None else (None, "interleaved", None)
    r = attention(xq, xkv, _group(p, pre + ("cross_attn" if name == "cross_attention" else "attn")), H[0], mask, base, H[1], pairing,
                  rope_dim=dim, qk_eps=qk_eps, scale=scale, softcap=softcap, bias=bias)
    inner = "cross" if name == "cross_attention" else "attn"
    for key in ("q", "k", "v", "scores", "weights", "heads"):
        st[f"{pre}{inner}.{key}"] = r[key]
    st[pre + name] = r["output"]
    return r["output"]


def ffn_hidden(x, w, activation="relu"):  # activation(x W_1 + b_1); SwiGLU: silu(x W_1 + b_1) * (x W_3 + b_3)
    a = x @ w["w1"] + w["b1"]
    if activation == "swiglu":
        return silu(a) * (x @ w["w3"] + w["b3"])
    if activation == "geglu":  # Gemma's GeGLU: GELU's tanh approximation of the gate, times the up projection
        return gelu_tanh(a) * (x @ w["w3"] + w["b3"])
    return {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh}[activation](a)


def ffn(x, w, activation="relu"):  # FFN(x) = hidden(x) W_2 + b_2
    return ffn_hidden(x, w, activation) @ w["w2"] + w["b2"]


def moe(x, router, experts, top_k, softmax_over="experts"):
    """A mixture of SwiGLU experts, written densely: every expert runs on every position, and each position's output
    is the sum of gate_e * expert_e(x) over all e, the gate 0 for the experts not among its top_k router probabilities
    (picked one by one, the lower expert on a tie) and the others divided by their sum.  ``experts``: a list of
    {w1, w3, w2} (no biases).  Returns logits [..., E], probabilities, gates and the output.
    ``softmax_over="positions"``: the slip of a router softmax over axis -2."""
    logits = x @ router
    probs = softmax(logits, axis=-1 if softmax_over == "experts" else -2)
    gates = np.zeros_like(probs)
    for index in np.ndindex(probs.shape[:-1]):
        row = list(probs[index])
        chosen = []
        for _ in range(top_k):
            best = max((e for e in range(len(row)) if e not in chosen), key=lambda e: (row[e], -e))
            chosen.append(best)
        total = sum(row[e] for e in chosen)
        for e in chosen:
            gates[index + (e,)] = row[e] / total
    outs = np.stack([(silu(x @ w["w1"]) * (x @ w["w3"])) @ w["w2"] for w in experts], axis=-1)  # [..., C, E]
    return {"logits": logits, "weights": probs, "chosen": gates, "output": np.einsum("...ce,...e->...c", outs, gates)}


def _ffn(st, pre, x, p, s: Stack):
    g = _group(p, pre + "ffn")
    hidden = ffn_hidden(x, g, s.activation)
    st[pre + "hidden"] = hidden
    out = hidden @ g["w2"] + g["b2"]
    st[pre + "ffn"] = out
    return out


def _qk(s: Stack):  # the eps of the per-head q/k RMSNorm (Qwen3), or None
    return s.eps if s.qk_norm else None


def _rope(s: Stack):
    return (s.base, s.pairing, s.rotary_dim) if s.positions == "rotary" else None


def pre_norm_layer(st, pre, x, p, s: Stack, H):  # N1 = LN1(X), R = X + MHA(N1), Y = R + FFN(LN2(R))
    n1 = _norm(st, pre + "norm1", x, p, s)
    r = x + _attend(st, pre, "attention", n1, n1, p, H, s.mask, _rope(s), _qk(s), s.attention_scale, s.attention_softcap)
    st[pre + "residual1"] = r
    n2 = _norm(st, pre + "norm2", r, p, s)
    y = r + _ffn(st, pre, n2, p, s)
    st[pre + "output"] = y
    return y


def post_norm_layer(st, pre, x, p, s: Stack, H):  # R = LN1(X + MHA(X)), Y = LN2(R + FFN(R))
    st[pre + "residual1"] = x + _attend(st, pre, "attention", x, x, p, H, s.mask, _rope(s), _qk(s), s.attention_scale, s.attention_softcap)
    r = _norm(st, pre + "norm1", st[pre + "residual1"], p, s)
    st[pre + "residual2"] = r + _ffn(st, pre, r, p, s)
    y = _norm(st, pre + "norm2", st[pre + "residual2"], p, s)
    st[pre + "output"] = y
    return y


def sandwich_layer(st, pre, x, p, s: Stack, H):  # a LayerNorm before and after each sublayer
    n1 = _norm(st, pre + "norm1", x, p, s)
    a = _norm(st, pre + "attn_norm", _attend(st, pre, "attention", n1, n1, p, H, s.mask, _rope(s), _qk(s), s.attention_scale, s.attention_softcap), p, s,
              pre + "norm_a")
    r = x + a
    st[pre + "residual1"] = r
    n2 = _norm(st, pre + "norm2", r, p, s)
    f = _norm(st, pre + "ffn_norm", _ffn(st, pre, n2, p, s), p, s, pre + "norm_f")
    y = r + f
    st[pre + "output"] = y
    return y


def parallel_layer(st, pre, x, p, s: Stack, H):  # attention and the FFN both read norm1; their outputs are summed
    n = _norm(st, pre + "norm1", x, p, s)
    both = _attend(st, pre, "attention", n, n, p, H, s.mask, _rope(s), _qk(s), s.attention_scale, s.attention_softcap) + _ffn(st, pre, n, p, s)
    st[pre + "both"] = both
    y = x + both
    st[pre + "output"] = y
    return y


def parallel_residual_layer(st, pre, x, p, s: Stack, H, shared=False):
    """GPT-NeoX's parallel residual, Y = X + (MHA(LN1(X)) + FFN(LN2(X))); shared (Phi): one norm feeds both branches."""
    n1 = _norm(st, pre + "norm1", x, p, s)
    n2 = n1 if shared else _norm(st, pre + "norm2", x, p, s)  # the second norm reads X, not X + U
    u = _attend(st, pre, "attention", n1, n1, p, H, s.mask, _rope(s), _qk(s), s.attention_scale, s.attention_softcap)
    branches = u + _ffn(st, pre, n2, p, s)
    st[pre + "branches"] = branches
    y = x + branches
    st[pre + "output"] = y
    return y


def parallel_shared_layer(st, pre, x, p, s: Stack, H):
    return parallel_residual_layer(st, pre, x, p, s, H, shared=True)


def sandwich_norm_layer(st, pre, x, p, s: Stack, H):
    """Gemma 2's sandwich (norm_order: sandwich): R = X + LN_U(MHA(LN1(X))), Y = R + LN_F(FFN(LN2(R))), the norms on
    the sublayers' outputs named attention_norm and ffn_norm, as their weights."""
    n1 = _norm(st, pre + "norm1", x, p, s)
    u = _attend(st, pre, "attention", n1, n1, p, H, s.mask, _rope(s), _qk(s), s.attention_scale, s.attention_softcap)
    r = x + _norm(st, pre + "attention_norm", u, p, s)
    st[pre + "residual1"] = r
    n2 = _norm(st, pre + "norm2", r, p, s)
    y = r + _norm(st, pre + "ffn_norm", _ffn(st, pre, n2, p, s), p, s)
    st[pre + "output"] = y
    return y


DECODER_ONLY_LAYERS = {"pre": pre_norm_layer, "post": post_norm_layer, "parallel": parallel_residual_layer,
                       "parallel_shared": parallel_shared_layer, "sandwich": sandwich_norm_layer}


def decoder_pre_norm_layer(st, pre, x, memory, p, s: Stack, H):
    n1 = _norm(st, pre + "norm1", x, p, s)
    r1 = x + _attend(st, pre, "attention", n1, n1, p, H, s.mask, _rope(s), _qk(s), s.attention_scale, s.attention_softcap)
    st[pre + "residual1"] = r1
    n2 = _norm(st, pre + "norm2", r1, p, s)
    r2 = r1 + _attend(st, pre, "cross_attention", n2, memory, p, H, "none", None, scale=s.attention_scale)
    st[pre + "residual2"] = r2
    n3 = _norm(st, pre + "norm3", r2, p, s)
    y = r2 + _ffn(st, pre, n3, p, s)
    st[pre + "output"] = y
    return y


def decoder_post_norm_layer(st, pre, x, memory, p, s: Stack, H):
    st[pre + "residual1"] = x + _attend(st, pre, "attention", x, x, p, H, s.mask, _rope(s), _qk(s), s.attention_scale, s.attention_softcap)
    n1 = _norm(st, pre + "norm1", st[pre + "residual1"], p, s)
    st[pre + "residual2"] = n1 + _attend(st, pre, "cross_attention", n1, memory, p, H, "none", None, scale=s.attention_scale)
    n2 = _norm(st, pre + "norm2", st[pre + "residual2"], p, s)
    st[pre + "residual3"] = n2 + _ffn(st, pre, n2, p, s)
    y = _norm(st, pre + "norm3", st[pre + "residual3"], p, s)
    st[pre + "output"] = y
    return y


def _stack_of(pre):  # 'encoder.blocks.0.' -> 'encoder.'; 'blocks.1.' or '' -> ''
    return pre.split("blocks.")[0]


def t5_bucket(rel, bidirectional, buckets, max_distance):
    """T5's bucket of the distance rel = key - query (Raffel et al. 2020; Mesh TensorFlow's relative_position_bucket), its
    logarithm in float32 as Hugging Face computes it: written out one distance at a time."""
    n, out = buckets, 0
    if bidirectional:
        n //= 2
        out = n if rel > 0 else 0
        rel = abs(rel)
    else:
        rel = max(-rel, 0)
    exact = n // 2
    if rel < exact:
        return out + rel
    f = np.float32
    large = exact + int(f(np.log(f(rel) / f(exact))) / f(math.log(max_distance / exact)) * f(n - exact))
    return out + min(large, n - 1)


def relative_bias(table, n_q, n_k, bidirectional, buckets, max_distance):  # table [K,H] -> [H, n_q, n_k]
    out = np.zeros((table.shape[1], n_q, n_k))
    for i in range(n_q):
        for j in range(n_k):
            out[:, i, j] = table[t5_bucket(j - i, bidirectional, buckets, max_distance)]
    return out


def _entry(st, pre, first, p, s: Stack):
    T = first.shape[1]
    if s.positions == "relative":  # T5: X is the embeddings; the bias is made once for the stack
        st[pre + "position_bias"] = relative_bias(p[pre + "relative_bias"], T, T, s.mask != "causal", *s.relative)
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
        st["logits"] = h @ w + (p["head_bias"] if s.head_bias else 0.0)
        if s.head_softcap is not None:  # Gemma 2: the head's raw logits, then capped
            st["raw_logits"] = st["logits"]
            st["logits"] = softcap_of(st["raw_logits"], s.head_softcap)
        st["probs"] = softmax(st["logits"])
    return h


def decoder_only(m: Model, p, tokens=None, x=None) -> dict[str, np.ndarray]:
    """Every stage of a decoder-only model: tokens [B,T] ids or x [B,T,C]."""
    st: dict[str, np.ndarray] = {}
    s = m.block
    if tokens is not None:
        first = p["embedding"][np.asarray(tokens)]  # row t of E for token t
        st["embed"] = first
        if s.embedding_scale:  # Gemma: E[token] * sqrt(C), X itself unless positions are added to it
            first = embedding_scale(first)
            st["x" if s.positions in ("rotary", "none") else "embed_scaled"] = first
    else:
        first = np.asarray(x, dtype=np.float64)
        st["input"] = first
    h = _entry(st, "", first, p, s)
    layer = DECODER_ONLY_LAYERS[s.norm_order]
    for i, pre in enumerate(_layer_prefixes("", s, plain=s.layers == 1)):
        full = s.sliding_layers is not None and i not in s.sliding_layers  # Gemma 2: this layer reads every key up to t
        h = layer(st, pre, h, p, replace(s, mask="causal") if full else s, (m.H, m.H_kv))
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


# -- one block from grouped weights -----------------------------------------------------
LAYERS = {"pre": pre_norm_layer, "post": post_norm_layer, "sandwich": sandwich_layer, "parallel": parallel_layer}


def block(kind, x, W, H, eps, visible):
    """The output of one block of this layout: x [B,T,C], W grouped weights ({"norm1": {"gamma": ..., "beta": ...},
    "attn": {"w_q": ...}, "ffn": {...}}), H heads, visible a [T,T] mask matrix or None (no mask)."""
    p = {f"{g}.{k}": np.asarray(v, dtype=np.float64) for g, ws in W.items() for k, v in ws.items()}
    st: dict[str, np.ndarray] = {}
    return LAYERS[kind](st, "", np.asarray(x, dtype=np.float64), p, Stack(mask=visible, eps=eps), (H, None))


def pre_norm(x, W, H, eps, visible):  # R = X + MHA(LN1(X)), Y = R + FFN(LN2(R))
    return block("pre", x, W, H, eps, visible)


def post_norm(x, W, H, eps, visible):  # R = LN1(X + MHA(X)), Y = LN2(R + FFN(R))
    return block("post", x, W, H, eps, visible)


def sandwich(x, W, H, eps, visible):
    return block("sandwich", x, W, H, eps, visible)


def parallel(x, W, H, eps, visible):
    return block("parallel", x, W, H, eps, visible)


BLOCKS = {"pre": pre_norm, "post": post_norm, "sandwich": sandwich, "parallel": parallel}


# -- the chapter's block as a student writes it, with the typical bugs -----------------------------
# Example 17.2 (specs/ch17-prenorm.yaml): tokens 0, 1, 2 of E, the positions P, two heads with W_Q = W_K = W_V = I,
# the FFN of section 17.4, LayerNorms with gamma 1 and beta 0, no biases, causal.
E = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
P = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
TOKENS = [0, 1, 2]
W_O = np.array([[1.0, 1.0], [1.0, -1.0]])
W1 = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, 1.0]])
W2 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]])
CHAPTER_H, CHAPTER_EPS = 2, 1e-5
# every weight of the chapter's specs by its YAML path (the pre-norm and the post-norm one share them)
CHAPTER_WEIGHTS = {"embedding": E, "position": P, **{f"attn.w_{n}": np.eye(2) for n in "qkv"}, "attn.w_o": W_O,
                   **{f"attn.b_{n}": np.zeros(2) for n in "qkvo"}, "ffn.w1": W1, "ffn.b1": np.zeros(3), "ffn.w2": W2,
                   "ffn.b2": np.zeros(2), **{f"{n}.{k}": f(2) for n in ("norm1", "norm2") for k, f in (("gamma", np.ones), ("beta", np.zeros))}}

STUDENT_BUGS = ("ddof", "ln_axis", "no_residual", "softmax_queries", "mask_after", "no_w_o")


def chapter(norm_order="pre") -> dict[str, np.ndarray]:
    """Every stage of the chapter's pre-norm or post-norm block ([B,T,C] with B = 1), from the formulas above."""
    model = Model(CHAPTER_H, Stack(norm_order=norm_order, eps=CHAPTER_EPS, positions="learned"))
    return decoder_only(model, CHAPTER_WEIGHTS, tokens=[TOKENS])


def chapter_block(bugs=()) -> dict[str, np.ndarray]:
    """The chapter's pre-norm block [T,C] (no batch axis, as a student writes it), with the bugs named:
    ddof (norm1 divides by C-1), ln_axis (norm1's statistics over T), no_residual (R = U), softmax_queries
    (each key's column normalised over the queries), mask_after (the mask applied after the softmax), no_w_o
    (the heads without W_O)."""
    bugs = set(bugs)
    assert bugs <= set(STUDENT_BUGS), bugs - set(STUDENT_BUGS)
    x = E[TOKENS] + P[: len(TOKENS)]
    n1 = layer_norm(x, 1.0, 0.0, CHAPTER_EPS, axis=0 if "ln_axis" in bugs else -1, ddof=1 if "ddof" in bugs else 0)
    w = {**{f"w_{n}": np.eye(2) for n in "qkv"}, "w_o": np.eye(2) if "no_w_o" in bugs else W_O, **{f"b_{n}": np.zeros(2) for n in "qkvo"}}
    a = attention(n1[None], n1[None], w, CHAPTER_H, "causal", softmax_over="queries" if "softmax_queries" in bugs else "keys",
                  mask_after="mask_after" in bugs)
    u = a["output"][0]
    r = u if "no_residual" in bugs else x + u
    n2 = layer_norm(r, 1.0, 0.0, CHAPTER_EPS)
    hidden = relu(n2 @ W1)
    f = hidden @ W2
    return {"x": x, "norm1": n1, "attn.weights": a["weights"][0], "attn.heads": a["heads"][0], "attention": u, "residual1": r,
            "norm2": n2, "hidden": hidden, "ffn": f, "output": r + f}


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


def bert_embeddings(E, P, tokens, gamma, beta, eps, offset=0, E_type=None, types=None):
    """BERT's input: LayerNorm(E[token] + P[offset + t] + E_type[type]) at every sample and position, one loop each."""
    B, T = len(tokens), len(tokens[0])
    out = np.zeros((B, T, E.shape[1]))
    for b in range(B):
        for t in range(T):
            row = E[tokens[b][t]] + P[offset + t]
            if E_type is not None:
                row = row + E_type[0 if types is None else types[b][t]]
            out[b, t] = layer_norm(row[None], gamma, beta, eps)[0]
    return out
