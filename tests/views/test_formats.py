"""--format, --stage, piping, NO_COLOR and --no-color on `tracer run` and `tracer diff`.

What a format writes is checked in this process (run_app); what depends on the process (bytes across runs, a pipe's
width, a terminal's colour) runs the installed command, end to end."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import subprocess

import pytest
from conftest import POST_REL, PRE_REL, REPO, _entry_point, run_app, run_cli

BETA = "examples/violations/beta-typo.yaml"
COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-9]|9[0-7]|38;[0-9;]+)m")  # an SGR code that sets a foreground colour


def run_tty(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run tracer with stdout and stderr on a pseudo-terminal, as in an interactive shell."""
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full.update({"PYTHONPATH": str(REPO), "COLUMNS": "250", **(env or {})})
    master, slave = pty.openpty()
    proc = subprocess.Popen(_entry_point() + list(args), stdin=slave, stdout=slave, stderr=slave, cwd=REPO, env=full)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=60), out.decode("utf-8", "replace")


# -- --format and --json -------------------------------------------------------------

def test_run_csv_rows_for_every_stage_and_position():
    r = run_app("run", PRE_REL, "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0][:6] == ["spec", "stage", "b", "h", "t", "axis"]
    body = rows[1:]
    assert len(body) == 10 * 3  # 10 stages x T = 3 positions (position is [T,C]: 3 rows too)
    hidden = next(row for row in body if row[1] == "hidden" and row[4] == "0")
    # Table 17.1: the FFN after ReLU at the first position is [0, 2u, u]
    a = 0.5 / (0.25001 ** 0.5)
    u = (2 * a - 1) / (2 * (((2 * a - 1) / 2) ** 2 + 1e-5) ** 0.5)
    assert [float(v) for v in hidden[6:9]] == pytest.approx([0.0, 2 * u, u], abs=1e-12)
    assert hidden[5] == "F"


def test_run_markdown_is_a_pipe_table():
    r = run_app("run", PRE_REL, "--format", "markdown")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "### Example 17.2, pre-norm"
    assert "| stage | what it is | value at b=0, t=0 | shape |" in lines
    assert "| `output` | block output, Y = R + FFN(N_2) | [1.999980, 2.999940] | [B,T,C] = [1,3,2] |" in lines
    assert "t=1: [0.999912, 1.476742]" in lines  # the output matrix, in a code block


def test_json_is_an_alias_of_format_json_and_they_cannot_disagree():
    a = run_app("run", PRE_REL, "--json")
    b = run_app("run", PRE_REL, "--format", "json")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout
    r = run_app("run", PRE_REL, "--json", "--format", "csv")
    assert r.returncode == 2
    assert "--json is short for --format json; it cannot be combined with --format csv" in r.stderr
    assert r.stdout == ""


def test_unknown_format_is_exit_2_with_a_suggestion():
    r = run_app("run", PRE_REL, "--format", "mardown")
    assert r.returncode == 2
    assert "--format mardown: expected one of table | json | csv | markdown; did you mean 'markdown'?" in r.stderr
    assert "Traceback" not in r.stderr


def test_with_weights_needs_json():
    r = run_app("run", PRE_REL, "--format", "csv", "--with-weights")
    assert r.returncode == 2
    assert "--with-weights adds the weights to the JSON output or the --save archive" in r.stderr


def test_json_and_csv_are_byte_identical_across_runs():
    spec = "specs/stack-2-layers.yaml"  # seeded weights, two samples
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for form in ("json", "csv"):
        first, second = (subprocess.run(_entry_point() + ["run", spec, "--format", form, "--all"], check=True, cwd=REPO,
                                        capture_output=True, env=env).stdout for _ in range(2))  # bytes, not text
        assert first and first == second, form


# -- --stage ------------------------------------------------------------------------

def test_stage_selects_in_every_format():
    table = run_app("run", PRE_REL, "--stage", "norm1", "--stage", "attn.weights")
    assert table.returncode == 0, table.stderr
    assert "norm1" in table.stdout and "attn.weights" in table.stdout
    assert "residual1" not in table.stdout and "for sample b=0" not in table.stdout  # no output matrix
    doc = json.loads(run_app("run", PRE_REL, "--json", "--stage", "output", "--stage", "x").stdout)
    assert [s["name"] for s in doc["stages"]] == ["x", "output"]  # trace order
    rows = list(csv.reader(io.StringIO(run_app("run", PRE_REL, "--format", "csv", "--stage", "attn.weights").stdout)))
    assert {row[1] for row in rows[1:]} == {"attn.weights"}
    assert len(rows) == 1 + 2 * 3  # H = 2 heads x T = 3 queries
    md = run_app("run", PRE_REL, "--format", "markdown", "--stage", "hidden").stdout
    assert [line for line in md.splitlines() if line.startswith("| `")] == [
        "| `hidden` | FFN after ReLU, ReLU(N_2 W_1 + b_1) | [0.000000, 1.999960, 0.999980] | [B,T,F] = [1,3,3] |"]


def test_unknown_stage_is_exit_2_with_a_suggestion():
    r = run_app("run", PRE_REL, "--stage", "nrom1")
    assert r.returncode == 2
    assert "--stage nrom1: no stage of that name in specs/ch17-prenorm.yaml; did you mean 'norm1'" in r.stderr
    assert r.stdout == ""
    r = run_app("run", "specs/stack-2-layers.yaml", "--stage", "norm1", "--format", "csv")
    assert r.returncode == 2
    assert "did you mean 'blocks.0.norm1' or 'blocks.1.norm1'?" in r.stderr


def test_diff_formats_and_stage():
    r = run_app("diff", PRE_REL, POST_REL, "--format", "csv", "--stage", "norm1")
    assert r.returncode == 1, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert [row[2] for row in rows[1:]] == ["norm1"] * 3
    assert [row[7] for row in rows[1:]] == ["equal", "differs", "differs"]  # t = 0 agrees (section 17.6 by hand)
    same = run_app("diff", PRE_REL, PRE_REL, "--format", "markdown", "--stage", "output")
    assert same.returncode == 0, same.stderr
    assert same.stdout.rstrip().endswith("**same: all 1 stages agree within atol 1e-09, rtol 1e-09; same structure and settings**")
    doc = json.loads(run_app("diff", PRE_REL, POST_REL, "--format", "json", "--stage", "output").stdout)
    assert [s["name"] for s in doc["stages"]] == ["output"]
    bad = run_app("diff", PRE_REL, POST_REL, "--stage", "residual3")
    assert bad.returncode == 2
    assert "--stage residual3: no stage of that name in A or B; did you mean" in bad.stderr
    assert "'residual1'" in bad.stderr and "'residual2'" in bad.stderr


# -- terminals and pipes ----------------------------------------------------------------

@pytest.mark.parametrize("args", [("run", PRE_REL, "--all"), ("diff", PRE_REL, POST_REL)])
def test_piped_output_does_not_depend_on_the_terminal_width(args):
    narrow = run_cli(*args, env={"COLUMNS": "30"})
    wide = run_cli(*args, env={"COLUMNS": "300"})
    assert narrow.stdout == wide.stdout
    assert "\x1b[" not in narrow.stdout
    assert max(len(line) for line in narrow.stdout.splitlines()) > 30  # not wrapped at 30


def test_colour_on_a_terminal_and_none_with_no_color():
    code, out = run_tty("run", BETA)
    assert code == 1
    assert COLOUR.search(out), "a terminal should get colour (else the checks below prove nothing)"
    for env, extra in (({"NO_COLOR": "1"}, ()), ({}, ("--no-color",))):
        code, out = run_tty("run", BETA, *extra, env=env)
        assert code == 1
        assert "violation" in out
        assert not COLOUR.search(out), (env, extra)


def test_a_stage_after_the_violation_is_named_as_not_recorded():
    note = "not recorded: output (the run stopped at the violation at norm1; --keep-going records every stage)"
    table = run_app("run", BETA, "--stage", "x", "--stage", "output")
    assert table.returncode == 1
    assert note in table.stdout
    rows = run_app("run", BETA, "--stage", "output", "--format", "csv")
    assert rows.returncode == 1
    assert rows.stdout == "spec,stage,b,h,t,axis\n"
    assert f"tracer: note: {note}" in rows.stderr
    kept = run_app("run", BETA, "--stage", "output", "--format", "csv", "--keep-going")
    assert len(kept.stdout.splitlines()) == 1 + 3 and "not recorded" not in kept.stderr
