"""`tracer run`: trace one spec or many in one process, and write the result in the chosen format.

One spec: its table (or JSON, CSV, Markdown) exactly as before.  Many specs: each
is loaded and run in turn inside this process (no start-up per spec), each gets
a one-line status (ok, violation kind and stage, or the error message), and a
summary line closes the run; the exit code is the worst of them (3 > 2 > 1 > 0).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer import i18n
from tracer.cli.shared import FORMATS
from tracer.errors import EXIT_INTERNAL, EXIT_OK, EXIT_VIOLATION, TracerError, UsageError
from tracer.front.prepare import prepare
from tracer.messages import msg, nmsg, render
from tracer.spec import Spec, choices, memory
from tracer.views.text import STEP_HEADER, csv_text, md_text, run_markdown, step_rows, steps_markdown, trace_csv_chunks, visible_stages

if TYPE_CHECKING:
    import numpy as np
    from rich.console import RenderableType

    from tracer.engine.executor import Recording, Stage
    from tracer.model.blocks import Step
    from tracer.process import FaultingIn
    from tracer.views.reference_check import ReferenceCheck

# catalogue, jsonout (and json), verify are imported where they are used: a plain `tracer run SPEC`
# needs none of them, and every import is start-up time (benchmarks/startup.py).



def output_format(fmt: str | None, as_json: bool) -> str:
    """--format, with --json as its alias; an unknown or contradictory choice is a UsageError."""
    if fmt is not None and fmt not in FORMATS:
        from tracer.model.catalogue import suggest

        raise UsageError(msg("--format {fmt}: expected one of {names}{fmt2}", fmt=fmt, names=' | '.join(FORMATS), fmt2=suggest(fmt, FORMATS)))
    if as_json and fmt not in (None, "json"):
        raise UsageError(msg("--json is short for --format json; it cannot be combined with --format {fmt}", fmt=fmt))
    return "json" if as_json else (fmt or "table")


class RunOptions(NamedTuple):
    batch: int = 0
    pos: int = 0
    precision: int = 6
    show_all: bool = False
    verify: bool = False
    keep_going: bool = False
    exit_zero: bool = False
    with_weights: bool = False
    stages: tuple[str, ...] = ()  # --stage names, as given
    verify_budget: int = 60_000_000  # scalar operations the reference may take (--verify-budget)
    record: str = "all"  # --record auto | all | main | stats (the command line's default is auto)
    keep: tuple[str, ...] = ()  # --keep: stages kept in full whatever --record says
    max_memory: str = memory.DEFAULT_MAX_MEMORY  # --max-memory
    save: str | None = None  # --save FILE.npz
    form: str = "table"  # the output format (the memory estimate counts what --format json writes)
    force: bool = False  # --force: --save may replace a file tracer cannot prove it wrote
    # --ablate, --set, --from as given (tracer.engine.interventions.Requests)
    intervene: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = ((), (), ())
    top: int = 5  # --top: the next tokens the probs line shows (0: the first values)


def options(specs: Sequence[str], *, fmt: str | None = None, as_json: bool = False, steps: bool = False, draw: bool = False,
            exports: bool = False, **fields: Any) -> RunOptions:
    """``tracer run SPECS``'s options as RunOptions, each checked against the others: a contradiction (--with-weights
    with nothing to write them to, --save or --svg with many specs, --attention with --format json, ...) is a
    UsageError (exit 2) before any spec is read.  ``fields`` are RunOptions' own; ``draw``: --attention or
    --attention-stage; ``exports``: --svg or --html."""
    form = output_format(fmt, as_json)
    opts = RunOptions(form=form, **fields)
    choices.precision(opts.precision)
    if opts.with_weights and form != "json" and opts.save is None:
        raise UsageError(msg("--with-weights adds the weights to the JSON output or the --save archive: give --json or --save too"))
    if opts.top < 0:
        raise UsageError(msg("--top {top}: expected 0 or more next tokens (0 shows the first values)", top=opts.top))
    if opts.verify and opts.verify_budget < 1:
        raise UsageError(msg("--verify-budget {verify_budget} must be at least 1", verify_budget=opts.verify_budget))
    check_many(specs, steps)
    memory.parse_size(opts.max_memory)
    if opts.save is not None and len(specs) > 1:
        raise UsageError(msg("--save writes one spec's arrays: give one spec"))
    if form == "csv" and opts.record == "stats":
        raise UsageError(msg("--format csv writes every value of every stage, and --record stats keeps only statistics of the big ones: use --record all or "
                             "main (or --keep the stages you want)"))
    if draw and (form != "table" or steps):
        raise UsageError(msg("--attention draws a picture; it does not combine with {x}", x='--steps' if steps else '--format ' + form))
    if exports and len(specs) > 1:
        raise UsageError(msg("--svg and --html export one spec's view: give one spec"))
    if any(opts.intervene) and opts.verify:
        raise UsageError(msg("--verify checks the kernels against the scalar reference, which knows no --ablate, --set or --from: give one or the other"))
    return opts


class Outcome(NamedTuple):
    """One spec's run: its trace, or the error that stopped it."""

    path: str
    code: int
    trace: Recording | None = None
    check: ReferenceCheck | None = None
    weights: dict[str, np.ndarray] | None = None
    only: list[str] | None = None  # --stage selection, checked against this spec's stages
    error: str = ""
    show_all: bool = False
    batch: int = 0  # --batch and --pos, counted from the front (-1 given: the last)
    pos: int = 0
    top: int = 5  # --top

    @property
    def stages(self) -> list[Stage]:
        assert self.trace is not None
        return visible_stages(self.trace, self.show_all, self.only)

    def status(self) -> tuple[str, str]:
        """('ok' | 'violation' | 'error', the rest of the line in the current language)."""
        if self.trace is None:
            message = " ".join(render(self.error).split())  # one line
            return "error", message if message.startswith(self.path) else f"{self.path}: {message}"
        detail = self.path
        if not self.trace.ok:
            detail += ": " + "; ".join(i18n.tr("{kind} at {stage}", kind=i18n.tr(v.kind), stage=v.stage)
                                       for v in self.trace.violations)
        if self.check is not None:
            detail += i18n.tr(" ({note})", note=self.check.note().splitlines()[0])
        return ("ok" if self.trace.ok else "violation"), detail

    def json(self, streamed: bool = False) -> dict[str, Any]:
        from tracer.views.trace_json import SCHEMA_VERSION, trace_json

        if self.trace is None:
            return {"schema_version": SCHEMA_VERSION, "spec": {"path": self.path, "name": None}, "ok": False,
                    "error": {"exit_code": self.code, "message": self.error}}
        return trace_json(self.trace, self.stages, self.check.as_json() if self.check else None, self.weights, streamed)


def trace_one(path: str, opts: RunOptions, meanwhile: Callable[[], object] | None = None,
              ahead: Callable[[int], FaultingIn | None] | None = None) -> Outcome:
    """Load, check and run one spec; a TracerError propagates (the caller decides what it costs).

    ``meanwhile``: called while a big spec's weights are drawn on a helper thread (params.draw_params), for work
    the caller would do after the run anyway (the command line imports its renderer); the executor and its kernels
    are imported then too.  ``ahead``: called with the bytes of the stages the run will keep, once the memory guard has
    passed the run, to have that memory faulted in meanwhile
    (process.fault_in_ahead, for the command line); what it starts is stopped when the run is over.
    """
    # What is kept of each stage (--record, --keep; a --stage asked for is kept in full), then the
    # memory that takes: a run over --max-memory is refused here, before anything is allocated.
    table = opts.form == "table" and not (opts.show_all or opts.verify or opts.with_weights) and opts.save is None
    ready = prepare(path, record=opts.record, table=table, keep=opts.keep, stages=opts.stages, batch=opts.batch, pos=opts.pos,
                    show_all=opts.show_all, max_memory=opts.max_memory)
    s, policy, only = ready.spec, ready.policy, ready.stages
    opts = opts._replace(batch=ready.batch, pos=ready.pos)
    if any(opts.intervene):  # every name, file and shape checked before anything runs
        from tracer.engine.interventions import Requests, attach

        s = attach(s, Requests(*opts.intervene))
    if opts.save is not None:
        from tracer.files import check_output

        check_output(opts.save, "--save", [path], "npz", opts.force)
    estimate = ready.check_memory(show_all=opts.show_all, verify=opts.verify, form=opts.form, with_weights=opts.with_weights,
                                  by_layer=True)
    faulting = ahead(estimate.recorded) if ahead is not None else None
    try:
        return _traced(path, s, opts, policy, only, meanwhile)
    finally:
        if faulting is not None:
            faulting.stop()


def _traced(path: str, s: Spec, opts: RunOptions, policy: memory.RecordPolicy, only: list[str] | None,
            meanwhile: Callable[[], object] | None) -> Outcome:
    from tracer.engine.params import draw_inputs, draw_params

    # a big spec's seeded draws start on a helper thread; a layer's weights from files are read when it starts, and
    # every layer's weights go after its last step (nothing here reads them after the run)
    to_params, to_inputs = draw_params(s, by_layer=True), None
    try:
        to_inputs = draw_inputs(s)
        if meanwhile is not None and (to_params.helped or to_inputs.helped):
            meanwhile()
        from tracer.engine import executor

        drawn = to_params.result(), to_inputs.result()
    finally:  # on an error before the run, the helpers start nothing more
        for drawing in (to_params, to_inputs):
            if drawing is not None:
                drawing.stop()
    trace = executor.run(s, keep_going=opts.keep_going, policy=policy, params=drawn[0], inputs=drawn[1], by_layer=True)
    del drawn
    check = None
    if opts.verify:
        from tracer.views.reference_check import verify

        check = verify(trace, opts.verify_budget)
        failed = check.violation()
        if failed is not None:  # the numbers disagree with the reference beyond the tolerance: exit 1, like a violation
            trace.violations.append(failed)
    weights = None
    if opts.with_weights:
        from tracer.engine.params import load_params

        weights = load_params(s)
    if opts.save is not None:
        from tracer.views.npz import save

        save(trace, opts.save, weights, opts.force)
    code = EXIT_OK if trace.ok or opts.exit_zero else EXIT_VIOLATION
    return Outcome(path, code, trace, check, weights, only, show_all=opts.show_all, batch=opts.batch, pos=opts.pos, top=opts.top)


def table_view(outcome: Outcome, precision: int, drawn: list[Step] | None = None) -> RenderableType:
    """What the terminal shows for one spec's run: the stage table (Table 17.1) with --verify's column and note,
    or, with --attention, the heatmaps of the ``drawn`` attention stages."""
    check, trace = outcome.check, outcome.trace
    assert trace is not None
    if drawn is not None:
        from rich.console import Group
        from rich.text import Text

        from tracer.views.attention import attention_view

        picture = attention_view(trace, drawn, outcome.batch)
        return Group(picture, Text(check.note())) if check is not None else picture
    from tracer.views.tables import run_view

    return run_view(trace, outcome.batch, outcome.pos, precision, outcome.show_all, check.stages if check else None,
                           check.note() if check else "", outcome.only, outcome.top)


def attempt(path: str, opts: RunOptions) -> Outcome:
    """trace_one for one of many specs: an error becomes this spec's outcome, and the run goes on."""
    try:
        return trace_one(path, opts)
    except TracerError as e:
        return Outcome(path, e.exit_code, error=e.message)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # a bug in tracer: reported as this spec's outcome, exit 3 at the end
        if os.environ.get("TRACER_DEBUG"):
            raise
        return Outcome(path, EXIT_INTERNAL, error=msg("internal error: {what} (a bug in tracer; please report it)", what=f"{type(e).__name__}: {e}"))


class RunSummary:
    def __init__(self, outcomes: list[Outcome] | None = None) -> None:
        self.outcomes: list[Outcome] = list(outcomes or [])

    @property
    def exit_code(self) -> int:
        return max((o.code for o in self.outcomes), default=EXIT_OK)

    def line(self) -> str:
        counts = {"ok": 0, "violation": 0, "error": 0}
        for o in self.outcomes:
            counts[o.status()[0]] += 1
        parts = msg("{ok} ok, {v}, {e}", ok=counts["ok"], v=nmsg("{n} with a violation", "{n} with violations", counts["violation"]),
                    e=nmsg("{n} error", "{n} errors", counts["error"]))
        n = len(self.outcomes)
        return render(nmsg("{n} spec: {parts}; exit code {code}", "{n} specs: {parts}; exit code {code}", n, parts=parts, code=self.exit_code))


STATUS_WIDTH = 10


def status_text(o: Outcome) -> str:
    word, detail = o.status()
    return f"{i18n.ljust(i18n.tr(word), STATUS_WIDTH)} {detail}"  # padded by terminal cells: 通过 takes four


# -- the formats other than the rich table -------------------------------------------

def render_text(o: Outcome, fmt: str, opts: RunOptions) -> str:
    """One spec's result as JSON (one line), CSV or Markdown."""
    return "".join(render_chunks(o, fmt, opts))


def render_chunks(o: Outcome, fmt: str, opts: RunOptions) -> Iterator[str]:
    """render_text's text in pieces, for writing as it is made: JSON and CSV a stage at a time, so their text
    is never held whole (memory.estimate counts the largest piece)."""
    from tracer.views.trace_json import chunks

    if fmt == "json":
        yield from chunks(o.json(streamed=True))
        yield "\n"
        return
    if fmt == "csv":
        yield from trace_csv_chunks([(o.path, o.stages)])
        return
    yield markdown_text(o, opts)


def markdown_text(o: Outcome, opts: RunOptions) -> str:
    if o.trace is None:
        return f"### {md_text(o.path)}\n\n> **{i18n.tr('error')}**: {md_text(render(o.error))}\n"
    return run_markdown(o.trace, o.stages, o.batch, o.pos, opts.precision,
                                o.check.stages if o.check else None, o.check.note() if o.check else "", o.only, o.top)


def steps_text(s: Spec, fmt: str, only: list[str] | None) -> str:
    """``--steps`` as JSON, CSV or Markdown."""
    from tracer.views.trace_json import SCHEMA_VERSION, dumps, steps_json

    if fmt == "json":
        steps = [step for step in steps_json(s) if only is None or step["name"] in only]
        return dumps({"schema_version": SCHEMA_VERSION, "spec": {"path": s.path, "name": s.name}, "steps": steps})
    if fmt == "csv":
        return csv_text(STEP_HEADER, step_rows(s, only))
    return steps_markdown(s, only)


def check_many(specs: Sequence[str], steps: bool) -> None:
    if steps and len(specs) > 1:
        raise UsageError(msg("--steps shows one spec's step list; give one spec (received {n})", n=len(specs)))
    if not specs:
        raise UsageError(msg("give at least one spec"))

