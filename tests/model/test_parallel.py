"""The parallel residual (norm_order parallel, parallel_shared), partial rotary (rotary_dim) and a biased head (head_bias):
tracer's steps against the independent oracle, the per-position reference, and the settings' checks."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_app, write_spec
from helpers.tracing import check_against_independent

from tracer.errors import SpecError
from tracer.spec import load_spec_text


def parallel_spec(order: str = "parallel", rotary_dim: int | None = 4, head_bias: bool = True, C: int = 12, H: int = 2) -> str:
    extra = (f", rotary_dim: {rotary_dim}" if rotary_dim is not None else "") + (", head_bias: true" if head_bias else "")
    return (f"dims: {{B: 2, T: 5, C: {C}, H: {H}, F: 20, V: 9}}\nseed: 11\n"
            f"block: {{norm_order: {order}, layers: 2, activation: gelu, positions: rotary, rotary_pairing: half{extra}, "
            f"final_norm: true, head: separate}}\ninput: {{tokens: random}}\n")


@pytest.mark.parametrize("order", ["parallel", "parallel_shared"])
@pytest.mark.parametrize("rotary_dim", [None, 2, 4, 6])
def test_parallel_blocks_match_the_oracle(order, rotary_dim):
    trace = check_against_independent(parallel_spec(order, rotary_dim))
    assert "blocks.1.branches" in trace.stages and ("blocks.0.norm2" in trace.stages) == (order == "parallel")


def test_the_parallel_block_is_not_the_sequential_one():
    """Same weights under pre: the second norm reads X + U there, X here, so the outputs differ."""
    a = check_against_independent(parallel_spec("parallel"))
    b = check_against_independent(parallel_spec("pre"))
    assert np.max(np.abs(a.stages["logits"].array - b.stages["logits"].array)) > 1e-3


def test_partial_rotary_leaves_the_rest_of_each_head_unturned():
    full = check_against_independent(parallel_spec(rotary_dim=None))
    part = check_against_independent(parallel_spec(rotary_dim=2))
    q_full, q_part = full.stages["blocks.0.attn.q"].array, part.stages["blocks.0.attn.q"].array
    assert np.array_equal(q_part[..., 0, :], q_full[..., 0, :])  # position 0 is not turned at all
    # coordinates 2.. of each head pass unturned: the same as position 0's projection would be without positions
    assert not np.allclose(q_part[..., 1:, :2], q_full[..., 1:, :2])


def test_the_reference_follows_the_parallel_block(tmp_path):
    write_spec(tmp_path, parallel_spec("parallel_shared", 2))
    r = run_app("run", "spec.yaml", "--verify", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "verify: largest |NumPy - reference|" in r.stdout


@pytest.mark.parametrize("text, fragment", [
    (parallel_spec().replace("positions: rotary, rotary_pairing: half", "positions: none"), "rotary_dim is for rotary positions"),
    (parallel_spec(rotary_dim=None).replace("head: separate", "head: none"), "head_bias is a bias of the output head"),
    (parallel_spec().replace("norm_order: parallel", "norm_order: sideways"), "norm_order"),
])
def test_settings_that_cannot_hold_are_refused(text, fragment):
    with pytest.raises(SpecError) as e:
        load_spec_text(text)
    assert fragment in str(e.value)


@pytest.mark.parametrize("rotary_dim, fact, would", [
    (5, "rotary_dim = 5 coordinates turned in heads of width d = 6", "turn 4 coordinates paired for a width of 5"),
    (8, "rotary_dim = 8 coordinates turned in heads of width d = 6", "slice q[..., :8] to all 6 coordinates"),
])
def test_an_odd_or_too_wide_rotary_width_is_an_axis_violation(tmp_path, rotary_dim, fact, would):
    write_spec(tmp_path, parallel_spec(rotary_dim=rotary_dim))
    r = run_app("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert "axis violation at stage blocks.0.attention" in r.stdout and fact in r.stdout and would in r.stdout
    v = run_app("validate", "spec.yaml", cwd=tmp_path)  # known from the settings alone, before anything runs
    assert fact in v.stdout + v.stderr and "axis violation" in v.stdout + v.stderr
