"""tracer.recorder: write the arrays your own block computes into an .npz that ``tracer diff SPEC FILE`` reads.

    with tracer.recorder("mine.npz") as rec:
        x = rec("x", E[tokens] + P[:T])
        n1 = rec("norm1", layer_norm(x))      # rec returns the array unchanged: an identity wrap
        ...

Needs NumPy and nothing else (no spec, no torch; a torch tensor is converted on the way in).
The archive is written once, when the block ends: to a temporary file beside it, then moved into
place, so a reader never sees half an archive.  An existing file is replaced only if it is an .npz
archive (checked when the block starts, before your code runs); anything else is refused.

If your code raises inside the block, nothing is written and an older archive stays as it was (a
run that stopped half-way is not the run you wanted to compare); the exception goes on, with a note
saying so, and the arrays recorded before it are still in ``rec.arrays`` to look at.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from types import TracebackType
from typing import Any

import numpy as np

from tracer.errors import UsageError
from tracer.messages import msg

ZIP_MAGIC = b"PK\x03\x04"


class Recorder:
    """Collects named arrays; ``rec(name, array)`` records one and returns it unchanged."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from tracer.spec.choices import file_path

        self.path = file_path(path, "recorder")
        self.arrays: dict[str, np.ndarray] = {}
        self.written = False

    def __call__(self, name: str, array: Any) -> Any:
        if not isinstance(name, str) or not name:
            raise UsageError(msg("recorder: a stage name is text such as 'norm1', received {name}", name=repr(name)))
        if name in self.arrays:
            raise UsageError(msg("recorder: {name} is recorded twice; give each stage its own name (in a stack of layers: blocks.0.norm1, blocks.1.norm1, ...)",
                                 name=repr(name)))
        self.arrays[name] = _copy(name, array)
        return array

    def __enter__(self) -> Recorder:
        check_target(self.path)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if error is not None:
            add_note = getattr(error, "add_note", None)  # Python 3.11 and later
            if add_note is not None:
                add_note(f"tracer.recorder: nothing was written to {self.path} (the block raised); "
                         f"the {len(self.arrays)} arrays recorded before it are in rec.arrays")
            return
        self.save()

    def save(self) -> None:
        """Write the archive now (the with-block does this at its end)."""
        if not self.arrays:
            raise UsageError(msg("recorder: nothing was recorded, so {path} was not written; call rec('norm1', array) inside the block", path=self.path))
        check_target(self.path)
        try:
            write_npz(self.path, self.arrays)
        except OSError as e:
            raise UsageError(msg("recorder: cannot write {path}: {x}; nothing was written", path=repr(self.path), x=e.strerror or e)) from None
        self.written = True

    def __repr__(self) -> str:
        return f"<tracer.recorder {self.path!r}: {', '.join(self.arrays) or 'nothing recorded yet'}>"


def recorder(path: str | os.PathLike[str]) -> Recorder:
    """A recorder writing ``path`` (an .npz) when its with-block ends; see the module's docstring."""
    return Recorder(path)


def _copy(name: str, array: Any) -> np.ndarray:
    if hasattr(array, "detach") and hasattr(array, "cpu"):  # a torch tensor, without importing torch
        array = array.detach().cpu().numpy()
    out = np.array(array, copy=True)  # later in-place changes to the caller's array do not reach the archive
    if out.dtype.kind not in "biuf":
        raise UsageError(msg("recorder: {name} is not an array of numbers (dtype {dtype})", name=repr(name), dtype=out.dtype))
    return out


def check_target(path: str) -> None:
    """Refuse a path that is not ours to write: a folder, a missing folder, a file that is not an .npz archive."""
    if not path or path.endswith(("/", os.sep)):
        raise UsageError(msg("recorder: {path}: expected a file name such as mine.npz", path=repr(path)))
    if os.path.isdir(path):
        raise UsageError(msg("recorder: {path} is a directory; give a file name inside it, e.g. {names}", path=repr(path),
                             names=os.path.join(path, 'mine.npz')))
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(msg("recorder: cannot write {path}: the folder {path2} does not exist", path=repr(path), path2=repr(os.path.dirname(path))))
    if os.path.lexists(path):
        if os.path.islink(path) or not os.path.isfile(path):
            raise UsageError(msg("recorder: {path} exists and is not a regular file; refusing to replace it", path=repr(path)))
        with open(path, "rb") as fh:
            head = fh.read(4)
        if head and head != ZIP_MAGIC:
            raise UsageError(msg("recorder: {path} exists and is not an .npz archive; refusing to overwrite it (delete it or choose another name)",
                                 path=repr(path)))


def write_npz(path: str, arrays: dict[str, np.ndarray]) -> None:
    """An .npz as np.savez writes it (one NAME.npy per array), through a temporary file and a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as archive:
            for name, array in arrays.items():
                with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # as an ordinary new file, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
