"""The scalar a gradient is taken of, and its gradient with respect to the stage it reads (the backward pass's seed).

- ``next-token``: the mean cross-entropy of predicting token t+1 at position t, -mean log probs[b, t, token t+1],
  over the B * (T - 1) positions that have a next token; with ``input.targets`` given, of predicting
  targets[b, t] at every position (B * T terms).  It reads the ``probs`` stage: the default when the spec has
  an output head (and so token input).
- ``sum-squares``: 0.5 * sum of Y^2 over the block output Y (the last stage before any head): the default otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tracer.engine.executor import Recording
from tracer.errors import UsageError
from tracer.messages import msg
from tracer.spec import Spec
from tracer.spec.keys import LOSSES

FORMULAS = {  # the JSON's "formula" is their English
    "next-token": msg("-mean over b, t of log probs[b, t, next token]"),
    "sum-squares": "0.5 * sum of {stage}^2",
}


class Loss(NamedTuple):
    name: str  # next-token | sum-squares
    value: float
    stage: str  # the stage the loss reads
    seed: np.ndarray  # dLoss/dstage, the same shape as the stage
    formula: str  # a Message: English in the JSON, translated in the table


def has_head(spec: Spec) -> bool:
    return any(step.op == "head" for step in spec.steps)


def output_stage(spec: Spec) -> str:
    """The block output 0.5·ΣY² reads: the last stage before the output head (the last stage when there is none)."""
    for step in spec.steps:
        if step.op == "head":
            return step.inputs[0]
    return spec.steps[-1].name


def stages_read(spec: Spec) -> frozenset[str]:
    """The stages a loss reads: the block output (sum-squares), the logits and the probabilities (next-token)."""
    return frozenset([output_stage(spec)] + [s.name for s in spec.steps if s.op in ("head", "softmax", "softcap")]
                     + [s.inputs[0] for s in spec.steps if s.op == "softmax"])  # the logits it reads (after a cap or a divisor)


def choose(spec: Spec, option: str | None) -> str:
    """--loss, else the spec's loss:, else next-token with a head and sum-squares without."""
    if option is not None:
        if option not in LOSSES:
            from tracer.model.catalogue import suggest

            raise UsageError(msg("--loss {option}: expected one of {names}{option2}", option=option, names=' | '.join(LOSSES), option2=suggest(option, LOSSES)))
        if option == "next-token" and not has_head(spec):
            raise UsageError(msg("--loss next-token scores the vocabulary: the spec needs an output head (block.head: tied or separate)"))
        return option
    if spec.loss is not None:
        return spec.loss
    return "next-token" if has_head(spec) else "sum-squares"


def token_targets(spec: Spec, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(targets [B,T], which positions count [B,T] bool): input.targets everywhere, else token t+1 at t < T-1."""
    if spec.targets is not None:
        return np.asarray(spec.targets, dtype=np.int64), np.ones(ids.shape, dtype=bool)
    if ids.shape[1] < 2:
        raise UsageError(msg("{path}: next-token needs T >= 2 (position t predicts token t+1), received T = {shape}; "
                             "give input.targets or use --loss sum-squares", path=spec.path, shape=ids.shape[1]))
    targets = np.zeros_like(ids)
    targets[:, :-1] = ids[:, 1:]
    counted = np.ones(ids.shape, dtype=bool)
    counted[:, -1] = False  # the last position has no next token
    return targets, counted


def next_token(trace: Recording, ids: np.ndarray) -> Loss:
    spec = trace.spec
    probs_step = next(s for s in spec.steps if s.op == "softmax")
    probs_name = probs_step.name
    logits = trace.stages[probs_step.inputs[0]].array  # the logits the softmax reads (after block.head_softcap's cap)
    probs = trace.stages[probs_name].array
    targets, counted = token_targets(spec, ids)
    n = int(counted.sum())
    # log softmax from the logits (exact where probs underflow), at the targets only: one [B,T,V] temporary
    top = logits.max(axis=-1, keepdims=True)
    e = np.subtract(logits, top)
    log_total = np.log(np.exp(e, out=e).sum(axis=-1, keepdims=True))
    del e
    at_target = np.take_along_axis(logits, targets[..., None], axis=-1) - top
    picked = (at_target - log_total)[..., 0]  # [B,T]: log probs[b, t, target]
    value = float(-(picked * counted).sum() / n)
    seed = np.zeros(probs.shape, dtype=probs.dtype)  # calloc: only the picked entries are written
    b, t = np.nonzero(counted)
    seed[b, t, targets[b, t]] = -1.0 / (n * probs[b, t, targets[b, t]])  # d(-log p)/dp, averaged
    return Loss("next-token", value, probs_name, seed, FORMULAS["next-token"])


def sum_squares(trace: Recording) -> Loss:
    name = output_stage(trace.spec)
    y = trace.stages[name].array
    # d(0.5 ΣY²)/dY = Y: the seed is Y itself, not a copy (the backward pass never writes into its seed)
    return Loss("sum-squares", float(0.5 * np.sum(y * y)), name, y, msg("0.5 * sum of {stage}^2", stage=name))


def compute(trace: Recording, name: str, inputs: dict[str, np.ndarray]) -> Loss:
    if name == "next-token":
        stream = "target" if trace.spec.source is not None else "tokens"
        return next_token(trace, inputs[stream])
    return sum_squares(trace)
