"""Direct logit attribution: a token's logit at one position split into the parts of the residual stream.

In a Pre-Norm (or parallel) decoder the residual stream the final norm reads is a sum: the embeddings (the token's row
of E, the position's row of P) and every layer's attention and FFN outputs added to it.  An attention output is itself
a sum: one term a head (its slice of the heads mix, stage ``ATTN.heads``, through its rows of W_O) and the bias b_O.
The final norm is linear once its scale is frozen, taken from the full residual r as TransformerLens does: LayerNorm's
y = gamma * (r - mean r) / sigma + beta with sigma = sqrt(var r + eps), so a part c adds
gamma * (c - mean c) / sigma . u to the logit, u the head's column of the token (through project_out and the head's
scale where the spec has them), and beta . u (and the head's bias) is an offset of its own.  RMSNorm subtracts no mean
and has no beta.  So the parts sum to the logit exactly, to rounding; ``--against B`` splits logit[A] - logit[B] the
same way (u the difference of the two columns).

Refused in one line where the split would not be exact: a spec with no head, an encoder-decoder, a stack whose residual
passes through a norm (block.norm_order: post, where each layer's output is a norm of the stream; sandwich, where each
sublayer's output is normalised before its add, so its heads are not a sum), the head's soft cap (not linear), a
batch norm after the stack (its statistics mix samples), and any other step between the stack and the head.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tracer.errors import SweepStopped, UsageError
from tracer.messages import at, msg
from tracer.model.blocks import NORM_OPS, Step
from tracer.model.ops import internal_prefix
from tracer.spec import Spec

if TYPE_CHECKING:
    from tracer.engine.executor import Recording

SUMS = ("add", "add_position", "identity")  # the steps that add their inputs up (an identity passes its one on)
FINAL_NORMS = ("layer_norm", "rms_norm", "rms_norm_offset")


class Tail(NamedTuple):
    """What the head reads, from the residual on: the final norm, OPT's project_out, T5's scale, the head itself."""

    residual: str  # the stage the parts sum to
    norm: Step | None
    project: Step | None
    scaled: bool  # block.head_scale: the head reads its input times C ** -0.5
    head: Step


def _refuse(spec: Spec, text: Any) -> UsageError:
    return UsageError(at(spec.path, text))


def tail_of(spec: Spec) -> Tail:
    """The steps between the residual stream and the logits; a UsageError naming why where the split is not exact."""
    if spec.model != "decoder":
        raise _refuse(spec, msg("tracer attribute splits a decoder-only stack's residual stream; an encoder-decoder is not one"))
    heads = [s for s in spec.steps if s.op == "head"]
    if not heads:
        raise _refuse(spec, msg("tracer attribute splits a token's logit, and this spec has no head (block.head: none): nothing scores the vocabulary"))
    order = spec.block.norm_order
    if order == "post":
        raise _refuse(spec, msg("tracer attribute splits the residual stream into a sum of parts, and in a Post-Norm stack (block.norm_order: post) "
                                "each layer's output is a norm of the stream, not a sum: the split would not be exact"))
    if order == "sandwich":
        raise _refuse(spec, msg("tracer attribute splits the residual stream into a sum of parts, and in a sandwich stack (block.norm_order: sandwich) "
                                "each sublayer's output is normalised before it is added, so its heads are not a sum: the split would not be exact"))
    head = heads[0]
    capped = [s for s in spec.steps if s.op == "softcap"]
    if capped:
        raise _refuse(spec, msg("tracer attribute splits the logits linearly, and this head soft-caps them (block.head_softcap: {cap}): "
                                "cap * tanh(x / cap) is not a sum of its parts", cap=f"{capped[0].softcap:g}"))
    by = {s.name: s for s in spec.steps}
    step = by[head.inputs[0]]
    scaled = step.op == "head_scale"
    if scaled:
        step = by[step.inputs[0]]
    project = None
    if step.op == "linear" and not step.name.startswith("blocks."):
        project, step = step, by[step.inputs[0]]
    norm = None
    if step.op in NORM_OPS:
        if step.op not in FINAL_NORMS or (step.axis or "C") != "C":
            raise _refuse(spec, msg("tracer attribute freezes the final norm's scale of each position, and {stage} ({op}) takes its statistics "
                                    "over more than one position", stage=step.name, op=step.op))
        norm, step = step, by[step.inputs[0]]
    return Tail(step.name, norm, project, scaled, head)


def leaves(spec: Spec, residual: str) -> list[str]:
    """The stages the residual is the sum of, in step order (embeddings first), through every add."""
    by = {s.name: s for s in spec.steps}
    out: list[str] = []
    todo = [residual]
    while todo:  # depth first, left input first: a loop, not recursion (a thousand layers nest two thousand adds)
        name = todo.pop()
        step = by.get(name)
        if step is not None and step.op in SUMS:
            todo.extend(reversed(step.inputs))
            continue
        if step is not None and step.op in NORM_OPS and name != _entry(spec):
            raise _refuse(spec, msg("tracer attribute splits the residual stream into a sum of parts, and {stage} normalises a sum before it is "
                                    "added on (block.norm_order: {order}): the parts' outputs do not add up to the stream",
                                    stage=name, order=spec.block.norm_order))
        out.append(name)
    return out


def _entry(spec: Spec) -> str:
    """The stream entering the first layer ('x'): what the embedding steps make (BERT's embedding norm is one of them)."""
    names = [s.name for s in spec.steps]
    return "x" if "x" in names else ""


class Part(NamedTuple):
    name: str  # embed, position, blocks.0.attn.head.1, blocks.0.attn.bias, blocks.0.ffn, final_norm.beta, head.bias
    value: float
    layer: int | None  # the layer it is part of; None: the embeddings, the final norm, the head
    head: int | None  # a head's number (its layer's attention)


def _layer(spec: Spec, name: str) -> int | None:
    m = re.match(r"blocks\.(\d+)\.", name)
    if m:
        return int(m.group(1))
    names = [s.name for s in spec.steps]
    entry = names.index("x") if "x" in names else -1
    return 0 if name in names and names.index(name) > entry else None  # a one-layer spec's stages have no prefix


class Attribution:
    """The parts of the logit of ``token`` (minus ``against``'s) at sample ``b``, position ``t``: ``parts`` sum to
    ``total``, which the run's own ``logit`` equals to rounding.  Shows as the table ``tracer attribute`` prints."""

    def __init__(self, spec: Spec, b: int, t: int, token: int, against: int | None, parts: list[Part], logit: float,
                 scale: float | None, precision: int = 4) -> None:
        self.spec, self.b, self.t, self.token, self.against, self.parts = spec, b, t, token, against, parts
        self.logit = logit  # the run's own logit (difference)
        self.scale = scale  # 1 / sigma (or 1 / rms) of the final norm at (b, t); None: no final norm
        self.precision = precision

    @property
    def total(self) -> float:
        return float(sum(p.value for p in self.parts))

    @property
    def values(self) -> np.ndarray:
        return np.array([p.value for p in self.parts])

    def shares(self) -> np.ndarray:
        """Each part over the sum of the parts' sizes, sign kept: the sizes of the shares add up to 1."""
        size = float(np.abs(self.values).sum())
        return self.values / size if size else np.zeros(len(self.parts))

    def heads(self) -> tuple[list[int], np.ndarray]:
        """The layers that have heads, and each one's heads' values [layers, H] (NaN where a layer has fewer)."""
        layers = sorted({p.layer for p in self.parts if p.head is not None and p.layer is not None})
        H = max([p.head for p in self.parts if p.head is not None] + [-1]) + 1
        grid = np.full((len(layers), H), np.nan)
        for p in self.parts:
            if p.head is not None and p.layer is not None:
                grid[layers.index(p.layer), p.head] = p.value
        return layers, grid

    def word(self, token: int) -> str:
        from tracer.compare.effect import token_text

        return token_text(self.spec, token)

    def what(self) -> str:
        """'cat' or 'cat' - 'mat': what was split."""
        return self.word(self.token) if self.against is None else f"{self.word(self.token)} - {self.word(self.against)}"

    def as_json(self) -> dict[str, Any]:
        from tracer.views.text import token_word
        from tracer.views.trace_json import SCHEMA_VERSION

        def tok(i: int | None) -> dict[str, Any] | None:
            return None if i is None else {"id": i, "text": token_word(self.spec, i) or None}

        return {"schema_version": SCHEMA_VERSION, "kind": "attribute", "spec": {"path": self.spec.path, "name": self.spec.name},
                "token": tok(self.token), "against": tok(self.against), "b": self.b, "position": self.t,
                "logit": self.logit, "sum": self.total, "final_norm_scale": self.scale,
                "components": [{"name": p.name, "value": p.value, "layer": p.layer, "head": p.head} for p in self.parts]}

    def __rich__(self) -> object:
        from tracer.attribute.view import attribution_view

        return attribution_view(self)

    def _repr_html_(self) -> str:
        from tracer.views.display import View

        return View(self.__rich__())._repr_html_()  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"<tracer attribute {self.spec.name!r}: {len(self.parts)} parts of the logit of {self.what()} at b={self.b}, t={self.t}>"


def token_of(spec: Spec, token: str | int, option: str) -> int:
    """--token / --against: an id, a word of the spec's vocab, or a token's text in its tokenizer (as tracer lens reads it)."""
    from tracer.compare.effect import choose_token

    V = int(spec.dims.V or 0)
    text = str(token)
    is_id = text.lstrip("-").isdigit()
    if spec.tokenizer is not None and not is_id and not (spec.vocab and text in spec.vocab):
        from tracer.checkpoints.tokenizer import find
        from tracer.checkpoints.tokenizer import load as load_tokenizer

        found = find(load_tokenizer(spec.tokenizer), text)
        if found is None or not 0 <= found < V:
            raise UsageError(msg("{option} {token}: the tokenizer has no single token with this text (give its id instead)", option=option, token=repr(text)))
        return int(found)
    return choose_token(spec, token, None, V, option)


def vector(run: Recording, name: str, b: int, t: int) -> np.ndarray:
    return np.asarray(run.stages[name].at(b, t), dtype=np.float64)


def direction(spec: Spec, tail: Tail, params: dict[str, np.ndarray], token: int, against: int | None) -> tuple[np.ndarray, list[tuple[str, float]]]:
    """u, the logit's derivative by what the final norm gives out (through project_out and the head's scale), and the
    offset the head adds after it (project_out's bias and the head's, through the head)."""
    W = params["embedding"].T if spec.block.head == "tied" else params["head"]  # [C_e, V]
    u = np.asarray(W[:, token], dtype=np.float64).copy()
    bias = 0.0
    if spec.block.head_bias:
        bias = float(params["head_bias"][token])
    if against is not None:
        u -= np.asarray(W[:, against], dtype=np.float64)
        if spec.block.head_bias:
            bias -= float(params["head_bias"][against])
    if tail.scaled:  # the factor as the kernel rounds it to the run's dtype
        u *= float(np.asarray(float(W.shape[0]) ** -0.5, dtype=np.dtype(spec.dtype)))
    offset = [("head.bias", bias)] if spec.block.head_bias else []
    if tail.project is not None:
        w, b = (np.asarray(params[f"{tail.project.weights}.{k}"], dtype=np.float64) for k in ("w", "b"))
        offset.insert(0, (f"{tail.project.name}.bias", float(b @ u)))
        u = w @ u
    return u, offset


def attribute(spec: Spec, run: Recording, params: dict[str, np.ndarray], b: int, t: int, token: int | None = None,
              against: int | None = None, precision: int = 4) -> Attribution:
    """The attribution of a finished run (the leaves, the heads mixes and the residual recorded in full)."""
    tail = tail_of(spec)
    if not run.ok:
        v = run.violations[0]
        raise SweepStopped(at(spec.path, msg("the run flagged a {kind} violation at {stage}: tracer attribute splits a run free of violations "
                                             "(`tracer run SPEC` shows it)", kind=v.kind, stage=v.stage)))
    logits = vector(run, tail.head.name, b, t)
    if token is None:
        token = int(np.argmax(logits))
    u, offsets = direction(spec, tail, params, token, against)
    logit = float(logits[token] - (logits[against] if against is not None else 0.0))
    centred, scale = False, None
    if tail.norm is not None:
        g = np.asarray(params[f"{tail.norm.weights}.gamma"], dtype=np.float64)
        gamma = 1.0 + g if tail.norm.op == "rms_norm_offset" else g
        r = vector(run, tail.residual, b, t)
        centred = tail.norm.op == "layer_norm"
        c = r - r.mean() if centred else r
        scale = float(1.0 / np.sqrt(np.mean(c * c) + tail.norm.epsilon()))
        if centred:
            beta = np.asarray(params[f"{tail.norm.weights}.beta"], dtype=np.float64)
            offsets.insert(0, (f"{tail.norm.name}.beta", float(beta @ u)))
        u = gamma * u * scale

    def value(vec: np.ndarray) -> float:
        return float((vec - vec.mean()) @ u if centred else vec @ u)

    by = {s.name: s for s in spec.steps}
    parts: list[Part] = []
    for name in leaves(spec, tail.residual):
        step = by.get(name)
        layer = _layer(spec, name)
        if step is not None and step.op == "mha":
            parts += _heads(spec, run, params, step, b, t, value, layer)
        else:
            parts.append(Part(name, value(vector(run, name, b, t)), layer, None))
    parts += [Part(name, v, None, None) for name, v in offsets]
    return Attribution(spec, b, t, token, against, _merged(parts), logit, scale, precision)


def _heads(spec: Spec, run: Recording, params: dict[str, np.ndarray], step: Step, b: int, t: int, value: Any, layer: int | None) -> list[Part]:
    """An attention output's parts: each head's slice of the mix through its rows of W_O, then the bias b_O."""
    prefix = internal_prefix(step)
    mix = vector(run, f"{prefix}.heads", b, t)  # [C_q]
    w_o = np.asarray(params[f"{step.weights}.w_o"], dtype=np.float64)
    H = spec.dims.H
    d = mix.size // H
    out = [Part(f"{prefix}.head.{h}", value(mix[h * d:(h + 1) * d] @ w_o[h * d:(h + 1) * d]), layer, h) for h in range(H)]
    out.append(Part(f"{prefix}.bias", value(np.asarray(params[f"{step.weights}.b_o"], dtype=np.float64)), layer, None))
    return out


def _merged(parts: list[Part]) -> list[Part]:
    """A stage the residual reaches twice (a spec's own add of x and x) is one part, its terms added."""
    seen: dict[str, int] = {}
    out: list[Part] = []
    for p in parts:
        if p.name in seen:
            q = out[seen[p.name]]
            out[seen[p.name]] = q._replace(value=q.value + p.value)
        else:
            seen[p.name] = len(out)
            out.append(p)
    return out


def needed(spec: Spec) -> list[str]:
    """The stages attribute reads: the residual, its leaves, the heads mixes, the logits."""
    tail = tail_of(spec)
    by = {s.name: s for s in spec.steps}
    names = [tail.residual, tail.head.name]
    for name in leaves(spec, tail.residual):
        step = by.get(name)
        names.append(f"{internal_prefix(step)}.heads" if step is not None and step.op == "mha" else name)
    return names
