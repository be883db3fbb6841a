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
