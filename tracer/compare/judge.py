"""tracer diff's verdict: two sides compared, stage by stage, setting by setting, weight by weight.

The comparison has three parts, each plain data (no rich; compare/view.py draws it):

- structure: the two step lists aligned (compare/align.py) and what differs, in words (compare/explain.py);
- settings: every setting of the computation, derived from the spec and normalised (compare/settings.py: dims,
  every block setting, dtype, init, ...; a mask by its matrix), and the weights (which weight, largest difference);
- stages: one row per stage name, aligned, with a status and the largest absolute difference over the whole
  array; the first row that is not equal is the first diverging stage.

Two arrays are equal when every element satisfies
``|a - b| <= atol + rtol * max(|a|, |b|)``; NaN equals NaN and an infinity
equals the same infinity, so a spec diffed with itself always compares equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tracer.compare.align import (
    ARRAYS,
    ArraysReport,
    Side,
    StageRow,
    StepRow,
    align,
    check_violations,
    expr,
    masked_scores,
    same_wiring,
    step_rows,
    value_at,
    violation_lines,
)
from tracer.compare.explain import structure_lines, with_design
from tracer.compare.status import DIFFERS, EQUAL, NOT_RECORDED, ONLY_A, ONLY_B, SHAPES_DIFFER, STATUS_MESSAGES
from tracer.engine.executor import Stage
from tracer.errors import DiffTrouble, UsageError
from tracer.messages import Message, join, msg, nmsg
from tracer.model import catalogue
from tracer.model.blocks import Step
from tracer.spec import GRAD_SETTINGS, SPEC_ONLY_SETTINGS
from tracer.views.trace_json import SCHEMA_VERSION, array_json

if TYPE_CHECKING:
    from tracer.compare.hints import Hint


EXIT_SAME = 0


EXIT_DIFFERENT = 1


# Far above the rounding noise of float64 (reordered sums of 768 terms stay below 1e-12 relative)
# and far below the sixth decimal the tables print.
DEFAULT_ATOL = 1e-9


DEFAULT_RTOL = 1e-9


# Another program's float32 (or float16) arrays are compared at their own precision unless --atol/--rtol is given:
# a float32 block agrees with float64 to about 1e-7 relative per operation, 1e-6 after a block of sums over C.
DTYPE_TOLERANCE = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2)}


@dataclass
class Comparison:
    equal: bool
    max_abs_diff: float
    where: tuple[int, ...] | None  # index of the largest difference


def differences(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> tuple[np.ndarray, np.ndarray]:  # same shape
    """|a - b| and the tolerance, element by element: equal where d <= tol."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        if np.isfinite(a.sum()) and np.isfinite(b.sum()):  # every value finite (the common case): two arrays, in place
            d = np.subtract(a, b)
            np.abs(d, out=d)
            tol = np.abs(a)
            np.maximum(tol, np.abs(b), out=tol)
            tol *= rtol
            tol += atol  # atol + rtol * max(|a|, |b|), the same numbers as below
            return d, tol
        d = np.abs(a - b)
        finite = np.isfinite(a) & np.isfinite(b)
        same_nonfinite = (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
        d[same_nonfinite] = 0.0
        d[~finite & ~same_nonfinite] = math.inf  # NaN against a number, inf against a number
        tol = np.where(finite, atol + rtol * np.maximum(np.abs(a), np.abs(b)), 0.0)
    return d, tol


COMPARE_BLOCK = 1 << 16  # values compared at a time: the temporaries stay small and in the cache


def compare_arrays(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> Comparison:  # same shape
    """Equal within the tolerance everywhere, the largest |a - b| and where it is first found: a block at a time."""
    shape = np.shape(a)
    flat_a, flat_b = np.ravel(a), np.ravel(b)
    if flat_a.size == 0:
        return Comparison(True, 0.0, None)
    equal, best, at = True, -1.0, 0
    for i in range(0, flat_a.size, COMPARE_BLOCK):
        d, tol = differences(flat_a[i:i + COMPARE_BLOCK], flat_b[i:i + COMPARE_BLOCK], atol, rtol)
        equal = equal and bool(np.all(d <= tol))
        j = int(np.argmax(d))
        if d[j] > best:  # strictly: the first place the largest difference is found, as argmax over the whole
            best, at = float(d[j]), i + j
    where = tuple(int(i) for i in np.unravel_index(at, shape))
    return Comparison(equal, best, where)


@dataclass
class SettingRow:
    field: str  # dims.T, block.eps, dtype
    a: Any
    b: Any


@dataclass
class WeightRow:
    name: str
    status: str
    shape_a: tuple[int, ...] | None
    shape_b: tuple[int, ...] | None
    max_abs_diff: float | None = None
    where: tuple[int, ...] | None = None
    value_a: float | None = None  # at `where`
    value_b: float | None = None


def compare_settings(a: Side, b: Side, grad: bool = False) -> list[SettingRow]:
    """Every setting that changes what is computed (compare.settings derives them from the spec), normalised: a mask by
    its matrix.  norm_order is a label when a side writes its own steps (norm_order: custom): the step lists say what
    each side computes, and structure_lines compares them.  The input and the loss are compared where both sides are
    specs (a saved trace holds its input's values as stages), the loss only with --grad; a trace saved before traces
    recorded every setting is compared on the settings it records (diff_notes says so)."""
    rows = []
    da, db = a.settings, b.settings
    custom = "custom" in (da.get("block.norm_order"), db.get("block.norm_order"))
    both_specs = a.source == b.source == "spec"
    for key in align(list(da), list(db)):
        if custom and key == "block.norm_order":
            continue
        if key in SPEC_ONLY_SETTINGS and not both_specs and (key not in da or key not in db) or key in GRAD_SETTINGS and not grad:
            continue
        if (key not in da and not a.complete) or (key not in db and not b.complete):
            continue
        va, vb = da.get(key), db.get(key)
        if va != vb or isinstance(va, bool) != isinstance(vb, bool):  # True == 1 in Python
            rows.append(SettingRow(key, va, vb))
    return rows


def step_settings_compared(a: Side, b: Side) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Each side's step settings, as compared: against a trace saved before traces recorded every setting, only the
    settings of a step that trace records (the note of incomplete_note says the rest is not compared)."""
    sa, sb = a.step_settings, b.step_settings
    for older, other in ((a, b), (b, a)):
        if older.source == "trace" and not older.complete:
            kept = {name: {k: v for k, v in s.items() if k in older.step_settings.get(name, {})} for name, s in other.step_settings.items()}
            sa, sb = (sa, kept) if older is a else (kept, sb)
    return sa, sb


def incomplete_note(a: Side, b: Side) -> Message | str:
    """A trace saved before traces recorded every setting: which settings it lacks are not compared."""
    for s, other in ((a, b), (b, a)):
        if s.source == "trace" and not s.complete:
            lacking = [k for k in other.settings if k not in s.settings and k not in SPEC_ONLY_SETTINGS]
            if lacking:
                return msg("{label} ({path}) was saved before traces recorded every setting: {names} not compared (save it again with "
                           "`tracer run SPEC --json`)",
                           label=s.label, path=s.path, names=", ".join(lacking))
    return ""


def rows_read(a: Side, b: Side, name: str) -> tuple[int, ...] | None:
    """The rows of weight ``name`` both sides hold as the spec means them: a side that read only some rows of a table
    from its file (the tokens' rows of an embedding) holds those, the other side all; None: every row."""
    known = [set(s.rows[name]) for s in (a, b) if name in s.rows]
    if not known:
        return None
    return tuple(sorted(set.intersection(*known)))


def compare_weights(a: Side, b: Side, atol: float, rtol: float) -> tuple[list[WeightRow] | None, list[Message]]:
    """Each weight of A against B's, by name; a table a side read only in part (an embedding from a file: the rows of
    its tokens) is compared on the rows both hold, and a note says so."""
    missing = [s for s in (a, b) if s.weights is None]
    if missing:
        who = " and ".join(f"{s.label} ({s.path})" for s in missing)
        return None, [msg("weights not compared: {who} holds no weights (save a trace with `tracer run SPEC --json --with-weights` to include them)", who=who)]
    assert a.weights is not None and b.weights is not None
    rows, notes = [], []
    for name in align(list(a.weights), list(b.weights)):
        wa, wb = a.weights.get(name), b.weights.get(name)
        if wa is None or wb is None:
            rows.append(WeightRow(name, ONLY_B if wa is None else ONLY_A,
                                  None if wa is None else wa.shape, None if wb is None else wb.shape))
        elif wa.shape != wb.shape:
            rows.append(WeightRow(name, SHAPES_DIFFER, wa.shape, wb.shape))
        else:
            read = rows_read(a, b, name)
            if read is not None:
                who = " and ".join(s.label for s in (a, b) if name in s.rows)
                notes.append(nmsg("weights.{name} compared on the {n} row the run reads ({rows}): {who} reads only that row of its file",
                                  "weights.{name} compared on the {n} rows the run reads ({rows}): {who} reads only those rows of its file",
                                  len(read), name=name, rows=_listed(read), who=who))
                index = np.asarray(read, dtype=np.intp)
                c = compare_arrays(wa[index], wb[index], atol, rtol)
                where = None if c.where is None else (int(index[c.where[0]]), *c.where[1:])
            else:
                c = compare_arrays(wa, wb, atol, rtol)
                where = c.where
            va = float(wa[where]) if where is not None else None
            vb = float(wb[where]) if where is not None else None
            rows.append(WeightRow(name, EQUAL if c.equal else DIFFERS, wa.shape, wb.shape, c.max_abs_diff, where, va, vb))
    return rows, notes


def _listed(rows: Sequence[int], most: int = 8) -> str:
    """'0, 1, 2' or '3, 17, 42, ... (12 in all)'."""
    shown = ", ".join(str(r) for r in rows[:most])
    return shown if len(rows) <= most else f"{shown}, ... ({len(rows)} in all)"


def compare_stages(a: dict[str, Stage], b: dict[str, Stage], batch: int, pos: int, atol: float, rtol: float) -> list[StageRow]:
    rows = []
    for name in align(list(a), list(b)):
        sa, sb = a.get(name), b.get(name)
        va, vb = value_at(sa, batch, pos), value_at(sb, batch, pos)
        if sb is None:
            rows.append(StageRow(name, ONLY_A, sa, None, va, None))
        elif sa is None:
            rows.append(StageRow(name, ONLY_B, None, sb, None, vb))
        elif sa.array.shape != sb.array.shape or sa.axes != sb.axes:
            rows.append(StageRow(name, SHAPES_DIFFER, sa, sb, va, vb))
        else:
            c = compare_arrays(sa.array, sb.array, atol, rtol)
            rows.append(StageRow(name, EQUAL if c.equal else DIFFERS, sa, sb, va, vb, c.max_abs_diff, c.where))
    return rows


@dataclass
class DiffResult:
    a: Side
    b: Side
    atol: float
    rtol: float
    batch: int
    pos: int
    show_all: bool
    steps: list[StepRow]
    structure: list[Message]  # what differs between the step lists, one sentence each
    settings: list[SettingRow]
    weights: list[WeightRow] | None  # None when a side holds no weights
    stages: list[StageRow]
    notes: list[Message] = field(default_factory=list)
    arrays: ArraysReport | None = None  # when a side is another program's arrays
    hint: Hint | None = None  # what the first divergence usually means (arrays only)
    by_dtype: str | None = None  # the tolerance was chosen by the arrays' dtype ("float32"), not given
    effect: Any = None  # the chosen token's p and logit, clean against intervened (compare.effect.Effect)

    @property
    def compared(self) -> list[StageRow]:
        return [r for r in self.stages if r.status != NOT_RECORDED]

    @property
    def structure_same(self) -> bool:
        return not self.structure

    @property
    def weights_differ(self) -> list[WeightRow]:
        return [w for w in self.weights or [] if w.status != EQUAL]

    @property
    def settings_same(self) -> bool:
        return not self.settings and not self.weights_differ

    @property
    def steps_same(self) -> bool:
        """The same step list, read as a grade reads it.  Two preset blocks: the same norm order (and model, and the
        encoder's): every other block setting chooses an op or a value, and is a setting.  A block of its own steps:
        each step the same kind of op on the same stages with the same weights, in the same order."""
        orders = [s.settings.get("block.norm_order") for s in (self.a, self.b)]
        if None not in orders and "custom" not in orders:
            return all(self.a.settings.get(k) == self.b.settings.get(k) for k in ("block.norm_order", "encoder.norm_order", "model"))
        rows = self.steps
        if any(r.a is None or r.b is None for r in rows):
            return False
        if not all(same_wiring(r.a, r.b, by_family=True) for r in rows if r.a is not None and r.b is not None):
            return False
        names_b = [s.name for s in self.b.steps]
        return [s.name for s in self.a.steps if s.name in names_b] == [n for n in names_b if n in {s.name for s in self.a.steps}]

    @property
    def setting_fields(self) -> list[str]:
        """Every setting and weight that differs, by field (block.eps, hidden.activation, weights.ffn.w1), the norm
        order aside: it names the step list, which steps_same compares."""
        fields = [s.field for s in self.settings if s.field != "block.norm_order"]
        fields += [f"{r.name}.{k}" for r in self.steps for k in r.changed if f"block.{k}" not in fields]
        structure = not self.steps_same  # a weight only one side holds is the step list's (sandwich norms) when that differs
        return fields + [f"weights.{w.name}" for w in self.weights_differ if not (structure and w.status in (ONLY_A, ONLY_B))]

    @property
    def stages_differ(self) -> list[StageRow]:
        return [r for r in self.stages if r.status not in (EQUAL, NOT_RECORDED)]

    @property
    def first_diverging(self) -> StageRow | None:
        return next(iter(self.stages_differ), None)

    @property
    def same(self) -> bool:
        return self.structure_same and self.settings_same and not self.stages_differ

    @property
    def exit_code(self) -> int:
        return EXIT_SAME if self.same else EXIT_DIFFERENT

    def tolerance(self) -> str:
        return f"atol {self.atol:g}, rtol {self.rtol:g}"

    def summary(self) -> Message:
        if self.arrays is not None:
            return self.arrays_summary()
        n = len(self.stages)
        if self.same:
            settings = msg("same structure and settings (weights not compared)") if self.weights is None else msg("same structure and settings")
            return join([msg("same: all {n} stages agree within {tol}", n=n, tol=self.tolerance()), settings])
        parts: list[Message] = []
        first = self.first_diverging
        if first is not None:
            status = STATUS_MESSAGES[first.status]
            if first.status != DIFFERS:
                parts.append(msg("first diverging stage: {name} ({status})", name=first.name, status=status))
            elif first.value_a is not None and first.value_b is not None and first.value_a.shape == first.value_b.shape \
                    and compare_arrays(first.value_a, first.value_b, self.atol, self.rtol).equal:
                parts.append(msg("first diverging stage: {name} ({status}, largest |A - B| = {d} at {where}; at b={b}, t={t} the two agree)",
                                 name=first.name, status=status, d=f"{first.max_abs_diff:.6g}", where=first.where_label(), b=self.batch, t=self.pos))
            else:
                parts.append(msg("first diverging stage: {name} ({status}, largest |A - B| = {d} at {where})", name=first.name, status=status,
                                 d=f"{first.max_abs_diff:.6g}", where=first.where_label()))
            parts.append(msg("{n} of {m} stages differ", n=len(self.stages_differ), m=n))
        else:
            parts.append(msg("all {n} stages agree within {tol}", n=n, tol=self.tolerance()))
        if not self.structure_same:
            parts.append(msg("structure differs"))
        if not self.settings_same:
            changed: list[object] = [s.field for s in self.settings]
            weights = self.weights_differ
            if len(weights) > 3:
                changed.append(msg("{n} weights", n=len(weights)))
            else:
                changed += [f"weights.{w.name}" for w in weights]
            parts.append(msg("settings differ: {what}", what=join(changed, ", ", keep=True)))
        return join(parts)

    def as_json(self) -> dict[str, Any]:
        first = self.first_diverging
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "diff",
            "same": self.same,
            "first_diverging": first.name if first else None,
            "summary": self.summary(),
            "a": _side_json(self.a),
            "b": _side_json(self.b),
            "tolerance": {"atol": self.atol, "rtol": self.rtol, **({} if self.arrays is None else {"by_dtype": self.by_dtype})},
            "position": {"batch": self.batch, "pos": self.pos},
            "structure": {
                "same": self.structure_same,
                "steps": [{"name": r.name, "status": r.status, "a": _step_json(r.a, r.settings_a), "b": _step_json(r.b, r.settings_b),
                           "settings_differ": r.changed} for r in self.steps],
                "differences": list(self.structure),
            },
            "settings": {
                "same": self.settings_same,
                "differences": [{"field": s.field, "a": s.a, "b": s.b} for s in self.settings],
                "weights": None if self.weights is None else [_weight_json(w) for w in self.weights],
            },
            "stages": [_stage_json(r) for r in self.stages],
            "notes": list(self.notes),
            **({} if self.arrays is None else {"arrays": self.arrays.as_json()}),
            **({} if self.hint is None else {"hint": self.hint.english()}),
            **({} if self.arrays is None else {"diagnosis": None if self.hint is None else self.hint.diagnosis_json()}),
            **({} if self.effect is None else {"effect": self.effect.as_json()}),
        }

    def first_line(self) -> Message:
        """first diverging stage: NAME (status, largest |A - B| = D at b=.., t=.., c=..; ...)"""
        first = self.first_diverging
        assert first is not None
        status = STATUS_MESSAGES[first.status]
        if first.status != DIFFERS:
            return msg("first diverging stage: {name} ({status})", name=first.name, status=status)
        d, where = f"{first.max_abs_diff:.6g}", first.where_label()
        if first.where is not None and first.a is not None and first.b is not None:
            return msg("first diverging stage: {name} ({status}, largest |A - B| = {d} at {where}: A {va}, B {vb})", name=first.name, status=status,
                       d=d, where=where, va=f"{first.a.array[first.where]:.6g}", vb=f"{first.b.array[first.where]:.6g}")
        return msg("first diverging stage: {name} ({status}, largest |A - B| = {d} at {where})", name=first.name, status=status, d=d, where=where)

    def arrays_summary(self) -> Message:
        assert self.arrays is not None
        n = len(self.compared)
        skipped = len(self.stages) - n
        tail = [nmsg("{n} stage not recorded", "{n} stages not recorded", skipped)] if skipped else []
        if self.same:
            agree = (msg("same: all {n} recorded stages agree within {tol}", n=n, tol=self.tolerance()) if n != 1
                     else msg("same: the one recorded stage agrees within {tol}", tol=self.tolerance()))
            return join([agree, *tail])
        return join([self.first_line(), msg("{n} of {m} recorded stages differ", n=len(self.stages_differ), m=n), *tail])


def _number(x: float | None) -> Any:
    return None if x is None else array_json(np.asarray(x, dtype=np.float64))


def _side_json(s: Side) -> dict[str, Any]:
    return {"path": s.path, "source": s.source, "name": s.name, "ok": not s.violations,
            "violations": [{k: v.get(k) for k in ("kind", "stage", "message")} for v in s.violations]}


def _step_json(s: Step | None, settings: dict[str, Any] | None) -> dict[str, Any] | None:
    if s is None:
        return None
    settings = s.params() if settings is None else settings
    return {"op": s.op, "inputs": list(s.inputs), "weights": s.weights, "expr": expr(s, settings), "settings": dict(settings)}


def _weight_json(w: WeightRow) -> dict[str, Any]:
    return {"name": w.name, "status": w.status,
            "shape_a": None if w.shape_a is None else list(w.shape_a),
            "shape_b": None if w.shape_b is None else list(w.shape_b),
            "max_abs_diff": _number(w.max_abs_diff),
            "where": None if w.where is None else list(w.where),
            "a": _number(w.value_a), "b": _number(w.value_b)}


def _stage_json(r: StageRow) -> dict[str, Any]:
    return {"name": r.name, "status": r.status,
            "shape_a": None if r.a is None else list(r.a.array.shape),
            "shape_b": None if r.b is None else list(r.b.array.shape),
            "axes_a": None if r.a is None else list(r.a.axes),
            "axes_b": None if r.b is None else list(r.b.axes),
            "value_a": None if r.value_a is None else array_json(r.value_a),
            "value_b": None if r.value_b is None else array_json(r.value_b),
            "max_abs_diff": _number(r.max_abs_diff),
            "where": None if r.where is None else list(r.where)}


def _check_index(option: str, value: int, letter: str, a: Side, b: Side) -> int:
    """The index counted from the front: -1 is the last of the longer side, as in Python."""
    na, nb = a.dims.get(letter, 1), b.dims.get(letter, 1)
    n = max(na, nb)
    if not -n <= value < n:
        raise UsageError(msg("{option} {value} is out of range: {letter} = {na} in A, {nb} in B (give 0 to {x}, or -1 to -{n} from the end)", option=option,
                             value=value, letter=letter, na=na, nb=nb, x=n - 1, n=n))
    return value % n


def _visible(stages: dict[str, Stage], show_all: bool) -> dict[str, Stage]:
    return {n: s for n, s in stages.items() if show_all or not s.internal}


def check_tolerance(atol: float, rtol: float) -> None:
    for option, value in (("--atol", atol), ("--rtol", rtol)):
        if not math.isfinite(value) or value < 0:
            raise UsageError(msg("{option}: expected a finite number of 0 or more (such as 1e-9), received {value}", option=option, value=f"{value:g}"))


def compare(a: Side, b: Side, *, atol: float | None = None, rtol: float | None = None, batch: int = 0, pos: int = 0,
            show_all: bool = False, keep_going: bool = False, only: Sequence[str] = (), names: Sequence[str] | dict[str, str] = (),
            grad: bool = False) -> DiffResult:
    """Compare two loaded sides (specs, saved traces, or another program's arrays; ``grad``: their gradients).
    ``atol``/``rtol`` None: the default; against a float32 program's arrays, float32's (DTYPE_TOLERANCE), and a note says so."""
    if a.is_arrays or b.is_arrays:
        narrow = next((s.dtype for s in (b, a) if s.is_arrays and s.dtype in DTYPE_TOLERANCE), None)
        by_dtype = narrow if atol is None and rtol is None else None
        if by_dtype is not None:
            atol, rtol = DTYPE_TOLERANCE[by_dtype]
        atol, rtol = DEFAULT_ATOL if atol is None else atol, DEFAULT_RTOL if rtol is None else rtol
        check_tolerance(atol, rtol)
        return compare_arrays_side(a, b, atol=atol, rtol=rtol, batch=batch, pos=pos, show_all=show_all, keep_going=keep_going,
                                   only=only, names=names, by_dtype=by_dtype)
    atol, rtol = DEFAULT_ATOL if atol is None else atol, DEFAULT_RTOL if rtol is None else rtol
    check_tolerance(atol, rtol)
    if names:
        raise UsageError(msg("--map names the arrays of a file another program wrote (.npz or a JSON object of arrays); neither side is one"))
    check_violations((a, b), keep_going)
    batch = _check_index("--batch", batch, "B", a, b)
    pos = _check_index("--pos", pos, "T", a, b)

    notes: list[Message] = [msg("--grad: each stage's and weight's gradient of the side's loss (tracer grad), in backward order")] if grad else []
    stages_a, stages_b = _visible(a.stages, show_all), _visible(b.stages, show_all)
    if only:
        known = list(dict.fromkeys([*a.stages, *b.stages, *(s.name for s in a.steps), *(s.name for s in b.steps)]))
        chosen = catalogue.select(only, known, "A or B") or []
        stages_a = {n: s for n, s in a.stages.items() if n in chosen}
        stages_b = {n: s for n, s in b.stages.items() if n in chosen}
    elif show_all:
        lacking = [s for s in (a, b) if s.source == "trace" and not s.has_internals]
        if lacking and (a.has_internals or b.has_internals):
            who = " and ".join(f"{s.label} ({s.path})" for s in lacking)
            notes.append(msg("{who} was saved without --all: attention internals are not compared", who=who))
            stages_a, stages_b = _visible(a.stages, False), _visible(b.stages, False)
    for s in (a, b):
        for letter, value, option in (("B", batch, "--batch"), ("T", pos, "--pos")):
            if value >= s.dims.get(letter, 1):
                notes.append(msg("{label} has {letter} = {n}: no value to show at {opt} {v}", label=s.label, letter=letter, n=s.dims.get(letter), opt=option,
                                 v=value))
    if keep_going:
        notes += violation_lines((a, b))
    weights, weights_notes = compare_weights(a, b, atol, rtol)
    notes += weights_notes
    older = incomplete_note(a, b)
    if isinstance(older, Message):
        notes.append(older)
    return DiffResult(
        a=a, b=b, atol=atol, rtol=rtol, batch=batch, pos=pos, show_all=show_all,
        steps=step_rows(a.steps, b.steps, *step_settings_compared(a, b)),
        structure=with_design(structure_lines(a.steps, b.steps, *step_settings_compared(a, b)), a, b),
        settings=compare_settings(a, b, grad),
        weights=weights,
        stages=compare_stages(stages_a, stages_b, batch, pos, atol, rtol),
        notes=notes,
    )


def compare_arrays_side(a: Side, b: Side, *, atol: float, rtol: float, batch: int, pos: int, show_all: bool, keep_going: bool,
                        only: Sequence[str], names: Sequence[str] | dict[str, str], by_dtype: str | None = None) -> DiffResult:
    """One side (or both) holds another program's arrays: match them to the other side's stages and compare those."""
    from tracer.compare.arrays import is_npz, match, parse_map
    from tracer.compare.hints import hint_for

    mine, ref = (b, a) if b.is_arrays else (a, b)  # both arrays: B's are matched to A's names
    check_violations((a, b), keep_going)
    mapping = names if isinstance(names, dict) else parse_map(names)
    arrays = {n: st.array for n, st in mine.stages.items()}
    m = match(arrays, mapping, ref.stages, mine.path, f"{ref.label} ({ref.path})")
    if not m.stages:
        listed = ", ".join(m.unmatched[:12]) + (", ..." if len(m.unmatched) > 12 else "")
        stats = msg("; kept as statistics only (--record stats): {names}", names=', '.join(m.stats_only)) if m.stats_only else ""
        raise DiffTrouble(msg("{path}: no array matches a stage of {label} ({path2}); its arrays: {x}{stats}. Name them as tracer's stages (`tracer run SPEC "
                              "--steps` lists them) or map them: --map THEIRS=STAGE", path=mine.path, label=ref.label, path2=ref.path, x=listed or 'none',
                              stats=stats))
    stages_in, masked = masked_scores(m.stages, ref)
    mine = Side(mine.label, mine.path, ARRAYS, mine.name, {}, {}, mine.dtype, (), stages_in, None, [])
    a, b = (ref, mine) if mine.label == "B" else (mine, ref)
    for option, value, letter in (("--batch", batch, "B"), ("--pos", pos, "T")):
        n = ref.dims.get(letter, 1) if not ref.is_arrays else 1 << 62
        if not 0 <= value < n:
            raise UsageError(msg("{option} {value} is out of range: {letter} = {n} in {label} (give 0 to {x})", option=option, value=value, letter=letter, n=n,
                                 label=ref.label, x=n - 1))
    visible = {n: s for n, s in ref.stages.items() if show_all or not s.internal or n in m.stages}
    if only:
        chosen = catalogue.select(only, list(ref.stages), f"{ref.label}") or []
        visible = {n: s for n, s in ref.stages.items() if n in chosen}
    mine_stages = {n: s for n, s in mine.stages.items() if n in visible}
    stages_a, stages_b = (visible, mine_stages) if mine.label == "B" else (mine_stages, visible)
    rows = compare_stages(stages_a, stages_b, batch, pos, atol, rtol)
    for r in rows:
        if (r.status == ONLY_A and mine.label == "B") or (r.status == ONLY_B and mine.label == "A"):
            r.status = NOT_RECORDED
    notes: list[Message] = []
    if by_dtype is not None and not is_npz(mine.path):
        notes.append(msg("{label}'s numbers look like float32 rounding (every value is a float32 number, as a float32 program writes "
                         "them out): compared at atol {atol}, rtol {rtol}, float32's tolerance (give --atol and --rtol to choose)",
                         label=mine.label, atol=f"{atol:g}", rtol=f"{rtol:g}"))
    elif by_dtype is not None:
        notes.append(msg("{label} holds {dtype} arrays: compared at atol {atol}, rtol {rtol}, {dtype2}'s tolerance (give --atol and --rtol to choose)",
                         label=mine.label, dtype=by_dtype, atol=f"{atol:g}", rtol=f"{rtol:g}", dtype2=by_dtype))
    for name in masked:
        notes.append(msg("{label}'s {name} holds masked scores (-inf or a large negative where the mask hides a key): compared where the "
                         "mask lets a key through",
                         label=mine.label, name=name))
    if ref.spec is not None:
        from tracer.compare.hints import spec_blind_spots

        notes += spec_blind_spots(ref.spec, ref.weights or {}, ref.stages)
    if m.unbatched:
        notes.append(msg("{label} gives {names} without the batch axis: read with B = 1", label=mine.label, names=", ".join(m.unbatched)))
    notes += m.reshaped
    if m.unmatched:
        notes.append(msg("{label} holds arrays that match no stage of {ref}: {names} (name them with --map THEIRS=STAGE)", label=mine.label,
                         ref=ref.label, names=", ".join(m.unmatched)))
    if m.stats_only:
        notes.append(msg("{label} kept {names} as statistics only (--record stats): not compared", label=mine.label, names=", ".join(m.stats_only)))
    report = ArraysReport(mine.label, mine.path, ref.label, list(m.stages), m.renamed, m.unmatched, m.unbatched,
                          [r.name for r in rows if r.status == NOT_RECORDED])
    result = DiffResult(a=a, b=b, atol=atol, rtol=rtol, batch=batch, pos=pos, show_all=show_all, steps=[], structure=[],
                        settings=[], weights=None, stages=rows, notes=notes, arrays=report, by_dtype=by_dtype)
    result.hint = hint_for(result, ref, mine)
    return result
