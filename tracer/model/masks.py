"""An attention mask as its [T,S] matrix of which keys each query may read: the one place that matrix is made.

A stack's mask is one of
- ``none``: every query reads every key;
- ``causal``: query t reads keys 0..t; with a ``window`` W, keys max(0, t - W + 1)..t only (itself and the
  W - 1 before it), as Hugging Face's Mistral does with ``sliding_window = W``; W >= T is plain causal;
- ``explicit``: the spec's own [T,T] matrix of 0 and 1.

``visible`` turns any of them into the boolean matrix (True where query i may read key j); the executor,
the backward pass, the attention heatmap and a comparison of two specs all take it from here.  NumPy is
imported inside the function only: this layer imports no NumPy at module level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def visible(kind: str, n_q: int, n_k: int | None = None, window: int | None = None,
            explicit: Sequence[Sequence[bool]] | None = None) -> np.ndarray:  # -> [n_q, n_k] bool, True where query i may read key j
    """The mask ``kind`` (causal, none or explicit; ``window`` W with causal; ``explicit`` the spec's matrix)
    over ``n_q`` queries and ``n_k`` keys (default n_q).  An explicit matrix is cut to its first n_q rows and n_k
    columns (a run cut short at T_max)."""
    import numpy as np

    n_k = n_q if n_k is None else n_k
    if kind == "explicit":
        if explicit is None:
            raise ValueError("an explicit mask needs its matrix")
        return np.array(explicit, dtype=bool)[:n_q, :n_k]
    if kind == "none":
        return np.ones((n_q, n_k), dtype=bool)
    if kind != "causal":
        raise ValueError(f"unknown mask {kind!r}")
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    seen = j <= i  # keys up to the query
    if window is not None:
        seen &= j > i - window  # and no further back than W - 1 keys
    return seen


def windowed(kind: str, window: int | None, n_q: int) -> bool:
    """Whether a sliding window hides any key over ``n_q`` queries: causal with W < n_q (W >= n_q is plain causal)."""
    return kind == "causal" and window is not None and window < n_q


def label(kind: str, window: int | None, sliding: tuple[int, ...] | None = None) -> str:
    """The mask as a caption names it: causal, none, explicit, 'causal (window 4)', or with Gemma 2's mask.sliding_layers
    'causal (window 4 on layers 0, 2)'."""
    if kind == "causal" and window is not None and sliding is not None:
        return f"{kind} (window {window} on layers {', '.join(map(str, sliding))})"
    return f"{kind} (window {window})" if kind == "causal" and window is not None else kind
