"""The executor on the chapter's worked example (Table 17.1, section 17.6) and on its own rules.

Expected numbers come from the book (Table 17.1 and the Y matrix of section 17.5, transcribed
below), from the chapter's closed forms, or from an independent computation written here.
"""

import math

import numpy as np
import pytest
from conftest import BOOK_Y, POST, PRE, PRE_TEXT, TABLE_17_1, trace_of

from tracer.engine import executor
from tracer.spec import load_spec

# Table 17.1 (conftest): the first position, six decimals; the shape column is [T, C] (here with B = 1 in front).
BOOK_ROWS = [(stage, first, shape) for stage, _, first, shape in TABLE_17_1]

# Section 17.1 and 17.4: the example's tables and matrices, as the chapter gives them.
E = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
P = [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
W1 = [[1.0, -1.0, 0.0], [0.0, 1.0, 1.0]]
W2 = [[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]]
W_O = [[1.0, 1.0], [1.0, -1.0]]
EPS = 0.00001


@pytest.fixture(scope="module")
def pre():
    return executor.run(load_spec(PRE))


@pytest.fixture(scope="module")
def post():
    return executor.run(load_spec(POST))


def six(values):
    return [round(float(v), 6) for v in values]


# -- Table 17.1 and Y --------------------------------------------------------------------------
@pytest.mark.parametrize("name,book,shape", BOOK_ROWS, ids=[r[0] for r in BOOK_ROWS])
def test_table_17_1_row(pre, name, book, shape):
    stage = pre.stages[name]
    assert six(stage.at(0, 0)) == book
    assert stage.array.shape == (1,) + shape


def test_full_y_matches_the_book(pre):
    y = pre.stages["output"].array[0]
    assert [six(row) for row in y] == BOOK_Y


def test_closed_forms_of_section_17_5(pre):
    a = 0.5 / math.sqrt(0.25001)
    u = (2 * a - 1) / (2 * math.sqrt(((2 * a - 1) / 2) ** 2 + 0.00001))
    expected = {
        "norm1": [a, -a],
        "attention": [0.0, 2 * a],
        "residual1": [1.0, 2 * a],
        "norm2": [-u, u],
        "hidden": [0.0, 2 * u, u],
        "ffn": [u, u],
        "output": [1 + u, 2 * a + u],
    }
    for name, want in expected.items():
        np.testing.assert_allclose(pre.stages[name].at(0, 0), want, rtol=0, atol=1e-12, err_msg=name)
    assert round(a, 6) == 0.999980 and round(u, 6) == 0.999980


# -- an independent block, written from the chapter's formulas ---------------------------------
def layer_norm_row(row, eps=EPS):  # gamma 1, beta 0
    mu = sum(row) / len(row)
    var = sum((v - mu) ** 2 for v in row) / len(row)
    return [(v - mu) / math.sqrt(var + eps) for v in row]


def matmul_row(row, m):
    return [sum(row[i] * m[i][j] for i in range(len(row))) for j in range(len(m[0]))]


def two_head_attention(X):
    """Example 16.3's heads: W_Q = W_K = W_V = I, head h reads coordinate h, d = 1, causal."""
    out = []
    for t in range(len(X)):
        heads = []
        for h in range(2):
            scores = [X[t][h] * X[j][h] / math.sqrt(1) for j in range(t + 1)]  # keys 0..t only
            m = max(scores)
            e = [math.exp(s - m) for s in scores]
            heads.append(sum(e[j] / sum(e) * X[j][h] for j in range(t + 1)))
        out.append(matmul_row(heads, W_O))
    return out


def ffn_rows(rows):
    return [matmul_row([max(v, 0.0) for v in matmul_row(r, W1)], W2) for r in rows]


def add_rows(a, b):
    return [[x + y for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(a, b, strict=True)]


def book_x():
    return add_rows([E[i] for i in (0, 1, 2)], P)  # tokens 0, 1, 2 at positions 0, 1, 2


def book_post_norm(X):
    """Section 17.6: R_post = LN1(X + MHA(X)), Y_post = LN2(R_post + FFN(R_post))."""
    u = two_head_attention(X)
    r1 = add_rows(X, u)
    n1 = [layer_norm_row(r) for r in r1]
    f = ffn_rows(n1)
    r2 = add_rows(n1, f)
    n2 = [layer_norm_row(r) for r in r2]
    return {"attention": u, "residual1": r1, "norm1": n1, "ffn": f, "residual2": r2, "norm2": n2, "output": n2}


def book_pre_norm(X):
    """Section 17.5: N1 = LN1(X), U = MHA(N1), R = X + U, N2 = LN2(R), Y = R + FFN(N2)."""
    n1 = [layer_norm_row(r) for r in X]
    u = two_head_attention(n1)
    r = add_rows(X, u)
    n2 = [layer_norm_row(row) for row in r]
    return add_rows(r, ffn_rows(n2))


def test_independent_block_reproduces_the_book():
    # a sanity check of the independent code below, against the book's printed Y
    assert [six(row) for row in book_pre_norm(book_x())] == BOOK_Y


def test_post_norm_against_independent_computation(post):
    want = book_post_norm(book_x())
    for name, rows in want.items():
        np.testing.assert_allclose(post.stages[name].array[0], rows, rtol=0, atol=1e-12, err_msg=name)


def test_post_norm_first_row_closed_form(post):
    # X_0 = [1,0]; MHA(X)_0 = [1,1]; LN1([2,1]) = [a,-a]; FFN -> [a,0]; LN2([2a,-a]) = [v,-v]
    a = 0.5 / math.sqrt(0.25001)
    v = 1.5 * a / math.sqrt(2.25 * a * a + 0.00001)
    np.testing.assert_allclose(post.stages["output"].at(0, 0), [v, -v], rtol=0, atol=1e-12)


def test_post_norm_differs_from_pre_norm(pre, post):
    assert not np.allclose(pre.stages["output"].array, post.stages["output"].array)


# -- stage names, order, shapes -----------------------------------------------------------------
def test_stage_order_pre_and_post(pre, post):
    main = lambda tr: [s.name for s in tr.stages.values() if not s.internal]  # noqa: E731
    assert main(pre) == ["embed", "position", "x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output"]
    assert main(post) == ["embed", "position", "x", "attention", "residual1", "norm1", "hidden", "ffn", "residual2", "norm2", "output"]
    internals = [s.name for s in pre.stages.values() if s.internal]
    assert internals == ["attn.q", "attn.k", "attn.v", "attn.scores", "attn.weights", "attn.heads"]


def test_attention_internals_shapes_and_labels(pre):
    s = pre.stages
    for name in ("attn.q", "attn.k", "attn.v"):
        assert s[name].axes == ("B", "H", "T", "d") and s[name].array.shape == (1, 2, 3, 1)
    for name in ("attn.scores", "attn.weights"):
        assert s[name].shape_label == "[B,H,T,T] = [1,2,3,3]"
    assert s["attn.heads"].shape_label == "[B,T,C] = [1,3,2]"
    assert s["position"].shape_label == "[T,C] = [3,2]"
    assert s["hidden"].shape_label == "[B,T,F] = [1,3,3]"
    # causal weights: row t has zeros after t and sums to 1
    w = s["attn.weights"].array[0]  # [H,T,T]
    later = np.triu(np.ones((3, 3), dtype=bool), k=1)
    assert np.all(w[:, later] == 0.0)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    # Stage.at on a [B,H,T,d] stage gives one row per head
    assert s["attn.q"].at(0, 2).shape == (2, 1)


def test_final_norm_is_a_layer_norm_of_output():
    text = PRE_TEXT.replace("final_norm: false", "final_norm: true")
    tr = trace_of(text)
    assert list(tr.stages)[-1] == "final_norm"
    y = tr.stages["output"].array[0]
    want = [layer_norm_row(list(r)) for r in y]
    np.testing.assert_allclose(tr.stages["final_norm"].array[0], want, rtol=0, atol=1e-12)


# -- behaviour that follows from the block's definition -----------------------------------------
SEEDED = """
dims: {{B: {B}, T: {T}, C: 8, H: 2, F: 12}}
block: {{mask: {mask}, norm_order: {order}}}
input: {{x: random}}
seed: 3
"""


@pytest.mark.parametrize("order", ["pre", "post"])
def test_causal_prefix_is_exact_on_its_own(order):
    """Under a causal mask the first k positions do not depend on later ones."""
    full = trace_of(SEEDED.format(B=2, T=6, mask="causal", order=order))
    x = full.stages["input"].array
    short_text = f"dims: {{C: 8, H: 2, F: 12}}\nblock: {{mask: causal, norm_order: {order}}}\nseed: 3\ninput:\n  x: {x[:, :3].tolist()!r}\n"
    short = trace_of(short_text)
    np.testing.assert_allclose(short.stages["output"].array, full.stages["output"].array[:, :3], rtol=0, atol=1e-13)


def test_without_mask_the_first_position_reads_later_ones():
    full = trace_of(SEEDED.format(B=1, T=4, mask="none", order="pre"))
    x = full.stages["input"].array
    short = trace_of(f"dims: {{C: 8, H: 2, F: 12}}\nblock: {{mask: none}}\nseed: 3\ninput:\n  x: {x[:, :2].tolist()!r}\n")
    assert not np.allclose(short.stages["output"].array[0, 0], full.stages["output"].array[0, 0])


def test_samples_are_independent():
    both = trace_of(SEEDED.format(B=2, T=4, mask="none", order="pre"))
    x = both.stages["input"].array
    for b in range(2):
        one = trace_of(f"dims: {{C: 8, H: 2, F: 12}}\nblock: {{mask: none}}\nseed: 3\ninput:\n  x: {x[b].tolist()!r}\n")
        np.testing.assert_allclose(one.stages["output"].array[0], both.stages["output"].array[b], rtol=0, atol=1e-15)


def test_token_batch_uses_embedding_rows():
    text = PRE_TEXT.replace("tokens: [0, 1, 2]", "tokens: [[0, 1, 2], [2, 2, 0]]").replace("B: 1", "B: 2")
    tr = trace_of(text)
    assert tr.stages["embed"].array.shape == (2, 3, 2)
    np.testing.assert_array_equal(tr.stages["embed"].array[1], [E[2], E[2], E[0]])
    np.testing.assert_array_equal(tr.stages["x"].array[1], add_rows([E[2], E[2], E[0]], P))
    assert [six(row) for row in tr.stages["output"].array[0]] == BOOK_Y  # sample 0 is the book's


def test_positions_none_means_x_is_the_embedding():
    text = """
dims: {C: 2, H: 2, F: 3}
block: {positions: none}
input: {tokens: [0, 1, 2]}
weights: {embedding: [[1, 0], [0, 1], [1, 1]]}
seed: 0
"""
    tr = trace_of(text)
    assert "position" not in tr.stages
    np.testing.assert_array_equal(tr.stages["x"].array[0], E)


# -- violations ---------------------------------------------------------------------------------
BETA0 = """
dims: {C: 2, H: 2, F: 3}
input: {tokens: [0, 1, 2]}
weights:
  norm2: {beta: [0.5]}
seed: 0
"""


def test_broadcastable_beta_is_a_violation_and_the_run_stops():
    tr = trace_of(BETA0)
    assert not tr.ok
    (v,) = tr.violations
    assert (v.kind, v.stage) == ("broadcast", "norm2")
    assert "beta has shape [1] where [C] = [2] is due" in v.message
    assert list(tr.stages)[-1] == "norm2"  # stopped after the violating stage


def test_keep_going_records_numpys_result():
    tr = trace_of(BETA0, keep_going=True)
    assert [v.stage for v in tr.violations] == ["norm2"]
    assert list(tr.stages)[-1] == "output"
    r = tr.stages["residual1"].array
    want = np.array([[[v + 0.5 for v in layer_norm_row(list(row))] for row in r[0]]])  # beta stretched to [0.5, 0.5]
    np.testing.assert_allclose(tr.stages["norm2"].array, want, rtol=0, atol=1e-12)


def test_positions_beyond_the_table_are_a_violation():
    tr = trace_of("dims: {C: 2, H: 2, F: 3, T_max: 2}\nblock: {positions: learned}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n")
    (v,) = tr.violations
    assert (v.kind, v.stage) == ("position", "position")
    assert "T = 3 positions but the learned table has T_max = 2 rows" in v.message
