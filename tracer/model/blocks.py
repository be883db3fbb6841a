"""A model is a flat list of named steps, written out like the book's small_block.

A layer is a short template of steps; pre-norm and post-norm are two templates,
not branches inside one function, and a spec may write its own (``block.steps``).
A stack repeats the template with stage names prefixed ``blocks.0.``,
``blocks.1.``, ...; entry steps (embedding, positions) come before it and the
final norm and output head after it.  Each step names the stage it records,
the op that computes it, the stages it reads, the weight group it uses and,
where it matters, its axis.  This module also knows each op's output shape, so
a spec's shapes are checked before anything runs.  Nothing here imports NumPy.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tracer.messages import Message, msg
from tracer.model.activations import DEFAULT_ACTIVATION, activation_of, is_gated, spec_activations
from tracer.model.ops import GROUPED_KV_KEYS, HEAD_WIDTH_KEYS, MOE_EXPERT_KEYS, MOE_ROUTER_KEYS, OPS, QK_NORM_KEYS, WEIGHT_GROUPS, internal_prefix
from tracer.model.shapes import Shape


class Step(NamedTuple):  # a NamedTuple, not a dataclass: cheaper to create at every start; variants via _replace
    name: str  # the stage this step records
    op: str  # an op of OPS
    inputs: tuple[str, ...]  # stage names read
    weights: str | None = None  # weight group: norm1, attn, ffn, blocks.0.attn, embedding, ...
    meaning: str = ""  # what the stage is, as Table 17.1 words it: a Message (built in), or a spec's own words
    axis: str | None = None  # layer_norm: statistics axis; select: axis sliced; mha: softmax over keys | queries
    start: int | None = None  # select: first index kept
    stop: int | None = None  # select: one past the last index kept
    out: str | None = None  # linear: output width letter (C or F)
    mask: str | None = None  # mha: causal | none | explicit
    activation: str | None = None  # ffn, ffn_hidden: an activation's name (tracer/model/activations.py)
    base: float | None = None  # sinusoidal: the base; mha: the rotary base (None: no rotary positions)
    stream: str | None = None  # embed, input: which input the step reads (tokens | x | source | target)
    pairing: str | None = None  # mha with rotary positions: half pairs (i, i + d/2); None: interleaved (2i, 2i+1)
    window: int | None = None  # mha with a causal mask: a sliding window of W keys (tracer/model/masks.py); None: none
    scaling: tuple[object, ...] | None = None  # mha with rotary positions: a rope type's scaled speeds (tracer/model/rope.py)
    rotary_dim: int | None = None  # mha with rotary positions: only each head's first rotary_dim coordinates turned; None: all d
    qk_norm: bool | str | None = None  # mha: q and k RMS-normalised per head over d (Qwen3's q_norm, k_norm); "offset": scaled by
    # (1 + w), the block's norm being rmsnorm_offset (Gemma 3's); None: not
    qk_projection: bool | None = None  # mha with qk_norm: over the whole of q's and k's projections, not per head (OLMo 2's)
    scale: float | None = None  # mha, cross_mha: the scores are QK^T * scale (block.attention_scale); None: QK^T / sqrt(d);
    # scale, divide: the number the stage multiplies or divides by (Granite's multipliers, block.logits_divisor, Cohere's logit_scale)
    softcap: float | None = None  # mha: scores soft-capped, cap * tanh(scores / cap), after the scale and before the mask
    # (Gemma 2's attn_logit_softcapping); softcap: the cap of its tanh (final_logit_softcapping); None: not capped
    relative: tuple[int, int, bool] | None = None  # relative_bias: (buckets, max_distance, bidirectional), T5's bucketing
    eps: float | None = None  # a norm's epsilon, and an attention's per-head q and k norms' (qk_norm): the stack's block.eps
    pool: str | None = None  # pool: the position each sample is read at, first (BERT's [CLS]) | last (the last token not pad_token)
    pad: int | None = None  # pool last: the padding token id, whose positions are passed over (None: the last position)

    def formula(self) -> str:
        args = ", ".join(self.inputs)
        extra = [f"weights={self.weights}"] if self.weights else []
        for key, value in self.own_params().items():
            extra.append(f"{key}={value}")
        return f"{self.name} = {self.op}({', '.join([args] + extra) if args else ', '.join(extra)})"

    def params(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for key in STEP_SETTINGS:
            value = getattr(self, key)
            if key == "activation" and self.op == "ffn_out":
                continue  # kept only so the step shares its weight group's keys; the second half has no activation
            if value is not None:
                out[key] = value
        return out

    def own_params(self) -> dict[str, object]:
        """The settings the step list shows and a saved trace keeps: params() but those its stack gives every step of
        its kind alike (STACK_GIVEN: eps, shown and saved as the stack's own setting, block.eps)."""
        return {key: value for key, value in self.params().items() if key not in STACK_GIVEN}

    def epsilon(self) -> float:
        """The epsilon of the step's norm (a norm's, or an attention's per-head q and k norms'): its stack's block.eps,
        which configure gives every such step."""
        if self.eps is None:
            raise ValueError(f"step {self.name} ({self.op}) has no eps")
        return self.eps


# A step's own settings: every field but what names it (name, meaning) and what it reads and computes with (op,
# inputs, weights).  Derived, not listed, so that a new field is a setting everywhere one is read (tracer diff).
STEP_SETTINGS: tuple[str, ...] = tuple(f for f in Step._fields if f not in ("name", "meaning", "op", "inputs", "weights"))
# The step settings a stack gives every step of their kind alike, from a setting of its own (a norm's eps is block.eps):
# tracer diff compares them as the stack's setting, and the step list shows and saves them there.
STACK_GIVEN: tuple[str, ...] = ("eps",)

NORMS = {"layernorm": "layer_norm", "rmsnorm": "rms_norm", "batchnorm": "batch_norm",
         "rmsnorm_offset": "rms_norm_offset"}  # rmsnorm_offset: Gemma's RMSNorm, x / rms * (1 + gamma)
NORM_OPS = tuple(NORMS.values())  # the ops that normalise (each with its eps)


def group_keys(kind: str, grouped: bool, experts: int = 0, head_width: bool = False,
               qk_norm: bool = False, qk_projection: bool = False) -> dict[str, tuple[str, ...]]:
    """A weight group's keys and their axes; ``grouped``: the model has fewer key/value heads than query heads;
    ``experts``: a mixture of experts' E (its group holds the router and w1_e, w3_e, w2_e for each expert e);
    ``head_width``: the heads have a width d of their own (dims.d): w_q [C,C_q], w_k, w_v [C,C_kv], w_o [C_q,C];
    ``qk_norm``: the attention normalises q and k per head (block.qk_norm): q_norm, k_norm [d]; ``qk_projection``: over their
    whole projections (block.qk_norm: projection, OLMo 2's): q_norm [C_q], k_norm [C_kv] (C where the width is C's)."""
    if kind == "moe":
        return {**MOE_ROUTER_KEYS, **{f"{k}_{e}": axes for e in range(experts) for k, axes in MOE_EXPERT_KEYS.items()}}
    keys = WEIGHT_GROUPS[kind]
    if kind == "attn" and head_width:
        keys = {**keys, **HEAD_WIDTH_KEYS}
    elif kind == "attn" and grouped:
        keys = {**keys, **GROUPED_KV_KEYS}
    if kind == "attn" and qk_norm and qk_projection:
        return {**keys, "q_norm": ("C_q",) if head_width else ("C",), "k_norm": ("C_kv",) if grouped or head_width else ("C",)}
    return {**keys, **QK_NORM_KEYS} if kind == "attn" and qk_norm else keys


def group_kind(step: Step) -> str | None:
    kind = OPS[step.op].weights
    if kind == "ffn" and is_gated(step.activation):
        return "ffn_gated"
    return kind


# -- layer templates -------------------------------------------------------
# A meaning is a Message whose norm and activation are fields: configure gives them anew (RMS
# normalisation, RMS_; GELU), and the Chinese is the template's, filled with the same fields.
NORMALISATION = msg("normalisation")
ACTIVATION = msg("the activation")
NORM_WORDS: dict[str, tuple[Message, str]] = {  # a preset's norm: its word and the letters that replace LN_
    "rmsnorm": (msg("RMS normalisation"), "RMS_"),
    "batchnorm": (msg("batch normalisation (over B and T)"), "BN_"),
    "rmsnorm_offset": (msg("RMS normalisation with (1 + gamma)"), "RMS_"),
}

# Example 17.2 / section 17.5: N1 = LN1(X), U = MHA(N1), R = X + U, N2 = LN2(R), Y = R + FFN(N2)
PRE_NORM: tuple[Step, ...] = (
    Step("norm1", "layer_norm", ("x",), "norm1", msg("first {norm}, N_1 = {LN}1(X)", norm=NORMALISATION, LN="LN_")),
    Step("attention", "mha", ("norm1",), "attn", msg("attention output, U = MHA(N_1)")),
    Step("residual1", "add", ("x", "attention"), None, msg("first residual add, R = X + U")),
    Step("norm2", "layer_norm", ("residual1",), "norm2", msg("second {norm}, N_2 = {LN}2(R)", norm=NORMALISATION, LN="LN_")),
    Step("hidden", "ffn_hidden", ("norm2",), "ffn", msg("FFN after {act}, {actf}(N_2 W_1 + b_1)", act=ACTIVATION, actf="act")),
    Step("ffn", "ffn_out", ("hidden",), "ffn", msg("FFN output, hidden W_2 + b_2")),
    Step("output", "add", ("residual1", "ffn"), None, msg("block output, Y = R + FFN(N_2)")),
)

# Section 17.6: R_post = LN1(X + MHA(X)), Y_post = LN2(R_post + FFN(R_post))
POST_NORM: tuple[Step, ...] = (
    Step("attention", "mha", ("x",), "attn", msg("attention output, U = MHA(X)")),
    Step("residual1", "add", ("x", "attention"), None, msg("first residual add, X + U")),
    Step("norm1", "layer_norm", ("residual1",), "norm1", msg("first {norm}, R_post = {LN}1(X + U)", norm=NORMALISATION, LN="LN_")),
    Step("hidden", "ffn_hidden", ("norm1",), "ffn", msg("FFN after {act}, {actf}(R_post W_1 + b_1)", act=ACTIVATION, actf="act")),
    Step("ffn", "ffn_out", ("hidden",), "ffn", msg("FFN output, hidden W_2 + b_2")),
    Step("residual2", "add", ("norm1", "ffn"), None, msg("second residual add, R_post + FFN(R_post)")),
    Step("norm2", "layer_norm", ("residual2",), "norm2", msg("second {norm}, {LN}2(R_post + FFN)", norm=NORMALISATION, LN="LN_")),
    Step("output", "identity", ("norm2",), None, msg("block output, Y_post")),
)

# Guide section 9: a decoder layer of an encoder-decoder has masked self-attention, cross-attention
# (queries from the decoder, keys and values from the encoder output "memory") and the FFN.
DECODER_PRE_NORM: tuple[Step, ...] = (
    Step("norm1", "layer_norm", ("x",), "norm1", msg("first {norm}, {LN}1(X)", norm=NORMALISATION, LN="LN_")),
    Step("attention", "mha", ("norm1",), "attn", msg("masked self-attention")),
    Step("residual1", "add", ("x", "attention"), None, msg("first residual add")),
    Step("norm2", "layer_norm", ("residual1",), "norm2", msg("second {norm}", norm=NORMALISATION)),
    Step("cross_attention", "cross_mha", ("norm2", "memory"), "cross_attn", msg("cross-attention: decoder queries, encoder keys and values")),
    Step("residual2", "add", ("residual1", "cross_attention"), None, msg("second residual add")),
    Step("norm3", "layer_norm", ("residual2",), "norm3", msg("third {norm}", norm=NORMALISATION)),
    Step("hidden", "ffn_hidden", ("norm3",), "ffn", msg("FFN after {act}", act=ACTIVATION)),
    Step("ffn", "ffn_out", ("hidden",), "ffn", msg("FFN output")),
    Step("output", "add", ("residual2", "ffn"), None, msg("decoder layer output")),
)

DECODER_POST_NORM: tuple[Step, ...] = (
    Step("attention", "mha", ("x",), "attn", msg("masked self-attention")),
    Step("residual1", "add", ("x", "attention"), None, msg("first residual add")),
    Step("norm1", "layer_norm", ("residual1",), "norm1", msg("first {norm}, {LN}1(X + U)", norm=NORMALISATION, LN="LN_")),
    Step("cross_attention", "cross_mha", ("norm1", "memory"), "cross_attn", msg("cross-attention: decoder queries, encoder keys and values")),
    Step("residual2", "add", ("norm1", "cross_attention"), None, msg("second residual add")),
    Step("norm2", "layer_norm", ("residual2",), "norm2", msg("second {norm}", norm=NORMALISATION)),
    Step("hidden", "ffn_hidden", ("norm2",), "ffn", msg("FFN after {act}", act=ACTIVATION)),
    Step("ffn", "ffn_out", ("hidden",), "ffn", msg("FFN output")),
    Step("residual3", "add", ("norm2", "ffn"), None, msg("third residual add")),
    Step("norm3", "layer_norm", ("residual3",), "norm3", msg("third {norm}", norm=NORMALISATION)),
    Step("output", "identity", ("norm3",), None, msg("decoder layer output")),
)

# GPT-NeoX's parallel residual (use_parallel_residual): attention and the FFN both read X, each through its own norm,
# and both are added to X: Y = X + (MHA(LN1(X)) + FFN(LN2(X))), the two branches summed first, as Hugging Face adds them
PARALLEL: tuple[Step, ...] = (
    Step("norm1", "layer_norm", ("x",), "norm1", msg("first {norm}, N_1 = {LN}1(X)", norm=NORMALISATION, LN="LN_")),
    Step("attention", "mha", ("norm1",), "attn", msg("attention output, U = MHA(N_1)")),
    Step("norm2", "layer_norm", ("x",), "norm2", msg("second {norm} of X itself (parallel), N_2 = {LN}2(X)", norm=NORMALISATION, LN="LN_")),
    Step("hidden", "ffn_hidden", ("norm2",), "ffn", msg("FFN after {act}, {actf}(N_2 W_1 + b_1)", act=ACTIVATION, actf="act")),
    Step("ffn", "ffn_out", ("hidden",), "ffn", msg("FFN output, hidden W_2 + b_2")),
    Step("branches", "add", ("attention", "ffn"), None, msg("the two parallel branches summed, U + FFN(N_2)")),
    Step("output", "add", ("x", "branches"), None, msg("block output, Y = X + U + FFN(N_2) (parallel residual)")),
)

# Phi's parallel block: one norm feeds both branches, Y = X + (MHA(LN(X)) + FFN(LN(X)))
PARALLEL_SHARED: tuple[Step, ...] = (
    Step("norm1", "layer_norm", ("x",), "norm1", msg("the one {norm} both branches read, N = {LN}(X)", norm=NORMALISATION, LN="LN_")),
    Step("attention", "mha", ("norm1",), "attn", msg("attention output, U = MHA(N)")),
    Step("hidden", "ffn_hidden", ("norm1",), "ffn", msg("FFN after {act}, {actf}(N W_1 + b_1)", act=ACTIVATION, actf="act")),
    Step("ffn", "ffn_out", ("hidden",), "ffn", msg("FFN output, hidden W_2 + b_2")),
    Step("branches", "add", ("attention", "ffn"), None, msg("the two parallel branches summed, U + FFN(N)")),
    Step("output", "add", ("x", "branches"), None, msg("block output, Y = X + U + FFN(N) (parallel residual, one norm)")),
)

PARALLEL_ORDERS = ("parallel", "parallel_shared")  # decoder-only layers whose attention and FFN both read X

# A mixture of experts in place of the FFN (block ffn: {experts: E, top_k: k}, Mixtral's block): the router scores
# each expert, a softmax over the experts makes them probabilities, the k most probable are kept (renormalised), and
# the output is their SwiGLU FFNs weighted by those gates.
MOE_STEPS: tuple[Step, ...] = (
    Step("moe.router.logits", "router", ("norm2",), "moe", msg("router logits, one per expert, N_2 W_g")),
    Step("moe.router.weights", "router_probs", ("moe.router.logits",), None, msg("router probabilities, softmax over the experts")),
    Step("moe.chosen", "top_k", ("moe.router.weights",), None, msg("gates of the k chosen experts, renormalised (0: not chosen)")),
    Step("moe", "expert_mix", ("norm2", "moe.chosen"), "moe", msg("mixture of experts: the chosen experts' SwiGLU FFNs, weighted by their gates")),
    Step("output", "add", ("residual1", "moe"), None, msg("block output, Y = R + MoE(N_2)")),
)
PRE_NORM_MOE: tuple[Step, ...] = PRE_NORM[:4] + MOE_STEPS

# Gemma 2's sandwich: Pre-Norm with a second norm on each sublayer's output, before its residual add:
# N_1 = LN1(X), U = MHA(N_1), R = X + LN_U(U), N_2 = LN2(R), Y = R + LN_F(FFN(N_2)) (weights norm1, attn_norm, norm2, ffn_norm:
# Hugging Face's input_layernorm, post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm)
SANDWICH: tuple[Step, ...] = (
    PRE_NORM[0], PRE_NORM[1],
    Step("attention_norm", "layer_norm", ("attention",), "attention_norm",
         msg("the attention output's own {norm}, N_U = {LN}U(U), before the residual add (sandwich)", norm=NORMALISATION, LN="LN_")),
    Step("residual1", "add", ("x", "attention_norm"), None, msg("first residual add of the normalised attention output, R = X + N_U")),
    Step("norm2", "layer_norm", ("residual1",), "norm2", msg("second {norm}, N_2 = {LN}2(R)", norm=NORMALISATION, LN="LN_")),
    PRE_NORM[4], PRE_NORM[5],
    Step("ffn_norm", "layer_norm", ("ffn",), "ffn_norm",
         msg("the FFN output's own {norm}, N_F = {LN}F(FFN(N_2)), before the residual add (sandwich)", norm=NORMALISATION, LN="LN_")),
    Step("output", "add", ("residual1", "ffn_norm"), None, msg("block output of the normalised FFN output, Y = R + N_F")),
)

# OLMo 2's order: no norm before a sublayer, one on its output before the residual add (Gemma 2's sandwich without
# norm1 and norm2): U = MHA(X), R = X + LN_U(U), Y = R + LN_F(FFN(R)) (weights attention_norm, ffn_norm: Hugging Face's
# post_attention_layernorm, post_feedforward_layernorm)
POST_SUBLAYER: tuple[Step, ...] = (
    Step("attention", "mha", ("x",), "attn", msg("attention output, U = MHA(X) (no norm before it)")),
    Step("attention_norm", "layer_norm", ("attention",), "attention_norm",
         msg("the attention output's {norm}, N_U = {LN}U(U), before the residual add (post-sublayer)", norm=NORMALISATION, LN="LN_")),
    SANDWICH[3],
    Step("hidden", "ffn_hidden", ("residual1",), "ffn", msg("FFN after {act}, {actf}(R W_1 + b_1) (no norm before it)", act=ACTIVATION, actf="act")),
    PRE_NORM[5],
    Step("ffn_norm", "layer_norm", ("ffn",), "ffn_norm",
         msg("the FFN output's {norm}, N_F = {LN}F(FFN(R)), before the residual add (post-sublayer)", norm=NORMALISATION, LN="LN_")),
    SANDWICH[8],
)

NORM_ORDERS: dict[str, tuple[Step, ...]] = {"pre": PRE_NORM, "post": POST_NORM, "parallel": PARALLEL, "parallel_shared": PARALLEL_SHARED,
                                            "sandwich": SANDWICH, "post_sublayer": POST_SUBLAYER}
DECODER_NORM_ORDERS: dict[str, tuple[Step, ...]] = {"pre": DECODER_PRE_NORM, "post": DECODER_POST_NORM}


class StackSettings(NamedTuple):  # variants via _replace
    """What a stack's steps take from the spec's block (or encoder/decoder) section."""

    norm: str = "layernorm"  # layernorm | rmsnorm | batchnorm
    activation: str = DEFAULT_ACTIVATION
    mask: str = "causal"  # causal | none | explicit
    positions: str = "learned"  # learned | sinusoidal | rotary | none
    position_base: float = 10000.0
    layers: int = 1
    final_norm: bool = False
    rotary_pairing: str = "interleaved"  # interleaved | half
    window: int | None = None  # with mask causal: each query reads itself and the window - 1 keys before it
    embedding_norm: bool = False  # BERT: X = LayerNorm(E + P (+ E_type)), weights embed_norm
    token_types: bool = False  # BERT: token-type vectors E_type[input.token_types] added to the embeddings
    position_offset: int = 0  # RoBERTa: positions read rows o .. o+T-1 of P (o = padding_idx + 1)
    rope_scaling: tuple[object, ...] | None = None  # rotary: ("linear", F) | ("llama3", F, low, high, N) (tracer/model/rope.py)
    rotary_dim: int | None = None  # partial rotary: the first rotary_dim coordinates of each head turned (None: all d)
    embedding_scale: bool = False  # Gemma: the token embeddings times sqrt(C), a stage of their own (embed_scale)
    qk_norm: bool = False  # Qwen3: each attention's q and k RMS-normalised per head (weights attn.q_norm, attn.k_norm [d])
    qk_projection: bool = False  # OLMo 2: with qk_norm, over the whole projections (q_norm [C_q], k_norm [C_kv])
    attention_scale: float | None = None  # the scores' factor, QK^T * s (T5: 1; Gemma 2: query_pre_attn_scalar ** -0.5); None: 1/sqrt(d)
    attention_softcap: float | None = None  # Gemma 2: every attention's scores cap * tanh(scores / cap), before the mask
    head_softcap: float | None = None  # Gemma 2: the logits cap * tanh(logits / cap) (a softcap stage after the head)
    sliding_layers: tuple[int, ...] | None = None  # with a window: only these layers' attention is windowed (Gemma 2's
    # layer_types); the others read every key up to the query (plain causal).  None: every layer
    relative: tuple[int, int] | None = None  # positions: relative: (buckets, max_distance) of T5's relative position bias
    eps: float = 1e-5  # every norm's epsilon (and block.qk_norm's per-head norms')
    embedding_multiplier: float | None = None  # Granite: the token embeddings times m, a stage of their own (op scale)
    residual_multiplier: float | None = None  # Granite: each sublayer's output times m before its residual add (stages attention_scaled, ffn_scaled)
    logits_divisor: float | None = None  # Granite: logits = raw_logits / s (logits_scaling), a stage after the head (op divide)


def configure(template: tuple[Step, ...], s: StackSettings, preset: bool) -> tuple[Step, ...]:
    """Give a layer template the stack's norm (and its eps), activation, mask and rotary settings."""
    out = []
    for step in template:
        changes: dict[str, Any] = {}
        if preset and step.op == "layer_norm" and s.norm != "layernorm":
            changes["op"] = NORMS[s.norm]
            word, letters = NORM_WORDS[s.norm]
            meaning = step.meaning
            if isinstance(meaning, Message) and "norm" in meaning.fields:
                changes["meaning"] = meaning.refill(norm=word, **({"LN": letters} if "LN" in meaning.fields else {}))
        if changes.get("op", step.op) in NORM_OPS and step.eps is None:
            changes["eps"] = s.eps
        if step.op in ("ffn", "ffn_hidden", "ffn_out") and step.activation is None:
            changes["activation"] = s.activation
            name = activation_of(s.activation).label
            meaning = step.meaning
            if isinstance(meaning, Message):
                named = {k: name for k in ("act", "actf") if k in meaning.fields}
                changes["meaning"] = meaning.refill(**named) if named else meaning
            else:  # a spec's own words, as before
                changes["meaning"] = meaning.replace("after the activation", f"after {name}").replace("act(", f"{name}(")
        if step.op == "mha":
            if step.mask is None:
                changes["mask"] = s.mask
                if s.window is not None:
                    changes["window"] = s.window
            if s.positions == "rotary" and step.base is None:
                changes["base"] = s.position_base
                if s.rotary_pairing != "interleaved":  # the default stays unnamed: step lists read as before
                    changes["pairing"] = s.rotary_pairing
                if s.rope_scaling is not None:
                    changes["scaling"] = s.rope_scaling
                if s.rotary_dim is not None:
                    changes["rotary_dim"] = s.rotary_dim
            if s.qk_norm and step.qk_norm is None:
                changes["qk_norm"] = QK_OFFSET if s.norm == "rmsnorm_offset" else True
                if s.qk_projection:
                    changes["qk_projection"] = True
                changes["eps"] = s.eps  # the per-head norms of q and k
            if s.attention_softcap is not None and step.softcap is None:
                changes["softcap"] = s.attention_softcap
        if step.op == "cross_mha":
            changes["mask"] = "none"
        if step.op in ("mha", "cross_mha") and s.attention_scale is not None and step.scale is None:
            changes["scale"] = s.attention_scale
        if step.op == "mha" and s.positions == "relative" and POSITION_BIAS not in step.inputs:
            changes["inputs"] = step.inputs + (POSITION_BIAS,)  # T5: the stack's one position bias, added to the scores
        if step.op == "router_probs" and step.axis is None:
            changes["axis"] = "E"  # the contract: a softmax over the experts
        out.append(step._replace(**changes) if changes else step)
    return scaled_residuals(tuple(out), s.residual_multiplier) if preset and s.residual_multiplier is not None else tuple(out)


BRANCHES = ("attention", "ffn")  # the sublayer outputs a residual add reads (the pre-norm block's)
SCALED_ADDS = {"attention": msg("first residual add of the scaled attention output, R = X + m U"),
               "ffn": msg("block output, Y = R + m FFN(N_2)")}


def scaled_residuals(layer: tuple[Step, ...], m: float) -> tuple[Step, ...]:
    """Granite's residual_multiplier: each sublayer's output times m, a stage of its own (attention_scaled, ffn_scaled),
    before the residual add that reads it: R = X + m * MHA(N_1), Y = R + m * FFN(N_2)."""
    out: list[Step] = []
    for step in layer:
        if step.op == "add" and any(i in BRANCHES for i in step.inputs):
            branch = next(i for i in step.inputs if i in BRANCHES)
            out.append(Step(f"{branch}_scaled", "scale", (branch,), None,
                            msg("{branch} times the residual multiplier m = {m}, before the residual add", branch=branch, m=f"{m:g}"), scale=m))
            step = step._replace(inputs=tuple(f"{branch}_scaled" if i == branch else i for i in step.inputs), meaning=SCALED_ADDS[branch])
        out.append(step)
    return tuple(out)


QK_OFFSET = "offset"  # an attention's qk_norm under norm: rmsnorm_offset: the per-head norms scale by (1 + w), as Gemma 3's do
UNTURNED: dict[str, Any] = {"base": None, "pairing": None, "scaling": None, "rotary_dim": None}  # an attention without rotary positions


def expand(template: tuple[Step, ...], prefix: str, layers: int, first_input: str, memory: str | None,
           plain: bool, sliding: tuple[int, ...] | None = None, rotary: tuple[int, ...] | None = None,
           local_base: float | None = None) -> tuple[list[Step], str]:
    """Repeat a layer template ``layers`` times; return the steps and the last stage's name.

    With ``plain`` (one layer of a decoder-only model, the chapter's case) names are not prefixed.  ``sliding``
    (mask.sliding_layers, Gemma 2's alternating layers): only these layers' attention keeps its sliding window,
    the others' is plain causal.  ``rotary`` (block.rotary_layers, SmolLM3's no_rope_layers): only these layers'
    attention turns q and k by the rotary positions, the others' has no positions.  ``local_base`` (block.local_position_base,
    Gemma 3's rope_local_base_freq): the sliding layers' attention turns at that base, unscaled.
    """
    steps: list[Step] = []
    layer_input = first_input
    for i in range(layers):
        lp = prefix if plain else f"{prefix}blocks.{i}."

        def rename(stage: str, lp: str = lp, layer_input: str = layer_input) -> str:
            if stage == "x":
                return layer_input
            if stage == POSITION_BIAS:  # the stack's, made once before its layers (positions: relative)
                return prefix + POSITION_BIAS
            if stage == "memory":
                assert memory is not None
                return memory
            return lp + stage

        for step in template:
            full = sliding is not None and i not in sliding and step.op == "mha" and step.window is not None
            unturned = rotary is not None and i not in rotary and step.op == "mha" and step.base is not None
            local = local_base is not None and step.op == "mha" and step.base is not None and step.window is not None and not full
            steps.append(step._replace(
                name=lp + step.name, inputs=tuple(rename(s) for s in step.inputs),
                weights=(lp + step.weights) if step.weights else None, window=None if full else step.window,
                **(UNTURNED if unturned else {"base": local_base, "scaling": None} if local else {}),
            ))
        layer_input = steps[-1].name
    return steps, layer_input


def entry(prefix: str, stream: str, s: StackSettings, uses_tokens: bool, projected: bool = False) -> tuple[list[Step], str]:
    """Steps before the stack: embedding (or the given input), positions, X.  ``projected``: the embedding is C_e wide,
    projected to C before the positions are added (OPT's project_in)."""
    steps = []
    if uses_tokens:
        first = Step(prefix + "embed", "embed", (), "embedding", OPS["embed"].meaning, stream=stream)
    else:
        first = Step(prefix + "input", "input", (), None, OPS["input"].meaning, stream=stream)
    steps.append(first)
    if uses_tokens and projected:
        first = project_in(prefix, first.name)
        steps.append(first)
    if (s.embedding_scale or s.embedding_multiplier is not None) and uses_tokens:
        return scaled_entry(prefix, first, steps, s)
    if s.positions == "relative":
        return relative_entry(prefix, first, steps, s)
    if s.positions == "learned" and s.position_offset:
        steps.append(Step(prefix + "position", "position_offset", (), "position", OPS["position_offset"].meaning, start=s.position_offset))
    elif s.positions == "learned":
        steps.append(Step(prefix + "position", "position_table", (), "position", OPS["position_table"].meaning))
    elif s.positions == "sinusoidal":
        steps.append(Step(prefix + "position", "sinusoidal", (), None, msg("sinusoidal positions, base {base}", base=f"{s.position_base:g}"),
                          base=s.position_base))
    if s.embedding_norm or s.token_types:
        return bert_entry(prefix, first, steps, s)
    if s.positions in ("learned", "sinusoidal"):
        steps.append(Step(prefix + "x", "add_position", (first.name, prefix + "position"), None, OPS["add_position"].meaning))
    else:
        x = msg("X (rotary positions act inside attention)") if s.positions == "rotary" else msg("X (no positions)")
        steps.append(Step(prefix + "x", "identity", (first.name,), None, x))
    return steps, prefix + "x"


def scaled_entry(prefix: str, first: Step, steps: list[Step], s: StackSettings) -> tuple[list[Step], str]:
    """Gemma's embeddings: E[token] * sqrt(C), a stage of its own (X itself when the positions act inside attention);
    Granite's: E[token] * embedding_multiplier."""
    m = s.embedding_multiplier
    if m is not None and s.positions in ("rotary", "none"):
        x = (msg("X = E[token] * m, the embeddings times the embedding multiplier m = {m} (rotary positions act inside attention)", m=f"{m:g}")
             if s.positions == "rotary" else msg("X = E[token] * m, the embeddings times the embedding multiplier m = {m} (no positions)", m=f"{m:g}"))
        steps.append(Step(prefix + "x", "scale", (first.name,), None, x, scale=m))
        return steps, prefix + "x"
    if m is not None:
        scaled = Step(prefix + "embed_scaled", "scale", (first.name,), None, msg("token embeddings times the embedding multiplier m = {m}", m=f"{m:g}"),
                      scale=m)
        steps.append(scaled)
        return entry_after(prefix, scaled, steps, s._replace(embedding_multiplier=None))
    if s.positions in ("rotary", "none"):
        x = (msg("X = E[token] * sqrt(C), the scaled embeddings (rotary positions act inside attention)") if s.positions == "rotary"
             else msg("X = E[token] * sqrt(C), the scaled embeddings (no positions)"))
        steps.append(Step(prefix + "x", "embed_scale", (first.name,), None, x))
        return steps, prefix + "x"
    scaled = Step(prefix + "embed_scaled", "embed_scale", (first.name,), None, OPS["embed_scale"].meaning)
    steps.append(scaled)
    return entry_after(prefix, scaled, steps, s._replace(embedding_scale=False))


def entry_after(prefix: str, first: Step, steps: list[Step], s: StackSettings) -> tuple[list[Step], str]:
    """The entry steps after the token vectors ``first`` (already in ``steps``): positions, then X."""
    if s.positions == "learned" and s.position_offset:
        steps.append(Step(prefix + "position", "position_offset", (), "position", OPS["position_offset"].meaning, start=s.position_offset))
    elif s.positions == "learned":
        steps.append(Step(prefix + "position", "position_table", (), "position", OPS["position_table"].meaning))
    elif s.positions == "sinusoidal":
        steps.append(Step(prefix + "position", "sinusoidal", (), None, msg("sinusoidal positions, base {base}", base=f"{s.position_base:g}"),
                          base=s.position_base))
    if s.embedding_norm or s.token_types:
        return bert_entry(prefix, first, steps, s)
    steps.append(Step(prefix + "x", "add_position", (first.name, prefix + "position"), None, OPS["add_position"].meaning))
    return steps, prefix + "x"


EMBED_NORM = "embed_norm"  # the weight group of BERT's embedding LayerNorm (weights.embed_norm.gamma / beta)


def bert_entry(prefix: str, first: Step, steps: list[Step], s: StackSettings) -> tuple[list[Step], str]:
    """BERT's embeddings: E[token] + P[o + t] (+ E_type[type]), then X = LayerNorm of their sum (embed_norm)."""
    last = first.name
    if s.positions in ("learned", "sinusoidal"):
        steps.append(Step(prefix + "embeddings", "add_position", (first.name, prefix + "position"), None, msg("token + position vectors")))
        last = prefix + "embeddings"
    if s.token_types:
        steps.append(Step(prefix + "token_type", "token_type_table", (), "token_type", OPS["token_type_table"].meaning))
        steps.append(Step(prefix + "typed", "add", (last, prefix + "token_type"), None, msg("embeddings plus token-type vectors")))
        last = prefix + "typed"
    if s.embedding_norm:
        steps.append(Step(prefix + "x", "layer_norm", (last,), prefix + EMBED_NORM,
                          msg("embedding {norm}, X = {LN}emb(the summed embeddings)", norm=NORMALISATION, LN="LN_"),
                          eps=s.eps))
    else:
        steps.append(Step(prefix + "x", "identity", (last,), None, msg("X, the embeddings")))
    return steps, prefix + "x"


POSITION_BIAS = "position_bias"  # positions: relative: the stack's stage [H,T,T] (the encoder's [H,S,S]) and its table's name


def relative_entry(prefix: str, first: Step, steps: list[Step], s: StackSettings) -> tuple[list[Step], str]:
    """T5's positions: X is the embeddings themselves, and the stack's position bias [H,T,T], made once from its table
    (weights <prefix>relative_bias [K_rel,H]), is added to the scores of every self-attention of the stack.  A stack
    without a causal mask (the encoder) buckets both directions; a causal one (the decoder) only the keys before."""
    buckets, distance = s.relative or (32, 128)
    steps.append(Step(prefix + POSITION_BIAS, "relative_bias", (), prefix + "relative_bias", OPS["relative_bias"].meaning,
                      relative=(buckets, distance, s.mask != "causal")))
    steps.append(Step(prefix + "x", "identity", (first.name,), None, msg("X (relative positions act inside attention, as a bias on the scores)")))
    return steps, prefix + "x"


def final_norm(prefix: str, last: str, s: StackSettings) -> Step:
    op = NORMS[s.norm]
    return Step(prefix + "final_norm", op, (last,), prefix + "final_norm", msg("final normalisation after the stack"), eps=s.eps)


# -- OPT's projections: an embedding C_e wide, projected to C after it and back before the head -----------
PROJECT_IN, PROJECT_OUT = "project_in", "project_out"  # their stage names and weight groups (w [in,out]; b zeros: OPT has none)


def project_in(prefix: str, embed: str) -> Step:
    return Step(prefix + PROJECT_IN, "linear", (embed,), prefix + PROJECT_IN, msg("token embeddings projected to C, embed W_in"), out="C")


def project_out(last: str) -> Step:
    return Step(PROJECT_OUT, "linear", (last,), PROJECT_OUT, msg("the stack's output projected to the embedding's width C_e, for the head"), out="C_e")


RAW_LOGITS = "raw_logits"  # with block.head_softcap: the head's own logits, before the cap


def head_steps(last: str, softcap: float | None = None, divisor: float | None = None, scale: float | None = None, prefix: str = "") -> list[Step]:
    """The output head, then the probabilities; ``softcap`` (Gemma 2's final_logit_softcapping): the head's logits are
    a stage of their own, raw_logits, and logits = cap * tanh(raw_logits / cap); ``divisor`` (Granite's logits_scaling):
    logits = raw_logits / s; ``scale`` (Cohere's logit_scale): logits = raw_logits * s.  ``prefix``: a masked-LM head's
    stages, mlm.logits and mlm.probs."""
    if prefix:
        return [Step(prefix + "logits", "head", (last,), "head", msg("logits over the vocabulary, the transform times the decoder (plus its bias)")),
                Step(prefix + "probs", "softmax", (prefix + "logits",), None, msg("probabilities of each position's token, softmax over V"))]
    if scale is not None:
        return [
            Step(RAW_LOGITS, "head", (last,), "head", msg("logits over the vocabulary, before the scale")),
            Step("logits", "scale", (RAW_LOGITS,), None, msg("logits scaled, raw_logits * s, s = {scale}", scale=f"{scale:g}"), scale=scale),
            Step("probs", "softmax", ("logits",), None, msg("next-token probabilities, softmax over V")),
        ]
    if divisor is not None:
        return [
            Step(RAW_LOGITS, "head", (last,), "head", msg("logits over the vocabulary, before the divisor")),
            Step("logits", "divide", (RAW_LOGITS,), None, msg("logits divided by s = {s}, raw_logits / s", s=f"{divisor:g}"), scale=divisor),
            Step("probs", "softmax", ("logits",), None, msg("next-token probabilities, softmax over V")),
        ]
    if softcap is not None:
        return [
            Step(RAW_LOGITS, "head", (last,), "head", msg("logits over the vocabulary, before the soft cap")),
            Step("logits", "softcap", (RAW_LOGITS,), None, msg("logits soft-capped, cap * tanh(raw_logits / cap), cap = {cap}", cap=f"{softcap:g}"),
                 softcap=softcap),
            Step("probs", "softmax", ("logits",), None, msg("next-token probabilities, softmax over V")),
        ]
    return [
        Step("logits", "head", (last,), "head", msg("logits over the vocabulary")),
        Step("probs", "softmax", ("logits",), None, msg("next-token probabilities, softmax over V")),
    ]


ATTN_MEANINGS: dict[str, Message] = {
    "q": msg("queries, split into heads"),
    "k": msg("keys, split into heads"),
    "v": msg("values, split into heads"),
    "scores": msg("scores QK^T / sqrt(d), before the mask"),
    "weights": msg("attention weights, softmax over keys after the mask"),
    "heads": msg("heads mixed and concatenated, before W_O"),
}


def softcapped_scores(step: Step) -> Message:
    """The meaning of an attention's scores under block.attention_softcap (Gemma 2's attn_logit_softcapping), with the
    block's attention_scale when it sets one (Gemma 2's query_pre_attn_scalar ** -0.5)."""
    cap = f"{step.softcap or 0.0:g}"
    if step.scale is None:
        return msg("scores cap * tanh(QK^T / sqrt(d) / cap), soft-capped at {cap}, before the mask", cap=cap)
    return msg("scores cap * tanh(QK^T * {scale} / cap), soft-capped at {cap}, before the mask (block.attention_scale)", scale=f"{step.scale:g}", cap=cap)


ENCODER = "encoder."  # the prefix of every encoder stage of an encoder-decoder


def position_axis(stage: str) -> str:
    """The axis a stage's positions run along: S (the source) for an encoder stage, else T."""
    return "S" if stage.startswith(ENCODER) else "T"


def scores_meaning(step: Step) -> Message:
    """The scores' meaning: QK^T / sqrt(d), or QK^T * s when the block sets attention_scale (the step's scale)."""
    if step.scale is None:
        return ATTN_MEANINGS["scores"]
    return msg("scores QK^T * {scale}, before the mask (block.attention_scale, not 1/sqrt(d))", scale=f"{step.scale:g}")


def shown_internal(step: Step, key: str) -> bool:
    """Whether the default table shows this attention internal (``key`` as in ATTN_MEANINGS): the cross-attention weights."""
    return step.op == "cross_mha" and key == "weights"


def attention_internals(step: Step, q: Shape, kv: Shape, sizes: dict[str, int]) -> dict[str, Shape]:
    """Axes and sizes of q, k, v, scores, weights, heads for an attention step.

    With grouped-query attention (sizes has H_kv) k and v have their own H_kv heads.
    """
    (qa, qs), (ka, ks) = q, kv
    H, d = sizes["H"], sizes["d"]
    kv_letter = "H_kv" if "H_kv" in sizes else "H"
    H_kv = sizes[kv_letter]
    tq, tk = qa[1], ka[1]
    B = qs[0]
    n_q, n_k = qs[1], ks[1]
    p = internal_prefix(step)
    return {
        f"{p}.q": (("B", "H", tq, "d"), (B, H, n_q, d)),
        f"{p}.k": (("B", kv_letter, tk, "d"), (ks[0], H_kv, n_k, d)),
        f"{p}.v": (("B", kv_letter, tk, "d"), (ks[0], H_kv, n_k, d)),
        f"{p}.scores": (("B", "H", tq, tk), (B, H, n_q, n_k)),
        f"{p}.weights": (("B", "H", tq, tk), (B, H, n_q, n_k)),
        f"{p}.heads": (("B", tq, "C_q" if "C_q" in sizes else "C"), (B, n_q, H * d)),  # C_q = H * d: a head width of its own
    }


def output_shape(step: Step, ins: list[Shape], sizes: dict[str, int], pos: str = "T") -> Shape:
    """The stage's axes and sizes, by its op's record; raises ValueError with a short fact if the op cannot apply."""
    op = OPS.get(step.op)
    if op is None:
        raise ValueError(f"unknown op {step.op!r}")
    return op.shape(step, ins, sizes, pos)


def known_meaning(text: str) -> str:
    """A meaning a spec writes itself, word for word one of the built-in ones, is that meaning (so it is translated
    as the built-in one is); any other words stay as written.  A lookup of the whole text, nothing parsed."""
    return _known_meanings().get(text, text)


_KNOWN: dict[str, Message] = {}


def _known_meanings() -> dict[str, Message]:
    if not _KNOWN:
        found: list[Message] = [op.meaning for op in OPS.values()] + list(ATTN_MEANINGS.values())
        for norm in NORMS:
            for activation in spec_activations():
                settings = StackSettings(norm=norm, activation=activation)
                for template in (*NORM_ORDERS.values(), *DECODER_NORM_ORDERS.values()):
                    found += [s.meaning for s in configure(template, settings, preset=True) if isinstance(s.meaning, Message)]
        found += [s.meaning for s in [final_norm("", "x", StackSettings()), *head_steps("x")] if isinstance(s.meaning, Message)]
        for positions in ("learned", "rotary", "none"):
            found += [s.meaning for s in entry("", "tokens", StackSettings(positions=positions), True)[0] if isinstance(s.meaning, Message)]
        for bert in (StackSettings(embedding_norm=True, token_types=True, position_offset=2), StackSettings(token_types=True)):
            found += [s.meaning for s in entry("", "tokens", bert, True)[0] if isinstance(s.meaning, Message)]
        for positions in ("learned", "rotary", "none"):  # Gemma's scaled embeddings
            found += [s.meaning for s in entry("", "tokens", StackSettings(positions=positions, embedding_scale=True), True)[0]
                      if isinstance(s.meaning, Message)]
        _KNOWN.update({str(m): m for m in found})
    return _KNOWN


# -- T5's tied head reads the output times C ** -0.5 (block.head_scale) ----------------------
HEAD_SCALE = "head_scale"  # its stage (decoder.head_scale in an encoder-decoder)


def head_scale(prefix: str, last: str) -> Step:
    return Step(prefix + HEAD_SCALE, "head_scale", (last,), None, msg("the output times C^-1/2, what the tied head reads"))


# -- the task heads after the stack: BERT's pooler, a classifier's scores, a masked-LM head ---------------
POOLER, MLM = "pooled", "mlm."  # the pooler's stage (weights pooler), and the masked-LM head's prefix (weights mlm_dense, mlm_norm)
CLASSIFIER_PREFIX = {"sequence": "classifier.", "next_sentence": "nsp."}  # a classifier's stages, by its task
TASK_WEIGHTS = ("pooler", "classifier", "classifier_dense", "nsp", "mlm_dense", "mlm_norm")  # their weight groups, none in a layer


def pooler_steps(last: str) -> list[Step]:
    """BERT's pooler: the [CLS] position's output, then tanh(cls W + b)."""
    return [Step("cls", "pool", (last,), None, msg("the first position's output, h_[CLS], of each sample"), pool="first"),
            Step(POOLER, "dense", ("cls",), "pooler", msg("the pooled output, tanh(h_[CLS] W + b)"), out="C", activation="tanh")]


def classifier_steps(last: str, task: str, reads: str, pad: int | None, hidden: str | None) -> list[Step]:
    """A classifier's scores [B,L]: from the pooler's output (``reads`` pooled), or from one position of each sample (first:
    [CLS]; last: the last token that is not ``pad``), through a dense layer with the activation ``hidden`` if there is one."""
    p = CLASSIFIER_PREFIX[task]
    steps: list[Step] = []
    x = POOLER
    if reads != "pooled":
        words = (msg("the first position's output, h_[CLS], of each sample") if reads == "first" else
                 msg("the output at each sample's last position whose token is not pad_token") if pad is not None else
                 msg("the output at the last position of each sample"))
        steps.append(Step(p + "token", "pool", (last,), None, words, pool=reads, pad=pad if reads == "last" else None))
        x = p + "token"
    if hidden is not None:
        steps.append(Step(p + "hidden", "dense", (x,), p[:-1] + "_dense", msg("the classifier's dense layer and its activation, act(x W + b)"),
                          out="C", activation=hidden))
        x = p + "hidden"
    words = msg("next-sentence scores, one per class") if task == "next_sentence" else msg("the classifier's scores, one per class (label)")
    steps.append(Step(p + "logits", "score", (x,), p[:-1], words, out="L"))
    return steps


def mlm_steps(last: str, activation: str, s: StackSettings) -> list[Step]:
    """A masked-LM head's transform before the decoder: LayerNorm(act(x W + b)), with the stack's eps."""
    return [Step(MLM + "hidden", "dense", (last,), "mlm_dense", msg("the masked-LM head's dense layer and its activation, act(x W + b)"),
                 out="C", activation=activation),
            Step(MLM + "transform", "layer_norm", (MLM + "hidden",), "mlm_norm", msg("the masked-LM head's transform, LayerNorm(act(x W + b))"),
                 eps=s.eps)]
