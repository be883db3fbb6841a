"""The vocabulary softmax taken a block of rows at a time (kernels.softmax_by_rows, called by executor.forward_softmax) gives the same numbers as one call."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tracer.engine import executor, kernels
from tracer.model.ops import SOFTMAX_ROWS


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_softmax_by_rows_is_the_one_softmax_to_the_last_bit(dtype: str) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3 * SOFTMAX_ROWS + 5, 777)) * 8).astype(dtype)

    class Recorder:  # what forward_softmax asks of its executor: record the step's result (no array to write into)
        def target(self, stage, shape, dtype):
            return None

        def record_step(self, step, compute):
            return compute([])

    got = executor.forward_softmax(Recorder(), SimpleNamespace(name="probs"), [x])  # type: ignore[arg-type]
    want = kernels.softmax(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_softmax_by_rows_writes_into_the_array_given_with_the_same_numbers(dtype: str) -> None:
    """``out=`` (the lens's stacked tail writing into its [layers, T, V]): the same bits, in that array, small or big."""
    rng = np.random.default_rng(1)
    for shape in ((1, 3, 11), (2, 3 * SOFTMAX_ROWS + 5, 777)):
        x = (rng.standard_normal(shape) * 8).astype(dtype)
        whole = np.full((2, *shape), np.nan, dtype=dtype)
        into = whole[1]
        got = kernels.softmax_by_rows(x, SOFTMAX_ROWS, out=into)
        assert got is into and np.array_equal(into, kernels.softmax(x)) and np.isnan(whole[0]).all()
    with pytest.raises(ValueError):
        kernels.softmax_by_rows(x, SOFTMAX_ROWS, out=np.empty(x.shape, dtype="float16"))
