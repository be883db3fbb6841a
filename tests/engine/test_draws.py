"""tracer run draws a big spec's weights on a helper thread, a piece of each stream at a time (params.Draws): the
same numbers as load_params, whoever draws which piece; errors on the helper reach the caller."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import PRE, REPO, SPECS, load_text, run_app, write_spec

from tracer import process
from tracer.engine import params
from tracer.engine.params import Draws, draw_inputs, draw_params, fill_uniform, load_inputs, load_params, uniform
from tracer.run import command as runs
from tracer.spec import load_spec

BIG = """
dims: {B: 2, T: 8, C: 64, H: 4, F: 256}
block: {norm_order: pre}
input: {x: random}
seed: 11
"""


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_piece_drawn_on_its_own_is_that_stretch_of_the_stream(dtype):
    whole = uniform(4, "weights.w", (1000,), -0.3, 0.3, dtype)
    for start, n in [(0, 1), (1, 7), (333, 334), (999, 1)]:
        piece = np.empty(n, dtype=dtype)
        fill_uniform(piece, 4, "weights.w", start, -0.3, 0.3)
        assert np.array_equal(piece, whole[start:start + n]), (start, n)


def test_the_doubles_are_the_documented_formula_of_the_raw_words():
    raw = params.stream(9, "weights.a").random_raw(100) >> np.uint64(11)
    expected = raw.astype(np.float64) * ((0.25 - -0.25) / 2**53) + -0.25
    assert np.array_equal(uniform(9, "weights.a", (100,), -0.25, 0.25), expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_were_numpys_doubles_ever_different_the_raw_words_are_converted_here(monkeypatch, dtype):
    class Changed:  # a NumPy whose Generator.random gave other doubles than k / 2^53
        def __init__(self, bits):
            self.bits = bits

        def random(self, out):
            out[...] = 0.5

    expected = uniform(9, "weights.a", (100,), -0.25, 0.25, dtype)
    monkeypatch.setattr(np.random, "Generator", Changed)
    assert np.array_equal(uniform(9, "weights.a", (100,), -0.25, 0.25, dtype), expected)
    piece = np.empty(30, dtype=dtype)
    fill_uniform(piece, 9, "weights.a", 50, -0.25, 0.25)
    assert np.array_equal(piece, expected[50:80])


def big(monkeypatch, piece=1000):
    """Every seeded spec counts as big, a weight is drawn in pieces of ``piece`` values, and the machine has two
    cores (a one-core machine starts no helper)."""
    monkeypatch.setattr(params, "PARALLEL_VALUES", 0)
    monkeypatch.setattr(params, "PIECE", piece)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)


@pytest.mark.parametrize("path", ["stack-2-layers.yaml", "gpt2-block.yaml", "ch17-postnorm.yaml"])
def test_drawn_on_a_helper_the_weights_are_load_params_weights(monkeypatch, path):
    spec = load_spec(str(SPECS / path))
    expected = load_params(spec, for_run=True)
    big(monkeypatch, piece=4099)  # pieces that divide no size
    drawn = draw_params(spec)
    got = drawn.result()
    assert list(got) == list(spec.weights)  # in the spec's order, as load_params gives them
    assert all(got[k].dtype == expected[k].dtype and np.array_equal(got[k], expected[k]) for k in expected)
    assert drawn.helped == any(w.source == "seed" for w in spec.weights.values())


def test_a_random_input_matrix_drawn_on_a_helper_is_load_inputs_matrix(monkeypatch):
    spec = load_text(BIG + "dtype: float32\n")
    expected = load_inputs(spec)
    big(monkeypatch, piece=100)
    inputs = draw_inputs(spec)
    assert inputs.helped
    got = inputs.result()
    assert got.keys() == expected.keys() and np.array_equal(got["x"], expected["x"]) and got["x"].dtype == np.float32


def test_a_small_spec_starts_no_helper():
    spec = load_spec(PRE)
    assert not draw_params(spec).helped and not draw_inputs(spec).helped
    small = load_text(BIG)  # 100,000 seeded values: drawn where they are read
    assert not draw_params(small).helped and not draw_inputs(small).helped


def test_an_error_on_the_helper_is_raised_by_result(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    started = []

    def fails():
        started.append("fails")
        raise MemoryError("no room for the weight")

    drawing = Draws({}, [fails] + [lambda i=i: started.append(i) for i in range(3)])
    assert drawing.helped
    deadline = time.monotonic() + 10
    while "fails" not in started and time.monotonic() < deadline:  # result() not called yet: only the helper draws
        time.sleep(0.001)
    assert started[:1] == ["fails"]
    with pytest.raises(MemoryError, match="no room"):
        drawing.result()
    assert started == ["fails"]  # after the error no piece is started, by the helper or by result()


def test_a_run_that_fails_before_the_weights_are_used_stops_the_helper(monkeypatch, tmp_path):
    big(monkeypatch, piece=100)
    fill = params.fill_uniform
    monkeypatch.setattr(params, "fill_uniform", lambda *a: time.sleep(0.002) or fill(*a))  # 490 pieces: about 1 s
    made: list[Draws] = []
    real = params.draw_params
    monkeypatch.setattr(params, "draw_params", lambda spec, **kw: made.append(real(spec, **kw)) or made[-1])

    def broken() -> None:
        raise OSError("the renderer could not be imported")

    with pytest.raises(OSError):
        runs.trace_one(str(write_spec(tmp_path, BIG)), runs.RunOptions(), meanwhile=broken)
    assert made and made[0]._jobs == []  # what the helper had not started is dropped


def test_the_run_waits_for_every_piece_and_traces_the_same_numbers(monkeypatch, tmp_path):
    path = write_spec(tmp_path, BIG)
    opts = runs.RunOptions(record="all")
    before = runs.trace_one(str(path), opts)
    big(monkeypatch, piece=777)
    called = []
    after = runs.trace_one(str(path), opts, meanwhile=lambda: called.append(True))
    assert called == [True]  # the caller's work, done while the helper drew
    assert before.trace is not None and after.trace is not None
    for name, st in before.trace.stages.items():
        assert np.array_equal(st.data, after.trace.stages[name].data), name


def test_meanwhile_is_not_called_for_a_spec_with_nothing_to_draw():
    called = []
    runs.trace_one(PRE, runs.RunOptions(), meanwhile=lambda: called.append(True))
    assert called == []


def test_the_command_lets_glibc_reuse_freed_memory_only_for_a_big_run(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(process, "keep_freed_memory", lambda: calls.append(True) or True)
    path = write_spec(tmp_path, BIG)
    assert run_app("run", str(path)).returncode == 0
    assert calls == []  # 100,000 values: not worth a helper
    big(monkeypatch)
    assert run_app("run", str(path)).returncode == 0 and run_app("run", str(path), "--json").returncode == 0
    assert calls == [True, True]


def test_import_tracer_leaves_the_allocator_alone(monkeypatch):
    """A guard: the library's trace (which draws its own weights) must never reach the command's allocator setting."""
    import tracer

    def refuse():
        raise AssertionError("the library changed the host process's allocator")

    monkeypatch.setattr(process, "keep_freed_memory", refuse)
    big(monkeypatch)
    t = tracer.trace(str(SPECS / "stack-2-layers.yaml"))
    assert t.ok


@pytest.mark.skipif(not hasattr(os, "confstr") or not os.confstr("CS_GNU_LIBC_VERSION"), reason="mallopt is glibc's")
def test_keep_freed_memory_is_taken_by_glibc():
    code = "from tracer.process import keep_freed_memory; print(keep_freed_memory())"  # not in the test process
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.stdout.strip() == "True", done.stderr


@pytest.mark.parametrize("command", ["run", "grad"])
@pytest.mark.parametrize("where", ["weights:\n  norm1: {gamma: [1000000000000000000000000000000000000000000, 1, 1, 1]}\n",
                                   "input: {x: [[[1000000000000000000000000000000000000000000, 1, 1, 1], [1, 2, 3, 4]]]}\n"])
def test_a_given_value_beyond_float32_is_the_runs_violation_not_a_numpy_warning(tmp_path, where, command):
    """The weights and inputs are made before the run (draw_params; grad's executor): NumPy's overflow warning
    must not reach stderr there either."""
    text = "dims: {B: 1, T: 2, C: 4, H: 1, F: 8}\ndtype: float32\nseed: 1\n" + where
    if "input:" not in where:
        text += "input: {x: random}\n"
    r = run_app(command, str(write_spec(tmp_path, text)))
    assert r.returncode == 1, r.stderr
    assert "Warning" not in r.stderr and "overflow" not in r.stderr, r.stderr
    assert "non-finite" in r.stdout + r.stderr
