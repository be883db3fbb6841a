"""The logit lens: every layer's residual stream read out through the model's own final norm and head.

For each layer (the residual entering layer 0, then each layer's output), the steps the spec runs after its
last layer (the final norm, OPT's project_out, the head with its bias, the softmax) are run again by the
executor, on that layer's residual in place of the last one.  So the final norm is applied with that layer's
own statistics (its mean and variance, or its RMS), never the last layer's; the weights and every setting
are the spec's; and the last layer's read-out is exactly the run's probs.  The other layers' rows of the sample read
are stacked and read out by one tail (its head one product of all of them): every tail step acts on each position
alone, so they agree with a read-out layer by layer to rounding (``_stacked``).

Where the lens has no meaning it is refused: a spec with no head (nothing scores the vocabulary), an
encoder-decoder, and a Pre-Norm (or parallel) stack without a final norm, whose residual no norm ever
reads before the head.  A Post-Norm stack (each layer ends in its own norm) needs none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tracer.errors import UsageError
from tracer.messages import at, msg
from tracer.spec import Spec

if TYPE_CHECKING:
    from tracer.engine.executor import Recording

LENS_TOP = 3  # tracer lens --top: the tokens each cell shows


class LensPlan(NamedTuple):
    """Which stages the lens reads: the residual after each layer (``rows``, named by ``labels``), and the tail
    the spec runs after its last layer (from step ``tail_start``, reading ``tail_input``)."""

    rows: tuple[str, ...]  # the stage of each residual: the stream entering layer 0, then each layer's output
    labels: tuple[str, ...]  # how the table names each: embed, blocks.0, blocks.1, ...
    tail_start: int
    tail_input: str


def plan(spec: Spec) -> LensPlan:
    """The lens's stages of ``spec``; a UsageError (exit 2) saying why where the lens has no meaning."""
    if spec.model != "decoder":
        raise UsageError(at(spec.path, msg("the logit lens reads a decoder-only stack's residual stream; an encoder-decoder is not one")))
    if spec.block.head == "none":
        raise UsageError(at(spec.path,
                            msg("the logit lens reads each layer through the head, and this spec has none (block.head: none): nothing scores the vocabulary")))
    steps = spec.steps
    in_blocks = [i for i, s in enumerate(steps) if s.name.startswith("blocks.")]
    if not in_blocks:
        raise UsageError(at(spec.path, msg("the logit lens reads the residual stream after each layer, and this spec has no layer")))
    first, last = in_blocks[0], in_blocks[-1]
    if first == 0 or last + 1 >= len(steps):
        raise UsageError(at(spec.path, msg("the logit lens needs the stream entering the first layer and the head after the last")))
    tail_input = steps[last].name
    if any(n.startswith("blocks.") and n != tail_input for s in steps[last + 1:] for n in s.inputs):
        raise UsageError(at(spec.path,
                            msg("the logit lens reruns the steps after the last layer on each layer's output; here they read more than that output")))
    has_norm = any(s.op in ("layer_norm", "rms_norm", "rms_norm_offset") for s in steps[last + 1:])
    if not has_norm and spec.block.norm_order != "post":
        raise UsageError(at(spec.path, msg("the logit lens reads each layer through the final norm and the head, and this {order} stack has no final norm "
                                           "(block.final_norm: false): the head would read a residual no norm has scaled",
                                         order=spec.block.norm_order)))
    n_layers = spec.block.layers
    rows = [steps[first - 1].name]
    labels = ["embed"]
    for i in range(n_layers):
        mine = [s.name for s in steps[first:last + 1] if s.name.startswith(f"blocks.{i}.")]
        if mine:
            rows.append(mine[-1])
            labels.append(f"blocks.{i}")
    return LensPlan(tuple(rows), tuple(labels), last + 1, tail_input)


class Cell(NamedTuple):
    p_token: float
    top: tuple[tuple[int, str, float], ...]  # (id, text, p), most probable first


class LensResult:
    """The lens of one sample: ``probs[layer, t, v]``, each layer's read-out, and what the views show."""

    def __init__(self, spec: Spec, labels: Sequence[str], probs: np.ndarray, batch: int, tokens: Sequence[int], chosen: str,
                 top: int, precision: int = 4) -> None:
        from tracer.views.text import token_word

        self.spec, self.labels, self.probs, self.batch, self.top, self.precision = spec, tuple(labels), probs, batch, top, precision
        self.tokens = tuple(int(i) for i in tokens)  # the token whose probability each position shows
        self.chosen = chosen  # how it was chosen: the token given, or "the model's own next token at each position"
        self.words = tuple(token_word(spec, i) for i in self.tokens)
        words = spec.tokens_text()
        ids = spec.input.value if isinstance(spec.input.value, list) else None
        T = probs.shape[1]
        self.positions = tuple((ids[batch][t] if ids is not None else None, words[batch][t] if words is not None else "") for t in range(T))

    @property
    def p_token(self) -> np.ndarray:
        """[layers, T]: the probability of each position's chosen token after each layer."""
        T = self.probs.shape[1]
        return self.probs[:, np.arange(T), np.asarray(self.tokens)]

    def cell(self, layer: int, t: int) -> Cell:
        from tracer.views.text import top_tokens

        return Cell(float(self.probs[layer, t, self.tokens[t]]), tuple(top_tokens(self.spec, self.probs[layer, t], self.top)))

    def __rich__(self) -> object:
        from tracer.lens.view import lens_view

        return lens_view(self)

    def _repr_html_(self) -> str:
        from tracer.views.display import View

        return View(self.__rich__())._repr_html_()  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"<tracer lens {self.spec.name!r}: {len(self.labels)} layers x {self.probs.shape[1]} positions>"


def token_id(spec: Spec, token: str | int) -> int:
    """--token: an id, or a token's text (the tokenizer's piece, with or without a leading space; a vocab word)."""
    V = spec.dims.V or 0
    if isinstance(token, int) or (isinstance(token, str) and token.strip().isdigit()):
        i = int(token)
        if not 0 <= i < V:
            raise UsageError(msg("--token {token}: id {i} is out of range: the vocabulary has V = {V} ids (0 to {x})", token=repr(str(token)), i=i, V=V,
                                 x=V - 1))
        return i
    if spec.tokenizer is not None:
        from tracer.checkpoints import tokenizer

        return tokenizer.token_id(spec.tokenizer, token, V)
    if spec.vocab is not None and token in spec.vocab:
        return spec.vocab.index(token)
    if spec.vocab is not None:
        raise UsageError(msg("--token {token}: not a word of the spec's vocab (give a word of it, or an id)", token=repr(token)))
    raise UsageError(msg("--token {token}: this spec has no tokenizer and no vocab to read a token's text with: give an id", token=repr(token)))


def read_out(spec: Spec, run: Recording, params: dict[str, np.ndarray], inputs: dict[str, np.ndarray], batch: int = 0,
             token: str | int | None = None, top: int = LENS_TOP, precision: int = 4) -> LensResult:
    """The lens of sample ``batch`` of a finished run (its residual stages recorded in full)."""
    p = plan(spec)
    if top < 1:
        raise UsageError(msg("--top {top}: expected 1 or more tokens a cell shows", top=top))
    if not run.ok:
        v = run.violations[0]
        raise UsageError(at(spec.path, msg("the run stopped at a {kind} violation at {stage}: the lens reads a finished run (tracer run shows the violation)",
                                           kind=v.kind, stage=v.stage)))
    chosen_id = token_id(spec, token) if token is not None else None
    final = run.stages.get(spec.steps[-1].name)
    residuals = []
    for name in p.rows:
        stage = run.stages.get(name)
        if stage is None or stage.data is None:
            raise UsageError(at(spec.path, msg("the lens reads {name} in full, and this trace kept it {how}: trace with record='all' (or keep it)",
                                               name=name, how=msg("as statistics") if stage is not None else msg("not at all"))))
        residuals.append(stage.data)
    # the last layer's read-out is the run's own tail (the same steps on the same array) where the run ends in the softmax
    own = final.data if final is not None and spec.steps[-1].op == "softmax" and not run.spec.interventions else None
    with np.errstate(all="ignore"):
        probs = (_stacked if stackable(spec, p) else _by_layer)(spec, p, residuals, own, params, inputs, batch)
    if chosen_id is not None:
        tokens = [chosen_id] * probs.shape[1]
        chosen = msg("the token given")
    else:
        tokens = [int(i) for i in np.argmax(probs[-1], axis=-1)]
        chosen = msg("the model's own next token at each position")
    return LensResult(spec, p.labels, probs, batch, tokens, chosen, top, precision)


POSITIONWISE = frozenset({"layer_norm", "rms_norm", "rms_norm_offset", "linear", "head", "softcap", "scale", "divide", "identity", "softmax"})
LENS_VALUES = 1 << 24  # logits one stacked tail makes at most (128 MB in float64): more layers are read out in turns


def stackable(spec: Spec, p: LensPlan) -> bool:
    """Whether the tail may read every layer's rows at once: each of its steps acts on each position alone (a norm over
    C, a product, a softmax over V), and no intervention names one of them (whose value has the run's own shape)."""
    from tracer.engine.interventions import by_stage, start_of

    tail = spec.steps[p.tail_start:]
    named = by_stage(spec)
    return start_of(spec) <= p.tail_start and all(s.op in POSITIONWISE and s.name not in named for s in tail)


def _tail(spec: Spec, p: LensPlan, h: np.ndarray, params: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
          into: np.ndarray | None = None) -> np.ndarray:
    """The spec's steps after its last layer, run by the executor on ``h`` in place of the last layer's output; softmaxed.
    ``into``: where the spec ends in its softmax, the array its logits and then its probabilities are written into
    (each step reads its input before it writes: no new [rows, V] array at all)."""
    from tracer.engine import executor, kernels
    from tracer.spec.memory import RecordPolicy

    last = spec.steps[-1]
    given = {s.name: into for s in spec.steps[p.tail_start:] if s.op in ("head", "softmax")} if into is not None and last.op == "softmax" else None
    tail = executor.Executor(spec, policy=RecordPolicy("all"), params=params, inputs=inputs, into=given)
    rec = tail.run(start=p.tail_start, live={p.tail_input: h})
    a = np.asarray(rec.stages[last.name].data)
    return a if last.op == "softmax" else kernels.softmax(a)


def _stacked(spec: Spec, p: LensPlan, residuals: list[np.ndarray], final: np.ndarray | None, params: dict[str, np.ndarray],
             inputs: dict[str, np.ndarray], batch: int) -> np.ndarray:
    """[layers, T, V]: sample ``batch``'s rows of every layer read out by one tail (a few, for a long input), the layers'
    [T, C] rows stacked one after another as the positions of one sample, [1, layers * T, C]: every tail step acts on
    each position alone, so each layer's rows get the same operations as alone, and the head is one product of all of
    them (one BLAS call of layers * T rows, not one of T rows a layer).  A BLAS may round a product's row differently
    with another number of rows, so these agree with a read-out layer by layer to rounding (tests/lens: 1e-12 in float64);
    the last layer is the run's own probs, bit for bit, where the run ends in the softmax; there the tail's softmax writes
    its rows straight into the result: no second [layers, T, V] made and copied."""
    n = len(residuals) - (final is not None)
    T, C = residuals[0].shape[1], residuals[0].shape[-1]
    V = int(spec.dims.V or 1)
    probs = None if final is None else np.empty((len(residuals), *final.shape[1:]), dtype=final.dtype)
    each = max(1, LENS_VALUES // max(1, T * V))  # layers a tail reads at once
    for lo in range(0, n, each):
        hi = min(n, lo + each)
        h = np.stack([residuals[i][batch] for i in range(lo, hi)]).reshape(1, (hi - lo) * T, C)
        target = None if probs is None else probs[lo:hi].reshape(1, (hi - lo) * T, -1)
        a = _tail(spec, p, h, params, inputs, into=target).reshape(hi - lo, T, -1)
        if probs is None:
            probs = np.empty((len(residuals), T, a.shape[-1]), dtype=a.dtype)
        if not np.may_share_memory(a, probs):  # not written in place (another shape or dtype than the run's): copied
            probs[lo:hi] = a
    assert probs is not None
    if final is not None:
        probs[-1] = final[batch]
    return probs


def _by_layer(spec: Spec, p: LensPlan, residuals: list[np.ndarray], final: np.ndarray | None, params: dict[str, np.ndarray],
              inputs: dict[str, np.ndarray], batch: int) -> np.ndarray:
    """[layers, T, V]: each layer's whole residual [B, T, C] read out by its own tail (where an intervention names a tail
    step, or a tail step mixes positions), row ``batch`` kept."""
    probs: np.ndarray | None = None
    for i, h in enumerate(residuals):
        a = final if final is not None and i == len(residuals) - 1 else _tail(spec, p, h, params, inputs)
        if probs is None:
            probs = np.empty((len(residuals), *a.shape[1:]), dtype=a.dtype)
        probs[i] = a[batch]
    assert probs is not None
    return probs
