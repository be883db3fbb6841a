"""One range check for --batch/--pos/--precision: run, check, grad and tracer.trace word and read them alike."""

from __future__ import annotations

import pytest
from conftest import PRE, run_cli

import tracer
from tracer.errors import UsageError
from tracer.spec import choices, load_spec


@pytest.mark.parametrize(("value", "size", "expected"), [(0, 3, 0), (2, 3, 2), (-1, 3, 2), (-3, 3, 0)])
def test_an_index_reads_as_python_reads_one(value: int, size: int, expected: int) -> None:
    assert choices.index(value, size, "--pos", "T", "positions") == expected


@pytest.mark.parametrize("value", [3, -4])
def test_an_index_beyond_the_axis_names_the_option_and_the_range(value: int) -> None:
    with pytest.raises(UsageError, match=rf"^--pos {value} is out of range: T = 3 \(positions 0 to 2, or -1 to -3 from the end\)$"):
        choices.index(value, 3, "--pos", "T", "positions")


def test_precision_beyond_a_double_is_refused() -> None:
    assert choices.precision(17) == 17
    with pytest.raises(UsageError, match="^precision 18 is out of range: give 0 to 17$"):
        choices.precision(18, "precision")


@pytest.mark.parametrize("command", ["run", "grad", "check"])
def test_every_command_words_the_range_alike(command: str) -> None:
    extra = ["--stage", "x", "--expect", "[1, 0]"] if command == "check" else []
    r = run_cli(command, PRE, "--pos", "5", *extra)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--pos 5 is out of range: T = 3 (positions 0 to 2, or -1 to -3 from the end)" in r.stderr


def test_grad_reads_the_last_position_as_minus_one() -> None:
    last, minus_one = run_cli("grad", PRE, "--pos", "2", "--json"), run_cli("grad", PRE, "--pos", "-1", "--json")
    assert last.returncode == minus_one.returncode == 0 and last.stdout == minus_one.stdout


def test_the_api_checks_the_same_way() -> None:
    spec = load_spec(PRE)
    assert str(tracer.trace(spec, pos=-1).table()) == str(tracer.trace(spec, pos=2).table())
    assert "t=2" in str(tracer.trace(spec, pos=-1).table())
    with pytest.raises(UsageError, match=r"^pos 3 is out of range: T = 3 \(positions 0 to 2, or -1 to -3 from the end\)$"):
        tracer.trace(spec, pos=3)
