"""Weights and tables read from files: a whole checkpoint through a layout, one weight's own file, a table's rows.

``weights: {file: model.safetensors, layout: gpt2}`` opens the checkpoint (headers only) once; every weight the
steps read then comes from it, and it is read whole or refused.  ``w_q: {file: w.npz, key: attn_q}`` reads one
tensor, its key and shape checked from the file's header.  Every path is relative to the spec's folder and
refused outside --confine before anything there is looked at.
"""

from __future__ import annotations

from typing import Any

from tracer.errors import SpecError
from tracer.files import outside_confinement
from tracer.messages import msg, nmsg
from tracer.model.blocks import TASK_WEIGHTS
from tracer.model.ops import TABLES
from tracer.spec.checks import Checks
from tracer.spec.keys import FILE_KEYS, MODEL_FILE_KEYS
from tracer.spec.typed import BlockSpec, Dims, Weight
from tracer.spec.yamlio import Path, format_path


def spec_dir(c: Checks) -> str:
    import os

    return os.path.dirname(c.src.filename) if not c.src.filename.startswith("<") else ""


def confined(c: Checks, path: Path, file: str) -> None:
    """--confine: a reference outside the folder is refused before anything there is looked at, naming only
    the reference as the spec writes it."""
    from tracer.checkpoints import refs

    if outside_confinement(refs.resolve(spec_dir(c), file)):
        raise c.fail(path, msg("{file} is outside the folder --confine allows; a spec may refer only to files inside it", file=repr(file)))


def model_file(c: Checks, raw: dict[str, Any]) -> Any:
    """weights: {file: ..., layout: ..., first_layer: N}: open the checkpoint (headers only) and pick the layout."""
    from tracer.checkpoints import families, refs

    raw = c.keys(raw, ("weights",), MODEL_FILE_KEYS, msg("weights from a checkpoint"))
    path: Path = ("weights", "file")
    file = raw["file"]
    if not isinstance(file, str) or not file:
        raise c.fail(path, msg("expected the path of a checkpoint file or model folder, received {got}", got=c.received(path, file)))
    confined(c, path, file)
    try:
        ckpt = refs.open_checkpoint(refs.resolve(spec_dir(c), file))
        layout_name = raw.get("layout")
        if layout_name is None:
            layout_name = families.infer(families.config_of(ckpt))
            if layout_name is None:
                raise c.fail(path, msg("which layout? add layout: {names} (the checkpoint has no config.json whose model_type names one)",
                                       names=' | '.join(families.names())))
    except refs.CheckpointError as e:
        raise c.fail(path, e.message) from None
    layout = families.layouts().get(layout_name) if isinstance(layout_name, str) else None
    if layout is None:
        raise c.fail(("weights", "layout"), msg("expected {what}, received {got}", what=msg("one of {options}", options=' | '.join(families.names())),
                                                got=c.received(('weights', 'layout'), layout_name)))
    first = c.integer(raw.get("first_layer", 0), ("weights", "first_layer"), 0, 100_000)
    c.allow_unread = c.boolean(raw.get("allow_unread", False), ("weights", "allow_unread"))
    return refs.ModelSource(ckpt, layout, first, f"{c.src.where(path)}: {format_path(path)}")


def has_position_table(c: Checks, weights_raw: dict[str, Any]) -> bool:
    """A learned position table is given, or the checkpoint has one (positions are then learned by default)."""
    return "position" in weights_raw or (c.model_source is not None and c.model_source.has("position"))


def layer_name(name: str) -> str:
    """A one-layer decoder's weights are named without 'blocks.0.' (attn.w_q); a layout's table always has it."""
    if name in TABLES or name.startswith(("blocks.", "encoder.", "decoder.", "final_norm.", "embed_norm.", "project_in.", "project_out.")) or (
            name.split(".")[0] in TASK_WEIGHTS):  # the task heads' groups, after the layers
        return name
    return "blocks.0." + name


def checkpoint_weight(c: Checks, name: str, axes: tuple[str, ...], want: tuple[int, ...], label: str, dims: Dims) -> Weight | None:
    """A weight the whole-model checkpoint holds, through its layout (None when the layout has none for it)."""
    from tracer.checkpoints import refs

    try:
        ref = refs.model_ref(c.model_source, layer_name(name), label, want, name, dims.H, dims.size)
    except refs.CheckpointError as e:
        raise SpecError(e.message) from None
    return None if ref is None else Weight(name, axes, want, "file", ref)


def file_ref_fields(c: Checks, raw: dict[str, Any], path: Path) -> tuple[str, str | None, bool]:
    raw = c.keys(raw, path, FILE_KEYS, msg("fields of a weight read from a file"))
    if "file" not in raw:
        raise c.fail(path, msg("a weight given as a mapping reads a file: {file: w.npz, key: attn_q}"))
    file, key = raw["file"], raw.get("key")
    if not isinstance(file, str) or not file:
        raise c.fail(path + ("file",), msg("expected the path of a .npz, .npy, .safetensors or .pt file, received {got}",
                                           got=c.received(path + ('file',), file)))
    if key is not None and not isinstance(key, str):
        raise c.fail(path + ("key",), msg("expected the name of a tensor in the file, received {got}", got=c.received(path + ('key',), key)))
    transpose = c.boolean(raw.get("transpose", False), path + ("transpose",))
    confined(c, path + ("file",), file)
    from tracer.checkpoints import refs

    return refs.resolve(spec_dir(c), file), key, transpose


def file_weight(c: Checks, raw: dict[str, Any], path: Path, name: str, label: str, want: tuple[int, ...]) -> Any:
    """w_q: {file: w.npz, key: attn_q}: the tensor's key and shape checked from the file's header."""
    file, key, transpose = file_ref_fields(c, raw, path)
    from tracer.checkpoints import refs

    try:
        return refs.file_ref(file, key, transpose, name, label, want, f"{c.src.where(path)}: {format_path(path)}")
    except refs.CheckpointError as e:
        raise SpecError(e.message) from None


def file_rows(c: Checks, name: str, value: Any) -> int | None:
    """Rows of a table read from a file (a whole-model checkpoint or {file: ...}): None when it is not."""
    from_file = isinstance(value, dict) or (value is None and c.model_source is not None)
    if not from_file:
        return None
    from tracer.checkpoints import refs

    if isinstance(value, dict):
        path: Path = ("weights", name)
        file, key, transpose = file_ref_fields(c, value, path)
        try:
            rows = refs.table_rows(file, key, transpose, f"{c.src.where(path)}: {format_path(path)}")
        except refs.CheckpointError as e:
            raise SpecError(e.message) from None
        return rows if rows > 0 else None
    return c.model_source.rows(name)


def table_rows(c: Checks, weights_raw: dict[str, Any], name: str, declared: int | None, default: int | None,
               from_vocab: bool = False) -> int:
    """A table's rows: as its file has them, as given inline, as declared (dims, or the vocab's words when
    ``from_vocab``), else the default; a table and its declaration must agree."""
    letter = TABLES[name][0]
    value = weights_raw.get(name)
    rows_in_file = file_rows(c, name, value)
    rows = rows_in_file if rows_in_file is not None else len(value) if isinstance(value, list) and value else None
    if rows is None:
        if declared is not None:
            return declared
        if default is None:
            raise c.fail(("dims",), msg("dims.{letter} is needed to draw weights.{name} from the seed", letter=letter, name=name))
        return default
    if declared is not None and declared != rows:
        source = msg("the vocab has {n} words", n=declared) if from_vocab else msg("dims.{letter} = {n}", letter=letter, n=declared)
        if rows_in_file is not None:
            raise c.fail(("weights", name), msg("the table in the checkpoint has {rows_in_file} rows but {source}", rows_in_file=rows, source=source))
        raise c.fail(("weights", name), msg("table has {rows} rows but {source}", rows=rows, source=source))
    return rows


def read_whole(c: Checks, weights: dict[str, Weight], block: BlockSpec) -> None:
    """A checkpoint is read whole, or refused: no tensor of what the spec traces may be left unread (unless
    weights.allow_unread says it is read in part on purpose)."""
    if c.model_source is None or c.allow_unread:
        return
    from tracer.checkpoints import refs
    from tracer.checkpoints.families.base import named_few

    read = [w.value for w in weights.values() if w.source == "file" and isinstance(w.value, refs.TensorRef)]
    left = refs.unread(c.model_source, read, block.head == "tied")
    if left:
        raise c.fail(("weights", "file"), nmsg(
            "the {layout} layout leaves {n} tensor of what this spec traces unread: {names}; without it the trace is not the checkpoint's model "
            "(add allow_unread: true under weights to trace it anyway)",
            "the {layout} layout leaves {n} tensors of what this spec traces unread: {names}; without them the trace is not the checkpoint's model "
            "(add allow_unread: true under weights to trace it anyway)",
            len(left), layout=c.model_source.layout.name, names=named_few(left)))

