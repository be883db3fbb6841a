"""Shell completion through typer's _TRACER_COMPLETE mechanism: commands, options, presets, formats, stages."""

from __future__ import annotations

from conftest import run_cli

from tracer.spec.presets import PRESETS


def complete(line: str) -> list[str]:
    """What bash completion offers for the last word of `line` (empty when it ends with a space)."""
    words = line.split(" ")
    r = run_cli(env={"_TRACER_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)})
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_commands():
    assert {"run", "diff", "probe", "new", "stages"} <= set(complete("tracer "))
    assert complete("tracer st") == ["stages"]


def test_options():
    assert "--format" in complete("tracer run --f")
    assert {"--stage", "--keep-going"} <= set(complete("tracer diff a.yaml b.yaml --"))
    assert complete("tracer new --pr") == ["--preset"]


def test_preset_names():
    assert complete("tracer new --preset ") == list(PRESETS)
    assert complete("tracer new --preset e") == ["encoder-decoder"]


def test_format_values():
    assert complete("tracer run x.yaml --format ") == ["table", "json", "csv", "markdown"]
    assert complete("tracer diff a b --format c") == ["csv"]
    assert complete("tracer stages --format m") == ["markdown"]


def test_stage_names_from_the_spec_on_the_line():
    assert complete("tracer run specs/stack-2-layers.yaml --stage blocks.1.n") == ["blocks.1.norm1", "blocks.1.norm2"]
    assert complete("tracer run specs/ch17-prenorm.yaml --stage attn.w") == ["attn.weights"]
    # no spec yet (or a broken one): the names `tracer stages` knows
    assert "residual2" in complete("tracer stages res")
