"""tracer check takes the values a broken block computes (NaN, infinities) and judges a float32 spec at its dtype's
precision: the exact value (the spec in float64) is right, as the run's own value is."""

from __future__ import annotations

import pytest
from conftest import run_app

import tracer

NAN_SPEC = """name: a row that reads no key
dims: {B: 1, T: 2, C: 2, H: 1, F: 2}
seed: 1
block: {norm_order: pre, mask: [[0, 0], [1, 1]]}
input: {x: [[[1, 0], [0, 1]]]}
"""


@pytest.fixture
def nan_spec(tmp_path):
    path = tmp_path / "nan.yaml"
    path.write_text(NAN_SPEC)
    return str(path)


@pytest.mark.parametrize("typed", ["[nan, nan]", "[NaN NaN]", "nan, NAN", "【nan，nan】"])
def test_nan_is_a_value_and_the_note_says_where_it_began(nan_spec, typed):
    r = run_app("check", nan_spec, "--stage", "attention", "--expect", typed)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "right: attention at b=0, t=0 is [nan, nan] to 6 decimals\n"
    assert r.stderr.startswith("note: where the NaN or infinite values began: attn.weights: first stage with non-finite values")


def test_a_number_where_the_stage_is_nan_is_wrong_and_nan_where_it_is_a_number_too(nan_spec):
    assert run_app("check", nan_spec, "--stage", "attention", "--expect", "[nan, 1]").returncode == 1
    assert run_app("check", nan_spec, "--stage", "x", "--expect", "[nan, 0]").returncode == 1
    assert run_app("check", nan_spec, "--stage", "x", "--expect", "[1, 0]").returncode == 0
    # a stage after the NaN: the run carries on, and the NaN is its value
    assert run_app("check", nan_spec, "--stage", "residual1", "--expect", "[nan, nan]").returncode == 0


def test_inf_is_a_value_and_a_typed_overflow_is_refused(nan_spec):
    assert run_app("check", nan_spec, "--stage", "x", "--expect", "[inf, 0]").returncode == 1
    r = run_app("check", nan_spec, "--stage", "x", "--expect", "[1e999, 0]")
    assert r.returncode == 2 and "too big for a number" in r.stderr


def test_an_answers_file_takes_yaml_nan(nan_spec, tmp_path):
    answers = tmp_path / "answers.yaml"
    answers.write_text("attention: [.nan, .nan]\nx: [1, 0]\n")
    r = run_app("check", nan_spec, "--answers", str(answers))
    assert r.returncode == 0, r.stdout + r.stderr


F32 = """name: float32
dims: {B: 1, T: 3, C: 8, H: 2, F: 16}
seed: 11
dtype: float32
input: {x: random}
"""


def test_a_float32_spec_takes_the_exact_answer_and_its_own(tmp_path):
    path = tmp_path / "f32.yaml"
    path.write_text(F32)
    run32 = [float(v) for v in tracer.trace(str(path))["attention"][0, 0]]
    exact = [float(v) for v in tracer.trace({"name": "f64", "dims": {"B": 1, "T": 3, "C": 8, "H": 2, "F": 16}, "seed": 11,
                                             "input": {"x": "random"}})["attention"][0, 0]]
    by_hand = [f"{v:.6f}" for v in exact]
    printed = [f"{v:.6f}" for v in run32]
    assert by_hand != printed  # this spec's float32 value rounds otherwise at the 6th decimal: the case in question
    r = run_app("check", str(path), "--stage", "attention", "--expect", "[" + ", ".join(by_hand) + "]")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: the spec computes in float32, whose value rounds otherwise at 6 decimals" in r.stderr
    assert run_app("check", str(path), "--stage", "attention", "--expect", "[" + ", ".join(printed) + "]").returncode == 0
    wrong = list(by_hand)
    wrong[4] = f"{exact[4] + 5e-6:.6f}"
    assert run_app("check", str(path), "--stage", "attention", "--expect", "[" + ", ".join(wrong) + "]").returncode == 1


def test_an_answers_file_takes_nan_as_yaml_reads_it(tmp_path):
    spec = str(__import__("conftest").EXAMPLES / "violations" / "fully-masked-row.yaml")
    answers = tmp_path / "answers.yaml"
    answers.write_text("attention@1: [nan, nan]\nattention@1,0,0: [1, 1]\nx: [1, 0]\n")
    r = run_app("check", spec, "--answers", str(answers))
    lines = r.stdout.splitlines()
    assert r.returncode == 2, r.stdout + r.stderr  # the worst: one answer refused
    assert lines[0].startswith("right: attention at b=0, t=1 is [nan, nan]")
    assert "expected STAGE, STAGE@T or STAGE@B,T" in lines[1] and lines[2].startswith("right: x at b=0, t=0")
    assert lines[3] == "3 answers: 2 right, 0 wrong, 1 error; exit code 2"


def test_an_answers_file_that_is_no_mapping_says_so(tmp_path):
    spec = str(__import__("conftest").EXAMPLES / "exercises" / "ex4-ffn.yaml")
    (tmp_path / "list.yaml").write_text("- [1, 2]\n")
    (tmp_path / "empty.yaml").write_text("\n")
    r = run_app("check", spec, "--answers", str(tmp_path / "list.yaml"))
    assert r.returncode == 2 and "holds a list; expected a mapping of answers" in r.stderr
    r = run_app("check", spec, "--answers", str(tmp_path / "empty.yaml"))
    assert r.returncode == 2 and "is empty; expected a mapping of answers" in r.stderr


def test_a_number_too_big_is_refused_in_words(nan_spec):
    r = run_app("check", nan_spec, "--stage", "x", "--expect", "[1e999, 0]")
    assert r.returncode == 2 and "1e999 is too big for a number" in r.stderr
