"""What a Model holds: the checked spec, its weights (read-only arrays) and its document; another input to the same weights.

Below the front's results (Trace, Diff), which take one as they take a spec; tracer.load's Model (front/model.py) adds
what it runs.  Another input (``tokens=``, ``text=``) is the spec's document validated again with that input (every
check and message as for a spec file; the checkpoints' headers as cached while their files are unchanged), and the
weights it names are the ones held; a weight whose shape follows the input (a seeded position table, T_max = T when
the spec gives none) is drawn for that input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np

from tracer.errors import UsageError
from tracer.messages import at, msg
from tracer.spec import Spec, choices, memory
from tracer.spec.loading import Document

H = TypeVar("H", bound="Held")
Tokens = Sequence[int | str] | Sequence[Sequence[int | str]] | np.ndarray  # ids (or the vocab's words): one sample [T] or a batch [B][T]


class Held:
    """A checked spec and its weights, held.  ``.spec`` is the Spec, ``.params`` the weights by name (read-only arrays)."""

    def __init__(self, spec: Spec, params: Mapping[str, np.ndarray], doc: Document | None, max_memory: str) -> None:
        self.spec = spec
        self._params = dict(params)
        self._doc = doc  # the spec's document as read: another input is validated from it
        self.max_memory = max_memory

    @property
    def params(self) -> Mapping[str, np.ndarray]:
        """Every weight by name (``norm1.gamma``, ``blocks.0.attn.w_q``, ...), each array read-only."""
        return MappingProxyType(self._params)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def nbytes(self) -> int:
        """The bytes the weights hold."""
        return sum(a.nbytes for a in self._params.values())

    # -- another input to the same weights ------------------------------------------------
    def with_input(self: H, tokens: Tokens | None = None, *, text: str | None = None, special: bool = True) -> H:
        """The same weights on another input: ``tokens`` (ids, one sample [T] or a batch [B][T]) or ``text`` (tokenized by
        the spec's own tokenizer; ``special``: with the special tokens its post-processor adds).  Neither: this model."""
        if tokens is None and text is None:
            return self
        if tokens is not None and text is not None:
            raise UsageError(msg("give tokens or text, not both"))
        if self._doc is None:
            raise UsageError(at(self.spec.path, msg("another input needs the spec's document: load the model from a path or a dict")))
        from tracer.spec.loading import load_with_input

        if text is not None:
            given: dict[str, Any] = {"text": choices.text(text, "text"), "special": choices.flag(special, "special")}
        else:
            given = {"tokens": _token_rows(tokens)}
        fields, src, files = self._doc
        dims = fields.get("dims")
        if isinstance(dims, Mapping):  # B and T follow from the new input (a spec may write those of its own)
            fields = dict(fields, dims={k: v for k, v in dims.items() if k not in ("B", "T")})
        spec = load_with_input((fields, src, files), given)
        return type(self)(spec, self._weights_for(spec), self._doc, self.max_memory)

    def _weights_for(self, spec: Spec) -> dict[str, np.ndarray]:
        """This model's arrays for ``spec``'s weights where they are the same weights (same name, shape and source: the
        same checkpoint tensor, the same draw); any other is made for it (read-only too)."""
        mine = self.spec.weights
        same = {n for n, w in spec.weights.items() if n in mine and w == mine[n] and spec.seed == self.spec.seed
                and spec.dtype == self.spec.dtype and spec.init == self.spec.init}
        out = {n: self._params[n] for n in same}
        if len(same) < len(spec.weights):
            out.update(held_arrays(spec._replace(weights={n: w for n, w in spec.weights.items() if n not in same})))
        return {n: out[n] for n in spec.weights}

    def __repr__(self) -> str:
        return f"<tracer.Model {self.spec.name!r}: {len(self._params)} weights, {memory.format_size(self.nbytes)}>"


def _token_rows(tokens: Tokens | None) -> list[list[int]]:
    """Token ids as the spec's ``input: {tokens: ...}`` writes them, [B][T]; one sample [T] is a batch of one."""
    rows = tokens.tolist() if isinstance(tokens, np.ndarray) else tokens
    if isinstance(rows, (list, tuple)) and rows and not isinstance(rows[0], (list, tuple)):
        rows = [rows]
    if not isinstance(rows, (list, tuple)):
        raise UsageError(msg("tokens: expected token ids, one sample [T] or a batch [B][T], received {got}", got=choices._received(tokens)))
    return [list(r) if isinstance(r, (list, tuple)) else r for r in rows]


def held_arrays(spec: Spec) -> dict[str, np.ndarray]:
    """Every weight of ``spec`` in full (the whole embedding table: any input may read any row), read-only."""
    from tracer.engine.params import load_params

    with np.errstate(all="ignore"):  # a given value that overflows the dtype is the run's violation, as tracer.trace's
        arrays = load_params(spec)
    for a in arrays.values():
        a.flags.writeable = False
    return arrays


def weight_bytes(spec: Spec) -> int:
    """What a Model's weights hold: every weight in full, in the spec's dtype."""
    return sum(math.prod(w.shape) for w in spec.weights.values()) * np.dtype(spec.dtype).itemsize
