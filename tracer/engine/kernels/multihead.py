"""Multi-head attention as a layer: q, k and v projected and split into heads (grouped-query, a head width of
its own, q and k RMS-normalised per head, turned by rotary positions), attended head by head (kernels.attention), the
heads merged and projected by W_O; and its backward kernel."""

from __future__ import annotations

import numpy as np

from tracer.engine.kernels import Strict, attention, embeddings, enforce, linear, linear_backward, norms, softmax_inplace
from tracer.errors import ShapeError
from tracer.messages import msg


def split_heads(x: np.ndarray, H: int) -> np.ndarray:  # [B,T,C] -> [B,H,T,d]
    B, T, C = x.shape
    return x.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,C]
    B, H, T, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, H * d)


def mha(xq: np.ndarray, xkv: np.ndarray | None = None, *, w_q: np.ndarray, b_q: np.ndarray, w_k: np.ndarray, b_k: np.ndarray,
        w_v: np.ndarray, b_v: np.ndarray, w_o: np.ndarray, b_o: np.ndarray, H: int, visible: np.ndarray | None = None,
        causal: bool = False, softmax_over_queries: bool = False, rotary_base: float | None = None,
        rotary_pairing: str = "interleaved", H_kv: int | None = None, keep_weights: bool = True,
        strict: Strict = True, rotary_scaling: tuple[object, ...] | None = None,
        rotary_dim: int | None = None, q_norm: np.ndarray | None = None, k_norm: np.ndarray | None = None,
        qk_eps: float | None = None, scale: float | None = None, softcap: float | None = None,
        bias: np.ndarray | None = None, qk_projection: bool = False) -> dict[str, np.ndarray]:  # [B,T,C], [B,S,C] -> [B,T,C]; k, v [B,H_kv,S,d]
    """Multi-head attention (self when xkv is None; cross: keys and values from xkv); every intermediate, by stage suffix.

    ``causal`` masks keys after each query (block by block: no [T,S] mask is made); ``visible`` ([T,S] bool, True where
    a query may read a key) is any other mask, or, with ``causal``, a sliding window's (the blocks still stop at the diagonal).
    ``H_kv`` (grouped-query attention, a divisor of H; None: H) key/value heads, each read by H / H_kv query heads in turn.
    ``keep_weights=False``: no "scores" and "weights" in the result (two [B,H,T,S] arrays never made), unless a
    score or a mixed value is not finite; the output is the same to the last bit.
    ``q_norm``, ``k_norm`` (Qwen3's block.qk_norm): each head's query and key RMS-normalised over its d coordinates
    with these weights [d] and ``qk_eps``, after the split and before the rotary turn; with ``qk_projection`` (OLMo 2's)
    the whole of each projection, q [C_q] and k [C_kv] at each position, with weights [C_q] and [C_kv], before the split.
    ``scale`` (block.attention_scale): the scores are q.k * scale; None: q.k / sqrt(d).
    ``softcap`` (Gemma 2's block.attention_softcap): the scores cap * tanh(scores / cap), after the scale, before the mask.
    ``bias`` [H,T,S] (positions: relative, T5's position bias): added to the scores of every sample, before the mask.
    """
    if xkv is None:
        xkv = xq
    H_kv = H if H_kv is None else H_kv
    if H % H_kv:
        raise ShapeError(msg("H_kv = {H_kv} key/value heads cannot be shared evenly by H = {H} query heads", H_kv=H_kv, H=H))
    own = w_q.shape[1] != xq.shape[-1]  # a head width d of its own (dims.d): q is C_q = H * d wide, k and v C_kv = H_kv * d
    kv_bias = "C_kv" if H_kv != H or own else "C"
    q_wide, k_wide = linear(xq, w_q, b_q, strict, ("b_q", "C_q" if own else "C")), linear(xkv, w_k, b_k, strict, ("b_k", kv_bias))
    if qk_projection and q_norm is not None and k_norm is not None and qk_eps is not None:  # OLMo 2: RMSNorm of the whole projections
        q_wide = norms.head_norm(q_wide, q_norm, qk_eps, strict, "q_norm", "C_q" if own else "C")
        k_wide = norms.head_norm(k_wide, k_norm, qk_eps, strict, "k_norm", kv_bias)
    q = split_heads(q_wide, H)  # [B,H,T,d]
    k = split_heads(k_wide, H_kv)  # [B,H_kv,S,d]
    v = split_heads(linear(xkv, w_v, b_v, strict, ("b_v", kv_bias)), H_kv)
    if not qk_projection and q_norm is not None and k_norm is not None and qk_eps is not None:  # Qwen3: per-head RMSNorm, before the turn
        q, k = norms.head_norm(q, q_norm, qk_eps, strict, "q_norm"), norms.head_norm(k, k_norm, qk_eps, strict, "k_norm")
    if rotary_base is not None:  # positions enter as rotations of q and k, so scores see only offsets
        q = embeddings.rotary(q, rotary_base, rotary_pairing, rotary_dim, strict, rotary_scaling)
        k = embeddings.rotary(k, rotary_base, rotary_pairing, rotary_dim, False, rotary_scaling)
    enforce(strict, attention.check_softmax_axis, q.shape[:3] + k.shape[2:3], softmax_over_queries)
    parts = {"q": q, "k": k, "v": v}
    if softmax_over_queries:  # the violation, computed as NumPy would (only with strict=False)
        if causal and visible is None:
            visible = ~attention.causal_mask(q.shape[2])
        scores = attention.qk_scores(q, k, scale)  # [B,H,T,S]
        if softcap is not None:
            attention.cap_inplace(scores, softcap)
        if bias is not None:
            scores += bias
        weights = np.where(visible, scores, -np.inf) if visible is not None else scores.copy()
        softmax_inplace(weights, axis=-2)
        mixed = weights @ np.repeat(v, H // H_kv, axis=1)  # each value head to the query heads that read it
        parts.update(scores=scores, weights=weights)
        heads = merge_heads(mixed)  # [B,H,T,d] -> [B,T,C]
    else:
        kept_scores, kept_weights, heads = attention.attend(q, k, v, visible, causal, keep_weights, scale, softcap, bias)
        if kept_scores is not None and kept_weights is not None:
            parts.update(scores=kept_scores, weights=kept_weights)
    parts.update(heads=heads, output=linear(heads, w_o, b_o, strict, ("b_o", "C")))
    return parts


# -- backward kernels (tracer grad) ---------------------------------------------------------------------------

def split_heads_backward(dx: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,C]
    return merge_heads(dx)


def merge_heads_backward(dx: np.ndarray, H: int) -> np.ndarray:  # [B,T,C] -> [B,H,T,d]
    return split_heads(dx, H)


def mha_backward(dout: np.ndarray, xq: np.ndarray, xkv: np.ndarray, parts: dict[str, np.ndarray], w: dict[str, np.ndarray],
                 H: int, rotary_base: float | None = None, over_queries: bool = False, rotary_pairing: str = "interleaved",
                 causal: bool = False, visible: np.ndarray | None = None, rotary_scaling: tuple[object, ...] | None = None,
                 rotary_dim: int | None = None, qk_eps: float | None = None, scale: float | None = None,
                 softcap: float | None = None, bias: np.ndarray | None = None, qk_projection: bool = False
                 ) -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """dout [B,T,C], xq [B,T,C], xkv [B,S,C], the forward's q [B,H,T,d], k, v [B,H_kv,S,d], weights, heads -> dxq, dxkv,
    the gradient of every internal (heads, weights, scores, q, k, v) and of every weight (w_q, b_q, ...;
    w_k, w_v [C,C_kv] under grouped-query attention, H_kv read from k).  Self-attention (xkv is xq):
    dxkv is None, its part already added into dxq.  ``causal``: the forward masked with attend's causal blocks.
    Without ``parts["weights"]`` the weights are made again head by head (attention.attention_backward, with attend's mask
    ``visible`` when not causal) and the result has no "weights" and "scores": the same numbers otherwise.
    ``qk_eps`` (block.qk_norm, with w["q_norm"], w["k_norm"] [d]): q and k were RMS-normalised per head before the turn;
    their gradients go back through the norms (q and k before them made again from xq, xkv), and dw has q_norm, k_norm;
    ``qk_projection``: the norms were over the whole projections (q_norm [C_q], k_norm [C_kv]).
    ``scale`` (block.attention_scale): the forward's factor of q.k; None: 1/sqrt(d).
    ``softcap`` (block.attention_softcap): the scores were cap * tanh(s / cap); the weights are made again when not at
    hand ([B,H,T,S], with the mask), the recorded scores' gradient is that of the capped scores, and it reaches q and k
    times 1 - tanh(s / cap)^2.
    ``bias`` [H,T,S] (positions: relative): the forward's position bias; its gradient, every sample's dscores summed,
    is g["bias"]."""
    g: dict[str, np.ndarray] = {}
    dw: dict[str, np.ndarray] = {}
    g["heads"], dw["w_o"], dw["b_o"] = linear_backward(dout, parts["heads"], w["w_o"], w["b_o"])
    dmixed = merge_heads_backward(g["heads"], H)
    if softcap is not None:
        raw = attention.qk_scores(parts["q"], parts["k"], scale)  # before the cap
        slope = 1.0 - np.tanh(raw / softcap) ** 2
        if "weights" not in parts:
            weights = raw.copy()
            attention.cap_inplace(weights, softcap)
            n_q, n_k = weights.shape[-2:]
            blocked = ~visible if visible is not None else (attention.keys_after(n_q, n_k) if causal else None)
            if blocked is not None:
                np.copyto(weights, -np.inf, where=blocked)
            softmax_inplace(weights, axis=-2 if over_queries else -1)
            parts = dict(parts, weights=weights)
        g["scores"], g["v"], g["weights"] = attention.attend_backward(dmixed, parts["weights"], parts["v"], causal, over_queries)
        g["q"], g["k"] = attention.qk_scores_backward(g["scores"] * slope, parts["q"], parts["k"], causal, scale)
    elif "weights" in parts:
        g["scores"], g["v"], g["weights"] = attention.attend_backward(dmixed, parts["weights"], parts["v"], causal, over_queries)
        g["q"], g["k"] = attention.qk_scores_backward(g["scores"], parts["q"], parts["k"], causal, scale)
        if bias is not None:
            g["bias"] = g["scores"].sum(axis=0)
    else:
        assert not over_queries, "a softmax over queries is traced with its weights"
        dbias = None if bias is None else np.zeros(bias.shape, dtype=np.result_type(dmixed, bias))
        g["q"], g["k"], g["v"] = attention.attention_backward(dmixed, parts["q"], parts["k"], parts["v"], visible, causal, scale, bias, dbias)
        if dbias is not None:
            g["bias"] = dbias
    dq, dk = g["q"], g["k"]
    if rotary_base is not None:  # the recorded q and k are the turned ones: turn their gradients back
        dq = embeddings.rotary_backward(dq, rotary_base, rotary_pairing, rotary_dim, rotary_scaling)
        dk = embeddings.rotary_backward(dk, rotary_base, rotary_pairing, rotary_dim, rotary_scaling)
    if qk_eps is not None and qk_projection:  # back through the RMSNorms of the whole projections, [B,T,C_q] and [B,S,C_kv]
        dq_wide, dw["q_norm"] = norms.rms_norm_backward(split_heads_backward(dq), linear(xq, w["w_q"], w["b_q"], False), w["q_norm"], qk_eps)
        dk_wide, dw["k_norm"] = norms.rms_norm_backward(split_heads_backward(dk), linear(xkv, w["w_k"], w["b_k"], False), w["k_norm"], qk_eps)
        dq, dk = split_heads(dq_wide, H), split_heads(dk_wide, parts["k"].shape[1])
    elif qk_eps is not None:  # back through the per-head RMSNorms, from q and k as the projections made them
        H_kv = parts["k"].shape[1]
        q_raw = split_heads(linear(xq, w["w_q"], w["b_q"], False), H)
        k_raw = split_heads(linear(xkv, w["w_k"], w["b_k"], False), H_kv)
        dq, dw["q_norm"] = norms.rms_norm_backward(dq, q_raw, w["q_norm"], qk_eps)
        dk, dw["k_norm"] = norms.rms_norm_backward(dk, k_raw, w["k_norm"], qk_eps)
    dxq, dw["w_q"], dw["b_q"] = linear_backward(split_heads_backward(dq), xq, w["w_q"], w["b_q"])
    dxkv, dw["w_k"], dw["b_k"] = linear_backward(split_heads_backward(dk), xkv, w["w_k"], w["b_k"])
    dxv, dw["w_v"], dw["b_v"] = linear_backward(split_heads_backward(g["v"]), xkv, w["w_v"], w["b_v"])
    dxkv += dxv
    if xkv is xq:
        dxq += dxkv
        return dxq, None, g, dw
    return dxq, dxkv, g, dw
