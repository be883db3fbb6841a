"""--record all|main|stats and --keep: the executor's StageKeeper changes what is kept, never what is computed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import PRE, SPECS, assert_refused, run_app

from tracer.engine import executor, params
from tracer.spec import load_spec, memory

CH17 = PRE


@pytest.fixture
def small_is_big(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "STATS_MIN_VALUES", 4)  # the chapter's arrays are tiny: count them as big


@pytest.mark.parametrize("name", ["ch17-prenorm.yaml", "encoder-decoder.yaml", "variants/rotary.yaml"])
def test_recording_less_computes_the_same_numbers(name: str, small_is_big: None) -> None:
    spec = load_spec(str(SPECS / name))
    full = executor.run(spec)
    for mode in ("main", "stats"):
        less = executor.run(spec, policy=memory.RecordPolicy(mode, b=0, t=1))
        assert [v.as_json() for v in less.violations] == [v.as_json() for v in full.violations]
        for stage_name, stage in less.stages.items():
            a = full.stages[stage_name].array
            assert a is not None
            if stage.data is not None:
                assert np.array_equal(stage.array, a, equal_nan=True), stage_name
            else:
                s = stage.summary
                assert s is not None and s.shape == a.shape
                assert np.array_equal(s.value, full.stages[stage_name].at(0, 1), equal_nan=True)
                assert math.isclose(s.mean, float(a.mean()), rel_tol=1e-12, abs_tol=1e-15)
                assert math.isclose(s.std, float(a.std()), rel_tol=1e-9, abs_tol=1e-12)
                assert (s.min, s.max) == (float(a.min()), float(a.max()))


def test_main_skips_the_attention_internals_only() -> None:
    spec = load_spec(CH17)
    full = executor.run(spec)
    main = executor.run(spec, policy=memory.RecordPolicy("main"))
    assert set(full.stages) - set(main.stages) == {f"attn.{k}" for k in ("q", "k", "v", "scores", "weights", "heads")}


def test_stats_table_is_complete(small_is_big: None) -> None:
    """Every row of the table shows the same value at (b, t) whether the stage was kept in full or not."""
    full = run_app("run", CH17, "--pos", "2", "--all")
    stats = run_app("run", CH17, "--pos", "2", "--all", "--record", "stats")
    assert full.returncode == stats.returncode == 0
    rows = [line for line in full.stdout.splitlines() if line.startswith("│")]
    for row in rows:
        assert row in stats.stdout, row
    assert "kept as statistics" in stats.stdout and "kept as statistics" not in full.stdout
    assert "t=2: [2.999964, 3.746396]" in stats.stdout  # the output matrix, from Table 17.1


def test_stats_json_has_statistics_instead_of_values(small_is_big: None) -> None:
    r = run_app("run", CH17, "--json", "--record", "stats", "--keep", "x", "--pos", "1")
    doc = json.loads(r.stdout)
    by_name = {s["name"]: s for s in doc["stages"]}
    assert by_name["x"]["values"] == [[[1.0, 0.0], [0.0, 2.0], [2.0, 1.0]]]  # kept in full: E + P of Example 17.2
    norm1 = by_name["norm1"]
    assert norm1["values"] is None and norm1["shape"] == [1, 3, 2]
    assert norm1["stats"]["b"] == 0 and norm1["stats"]["t"] == 1
    one = 1 / math.sqrt(1 + 1e-5)  # LN of [0, 2]: mean 1, variance 1, eps 1e-5
    assert norm1["stats"]["value"] == pytest.approx([-one, one], abs=1e-15)
    assert norm1["stats"]["min"] <= -one + 1e-12 and norm1["stats"]["max"] >= one - 1e-12
    assert by_name["output"]["values"] is not None  # the block output is always kept in full


def test_all_with_record_main_is_refused() -> None:
    assert_refused(run_app("run", CH17, "--all", "--record", "main"), "--all shows the attention internals")
    ok = run_app("run", CH17, "--all", "--record", "main", "--keep", "attn.weights")
    assert ok.returncode == 0 and "attn.weights" in ok.stdout and "attn.scores" not in ok.stdout


def test_record_through_the_entry_point() -> None:
    r = run_app("run", str(SPECS / "gpt2-block.yaml"), "--record", "main", "--pos", "3")
    assert r.returncode == 0, r.stderr
    assert "attn." not in r.stdout and "[B,T,F] = [1,1024,3072]" in r.stdout


def test_seeded_draws_are_the_documented_formula() -> None:
    """params.uniform works in place; its doubles are still lo + (hi - lo) * (raw >> 11) / 2**53."""
    got = params.uniform(7, "weights.ffn.w1", (5, 9), -0.25, 0.5)
    raw = params.stream(7, "weights.ffn.w1").random_raw(45)
    want = (-0.25 + 0.75 * ((raw >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53))).reshape(5, 9)
    assert np.array_equal(got, want)
