"""The README's two fresh-machine commands, run as written in a copy of the checkout, with no virtual environment active.

Each copy holds the files git tracks and nothing else (no .venv, no build, no egg-info); the commands make their own
.venv there and install into it from the package index, as on a new Debian machine whose system pip refuses to install.
The environment they run in has no VIRTUAL_ENV and no PYTHONPATH, and a PATH without any virtual environment's bin.
Slow (a venv and an install each, tens of seconds): CI runs them (.ci/run: pytest --slow).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_docs import REPO, RUN_COMMAND, TEST_COMMAND

pytestmark = pytest.mark.slow


def _checkout(tmp_path: Path) -> Path:
    """The files git tracks (as this tree has them now), copied into tmp_path / 'tracer'."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("copying the checkout needs git and a git checkout")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    dest = tmp_path / "tracer"
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _shell(command: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if not (Path(p).parent / "pyvenv.cfg").exists()]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_USER")}
    env.update(PATH=os.pathsep.join(path), LANG="C.UTF-8", NO_COLOR="1", **extra)
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)


def test_the_run_command_installs_and_traces_table_17_1(tmp_path: Path) -> None:
    work = _checkout(tmp_path)
    r = _shell(RUN_COMMAND, work)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert "Example 17.2, pre-norm" in r.stdout
    assert "t=2: [2.999964, 3.746396]" in r.stdout  # the chapter's Y, last row
    assert (work / ".venv" / "bin" / "tracer").exists() and not (REPO / ".venv").exists()


def test_the_test_command_installs_the_test_tools_and_runs_pytest(tmp_path: Path) -> None:
    """The command as written; PYTEST_ADDOPTS narrows what pytest collects to one folder (the whole suite is what CI runs)."""
    work = _checkout(tmp_path)
    r = _shell(TEST_COMMAND, work, PYTEST_ADDOPTS="tests/foundation -p no:cacheprovider")
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert " passed" in r.stdout and " failed" not in r.stdout
    assert (work / ".venv" / "bin" / "pytest").exists()
