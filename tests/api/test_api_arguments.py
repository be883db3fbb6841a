"""Every public function and method of the Python API, fed every kind of bad argument, raises a TracerError
subclass (or gives its documented result): never a TypeError, AttributeError, ValueError or RecursionError."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import PRE

import tracer

BAD: list[Any] = [None, 0, -1, 2**70, 1.5, math.nan, math.inf, "", "x", b"x", [], [1], {}, {"a": 1}, (1,), True,
                  np.zeros(2, dtype=np.longdouble), np.zeros(2, dtype=complex), np.array([object()]), np.zeros((2, 3)),
                  np.longdouble(1)]
SPEC = str(PRE)


def _calls(tmp: Path) -> list[tuple[str, Callable[[Any], object]]]:
    t = tracer.trace(SPEC)
    d = tracer.diff(SPEC, SPEC)
    calls: list[tuple[str, Callable[[Any], object]]] = [
        ("load", tracer.load), ("load(name=)", lambda v: tracer.load({"dims": {}}, name=v)),
        ("load(dict value)", lambda v: tracer.load({"dims": {"C": 2, "H": 1, "F": 2}, "input": {"x": [[v]]}})),
        ("trace", tracer.trace), ("t[]", lambda v: t[v]), ("in", lambda v: v in t), ("shape_of", t.shape_of),
        ("meaning", t.meaning), ("save", t.save), ("save(force=)", lambda v: t.save(str(tmp / "o.npz"), force=v)),
        ("attention(stage)", lambda v: str(t.attention(stage=v))), ("attention(batch=)", lambda v: str(t.attention(batch=v))),
        ("diff(a)", lambda v: tracer.diff(v, SPEC)), ("diff(b)", lambda v: tracer.diff(SPEC, v)),
        ("Diff.table", lambda v: str(d.table(precision=v))), ("recorder", tracer.recorder),
    ]
    for kw in ("keep_going", "record", "keep", "max_memory", "batch", "pos", "precision", "show_all"):
        calls.append((f"trace({kw}=)", lambda v, kw=kw: tracer.trace(SPEC, **{kw: v})))
    for kw in ("show_all", "with_weights"):
        calls.append((f"to_json({kw}=)", lambda v, kw=kw: t.to_json(**{kw: v})))
    for kw in ("batch", "pos", "precision", "show_all", "stages"):
        calls.append((f"table({kw}=)", lambda v, kw=kw: str(t.table(**{kw: v}))))
    for kw in ("names", "atol", "rtol", "batch", "pos", "show_all", "keep_going", "stages", "precision"):
        calls.append((f"diff({kw}=)", lambda v, kw=kw: tracer.diff(SPEC, SPEC, **{kw: v})))

    def record_value(v: Any) -> None:
        with tracer.recorder(str(tmp / "mine.npz")) as rec:
            rec("x", v)

    def record_name(v: Any) -> None:
        with tracer.recorder(str(tmp / "mine2.npz")) as rec:
            rec(v, np.zeros(2))

    return calls + [("rec(value)", record_value), ("rec(name)", record_name)]


def test_every_bad_argument_is_a_tracer_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # t.save("x") writes ./x: here, not in the checkout
    escaped = []
    for name, call in _calls(tmp_path):
        for value in BAD:
            try:
                call(value)
            except tracer.TracerError:
                pass
            except BaseException as e:  # the point: nothing else may come out
                escaped.append(f"{name}({type(value).__name__}): {type(e).__name__}: {str(e)[:80]}")
    assert not escaped, "\n".join(escaped)


@pytest.mark.parametrize("value", [np.zeros((1, 3, 4), dtype=np.longdouble), np.longdouble(1.0)])
def test_a_float128_in_a_dict_spec_is_refused_not_recursed_into(value: Any) -> None:
    with pytest.raises(tracer.SpecError, match="longdouble"):
        tracer.load({"dims": {"C": 4, "H": 2, "F": 8}, "input": {"x": value}})


def test_the_documented_arguments_still_work() -> None:
    t = tracer.trace(SPEC, batch=np.int64(0), pos=-1, precision=3, keep=["norm1"], show_all=np.bool_(True))
    assert "norm1" in t and 5 not in t and t.table(stages=["norm1"], precision=2)
    d = tracer.diff(SPEC, SPEC, atol=0, rtol=np.float64(1e-9), stages=("norm1",))
    assert d.same and str(d.table(precision=3))
