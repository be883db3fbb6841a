"""tracer.diff: compare two sides stage by stage, as ``tracer diff A B`` does.

A side is anything the command line takes (a spec, a saved JSON trace, an .npz of arrays or a
JSON object of arrays, by path), or an object: a loaded Spec, a dict of spec fields (it has
``dims``), a Trace from ``tracer.trace``, or a mapping of stage name -> array (your own
activations; ``names={"ln1": "norm1"}`` is --map).  The result is the CLI's: the first diverging
stage, where and by how much, the per-stage table, the exit code diff(1) would give, and, against
your own arrays, what the divergence usually means.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Union

import numpy as np

from tracer.errors import UsageError
from tracer.messages import msg
from tracer.run.result import Trace
from tracer.spec import Spec
from tracer.spec.loading import load
from tracer.views.display import View

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tracer.compare.core import DiffResult, Side, StageRow

SideLike = Union[str, "os.PathLike[str]", Spec, Trace, Mapping[str, Any]]


class StageComparison(NamedTuple):
    """One row of the per-stage table."""

    stage: str
    status: str  # equal | differs | shapes_differ | only_in_a | only_in_b | not_recorded
    shape_a: str | None  # with axis letters: [B,T,C] = [1,3,2]
    shape_b: str | None
    max_abs_diff: float | None


class Divergence(NamedTuple):
    """The first stage that is not equal: where, by how much, both values there, and (against your arrays) a hint."""

    stage: str
    status: str
    where: dict[str, int] | None  # {"b": 0, "t": 1, "c": 0}: the element that differs most
    max_abs_diff: float | None
    value_a: float | None  # at ``where``
    value_b: float | None
    hint: str | None


class Diff:
    """The comparison of two sides (see tracer.diff)."""

    def __init__(self, result: DiffResult, precision: int = 6) -> None:
        self.result = result  # the CLI's DiffResult (structure, settings, weights, stage rows)
        self.precision = precision

    @property
    def same(self) -> bool:
        return self.result.same

    @property
    def exit_code(self) -> int:
        """What ``tracer diff`` would exit with: 0 the same within tolerance, 1 different."""
        return self.result.exit_code

    @property
    def first_divergence(self) -> Divergence | None:
        row = self.result.first_diverging
        if row is None:
            return None
        where = None if row.where is None or row.a is None else {a.lower(): i for a, i in zip(row.a.axes, row.where)}
        return Divergence(row.name, row.status, where, row.max_abs_diff, _value(row, "a"), _value(row, "b"), self.hint)

    @property
    def stages(self) -> list[StageComparison]:
        return [StageComparison(r.name, r.status, None if r.a is None else r.a.shape_label, None if r.b is None else r.b.shape_label,
                                r.max_abs_diff) for r in self.result.stages]

    @property
    def hint(self) -> str | None:
        """What the first divergence usually means (in the current language; diffs against your own arrays)."""
        return None if self.result.hint is None else self.result.hint.text()

    @property
    def notes(self) -> list[str]:
        return list(self.result.notes)

    @property
    def summary(self) -> str:
        return self.result.summary()

    def to_json(self) -> str:
        """The JSON ``tracer diff A B --json`` prints."""
        from tracer.views.trace_json import dumps

        return dumps(self.result.as_json())

    def table(self, precision: int | None = None) -> View:
        """The view ``tracer diff`` prints (rich and Jupyter show it)."""
        from tracer.compare.view import diff_view
        from tracer.spec import choices

        digits = self.precision if precision is None else choices.precision(choices.whole(precision, "precision"), "precision")
        return View(diff_view(self.result, digits))

    def __rich__(self) -> RenderableType:
        return self.table().renderable

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __repr__(self) -> str:
        return f"<tracer.Diff exit {self.exit_code}: {self.summary}>"


def _value(row: StageRow, side: str) -> float | None:
    stage = row.a if side == "a" else row.b
    if row.where is None or stage is None or stage.data is None:
        return None
    return float(stage.data[row.where])


def side(value: object, label: str, keep_going: bool = False) -> Side:
    """One side of a diff, from any object the API takes."""
    from tracer.compare.arrays import numeric, with_dtype
    from tracer.compare.core import arrays_side, load_side, spec_side

    if isinstance(value, (str, os.PathLike)):
        return load_side(os.fspath(value), label, keep_going)
    if isinstance(value, Trace):
        return spec_side(value.spec, value.spec.path, label, keep_going, value.run, value.params)
    if isinstance(value, Spec) or (isinstance(value, Mapping) and "dims" in value):
        s = load(value)
        return spec_side(s, s.path, label, keep_going)
    if isinstance(value, Mapping):
        arrays = with_dtype({str(k): numeric(v, f"{label}: array {k!r}") for k, v in value.items()},
                            [getattr(v, "dtype", np.float64) for v in value.values()])
        return arrays_side(arrays, "<arrays>", label)
    from tracer.errors import UsageError

    raise UsageError(msg("side {label}: expected a path, a Spec, a spec dict, a Trace or a mapping of stage name -> array, received {name__}", label=label, name__=type(value).__name__))


def diff(a: SideLike, b: SideLike, *, names: Mapping[str, str] | Sequence[str] = (), atol: float | None = None, rtol: float | None = None,
         batch: int = 0, pos: int = 0, show_all: bool = False, keep_going: bool = False, stages: Sequence[str] = (),
         precision: int = 6) -> Diff:
    """Compare ``a`` and ``b`` stage by stage (``tracer diff A B``).

    ``names`` says which of your arrays is which stage: ``{"ln1": "norm1"}``, or --map's strings
    (``["ln1=norm1"]`` or a YAML file). ``atol``/``rtol``: equal when |A - B| <= atol + rtol * max(|A|, |B|) (None: 1e-9, or float32's 1e-5 against float32 arrays).
    ``batch``/``pos``: where the table shows values; ``show_all``: the attention internals too;
    ``stages``: only these rows (--stage).
    """
    from tracer.compare.core import check_tolerance, compare
    from tracer.spec import choices

    atol = None if atol is None else choices.real(atol, "atol")
    rtol = None if rtol is None else choices.real(rtol, "rtol")
    batch, pos, precision = choices.whole(batch, "batch"), choices.whole(pos, "pos"), choices.whole(precision, "precision")
    choices.precision(precision, "precision")
    show_all, keep_going = choices.flag(show_all, "show_all"), choices.flag(keep_going, "keep_going")
    stages = choices.texts(stages, "stages")
    if isinstance(names, Mapping):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
            raise UsageError(msg("names: expected a mapping of your array names to tracer's stage names (text), received {got}", got=choices._received(names)))
    elif isinstance(names, str):
        names = [names]
    else:
        names = choices.texts(names, "names")
    check_tolerance(1e-9 if atol is None else atol, 1e-9 if rtol is None else rtol)
    left, right = side(a, "A", keep_going), side(b, "B", keep_going)
    mapping: dict[str, str] | Sequence[str] = dict(names) if isinstance(names, Mapping) else list(names)
    with np.errstate(all="ignore"):
        result = compare(left, right, atol=atol, rtol=rtol, batch=batch, pos=pos, show_all=show_all, keep_going=keep_going,
                                 only=stages, names=mapping)
    return Diff(result, precision)
