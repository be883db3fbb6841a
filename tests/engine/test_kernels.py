"""Each NumPy kernel against the scalar ops of tracer.engine.reference, on random inputs, to 1e-12.

Shapes cover B > 1, H > 1, d > 1, T = 1, and both masks.  The contract checks (what a kernel
refuses where NumPy would broadcast) are tested too.
"""

import math
import os

import numpy as np
import pytest
from conftest import load_text

from tracer.engine import kernels, reference
from tracer.engine.kernels import attention, ffn, multihead, norms
from tracer.errors import BrokenContract, ShapeError

TOL = 1e-12
# (B, T, C, H, F): d = C / H
SHAPES = [(1, 3, 2, 2, 3), (2, 5, 8, 2, 16), (3, 4, 6, 3, 5), (2, 7, 12, 4, 10), (1, 1, 4, 1, 8), (2, 6, 9, 1, 4)]
SEEDS = [0, 1, 2]


def rand(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def cols(w):
    """A [n_in, n_out] matrix as the reference takes it: its columns."""
    return np.asarray(w).T.tolist()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layer_norm(seed, shape):
    B, T, C, _, _ = shape
    rng = np.random.default_rng(seed)
    x, gamma, beta = rand(rng, B, T, C, scale=3.0), rand(rng, C), rand(rng, C)
    eps = [1e-5, 5e-6, 1e-3][seed]
    got = norms.layer_norm(x, gamma, beta, eps)
    for b in range(B):
        for t in range(T):
            want = reference.layer_norm(x[b, t].tolist(), gamma.tolist(), beta.tolist(), eps)
            assert reference.max_abs_diff(got[b, t].tolist(), want) < TOL


def test_layer_norm_book_examples():
    # Section 17.3: [1,3] -> about [-0.999995, 0.999995]; [10,10] -> [0,0]; exercise 2: [2,4] -> [-1,1]/sqrt(1.00001)
    x = np.array([[[1.0, 3.0], [10.0, 10.0], [2.0, 4.0], [20.0, 20.0]]])
    y = norms.layer_norm(x, np.ones(2), np.zeros(2), 0.00001)
    s = 1 / math.sqrt(1.00001)
    np.testing.assert_allclose(y[0], [[-s, s], [0, 0], [-s, s], [0, 0]], rtol=0, atol=1e-15)
    assert [round(v, 6) for v in y[0, 0]] == [-0.999995, 0.999995]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_linear_and_ffn(seed, shape):
    B, T, C, _, F = shape
    rng = np.random.default_rng(100 + seed)
    x, w1, b1, w2, b2 = rand(rng, B, T, C), rand(rng, C, F), rand(rng, F), rand(rng, F, C), rand(rng, C)
    lin = kernels.linear(x, w1, b1)
    hidden = ffn.ffn_hidden(x, w1, b1)
    out = ffn.ffn_out(hidden, w2, b2)
    assert lin.shape == (B, T, F) and hidden.shape == (B, T, F) and out.shape == (B, T, C)
    assert (hidden == 0).any() and (hidden > 0).any()  # ReLU really cut something
    for b in range(B):
        for t in range(T):
            want_lin = reference.matvec(x[b, t].tolist(), cols(w1), b1.tolist())
            want_hidden = reference.relu(want_lin)
            want_out = reference.matvec(want_hidden, cols(w2), b2.tolist())
            assert reference.max_abs_diff(lin[b, t].tolist(), want_lin) < TOL
            assert reference.max_abs_diff(hidden[b, t].tolist(), want_hidden) < TOL
            assert reference.max_abs_diff(out[b, t].tolist(), want_out) < TOL


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_add(seed, shape):
    B, T, C, _, _ = shape
    rng = np.random.default_rng(200 + seed)
    a, b_ = rand(rng, B, T, C), rand(rng, B, T, C)
    got = kernels.add(a, b_)
    for b in range(B):
        for t in range(T):
            assert got[b, t].tolist() == reference.vec_add(a[b, t].tolist(), b_[b, t].tolist())


def scalar_softmax(row):
    finite = [v for v in row if v != -math.inf]
    m = max(finite)
    e = [0.0 if v == -math.inf else math.exp(v - m) for v in row]
    z = sum(e)
    return [v / z for v in e]


@pytest.mark.parametrize("seed", SEEDS)
def test_softmax(seed):
    rng = np.random.default_rng(300 + seed)
    s = rand(rng, 2, 3, 5, 7, scale=10.0)
    s[0, 0, 0, 3:] = -np.inf  # masked keys
    s[1, 2, 4] += 1000.0  # large scores must not overflow
    w = kernels.softmax(s)
    assert np.isfinite(w).all()
    assert np.all(w[0, 0, 0, 3:] == 0.0)
    for idx in np.ndindex(s.shape[:-1]):
        assert reference.max_abs_diff(w[idx].tolist(), scalar_softmax(s[idx].tolist())) < TOL
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=0, atol=1e-14)


def attention_spec(shape, mask):
    B, T, C, H, F = shape
    return load_text(f"dims: {{B: {B}, T: {T}, C: {C}, H: {H}, F: {F}}}\nblock: {{mask: {mask}}}\ninput: {{x: random}}\nseed: 0\n")


@pytest.mark.parametrize("mask", ["causal", "none"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_mha_against_reference(mask, seed, shape):
    B, T, C, H, F = shape
    d = C // H
    rng = np.random.default_rng(400 + seed)
    x = rand(rng, B, T, C)
    w = {f"w_{n}": rand(rng, C, C, scale=1 / math.sqrt(C) * 2) for n in "qkvo"}
    w.update({f"b_{n}": rand(rng, C, scale=0.3) for n in "qkvo"})
    got = multihead.mha(x, **w, H=H, causal=mask == "causal")
    assert got["q"].shape == (B, H, T, d) and got["scores"].shape == (B, H, T, T) and got["heads"].shape == (B, T, C)

    spec = attention_spec(shape, mask)
    step = next(s for s in spec.steps if s.op == "mha")
    params = {f"{step.weights}.{k}": v.tolist() for k, v in w.items()}
    ref = reference.Reference(spec, params, None)
    positions = list(range(T))
    for b in range(B):
        st = {}
        xd = {t: x[b, t].tolist() for t in positions}
        ref.mha(step, xd, xd, positions, st)
        for t in positions:
            assert reference.max_abs_diff(got["output"][b, t].tolist(), st["attention"][t]) < TOL
            assert reference.max_abs_diff(got["heads"][b, t].tolist(), st["attn.heads"][t]) < TOL
            for key in ("q", "k", "v", "scores", "weights"):
                assert reference.max_abs_diff(got[key][b, :, t].tolist(), st[f"attn.{key}"][t]) < TOL, key
    if mask == "causal":
        later = np.triu(np.ones((T, T), dtype=bool), k=1)
        assert np.all(got["weights"][..., later] == 0.0)
    else:
        assert np.all(got["weights"] > 0.0)


def test_mha_head_h_reads_columns_h_times_d():
    # One head's output must not change when another head's columns of W_Q, W_K, W_V change.
    rng = np.random.default_rng(7)
    B, T, C, H = 1, 4, 6, 3
    x = rand(rng, B, T, C)
    w = {f"w_{n}": rand(rng, C, C) for n in "qkvo"}
    w.update({f"b_{n}": np.zeros(C) for n in "qkvo"})
    w2 = dict(w)
    for n in "qkv":
        w2[f"w_{n}"] = w[f"w_{n}"].copy()
        w2[f"w_{n}"][:, 4:6] = rand(rng, C, 2)  # head 2 reads columns 4..5
    a, b = multihead.mha(x, **w, H=H, causal=True), multihead.mha(x, **w2, H=H, causal=True)
    np.testing.assert_array_equal(a["heads"][..., :4], b["heads"][..., :4])
    assert not np.allclose(a["heads"][..., 4:], b["heads"][..., 4:])


def test_split_and_merge_heads_round_trip():
    x = np.arange(2 * 3 * 8, dtype=float).reshape(2, 3, 8)
    h = multihead.split_heads(x, 4)
    assert h.shape == (2, 4, 3, 2)
    np.testing.assert_array_equal(h[1, 2, 0], x[1, 0, 4:6])
    np.testing.assert_array_equal(multihead.merge_heads(h), x)


def test_causal_mask():
    m = attention.causal_mask(3)
    assert m.tolist() == [[False, True, True], [False, False, True], [False, False, False]]


# -- contracts ----------------------------------------------------------------------------------
def test_add_refuses_a_stretched_operand():
    a, b = np.ones((2, 3, 4)), np.ones((1, 3, 4))
    with pytest.raises(BrokenContract) as e:
        kernels.add(a, b)
    assert e.value.kind == "broadcast" and e.value.operands == {"left": (2, 3, 4), "right": (1, 3, 4)}
    np.testing.assert_array_equal(kernels.add(a, b, strict=False), np.full((2, 3, 4), 2.0))


def test_add_of_incompatible_shapes_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"cannot add left \[2, 3\] and right \[2, 4\]"):
        kernels.add(np.ones((2, 3)), np.ones((2, 4)))


@pytest.mark.parametrize("which", ["gamma", "beta"])
def test_layer_norm_refuses_a_stretched_vector(which):
    x = np.random.default_rng(0).standard_normal((1, 2, 4))
    args = {"gamma": np.ones(4), "beta": np.zeros(4)}
    args[which] = args[which][:1]
    with pytest.raises(BrokenContract, match=rf"{which} has shape \[1\] where \[C\] = \[4\] is due"):
        norms.layer_norm(x, args["gamma"], args["beta"], 1e-5)
    loose = norms.layer_norm(x, args["gamma"], args["beta"], 1e-5, strict=False)
    np.testing.assert_allclose(loose, norms.layer_norm(x, np.ones(4), np.zeros(4), 1e-5), rtol=0, atol=0)


def test_layer_norm_wrong_vector_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"gamma has shape \[3\], expected \[C\] = \[4\]"):
        norms.layer_norm(np.ones((1, 2, 4)), np.ones(3), np.zeros(4), 1e-5)


def test_linear_checks_inner_dimension_and_bias():
    with pytest.raises(ShapeError, match=r"cannot multiply \[\.\.\., 3\] by a \[4, 5\] matrix"):
        kernels.linear(np.ones((1, 2, 3)), np.ones((4, 5)), np.zeros(5))
    with pytest.raises(BrokenContract, match=r"bias has shape \[1\]"):
        kernels.linear(np.ones((1, 2, 4)), np.ones((4, 5)), np.zeros(1))


def _mha_case(rng, B, T, S, C, H, H_kv, dtype):
    C_kv = C // H * H_kv
    w = {"w_q": rand(rng, C, C), "w_k": rand(rng, C, C_kv), "w_v": rand(rng, C, C_kv), "w_o": rand(rng, C, C),
         "b_q": rand(rng, C), "b_k": rand(rng, C_kv), "b_v": rand(rng, C_kv), "b_o": rand(rng, C)}
    w = {k: v.astype(dtype) for k, v in w.items()}
    return rand(rng, B, T, C).astype(dtype), rand(rng, B, S, C).astype(dtype), w


@pytest.mark.parametrize("case", [
    # B, T, S, C, H, H_kv, mask, rotary, dtype: T around and across the 256-row blocks, grouped heads, both dtypes
    (1, 3, 3, 4, 2, 2, "causal", None, np.float64), (2, 257, 257, 8, 2, 1, "causal", None, np.float64),
    (1, 600, 600, 16, 4, 2, "causal", 10000.0, np.float64), (1, 300, 300, 12, 3, 3, "none", None, np.float32),
    (2, 5, 7, 8, 2, 2, "none", None, np.float64), (1, 520, 520, 8, 2, 2, "explicit", None, np.float64),
    (1, 700, 700, 8, 1, 1, "causal", None, np.float32),
], ids=str)
def test_attention_without_keeping_scores_is_the_same_to_the_last_bit(case):
    """keep_weights=False works a block of rows at a time in one buffer and skips the scores after the mask:
    every value it reads must be the same call on the same operands, so the output is identical bit for bit."""
    B, T, S, C, H, H_kv, mask, base, dtype = case
    rng = np.random.default_rng(T + S + H)
    xq, xkv, w = _mha_case(rng, B, T, S, C, H, H_kv, dtype)
    visible = rng.random((T, S)) < 0.7 if mask == "explicit" else None
    if visible is not None:
        visible[:, 0] = True  # every query reads a key
    kw = {"H": H, "H_kv": H_kv, "visible": visible, "causal": mask == "causal", "rotary_base": base}
    kept = multihead.mha(xq, None if S == T else xkv, **w, **kw)
    lean = multihead.mha(xq, None if S == T else xkv, **w, **kw, keep_weights=False)
    assert "scores" not in lean and "weights" not in lean
    for key in ("q", "k", "v", "heads", "output"):
        assert lean[key].dtype == kept[key].dtype and np.array_equal(lean[key], kept[key]), key
    assert kept["weights"].shape == (B, H, T, S)


def test_attention_without_keeping_makes_them_when_a_value_is_not_finite():
    rng = np.random.default_rng(3)
    xq, _, w = _mha_case(rng, 1, 300, 300, 8, 2, 2, np.float64)
    xq[0, 5, 0] = np.inf  # a score goes non-finite: the executor must be able to record and flag where
    with np.errstate(all="ignore"):
        lean = multihead.mha(xq, **w, H=2, causal=True, keep_weights=False)
    assert "scores" in lean and not np.isfinite(lean["scores"]).all()
    visible = np.ones((4, 4), dtype=bool)
    visible[2] = False  # a query that may read no key: its weights are 0/0
    xq, _, w = _mha_case(rng, 1, 4, 4, 8, 2, 2, np.float64)
    with np.errstate(all="ignore"):
        lean = multihead.mha(xq, **w, H=2, visible=visible, keep_weights=False)
    assert "weights" in lean and np.isnan(lean["weights"][0, :, 2]).all()


def test_attention_without_keeping_makes_them_when_an_unread_score_could_overflow():
    rng = np.random.default_rng(4)
    xq, _, w = _mha_case(rng, 1, 300, 300, 8, 2, 2, np.float64)
    xq *= 1e160  # q.k can overflow, also after the mask where the lean path would not look
    with np.errstate(all="ignore"):
        lean = multihead.mha(xq, **w, H=2, causal=True, keep_weights=False)
    assert "scores" in lean


@pytest.mark.parametrize("keep", [True, False])
def test_attention_heads_on_threads_give_the_same_numbers_as_in_turn(keep, monkeypatch):
    """attention.attend shares whole heads between Python threads (tracer/blas.py): one thread or three, the same bits."""
    from tracer.engine import blas

    rng = np.random.default_rng(11)
    xq, _, w = _mha_case(rng, 2, 300, 300, 24, 6, 3, np.float64)
    results = []
    for n in (1, 3):
        monkeypatch.setattr(blas, "workers", lambda tasks, work, at_least=0, n=n: n)
        results.append(multihead.mha(xq, **w, H=6, H_kv=3, causal=True, keep_weights=keep))
    for key in results[0]:
        assert np.array_equal(results[0][key], results[1][key]), key


def test_blas_threads_come_back_after_a_single_threaded_block():
    from tracer.engine import blas

    found = blas._openblas()
    if found is None:
        pytest.skip("NumPy's BLAS here is not an OpenBLAS tracer can find: attention runs its heads in turn")
    get, _ = found
    before = get()
    with blas.single_threaded():
        assert get() == 1
    assert get() == before
    assert blas.workers(12, 1 << 30) == min(12, before, os.cpu_count() or 1)
    assert blas.workers(12, 10) == 1 and blas.workers(1, 1 << 30) == 1


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["gelu_tanh", "silu"])
def test_activations_in_scratch_arrays_round_as_their_formulas(name, dtype):
    """gelu_tanh and silu work in one scratch array (and in the input itself when asked): every value, nan and the
    infinities included, is bit for bit the formula's, evaluated operation by operation as written."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(50_000) * rng.choice([1e-3, 1.0, 5.0, 40.0], 50_000)).astype(dtype)
    x[:4] = [np.inf, -np.inf, np.nan, 0.0]
    formula = {"gelu_tanh": lambda v: 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v))),
               "silu": lambda v: v / (1.0 + np.exp(-v))}[name]
    with np.errstate(all="ignore"):
        want = formula(x)
        for inplace in (False, True):
            given = x.copy()
            got = getattr(ffn, name)(given, inplace=inplace)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
            assert (got is given) == inplace and (inplace or given.tobytes() == x.tobytes())  # the input kept unless asked
