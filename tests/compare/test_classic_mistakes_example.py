"""examples/your-implementation/classic_mistakes.py: three classic mistakes on specs/variants/diagnose.yaml, each named."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import EXAMPLES, REPO, run_app

SCRIPT = EXAMPLES / "your-implementation" / "classic_mistakes.py"
SPEC = str(REPO / "specs" / "variants" / "diagnose.yaml")


@pytest.mark.parametrize(("mistake", "stage", "bug"), [("none", None, None), ("no_scale", "attention", "no_scale"),
                                                       ("reshape", "attention", "split_without_transpose"),
                                                       ("normed_residual", "residual1", "residual_from_norm")])
def test_each_mistake_of_the_example_is_named(tmp_path, mistake, stage, bug):
    path = tmp_path / f"{mistake}.npz"
    made = subprocess.run([sys.executable, str(SCRIPT), mistake, str(path)], capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert made.returncode == 0, made.stderr
    r = run_app("diff", SPEC, str(path), "--json")
    assert r.returncode == (0 if stage is None else 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["first_diverging"] == stage
    assert (doc["diagnosis"] or {}).get("bug") == bug
    assert not any("cannot show every classic mistake" in n for n in doc["notes"])
