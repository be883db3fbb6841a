"""Attribution patching: every cell of a patch grid estimated to first order from one backward pass.

``tracer patch CLEAN CORRUPT`` runs the corrupt model once per stage and position, that stage's value at that position
taken from the clean run, and reads how the token's logit moves.  To first order that move is
(clean - corrupt) . d logit / d stage, the gradient taken in the corrupt run at that position (summed over the samples
and the stage's other axes, since every sample is patched): one forward pass of each run and one backward pass of the
corrupt one (tracer grad's own, tracer/engine/backward.py) give every cell at once.  Where the logit is linear in the
stage (a stage the head reads through adds only, without a final norm) the estimate is the patch exactly; elsewhere
it is off by second-order terms, which ``real=True`` measures by running the real patch beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tracer.attribute.core import token_of
from tracer.engine import executor
from tracer.engine.interventions import KERNEL_KEY, position_axis
from tracer.errors import EXIT_OK, EXIT_VIOLATION, SweepStopped, UsageError
from tracer.messages import Message, at, msg
from tracer.model.shapes import shape_label
from tracer.spec import memory

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tracer.patching.run import PatchTarget
    from tracer.spec import Spec

DEFAULT_STAGES = ("blocks.*.output",)


class EstimateGrid:
    """``estimate[i, t]``: the first-order change of the metric (the token's logit, minus --against's) with stage i
    patched at position t; ``real`` the patch's own change (None when not run) and ``error`` their difference."""

    def __init__(self, clean: Spec, corrupt: Spec, stages: list[str], words: list[str], token: int, against: int | None, b: int, t: int,
                 metric: tuple[float, float], estimate: np.ndarray, real: np.ndarray | None, violations: list[Message]) -> None:
        self.clean, self.corrupt, self.stages, self.words = clean, corrupt, stages, words
        self.token, self.against, self.b, self.t = token, against, b, t
        self.metric_clean, self.metric_corrupt = metric
        self.estimate, self.real, self.violations = estimate, real, violations

    @property
    def error(self) -> np.ndarray | None:
        return None if self.real is None else self.estimate - self.real

    @property
    def exit_code(self) -> int:
        return EXIT_VIOLATION if self.violations else EXIT_OK

    def what(self) -> str:
        from tracer.compare.effect import token_text

        spec = self.corrupt if self.corrupt.vocab else self.clean
        one = token_text(spec, self.token)
        return one if self.against is None else f"{one} - {token_text(spec, self.against)}"

    def as_json(self) -> dict[str, Any]:
        from tracer.views.text import token_word
        from tracer.views.trace_json import SCHEMA_VERSION

        def tok(i: int | None) -> dict[str, Any] | None:
            return None if i is None else {"id": i, "text": token_word(self.corrupt, i) or None}

        def cell(i: int, t: int) -> dict[str, Any]:
            out: dict[str, Any] = {"stage": self.stages[i], "t": t, "estimate": _json_number(self.estimate[i, t])}
            if self.real is not None:
                out.update(real=_json_number(self.real[i, t]), error=_json_number(self.estimate[i, t] - self.real[i, t]))
            return out

        return {"schema_version": SCHEMA_VERSION, "kind": "attribution-patching", "clean": {"path": self.clean.path, "name": self.clean.name},
                "corrupt": {"path": self.corrupt.path, "name": self.corrupt.name}, "ok": not self.violations, "token": tok(self.token),
                "against": tok(self.against), "b": self.b, "t": self.t, "metric": {"clean": self.metric_clean, "corrupt": self.metric_corrupt},
                "stages": self.stages, "positions": list(range(len(self.words))),
                "cells": [cell(i, t) for i in range(len(self.stages)) for t in range(len(self.words))], "violations": self.violations}

    def __rich__(self) -> RenderableType:
        from tracer.attribute.view import estimate_view

        return estimate_view(self)

    def _repr_html_(self) -> str:
        from tracer.views.display import View

        return View(self.__rich__())._repr_html_()

    def __repr__(self) -> str:
        return f"<tracer attribution patching {len(self.stages)} stages x {len(self.words)} positions, {self.what()}>"


def _json_number(x: float) -> Any:
    """A float as every tracer JSON writes it: NaN (a cell a violation left empty) as the string "NaN"."""
    from tracer.views.trace_json import array_json

    return array_json(np.asarray(float(x)))


def _same_stages(clean: Spec, corrupt: Spec, names: Sequence[str]) -> None:
    for name in names:
        mine, want = clean.stage_shapes.get(name), corrupt.stage_shapes.get(name)
        if mine is None or want is None or tuple(mine[1]) != tuple(want[1]):
            raise UsageError(msg("{name}: clean and corrupt must trace the same stages with the same shapes (two inputs to one model): expected {expected} as "
                                 "in {ref}, received {got} in {other}",
                                 name=name, expected=shape_label(*want) if want else "-", ref=corrupt.path,
                                 got=shape_label(*mine) if mine else msg("no such stage"), other=clean.path))


def _full(spec: Spec) -> tuple[executor.Recording, dict[str, np.ndarray], dict[str, np.ndarray]]:
    ex = executor.Executor(spec, policy=memory.RecordPolicy("all"))
    run = ex.run()
    if not run.ok:
        v = run.violations[0]
        raise SweepStopped(at(spec.path, msg("the run flagged a {kind} violation at {stage}: attribution patching needs both runs free of violations "
                                             "(`tracer run SPEC` shows it)", kind=v.kind, stage=v.stage)))
    return run, ex.params, ex.inputs


def by_position(a: np.ndarray, axis: int) -> np.ndarray:
    """[T]: a stage-shaped array summed over every axis but its position axis."""
    return np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1).sum(axis=1)


def estimate(clean: Spec, corrupt: Spec, stages: Sequence[str] = DEFAULT_STAGES, token: str | int | None = None, against: str | int | None = None,
             batch: int = 0, position: int = -1, real: bool = False, max_memory: str = memory.DEFAULT_MAX_MEMORY) -> EstimateGrid:
    """The estimate of every cell (see the module's docstring); with ``real``, tracer patch's own sweep beside it."""
    from tracer.engine.backward import gradients
    from tracer.grad.run import check_memory
    from tracer.patching.run import pick_targets
    from tracer.spec import choices

    if "logits" not in corrupt.stage_shapes or "logits" not in clean.stage_shapes:
        raise UsageError(at(corrupt.path if "logits" not in corrupt.stage_shapes else clean.path,
                            msg("attribution patching follows a token's logit: the spec needs an output head (block.head: tied or separate)")))
    targets = pick_targets(corrupt, stages)
    picked = [tg.name for tg in targets]
    _same_stages(clean, corrupt, [*sorted({_recorded_stage(corrupt, tg) for tg in targets}), "logits"])
    b, t = choices.position(corrupt, batch, position, ("--batch", "--position"))
    T = corrupt.stage_shapes["logits"][1][1]
    if real and t != T - 1:
        raise UsageError(msg("--real runs tracer patch, which follows the logit at the last position (t={last}); --position {t} is another",
                             last=T - 1, t=t))
    for tg in targets:
        axes, sizes = tg.shape(corrupt)
        if sizes[position_axis(axes) or 0] != T:
            raise UsageError(msg("--stage {name}: its {n} positions are not the logits' T = {T}, so its cells are not a position each",
                                 name=tg.name, n=sizes[position_axis(axes) or 0], T=T))
    spec_words = corrupt if corrupt.vocab else clean
    tok = token_of(spec_words, token, "--token") if token is not None else None
    other = token_of(spec_words, against, "--against") if against is not None else None
    memory.check_run(clean, memory.RecordPolicy("all"), max_memory)
    check_memory(corrupt, max_memory, False)
    with np.errstate(all="ignore"):
        clean_run, _, _ = _full(clean)
        base, params, inputs = _full(corrupt)
        la, lc = (np.asarray(r.stages["logits"].array[b, t], dtype=np.float64) for r in (clean_run, base))
        if tok is None:
            tok = int(np.argmax(la))
        seed = np.zeros(base.stages["logits"].shape, dtype=base.stages["logits"].array.dtype)
        seed[b, t, tok] += 1.0
        if other is not None:
            seed[b, t, other] -= 1.0
        grads, _, _ = gradients(base, params, inputs, {"logits": seed})
        grid = np.full((len(targets), T), np.nan)
        for i, tg in enumerate(targets):
            axis = position_axis(tg.shape(corrupt)[0])
            assert axis is not None  # pick_targets refuses a row without one
            mine, theirs = (np.asarray(tg.recorded(r.stages, corrupt), dtype=np.float64) for r in (base, clean_run))
            grid[i] = by_position((theirs - mine) * np.asarray(tg.recorded(grads, corrupt), dtype=np.float64), axis)
    metric = (float(la[tok] - (la[other] if other is not None else 0.0)), float(lc[tok] - (lc[other] if other is not None else 0.0)))
    measured, violations = _real(clean, corrupt, picked, tok, other, b, max_memory) if real else (None, [])
    from tracer.views.text import token_label

    words = [f"t={i}{token_label(corrupt, b, i)}" for i in range(grid.shape[1])]
    return EstimateGrid(clean, corrupt, picked, words, tok, other, b, t, metric, grid, measured, violations)


def _recorded_stage(spec: Spec, target: PatchTarget) -> str:
    """The stage a row's value is read from: the row's own, or for a head's part its attention internal (the heads, q, k, v, weights)."""
    if target.head is None:
        return target.name
    return f"{target.name.rpartition('.head.')[0]}.{KERNEL_KEY.get(target.part, target.part)}"


def _real(clean: Spec, corrupt: Spec, stages: list[str], token: int, against: int | None, b: int, max_memory: str) -> tuple[np.ndarray, list[Message]]:
    """tracer patch's own sweep of the same cells, read in sample b: the change of the token's logit, or with --against
    of the logit difference (--metric logit-diff), exactly the grid `tracer patch --batch B` prints."""
    from tracer.patching.run import Ask, patch

    ask = Ask("logit", token, batch=b) if against is None else Ask("logit-diff", token, against, batch=b)
    grid = patch(clean, corrupt, stages, max_memory=max_memory, ask=ask)
    return grid.delta, list(grid.violations)
