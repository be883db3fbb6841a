"""`tracer run` through the installed entry point: the table, options, exit codes, piped output.

Where a test only reads the table an option draws, it runs the same app in this process (run_app)."""

import json
import math
import os
import re
import subprocess
import sys

import pytest
from conftest import BOOK_Y, POST, POST_REL, PRE, PRE_REL, PRE_TEXT, REPO, TABLE_17_1, run_app, run_cli, run_on_tty, write_spec

ANSI = re.compile(r"\x1b\[")

# Table 17.1 (conftest) as the table prints it: the first position of each stage and each row of Y, six decimals.
CELLS = {stage: "[" + ",".join(f"{v:.6f}" for v in first) + "]" for stage, _, first, _ in TABLE_17_1}
Y_CELLS = ["[" + ", ".join(f"{v:.6f}" for v in row) + "]" for row in BOOK_Y]


def rows(stdout):
    """Table rows as {stage: [cells]}; the header row is under "stage"."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("┃"):
            line = line.replace("┃", "│")
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            out[cells[0].split()[0]] = cells
    return out


def ok(*args, run=run_cli, **kw):
    r = run(*args, **kw)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stderr == ""
    assert not ANSI.search(r.stdout)  # piped: no colour or style codes
    return r


@pytest.fixture(scope="module")
def pre_table():
    return ok("run", PRE_REL).stdout


# -- the chapter's table -----------------------------------------------------------------------
@pytest.mark.parametrize("stage", list(CELLS))
def test_table_17_1_rows_as_printed(pre_table, stage):
    cells = rows(pre_table)[stage]
    assert cells[2] == CELLS[stage].replace(",", ", ")
    shape = "[B,T,F] = [1,3,3]" if stage == "hidden" else "[B,T,C] = [1,3,2]"
    assert cells[3] == shape


def test_table_order_and_full_y(pre_table):
    assert list(rows(pre_table)) == ["stage", "embed", "position", "x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output"]
    for t, y in enumerate(Y_CELLS):
        assert f"  t={t}: {y}" in pre_table.splitlines()
    assert "value at b=0, t=0" in pre_table
    assert "Example 17.2, pre-norm" in pre_table


def test_post_norm_table(tmp_path):
    out = ok("run", POST_REL).stdout
    assert list(rows(out)) == ["stage", "embed", "position", "x", "attention", "residual1", "norm1", "hidden", "ffn", "residual2", "norm2", "output"]
    a = 0.5 / math.sqrt(0.25001)
    v = 1.5 * a / math.sqrt(2.25 * a * a + 0.00001)  # see test_executor: LN2([2a, -a])
    assert rows(out)["output"][2] == f"[{v:.6f}, {-v:.6f}]"


# -- options -----------------------------------------------------------------------------------
def test_pos_selects_the_position():
    out = ok("run", PRE_REL, "--pos", "2", run=run_app).stdout
    assert "value at b=0, t=2" in out
    assert rows(out)["output"][2] == Y_CELLS[2]
    assert rows(out)["x"][2] == "[2.000000, 1.000000]"  # E[2] + P[2] = [1,1] + [1,0]
    assert rows(ok("run", PRE_REL, "-t", "1", run=run_app).stdout)["output"][2] == Y_CELLS[1]


def test_batch_selects_the_sample(tmp_path):
    write_spec(tmp_path, "dims: {C: 2, H: 1, F: 2}\ninput:\n  x: [[[1, 2], [3, 4]], [[5, 6.5], [7, 8]]]\nseed: 0\n")
    out = ok("run", "spec.yaml", "--batch", "1", "--pos", "1", cwd=tmp_path, run=run_app).stdout
    assert "value at b=1, t=1" in out
    assert rows(out)["input"][2] == "[7.000000, 8.000000]"
    assert rows(ok("run", "spec.yaml", "-b", "1", cwd=tmp_path, run=run_app).stdout)["x"][2] == "[5.000000, 6.500000]"
    assert "output for sample b=1" in out


def test_precision_formats_values():
    a = 0.5 / math.sqrt(0.25001)
    out3 = ok("run", PRE_REL, "--precision", "3", run=run_app).stdout
    assert rows(out3)["norm1"][2] == "[1.000, -1.000]"
    assert "  t=1: [1.000, 1.477]" in out3
    out0 = ok("run", PRE_REL, "-p", "0", run=run_app).stdout
    assert rows(out0)["output"][2] == "[2, 3]"
    out17 = ok("run", PRE_REL, "--precision", "17", run=run_app).stdout
    assert rows(out17)["norm1"][2] == f"[{a:.17f}, {-a:.17f}]"


def test_negative_zero_prints_as_zero(pre_table):
    # attention at t=0 is [a - a, 2a]; whatever the sign of the zero, it prints as 0.000000
    assert rows(pre_table)["attention"][2].startswith("[0.000000,")


def test_all_adds_attention_internals():
    plain = rows(ok("run", PRE_REL, run=run_app).stdout)
    full = rows(ok("run", PRE_REL, "--all", run=run_app).stdout)
    internals = ["attn.q", "attn.k", "attn.v", "attn.scores", "attn.weights", "attn.heads"]
    assert not set(internals) & set(plain)
    names = list(full)
    assert names[0] == "stage"
    assert names[names.index("norm1") + 1: names.index("attention")] == internals
    assert full["attn.q"][3] == "[B,H,T,d] = [1,2,3,1]"
    assert full["attn.scores"][3] == "[B,H,T,T] = [1,2,3,3]"
    assert full["attn.weights"][2] == "[[1.000000, 0.000000, 0.000000], [1.000000, 0.000000, 0.000000]]"  # t=0 sees itself only
    assert full["attn.heads"][2] == "[0.999980, -0.999980]"  # heads a and -a before W_O


WIDE = "dims: {T: 9, C: 16, H: 4, F: 64}\ninput: {x: random}\nseed: 4\n"


def test_long_vectors_are_elided(tmp_path):
    write_spec(tmp_path, WIDE)
    out = ok("run", "spec.yaml", cwd=tmp_path, run=run_app).stdout
    doc = json.loads(ok("run", "spec.yaml", "--json", cwd=tmp_path, run=run_app).stdout)
    stages = {s["name"]: s["values"] for s in doc["stages"]}
    r = rows(out)
    for name, n in (("x", 16), ("norm1", 16), ("hidden", 64), ("output", 16)):
        head = ", ".join(f"{v:.6f}" for v in stages[name][0][0][:3])
        assert r[name][2] == f"[{head}, … {n} values]", name
    # the output matrix: 9 rows, so the first 3, a count, and the last
    lines = out.splitlines()
    y = stages["output"][0]
    for t in (0, 1, 2, 8):
        head = ", ".join(f"{v:.6f}" for v in y[t][:3])
        assert f"  t={t}: [{head}, … 16 values]" in lines
    assert "  … 9 rows" in lines and not any(ln.startswith("  t=3:") for ln in lines)


def test_vectors_of_eight_are_not_elided(tmp_path):
    write_spec(tmp_path, "dims: {T: 2, C: 8, H: 2, F: 8}\ninput: {x: random}\nseed: 1\n")
    out = ok("run", "spec.yaml", cwd=tmp_path, run=run_app).stdout
    assert "values]" not in out
    assert rows(out)["x"][2].count(",") == 7


def test_piped_output_is_not_wrapped(tmp_path):
    # a table far wider than 80 columns, with COLUMNS set small: every row stays on one line
    write_spec(tmp_path, "dims: {T: 2, C: 8, H: 2, F: 8}\ninput: {x: random}\nseed: 1\n")
    out = ok("run", "spec.yaml", "--all", cwd=tmp_path, env={"COLUMNS": "40"}).stdout
    table = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert len(table) == 15 and max(len(ln) for ln in table) > 120
    assert len({len(ln) for ln in table}) == 1  # one width: no row wrapped into a second line
    assert "…" not in "".join(table)  # nothing cut at the terminal width


def test_verify_prints_differences():
    out = ok("run", PRE_REL, "--verify").stdout
    r = rows(out)
    assert r["stage"][-1] == "max |NumPy - reference|"
    for stage in CELLS:
        assert float(r[stage][-1]) < 1e-12
    m = re.search(r"verify: largest \|NumPy - reference\| over all stages = (\S+) \(every sample and position\)", out)
    assert m and float(m.group(1)) < 1e-12


def test_verify_too_big_without_mask_is_skipped_with_reason(tmp_path):
    # ~21 million scalar operations for a full run: over the 20 million budget
    write_spec(tmp_path, "dims: {T: 2, C: 512, H: 8, F: 9216}\nblock: {mask: none}\ninput: {x: random}\nseed: 1\n")
    out = ok("run", "spec.yaml", "--verify", "--verify-budget", "20000000", cwd=tmp_path, run=run_app).stdout
    assert re.search(r"verify: skipped: a full reference run takes ~2\d,\d{3},\d{3} scalar operations \(budget 20,000,000\)", out)
    assert "without a causal mask" in out
    assert rows(out)["output"][-1] == "not checked"


def test_verify_too_big_under_causal_mask_checks_a_prefix(tmp_path):
    from tracer.engine import reference
    from tracer.spec import load_spec

    spec = write_spec(tmp_path, "dims: {T: 2, C: 8, H: 2, F: 16}\nblock: {mask: causal}\ninput: {x: random}\nseed: 1\n")
    budget = reference.position_cost(load_spec(str(spec)), 1)  # position 0 fits, both positions do not
    doc = json.loads(ok("run", "spec.yaml", "--verify", "--verify-budget", str(budget), "--json", cwd=tmp_path, run=run_app).stdout)
    v = doc["verify"]
    assert v["full"] is False and v["samples"] == [0] and v["positions"] == [0]
    assert "positions 0..0 of sample 0 are exact on their own" in v["note"]
    assert v["max_abs_diff"] < 1e-12 and set(v["stages"]) >= {"x", "norm1", "attention", "output"}


# -- exit codes and errors ---------------------------------------------------------------------
def test_exit_codes_0_1_2(tmp_path):
    assert run_cli("run", PRE_REL).returncode == 0
    write_spec(tmp_path, PRE_TEXT.replace("beta: zeros}\n  norm2", "beta: [0]}\n  norm2"))
    r = run_cli("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 1 and "violation: broadcast" in r.stdout and "Traceback" not in r.stderr
    r = run_cli("run", "spec.yaml", "--verify", cwd=tmp_path)
    assert r.returncode == 1 and "verify: skipped: the run flagged a broadcast violation at stage norm1" in r.stdout
    write_spec(tmp_path, "dims: {C: 2}\n", "bad.yaml")
    assert run_cli("run", "bad.yaml", cwd=tmp_path).returncode == 2


@pytest.mark.parametrize("args,message", [
    (["--pos", "3"], "--pos 3 is out of range: T = 3 (positions 0 to 2, or -1 to -3 from the end)"),
    (["--pos", "-4"], "--pos -4 is out of range: T = 3 (positions 0 to 2, or -1 to -3 from the end)"),  # -1: the last
    (["--batch", "1"], "--batch 1 is out of range: B = 1 (samples 0 to 0, or -1 to -1 from the end)"),
    (["--precision", "18"], "--precision 18 is out of range: give 0 to 17"),
    (["--precision", "-1"], "--precision -1 is out of range: give 0 to 17"),
])
def test_out_of_range_options(args, message):
    r = run_app("run", PRE_REL, *args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == f"tracer: error: {message}\n"


@pytest.mark.parametrize("args", [["run"], ["run", PRE_REL, "--pos", "x"], ["run", PRE_REL, "--bogus"], ["walk", PRE_REL]])
def test_command_line_mistakes_exit_2_without_traceback(args):
    r = run_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.strip()


def test_no_arguments_prints_help():
    r = run_cli()
    assert "run" in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_version():
    r = ok("--version")
    assert re.fullmatch(r"tracer \d+\.\d+\.\d+\n", r.stdout)


def test_python_dash_m_tracer_works():
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    env["PYTHONPATH"] = str(REPO)
    r = subprocess.run([sys.executable, "-m", "tracer", "run", PRE_REL], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == run_cli("run", PRE_REL).stdout


def test_nonfinite_values_are_shown(tmp_path):
    # rich must not read "[nan, 1.000000]" as markup: the value cell shows it as written
    write_spec(tmp_path, "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[.nan, 1], [.inf, -.inf]]}\nseed: 0\nallow_nonfinite: true\n")
    r = run_app("run", "spec.yaml", "--pos", "1", cwd=tmp_path)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr
    assert rows(r.stdout)["input"][2] == "[inf, -inf]"
    r = run_app("run", "spec.yaml", cwd=tmp_path)
    assert rows(r.stdout)["input"][2] == "[nan, 1.000000]"


def test_spec_name_with_brackets_is_printed_as_written(tmp_path):
    write_spec(tmp_path, PRE_TEXT.replace('name: "Example 17.2, pre-norm"', 'name: "demo [/] [bold]x[/bold]"'))
    r = ok("run", "spec.yaml", cwd=tmp_path, run=run_app)
    assert r.stdout.splitlines()[0] == "demo [/] [bold]x[/bold]"


def test_spec_file_is_not_modified(tmp_path):
    text = PRE_TEXT
    p = write_spec(tmp_path, text)
    before = sorted(os.listdir(tmp_path))
    ok("run", "spec.yaml", "--verify", "--all", cwd=tmp_path)
    ok("run", "spec.yaml", "--json", cwd=tmp_path)
    assert p.read_text() == text and sorted(os.listdir(tmp_path)) == before


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path):
    pytest.importorskip("pty")
    write_spec(tmp_path, PRE_TEXT.replace("beta: zeros}\n  norm2", "beta: [0]}\n  norm2"))

    def on_tty(*args, env=None):
        full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
        full_env.update({"PYTHONPATH": str(REPO), "COLUMNS": "200", **(env or {})})
        return run_on_tty(["run", "spec.yaml", *args], tmp_path, full_env)[1]

    colour = re.compile(r"\x1b\[[0-9;]*(3[0-7]|38;|9[0-7])[0-9;]*m")
    assert colour.search(on_tty())  # the violation is red on a terminal
    assert not colour.search(on_tty("--no-color"))
    assert not colour.search(on_tty(env={"NO_COLOR": "1"}))


# -- --help in words, --pos counted from the end -------------------------------------------------------
def test_help_shows_no_python_types_and_each_command_its_own_words():
    from conftest import run_app

    for command in ("run", "diff", "graph", "stages", "validate", "check", "probe", "new"):
        r = run_app(command, "--help")
        assert r.returncode == 0
        assert not re.search(r"<(int|str|float|list\[[a-z]+\])>", r.stdout), (command, r.stdout)
    stages = " ".join(run_app("stages", "--help").stdout.split())
    assert "one row per stage name" in stages and "stage and position" not in stages
    graph = " ".join(run_app("graph", "--help").stdout.split())
    assert "--lang" in graph and "JSON" not in graph and "CSV" not in graph
    run = " ".join(run_app("run", "--help").stdout.split())
    assert "--pos T" in run and "--precision N" in run and "-f, --format FORMAT" in run


def test_pos_counts_from_the_end_as_in_python():
    spec = PRE  # T = 3
    last, minus1 = run_app("run", spec, "--pos", "2", "--format", "markdown"), run_app("run", spec, "--pos", "-1", "--format", "markdown")
    assert last.returncode == minus1.returncode == 0 and last.stdout == minus1.stdout and "t=2" in minus1.stdout
    first = run_app("run", spec, "--pos", "-3")
    assert first.returncode == 0 and "value at b=0, t=0" in first.stdout
    beyond = run_app("run", spec, "--pos", "-4")
    assert beyond.returncode == 2 and "--pos -4 is out of range: T = 3" in beyond.stderr
    d = run_app("diff", spec, POST, "--pos", "-1")
    assert "A at b=0, t=2" in d.stdout
