"""`tracer patch CLEAN CORRUPT`: activation patching, a sweep over stages (or heads) x positions.

Both specs are run once, every stage kept.  Then for each row the --stage patterns pick (``blocks.*.output``; a head's
output ``blocks.*.attn.head.*``, its q, k, v or pattern ``blocks.*.attn.head.*.q``) and each position t (or all of
them at once, --positions all), the corrupt run is run again from that stage's step on with the row's value at t
taken from the clean run (every sample, the other positions as the corrupt run computed them: an Intervention of kind
``set``, or ``head`` for a head's part), and the metric (tracer.patching.metric) is read at the last position of each
sample read (--batch B: that one; else every sample, their mean shown with its spread).  A cell holds the metric
minus the corrupt run's (--normalise: as a share of clean minus corrupt): how much of the clean prediction the row
carries at that position.  The two specs must trace the same stages with the same shapes (two inputs to one model).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tracer.compare import effect
from tracer.engine import executor
from tracer.engine.interventions import HEAD_PARTS, HeadEdit, Intervention, head_shape, head_targets, head_value, position_axis
from tracer.errors import EXIT_OK, EXIT_VIOLATION, SweepStopped, UsageError
from tracer.messages import Message, at, join, msg
from tracer.model.shapes import shape_label
from tracer.patching.metric import Metric, make, no_effect
from tracer.spec import memory
from tracer.views.display import View

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tracer.spec import Spec
    from tracer.spec.loading import SpecLike

DEFAULT_STAGE = "blocks.*.output"


class PatchGrid:
    """The sweep's result: ``values[i, j, n]`` is the metric with row i patched at column j (a position, or all of them),
    read in the n-th sample read; ``delta[i, j]`` its change from the corrupt run (--normalise: as a share of clean
    minus corrupt), the mean over the samples read.  Shows as the table and heatmap ``tracer patch`` prints."""

    def __init__(self, clean: Spec, corrupt: Spec, stages: list[str], words: list[str], metric: Metric, samples: tuple[int, ...],
                 t_last: int, clean_values: np.ndarray, corrupt_values: np.ndarray, values: np.ndarray, violations: list[Message],
                 title: str = "activation") -> None:
        self.clean, self.corrupt = clean, corrupt
        self.stages = stages  # the rows: stage or head names (path patching: the senders)
        self.words = words  # the columns: 't=0 (the)', or 'all', or the receivers
        self.metric = metric
        self.samples = samples
        self.t_last = t_last
        self.clean_values, self.corrupt_values = clean_values, corrupt_values  # [n] each
        self.values = values  # [rows, columns, n]: the patched runs' metric
        self.violations = violations  # a patched run's violations (its cell is NaN)
        self.title = title  # activation | path

    @property
    def token(self) -> int:
        return self.metric.tokens[0]

    @property
    def token_text(self) -> str:
        return effect.token_text(self._speaker(), self.token)

    @property
    def b(self) -> int:
        return self.samples[0]

    @property
    def logit_clean(self) -> float:
        return float(self.clean_values.mean())

    @property
    def logit_corrupt(self) -> float:
        return float(self.corrupt_values.mean())

    @property
    def logits(self) -> np.ndarray:
        """[rows, columns]: the patched runs' metric (the logit by default), the mean over the samples read."""
        return self.values.mean(axis=-1)

    @property
    def per_sample(self) -> np.ndarray:
        """[rows, columns, n]: each sample's change from the corrupt run (--normalise: its share of clean minus corrupt)."""
        change = self.values - self.corrupt_values
        return change / (self.clean_values - self.corrupt_values) if self.metric.normalise else change

    @property
    def delta(self) -> np.ndarray:
        return self.per_sample.mean(axis=-1)

    @property
    def spread(self) -> dict[str, np.ndarray]:
        """The per-sample changes' std (population), min and max, [rows, columns] each."""
        p = self.per_sample
        return {"std": p.std(axis=-1), "min": p.min(axis=-1), "max": p.max(axis=-1)}

    @property
    def exit_code(self) -> int:
        return EXIT_VIOLATION if self.violations else EXIT_OK

    def _speaker(self) -> Spec:
        return self.corrupt if self.corrupt.vocab else self.clean

    def what(self) -> Message | str:
        """'logit of 'cat'' (the default metric) or the metric's label: 'logit('cat') - logit('mat')', 'p('cat')'."""
        if self.metric.kind == "logit":
            return msg("logit of {token}", token=Metric.words(self._speaker(), self.metric.tokens))
        return self.metric.label(self._speaker())

    def where(self) -> Message | str:
        if len(self.samples) == 1:
            return f"b={self.b}"
        return msg("the mean over b={first}..{last}", first=self.samples[0], last=self.samples[-1])

    def best(self) -> tuple[str, int, float]:
        size = np.where(np.isnan(self.delta), -1.0, np.abs(self.delta))
        i, t = np.unravel_index(int(np.argmax(size)), self.delta.shape)
        return self.stages[int(i)], int(t), float(self.delta[i, t])

    def column(self, j: int) -> str:
        """A column as the summary names it: 't=4', 'all positions', a receiver 'q'."""
        w = self.words[j]
        return w.split(" ")[0]

    def summary(self) -> Message:
        stage, t, d = self.best()
        if self.title == "path":
            return msg("{what} at {where}, t={t}: clean {clean}, corrupt {corrupt}; the path from {stage} to the later heads' {part} moves it most, by {d}",
                       what=self.what(), where=self.where(), t=self.t_last, clean=f"{self.logit_clean:.6g}", corrupt=f"{self.logit_corrupt:.6g}",
                       stage=stage, part=self.words[t], d=f"{d:+.6g}")
        return msg("{what} at {where}, t={t}: clean {clean}, corrupt {corrupt}; patching {stage} at {pos} moves it most, by {d}",
                   what=self.what(), where=self.where(), t=self.t_last, clean=f"{self.logit_clean:.6g}", corrupt=f"{self.logit_corrupt:.6g}",
                   stage=stage, pos=self.column(t), d=f"{d:+.6g}")

    def as_json(self) -> dict[str, Any]:
        from tracer.views.trace_json import SCHEMA_VERSION

        many = len(self.samples) > 1
        sp = self.spread
        column = "receiver" if self.title == "path" else "t"

        def cell(i: int, j: int) -> dict[str, Any]:
            out: dict[str, Any] = {"stage": self.stages[i], column: self._t(j), "value": _number(self.logits[i, j]), "delta": _number(self.delta[i, j])}
            if self.metric.kind == "logit":
                out["logit"] = out["value"]
            if many:
                out |= {k: _number(sp[k][i, j]) for k in ("std", "min", "max")}
                out["samples"] = [_number(x) for x in self.per_sample[i, j]]
            return out

        return {"schema_version": SCHEMA_VERSION, "kind": "patch", "patching": self.title, "clean": {"path": self.clean.path, "name": self.clean.name},
                "corrupt": {"path": self.corrupt.path, "name": self.corrupt.name}, "ok": not self.violations,
                "token": {"id": self.token, "text": self._word()}, "metric": self.metric.as_json(self._speaker()),
                "b": self.b if not many else None, "samples": list(self.samples), "t": self.t_last,
                "logit" if self.metric.kind == "logit" else "value": {"clean": _number(self.logit_clean), "corrupt": _number(self.logit_corrupt)},
                "by_sample": {"clean": [_number(x) for x in self.clean_values], "corrupt": [_number(x) for x in self.corrupt_values]},
                "stages": self.stages, "receivers" if self.title == "path" else "positions": [self._t(j) for j in range(len(self.words))],
                "cells": [cell(i, j) for i in range(len(self.stages)) for j in range(len(self.words))],
                "summary": self.summary(), "violations": self.violations}

    def _t(self, j: int) -> int | str:
        """A column in JSON and CSV: its position, or 'all', or the receiver."""
        w = self.words[j]
        return j if w.startswith("t=") else w

    def _word(self) -> str | None:
        """The token's text: its vocab word or its tokenizer's piece (None when the spec names no tokens)."""
        import ast

        shown = self.token_text  # repr() of the text, or '#3'
        return str(ast.literal_eval(shown)) if shown.startswith(("'", '"')) else None

    def view(self, precision: int = 4) -> View:
        from tracer.patching.view import patch_view

        return View(patch_view(self, precision))

    def __rich__(self) -> RenderableType:
        return self.view().renderable

    def _repr_html_(self) -> str:
        return self.view()._repr_html_()

    def __repr__(self) -> str:
        cols = "positions" if self.words and self.words[0].startswith("t=") else "columns"
        return f"<tracer.PatchGrid {len(self.stages)} stages x {len(self.words)} {cols}, token {self.token_text}>"


def _number(x: float) -> float | str:
    """A float as JSON writes it: NaN (a cell a violation left empty) as the string "NaN", as every tracer JSON does."""
    from tracer.views.trace_json import array_json

    out = array_json(np.asarray(float(x)))
    return out if isinstance(out, (float, str)) else float(x)


class PatchTarget(NamedTuple):
    """A row of the sweep: a step's stage (``head`` None), or one head's part inside an attention step."""

    name: str
    step: str  # the step whose stage is replaced (a head's: its attention step)
    head: int | None = None
    part: str = ""

    def shape(self, spec: Spec) -> tuple[tuple[str, ...], tuple[int, ...]]:
        return spec.stage_shapes[self.name] if self.head is None else head_shape(spec, self.step, self.part)

    def recorded(self, stages: dict[str, executor.Stage], spec: Spec) -> np.ndarray:
        """The row's value in a run that recorded every stage."""
        if self.head is None:
            return stages[self.name].array
        prefix = self.name.rpartition(".head.")[0]
        key = {"output": "heads", "pattern": "weights"}.get(self.part, self.part)
        return head_value(stages[f"{prefix}.{key}"].array, self.part, self.head, spec.dims.H)

    def intervention(self, value: np.ndarray, where: str) -> Intervention:
        if self.head is None:
            return Intervention(self.name, "set", f"patch {self.name} at {where}", value, f"clean {where}")
        return Intervention(self.step, "head", f"patch {self.name} at {where}", edits=(HeadEdit(self.part, self.head, value, f"clean {where}"),))


def segments_match(name: str, pattern: str) -> bool:
    """A head's name against a pattern segment by segment: 'blocks.*.attn.head.*' names each head's output, not its q."""
    a, b = name.split("."), pattern.split(".")
    return len(a) == len(b) and all(fnmatch.fnmatchcase(x, y) for x, y in zip(a, b))


def pick_targets(spec: Spec, patterns: Sequence[str]) -> list[PatchTarget]:
    """The rows the patterns match, in step order (a layer's heads in order, their output before q, k, v, pattern):
    step stages by fnmatch (``blocks.*.output``), heads segment by segment; a pattern matching nothing: UsageError."""
    names = [s.name for s in spec.steps]
    heads = head_targets(spec)
    order = {n: i for i, n in enumerate(names)}
    rows = [PatchTarget(n, n) for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    rows += [PatchTarget(n, st, h, part) for n, (st, h, part) in heads.items() if any(segments_match(n, p) for p in patterns)]
    for p in patterns:
        if not any(fnmatch.fnmatchcase(n, p) for n in names) and not any(segments_match(n, p) for n in heads):
            from tracer.model.catalogue import suggest

            raise UsageError(msg("--stage {pattern}: no stage of {where} matches it{hint} (a pattern such as 'blocks.*.output'; `tracer run SPEC "
                                 "--steps` lists the stages)",
                                 pattern=p, where=spec.path, hint=suggest(p, [*names, *heads])))
    for r in rows:
        axes, sizes = r.shape(spec)
        if position_axis(axes) is None:
            raise UsageError(msg("--stage {name}: {shape} has no position axis to patch along", name=r.name, shape=shape_label(axes, sizes)))
    return sorted(rows, key=lambda r: (order[r.step], r.head is None, HEAD_PARTS.index(r.part) if r.part else 0, r.head or 0))


def pick_stages(spec: Spec, patterns: Sequence[str]) -> list[str]:
    """The rows' names (see pick_targets)."""
    return [r.name for r in pick_targets(spec, patterns)]


def _violations(label: str, trace: executor.Recording) -> list[Message]:
    """Each violation as diff names a side's: 'CLEAN (clean.yaml): position violation: ...'."""
    from tracer.model.contracts import kind_word

    return [msg("{label} ({path}): {kind} violation: {message}", label=label, path=trace.spec.path, kind=kind_word(v.kind), message=v.message)
            for v in trace.violations]


Held = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]  # the clean and corrupt runs' weights, already read (a Model's)


def _full_run(spec: Spec, policy: memory.RecordPolicy,
              params: dict[str, np.ndarray] | None = None) -> tuple[executor.Recording, dict[str, np.ndarray], dict[str, np.ndarray]]:
    ex = executor.Executor(spec, policy=policy, params=None if params is None else dict(params))
    return ex.run(), ex.params, ex.inputs


class Runs(NamedTuple):
    """The clean and corrupt runs a sweep starts from, everything recorded, and what it reads of them."""

    clean: executor.Recording
    base: executor.Recording
    params: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]
    samples: tuple[int, ...]
    metric: Metric
    clean_values: np.ndarray
    corrupt_values: np.ndarray

    def measure(self, run: executor.Recording) -> np.ndarray | None:
        last = last_rows(run.stages, self.samples)
        return None if last is None or not run.ok else self.metric.of(last)


def last_rows(stages: dict[str, executor.Stage], samples: tuple[int, ...]) -> np.ndarray | None:
    """The logits at the last position of the samples read, [n, V] (None without them)."""
    st = stages.get("logits")
    if st is None or st.data is None or st.data.ndim != 3:
        return None
    return np.asarray(st.data[list(samples), -1], dtype=np.float64)


class Ask(NamedTuple):
    """What the sweep is asked to read: --metric, --token, --against, --normalise, --batch (None: every sample)."""

    metric: str = "logit"
    token: Sequence[str | int] | str | int | None = None
    against: Sequence[str | int] | str | int | None = None
    normalise: bool = False
    batch: int | None = None


def need_logits(clean: Spec, corrupt: Spec) -> None:
    if "logits" not in corrupt.stage_shapes or "logits" not in clean.stage_shapes:
        raise UsageError(at(corrupt.path if "logits" not in corrupt.stage_shapes else clean.path,
                            msg("tracer patch follows a token's logit: the spec needs an output head (block.head: tied or separate)")))


def start(clean: Spec, corrupt: Spec, rows: Sequence[str], ask: Ask, max_memory: str, held: Held | None = None) -> Runs:
    """Both specs checked against each other (the stages ``rows`` names and the logits), run, and the metric chosen."""
    from tracer.spec import choices

    need_logits(clean, corrupt)
    for name in [*rows, "logits"]:
        mine, want = clean.stage_shapes.get(name), corrupt.stage_shapes.get(name)
        if mine is None or tuple(mine[1]) != tuple(want[1] if want else ()):
            raise UsageError(msg("{name}: clean and corrupt must trace the same stages with the same shapes (two inputs to one model): expected {expected} as "
                                 "in {ref}, received {got} in {other}",
                                 name=name, expected=shape_label(*want) if want else "-", ref=corrupt.path,
                                 got=shape_label(*mine) if mine else msg("no such stage"), other=clean.path))
    if ask.batch is None:
        samples = tuple(range(corrupt.dims.B))
    else:
        b, _ = choices.position(corrupt, ask.batch, 0, ("--batch", "--pos"))
        samples = (b,)
    policy = memory.RecordPolicy("all")
    for s in (clean, corrupt):
        memory.check_run(s, policy, max_memory)
    with np.errstate(all="ignore"):
        clean_run, _, _ = _full_run(clean, policy, held[0] if held else None)
        base, params, inputs = _full_run(corrupt, policy, held[1] if held else None)
    violations = _violations("CLEAN", clean_run) + _violations("CORRUPT", base)
    if violations:  # nothing to patch from or into: exit 1, as tracer run's exit for a violation
        raise SweepStopped(join([*violations, msg("tracer patch needs both runs free of violations (`tracer run SPEC` shows them)")]))
    top, low = last_rows(clean_run.stages, samples), last_rows(base.stages, samples)
    assert top is not None and low is not None, "both specs have logits, checked above"
    metric = make(ask.metric, corrupt if corrupt.vocab else clean, ask.token, ask.against, ask.normalise, top, top.shape[-1], len(samples))
    cv, xv = metric.of(top), metric.of(low)
    same = no_effect(metric, corrupt if corrupt.vocab else clean, cv, xv, samples)
    if same is not None:
        raise UsageError(same)
    return Runs(clean_run, base, params, inputs, samples, metric, cv, xv)


def patch(clean: Spec, corrupt: Spec, stages: Sequence[str] = (DEFAULT_STAGE,), token: Sequence[str | int] | str | int | None = None,
          batch: int | None = 0, max_memory: str = memory.DEFAULT_MAX_MEMORY, ask: Ask | None = None, positions: str = "each",
          params: Held | None = None) -> PatchGrid:
    """The sweep (see the module's docstring); the specs loaded, their stages and shapes checked against each other.
    ``ask`` (the metric and the samples read) replaces ``token`` and ``batch`` when given; ``params``: the clean and
    corrupt runs' weights, already held (a Model's); None: each spec's read."""
    ask = ask or Ask(token=token, batch=batch)
    if positions not in ("each", "all"):
        raise UsageError(msg("--positions {got}: expected each (a column a position) or all (every position at once)", got=positions))
    need_logits(clean, corrupt)
    targets = pick_targets(corrupt, stages)
    r = start(clean, corrupt, [t.name for t in targets if t.head is None], ask, max_memory, params)
    T = corrupt.stage_shapes["logits"][1][1]
    for tg in targets:
        axes, sizes = tg.shape(corrupt)
        n = sizes[position_axis(axes) or 0]
        if n != T and positions == "each":
            raise UsageError(msg("--stage {name}: its {n} positions are not the logits' T = {T}; patch it with --positions all",
                                 name=tg.name, n=n, T=T))
    columns: list[int | None] = list(range(T)) if positions == "each" else [None]
    values = np.full((len(targets), len(columns), len(r.samples)), np.nan)
    violations: list[Message] = []
    live = {n: st.array for n, st in r.base.stages.items() if st.data is not None}
    index = {s.name: i for i, s in enumerate(corrupt.steps)}
    policy = memory.RecordPolicy("table", frozenset({"logits"}))
    with np.errstate(all="ignore"):
        for i, tg in enumerate(targets):
            axis = position_axis(tg.shape(corrupt)[0])
            assert axis is not None
            mine, theirs = tg.recorded(r.base.stages, corrupt), tg.recorded(r.clean.stages, clean)
            for j, t in enumerate(columns):
                if t is None:
                    value, where = np.array(theirs), "every t"
                else:
                    value, where = np.array(mine), f"t={t}"
                    at_t = tuple(t if k == axis else slice(None) for k in range(value.ndim))
                    value[at_t] = theirs[at_t]
                patched = corrupt._replace(interventions=(tg.intervention(value, where),))
                run = executor.Executor(patched, policy=policy, params=r.params, inputs=r.inputs).run(index[tg.step], live)
                got = r.measure(run)
                if got is None:
                    violations += _violations(f"{tg.name} {where}", run)
                    continue
                values[i, j] = got
    one = len(r.samples) == 1  # a column is named by its token in the one sample read
    words = [f"t={t}{_word(corrupt, r.samples[0], t) if one else ''}" for t in range(T)] if positions == "each" else ["all"]
    return PatchGrid(clean, corrupt, [t.name for t in targets], words, r.metric, r.samples, T - 1, r.clean_values, r.corrupt_values, values,
                     violations)


def _word(spec: Spec, b: int, t: int) -> str:
    from tracer.views.text import token_label

    return token_label(spec, b, t)


def patch_api(clean: SpecLike, corrupt: SpecLike, *, stage: Sequence[str] | str = DEFAULT_STAGE, token: Sequence[str | int] | str | int | None = None,
              batch: int | None = None, max_memory: str = "4GB", metric: str = "logit", against: Sequence[str | int] | str | int | None = None,
              normalise: bool = False, positions: str = "each") -> PatchGrid:
    """``tracer.patch``: the sweep of ``tracer patch CLEAN CORRUPT`` (a path, a dict of spec fields, or a loaded Spec
    each); ``stage`` is --stage (a pattern or a list), ``token`` --token (an id, a vocab word or text; a list: one a
    sample), ``batch`` --batch (None: every sample, the mean), ``metric``, ``against``, ``normalise``, ``positions`` as
    the options of those names."""
    from tracer.spec import choices
    from tracer.spec.loading import load

    stages = [choices.text(stage, "stage")] if isinstance(stage, str) else choices.texts(stage, "stage")
    ask = Ask(choices.text(metric, "metric"), token, against, choices.flag(normalise, "normalise"),
              None if batch is None else choices.whole(batch, "batch"))
    return patch(load(clean), load(corrupt), tuple(stages), max_memory=choices.text(max_memory, "max_memory"), ask=ask,
                 positions=choices.text(positions, "positions"))
