"""What a patching sweep measures at the last position of each sample it reads: ``--metric``.

- ``logit`` (the default): the logit of ``--token``;
- ``logit-diff``: the logit of ``--token`` minus the logit of ``--against``;
- ``prob``, ``logprob``: the probability of ``--token`` (the softmax of the logits) and its log.

``--normalise`` shows each sample's change as a share of the clean run's: (patched - corrupt) / (clean - corrupt),
0 where the patch leaves the corrupt value, 1 where it gives the clean one.  Tokens are ids, vocab words or text in
the spec's tokenizer (tracer.compare.effect.choose_token); one token for every sample, or one a sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tracer.compare import effect
from tracer.errors import UsageError
from tracer.messages import Message, msg

if TYPE_CHECKING:
    from tracer.spec import Spec

METRICS = ("logit", "logit-diff", "prob", "logprob")


class Metric(NamedTuple):
    kind: str  # one of METRICS
    tokens: tuple[int, ...]  # one a sample read
    against: tuple[int, ...]  # logit-diff: one a sample read; else ()
    normalise: bool = False

    def of(self, last: np.ndarray) -> np.ndarray:
        """[n, V] logits at the last position of each sample read -> [n] metric values (float64)."""
        rows = np.arange(last.shape[0])
        x = np.asarray(last, dtype=np.float64)
        picked = x[rows, list(self.tokens)]
        if self.kind == "logit":
            return picked
        if self.kind == "logit-diff":
            return picked - x[rows, list(self.against)]
        top = x.max(axis=-1)
        logprob = picked - top - np.log(np.exp(x - top[:, None]).sum(axis=-1))  # log softmax, shifted by each row's top
        return logprob if self.kind == "logprob" else np.exp(logprob)

    def label(self, spec: Spec | None) -> str:
        """'logit of 'cat'', 'logit('cat') - logit('mat')', 'p('cat')', 'log p('cat')' (the first sample's tokens)."""
        tok = self.words(spec, self.tokens)
        if self.kind == "logit-diff":
            return f"logit({tok}) - logit({self.words(spec, self.against)})"
        return {"logit": f"logit({tok})", "prob": f"p({tok})", "logprob": f"log p({tok})"}[self.kind]

    @staticmethod
    def words(spec: Spec | None, tokens: Sequence[int]) -> str:
        texts = [effect.token_text(spec, t) for t in tokens]
        return texts[0] if len(set(texts)) == 1 else "|".join(texts)

    def as_json(self, spec: Spec | None) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind, "normalise": self.normalise, "tokens": list(self.tokens)}
        if self.against:
            out["against"] = list(self.against)
        out["label"] = self.label(spec)
        return out


def _tokens(spec: Spec | None, given: Sequence[str | int] | str | int | None, top: np.ndarray | None, V: int, n: int,
            option: str) -> tuple[int, ...]:
    """One token a sample read: --token once (every sample) or once a sample; None: each sample's top (``top`` [n,V])."""
    if given is None or (not isinstance(given, (str, int)) and len(given) == 0):
        if option == "--against":
            raise UsageError(msg("--metric logit-diff: give --against ID|TEXT, the token whose logit is taken off"))
        return tuple(effect.choose_token(spec, None, None if top is None else top[i], V, option) for i in range(n))
    items = [given] if isinstance(given, (str, int)) else list(given)
    if len(items) not in (1, n):
        raise UsageError(msg("{option}: give one token for every sample or one a sample ({n}), received {got}", option=option, n=n, got=len(items)))
    chosen = [effect.choose_token(spec, item, None, V, option) for item in items]
    return tuple(chosen * n if len(chosen) == 1 else chosen)


def make(kind: str, spec: Spec | None, token: Sequence[str | int] | str | int | None, against: Sequence[str | int] | str | int | None,
         normalise: bool, top: np.ndarray | None, V: int, n: int) -> Metric:
    """The metric, its tokens chosen (``top`` [n,V]: the clean run's logits at the last position of the samples read)."""
    if kind not in METRICS:
        raise UsageError(msg("--metric {got}: expected one of {choices}", got=kind, choices=", ".join(METRICS)))
    has_against = against is not None and (isinstance(against, (str, int)) or len(against) > 0)
    if has_against and kind != "logit-diff":
        raise UsageError(msg("--against is for --metric logit-diff, received --metric {got}", got=kind))
    toks = _tokens(spec, token, top, V, n, "--token")
    return Metric(kind, toks, _tokens(spec, against, top, V, n, "--against") if kind == "logit-diff" else (), normalise)


def spread(values: np.ndarray) -> dict[str, float]:
    """The mean of [n] values and their spread over the samples: std (population), min, max."""
    return {"mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()), "max": float(values.max())}


def no_effect(metric: Metric, spec: Spec | None, clean: np.ndarray, corrupt: np.ndarray, samples: Sequence[int]) -> Message | None:
    """--normalise needs clean and corrupt to differ in every sample read: the sentence saying where they do not."""
    same = [i for i in range(len(clean)) if clean[i] == corrupt[i]]
    if metric.normalise and same:
        return msg("--normalise: the clean and the corrupt run give {label} the same value {v} in sample {b}, so there is no change to take a share of",
                   label=metric.label(spec), v=f"{clean[same[0]]:.6g}", b=samples[same[0]])
    return None
