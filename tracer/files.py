"""Every file tracer writes (--save, --svg, --html, new --output): the one place that decides what may be replaced.

The rule (docs/files.md says it for users):
- tracer replaces an existing file only when it can prove it wrote that file itself, or when the user
  gives --force.  The proof is tracer's mark, which no other program writes by accident: an SVG or
  HTML export begins with a comment naming tracer, the kind and the SHA-256 of the rest of the file;
  an .npz archive carries, as its zip comment, tracer's name and the SHA-256 of its members' names,
  CRCs and sizes.  A file edited since tracer wrote it no longer matches its mark and is refused too.
- Never, not even with --force: an input of the command (every file it reads: the spec, each weight file and
  shard, the index, config.json, a diff's sides, through links and hard links; ``note_input`` records them as
  they are read, in the scopes ``reading()`` opens, and ``Spec.files_read`` keeps a loaded spec's), a folder or anything but a regular file, a
  symbolic link (tracer never follows or replaces a link), a file the mode bits do not let this user
  write (checked from the bits, as if without privileges, so root is held to it too), or one path named
  by two outputs.
- The file is written to a temporary file beside the target, named ``.NAME.tracer-XXXXXXXX.tmp``, and
  moved into place only when it is whole; any error, Ctrl-C, SIGTERM or SIGHUP removes it.
- The target is checked before the run and again at the moment of the move.  A file that appeared or changed in
  between (another device, inode, size or mtime than check_output saw) is never replaced, unless --force and it
  is provably tracer's own.  When nothing was there,
  the move is ``link()``, which fails rather than replace a file that appeared in the meantime, so that
  case has no window at all.  When tracer replaces its own earlier file, the check is repeated just
  before ``rename()``; POSIX has no "rename if the target is still this file", so a file swapped in
  during those microseconds would be replaced (the window docs/files.md owns up to).

Nothing here imports NumPy.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, BinaryIO

from tracer.errors import UsageError
from tracer.messages import Message, at, join, msg, shown
from tracer.process import signals_held

if TYPE_CHECKING:
    import zipfile

TMP_TAG = ".tracer-"  # temporary files are .NAME.tracer-XXXXXXXX.tmp
TEXT_MARK = re.compile(rb"(?:<!-- tracer (\S+) (svg|html) sha256=([0-9a-f]{64}) -->|# tracer (\S+) (yaml) sha256=([0-9a-f]{64}))\n")
NPZ_MARK = re.compile(rb"tracer (\S+) npz sha256=([0-9a-f]{64})")


def _version() -> bytes:
    from tracer.version import __version__

    return __version__.encode("ascii")


# -- tracer's mark ---------------------------------------------------------------------

def text_mark(kind: str, body: bytes) -> bytes:
    """The first line of an SVG or HTML export (an XML comment) or of a YAML spec tracer writes (a # comment):
    tracer, the kind, and the SHA-256 of everything after it."""
    digest = hashlib.sha256(body).hexdigest().encode()
    if kind == "yaml":
        return b"# tracer %s yaml sha256=%s\n" % (_version(), digest)
    return b"<!-- tracer %s %s sha256=%s -->\n" % (_version(), kind.encode(), digest)


def _members_digest(infos: Iterable[zipfile.ZipInfo]) -> str:
    h = hashlib.sha256()
    for i in infos:
        h.update(f"{i.filename}\t{i.CRC:08x}\t{i.file_size}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def npz_mark(infos: Iterable[zipfile.ZipInfo]) -> bytes:
    """The zip comment of an .npz tracer writes: tracer and the SHA-256 of its members' names, CRCs and sizes."""
    return b"tracer %s npz sha256=%s" % (_version(), _members_digest(infos).encode())


def _text_marked(fh: BinaryIO, kind: str) -> bool:
    m = TEXT_MARK.fullmatch(fh.readline(200))
    if m is None:
        return False
    _, found, digest = m.group(1, 2, 3) if m.group(2) else m.group(4, 5, 6)
    if found.decode() != kind:
        return False
    h = hashlib.sha256()
    for block in iter(lambda: fh.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest().encode() == digest


def _npz_marked(fh: BinaryIO) -> bool:
    import zipfile

    try:
        with zipfile.ZipFile(fh) as z:  # reads the central directory only
            m = NPZ_MARK.fullmatch(z.comment)
            return m is not None and m.group(2).decode() == _members_digest(z.infolist())
    except Exception:  # a foreign file may make the zip reader fail in any way: it is simply not ours
        return False


def proves_ours(path: str, kind: str) -> bool:
    """Does the regular file at ``path`` (never followed if a link) carry tracer's intact mark for ``kind``?"""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        if kind == "npz":
            return _npz_marked(fh)
        if kind in ("svg", "html", "yaml"):
            return _text_marked(fh, kind)
    return False


# -- what the command reads: its inputs ---------------------------------------------------

_READING: list[dict[tuple[int, int], str]] = []  # the open scopes (a command, a spec being loaded): file id -> path as named


def note_input(path: str) -> None:
    """Record a file the command reads (through any link: the file itself counts), in every open scope."""
    if not _READING:
        return
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return
    for scope in _READING:
        scope.setdefault((st.st_dev, st.st_ino), path)


@contextlib.contextmanager
def reading() -> Iterator[dict[tuple[int, int], str]]:
    """A scope that collects every file noted while it is open (a command, or one spec's loading)."""
    scope: dict[tuple[int, int], str] = {}
    _READING.append(scope)
    try:
        yield scope
    finally:
        for i in range(len(_READING) - 1, -1, -1):
            if _READING[i] is scope:
                del _READING[i]
                break


def input_at(path: str, inputs: Iterable[str] = ()) -> str | None:
    """The input (as the command named it) that writing ``path`` would replace, or None: one of ``inputs``, or any
    file read in an open scope, compared through links and hard links (device and inode)."""
    for inp in inputs:
        if same_file(path, inp):
            return inp
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    for scope in _READING:
        found = scope.get((st.st_dev, st.st_ino))
        if found is not None:
            return found
    return None


# -- --confine: the one folder a spec's references may reach ------------------------------------------------

_CONFINE: list[str] = []  # the real paths of the folders --confine gave (innermost last)


@contextlib.contextmanager
def confined(folder: str | None) -> Iterator[None]:
    """While open, every file a spec refers to must lie (through links) inside ``folder`` (None: no confinement)."""
    if folder is None:
        yield
        return
    try:
        real = os.path.realpath(folder)
        ok = os.path.isdir(real)
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise UsageError(msg("--confine {f}: expected a folder", f=repr(folder)))
    _CONFINE.append(real)
    try:
        yield
    finally:
        _CONFINE.pop()


def outside_confinement(path: str) -> bool:
    """Does ``path``, followed through every link, lie outside a folder --confine gave?"""
    if not _CONFINE or "\0" in path:  # a NUL byte: no file can be named so, and the reader refuses it by its own words
        return False
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return True
    return any(real != c and not real.startswith(c.rstrip(os.sep) + os.sep) for c in _CONFINE)


def check_not_input(path: str, option: str, inputs: Iterable[str] = ()) -> None:
    """Refuse ``option PATH`` when it names an input of the command (exit 2): never, not even with --force."""
    inp = input_at(path, inputs)
    if inp is not None:
        raise UsageError(msg("{opt} would overwrite the input {inp}; choose another file name", opt=shown(f"{option} {path}"), inp=repr(inp)))


# -- what may be replaced ----------------------------------------------------------------

def same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def mode_allows_write(st: os.stat_result) -> bool:
    """Do the mode bits let this user write the file?  Read as if without privileges: root bypasses
    permissions, and a file its owner made read-only must stay safe from root's runs as well."""
    if not hasattr(os, "geteuid"):  # no POSIX owners (Windows): the read-only attribute is the owner's write bit
        return bool(st.st_mode & stat.S_IWUSR)
    if st.st_uid == os.geteuid():
        return bool(st.st_mode & stat.S_IWUSR)
    if st.st_gid == os.getegid() or st.st_gid in os.getgroups():
        return bool(st.st_mode & stat.S_IWGRP)
    return bool(st.st_mode & stat.S_IWOTH)


def refusal(path: str, kind: str, force: bool = False, replace: bool = True) -> tuple[os.stat_result | None, Message | None]:
    """What is at ``path`` now (never following a link), and why it may not be replaced (None: it may): a message
    that starts with the path, quoted."""
    f = repr(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, msg("{f} cannot be examined: {why}", f=f, why=e.strerror or e)
    if stat.S_ISLNK(st.st_mode):
        return st, join([msg("{f} is a symbolic link", f=f), msg("tracer never writes through or over a link (name the file itself, or remove the link)")])
    if stat.S_ISDIR(st.st_mode):
        return st, join([msg("{f} is a directory", f=f), msg("give a file name inside it, e.g. {g}", g=os.path.join(path, 'trace.' + kind))])
    if not stat.S_ISREG(st.st_mode):
        return st, msg("{f} exists and is not a regular file", f=f)
    if not replace:
        return st, join([msg("{f} already exists", f=f), msg("tracer never overwrites a file here (choose another name)")])
    if not mode_allows_write(st) or not os.access(path, os.W_OK):
        return st, join([msg("{f} exists and is read-only (mode {m})", f=f, m=f"{stat.S_IMODE(st.st_mode):04o}"),
                         msg("tracer never replaces a file it may not write (make it writable, or choose another name)")])
    if not force and not proves_ours(path, kind):
        refuse = msg("refusing to overwrite it (delete it, choose another name, or give --force to replace it)")
        if kind == "yaml":  # a YAML; an SVG, an HTML, an NPZ
            return st, join([msg("{f} exists and is not a {kind} file tracer wrote", f=f, kind=kind.upper()), refuse])
        return st, join([msg("{f} exists and is not an {kind} file tracer wrote", f=f, kind=kind.upper()), refuse])
    return st, None


def check_output(path: str, option: str, inputs: Iterable[str], kind: str, force: bool = False, replace: bool = True) -> None:
    """Refuse ``option PATH`` before the run if writing it would fail or destroy something (exit 2)."""
    opt = f"{option} {path}"
    if not path or path.endswith((os.sep, "/")):
        raise UsageError(msg("{opt}: expected a file name such as report.{kind}", opt=opt, kind=kind))
    inputs = tuple(inputs)
    check_not_input(path, option, inputs)
    st, why = refusal(path, kind, force, replace)
    _CHECKED[_key(path)] = (_identity(st), inputs)
    if why is not None and os.path.isdir(path):
        raise UsageError(at(opt, why))
    folder = os.path.dirname(os.path.abspath(path))
    shown = os.path.dirname(path) or "."  # the folder as the user wrote it
    if not os.path.isdir(folder):
        if os.path.exists(folder):
            raise UsageError(at(opt, msg("cannot write there: {f} is not a folder", f=repr(shown))))
        raise UsageError(at(opt, msg("cannot write there: {f} does not exist", f=repr(shown))))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(at(opt, msg("cannot write there: the folder {f} is not writable", f=repr(shown))))
    if why is not None:
        raise UsageError(at(opt, why))


def check_distinct(named: Mapping[str, str | None]) -> None:
    """Two outputs of one command never name the same file (by path, through links, or by hard link)."""
    given = [(opt, p) for opt, p in named.items() if p]
    for i, (opt_a, a) in enumerate(given):
        for opt_b, b in given[i + 1:]:
            if same_file(a, b):
                raise UsageError(msg("{opt_a} and {opt_b} name the same file {a}: give each its own name", opt_a=opt_a, opt_b=opt_b, a=repr(a)))


# -- writing ---------------------------------------------------------------------------------

Identity = tuple[int, int, int, int] | None  # device, inode, size, mtime of what is at a path (None: nothing)
_CHECKED: dict[str, tuple[Identity, tuple[str, ...]]] = {}  # output (absolute) -> what was there when check_output looked, its inputs
_UNCHECKED: Identity = (-1, -1, -1, -1)


def _key(path: str) -> str:
    return os.path.abspath(path)


def _identity(st: os.stat_result | None) -> Identity:
    return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)



def write_atomic(path: str, write: Callable[[BinaryIO], object], option: str, kind: str, force: bool = False,
                 replace: bool = True) -> None:
    """Write through ``write(fh)`` to a temporary file beside ``path``, then move it into place if the
    target may still be replaced at that moment (see the module's rule).  ``replace=False``: only a new file."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    expected, inputs = _CHECKED.pop(_key(path), (_UNCHECKED, ()))
    if expected == _UNCHECKED:  # not checked before the run: what is there now is what may be replaced
        try:
            expected = _identity(os.lstat(path))
        except (OSError, ValueError):
            expected = None
    try:
        with signals_held():  # a temporary file whose name was never learnt could not be removed
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)[:100]}{TMP_TAG}", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fchmod(fd, _mode_for(path))
            os.fsync(fd)
        _commit(tmp, path, option, kind, force, replace, expected, inputs)
        tmp = None
    except OSError as e:
        raise UsageError(msg("cannot write {path}: {x}; nothing was written", path=repr(path), x=e.strerror or e)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _commit(tmp: str, path: str, option: str, kind: str, force: bool, replace: bool, expected: Identity,
            inputs: tuple[str, ...]) -> None:
    """Move the finished temporary file to ``path``, checking the target once more at that moment: never over an
    input the command read, and never over a file that appeared or changed since it was checked (``expected``:
    what was there then), unless --force and the file is provably tracer's own."""
    opt = f"{option} {path}"
    for _ in range(3):
        check_not_input(path, option, inputs)
        st, why = refusal(path, kind, force, replace)
        if why is not None:
            raise UsageError(at(opt, join([why, msg("it appeared or changed during the run, and nothing was written")])))
        if st is not None and _identity(st) != expected and not (force and proves_ours(path, kind)):
            raise UsageError(at(opt, msg("{f} appeared or changed during the run, and nothing was written", f=repr(path))))
        if st is not None:
            os.replace(tmp, path)  # ours (or --force), checked just now: the residual window docs/files.md describes
            _sync_folder(path)
            return
        try:
            os.link(tmp, path)  # fails if a file appeared since the check: never replaces one
        except FileExistsError:
            continue  # look at what appeared
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
                raise
            os.replace(tmp, path)  # a file system without hard links: checked just now, as above
            _sync_folder(path)
            return
        os.unlink(tmp)
        _sync_folder(path)
        return
    raise UsageError(msg("{option} {path}: the file keeps changing while tracer writes it; nothing was written", option=option, path=path))


def _mode_for(path: str) -> int:
    """The replaced file's permissions, or those of an ordinary new file (not mkstemp's 0600)."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _sync_folder(path: str) -> None:
    """Make the move itself durable (best effort: not every file system lets a folder be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
