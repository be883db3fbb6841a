"""The same block with the classic LayerNorm bug: the variance divided by C-1 (NumPy's and torch's ddof=1 / unbiased).

    python examples/your-implementation/numpy_block_buggy.py buggy.npz
    tracer diff specs/ch17-prenorm.yaml buggy.npz       # exit 1: first diverging stage norm1, and the hint says why
"""

from __future__ import annotations

import sys

import numpy as np
from numpy_block import EPS, main


def layer_norm_unbiased(x: np.ndarray) -> np.ndarray:  # [T,C] -> [T,C]
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, ddof=1, keepdims=True)  # the bug: divides by C-1
    return (x - mu) / np.sqrt(var + EPS)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "buggy.npz", norm=layer_norm_unbiased)
