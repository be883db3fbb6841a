"""The spec's typed data: a validated spec is a Spec, its dimensions Dims, each stack's settings a BlockSpec.

What validation makes (tracer/spec/__init__.py reads a document into them, section by section); nothing here
checks anything.  A Spec is frozen: a variant is a copy with ``_replace``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from tracer.model import blocks, masks
from tracer.model.activations import DEFAULT_ACTIVATION
from tracer.model.blocks import StackSettings, Step
from tracer.model.shapes import Shape
from tracer.spec.keys import DIM_KEYS

if TYPE_CHECKING:
    import numpy as np


class Dims(NamedTuple):  # NamedTuples where nothing replaces fields: a tenth of a dataclass's import time
    B: int
    T: int
    C: int
    H: int
    F: int
    V: int | None
    T_max: int | None
    S: int | None = None  # source positions (encoder-decoder only)
    H_kv: int | None = None  # key/value heads of grouped-query attention (None: as many as H, plain multi-head)
    V_type: int | None = None  # rows of BERT's token-type table (block.token_types)
    E: int | None = None  # experts of a mixture of experts (block.ffn.experts; None: a plain FFN)
    C_e: int | None = None  # the token embedding's width when it is projected to C and back (OPT's word_embed_proj_dim)
    head_dim: int | None = None  # dims.d: a head width set apart from C / H (LLaMA's head_dim, Qwen3's); None: C // H
    K_rel: int | None = None  # rows of T5's relative-bias tables (positions: relative): one per bucket
    L: int | None = None  # the classes of a classifier's scores (block.classifier: num_labels)

    @property
    def d(self) -> int:
        return self.C // self.H if self.head_dim is None else self.head_dim

    @property
    def own_head_width(self) -> bool:
        """The heads are not C / H wide (dims.d given): q is H * d = C_q wide, k and v C_kv = H_kv * d, W_O [C_q,C]."""
        return self.head_dim is not None

    @property
    def kv_heads(self) -> int:
        return self.H if self.H_kv is None else self.H_kv

    def size(self, letter: str) -> int:
        if letter == "d":
            return self.d
        if letter == "C_kv":  # the width of k and v before the split: H_kv heads of width d
            return self.kv_heads * self.d
        if letter == "C_q":  # the width of q and of the heads side by side: H heads of width d (dims.d given)
            return self.H * self.d
        value = getattr(self, letter)
        if value is None:
            raise KeyError(letter)
        return int(value)

    def as_dict(self) -> dict[str, int]:
        out = {k: getattr(self, k) for k in DIM_KEYS if getattr(self, k) is not None}
        out["d"] = self.d
        if self.own_head_width:
            out["C_q"] = self.size("C_q")
        if self.H_kv is not None or self.own_head_width:
            out["C_kv"] = self.size("C_kv")
        if self.E is not None:
            out["E"] = self.E
        return out


class BlockSpec(NamedTuple):
    """One stack's settings (the decoder-only model's block, or the encoder's / decoder's)."""

    norm_order: str  # pre | post | custom (block.steps given)
    mask: str  # causal | none | explicit (mask_matrix given); causal with a window: a sliding window
    eps: float
    final_norm: bool
    positions: str  # learned | sinusoidal | rotary | none
    mask_matrix: tuple[tuple[bool, ...], ...] | None = None  # [T,T], True where query i may read key j
    layers: int = 1
    norm: str = "layernorm"  # layernorm | rmsnorm | batchnorm
    activation: str = DEFAULT_ACTIVATION  # an activation a spec may name (tracer/model/activations.py)
    position_base: float = 10000.0
    head: str = "none"  # none | tied | separate
    rotary_pairing: str = "interleaved"  # interleaved | half
    window: int | None = None  # mask {causal: true, window: W}: query t reads keys max(0, t - W + 1)..t
    embedding_norm: bool = False  # BERT: X = LayerNorm(embeddings), weights embed_norm
    token_types: bool = False  # BERT: E_type[input.token_types] added to the embeddings
    position_offset: int = 0  # RoBERTa: positions read rows o .. o+T-1 of the learned table
    rope_scaling: tuple[object, ...] | None = None  # rotary: ("linear", F) | ("llama3", F, low, high, N) (tracer/model/rope.py)
    rotary_dim: int | None = None  # partial rotary: each head's first rotary_dim coordinates turned (None: all d)
    head_bias: bool = False  # the head adds a bias [V] to the logits (Phi's lm_head)
    experts: int | None = None  # ffn: {experts: E, top_k: k}: a mixture of E SwiGLU experts in place of the FFN
    top_k: int | None = None  # the experts each position is sent to
    embedding_scale: bool = False  # Gemma: the token embeddings times sqrt(C) (a stage of their own, embed_scale)
    qk_norm: bool = False  # Qwen3: each attention's q and k RMS-normalised per head over d (attn.q_norm, attn.k_norm [d])
    attention_scale: float | None = None  # the scores are QK^T * attention_scale (T5: 1); None: QK^T / sqrt(d)
    attention_softcap: float | None = None  # Gemma 2: every attention's scores cap * tanh(scores / cap), before the mask
    head_softcap: float | None = None  # Gemma 2: logits = cap * tanh(raw_logits / cap), a stage after the head
    sliding_layers: tuple[int, ...] | None = None  # mask.sliding_layers: only these layers read the window (Gemma 2)
    relative: tuple[int, int] | None = None  # positions: relative: (buckets, max_distance) of T5's relative position bias
    head_scale: bool = False  # T5's tied head: the head reads the (final-normed) output times C ** -0.5, a stage of its own
    rotary_layers: tuple[int, ...] | None = None  # positions: rotary: only these layers' attention is turned (SmolLM3's
    # no_rope_layers); the others have no positions.  None: every layer
    logit_scale: float | None = None  # Cohere: logits = s * raw_logits, a stage after the head; None: the head's logits
    local_position_base: float | None = None  # Gemma 3: the sliding layers' rotary base (unscaled); None: position_base everywhere
    embedding_multiplier: float | None = None  # Granite: X = E[token] * m (op scale)
    residual_multiplier: float | None = None  # Granite: each sublayer's output times m before its residual add (op scale)
    logits_divisor: float | None = None  # Granite: logits = raw_logits / s (logits_scaling; op divide)
    qk_projection: bool = False  # qk_norm: projection (OLMo 2): over the whole projections instead (q_norm [C_q], k_norm [C_kv])
    pooler: bool = False  # BERT's pooler: pooled = tanh(h_[CLS] W + b), stages cls and pooled (weights pooler)
    classifier: tuple[str, str, int | None, str | None] | None = None  # (task, reads, pad, hidden): scores [B,L] (classifier.logits, nsp.logits)
    mlm: str | None = None  # a masked-LM head's activation: mlm.transform = LayerNorm(act(x W + b)) before the head (mlm.logits)

    def settings(self) -> StackSettings:
        return StackSettings(self.norm, self.activation, self.mask, self.positions, self.position_base, self.layers, self.final_norm,
                             self.rotary_pairing, self.window, self.embedding_norm, self.token_types, self.position_offset,
                             self.rope_scaling, self.rotary_dim, embedding_scale=self.embedding_scale, qk_norm=self.qk_norm,
                             attention_scale=self.attention_scale, attention_softcap=self.attention_softcap, head_softcap=self.head_softcap,
                             sliding_layers=self.sliding_layers, relative=self.relative, eps=self.eps,
                             embedding_multiplier=self.embedding_multiplier, residual_multiplier=self.residual_multiplier,
                             logits_divisor=self.logits_divisor, qk_projection=self.qk_projection)

    def visible(self, n_q: int, n_k: int | None = None) -> np.ndarray:  # -> [n_q, n_k] bool, True where query i may read key j
        """The mask as its matrix (tracer/model/masks.py: the one place it is made); two masks are the same function
        exactly when these are equal (``mask: causal`` and its lower-triangular matrix written out; a window W >= T
        and plain causal)."""
        return masks.visible(self.mask, n_q, n_k, self.window, self.mask_matrix)


class Weight(NamedTuple):
    """One weight as the spec gives it: a nested list, a keyword, or 'seed'."""

    path: str  # e.g. "ffn.w1", "blocks.1.attn.w_q"
    axes: tuple[str, ...]  # e.g. ("C", "F")
    shape: tuple[int, ...]  # the shape the contract wants
    source: str  # "given" | "identity" | "zeros" | "ones" | "seed" | "file"
    value: Any = None  # nested list when source == "given"; a checkpoints.refs.TensorRef when "file"
    given_shape: tuple[int, ...] | None = None  # shape as given (may differ if NumPy could broadcast it)


class InputSpec(NamedTuple):
    kind: str  # tokens | x
    value: Any  # nested list [B][T] of ints, [B][T][C] of floats, or "random"


class Spec(NamedTuple):  # NamedTuples, not dataclasses: cheaper to create at every start; variants via _replace
    path: str
    name: str
    dims: Dims
    block: BlockSpec  # the decoder-only model's block; for an encoder-decoder, the decoder's settings
    input: InputSpec  # for an encoder-decoder, the target tokens
    weights: dict[str, Weight]
    seed: int | None
    dtype: str
    steps: tuple[Step, ...]
    stage_shapes: dict[str, Shape]  # every stage's axes and sizes, inferred before running
    model: str = "decoder"  # decoder | encoder-decoder
    encoder: BlockSpec | None = None
    source: InputSpec | None = None  # encoder-decoder: the source tokens
    vocab: tuple[str, ...] | None = None
    layer_template: tuple[Step, ...] = ()  # one layer's steps, before expansion (for --steps)
    allow_nonfinite: bool = False  # NaN/Inf studied on purpose: flagged, but the run goes on
    loss: str | None = None  # tracer grad's loss (LOSSES); None: the default for the spec
    init: str = "default"  # the bound of drawn matrices (INITS): default ±1/sqrt(n_in), xavier ±sqrt(6/(n_in+n_out))
    targets: tuple[tuple[int, ...], ...] | None = None  # input.targets: the token ids next-token predicts [B,T]
    files_read: tuple[str, ...] = ()  # every file loading it read (the spec, checkpoints, config.json): no output may replace one
    token_types: InputSpec | None = None  # block.token_types: the type id of each position [B,T] (zeros when not given)
    # --ablate/--set/--from, resolved (tracer.engine.interventions.Intervention): every run computes with them
    interventions: tuple[Any, ...] = ()
    # input.text: the tokens made from text with the spec's tokenizer, and shown as its pieces
    tokenizer: str | None = None  # tokenizer: the tokenizer.json the tokens are made with and shown as (resolved path)
    text: str | None = None  # input.text, as written
    specials_added: tuple[str, ...] = ()  # the special tokens the tokenizer's post-processor added to the text (BOS, EOS)
    # weights: {file: ..., layout: L}: the checkpoint family the weights are read through (its --layout name), else None
    layout: str | None = None

    def axes_shape(self, axes: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(self.dims.size(a) for a in axes)

    def block_for(self, stage: str) -> BlockSpec:
        """The settings of the stack a stage belongs to: the encoder's for 'encoder.*' stages."""
        return self.encoder if self.encoder is not None and blocks.position_axis(stage) == "S" else self.block

    def inputs(self) -> dict[str, InputSpec]:
        """The spec's inputs by stream name (what embed/input steps read)."""
        if self.source is not None:
            return {"source": self.source, "target": self.input}
        return {self.input.kind: self.input} | ({"token_types": self.token_types} if self.token_types is not None else {})

    def tokens_text(self, stream: str = "target") -> list[list[str]] | None:
        """The input tokens as words (when the spec has a vocab), for labelling positions."""
        inp = self.inputs().get(stream) if self.source is not None else self.input
        if self.tokenizer is not None and inp is not None and inp.kind == "tokens" and inp.value != "random":
            from tracer.checkpoints.tokenizer import load, piece

            tok = load(self.tokenizer)
            return [[piece(tok, t) for t in row] for row in inp.value]
        if self.vocab is None or inp is None or inp.kind != "tokens" or inp.value == "random":
            return None
        return [[self.vocab[t] for t in row] for row in inp.value]


# What each field of a Spec is to a comparison (tracer diff): a setting of the computation, compared by name, or
# something compared another way, and how.  Every field is in one of the two (tests/compare/test_settings.py), so a
# new field is a setting diff compares until someone says otherwise here.  A BlockSpec's fields are all settings.
SPEC_SETTINGS = ("dims", "block", "encoder", "model", "dtype", "init", "input", "source", "loss", "targets", "token_types")
SPEC_NOT_SETTINGS = {
    "path": "where the spec was read from",
    "name": "a label",
    "vocab": "the words the tokens are shown with",
    "weights": "compared by value, weight by weight",
    "seed": "compared through what it draws: the weights and a random input, by value",
    "steps": "compared step by step, each op with its settings (the structure)",
    "layer_template": "one layer of the steps",
    "stage_shapes": "follows from the dims and the steps",
    "allow_nonfinite": "whether a NaN or an infinity stops the run, not what is computed",
    "files_read": "the files loading it read (no output may replace them), not what is computed",
    "interventions": "--ablate/--set/--from, asked on the command line: compared through the stages they change, by value",
    "tokenizer": "the tokenizer the tokens are made with and shown as: the token ids are compared (input)",
    "text": "the text the tokens were made from: the token ids are compared (input)",
    "specials_added": "which special tokens the text's ids include: the token ids are compared (input)",
    "layout": "where the weights are read from (a checkpoint family's names): compared by value, weight by weight",
}
SPEC_ONLY_SETTINGS = ("input", "source", "loss", "targets")  # not in a trace saved before it recorded its input (its stages hold the values)
GRAD_SETTINGS = ("loss", "targets")  # what tracer grad differentiates: compared by diff --grad
