"""tracer.diff, the one diff of the library and of ``tracer diff A B``: two sides compared stage by stage.

A side is anything the command line takes (a spec, a saved JSON trace, an .npz of arrays or a
JSON object of arrays, by path), or an object: a loaded Spec, a dict of spec fields (it has
``dims``), a Trace from ``tracer.trace``, or a mapping of stage name -> array (your own
activations; ``names={"ln1": "norm1"}`` is --map).  A side given by path is read before either runs
and both are counted against --max-memory together.  The result, a Diff, holds the comparison
(compare.judge's DiffResult): the first diverging stage, where and by how much, the per-stage table, the
exit code diff(1) would give, and, against your own arrays, what the divergence usually means.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Union

import numpy as np

from tracer import reading
from tracer.compare import saved
from tracer.compare.align import Side, arrays_side, spec_side
from tracer.compare.judge import DiffResult, check_tolerance, compare
from tracer.compare.settings import complete, of_trace
from tracer.errors import UsageError
from tracer.front.run_trace import Trace
from tracer.messages import at, msg
from tracer.spec import Spec, load_spec_text, memory, yamlio
from tracer.spec.loading import load
from tracer.views.display import View

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tracer.compare.align import StageRow
    from tracer.front.held import Held

SideLike = Union[str, "os.PathLike[str]", Spec, Trace, "Held", Mapping[str, Any]]


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

    def page(self, path: str | None = None, *, lang: str = "en", budget_mb: float = 20.0, force: bool = False) -> str:  # 20: page.writer.DEFAULT_BUDGET_MB
        """The diff as a page (as ``tracer diff A B --page``): both sides side by side, the first divergence marked."""
        from tracer.page.writer import diff_page, page_written
        from tracer.spec import choices

        r = self.result
        page = diff_page(r, precision=self.precision, lang=choices.text(lang, "lang"), budget_mb=budget_mb)
        return page_written(page, path, [p for p in (r.a.path, r.b.path) if p], force)

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


def side(value: object, label: str, keep_going: bool = False, lean: bool = False) -> Side:
    """One side of a diff, from an object the API takes (a path is read by read_side first)."""
    from tracer.compare.arrays import numeric, with_dtype
    from tracer.front.held import Held

    if isinstance(value, Held):  # its trace, on the weights it holds
        from tracer.front.run_trace import trace

        value = trace(value, keep_going=keep_going)
    if isinstance(value, Trace):
        return spec_side(value.spec, value.spec.path, label, keep_going, value.run, value.params)
    if isinstance(value, Spec) or (isinstance(value, Mapping) and "dims" in value):
        s = load(value)
        return spec_side(s, s.path, label, keep_going, lean=lean)
    if isinstance(value, Mapping):
        arrays = with_dtype({str(k): numeric(v, f"{label}: array {k!r}") for k, v in value.items()},
                            [getattr(v, "dtype", np.float64) for v in value.values()])
        return arrays_side(arrays, "<arrays>", label)
    raise UsageError(msg("side {label}: expected a path, a Spec, a spec dict, a Trace or a mapping of stage name -> array, received {name__}",
                         label=label, name__=type(value).__name__))


Read = tuple[Any, "Spec | None", "dict[str, np.ndarray] | None", int]  # a saved trace's JSON, a spec, arrays; bytes it will hold


def read_side(path: str, grad: bool = False, limit: int | None = None, limit_text: str = "none") -> Read:
    """A side read but not run: a saved trace's parsed JSON, or a spec, or another program's arrays (one of
    the three), and the bytes the side will hold; with ``grad`` only a spec will do (its gradients double it).
    An archive of arrays is refused before any is decompressed if its headers declare more than ``limit``."""
    from tracer.compare.arrays import is_npz, npz_bytes, open_npz, read_json, read_npz, sniff_json

    needs_spec = at(path, msg("--grad runs the backward pass, which needs the spec: give a YAML spec, not saved arrays or a saved trace"))
    if is_npz(path):
        if grad:
            raise UsageError(needs_spec)
        archive = open_npz(path)
        memory.refuse_over(at(path, msg("reading its arrays")), {msg("the arrays, as stored and as float64"): npz_bytes(archive)},
                           limit, limit_text, msg("compare fewer or smaller arrays"))
        arrays = read_npz(path, archive)
        return None, None, arrays, sum(a.nbytes for a in arrays.values())
    text = yamlio.read_text(path)
    arrays_doc = sniff_json(path, text)
    doc = saved.sniff(path, text) if arrays_doc is None else None
    if grad and (arrays_doc is not None or doc is not None):
        raise UsageError(needs_spec)
    if arrays_doc is not None:
        listed = read_json(arrays_doc, path)
        return None, None, listed, sum(a.nbytes for a in listed.values())
    if doc is not None:
        return doc, None, None, memory.saved_trace_bytes(len(text.encode()))
    spec = load_spec_text(text, path)  # counted with the other side's bytes below, not on its own
    return None, spec, None, memory.run_bytes(spec) * (2 if grad else 1)  # a gradient the size of every stage and weight


def load_side(path: str, label: str, keep_going: bool, read: Read | None = None, grad: bool = False, lean: bool = False) -> Side:
    """One side, run from its spec, read from a saved trace, or another program's arrays; with ``grad`` its
    stages and weights are the gradients of its loss (tracer grad), in backward order; ``lean``: a spec's run
    keeps no attention internals but the cross-attention weights (the stages a diff without --all compares)."""
    doc, spec, arrays, _ = read_side(path, grad) if read is None else read
    if arrays is not None:
        return arrays_side(arrays, path, label)
    if spec is None:
        t = saved.load_trace(doc, path)
        flat, steps = of_trace(t.dims, t.block, t.top, t.dtype, t.steps)
        return Side(label, path, "trace", t.name, t.dims, t.block, t.dtype, t.steps, t.stages, t.weights, t.violations,
                    settings=flat, step_settings=steps, complete=complete(t.block, t.top))
    return spec_side(spec, path, label, keep_going, grad=grad, lean=lean)



def diff(a: SideLike, b: SideLike, *, names: Mapping[str, str] | Sequence[str] = (), atol: float | None = None, rtol: float | None = None,
         batch: int = 0, pos: int = 0, show_all: bool = False, keep_going: bool = False, stages: Sequence[str] = (),
         precision: int = 6, grad: bool = False, max_memory: str = memory.DEFAULT_MAX_MEMORY,
         intervene: tuple[Any, Any] | None = None, token: str | int | None = None) -> Diff:
    """Compare ``a`` and ``b`` stage by stage (``tracer diff A B``).

    ``names`` says which of your arrays is which stage: ``{"ln1": "norm1"}``, or --map's strings
    (``["ln1=norm1"]`` or a YAML file). ``atol``/``rtol``: equal when |A - B| <= atol + rtol * max(|A|, |B|) (None: 1e-9,
    or float32's 1e-5 against float32 arrays).  ``batch``/``pos``: where the table shows values; ``show_all``: the
    attention internals too; ``stages``: only these rows (--stage); ``grad`` (--grad): the gradients of each side's
    loss instead of the values (docs/gradients.md); ``max_memory`` (--max-memory): both sides given by path are read,
    then their memory counted together (each spec side is a full run, a saved trace its parsed values), and a diff
    over it is refused before either side runs; ``intervene``: each side's --ablate/--set/--from
    (interventions.Requests, or None); ``token``: --token, the token whose probability the effect sentence follows.
    """
    from tracer.spec import choices

    atol = None if atol is None else choices.real(atol, "atol")
    rtol = None if rtol is None else choices.real(rtol, "rtol")
    batch, pos, precision = choices.whole(batch, "batch"), choices.whole(pos, "pos"), choices.whole(precision, "precision")
    choices.precision(precision, "precision")
    show_all, keep_going, grad = choices.flag(show_all, "show_all"), choices.flag(keep_going, "keep_going"), choices.flag(grad, "grad")
    stages, max_memory = choices.texts(stages, "stages"), choices.text(max_memory, "max_memory")
    if isinstance(names, Mapping):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
            raise UsageError(msg("names: expected a mapping of your array names to tracer's stage names (text), received {got}",
                                 got=choices._received(names)))
    elif isinstance(names, str):
        names = [names]
    else:
        names = choices.texts(names, "names")
    check_tolerance(1e-9 if atol is None else atol, 1e-9 if rtol is None else rtol)
    limit = memory.parse_size(max_memory)
    paths = [os.fspath(v) if isinstance(v, (str, os.PathLike)) else None for v in (a, b)]
    with reading.within(limit):
        reads = [None if p is None else read_side(p, grad, limit, max_memory) for p in paths]
    if intervene is not None:  # each spec side computes with its own interventions
        reads = [None if r is None else _intervened(r, requests, p or "", label)
                 for r, requests, p, label in zip(reads, intervene, paths, ("A", "B"))]
    held = [r for r in reads if r is not None]
    if held:
        memory.refuse_over(msg("{a} and {b}: this diff", a=paths[0] or "A", b=paths[1] or "B"),
                           {**{word: r[3] for r, word in zip(reads, (msg("side A"), msg("side B"))) if r is not None},
                            msg("comparing"): memory.compare_bytes([r[1] for r in held], show_all)}, limit, max_memory)
    # Without --all or --stage, attention internals are not compared: a spec side need not keep them (the cross-attention
    # weights excepted, which the table shows), unless the other side holds a program's own arrays, which may be them.
    arrays = any(r is not None and r[2] is not None for r in reads) or any(isinstance(v, Mapping) and "dims" not in v for v in (a, b))
    lean = not (show_all or stages or grad or arrays)
    left, right = (load_side(p, label, keep_going, r, grad, lean) if p is not None and r is not None else side(v, label, keep_going, lean)
                   for v, p, r, label in zip((a, b), paths, reads, ("A", "B")))
    mapping: dict[str, str] | Sequence[str] = dict(names) if isinstance(names, Mapping) else list(names)
    with np.errstate(all="ignore"):
        result = compare(left, right, atol=atol, rtol=rtol, batch=batch, pos=pos, show_all=show_all, keep_going=keep_going,
                         only=stages, names=mapping, grad=grad)
    if (intervene is not None or token is not None) and not grad:
        _add_effect(result, token)
    return Diff(result, precision)


def _intervened(read: Read, requests: Any, path: str, label: str) -> Read:
    if not requests:
        return read
    doc, spec, arrays, nbytes = read
    if spec is None:
        raise UsageError(at(path, msg("--ablate, --set and --from change a run: side {label} must be a spec, not saved arrays or a saved trace", label=label)))
    from tracer.engine.interventions import attach

    return doc, attach(spec, requests), arrays, nbytes


def _add_effect(result: DiffResult, token: str | int | None) -> None:
    """The sentence on what the intervened side does to the chosen token's probability, as a note (and JSON's effect)."""
    from tracer.compare.effect import effect, subject

    a, b = result.a, result.b
    ia = a.spec.interventions if a.spec is not None else ()
    ib = b.spec.interventions if b.spec is not None else ()
    clean, changed = (b, a) if ia and not ib else (a, b)
    what = subject(changed.spec.interventions if changed.spec is not None else (), clean.spec.interventions if clean.spec is not None else ())
    found = effect(clean.stages, changed.stages, clean.spec or changed.spec, what, token, result.batch)
    if found is None:
        if token is not None:
            raise UsageError(msg("--token: a side has no logits (a spec with head: tied or separate has them)"))
        return
    result.effect = found  # the views end with its sentence; JSON has it as effect


