"""Open a checkpoint lazily and read single tensors by key.

Opening reads headers only (a safetensors header, a zip directory and each .npy header, an
index file), with no NumPy: ``tracer validate`` checks names and shapes without reading a
tensor.  ``read(key)`` reads that one tensor (memory-mapped where the format allows) and
converts it to the dtype asked for; bfloat16, which NumPy lacks, is widened to float32 by a
16-bit shift.  A pickle (.pt, .bin, .pth) is opened only through ``torch.load(...,
weights_only=True)`` when torch is installed; nothing else is ever unpickled.

Every error is a CheckpointError holding a short fact; the spec adds where it was asked for.
"""

from __future__ import annotations

import ast
import json
import math
import os
import struct
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer.errors import CheckpointError
from tracer.files import note_input, outside_confinement
from tracer.messages import at, msg

if TYPE_CHECKING:
    import numpy as np

FLOATS = ("float64", "float32", "float16", "bfloat16")
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
                      "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
NPY_DTYPES = {"f8": "float64", "f4": "float32", "f2": "float16", "i8": "int64", "i4": "int32", "i2": "int16", "i1": "int8",
              "u1": "uint8", "b1": "bool"}
STORED_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
PICKLES = (".pt", ".pth", ".bin", ".ckpt")
MAX_HEADER = 100 * 2**20  # a safetensors header above 100 MB is corrupt (the format's own limit)
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
        return key in self.keys()

    def release(self) -> None:  # noqa: B027 (a hook: most formats hold no memory map, so nothing to do)
        """Let go of memory maps made while reading: the file's pages then stop counting in the run's memory."""

    @abstractmethod
    def raw(self, key: str) -> np.ndarray:
        """The tensor as stored (bfloat16 already widened to float32); may be a read-only memory map."""

    def read(self, key: str, dtype: str) -> np.ndarray:
        """The tensor converted to ``dtype``: a new array of its own, whatever the file holds."""
        import numpy as np

        info = self.info(key)
        if info.dtype not in FLOATS:
            raise CheckpointError(at(self.path, msg('tensor {key} holds {dtype}, expected floating-point numbers', key=repr(key), dtype=info.dtype)))
        try:
            a = self.raw(key)
            out = np.array(a, dtype=dtype, copy=True)
        except CheckpointError:
            raise
        except (OSError, ValueError, EOFError) as e:
            raise CheckpointError(at(self.path, msg('tensor {key} cannot be read ({e}); the file is truncated or corrupt', key=repr(key), e=e))) from None
        if out.shape != info.shape:
            raise CheckpointError(at(self.path, msg('tensor {key} reads as {shape} but its header says {shape2}', key=repr(key), shape=shape_text(out.shape), shape2=shape_text(info.shape))))
        return out

    def read_rows(self, key: str, rows: list[int], dtype: str) -> np.ndarray:
        """The tensor in ``dtype`` with only ``rows`` read from the file; the other rows are zero pages, never touched."""

        info = self.info(key)
        if info.dtype not in FLOATS or len(info.shape) != 2:
            return self.read(key, dtype)
        out = _untouched_zeros(info.shape, dtype)
        try:
            out[rows] = self.rows(key, rows)
        except (OSError, ValueError, EOFError) as e:
            raise CheckpointError(at(self.path, msg('tensor {key} cannot be read ({e}); the file is truncated or corrupt', key=repr(key), e=e))) from None
        return out

    def rows(self, key: str, rows: list[int]) -> np.ndarray:
        return self.raw(key)[rows]

    def config(self) -> dict[str, Any] | None:
        """config.json of a Hugging Face model folder (or beside a single file), if there is one."""
        folder = self.path if os.path.isdir(self.path) else os.path.dirname(os.path.abspath(self.path))
        cfg = os.path.join(folder, "config.json")
        if not os.path.isfile(cfg):
            return None
        return _read_json(cfg, "config.json")


def _confined(path: str) -> None:
    if outside_confinement(path):  # a link inside the --confine folder that leads out of it
        raise CheckpointError(at(path, msg("is outside the folder --confine allows; a spec may refer only to files inside it")))


def _read_json(path: str, what: str) -> Any:
    _confined(path)
    note_input(path)  # an input of the command: no output may replace it (tracer.files)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(at(path, msg('cannot read {what}: {e}', what=what, e=e))) from None


# -- safetensors ---------------------------------------------------------------
class SafetensorsFile(Checkpoint):
    kind = "safetensors"

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as fh:
                head = fh.read(8)
                if len(head) < 8:
                    raise CheckpointError(at(path, msg('is not a safetensors file (only {n_head} bytes)', n_head=len(head))))
                (n,) = struct.unpack("<Q", head)
                if n > MAX_HEADER or 8 + n > size:  # the 8 bytes are not shown: they may be any file's (a link's)
                    raise CheckpointError(at(path, msg('is not a safetensors file, or is truncated (its header length is implausible for a file of {size} bytes)', size=f"{size:,}")))
                header = json.loads(fh.read(n).decode("utf-8"))
        except CheckpointError:
            raise
        except OSError as e:
            raise CheckpointError(at(path, msg('cannot read: {x}', x=e.strerror or e))) from None
        except (UnicodeDecodeError, ValueError):
            raise CheckpointError(at(path, msg('is not a safetensors file (its header is not JSON); the file is corrupt'))) from None
        if not isinstance(header, dict):
            raise CheckpointError(at(path, msg('is not a safetensors file (its header is not a mapping)')))
        self.start = 8 + n
        self.tensors: dict[str, tuple[TensorInfo, int, int]] = {}
        end = 0
        for key, entry in header.items():
            if key == "__metadata__":
                continue
            try:
                dtype = SAFETENSORS_DTYPES.get(entry["dtype"], str(entry["dtype"]).lower())
                shape = tuple(int(s) for s in entry["shape"])
                lo, hi = (int(o) for o in entry["data_offsets"])
            except (KeyError, TypeError, ValueError):
                raise CheckpointError(at(path, msg('tensor {key} has a malformed header entry; the file is corrupt', key=repr(key)))) from None
            info = TensorInfo(shape, dtype)
            if hi - lo != info.nbytes or lo < 0:
                raise CheckpointError(at(path, msg('tensor {key} {shape} {dtype} should take {nbytes} bytes, its header gives {x}; the file is corrupt', key=repr(key), shape=shape_text(shape), dtype=dtype, nbytes=f"{info.nbytes:,}", x=f"{hi - lo:,}")))
            self.tensors[key] = (info, lo, hi)
            end = max(end, hi)
        if self.start + end > size:
            raise CheckpointError(at(path, msg('is truncated: its header promises {x} bytes, the file has {size}', x=f"{self.start + end:,}", size=f"{size:,}")))
        self._handle: Any = None

    def keys(self) -> list[str]:
        return list(self.tensors)

    def info(self, key: str) -> TensorInfo:
        return self.tensors[key][0]

    def mapped(self, key: str) -> np.ndarray:
        """The tensor memory-mapped as stored (bfloat16 as its raw 16 bits): nothing is read until used."""
        import numpy as np

        info, lo, _ = self.tensors[key]
        stored = "<u2" if info.dtype == "bfloat16" else "<" + next(k for k, v in NPY_DTYPES.items() if v == info.dtype)
        return np.memmap(self.path, dtype=stored, mode="r", offset=self.start + lo, shape=info.shape)

    def rows(self, key: str, rows: list[int]) -> np.ndarray:
        """Only these rows' bytes are read (one pread each: a memory map would fault in pages around each row)."""
        import numpy as np

        info, lo, _ = self.tensors[key]
        stored = "<u2" if info.dtype == "bfloat16" else "<" + next(k for k, v in NPY_DTYPES.items() if v == info.dtype)
        width = info.nbytes // info.shape[0]
        with open(self.path, "rb") as fh:
            data = b"".join(os.pread(fh.fileno(), width, self.start + lo + r * width) for r in rows)
        if len(data) != width * len(rows):
            raise CheckpointError(at(self.path, msg('tensor {key} is cut short; the file is truncated', key=repr(key))))
        return _widen(np.frombuffer(data, dtype=stored).reshape(len(rows), *info.shape[1:]), info.dtype)

    def release(self) -> None:
        self._handle = None  # safe_open maps the whole file; tensors already read are copies

    def raw(self, key: str) -> np.ndarray:
        if self.info(key).dtype == "bfloat16":
            return _widen(self.mapped(key), "bfloat16")
        if self._handle is None:
            from safetensors import safe_open

            try:
                self._handle = safe_open(self.path, framework="np")
            except Exception as e:  # the package's own SafetensorError, or an OSError
                raise CheckpointError(at(self.path, msg('cannot open as safetensors ({e}); the file is corrupt', e=e))) from None
        try:
            return self._handle.get_tensor(key)
        except Exception as e:
            raise CheckpointError(at(self.path, msg('tensor {key} cannot be read ({e}); the file is corrupt', key=repr(key), e=e))) from None


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
def _npy_header(fh: Any, where: str) -> tuple[TensorInfo, int]:
    """Parse an .npy header without NumPy: (shape and dtype, header length)."""
    magic = fh.read(8)
    if len(magic) < 8 or not magic.startswith(b"\x93NUMPY"):
        raise CheckpointError(at(where, msg('is not a NumPy .npy array (bad magic bytes)')))
    major = magic[6]
    size_bytes = 2 if major == 1 else 4
    raw = fh.read(size_bytes)
    if len(raw) < size_bytes:
        raise CheckpointError(at(where, msg('is truncated (its .npy header is cut short)')))
    n = int.from_bytes(raw, "little")
    text = fh.read(n)
    try:
        header = ast.literal_eval(text.decode("latin1"))
        descr, shape, fortran = header["descr"], tuple(int(s) for s in header["shape"]), bool(header["fortran_order"])
    except (ValueError, SyntaxError, KeyError, TypeError, UnicodeDecodeError):
        raise CheckpointError(at(where, msg('has a malformed .npy header; the file is corrupt'))) from None
    if not isinstance(descr, str) or descr[0] == ">" or descr[1:] not in NPY_DTYPES:
        what = "Python objects (a pickle)" if descr in ("|O", "O") else repr(descr)
        raise CheckpointError(at(where, msg('holds {what}, expected little-endian numbers (float64, float32 or float16)', what=what)))
    del fortran
    return TensorInfo(shape, NPY_DTYPES[descr[1:]]), len(magic) + size_bytes + n


class NpyFile(Checkpoint):
    """One array; its key is the file's name without .npy (any key names it when there is one)."""

    kind = "npy"

    def __init__(self, path: str) -> None:
        self.path = path
        self.key = os.path.splitext(os.path.basename(path))[0]
        try:
            with open(path, "rb") as fh:
                self._info, self.offset = _npy_header(fh, path)
            size = os.path.getsize(path)
        except OSError as e:
            raise CheckpointError(at(path, msg('cannot read: {x}', x=e.strerror or e))) from None
        if size < self.offset + self._info.nbytes:
            raise CheckpointError(at(path, msg('is truncated: its header promises {x} bytes, the file has {size}', x=f"{self.offset + self._info.nbytes:,}", size=f"{size:,}")))

    def keys(self) -> list[str]:
        return [self.key]

    def info(self, key: str) -> TensorInfo:
        return self._info

    def raw(self, key: str) -> np.ndarray:
        import numpy as np

        return np.load(self.path, mmap_mode="r", allow_pickle=False)


class NpzFile(Checkpoint):
    """Each member read on its own: the others are never decompressed."""

    kind = "npz"

    def __init__(self, path: str) -> None:
        import zipfile

        self.path = path
        try:
            self.zip = zipfile.ZipFile(path)
            members = [m for m in self.zip.infolist() if m.filename.endswith(".npy")]
            self.tensors: dict[str, TensorInfo] = {}
            for m in members:
                key = m.filename[:-4]
                with self.zip.open(m) as fh:
                    info, offset = _npy_header(fh, f"{path}: member {key!r}")
                if m.file_size != offset + info.nbytes:
                    raise CheckpointError(at(path, msg('member {key} should hold {x} bytes, holds {file_size}; the file is corrupt', key=repr(key), x=f"{offset + info.nbytes:,}", file_size=f"{m.file_size:,}")))
                self.tensors[key] = info
        except CheckpointError:
            raise
        except zipfile.BadZipFile:
            raise CheckpointError(at(path, msg('is not a NumPy .npz archive, or is truncated (no zip directory)'))) from None
        except (OSError, EOFError, zipfile.LargeZipFile) as e:
            raise CheckpointError(at(path, msg('cannot read ({e}); the file is truncated or corrupt', e=e))) from None

    def keys(self) -> list[str]:
        return list(self.tensors)

    def info(self, key: str) -> TensorInfo:
        return self.tensors[key]

    def raw(self, key: str) -> np.ndarray:
        import zipfile

        import numpy as np

        try:
            with self.zip.open(key + ".npy") as fh:
                return np.lib.format.read_array(fh, allow_pickle=False)
        except (zipfile.BadZipFile, EOFError) as e:
            raise CheckpointError(at(self.path, msg('member {key} cannot be read ({e}); the file is truncated or corrupt', key=repr(key), e=e))) from None


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
            raise CheckpointError(at(path, msg("is a PyTorch pickle; tracer never unpickles it without torch's weights_only loader: {TORCH_ADVICE}", TORCH_ADVICE=TORCH_ADVICE)))
        import torch

        try:
            try:
                sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as e:
                if "mmap" not in str(e):
                    raise
                sd = torch.load(path, map_location="cpu", weights_only=True)  # the legacy format cannot be memory-mapped
        except Exception as e:  # torch raises UnpicklingError, RuntimeError, EOFError, ... for a bad file
            if type(e).__name__ == "UnpicklingError":
                raise CheckpointError(at(path, msg("holds Python objects other than tensors, which torch.load(weights_only=True) refuses to unpickle (and tracer never unpickles otherwise); save the model's state_dict() instead"))) from None
            import re

            first = re.sub(r"\x1b\[[0-9;]*m", "", " ".join(str(e).split()))[:160]
            raise CheckpointError(at(path, msg('cannot be read as a PyTorch state dict with weights_only=True ({name}: {first}); the file is truncated or corrupt', name=type(e).__name__, first=first))) from None
        if isinstance(sd, dict) and len(sd) == 1 and isinstance(next(iter(sd.values())), dict):
            sd = next(iter(sd.values()))  # {"state_dict": {...}} or {"model": {...}}
        if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
            raise CheckpointError(at(path, msg('expected a state dict (a mapping of names to tensors), received {name}', name=type(sd).__name__)))
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
            if os.path.isfile(index):
                doc = _read_json(index, name)
                weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
                if not isinstance(weight_map, dict):
                    raise CheckpointError(at(index, msg("expected a 'weight_map' of tensor names to shard files")))
                self.where = {str(k): str(v) for k, v in weight_map.items()}
                self.main = index
                return
        for name in self.SINGLE:
            if os.path.isfile(os.path.join(path, name)):
                self.main = os.path.join(path, name)
                self.where = dict.fromkeys(self.shard(name).keys(), name)
                return
        found = ", ".join(checkpoint_like(os.listdir(path))[:8]) or msg("no checkpoint files")
        raise CheckpointError(at(path, msg('is a folder without model.safetensors, a sharded model.safetensors.index.json or pytorch_model.bin (it holds {found})', found=found)))

    def shard(self, name: str) -> Checkpoint:
        if name not in self.shards:
            shard = os.path.join(self.path, name)
            if os.path.basename(name) != name or not os.path.isfile(shard):
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
