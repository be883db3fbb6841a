"""examples/exercises: each traceable exercise of section 17.8 gives the answer of section 17.9.

Every expected number is the book's answer (or worked from its formulas here), not tracer's output.
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import EXAMPLES, POST_REL, run_app, run_cli

EX = EXAMPLES / "exercises"
SPECS = ["ex1-positions.yaml", "ex2-layernorm.yaml", "ex4-ffn.yaml", "guide-layernorm.yaml"]


@pytest.fixture(scope="module")
def traces() -> dict[str, dict]:
    """All the exercise specs in one `tracer run --json` (one JSON object per line)."""
    r = run_cli("run", *(f"examples/exercises/{name}" for name in SPECS), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    docs = [json.loads(line) for line in r.stdout.splitlines()]
    return {name: {s["name"]: s["values"][0] for s in doc["stages"]} for name, doc in zip(SPECS, docs)}


def test_exercise_1_rows_sent_into_the_block(traces):
    # E rows [2, 1] and [2, 1] plus P rows [0, 0] and [0, 1]
    assert traces["ex1-positions.yaml"]["x"] == [[2.0, 1.0], [2.0, 2.0]]
    assert traces["ex1-positions.yaml"]["embed"] == [[2.0, 1.0], [2.0, 1.0]]  # the token alone cannot tell them apart


def test_exercise_2_layernorm_of_2_4_and_20_20(traces):
    two_four, twenties = traces["ex2-layernorm.yaml"]["norm"]
    a = 1 / math.sqrt(1.00001)  # mean 3, variance 1 (divided by C = 2), eps 1e-5
    assert two_four == pytest.approx([-a, a], abs=1e-15)
    assert round(two_four[1], 6) == 0.999995
    assert twenties == [0.0, 0.0]  # both deviations 0: the output is beta


def test_exercise_4_ffn_and_what_relu_zeroes(traces):
    t = traces["ex4-ffn.yaml"]
    assert t["pre"] == [[1.0, -2.0, -1.0], [-1.0, 2.0, 1.0]]  # [1,-1] W_1 and [-1,1] W_1
    assert t["hidden"] == [[1.0, 0.0, 0.0], [0.0, 2.0, 1.0]]  # ReLU zeroes entries 2, 3 of one and 1 of the other
    assert t["output"] == [[1.0, 0.0], [1.0, 1.0]]
    assert t["ffn"] == t["output"]  # the one-stage FFN agrees with the three steps


def test_guide_layernorm_walkthrough(traces):
    (row,) = traces["guide-layernorm.yaml"]["norm"]
    assert row == pytest.approx([-1.5, -0.5, -0.5, -0.5, 0, 0, 1, 2], abs=1e-5)  # the guide's, within epsilon
    x = [2, 4, 4, 4, 5, 5, 7, 9]
    assert row == pytest.approx([(v - 5) / math.sqrt(4 + 1e-5) for v in x], abs=1e-15)


def test_exercises_3_and_5_are_violations_at_the_right_stage():
    r = run_cli("run", "examples/violations/ex3-layernorm-over-positions.yaml",
                "examples/violations/ex5-residual-broadcast.yaml", "--json")
    assert r.returncode == 1
    ex3, ex5 = (json.loads(line) for line in r.stdout.splitlines())
    assert (ex3["violations"][0]["kind"], ex3["violations"][0]["stage"]) == ("axis", "norm1")
    assert (ex5["violations"][0]["kind"], ex5["violations"][0]["stage"]) == ("broadcast", "residual1")
    # exercise 3's FFN is fine: [2,5,16] -> [2,5,64] -> [2,5,16]
    kept = json.loads(run_cli("run", "examples/violations/ex3-layernorm-over-positions.yaml", "--json", "--keep-going",
                              "--stage", "hidden", "--stage", "ffn").stdout)
    assert [s["shape"] for s in kept["stages"]] == [[2, 5, 64], [2, 5, 16]]


def test_exercise_6_names_the_two_changed_computations():
    r = run_cli("diff", "examples/exercise6/prenorm-record.json", POST_REL, "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert "attention reads norm1(x) in A, x in B" in doc["structure"]["differences"]
    assert "B normalises after each residual add: norm1(residual1), norm2(residual2)" in doc["structure"]["differences"]
    assert doc["first_diverging"] == "norm1"


def test_readme_names_every_exercise_spec():
    text = (EX / "README.md").read_text(encoding="utf-8")
    for name in SPECS + ["ex3-layernorm-over-positions.yaml", "ex5-residual-broadcast.yaml", "examples/exercise6/"]:
        assert name in text, name
    assert sorted(p.name for p in EX.glob("*.yaml")) == sorted(SPECS)


# -- the answers are where a student looks only on purpose ----------------------------------------------
def _checks(path):
    import shlex

    return [shlex.split(line.split("#")[0])[1:] for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("tracer check ")]


def test_the_answers_are_in_answers_not_in_the_specs_or_the_readme():
    for p in EX.glob("*.yaml"):
        head = p.read_text(encoding="utf-8").split("\nname:")[0]
        assert "Answer" not in head and "answers/README.md" in head, p.name
    readme = (EX / "README.md").read_text(encoding="utf-8")
    for answer in ("[2,2]", "[1,-2,-1]", "[0,2,1]", "-0.999995", "-1.5"):
        assert answer not in readme, answer
    assert "answers/README.md" in readme
    answers = (EX / "answers" / "README.md").read_text(encoding="utf-8")
    for answer in ("[2, 2]", "[1, -2, -1]", "[0, 2, 1]", "-0.999995", "-1.5"):
        assert answer in answers, answer


def test_the_answers_check_right_and_the_readmes_placeholders_wrong():
    right = _checks(EX / "answers" / "README.md")
    wrong = _checks(EX / "README.md")
    assert len(right) >= 10 and len(wrong) >= 6
    for args in right:
        r = run_app(*args)
        assert r.returncode == 0 and r.stdout.startswith("right: "), (args, r.stdout, r.stderr)
    for args in wrong:
        r = run_app(*args)
        assert r.returncode == 1 and r.stdout.startswith("wrong: "), (args, r.stdout, r.stderr)
