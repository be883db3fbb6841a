"""The k most probable tokens of a row, found by a partition of the row, are those a stable sort of the whole row gives:
the same ids in the same order, ties to the lower id, NaN last."""

from __future__ import annotations

import numpy as np
import pytest

from tracer.views.text import top_tokens


class NoWords:
    tokenizer = None
    vocab = None


@pytest.mark.parametrize("seed", range(4))
def test_the_top_k_by_partition_are_the_stable_sorts_first_k(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for trial in range(500):
        n, k = int(rng.integers(1, 80)), int(rng.integers(1, 12))
        if trial % 2:  # many ties, signed zeros, infinities and NaN
            p = rng.choice([0.0, -0.0, 0.1, 0.5, 1.0, np.inf, -np.inf, np.nan], size=n)
        else:
            p = rng.random(n).astype(rng.choice([np.float32, np.float64]))
        want = [int(i) for i in np.argsort(-np.asarray(p, dtype=np.float64), kind="stable")[:k]]
        got = top_tokens(NoWords(), p, k)  # type: ignore[arg-type]
        assert [i for i, _, _ in got] == want, (p, k)
        assert all(prob == float(p[i]) or (np.isnan(prob) and np.isnan(p[i])) for i, _, prob in got)
