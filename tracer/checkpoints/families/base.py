"""What every checkpoint family is made of: the layout record, its table's conversions, and the config it reads.

A family's layout is data: one table, a tracer weight name (``{i}`` stands for a layer) -> a Take,
the checkpoint key it comes from plus the few small conversions real checkpoints need:
- ``split=3, part=1, axis=1``: the middle third of a packed tensor (q, k, v packed in GPT-2's
  ``c_attn`` [C,3C] or PyTorch's ``in_proj_weight`` [3C,C]);
- ``transpose=True``: ``nn.Linear`` stores [out, in]; tracer's matrices are [in, out].
``aliases`` lists key prefixes a checkpoint may write differently (``transformer.h.0...`` for
``h.0...``); the first that exists wins.  A tracer weight the table does not name is drawn from the
spec's seed, as when it is not given (an ``nn.Transformer`` has no embedding table).

A family's config reader, ``(config or None, checkpoint, layout, options) -> ModelConfig``, says what
the spec's dims and block settings are and, for each, where it came from (written into the imported
spec as a comment).  A family declares what it reads as a ``Family``: the config.json fields
(``Field``: type, default or required, the spec setting it becomes), the values it refuses
(``Refusal``, by name), the tensors its sizes come from; ``Family.read`` reads every family in the
same steps and returns a ``Reading``, so a family's file holds only its own tables, rules and
conversions.  It reads config.json through ``Config``, which type-checks every value it
reads (``expected a whole number, received boolean true``), refuses a value the tensors contradict
(n_embd against the embedding's width), and settles each setting from config.json, else the
command line's option (``Options``: --heads, --activation, --eps, --norm-order), else the family's
default, which it records as assumed (``# assumed: no config.json`` in the spec, listed once on
stderr).  An option that contradicts config.json is refused, naming both.  Whatever the config sets
that tracer cannot trace faithfully is refused there, one rule a line in the family's file
(``refuse``), naming the setting, rather than traced wrongly.

``unlisted`` and ``read_whole`` say which of a checkpoint's tensors a layout (or a spec) leaves
unread: each family lists, in ``harmless``, the tensors Hugging Face recomputes and never reads
(GPT-2's attn.bias mask buffer, LLaMA's rotary_emb.inv_freq).

Nothing here imports NumPy, except Take.apply.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer.checkpoints.formats import Checkpoint, received, shape_text
from tracer.errors import CheckpointError
from tracer.messages import Message, at, join, msg
from tracer.model.blocks import TASK_WEIGHTS

if TYPE_CHECKING:
    import numpy as np


class Take(NamedTuple):
    """Where one tracer weight is in a checkpoint, and how it is turned into tracer's shape."""

    key: str  # the checkpoint key; {i} is the layer
    split: int = 0  # packed: the number of equal parts (q, k, v: 3); 0 = not packed
    part: int = 0  # which part
    axis: int = 0  # the stored axis the parts are packed along
    transpose: bool = False  # stored [out, in]: transposed (after the split) to tracer's [in, out]
    optional: bool = False  # a tensor only some checkpoints of the family hold (a bias a config switches on): absent, the
    # weight takes its fill (zeros), as when the layout does not map it; the family's config reader checks config and tensors agree
    heads: int = 0  # packed per head: the axis is [H, split, n] (GPT-NeoX's query_key_value); -1 in a table: the spec's H
    alt: str = ""  # another key for the same weight, tried when ``key`` is absent (T5's gated FFN: wi_0 in place of relu's wi)
    parts: tuple[str, ...] = ()  # packed in unequal parts: each part's width as a dims letter (Phi-3's qkv_proj: C_q, C_kv, C_kv);
    # ``part`` says which, ``axis`` along what; the spec's sizes give the rows (``resolved``); unresolved, the shape is unknown (None)
    rows: tuple[int, ...] = ()  # resolved parts: (start, stop, total) along ``axis``

    def resolved(self, size: Callable[[str], int]) -> Take:
        """A Take of unequal ``parts`` with its rows fixed by the spec's sizes (``size('C_q')``); any other Take as it is."""
        if not self.parts:
            return self
        widths = [size(letter) for letter in self.parts]
        start = sum(widths[:self.part])
        return self._replace(rows=(start, start + widths[self.part], sum(widths)))

    def shape(self, stored: tuple[int, ...]) -> tuple[int, ...] | None:
        """The shape tracer receives from a stored tensor of shape ``stored`` (None if it cannot be split so)."""
        out = list(stored)
        if self.parts:
            if not self.rows or self.axis >= len(out) or out[self.axis] != self.rows[2]:
                return None
            out[self.axis] = self.rows[1] - self.rows[0]
        elif self.split:
            if self.axis >= len(out) or out[self.axis] % self.split:
                return None
            out[self.axis] //= self.split
        return tuple(reversed(out)) if self.transpose else tuple(out)

    def stored_shape(self, want: tuple[int, ...]) -> tuple[int, ...]:
        """The stored shape that gives tracer ``want``."""
        out = list(reversed(want)) if self.transpose else list(want)
        if self.rows and self.axis < len(out):
            out[self.axis] = self.rows[2]
        elif self.split and self.axis < len(out):
            out[self.axis] *= self.split
        return tuple(out)

    def describe(self) -> Message | str:
        """' (part 1 of 3 along axis 0, transposed)': how the stored tensor becomes tracer's weight."""
        words: list[Message] = []
        if self.rows:
            words.append(msg("rows {start} to {stop} of {n} along axis {axis}", start=self.rows[0], stop=self.rows[1] - 1, n=self.rows[2], axis=self.axis))
        elif self.split and self.heads:
            words.append(msg("part {part} of {n} within each head along axis {axis}", part=self.part + 1, n=self.split, axis=self.axis))
        elif self.split:
            words.append(msg("part {part} of {n} along axis {axis}", part=self.part + 1, n=self.split, axis=self.axis))
        if self.transpose:
            words.append(msg("transposed"))
        return msg(" ({how})", how=join(words, ", ")) if words else ""

    def apply(self, a: np.ndarray) -> np.ndarray:  # stored -> tracer's [in, out], an array of its own
        import numpy as np

        if self.rows:
            a = np.take(a, range(self.rows[0], self.rows[1]), axis=self.axis)
        elif self.split and self.heads > 0:  # [.., H * split * n, ..] -> [.., H, split, n, ..]: part j of every head
            n = a.shape[self.axis] // (self.split * self.heads)
            a = np.moveaxis(a, self.axis, 0)
            a = a.reshape((self.heads, self.split, n) + a.shape[1:])[:, self.part].reshape((self.heads * n,) + a.shape[1:])
            a = np.moveaxis(a, 0, self.axis)
        elif self.split:
            n = a.shape[self.axis] // self.split
            a = np.take(a, range(self.part * n, (self.part + 1) * n), axis=self.axis)
        if self.transpose:
            a = a.T
        return np.ascontiguousarray(a)


class ModelConfig(NamedTuple):
    layers: int  # layers in the checkpoint (the decoder's, for an encoder-decoder)
    dims: dict[str, int]  # C, H, F and, where known, V and T_max
    block: dict[str, Any]  # the spec's block settings (the decoder's, for an encoder-decoder)
    notes: dict[str, str]  # setting -> where it came from, written as a comment
    dtype: str  # what the checkpoint stores (float32, bfloat16, ...)
    source: str  # "config.json" or "tensor shapes"
    model: str = "decoder"  # decoder | encoder-decoder
    encoder: dict[str, Any] | None = None  # encoder-decoder: the encoder's settings
    encoder_layers: int = 0
    input: str = "tokens"  # tokens | x: what the first layer reads
    embedding_given: bool = True  # False: the checkpoint has no embedding table (drawn from the seed)
    assumed: tuple[tuple[str, Any], ...] = ()  # (setting, value) not read from a config: '# assumed: ...', listed on stderr
    assumed_why: str = ""  # "no config.json", "not in config.json", "a state dict does not record it"
    options_used: tuple[str, ...] = ()  # the Options fields the family read: any other given is refused
    padding_token: int | None = None  # a token id the input may not hold: RoBERTa numbers a padding token's position padding_idx
    target_start: int | None = None  # an encoder-decoder with a token table (T5): the target's first id, decoder_start_token_id
    foreign: str | None = None  # --not-the-model: config.json's model_type, which the layout does not read (its maths traced instead)


# What a family's Hugging Face modeling code computes in float32 even when the model is float64 (Layout.float32): a
# float64 import diffed against that forward differs by float32's rounding there, and tracer diff says so
# (docs/llama.md#checked-against-hugging-face-and-why-not-to-1e-12; tests/helpers/hf_parity.py lifts them to float64).
RMS_ROTARY_SOFTMAX = msg("RMSNorm, the rotary angles and the softmax")
ROTARY_SOFTMAX = msg("the rotary angles and the softmax")


class Layout(NamedTuple):
    """One checkpoint family: its name (``--layout``, ``weights.layout``), its table and its config reader."""

    name: str
    summary: str
    table: dict[str, Take]
    read_config: Callable[[dict[str, Any] | None, Checkpoint, Layout, Options], ModelConfig]
    aliases: tuple[tuple[str, str], ...] = ()  # (prefix, also written as): ("", "transformer.")
    model_types: tuple[str, ...] = ()  # config.json model_type values this layout reads
    harmless: tuple[str, ...] = ()  # regexes of tensors nothing needs to read (buffers Hugging Face recomputes)
    weights_prefix: str = ""  # when some keys start with it, only those are weights (tracer's --save archive also holds stages)
    differ: tuple[str, ...] = ()  # model_types (prefixes) whose maths differ though their tensors fit: never suggested, refused
    float32: Message | None = None  # what its Hugging Face code computes in float32 in a float64 model (RMS_ROTARY_SOFTMAX); None: nothing

    def find(self, name: str) -> tuple[Take, int | None] | None:
        """The Take for tracer weight ``name`` ('blocks.3.attn.w_q') and its layer, or None if the table has none."""
        for pattern, take in self.table.items():
            m = _regex(pattern).fullmatch(name)
            if m:
                groups = m.groupdict()
                layer = int(groups["i"]) if "i" in groups else None
                return take, layer
        return None

    def candidates(self, key: str) -> list[str]:
        """``key`` and the other ways a checkpoint may write it, in the order tried."""
        out = [key]
        for prefix, other in self.aliases:
            if key.startswith(prefix):
                alt = other + key[len(prefix):]
                if alt not in out:
                    out.append(alt)
        return out

    def locate(self, name: str, keys: set[str] | frozenset[str] | list[str], first_layer: int = 0) -> tuple[Take, bool] | None:
        """The Take for ``name`` with its key as the checkpoint writes it, and whether the key exists.

        None when the layout does not map ``name`` (the spec then draws it from the seed), or maps it to an optional
        tensor this checkpoint does not hold (the spec then gives it its fill).
        """
        found = self.find(name)
        if found is None:
            return None
        take, layer = found
        fields = {"name": name}
        if layer is not None:
            fields["i"] = str(layer + first_layer)
        key = take.key.format(**fields)
        present = keys if isinstance(keys, (set, frozenset)) else frozenset(keys)
        candidates = self.candidates(key) + (self.candidates(take.alt.format(**fields)) if take.alt else [])
        for k in candidates:
            if k in present:
                return take._replace(key=k), True
        if take.optional:
            return None
        # Missing: name it as this checkpoint writes its keys (with the prefix most of its keys have).
        heads = _heads(frozenset(present))
        best = max(candidates, key=lambda k: heads.get(k.split(".", 1)[0], 0))
        return take._replace(key=best), False

    def owner(self, key: str) -> tuple[str | None, tuple[str, int] | None]:
        """What a checkpoint key is to this layout: the tracer weight it maps to (None if none), and its layer.

        The layer is (stack, index): ('blocks.', 3) for 'model.layers.3.mlp.up_proj.weight', also for a key
        the table does not map but that sits in a layer; None for a key outside every layer (wte.weight).
        """
        by_head, anywhere = _reverse(self)
        for take_rx, tracer_key, stack, fixed in by_head.get(key.split(".", 1)[0], []) + anywhere:
            m = take_rx.fullmatch(key)
            if m:
                groups = m.groupdict()
                i = "0" if fixed else groups.get("i") or ""
                name = tracer_key.replace("{name}", groups.get("name") or "").replace("{i}", i)
                layer = (stack, int(i)) if i else _tracer_layer(name)
                return name, layer
        for prefix_rx, stack in _layer_prefixes(self).get(key.split(".", 1)[0], ()):
            m = prefix_rx.match(key)
            if m:
                return None, (stack, int(m.group("i")))
        return None, None

    def weight_keys(self, keys: list[str]) -> list[str]:
        """The keys that are weights (all, unless weights_prefix marks some as the only weights)."""
        p = self.weights_prefix
        return [k for k in keys if k.startswith(p)] if p and any(k.startswith(p) for k in keys) else list(keys)

    def is_harmless(self, key: str) -> bool:
        return any(re.fullmatch(rx, key) for rx in self.harmless)


_HEADS: dict[frozenset[str], dict[str, int]] = {}


def _heads(keys: frozenset[str]) -> dict[str, int]:
    """How many keys start with each first part ('h', 'transformer'), counted once per set of keys (a frozenset keeps
    its hash): a spec with many missing weights costs weights + names, not weights x names."""
    if keys not in _HEADS:
        _HEADS.clear()
        counts: dict[str, int] = {}
        for k in keys:
            head = k.split(".", 1)[0]
            counts[head] = counts.get(head, 0) + 1
        _HEADS[keys] = counts
    return _HEADS[keys]


_REGEX: dict[str, re.Pattern[str]] = {}


def _regex(pattern: str) -> re.Pattern[str]:
    if pattern not in _REGEX:
        text = re.escape(pattern).replace(r"\{i\}", r"(?P<i>\d+)").replace(r"\{name\}", r"(?P<name>.+)")
        _REGEX[pattern] = re.compile(text)
    return _REGEX[pattern]


_Entry = tuple[re.Pattern[str], str, str, bool]
_REVERSE: dict[str, tuple[dict[str, list[_Entry]], list[_Entry]]] = {}
_PREFIXES: dict[str, dict[str, list[tuple[re.Pattern[str], str]]]] = {}


def _written(layout: Layout, key: str) -> list[tuple[str, bool]]:
    """A table key (with {i} and {name} left in) and every way the layout's aliases let a checkpoint write it,
    each with whether that way fixes the layer to 0 (a lone nn.TransformerEncoderLayer's keys have no 'layers.0.')."""
    out = [(key, False)]
    for prefix, other in layout.aliases:
        as_template = re.sub(r"(^|\.)0\.", r"\1{i}.", prefix, count=1)
        for start, fixed in ((prefix, False), (as_template, as_template != prefix)):
            if key.startswith(start) and (other + key[len(start):], fixed) not in out:
                out.append((other + key[len(start):], fixed))
    return out


def _reverse(layout: Layout) -> tuple[dict[str, list[_Entry]], list[_Entry]]:
    """(checkpoint key regex, tracer weight pattern, stack, layer fixed to 0) for every entry of the table and alias of
    its key, by the key's first dotted word ('transformer', 'h', 'wte'), and those whose first word is a pattern: a
    name no entry can match costs one lookup, however many such names a checkpoint holds."""
    if layout.name not in _REVERSE:
        by_head: dict[str, list[_Entry]] = {}
        anywhere: list[_Entry] = []
        for tracer_key, take in layout.table.items():
            stack = tracer_key.split("{i}", 1)[0] if "{i}" in tracer_key else ""
            for written, fixed in _written(layout, take.key) + (_written(layout, take.alt) if take.alt else []):
                entry = (_regex(written), tracer_key, stack, fixed)
                head = written.split(".", 1)[0]
                (anywhere if "{" in head else by_head.setdefault(head, [])).append(entry)
        _REVERSE[layout.name] = (by_head, anywhere)
    return _REVERSE[layout.name]


def _layer_prefixes(layout: Layout) -> dict[str, list[tuple[re.Pattern[str], str]]]:
    """(regex of a layer's key prefix, 'h.3.' or 'model.layers.3.', and its stack), longest first, by the prefix's first word."""
    if layout.name not in _PREFIXES:
        found: dict[str, str] = {}
        for tracer_key, take in layout.table.items():
            if "{i}" not in take.key or "{i}" not in tracer_key:
                continue
            for written, _ in _written(layout, take.key.split("{i}", 1)[0] + "{i}."):
                if written.endswith("{i}."):
                    found.setdefault(written, tracer_key.split("{i}", 1)[0])
        by_head: dict[str, list[tuple[re.Pattern[str], str]]] = {}
        for p, stack in sorted(found.items(), key=lambda kv: -len(kv[0])):
            by_head.setdefault(p.split(".", 1)[0], []).append((re.compile(re.escape(p).replace(r"\{i\}", r"(?P<i>\d+)")), stack))
        _PREFIXES[layout.name] = by_head
    return _PREFIXES[layout.name]


ENDS = ("embedding", "position", "head", "head_bias", "token_type")  # the tables before and after the layers


def _tracer_layer(name: str) -> tuple[str, int] | None:
    """The layer of a tracer weight name: ('blocks.', 1) for 'blocks.1.attn.w_q', ('decoder.blocks.', 0); a one-layer
    spec's 'attn.w_q' is layer 0; None for the tables and final norms before and after the layers."""
    m = re.match(r"((?:encoder\.|decoder\.)?blocks\.)(\d+)\.", name)
    if m:
        return m.group(1), int(m.group(2))
    if name in ENDS or name.split(".")[0] in TASK_WEIGHTS:  # the tables, and the task heads after the layers
        return None
    return None if name.split(".")[-2:-1] in (["final_norm"], ["embed_norm"], ["project_in"], ["project_out"]) else ("blocks.", 0)


def unlisted(ckpt: Checkpoint, layout: Layout) -> list[str]:
    """The checkpoint's tensors the layout maps to no tracer weight (and that are not harmless): a whole import leaves them unread."""
    return [k for k in layout.weight_keys(ckpt.keys()) if layout.owner(k)[0] is None and not layout.is_harmless(k)]


def grouped(keys: list[str]) -> list[str]:
    """Keys with their layer number folded: 'model.layers.{0-1}.self_attn.q_proj.bias' for layers 0 and 1."""
    groups: dict[str, list[int]] = {}
    order: list[str] = []
    for key in keys:
        m = re.search(r"\.(\d+)\.", key)
        pattern, n = (key[:m.start()] + ".{}." + key[m.end():], int(m.group(1))) if m else (key, -1)
        if pattern not in groups:
            groups[pattern] = []
            order.append(pattern)
        groups[pattern].append(n)
    out = []
    for pattern in order:
        ns = sorted(set(groups[pattern]))
        if ns == [-1]:
            out.append(pattern)
            continue
        runs: list[str] = []
        start = prev = ns[0]
        for n in ns[1:] + [-2]:  # -2: the end
            if n == prev + 1:
                prev = n
                continue
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = n
        out.append(pattern.replace("{}", "{" + ",".join(runs) + "}" if len(runs) > 1 or "-" in runs[0] else runs[0]))
    return out


def named_few(keys: list[str], few: int = 4) -> Message:
    """'k1', 'k2', 'k3', 'k4' and 5 more."""
    shown = ", ".join(repr(k) for k in keys[:few])
    return shown if len(keys) <= few else msg("{names} and {n} more", names=shown, n=len(keys) - few)  # type: ignore[return-value]


def layer_count(keys: list[str], pattern: str) -> int:
    """How many layers a checkpoint holds: 1 + the largest {i} of keys matching ``pattern`` ('h.{i}.ln_1.weight')."""
    rx = _regex(pattern)
    found = [int(m.group("i")) for k in keys if (m := rx.fullmatch(k))]
    return max(found) + 1 if found else 0


# -- building tables -------------------------------------------------------------------
def packed_attention(q: str, o: str, split_axis: int, transpose: bool) -> dict[str, Take]:
    """A packed q, k, v weight and bias plus the output projection, as one layer's 'attn' group."""
    out: dict[str, Take] = {}
    for part, letter in enumerate("qkv"):
        out[f"w_{letter}"] = Take(f"{q}.weight" if q.endswith("c_attn") else f"{q}_weight", 3, part, split_axis, transpose)
        out[f"b_{letter}"] = Take(f"{q}.bias" if q.endswith("c_attn") else f"{q}_bias", 3, part, 0)
    out["w_o"] = Take(f"{o}.weight", transpose=transpose)
    out["b_o"] = Take(f"{o}.bias")
    return out


def group(prefix: str, name: str, takes: dict[str, Take]) -> dict[str, Take]:
    """``takes`` as the weights of tracer group ``name`` ('attn', 'norm1') under ``prefix`` ('blocks.{i}.')."""
    return {f"{prefix}{name}.{k}": v for k, v in takes.items()}


def norm(key: str) -> dict[str, Take]:
    """A LayerNorm's weight and bias as tracer's gamma and beta."""
    return {"gamma": Take(f"{key}.weight"), "beta": Take(f"{key}.bias")}


# -- reading configs -------------------------------------------------------------------
def shape_of(ckpt: Checkpoint, layout: Layout, name: str) -> tuple[int, ...] | None:
    """The shape tracer weight ``name`` has in this checkpoint (after the layout's conversion), or None."""
    found = layout.locate(name, ckpt.key_set())
    if found is None or not found[1]:
        return None
    take, _ = found
    return take.shape(ckpt.info(take.key).shape)


def sequence_classifier(cfg: Config, key: str) -> None:
    """A classifier's tensor is read as a sequence classifier's only when config.json's architectures says so: a token
    classifier (or a multiple-choice head) stores the same tensor under the same name and scores every position."""
    names = cfg.raw.get("architectures")
    if not (isinstance(names, list) and any(isinstance(n, str) and n.endswith("ForSequenceClassification") for n in names)):
        raise cfg.refuse(msg("architectures = {names}: tracer reads {key} as a *ForSequenceClassification's head only (a token classifier's "
                             "or a multiple-choice head's scores differ)", names=names if names is not None else "absent", key=repr(key)))


def score_head(cfg: Config, ckpt: Checkpoint, layout: Layout, block: dict[str, Any], dims: dict[str, int], notes: dict[str, str]) -> None:
    """Hugging Face's *ForSequenceClassification on a decoder, when the checkpoint holds its score ([L,C], no bias): the scores
    classifier.logits [B,L] at each sample's last token that is not pad_token_id (the last position without one), and no
    output head (the model has none)."""
    shape = shape_of(ckpt, layout, "classifier.w")
    if shape is None:
        return
    sequence_classifier(cfg, layout.locate("classifier.w", ckpt.key_set())[0].key)  # type: ignore[index]
    pad = cfg.integer("pad_token_id", lo=0)
    block["head"] = "none"
    block.pop("head_bias", None)
    block["classifier"] = {"task": "sequence", "reads": "last"} | ({"pad": pad} if pad is not None else {})
    dims["L"] = shape[-1]
    notes |= {"L": "classes of the score (num_labels; its rows)", "head": "none: a sequence classifier has no output head",
              "classifier": "score at the last token that is not pad_token_id" if pad is not None else "score at the last position (no pad_token_id)"}


def stored_dtype(ckpt: Checkpoint, layout: Layout, name: str) -> str:
    """How the checkpoint stores tracer weight ``name`` (float32, bfloat16, ...)."""
    found = layout.locate(name, ckpt.key_set())
    return ckpt.info(found[0].key).dtype if found is not None and found[1] else "float32"


class Options(NamedTuple):
    """What `tracer import`'s command line says in place of a config: None where it says nothing."""

    heads: int | None = None
    activation: str | None = None
    eps: float | None = None
    norm_order: str | None = None
    not_the_model: bool = False  # --not-the-model: a config.json model_type the layout does not read is traced with its maths


OPTION_OF = {"H": "--heads", "activation": "--activation", "eps": "--eps", "norm_order": "--norm-order"}


def config_path(ckpt: Checkpoint) -> str:
    """Where a checkpoint's config.json is (or would be): beside the weights, or in the model folder."""
    folder = ckpt.path if os.path.isdir(ckpt.path) else os.path.dirname(ckpt.path)
    return os.path.join(folder, "config.json")


class Config:
    """config.json as a family reads it: every value type-checked, every setting with the note of where it came from.

    ``setting`` settles one of the spec's settings: from config.json when it has the key (an option that
    contradicts it is refused, naming both), else from the option, else the family's default, recorded as
    assumed.  Every error is one line: the config's path, the key, expected and received.
    """

    def __init__(self, config: Any, ckpt: Checkpoint, options: Options, family: str, absent: str | None = None) -> None:
        self.path = config_path(ckpt)
        self.absent = absent  # why a setting is assumed, when it is not "no config.json" / "not in config.json"
        if config is not None and not isinstance(config, dict):
            raise CheckpointError(at(self.path, msg("expected {what}, received {got}", what=msg("a mapping of settings"), got=received(config))))
        self.raw: dict[str, Any] = config or {}
        self.exists = config is not None
        self.options = options
        self.family = family
        self.notes: dict[str, str] = {}
        self.assumed: list[tuple[str, Any]] = []
        self.used: set[str] = set()  # the Options fields read

    def record(self) -> dict[str, Any]:
        """What a ModelConfig keeps of this reading: the assumed settings, why, and the options read."""
        return {"assumed": tuple(self.assumed), "assumed_why": self.why_assumed(), "options_used": tuple(sorted(self.used))}

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def fail(self, key: str, what: Message, value: Any) -> CheckpointError:
        return CheckpointError(at(self.path, at(key, msg("expected {what}, received {got}", what=what, got=received(value)))))

    def refuse(self, why: Message) -> CheckpointError:
        """A setting tracer does not model; ``why`` names it ('attention_bias = true: ...')."""
        return CheckpointError(at(self.path, why))

    def integer(self, key: str, lo: int = 1) -> int | None:
        """A whole number (4.0 counts as 4, as in a spec), at least ``lo``; None when absent or null."""
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, msg("a whole number"), value)
        if value < lo:
            raise self.fail(key, msg("a whole number, {lo} or more", lo=lo), value)
        return value

    def number(self, key: str, positive: bool = True, value: Any = None) -> float | None:
        """A finite number (positive unless told); ``value``: one found inside a mapping, named ``key``."""
        value = self.raw.get(key) if value is None else value
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (positive and value <= 0):
            raise self.fail(key, msg("a positive number") if positive else msg("a number"), value)
        return float(value)

    def _typed(self, key: str, ok: Callable[[Any], bool], what: Message) -> Any:
        value = self.raw.get(key)
        if value is not None and not ok(value):
            raise self.fail(key, what, value)
        return value

    def text(self, key: str) -> str | None:
        return self._typed(key, lambda v: isinstance(v, str), msg("text"))

    def flag(self, key: str) -> bool | None:
        return self._typed(key, lambda v: isinstance(v, bool), msg("true or false"))

    def mapping(self, key: str) -> dict[str, Any]:
        return self._typed(key, lambda v: isinstance(v, dict), msg("a mapping")) or {}

    def why_assumed(self) -> str:
        return self.absent or ("no config.json" if not self.exists else "not in config.json")

    def setting(self, name: str, key: str, value: Any, default: Any, default_note: str, note: str | None = None,
                shown: Any = None) -> Any:
        """One setting: config.json's ``value`` (read from ``key``, shown there as ``shown``; None: absent), else the
        option, else ``default``, recorded as assumed.  The note says which; an option config.json contradicts is refused."""
        option = OPTION_OF.get(name)
        field = {"H": "heads"}.get(name, name)
        given = getattr(self.options, field, None) if option else None
        if option:
            self.used.add(field)
        if value is not None:
            if given is not None and given != value:
                raise CheckpointError(at(f"{option} {given}", msg("{path} gives {key} = {shown}: leave {option} out, or correct config.json",
                                                                   path=self.path, key=key, shown=shown if shown is not None else value, option=option)))
            self.notes[name] = note or key
            return value
        if given is not None:
            self.notes[name] = option or ""
            return given
        self.notes[name] = f"assumed: {self.why_assumed()}" + (f" ({default_note}{'; give ' + option if option else ''})" if default_note else "")
        self.assumed.append((name, default))
        return default

    def assume(self, name: str, value: Any, why: str, shown: str = "") -> Any:
        """``value``, the family's default for a setting config.json does not give, recorded as assumed; its note
        '[shown, ]assumed: not in config.json (why)'."""
        self.notes[name] = (f"{shown}, " if shown else "") + f"assumed: {self.why_assumed()} ({why})"
        self.assumed.append((name, value))
        return value

    def same(self, key: str, found: int, letter: str, tensor: str = "", shape: tuple[int, ...] = ()) -> None:
        """A size config.json gives must be the one the tensors have (n_embd and wte's width): else refused, not credited."""
        value = self.integer(key)
        if value is None or value == found:
            return
        if tensor:
            raise self.refuse(msg("{key} = {value}, but the checkpoint's tensors have {letter} = {found} ({tensor} is {shape}); "
                                  "the config does not describe these weights",
                                  key=key, value=value, letter=letter, found=found, tensor=tensor, shape=shape_text(shape)))
        raise self.refuse(msg("{key} = {value}, but the checkpoint's tensors have {letter} = {found}; the config does not describe these weights",
                              key=key, value=value, letter=letter, found=found))

    def model_type(self, reads: tuple[str, ...], differ: Mapping[str, Message], others: Message | None = None) -> str | None:
        """config.json's model_type; one whose maths differ from this family's (Gemma's scaled embeddings) is refused, and
        so is any other one not read, when ``others`` says why."""
        kind = self.text("model_type")
        if kind is not None and kind not in reads:
            why = next((why for prefix, why in differ.items() if kind.startswith(prefix)), others)
            if why is not None and not self.options.not_the_model:
                raise self.refuse(msg("model_type {kind}: {why}; the {family} layout would trace it wrong", kind=repr(kind), why=why, family=self.family))
        return kind


def refuse(cfg: Config, rules: list[tuple[bool, Message]]) -> None:
    """A family's rules, one a line: (what tracer cannot trace, why, naming the key), the first that holds refused."""
    for bad, why in rules:
        if bad:
            raise cfg.refuse(why)


def need_heads(heads: int | None, C: int, what: str) -> int:
    """--heads, for a checkpoint whose config does not record the number of heads."""
    if heads is None:
        raise CheckpointError(msg('{what} does not record the number of heads; give --heads H (H must divide C = {C})', what=what, C=C))
    if heads < 1 or C % heads:
        raise CheckpointError(msg('--heads {heads}: H must divide C = {C} (each head has width d = C / H)', heads=heads, C=C))
    return heads


# -- config keys nothing in the maths reads -----------------------------------------------------------
# What every Hugging Face config may carry that does not change an eval forward: names, token ids, generation and
# output switches, dropout (off at eval).  A family that lists its own keys refuses any other by name (refuse_unknown).
HF_HARMLESS_KEYS = frozenset({
    "_name_or_path", "architectures", "model_type", "transformers_version", "dtype", "torch_dtype", "id2label", "label2id",
    "problem_type", "return_dict", "output_attentions", "output_hidden_states", "chunk_size_feed_forward", "is_encoder_decoder",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "tokenizer_class", "use_cache",
    "initializer_range", "max_position_embeddings", "torchscript", "task_specific_params", "finetuning_task", "prefix",
    "max_length", "min_length", "tie_encoder_decoder", "attention_dropout", "hidden_dropout", "classifier_dropout",
    "resid_pdrop", "embd_pdrop", "attn_pdrop", "is_decoder", "add_cross_attention", "cross_attention_hidden_size",
    "use_return_dict", "gradient_checkpointing", "_attn_implementation_autoset", "_commit_hash",
})


def refuse_unknown(cfg: Config, known: frozenset[str] | set[str], family: str) -> None:
    """A config.json key this family does not model (and no harmless one) is refused by name: tracer would trace without it."""
    for key in sorted(cfg.raw):
        if key not in known and key not in HF_HARMLESS_KEYS and cfg.raw[key] not in (None, [], {}):
            raise cfg.refuse(msg("{key} = {value}: the {family} layout does not model this setting, so it would trace a different model",
                                 key=key, value=received(cfg.raw[key]), family=family))


# -- the family config reader: what a family declares, read the same way for every family ----------------
class Field(NamedTuple):
    """A config.json key a family reads: its type, and the spec setting it settles, with the family's default."""

    key: str  # "": a setting no config.json gives (a state dict has none), from the option or the default
    kind: str = "integer"  # integer | number | text | flag | mapping: Config's type check of that name
    setting: str = ""  # the spec setting it settles: config.json's value, else the option, else ``default``, recorded as assumed
    default: Any = None
    why: str = ""  # where the default comes from, in the note ("GPT-2's layer_norm_epsilon")
    note: str = ""  # the setting's note when config.json gives it ("activation_function: {value}"); "": the key
    choices: Mapping[str, Any] | None = None  # the values it may take -> what tracer makes of each; any other refused by name,
    # after the family's own refusals (which may say why better)
    required: bool = False  # absent or null: refused ("expected a whole number, received nothing (null)")
    check: Callable[[Config, Any], None] | None = None  # the family's own check of the command line's option, before settling


class Refusal(NamedTuple):
    """A config.json value a family cannot trace faithfully, refused by name: ``bad(value)`` holds (the value as its Field
    types it, else as written); ``why`` names the key and says why, its fields ``value`` and ``act``, where it has them, filled
    with the value received (``received``) and its repr."""

    key: str
    bad: Callable[[Any], bool]
    why: Message


class Reading(NamedTuple):
    """What a Family's ``read`` returns: the checked config (``cfg``, for the family's own steps and ``cfg.record()``),
    its model_type, every declared field's value (type-checked; None when absent), the settings they settle, and the
    sizes the tensors give, each checked against config.json."""

    cfg: Config
    kind: str | None
    values: dict[str, Any]
    settings: dict[str, Any]
    V: int = 0
    C: int = 0
    layers: int = 0
    H: int = 0
    F: int = 0  # 0: the family reads F itself
    embedding: tuple[int, ...] = ()  # the token table's shape: (V, C), or (V, C_e) where another tensor gives C
    embedding_key: str = ""  # as the checkpoint writes it


# Hugging Face's usual names of the sizes (LlamaConfig's, PhiConfig's, ...), and its usual refusal of heads that do not divide C
HF_SIZES = {"C": "hidden_size", "V": "vocab_size", "layers": "num_hidden_layers", "H": "num_attention_heads", "F": "intermediate_size"}
HF_DIVIDES = msg("num_attention_heads = {H} does not divide hidden_size = {C} (each head has width d = C / H)", H="H", C="C")


def _filled(why: Message, **fields: object) -> Message:
    """``why`` with those of ``fields`` its template names filled in (a declared message's key, value, H, C)."""
    return why.refill(**{k: v for k, v in fields.items() if k in why.fields})


class Family(NamedTuple):
    """What a family's config reader declares; ``read`` reads every family in the same steps, in this order: config.json
    (``needs``), its model_type, its keys (``known``), the declared fields and refusals, the sizes the tensors give
    against the keys of ``sizes`` (``embedding``), then the settings the fields settle.  Each refusal names the key or
    the tensor, as the family's message says."""

    name: str  # the layout's name, as messages give it ("": the name of the layout read, for a reader several families share)
    needs: Message | None = None  # no config.json: refused so (None: the tensors and the command line's options suffice)
    reads: tuple[str, ...] | None = None  # the model_types it computes (None: the layout's)
    differ: Mapping[str, Message] = {}  # model_types (prefixes) whose maths differ: refused by name, saying why
    others: Message | None = None  # why any other model_type given is refused (None: read as the family's)
    only: Message | None = None  # any model_type not read, none included, refused so (its field kind: the model_type received)
    known: frozenset[str] | None = None  # the keys the family models: any other (not harmless) refused by name
    fields: tuple[Field, ...] = ()
    refusals: tuple[Refusal, ...] = ()
    embedding: Message | None = None  # no token table: refused so (None: the family reads its sizes itself)
    layer: Message | None = None  # no layer: refused so (its field key, if any: the key looked for)
    layer_of: str = "blocks.0.norm1.gamma"  # the tracer weight whose key, layer by layer, counts the layers
    width_of: str = "embedding"  # the tracer weight whose width is C (OPT: q_proj, the embedding being C_e wide)
    sizes: Mapping[str, str] = HF_SIZES  # C, V, layers, H, F -> the config.json key that gives it, checked against the tensors
    heads: str = "option"  # H not in config.json: "option" (--heads gives it) or "required" (refused)
    divides: Message | None = HF_DIVIDES  # H not dividing C: refused so (its fields H and C filled in; key, width: their keys)

    def read(self, config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options, absent: str | None = None) -> Reading:
        """What this declaration reads of ``config`` (config.json, or None) and the checkpoint; ``absent``: why a setting is
        assumed, when not "no config.json" / "not in config.json" (a state dict does not record it)."""
        if not config and self.needs is not None:
            raise CheckpointError(at(ckpt.path, self.needs))
        cfg = Config(config, ckpt, options, self.name or layout.name, absent)
        reads = layout.model_types if self.reads is None else self.reads
        kind = cfg.model_type(reads, self.differ, self.others)
        if self.only is not None and kind not in reads and not options.not_the_model:
            raise cfg.refuse(_filled(self.only, kind=received(kind)))
        if self.known is not None:
            refuse_unknown(cfg, self.known, cfg.family)
        values = {f.key: self._value(cfg, f) for f in self.fields}
        for rule in self.refusals:
            value = values[rule.key] if rule.key in values else cfg.raw.get(rule.key)
            if rule.bad(value):
                raise cfg.refuse(_filled(rule.why, value=received(value), act=repr(value)))
        for f in self.fields:
            if f.choices is not None and values[f.key] is not None and values[f.key] not in f.choices:
                raise cfg.refuse(msg("{key} {act}: expected one of {join}", key=f.key, act=repr(values[f.key]), join=", ".join(f.choices)))
        sizes = self._sizes(cfg, ckpt, layout) if self.embedding is not None else {}
        settings: dict[str, Any] = {}
        for f in self.fields:
            if f.setting:
                raw = values[f.key]
                if f.check is not None:
                    f.check(cfg, raw)
                value = f.choices.get(raw) if f.choices is not None and raw is not None else raw
                note = f.note.replace("{value}", str(raw)) if f.note else None
                settings[f.setting] = cfg.setting(f.setting, f.key, value, f.default, f.why, note=note, shown=raw)
        return Reading(cfg, kind, values, settings, **sizes)

    @staticmethod
    def _value(cfg: Config, field: Field) -> Any:
        value = cfg.integer(field.key) if field.kind == "integer" else getattr(cfg, field.kind)(field.key)
        if value is None and field.required:
            raise cfg.fail(field.key, msg("a whole number") if field.kind == "integer" else msg("a positive number"), None)
        return value

    def _sizes(self, cfg: Config, ckpt: Checkpoint, layout: Layout) -> dict[str, Any]:
        """V and C from the token table, the layers, H and F, each checked against the key of ``sizes`` that gives it."""
        assert self.embedding is not None and self.layer is not None
        embed = shape_of(ckpt, layout, "embedding")
        if embed is None:
            raise CheckpointError(at(ckpt.path, self.embedding))
        found = layout.locate(self.layer_of, ckpt.key_set())
        assert found is not None  # a layer's weight the table maps, never optional
        layers = layer_count(ckpt.keys(), found[0].key.replace(".0.", ".{i}.", 1))
        if layers == 0:
            raise CheckpointError(at(ckpt.path, _filled(self.layer, key=found[0].key)))
        width = layout.locate(self.width_of, ckpt.key_set())
        assert width is not None
        shape = ckpt.info(width[0].key).shape
        C = embed[1] if self.width_of == "embedding" else shape_of(ckpt, layout, self.width_of)[0]  # type: ignore[index]
        embedding_key = layout.locate("embedding", ckpt.key_set())[0].key  # type: ignore[index]
        keys = self.sizes
        if "C" in keys:
            cfg.same(keys["C"], C, "C", width[0].key, shape)
        if "V" in keys:
            cfg.same(keys["V"], embed[0], "V", embedding_key, embed)
        if "layers" in keys:
            cfg.same(keys["layers"], layers, "layers")
        out = {"V": embed[0], "C": C, "layers": layers, "embedding": embed, "embedding_key": embedding_key}
        if "H" in keys:
            out["H"] = self._heads(cfg, keys["H"], C, keys.get("C", ""), ckpt)
        if "F" in keys:
            w1 = shape_of(ckpt, layout, "blocks.0.ffn.w1")
            if w1 is not None:
                cfg.same(keys["F"], w1[1], "F")
            out["F"] = w1[1] if w1 else cfg.integer(keys["F"])
            if out["F"] is None:
                raise cfg.fail(keys["F"], msg("a whole number"), None)
        return out

    def _heads(self, cfg: Config, key: str, C: int, width: str, ckpt: Checkpoint) -> int:
        """H from config.json's ``key``: it must divide C; absent, --heads gives it, or (``required``) it is refused."""
        heads = cfg.integer(key)
        if heads is not None and self.divides is not None and C % heads:
            raise cfg.refuse(_filled(self.divides, H=heads, C=C, key=key, width=width))
        if self.heads == "required":
            if heads is None:
                raise cfg.fail(key, msg("a whole number"), None)
            cfg.notes["H"] = key
            return heads
        if heads is None:
            need_heads(cfg.options.heads, C, f"{ckpt.path} without config.json" if not cfg.exists else "config.json")
        return int(cfg.setting("H", key, heads, None, ""))
