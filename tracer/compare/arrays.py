"""Arrays another program recorded, read and matched to a trace's stage names (``tracer diff SPEC mine.npz``).

Three kinds of file hold them: an ``.npz`` with one array per stage (numpy's ``savez``, the
recorder helper, or tracer's own ``--save`` archive) and a JSON object of stage name -> nested
list.  Every file is checked here, at the edge: a file that cannot be read, an array of Python
objects (never unpickled: ``allow_pickle=False``) or of text is an ArraysFileError (exit 2, one
line naming the file and the array).

The user's arrays may keep their own names: ``--map theirs=ours`` (repeatable) or a YAML file of
``theirs: ours`` lines says which is which; an array named like a stage matches it directly, and
an array that matches nothing is listed, never silently dropped.  An array without the batch
axis (``[T,C]`` for ``[B,T,C]`` with B = 1) is read with B = 1, and the diff says so.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from tracer import reading
from tracer.checkpoints.formats import STORED_ITEMSIZE, NpzFile
from tracer.compare.saved import _int, _Reader
from tracer.engine.executor import Stage
from tracer.errors import ArraysFileError, CheckpointError, UsageError
from tracer.files import note_input
from tracer.messages import Located, Message, at, message_of, msg, nmsg
from tracer.model import catalogue
from tracer.spec import yamlio

STATS_SUFFIXES = (".stats", ".shape", ".at")  # a stage --save kept as statistics (--record stats)
UNKNOWN_AXIS = "?"


ZIP_MAGIC, NPY_MAGIC = (b"PK\x03\x04", b"PK\x05\x06"), b"\x93NUMPY"  # a zip file (an empty one: PK\x05\x06), a bare .npy


def is_npz(path: str) -> bool:
    """An .npz (or .npy) by its name, or any file that starts like one."""
    if path.lower().endswith((".npz", ".npy")):
        return True
    return _head(path).startswith((*ZIP_MAGIC, NPY_MAGIC))


def _head(path: str) -> bytes:
    """The first bytes of a regular file (through the reading layer: a FIFO or a device is never opened to wait)."""
    try:
        fh, _ = reading.open_regular(path)
    except reading.InputRefused:
        return b""
    with fh:
        return fh.read(8)


def is_arrays_document(doc: Any) -> bool:
    """A JSON object that is neither a saved trace nor a spec: stage name -> nested list."""
    return (isinstance(doc, dict) and bool(doc) and not {"schema_version", "stages", "kind", "dims"} & set(doc)
            and all(isinstance(v, list) for v in doc.values()))


def open_npz(path: str) -> NpzFile:
    """An .npz archive of arrays, its headers read (each bounded, tracer.reading), no array yet."""
    if not reading.is_regular(path):
        if os.path.isdir(path) or not os.path.lexists(path):
            raise ArraysFileError(msg("{path}: {x}, expected an .npz archive of arrays", path=path,
                                      x=msg("is a directory") if os.path.isdir(path) else msg("no such file")))
        try:
            reading.open_regular(path)[0].close()
        except reading.InputRefused as e:
            raise ArraysFileError(at(path, e.message)) from None
    if not _head(path).startswith((*ZIP_MAGIC, NPY_MAGIC)):
        raise ArraysFileError(msg("{path}: is not an .npz archive (an .npz is a zip file of .npy arrays, as np.savez writes it)", path=path))
    note_input(path)
    if _head(path).startswith(NPY_MAGIC):
        raise ArraysFileError(msg("{path}: holds one bare array (.npy), not an archive of named arrays; write one with np.savez('mine.npz', norm1=...)",
                                  path=path))
    try:
        archive = NpzFile(path, numbers_only=False)
    except CheckpointError as e:
        m = message_of(e)
        raise ArraysFileError(msg("{path}: not a readable .npz archive ({e})", path=path, e=_body(m, path))) from None
    for name, dtype in archive.unreadable.items():
        if dtype.lstrip("<>|=") == "O":
            raise ArraysFileError(msg("{path}: array {name} holds Python objects; tracer reads arrays of numbers only (and never unpickles)", path=path,
                                      name=repr(name)))
        raise ArraysFileError(msg("{what}: expected numbers, received an array of dtype {dtype}", what=f"{path}: array {name!r}",
                                  dtype=reading.dtype_shown(dtype)))
    if not archive.tensors:
        raise ArraysFileError(msg("{path}: the archive holds no arrays", path=path))
    return archive


def _body(message: str, path: str) -> object:
    """A checkpoint reader's message without its leading path (the arrays' message names the path itself)."""
    return message.body if isinstance(message, Located) and message.where == path else message


def npz_bytes(archive: NpzFile) -> int:
    """What reading every array of the archive holds: the values as stored while read, then as float64."""
    return sum(math.prod(archive.info(k).shape) * (8 + STORED_ITEMSIZE[archive.info(k).dtype]) for k in archive.tensors)


def read_npz(path: str, archive: NpzFile | None = None) -> Arrays:
    """Every array of an .npz archive, as float64; pickled objects are never loaded, and no member is decompressed
    beyond the size its header declares (which read_side has checked against --max-memory before)."""
    archive = open_npz(path) if archive is None else archive
    out: dict[str, np.ndarray] = {}
    dtypes = []
    for name in archive.tensors:
        try:
            array = archive.raw(name)
        except CheckpointError as e:
            raise ArraysFileError(msg("{path}: array {name} cannot be read ({e})", path=path, name=repr(name), e=_body(message_of(e), path))) from None
        dtypes.append(array.dtype)
        out[name] = numeric(array, f"{path}: array {name!r}")
    archive.zip.close()
    return with_dtype(out, dtypes)


def read_json(doc: dict[str, Any], path: str) -> Arrays:
    """A JSON object of stage name -> nested list (NaN and infinities as "NaN", "Infinity", "-Infinity"); its dtype
    is float32 when its numbers are float32's (written from float32 arrays: every value a float32 number, some of
    them not short decimals), as an .npz says its own."""
    reader = _Reader(path)
    out = Arrays({name: reader.array(value, name) for name, value in doc.items()})
    out.dtype = "float32" if looks_float32(out.values()) else None
    return out


def looks_float32(arrays: Any) -> bool:
    """Every finite value is exactly a float32 number, and at least a tenth of the values that are not whole numbers
    need more than 9 significant digits as doubles: arrays a float32 program wrote out (`arr.tolist()`), not short
    decimals a person typed (which are float32 numbers only by chance, as 0.5 or 1.25 are)."""
    long_digits = sampled = 0
    for a in arrays:
        values = np.asarray(a, dtype=np.float64).ravel()
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        with np.errstate(all="ignore"):
            if not np.array_equal(values.astype(np.float32).astype(np.float64), values):
                return False
        frac = values[values != np.round(values)][:256]
        sampled += frac.size
        long_digits += sum(len(repr(float(v)).lstrip("-").replace(".", "").split("e")[0].strip("0")) > 9 for v in frac)
    return sampled > 0 and long_digits * 10 >= sampled


class Arrays(dict[str, np.ndarray]):
    """Arrays read as float64, and the narrowest float dtype they were written in ("float32", "float16"; None:
    float64 or whole numbers): it chooses the diff's tolerance."""

    dtype: str | None = None


def narrowest(dtypes: Sequence[Any]) -> str | None:
    """"float16" or "float32" when any of these dtypes is one (in either byte order), else None."""
    names = set()
    for d in dtypes:  # a NumPy dtype, or a torch one (torch.float32), without importing torch
        try:
            names.add(np.dtype(d).name)
        except TypeError:
            names.add(str(d).rsplit(".", 1)[-1])
    return "float16" if names & {"float16", "bfloat16", "half"} else "float32" if names & {"float32", "float"} else None


def with_dtype(arrays: dict[str, np.ndarray], dtypes: Sequence[Any]) -> Arrays:
    out = Arrays(arrays)
    out.dtype = narrowest(dtypes)
    return out


def numeric(value: Any, what: str) -> np.ndarray:
    """An array-like of numbers (a torch tensor too) as a float64 array; anything else is an ArraysFileError."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise ArraysFileError(msg("{what}: not an array of numbers ({e})", what=what, e=_short(e))) from None
    if array.dtype.kind not in "biuf":
        raise ArraysFileError(msg("{what}: expected numbers, received an array of dtype {dtype}", what=what, dtype=array.dtype))
    return array.astype(np.float64)


def _short(e: BaseException) -> str:
    return " ".join(str(e).split())[:160] or type(e).__name__


# -- names: --map and matching ---------------------------------------------------------

def parse_map(items: Sequence[str]) -> dict[str, str]:
    """``--map theirs=ours`` items, or YAML files of ``theirs: ours`` lines -> {theirs: ours}."""
    out: dict[str, str] = {}
    for item in items:
        if "=" in item:
            theirs, _, ours = (part.strip() for part in item.partition("="))
            if not theirs or not ours:
                raise UsageError(msg("--map {item}: expected THEIRS=OURS, e.g. --map ln1=norm1", item=item))
            pairs = [(theirs, ours, f"--map {item}")]
        else:
            pairs = _map_file(item)
        for theirs, ours, where in pairs:
            if theirs in out and out[theirs] != ours:
                raise UsageError(msg("{where}: {theirs} is already mapped to {out}", where=where, theirs=repr(theirs), out=repr(out[theirs])))
            out[theirs] = ours
    return out


def _map_file(path: str) -> list[tuple[str, str, str]]:
    if not os.path.exists(path):
        raise UsageError(msg("--map {path}: expected THEIRS=OURS (e.g. --map ln1=norm1) or a YAML file of 'theirs: ours' lines; no such file", path=path))
    doc, src = yamlio.load(yamlio.read_text(path), path)
    pairs = []
    for theirs, ours in doc.items():
        if not isinstance(ours, str) or not ours:
            raise UsageError(msg("{where}: {theirs}: expected a tracer stage name, received {ours}", where=src.where((theirs,)), theirs=theirs,
                                 ours=repr(ours)))
        pairs.append((str(theirs), ours, src.where_key((theirs,))))
    return pairs


class Matched(NamedTuple):
    """The user's arrays as stages of the reference side, and what the diff should say about them."""

    stages: dict[str, Stage]  # under the reference's stage names, in the reference's order
    renamed: dict[str, str]  # ours -> theirs, where the names differ
    unmatched: list[str]  # the user's arrays that match no stage
    unbatched: list[str]  # stages given without the batch axis, read with B = 1
    reshaped: list[Message]  # notes on shapes that differ
    stats_only: list[str]  # stages a --save archive kept as statistics: not comparable


def match(arrays: Mapping[str, np.ndarray], names: Mapping[str, str], reference: Mapping[str, Stage], path: str,
          ref_label: str) -> Matched:
    """Put the user's arrays under the reference's stage names (``names``: theirs -> ours)."""
    stats_only = sorted({n[: -len(s)] for n in arrays for s in STATS_SUFFIXES if n.endswith(s) and n[: -len(s)] + ".stats" in arrays})
    plain = {n: a for n, a in arrays.items() if not any(n == base + s for base in stats_only for s in STATS_SUFFIXES)}
    for theirs, ours in names.items():
        if theirs not in plain:
            raise UsageError(msg("--map {theirs}={ours}: {path} has no array {theirs2}{theirs3} (its arrays: {x})", theirs=theirs, ours=ours, path=path,
                                 theirs2=repr(theirs), theirs3=catalogue.suggest(theirs, plain), x=', '.join(plain) or 'none'))
        if ours not in reference:
            raise UsageError(msg("--map {theirs}={ours}: {ref_label} has no stage {ours2}{ours3}", theirs=theirs, ours=ours, ref_label=ref_label,
                                 ours2=repr(ours), ours3=catalogue.suggest(ours, reference)))
    by_ours: dict[str, str] = {}
    for theirs, ours in names.items():
        if ours in by_ours:
            raise UsageError(msg("--map: {by_ours} and {theirs} are both mapped to the stage {ours}", by_ours=repr(by_ours[ours]), theirs=repr(theirs),
                                 ours=repr(ours)))
        by_ours[ours] = theirs
    unmatched = []
    for theirs in plain:
        if theirs in names:
            continue
        if theirs in reference and theirs not in by_ours:
            by_ours[theirs] = theirs
        else:
            unmatched.append(theirs)
    stages: dict[str, Stage] = {}
    unbatched: list[str] = []
    reshaped: list[Message] = []
    for ours, ref in reference.items():
        if ours not in by_ours:
            continue
        array = plain[by_ours[ours]]
        axes = ref.axes
        if array.shape != ref.shape:
            if ref.axes[:1] == ("B",) and ref.shape[0] == 1 and array.shape == ref.shape[1:]:
                array = array[np.newaxis]
                unbatched.append(ours)
            else:
                axes = guess_axes(array.shape, ref)
                reshaped.append(at(ours, _reshaped(ref, ref_label, path, shape_text(axes, array.shape))))
        stages[ours] = Stage(ours, array, axes, ref.meaning, ref.internal)
    renamed = {ours: theirs for ours, theirs in by_ours.items() if ours != theirs}
    return Matched(stages, renamed, unmatched, unbatched, reshaped, stats_only)


def _reshaped(ref: Stage, ref_label: str, path: str, given: str) -> Message:
    shape = list(ref.shape)
    if ref.axes[:1] == ("B",) and ref.shape[0] == 1:
        return msg("{ref} has {a}, {path} has {b} (expected {e}, or {f} without the batch axis)", ref=ref_label, a=ref.shape_label, path=path, b=given,
                   e=shape, f=shape[1:])
    return msg("{ref} has {a}, {path} has {b} (expected {e})", ref=ref_label, a=ref.shape_label, path=path, b=given, e=shape)


def guess_axes(shape: tuple[int, ...], ref: Stage) -> tuple[str, ...]:
    """Letters for an array of another shape: each size that only one of the reference's axes has gets its letter."""
    letters = []
    for n in shape:
        owners = {a for a, m in zip(ref.axes, ref.shape) if m == n}
        letters.append(owners.pop() if len(owners) == 1 else UNKNOWN_AXIS)
    return tuple(letters)


def shape_text(axes: tuple[str, ...], shape: tuple[int, ...]) -> str:
    if all(a == UNKNOWN_AXIS for a in axes):
        return str(list(shape))
    return f"[{','.join(axes)}] = [{','.join(str(n) for n in shape)}]"


def catalogue_stages(arrays: Mapping[str, np.ndarray]) -> dict[str, Stage]:
    """Arrays with no spec beside them (both sides files of arrays): axis letters from the catalogue, by name."""
    entries = {e.name: e for e in catalogue.CATALOGUE}
    out = {}
    for name, array in arrays.items():
        entry = entries.get(name) or entries.get(catalogue.base_name(name))
        axes = entry.axes if entry is not None and len(entry.axes) == array.ndim else (UNKNOWN_AXIS,) * array.ndim
        out[name] = Stage(name, array, axes, entry.meaning if entry else "", internal=False)
    return out


def describe(arrays: Mapping[str, np.ndarray]) -> Message:
    return nmsg("{n} array", "{n} arrays", len(arrays))


def sniff_json(path: str, text: str) -> dict[str, Any] | None:
    """The parsed document when ``path`` is a JSON object of arrays, else None."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(text, parse_int=_int)
    except (json.JSONDecodeError, RecursionError):
        return None
    return doc if is_arrays_document(doc) else None
