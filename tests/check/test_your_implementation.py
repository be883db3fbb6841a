"""examples/your-implementation/: three versions of the chapter's block, each diffed against specs/ch17-prenorm.yaml."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from conftest import EXAMPLES, PRE, REPO, bin_first, run_cli

HERE = EXAMPLES / "your-implementation"


def env() -> dict[str, str]:
    out = bin_first({k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")})  # check.sh's tracer, python3
    out["PYTHONPATH"] = str(REPO) + os.pathsep + out.get("PYTHONPATH", "")
    out["LANG"] = "C.UTF-8"
    return out


def record(script: str, tmp_path) -> str:
    path = tmp_path / f"{script}.npz"
    r = subprocess.run([sys.executable, str(HERE / script), str(path)], cwd=tmp_path, env=env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return str(path)


def test_the_correct_numpy_block_agrees(tmp_path):
    r = run_cli("diff", PRE, record("numpy_block.py", tmp_path))
    assert r.returncode == 0, r.stdout
    assert "same: all 9 recorded stages agree" in r.stdout


def test_the_buggy_numpy_block_is_caught_at_norm1_with_the_reason(tmp_path):
    r = run_cli("diff", PRE, record("numpy_block_buggy.py", tmp_path))
    assert r.returncode == 1
    assert "first diverging stage: norm1 (differs" in r.stdout
    assert "hint: norm1 differs but x agrees" in r.stdout and "(ddof=1)" in r.stdout


def test_the_torch_block_with_forward_hooks_agrees(tmp_path):
    pytest.importorskip("torch", reason="the PyTorch example needs torch (the optional extra)")
    r = run_cli("diff", PRE, record("torch_block.py", tmp_path))
    assert r.returncode == 0, r.stdout
    assert "same: all 8 recorded stages agree" in r.stdout


@pytest.mark.slow  # the three blocks again (torch among them) and their diffs, as the three tests above run them
def test_the_check_script_passes():
    r = subprocess.run(["bash", str(HERE / "check.sh")], env=env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    has_torch = importlib.util.find_spec("torch") is not None
    assert [line.split()[0] for line in lines] == ["ok", "ok", "ok" if has_torch else "skip"], r.stdout
    assert "numpy_block_buggy.py: exit 1, first diverging stage norm1" in r.stdout
