"""Every shipped spec runs through the installed command with its documented exit code, agrees with
the scalar reference (--verify) below 1e-12 and with the independent model of tests/helpers/oracle.py
below 1e-10; the guide's walk-through shows 3 x 768 -> 3 x 3072 -> 3 x 768.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import EXAMPLES, REPO, SPECS, run_app, run_cli
from helpers import oracle as ind
from helpers.tracing import independent_stages, trace_file

from tracer.spec import load_spec

GPT2 = "specs/gpt2-block.yaml"  # 1024 positions at 768 / 3072: shapes only here; benchmarks/ times it
WALKTHROUGH = "specs/guide-walkthrough.yaml"
EXIT = {"specs/variants/batchnorm.yaml": 1}  # flagged on purpose (guide section 5); every other spec is clean
SHIPPED = sorted(str(p.relative_to(REPO)) for p in [*SPECS.glob("*.yaml"), *SPECS.glob("variants/*.yaml"),
                                                    *EXAMPLES.glob("positions/*.yaml")])
SMALL = [s for s in SHIPPED if s not in (GPT2, WALKTHROUGH)]


def test_the_list_of_shipped_specs():
    names = set(SHIPPED)
    for want in ("specs/guide-walkthrough.yaml", "specs/gpt2-block.yaml", "specs/stack-2-layers.yaml",
                 "specs/encoder-decoder.yaml", "specs/variants/rmsnorm.yaml", "specs/variants/gelu.yaml",
                 "specs/variants/swiglu.yaml", "specs/variants/rotary.yaml", "specs/variants/batchnorm.yaml",
                 "examples/positions/sinusoidal-guide-table.yaml"):
        assert want in names


@pytest.mark.parametrize("spec", SMALL)
def test_shipped_spec_exit_code_and_verify(spec):
    r = run_app("run", spec, "--verify", "--json")
    code = EXIT.get(spec, 0)
    assert r.returncode == code, r.stderr
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["ok"] is (code == 0)
    check = doc["verify"]
    if code == 0:
        assert check["full"] and check["max_abs_diff"] < 1e-12, check
        assert {st["name"] for st in doc["stages"]} <= set(check["stages"])  # every stage shown was checked
    else:
        assert check["stages"] == {} and "breaks the per-position contract" in check["note"]
        assert [v["kind"] for v in doc["violations"]] == ["axis"]


@pytest.mark.parametrize("spec", SMALL + [WALKTHROUGH])
def test_shipped_spec_matches_independent(spec):
    trace = trace_file(REPO / spec, keep_going=True)
    ind.assert_matches(trace, independent_stages(trace, (REPO / spec).read_text(encoding="utf-8")))


@pytest.mark.slow  # the GPT-2-sized walkthrough, verified, through the command
def test_guide_walkthrough_table_shows_768_3072_768():
    r = run_cli("run", WALKTHROUGH, "--verify")
    assert r.returncode == 0, r.stderr
    rows = [line.split("│")[1:-1] for line in r.stdout.splitlines() if line.startswith("│ ")]
    shapes = {cells[0].strip(): cells[3].strip() for cells in rows}
    assert list(shapes) == ["embed", "position", "x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output"]
    assert shapes["embed"] == shapes["attention"] == shapes["output"] == "[B,T,C] = [1,3,768]"
    assert shapes["hidden"] == "[B,T,F] = [1,3,3072]"
    assert shapes["ffn"] == "[B,T,C] = [1,3,768]"
    assert shapes["position"] == "[T,C] = [3,768]"
    assert "value at b=0, t=0 (我)" in r.stdout
    assert "t=1 (喜欢): [" in r.stdout and "t=2 (你): [" in r.stdout
    note = re.search(r"largest \|NumPy - reference\| over all stages = (\S+) \(every sample and position\)", r.stdout)
    assert note and float(note.group(1)) < 1e-12


def test_guide_walkthrough_settings():
    s = load_spec(str(REPO / WALKTHROUGH))
    d = s.dims
    assert (d.B, d.T, d.C, d.H, d.d, d.F, d.V) == (1, 3, 768, 12, 64, 3072, 3)
    assert s.block.positions == "sinusoidal" and s.block.position_base == 10000 and s.seed is not None


def test_gpt2_sized_block_shapes():
    """Shapes only (a full trace is the benchmark's job): --steps lists every step without computing."""
    r = run_app("run", GPT2, "--steps", "--json")
    assert r.returncode == 0, r.stderr
    steps = {s["name"]: (s["axes"], s["shape"]) for s in json.loads(r.stdout)["steps"]}
    assert steps["input"] == (["B", "T", "C"], [1, 1024, 768])
    assert steps["hidden"] == (["B", "T", "F"], [1, 1024, 3072])
    assert steps["output"] == (["B", "T", "C"], [1, 1024, 768])
    s = load_spec(str(REPO / GPT2))
    assert (s.dims.C, s.dims.H, s.dims.d, s.dims.F, s.dims.T) == (768, 12, 64, 3072, 1024)
    assert s.stage_shapes["attn.weights"] == (("B", "H", "T", "T"), (1, 12, 1024, 1024))
