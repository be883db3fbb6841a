"""tracer validate SPEC...: one line per spec, exit code the worst of them; nothing is run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES, SPECS, run_app, run_cli, write_spec

GOOD = "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n"


def test_all_valid_exit_0() -> None:
    # batchnorm.yaml shows the BatchNorm axis violation on purpose: validate reports it, exit 1 (see below)
    specs = sorted(str(p.relative_to(SPECS.parent)) for p in SPECS.rglob("*.yaml") if p.name != "batchnorm.yaml")
    r = run_cli("validate", *specs)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(specs)
    for spec, line in zip(specs, lines):
        assert line.startswith(f"{spec}: ok, needs about "), line
    assert r.stderr == ""


def test_one_invalid_makes_it_2_and_each_spec_has_its_line(tmp_path: Path) -> None:
    good = write_spec(tmp_path, GOOD, "good.yaml")
    bad = write_spec(tmp_path, GOOD.replace("H: 2", "H: yes"), "bad.yaml")
    r = run_app("validate", str(good), str(bad), str(tmp_path / "missing.yaml"), str(good))
    assert r.returncode == 2
    lines = r.stdout.splitlines()
    assert len(lines) == 4 and "Traceback" not in r.stderr
    assert lines[0].startswith(f"{good}: ok") and lines[3].startswith(f"{good}: ok")
    assert lines[1] == f"{bad}:1:17: dims.H: expected a whole number, received boolean 'yes'"
    assert lines[2] == f"{tmp_path / 'missing.yaml'}: no such file"


def test_a_spec_run_would_refuse_for_memory_is_invalid(tmp_path: Path) -> None:
    big = write_spec(tmp_path, "dims: {T: 50000, C: 64, H: 4, F: 256}\ninput: {x: random}\nseed: 0\n")
    r = run_app("validate", str(big), "--record", "all")  # attn.scores and attn.weights: 80 GB each
    assert r.returncode == 2 and r.stdout.startswith(f"{big}: this run needs about") and "over --max-memory 4GB" in r.stdout
    assert len(r.stdout.splitlines()) == 1
    assert run_app("validate", str(big), "--record", "all", "--max-memory", "1TB").returncode == 0
    # the plain table (--record auto, the default) never makes a [B,H,T,T] array: it fits
    ok = run_app("validate", str(big))
    assert ok.returncode == 0 and ok.stdout.startswith(f"{big}: ok, needs about") and "(--record auto)" in ok.stdout


def test_validate_needs_a_spec() -> None:
    r = run_cli("validate")
    assert r.returncode == 2 and "SPEC" in r.stderr and r.stdout == ""  # the usage error names the argument (click's words around it)


# -- what the shapes and settings alone show: the violation the run flags, exit 1 ----------------------
def test_the_batchnorm_variant_is_flagged_as_run_flags_it() -> None:
    r = run_app("validate", str(SPECS / "variants" / "batchnorm.yaml"))
    assert r.returncode == 1 and "BatchNorm statistics taken over samples and positions" in r.stdout and "(axis violation" in r.stdout
    assert run_app("run", str(SPECS / "variants" / "batchnorm.yaml")).returncode == 1


STATIC = ["beta-typo", "ex3-layernorm-over-positions", "ex5-residual-broadcast", "position-beyond-table", "softmax-over-queries"]


@pytest.mark.parametrize("name", STATIC)
def test_validate_reports_what_run_will_flag_with_its_kind_and_exit_code(name: str) -> None:
    path = str(EXAMPLES / "violations" / f"{name}.yaml")
    run = run_app("run", path, "--format", "json")
    assert run.returncode == 1
    first = json.loads(run.stdout)["violations"][0]
    r = run_app("validate", path)
    assert r.returncode == 1, r.stdout
    assert r.stdout == f"{path}: {first['message']} ({first['kind']} violation: tracer run flags it)\n"


def test_a_valued_violation_is_known_only_by_running() -> None:
    path = str(EXAMPLES / "violations" / "fully-masked-row.yaml")  # NaN: depends on the values, not the shapes
    assert run_app("run", path).returncode == 1
    r = run_app("validate", path)
    assert r.returncode == 0 and ": ok, needs about" in r.stdout


@pytest.mark.parametrize("text,stage,kind", [
    (GOOD + "weights: {norm2: {gamma: [2]}}\n", "norm2", "broadcast"),
    (GOOD + "weights: {ffn: {b1: [0.5]}}\n", "hidden", "broadcast"),
    (GOOD + "block: {steps: [{name: n, op: layer_norm, in: x, weights: norm1, axis: T}]}\n", "n", "axis"),
    (GOOD + "block: {steps: [{name: n, op: batch_norm, in: x, weights: norm1}]}\n", "n", "axis"),
    (GOOD + "block: {steps: [{name: a, op: mha, in: x, weights: attn, axis: queries}]}\n", "a", "axis"),
    (GOOD.replace("[0, 1, 2]", "[0, 1, 2, 0]") + "weights: {position: [[0, 0], [0, 1], [1, 0]]}\n", "position", "position"),
])
def test_validate_agrees_with_run(tmp_path: Path, text: str, stage: str, kind: str) -> None:
    p = str(write_spec(tmp_path, text))
    run = run_app("run", p, "--format", "json")
    v = run_app("validate", p)
    assert (run.returncode, v.returncode) == (1, 1), (run.stderr, v.stdout)
    first = json.loads(run.stdout)["violations"][0]
    assert (first["stage"], first["kind"]) == (stage, kind)
    assert v.stdout.startswith(f"{p}: {first['message']} ({kind} violation")


def test_validate_in_chinese_names_the_kind() -> None:
    path = str(EXAMPLES / "violations" / "beta-typo.yaml")
    r = run_app("validate", path, "--lang", "zh")
    assert r.returncode == 1 and "广播" in r.stdout and "违规" in r.stdout and "[C] = [2]" in r.stdout
