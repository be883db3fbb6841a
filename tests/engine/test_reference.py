"""The scalar reference: agreement with NumPy on the chapter specs, and the partial-plan path."""

import math

import numpy as np
import pytest
from conftest import BOOK_Y, PRE, SPECS, load_text, trace_of

from tracer.engine import executor, reference
from tracer.engine.params import load_inputs, load_params
from tracer.spec import load_spec
from tracer.views.reference_check import verify


def run_reference(spec, samples, positions):
    params = {k: v.tolist() for k, v in load_params(spec).items()}
    return reference.Reference(spec, params, {k: v.tolist() for k, v in load_inputs(spec).items()}).run(samples, positions)


@pytest.mark.parametrize("name", ["ch17-prenorm.yaml", "ch17-postnorm.yaml"])
def test_chapter_specs_agree_below_1e_12_at_every_stage(name):
    trace = executor.run(load_spec(str(SPECS / name)))
    check = verify(trace)
    assert check.plan.full and check.plan.samples == [0] and check.plan.positions == [0, 1, 2]
    assert set(check.stages) == set(trace.stages)  # every stage, attention internals included
    for stage, diff in check.stages.items():
        assert diff < 1e-12, (stage, diff)
    assert check.max_abs_diff < 1e-12


def test_reference_alone_reproduces_the_book():
    spec = load_spec(PRE)
    out = run_reference(spec, [0], [0, 1, 2])["output"]
    assert [[round(v, 6) for v in out[(0, t)]] for t in range(3)] == BOOK_Y
    a = 0.5 / math.sqrt(0.25001)
    assert out[(0, 0)][1] == pytest.approx(2 * a + (2 * a - 1) / (2 * math.sqrt(((2 * a - 1) / 2) ** 2 + 1e-5)), abs=1e-12)


def test_reference_uses_no_numpy_arithmetic():
    import inspect

    src = inspect.getsource(reference)
    assert "import numpy" not in src and "np." not in src


SEEDED = """
dims: {{B: 2, T: 6, C: 8, H: 2, F: 16, V: 5}}
block: {{mask: {mask}, norm_order: {order}, final_norm: true}}
input: {{tokens: random}}
weights:
  attn: {{b_q: random, b_k: random, b_v: random, b_o: random}}
  ffn: {{b1: random, b2: random}}
  norm1: {{gamma: random, beta: random}}
  norm2: {{gamma: random, beta: random}}
  final_norm: {{gamma: random, beta: random}}
seed: 11
"""


@pytest.mark.parametrize("mask", ["causal", "none"])
@pytest.mark.parametrize("order", ["pre", "post"])
def test_random_specs_agree_in_full(mask, order):
    trace = trace_of(SEEDED.format(mask=mask, order=order))
    check = verify(trace)
    assert check.plan.full and check.plan.samples == [0, 1]
    assert set(check.stages) == set(trace.stages)
    assert check.max_abs_diff < 1e-12


def test_partial_plan_under_a_causal_mask_verifies_an_exact_prefix():
    spec = load_text(SEEDED.format(mask="causal", order="pre"))
    budget = 3 * reference.position_cost(spec, 3)  # room for three positions, not four
    plan = reference.plan(spec, budget)
    assert not plan.full and not plan.skipped
    assert plan.samples == [0] and plan.positions == [0, 1, 2]
    assert plan.cost <= budget < plan.full_cost
    assert "positions 0..2 of sample 0" in plan.reason and "causal" in plan.reason

    trace = executor.run(spec)
    check = verify(trace, budget)
    assert check.plan.positions == [0, 1, 2]
    assert set(check.stages) == set(trace.stages)
    assert check.max_abs_diff < 1e-12
    doc = check.as_json()
    assert doc["full"] is False and doc["positions"] == [0, 1, 2] and doc["samples"] == [0] and doc["note"] == plan.reason

    # The prefix is really exact on its own: the reference over positions 0..2 alone gives the same
    # numbers as a full reference run, stage by stage.
    prefix = run_reference(spec, [0], [0, 1, 2])
    full = run_reference(spec, [0], list(range(6)))
    for name, cells in prefix.items():
        for (b, t), value in cells.items():
            assert reference.max_abs_diff(full[name][(b, t)], value) == 0.0, (name, t)


def test_partial_plan_without_a_mask_is_skipped_with_a_reason():
    spec = load_text(SEEDED.format(mask="none", order="pre"))
    budget = 3 * reference.position_cost(spec, 3)
    plan = reference.plan(spec, budget)
    assert plan.skipped and not plan.full
    assert "without a causal mask" in plan.reason and f"budget {budget:,}" in plan.reason
    check = verify(executor.run(spec), budget)
    assert check.stages == {} and check.as_json()["positions"] == []


def test_plan_with_no_room_for_one_position_is_skipped():
    spec = load_text(SEEDED.format(mask="causal", order="pre"))
    plan = reference.plan(spec, reference.position_cost(spec, 1) - 1)
    assert plan.skipped and "even one position" in plan.reason


def test_plan_is_full_within_budget():
    spec = load_text(SEEDED.format(mask="none", order="pre"))
    cost = 2 * 6 * reference.position_cost(spec, 6)
    assert reference.plan(spec, cost).full
    assert not reference.plan(spec, cost - 1).full


def test_verify_is_skipped_after_a_violation():
    trace = trace_of("dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1, 2]}\nweights: {norm1: {beta: [0]}}\nseed: 0\n", keep_going=True)
    check = verify(trace)
    assert check.plan.skipped and check.stages == {}
    assert "broadcast violation at stage norm1" in check.plan.reason


def test_max_abs_diff_skips_cells_the_reference_did_not_compute():
    assert reference.max_abs_diff([1.0, 2.0], [1.0, math.nan]) == 0.0
    assert reference.max_abs_diff([[1.0, 2.5]], [[1.0, 2.0]]) == 0.5
    assert reference.max_abs_diff([math.inf], [math.inf]) == 0.0


def test_reference_detects_a_wrong_numpy_value():
    # verify must be able to fail: corrupt one NumPy stage and the difference shows up there
    trace = executor.run(load_spec(PRE))
    trace.stages["norm2"].array = trace.stages["norm2"].array.copy()
    trace.stages["norm2"].array[0, 2, 1] += 1e-9
    check = verify(trace)
    assert check.stages["norm2"] == pytest.approx(1e-9, rel=1e-3)
    assert check.stages["output"] < 1e-12
    assert np.isclose(check.max_abs_diff, 1e-9, rtol=1e-3)


def test_nan_from_numpy_where_the_reference_has_a_number_is_a_disagreement():
    import math

    assert reference.max_abs_diff([math.nan, 1.0], [0.5, 1.0]) == math.inf
    assert reference.max_abs_diff([1.0, 2.0], [math.nan, 2.0]) == 0.0  # the reference's NaN marks "not computed"
