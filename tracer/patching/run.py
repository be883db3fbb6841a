"""`tracer patch CLEAN CORRUPT`: activation patching, a sweep over stages x positions.

Both specs are run once, every stage kept.  Then for each stage the --stage patterns pick (``blocks.*.output``) and
each position t, the corrupt run is run again from that stage on with the stage's value at t taken from the clean run
(every sample, the other positions as the corrupt run computed them: an Intervention of kind ``set``), and the chosen
token's logit at the last position of sample --batch is read.  A cell holds that logit minus the corrupt run's: how
much of the clean prediction the stage carries at that position.  The token is --token (an id or a vocab word), else
the clean run's top next token (tracer.compare.effect).  The two specs must trace the same stages with the same
shapes (two inputs to one model).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tracer.compare import effect
from tracer.engine import executor
from tracer.engine.interventions import Intervention, position_axis
from tracer.errors import EXIT_OK, EXIT_VIOLATION, SweepStopped, UsageError
from tracer.messages import Message, at, join, msg
from tracer.model.shapes import shape_label
from tracer.spec import memory
from tracer.views.display import View

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tracer.spec import Spec
    from tracer.spec.loading import SpecLike

DEFAULT_STAGE = "blocks.*.output"


class PatchGrid:
    """The sweep's result: ``delta[i, t]`` is the chosen token's logit with stage i patched at position t, minus the
    corrupt run's.  Shows as the table and heatmap ``tracer patch`` prints (``_repr_html_``, ``__rich__``)."""

    def __init__(self, clean: Spec, corrupt: Spec, stages: list[str], words: list[str], token: int, token_text: str,
                 b: int, t_last: int, logit_clean: float, logit_corrupt: float, logits: np.ndarray,
                 violations: list[Message]) -> None:
        self.clean, self.corrupt = clean, corrupt
        self.stages = stages
        self.words = words  # the positions' labels: 't=0 (the)'
        self.token, self.token_text = token, token_text
        self.b, self.t_last = b, t_last
        self.logit_clean, self.logit_corrupt = logit_clean, logit_corrupt
        self.logits = logits  # [stages, T]: the patched runs' logits of the token
        self.violations = violations  # a patched run's violations (its cell is NaN)

    @property
    def delta(self) -> np.ndarray:
        return self.logits - self.logit_corrupt

    @property
    def exit_code(self) -> int:
        return EXIT_VIOLATION if self.violations else EXIT_OK

    def best(self) -> tuple[str, int, float]:
        size = np.where(np.isnan(self.delta), -1.0, np.abs(self.delta))
        i, t = np.unravel_index(int(np.argmax(size)), self.delta.shape)
        return self.stages[int(i)], int(t), float(self.delta[i, t])

    def summary(self) -> Message:
        stage, t, d = self.best()
        return msg("logit of {token} at b={b}, t={t}: clean {clean}, corrupt {corrupt}; patching {stage} at t={pos} moves it most, by {d}",
                   token=self.token_text, b=self.b, t=self.t_last, clean=f"{self.logit_clean:.6g}", corrupt=f"{self.logit_corrupt:.6g}",
                   stage=stage, pos=t, d=f"{d:+.6g}")

    def as_json(self) -> dict[str, Any]:
        from tracer.views.trace_json import SCHEMA_VERSION

        return {"schema_version": SCHEMA_VERSION, "kind": "patch", "clean": {"path": self.clean.path, "name": self.clean.name},
                "corrupt": {"path": self.corrupt.path, "name": self.corrupt.name}, "ok": not self.violations,
                "token": {"id": self.token, "text": self._word()}, "b": self.b, "t": self.t_last,
                "logit": {"clean": _number(self.logit_clean), "corrupt": _number(self.logit_corrupt)},
                "stages": self.stages, "positions": list(range(len(self.words))),
                "cells": [{"stage": s, "t": t, "logit": _number(self.logits[i, t]), "delta": _number(self.delta[i, t])}
                          for i, s in enumerate(self.stages) for t in range(len(self.words))],
                "summary": self.summary(), "violations": self.violations}

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
        return f"<tracer.PatchGrid {len(self.stages)} stages x {len(self.words)} positions, token {self.token_text}>"


def _number(x: float) -> float | str:
    """A float as JSON writes it: NaN (a cell a violation left empty) as the string "NaN", as every tracer JSON does."""
    from tracer.views.trace_json import array_json

    out = array_json(np.asarray(float(x)))
    return out if isinstance(out, (float, str)) else float(x)


def pick_stages(spec: Spec, patterns: Sequence[str]) -> list[str]:
    """The step stages the patterns match (fnmatch: ``blocks.*.output``), in step order; none matched: UsageError."""
    names = [s.name for s in spec.steps]
    picked = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    for p in patterns:
        if not any(fnmatch.fnmatchcase(n, p) for n in names):
            from tracer.model.catalogue import suggest

            raise UsageError(msg("--stage {pattern}: no stage of {where} matches it{hint} (a pattern such as 'blocks.*.output'; `tracer run SPEC "
                                 "--steps` lists the stages)",
                                 pattern=p, where=spec.path, hint=suggest(p, names)))
    for n in picked:
        if position_axis(spec.stage_shapes[n][0]) is None:
            raise UsageError(msg("--stage {name}: {shape} has no position axis to patch along", name=n, shape=shape_label(*spec.stage_shapes[n])))
    return picked


def _violations(label: str, trace: executor.Recording) -> list[Message]:
    """Each violation as diff names a side's: 'CLEAN (clean.yaml): position violation: ...'."""
    from tracer.model.contracts import kind_word

    return [msg("{label} ({path}): {kind} violation: {message}", label=label, path=trace.spec.path, kind=kind_word(v.kind), message=v.message)
            for v in trace.violations]


def _full_run(spec: Spec, policy: memory.RecordPolicy,
              params: dict[str, np.ndarray] | None = None) -> tuple[executor.Recording, dict[str, np.ndarray], dict[str, np.ndarray]]:
    ex = executor.Executor(spec, policy=policy, params=None if params is None else dict(params))
    return ex.run(), ex.params, ex.inputs


def patch(clean: Spec, corrupt: Spec, stages: Sequence[str] = (DEFAULT_STAGE,), token: str | int | None = None, batch: int = 0,
          max_memory: str = memory.DEFAULT_MAX_MEMORY,
          params: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None) -> PatchGrid:
    """The sweep (see the module's docstring); the specs loaded, their stages and shapes checked against each other.
    ``params``: the clean and corrupt runs' weights, already held (a Model's); None: each spec's read."""
    from tracer.spec import choices

    if "logits" not in corrupt.stage_shapes or "logits" not in clean.stage_shapes:
        raise UsageError(at(corrupt.path if "logits" not in corrupt.stage_shapes else clean.path,
                            msg("tracer patch follows a token's logit: the spec needs an output head (block.head: tied or separate)")))
    picked = pick_stages(corrupt, stages)
    for name in [*picked, "logits"]:
        mine, want = clean.stage_shapes.get(name), corrupt.stage_shapes.get(name)
        if mine is None or tuple(mine[1]) != tuple(want[1] if want else ()):
            raise UsageError(msg("{name}: clean and corrupt must trace the same stages with the same shapes (two inputs to one model): expected {expected} as "
                                 "in {ref}, received {got} in {other}",
                                 name=name, expected=shape_label(*want) if want else "-", ref=corrupt.path,
                                 got=shape_label(*mine) if mine else msg("no such stage"), other=clean.path))
    b, _ = choices.position(corrupt, batch, 0, ("--batch", "--pos"))
    policy = memory.RecordPolicy("all")
    for s in (clean, corrupt):
        memory.check_run(s, policy, max_memory)
    with np.errstate(all="ignore"):
        clean_run, _, _ = _full_run(clean, policy, params[0] if params else None)
        base, weights, inputs = _full_run(corrupt, policy, params[1] if params else None)
        violations = _violations("CLEAN", clean_run) + _violations("CORRUPT", base)
        if violations:  # nothing to patch from or into: exit 1, as tracer run's exit for a violation
            raise SweepStopped(join([*violations, msg("tracer patch needs both runs free of violations (`tracer run SPEC` shows them)")]))
        la, lc = effect.last_logits(clean_run.stages, b), effect.last_logits(base.stages, b)
        V = corrupt.stage_shapes["logits"][1][-1]
        tok = effect.choose_token(corrupt if corrupt.vocab else clean, token, la, V)
        T = corrupt.stage_shapes[picked[0]][1][position_axis(corrupt.stage_shapes[picked[0]][0]) or 0] if picked else 0
        logits = np.full((len(picked), T), np.nan)
        live = {n: st.array for n, st in base.stages.items() if st.data is not None}
        index = {s.name: i for i, s in enumerate(corrupt.steps)}
        for i, name in enumerate(picked):
            axes = corrupt.stage_shapes[name][0]
            axis = position_axis(axes)
            assert axis is not None
            for t in range(clean_run.stages[name].shape[axis]):
                value = live[name].copy()
                where = tuple(t if j == axis else slice(None) for j in range(value.ndim))
                value[where] = clean_run.stages[name].array[where]
                iv = Intervention(name, "set", f"patch {name} at t={t}", value, f"clean t={t}")
                patched = corrupt._replace(interventions=(iv,))
                ex = executor.Executor(patched, policy=memory.RecordPolicy("table", frozenset({"logits"})), params=weights, inputs=inputs)
                run = ex.run(index[name], live)
                got = effect.last_logits(run.stages, b)
                if got is None or not run.ok:
                    violations += _violations(f"{name} t={t}", run)
                    continue
                logits[i, t] = got[tok]
    words = [f"t={t}{_word(corrupt, b, t)}" for t in range(T)]
    t_last = corrupt.stage_shapes["logits"][1][1] - 1
    return PatchGrid(clean, corrupt, picked, words, tok, effect.token_text(corrupt if corrupt.vocab else clean, tok), b, t_last,
                     float(la[tok]) if la is not None else float("nan"), float(lc[tok]) if lc is not None else float("nan"), logits, violations)


def _word(spec: Spec, b: int, t: int) -> str:
    from tracer.views.text import token_label

    return token_label(spec, b, t)


def patch_api(clean: SpecLike, corrupt: SpecLike, *, stage: Sequence[str] | str = DEFAULT_STAGE, token: str | int | None = None,
              batch: int = 0, max_memory: str = "4GB") -> PatchGrid:
    """``tracer.patch``: the sweep of ``tracer patch CLEAN CORRUPT`` (a path, a dict of spec fields, or a loaded Spec
    each); ``stage`` is --stage (a pattern or a list), ``token`` --token (an id or a vocab word), ``batch`` --batch."""
    from tracer.spec import choices
    from tracer.spec.loading import load

    stages = [choices.text(stage, "stage")] if isinstance(stage, str) else choices.texts(stage, "stage")
    return patch(load(clean), load(corrupt), tuple(stages), token, choices.whole(batch, "batch"), choices.text(max_memory, "max_memory"))
