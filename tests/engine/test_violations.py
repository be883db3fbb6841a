"""What NumPy lets slide: every violation kind is built as a trap and flagged (table, panel, JSON, exit 1),
and its legal neighbour (the same spec with the mistake fixed) is not.

Numbers NumPy "would have given" are computed here with tests/helpers/oracle.py, independently of tracer's kernels.
"""

from __future__ import annotations

import json
import math
import os
import subprocess

import numpy as np
import pytest
from conftest import EXAMPLES, REPO, bin_first, run_app, run_cli, where, write_spec
from helpers.cases import spec_text
from helpers.oracle import attention, causal, ffn, layer_norm

# The chapter's Example 17.2 weights (section 17.5), used by the small traps.
CH17 = """\
weights:
  embedding: [[1, 0], [0, 1], [1, 1]]
  position: [[0, 0], [0, 1], [1, 0]]
  attn: {w_q: identity, w_k: identity, w_v: identity, w_o: [[1, 1], [1, -1]]}
  ffn: {w1: [[1, -1, 0], [0, 1, 1]], w2: [[1, 0], [0, 1], [1, -1]]}
"""

# Exercise 5's shapes: a [2,5,16] batch, H = 2, F = 64.
EX5 = """\
dims: {B: 2, T: 5, C: 16, H: 2, F: 64}
seed: 5
input: {x: random}
block:
  mask: causal
  steps:
    - {name: norm1, op: layer_norm, in: x, weights: norm1%(norm_axis)s}
    - {name: attention, op: mha, in: norm1, weights: attn}
    - {name: update0, op: select, in: attention, axis: B, index: 0}
    - {name: residual1, op: add, in: [x, %(update)s]}
    - {name: norm2, op: layer_norm, in: residual1, weights: norm2}
    - {name: ffn, op: ffn, in: norm2, weights: ffn}
    - {name: output, op: add, in: [residual1, ffn]}
"""


def ex5(update: str = "update0", norm_axis: str = "") -> str:
    return EX5 % {"update": update, "norm_axis": f", axis: {norm_axis}" if norm_axis else ""}


def table_rows(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    return [[c.strip() for c in line.strip("│").split("│")] for line in lines[start + 1:end]]


def panels(stdout: str) -> list[list[str]]:
    """The lines of each violation panel, box borders stripped."""
    out: list[list[str]] = []
    inside = False
    for line in stdout.splitlines():
        if line.startswith("╭"):
            out.append([])
            inside = True
        elif line.startswith("╰"):
            inside = False
        elif inside:
            out[-1].append(line[1:-1].strip())
    return out


def trap(tmp_path, text: str, *args: str, cli=run_app):
    """Run a spec as a table and as JSON; return (table run, JSON document).  cli=run_cli: through the installed command."""
    write_spec(tmp_path, text)
    table = cli("run", "spec.yaml", *args, cwd=tmp_path)
    js = cli("run", "spec.yaml", "--json", *args, cwd=tmp_path)
    assert table.returncode == js.returncode
    assert "Traceback" not in table.stderr + js.stderr
    return table, json.loads(js.stdout)


def assert_flagged(table, doc, kind: str, stage: str, panel: list[str], shapes: dict[str, str], message: str) -> None:
    """Exit 1; the run stopped at the violating stage, marked; the panel and the JSON violation say it all."""
    assert table.returncode == 1, table.stderr
    marked = [r[0] for r in table_rows(table.stdout) if "←" in r[0]]
    assert marked == [f"{stage}  ← violation"]
    [got] = panels(table.stdout)
    assert got[0] == f"{kind} violation at stage {stage}"
    assert got[1] == message
    for line in panel:
        assert line in got, (line, got)
    for name, label in shapes.items():
        assert f"{name}: {label}" in got
    assert doc["ok"] is False
    assert doc["violations"] == [{"kind": kind, "stage": stage, "message": message, "shapes": shapes}]


def assert_clean(table, doc) -> None:
    assert table.returncode == 0, table.stdout + table.stderr
    assert "← violation" not in table.stdout and "violation" not in table.stdout
    assert doc["ok"] is True and doc["violations"] == []


# -- broadcast ----------------------------------------------------------------------------------------
def test_residual_broadcast_of_one_sample_update(tmp_path):
    table, doc = trap(tmp_path, ex5(), cli=run_cli)
    assert_flagged(
        table, doc, "broadcast", "residual1",
        panel=["rule: a residual add takes two arrays of exactly the same shape: same samples, same positions, same width (section 17.2)",
               "NumPy would: stretch the size-1 axes and return [2, 5, 16] without complaint",
               ("why it is wrong here: one sample's update would be handed to all 2 samples, so the other sample would receive "
                "an update that is not its own (a residual adds each sample's and position's own update, section 17.2)")],
        shapes={"x": "[B,T,C] = [2,5,16]", "update0": "[B,T,C] = [1,5,16]"},
        message="residual1: x [2, 5, 16] and update0 [1, 5, 16] differ; an elementwise add needs equal shapes",
    )
    # stopped at the violating stage: the stages so far, nothing after
    assert [r[0].split()[0] for r in table_rows(table.stdout)] == ["input", "x", "norm1", "attention", "update0", "residual1"]
    assert [s["name"] for s in doc["stages"]] == ["input", "x", "norm1", "attention", "update0", "residual1"]
    # what was recorded at the violating stage is NumPy's stretched sum
    s = {st["name"]: np.array(st["values"]) for st in doc["stages"]}
    assert np.array_equal(s["residual1"], s["x"] + s["attention"][0:1])


def test_residual_with_equal_shapes_is_not_flagged(tmp_path):
    assert_clean(*trap(tmp_path, ex5(update="attention")))


@pytest.mark.parametrize("axis, index, operand, why", [
    ("C", 0, "[B,T,C] = [2,5,1]", "all 16 coordinates would receive the same value"),
    ("T", 3, "[B,T,C] = [2,1,16]", ("one position's update would be handed to all 5 positions, so the other 4 positions would "
                                    "receive an update that is not their own")),
], ids=["C", "T"])
def test_residual_broadcast_of_a_column_or_a_row(tmp_path, axis, index, operand, why):
    text = ex5().replace("axis: B, index: 0", f"axis: {axis}, index: {index}")
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 1
    [panel] = panels(r.stdout)
    assert f"update0: {operand}" in panel
    assert f"why it is wrong here: {why} (a residual adds each sample's and position's own update, section 17.2)" in panel


@pytest.mark.parametrize("group, key, given, letter, width", [
    ("norm1", "beta", "[0]", "C", 2),
    ("norm2", "gamma", "[2]", "C", 2),
    ("ffn", "b1", "[0.5]", "F", 3),
    ("ffn", "b2", "[0.5]", "C", 2),
    ("attn", "b_v", "[0.5]", "C", 2),
])
def test_weight_of_a_stretchable_shape(tmp_path, group, key, given, letter, width):
    text = "dims: {T: 3, C: 2, H: 2, F: 3}\nblock: {norm_order: pre, mask: causal}\ninput: {tokens: [0, 1, 2]}\n" + CH17
    text = text.replace(f"  {group}: {{", f"  {group}: {{{key}: {given}, ") if f"  {group}: {{" in text else text + f"  {group}: {{{key}: {given}}}\n"
    stage = {"norm1": "norm1", "norm2": "norm2", "ffn": "hidden" if key == "b1" else "ffn", "attn": "attention"}[group]
    table, doc = trap(tmp_path, text, cli=run_cli if key == "beta" else run_app)
    assert_flagged(
        table, doc, "broadcast", stage,
        panel=[f"rule: {key} holds exactly one value per coordinate: [{letter}] = [{width}]",
               f"NumPy would: repeat {key}'s single value across all {width} coordinates without complaint",
               f"why it is wrong here: {key} should hold one learned value per coordinate; a stretched value silently ties all {width} together"],
        shapes={key: "[?] = [1]"},  # a [1] is not [{letter}]: no letter would be true
        message=f"{stage}: {key} has shape [1] where [{letter}] = [{width}] is due",
    )
    # --verify cannot follow a stretched weight: it says so (regression: exit 3 in the scalar reference)
    v = run_app("run", "spec.yaml", "--verify", "--keep-going", cwd=tmp_path)
    assert v.returncode == 1
    assert (f"verify: skipped: the run flagged a broadcast violation at stage {stage} "
            f"(weights.{group}.{key} is [1] where [{letter}] = [{width}] is due)") in v.stdout
    # the legal neighbour: one value per coordinate, a [F] bias over [B,T,F] included
    fixed = text.replace(f"{key}: {given}", f"{key}: [{', '.join([given.strip('[]')] * width)}]")
    assert_clean(*trap(tmp_path, fixed))
    v = run_app("run", "spec.yaml", "--verify", cwd=tmp_path)
    assert v.returncode == 0 and "verify: largest |NumPy - reference| over all stages = " in v.stdout


def test_weight_of_a_shape_numpy_refuses_is_a_spec_error(tmp_path):
    text = "dims: {T: 3, C: 2, H: 2, F: 3}\nblock: {norm_order: pre}\ninput: {tokens: [0, 1, 2]}\n" + CH17 + "  norm1: {beta: [0, 0, 0]}\n"
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == f"tracer: error: spec.yaml:{where(text, '[0, 0, 0]')}: weights.norm1.beta: expected [C] = [2], received [3]"


def test_position_table_over_the_batch_and_bias_over_positions_are_legal(tmp_path):
    # B = 2 samples share the [T,C] position table; b1 [F] is added to every [B,T,F] row: contract broadcasts.
    text = ("dims: {C: 2, H: 2, F: 3}\nblock: {norm_order: pre, mask: causal}\ninput: {tokens: [[0, 1, 2], [2, 2, 0]]}\n"
            + CH17.replace("w2:", "b1: [0.5, -1, 2], w2:"))
    table, doc = trap(tmp_path, text)
    assert_clean(table, doc)
    s = {st["name"]: np.array(st["values"]) for st in doc["stages"]}
    E, P = np.array([[1, 0], [0, 1], [1, 1]], float), np.array([[0, 0], [0, 1], [1, 0]], float)
    assert np.array_equal(s["x"], E[np.array([[0, 1, 2], [2, 2, 0]])] + P[None])
    w1 = np.array([[1, -1, 0], [0, 1, 1]], float)
    assert np.abs(s["hidden"] - np.maximum(s["norm2"] @ w1 + [0.5, -1, 2], 0)).max() < 1e-15


# -- axis ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis, n, why", [
    ("T", 5, ("each position's result now depends on all 5 positions: position 0 changes when positions 1..4 do, so the future "
              "leaks into earlier positions even though the attention mask is right (section 17.3)")),
    ("B", 2, "each sample's result now depends on the other 1 sample of the batch: statistics mix samples"),
], ids=["T", "B"])
def test_layer_norm_over_the_wrong_axis(tmp_path, axis, n, why):
    table, doc = trap(tmp_path, ex5(update="attention", norm_axis=axis), cli=run_cli if axis == "T" else run_app)
    assert_flagged(
        table, doc, "axis", "norm1",
        panel=["rule: LayerNorm normalises each sample's each position on its own: statistics over C only (section 17.3)",
               f"NumPy would: average over the {n} entries along {axis} and normalise without complaint",
               f"why it is wrong here: {why}"],
        shapes={"x": "[B,T,C] = [2,5,16]"},
        message=f"norm1: LayerNorm statistics taken over {axis} ({n} entries) instead of C (16 coordinates)",
    )
    assert [s["name"] for s in doc["stages"]] == ["input", "x", "norm1"]
    s = {st["name"]: np.array(st["values"]) for st in doc["stages"]}
    assert np.abs(s["norm1"] - layer_norm(s["x"], 1.0, 0.0, 1e-5, axis="BTC".index(axis))).max() < 1e-12


def test_layer_norm_over_C_is_not_flagged(tmp_path):
    assert_clean(*trap(tmp_path, ex5(update="attention", norm_axis="C")))


SOFTMAX = """\
dims: {C: 2, H: 2, F: 3}
block:
  mask: causal
  steps:
    - {name: norm1, op: layer_norm, in: x, weights: norm1}
    - {name: attention, op: mha, in: norm1, weights: attn, axis: %s}
    - {name: residual1, op: add, in: [x, attention]}
    - {name: ffn, op: ffn, in: residual1, weights: ffn}
    - {name: output, op: add, in: [residual1, ffn]}
input: {tokens: [0, 1, 2]}
""" + CH17


def test_softmax_over_queries(tmp_path):
    table, doc = trap(tmp_path, SOFTMAX % "queries", "--all", cli=run_cli)
    assert_flagged(
        table, doc, "axis", "attention",
        panel=["rule: attention weights are a softmax over keys: each query's row sums to 1",
               "NumPy would: normalise each key's column instead of each query's row, without complaint",
               ("why it is wrong here: a query's weights no longer sum to 1 over what it reads, and each weight depends on "
                "the other queries' scores, later positions included")],
        shapes={"scores": "[B,H,T,T] = [1,2,3,3]"},
        message="attention: softmax taken over queries (axis -2) instead of keys (axis -1)",
    )
    weights = np.array(next(s["values"] for s in doc["stages"] if s["name"] == "attn.weights"))
    assert np.allclose(weights.sum(axis=-2), 1.0) and not np.allclose(weights.sum(axis=-1), 1.0)


def test_softmax_over_keys_is_not_flagged(tmp_path):
    table, doc = trap(tmp_path, SOFTMAX % "keys", "--all")
    assert_clean(table, doc)
    weights = np.array(next(s["values"] for s in doc["stages"] if s["name"] == "attn.weights"))
    assert np.allclose(weights.sum(axis=-1), 1.0)


# -- position -----------------------------------------------------------------------------------------
def test_positions_beyond_the_learned_table(tmp_path):
    text = "dims: {C: 2, H: 2, F: 3}\nblock: {norm_order: pre, mask: causal}\ninput: {tokens: [0, 1, 2, 0, 1]}\n" + CH17
    table, doc = trap(tmp_path, text, cli=run_cli)
    assert_flagged(
        table, doc, "position", "position",
        panel=["rule: a learned position table has one row for each position 0 .. T_max-1, and no more",
               "why it is wrong here: positions 3 to 4 were never trained; the table cannot invent them (section 17.1)"],
        shapes={"position": "[T_max,C] = [3,2]", "x": "[B,T,C] = [1,5,2]"},
        message="position: T = 5 positions but the learned table has T_max = 3 rows (indices 0 to 2)",
    )
    assert [s["name"] for s in doc["stages"]] == ["embed", "position"]  # the run stops at the violating stage


def test_positions_beyond_the_table_with_keep_going_traces_the_covered_positions(tmp_path):
    # Regression: the [5,5] causal mask met [3,3] scores (exit 3); now the first T_max positions are traced.
    text = "dims: {C: 2, H: 2, F: 3}\nblock: {norm_order: pre, mask: causal}\ninput: {tokens: [0, 1, 2, 0, 1]}\n" + CH17
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", "--json", "--keep-going", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [v["kind"] for v in doc["violations"]] == ["position"]
    out = next(s for s in doc["stages"] if s["name"] == "output")
    # the first three tokens are Example 17.2's, and under the causal mask their outputs are the book's
    assert [[round(v, 6) for v in row] for row in out["values"][0]] == [[1.99998, 2.99994], [0.999912, 1.476742], [2.999964, 3.746396]]
    r = run_app("run", "spec.yaml", "--verify", "--keep-going", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "verify: skipped: the run flagged a position violation at stage position (T = 5 runs past the position table's T_max = 3 rows)" in r.stdout


@pytest.mark.parametrize("tokens", ["[0, 1, 2]", "[0, 1]"])
def test_positions_within_the_table_are_not_flagged(tmp_path, tokens):
    text = f"dims: {{C: 2, H: 2, F: 3}}\nblock: {{norm_order: pre, mask: causal}}\ninput: {{tokens: {tokens}}}\n" + CH17
    assert_clean(*trap(tmp_path, text))


# -- nonfinite ----------------------------------------------------------------------------------------
MASKED = """\
dims: {C: 2, H: 2, F: 3}
block:
  norm_order: pre
  mask: [[1, 0, 0], %s, [1, 1, 1]]
input: {tokens: [0, 1, 2]}
""" + CH17


def test_fully_masked_row_is_nonfinite_at_the_attention_weights(tmp_path):
    table, doc = trap(tmp_path, MASKED % "[0, 0, 0]", cli=run_cli)
    assert_flagged(
        table, doc, "nonfinite", "attn.weights",
        panel=["rule: every stage of a block must be finite",
               "NumPy would: carry on quietly, printing at most a RuntimeWarning",
               "why it is wrong here: query position 1 may read no key at all: the softmax of a row that is entirely -inf is 0/0 = NaN"],
        shapes={"attn.weights": "[B,H,T,T] = [1,2,3,3]"},
        # row 1 of each of the H = 2 heads: 2 x 3 NaN
        message="attn.weights: first stage with non-finite values: 6 NaN and 0 Inf, the first at B=0, H=0, T=1, T=0",
    )
    weights = next(s["values"] for s in doc["stages"] if s["name"] == "attn.weights")
    assert weights[0][0][1] == ["NaN", "NaN", "NaN"]


def test_every_row_with_a_key_is_not_flagged(tmp_path):
    assert_clean(*trap(tmp_path, MASKED % "[0, 1, 0]"))


def test_overflow_is_nonfinite_at_the_first_infinite_stage(tmp_path):
    # Post-norm attention reads X itself: q.k = 1e200 * 1e200 overflows to Inf in the scores.
    text = """dims: {C: 2, H: 1, F: 2}
block: {mask: causal, norm_order: post}
input:
  x: [[%s, -1], [1, 2]]
weights:
  attn: {w_q: identity, w_k: identity, w_v: identity, w_o: identity}
  ffn: {w1: identity, w2: identity}
"""
    table, doc = trap(tmp_path, text % "1e200")
    assert table.returncode == 1
    assert doc["violations"] == [{"kind": "nonfinite", "stage": "attn.scores",
                                  "message": "attn.scores: first stage with non-finite values: 0 NaN and 1 Inf, the first at B=0, H=0, T=0, T=0",
                                  "shapes": {"attn.scores": "[B,H,T,T] = [1,1,2,2]"}}]
    assert "attn.scores  ← violation" in table.stdout
    assert_clean(*trap(tmp_path, text % "1e2"))


def test_nonfinite_input_allowed_on_purpose_is_flagged_at_the_input(tmp_path):
    text = """dims: {C: 2, H: 1, F: 2}
allow_nonfinite: true
block: {mask: none}
input:
  x: [[.inf, 0], [1, 2]]
weights:
  attn: {w_q: identity, w_k: identity, w_v: identity, w_o: identity}
  ffn: {w1: identity, w2: identity}
"""
    table, doc = trap(tmp_path, text)
    assert table.returncode == 1
    assert [(v["kind"], v["stage"]) for v in doc["violations"]] == [("nonfinite", "input")]
    assert doc["stages"][0]["values"][0][0] == ["Infinity", 0.0]


# -- --keep-going and --exit-zero ---------------------------------------------------------------------
def test_keep_going_flags_every_violation_and_computes_what_numpy_would(tmp_path):
    rng = np.random.default_rng(11)
    B, T, C, H, F = 2, 4, 4, 2, 5
    x = rng.uniform(-1, 1, (B, T, C))
    W = {"attn": {**{f"w_{n}": rng.uniform(-0.5, 0.5, (C, C)) for n in "qkvo"}, **{f"b_{n}": np.zeros(C) for n in "qkvo"}},
         "ffn": {"w1": rng.uniform(-0.5, 0.5, (C, F)), "b1": rng.uniform(-0.1, 0.1, F),
                 "w2": rng.uniform(-0.5, 0.5, (F, C)), "b2": rng.uniform(-0.1, 0.1, C)},
         "norm1": {"gamma": rng.uniform(0.5, 1.5, C), "beta": np.array([0.25])},  # the typo: one value for [C]
         "norm2": {"gamma": rng.uniform(0.5, 1.5, C), "beta": rng.uniform(-0.2, 0.2, C)}}
    steps = ("[{name: norm1, op: layer_norm, in: x, weights: norm1}, {name: attention, op: mha, in: norm1, weights: attn},"
             " {name: last, op: select, in: attention, axis: B, index: 1}, {name: residual1, op: add, in: [x, last]},"
             " {name: norm2, op: layer_norm, in: residual1, weights: norm2}, {name: ffn, op: ffn, in: norm2, weights: ffn},"
             " {name: output, op: add, in: [residual1, ffn]}]")
    text = spec_text("two mistakes", x, W, H, F, f"{{mask: causal, steps: {steps}}}")

    # what NumPy computes, mistakes included: beta stretched over C, sample 1's update added to both samples
    n1 = layer_norm(x, W["norm1"]["gamma"], 0.25, 1e-5)
    r = x + attention(n1, n1, W["attn"], H, causal(T))["output"][1:2]
    y = r + ffn(layer_norm(r, **W["norm2"], eps=1e-5), W["ffn"])

    write_spec(tmp_path, text)
    res = run_app("run", "spec.yaml", "--keep-going", "--json", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] is False
    assert [(v["kind"], v["stage"]) for v in doc["violations"]] == [("broadcast", "norm1"), ("broadcast", "residual1")]
    assert doc["violations"][1]["shapes"] == {"x": "[B,T,C] = [2,4,4]", "last": "[B,T,C] = [1,4,4]"}
    s = {st["name"]: np.array(st["values"]) for st in doc["stages"]}
    assert list(s) == ["input", "x", "norm1", "attention", "last", "residual1", "norm2", "ffn", "output"]
    assert np.abs(s["output"] - y).max() < 1e-12

    table = run_app("run", "spec.yaml", "--keep-going", cwd=tmp_path)
    assert table.returncode == 1
    assert [r[0] for r in table_rows(table.stdout) if "←" in r[0]] == ["norm1  ← violation", "residual1  ← violation"]
    assert [p[0] for p in panels(table.stdout)] == ["broadcast violation at stage norm1", "broadcast violation at stage residual1"]

    # without --keep-going the run stops at the first
    stop = json.loads(run_app("run", "spec.yaml", "--json", cwd=tmp_path).stdout)
    assert [v["stage"] for v in stop["violations"]] == ["norm1"] and stop["stages"][-1]["name"] == "norm1"

    # --exit-zero: the same report, exit 0
    zero = run_app("run", "spec.yaml", "--keep-going", "--json", "--exit-zero", cwd=tmp_path)
    assert zero.returncode == 0
    assert json.loads(zero.stdout)["violations"] == doc["violations"]


def test_one_stage_breaking_two_rules_is_flagged_twice(tmp_path):
    # Regression: the kernel stopped at the first broken contract, so beta: [0] went unreported beside the axis.
    text = ex5(update="attention", norm_axis="T") + "weights:\n  norm1: {beta: [0]}\n"
    write_spec(tmp_path, text)
    doc = json.loads(run_app("run", "spec.yaml", "--json", cwd=tmp_path).stdout)
    assert [(v["kind"], v["stage"]) for v in doc["violations"]] == [("axis", "norm1"), ("broadcast", "norm1")]
    assert doc["violations"][1]["shapes"] == {"beta": "[?] = [1]"}


# -- the examples and their script ----------------------------------------------------------------------
@pytest.mark.slow  # ten traps, two processes each; docs/coursework.md runs the same script in the quick suite
def test_violation_examples_script_passes():
    env = bin_first({k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")})  # its tracer, python3
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(["bash", str(EXAMPLES / "violations" / "check.sh")], check=False, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 10 and all(line.startswith("ok ") for line in lines), r.stdout


def test_chapter_specs_have_no_violations():
    for name in ("ch17-prenorm.yaml", "ch17-postnorm.yaml"):
        r = run_app("run", str(REPO / "specs" / name), "--json", "--keep-going")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["ok"] is True and doc["violations"] == []
        assert all(not isinstance(v, str) and math.isfinite(v) for s in doc["stages"] for v in np.ravel(s["values"]).tolist())


def test_every_operand_shape_carries_its_own_axis_letters(tmp_path):
    # a custom add of x [B,T,C] and a [B,T,F] stage: each shape with its own letters (was: hidden [B,T,C] = [1,3,1])
    text = ("dims: {C: 2, H: 2, F: 1}\ninput: {tokens: [0, 1, 2]}\nseed: 0\nblock:\n  steps:\n"
            "    - {name: hidden, op: ffn_hidden, in: x, weights: ffn}\n    - {name: output, op: add, in: [x, hidden]}\n")
    r = run_app("run", str(write_spec(tmp_path, text)), "--format", "json")
    assert r.returncode == 1
    v = json.loads(r.stdout)["violations"][0]
    assert v["shapes"] == {"x": "[B,T,C] = [1,3,2]", "hidden": "[B,T,F] = [1,3,1]"}
    table = run_app("run", str(tmp_path / "spec.yaml")).stdout
    assert "hidden: [B,T,F] = [1,3,1]" in table and "[B,T,C] = [1,3,1]" not in table
    assert run_app("validate", str(tmp_path / "spec.yaml")).returncode == 1
