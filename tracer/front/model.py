"""tracer.load: a Model, the checked spec with its weights held in memory, for as many traces as a notebook runs.

    >>> m = tracer.load("gpt2-tiny.yaml")     # checked, every weight read (or drawn) and converted once
    >>> t = m.trace()                         # the spec's own input; nothing is read again
    >>> t2 = m.trace(tokens=[5, 7, 9])        # another input to the same weights
    >>> m.lens(), m.patch(clean, corrupt), m.diff(other)

A Model's arrays are read-only (``flags.writeable`` is False): a cell that writes into one raises, so no trace after
it sees changed weights.  Its traces are ``tracer.trace``'s, number for number: the same executor on the same arrays
(a checkpoint read and converted once, as a run reads it; seeded draws from the same streams).

Another input (``tokens=``, ``text=``) is validated from the spec's document and reuses the weights (front/held.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tracer.front.held import Held, Tokens, held_arrays, weight_bytes
from tracer.messages import at, msg
from tracer.spec import choices, memory
from tracer.spec.loading import DICT_NAME, Document, SpecLike

if TYPE_CHECKING:
    from tracer.front.comparison import Diff, SideLike
    from tracer.front.run_trace import Trace
    from tracer.lens.core import LensResult
    from tracer.patching.run import PatchGrid

Input = str | Tokens  # a text, tokenized by the spec's tokenizer, or tokens


class Model(Held):
    """A checked spec and its weights, held: ``tracer.load(spec)``.  ``.spec`` is the Spec, ``.params`` the weights by
    name (read-only arrays); ``.trace``, ``.lens``, ``.patch`` and ``.diff`` run on them without reading them again."""

    # -- what the model runs ----------------------------------------------------------------
    def trace(self, *, tokens: Tokens | None = None, text: str | None = None, special: bool = True, **options: Any) -> Trace:
        """``tracer.trace`` on these weights: ``tokens`` or ``text`` is the input in place of the spec's (``with_input``);
        ``options`` are tracer.trace's (``keep_going``, ``record``, ``keep``, ``max_memory``, ``batch``, ``pos``,
        ``precision``, ``show_all``, ``ablate``, ``set``, ``start``)."""
        from tracer.front.run_trace import trace

        options.setdefault("max_memory", self.max_memory)
        return trace(self.with_input(tokens, text=text, special=special), **options)

    def lens(self, token: str | int | None = None, *, tokens: Tokens | None = None, text: str | None = None, special: bool = True,
             top: int = 3, batch: int = 0, precision: int = 4, max_memory: str | None = None) -> LensResult:
        """The logit lens ``tracer lens`` prints, on these weights (``Trace.lens``): the run keeps each layer's residual
        in full and the main stages, as tracer lens's does."""
        from tracer.lens.core import plan

        m = self.with_input(tokens, text=text, special=special)
        rows = list(plan(m.spec).rows)
        t = m.trace(record="main", keep=rows, batch=batch, max_memory=max_memory or self.max_memory)
        return t.lens(token, top=top, precision=precision)

    def patch(self, clean: Input, corrupt: Input, *, stage: Sequence[str] | str = "blocks.*.output", token: Sequence[str | int] | str | int | None = None,
              batch: int | None = None, max_memory: str | None = None, metric: str = "logit", against: Sequence[str | int] | str | int | None = None,
              normalise: bool = False, positions: str = "each") -> PatchGrid:
        """``tracer.patch`` between two inputs to these weights: ``clean`` and ``corrupt`` are each a text or token ids;
        the options are tracer.patch's."""
        from tracer.patching.run import Ask, patch

        a, b = (self._side(x) for x in (clean, corrupt))
        stages = [choices.text(stage, "stage")] if isinstance(stage, str) else choices.texts(stage, "stage")
        ask = Ask(choices.text(metric, "metric"), token, against, choices.flag(normalise, "normalise"),
                  None if batch is None else choices.whole(batch, "batch"))
        return patch(a.spec, b.spec, tuple(stages), max_memory=choices.text(max_memory or self.max_memory, "max_memory"), ask=ask,
                     positions=choices.text(positions, "positions"), params=(a._params, b._params))

    def _side(self, x: Input) -> Model:
        return self.with_input(text=x) if isinstance(x, str) else self.with_input(x)

    def diff(self, other: SideLike, **options: Any) -> Diff:
        """``tracer.diff`` of this model's trace (its spec's input) against ``other``; ``options`` are tracer.diff's."""
        from tracer.front.comparison import diff

        return diff(self, other, **options)


def load(spec: SpecLike | Model, *, name: str = DICT_NAME, max_memory: str = memory.DEFAULT_MAX_MEMORY) -> Model:
    """``tracer.load``: the spec (a path, a dict of spec fields, a loaded Spec, or a Model: returned as it is) checked as
    ``tracer validate`` checks it, and its weights read, converted and drawn once, held read-only in the Model.
    ``max_memory`` (as --max-memory): a spec file too big to parse, or weights over it with the interpreter, are refused
    (UsageError) before any is read; the model's traces check their own runs against it too."""
    from tracer.front.prepare import load_checked

    if isinstance(spec, Model):
        return spec
    max_memory = choices.text(max_memory, "max_memory")
    limit = memory.parse_size(max_memory)
    name = choices.text(name, "name")
    doc: Document | None = None
    if isinstance(spec, Mapping):  # validated from its document, as tracer.load(dict) validates it
        from tracer.spec import load_spec_doc
        from tracer.spec.loading import document

        doc = document(spec, name)
        s = load_spec_doc(doc[0], doc[1])
    else:
        s = load_checked(spec, max_memory=max_memory)  # a path's text refused first over max_memory
        if isinstance(spec, (str, os.PathLike)):
            from tracer.spec.loading import document

            doc = document(spec)
    memory.refuse_over(at(s.path, msg("loading the model's weights")), {msg("its weights"): weight_bytes(s)}, limit, max_memory,
                       msg("give the spec fewer layers (block.layers)"))
    return Model(s, held_arrays(s), doc, max_memory)
