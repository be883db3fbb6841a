"""tracer validate SPEC...: one line per spec, exit code the worst of them; nothing is run."""

from __future__ import annotations

from pathlib import Path

from conftest import SPECS, run_cli, write_spec

GOOD = "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n"


def test_all_valid_exit_0() -> None:
    specs = sorted(str(p.relative_to(SPECS.parent)) for p in SPECS.rglob("*.yaml"))
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
    r = run_cli("validate", str(good), str(bad), str(tmp_path / "missing.yaml"), str(good))
    assert r.returncode == 2
    lines = r.stdout.splitlines()
    assert len(lines) == 4 and "Traceback" not in r.stderr
    assert lines[0].startswith(f"{good}: ok") and lines[3].startswith(f"{good}: ok")
    assert lines[1] == f"{bad}:1:17: dims.H: expected a whole number, received boolean 'yes'"
    assert lines[2] == f"{tmp_path / 'missing.yaml'}: no such file"


def test_a_spec_run_would_refuse_for_memory_is_invalid(tmp_path: Path) -> None:
    big = write_spec(tmp_path, "dims: {T: 50000, C: 64, H: 4, F: 256}\ninput: {x: random}\nseed: 0\n")
    r = run_cli("validate", str(big))
    assert r.returncode == 2 and r.stdout.startswith(f"{big}: this run needs about") and "over --max-memory 4GB" in r.stdout
    assert len(r.stdout.splitlines()) == 1
    assert run_cli("validate", str(big), "--max-memory", "1TB").returncode == 0


def test_validate_needs_a_spec() -> None:
    r = run_cli("validate")
    assert r.returncode == 2 and "SPEC" in r.stderr and r.stdout == ""  # the usage error names the argument (click's words around it)
