"""`tracer diff REF s1.npz s2.yaml ...` (or REF and a folder of hand-ins): each side compared against REF, in one process.

One outcome per hand-in: its DiffResult, or the error that stopped it (a hand-in that cannot be read is its own
outcome; the others are still compared).  Exit code: the worst of them, 0 all the same, 1 some differ, 2 some could
not be read or compared, 3 a bug in tracer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

from tracer.compare.judge import DiffResult
from tracer.errors import EXIT_INTERNAL, EXIT_OK, TracerError, UsageError
from tracer.messages import Message, msg, nmsg, render

HAND_IN_SUFFIXES = (".npz", ".json", ".yaml", ".yml")  # what a folder of hand-ins is read for: arrays, saved traces, specs


class HandIn(NamedTuple):
    path: str
    code: int
    result: DiffResult | None = None
    error: Message | str = ""

    @property
    def word(self) -> str:
        """same | different | error"""
        if self.result is None:
            return "error"
        return "same" if self.result.same else "different"

    def json(self, reference: str) -> dict[str, Any]:
        from tracer.views.trace_json import SCHEMA_VERSION

        if self.result is not None:
            return self.result.as_json()
        return error_json(reference, self.path, self.code, self.error, SCHEMA_VERSION)


def error_json(a: str, b: str, code: int, error: object, schema_version: int) -> dict[str, Any]:
    """A diff that could not be made, as JSON: the sides by path and the error (as `tracer run --json` writes one)."""
    return {"schema_version": schema_version, "kind": "diff", "same": None, "a": {"path": a}, "b": {"path": b},
            "error": {"exit_code": code, "message": error}}


def hand_ins(paths: list[str]) -> list[str]:
    """The sides to compare: each path as given, a folder as the hand-ins it holds (*.npz, *.json, *.yaml, *.yml, the
    suffix in any case, by name)."""
    sides: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            sides.append(path)
            continue
        inside = sorted(name for name in os.listdir(path) if name.lower().endswith(HAND_IN_SUFFIXES) and not name.startswith(".")
                        and os.path.isfile(os.path.join(path, name)))
        if not inside:
            raise UsageError(msg("{folder}: a folder of hand-ins, but it holds no .npz, .json or .yaml file", folder=path))
        sides += [os.path.join(path, name) for name in inside]
    return sides


def compare_each(reference: str, sides: list[str], run: Callable[[str], DiffResult]) -> list[HandIn]:
    out = []
    for path in sides:
        try:
            r = run(path)
            out.append(HandIn(path, r.exit_code, r))
        except TracerError as e:
            out.append(HandIn(path, e.exit_code, error=e.message))
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # a bug in tracer: this hand-in's outcome, exit 3 at the end
            if os.environ.get("TRACER_DEBUG"):
                raise
            out.append(HandIn(path, EXIT_INTERNAL, error=msg("internal error: {what} (a bug in tracer; please report it)",
                                                               what=f"{type(e).__name__}: {e}")))
    return out


def status_line(h: HandIn) -> str:
    """'same       s1.npz: same: all 11 stages agree ...', one line in the current language."""
    from tracer import i18n

    words = {"same": i18n.tr("same"), "different": i18n.tr("different"), "error": i18n.tr("error")}
    detail = render(h.result.summary() if h.result is not None else h.error)
    detail = " ".join(detail.split())
    if not detail.startswith(h.path):
        detail = f"{h.path}: {detail}"
    return f"{i18n.ljust(words[h.word], 10)} {detail}"


def exit_code(outcomes: list[HandIn]) -> int:
    return max((h.code for h in outcomes), default=EXIT_OK)


def summary_line(outcomes: list[HandIn]) -> str:
    counts = {w: sum(h.word == w for h in outcomes) for w in ("same", "different", "error")}
    parts = msg("{same} same, {different} different, {e}", same=counts["same"], different=counts["different"],
                e=nmsg("{n} error", "{n} errors", counts["error"]))
    return render(nmsg("{n} hand-in: {parts}; exit code {code}", "{n} hand-ins: {parts}; exit code {code}", len(outcomes),
                       parts=parts, code=exit_code(outcomes)))
