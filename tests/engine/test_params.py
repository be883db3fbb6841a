"""Weights as arrays: keywords, given values, and seeded draws (reproducible, documented bounds)."""

import math

import numpy as np
import pytest
from conftest import PRE, SPECS, load_text, run_cli

from tracer.engine.params import load_input, load_params
from tracer.spec import load_spec

BASE = """
dims: {B: 2, T: 16, C: 64, H: 4, F: 256, V: 50}
block: {positions: learned}
input: {tokens: random}
seed: 5
"""


def params_of(text):
    spec = load_text(text)
    return load_params(spec), load_input(spec)


def test_same_spec_twice_gives_identical_arrays():
    (p1, x1), (p2, x2) = params_of(BASE), params_of(BASE)
    assert p1.keys() == p2.keys()
    for k in p1:
        assert p1[k].dtype == np.float64
        assert p1[k].tobytes() == p2[k].tobytes(), k
    np.testing.assert_array_equal(x1, x2)


def test_adding_a_weight_does_not_change_the_other_draws():
    p_all, _ = params_of(BASE)
    given = (BASE.replace("positions: learned", "positions: learned, final_norm: true")
             + "weights:\n  attn: {w_q: identity, b_o: random}\n  ffn: {w2: random}\n")
    p_more, _ = params_of(given)
    np.testing.assert_array_equal(p_more["attn.w_q"], np.eye(64))
    for k in ("attn.w_k", "attn.w_v", "attn.w_o", "ffn.w1", "ffn.w2", "embedding", "position"):
        assert p_more[k].tobytes() == p_all[k].tobytes(), k


def test_a_different_seed_gives_different_draws():
    p5, x5 = params_of(BASE)
    p6, x6 = params_of(BASE.replace("seed: 5", "seed: 6"))
    for k in ("attn.w_q", "ffn.w1", "embedding", "position"):
        assert not np.array_equal(p5[k], p6[k])
    assert not np.array_equal(x5, x6)


def test_different_weights_get_different_streams():
    p, _ = params_of(BASE)
    assert not np.array_equal(p["attn.w_q"], p["attn.w_k"])


def check_uniform(a, bound):
    a = np.ravel(a)
    assert np.all(np.abs(a) <= bound)
    assert np.abs(a).max() > 0.97 * bound  # the draws fill the interval
    assert abs(a.mean()) < 0.05 * bound
    # a rough uniformity check: each quarter of [-bound, bound] gets about a quarter of the draws
    counts, _ = np.histogram(a, bins=4, range=(-bound, bound))
    assert np.all(np.abs(counts / a.size - 0.25) < 0.03), counts


def test_documented_distributions():
    p, tokens = params_of(BASE)
    C, F = 64, 256
    for k in ("attn.w_q", "attn.w_k", "attn.w_v", "attn.w_o"):
        assert p[k].shape == (C, C)
        check_uniform(p[k], 1 / math.sqrt(C))
    assert p["ffn.w1"].shape == (C, F)
    check_uniform(p["ffn.w1"], 1 / math.sqrt(C))  # [n_in, n_out]: bound 1/sqrt(n_in)
    assert p["ffn.w2"].shape == (F, C)
    check_uniform(p["ffn.w2"], 1 / math.sqrt(F))
    assert p["embedding"].shape == (50, C)
    check_uniform(p["embedding"], 1.0)
    assert p["position"].shape == (16, C)
    check_uniform(p["position"], 1.0)
    # not given: biases and beta zeros, gamma ones
    for k in ("attn.b_q", "attn.b_k", "attn.b_v", "attn.b_o", "ffn.b2", "norm1.beta", "norm2.beta"):
        assert np.array_equal(p[k], np.zeros(C)), k
    assert np.array_equal(p["ffn.b1"], np.zeros(F))
    assert np.array_equal(p["norm1.gamma"], np.ones(C)) and np.array_equal(p["norm2.gamma"], np.ones(C))
    # tokens: random -> ids uniform on 0..V-1
    assert tokens.shape == (2, 16) and tokens.dtype == np.int64
    assert tokens.min() >= 0 and tokens.max() <= 49


def test_init_xavier_scales_drawn_matrices_by_fan_in_plus_fan_out():
    """init: xavier draws each matrix [n_in, n_out] on +-sqrt(6/(n_in+n_out)) from the same stream as the default
    (so it is the default matrix scaled), and leaves the tables and a vector drawn on purpose as they were."""
    text = BASE + "block: {positions: learned, head: separate}\nweights: {ffn: {b1: random}}\n"
    text = text.replace("block: {positions: learned}\n", "")
    d, _ = params_of(text)
    x, _ = params_of(text + "init: xavier\n")
    C, F, V = 64, 256, 50
    for k, (n_in, n_out) in {"attn.w_q": (C, C), "attn.w_o": (C, C), "ffn.w1": (C, F), "ffn.w2": (F, C), "head": (C, V)}.items():
        xavier, default = math.sqrt(6 / (n_in + n_out)), 1 / math.sqrt(n_in)
        check_uniform(x[k], xavier)
        assert np.allclose(x[k] / xavier, d[k] / default, rtol=0, atol=1e-15), k  # the same draws, another bound
        assert not np.array_equal(x[k], d[k]), k
    for k in ("embedding", "position", "ffn.b1", "norm1.gamma", "attn.b_q"):
        assert np.array_equal(x[k], d[k]), k
    assert np.array_equal(params_of(text + "init: default\n")[0]["ffn.w1"], d["ffn.w1"])  # the word for the default


def test_init_refuses_an_unknown_word(tmp_path):
    (tmp_path / "spec.yaml").write_text(BASE + "init: glorot\n", encoding="utf-8")
    r = run_cli("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.startswith("tracer: error: spec.yaml:6:7: init: ") and "default" in r.stderr and "xavier" in r.stderr, r.stderr


def test_random_tokens_cover_the_vocabulary():
    spec = load_text("dims: {B: 4, T: 500, C: 2, H: 1, F: 2, V: 7}\ninput: {tokens: random}\nseed: 1\n")
    tokens = load_input(spec)
    assert sorted(set(tokens.ravel().tolist())) == list(range(7))


def test_random_x_is_uniform_on_minus_one_one():
    spec = load_text("dims: {B: 3, T: 100, C: 64, H: 1, F: 2}\ninput: {x: random}\nseed: 2\n")
    x = load_input(spec)
    assert x.shape == (3, 100, 64)
    check_uniform(x, 1.0)


def test_keywords_and_given_values():
    p = load_params(load_spec(PRE))
    np.testing.assert_array_equal(p["attn.w_q"], np.eye(2))
    np.testing.assert_array_equal(p["attn.w_o"], [[1, 1], [1, -1]])
    np.testing.assert_array_equal(p["ffn.w1"], [[1, -1, 0], [0, 1, 1]])
    np.testing.assert_array_equal(p["ffn.b1"], np.zeros(3))
    np.testing.assert_array_equal(p["norm2.gamma"], np.ones(2))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype(dtype):
    p, x = params_of(BASE.replace("input: {tokens: random}", "input: {x: random}").replace(", V: 50", "") + f"dtype: {dtype}\n")
    assert {a.dtype for a in p.values()} == {np.dtype(dtype)}
    assert x.dtype == np.dtype(dtype)


def test_drawing_on_two_threads_or_one_chunk_at_a_time_gives_the_same_numbers(monkeypatch):
    """Big specs draw their weights on two threads, each in chunks straight into the array: the same numbers as
    drawing them one after the other, and as one draw of every word at once (the stream's own order)."""
    from tracer.engine import params

    spec = load_spec(str(SPECS / "stack-2-layers.yaml"))
    monkeypatch.setattr(params, "PARALLEL_VALUES", 0)
    both = load_params(spec)
    monkeypatch.setattr(params, "PARALLEL_VALUES", 1 << 62)
    one = load_params(spec)
    assert both.keys() == one.keys() and all(np.array_equal(both[k], one[k]) for k in one)
    monkeypatch.setattr(params, "CHUNK", 7)  # chunks that do not divide the sizes
    chunked = params.uniform(3, "weights.x", (5, 11), -0.5, 0.5)
    raw = params.stream(3, "weights.x").random_raw(55) >> np.uint64(11)
    whole = (raw.astype(np.float64) * (1.0 / 2**53) * 1.0 - 0.5).reshape(5, 11)  # the documented formula, at once
    assert np.array_equal(chunked, whole)
    assert np.array_equal(params.uniform(3, "weights.x", (5, 11), -0.5, 0.5, np.float32), whole.astype(np.float32))
