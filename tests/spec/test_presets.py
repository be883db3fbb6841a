"""`tracer new --preset NAME`: every preset validates and runs; files are never overwritten."""

from __future__ import annotations

import pytest
from conftest import PRE, compared, run_app

from tracer.engine import executor
from tracer.spec import load_spec_text
from tracer.spec.presets import PRESETS


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_validates_and_runs_clean(name):
    spec = load_spec_text(PRESETS[name].text, f"{name}.yaml")
    trace = executor.run(spec)
    assert trace.ok, trace.violations
    assert spec.steps[-1].name in trace.stages


def test_the_chapter_presets_trace_example_17_2(tmp_path):
    for name in ("ch17", "custom"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(PRESETS[name].text, encoding="utf-8")
        r = compared(PRE, str(path))
        assert not r.stages_differ, name  # Table 17.1, every stage
        assert r.weights_differ == [], name
    assert compared(PRE, str(tmp_path / "ch17.yaml")).same


def test_gpt2_preset_has_gpt2_small_sizes():
    spec = load_spec_text(PRESETS["gpt2"].text, "gpt2.yaml")
    d = spec.dims
    assert (d.T, d.C, d.H, d.d, d.F) == (1024, 768, 12, 64, 3072)
    assert spec.seed is not None


def test_new_prints_the_preset_and_the_output_runs(tmp_path):
    r = run_app("new", "--preset", "encoder-decoder")
    assert r.returncode == 0, r.stderr
    assert r.stdout == PRESETS["encoder-decoder"].text
    assert r.stdout.startswith("#")  # commented
    path = tmp_path / "ed.yaml"
    path.write_text(r.stdout, encoding="utf-8")
    assert run_app("run", str(path), "--stage", "probs").returncode == 0


def test_new_output_file_is_never_overwritten(tmp_path):
    path = tmp_path / "mine.yaml"
    r = run_app("new", "--preset", "ch17", "-o", str(path))
    assert r.returncode == 0, r.stderr
    assert path.read_text(encoding="utf-8") == PRESETS["ch17"].text
    path.write_text("# my edits\n", encoding="utf-8")
    again = run_app("new", "--preset", "stack", "-o", str(path))
    assert again.returncode == 2
    assert f"--output {path}: '{path}' already exists; tracer never overwrites a file here" in again.stderr
    assert path.read_text(encoding="utf-8") == "# my edits\n"


def test_unknown_or_missing_preset_is_exit_2_with_the_list():
    r = run_app("new", "--preset", "gtp2")
    assert r.returncode == 2
    assert "--preset gtp2: no such preset; did you mean 'gpt2'?" in r.stderr
    assert "encoder-decoder" in r.stderr and r.stdout == ""
    r = run_app("new")
    assert r.returncode == 2
    assert "give --preset NAME, one of:" in r.stderr
    listing = run_app("new", "--list")
    assert listing.returncode == 0
    assert [line.split()[0] for line in listing.stdout.splitlines()] == list(PRESETS)
