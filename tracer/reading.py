"""Reading files tracer did not write: the one layer every command and the API read an untrusted file through.

A checkpoint, a spec, a diff side, a config.json may come from anyone, so each read is bounded before it starts:

- ``open_regular`` opens regular files only, never a FIFO, a socket or a device (a FIFO blocks a reader forever,
  ``/dev/zero`` never ends): the file is opened with O_NONBLOCK and checked with fstat, so even a FIFO swapped in
  between the check and the open cannot block; a path holding a NUL byte, or one this system cannot encode, is
  refused, not an internal error.
- ``npy_header`` parses an .npy header with a small non-recursive parser, never ``ast.literal_eval``, and only up
  to NumPy's own limit of 10,000 bytes: a 20 MB header is refused before it is read.
- ``json_value`` checks a JSON text's nesting (without recursion) before ``json.loads`` sees it, and refuses
  NaN, infinities and integers of more digits than any double holds.
- ``zip_members`` refuses an encrypted member or a compression zipfile does not know, and ``read_exactly`` reads
  no more than a member declares (the caller has checked that against --max-memory before reading).

Every refusal is an InputRefused holding a short fact that never quotes the file's bytes ("a header of 120 bytes
that is not valid JSON"); the caller adds the path and wraps it in its own error class (exit 2).  No NumPy.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from tracer.errors import InputRefused
from tracer.messages import Message, msg

__all__ = ["InputRefused", "within", "afford", "open_regular", "is_regular", "read_bytes", "read_exactly", "read_into", "json_value", "json_depth_within",
           "whole_number", "NpyHeader", "npy_header", "parse_npy_header", "dtype_shown", "zip_open", "zip_members"]

if TYPE_CHECKING:
    import zipfile

MAX_NPY_HEADER = 10_000  # NumPy's own limit (numpy.lib.format, max_header_size): a longer header is refused
MAX_NPY_DIMS = 64  # NumPy's most axes
MAX_JSON_DEPTH = 32  # a safetensors header nests 3 deep, a config.json a few more
MAX_INT_DIGITS = 400  # a double's largest value has 309 digits: a longer integer is no number tracer can hold
PARSED_BYTES_PER_BYTE = 20  # json.loads's dicts, strings and ints per byte of a header (about 10 for a safetensors header)
_BUDGET: ContextVar[int | None] = ContextVar("tracer_reading_budget", default=None)


@contextmanager
def within(limit: int | None) -> Iterator[None]:
    """Headers parsed inside may take at most ``limit`` bytes (--max-memory; None: no limit)."""
    token = _BUDGET.set(limit)
    try:
        yield
    finally:
        _BUDGET.reset(token)


def afford(need: int, what: Message | str) -> None:
    """InputRefused if ``need`` bytes are more than the current --max-memory (see within)."""
    limit = _BUDGET.get()
    if limit is not None and need > limit:
        raise InputRefused(msg("{what} would need about {need} bytes to parse, more than --max-memory allows ({limit} bytes)", what=what, need=f"{need:,}",
                               limit=f"{limit:,}"))


def open_regular(path: str) -> tuple[IO[bytes], int]:
    """``path`` opened for reading if it is a regular file, and its size; InputRefused otherwise (nothing blocks)."""
    if "\0" in path:
        raise InputRefused(msg("the path holds a NUL byte"))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise InputRefused(msg("no such file"), "missing") from None
    except IsADirectoryError:
        raise InputRefused(msg("is a directory, expected a file"), "directory") from None
    except PermissionError:
        raise InputRefused(msg("permission denied"), "permission") from None
    except UnicodeError:
        raise InputRefused(msg("the path cannot be written in this system's file-name encoding (set a UTF-8 locale, or PYTHONUTF8=1)")) from None
    except OSError as e:
        raise InputRefused(msg("cannot read: {x}", x=e.strerror or type(e).__name__)) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputRefused(msg("is a directory, expected a file"), "directory")
        if not stat.S_ISREG(st.st_mode):
            raise InputRefused(msg("is not a regular file (a pipe, socket or device); tracer reads regular files only"), "special")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def is_regular(path: str) -> bool:
    """True if ``path`` (through links) is a regular file; False for a folder, a FIFO, a device, nothing, a bad path."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError, UnicodeError):
        return False


def read_bytes(path: str, limit: int, what: Message | str) -> bytes:
    """The whole file, at most ``limit`` bytes (``what`` names it in the refusal)."""
    fh, size = open_regular(path)
    with fh:
        data = b"" if size > limit else fh.read(limit + 1)
    if size > limit or len(data) > limit:
        raise InputRefused(msg("is larger than {limit} bytes, the most {what} may be", limit=f"{limit:,}", what=what))
    return data


def read_exactly(fh: IO[bytes], n: int) -> bytes:
    """``n`` bytes from ``fh`` (never more, read in pieces); InputRefused if the file ends first."""
    parts = []
    left = n
    while left > 0:
        piece = fh.read(min(left, 1 << 24))
        if not piece:
            raise InputRefused(msg("is truncated: {n} bytes were due, {got} came", n=f"{n:,}", got=f"{n - left:,}"))
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


# -- JSON --------------------------------------------------------------------------------------
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_EMPTY_PAIR = re.compile(r"\[\]|\{\}")


def json_depth_within(text: str, depth: int) -> bool:
    """True if ``text`` nests no deeper than ``depth`` lists and objects (its strings aside); no recursion, linear
    passes (an unbalanced text counts as too deep: json.loads would recurse into it before noticing)."""
    shape = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(depth):
        if not shape:
            return True
        shorter = _EMPTY_PAIR.sub("", shape)  # one scan: the innermost pairs only, one level a pass
        if shorter == shape:
            return False
        shape = shorter
    return not shape


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("integer too long")
    return int(text)


def _no_constant(text: str) -> Any:
    raise ValueError("not a finite number")


def json_value(data: bytes | str, what: Message | str, depth: int = MAX_JSON_DEPTH, finite: bool = True) -> Any:
    """The parsed JSON of ``data``, nesting and integers bounded first; ``finite``: NaN and Infinity are refused too.
    The refusal names the size of the text, never its content."""
    n = len(data)
    afford(n * PARSED_BYTES_PER_BYTE, msg("{what} of {n} bytes", what=what, n=f"{n:,}"))
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise InputRefused(msg("{what} of {n} bytes that is not UTF-8 text", what=what, n=f"{n:,}")) from None
    if not json_depth_within(text, depth):
        raise InputRefused(msg("{what} of {n} bytes that nests deeper than {depth} levels, or is not valid JSON", what=what, n=f"{n:,}", depth=depth))
    try:
        if finite:
            return json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant)
        return json.loads(text, parse_int=_bounded_int)
    except (ValueError, RecursionError):
        raise InputRefused(msg("{what} of {n} bytes that is not valid JSON", what=what, n=f"{n:,}")) from None


def whole_number(value: Any) -> bool:
    """A JSON whole number: an int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


# -- .npy headers ----------------------------------------------------------------------------------
class NpyHeader(NamedTuple):
    descr: str  # '<f8', '|b1', ...
    fortran_order: bool
    shape: tuple[int, ...]
    offset: int  # where the data starts, from the start of the .npy


_TOKEN = re.compile(r"""\s*(?:(?P<s>'[^'\\\n]*'|"[^"\\\n]*")|(?P<i>[0-9]{1,20})L?|(?P<w>True|False)|(?P<p>[{}(),:\[\]])|(?P<end>\s*$))""")
_DTYPE_CODE = re.compile(r"[<>|=][a-zA-Z][0-9]{0,3}")


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise InputRefused(msg("has a malformed .npy header of {n} bytes; the file is corrupt", n=f"{len(text):,}"))
        kind = m.lastgroup or "end"
        if kind == "end":
            return out
        out.append((kind, m.group(kind)))
        pos = m.end()


def parse_npy_header(text: str) -> tuple[str, bool, tuple[int, ...]]:
    """``{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }`` -> ('<f8', False, (3, 4)), read token by
    token (no eval, no recursion); a structured dtype (a list as descr) or any other key is refused."""
    bad = msg("has a malformed .npy header of {n} bytes; the file is corrupt", n=f"{len(text):,}")
    toks = _tokens(text)
    i = 0

    def take(kind: str, value: str | None = None) -> str:
        nonlocal i
        if i >= len(toks) or toks[i][0] != kind or (value is not None and toks[i][1] != value):
            raise InputRefused(bad)
        i += 1
        return toks[i - 1][1]

    found: dict[str, Any] = {}
    take("p", "{")
    while not (i < len(toks) and toks[i] == ("p", "}")):
        key = take("s")[1:-1]
        take("p", ":")
        if key in found or key not in ("descr", "fortran_order", "shape"):
            raise InputRefused(bad)
        if key == "descr":
            if i < len(toks) and toks[i] == ("p", "["):
                raise InputRefused(msg("holds a structured array (named fields), expected an array of numbers"))
            found[key] = take("s")[1:-1]
        elif key == "fortran_order":
            found[key] = take("w") == "True"
        else:
            take("p", "(")
            dims: list[int] = []
            while not (i < len(toks) and toks[i] == ("p", ")")):
                dims.append(int(take("i")))
                if len(dims) > MAX_NPY_DIMS:
                    raise InputRefused(bad)
                if i < len(toks) and toks[i] == ("p", ","):
                    i += 1
                elif not (i < len(toks) and toks[i] == ("p", ")")):
                    raise InputRefused(bad)
            take("p", ")")
            found[key] = tuple(dims)
        if i < len(toks) and toks[i] == ("p", ","):
            i += 1
        elif not (i < len(toks) and toks[i] == ("p", "}")):
            raise InputRefused(bad)
    take("p", "}")
    if i != len(toks) or len(found) != 3:
        raise InputRefused(bad)
    return found["descr"], found["fortran_order"], found["shape"]


def npy_header(fh: IO[bytes]) -> NpyHeader:
    """The header of the .npy that starts at ``fh``'s position: at most MAX_NPY_HEADER bytes are read."""
    magic = fh.read(8)
    if len(magic) < 8 or not magic.startswith(b"\x93NUMPY"):
        raise InputRefused(msg("is not a NumPy .npy array (bad magic bytes)"))
    major = magic[6]
    if major not in (1, 2, 3):
        raise InputRefused(msg("is an .npy file of format version {v}, which tracer does not read (1, 2 and 3 are read)", v=major))
    size_bytes = 2 if major == 1 else 4
    raw = fh.read(size_bytes)
    if len(raw) < size_bytes:
        raise InputRefused(msg("is truncated (its .npy header is cut short)"))
    n = int.from_bytes(raw, "little")
    if n > MAX_NPY_HEADER:
        raise InputRefused(msg("has an .npy header of {n} bytes, more than the {limit} NumPy reads; the file is corrupt or hostile", n=f"{n:,}",
                               limit=f"{MAX_NPY_HEADER:,}"))
    data = fh.read(n)
    if len(data) < n:
        raise InputRefused(msg("is truncated (its .npy header is cut short)"))
    try:
        text = data.decode("utf-8" if major == 3 else "latin1")
    except UnicodeDecodeError:
        raise InputRefused(msg("has a malformed .npy header of {n} bytes; the file is corrupt", n=f"{n:,}")) from None
    descr, fortran, shape = parse_npy_header(text)
    return NpyHeader(descr, fortran, shape, len(magic) + size_bytes + n)


def dtype_shown(descr: str) -> str:
    """A dtype code as a message may show it ('>f8', '<c16'), or 'a type tracer does not know': never arbitrary bytes."""
    if descr in ("|O", "O", "<O", ">O"):
        return msg("Python objects (a pickle)")
    return repr(descr) if _DTYPE_CODE.fullmatch(descr) else msg("a type tracer does not know")


# -- zip archives (.npz) ---------------------------------------------------------------------------
ZIP_DIRECTORY_BYTES_PER_BYTE = 12  # zipfile's ZipInfo objects per byte of a central directory (46 bytes and a name each)


def zip_open(fh: IO[bytes]) -> zipfile.ZipFile:
    """The zip archive in ``fh``, the size of its directory checked against --max-memory before zipfile reads it
    (a directory of millions of empty members takes ten times its size once read)."""
    import zipfile

    end = getattr(zipfile, "_EndRecData", None)
    record = end(fh) if end is not None else None
    if record:
        size = int(record[5])  # _ECD_SIZE: the central directory's bytes
        afford(size * ZIP_DIRECTORY_BYTES_PER_BYTE, msg("a zip directory of {n} bytes", n=f"{size:,}"))
    fh.seek(0)
    return zipfile.ZipFile(fh)


def zip_members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The archive's members, each checked before any is read: not encrypted, a compression zipfile reads."""
    import zipfile

    known = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
    members = archive.infolist()
    for m in members:
        if m.flag_bits & 0x1:
            raise InputRefused(msg("member {name} is encrypted; tracer reads unencrypted archives only", name=repr(m.filename[:80])))
        if m.compress_type not in known:
            raise InputRefused(msg("member {name} uses a compression tracer does not read (method {method})", name=repr(m.filename[:80]),
                                   method=m.compress_type))
    return members


def read_into(fh: IO[bytes], n: int) -> bytearray:
    """``n`` bytes from ``fh`` into one buffer of their size (no second copy); InputRefused if the file ends first."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = fh.readinto(view[got:min(n, got + (1 << 24))])  # type: ignore[attr-defined]
        if not k:
            raise InputRefused(msg("is truncated: {n} bytes were due, {got} came", n=f"{n:,}", got=f"{got:,}"))
        got += k
    return buf


# -- paths as text ---------------------------------------------------------------------------------
def os_path(text: str) -> str:
    """A path as a spec (UTF-8 text) writes it -> the path the system's calls take.  The same string in a UTF-8
    locale; in the C locale without UTF-8 mode, 'modèle' becomes the name whose bytes are its UTF-8."""
    return os.fsdecode(text.encode("utf-8", "surrogateescape"))


def text_path(path: str) -> str:
    """A path as the system gives it (a command-line argument) -> the text a UTF-8 spec writes for it; InputRefused
    if its bytes are not UTF-8 (no spec can name that file)."""
    try:
        return os.fsencode(path).decode("utf-8")
    except UnicodeError:
        raise InputRefused(msg("the path's name is not UTF-8 text, which a spec cannot write; rename the file or folder")) from None
