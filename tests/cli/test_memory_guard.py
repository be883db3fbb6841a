"""diff and probe have run's memory guard (--max-memory), counted before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import PRE, SPECS, assert_refused, run_app, write_spec

from tracer.engine import executor
from tracer.spec import load_spec, memory

BIG = "dims: {C: 64, H: 4, F: 128, T: 6000}\ninput: {x: random}\nseed: 0\n"


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


# -- the estimate covers output text, parsed YAML and --with-weights; JSON and CSV are streamed -------------------
@pytest.mark.slow  # the GPT-2-sized walkthrough's every value, written twice as JSON text
def test_streamed_json_is_the_same_text_as_json_dumps() -> None:
    from tracer.engine import executor as ex
    from tracer.engine.params import load_params
    from tracer.views import trace_json as jsonout

    spec = load_spec(str(SPECS / "guide-walkthrough.yaml"))
    trace = ex.run(spec)
    stages = list(trace.stages.values())
    whole = jsonout.dumps(jsonout.trace_json(trace, stages, None, load_params(spec)))
    pieces = list(jsonout.chunks(jsonout.trace_json(trace, stages, None, load_params(spec), streamed=True)))
    assert "".join(pieces) + "\n" == whole
    assert len(pieces) > len(stages)  # written a stage at a time, not as one string


def test_streamed_csv_is_the_same_text() -> None:
    from tracer.engine import executor as ex
    from tracer.views import text as textout

    trace = ex.run(load_spec(PRE))
    traces = [(PRE, list(trace.stages.values()))]
    pieces = list(textout.trace_csv_chunks(traces))
    assert "".join(pieces) == textout.trace_csv(traces) and len(pieces) == len(trace.stages) + 1


@pytest.mark.parametrize("form, with_weights, part", [("json", False, "--json output"), ("csv", False, "--format csv output"),
                                                      ("table", True, "--with-weights")])
def test_output_text_and_weights_are_counted(form: str, with_weights: bool, part: str) -> None:
    spec = load_spec(str(SPECS / "guide-walkthrough.yaml"))
    policy = memory.RecordPolicy()
    plain = memory.estimate(spec, policy)
    est = memory.estimate(spec, policy, form=form, with_weights=with_weights)
    assert est.extra[part] > 0 and est.total == plain.total + sum(est.extra.values())
    largest = max(s.values for s in est.stages if s.how == "full")
    if form != "table":  # streamed: the largest stage, not the sum of all
        assert est.extra[part] < 2 * largest * memory.JSON_VALUE_BYTES


def test_a_spec_with_many_inline_values_is_refused_before_it_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracer import spec as spec_module

    row = "[" + ", ".join(["0.5"] * 1000) + "]"
    text = "dims: {C: 1000, H: 1, F: 1000}\ninput: {tokens: [0, 1]}\nseed: 0\nweights:\n  ffn:\n    w1: [\n" + ",\n".join([row] * 1000) + "]\n"
    path = write_spec(tmp_path, text)
    monkeypatch.setattr(spec_module, "load_spec_text", lambda *a, **k: pytest.fail("parsed before the memory check"))
    for command in ("run", "validate"):
        r = run_app(command, str(path), "--max-memory", "300MB")
        assert r.returncode == 2
        assert "reading this spec needs about" in r.stdout + r.stderr and "draw big weights from the seed" in r.stdout + r.stderr
