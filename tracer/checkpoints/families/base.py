"""What every checkpoint family is made of: the layout record, its table's conversions, and the config it reads.

A family's layout is data: one table, a tracer weight name (``{i}`` stands for a layer) -> a Take,
the checkpoint key it comes from plus the few small conversions real checkpoints need:
- ``split=3, part=1, axis=1``: the middle third of a packed tensor (q, k, v packed in GPT-2's
  ``c_attn`` [C,3C] or PyTorch's ``in_proj_weight`` [3C,C]);
- ``transpose=True``: ``nn.Linear`` stores [out, in]; tracer's matrices are [in, out].
``aliases`` lists key prefixes a checkpoint may write differently (``transformer.h.0...`` for
``h.0...``); the first that exists wins.  A tracer weight the table does not name is drawn from the
spec's seed, as when it is not given (an ``nn.Transformer`` has no embedding table).

A family's config reader, ``(config or None, checkpoint, layout, heads) -> ModelConfig``, says what
the spec's dims and block settings are and, for each, where it came from (written into the imported
spec as a comment).  Whatever the config sets that tracer cannot trace faithfully is refused there,
naming the setting, rather than traced wrongly.

Nothing here imports NumPy, except Take.apply.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import Message, join, msg

if TYPE_CHECKING:
    import numpy as np


class Take(NamedTuple):
    """Where one tracer weight is in a checkpoint, and how it is turned into tracer's shape."""

    key: str  # the checkpoint key; {i} is the layer
    split: int = 0  # packed: the number of equal parts (q, k, v: 3); 0 = not packed
    part: int = 0  # which part
    axis: int = 0  # the stored axis the parts are packed along
    transpose: bool = False  # stored [out, in]: transposed (after the split) to tracer's [in, out]

    def shape(self, stored: tuple[int, ...]) -> tuple[int, ...] | None:
        """The shape tracer receives from a stored tensor of shape ``stored`` (None if it cannot be split so)."""
        out = list(stored)
        if self.split:
            if self.axis >= len(out) or out[self.axis] % self.split:
                return None
            out[self.axis] //= self.split
        return tuple(reversed(out)) if self.transpose else tuple(out)

    def stored_shape(self, want: tuple[int, ...]) -> tuple[int, ...]:
        """The stored shape that gives tracer ``want``."""
        out = list(reversed(want)) if self.transpose else list(want)
        if self.split and self.axis < len(out):
            out[self.axis] *= self.split
        return tuple(out)

    def describe(self) -> Message | str:
        """' (part 1 of 3 along axis 0, transposed)': how the stored tensor becomes tracer's weight."""
        words: list[Message] = []
        if self.split:
            words.append(msg("part {part} of {n} along axis {axis}", part=self.part + 1, n=self.split, axis=self.axis))
        if self.transpose:
            words.append(msg("transposed"))
        return msg(" ({how})", how=join(words, ", ")) if words else ""

    def apply(self, a: np.ndarray) -> np.ndarray:  # stored -> tracer's [in, out], an array of its own
        import numpy as np

        if self.split:
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


class Layout(NamedTuple):
    """One checkpoint family: its name (``--layout``, ``weights.layout``), its table and its config reader."""

    name: str
    summary: str
    table: dict[str, Take]
    read_config: Callable[[dict[str, Any] | None, Checkpoint, Layout, int | None], ModelConfig]
    aliases: tuple[tuple[str, str], ...] = ()  # (prefix, also written as): ("", "transformer.")
    model_types: tuple[str, ...] = ()  # config.json model_type values this layout reads

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

        None when the layout does not map ``name`` (the spec then draws it from the seed).
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
        candidates = self.candidates(key)
        for k in candidates:
            if k in present:
                return take._replace(key=k), True
        # Missing: name it as this checkpoint writes its keys (with the prefix most of its keys have).
        heads = _heads(frozenset(present))
        best = max(candidates, key=lambda k: heads.get(k.split(".", 1)[0], 0))
        return take._replace(key=best), False


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


def stored_dtype(ckpt: Checkpoint, layout: Layout, name: str) -> str:
    """How the checkpoint stores tracer weight ``name`` (float32, bfloat16, ...)."""
    found = layout.locate(name, ckpt.key_set())
    return ckpt.info(found[0].key).dtype if found is not None and found[1] else "float32"


def need_heads(heads: int | None, C: int, what: str) -> int:
    """--heads, for a checkpoint whose config does not record the number of heads."""
    if heads is None:
        raise CheckpointError(msg('{what} does not record the number of heads; give --heads H (H must divide C = {C})', what=what, C=C))
    if heads < 1 or C % heads:
        raise CheckpointError(msg('--heads {heads}: H must divide C = {C} (each head has width d = C / H)', heads=heads, C=C))
    return heads
