"""The one range check of the sample, position and precision a command or ``tracer.trace`` is asked to show.

``tracer run``, ``tracer check``, ``tracer grad`` and the Python API all check ``--batch``/``--pos`` (``batch=``,
``pos=``) and ``--precision`` here, with one wording: an index reads as Python reads one (-1 is the last).
No NumPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer.errors import UsageError
from tracer.messages import Message, msg

if TYPE_CHECKING:
    from tracer.spec import Spec

MAX_PRECISION = 17  # decimals: a double's 17 significant digits are all there is


def index(value: int, size: int, option: str, axis: str, what: Message) -> int:
    """An index as Python reads one: -1 is the last, -size the first; anything else is a UsageError naming the option."""
    if -size <= value < size:
        return value % size
    raise UsageError(msg("{option} {value} is out of range: {axis} = {size} ({what} 0 to {x}, or -1 to -{size} from the end)",
                         option=option, value=value, axis=axis, size=size, what=what, x=size - 1))


def position(spec: Spec, batch: int, pos: int, options: tuple[str, str] = ("--batch", "--pos")) -> tuple[int, int]:
    """The sample b and position t to show, each checked against the spec's B and T."""
    return (index(batch, spec.dims.B, options[0], "B", msg("samples")), index(pos, spec.dims.T, options[1], "T", msg("positions")))


def precision(value: int, option: str = "--precision") -> int:
    if not 0 <= value <= MAX_PRECISION:
        raise UsageError(msg("{option} {value} is out of range: give 0 to {most}", option=option, value=value, most=MAX_PRECISION))
    return value


# -- the Python API's arguments: each checked at the edge, so that a wrong type is a UsageError (a TracerError), as
# docs/api.md promises, never a TypeError, AttributeError or RecursionError from deep inside ---------------------

def _received(value: object) -> str:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    return type(value).__name__


def flag(value: object, name: str) -> bool:
    """``keep_going=``, ``show_all=``, ``force=``: True or False (a NumPy bool too)."""
    if isinstance(value, bool) or type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise UsageError(msg("{name}: expected True or False, received {got}", name=name, got=_received(value)))


def whole(value: object, name: str) -> int:
    """``batch=``, ``pos=``, ``precision=``: a whole number (a NumPy integer too), never a bool or a float."""
    import operator

    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise UsageError(msg("{name}: expected a whole number, received {got}", name=name, got=_received(value)))


def text(value: object, name: str) -> str:
    """A stage name, ``record=``, ``max_memory=``: text."""
    if isinstance(value, str):
        return value
    raise UsageError(msg("{name}: expected text, received {got}", name=name, got=_received(value)))


def texts(value: object, name: str) -> tuple[str, ...]:
    """``keep=``, ``stages=``: a list (or tuple) of stage names."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UsageError(msg("{name}: expected a list of stage names, received {got}", name=name, got=_received(value)))


def real(value: object, name: str) -> float:
    """``atol=``, ``rtol=``: a number (the range is the caller's check)."""
    if not isinstance(value, bool) and isinstance(value, (int, float)) or type(value).__name__ in ("float64", "float32"):
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:
            pass
    raise UsageError(msg("{name}: expected a number, received {got}", name=name, got=_received(value)))


def file_path(value: object, name: str) -> str:
    """A path: text or an os.PathLike of text."""
    import os

    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    raise UsageError(msg("{name}: expected a file path, received {got}", name=name, got=_received(value)))
