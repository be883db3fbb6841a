"""Custom step lists (block.steps): validation before running, --steps, and blocks the presets do not cover.

Expected numbers come from tests/helpers/oracle.py, the independent NumPy model written from the chapter's formulas.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SPECS, run_app, where, write_spec
from helpers.cases import PARALLEL_STEPS, SANDWICH_STEPS, random_case
from helpers.oracle import causal, layer_norm, parallel, sandwich

from tracer.engine import executor
from tracer.errors import SpecError
from tracer.model.blocks import POST_NORM, PRE_NORM
from tracer.spec import load_spec_text

HEAD = """\
dims: {B: 2, T: 3, C: 4, H: 2, F: 6}
seed: 1
input: {x: random}
"""


def run_bad(tmp_path, text: str):
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    return r.stderr.strip()


# -- validation: every rule has a spec that breaks it, and the message points at the field ----------
# (steps, needle locating the offending value in the text, occurrence, field path, message fragment)
BAD_STEPS = [
    pytest.param("- {name: n, op: layer_nrom, in: x, weights: n}", "layer_nrom", 1, "block.steps[0].op",
                 "unknown op 'layer_nrom'; did you mean 'layer_norm'?", id="unknown-op-suggestion"),
    pytest.param("- {name: n, op: softmax, in: x}", "softmax", 1, "block.steps[0].op",
                 "unknown op 'softmax'; known ops: layer_norm, rms_norm, batch_norm, mha, cross_mha, add", id="unknown-op-listed"),
    pytest.param("- {name: norm1, op: layer_norm, in: x, weights: n}\n    - {name: a, op: mha, in: nrom1, weights: attn}",
                 "nrom1", 1, "block.steps[1].in", "no stage 'nrom1' before this step; did you mean 'norm1'?", id="unknown-input"),
    pytest.param("- {name: a, op: relu, in: b}\n    - {name: b, op: relu, in: x}", "b}", 1, "block.steps[0].in",
                 "no stage 'b' before this step", id="input-defined-later"),
    pytest.param("- {name: n, op: relu, in: x}\n    - {name: n, op: identity, in: x}", "n,", 2, "block.steps[1].name",
                 "stage 'n' is already defined", id="duplicate-stage"),
    pytest.param("- {name: x, op: relu, in: x}", "x,", 1, "block.steps[0].name", "stage 'x' is already defined", id="reserved-stage"),
    pytest.param("- {name: n, op: add, in: x}", "x}", 1, "block.steps[0].in", "add reads 2 stages, received 1", id="arity-add-1"),
    pytest.param("- {name: n, op: relu, in: [x, x]}", "[x, x]", 1, "block.steps[0].in", "relu reads 1 stage, received 2", id="arity-relu-2"),
    pytest.param("- {name: n, op: layer_norm, in: x}", "{name", 1, "block.steps[0]",
                 "layer_norm needs weights: the name of its weight group", id="weights-missing-norm"),
    pytest.param("- {name: n, op: mha, in: x}", "{name", 1, "block.steps[0]", "mha needs weights", id="weights-missing-mha"),
    pytest.param("- {name: n, op: relu, in: x, weights: n}", "n}", 1, "block.steps[0].weights", "relu takes no weights", id="weights-to-relu"),
    pytest.param("- {name: n, op: add, in: [x, x], weights: w}", "w}", 1, "block.steps[0].weights", "add takes no weights", id="weights-to-add"),
    pytest.param("- {name: n, op: relu, in: x, axis: C}", "C}", 1, "block.steps[0].axis", "relu takes no axis", id="axis-on-relu"),
    pytest.param("- {name: n, op: layer_norm, in: x, weights: n, axis: F}", "F}", 1, "block.steps[0].axis",
                 "expected one of C | T | B, received text 'F'", id="axis-layer-norm-F"),
    pytest.param("- {name: n, op: mha, in: x, weights: a, axis: T}", "T}", 1, "block.steps[0].axis",
                 "expected one of keys | queries, received text 'T'", id="axis-mha-T"),
    pytest.param("- {name: n, op: select, in: x, axis: T, index: 3}", "{name", 1, "block.steps[0]",
                 "select 3:4 along T, which has size 3", id="select-index-out-of-range"),
    pytest.param("- {name: n, op: select, in: x, axis: B, start: 1, stop: 3}", "{name", 1, "block.steps[0]",
                 "select 1:3 along B, which has size 2", id="select-stop-out-of-range"),
    pytest.param("- {name: n, op: select, in: x, axis: F, index: 0}", "{name", 1, "block.steps[0]",
                 "select along F, but the input is [B,T,C] = [2,3,4]", id="select-missing-axis"),
    pytest.param("- {name: n, op: select, in: x, index: 0}", "{name", 1, "block.steps[0].axis",
                 "expected one of B | T | C | F, received nothing (null)", id="select-without-axis"),
    pytest.param("- {name: n, op: relu, in: x, index: 0}", "0}", 1, "block.steps[0].index", "only select takes index", id="index-on-relu"),
    pytest.param("- {name: h, op: ffn_hidden, in: x, weights: f}\n    - {name: n, op: add, in: [x, h]}", "{name: n", 1, "block.steps[1]",
                 "cannot add [B,T,C] = [2,3,4] and [B,T,F] = [2,3,6]: NumPy cannot broadcast them either", id="add-not-broadcastable"),
    pytest.param("- {name: c, op: select, in: x, axis: C, index: 0}\n    - {name: n, op: layer_norm, in: c, weights: n}", "{name: n", 1,
                 "block.steps[1]", "layer_norm reads [B,T,C] with C = 4, received [B,T,C] = [2,3,1]", id="norm-of-a-C-slice"),
    pytest.param("- {name: h, op: ffn_hidden, in: x, weights: f}\n    - {name: n, op: layer_norm, in: h, weights: n}", "{name: n", 1,
                 "block.steps[1]", "layer_norm reads [B,T,C] with C = 4, received [B,T,F] = [2,3,6]", id="norm-of-hidden"),
    pytest.param("- {name: c, op: select, in: x, axis: T, start: 0, stop: 2}\n    - {name: n, op: mha, in: c, weights: a}", "{name: n", 1,
                 "block.steps[1]", "mha reads all T = 3 positions", id="mha-of-a-T-slice"),
    pytest.param("- {name: c, op: select, in: x, axis: C, start: 0, stop: 2}\n    - {name: n, op: linear, in: c, weights: l}", "{name: n", 1,
                 "block.steps[1]", "linear reads [B,T,C] with C = 4, received [B,T,C] = [2,3,2]", id="linear-of-a-C-slice"),
    pytest.param("- {name: n, op: ffn_out, in: x, weights: f}", "{name", 1, "block.steps[0]",
                 "ffn_out reads [B,T,F] with F = 6, received [B,T,C] = [2,3,4]", id="ffn-out-of-C"),
    pytest.param("- {name: n, op: relu, in: x, color: red}", "color", 1, "block.steps[0].color",
                 "unknown key 'color'", id="unknown-step-key"),
    pytest.param("- {op: relu, in: x}", "{op", 1, "block.steps[0]", "a step needs 'name'", id="step-without-name"),
]


def spec_error(text: str) -> str:
    """Validate in-process (fast); the CLI maps SpecError to exit 2, checked end to end below."""
    with pytest.raises(SpecError) as e:
        load_spec_text(text, "spec.yaml")
    assert e.value.exit_code == 2
    return str(e.value)


@pytest.mark.parametrize("steps, needle, nth, field, fragment", BAD_STEPS)
def test_bad_step_names_file_line_col_and_field(steps, needle, nth, field, fragment):
    text = HEAD + "block:\n  steps:\n    " + steps + "\n"
    err = spec_error(text)
    assert err.startswith(f"spec.yaml:{where(text, needle, nth)}: {field}: "), err
    assert fragment in err, err


@pytest.mark.parametrize("case", ["unknown-op-suggestion", "unknown-input", "weights-missing-norm", "add-not-broadcastable"])
def test_bad_step_through_the_cli_is_exit_2_without_traceback(tmp_path, case):
    steps, needle, nth, field, fragment = next(p.values for p in BAD_STEPS if p.id == case)
    text = HEAD + "block:\n  steps:\n    " + steps + "\n"
    err = run_bad(tmp_path, text)
    assert err.startswith(f"tracer: error: spec.yaml:{where(text, needle, nth)}: {field}: "), err
    assert fragment in err and "\n" not in err, err


def test_norm_order_and_steps_together_is_an_error():
    text = HEAD + "block:\n  norm_order: pre\n  steps:\n    - {name: n, op: relu, in: x}\n"
    err = spec_error(text)
    assert err.startswith(f"spec.yaml:{where(text, '- {name')}: block.steps: ")
    assert "give either norm_order (a preset step list) or steps (your own list), not both" in err


@pytest.mark.parametrize("weights, needle, group, hint", [
    ("  attn: {w_q: identity}\n", "attn:", "attn", "; the model reads: n1"),
    ("  n2: {gamma: ones}\n", "n2:", "n2", "; did you mean 'n1'?"),
])
def test_weight_group_given_but_unused_is_an_error(weights, needle, group, hint):
    text = HEAD + "block:\n  steps:\n    - {name: n, op: layer_norm, in: x, weights: n1}\nweights:\n" + weights
    err = spec_error(text)
    assert err == f"spec.yaml:{where(text, needle)}: weights.{group}: weight group {group!r} is given but nothing in the model reads it{hint}"


def test_empty_step_list_is_an_error():
    err = spec_error(HEAD + "block:\n  steps: []\n")
    assert "block.steps: expected a list of steps" in err and "received an empty list" in err


def test_weight_group_shared_by_different_ops_is_an_error():
    text = HEAD + "block:\n  steps:\n    - {name: n, op: layer_norm, in: x, weights: w}\n    - {name: a, op: mha, in: n, weights: w}\n"
    err = spec_error(text)
    assert "step a: weight group 'w' is shared by steps that need different weights (norm and attn)" in err


# -- --steps: the list a spec runs ---------------------------------------------------------------------
@pytest.mark.parametrize("spec, preset", [("ch17-prenorm.yaml", PRE_NORM), ("ch17-postnorm.yaml", POST_NORM)])
def test_steps_json_lists_the_preset(spec, preset):
    r = run_app("run", str(SPECS / spec), "--steps", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    entry = [("embed", "embed", []), ("position", "position_table", []), ("x", "add_position", ["embed", "position"])]
    assert [(s["name"], s["op"], s["inputs"]) for s in doc["steps"]] == entry + [(s.name, s.op, list(s.inputs)) for s in preset]
    hidden = next(s for s in doc["steps"] if s["name"] == "hidden")
    assert (hidden["axes"], hidden["shape"]) == (["B", "T", "F"], [1, 3, 3])  # the chapter's F = 3


def test_steps_table_shows_custom_steps_with_axis_and_shapes(tmp_path):
    text = HEAD + """block:
  steps:
    - {name: norm1, op: layer_norm, in: x, weights: norm1, axis: T}
    - {name: first, op: select, in: norm1, axis: B, index: 1}
    - {name: wide, op: linear, in: first, weights: proj, out: F}
"""
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", "--steps", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in row.strip("│").split("│")] for row in rows]
    assert cells == [
        ["1", "input", "input", "", "", "", "[B,T,C] = [2,3,4]"],
        ["2", "x", "identity", "input", "", "", "[B,T,C] = [2,3,4]"],
        ["3", "norm1", "layer_norm", "x", "norm1", "axis=T", "[B,T,C] = [2,3,4]"],
        ["4", "first", "select", "norm1", "", "axis=B, 1:2", "[B,T,C] = [1,3,4]"],
        ["5", "wide", "linear", "first", "proj", "out=F", "[B,T,F] = [1,3,6]"],
    ]
    assert "the spec's own steps" in r.stdout
    r = run_app("run", "spec.yaml", "--steps", "--json", cwd=tmp_path)
    steps = json.loads(r.stdout)["steps"]
    assert steps[3] == {"name": "first", "op": "select", "inputs": ["norm1"], "weights": None, "axis": "B", "start": 1, "stop": 2,
                        "shape": [1, 3, 4], "axes": ["B", "T", "C"]}
    assert steps[4]["out"] == "F" and steps[2]["axis"] == "T"


def test_custom_steps_with_final_norm_append_the_stage(tmp_path):
    text = HEAD.replace("seed: 1", "seed: 2") + "block:\n  final_norm: true\n  steps:\n" + PARALLEL_STEPS
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [s["name"] for s in doc["steps"]][-2:] == ["output", "final_norm"]
    out = {s["name"]: np.array(s["values"]) for s in doc["stages"]}
    assert np.abs(out["final_norm"] - layer_norm(out["output"], 1.0, 0.0, 1e-5)).max() < 1e-12


@pytest.mark.parametrize("steps, fragment", [
    ("- {name: h, op: ffn_hidden, in: x, weights: f}",
     "the final normalisation reads the last step, h: layer_norm reads [B,T,C] with C = 4, received [B,T,F] = [2,3,6]"),
    ("- {name: final_norm, op: relu, in: x}", "a step is already named final_norm; rename it, or drop final_norm: true"),
], ids=["reads-F", "name-taken"])
def test_final_norm_after_custom_steps_is_checked(steps, fragment):
    # Regression: the appended final LayerNorm was not shape-checked (exit 3) and could repeat a stage name.
    text = HEAD + "block:\n  final_norm: true\n  steps:\n    " + steps + "\n"
    assert spec_error(text) == f"spec.yaml:{where(text, 'true')}: block.final_norm: {fragment}"


def test_batch_beyond_a_stage_that_kept_one_sample(tmp_path):
    # Regression: the output matrix indexed sample 1 of a [1,T,C] stage (exit 3).
    text = HEAD + "block:\n  steps:\n    - {name: n, op: layer_norm, in: x, weights: n}\n    - {name: first, op: select, in: n, axis: B, index: 1}\n"
    write_spec(tmp_path, text)
    r = run_app("run", "spec.yaml", "--batch", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if line.startswith("│")}
    assert "—" in rows["first"] and "—" not in rows["n"]
    assert "first holds 1 sample (b = 0 to 0): there is no sample b=1 to show" in r.stdout
    r = run_app("run", "spec.yaml", "--batch", "0", cwd=tmp_path)
    trace = executor.run(load_spec_text(text))
    assert np.array_equal(trace.stages["first"].array, trace.stages["n"].array[1:2])
    assert [line.split(":")[0] for line in r.stdout.splitlines() if line.startswith("  t=")] == ["  t=0", "  t=1", "  t=2"]


# -- blocks the presets do not cover, against the independent model -----------------------------------
@pytest.mark.parametrize("kind, model, steps", [("sandwich", sandwich, SANDWICH_STEPS), ("parallel", parallel, PARALLEL_STEPS)],
                         ids=["sandwich", "parallel"])
def test_custom_block_matches_independent_numpy(tmp_path, kind, model, steps):
    case = random_case(7, kind=kind, mask="causal")
    B, T, C, H, _ = case["dims"]
    write_spec(tmp_path, case["text"])
    r = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["violations"] == []
    assert [s["name"] for s in doc["steps"]] == ["input", "x"] + [line.split("name: ")[1].split(",")[0] for line in steps.splitlines()]
    got = np.array(next(s["values"] for s in doc["stages"] if s["name"] == "output"))
    expected = model(case["x"], case["W"], H, case["eps"], causal(T))
    assert got.shape == (B, T, C)
    assert np.abs(got - expected).max() < 1e-12


def test_parallel_block_reads_norm1_twice():
    case = random_case(3, kind="parallel", mask="none")
    trace = executor.run(load_spec_text(case["text"]))
    s = trace.stages
    assert np.array_equal(s["both"].array, s["attention"].array + s["ffn"].array)
    assert np.array_equal(s["output"].array, s["x"].array + s["both"].array)


# -- no false alarms: many random valid blocks, every stage checked against the model ---------------
@pytest.mark.parametrize("seed", range(120))
def test_random_valid_block_runs_clean_and_matches_numpy(seed):
    case = random_case(seed)
    trace = executor.run(load_spec_text(case["text"], f"case{seed}.yaml"))
    assert trace.violations == [], [v.message for v in trace.violations]
    assert trace.output.array.shape == case["expected"].shape
    assert np.abs(trace.output.array - case["expected"]).max() < 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_random_valid_block_through_the_cli_exits_0(tmp_path, seed):
    case = random_case(1000 + seed, kind=["pre", "post", "sandwich", "parallel"][seed])
    write_spec(tmp_path, case["text"])
    r = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["violations"] == []
    got = np.array(next(s["values"] for s in doc["stages"] if s["name"] == "output"))
    assert np.abs(got - case["expected"]).max() < 1e-12
