"""tracer check SPEC --stage NAME --expect NUMBERS: a hand-worked value, right (0) or wrong (1) to the printed
precision; a bad spec, stage or option is 2.  The answers below are section 17.9's, worked out by hand."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, PRE, assert_refused, run_app, run_cli

EX4 = str(EXAMPLES / "exercises" / "ex4-ffn.yaml")
EX2 = str(EXAMPLES / "exercises" / "ex2-layernorm.yaml")


@pytest.mark.parametrize("args,code", [
    (("--stage", "pre", "--expect", "[1, -2, -1]"), 0),  # [1, -1] W_1
    (("--stage", "hidden", "--expect", "[1, 0, 0]"), 0),  # after ReLU
    (("--stage", "pre", "--expect", "[-1, 2, 1]", "--pos", "1"), 0),  # [-1, 1] W_1
    (("--stage", "pre", "--expect", "[-1, 2, 1]", "--pos", "-1"), 0),  # -1: the last position
    (("--stage", "pre", "--expect", "1, -2, -1", "--pos", "-2"), 0),  # -T: the first; brackets optional
    (("--stage", "hidden", "--expect", "[1, -2, -1]"), 1),  # the value before ReLU: wrong
])
def test_right_is_0_and_wrong_is_1(args, code):
    r = run_app("check", EX4, *args)
    assert r.returncode == code, r.stdout + r.stderr
    assert len(r.stdout.splitlines()) == 1
    # ex4's biases are zero: a right answer notes the mistakes that spec cannot show, on stderr; a wrong one says nothing more
    assert r.stderr == ("" if code else "note: this spec cannot show every classic mistake: every bias is zero (a bias left out changes "
                        "nothing); specs/variants/diagnose.yaml can\n")
    assert r.stdout.startswith("right: " if code == 0 else "wrong: ")


def test_to_the_printed_precision():
    # [2, 4] normalised: [-1, 1] / sqrt(1.00001) = [-0.999995, 0.999995] (6 decimals); [-1, 1] at 4 decimals
    assert run_app("check", EX2, "--stage", "norm", "--expect", "[-0.999995, 0.999995]").returncode == 0
    assert run_app("check", EX2, "--stage", "norm", "--expect", "[-1, 1]").returncode == 1
    assert run_app("check", EX2, "--stage", "norm", "--expect", "[-1, 1]", "--precision", "4").returncode == 0
    wrong = run_app("check", EX2, "--stage", "norm", "--expect", "[-0.999995, 1]")
    assert wrong.returncode == 1 and "entry 1 of" in wrong.stdout and "0.999995" not in wrong.stdout.split("of")[0]


def test_right_echoes_the_value_at_the_precision_it_claims():
    # 1 / sqrt(1.00001) = 0.99999500003749...: to 12 decimals 0.999995000037, which %g would cut to 0.999995
    r = run_app("check", EX2, "--stage", "norm", "--expect", "[-0.999995000037, 0.999995000037]", "--precision", "12")
    assert r.returncode == 0
    assert r.stdout.strip() == "right: norm at b=0, t=0 is [-0.999995000037, 0.999995000037] to 12 decimals"
    # a rounder answer, right at 4 decimals, is echoed as the value to 4 decimals, not as given
    r = run_app("check", EX2, "--stage", "norm", "--expect", "[-1, 1]", "--precision", "4")
    assert r.returncode == 0 and "is [-1.0000, 1.0000] to 4 decimals" in r.stdout
    # wrong: the numbers given, every digit of them
    r = run_app("check", EX2, "--stage", "norm", "--expect", "[-0.9999950001234567, 1]", "--precision", "9")
    assert r.returncode == 1 and "of [-0.9999950001234567, 1] differ" in r.stdout


def test_wrong_names_the_entries_but_not_the_values():
    r = run_app("check", EX4, "--stage", "hidden", "--expect", "[1, 1, 1]")
    assert r.returncode == 1 and "entries 1, 2 of [1, 1, 1]" in r.stdout and "[1, 0, 0]" not in r.stdout


def test_both_languages():
    zh = run_app("check", EX4, "--stage", "pre", "--expect", "[1, -2, -1]", "--lang", "zh")
    assert zh.returncode == 0 and zh.stdout.startswith("正确：pre 在 b=0, t=0 处是 [1.000000, -2.000000, -1.000000]")
    zh = run_app("check", EX4, "--stage", "pre", "--expect", "[0, 0, 0]", "--lang", "zh")
    assert zh.returncode == 1 and zh.stdout.startswith("错误：") and "第 0, 1, 2 项" in zh.stdout


@pytest.mark.parametrize("args,fragments", [
    (("--stage", "pre", "--expect", "abc"), ("--expect 'abc'", "a list of numbers")),
    (("--stage", "pre", "--expect", "[1, true]"), ("--expect",)),
    (("--stage", "prr", "--expect", "[1]"), ("--stage prr", "did you mean 'pre'")),
    (("--stage", "pre", "--expect", "[1]", "--pos", "2"), ("--pos 2 is out of range: T = 2",)),
    (("--stage", "pre", "--expect", "[1]", "--pos", "-3"), ("--pos -3 is out of range",)),
    (("--stage", "pre", "--expect", "[1]", "--batch", "1"), ("--batch 1 is out of range: B = 1",)),
    (("--stage", "pre", "--expect", "[1]", "--precision", "18"), ("--precision 18",)),
])
def test_bad_input_is_2(args, fragments):
    assert_refused(run_app("check", EX4, *args), *fragments)


def test_a_stage_the_run_never_reaches():
    r = run_app("check", str(EXAMPLES / "violations" / "beta-typo.yaml"), "--stage", "output", "--expect", "[0, 0]")
    assert r.returncode == 1 and "the run stopped at a broadcast violation at stage norm1" in r.stdout


def test_through_the_entry_point():
    r = run_cli("check", PRE, "--stage", "x", "--expect", "[1, 0]")
    assert r.returncode == 0 and r.stdout.startswith("right: x at b=0, t=0 is [1.000000, 0.000000] to 6 decimals")


def test_a_stage_the_run_never_reaches_in_chinese():
    from tracer.zh import KINDS

    r = run_app("check", str(EXAMPLES / "violations" / "beta-typo.yaml"), "--stage", "output", "--expect", "[0, 0]",
                "--lang", "zh")
    assert r.returncode == 1 and len(r.stdout.strip().splitlines()) == 1
    sentence = r.stdout.split("tracer run")[0]  # the path at the end names the violations folder
    assert "violation" not in sentence and "stage" not in sentence  # no English fragment left in the sentence
    assert "norm1" in sentence and KINDS["broadcast"] in sentence


@pytest.mark.parametrize("typed", [
    "[ 1. -2. -1.]",  # NumPy's printed form: spaces between the numbers
    "[1 -2 -1]",
    "array([ 1., -2., -1.])",  # the repr of a NumPy array
    "(1, -2, -1)",  # parentheses
    "[1，-2，-1]",  # full-width commas
    "【1，-2，-1】",  # full-width brackets
    "［1, -2, -1］",
    "（1、-2、-1）",
])
def test_expect_reads_what_students_type(typed):
    r = run_app("check", EX4, "--stage", "pre", "--expect", typed)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("right: pre at b=0, t=0 is [1.000000, -2.000000, -1.000000]")


def test_numpy_printed_form_of_a_near_one():
    assert run_app("check", EX2, "--stage", "norm", "--expect", "[-0.999995  0.999995]").returncode == 0
    assert run_app("check", EX2, "--stage", "norm", "--expect", "[-0.999995  1.      ]").returncode == 1


@pytest.mark.parametrize("typed", ["[1, -2", "1, -2]]", "[1, x, 2]", "[]", "[1 -2 nanx]"])
def test_expect_that_is_not_numbers_is_exit_2(typed):
    r = run_app("check", EX4, "--stage", "pre", "--expect", typed)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--expect" in r.stderr and "expected a list of numbers" in r.stderr


@pytest.mark.parametrize("typed", ["[1, -2]", "[1 -2 -1 0]"])
def test_a_wrong_count_is_exit_2_naming_both_counts(typed):
    r = run_app("check", EX4, "--stage", "pre", "--expect", typed)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == "" and "has 3 numbers (the stage is [B,T,F] = [1,2,3]); you gave" in r.stderr and "you gave" in r.stderr


# -- --json, and --answers FILE: many answers at once -----------------------------------------------
def test_json_one_object_and_the_error_object_too():
    import json

    r = run_app("check", EX4, "--stage", "pre", "--expect", "[1 -2 -1]", "--json")
    assert r.returncode == 0
    obj = json.loads(r.stdout)
    assert obj["kind"] == "check" and obj["right"] is True and obj["stage"] == "pre" and obj["error"] is None
    r = run_app("check", EX4, "--stage", "hidden", "--expect", "[1, 1, 1]", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["right"] is False
    r = run_app("check", EX4, "--stage", "pre", "--expect", "[1 -2]", "--json")
    assert r.returncode == 2 and "you gave 2" in r.stderr
    obj = json.loads(r.stdout)
    assert obj["right"] is None and obj["error"]["exit_code"] == 2 and "you gave 2" in obj["error"]["message"]


ANSWERS = """\
pre: [1, -2, -1]            # at --pos (0)
pre@1: "[-1  2  1]"         # NumPy's printed form
hidden@0,1: [1, 1, 1]       # b=0, t=1: wrong
hidden@1: [1, 2]            # a wrong count: refused
nosuch: [1]
"""


def test_answers_file_one_result_each_and_the_worst_exit_code(tmp_path):
    import json

    f = tmp_path / "answers.yaml"
    f.write_text(ANSWERS, encoding="utf-8")
    r = run_app("check", EX4, "--answers", str(f))
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("right: pre at b=0, t=0") and lines[1].startswith("right: pre at b=0, t=1")
    assert lines[2].startswith("wrong: hidden at b=0, t=1")
    assert lines[3].startswith(f"{f}:4:1: --expect") and "you gave 2" in lines[3]
    assert lines[4].startswith(f"{f}:5:1: --stage nosuch")
    assert lines[5] == "5 answers: 2 right, 1 wrong, 2 errors; exit code 2"
    r = run_app("check", EX4, "--answers", str(f), "--json")
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o["right"] for o in objs] == [True, True, False, None, None] and [o["pos"] for o in objs] == [0, 1, 1, 1, 0]
    assert "5 answers" in r.stderr
    f.write_text('{"pre": [1, -2, -1], "hidden@1": [0, 2, 1]}', encoding="utf-8")  # JSON is read too
    r = run_app("check", EX4, "--answers", str(f))
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "2 answers: 2 right, 0 wrong, 0 errors; exit code 0"


def test_answers_file_refusals(tmp_path):
    f = tmp_path / "answers.yaml"
    f.write_text("pre@x: [1]\n", encoding="utf-8")  # an answer that cannot be one: its own line, exit 2 (the others still checked)
    r = run_app("check", EX4, "--answers", str(f))
    assert r.returncode == 2 and r.stdout.startswith(f"{f}:1:1: 'pre@x': expected STAGE, STAGE@T or STAGE@B,T"), r.stdout + r.stderr
    f.write_text("pre: {a: 1}\n", encoding="utf-8")
    r = run_app("check", EX4, "--answers", str(f))
    assert r.returncode == 2 and "pre: expected a list of numbers" in r.stdout
    assert_refused(run_app("check", EX4, "--answers", str(f), "--stage", "pre"), "without --stage and --expect")
    assert_refused(run_app("check", EX4, "--stage", "pre"), "give --stage and --expect")
    assert_refused(run_app("check", EX4, "--answers", str(tmp_path / "none.yaml")), "none.yaml")


def test_a_right_answer_on_a_spec_that_hides_classic_mistakes_says_which(tmp_path):
    """The chapter's spec has d = 1, zero biases, gamma 1 and beta 0: a hand computation that leaves the scale, a bias or
    gamma out is right on it too.  check says so on stderr (stdout stays the one line) and in the JSON's notes."""
    r = run_app("check", PRE, "--stage", "norm1", "--expect", "[1, -1]", "-p", "3")
    assert r.returncode == 0 and r.stdout.strip() == "right: norm1 at b=0, t=0 is [1.000, -1.000] to 3 decimals"
    assert r.stderr.startswith("note: this spec cannot show every classic mistake: d = 1") and "specs/variants/diagnose.yaml can" in r.stderr
    doc = json.loads(run_app("check", PRE, "--stage", "norm1", "--expect", "[1, -1]", "-p", "3", "--json").stdout)
    assert doc["right"] is True and len(doc["notes"]) == 1 and "every bias is zero" in doc["notes"][0]
    wrong = json.loads(run_app("check", PRE, "--stage", "norm1", "--expect", "[1, 1]", "--json").stdout)
    assert wrong["right"] is False and wrong["notes"] == []  # a wrong answer is wrong whatever the spec hides


def test_a_spec_that_shows_every_classic_mistake_adds_no_note():
    x = run_app("run", "specs/variants/diagnose.yaml", "--json", "--stage", "norm1")
    value = json.loads(x.stdout)["stages"][0]["values"][0][0]
    r = run_app("check", "specs/variants/diagnose.yaml", "--stage", "norm1", "--expect", json.dumps(value), "-p", "6")
    assert r.returncode == 0 and r.stderr == ""
