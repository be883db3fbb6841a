"""Rotary scaling: how a rope type changes each pair's turning speed, as transformers' modeling_rope_utils does.

A spec's ``block.rope_scaling`` is ``{type: linear, factor: F}`` (every speed divided by F) or ``{type: llama3,
factor: F, low_freq_factor: l, high_freq_factor: h, original_max_position_embeddings: N}`` (Llama 3.1's: a pair whose
wavelength 2 pi / speed is above N / l slows by F, one below N / h keeps its speed, and one between is interpolated).
A step holds it as ``("linear", F)`` or ``("llama3", F, l, h, N)``.  Plain Python (the kernel and the scalar reference
both call ``scaled``), no NumPy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ROPE_TYPES = ("linear", "llama3")
LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def scaled(speeds: Sequence[float], scaling: tuple[object, ...] | None) -> list[float]:
    """Each pair's turning speed (radians a position: base^(-2i/d)) after ``scaling`` (None: unchanged)."""
    if scaling is None:
        return list(speeds)
    kind, factor = scaling[0], float(scaling[1])  # type: ignore[arg-type]
    if kind == "linear":
        return [s / factor for s in speeds]
    low, high, context = (float(v) for v in scaling[2:5])  # type: ignore[arg-type]
    low_wavelen, high_wavelen = context / low, context / high
    out = []
    for s in speeds:
        wavelen = 2 * math.pi / s
        slow = s / factor if wavelen > low_wavelen else s
        if not wavelen < high_wavelen and not wavelen > low_wavelen:  # medium: between the two, smoothly
            smooth = (context / wavelen - low) / (high - low)
            slow = (1 - smooth) * slow / factor + smooth * slow
        out.append(slow)
    return out


def describe(scaling: tuple[object, ...] | None) -> str:
    """'linear x4' | 'llama3 x8 (1, 4, 8192)' | '' for none."""
    if scaling is None:
        return ""
    if scaling[0] == "linear":
        return f"linear x{scaling[1]:g}"
    return f"llama3 x{scaling[1]:g} ({scaling[2]:g}, {scaling[3]:g}, {scaling[4]:g})"
