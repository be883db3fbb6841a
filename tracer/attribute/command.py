"""``tracer attribute SPEC``: load and run the spec keeping the residual stream's parts, split the logit, write the format;
and ``tracer.attribution``, the same from Python."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tracer.attribute.core import Attribution, attribute, needed, tail_of, token_of

if TYPE_CHECKING:
    from tracer.attribute.estimate import EstimateGrid
    from tracer.engine.executor import Recording
    from tracer.spec.loading import SpecLike


def attribute_spec(spec: SpecLike, *, token: str | int | None = None, against: str | int | None = None, position: int = -1, batch: int = 0,
                   max_memory: str = "4GB", precision: int = 4, text: str | None = None, special: bool = True,
                   record: str = "main") -> tuple[Attribution, Recording]:
    """Load and run the spec (its input replaced by ``text``, when given), keeping the stages the split reads
    (``record``: "all" keeps every stage, for --page), and split the logit: the attribution, and the run it read."""
    import numpy as np

    from tracer.engine import executor
    from tracer.errors import UsageError
    from tracer.front.prepare import load_checked
    from tracer.messages import msg
    from tracer.spec import choices, memory

    if text is None and not special:
        raise UsageError(msg("--no-special says whether the tokenizer adds its special tokens to --text: give --text too"))
    s = load_checked(spec, max_memory=max_memory, text=text, special=special)
    tail_of(s)  # refused before anything runs
    choices.precision(precision)
    b, t = choices.position(s, batch, position, ("--batch", "--position"))
    tok = token_of(s, token, "--token") if token is not None else None
    other = token_of(s, against, "--against") if against is not None else None
    policy = memory.policy_for(s, record, needed(s), b, t)
    memory.check_run(s, policy, max_memory)
    with np.errstate(all="ignore"):
        ex = executor.Executor(s, policy=policy)
        run = ex.run()
    return attribute(s, run, ex.params, b, t, tok, other, precision), run


def check_modes(corrupt: str | None, stage: Sequence[str] | None, real: bool, text: str | None, page: str | None = None) -> None:
    """--stage and --real belong to attribution patching (--corrupt); --text and --page to one spec's split."""
    from tracer.errors import UsageError
    from tracer.messages import msg

    if corrupt is None and (stage or real):
        raise UsageError(msg("{option} belongs to attribution patching: give --corrupt CORRUPT too", option="--stage" if stage else "--real"))
    if corrupt is not None and text is not None:
        raise UsageError(msg("--text replaces one spec's input; attribution patching reads two specs (SPEC, the clean run, and --corrupt): "
                             "write each one's input in it"))
    if corrupt is not None and page is not None:
        raise UsageError(msg("--page draws one run and its split (the components table, the heads heatmap); attribution patching (--corrupt) "
                             "reads two runs and has no page: give one of them"))


def estimate_spec(clean: SpecLike, corrupt: SpecLike, *, stages: Sequence[str] = (), token: str | int | None = None, against: str | int | None = None,
                  position: int = -1, batch: int = 0, real: bool = False, max_memory: str = "4GB", precision: int = 4) -> EstimateGrid:
    """Both specs loaded the one way, then attribution patching (tracer.attribute.estimate)."""
    from tracer.attribute.estimate import DEFAULT_STAGES, estimate
    from tracer.front.prepare import load_checked
    from tracer.spec import choices

    choices.precision(precision)
    a, b = load_checked(clean, max_memory=max_memory), load_checked(corrupt, max_memory=max_memory)
    return estimate(a, b, tuple(stages) or DEFAULT_STAGES, token, against, batch, position, real, max_memory)


def attribute_text(a: Attribution | EstimateGrid, form: str) -> str:
    from tracer.attribute.core import Attribution
    from tracer.attribute.view import attribution_csv, estimate_csv
    from tracer.views.trace_json import dumps

    if form == "json":
        return dumps(a.as_json())
    return attribution_csv(a) if isinstance(a, Attribution) else estimate_csv(a)


def attribution(spec: SpecLike, *, token: str | int | None = None, against: str | int | None = None, position: int = -1, batch: int = 0,
                text: str | None = None, max_memory: str = "4GB") -> Attribution:
    """``tracer.attribution``: the split of ``tracer attribute SPEC`` (a path, a dict of spec fields or a loaded Spec);
    ``token``/``against`` are --token/--against (an id, a vocab word or a token's text), ``position`` --position."""
    from tracer.spec import choices

    a, _ = attribute_spec(spec, token=token, against=against, position=choices.whole(position, "position"), batch=choices.whole(batch, "batch"),
                          text=None if text is None else choices.text(text, "text"), max_memory=choices.text(max_memory, "max_memory"))
    return a


def attribution_patching(clean: SpecLike, corrupt: SpecLike, *, stage: Sequence[str] | str = "blocks.*.output", token: str | int | None = None,
                         against: str | int | None = None, batch: int = 0, real: bool = False, max_memory: str = "4GB") -> EstimateGrid:
    """``tracer.attribution_patching``: ``tracer attribute CLEAN --corrupt CORRUPT``'s grid (``stage`` is --stage, a pattern
    or a list; ``real`` runs tracer patch beside it), the metric the logit at the last position."""
    from tracer.spec import choices

    stages = [choices.text(stage, "stage")] if isinstance(stage, str) else list(choices.texts(stage, "stage"))
    return estimate_spec(clean, corrupt, stages=stages, token=token, against=against, batch=choices.whole(batch, "batch"),
                         real=choices.flag(real, "real"), max_memory=choices.text(max_memory, "max_memory"))
