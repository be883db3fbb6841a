"""The process around a command: signals and the standard streams.

Run by the entry point before typer is imported (so nothing heavy here), these keep tracer's exit
codes true whatever happens outside the command:
- SIGINT, SIGTERM and SIGHUP raise ``Interrupted``, a SystemExit: every ``finally`` runs (a
  temporary file is removed), click does not turn it into "Aborted!", and the exit code is
  128 + the signal (130 for Ctrl-C, 143 for SIGTERM), as a shell reports a process it stopped.
  One that lands where Python ignores exceptions (a weakref callback, ``__del__``) is raised again
  a millisecond later (``_swallowed``).
- Standard output is wrapped so that a write that fails is a TracerError: a closed pipe
  (``| head -1``) is ``ClosedPipe``, a quiet exit 141 (128 + SIGPIPE, what grep and cat give);
  any other failure (``> /dev/full``, ``>&-``) is ``OutputError``, exit 2 with one line on stderr.
- Standard error is best effort: a message that cannot be written is dropped, the exit code stays.
- A closed descriptor 0, 1 or 2 is reopened on /dev/null (1 read-only, so writing it fails as it
  should), so that no file tracer opens later can land on it.
- A standard stream that cannot encode Unicode (PYTHONIOENCODING=ascii, a POSIX locale without
  UTF-8 mode) gets ASCII look-alikes (``...`` for ``…``, ``|`` for ``│``, ``+`` for box corners)
  and ``\\uXXXX`` for the rest, instead of a UnicodeEncodeError.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any, TextIO

from tracer.errors import ClosedPipe, Interrupted, OutputError, TracerError
from tracer.messages import msg

_own = False  # the process is tracer's own command (install_signals), not a program that imported tracer
_trim_kept = False  # fault_in_ahead raised glibc's trim threshold (keep_freed_memory leaves it)
_held = 0  # depth of signals_held()
_pending: int | None = None  # a signal that came while held


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _pending
    for sig in _SIGNALS:  # one signal is enough: a second one must not cut the cleanup short
        signal.signal(sig, signal.SIG_IGN)
    if _held:
        _pending = signum
        return
    raise Interrupted(signum)


def _swallowed(unraisable: Any) -> None:
    """sys.unraisablehook: an Interrupted raised where Python ignores exceptions is delivered again, soon after.

    A signal's handler runs in whatever Python code is executing, and some code cannot pass an exception on: a
    weakref callback (importlib's module locks use one while modules load), a ``__del__``.  Python prints
    "Exception ignored in ..." with a traceback there and goes on, and the Ctrl-C would be lost.  Here it is
    noted, and a timer raises it again a millisecond later, by then in code that lets it stop the command."""
    global _pending
    if isinstance(unraisable.exc_value, Interrupted) and hasattr(signal, "setitimer"):
        _pending = unraisable.exc_value.signum
        try:
            signal.signal(signal.SIGALRM, _deliver_pending)
            signal.setitimer(signal.ITIMER_REAL, 0.001)
            return
        except (ValueError, OSError):
            pass
    _previous_unraisablehook(unraisable)


def _deliver_pending(signum: int, frame: FrameType | None) -> None:
    global _pending
    if _held or _pending is None:  # signals_held() raises it on leaving
        return
    pending, _pending = _pending, None
    raise Interrupted(pending)


_previous_unraisablehook = sys.unraisablehook


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Let a short step finish before a signal stops tracer (e.g. creating a temporary file and learning its name).

    Blocking the signal would not do: it is then delivered to another thread (NumPy's), and Python
    runs the handler in the main thread at once.  Here the handler notes it, and it is raised on leaving."""
    global _held, _pending
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if not _held and _pending is not None:
            signum, _pending = _pending, None
            raise Interrupted(signum)


_SIGNALS = [s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None]


def install_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP raise Interrupted (a signal the parent set to be ignored stays ignored).  Called by the
    entry point alone: from here on the process is tracer's own (``fault_in_ahead`` may change its allocator)."""
    global _own
    _own = True
    sys.unraisablehook = _swallowed
    for sig in _SIGNALS:
        try:
            if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
                signal.signal(sig, _on_signal)
        except (ValueError, OSError):  # not the main thread
            return


# -- standard streams --------------------------------------------------------------------

BIG_WRITE = 1 << 16  # characters: more than a pipe's buffer holds (64 KiB on Linux)


class _Stdout:
    """sys.stdout, with a failed write turned into ClosedPipe or OutputError."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def _fault(self, e: Exception) -> TracerError:
        _silence(1)  # the buffered rest must not fail again when the interpreter flushes at exit
        if isinstance(e, BrokenPipeError):
            return ClosedPipe(msg("standard output was closed by its reader"))
        why: str = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        if isinstance(e, OSError) and e.errno == errno.EBADF:
            why = msg("standard output is closed")
        return OutputError(msg("cannot write the output: {why}", why=why))

    def write(self, text: str) -> int:
        try:
            buffer = getattr(self._stream, "buffer", None)
            if len(text) <= BIG_WRITE or buffer is None:
                return self._stream.write(text)
            # A big write goes to the bytes layer, until all of it is written: there, a write that a pipe's reader
            # cut short by going away returns a short count, without an error, and the text layer drops the rest
            # silently (seen here: exit 0 with the output cut); the rest's own write then fails as it should.
            self._stream.flush()
            data = memoryview(text.encode(self._stream.encoding, self._stream.errors or "strict"))
            while data:
                n = buffer.write(data)
                if not n:  # a stream that takes nothing more (non-blocking, full): an error, not a silent loss
                    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
                data = data[n:]
            return len(text)
        except (OSError, ValueError) as e:
            raise self._fault(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError) as e:
            raise self._fault(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Stderr:
    """sys.stderr, best effort: a diagnostic that cannot be written is dropped (the exit code still tells)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            _silence(2)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _silence(fd: int) -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def _reserve_descriptors() -> None:
    """Reopen a closed 0, 1 or 2 on /dev/null; 1 read-only, so that writing the output still fails."""
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_RDONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            try:
                new = os.open(os.devnull, flags)
            except OSError:
                continue
            if new != fd:
                os.dup2(new, fd)
                os.close(new)


def prepare_streams() -> None:
    """Make stdout fail clearly, stderr best effort, and both safe for any encoding. Idempotent."""
    _reserve_descriptors()
    if sys.stdout is None:  # started with 1 closed
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (lives as long as the process)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        if not is_utf(stream):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors=ASCII_ERRORS)
    if not isinstance(sys.stdout, _Stdout):
        sys.stdout = _Stdout(sys.stdout)
    if not isinstance(sys.stderr, _Stderr):
        sys.stderr = _Stderr(sys.stderr)


def write_file_text(text: str) -> None:
    """Write to stdout text that is a file's content (the spec `tracer import` prints for ``> spec.yaml``): UTF-8
    whatever the stream's encoding, as tracer writes every file; the ASCII look-alikes are for a terminal's
    words only, and would change a name in the file (``mod\\u00e8le`` names no folder)."""
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if buffer is None or is_utf(out):
        out.write(text)
        return
    out.flush()
    try:
        buffer.write(text.encode("utf-8", "surrogateescape"))
        buffer.flush()
    except (OSError, ValueError) as e:
        if isinstance(out, _Stdout):
            raise out._fault(e) from None
        raise


def is_utf(stream: object) -> bool:
    """Can this stream write any character (its encoding is a UTF)?"""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


# -- ASCII look-alikes ---------------------------------------------------------------------

ASCII_ERRORS = "tracer-ascii"
LOOKALIKES = {
    "…": "...", "⋯": "...", "⋮": ":", "│": "|", "┃": "|", "║": "|", "─": "-", "━": "-", "═": "=",
    "┬": "o", "⊕": "+", "▼": "v", "▲": "^", "←": "<-", "→": "->", "↑": "^", "↓": "v", "⇒": "=>",
    "×": "x", "·": ".", "•": "*", "√": "sqrt", "ᵀ": "^T", "²": "^2", "³": "^3", "≈": "~", "≤": "<=", "≥": ">=", "≠": "!=",
    "−": "-", "–": "-", "—": "--", "‘": "'", "’": "'", "“": '"', "”": '"', "⚠": "!", "✓": "ok", "✗": "x",
    "░": ".", "▒": ":", "▓": "+", "█": "#",  # the attention heatmap's shades, in the same order
    "；": ";", "，": ",", "：": ":", "（": "(", "）": ")", "　": " ",
}


def ascii_lookalike(ch: str) -> str:
    """An ASCII stand-in for one character: a look-alike, a box-drawing line, else a \\u escape (also valid JSON)."""
    if ch in LOOKALIKES:
        return LOOKALIKES[ch]
    import unicodedata  # here: only an ASCII-only terminal needs it

    name = unicodedata.name(ch, "")
    if name.startswith("BOX DRAWINGS"):
        words = set(name.split())
        across, down = words & {"HORIZONTAL", "LEFT", "RIGHT"}, words & {"VERTICAL", "UP", "DOWN"}
        return "+" if across and down else "|" if down else "-"
    if name.startswith(("UPPER", "LOWER", "LEFT", "RIGHT")) and "BLOCK" in name or name == "FULL BLOCK":
        return "#"
    code = ord(ch)
    if code > 0xFFFF:  # a JSON string writes it as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _ascii_errors(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(ascii_lookalike(ch) for ch in err.object[err.start:err.end]), err.end


codecs.register_error(ASCII_ERRORS, _ascii_errors)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory() -> bool:
    """Let this process reuse the memory of the arrays it frees (glibc only; True when done).

    By default glibc maps each array over a few MB afresh and unmaps it when freed, and the first write to
    each page of a fresh mapping is a page fault: on this project's virtual machines 0.1 to 2 ms per MB, paid
    again for every stage that a big run makes.  With arrays up to 32 MiB taken from the heap and freed heap
    memory kept (up to 512 MiB at its top), a stage reuses the pages of the stages before it that were let go.
    The peak memory stays about the same (155 MB against 151 MB for the GPT-2-sized block); the command's process
    is short-lived.  Only ``tracer run`` of one big spec does this (runs.trace_one's ``meanwhile``); ``import tracer``
    leaves the host process's allocator alone.
    """
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):  # not glibc, or no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # a heap grown for fault_in_ahead keeps its own, higher threshold: lowering it would hand that memory back
    return bool(mallopt(M_MMAP_THRESHOLD, 32 << 20)) and (_trim_kept or bool(mallopt(M_TRIM_THRESHOLD, 512 << 20)))


M_MMAP_MAX = -4  # glibc's mallopt: how many arrays it may map on their own (0: every one from the heap)
MADV_POPULATE_WRITE = 23  # madvise(2), Linux 5.14: fault pages in, writable, without changing what they hold
FAULT_IN_AT_LEAST = 64 << 20  # bytes of stages a run must keep before their memory is faulted in ahead
FAULT_IN_PIECE = 4 << 20  # bytes faulted in by one madvise call (the helper can stop between two)
MAX_TRIM_THRESHOLD = 2**31 - 1  # the largest glibc takes (an int): a free top above it is handed back
FAULT_IN_AT_MOST = MAX_TRIM_THRESHOLD - (64 << 20)  # bytes faulted in ahead at most, below the trim threshold


class FaultingIn:
    """A helper thread that faults in [lo, hi) of this process's heap, a piece at a time, from the bottom up."""

    def __init__(self, madvise: Any, lo: int, hi: int) -> None:
        import threading

        self.madvise, self.lo, self.hi = madvise, lo, hi
        self.done = 0  # bytes faulted in so far
        self.refused = False  # madvise refused a piece (a kernel before Linux 5.14); the helper stopped there
        self.stopped = False
        self.thread = threading.Thread(target=self._work, daemon=True, name="tracer-fault-in")
        self.thread.start()

    def _work(self) -> None:
        for at in range(self.lo, self.hi, FAULT_IN_PIECE):
            if self.stopped:
                return
            size = min(FAULT_IN_PIECE, self.hi - at)
            if self.madvise(at, size, MADV_POPULATE_WRITE) != 0:  # EINVAL before Linux 5.14 (ENOMEM: memory gone)
                self.refused = True
                return
            self.done += size

    def stop(self) -> None:
        """Stop at the next piece and wait for it (the run is over: what is left is not needed)."""
        self.stopped = True
        self.thread.join()


def fault_in_ahead(nbytes: int) -> FaultingIn | None:
    """Fault in, on a helper thread, the heap memory that a run's kept stages will take (glibc on Linux; None if not done).

    The first write to each page of fresh memory is a page fault, and on this project's virtual machines a costly one
    (0.1 to 4 ms per MB, paid by the thread that writes); a ``tracer run --record main`` of a 12-layer GPT-2 keeps about
    900 MB of stages, all written for the first time.  Here every array is taken from the heap (no array mapped on its
    own), the heap is grown by ``nbytes`` at once and the growth kept, and a helper thread asks the kernel to fault
    that memory in (madvise MADV_POPULATE_WRITE, which writes nothing) from the bottom up, where the run's arrays will
    be placed, while the run starts and computes.  The kernel does in one call what thousands of faults do, and the
    run's threads then write into memory that is already there.  Nothing the run computes changes: only where its
    arrays live.  Only ``tracer run`` of one spec that keeps at least FAULT_IN_AT_LEAST bytes of stages does this, with
    ``nbytes`` those stages' bytes, which the memory guard has already counted against --max-memory.  Measured on the
    12-layer GPT-2 (float32, T = 1024, --record main): 1.90 s against 2.15 s, the peak 1.06 GB against 0.98 GB (the
    heap's free pieces below the grown part take some stages, so part of it is faulted in and not used); on the
    GPT-2-sized block (its 52 MB of stages and temporaries faulted in), no gain, so a plain run of it does not.
    A process that imported tracer (or invokes its typer app in-process, as the tests do) keeps its allocator as it was.
    """
    if not _own or nbytes < FAULT_IN_AT_LEAST or not sys.platform.startswith("linux"):
        return None
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt, malloc, free, sbrk, madvise = libc.mallopt, libc.malloc, libc.free, libc.sbrk, libc.madvise
    except (ValueError, OSError, AttributeError):  # not glibc
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    malloc.argtypes, malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    free.argtypes, free.restype = [ctypes.c_void_p], None
    sbrk.argtypes, sbrk.restype = [ctypes.c_long], ctypes.c_void_p
    madvise.argtypes, madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    global _trim_kept
    nbytes = min(nbytes, FAULT_IN_AT_MOST)  # the rest of a bigger run is faulted in as it is written
    if not (mallopt(M_MMAP_MAX, 0) and mallopt(M_TRIM_THRESHOLD, MAX_TRIM_THRESHOLD)):
        return None
    _trim_kept = True
    below = sbrk(0)
    block = malloc(nbytes)
    if not block:
        return None
    free(block)  # back to the top of the heap, kept (the trim threshold): the run's next arrays are placed there
    above = sbrk(0)
    if below is None or above is None or not below < above or block + nbytes > above:  # not the heap's own growth
        return None  # (the block may begin in the heap's free top, below where it ended)
    page = os.sysconf("SC_PAGE_SIZE")
    lo = -(-block // page) * page
    try:
        return FaultingIn(madvise, lo, lo + (block + nbytes - lo) // page * page)
    except RuntimeError:  # no thread to be had: the run writes its memory for the first time, as without this
        return None
