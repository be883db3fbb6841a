"""Layouts: how a checkpoint's tensors map onto tracer's weights.  A layout is data.

Each layout is one table: a tracer weight name (``{i}`` stands for a layer) -> a Take, the checkpoint
key it comes from plus the few small conversions real checkpoints need:
- ``split=3, part=1, axis=1``: the middle third of a packed tensor (q, k, v packed in GPT-2's
  ``c_attn`` [C,3C] or PyTorch's ``in_proj_weight`` [3C,C]);
- ``transpose=True``: ``nn.Linear`` stores [out, in]; tracer's matrices are [in, out].
``aliases`` lists key prefixes a checkpoint may write differently (``transformer.h.0...`` for
``h.0...``); the first that exists wins.  A tracer weight the table does not name is drawn from the
spec's seed, as when it is not given (an ``nn.Transformer`` has no embedding table).

How the config becomes the spec's settings is in hfconfig.py: one reading function per layout.
Nothing here imports NumPy, except Take.apply.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np

    from tracer.checkpoints.formats import Checkpoint
    from tracer.checkpoints.hfconfig import ModelConfig


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

    def describe(self) -> str:
        words = []
        if self.split:
            words.append(f"part {self.part + 1} of {self.split} along axis {self.axis}")
        if self.transpose:
            words.append("transposed")
        return f" ({', '.join(words)})" if words else ""

    def apply(self, a: np.ndarray) -> np.ndarray:  # stored -> tracer's [in, out], an array of its own
        import numpy as np

        if self.split:
            n = a.shape[self.axis] // self.split
            a = np.take(a, range(self.part * n, (self.part + 1) * n), axis=self.axis)
        if self.transpose:
            a = a.T
        return np.ascontiguousarray(a)


class Layout(NamedTuple):
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

    def locate(self, name: str, keys: set[str] | list[str], first_layer: int = 0) -> tuple[Take, bool] | None:
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
        present = set(keys)
        candidates = self.candidates(key)
        for k in candidates:
            if k in present:
                return take._replace(key=k), True
        # Missing: name it as this checkpoint writes its keys (with the prefix most of its keys have).
        heads = [k.split(".", 1)[0] for k in present]
        best = max(candidates, key=lambda k: heads.count(k.split(".", 1)[0]))
        return take._replace(key=best), False


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


# -- the tables ------------------------------------------------------------------
def _attention(q: str, o: str, split_axis: int, transpose: bool) -> dict[str, Take]:
    """A packed q, k, v weight and bias plus the output projection, as one layer's 'attn' group."""
    out: dict[str, Take] = {}
    for part, letter in enumerate("qkv"):
        out[f"w_{letter}"] = Take(f"{q}.weight" if q.endswith("c_attn") else f"{q}_weight", 3, part, split_axis, transpose)
        out[f"b_{letter}"] = Take(f"{q}.bias" if q.endswith("c_attn") else f"{q}_bias", 3, part, 0)
    out["w_o"] = Take(f"{o}.weight", transpose=transpose)
    out["b_o"] = Take(f"{o}.bias")
    return out


def _group(prefix: str, group: str, takes: dict[str, Take]) -> dict[str, Take]:
    return {f"{prefix}{group}.{k}": v for k, v in takes.items()}


def _norm(key: str) -> dict[str, Take]:
    return {"gamma": Take(f"{key}.weight"), "beta": Take(f"{key}.bias")}


def _gpt2_table() -> dict[str, Take]:
    L = "h.{i}."
    table = {"embedding": Take("wte.weight"), "position": Take("wpe.weight"), "head": Take("lm_head.weight", transpose=True)}
    table |= _group("blocks.{i}.", "norm1", _norm(L + "ln_1"))
    # Conv1D stores [in, out] already: c_attn is [C,3C] with q, k, v side by side along axis 1.
    table |= _group("blocks.{i}.", "attn", _attention(L + "attn.c_attn", L + "attn.c_proj", 1, False))
    table |= _group("blocks.{i}.", "norm2", _norm(L + "ln_2"))
    table |= _group("blocks.{i}.", "ffn", {"w1": Take(L + "mlp.c_fc.weight"), "b1": Take(L + "mlp.c_fc.bias"),
                                           "w2": Take(L + "mlp.c_proj.weight"), "b2": Take(L + "mlp.c_proj.bias")})
    table |= _group("", "final_norm", _norm("ln_f"))
    return table


def _llama_table() -> dict[str, Take]:
    """Hugging Face LLaMA / Mistral (LlamaForCausalLM): every projection an nn.Linear [out,in], no biases.

    RMSNorm has only a weight (gamma); the MLP is down(silu(gate(x)) * up(x)), tracer's SwiGLU with
    W_1 = gate, W_3 = up, W_2 = down.  q and k need no permutation: the spec turns them with
    rotary_pairing: half, as Hugging Face's rotate_half does.
    """
    L = "model.layers.{i}."
    table = {"embedding": Take("model.embed_tokens.weight"), "head": Take("lm_head.weight", transpose=True)}
    table |= _group("blocks.{i}.", "norm1", {"gamma": Take(L + "input_layernorm.weight")})
    table |= _group("blocks.{i}.", "attn", {f"w_{x}": Take(f"{L}self_attn.{x}_proj.weight", transpose=True) for x in "qkvo"})
    table |= _group("blocks.{i}.", "norm2", {"gamma": Take(L + "post_attention_layernorm.weight")})
    table |= _group("blocks.{i}.", "ffn", {w: Take(f"{L}mlp.{proj}_proj.weight", transpose=True)
                                           for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))})
    table |= _group("", "final_norm", {"gamma": Take("model.norm.weight")})
    return table


def _torch_layer(prefix: str, layer: str, cross: bool) -> dict[str, Take]:
    """One nn.TransformerEncoderLayer (or DecoderLayer, with cross-attention): in_proj packed [3C,C], Linear [out,in]."""
    t = _group(prefix, "attn", _attention(layer + "self_attn.in_proj", layer + "self_attn.out_proj", 0, True))
    if cross:
        t |= _group(prefix, "cross_attn", _attention(layer + "multihead_attn.in_proj", layer + "multihead_attn.out_proj", 0, True))
    t |= _group(prefix, "ffn", {"w1": Take(layer + "linear1.weight", transpose=True), "b1": Take(layer + "linear1.bias"),
                                "w2": Take(layer + "linear2.weight", transpose=True), "b2": Take(layer + "linear2.bias")})
    for n in ("norm1", "norm2") + (("norm3",) if cross else ()):
        t |= _group(prefix, n, _norm(layer + n))
    return t


def _torch_table() -> dict[str, Take]:
    table = _torch_layer("blocks.{i}.", "layers.{i}.", cross=False)  # a decoder-only trace of an encoder stack (or one layer)
    table |= _group("", "final_norm", _norm("norm"))
    table |= _torch_layer("encoder.blocks.{i}.", "encoder.layers.{i}.", cross=False)
    table |= _group("encoder.", "final_norm", _norm("encoder.norm"))
    table |= _torch_layer("decoder.blocks.{i}.", "decoder.layers.{i}.", cross=True)
    table |= _group("decoder.", "final_norm", _norm("decoder.norm"))
    return table


def _layouts() -> dict[str, Layout]:
    from tracer.checkpoints import hfconfig

    return {
        "gpt2": Layout("gpt2", "Hugging Face GPT-2 (GPT2Model, GPT2LMHeadModel)", _gpt2_table(), hfconfig.gpt2,
                       aliases=(("", "transformer."),), model_types=("gpt2",)),
        "llama": Layout("llama", "Hugging Face LLaMA and Mistral-style models (LlamaForCausalLM, MistralForCausalLM)",
                        _llama_table(), hfconfig.llama,
                        aliases=(("model.", ""),), model_types=("llama", "mistral")),  # a bare LlamaModel has no 'model.'
        "torch": Layout("torch", "PyTorch nn.TransformerEncoderLayer, nn.TransformerEncoder, nn.Transformer state dicts",
                        _torch_table(), hfconfig.torch,
                        # a lone layer's keys have no 'layers.0.'; an nn.Transformer's encoder traced as a decoder-only stack
                        aliases=(("layers.0.", ""), ("layers.", "encoder.layers."), ("norm.", "encoder.norm."))),
        "tracer": Layout("tracer", "tracer's own --save archive (weights.NAME) or an .npz keyed by tracer's weight names",
                         {"{name}": Take("weights.{name}")}, hfconfig.tracer,
                         aliases=(("weights.blocks.0.", "weights."), ("weights.", ""), ("weights.blocks.0.", ""))),
    }


_CACHE: dict[str, Layout] = {}


def layouts() -> dict[str, Layout]:
    if not _CACHE:
        _CACHE.update(_layouts())
    return _CACHE


def names() -> tuple[str, ...]:
    return tuple(layouts())


def infer(config: dict[str, Any] | None) -> str | None:
    """The layout a Hugging Face config.json's model_type names, if one does."""
    if not config:
        return None
    model_type = config.get("model_type")
    return next((lay.name for lay in layouts().values() if model_type in lay.model_types), None)
