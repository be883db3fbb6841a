"""Files tracer writes (--save, --svg, --html): checked before anything runs, written atomically.

An output path is refused up front (exit 2) when it is an input of the command, a folder, in a
folder that does not exist or cannot be written, or an existing file that is not what tracer
writes there, so a typo never overwrites a user's file.  The file is written to a temporary file
in the same folder and moved over the target with os.replace: a reader sees the old file or the
new one, never half of one, and an error or Ctrl-C leaves nothing behind.  Nothing here imports
NumPy.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from typing import BinaryIO

from .errors import UsageError


def same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output(path: str, option: str, inputs: Iterable[str], looks_like: Callable[[str], bool], kind: str) -> None:
    """Refuse ``option PATH`` before the run if writing it would fail or destroy something.

    ``looks_like(path)`` says whether an existing file is one tracer wrote there (so replacing it
    loses nothing the user wrote); ``kind`` names such a file (svg, html, npz).
    """
    opt = f"{option} {path}"
    if not path or path.endswith((os.sep, "/")):
        raise UsageError(f"{opt}: expected a file name such as report.{kind}")
    for inp in inputs:
        if same_file(path, inp):
            raise UsageError(f"{opt} would overwrite the input {inp!r}; choose another file name")
    folder = os.path.dirname(os.path.abspath(path))
    shown = os.path.dirname(path) or "."  # the folder as the user wrote it
    if os.path.isdir(path):
        raise UsageError(f"{opt}: {path!r} is a directory; give a file name inside it, e.g. {os.path.join(path, 'trace.' + kind)}")
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise UsageError(f"{opt}: cannot write there: {shown!r} {what}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{opt}: cannot write there: the folder {shown!r} is not writable")
    if os.path.exists(path):
        if not os.path.isfile(path):
            raise UsageError(f"{opt}: {path!r} exists and is not a regular file")
        if not looks_like(path):
            raise UsageError(f"{opt}: {path!r} exists and is not an {kind.upper()} file; "
                             "refusing to overwrite it (delete it or choose another name)")


def starts_with(path: str, prefixes: tuple[bytes, ...], size: int = 512) -> bool:
    """Does the file begin with one of ``prefixes`` (or is it empty)?"""
    try:
        with open(path, "rb") as fh:
            head = fh.read(size)
    except OSError:
        return False
    return not head or head.startswith(prefixes)


def looks_like_npz(path: str) -> bool:
    """An .npz archive is a zip file: does the existing file start like one (or is it empty)?"""
    return starts_with(path, (b"PK\x03\x04",))


def write_atomic(path: str, write: Callable[[BinaryIO], object]) -> None:
    """Write through ``write(fh)`` to a temporary file beside ``path``, then move it into place."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # as an ordinary new file would be, not mkstemp's 0600
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise UsageError(f"cannot write {path!r}: {e.strerror or e}; nothing was written") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
