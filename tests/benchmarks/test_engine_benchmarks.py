"""The speed benchmarks against PyTorch run on a tiny block and print every ratio row (their values are not checked:
no timing in a test)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import REPO

RATIO = r"-?\d+\.\d\d"  # on the tiny block, run minus start-up can come out below 0: noise


def bench(script: str) -> str:
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--tiny"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def rows(out: str, *patterns: str) -> None:
    for pattern in patterns:
        assert re.search(pattern, out, re.MULTILINE), f"no row matching {pattern!r} in:\n{out}"


@pytest.mark.slow  # a dozen fresh Python and PyTorch processes: several seconds
def test_vs_pytorch_prints_the_fair_and_floor_ratios() -> None:
    out = bench("vs_pytorch.py")
    rows(out, r"^NumPy BLAS: .*threads.*core ", r"load average \d", r"^at the end: load average",
         r"^  tracer, run minus start-up: median -?\d+ ms \(spread -?\d+--?\d+",
         rf"^  fair ratio tracer / PyTorch build \+ forward \((training-mode|eval fast path), the faster\): {RATIO}; target <= 0\.80$",
         rf"^  old ratio tracer / PyTorch forward alone .*: {RATIO}$",
         r"^  the trace alone .*: median \d+ ms",
         r"^  GEMM floor, the six products .*best of \d+ each: median \d+ ms",
         r"^  the same trace again in that child .*: median \d+ ms",
         rf"^  trace / floor: {RATIO}; target <= 1\.15 \(the second trace / floor: {RATIO}\)$")


@pytest.mark.slow  # fresh tracer and PyTorch processes, then a warm loop: several seconds
def test_grad_vs_pytorch_prints_the_fair_and_old_ratios() -> None:
    out = bench("grad_vs_pytorch.py")
    rows(out, r"^NumPy BLAS: .*threads.*core ", r"load average \d", r"^at the end: load average",
         r"^  tracer, grad minus start-up: median -?\d+ ms \(spread -?\d+--?\d+",
         rf"^  fair ratio tracer / PyTorch build \+ forward \+ backward: {RATIO}; target <= 1\.00$",
         rf"^  old ratio tracer / PyTorch forward \+ backward alone .*: {RATIO}$",
         rf"^  warm ratio tracer / PyTorch: {RATIO} \(median\)")
