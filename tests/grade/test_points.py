"""The rubric's one rule, setting by setting: a setting that changes no number of the run costs nothing; one that
does costs the same whatever it is (the settings part and the stages part), and the step list is the structure part."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from conftest import run_app

SOLUTION = """name: points
dims: {B: 1, T: 4, C: 32, H: 2, F: 8, V: 10}
seed: 3
block: {norm_order: pre, mask: causal, eps: 1e-5, activation: relu}
input: {tokens: [1, 2, 3, 4]}
"""


def _grade(tmp_path: Path, hand_ins: dict[str, str], solution: str = SOLUTION) -> dict[str, list[str]]:
    refs, students = tmp_path / "reference", tmp_path / "students"
    refs.mkdir()
    students.mkdir()
    (tmp_path / "solution.yaml").write_text(solution, encoding="utf-8")
    saved = run_app("run", str(tmp_path / "solution.yaml"), "--json", "--with-weights")
    assert saved.returncode == 0, saved.stderr
    (refs / "t.json").write_text(saved.stdout, encoding="utf-8")
    for name, text in hand_ins.items():
        (students / f"{name}.yaml").write_text(text, encoding="utf-8")
    r = run_app("grade", str(students), str(refs), "--csv", "-")
    assert r.returncode == 0, r.stderr
    return {row[0]: row for row in list(csv.reader(io.StringIO(r.stdout)))[1:]}


CHANGED = {  # a setting, written another way that changes numbers
    "mask": ("mask: causal", "mask: none"),
    "activation": ("activation: relu", "activation: gelu"),
    "eps": ("eps: 1e-5", "eps: 1e-3"),
    "norm": ("eps: 1e-5,", "eps: 1e-5, norm: rmsnorm,"),
    "attention_scale": ("eps: 1e-5,", "eps: 1e-5, attention_scale: 0.5,"),
    "positions": ("eps: 1e-5,", "eps: 1e-5, positions: sinusoidal,"),
    "dtype": ("seed: 3", "seed: 3\ndtype: float32"),
    "seed": ("seed: 3", "seed: 4"),
    "input": ("tokens: [1, 2, 3, 4]", "tokens: [1, 2, 3, 5]"),
}


@pytest.mark.parametrize("setting", CHANGED)
def test_a_setting_that_changes_numbers_costs_the_settings_and_the_stages(tmp_path: Path, setting: str):
    old, new = CHANGED[setting]
    assert old in SOLUTION
    row = _grade(tmp_path, {"s": SOLUTION.replace(old, new, 1)})["s"]
    assert row[2:5] == ["6", "10", "different"], (setting, row)
    assert row[6].endswith("lost: settings, stages"), (setting, row[6])


SAME_NUMBERS = {  # a setting written another way that means the same, or that changes no number of this run
    "attention_scale 1/sqrt(d)": ("eps: 1e-5,", "eps: 1e-5, attention_scale: 0.25,"),  # d = 16
    "eps written out": ("eps: 1e-5", "eps: 0.00001"),
    "a mask on one position": None,
    "a bigger vocabulary": ("V: 10", "V: 12"),
}


@pytest.mark.parametrize("case", SAME_NUMBERS)
def test_a_setting_that_changes_no_number_costs_nothing(tmp_path: Path, case: str):
    solution = SOLUTION
    change = SAME_NUMBERS[case]
    if change is None:  # T = 1: the mask hides nothing
        solution = SOLUTION.replace("T: 4", "T: 1").replace("[1, 2, 3, 4]", "[1]")
        change = ("mask: causal", "mask: none")
    row = _grade(tmp_path, {"s": solution.replace(*change, 1)}, solution)["s"]
    assert row[2:4] == ["10", "10"], (case, row)


def test_the_step_list_is_the_structure_part_and_costs_what_a_setting_does(tmp_path: Path):
    rows = _grade(tmp_path, {"post": SOLUTION.replace("norm_order: pre", "norm_order: post"),
                             "eps": SOLUTION.replace("eps: 1e-5", "eps: 1e-3")})
    assert rows["post"][2] == rows["eps"][2] == "6"
    assert rows["post"][6].endswith("lost: structure, stages")  # the norm order names the step list: not a setting too


def test_a_setting_that_changes_no_number_is_said(tmp_path: Path):
    row = _grade(tmp_path, {"s": SOLUTION.replace("V: 10", "V: 12")})["s"]
    assert row[4] == "different" and "change no number of this run: no point lost" in row[6]
