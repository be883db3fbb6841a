"""--max-memory's size syntax at its edges: exit 2 with one line, never an OverflowError."""

from __future__ import annotations

import pytest
from conftest import PRE, assert_refused, run_app

from tracer.spec.memory import MAX_SIZE, parse_size

SYNTAX = "expected a size such as 4GB"
TOO_BIG = "more than any machine has: at most 1 EiB"


@pytest.mark.parametrize("text, fragment", [
    ("9" * 400, TOO_BIG),
    ("9" * 5000, TOO_BIG),  # past Python's int-from-text digit limit too
    ("9" * 400 + "." + "9" * 400 + "TiB", TOO_BIG),
    ("1" + "0" * 19 + "TB", TOO_BIG),
    ("2000000000GiB", TOO_BIG),
    ("inf", SYNTAX), ("nan", SYNTAX), ("Infinity", SYNTAX), ("-1", SYNTAX), ("-4GB", SYNTAX), ("+4GB", SYNTAX),
    ("1e999", SYNTAX), ("1e9999999999", SYNTAX), ("4e3MB", SYNTAX), ("0x10", SYNTAX), ("٣GB", SYNTAX), ("", SYNTAX), (".", SYNTAX),
    ("0", "must be more than 0 bytes"), ("0.4", "must be more than 0 bytes"), ("0.0000001KB", "must be more than 0 bytes"),
])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_sizes_are_exit_2_with_one_line(text: str, fragment: str, command: str) -> None:
    r = run_app(command, PRE, "--max-memory", text)
    assert_refused(r, "--max-memory", fragment)
    assert len(r.stderr) < 400  # a 5000-digit number is not echoed whole


@pytest.mark.parametrize("text, size", [("4GB", 4 * 10**9), ("2GiB", 2 * 2**30), ("1.5G", 1_500_000_000), ("1000000", 10**6),
                                        (".5KB", 500), (str(MAX_SIZE), MAX_SIZE), ("1048576TiB", MAX_SIZE), ("none", None)])
def test_good_sizes_are_exact(text: str, size: int | None) -> None:
    assert parse_size(text) == size
