"""Shared test helpers: run the installed `tracer` entry point against this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
EXAMPLES = REPO / "examples"

# In-process tests import this checkout's tracer, not whichever copy `pip install -e` points at.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _entry_point() -> list[str]:
    exe = shutil.which("tracer")
    # Fall back to the module when the console script is not on PATH (it is after `pip install -e .`).
    return [exe] if exe else [sys.executable, "-m", "tracer"]


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `tracer ARGS` as a user would, with this checkout's code first on the path."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run(_entry_point() + list(args), cwd=cwd or REPO, env=full_env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


def write_spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p
