"""The spec: typed, validated data describing a model and its input.

Validation runs once, here, at the edge.  Every error names the file, line and
column, the field path, what was expected and what was received.  Nothing here
imports NumPy, so ``tracer validate`` and ``--help`` stay fast.

The result is a flat list of named steps (entry, one or more layers, final
norm, output head), every stage's shape inferred, and every weight checked.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer.errors import SpecError, UsageError
from tracer.files import outside_confinement, reading
from tracer.messages import Message, at, join, message_of, msg, nmsg
from tracer.model import blocks, masks, rope
from tracer.model.activations import DEFAULT_ACTIVATION, spec_activations
from tracer.model.blocks import NORMS, StackSettings, Step, group_kind, output_shape
from tracer.model.ops import OPS, TABLES
from tracer.model.shapes import Shape, shape_label
from tracer.spec import yamlio
from tracer.spec.yamlio import Path, Source, format_path

if TYPE_CHECKING:
    import numpy as np

MAX_DIM = 10_000_000
KEYWORDS = ("identity", "zeros", "ones", "random")

TOP_KEYS = ("name", "description", "model", "vocab", "dims", "block", "encoder", "decoder", "input", "weights",
            "seed", "init", "dtype", "allow_nonfinite", "loss", "tokenizer")
DIM_KEYS = ("B", "T", "S", "C", "H", "H_kv", "F", "V", "T_max", "V_type", "C_e", "d", "K_rel")
BLOCK_KEYS = ("norm_order", "steps", "layers", "mask", "eps", "norm", "activation", "positions", "position_base",
              "rotary_pairing", "rope_scaling", "rotary_dim", "final_norm", "head", "head_bias", "embedding_norm", "token_types",
              "position_offset", "ffn", "embedding_scale", "qk_norm", "attention_scale", "attention_softcap", "head_softcap",
              "relative", "head_scale")
RELATIVE_KEYS = ("buckets", "max_distance")  # relative: {buckets: 32, max_distance: 128}: T5's relative position bias
FFN_KEYS = ("experts", "top_k")  # ffn: {experts: 8, top_k: 2}: a mixture of experts in place of the FFN (Mixtral's block)
MASK_KEYS = ("causal", "window", "sliding_layers")  # mask: {causal: true, window: 4}; sliding_layers: [0, 2] (Gemma 2)
ROPE_SCALING_KEYS = ("type",) + rope.LLAMA3_KEYS  # rope_scaling: {type: linear, factor: 4}
INPUT_KEYS = ("tokens", "x", "text", "targets", "token_types", "special")
SEQ2SEQ_INPUT_KEYS = ("source", "target", "targets")
INITS = ("default", "xavier")  # how drawn matrices are scaled (tracer/params.py)
LOSSES = ("next-token", "sum-squares")  # tracer grad: the scalar whose gradient is traced (tracer/grad/losses.py)
STEP_KEYS = ("name", "op", "in", "weights", "axis", "start", "stop", "index", "out", "activation", "meaning")
RESERVED_STAGES = ("embed", "input", "position", "x", "memory", "embeddings", "token_type", "typed", "embed_scaled", "position_bias", "head_scale")
POSITIONS = ("learned", "sinusoidal", "rotary", "none", "relative")  # relative: T5's position bias on the scores
PAIRINGS = ("interleaved", "half")  # rotary pairs (2i, 2i+1) as in Meta's LLaMA code, or (i, i + d/2) as in Hugging Face
MODEL_FILE_KEYS = ("file", "layout", "first_layer", "allow_unread")  # weights: {file: model.safetensors, layout: gpt2}
FILE_KEYS = ("file", "key", "transpose")  # one weight: w_q: {file: w.npz, key: attn_q}
# Not given: biases and beta start at zero, gamma at one (the usual init); the rest comes from the seed.
DEFAULT_FILL = {"b_q": "zeros", "b_k": "zeros", "b_v": "zeros", "b_o": "zeros", "b1": "zeros", "b2": "zeros",
                "b3": "zeros", "b": "zeros", "gamma": "ones", "beta": "zeros",
                "q_norm": "ones", "k_norm": "ones"}  # block.qk_norm's per-head RMSNorm weights start at one, as Qwen3's do


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

    def settings(self) -> StackSettings:
        return StackSettings(self.norm, self.activation, self.mask, self.positions, self.position_base, self.layers, self.final_norm,
                             self.rotary_pairing, self.window, self.embedding_norm, self.token_types, self.position_offset,
                             self.rope_scaling, self.rotary_dim, embedding_scale=self.embedding_scale, qk_norm=self.qk_norm,
                             attention_scale=self.attention_scale, attention_softcap=self.attention_softcap, head_softcap=self.head_softcap,
                             sliding_layers=self.sliding_layers, relative=self.relative, eps=self.eps)

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
    # i27-intervene: --ablate/--set/--from, resolved (tracer.engine.interventions.Intervention): every run computes with them
    interventions: tuple[Any, ...] = ()
    # i27-lens: text in, tokens shown as text
    tokenizer: str | None = None  # tokenizer: the tokenizer.json the tokens are made with and shown as (resolved path)
    text: str | None = None  # input.text, as written
    specials_added: tuple[str, ...] = ()  # the special tokens the tokenizer's post-processor added to the text (BOS, EOS)

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
            from tracer.checkpoints import tokenizer as tokenizers

            tok = tokenizers.load(self.tokenizer)
            return [[tokenizers.piece(tok, t) for t in row] for row in inp.value]
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
}
SPEC_ONLY_SETTINGS = ("input", "source", "loss", "targets")  # not in a trace saved before it recorded its input (its stages hold the values)
GRAD_SETTINGS = ("loss", "targets")  # what tracer grad differentiates: compared by diff --grad


def _close_matches(word: str, options: list[str], n: int = 1, cutoff: float = 0.5) -> list[str]:
    import difflib  # only on the error path: a valid spec never needs a suggestion

    return difflib.get_close_matches(word, options, n=n, cutoff=cutoff)


def _lookalike(word: object, options: Any) -> Message | None:
    """`Gelu` for `gelu`, `w_0` for `w_o` (spec/yamlslips.lookalike); None for anything else, a non-text key too."""
    if not isinstance(word, str):
        return None
    from tracer.spec.yamlslips import lookalike

    return lookalike(word, [str(o) for o in options])


def _did_you_mean(close: list[str], otherwise: Message | str = "") -> Message | str:
    """'did you mean 'block'?' for the closest spelling, else what to say instead ('' for nothing)."""
    return msg("did you mean {names}?", names=repr(close[0])) if close else otherwise


def load_spec(path: str) -> Spec:
    with reading() as read:
        text = yamlio.read_text(path)
        doc, src = yamlio.load(text, path)
        s = _Validator(src).spec(doc)
    return s._replace(files_read=tuple(read.values()))


def load_spec_text(text: str, filename: str = "<spec>") -> Spec:
    doc, src = yamlio.load(text, filename)
    return load_spec_doc(doc, src)


def load_spec_doc(doc: dict[str, Any], src: Source) -> Spec:
    """A document already read (YAML, or a Python dict for the API): validated into a Spec."""
    with reading() as read:
        s = _Validator(src).spec(doc)
    return s._replace(files_read=tuple(read.values()))


def group_yaml_path(group: str) -> Path:
    """'blocks.1.attn' -> ('weights', 'blocks', 1, 'attn'); 'encoder.blocks.0.ffn' likewise."""
    out: list[str | int] = ["weights"]
    for part in group.split("."):
        out.append(int(part) if part.isdigit() else part)
    return tuple(out)


def _broadcastable(given: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """Would NumPy silently stretch ``given`` to ``want``?"""
    if len(given) > len(want):
        return False
    return all(g == w or g == 1 for g, w in zip(reversed(given), reversed(want)))


class _Validator:
    def __init__(self, src: Source) -> None:
        self.src = src
        self.vocab_given = False
        self.model_source: Any = None  # checkpoints.refs.ModelSource when weights: {file: ..., layout: ...}
        self.allow_unread = False  # weights.allow_unread: a checkpoint read in part on purpose
        self.words: tuple[str, ...] = ()
        self.tokenizer_path: str | None = None  # tokenizer: (i27-lens)
        self.text: str | None = None
        self.specials_added: tuple[str, ...] = ()

    # -- messages ---------------------------------------------------------
    def fail(self, path: Path, message: str) -> SpecError:
        return SpecError(at(self.src.where(path), at(format_path(path), message)))

    def fail_key(self, path: Path, message: str) -> SpecError:
        """An error about a key itself (unknown, unused): located where the key is written."""
        return SpecError(at(self.src.where_key(path), at(format_path(path), message)))

    def received(self, path: Path, value: Any) -> str:
        raw = self.src.raw.get(path)
        if isinstance(value, bool):
            return msg("boolean {v}", v=repr(raw) if raw is not None else value)
        if isinstance(value, dict):
            return msg("a mapping")
        if isinstance(value, list):
            return msg("a list")
        if value is None:
            return msg("nothing (null)")
        if isinstance(value, str):
            return msg("text {v}", v=repr(value))
        if isinstance(value, (int, float)) and raw is not None and raw.strip():
            try:
                float(raw.replace("_", ""))
                return yamlio.abbreviate(raw)  # a number as written: 1.5, 1e-5
            except ValueError:
                pass
        return repr(raw if raw is not None else value)

    def keys(self, mapping: Any, path: Path, allowed: tuple[str, ...] | list[str], what: Message) -> dict[str, Any]:
        if not isinstance(mapping, dict):
            raise self.fail(path, msg("expected {what}, received {got}", what=msg("a mapping of {what}", what=what), got=self.received(path, mapping)))
        for key in mapping:
            if key not in allowed:
                close = _close_matches(str(key), [str(a) for a in allowed], n=1, cutoff=0.5)
                hint = _lookalike(key, allowed) or _did_you_mean(close, msg("known keys: {keys}", keys=', '.join(allowed)))
                raise self.fail_key(path + (key,), join([msg("unknown key {key}", key=repr(key)), hint]))
        return mapping

    def integer(self, value: Any, path: Path, lo: int = 1, hi: int = MAX_DIM) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer() and not isinstance(value, bool):
                value = int(value)
            else:
                raise self.fail(path, msg("expected a whole number, received {got}", got=self.received(path, value)))
        if not lo <= value <= hi:
            raise self.fail(path, msg("expected {what}, received {got}", what=msg("a whole number from {lo} to {hi}", lo=lo, hi=f"{hi:,}"), got=yamlio.abbreviate(str(self.src.raw.get(path, value)))))
        return value

    def choice(self, value: Any, path: Path, options: tuple[str, ...]) -> str:
        if value not in options:
            wrong = msg("expected {what}, received {got}", what=msg("one of {options}", options=' | '.join(options)), got=self.received(path, value))
            hint = _lookalike(value, options)
            raise self.fail(path, join([wrong, hint]) if hint else wrong)
        return str(value)

    # -- the document -----------------------------------------------------
    def spec(self, doc: dict[str, Any]) -> Spec:
        self.keys(doc, (), TOP_KEYS, msg("spec sections"))
        if "dims" not in doc:
            raise self.fail((), msg("missing required section 'dims' (e.g. dims: {C: 2, H: 2, F: 3})"))
        name = doc.get("name", self.src.filename)
        if not isinstance(name, str):
            raise self.fail(("name",), msg("expected text, received {got}", got=self.received(('name',), name)))
        name = yamlio.printable(name)  # text from a spec is printed everywhere: control characters as escapes
        seed = None
        if doc.get("seed") is not None:
            seed = self.integer(doc["seed"], ("seed",), 0, 2**63 - 1)
        init = self.choice(doc.get("init", "default"), ("init",), INITS)
        dtype = self.choice(doc.get("dtype", "float64"), ("dtype",), ("float64", "float32"))
        allow_nonfinite = doc.get("allow_nonfinite", False)
        if not isinstance(allow_nonfinite, bool):
            raise self.fail(("allow_nonfinite",), msg("expected true or false, received {got}", got=self.received(('allow_nonfinite',), allow_nonfinite)))
        self.allow_nonfinite = allow_nonfinite
        model = self.choice(doc.get("model", "decoder"), ("model",), ("decoder", "encoder-decoder"))
        vocab = self.vocab_list(doc.get("vocab"))

        weights_raw = doc.get("weights")
        if weights_raw is None:
            weights_raw = {}
        if not isinstance(weights_raw, dict):
            raise self.fail(("weights",), msg("expected a mapping of weights, received {got}", got=self.received(('weights',), weights_raw)))
        if "file" in weights_raw:  # the whole model from a checkpoint, through a layout
            self.model_source = self.model_file(weights_raw)
            weights_raw = {}
        has_table = "position" in weights_raw or (self.model_source is not None and self.model_source.has("position"))
        if model == "decoder":
            for key in ("encoder", "decoder"):
                if key in doc:
                    raise self.fail((key,), join([msg("'{key}' belongs to model: encoder-decoder", key=key), msg("a decoder-only model has one 'block'")]))
            block, steps_raw = self.block(doc.get("block", {}), ("block",), has_table, "causal")
            encoder = None
            enc_steps_raw = None
        else:
            if "block" in doc:
                raise self.fail(("block",), msg("an encoder-decoder has 'encoder' and 'decoder' sections instead of 'block'"))
            encoder, enc_steps_raw = self.block(doc.get("encoder", {}), ("encoder",), has_table, "none")
            block, steps_raw = self.block(doc.get("decoder", {}), ("decoder",), has_table, "causal")
            for sec, st in (("encoder", enc_steps_raw), ("decoder", steps_raw)):
                if st is not None:
                    raise self.fail((sec, "steps"), join([msg("custom steps are for decoder-only models"), msg("use norm_order here")]))
            if "head" in (doc.get("encoder") or {}):  # an encoder has no head: a setting nothing reads is an error
                raise self.fail_key(("encoder", "head"), msg("the output head belongs to the decoder: write head under decoder (an encoder has none)"))

        dims_raw = self.keys(doc["dims"], ("dims",), DIM_KEYS, msg("dimensions"))
        given = {k: self.integer(v, ("dims", k)) for k, v in dims_raw.items()}
        for k in ("C", "H", "F"):
            if k not in given:
                raise self.fail(("dims",), msg("missing dimension {k} (dims needs C, H and F; B, T, V, T_max follow from input and tables)", k=k))
        if "d" not in given and given["C"] % given["H"]:
            raise self.fail(("dims", "H"), msg("H = {H} must divide C = {C} (each head has width d = C / H)", H=given['H'], C=given['C']))
        if "H_kv" in given and given["H"] % given["H_kv"]:
            raise self.fail(("dims", "H_kv"), msg("H_kv = {H_kv} must divide H = {H} (each key/value head serves H / H_kv query heads)", H_kv=given['H_kv'], H=given['H']))
        stacks = [block] + ([encoder] if encoder else [])
        head_dim = given.get("d")
        if head_dim is not None and given["C"] % given["H"] == 0 and head_dim == given["C"] // given["H"]:
            head_dim = None  # d = C / H: the plain heads (the same computation, the same weight shapes)
        d = given["C"] // given["H"] if head_dim is None else head_dim
        if any(st.positions == "rotary" and st.rotary_dim is None for st in stacks) and d % 2:
            if head_dim is not None:
                raise self.fail(("dims", "d"), msg("rotary positions rotate pairs of coordinates: d = {x} must be even", x=d))
            raise self.fail(("dims", "H"), msg("rotary positions rotate pairs of coordinates: d = C / H = {x} must be even", x=d))

        if "input" not in doc:
            raise self.fail((), msg("missing required section 'input' (tokens: [...] or x: [[...]])"))
        raw_input, raw_targets, raw_types = doc["input"], None, None
        if isinstance(raw_input, dict) and "targets" in raw_input:
            raw_input = {k: v for k, v in raw_input.items() if k != "targets"}
            raw_targets = doc["input"]["targets"]
        if isinstance(raw_input, dict) and "token_types" in raw_input:
            raw_input = {k: v for k, v in raw_input.items() if k != "token_types"}
            raw_types = doc["input"]["token_types"]
        source = None
        S = None
        self.tokenizer_path = self.tokenizer_file(doc.get("tokenizer"))
        if isinstance(raw_input, dict) and "text" in raw_input:
            raw_input = self.text_input(raw_input)
        elif isinstance(raw_input, dict) and "special" in raw_input:
            raise self.fail_key(("input", "special"), msg("special says whether the tokenizer adds its special tokens to input.text: it needs input.text"))
        if model == "decoder":
            if "S" in given:
                raise self.fail(("dims", "S"), msg("S (source positions) belongs to model: encoder-decoder"))
            inp, B, T, max_token = self.input(raw_input, given, seed, vocab)
        else:
            source, inp, B, S, T, max_token = self.seq2seq_input(raw_input, given, seed, vocab)
        for letter, found in (("B", B), ("T", T), ("S", S)):
            if found is not None and letter in given and given[letter] != found:
                raise self.fail(("dims", letter), msg("{letter} = {given} but the input has {letter} = {found}", letter=letter, given=given[letter], found=found))
        uses_tokens = inp.kind == "tokens"
        if not uses_tokens and block.head != "none":
            raise self.fail(("block", "head"), msg("an output head needs token input (it scores the vocabulary)"))
        if not uses_tokens and block.embedding_scale:
            raise self.fail(("block", "embedding_scale"), msg("embedding_scale scales the token embeddings: it needs input.tokens (an input x stands for vectors already scaled)"))
        V = self.vocab_size(given, weights_raw, max_token, uses_tokens, vocab)
        T_max = None
        if any(st.positions == "learned" for st in stacks):
            T_max = self.table_rows(weights_raw, "position", given.get("T_max"), default=max(T, S or 0) + block.position_offset)
        elif "T_max" in given:
            T_max = given["T_max"]
        H_kv = given.get("H_kv")
        token_types, V_type = self.token_types(raw_types, block, model, uses_tokens, given, weights_raw, B, T)
        if "C_e" in given and (model != "decoder" or (not uses_tokens and block.head == "none")):
            raise self.fail(("dims", "C_e"), msg("C_e is the width of a decoder-only model's token embedding, projected to C after it and back before the head: it needs token input or a head"))
        dims = Dims(B=B, T=T, C=given["C"], H=given["H"], F=given["F"], V=V, T_max=T_max, S=S,
                    H_kv=None if H_kv == given["H"] else H_kv, V_type=V_type, E=block.experts,  # H_kv = H is plain multi-head attention
                    C_e=given.get("C_e"), head_dim=head_dim, K_rel=self.relative_rows(weights_raw, model, block, encoder, given))
        if max_token is not None and V is not None and max_token >= V:
            where: Path = ("input", "tokens") if model == "decoder" else ("input",)
            raise self.fail(where, msg("token id {max_token} is out of range: the embedding table has V = {V} rows (ids 0 to {x})", max_token=yamlio.abbreviate(str(max_token)), V=V, x=V - 1))
        for key, spec_in in (("x", inp),):
            if spec_in.kind == "x" and spec_in.value != "random":
                C_in = len(spec_in.value[0][0])
                if C_in != dims.C:
                    raise self.fail(("input", key), msg("expected rows of width C = {C}, received rows of width {C_in}", C=dims.C, C_in=C_in))
        for st, sec in ((block, "decoder" if encoder else "block"), (encoder, "encoder")):
            if st is not None and st.mask_matrix is not None:
                n = S if sec == "encoder" else T
                if len(st.mask_matrix) != n:
                    raise self.fail((sec, "mask"), msg("expected a [T,T] = [{n},{n}] mask, received {n2} rows", n=n, n2=len(st.mask_matrix)))

        loss, targets = self.loss_fields(doc, raw_targets, dims, block.head != "none", model, vocab)
        template = self.template(steps_raw, block, dims)
        steps, shapes = self.expand(model, block, encoder, template, dims, uses_tokens)
        weights = self.weights(weights_raw, dims, seed, steps, shapes, model, block, encoder)
        if self.model_source is not None and not self.allow_unread:
            self.read_whole(weights, block)
        return Spec(
            path=self.src.filename, name=name, dims=dims, block=block, input=inp, weights=weights,
            seed=seed, dtype=dtype, steps=steps, stage_shapes=shapes, model=model, encoder=encoder,
            source=source, vocab=vocab, layer_template=template, allow_nonfinite=allow_nonfinite,
            loss=loss, targets=targets, init=init, token_types=token_types,
            tokenizer=self.tokenizer_path, text=self.text, specials_added=self.specials_added,
        )

    def token_types(self, raw: Any, block: BlockSpec, model: str, uses_tokens: bool, given: dict[str, int],
                    weights_raw: dict[str, Any], B: int, T: int) -> tuple[InputSpec | None, int | None]:
        """input.token_types (BERT's segment ids, [B,T]; zeros when not given) and V_type, the rows of their table."""
        path: Path = ("input", "token_types")
        if not block.token_types:
            if raw is not None:
                raise self.fail_key(path, msg("token types are given but block.token_types is false (a token-type table needs token_types: true)"))
            if "V_type" in given:
                raise self.fail_key(("dims", "V_type"), msg("V_type is the rows of the token-type table: it needs block.token_types: true"))
            return None, None
        if model != "decoder" or not uses_tokens:
            raise self.fail(("block", "token_types"), msg("token types are added to token embeddings: they need input.tokens (and a decoder-only model)"))
        if raw is None:
            rows = [[0] * T for _ in range(B)]
        else:
            rows, shape = self.token_ids(raw, path, None)
            if shape != (B, T):
                raise self.fail(path, msg("expected one token type per sample and position [B,T] = [{B},{T}], received [{b},{t}]", B=B, T=T, b=shape[0], t=shape[1]))
        top = max(t for r in rows for t in r)
        V_type = self.table_rows(weights_raw, "token_type", given.get("V_type"), default=max(2, top + 1))
        if top >= V_type:
            raise self.fail(path, msg("token type {top} is out of range: the token-type table has V_type = {V} rows (types 0 to {x})", top=top, V=V_type, x=V_type - 1))
        return InputSpec("tokens", rows), V_type

    def loss_fields(self, doc: dict[str, Any], raw_targets: Any, dims: Dims, has_head: bool, model: str,
                    vocab: tuple[str, ...] | None) -> tuple[str | None, tuple[tuple[int, ...], ...] | None]:
        """loss: and input.targets, for tracer grad; next-token needs the output head."""
        loss = None
        if doc.get("loss") is not None:
            loss = self.choice(doc["loss"], ("loss",), LOSSES)
            if loss == "next-token" and not has_head:
                where = "decoder" if model == "encoder-decoder" else "block"
                raise self.fail(("loss",), msg("next-token scores the vocabulary: it needs an output head ({where}.head: tied or separate)", where=where))
        if raw_targets is None:
            return loss, None
        path: Path = ("input", "targets")
        if not has_head:
            raise self.fail(path, msg("targets are the tokens next-token predicts: they need an output head (block.head)"))
        rows, shape = self.token_ids(raw_targets, path, vocab)
        if shape != (dims.B, dims.T):
            raise self.fail(path, msg("expected one target id per sample and position [B,T] = [{B},{T}], received [{shape},{shape2}]", B=dims.B, T=dims.T, shape=shape[0], shape2=shape[1]))
        assert dims.V is not None
        top = max(t for r in rows for t in r)
        if top >= dims.V:
            raise self.fail(path, msg("token id {top} is out of range: the vocabulary has V = {V} ids (0 to {x})", top=top, V=dims.V, x=dims.V - 1))
        return loss, tuple(tuple(r) for r in rows)

    def vocab_list(self, raw: Any) -> tuple[str, ...] | None:
        if raw is None:
            return None
        p: Path = ("vocab",)
        if not isinstance(raw, list) or not raw:
            got = msg("an empty list") if raw == [] else self.received(p, raw)
            raise self.fail(p, msg("expected a non-empty list of words, received {got}", got=got))
        seen: dict[str, int] = {}
        for i, w in enumerate(raw):
            if isinstance(w, (int, float)) and not isinstance(w, bool):
                # tokens: [1, 2] are ids, so a word that reads as a number could never be written as a token
                raise self.fail(p + (i,), msg("expected a word (text), received the number {got}; quote it ('{w}') if it is a word: unquoted numbers in tokens are ids", got=self.received(p + (i,), w), w=self.src.raw.get(p + (i,), w)))
            if not isinstance(w, (str, bool)):
                raise self.fail(p + (i,), msg("expected a word, received {got}", got=self.received(p + (i,), w)))
            word = self.src.raw.get(p + (i,), str(w))  # a word as written: 'on' is a word here
            if word in seen:
                raise self.fail(p + (i,), join([msg("{word} is already word {n}", word=repr(word), n=seen[word]), msg("each word needs its own id")]))
            seen[word] = i
        self.words = tuple(seen)  # tokens are looked up by the words as written
        return tuple(map(yamlio.printable, seen))  # what labels print

    def block(self, raw: Any, p: Path, has_table: bool, default_mask: str) -> tuple[BlockSpec, Any]:
        raw = self.keys(raw if raw is not None else {}, p, BLOCK_KEYS, msg("block settings"))
        if "steps" in raw and raw["steps"] is None:
            raise self.fail(p + ("steps",), msg("expected a list of steps such as {name: norm1, op: layer_norm, in: x, weights: norm1}, received nothing (null)"))
        if "steps" in raw and "norm_order" in raw:
            raise self.fail(p + ("steps",), msg("give either norm_order (a preset step list) or steps (your own list), not both"))
        orders = tuple(blocks.NORM_ORDERS) if p == ("block",) else ("pre", "post")  # a parallel block is a decoder-only layer
        norm_order = "custom" if "steps" in raw else self.choice(raw.get("norm_order", "pre"), p + ("norm_order",), orders)
        mask_raw = raw.get("mask", default_mask)
        mask_matrix, window, sliding = None, None, None
        if isinstance(mask_raw, list):
            mask_matrix = self.mask_matrix(mask_raw, p + ("mask",))
            mask = "explicit"
        elif isinstance(mask_raw, dict):
            mask, window = self.mask_window(mask_raw, p + ("mask",))
            if "sliding_layers" in mask_raw:
                sliding = self.sliding_layers(mask_raw["sliding_layers"], p + ("mask", "sliding_layers"), window)
        else:
            mask = self.choice(mask_raw, p + ("mask",), ("causal", "none"))
        eps = raw.get("eps", 1e-5)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
            raise self.fail(p + ("eps",), msg("expected a positive number such as 1e-5, received {got}", got=self.received(p + ('eps',), eps)))
        final_norm = self.boolean(raw.get("final_norm", False), p + ("final_norm",))
        positions = self.choice(raw.get("positions", "learned" if has_table else "none"), p + ("positions",), POSITIONS)
        base = raw.get("position_base", 10000.0)
        if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1:
            raise self.fail(p + ("position_base",), msg("expected a number above 1 such as 10000, received {got}", got=self.received(p + ('position_base',), base)))
        if "position_base" in raw and positions not in ("sinusoidal", "rotary"):
            raise self.fail(p + ("position_base",), msg("position_base is for sinusoidal or rotary positions, but positions is {positions}", positions=positions))
        pairing = self.choice(raw.get("rotary_pairing", "interleaved"), p + ("rotary_pairing",), PAIRINGS)
        if "rotary_pairing" in raw and positions != "rotary":
            raise self.fail(p + ("rotary_pairing",), msg("rotary_pairing is for rotary positions, but positions is {positions}", positions=positions))
        scaling = self.rope_scaling(raw["rope_scaling"], p + ("rope_scaling",)) if "rope_scaling" in raw else None
        if "rope_scaling" in raw and positions != "rotary":
            raise self.fail(p + ("rope_scaling",), msg("rope_scaling is for rotary positions, but positions is {positions}", positions=positions))
        rotary_dim = None
        if "rotary_dim" in raw:
            if positions != "rotary":
                raise self.fail(p + ("rotary_dim",), msg("rotary_dim is for rotary positions, but positions is {positions}", positions=positions))
            rotary_dim = self.integer(raw["rotary_dim"], p + ("rotary_dim",), 1, MAX_DIM)  # even and at most d: the rotary op's contract
        layers = self.integer(raw.get("layers", 1), p + ("layers",), 1, 1000)
        norm = self.choice(raw.get("norm", "layernorm"), p + ("norm",), tuple(NORMS))
        activation = self.choice(raw.get("activation", DEFAULT_ACTIVATION), p + ("activation",), spec_activations())
        head = self.choice(raw.get("head", "none"), p + ("head",), ("none", "tied", "separate"))
        head_bias = self.boolean(raw.get("head_bias", False), p + ("head_bias",))
        if head_bias and head == "none":
            raise self.fail(p + ("head_bias",), msg("head_bias is a bias of the output head, but head is none"))
        if norm_order == "custom" and ("norm" in raw):
            raise self.fail(p + ("norm",), msg("with custom steps, name the norm op in each step (layer_norm, rms_norm, batch_norm)"))
        experts, top_k = self.experts(raw, p, norm_order, activation)
        if experts is not None:
            activation = "swiglu"
        embedding_norm = self.boolean(raw.get("embedding_norm", False), p + ("embedding_norm",))
        token_types = self.boolean(raw.get("token_types", False), p + ("token_types",))
        offset = self.integer(raw.get("position_offset", 0), p + ("position_offset",), 0, MAX_DIM)
        if offset and positions != "learned":
            raise self.fail(p + ("position_offset",), msg("position_offset is for learned positions, but positions is {positions}", positions=positions))
        if (embedding_norm or token_types) and p != ("block",):
            raise self.fail(p + ("embedding_norm" if embedding_norm else "token_types",), msg("embedding_norm and token_types are for a decoder-only spec's block"))
        embedding_scale = self.boolean(raw.get("embedding_scale", False), p + ("embedding_scale",))
        if embedding_scale and p != ("block",):
            raise self.fail(p + ("embedding_scale",), msg("embedding_scale is for a decoder-only spec's block"))
        qk_norm = self.boolean(raw.get("qk_norm", False), p + ("qk_norm",))
        if qk_norm and p != ("block",):
            raise self.fail(p + ("qk_norm",), msg("qk_norm (Qwen3's per-head RMSNorm of q and k) is for a decoder-only spec's block"))
        attention_scale = None
        if "attention_scale" in raw:  # absent: 1/sqrt(d), as every spec before it
            attention_scale = raw["attention_scale"]
            if isinstance(attention_scale, bool) or not isinstance(attention_scale, (int, float)) or not math.isfinite(attention_scale) or attention_scale <= 0:
                raise self.fail(p + ("attention_scale",), msg("expected a positive number such as 1 (the scores QK^T * s; absent: 1/sqrt(d)), received {got}",
                                                             got=self.received(p + ("attention_scale",), attention_scale)))
            attention_scale = float(attention_scale)
        if sliding is not None and any(i >= layers for i in sliding):
            raise self.fail(p + ("mask", "sliding_layers"), msg("layer {i} is not one of the {n} layers (0 .. {last})",
                                                                i=max(sliding), n=layers, last=layers - 1))
        attention_softcap, head_softcap = (self.softcap(raw, key, p) for key in ("attention_softcap", "head_softcap"))
        if head_softcap is not None and head == "none":
            raise self.fail(p + ("head_softcap",), msg("head_softcap caps the output head's logits, but head is none"))
        if (attention_softcap is not None or head_softcap is not None or norm_order == "sandwich") and p != ("block",):
            key = "attention_softcap" if attention_softcap is not None else "head_softcap" if head_softcap is not None else "norm_order"
            raise self.fail(p + (key,), msg("{key} (Gemma 2's) is for a decoder-only spec's block", key=key))
        relative = self.relative(raw, p, positions)
        head_scale = self.boolean(raw.get("head_scale", False), p + ("head_scale",))
        if head_scale and head == "none":
            raise self.fail(p + ("head_scale",), msg("head_scale scales what the output head reads, but head is none"))
        if attention_softcap is not None and relative is not None:  # no family has both: their order is not guessed
            raise self.fail(p + ("attention_softcap",), msg("attention_softcap (Gemma 2's) with positions: relative (T5's): no model has both, so tracer does not guess whether the bias is added before or after the cap"))
        spec = BlockSpec(norm_order, mask, float(eps), final_norm, positions, mask_matrix, layers, norm, activation,
                         float(base), head, pairing, window, embedding_norm, token_types, offset, scaling, rotary_dim, head_bias,
                         experts, top_k, embedding_scale, qk_norm, attention_scale, attention_softcap, head_softcap, sliding,
                         relative, head_scale)
        return spec, raw.get("steps")

    def softcap(self, raw: dict[str, Any], key: str, p: Path) -> float | None:
        """``attention_softcap: 50`` / ``head_softcap: 30`` (Gemma 2's): a positive cap, or absent (no cap)."""
        if key not in raw:
            return None
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise self.fail(p + (key,), msg("expected a positive number such as 50 (the cap of cap * tanh(x / cap)), received {got}",
                                            got=self.received(p + (key,), value)))
        return float(value)

    def sliding_layers(self, raw: Any, path: Path, window: int | None) -> tuple[int, ...]:
        """``sliding_layers: [0, 2]``: the layers whose attention reads the sliding window (the others: plain causal)."""
        if window is None:
            raise self.fail(path, msg("sliding_layers names the layers that read the sliding window, but the mask has no window"))
        if not isinstance(raw, list):
            raise self.fail(path, msg("expected a list of layer numbers such as [0, 2], received {got}", got=self.received(path, raw)))
        out = tuple(self.integer(v, path + (i,), 0, 1000) for i, v in enumerate(raw))
        if len(set(out)) != len(out) or list(out) != sorted(out):
            raise self.fail(path, msg("expected each layer once, in increasing order, received {got}", got=self.received(path, raw)))
        return out

    def relative(self, raw: dict[str, Any], p: Path, positions: str) -> tuple[int, int] | None:
        """``positions: relative`` with ``relative: {buckets: K, max_distance: D}`` (T5's; defaults 32 and 128)."""
        if positions != "relative":
            if "relative" in raw:
                raise self.fail(p + ("relative",), msg("relative is for positions: relative (T5's position bias), but positions is {positions}", positions=positions))
            return None
        path = p + ("relative",)
        rel = self.keys(raw.get("relative") or {}, path, RELATIVE_KEYS, msg("relative position settings"))
        buckets = self.integer(rel.get("buckets", 32), path + ("buckets",), 4, MAX_DIM)
        distance = self.integer(rel.get("max_distance", 128), path + ("max_distance",), 1, MAX_DIM)
        if distance <= buckets // 2:  # the logarithmic buckets span max_exact .. max_distance: it must lie above max_exact
            raise self.fail(path + ("max_distance",), msg("expected a distance above buckets / 2 = {half}, received {got}", half=buckets // 2, got=distance))
        return buckets, distance

    def relative_rows(self, weights_raw: dict[str, Any], model: str, block: BlockSpec, encoder: BlockSpec | None, given: dict[str, int]) -> int | None:
        """K_rel: the rows of the relative-bias tables (each stack's with positions: relative), else dims.K_rel, else the buckets."""
        stacks = [(encoder, "encoder."), (block, "decoder.")] if model == "encoder-decoder" else [(block, "")]
        wanted = [(st, prefix) for st, prefix in stacks if st is not None and st.relative is not None]
        if not wanted:
            if "K_rel" in given:
                raise self.fail_key(("dims", "K_rel"), msg("K_rel is the rows of the relative-bias table: it needs positions: relative"))
            return None
        for _st, prefix in wanted:
            name = prefix + "relative_bias"
            value = self.lookup(weights_raw, group_yaml_path(name)[1:])
            rows = len(value) if isinstance(value, list) and value else self.file_rows(name, value)
            if rows is not None:
                return rows
        return given.get("K_rel", max(st.relative[0] for st, _ in wanted if st.relative is not None))

    def rope_scaling(self, raw: Any, path: Path) -> tuple[object, ...]:
        """``{type: linear, factor: F}`` or ``{type: llama3, factor, low_freq_factor, high_freq_factor,
        original_max_position_embeddings}``: every number positive, llama3's high_freq_factor above its low one."""
        self.keys(raw, path, ROPE_SCALING_KEYS, msg("rope scaling settings"))
        kind = self.choice(raw.get("type"), path + ("type",), rope.ROPE_TYPES)
        need = rope.LLAMA3_KEYS if kind == "llama3" else ("factor",)
        values: list[float] = []
        for key in need:
            value = raw.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise self.fail(path + (key,), msg("expected a positive number, received {got}", got=self.received(path + (key,), value)))
            values.append(float(value))
        extra = [k for k in raw if k not in need and k != "type"]
        if extra:
            raise self.fail(path + (extra[0],), msg("{key} is a llama3 setting, but type is {kind}", key=extra[0], kind=kind))
        if kind == "llama3" and values[2] <= values[1]:
            raise self.fail(path + ("high_freq_factor",), msg("expected a number above low_freq_factor = {low}, received {got}", low=f"{values[1]:g}", got=f"{values[2]:g}"))
        return (kind, *values)

    def experts(self, raw: dict[str, Any], p: Path, norm_order: str, activation: str) -> tuple[int | None, int | None]:
        """``ffn: {experts: E, top_k: k}``: a mixture of E SwiGLU experts, k of them for each position (None, None: none)."""
        if "ffn" not in raw:
            return None, None
        ffn = self.keys(raw["ffn"], p + ("ffn",), FFN_KEYS, msg("FFN settings"))
        for key in FFN_KEYS:
            if key not in ffn:
                raise self.fail(p + ("ffn",), msg("a mixture of experts needs {key} (e.g. ffn: {experts: 4, top_k: 2})", key=key))
        experts = self.integer(ffn["experts"], p + ("ffn", "experts"), 1, 1024)
        top_k = self.integer(ffn["top_k"], p + ("ffn", "top_k"), 1, 1024)
        if top_k > experts:
            raise self.fail(p + ("ffn", "top_k"), msg("top_k = {k} chooses more experts than there are (experts = {E})", k=top_k, E=experts))
        if norm_order not in ("pre", "custom"):  # the preset replaces the pre-norm block's FFN; custom steps place their own
            raise self.fail(p + ("ffn",), msg("a mixture of experts is in the pre-norm block (norm_order: pre), as Mixtral's is"))
        if "activation" in raw and activation != "swiglu":
            raise self.fail(p + ("activation",), msg("each expert is a SwiGLU FFN: expected swiglu with ffn.experts, received {got}", got=activation))
        return experts, top_k

    def boolean(self, value: Any, path: Path) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, msg("expected true or false, received {got}", got=self.received(path, value)))
        return value

    def mask_matrix(self, raw: list[Any], path: Path) -> tuple[tuple[bool, ...], ...]:
        shape = self.rect(self.entries(raw, path), path)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise self.fail(path, msg("expected causal, none, or a square [T,T] matrix of 0 and 1, received {shape}", shape=_fmt(shape)))
        return tuple(tuple(bool(v) for v in row) for row in raw)

    def mask_window(self, raw: dict[str, Any], path: Path) -> tuple[str, int | None]:
        """``{causal: true, window: W}``: the causal mask, each query reading itself and the W - 1 keys before it."""
        self.keys(raw, path, MASK_KEYS, msg("mask settings"))
        if "causal" not in raw:
            raise self.fail(path, msg("expected {causal: true, window: W}, received no causal (a sliding window is causal: write causal: true)"))
        if raw["causal"] is not True:
            raise self.fail(path + ("causal",), msg("expected true (a sliding window is causal, as Mistral's is: the keys after each query stay hidden), received {got}", got=self.received(path + ("causal",), raw["causal"])))
        if "window" not in raw:
            return "causal", None
        return "causal", self.integer(raw["window"], path + ("window",), 1, MAX_DIM)

    def entries(self, value: Any, path: Path) -> Any:
        """A mask's nested lists: every leaf 0 or 1 (checked before the shape, so 0.5 or true is named as such)."""
        if isinstance(value, list):
            if not value:
                raise self.fail(path, msg("expected rows of 0 and 1, received an empty list"))
            for i, item in enumerate(value):
                self.entries(item, path + (i,))
        elif isinstance(value, bool) or value not in (0, 1):
            raise self.fail(path, msg("expected 0 (masked) or 1 (may attend), received {got}", got=self.received(path, value)))
        return value

    # -- steps ------------------------------------------------------------
    def template(self, raw: Any, block: BlockSpec, dims: Dims) -> tuple[Step, ...]:
        """One layer's steps: a preset, or the spec's own list (validated, shapes checked)."""
        if raw is None:
            return ()
        sizes = dims.as_dict()
        shapes: dict[str, Shape] = {"x": (("B", "T", "C"), (dims.B, dims.T, dims.C))}
        p: Path = ("block", "steps")
        if not isinstance(raw, list) or not raw:
            got = msg("an empty list") if raw == [] else self.received(p, raw)
            raise self.fail(p, msg("expected a list of steps such as {name: norm1, op: layer_norm, in: x, weights: norm1}, received {got}", got=got))
        return tuple(self.step(item, p + (i,), shapes, sizes) for i, item in enumerate(raw))

    def expand(self, model: str, block: BlockSpec, encoder: BlockSpec | None, template: tuple[Step, ...], dims: Dims,
               uses_tokens: bool) -> tuple[tuple[Step, ...], dict[str, Shape]]:
        """Entry, layers, final norm and head as one flat step list, with every stage's shape."""
        steps: list[Step] = []
        memory = None
        if model == "encoder-decoder":
            assert encoder is not None
            es = encoder.settings()
            entry, x = blocks.entry(blocks.ENCODER, "source", es, True)
            layer = blocks.configure(blocks.NORM_ORDERS[encoder.norm_order], es, preset=True)
            body, last = blocks.expand(layer, blocks.ENCODER, encoder.layers, x, None, plain=False)
            steps += entry + body
            if encoder.final_norm:
                steps.append(blocks.final_norm(blocks.ENCODER, last, es))
                last = steps[-1].name
            memory = last
            ds = block.settings()
            entry, x = blocks.entry("decoder.", "target", ds, True)
            layer = blocks.configure(blocks.DECODER_NORM_ORDERS[block.norm_order], ds, preset=True)
            body, last = blocks.expand(layer, "decoder.", block.layers, x, memory, plain=False)
            steps += entry + body
            prefix = "decoder."
        else:
            ds = block.settings()
            entry, x = blocks.entry("", "tokens" if uses_tokens else "x", ds, uses_tokens, projected=dims.C_e is not None)
            preset = not template
            order = blocks.PRE_NORM_MOE if block.experts is not None and preset else blocks.NORM_ORDERS.get(block.norm_order, ())
            layer = blocks.configure(order if preset else template, ds, preset=preset)
            body, last = blocks.expand(layer, "", block.layers, x, None, plain=block.layers == 1, sliding=block.sliding_layers)
            steps += entry + body
            prefix = ""
        if block.final_norm:
            if any(s.name == prefix + "final_norm" for s in steps):
                raise self.fail(("block", "final_norm"), join([msg("a step is already named final_norm"), msg("rename it, or drop final_norm: true")]))
            steps.append(blocks.final_norm(prefix, last, block.settings()))
            last = steps[-1].name
        if block.head != "none" and dims.C_e is not None:  # OPT's project_out: C -> C_e, the embedding's width the head reads
            steps.append(blocks.project_out(last))
            last = steps[-1].name
        if block.head != "none" and block.head_scale:  # T5's tied head: the output times C ** -0.5 first, a stage of its own
            steps.append(blocks.head_scale(prefix, last))
            last = steps[-1].name
        if block.head != "none":
            steps += blocks.head_steps(last, block.head_softcap)
        sizes = dims.as_dict()
        shapes: dict[str, Shape] = {}
        step_names = {s.name for s in steps}
        for step in steps:
            ins = [shapes[i] for i in step.inputs]
            try:
                shapes[step.name] = output_shape(step, ins, sizes, blocks.position_axis(step.name))
            except ValueError as e:
                if step.name.endswith("final_norm") and step.op in NORMS.values():
                    raise self.fail(("block", "final_norm"), msg("the final normalisation reads the last step, {inputs}: {e}", inputs=step.inputs[0], e=message_of(e))) from None
                raise self.fail(("block",), msg("step {name}: {e}", name=step.name, e=message_of(e))) from None  # a custom layer that clashes once stacked
            if step.op in ("mha", "cross_mha"):
                internals = blocks.attention_internals(step, ins[0], ins[1] if step.op == "cross_mha" else ins[0], sizes)
                taken = [n for n in internals if n in shapes or n in step_names]
                if taken:
                    raise self.fail(("block",), join([msg("step {name} records its attention internals as {prefix}.*, but stage {stage} already exists", name=step.name, prefix=taken[0].rsplit('.', 1)[0], stage=repr(taken[0])), msg("rename one of the steps")]))
                shapes.update(internals)
        return tuple(steps), shapes

    def step(self, raw: Any, path: Path, shapes: dict[str, Shape], sizes: dict[str, int]) -> Step:
        raw = self.keys(raw, path, STEP_KEYS, msg("step fields"))
        for key in ("name", "op", "in"):
            if key not in raw:
                raise self.fail(path, msg("a step needs {key} (e.g. {name: norm1, op: layer_norm, in: x, weights: norm1})", key=repr(key)))
        name = raw["name"]
        if not isinstance(name, str) or not name or not all(ch.isalnum() or ch in "_-" for ch in name):
            raise self.fail(path + ("name",), msg("expected a stage name of letters, digits, _ and -, received {got}", got=self.received(path + ('name',), name)))
        if name in shapes or name in RESERVED_STAGES or name in ("logits", "probs", "project_in", "project_out", blocks.RAW_LOGITS):
            raise self.fail(path + ("name",), join([msg("stage {name} is already defined", name=repr(name)), msg("every step records a stage of its own")]))
        user_ops = tuple(k for k, v in OPS.items() if v.user)
        if isinstance(raw["op"], str) and raw["op"] not in user_ops:
            close = _close_matches(raw["op"], list(user_ops), n=1, cutoff=0.5)
            hint = _did_you_mean(close, msg("known ops: {ops}", ops=', '.join(user_ops)))
            raise self.fail(path + ("op",), join([msg("unknown op {op}", op=repr(raw['op'])), hint]))
        op = self.choice(raw["op"], path + ("op",), user_ops)
        info = OPS[op]
        ins = raw["in"] if isinstance(raw["in"], list) else [raw["in"]]
        for j, i in enumerate(ins):
            ipath = path + (("in", j) if isinstance(raw["in"], list) else ("in",))
            if not isinstance(i, str):
                raise self.fail(ipath, msg("expected the name of a stage before this step (e.g. in: x, or in: [x, attention]), received {got}", got=self.received(ipath, i)))
        if len(ins) != info.arity:
            raise self.fail(path + ("in",), nmsg("{op} reads {n} stage, received {m}", "{op} reads {n} stages, received {m}", info.arity, op=op, m=len(ins)))
        for j, i in enumerate(ins):
            ipath = path + (("in", j) if isinstance(raw["in"], list) else ("in",))
            if i not in shapes:
                known = [k for k in shapes if "." not in k]
                close = _close_matches(str(i), known, n=1, cutoff=0.5)
                hint = _did_you_mean(close, msg("stages so far: {names}", names=', '.join(known)))
                raise self.fail(ipath, join([msg("no stage {name} before this step", name=repr(i)), hint]))
        weights = raw.get("weights")
        if info.weights is not None:
            if not isinstance(weights, str) or not weights or not all(ch.isalnum() or ch == "_" for ch in weights):
                raise self.fail(path, msg("{op} needs weights: the name of its weight group (e.g. weights: {x})", op=op, x='norm1' if op.endswith('norm') else op))
            if weights in TABLES or weights in ("blocks", "encoder", "decoder", "final_norm"):
                raise self.fail(path + ("weights",), msg("{weights} is a reserved name; choose another weight group name", weights=repr(weights)))
        elif weights is not None:
            raise self.fail(path + ("weights",), msg("{op} takes no weights", op=op))
        axis = raw.get("axis")
        if axis is not None or op == "select":
            if not info.axes:
                raise self.fail(path + ("axis",), msg("{op} takes no axis", op=op))
            axis = self.choice(axis, path + ("axis",), info.axes)
        start = stop = None
        if op == "select":
            if "index" in raw:
                start = self.integer(raw["index"], path + ("index",), 0)
                stop = start + 1
            else:
                start = self.integer(raw.get("start", 0), path + ("start",), 0)
                stop = self.integer(raw.get("stop", start + 1), path + ("stop",), 1)
        else:
            for key in ("index", "start", "stop"):
                if key in raw:
                    raise self.fail(path + (key,), msg("only select takes {key}", key=key))
        out = None
        if op == "linear":
            out = self.choice(raw.get("out", "C"), path + ("out",), ("C", "F"))
        elif "out" in raw:
            raise self.fail(path + ("out",), msg("only linear takes out"))
        activation = None
        if "activation" in raw:
            if op not in ("ffn", "ffn_hidden"):
                raise self.fail(path + ("activation",), msg("only ffn and ffn_hidden take an activation"))
            activation = self.choice(raw["activation"], path + ("activation",), spec_activations())
        meaning = raw.get("meaning", info.meaning)
        if not isinstance(meaning, str):
            raise self.fail(path + ("meaning",), msg("expected text, received {got}", got=self.received(path + ('meaning',), meaning)))
        if "meaning" in raw:  # the spec's own words (a built-in meaning word for word is that meaning)
            meaning = blocks.known_meaning(yamlio.printable(meaning))
        step = Step(name, op, tuple(ins), weights, meaning, axis, start, stop, out, activation=activation)
        try:
            shapes[name] = output_shape(step, [shapes[i] for i in ins], sizes)
        except ValueError as e:
            raise self.fail(path, message_of(e)) from None
        if op == "mha":
            shapes.update(blocks.attention_internals(step, shapes[ins[0]], shapes[ins[0]], sizes))
        return step

    # -- input ------------------------------------------------------------
    def token_ids(self, value: Any, path: Path, vocab: tuple[str, ...] | None) -> tuple[list[list[int]], tuple[int, int]]:
        """Token ids [B][T] from ids or words (when the spec has a vocab)."""
        index = {w: i for i, w in enumerate(self.words)} if vocab else {}

        def convert(v: Any, p: Path) -> Any:
            if isinstance(v, list):
                if not v:
                    raise self.fail(p, msg("expected token ids or words, received an empty list"))
                return [convert(item, p + (i,)) for i, item in enumerate(v)]
            word = self.src.raw.get(p)
            if isinstance(v, bool) and (vocab is None or word not in index):
                what = msg("a token id or a word of the vocab") if vocab else msg("a whole number (token id)")
                raise self.fail(p, msg("expected {what}, received {got}", what=what, got=self.received(p, v)))
            if vocab is not None and (isinstance(v, (str, bool)) or (word is not None and word in index and not isinstance(v, int))):
                w = word if word is not None else str(v)
                if w not in index:
                    close = _close_matches(w, list(index), n=1, cutoff=0.5)
                    hint = _did_you_mean(close, msg("the vocab has {n} words", n=len(index)))
                    raise self.fail(p, join([msg("{w} is not in the vocab", w=repr(w)), hint]))
                return index[w]
            if isinstance(v, int):
                if v < 0:
                    raise self.fail(p, msg("token ids must be 0 or more, received {v}", v=v))
                return v
            if vocab:
                raise self.fail(p, msg("expected a token id or a word of the vocab, received {got}", got=self.received(p, v)))
            if isinstance(v, str):
                raise self.fail(p, msg("expected {what}, received {got} (add a vocab list to write tokens as words)", what=msg("a whole number (token id)"), got=self.received(p, v)))
            raise self.fail(p, msg("expected {what}, received {got}", what=msg("a whole number (token id)"), got=self.received(p, v)))

        rows = convert(value, path)
        shape = self.rect(rows, path)
        if len(shape) == 1:
            rows, shape = [rows], (1,) + shape
        if len(shape) != 2:
            raise self.fail(path, msg("expected a list of token ids [T] or one list per sample [B,T], received {shape}", shape=_levels(shape)))
        return rows, (shape[0], shape[1])

    def input(self, raw: Any, given: dict[str, int], seed: int | None, vocab: tuple[str, ...] | None) -> tuple[InputSpec, int, int, int | None]:
        raw = self.keys(raw, ("input",), INPUT_KEYS, msg("input"))
        if len(raw) != 1:
            raise self.fail(("input",), msg("give exactly one of tokens (ids into weights.embedding) or x (a [T,C] or [B,T,C] matrix)"))
        kind, value = next(iter(raw.items()))
        path: Path = ("input", kind)
        if value == "random":
            if seed is None:
                raise self.fail(path, msg("'random' input needs a seed (add seed: 0)"))
            if "T" not in given:
                raise self.fail(("dims",), msg("'random' input needs dims.T"))
            return InputSpec(kind, "random"), given.get("B", 1), given["T"], None
        if kind == "tokens":
            rows, (B, T) = self.token_ids(value, path, vocab)
            return InputSpec("tokens", rows), B, T, max(t for r in rows for t in r)
        rows = self.nested(value, path, want_int=False)
        shape = self.rect(rows, path)
        if len(shape) == 2:
            rows, shape = [rows], (1,) + shape
        if len(shape) != 3:
            raise self.fail(path, msg("expected a [T,C] or [B,T,C] matrix, received {shape}", shape=_levels(shape)))
        return InputSpec("x", rows), shape[0], shape[1], None

    def seq2seq_input(self, raw: Any, given: dict[str, int], seed: int | None, vocab: tuple[str, ...] | None
                      ) -> tuple[InputSpec, InputSpec, int, int, int, int | None]:
        raw = self.keys(raw, ("input",), SEQ2SEQ_INPUT_KEYS, msg("encoder-decoder input"))
        found: dict[str, tuple[InputSpec, int, int]] = {}
        max_token: int | None = None
        for key, letter in (("source", "S"), ("target", "T")):
            if key not in raw:
                raise self.fail(("input",), msg("an encoder-decoder needs input.{key} (token ids or words)", key=key))
            value, path = raw[key], ("input", key)
            if value == "random":
                if seed is None:
                    raise self.fail(path, msg("'random' input needs a seed (add seed: 0)"))
                if letter not in given:
                    raise self.fail(("dims",), msg("'random' {key} tokens need dims.{letter}", key=key, letter=letter))
                found[key] = (InputSpec("tokens", "random"), given.get("B", 1), given[letter])
                continue
            rows, (B, n) = self.token_ids(value, path, vocab)
            found[key] = (InputSpec("tokens", rows), B, n)
            top = max(t for r in rows for t in r)
            max_token = top if max_token is None else max(max_token, top)
        (src, B_s, S), (tgt, B_t, T) = found["source"], found["target"]
        if B_s != B_t:
            raise self.fail(("input", "target"), msg("source has B = {B_s} samples but target has B = {B_t}", B_s=B_s, B_t=B_t))
        return src, tgt, B_s, S, T, max_token

    def vocab_size(self, given: dict[str, int], weights_raw: dict[str, Any], max_token: int | None, uses_tokens: bool,
                   vocab: tuple[str, ...] | None) -> int | None:
        if not uses_tokens:
            if "embedding" in weights_raw:
                raise self.fail(("weights", "embedding"), msg("an embedding table is given but the input is x, not tokens"))
            if vocab is not None:
                raise self.fail(("vocab",), msg("a vocab is given but the input is x, not tokens"))
            return given.get("V")
        self.vocab_given = vocab is not None
        if vocab is not None:
            if "V" in given and given["V"] != len(vocab):
                raise self.fail(("dims", "V"), msg("V = {V} but the vocab has {n} words", V=given['V'], n=len(vocab)))
            given = dict(given, V=len(vocab))
        default = None if max_token is None else max_token + 1
        if default is not None and default > MAX_DIM and given.get("V") is None and not isinstance(weights_raw.get("embedding"), list):
            where: Path = ("input", "tokens") if ("input", "tokens") in self.src.marks else ("input",)
            raise self.fail(where, msg("token id {max_token} is out of range: with no embedding table and no dims.V, V is the largest token id + 1, at most {MAX_DIM} (ids 0 to {x})", max_token=yamlio.abbreviate(str(max_token)), MAX_DIM=f"{MAX_DIM:,}", x=f"{MAX_DIM - 1:,}"))
        return self.table_rows(weights_raw, "embedding", given.get("V"), default=default)

    def table_rows(self, weights_raw: dict[str, Any], name: str, declared: int | None, default: int | None) -> int:
        letter = TABLES[name][0]
        value = weights_raw.get(name)
        rows_in_file = self.file_rows(name, value)
        if rows_in_file is not None:
            if declared is not None and declared != rows_in_file:
                source = msg("the vocab has {n} words", n=declared) if letter == "V" and self.vocab_given else msg("dims.{letter} = {n}", letter=letter, n=declared)
                raise self.fail(("weights", name), msg("the table in the checkpoint has {rows_in_file} rows but {source}", rows_in_file=rows_in_file, source=source))
            return rows_in_file
        if isinstance(value, list) and value:
            rows = len(value)
            if declared is not None and declared != rows:
                source = msg("the vocab has {n} words", n=declared) if letter == "V" and self.vocab_given else msg("dims.{letter} = {n}", letter=letter, n=declared)
                raise self.fail(("weights", name), msg("table has {rows} rows but {source}", rows=rows, source=source))
            return rows
        if declared is not None:
            return declared
        if default is None:
            raise self.fail(("dims",), msg("dims.{letter} is needed to draw weights.{name} from the seed", letter=letter, name=name))
        return default

    # -- weights ----------------------------------------------------------
    def weights(self, raw: dict[str, Any], dims: Dims, seed: int | None, steps: tuple[Step, ...], shapes: dict[str, Shape],
                model: str, block: BlockSpec, encoder: BlockSpec | None) -> dict[str, Weight]:
        """Every weight the steps read, checked against the spec's weights section (which holds nothing else)."""
        wanted: dict[str, dict[str, tuple[str, ...]] | tuple[str, ...]] = {}
        kinds: dict[str, str] = {}
        for step in steps:
            kind = group_kind(step)
            if kind is None or step.weights is None:
                continue
            group = step.weights
            if kind == "relative_bias":  # T5: each stack's own table, named by its prefix (encoder.relative_bias)
                wanted.setdefault(group, TABLES[kind])
                continue
            if kind in TABLES:
                width = TABLES[kind]
                if dims.C_e is not None and kind in ("embedding", "head"):  # the embedding is C_e wide (OPT's word_embed_proj_dim)
                    width = tuple("C_e" if letter == "C" else letter for letter in width)
                if kind == "head" and block.head_bias:
                    wanted.setdefault("head_bias", TABLES["head_bias"])
                if kind == "head" and block.head == "tied":
                    wanted.setdefault("embedding", width[::-1])
                    continue
                wanted.setdefault(kind, width)
                continue
            keys = blocks.group_keys(kind, dims.H_kv is not None, dims.E or 0, dims.own_head_width, bool(step.qk_norm))
            if kind == "linear":
                in_letter = shapes[step.inputs[0]][0][-1]
                keys = {"w": (in_letter, step.out or "C"), "b": (step.out or "C",)}
            if group in kinds:
                if kinds[group] != kind or wanted[group] != keys:
                    raise self.fail(("block",), msg("step {name}: weight group {group} is shared by steps that need different weights ({kinds} and {kind})", name=step.name, group=repr(group), kinds=kinds[group], kind=kind))
                continue
            kinds[group] = kind
            wanted[group] = keys
        self.check_weight_keys(raw, wanted, dims, block, encoder)

        out: dict[str, Weight] = {}
        for name, spec in wanted.items():
            ypath = group_yaml_path(name)
            value = self.lookup(raw, ypath[1:])
            if isinstance(spec, tuple):
                out[name] = self.weight(value, ypath, name, spec, dims, seed)
                continue
            for key in ("q_norm", "k_norm"):  # block.qk_norm's weights, given to a block without it
                if isinstance(value, dict) and key in value and key not in spec and "w_q" in spec:
                    raise self.fail_key(ypath + (key,), msg("{key} is a weight of block.qk_norm (the per-head RMSNorm of q and k), but block.qk_norm is false", key=key))
            group_raw = self.keys(value if value is not None else {}, ypath, tuple(spec), msg("{name} weights", name=name))
            for key, axes in spec.items():
                fill = "zeros" if kinds.get(name) == "rms_offset" and key == "gamma" else DEFAULT_FILL.get(key)  # the scale 1 + 0
                out[f"{name}.{key}"] = self.weight(group_raw.get(key), ypath + (key,), f"{name}.{key}", axes, dims, seed, fill)
        return out

    def lookup(self, raw: Any, path: Path) -> Any:
        node = raw
        for part in path:
            if isinstance(part, int):
                node = node[part] if isinstance(node, list) and part < len(node) else None
            else:
                node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                return None
        return node

    def check_weight_keys(self, raw: dict[str, Any], wanted: dict[str, Any], dims: Dims, block: BlockSpec,
                          encoder: BlockSpec | None) -> None:
        """No key in the weights section that no step reads; 'blocks' lists one mapping per layer."""
        tree: dict[str, Any] = {}
        for name in wanted:
            node = tree
            parts = name.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = "leaf"  # a table or a weight group: its own keys are checked where it is read

        def walk(value: Any, expect: dict[str, Any], path: Path) -> None:
            if not isinstance(value, dict):
                raise self.fail(path, msg("expected a mapping of weights, received {got}", got=self.received(path, value)))
            for key, sub in value.items():
                if key not in expect:
                    unused = self.unused_reason(str(key), path, block, encoder)
                    if unused:
                        raise self.fail_key(path + (key,), unused)
                    close = _close_matches(str(key), [str(k) for k in expect], n=1, cutoff=0.5)
                    hint = _lookalike(key, list(expect)) or _did_you_mean(close, msg("the model reads: {names}", names=', '.join(map(str, expect))) if expect else "")
                    what = msg("weight group") if isinstance(sub, dict) else msg("weight")
                    raise self.fail_key(path + (key,), join([msg("{what} {key} is given but nothing in the model reads it", what=what, key=repr(key)), hint]))
                nested = expect[key]
                if nested == "leaf":
                    continue
                if key == "blocks":
                    n = len(nested)
                    if not isinstance(sub, list) or len(sub) != n:
                        got = msg("{n} entries", n=len(sub)) if isinstance(sub, list) else self.received(path + (key,), sub)
                        raise self.fail(path + (key,), nmsg("expected a list of {n} layer mapping (one per layer), received {got}", "expected a list of {n} layer mappings (one per layer), received {got}", n, got=got))
                    for i, item in enumerate(sub):
                        walk(item, nested[str(i)], path + (key, i))
                else:
                    walk(sub, nested, path + (key,))

        walk(raw, tree, ("weights",))

    def unused_reason(self, key: str, path: Path, block: BlockSpec, encoder: BlockSpec | None) -> Message | str:
        """Why a weight the spec gives is read by nothing ("" if it is simply unknown)."""
        sec = "decoder" if encoder is not None else "block"
        if key == "position" and len(path) == 1:
            return msg("a position table is given but {sec}.positions is {positions}", sec=sec, positions=block.positions)
        if key == "final_norm":
            return msg("final_norm weights are given but {sec}.final_norm is false", sec=sec)
        if key == "head" and len(path) == 1:
            return msg("an output head matrix is given but {sec}.head is {head} (use head: separate)", sec=sec, head=block.head)
        if key == "embedding" and len(path) == 1:
            return msg("an embedding table is given but the input is x, not tokens")
        return ""

    def weight(self, value: Any, path: Path, name: str, axes: tuple[str, ...], dims: Dims, seed: int | None, fill: str | None = None) -> Weight:
        want = tuple(dims.size(a) for a in axes)
        label = shape_label(axes, want)
        if isinstance(value, dict):
            return Weight(name, axes, want, "file", self.file_weight(value, path, name, label, want))
        if value is None and self.model_source is not None:
            from tracer.checkpoints import refs

            try:
                ref = refs.model_ref(self.model_source, self.layer_name(name), label, want, name, dims.H)
            except refs.CheckpointError as e:
                raise SpecError(e.message) from None
            if ref is not None:
                return Weight(name, axes, want, "file", ref)
        if value is None:
            if fill is not None:
                return Weight(name, axes, want, fill)
            if seed is None:
                raise self.fail(path, msg("missing weight {name} {label}, and there is no seed to draw it from (give it, or add seed: 0)", name=name, label=label))
            return Weight(name, axes, want, "seed")
        if isinstance(value, str):
            word = self.choice(value, path, KEYWORDS)
            if word == "identity" and (len(want) != 2 or want[0] != want[1]):
                raise self.fail(path, msg("identity needs a square matrix, but {name} is {label}", name=name, label=label))
            if word == "random":
                if seed is None:
                    raise self.fail(path, msg("'random' needs a seed (add seed: 0)"))
                word = "seed"
            return Weight(name, axes, want, word)
        rows = self.nested(value, path, want_int=False)
        shape = self.rect(rows, path)
        if name == "position":
            if len(shape) != 2 or shape[1] != dims.C:
                raise self.fail(path, msg("expected [T_max,C] = [T_max,{C}], received {shape}", C=dims.C, shape=_fmt(shape)))
            return Weight(name, axes, shape, "given", rows, shape)
        if shape != want:
            # A vector NumPy would stretch (beta: [0] for [C]) is let through: the kernel flags it as a
            # broadcast violation, because that is exactly the mistake NumPy would have accepted.
            if len(want) == 1 and _broadcastable(shape, want):
                return Weight(name, axes, want, "given", rows, shape)
            raise self.fail(path, msg("expected {label}, received {shape}", label=label, shape=_fmt(shape)))
        return Weight(name, axes, want, "given", rows, shape)

    # -- weights from checkpoint files ------------------------------------
    def spec_dir(self) -> str:
        import os

        return os.path.dirname(self.src.filename) if not self.src.filename.startswith("<") else ""

    def model_file(self, raw: dict[str, Any]) -> Any:
        """weights: {file: ..., layout: ..., first_layer: N}: open the checkpoint (headers only) and pick the layout."""
        from tracer.checkpoints import families as layouts
        from tracer.checkpoints import refs

        raw = self.keys(raw, ("weights",), MODEL_FILE_KEYS, msg("weights from a checkpoint"))
        path: Path = ("weights", "file")
        file = raw["file"]
        if not isinstance(file, str) or not file:
            raise self.fail(path, msg("expected the path of a checkpoint file or model folder, received {got}", got=self.received(path, file)))
        self.confined(path, file)
        try:
            ckpt = refs.open_checkpoint(refs.resolve(self.spec_dir(), file))
            layout_name = raw.get("layout")
            if layout_name is None:
                layout_name = layouts.infer(layouts.config_of(ckpt))
                if layout_name is None:
                    raise self.fail(path, msg("which layout? add layout: {names} (the checkpoint has no config.json whose model_type names one)", names=' | '.join(layouts.names())))
        except refs.CheckpointError as e:
            raise self.fail(path, e.message) from None
        layout = layouts.layouts().get(layout_name) if isinstance(layout_name, str) else None
        if layout is None:
            raise self.fail(("weights", "layout"), msg("expected {what}, received {got}", what=msg("one of {options}", options=' | '.join(layouts.names())), got=self.received(('weights', 'layout'), layout_name)))
        first = self.integer(raw.get("first_layer", 0), ("weights", "first_layer"), 0, 100_000)
        self.allow_unread = self.boolean(raw.get("allow_unread", False), ("weights", "allow_unread"))
        return refs.ModelSource(ckpt, layout, first, f"{self.src.where(path)}: {format_path(path)}")

    # -- i27-lens: tokenizer: and input.text -----------------------------
    def tokenizer_file(self, raw: Any) -> str | None:
        """tokenizer: the path of a tokenizer.json, relative to the spec's folder (as a weight file)."""
        if raw is None:
            return None
        path: Path = ("tokenizer",)
        if not isinstance(raw, str) or not raw:
            raise self.fail(path, msg("expected the path of a tokenizer.json, received {got}", got=self.received(path, raw)))
        self.confined(path, raw)
        from tracer.checkpoints import refs
        from tracer.checkpoints import tokenizer as tokenizers

        file = refs.resolve(self.spec_dir(), raw)
        try:
            tokenizers.load(file)
        except (tokenizers.CheckpointError, UsageError) as e:
            raise self.fail(path, e.message) from None
        return file

    def text_input(self, raw: dict[str, Any]) -> dict[str, Any]:
        """input: {text: "...", special: false}: the text tokenized with the spec's tokenizer, as input.tokens."""
        path: Path = ("input", "text")
        text = raw["text"]
        if not isinstance(text, str) or not text:
            raise self.fail(path, msg("expected the text to tokenize, received {got}", got=self.received(path, text)))
        if "tokens" in raw or "x" in raw:
            raise self.fail(("input",), msg("give exactly one of tokens (ids into weights.embedding) or x (a [T,C] or [B,T,C] matrix)"))
        if self.tokenizer_path is None:
            raise self.fail(path, msg("input.text is tokenized with the checkpoint's own tokenizer: add tokenizer: tokenizer.json (its path, relative to this spec)"))
        special = self.boolean(raw.get("special", True), ("input", "special"))
        from tracer.checkpoints import tokenizer as tokenizers

        try:
            enc = tokenizers.encode(tokenizers.load(self.tokenizer_path), text, special)
        except (tokenizers.CheckpointError, UsageError) as e:
            raise self.fail(path, e.message) from None
        if not enc.ids:
            raise self.fail(path, msg("the tokenizer makes no token of this text"))
        self.text, self.specials_added = text, enc.added
        return {k: v for k, v in raw.items() if k not in ("text", "special")} | {"tokens": list(enc.ids)}

    def confined(self, path: Path, file: str) -> None:
        """--confine: a reference outside the folder is refused before anything there is looked at, naming only
        the reference as the spec writes it."""
        from tracer.checkpoints import refs

        if outside_confinement(refs.resolve(self.spec_dir(), file)):
            raise self.fail(path, msg("{file} is outside the folder --confine allows; a spec may refer only to files inside it", file=repr(file)))

    def read_whole(self, weights: dict[str, Weight], block: BlockSpec) -> None:
        """A checkpoint is read whole, or refused: no tensor of what the spec traces may be left unread."""
        from tracer.checkpoints import refs
        from tracer.checkpoints.families.base import named_few

        read = [w.value for w in weights.values() if w.source == "file" and isinstance(w.value, refs.TensorRef)]
        left = refs.unread(self.model_source, read, block.head == "tied")
        if left:
            raise self.fail(("weights", "file"), nmsg(
                "the {layout} layout leaves {n} tensor of what this spec traces unread: {names}; without it the trace is not the checkpoint's model (add allow_unread: true under weights to trace it anyway)",
                "the {layout} layout leaves {n} tensors of what this spec traces unread: {names}; without them the trace is not the checkpoint's model (add allow_unread: true under weights to trace it anyway)",
                len(left), layout=self.model_source.layout.name, names=named_few(left)))

    def layer_name(self, name: str) -> str:
        """A one-layer decoder's weights are named without 'blocks.0.' (attn.w_q); a layout's table always has it."""
        if name in TABLES or name.startswith(("blocks.", "encoder.", "decoder.", "final_norm.", "embed_norm.", "project_in.", "project_out.")):
            return name
        return "blocks.0." + name

    def file_ref_fields(self, raw: dict[str, Any], path: Path) -> tuple[str, str | None, bool]:
        raw = self.keys(raw, path, FILE_KEYS, msg("fields of a weight read from a file"))
        if "file" not in raw:
            raise self.fail(path, msg("a weight given as a mapping reads a file: {file: w.npz, key: attn_q}"))
        file, key = raw["file"], raw.get("key")
        if not isinstance(file, str) or not file:
            raise self.fail(path + ("file",), msg("expected the path of a .npz, .npy, .safetensors or .pt file, received {got}", got=self.received(path + ('file',), file)))
        if key is not None and not isinstance(key, str):
            raise self.fail(path + ("key",), msg("expected the name of a tensor in the file, received {got}", got=self.received(path + ('key',), key)))
        transpose = self.boolean(raw.get("transpose", False), path + ("transpose",))
        self.confined(path + ("file",), file)
        from tracer.checkpoints import refs

        return refs.resolve(self.spec_dir(), file), key, transpose

    def file_weight(self, raw: dict[str, Any], path: Path, name: str, label: str, want: tuple[int, ...]) -> Any:
        """w_q: {file: w.npz, key: attn_q}: the tensor's key and shape checked from the file's header."""
        file, key, transpose = self.file_ref_fields(raw, path)
        from tracer.checkpoints import refs

        try:
            return refs.file_ref(file, key, transpose, name, label, want, f"{self.src.where(path)}: {format_path(path)}")
        except refs.CheckpointError as e:
            raise SpecError(e.message) from None

    def file_rows(self, name: str, value: Any) -> int | None:
        """Rows of a table read from a file (a whole-model checkpoint or {file: ...}): None when it is not."""
        from_file = isinstance(value, dict) or (value is None and self.model_source is not None)
        if not from_file:
            return None
        from tracer.checkpoints import refs

        if isinstance(value, dict):
            path: Path = ("weights", name)
            file, key, transpose = self.file_ref_fields(value, path)
            try:
                rows = refs.table_rows(file, key, transpose, f"{self.src.where(path)}: {format_path(path)}")
            except refs.CheckpointError as e:
                raise SpecError(e.message) from None
            return rows if rows > 0 else None
        return self.model_source.rows(name)

    # -- nested lists -----------------------------------------------------
    def nested(self, value: Any, path: Path, want_int: bool) -> Any:
        """Check every leaf is a number (an int for token ids); return the value."""
        if isinstance(value, list):
            if not value:
                raise self.fail(path, msg("expected numbers, received an empty list"))
            for i, item in enumerate(value):
                self.nested(item, path + (i,), want_int)
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            what = msg("a whole number (token id)") if want_int else msg("a number")
            raise self.fail(path, msg("expected {what}, received {got}", what=what, got=self.received(path, value)))
        if want_int and not isinstance(value, int):
            raise self.fail(path, msg("expected a whole number (token id), received {value}", value=repr(value)))
        if not want_int and not math.isfinite(value) and not self.allow_nonfinite:
            raise self.fail(path, msg("received {value} (not finite); add allow_nonfinite: true to study NaN and Inf on purpose", value=value))
        return value

    def rect(self, value: Any, path: Path) -> tuple[int, ...]:
        """Shape of a rectangular nested list; ragged lists are errors naming the row."""
        if not isinstance(value, list):
            return ()
        shapes = [self.rect(item, path + (i,)) for i, item in enumerate(value)]
        first = shapes[0]
        for i, s in enumerate(shapes):
            if s != first:
                raise self.fail(path + (i,), msg("ragged: row {i} has shape {s} but row 0 has {first}", i=i, s=_fmt(s), first=_fmt(first)))
        return (len(value),) + first


def _levels(shape: tuple[int, ...]) -> str:
    n = len(shape)
    return msg("a single value") if n == 0 else nmsg("{n} level of nesting", "{n} levels of nesting", n)


def _fmt(shape: tuple[int, ...]) -> str:
    return msg("a single number") if not shape else "[" + ",".join(str(n) for n in shape) + "]"
