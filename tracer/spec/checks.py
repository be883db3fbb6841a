"""The checks every section of a spec makes, each failing with file:line:col, the field path, expected and received.

One Checks reads one document: it knows where each value was written (the Source) and holds what an early section
decides that later ones read (allow_nonfinite, the checkpoint the weights come from).  Each section of the spec is
validated by its own module, with these checks: tracer/spec/__init__.py calls them in the document's order.
"""

from __future__ import annotations

import math
from typing import Any

from tracer.errors import SpecError
from tracer.messages import Message, at, join, msg, nmsg
from tracer.spec import yamlio
from tracer.spec.keys import MAX_DIM
from tracer.spec.yamlio import Path, Source, format_path


def close_matches(word: str, options: list[str], n: int = 1, cutoff: float = 0.5) -> list[str]:
    import difflib  # only on the error path: a valid spec never needs a suggestion

    return difflib.get_close_matches(word, options, n=n, cutoff=cutoff)


def lookalike_of(word: object, options: Any) -> Message | None:
    """`Gelu` for `gelu`, `w_0` for `w_o` (spec/yamlslips.lookalike); None for anything else, a non-text key too."""
    if not isinstance(word, str):
        return None
    from tracer.spec.yamlslips import lookalike

    return lookalike(word, [str(o) for o in options])


def did_you_mean(close: list[str], otherwise: Message | str = "") -> Message | str:
    """'did you mean 'block'?' for the closest spelling, else what to say instead ('' for nothing)."""
    return msg("did you mean {names}?", names=repr(close[0])) if close else otherwise


def nesting_levels(shape: tuple[int, ...]) -> str:
    n = len(shape)
    return msg("a single value") if n == 0 else nmsg("{n} level of nesting", "{n} levels of nesting", n)


def nested_shape(shape: tuple[int, ...]) -> str:
    return msg("a single number") if not shape else "[" + ",".join(str(n) for n in shape) + "]"


def positive(value: Any) -> bool:
    """A finite number above zero (not a boolean): what eps, a scale and a cap must be."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


class Checks:
    def __init__(self, src: Source) -> None:
        self.src = src
        self.allow_nonfinite = False  # allow_nonfinite: NaN and Inf in given numbers, studied on purpose
        self.model_source: Any = None  # checkpoints.refs.ModelSource when weights: {file: ..., layout: ...}
        self.allow_unread = False  # weights.allow_unread: a checkpoint read in part on purpose

    # -- messages ---------------------------------------------------------
    def fail(self, path: Path, message: str) -> SpecError:
        return SpecError(at(self.src.where(path), at(format_path(path), message)))

    def fail_key(self, path: Path, message: str) -> SpecError:
        """An error about a key itself (unknown, unused): located where the key is written."""
        return SpecError(at(self.src.where_key(path), at(format_path(path), message)))

    def received(self, path: Path, value: Any) -> str:
        raw = self.src.raw.get(path)
        if isinstance(value, bool):
            return msg("boolean {v}", v=repr(raw) if raw is not None else value)
        if isinstance(value, dict):
            return msg("a mapping")
        if isinstance(value, list):
            return msg("a list")
        if value is None:
            return msg("nothing (null)")
        if isinstance(value, str):
            return msg("text {v}", v=repr(value))
        if isinstance(value, (int, float)) and raw is not None and raw.strip():
            try:
                float(raw.replace("_", ""))
                return yamlio.abbreviate(raw)  # a number as written: 1.5, 1e-5
            except ValueError:
                pass
        return repr(raw if raw is not None else value)

    def keys(self, mapping: Any, path: Path, allowed: tuple[str, ...] | list[str], what: Message) -> dict[str, Any]:
        if not isinstance(mapping, dict):
            raise self.fail(path, msg("expected {what}, received {got}", what=msg("a mapping of {what}", what=what), got=self.received(path, mapping)))
        for key in mapping:
            if key not in allowed:
                close = close_matches(str(key), [str(a) for a in allowed], n=1, cutoff=0.5)
                hint = lookalike_of(key, allowed) or did_you_mean(close, msg("known keys: {keys}", keys=', '.join(allowed)))
                raise self.fail_key(path + (key,), join([msg("unknown key {key}", key=repr(key)), hint]))
        return mapping

    def integer(self, value: Any, path: Path, lo: int = 1, hi: int = MAX_DIM) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer() and not isinstance(value, bool):
                value = int(value)
            else:
                raise self.fail(path, msg("expected a whole number, received {got}", got=self.received(path, value)))
        if not lo <= value <= hi:
            raise self.fail(path, msg("expected {what}, received {got}", what=msg("a whole number from {lo} to {hi}", lo=lo, hi=f"{hi:,}"),
                                      got=yamlio.abbreviate(str(self.src.raw.get(path, value)))))
        return value

    def choice(self, value: Any, path: Path, options: tuple[str, ...]) -> str:
        if value not in options:
            wrong = msg("expected {what}, received {got}", what=msg("one of {options}", options=' | '.join(options)), got=self.received(path, value))
            hint = lookalike_of(value, options)
            raise self.fail(path, join([wrong, hint]) if hint else wrong)
        return str(value)

    def boolean(self, value: Any, path: Path) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, msg("expected true or false, received {got}", got=self.received(path, value)))
        return value

    # -- nested lists -----------------------------------------------------
    def nested(self, value: Any, path: Path, want_int: bool) -> Any:
        """Check every leaf is a number (an int for token ids); return the value."""
        if isinstance(value, list):
            if not value:
                raise self.fail(path, msg("expected numbers, received an empty list"))
            for i, item in enumerate(value):
                self.nested(item, path + (i,), want_int)
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            what = msg("a whole number (token id)") if want_int else msg("a number")
            raise self.fail(path, msg("expected {what}, received {got}", what=what, got=self.received(path, value)))
        if want_int and not isinstance(value, int):
            raise self.fail(path, msg("expected a whole number (token id), received {value}", value=repr(value)))
        if not want_int and not math.isfinite(value) and not self.allow_nonfinite:
            raise self.fail(path, msg("received {value} (not finite); add allow_nonfinite: true to study NaN and Inf on purpose", value=value))
        return value

    def rect(self, value: Any, path: Path) -> tuple[int, ...]:
        """Shape of a rectangular nested list; ragged lists are errors naming the row."""
        if not isinstance(value, list):
            return ()
        shapes = [self.rect(item, path + (i,)) for i, item in enumerate(value)]
        first = shapes[0]
        for i, s in enumerate(shapes):
            if s != first:
                raise self.fail(path + (i,), msg("ragged: row {i} has shape {s} but row 0 has {first}", i=i, s=nested_shape(s), first=nested_shape(first)))
        return (len(value),) + first

