"""The speed benchmarks against PyTorch run on a tiny block and print every ratio row (their values are not checked:
no timing in a test)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import REPO

RATIO = r"-?\d+\.\d\d"  # on the tiny block, run minus start-up can come out below 0: noise
MS = r"median -?\d+ ms \(spread -?\d+--?\d+"
EVERY = (r"^NumPy BLAS: .*threads.*core ", r"load average \d", r"^at the end: load average")
ROWS = {
    "vs_pytorch.py": (
        rf"^  tracer, run minus start-up: {MS}",
        rf"^  fair ratio tracer / PyTorch build \+ forward \((training-mode|eval fast path), the faster\): {RATIO}; target <= 0\.80$",
        rf"^  old ratio tracer / PyTorch forward alone .*: {RATIO}$",
        rf"^  fair ratio of the fastest runs .*: -?\d+ ms / \d+ ms = {RATIO}$",
        rf"^  the trace alone .*: {MS}",
        rf"^  the same trace again in that child .*: {MS}",
        rf"^  GEMM floor, the six products .*best of \d+ each: {MS}",
        rf"^  trace / floor: {RATIO}; target <= 1\.15 \(the second trace / floor: {RATIO}\)$",
        rf"^  trace / floor of the fastest runs: \d+ / \d+ ms = {RATIO}$",
    ),
    "grad_vs_pytorch.py": (
        rf"^  tracer, grad minus start-up: {MS}",
        rf"^  fair ratio tracer / PyTorch build \+ forward \+ backward: {RATIO}; target <= 1\.00$",
        rf"^  old ratio tracer / PyTorch forward \+ backward alone .*: {RATIO}$",
        rf"^  fair ratio of the fastest runs .*: -?\d+ ms / \d+ ms = {RATIO}$",
        rf"^  warm ratio tracer / PyTorch: {RATIO} \(median\)",
    ),
}


@pytest.mark.slow  # a dozen fresh Python and PyTorch processes each: several seconds
@pytest.mark.parametrize("script", sorted(ROWS))
def test_benchmark_prints_its_ratio_rows(script: str) -> None:
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--tiny"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    for pattern in EVERY + ROWS[script]:
        assert re.search(pattern, done.stdout, re.MULTILINE), f"no row matching {pattern!r} in:\n{done.stdout}"
