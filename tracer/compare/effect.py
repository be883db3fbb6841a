"""What an intervention does to the prediction: the chosen token's probability and logit on both sides of a diff.

``choose_token`` reads --token (an id, or a word of the spec's vocab) or, without it, takes the clean run's top next
token at the last position; ``effect`` makes the sentence `tracer diff SPEC SPEC --ablate-b ...` ends with:
"ablating head 3 of layer 0 lowers p('Paris') at b=0, t=3 from 0.41 to 0.12".  ``tracer patch`` chooses its token
the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tracer.errors import UsageError
from tracer.messages import Message, join, msg

if TYPE_CHECKING:
    from tracer.engine.executor import Stage
    from tracer.spec import Spec


def token_text(spec: Spec | None, token: int) -> str:
    """'cat' (its vocab word, or its tokenizer's piece as readable text, quoted) when the spec names its tokens, else '#3'."""
    if spec is not None and spec.vocab is not None and 0 <= token < len(spec.vocab):
        return repr(spec.vocab[token])
    if spec is not None and spec.tokenizer is not None:
        from tracer.checkpoints.tokenizer import load as load_tokenizer
        from tracer.checkpoints.tokenizer import piece as piece_of

        return repr(piece_of(load_tokenizer(spec.tokenizer), token))
    return f"#{token}"


def choose_token(spec: Spec | None, token: str | int | None, top_of: np.ndarray | None, V: int, option: str = "--token") -> int:
    """--token as an id (0 to V - 1), a vocab word or a token's text in the spec's tokenizer (as `tracer lens --token`
    reads it); None: the argmax of ``top_of`` (the clean run's [V] scores)."""
    if token is None:
        if top_of is None:
            raise UsageError(msg("{option}: no logits to choose the top token from; give {option} ID", option=option))
        return int(np.argmax(top_of))
    if isinstance(token, int) and not isinstance(token, bool):
        text = str(token)
    elif isinstance(token, str):
        text = token
    else:
        raise UsageError(msg("{option}: expected a token id or a word of the vocab, received {got}", option=option, got=type(token).__name__))
    vocab = list(spec.vocab) if spec is not None and spec.vocab is not None else []
    if text in vocab:
        return vocab.index(text)
    if text.lstrip("-").isdigit():
        i = int(text)
        if not 0 <= i < V:
            raise UsageError(msg("{option} {got}: expected a token id 0 to {last} (V = {V})", option=option, got=text, last=V - 1, V=V))
        return i
    from tracer.model.catalogue import suggest

    if spec is not None and spec.tokenizer is not None:
        from tracer.checkpoints.tokenizer import token_id

        return token_id(spec.tokenizer, text, V)
    if not vocab:
        raise UsageError(msg("{option} {got}: the spec has no vocab to look a word up in; give a token id 0 to {last}", option=option, got=text, last=V - 1))
    raise UsageError(msg("{option} {got}: no such word in the spec's vocab{hint}", option=option, got=repr(text), hint=suggest(text, vocab)))


def softmax_row(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()


class Effect(NamedTuple):
    token: int
    text: str  # 'cat' or #3
    b: int
    t: int
    p_clean: float
    p_changed: float
    logit_clean: float
    logit_changed: float
    sentence: Message

    def as_json(self) -> dict[str, Any]:
        return {"token": self.token, "text": self.text.strip("'") if self.text.startswith("'") else None, "b": self.b, "t": self.t,
                "p": {"clean": self.p_clean, "changed": self.p_changed}, "logit": {"clean": self.logit_clean, "changed": self.logit_changed},
                "sentence": self.sentence}


def last_logits(stages: Mapping[str, Stage], b: int) -> np.ndarray | None:
    """The logits [V] at the last position of sample b (None without a head)."""
    st = stages.get("logits")
    if st is None or st.data is None or st.data.ndim != 3 or b >= st.data.shape[0]:
        return None
    return np.asarray(st.data[b, -1], dtype=np.float64)


def subject(changed: Sequence[Any], clean: Sequence[Any]) -> Message:
    """The interventions as the subject of the sentence: 'ablating head 3 of layer 0' (one side intervened)."""
    if changed and not clean:
        return join([iv.phrase() for iv in changed])
    return msg("going from side A to side B")


def effect(clean: Mapping[str, Stage], changed: Mapping[str, Stage], spec: Spec | None, what: Message, token: str | int | None,
           b: int) -> Effect | None:
    """The chosen token's probability and logit at the last position, clean against changed; None without logits."""
    la, lb = last_logits(clean, b), last_logits(changed, b)
    if la is None or lb is None or la.shape != lb.shape:
        return None
    tok = choose_token(spec, token, la, la.shape[0])
    pa, pb = float(softmax_row(la)[tok]), float(softmax_row(lb)[tok])
    t = clean["logits"].shape[1] - 1
    text = token_text(spec, tok)
    ta, tb, ga, gb = f"{pa:.4g}", f"{pb:.4g}", f"{la[tok]:.4g}", f"{lb[tok]:.4g}"
    if pb < pa:
        sentence = msg("{what} lowers p({token}) at b={b}, t={t} from {pa} to {pb} (its logit from {la} to {lb})",
                       what=what, token=text, b=b, t=t, pa=ta, pb=tb, la=ga, lb=gb)
    elif pb > pa:
        sentence = msg("{what} raises p({token}) at b={b}, t={t} from {pa} to {pb} (its logit from {la} to {lb})",
                       what=what, token=text, b=b, t=t, pa=ta, pb=tb, la=ga, lb=gb)
    else:
        sentence = msg("{what} leaves p({token}) at b={b}, t={t} at {pa} (its logit from {la} to {lb})",
                       what=what, token=text, b=b, t=t, pa=ta, la=ga, lb=gb)
    return Effect(tok, text, b, t, pa, pb, float(la[tok]), float(lb[tok]), sentence)
