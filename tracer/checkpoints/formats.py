"""Open a checkpoint lazily and read single tensors by key.

Opening reads headers only (a safetensors header, a zip directory and each .npy header, an
index file), with no NumPy: ``tracer validate`` checks names and shapes without reading a
tensor, and checks all that ``tracer run`` will (a header's size and nesting, every tensor's
offsets against the file's size).  Every file is opened through ``tracer.reading``: regular files
only (a FIFO or a device is refused, never waited on), each header bounded before it is parsed.
``read(key, dtype)`` reads that one tensor into a new array of the dtype asked for, written once
(``fill``: a safetensors tensor is read with pread a block at a time, converted as it goes, into its
transpose if asked); bfloat16, which NumPy lacks, is widened to float32 by a 16-bit shift.  A pickle (.pt, .bin, .pth) is opened only through ``torch.load(...,
weights_only=True)`` when torch is installed; nothing else is ever unpickled.

Every error is a CheckpointError holding a short fact; the spec adds where it was asked for.
"""

from __future__ import annotations

import math
import os
import struct
import sys
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer import reading
from tracer.errors import CheckpointError
from tracer.files import note_input, outside_confinement
from tracer.messages import Message, at, msg

if TYPE_CHECKING:
    import numpy as np

FLOATS = ("float64", "float32", "float16", "bfloat16")
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
                      "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
                      "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3"}
NPY_DTYPES = {"f8": "float64", "f4": "float32", "f2": "float16", "i8": "int64", "i4": "int32", "i2": "int16", "i1": "int8",
              "u8": "uint64", "u4": "uint32", "u2": "uint16", "u1": "uint8", "b1": "bool"}
STORED_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
                   "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1, "float8_e5m2": 1, "float8_e4m3": 1}
PICKLES = (".pt", ".pth", ".bin", ".ckpt")
MAX_HEADER = 100 * 2**20  # a safetensors header above 100 MB is corrupt (the format's own limit)
MAX_JSON_FILE = 64 * 2**20  # a config.json or an index larger than this is no model's
SAFETENSORS_DEPTH = 4  # {name: {dtype, shape: [...], data_offsets: [...]}}: three levels; __metadata__ two
TORCH_ADVICE = msg("install torch to read it (pip install 'tracer[torch]'), or convert it once to safetensors: {command}",
                   command="python -c \"import torch; from safetensors.torch import save_file; "
                           "save_file(torch.load('model.pt', weights_only=True), 'model.safetensors')\"")


class TensorInfo(NamedTuple):
    shape: tuple[int, ...]
    dtype: str  # float64 | float32 | float16 | bfloat16 | int64 | ...

    @property
    def nbytes(self) -> int:
        n = STORED_ITEMSIZE.get(self.dtype, 8)
        for s in self.shape:
            n *= s
        return n


def shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(n) for n in shape) + "]"


class Checkpoint(ABC):
    """A checkpoint opened for reading: its keys and each tensor's shape and dtype, read one at a time."""

    path: str
    kind: str = "checkpoint"

    @abstractmethod
    def keys(self) -> list[str]: ...

    @abstractmethod
    def info(self, key: str) -> TensorInfo: ...

    def __contains__(self, key: str) -> bool:
        return key in self.key_set()

    def key_set(self) -> frozenset[str]:
        """The keys as a set, made once: looking a weight up costs the same however many tensors the file holds."""
        keys = getattr(self, "_key_set", None)
        if keys is None:
            keys = self._key_set = frozenset(self.keys())
        return keys

    def release(self) -> None:  # noqa: B027 (a hook: most formats hold no memory map, so nothing to do)
        """Let go of memory maps made while reading: the file's pages then stop counting in the run's memory."""

    @abstractmethod
    def raw(self, key: str) -> np.ndarray:
        """The tensor as stored (bfloat16 already widened to float32); may be a read-only memory map."""

    def read(self, key: str, dtype: str, transpose: bool = False) -> np.ndarray:
        """The tensor in ``dtype``: where the file holds it in that dtype, as it lies there (``as_stored``: a read-only
        memory map of the file's pages, no copy); else a new array of its own, converted as it is written once
        (``fill``).  ``transpose`` (a matrix): its transpose, the map's transposed view, or a C-ordered array written
        straight from the file's rows."""
        import numpy as np

        info = self.info(key)
        if info.dtype not in FLOATS:
            raise CheckpointError(at(self.path, msg('tensor {key} holds {dtype}, expected floating-point numbers', key=repr(key), dtype=info.dtype)))
        transpose = transpose and len(info.shape) == 2
        same = self.as_stored(key, dtype)
        if same is not None:
            return same.T if transpose else same
        out = np.empty(info.shape[::-1] if transpose else info.shape, dtype=dtype)
        try:
            self.fill(key, out.T if transpose else out)
        except CheckpointError:
            raise
        except reading.InputRefused as e:
            raise CheckpointError(at(self.path, at(msg("tensor {key}", key=repr(key)), e.message))) from None
        except (OSError, ValueError, EOFError) as e:
            raise CheckpointError(at(self.path, msg('tensor {key} cannot be read ({e}); the file is truncated or corrupt', key=repr(key), e=e))) from None
        return out

    def as_stored(self, key: str, dtype: str) -> np.ndarray | None:
        """The tensor as the file lays it out, read-only, when that is already ``dtype`` and a format can map it; else None."""
        return None

    def fill(self, key: str, out: np.ndarray) -> None:
        """Write the tensor into ``out`` (its shape, the run's dtype): converted as it is copied, no other full copy."""
        import numpy as np

        a = self.raw(key)
        if a.shape != out.shape:
            raise CheckpointError(at(self.path, msg('tensor {key} reads as {shape} but its header says {shape2}', key=repr(key), shape=shape_text(a.shape),
                                                    shape2=shape_text(out.shape))))
        np.copyto(out, a, casting="unsafe")

    def read_rows(self, key: str, rows: list[int], dtype: str) -> np.ndarray:
        """The tensor in ``dtype`` with only ``rows`` read from the file; the other rows are zero pages, never touched."""

        info = self.info(key)
        if info.dtype not in FLOATS or len(info.shape) != 2:
            return self.read(key, dtype)
        out = _untouched_zeros(info.shape, dtype)
        try:
            out[rows] = self.rows(key, rows)
        except reading.InputRefused as e:
            raise CheckpointError(at(self.path, at(msg("tensor {key}", key=repr(key)), e.message))) from None
        except (OSError, ValueError, EOFError) as e:
            raise CheckpointError(at(self.path, msg('tensor {key} cannot be read ({e}); the file is truncated or corrupt', key=repr(key), e=e))) from None
        return out

    def rows(self, key: str, rows: list[int]) -> np.ndarray:
        return self.raw(key)[rows]

    def config(self) -> dict[str, Any] | None:
        """config.json of a Hugging Face model folder (or beside a single file), if there is one."""
        folder = self.path if os.path.isdir(self.path) else os.path.dirname(os.path.abspath(self.path))
        cfg = os.path.join(folder, "config.json")
        if not os.path.exists(cfg):
            return None
        return _read_json(cfg, "config.json")


def _confined(path: str) -> None:
    if outside_confinement(path):  # a link inside the --confine folder that leads out of it
        raise CheckpointError(at(path, msg("is outside the folder --confine allows; a spec may refer only to files inside it")))


def _read_json(path: str, what: str) -> Any:
    """A config.json or an index: a regular file, its size and nesting bounded before it is parsed."""
    _confined(path)
    note_input(path)  # an input of the command: no output may replace it (tracer.files)
    try:
        return reading.json_value(reading.read_bytes(path, MAX_JSON_FILE, msg("a JSON file")), msg("a text"), finite=False)
    except reading.InputRefused as e:
        raise CheckpointError(at(path, msg('cannot read {what}: {e}', what=what, e=e.message))) from None


def _opened(path: str) -> tuple[Any, int]:
    """``path`` opened through the reading layer (regular files only), and its size."""
    try:
        return reading.open_regular(path)
    except reading.InputRefused as e:
        raise CheckpointError(at(path, e.message)) from None


def _same_size(path: str, size: int, expected: int) -> None:
    if size != expected:
        raise CheckpointError(at(path, msg('has changed since its header was read ({size} bytes, {expected} before); run the command again', size=f"{size:,}",
                                           expected=f"{expected:,}")))


# -- safetensors ---------------------------------------------------------------
class SafetensorsFile(Checkpoint):
    """A safetensors file, its header read and checked as the safetensors library checks it (the tensors cover the
    data exactly, one after another): what validate accepts, run reads.  Tensors are memory-mapped as stored."""

    kind = "safetensors"

    def __init__(self, path: str) -> None:
        self.path = path
        fh, size = _opened(path)
        with fh:
            head = fh.read(8)
            if len(head) < 8:
                raise CheckpointError(at(path, msg('is not a safetensors file (only {n_head} bytes)', n_head=len(head))))
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER or 8 + n > size:
                raise CheckpointError(at(path, msg('is not a safetensors file, or is truncated (its header length is implausible for a file of {size} bytes)',
                                                   size=f"{size:,}")))
            try:
                header = reading.json_value(reading.read_exactly(fh, n), msg("a header"), depth=SAFETENSORS_DEPTH)
            except reading.InputRefused as e:
                raise CheckpointError(at(path, msg('is not a safetensors file ({what}); the file is corrupt', what=e.message))) from None
        if not isinstance(header, dict):
            raise CheckpointError(at(path, msg('is not a safetensors file (its header is not a mapping)')))
        self.start = 8 + n
        self.size = size
        self.tensors: dict[str, tuple[TensorInfo, int, int]] = {}
        for key, entry in header.items():
            if key == "__metadata__":
                continue
            self.tensors[key] = _safetensors_entry(path, key, entry)
        end = 0
        for key, (_, lo, hi) in sorted(self.tensors.items(), key=lambda item: (item[1][1], item[1][2])):
            if lo != end:
                raise CheckpointError(at(path, msg('tensor {key} starts at byte {lo} of the data, where {end} is due (tensors overlap or leave a '
                                                   'gap); the file is corrupt', key=repr(key), lo=f"{lo:,}", end=f"{end:,}")))
            end = hi
        if self.start + end > size:
            raise CheckpointError(at(path, msg('is truncated: its header promises {x} bytes, the file has {size}', x=f"{self.start + end:,}",
                                               size=f"{size:,}")))
        if self.start + end < size:
            raise CheckpointError(at(path, msg('has {n} bytes after its last tensor; the file is corrupt', n=f"{size - self.start - end:,}")))

    def keys(self) -> list[str]:
        return list(self.tensors)

    def info(self, key: str) -> TensorInfo:
        return self.tensors[key][0]

    def _stored(self, key: str) -> str:
        dtype = self.tensors[key][0].dtype
        if dtype == "bfloat16":
            return "<u2"
        code = next((k for k, v in NPY_DTYPES.items() if v == dtype), None)
        if code is None:
            raise CheckpointError(at(self.path, msg('tensor {key} holds {dtype}, expected floating-point numbers', key=repr(key), dtype=dtype)))
        return "<" + code

    def mapped(self, key: str) -> np.ndarray:
        """The tensor memory-mapped as stored (bfloat16 as its raw 16 bits): nothing is read until used."""
        import numpy as np

        info, lo, _ = self.tensors[key]
        stored = self._stored(key)
        if info.nbytes == 0:
            return np.zeros(info.shape, dtype=stored)
        fh, size = _opened(self.path)
        with fh:
            _same_size(self.path, size, self.size)
            return np.memmap(fh, dtype=stored, mode="r", offset=self.start + lo, shape=info.shape)

    def as_stored(self, key: str, dtype: str) -> np.ndarray | None:
        """A tensor of MAP_AT_LEAST bytes or more, stored in ``dtype`` (little-endian) at an address aligned for it: its
        memory map, read-only.  The run then reads the file's pages in the page cache where they are, instead of copying
        them into fresh memory (GPT-2's tied embedding: 154 MB in float32), and the pages go with the last array that
        uses them.  The header's offsets were checked against the file's size when it was opened, and the size is
        checked again here, so every page mapped is in the file."""
        info, lo, _ = self.tensors[key]
        if info.dtype != dtype or info.nbytes < MAP_AT_LEAST or (self.start + lo) % STORED_ITEMSIZE[dtype]:
            return None
        import numpy as np

        return self.mapped(key).view(np.ndarray)  # a plain array over the map (which it keeps alive)

    def rows(self, key: str, rows: list[int]) -> np.ndarray:
        """Only these rows' bytes are read (one pread each: a memory map would fault in pages around each row)."""
        import numpy as np

        info, lo, _ = self.tensors[key]
        stored = self._stored(key)
        width = info.nbytes // info.shape[0] if info.shape[0] else 0
        fh, size = _opened(self.path)
        with fh:
            _same_size(self.path, size, self.size)
            data = b"".join(os.pread(fh.fileno(), width, self.start + lo + r * width) for r in rows)
        if len(data) != width * len(rows):
            raise CheckpointError(at(self.path, msg('tensor {key} is cut short; the file is truncated', key=repr(key))))
        return _widen(np.frombuffer(data, dtype=stored).reshape(len(rows), *info.shape[1:]), info.dtype)

    def raw(self, key: str) -> np.ndarray:
        return _widen(self.mapped(key), self.info(key).dtype)

    def fill(self, key: str, out: np.ndarray) -> None:
        """Read the tensor's bytes a block at a time (pread, no memory map: the file's pages never count in the run's
        memory) and convert each block into ``out``: float32 into float32 is read straight into ``out``, bfloat16 is
        widened block by block, so no full-size temporary is made."""
        import numpy as np

        info, lo, hi = self.tensors[key]
        stored = np.dtype(self._stored(key))
        fh, size = _opened(self.path)
        with fh:
            _same_size(self.path, size, self.size)
            fd, at_byte = fh.fileno(), self.start + lo
            if not out.flags.c_contiguous:  # a transpose's view: a block of the file's rows at a time, written across
                width = math.prod(info.shape[1:])
                rows = max(1, READ_BLOCK // max(1, width * stored.itemsize))
                block = np.empty((min(rows, info.shape[0]), *info.shape[1:]), dtype=stored)
                for r in range(0, info.shape[0], rows):
                    part = block[: min(rows, info.shape[0] - r)]
                    _pread_into(fd, part.reshape(-1).view(np.uint8).data, at_byte + r * width * stored.itemsize, self.path, key)
                    for j in range(0, part.shape[0], ACROSS):  # 16 rows: each row of the result gets a cache line at a time
                        rows_j = part[j:j + ACROSS]
                        out[r + j:r + j + rows_j.shape[0]] = _widen(rows_j, info.dtype)
                return
            flat = out.reshape(-1)
            if stored == flat.dtype:  # as stored: the file's bytes go straight into the result
                _pread_into(fd, flat.view(np.uint8).data, at_byte, self.path, key)
                return
            step = READ_BLOCK // stored.itemsize
            block = np.empty(min(step, flat.size), dtype=stored)
            for i in range(0, flat.size, step):
                part = block[: min(step, flat.size - i)]
                _pread_into(fd, part.view(np.uint8).data, at_byte + i * stored.itemsize, self.path, key)
                dest = flat[i:i + part.size]
                if info.dtype == "bfloat16":  # the top 16 bits of a float32
                    if dest.dtype == np.float32:
                        wide = dest.view(np.uint32)
                        np.left_shift(part, 16, out=wide, dtype=np.uint32)
                    else:
                        dest[...] = (part.astype(np.uint32) << 16).view(np.float32)
                else:
                    dest[...] = part


def all_finite(a: np.ndarray) -> bool:
    """Every value finite, checked a block at a time: a finite sum of a block means each of its values is (no
    full-size temporary, as np.isfinite(a).all() would make)."""
    import numpy as np

    flat = np.ravel(a, order="K")  # a view for a transposed map too (reshape(-1) would copy it whole)
    step = READ_BLOCK // max(1, a.itemsize)
    with np.errstate(all="ignore"):
        for i in range(0, flat.size, step):
            part = flat[i:i + step]
            if not np.isfinite(part.sum()) and not np.isfinite(part).all():
                return False
    return True


MAP_AT_LEAST = 1 << 20  # bytes from which a tensor stored in the run's dtype is mapped, not copied (as_stored)
READ_BLOCK = 1 << 22  # bytes of a stored tensor converted at a time (Checkpoint.fill): the block stays in the cache
ACROSS = 16  # rows of a stored matrix written at a time into its transpose: the fastest of 8 to 512 measured


def _pread_into(fd: int, view: memoryview, offset: int, path: str, key: str) -> None:
    """Fill ``view`` from the file at ``offset`` (a few preadv calls: a big tensor may take more than one)."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:done + (1 << 30)]], offset + done)
        if n <= 0:
            raise CheckpointError(at(path, msg('tensor {key} is cut short; the file is truncated', key=repr(key))))
        done += n


def _safetensors_entry(path: str, key: str, entry: Any) -> tuple[TensorInfo, int, int]:
    """One tensor's header entry, every field checked for its type and range: (shape and dtype, start, end)."""
    malformed = at(path, msg('tensor {key} has a malformed header entry; the file is corrupt', key=repr(key)))
    if not isinstance(entry, dict):
        raise CheckpointError(malformed)
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if (not isinstance(shape, list) or len(shape) > 64 or not all(reading.whole_number(s) and s >= 0 for s in shape)
            or not isinstance(offsets, list) or len(offsets) != 2 or not all(reading.whole_number(o) and o >= 0 for o in offsets)):
        raise CheckpointError(malformed)
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPES:
        raise CheckpointError(at(path, msg('tensor {key} has a dtype tracer does not know; the file is corrupt', key=repr(key))))
    info = TensorInfo(tuple(shape), SAFETENSORS_DTYPES[dtype])
    lo, hi = offsets
    if hi - lo != info.nbytes:
        raise CheckpointError(at(path, msg('tensor {key} {shape} {dtype} should take {nbytes} bytes, its header gives {x}; the file is corrupt', key=repr(key),
                                           shape=shape_text(info.shape), dtype=info.dtype, nbytes=f"{info.nbytes:,}", x=f"{hi - lo:,}")))
    return info, lo, hi


def _untouched_zeros(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A zero array whose pages stay unallocated until written, one 4 kB page at a time.

    np.zeros is as lazy, but with transparent huge pages writing one row makes 2 MB resident: a few
    hundred token rows spread over GPT-2's 50257 would make the whole table resident.
    """
    import mmap

    import numpy as np

    size = max(1, STORED_ITEMSIZE[dtype] * math.prod(shape))
    buf = mmap.mmap(-1, size)  # anonymous: zero pages
    advice = getattr(mmap, "MADV_NOHUGEPAGE", None)
    if advice is not None:
        buf.madvise(advice)
    return np.frombuffer(buf, dtype=dtype, count=math.prod(shape)).reshape(shape)


def _widen(a: np.ndarray, dtype: str) -> np.ndarray:
    """bfloat16, which NumPy lacks, is the top 16 bits of a float32: shift them into place."""
    import numpy as np

    return (a.astype(np.uint32) << 16).view(np.float32) if dtype == "bfloat16" else a


# -- NumPy ---------------------------------------------------------------------
class _Npy(NamedTuple):
    info: TensorInfo
    fortran: bool
    offset: int  # where the values start
    order: str = "<"  # byte order: ">" only for a big-endian array read as another program's (numbers_only False)


def _npy_header(fh: Any, where: str, numbers_only: bool = True) -> _Npy:
    """Parse an .npy header without NumPy (tracer.reading: bounded, never evaluated): its shape, dtype and layout.
    A dtype tracer does not read is refused, or with ``numbers_only`` False kept as the header writes it."""
    try:
        header = reading.npy_header(fh)
    except reading.InputRefused as e:
        raise CheckpointError(at(where, e.message)) from None
    descr = header.descr
    code = descr[1:] if descr[:1] in ("<", "|") or (descr[:1] == "=" and sys.byteorder == "little") else None
    if not numbers_only and descr[:1] == ">" and descr[1:] in NPY_DTYPES:
        return _Npy(TensorInfo(header.shape, NPY_DTYPES[descr[1:]]), header.fortran_order, header.offset, ">")
    if code not in NPY_DTYPES and not numbers_only:
        return _Npy(TensorInfo(header.shape, descr), header.fortran_order, header.offset)
    if code not in NPY_DTYPES:
        raise CheckpointError(at(where, msg('holds {what}, expected little-endian numbers (float64, float32 or float16)', what=reading.dtype_shown(descr))))
    return _Npy(TensorInfo(header.shape, NPY_DTYPES[code]), header.fortran_order, header.offset)


def _array_from(data: bytes | bytearray, npy: _Npy) -> np.ndarray:
    import numpy as np

    flat = np.frombuffer(data, dtype=npy.order + next(k for k, v in NPY_DTYPES.items() if v == npy.info.dtype))
    if npy.fortran:
        return flat.reshape(npy.info.shape[::-1]).T
    return flat.reshape(npy.info.shape)


class NpyFile(Checkpoint):
    """One array; its key is the file's name without .npy (any key names it when there is one)."""

    kind = "npy"

    def __init__(self, path: str) -> None:
        self.path = path
        self.key = os.path.splitext(os.path.basename(path))[0]
        fh, size = _opened(path)
        with fh:
            self._npy = _npy_header(fh, path)
        self._info, self.offset, self.size = self._npy.info, self._npy.offset, size
        if size < self.offset + self._info.nbytes:
            raise CheckpointError(at(path, msg('is truncated: its header promises {x} bytes, the file has {size}', x=f"{self.offset + self._info.nbytes:,}",
                                               size=f"{size:,}")))

    def keys(self) -> list[str]:
        return [self.key]

    def info(self, key: str) -> TensorInfo:
        return self._info

    def raw(self, key: str) -> np.ndarray:
        import numpy as np

        stored = "<" + next(k for k, v in NPY_DTYPES.items() if v == self._info.dtype)
        if self._info.nbytes == 0:
            return np.zeros(self._info.shape, dtype=stored)
        fh, size = _opened(self.path)
        with fh:
            _same_size(self.path, size, self.size)
            return np.memmap(fh, dtype=stored, mode="r", offset=self.offset, shape=self._info.shape, order="F" if self._npy.fortran else "C")


NPZ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, RuntimeError, NotImplementedError)


class NpzFile(Checkpoint):
    """Each member read on its own: the others are never decompressed, and none past the size its header declares."""

    kind = "npz"

    def __init__(self, path: str, numbers_only: bool = True) -> None:
        """``numbers_only`` False: a member of a dtype tracer does not read is kept aside in ``unreadable``
        (key -> its dtype as the header writes it) instead of refusing the archive."""
        import zipfile

        self.path = path
        self.unreadable: dict[str, str] = {}
        fh, self.size = _opened(path)
        self._fh = fh  # the zip reads through it; closed with this object (ZipFile does not close a file it was given)
        try:
            self.zip = reading.zip_open(fh)
            members = [m for m in reading.zip_members(self.zip) if m.filename.endswith(".npy")]
            self.tensors: dict[str, TensorInfo] = {}
            self._npy: dict[str, _Npy] = {}
            for m in members:
                key = m.filename[:-4]
                with self.zip.open(m) as member:
                    npy = _npy_header(member, f"{path}: member {key!r}", numbers_only)
                if npy.info.dtype not in STORED_ITEMSIZE:
                    self.unreadable[key] = npy.info.dtype
                    continue
                if m.file_size != npy.offset + npy.info.nbytes:
                    raise CheckpointError(at(path, msg('member {key} should hold {x} bytes, holds {file_size}; the file is corrupt', key=repr(key),
                                                       x=f"{npy.offset + npy.info.nbytes:,}", file_size=f"{m.file_size:,}")))
                self.tensors[key] = npy.info
                self._npy[key] = npy
        except CheckpointError:
            fh.close()
            raise
        except reading.InputRefused as e:
            fh.close()
            raise CheckpointError(at(path, e.message)) from None
        except (zipfile.BadZipFile, zipfile.LargeZipFile):
            fh.close()
            raise CheckpointError(at(path, msg('is not a NumPy .npz archive, or is truncated (no zip directory)'))) from None
        except NPZ_ERRORS as e:
            fh.close()
            raise CheckpointError(at(path, msg('cannot read ({e}); the file is truncated or corrupt', e=type(e).__name__))) from None

    def __del__(self) -> None:
        fh = getattr(self, "_fh", None)
        if fh is not None:
            fh.close()

    def keys(self) -> list[str]:
        return list(self.tensors)

    def info(self, key: str) -> TensorInfo:
        return self.tensors[key]

    def raw(self, key: str) -> np.ndarray:
        """The member's values: exactly the bytes its header declares are decompressed, checked by the zip's CRC."""
        import zipfile

        npy = self._npy[key]
        try:
            with self.zip.open(key + ".npy") as fh:
                reading.read_exactly(fh, npy.offset)
                data = reading.read_into(fh, npy.info.nbytes)
                fh.read(1)  # the end of the member: the zip's CRC is checked there
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError, NotImplementedError) as e:
            raise CheckpointError(at(self.path, msg('member {key} cannot be read ({e}); the file is truncated or corrupt', key=repr(key),
                                                    e=type(e).__name__))) from None
        return _array_from(data, npy)


# -- PyTorch -------------------------------------------------------------------
def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


class TorchFile(Checkpoint):
    """A state dict saved by torch.save, read with weights_only=True (no arbitrary unpickling) and memory-mapped."""

    kind = "torch"

    def __init__(self, path: str) -> None:
        self.path = path
        if not torch_available():
            raise CheckpointError(at(path, msg("is a PyTorch pickle; tracer never unpickles it without torch's weights_only loader: {TORCH_ADVICE}",
                                               TORCH_ADVICE=TORCH_ADVICE)))
        import torch

        fh, _ = _opened(path)  # a regular file, checked; torch reads that very file through its descriptor
        with fh:
            same = f"/proc/self/fd/{fh.fileno()}" if os.path.isdir("/proc/self/fd") else path
            try:
                try:
                    sd = torch.load(same, map_location="cpu", weights_only=True, mmap=True)
                except RuntimeError as e:
                    if "mmap" not in str(e):
                        raise
                    fh.seek(0)
                    sd = torch.load(fh, map_location="cpu", weights_only=True)  # the legacy format cannot be memory-mapped
            except Exception as e:  # torch raises UnpicklingError, RuntimeError, EOFError, ... for a bad file
                if type(e).__name__ == "UnpicklingError":
                    raise CheckpointError(at(path, msg("holds Python objects other than tensors, which torch.load(weights_only=True) refuses to unpickle (and "
                                                       "tracer never unpickles otherwise); save the model's state_dict() instead"))) from None
                raise CheckpointError(at(path, msg('cannot be read as a PyTorch state dict with weights_only=True ({name}); the file is truncated or corrupt',
                                                   name=type(e).__name__))) from None
        if isinstance(sd, dict) and len(sd) == 1 and isinstance(next(iter(sd.values())), dict):
            sd = next(iter(sd.values()))  # {"state_dict": {...}} or {"model": {...}}
        if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
            raise CheckpointError(at(path, msg('expected a state dict (a mapping of names to tensors), received {name}', name=type(sd).__name__)))
        for key, t in sd.items():
            if t.layout != torch.strided:
                raise CheckpointError(at(path, msg('tensor {key} is a sparse tensor; tracer reads dense tensors only (save it with .to_dense())',
                                                   key=repr(str(key)))))
            if t.device.type != "cpu":
                raise CheckpointError(at(path, msg('tensor {key} is on the {device} device, which holds no values tracer can read; save the tensors themselves',
                                                   key=repr(str(key)), device=t.device.type)))
            if t.is_quantized or t.is_complex():
                raise CheckpointError(at(path, msg('tensor {key} holds {dtype}, expected floating-point numbers', key=repr(str(key)),
                                                   dtype=str(t.dtype).replace("torch.", ""))))
        self.tensors = sd
        names = {torch.float64: "float64", torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
        self._info = {k: TensorInfo(tuple(v.shape), names.get(v.dtype, str(v.dtype).replace("torch.", ""))) for k, v in sd.items()}

    def keys(self) -> list[str]:
        return list(self.tensors)

    def info(self, key: str) -> TensorInfo:
        return self._info[key]

    def raw(self, key: str) -> np.ndarray:
        import torch

        t = self.tensors[key]
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.detach().numpy()


# -- Hugging Face model folders --------------------------------------------------
CHECKPOINT_LIKE = (".safetensors", ".json", ".npz", ".npy", ".bin", ".pt", ".pth", ".ckpt")


def received(value: Any) -> Message | str:
    """A JSON value as the spec validator describes what it received: boolean true, text 'x', nothing (null), a list."""
    if isinstance(value, bool):
        return msg("boolean {v}", v="true" if value else "false")
    if value is None:
        return msg("nothing (null)")
    if isinstance(value, str):
        return msg("text {v}", v=repr(value[:40] + ("..." if len(value) > 40 else "")))
    if isinstance(value, list):
        return msg("a list")
    if isinstance(value, dict):
        return msg("a mapping")
    text = repr(value)
    return text if len(text) <= 24 else text[:20] + "..."


def checkpoint_like(names: list[str]) -> list[str]:
    """The names a message may list from a folder: checkpoint files only, never a hidden one."""
    return sorted(n for n in names if not n.startswith(".") and n.lower().endswith(CHECKPOINT_LIKE))


class Folder(Checkpoint):
    """A Hugging Face model folder: config.json and model.safetensors, or shards listed in model.safetensors.index.json.

    A shard is opened (its header read) only when a key in it is asked for.
    """

    kind = "folder"
    SINGLE = ("model.safetensors", "pytorch_model.bin")
    INDEX = ("model.safetensors.index.json", "pytorch_model.bin.index.json")

    def __init__(self, path: str) -> None:
        self.path = path
        self.shards: dict[str, Checkpoint] = {}
        self.where: dict[str, str] = {}
        for name in self.INDEX:
            index = os.path.join(path, name)
            if os.path.lexists(index):
                doc = _read_json(index, name)
                weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
                if not isinstance(weight_map, dict):
                    raise CheckpointError(at(index, msg("expected a 'weight_map' of tensor names to shard files")))
                for key, shard in weight_map.items():
                    if not isinstance(shard, str):
                        raise CheckpointError(at(index, at("weight_map", at(key, msg("expected {what}, received {got}", what=msg("the name of a shard file"),
                                                                                     got=received(shard))))))
                self.where = dict(weight_map)
                self.main = index
                return
        for name in self.SINGLE:
            if os.path.lexists(os.path.join(path, name)):
                self.main = os.path.join(path, name)
                self.where = dict.fromkeys(self.shard(name).keys(), name)
                return
        found = ", ".join(checkpoint_like(os.listdir(path))[:8]) or msg("no checkpoint files")
        raise CheckpointError(at(path, msg('is a folder without model.safetensors, a sharded model.safetensors.index.json or '
                                           'pytorch_model.bin (it holds {found})', found=found)))

    def shard(self, name: str) -> Checkpoint:
        if name not in self.shards:
            shard = os.path.join(self.path, name)
            if os.path.basename(name) != name or not os.path.lexists(shard):
                raise CheckpointError(at(self.path, msg('the index names the shard {name}, which is not in the folder', name=repr(name))))
            self.shards[name] = _cached(shard)
        return self.shards[name]

    def keys(self) -> list[str]:
        return list(self.where)

    def info(self, key: str) -> TensorInfo:
        shard = self.shard(self.where[key])
        if key not in shard:
            raise CheckpointError(at(self.path, msg('the index puts {key} in {where}, which does not hold it', key=repr(key), where=self.where[key])))
        return shard.info(key)

    def raw(self, key: str) -> np.ndarray:
        return self.shard(self.where[key]).raw(key)

    def as_stored(self, key: str, dtype: str) -> np.ndarray | None:
        return self.shard(self.where[key]).as_stored(key, dtype)

    def fill(self, key: str, out: np.ndarray) -> None:
        self.shard(self.where[key]).fill(key, out)

    def release(self) -> None:
        for shard in self.shards.values():
            shard.release()

    def rows(self, key: str, rows: list[int]) -> np.ndarray:
        return self.shard(self.where[key]).rows(key, rows)

    def file_of(self, key: str) -> str:
        return os.path.join(self.path, self.where[key])


def _open_file(path: str) -> Checkpoint:
    low = path.lower()
    if low.endswith(".safetensors"):
        return SafetensorsFile(path)
    if low.endswith(".npz"):
        return NpzFile(path)
    if low.endswith(".npy"):
        return NpyFile(path)
    if low.endswith(PICKLES):
        return TorchFile(path)
    raise CheckpointError(at(path, msg('unknown checkpoint format; expected .safetensors, .npz, .npy, a PyTorch .pt/.bin, or a Hugging Face model folder')))


_OPEN: dict[tuple[str, int, int, int], Checkpoint] = {}
MAX_OPEN = 16  # files whose headers are kept (validating a spec, then running it, opens each once)


def _cached(path: str) -> Checkpoint:
    """A checkpoint file, headers read once while the file is unchanged (same inode, size and mtime)."""
    _confined(path)
    note_input(path)  # an input of the command, whether its headers are read now or were read before
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_ino, st.st_mtime_ns, st.st_size)
    if key not in _OPEN:
        while len(_OPEN) >= MAX_OPEN:
            del _OPEN[next(iter(_OPEN))]
        _OPEN[key] = _open_file(path)
    return _OPEN[key]


def open_checkpoint(path: str) -> Checkpoint:
    """The checkpoint at ``path`` (a file or a model folder), headers read, no tensor yet."""
    if "\0" in path:
        raise CheckpointError(at(path.replace("\0", "\\x00"), msg("the path holds a NUL byte")))
    try:
        os.fsencode(path)
    except UnicodeError:
        raise CheckpointError(at(path.encode("ascii", "backslashreplace").decode("ascii"),
                                 msg("the path cannot be written in this system's file-name encoding (set a UTF-8 locale, or PYTHONUTF8=1)"))) from None
    try:
        return Folder(path) if os.path.isdir(path) else _cached(path)
    except FileNotFoundError:
        raise CheckpointError(at(path, msg('no such file or folder'))) from None
    except OSError as e:
        raise CheckpointError(at(path, msg('cannot read: {x}', x=e.strerror or e))) from None


def file_of(ckpt: Checkpoint, key: str) -> str:
    """The file that holds ``key`` (the shard, for a sharded folder; the index, or model.safetensors, if none does)."""
    if isinstance(ckpt, Folder):
        return ckpt.file_of(key) if key in ckpt.where else ckpt.main
    return ckpt.path
