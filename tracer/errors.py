"""One exception family, rooted in TracerError, and the exit codes it maps to.

Inner code raises a short fact; the edge (spec loader, executor, CLI) adds the
file, line, field and shapes.  A message is a ``tracer.messages.Message`` (``msg(...)``): its
str is the English, and the edge that prints it renders it in the chosen language; a plain str
is still accepted (and printed as written).  Nothing here imports NumPy.
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_VIOLATION = 1  # a broadcast / axis / causality / position / nonfinite rule was broken
EXIT_USAGE = 2  # the spec or the command line is wrong
EXIT_INTERNAL = 3  # a bug in tracer itself
EXIT_CLOSED_PIPE = 128 + 13  # the reader of standard output went away (SIGPIPE), as grep and cat give


class TracerError(Exception):
    """Base of every error tracer reports to a user."""

    exit_code = EXIT_INTERNAL

    @property
    def message(self) -> str:
        """What to tell the user: the Message (or plain str) it was raised with; ``str(error)`` is its English."""
        first = self.args[0] if self.args else ""
        return first if isinstance(first, str) and len(self.args) == 1 else str(self)


class SpecError(TracerError):
    """The spec file cannot be read or does not describe a valid block."""

    exit_code = EXIT_USAGE


class CheckpointError(SpecError):
    """A checkpoint file cannot be opened or a tensor in it cannot be read (exit 2)."""


class UsageError(TracerError):
    """The command line asks for something impossible (e.g. --pos beyond T)."""

    exit_code = EXIT_USAGE


class ShapeError(TracerError):
    """Operands whose shapes cannot be combined at all (NumPy would raise too)."""

    exit_code = EXIT_USAGE


class Violation:
    """A rule NumPy would let slide: recorded, rendered, and mapped to exit 1."""

    def __init__(self, kind: str, stage: str, message: str, shapes: dict[str, str] | None = None, rule: str = "",
                 numpy_would: str = "", why: str = "") -> None:
        self.kind = kind  # broadcast | axis | causality | position | nonfinite
        self.stage = stage
        self.message = message
        self.shapes = dict(shapes or {})
        self.rule = rule  # the contract that was broken
        self.numpy_would = numpy_would  # what NumPy would have done instead of failing
        self.why = why  # why that is wrong here

    def __repr__(self) -> str:
        return f"Violation({self.kind!r}, {self.stage!r}, {self.message!r})"

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "stage": self.stage, "message": self.message, "shapes": dict(self.shapes)}


class BrokenContract(Exception):
    """A kernel's short fact: an operand breaks the op's axis contract.

    The executor turns it into a Violation naming the stage and the axes.
    """

    def __init__(self, kind: str, fact: str, operands: dict[str, tuple[int, ...]], numpy_would: str = "", why: str = "",
                 rule: str = "", axes: dict[str, tuple[str, ...]] | None = None) -> None:
        super().__init__(fact)
        self.kind = kind
        self.fact = fact
        self.operands = operands
        self.numpy_would = numpy_would
        self.why = why
        self.rule = rule
        self.axes = axes or {}  # axis letters of operands whose letters the kernel knows (a bias: its [F] or [C])


# -- the command's surroundings (tracer.process) ----------------------------------------------------

class Interrupted(SystemExit):
    """A signal asked tracer to stop: exit 128 + the signal number once every cleanup has run."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum
        self.exit_code = 128 + signum

    @property
    def word(self) -> str:
        return "interrupted" if self.signum == signal.SIGINT else "terminated"


class OutputError(TracerError):
    """Standard output cannot be written (a full disk, a closed descriptor)."""

    exit_code = EXIT_USAGE


class ClosedPipe(TracerError):
    """The reader of standard output has gone (``| head -1``): stop quietly."""

    exit_code = EXIT_CLOSED_PIPE


# -- files and arrays a command reads ----------------------------------------------------------

class TraceFileError(TracerError):
    """A JSON file that cannot be read as a saved tracer trace."""

    exit_code = EXIT_USAGE


class ArraysFileError(TracerError):
    """A file of arrays that cannot be read (exit 2)."""

    exit_code = EXIT_USAGE


class InputRefused(TracerError):
    """A file tracer will not read (tracer.reading): not a regular file, a hostile or broken header.  A short fact
    that names no path and quotes none of the file's bytes; the reader adds the path in its own error class (exit 2)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, reason: str = "refused") -> None:
        super().__init__(message)
        self.reason = reason  # missing | directory | special | permission | refused (anything else)


class DiffTrouble(TracerError):
    """A side cannot be compared (e.g. a violation without --keep-going): exit 2, as diff(1)."""

    exit_code = EXIT_USAGE


class StageNotFound(UsageError, KeyError):
    """``trace[name]`` for a stage the trace does not hold (a TracerError, and a KeyError as a mapping's should be)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownLanguage(ValueError):
    """--lang names no language tracer speaks; the CLI words the refusal (a UsageError, exit 2) in the locale's language."""

class SweepStopped(TracerError):
    """tracer patch: the clean or the corrupt run flagged a violation, so no cell can be measured (exit 1, as a
    violation is for tracer run)."""

    exit_code = EXIT_VIOLATION
