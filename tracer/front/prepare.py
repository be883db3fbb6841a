"""How a spec is loaded and a run prepared, for the command line and the library alike (one front door).

``load_checked`` is the one way a spec is loaded: a path whose text alone would take more than --max-memory is
refused before it is parsed, ``text`` replaces its input (tokenized by its own tokenizer), ``intervene`` puts
--ablate/--set/--from on it.  ``prepare`` loads it so, checks --batch/--pos against its B and T (spec.choices,
the one range check), picks the stages asked for (--stage), and turns --record and --keep into the RecordPolicy
the executor follows; ``Prepared.check_memory`` then estimates the run and refuses it over --max-memory.  Every
command that runs a spec (run, validate, check, page, lens, grad, patch, probe, graph) and ``tracer.trace`` load
it here; ``tracer diff`` reads its sides as files first (front/comparison.py), a spec among them as this does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from tracer.spec import Spec, choices, memory
from tracer.spec.loading import SpecLike, load


class Prepared(NamedTuple):
    spec: Spec
    policy: memory.RecordPolicy
    batch: int  # b and t counted from the front (a -1 given is B - 1)
    pos: int
    stages: list[str] | None  # the stages --stage picked, by their full names; None: all
    max_memory: str

    def check_memory(self, *, show_all: bool = False, verify: bool = False, form: str | None = None,
                     with_weights: bool = False, by_layer: bool = False) -> memory.Estimate:
        """The run's estimate; UsageError (exit 2) if it needs more than --max-memory.  ``by_layer``: tracer run's
        weights, a layer's read when it starts and let go after (memory.by_layer_weights)."""
        return memory.check_run(self.spec, self.policy, self.max_memory, show_all=show_all, verify=verify, form=form,
                                with_weights=with_weights, by_layer=by_layer)


def load_checked(spec: SpecLike, *, max_memory: str = memory.DEFAULT_MAX_MEMORY, text: str | None = None, special: bool = True,
                 intervene: Any = None) -> Spec:
    """The spec, loaded the one way: a path's text refused first over ``max_memory``; ``text`` (with ``special``) its
    input tokenized by its own tokenizer; ``intervene`` (interventions.Requests) --ablate/--set/--from put on it."""
    if isinstance(spec, (str, os.PathLike)):
        s = memory.load_spec_within(os.fspath(spec), max_memory)  # millions of inline values: refused before parsing
    else:
        s = load(spec)
    if text is not None:  # the spec's own document again, its input replaced (its size checked above)
        from tracer.spec.loading import load_with_text

        s = load_with_text(spec if isinstance(spec, (str, os.PathLike, dict)) else s.path, text, special)
    if intervene:
        from tracer.engine.interventions import attach

        s = attach(s, intervene)
    return s


def select_stages(spec: Spec, requested: Sequence[str]) -> list[str] | None:
    """The stages --stage names, by their full names (an unknown one is a UsageError naming the close ones); None: all."""
    if not requested:
        return None
    from tracer.model.catalogue import select

    return select(list(requested), list(spec.stage_shapes), spec.path)


def prepare(spec: SpecLike, *, record: str = "auto", table: bool = False, keep: Sequence[str] = (), stages: Sequence[str] = (),
            batch: int = 0, pos: int = 0, show_all: bool = False, max_memory: str = memory.DEFAULT_MAX_MEMORY,
            options: tuple[str, str] = ("--batch", "--pos")) -> Prepared:
    """Load and check a spec and build its record policy.

    ``record`` is --record (auto: what the output shows; ``table`` says the output is the plain table, which
    keeps the least); ``keep`` (--keep) and the ``stages`` picked (--stage) are kept in full; ``options`` name
    --batch and --pos in messages (the library says batch and pos).
    """
    s = load_checked(spec, max_memory=max_memory)
    picked = select_stages(s, stages)
    b, t = choices.position(s, batch, pos, options)
    policy = memory.policy_for(s, memory.record_mode(record, table), [*keep, *(picked or [])], b, t, show_all)
    return Prepared(s, policy, b, t, picked, max_memory)
