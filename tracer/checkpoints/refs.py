"""Weights that live in checkpoint files: found and checked when the spec is validated, read when the run starts.

The spec asks for a weight by tracer name and shape; ``model_ref`` (a whole model through a layout)
or ``file_ref`` (one matrix by key) finds the tensor, checks its key and shape from the headers
alone and returns a TensorRef, which the spec keeps as the weight's value.  ``read_refs`` reads the
tensors, each key once (q, k and v share one packed tensor), converts them to the spec's dtype and
refuses NaN and Inf.  Every message starts with ``where``: the spec's file:line:col and field.
``unread`` says which of a whole-model checkpoint's tensors a spec leaves unread in what it traces
(a checkpoint is read whole, or refused, unless the spec says ``allow_unread: true``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from tracer import reading
from tracer.checkpoints.families.base import Layout, Take
from tracer.checkpoints.formats import Checkpoint, TensorInfo, all_finite, file_of, open_checkpoint, shape_text
from tracer.errors import CheckpointError
from tracer.messages import Message, at, message_of, msg, nmsg

if TYPE_CHECKING:
    import numpy as np


class TensorRef(NamedTuple):
    file: str  # the checkpoint as opened (a file or a model folder)
    key: str
    take: Take
    stored: TensorInfo  # shape and dtype in the file
    where: str  # "spec.yaml:9:10: weights.file": the start of every message about it

    @property
    def shown(self) -> str:
        """The file that holds the tensor (its shard, in a sharded folder)."""
        return file_of(open_checkpoint(self.file), self.key)


class ModelSource(NamedTuple):
    """``weights: {file: ..., layout: ...}``: every weight the layout maps comes from this checkpoint."""

    ckpt: Checkpoint
    layout: Layout
    first_layer: int
    where: str

    def has(self, name: str) -> bool:
        found = self.layout.locate(name, self.ckpt.key_set(), self.first_layer)
        return found is not None and found[1]

    def rows(self, name: str) -> int | None:
        """Rows of a table (embedding, position) in the checkpoint, if the layout maps it and the file holds it."""
        found = self.layout.locate(name, self.ckpt.key_set(), self.first_layer)
        if found is None or not found[1]:
            return None
        shape = found[0].shape(self.ckpt.info(found[0].key).shape)
        return shape[0] if shape else None


def unread(src: ModelSource, read: list[TensorRef], tied: bool) -> list[str]:
    """The checkpoint's tensors a spec reading ``read`` from it leaves unread, though they belong to what it traces.

    A tensor belongs to what the spec traces when it sits in a layer the spec reads any tensor of (a q/k/v
    bias the layout has no place for, a LayerNorm bias of a spec that says rmsnorm), when the layout maps
    it to nothing (and the family does not list it as harmless), when it is the position table of a spec
    that reads the token embedding, the beta of a final norm whose gamma the spec reads, or a stored
    lm_head that a tied head replaces by a different embedding.
    Not unread: the tensors of layers the spec does not trace, the embedding and positions of a spec that
    starts from a hidden state, and the final norm and head of one that stops before them.
    """
    layout, ckpt = src.layout, src.ckpt
    keys = {r.key for r in read if r.file == ckpt.path}
    traced, names, groups = set(), set(), set()
    for key in keys:
        name, layer = layout.owner(key)
        if layer is not None:
            traced.add(layer)
        if name is not None:
            names.add(name)
            groups.add(name.rsplit(".", 1)[0])
    out = []
    for key in layout.weight_keys(ckpt.keys()):
        if key in keys or layout.is_harmless(key):
            continue
        name, layer = layout.owner(key)
        if layer is not None:
            if layer in traced:
                out.append(key)
        elif (name is None  # mapped to nothing
              or (name == "position" and "embedding" in names)  # the positions of the tokens read
              or ("." in name and name.rsplit(".", 1)[0] in groups)  # the rest of a final norm the spec applies
              or (name == "head" and tied and "embedding" in names and not _same_tensor(src, key, "embedding"))):
            out.append(key)
    return out


def _same_tensor(src: ModelSource, key: str, name: str) -> bool:
    """Does the checkpoint's ``key`` hold exactly what tracer weight ``name`` reads (a stored lm_head equal to the embedding)?"""
    found = src.layout.locate(name, src.ckpt.keys(), src.first_layer)
    if found is None or not found[1]:
        return False
    other = found[0].key
    a, b = src.ckpt.info(key), src.ckpt.info(other)
    if a.shape != b.shape or len(a.shape) != 2:
        return False
    import numpy as np  # only for a checkpoint that stores a tied head

    x, y = src.ckpt.raw(key), src.ckpt.raw(other)
    step = max(1, 2**22 // max(1, a.shape[1]))
    return all(np.array_equal(x[i:i + step], y[i:i + step]) for i in range(0, a.shape[0], step))


def resolve(spec_dir: str, file: str) -> str:
    """A path as the spec writes it, relative to the spec's folder."""
    path = reading.os_path(file)  # a spec is UTF-8 text; the system may take its names in another encoding
    return path if os.path.isabs(path) else os.path.join(spec_dir, path)


def _closest(key: str, keys: list[str]) -> Message:
    import difflib  # only on the error path

    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if close:
        return msg("; did you mean {names}?", names=repr(close[0]))
    if keys:
        return nmsg("; it holds {n} tensor, e.g. {names}", "; it holds {n} tensors, e.g. {names}", len(keys), names=", ".join(repr(k) for k in keys[:3]))
    return msg("; it holds no tensors")


def checked(ckpt: Checkpoint, take: Take, exists: bool, name: str, label: str, want: tuple[int, ...], where: str) -> TensorRef:
    """The TensorRef for tracer weight ``name`` (``label``: its axes and sizes), or a CheckpointError naming what is wrong."""
    if not exists:
        raise CheckpointError(at(where, msg('{file_of}: no tensor {key} (for {name} {label}){closest}', file_of=file_of(ckpt, take.key), key=repr(take.key),
                                            name=name, label=label, closest=_closest(take.key, ckpt.keys()))))
    info = ckpt.info(take.key)
    got = take.shape(info.shape)
    if got != want:
        raise CheckpointError(at(where, msg("{file_of}: tensor {key}{how} for {name} {label}: expected {want}, received {got}", file_of=file_of(ckpt, take.key),
                                            key=repr(take.key), how=take.describe(), name=name, label=label,
                                            want=shape_text(take.stored_shape(want)), got=shape_text(info.shape))))
    if info.dtype not in ("float64", "float32", "float16", "bfloat16"):
        raise CheckpointError(at(where, msg('{file_of}: tensor {key} for {name}: expected floating-point numbers, received {dtype}',
                                            file_of=file_of(ckpt, take.key), key=repr(take.key), name=name, dtype=info.dtype)))
    return TensorRef(ckpt.path, take.key, take, info, where)


def model_ref(src: ModelSource, name: str, label: str, want: tuple[int, ...], shown: str, heads: int = 1,
              size: Callable[[str], int] | None = None) -> TensorRef | None:
    """Weight ``name`` (as the layout names it; ``shown`` as the spec does) from the whole-model checkpoint,
    or None when the layout does not map it.  ``heads``: the spec's H, for a tensor packed per head; ``size``: the
    spec's sizes by letter, for a tensor packed in unequal parts (Phi-3's qkv_proj)."""
    found = src.layout.locate(name, src.ckpt.key_set(), src.first_layer)
    if found is None:
        return None
    take, exists = found
    if take.heads == -1:
        take = take._replace(heads=heads)
    if size is not None:
        take = take.resolved(size)
    return checked(src.ckpt, take, exists, shown, label, want, src.where)


def file_ref(path: str, key: str | None, transpose: bool, name: str, label: str, want: tuple[int, ...], where: str) -> TensorRef:
    """One weight from one file: ``{file: w.npz, key: attn_q}`` (the key may be left out when the file holds one tensor)."""
    try:
        ckpt = open_checkpoint(path)
    except CheckpointError as e:
        raise CheckpointError(at(where, message_of(e))) from None
    keys = ckpt.keys()
    if key is None:
        if len(keys) != 1:
            raise CheckpointError(at(where, msg('{path} holds {n_keys} tensors; name one with key: (e.g. key: {x})', path=path, n_keys=len(keys),
                                                x=keys[0] if keys else 'w')))
        key = keys[0]
    return checked(ckpt, Take(key, transpose=transpose), key in ckpt, name, label, want, where)


def table_rows(path: str, key: str | None, transpose: bool, where: str) -> int:
    """Rows of a table given as ``{file: ..., key: ...}``: the dims it sets when the spec does not."""
    try:
        ckpt = open_checkpoint(path)
    except CheckpointError as e:
        raise CheckpointError(at(where, message_of(e))) from None
    keys = ckpt.keys()
    k = key if key is not None else (keys[0] if len(keys) == 1 else None)
    if k is None or k not in ckpt:
        return -1  # the weight's own check names the problem
    shape = Take(k, transpose=transpose).shape(ckpt.info(k).shape)
    return shape[0] if shape else -1


def read_refs(refs: dict[str, TensorRef], dtype: str, allow_nonfinite: bool,
              rows: dict[str, list[int]] | None = None) -> dict[str, np.ndarray]:
    """Each weight's array in ``dtype``; a tensor shared by several weights (packed q, k, v) is read once.

    ``rows``: for a table named there (read as stored, no conversion), only those rows are read and checked;
    the others are zero.
    """
    import numpy as np

    by_tensor: dict[tuple[str, str], list[str]] = {}
    for name, ref in refs.items():
        by_tensor.setdefault((ref.file, ref.key), []).append(name)
    out: dict[str, np.ndarray] = {}
    opened: dict[str, Checkpoint] = {}
    for (file, key), names in by_tensor.items():
        first = refs[names[0]]
        only = (rows or {}).get(names[0]) if len(names) == 1 and first.take == Take(key) else None
        # a matrix the spec takes transposed (LLaMA's [out, in]), whole, for one weight: read straight into its transpose
        transposed = len(names) == 1 and first.take == Take(key, transpose=True) and len(first.stored.shape) == 2
        try:
            if file not in opened:
                opened[file] = open_checkpoint(file)
            ckpt = opened[file]
            a = ckpt.read(key, dtype, transpose=transposed) if only is None else ckpt.read_rows(key, only, dtype)
        except CheckpointError as e:
            raise CheckpointError(at(first.where, message_of(e))) from None
        checked = a if only is None else a[only]
        if not allow_nonfinite and not all_finite(checked):
            n_nan, n_inf = int(np.isnan(checked).sum()), int(np.isinf(checked).sum())
            raise CheckpointError(at(first.where, msg('{file_of}: tensor {key} (for {join}) holds {n_nan} NaN and {n_inf} Inf (not finite); add '
                                                      'allow_nonfinite: true to study NaN and Inf on purpose', file_of=file_of(ckpt, key), key=repr(key),
                                                      join=', '.join(names), n_nan=n_nan, n_inf=n_inf)))
        for name in names:
            take = refs[name].take
            out[name] = a if transposed or (not take.split and not take.rows and not take.transpose) else take.apply(a)
        del a
    for ckpt in opened.values():
        ckpt.release()
    return out
