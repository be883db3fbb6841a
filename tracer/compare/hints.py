"""What a first divergence usually means, for a student diffing their own block (``tracer diff SPEC mine.npz``).

Two parts, both plain data (English; rendered in the current language at the edge):

- advice by what the stage computes: a LayerNorm stage points at the LayerNorm's usual mistakes
  (divide by C, not C-1; ε inside the square root; statistics over C), a residual add at a missing
  term, attention at the softmax's axis, the mask and W_O.  "norm2 differs but residual1 agrees"
  says the bug sits between the two.
- a diagnosis when the user's array *is* one of the typical bugs: the bug is recomputed from
  tracer's own stages (LayerNorm with ddof=1 or over another axis, the add without its residual,
  attention without W_O, softmax over the queries, the mask after the softmax) and compared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tracer.engine.executor import Stage
from tracer.i18n import tr
from tracer.model.blocks import Step

if TYPE_CHECKING:
    from tracer.compare.core import DiffResult, Side

LN = ("LayerNorm (divide by C, not C-1; ε inside the square root; mean and variance over the C coordinates of each position, "
      "not over T or B)")
ADVICE = {
    "layer_norm": LN,
    "rms_norm": "RMSNorm (the mean of the squares over C, ε inside the square root, no mean subtracted)",
    "batch_norm": "BatchNorm (mean and variance over B and T, per coordinate)",
    "mha": "attention: the softmax over the keys (the last axis), not the queries; the mask before the softmax, not after; "
           "the scores divided by sqrt(d); the heads times W_O. Record attn.weights and attn.heads to see which",
    "cross_mha": "cross-attention: queries from the decoder, keys and values from the encoder output; the softmax over the keys",
    "scores": "the scores: Q_h K_h^T / sqrt(d) for each head, queries as rows, before the mask",
    "weights": "the softmax: over the keys (the last axis), not the queries, with the mask applied before it (each row sums to 1)",
    "heads": "the mixing: the weights times V for each head, the heads concatenated in order, before W_O",
    "q": "the projections: X W_Q + b_Q (likewise K and V), split into H heads of width d",
    "add": "the residual add: both terms, the stream and the sublayer's output",
    "ffn_hidden": "the FFN's first layer: act(N_2 W_1 + b_1), reading the second normalisation",
    "ffn_out": "the FFN's second layer: hidden W_2 + b_2",
    "ffn": "the FFN: act(N_2 W_1 + b_1) W_2 + b_2, reading the second normalisation",
    "input": "the input: the rows of E for the token ids, plus the rows of P (X = E + P)",
    "shape": "the array's shape: record it with tracer's axes, in the book's order (see the shape columns)",
    "other": "the step that computes it",
}
ADVICE["k"] = ADVICE["v"] = ADVICE["q"]
for _op in ("embed", "position_table", "sinusoidal", "add_position"):
    ADVICE[_op] = ADVICE["input"]

# A diagnosis is a template with {stage}, {term}, {other}, {axis}: filled in, then translated as a whole.
DDOF = "Your {stage} equals LayerNorm with the variance divided by C-1 (ddof=1): divide by C"
AXIS = "Your {stage} equals LayerNorm with its mean and variance taken over {axis} instead of over C"
NO_RESIDUAL = "Your {stage} equals {term} alone: the residual add is missing (add {other})"
NO_W_O = "Your {stage} equals the heads before W_O: multiply by W_O (and add b_O)"
QUERIES = "Your {stage} equals attention with the softmax taken over the queries: take it over the keys (the last axis)"
MASK_AFTER = "Your {stage} equals attention with the mask applied after the softmax: mask the scores first (-inf on future keys), then the softmax"
AXIS_LABELS = {"T": "T (the positions)", "B": "B (the samples)"}

LEAD_AGREES = "{stage} differs but {prev} agrees"
LEAD_FIRST = "{stage} differs and no stage before it was compared"
LEAD_SHAPE = "{stage} has another shape than tracer's"


class Hint(NamedTuple):
    stage: str
    prev: str | None  # the last stage before it that agrees
    lead: str
    advice: str
    diagnosis: str | None = None
    fields: dict[str, str] = {}

    def text(self) -> str:
        """In the current language."""
        out = tr("{lead}: look at {advice}", lead=tr(self.lead, stage=self.stage, prev=self.prev or ""), advice=tr(self.advice))
        if self.diagnosis:
            fields = {k: tr(v) if k == "axis" else v for k, v in self.fields.items()}  # AXIS_WORDS: UI words too
            out = tr("{hint}. {diagnosis}", hint=out, diagnosis=tr(self.diagnosis, stage=self.stage, **fields))
        return out

    def english(self) -> str:
        from tracer.i18n import using

        with using("en"):
            return self.text()


def _kind(name: str, stage: Stage | None, steps: dict[str, Step]) -> str:
    step = steps.get(name)
    if step is not None:
        return step.op if step.op in ADVICE else "other"
    last = name.rsplit(".", 1)[-1]
    return last if stage is not None and stage.internal and last in ADVICE else "other"


def hint_for(result: DiffResult, ref: Side, mine: Side) -> Hint | None:
    """The hint for the first diverging stage of a diff against another program's arrays; None when all agree."""
    from tracer.compare.status import EQUAL, SHAPES_DIFFER

    first = result.first_diverging
    if first is None:
        return None
    rows = result.stages[: result.stages.index(first)]
    prev = next((r.name for r in reversed(rows) if r.status == EQUAL), None)
    ours = ref.stages.get(first.name)
    theirs = mine.stages.get(first.name)
    steps = {s.name: s for s in ref.steps}
    if first.status == SHAPES_DIFFER:
        return Hint(first.name, prev, LEAD_SHAPE, ADVICE["shape"])
    kind = _kind(first.name, ours, steps)
    lead = LEAD_AGREES if prev else LEAD_FIRST
    found = None
    if theirs is not None and ours is not None:
        found = diagnose(first.name, theirs.array, ref, steps.get(first.name))
    if found is None:
        return Hint(first.name, prev, lead, ADVICE[kind])
    return Hint(first.name, prev, lead, ADVICE[kind], found[0], found[1])


# -- diagnoses: recompute a typical bug from tracer's stages and compare --------------------------

def _close(a: np.ndarray | None, b: np.ndarray) -> bool:
    return a is not None and a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True))


def diagnose(name: str, theirs: np.ndarray, ref: Side, step: Step | None) -> tuple[str, dict[str, str]] | None:
    stages = {n: s.array for n, s in ref.stages.items() if s.data is not None}
    ours = stages.get(name)
    params = ref.weights or {}
    if step is None:
        if name.endswith(".weights") and ours is not None:  # an attention's weights, recorded
            for template, alt in _softmax_variants(stages.get(name[: -len("weights")] + "scores"), ours):
                if _close(alt, theirs) and not _close(alt, ours):
                    return template, {}
        return None
    if step.op == "layer_norm" and step.inputs and step.weights and ref.spec is not None:
        x = stages.get(step.inputs[0])
        gamma, beta = params.get(f"{step.weights}.gamma"), params.get(f"{step.weights}.beta")
        if x is None or gamma is None or beta is None or x.ndim != 3:
            return None
        eps = ref.spec.block_for(name).eps
        if x.shape[-1] > 1 and _close(_layer_norm(x, gamma, beta, eps, -1, ddof=1), theirs):
            return DDOF, {}
        for axis, letter in ((1, "T"), (0, "B")):
            alt = _layer_norm(x, gamma, beta, eps, axis)
            if _close(alt, theirs) and not _close(alt, ours if ours is not None else alt + 1):
                return AXIS, {"axis": AXIS_LABELS[letter]}
    elif step.op == "add" and len(step.inputs) == 2:
        for i, term in enumerate(step.inputs):
            if _close(stages.get(term), theirs) and not _close(stages.get(term), ours if ours is not None else theirs + 1):
                return NO_RESIDUAL, {"term": term, "other": step.inputs[1 - i]}
    elif step.op == "mha" and step.weights:
        from tracer.model.blocks import internal_prefix

        prefix = internal_prefix(step)
        if _close(stages.get(f"{prefix}.heads"), theirs):
            return NO_W_O, {}
        v, w_o, b_o = stages.get(f"{prefix}.v"), params.get(f"{step.weights}.w_o"), params.get(f"{step.weights}.b_o")
        weights = stages.get(f"{prefix}.weights")
        if v is None or w_o is None or b_o is None or weights is None:
            return None
        for template, alt in _softmax_variants(stages.get(f"{prefix}.scores"), weights):
            out = _merge(alt @ v) @ w_o + b_o  # [B,H,T,T] @ [B,H,T,d] -> [B,T,C]
            if _close(out, theirs) and not _close(out, ours if ours is not None else out + 1):
                return template, {}
    return None


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, axis: int, ddof: int = 0) -> np.ndarray:
    mu = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True, ddof=ddof)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def _softmax(s: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(s - np.max(s, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _softmax_variants(scores: np.ndarray | None, weights: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The weights under the two typical softmax bugs; the mask is read off tracer's weights (0 where masked)."""
    if scores is None or scores.shape != weights.shape:
        return []
    visible = weights > 0
    masked = np.where(visible, scores, -np.inf)
    return [(QUERIES, np.nan_to_num(_softmax(masked, -2))), (MASK_AFTER, _softmax(scores, -1) * visible)]


def _merge(heads: np.ndarray) -> np.ndarray:  # [B,H,T,d] -> [B,T,H*d]
    B, H, T, d = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(B, T, H * d)
