"""The activations and the vocabulary softmax taken a block at a time and shared between threads (ffn._elementwise,
kernels.softmax_by_rows) give the numbers of the same operations on the whole array, to the last bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracer.engine import blas, kernels
from tracer.engine.kernels import ffn


def whole_gelu_tanh(x: np.ndarray) -> np.ndarray:  # the operations of ffn.gelu_tanh, each on the whole array
    t = np.multiply(x, 0.044715)
    t *= x
    t *= x
    t += x
    t *= math.sqrt(2.0 / math.pi)
    np.tanh(t, out=t)
    t += 1.0
    y = np.multiply(x, 0.5)
    y *= t
    return y


def whole_silu(x: np.ndarray) -> np.ndarray:
    t = np.exp(np.negative(x))
    t += 1.0
    return np.divide(x, t)


@pytest.fixture(params=[1, 2, 3], ids=["one-thread", "two-threads", "three-threads"])
def threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    n = request.param
    monkeypatch.setattr(blas, "workers", lambda tasks, work, at_least=1: max(1, min(n, tasks)))
    return n


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("size", [7, ffn.ELEMENTWISE_BLOCK, 5 * ffn.ELEMENTWISE_BLOCK + 13])
@pytest.mark.parametrize("name", ["gelu_tanh", "silu"])
def test_an_activation_by_blocks_is_the_whole_array_operation_to_the_bit(threads: int, dtype: str, size: int, name: str) -> None:
    rng = np.random.default_rng(size)
    x = (rng.standard_normal(size) * 6).astype(dtype)
    x[:5] = [0.0, -0.0, 40.0, -40.0, 1e-3]  # tanh and exp saturate; the signed zero
    x = x.reshape(1, -1)
    fn = getattr(ffn, name)
    with np.errstate(all="ignore"):  # float16's exp overflows to inf, in both
        want, got = {"gelu_tanh": whole_gelu_tanh, "silu": whole_silu}[name](x), fn(x)
    assert got.dtype == want.dtype and got.shape == want.shape and got is not x
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))  # the same bits, the signs of zeros too
    mine = x.copy()
    with np.errstate(all="ignore"):
        inplace = fn(mine, inplace=True)
    assert inplace is mine and np.array_equal(mine.view(np.uint8), want.view(np.uint8))


def test_a_strided_input_is_computed_whole_with_the_same_numbers() -> None:
    x = np.random.default_rng(1).standard_normal((300, 400))[:, ::3]
    assert not x.flags.c_contiguous
    assert np.array_equal(ffn.gelu_tanh(x), whole_gelu_tanh(x))
    assert np.array_equal(ffn.silu(x), whole_silu(x))


def test_nan_and_inf_pass_through_the_blocks_as_through_the_whole_array(threads: int) -> None:
    x = np.random.default_rng(2).standard_normal(3 * ffn.ELEMENTWISE_BLOCK)
    x[[5, ffn.ELEMENTWISE_BLOCK, -1]] = [np.nan, np.inf, -np.inf]
    with np.errstate(all="ignore"):
        want, got = whole_gelu_tanh(x), ffn.gelu_tanh(x)
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_softmax_by_rows_on_threads_is_one_softmax_to_the_bit(threads: int, dtype: str) -> None:
    x = (np.random.default_rng(3).standard_normal((2, 7 * 4 + 3, 501)) * 8).astype(dtype)
    got = kernels.softmax_by_rows(x, 4)
    want = kernels.softmax(x)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("dtype", [">f8", "complex128"])
def test_other_dtypes_are_one_numpy_expression_as_before(dtype: str) -> None:
    x = (np.random.default_rng(4).standard_normal(2 * ffn.ELEMENTWISE_BLOCK + 3) * 3).astype(dtype)
    for fn, whole in ((ffn.gelu_tanh, whole_gelu_tanh), (ffn.silu, whole_silu)):
        want, got = whole(x), fn(x)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        mine = x.copy()
        assert fn(mine, inplace=True) is mine and np.array_equal(mine, want)
