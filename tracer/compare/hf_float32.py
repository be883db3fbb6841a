"""A float64 import of a Hugging Face checkpoint diffed against Hugging Face's own forward: float32's rounding, not a mistake.

Hugging Face's modeling code for LLaMA and its kin computes RMSNorm, the rotary angles and the softmax in float32 even
inside a float64 model (docs/llama.md#checked-against-hugging-face-and-why-not-to-1e-12; each family's Layout.float32
says which steps).  Its float64 forward therefore parts from tracer's by float32's rounding: about 1e-7 of a stage's
largest value after two layers (tests/checkpoints/test_llama.py measures 1e-7 to 3e-7), far outside tracer diff's
float64 tolerance (1e-9) and far inside a real mistake's size (the other rotary pairing misses the attention weights by
more than 1e-3; a wrong weight, a missing term, an axis or a scale by far more).

``float32_rounding`` says so, with the tolerance that fits, when the spec side is such an import run in float64, the
other side's arrays are float64, and every recorded stage is within BOUND of its largest value.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tracer.compare.status import EQUAL, SHAPES_DIFFER
from tracer.messages import Message, msg

if TYPE_CHECKING:
    from tracer.compare.align import Side
    from tracer.compare.judge import DiffResult

# Relative to a stage's largest |value|: float32's own tolerance (tracer diff's rtol for float32 arrays).  float32 keeps
# 24 bits (a rounding is at most 2^-24 = 6e-8 of the value), so 1e-5 holds about 170 of them, room for a deep model's
# layers to add theirs up (two layers: 1e-7 to 3e-7), while every mistake the diagnoses name moves a stage by more
# (the smallest, ddof=1 in a LayerNorm, by 1/(2C): 6e-5 at C = 8192).
BOUND = 1e-5


class Rounding(NamedTuple):
    steps: Message  # what Hugging Face computes in float32 ("RMSNorm, the rotary angles and the softmax")
    layout: str  # the spec's --layout name
    share: float  # the largest |A - B| of a recorded stage over that stage's largest |value|
    atol: float  # a tolerance that fits: every recorded stage agrees at (atol, rtol)
    rtol: float

    def message(self, other: str) -> Message:
        """The cause in words, ``other`` being the arrays' side (A or B)."""
        return msg("every recorded stage is within {share} of its largest value, the size of float32's rounding. If {other} is Hugging Face's "
                   "forward: Hugging Face computes {steps} in float32 even in a float64 model (docs/llama.md), so differences of this size are "
                   "its float32 rounding, not a mistake; a tolerance of 1e-5 of the largest value fits: --rtol {rtol} --atol {atol}",
                   share=f"{self.share:.2g}", other=other, steps=self.steps, rtol=power(self.rtol), atol=power(self.atol))


def power(x: float) -> str:
    """A power of ten as the command line is given it: 1e-5, 1e-3, 1e2."""
    return f"1e{round(math.log10(x))}"


def float32_rounding(result: DiffResult, ref: Side, mine: Side) -> Rounding | None:
    """The float32 cause when it fits, else None: ``ref`` is a float64 spec whose weights come through a layout whose
    Hugging Face code keeps steps in float32, ``mine`` holds float64 arrays (no float32 or float16 ones), and every
    compared stage is finite and within BOUND of its largest value (a stage of another shape: None).  The tolerance
    suggested is rtol BOUND and atol BOUND times the largest value of any recorded stage, rounded up to a power of ten:
    every recorded stage then agrees (|A - B| <= BOUND * its scale <= atol)."""
    from tracer.checkpoints.families import layouts

    spec = ref.spec
    if spec is None or spec.dtype != "float64" or spec.layout is None or mine.dtype is not None:
        return None
    layout = layouts().get(spec.layout)
    if layout is None or layout.float32 is None:
        return None
    share, top = 0.0, 0.0
    compared = 0
    for row in result.stages:
        if row.status == SHAPES_DIFFER:
            return None
        ours, theirs = ref.stages.get(row.name), mine.stages.get(row.name)
        if ours is None or theirs is None or row.max_abs_diff is None:
            continue
        compared += 1
        if row.status == EQUAL:
            continue
        if not math.isfinite(row.max_abs_diff):
            return None
        values = np.abs(np.asarray(ours.array, dtype=np.float64))
        finite = values[np.isfinite(values)]  # masked scores: -inf where the mask hides a key, on both sides
        scale = float(finite.max()) if finite.size else 0.0
        if scale == 0.0 or row.max_abs_diff > BOUND * scale:
            return None
        share, top = max(share, row.max_abs_diff / scale), max(top, scale)
    if not compared or share == 0.0:
        return None
    atol = 10.0 ** math.ceil(math.log10(BOUND * top))
    return Rounding(layout.float32, layout.name, share, atol, BOUND)
