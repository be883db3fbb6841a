"""Issue 13 item 13: diff and probe have run's memory guard (--max-memory), counted before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SPECS, assert_refused, run_app, write_spec

from tracer import executor, memory
from tracer.spec import load_spec

BIG = "dims: {C: 64, H: 4, F: 128, T: 6000}\ninput: {x: random}\nseed: 0\n"
PRE = str(SPECS / "ch17-prenorm.yaml")


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the block ran although the memory guard should have refused it first")

    monkeypatch.setattr(executor, "run", refuse)
    monkeypatch.setattr(executor, "Executor", refuse)


def test_diff_counts_both_sides_and_refuses_before_running(tmp_path: Path, nothing_runs: None) -> None:
    spec = write_spec(tmp_path, BIG)
    one = memory.run_bytes(load_spec(str(spec)))
    assert one < 4e9 < 2 * one  # one side alone would fit: the diff is refused because it holds both
    assert_refused(run_app("diff", str(spec), str(spec)), "this diff needs about", "side A", "side B", "--max-memory 4GB")


def test_probe_counts_two_runs_and_refuses_before_running(tmp_path: Path, nothing_runs: None) -> None:
    spec = write_spec(tmp_path, BIG)
    assert_refused(run_app("probe", str(spec)), "this probe needs about", "the changed run", "--max-memory 4GB")


def test_the_limit_is_an_option_and_none_turns_it_off(tmp_path: Path) -> None:
    assert_refused(run_app("diff", PRE, PRE, "--max-memory", "60MB"), "over --max-memory 60MB")
    assert_refused(run_app("probe", PRE, "--max-memory", "60MB"), "over --max-memory 60MB")
    assert run_app("diff", PRE, PRE, "--max-memory", "none").returncode == 0
    assert run_app("probe", PRE, "--max-memory", "none").returncode == 0
    assert_refused(run_app("probe", PRE, "--max-memory", "lots"), "--max-memory", "expected a size")


def test_a_saved_trace_counts_by_its_size(tmp_path: Path) -> None:
    r = run_app("run", PRE, "--json")
    saved = tmp_path / "a.json"
    saved.write_text(r.stdout)
    limit = memory.INTERPRETER_BYTES + memory.run_bytes(load_spec(PRE)) + memory.saved_trace_bytes(len(r.stdout.encode()))
    assert run_app("diff", PRE, str(saved), "--max-memory", str(limit + 10_000)).returncode == 0
    refused = run_app("diff", PRE, str(saved), "--max-memory", str(limit - 1))
    assert_refused(refused, "side B")
    assert json.loads(r.stdout)["ok"]
