"""``tracer lens SPEC``: load and run the spec keeping each layer's residual, read it out, write the chosen format."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer.errors import UsageError
from tracer.lens.core import LENS_TOP, LensResult, plan, read_out, token_id
from tracer.messages import msg

if TYPE_CHECKING:
    from tracer.engine.executor import Recording

LENS_FORMATS = ("table", "json", "csv")


def lens_format(fmt: str | None, as_json: bool) -> str:
    """--format (table | json | csv), with --json as its alias."""
    if fmt is not None and fmt not in LENS_FORMATS:
        raise UsageError(msg("--format {fmt}: expected one of {names}{fmt2}", fmt=fmt, names=" | ".join(LENS_FORMATS), fmt2=""))
    if as_json and fmt not in (None, "json"):
        raise UsageError(msg("--json is short for --format json; it cannot be combined with --format {fmt}", fmt=fmt))
    return "json" if as_json else (fmt or "table")


def lens_spec(path: str, *, token: str | int | None = None, top: int = LENS_TOP, batch: int = 0, max_memory: str = "4GB",
              precision: int = 4, text: str | None = None, special: bool = True, ablate: tuple[str, ...] = (),
              set_: tuple[str, ...] = (), record: str = "main") -> tuple[LensResult, Recording]:
    """Load and run the spec (its input replaced by ``text``, when given; with ``ablate``/``set_`` applied as tracer run
    applies --ablate/--set), keeping each layer's residual (``record``: "all" keeps every stage, for --page), and read
    it out: the lens, and the run it read."""
    import numpy as np

    from tracer.engine import executor
    from tracer.engine.interventions import Requests
    from tracer.front.prepare import load_checked
    from tracer.spec import choices, memory

    if text is None and not special:
        raise UsageError(msg("--no-special says whether the tokenizer adds its special tokens to --text: give --text too"))
    s = load_checked(path, max_memory=max_memory, text=text, special=special,
                     intervene=Requests(tuple(ablate), tuple(set_)) if ablate or set_ else None)
    p = plan(s)
    choices.precision(precision)
    b, _ = choices.position(s, batch, 0, ("--batch", "--pos"))
    if top < 1:
        raise UsageError(msg("--top {top}: expected 1 or more tokens a cell shows", top=top))
    if token is not None:
        token_id(s, token)  # an unknown --token is refused before anything runs
    policy = memory.policy_for(s, record, list(p.rows), b, 0)
    memory.check_run(s, policy, max_memory)
    with np.errstate(all="ignore"):
        ex = executor.Executor(s, policy=policy)
        run = ex.run()
    return read_out(s, run, ex.params, ex.inputs, b, token, top, precision), run


def lens_text(r: LensResult, form: str) -> str:
    from tracer.lens.view import lens_csv, lens_json
    from tracer.views.trace_json import dumps

    return dumps(lens_json(r)) if form == "json" else lens_csv(r)
