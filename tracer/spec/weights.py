"""The weights section: every weight the steps read, and nothing else.

A weight is given as a nested list, a keyword (identity, zeros, ones, random), a file (``{file: w.npz, key: ...}``),
read from the whole-model checkpoint, filled by default (biases and beta at zero, gamma at one), or drawn from the
seed.  A key no step reads is an error that says why it is read by nothing.
"""

from __future__ import annotations

from typing import Any

from tracer.errors import SpecError
from tracer.messages import Message, join, msg, nmsg
from tracer.model import blocks
from tracer.model.blocks import Step, group_kind
from tracer.model.ops import TABLES
from tracer.model.shapes import Shape, shape_label
from tracer.spec.checks import Checks, close_matches, did_you_mean, lookalike_of, nested_shape
from tracer.spec.keys import KEYWORDS
from tracer.spec.typed import BlockSpec, Dims, Weight
from tracer.spec.weight_files import checkpoint_weight, file_weight, model_file
from tracer.spec.yamlio import Path

# Not given: biases and beta start at zero, gamma at one (the usual init); the rest comes from the seed.
DEFAULT_FILL = {"b_q": "zeros", "b_k": "zeros", "b_v": "zeros", "b_o": "zeros", "b1": "zeros", "b2": "zeros",
                "b3": "zeros", "b": "zeros", "gamma": "ones", "beta": "zeros",
                "q_norm": "ones", "k_norm": "ones"}  # block.qk_norm's per-head RMSNorm weights start at one, as Qwen3's do

# What the steps read: a table's axes by its name, or a weight group's keys with their axes
Wanted = dict[str, dict[str, tuple[str, ...]] | tuple[str, ...]]


def weights_section(c: Checks, doc: dict[str, Any]) -> dict[str, Any]:
    """The weights mapping as written ({} when the whole model comes from a checkpoint, which ``c`` then holds)."""
    weights_raw = doc.get("weights")
    if weights_raw is None:
        weights_raw = {}
    if not isinstance(weights_raw, dict):
        raise c.fail(("weights",), msg("expected a mapping of weights, received {got}", got=c.received(('weights',), weights_raw)))
    if "file" in weights_raw:  # the whole model from a checkpoint, through a layout
        c.model_source = model_file(c, weights_raw)
        weights_raw = {}
    return weights_raw


def group_yaml_path(group: str) -> Path:
    """'blocks.1.attn' -> ('weights', 'blocks', 1, 'attn'); 'encoder.blocks.0.ffn' likewise."""
    out: list[str | int] = ["weights"]
    for part in group.split("."):
        out.append(int(part) if part.isdigit() else part)
    return tuple(out)


def lookup(raw: Any, path: Path) -> Any:
    node = raw
    for part in path:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


def broadcastable(given: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """Would NumPy silently stretch ``given`` to ``want``?"""
    if len(given) > len(want):
        return False
    return all(g == w or g == 1 for g, w in zip(reversed(given), reversed(want)))


def checked_weights(c: Checks, raw: dict[str, Any], dims: Dims, seed: int | None, steps: tuple[Step, ...], shapes: dict[str, Shape],
                    block: BlockSpec, encoder: BlockSpec | None) -> dict[str, Weight]:
    """Every weight the steps read, checked against the spec's weights section (which holds nothing else)."""
    wanted, kinds = wanted_weights(c, steps, shapes, dims, block)
    check_weight_keys(c, raw, wanted, block, encoder)
    out: dict[str, Weight] = {}
    for name, spec in wanted.items():
        ypath = group_yaml_path(name)
        value = lookup(raw, ypath[1:])
        if isinstance(spec, tuple):
            out[name] = weight(c, value, ypath, name, spec, dims, seed)
        else:
            out.update(group_weights(c, value, ypath, name, spec, kinds.get(name), dims, seed, block.norm == "rmsnorm_offset"))
    return out


def wanted_weights(c: Checks, steps: tuple[Step, ...], shapes: dict[str, Shape], dims: Dims, block: BlockSpec) -> tuple[Wanted, dict[str, str]]:
    """What the steps read, and each weight group's kind; steps sharing a group must read the same weights."""
    wanted: Wanted = {}
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
            table_wanted(wanted, kind, dims, block)
            continue
        keys = blocks.group_keys(kind, dims.H_kv is not None, dims.E or 0, dims.own_head_width, bool(step.qk_norm), bool(step.qk_projection))
        if kind == "linear":
            in_letter = shapes[step.inputs[0]][0][-1]
            keys = {"w": (in_letter, step.out or "C"), "b": (step.out or "C",)}
        if group in kinds:
            if kinds[group] != kind or wanted[group] != keys:
                raise c.fail(("block",), msg("step {name}: weight group {group} is shared by steps that need different weights ({kinds} and {kind})",
                                             name=step.name, group=repr(group), kinds=kinds[group], kind=kind))
            continue
        kinds[group] = kind
        wanted[group] = keys
    return wanted, kinds


def table_wanted(wanted: Wanted, kind: str, dims: Dims, block: BlockSpec) -> None:
    """A table a step reads: the head's is the embedding, transposed, when it is tied; its bias with it."""
    width = TABLES[kind]
    if dims.C_e is not None and kind in ("embedding", "head"):  # the embedding is C_e wide (OPT's word_embed_proj_dim)
        width = tuple("C_e" if letter == "C" else letter for letter in width)
    if kind == "head" and block.head_bias:
        wanted.setdefault("head_bias", TABLES["head_bias"])
    if kind == "head" and block.head == "tied":
        wanted.setdefault("embedding", width[::-1])
        return
    wanted.setdefault(kind, width)


def group_weights(c: Checks, value: Any, ypath: Path, name: str, spec: dict[str, tuple[str, ...]], kind: str | None, dims: Dims,
                  seed: int | None, offset: bool = False) -> dict[str, Weight]:
    """One weight group's weights (attn.w_q, attn.b_q, ...), each given, filled by default or drawn; ``offset``: the block's
    norms scale by (1 + w) (norm: rmsnorm_offset), so block.qk_norm's weights start at zero, the scale 1, as Gemma 3's do."""
    for key in ("q_norm", "k_norm"):  # block.qk_norm's weights, given to a block without it
        if isinstance(value, dict) and key in value and key not in spec and "w_q" in spec:
            raise c.fail_key(ypath + (key,), msg("{key} is a weight of block.qk_norm (the per-head RMSNorm of q and k), but block.qk_norm is false", key=key))
    group_raw = c.keys(value if value is not None else {}, ypath, tuple(spec), msg("{name} weights", name=name))
    out: dict[str, Weight] = {}
    for key, axes in spec.items():
        offset_scale = (kind == "rms_offset" and key == "gamma") or (offset and key in ("q_norm", "k_norm"))
        fill = "zeros" if offset_scale else DEFAULT_FILL.get(key)  # the scale 1 + 0
        out[f"{name}.{key}"] = weight(c, group_raw.get(key), ypath + (key,), f"{name}.{key}", axes, dims, seed, fill)
    return out


def check_weight_keys(c: Checks, raw: dict[str, Any], wanted: Wanted, block: BlockSpec, encoder: BlockSpec | None) -> None:
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
            raise c.fail(path, msg("expected a mapping of weights, received {got}", got=c.received(path, value)))
        for key, sub in value.items():
            if key not in expect:
                raise unknown_weight(c, key, sub, expect, path, block, encoder)
            nested = expect[key]
            if nested == "leaf":
                continue
            if key == "blocks":
                n = len(nested)
                if not isinstance(sub, list) or len(sub) != n:
                    got = msg("{n} entries", n=len(sub)) if isinstance(sub, list) else c.received(path + (key,), sub)
                    raise c.fail(path + (key,), nmsg("expected a list of {n} layer mapping (one per layer), received {got}",
                                                     "expected a list of {n} layer mappings (one per layer), received {got}", n, got=got))
                for i, item in enumerate(sub):
                    walk(item, nested[str(i)], path + (key, i))
            else:
                walk(sub, nested, path + (key,))

    walk(raw, tree, ("weights",))


def unknown_weight(c: Checks, key: Any, sub: Any, expect: dict[str, Any], path: Path, block: BlockSpec, encoder: BlockSpec | None) -> SpecError:
    """The error for a weight (or group) nothing reads: why, when a setting says so, else the closest name."""
    unused = unused_reason(str(key), path, block, encoder)
    if unused:
        return c.fail_key(path + (key,), unused)
    close = close_matches(str(key), [str(k) for k in expect], n=1, cutoff=0.5)
    hint = lookalike_of(key, list(expect)) or did_you_mean(close, msg("the model reads: {names}", names=', '.join(map(str, expect))) if expect else "")
    what = msg("weight group") if isinstance(sub, dict) else msg("weight")
    return c.fail_key(path + (key,), join([msg("{what} {key} is given but nothing in the model reads it", what=what, key=repr(key)), hint]))


def unused_reason(key: str, path: Path, block: BlockSpec, encoder: BlockSpec | None) -> Message | str:
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


def weight(c: Checks, value: Any, path: Path, name: str, axes: tuple[str, ...], dims: Dims, seed: int | None,
           fill: str | None = None) -> Weight:
    want = tuple(dims.size(a) for a in axes)
    label = shape_label(axes, want)
    if isinstance(value, dict):
        return Weight(name, axes, want, "file", file_weight(c, value, path, name, label, want))
    if value is None and c.model_source is not None:
        from_checkpoint = checkpoint_weight(c, name, axes, want, label, dims)
        if from_checkpoint is not None:
            return from_checkpoint
    if value is None:
        if fill is not None:
            return Weight(name, axes, want, fill)
        if seed is None:
            raise c.fail(path, msg("missing weight {name} {label}, and there is no seed to draw it from (give it, or add seed: 0)", name=name, label=label))
        return Weight(name, axes, want, "seed")
    if isinstance(value, str):
        return keyword_weight(c, value, path, name, axes, want, label, seed)
    rows = c.nested(value, path, want_int=False)
    shape = c.rect(rows, path)
    if name == "position":
        if len(shape) != 2 or shape[1] != dims.C:
            raise c.fail(path, msg("expected [T_max,C] = [T_max,{C}], received {shape}", C=dims.C, shape=nested_shape(shape)))
        return Weight(name, axes, shape, "given", rows, shape)
    if shape != want:
        # A vector NumPy would stretch (beta: [0] for [C]) is let through: the kernel flags it as a
        # broadcast violation, because that is exactly the mistake NumPy would have accepted.
        if len(want) == 1 and broadcastable(shape, want):
            return Weight(name, axes, want, "given", rows, shape)
        raise c.fail(path, msg("expected {label}, received {shape}", label=label, shape=nested_shape(shape)))
    return Weight(name, axes, want, "given", rows, shape)


def keyword_weight(c: Checks, value: str, path: Path, name: str, axes: tuple[str, ...], want: tuple[int, ...], label: str,
                   seed: int | None) -> Weight:
    """identity, zeros, ones, or random (drawn from the seed)."""
    word = c.choice(value, path, KEYWORDS)
    if word == "identity" and (len(want) != 2 or want[0] != want[1]):
        raise c.fail(path, msg("identity needs a square matrix, but {name} is {label}", name=name, label=label))
    if word == "random":
        if seed is None:
            raise c.fail(path, msg("'random' needs a seed (add seed: 0)"))
        word = "seed"
    return Weight(name, axes, want, word)
