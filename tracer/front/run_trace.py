"""tracer.trace: run a spec and hold every stage, as a mapping of stage name -> ndarray.

    >>> t = tracer.trace("specs/ch17-prenorm.yaml")
    >>> t["norm1"]                # the whole [B,T,C] array
    >>> t.shape_of("attn.weights")  # [B,H,T,T] = [1,2,3,3]
    >>> t                          # in Jupyter (or rich.print(t)): the table `tracer run` prints

The run is the CLI's (same executor, same --record, --keep and --max-memory checks); a violation
does not raise: it is in ``.violations`` (``.ok`` is False), as `tracer run` exits 1.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tracer.errors import StageNotFound, UsageError, Violation
from tracer.messages import at, msg
from tracer.model.contracts import kind_word
from tracer.spec import choices
from tracer.spec.choices import position
from tracer.spec.loading import SpecLike
from tracer.views.display import View

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tracer.engine.executor import Recording, Stage
    from tracer.front.held import Held
    from tracer.lens.core import LensResult
    from tracer.spec import Spec


class StageShape(NamedTuple):
    """A stage's shape with its axis letters: ``str()`` gives ``[B,T,C] = [1,3,2]``."""

    axes: tuple[str, ...]
    sizes: tuple[int, ...]

    def __str__(self) -> str:
        from tracer.model.shapes import shape_label

        return shape_label(self.axes, self.sizes)

    def size(self, letter: str) -> int:
        """The size of the axis with this letter (the first, when a letter repeats: [B,H,T,T])."""
        if letter not in self.axes:
            raise UsageError(msg("no axis {letter} in {x}", letter=repr(letter), x=self))
        return self.sizes[self.axes.index(letter)]


class Trace(Mapping[str, np.ndarray]):
    """Every recorded stage of one run: ``trace[name]`` is its array, iteration gives the names in order."""

    def __init__(self, spec: Spec, run: Recording, params: dict[str, np.ndarray], *, batch: int = 0, pos: int = 0,
                 precision: int = 6, show_all: bool = False) -> None:
        self.spec = spec
        self.run = run  # the executor's Trace (stages, violations, policy)
        self.params = params  # every weight, by name (norm1.gamma, attn.w_q, ...)
        self.batch, self.pos, self.precision, self.show_all = batch, pos, precision, show_all

    # -- the mapping ---------------------------------------------------------------------
    def stage(self, name: str) -> Stage:
        """The stage record (array, axes, meaning); StageNotFound for a name the trace does not hold."""
        if not isinstance(name, str):
            raise StageNotFound(at(self.spec.path, msg("a stage is named by text such as 'norm1', received {got}", got=choices._received(name))))
        found = self.run.stages.get(name)
        if found is None:
            from tracer.model.catalogue import suggest

            hint = suggest(name, self.run.stages) or msg("; its stages: {names}", names=", ".join(self.run.stages))
            if self.violations:
                v = self.violations[0]
                raise StageNotFound(at(self.spec.path, msg("no stage {name} in this trace (the run stopped at a {kind} violation at {stage}){hint}",
                                                           name=repr(name), kind=kind_word(v.kind), stage=v.stage, hint=hint)))
            raise StageNotFound(at(self.spec.path, msg("no stage {name} in this trace{hint}", name=repr(name), hint=hint)))
        return found

    def __getitem__(self, name: str) -> np.ndarray:
        stage = self.stage(name)
        if stage.data is None:
            raise StageNotFound(at(self.spec.path,
                                   msg("{name} was kept as statistics (record='stats'), not in full; trace again with keep=[{quoted}] or record='all'",
                                                       name=name, quoted=repr(name))))
        return stage.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.run.stages)

    def __len__(self) -> int:
        return len(self.run.stages)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.run.stages

    # -- what the table shows ------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def output(self) -> np.ndarray:
        """The block's result (the last step's stage)."""
        return self[self.run.output.name]

    def shape_of(self, name: str) -> StageShape:
        stage = self.stage(name)
        return StageShape(tuple(stage.axes), tuple(stage.shape))

    def meaning(self, name: str) -> str:
        return self.stage(name).meaning

    @property
    def violations(self) -> list[Violation]:
        return list(self.run.violations)

    @property
    def ok(self) -> bool:
        """No violation was flagged (``tracer run`` would exit 0)."""
        return self.run.ok

    # -- output: JSON, archive, views ----------------------------------------------------
    def to_json(self, *, show_all: bool | None = None, with_weights: bool = False) -> str:
        """The JSON ``tracer run SPEC --json`` prints (one line), ``show_all`` as --all, ``with_weights`` as --with-weights."""
        from tracer.views.text import visible_stages
        from tracer.views.trace_json import dumps, trace_json

        with_weights = choices.flag(with_weights, "with_weights")
        stages = visible_stages(self.run, self.show_all if show_all is None else choices.flag(show_all, "show_all"))
        return dumps(trace_json(self.run, stages, None, self.params if with_weights else None))

    def save(self, path: str, *, force: bool = False) -> None:
        """Every recorded array to an .npz archive, as ``tracer run --save`` writes it: never over a file tracer
        cannot prove it wrote, unless ``force`` (as --force; docs/files.md gives the rule)."""
        path, force = choices.file_path(path, "path"), choices.flag(force, "force")
        from tracer.files import check_output
        from tracer.views.npz import save

        check_output(path, "Trace.save", [self.spec.path, *self.spec.files_read], "npz", force)
        save(self.run, path, force=force)

    def table(self, *, batch: int | None = None, pos: int | None = None, precision: int | None = None,
              show_all: bool | None = None, stages: Sequence[str] | None = None) -> View:
        """The view ``tracer run`` prints: the table, the output matrix, any violation (rich and Jupyter show it)."""
        from tracer.model.catalogue import select
        from tracer.views.tables import run_view

        b, t = self._position(batch, pos)
        digits = self.precision if precision is None else choices.precision(choices.whole(precision, "precision"), "precision")
        wide = self.show_all if show_all is None else choices.flag(show_all, "show_all")
        only = select(choices.texts(stages, "stages"), list(self.run.stages), self.spec.path) if stages is not None else None
        return View(run_view(self.run, b, t, digits, wide, only=only))

    def attention(self, stage: str | None = None, *, batch: int | None = None) -> View:
        """The heatmaps ``tracer run --attention`` draws: the first attention step, or the one named
        (``attention``, ``blocks.1.attn``, ``all``)."""
        from tracer.views.attention import attention_view, resolve

        b, _ = self._position(batch, None)
        named = [choices.text(stage, "stage")] if stage is not None else []
        return View(attention_view(self.run, resolve(self.spec, named), b))

    def lens(self, token: str | int | None = None, *, top: int = 3, batch: int | None = None, precision: int = 4) -> LensResult:
        """The logit lens of this run (as ``tracer lens``): every layer's residual through the final norm, with that
        layer's own statistics, and the head.  ``.probs[layer, t, v]``, ``.p_token`` [layers, T], ``.labels``; shows as
        the table and heatmap ``tracer lens`` prints.  ``token``: its text or id (default: the model's own next token)."""
        from tracer.lens.core import read_out

        b, _ = self._position(batch, None)
        top, precision = choices.whole(top, "top"), choices.precision(choices.whole(precision, "precision"), "precision")
        if isinstance(token, bool) or (token is not None and not isinstance(token, (str, int))):
            raise UsageError(msg("token: expected a token's text or id, received {got}", got=choices._received(token)))
        from tracer.engine.params import load_inputs

        return read_out(self.spec, self.run, self.params, load_inputs(self.spec), b, token, top, precision)

    def page(self, path: str | None = None, *, lang: str = "en", budget_mb: float = 20.0, force: bool = False) -> str:  # 20: page.writer.DEFAULT_BUDGET_MB
        """The explorable page of this run (as ``tracer page``): one self-contained HTML file, returned as text and
        written to ``path`` when given (never over a file tracer did not write, unless ``force``; docs/files.md).
        ``lang``: the page's first language (en | zh); ``budget_mb``: as --page-budget."""
        from tracer.page.writer import page_written, run_page

        page = run_page(self.run, b=self.batch, t=self.pos, precision=self.precision, lang=choices.text(lang, "lang"), budget_mb=budget_mb)
        return page_written(page, path, [self.spec.path, *self.spec.files_read], force)

    def _position(self, batch: int | None, pos: int | None) -> tuple[int, int]:
        b = self.batch if batch is None else choices.whole(batch, "batch")
        return position(self.spec, b, self.pos if pos is None else choices.whole(pos, "pos"), ("batch", "pos"))

    def __rich__(self) -> RenderableType:
        return self.table().renderable

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __repr__(self) -> str:
        status = "ok" if self.ok else "; ".join(f"{v.kind} violation at {v.stage}" for v in self.run.violations)
        return f"<tracer.Trace {self.spec.name!r}: {len(self)} stages, {status}>"


def trace(spec: SpecLike | Held, *, keep_going: bool = False, record: str = "all", keep: Sequence[str] = (), max_memory: str = "4GB",
          batch: int = 0, pos: int = 0, precision: int = 6, show_all: bool = False, text: str | None = None, special: bool = True,
          ablate: Sequence[str] | str | None = None, set: Sequence[str] | str | None = None, start: str | None = None) -> Trace:
    """Run a spec (a path, a dict of spec fields, a loaded Spec, or a Model from tracer.load, whose weights are not read
    again) and return its Trace.

    The options are ``tracer run``'s: ``keep_going`` (--keep-going), ``record`` (all | main | stats; auto is all here:
    a Trace hands out every stage's array),
    ``keep`` (--keep), ``max_memory`` (--max-memory: '4GB', '512MB', 'none'); ``batch``, ``pos``,
    ``precision`` and ``show_all`` (--all) choose what the table shows.  ``text``: the input, in place of the spec's,
    tokenized with the spec's own ``tokenizer:`` (``special``: with the special tokens its post-processor adds).
    ``ablate``, ``set`` and ``start`` are --ablate, --set and --from (one text or a list: ``ablate="blocks.0.attn.head.3"``,
    ``set=["blocks.0.ffn=run.npz:blocks.0.ffn"]``, ``start="blocks.0.output=run.npz:blocks.0.output"``).
    """
    from tracer.engine import executor
    from tracer.front.held import Held
    from tracer.front.prepare import load_checked, prepare

    held: dict[str, np.ndarray] | None = None
    if isinstance(spec, Held):  # its weights, held: its input replaced by text= is validated from its document
        if text is not None:
            spec, text = spec.with_input(text=choices.text(text, "text"), special=choices.flag(special, "special")), None
        held, spec = dict(spec.params), spec.spec
    keep_going, show_all = choices.flag(keep_going, "keep_going"), choices.flag(show_all, "show_all")
    record, keep, max_memory = choices.text(record, "record"), choices.texts(keep, "keep"), choices.text(max_memory, "max_memory")
    batch, pos, precision = choices.whole(batch, "batch"), choices.whole(pos, "pos"), choices.whole(precision, "precision")
    choices.precision(precision, "precision")
    if text is not None:  # the input as text, tokenized by the spec's own tokenizer
        spec = load_checked(spec, max_memory=max_memory, text=choices.text(text, "text"), special=choices.flag(special, "special"))
    ready = prepare(spec, record=record, keep=keep, batch=batch, pos=pos, show_all=show_all, max_memory=max_memory,
                    options=("batch", "pos"))
    ready.check_memory(show_all=show_all)
    s, policy, batch, pos = ready.spec, ready.policy, ready.batch, ready.pos
    if ablate is not None or set is not None or start is not None:
        from tracer.engine.interventions import attach, requests_of

        s = attach(s, requests_of(ablate, set, start))
    with np.errstate(all="ignore"):  # NaN and Inf are reported as violations, not as warnings
        ex = executor.Executor(s, keep_going, policy=policy, params=held)
        run = ex.run()
    return Trace(s, run, ex.params, batch=batch, pos=pos, precision=precision, show_all=show_all)
