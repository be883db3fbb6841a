"""benchmarks/page.py runs: on the chapter's spec and a small stack in place of the GPT-2-sized block, once each,
it prints every figure it promises (sizes, times, ratios, load average, budget).  No timing is asserted here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.slow  # a dozen tracer processes and a browser: several seconds
def test_the_page_benchmark_runs_on_a_tiny_size() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "benchmarks/page.py", "--repeat", "1", "--big", "specs/stack-2-layers.yaml", "--budget", "5"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    out = r.stdout
    assert out.startswith("page benchmark: budget 5 MB, 1 runs each, load average "), out
    for spec in ("specs/ch17-prenorm.yaml", "specs/stack-2-layers.yaml"):
        assert f"{spec}: page " in out and "tracer page" in out and "ratio" in out, out
    if "opening: left out" not in out:
        assert out.count("ready in Chromium") == 2, out
    assert ("targets: met" in out) == (r.returncode == 0), out
