"""Files tracer writes: checked before anything runs, written atomically.

An output path is refused up front when it is the input spec, a folder, in a folder that does not
exist or cannot be written, or an existing file that is not what tracer writes there (so a typo
never overwrites a user's file).  The file is written to a temporary file in the same folder and
moved over the target with os.replace, so a reader sees the old file or the new one, never half
of one, and an error or Ctrl-C leaves nothing behind.  Nothing here imports NumPy.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from typing import BinaryIO

from .errors import UsageError

ZIP_MAGIC = b"PK\x03\x04"  # an .npz archive is a zip file


def check_output(path: str, option: str, inputs: Iterable[str], magic: bytes = ZIP_MAGIC) -> None:
    """Refuse ``option PATH`` before the run if writing it would fail or destroy something."""
    if not path.strip():
        raise UsageError(f"{option}: give a file name")
    where = f"{option} {path}"
    if os.path.isdir(path):
        raise UsageError(f"{where}: is a folder; give a file name inside it")
    for inp in inputs:
        if os.path.exists(path) and os.path.exists(inp) and os.path.samefile(path, inp):
            raise UsageError(f"{where}: is the input spec {inp}; tracer never overwrites its input, give another file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise UsageError(f"{where}: the folder {folder} {what}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{where}: the folder {folder} is not writable")
    if os.path.exists(path):
        if not os.path.isfile(path):
            raise UsageError(f"{where}: exists and is not a regular file")
        try:
            with open(path, "rb") as fh:
                head = fh.read(len(magic))
        except OSError as e:
            raise UsageError(f"{where}: exists and cannot be read ({e.strerror}); tracer only replaces a file it wrote") from None
        if head and head != magic:
            raise UsageError(f"{where}: exists and is not a file tracer writes (it does not start like one); "
                             "tracer does not overwrite it, remove it or give another name")


def write_atomic(path: str, option: str, write: Callable[[BinaryIO], None]) -> None:
    """Write through ``write(fh)`` to a temporary file beside ``path``, then move it into place."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as an ordinary new file would be, not mkstemp's 0600
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write: {e.strerror or e}; nothing was written") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
