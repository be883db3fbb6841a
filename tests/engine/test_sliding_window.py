"""A sliding-window mask, mask: {causal: true, window: W}: query t reads keys max(0, t - W + 1)..t.

The executor's attention (block by block of query rows, with and without the weights kept), the scalar
reference and the backward pass all follow it; the oracle (tests/helpers/oracle.py) writes it from the
formula.  W >= T is plain causal to the last bit.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_app, write_spec
from helpers import oracle
from helpers.tracing import check_against_independent, trace_text

from tracer.engine import reference
from tracer.engine.executor import visible_keys
from tracer.engine.kernels import attention
from tracer.engine.params import load_inputs, load_params
from tracer.model import masks
from tracer.spec import load_spec_text


def windowed(W: int | None, T: int = 9, order: str = "pre", extra: str = "", dims: str = "C: 8, H: 2, F: 12", layers: int = 2) -> str:
    mask = "causal" if W is None else f"{{causal: true, window: {W}}}"
    return (f"dims: {{B: 2, T: {T}, {dims}}}\nseed: 4\ninput: {{x: random}}\n"
            f"block: {{norm_order: {order}, layers: {layers}, mask: {mask}{extra}}}\n")


def test_the_matrix_of_a_window():
    # written out: query t reads itself and the W - 1 keys before it
    assert masks.visible("causal", 5, window=2).astype(int).tolist() == [
        [1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]
    assert masks.visible("causal", 4, window=1).astype(int).tolist() == np.eye(4, dtype=int).tolist()
    for W in (4, 5, 100):  # W >= T: plain causal
        assert np.array_equal(masks.visible("causal", 4, window=W), np.tril(np.ones((4, 4), dtype=bool)))
    assert not masks.windowed("causal", 4, 4) and masks.windowed("causal", 3, 4) and not masks.windowed("causal", None, 4)


def test_the_spec_keeps_the_window_and_its_matrix():
    spec = load_spec_text(windowed(3))
    assert (spec.block.mask, spec.block.window) == ("causal", 3)
    assert all(s.window == 3 for s in spec.steps if s.op == "mha")
    assert np.array_equal(spec.block.visible(9), masks.visible("causal", 9, window=3))
    # the same function spelled two ways has the same matrix: causal and its lower triangle, a wide window and causal
    assert np.array_equal(load_spec_text(windowed(9)).block.visible(9), load_spec_text(windowed(None)).block.visible(9))
    tril = np.tril(np.ones((9, 9), dtype=int)).tolist()
    explicit = load_spec_text(windowed(None).replace("mask: causal", f"mask: {tril}"))
    assert np.array_equal(explicit.block.visible(9), load_spec_text(windowed(None)).block.visible(9))
    assert not np.array_equal(spec.block.visible(9), load_spec_text(windowed(None)).block.visible(9))


@pytest.mark.parametrize("W", [1, 2, 4])
@pytest.mark.parametrize("order", ["pre", "post"])
def test_windowed_blocks_match_the_oracle(W, order):
    trace = check_against_independent(windowed(W, order=order), tol=1e-12)
    weights = trace.stages["blocks.0.attn.weights"].array
    hidden = ~masks.visible("causal", 9, window=W)
    assert np.all(weights[:, :, hidden] == 0.0) and np.all(weights[:, :, ~hidden] > 0.0)


def test_rotary_and_grouped_heads_under_a_window():
    check_against_independent(windowed(3, extra=", positions: rotary", dims="C: 16, H: 4, H_kv: 2, F: 12"), tol=1e-12)


def test_a_window_across_row_blocks(monkeypatch):
    """Blocks of 3 query rows over T = 10: the window reaches back into the block before, kept or not kept."""
    monkeypatch.setattr(attention, "ROW_BLOCK", 3)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 2, 10, 4)) for _ in range(3))
    visible = masks.visible("causal", 10, window=4)
    _, w, mixed = attention.attend(q, k, v, visible, True, keep=True)
    _, _, lean = attention.attend(q, k, v, visible, True, keep=False)
    assert np.array_equal(mixed, lean)
    want = np.einsum("bhts,bhsd->bhtd", _softmax_where(np.einsum("bhtd,bhsd->bhts", q, k) / 2.0, visible), v)
    assert np.allclose(mixed, want.transpose(0, 2, 1, 3).reshape(2, 10, 8), atol=1e-13, rtol=0)
    assert np.all(w[:, :, ~visible] == 0.0)


def _softmax_where(s: np.ndarray, visible: np.ndarray) -> np.ndarray:
    e = np.where(visible, np.exp(s - np.where(visible, s, -np.inf).max(axis=-1, keepdims=True)), 0.0)
    return e / e.sum(axis=-1, keepdims=True)


def test_a_window_of_t_or_more_is_causal_to_the_bit():
    causal = trace_text(windowed(None))
    for W in (9, 10, 50):
        wide = trace_text(windowed(W))
        for name, stage in causal.stages.items():
            assert np.array_equal(stage.array, wide.stages[name].array), (W, name)


def test_a_window_changes_only_the_positions_it_hides_keys_from():
    causal, win = trace_text(windowed(None, layers=1)), trace_text(windowed(4, layers=1))
    a, b = causal.stages["attention"].array, win.stages["attention"].array
    assert np.array_equal(a[:, :4], b[:, :4])  # positions 0..3 read every key either way
    assert np.all(np.abs(a[:, 4:] - b[:, 4:]).max(axis=-1) > 1e-6)  # from position 4 on, key t - 4 is hidden


def test_the_heatmap_and_backward_take_the_same_matrix():
    spec = load_spec_text(windowed(3))
    step = next(s for s in spec.steps if s.op == "mha")
    assert np.array_equal(visible_keys(spec, step, 9), masks.visible("causal", 9, window=3))


def test_the_reference_follows_the_window(tmp_path):
    """--verify: the scalar reference (plain loops, keys t - W < j <= t) agrees at every position."""
    write_spec(tmp_path, windowed(3, extra=", positions: rotary", T=8))
    r = run_app("run", "spec.yaml", "--verify", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    verify = json.loads(r.stdout)["verify"]
    assert verify["full"] and verify["max_abs_diff"] < 1e-13, verify
    spec = load_spec_text(windowed(3, T=8))
    params = {k: v.tolist() for k, v in load_params(spec).items()}
    ref = reference.Reference(spec, params, {k: v.tolist() for k, v in load_inputs(spec).items()}).run([0], list(range(8)))
    row = ref["blocks.0.attn.weights"][(0, 5)][0]  # sample 0, query 5, head 0
    assert row[:3] == [0.0, 0.0, 0.0] and all(w > 0.0 for w in row[3:6])  # query 5 reads keys 3, 4, 5 only


def test_the_oracle_window_is_not_causal():
    """The oracle's own rule, checked: the test above would pass a plain causal mask otherwise."""
    x = np.random.default_rng(1).standard_normal((1, 6, 4))
    w = {k: np.eye(4) for k in ("w_q", "w_k", "w_v", "w_o")} | {k: np.zeros(4) for k in ("b_q", "b_k", "b_v", "b_o")}
    a = oracle.attention(x, x, w, 2, {"causal": True, "window": 2})
    assert np.all(a["weights"][0, :, 5, :4] == 0.0) and np.all(a["weights"][0, :, 5, 4:] > 0.0)
