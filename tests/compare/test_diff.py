"""tracer diff: alignment, tolerances, saved traces, mismatched blocks, exit codes and the JSON schema.

Expected numbers are worked out by hand from Chapter 17 (Example 17.2 and section 17.6), not
copied from tracer's output.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from conftest import EXAMPLES, POST, PRE, PRE_TEXT, SPECS, compared, run_app, write_spec

from tracer.compare import align, explain, judge
from tracer.model.blocks import POST_NORM, PRE_NORM

# Example 17.2: the first row of X is [1, 0]; LayerNorm (eps 1e-5) maps it to [a, -a].
A = 0.5 / math.sqrt(0.25001)


def diff_json(*args: str, code: int | None = None) -> dict:
    r = run_app("diff", *args, "--json")
    if code is not None:
        assert r.returncode == code, r.stderr
    assert r.stderr == ""
    return json.loads(r.stdout)


def stage(doc: dict, name: str) -> dict:
    return next(s for s in doc["stages"] if s["name"] == name)


def save_trace(tmp_path, spec: str, name: str, *extra: str) -> str:
    r = run_app("run", spec, "--json", *extra)
    assert r.returncode == 0, r.stderr
    out = tmp_path / name
    out.write_text(r.stdout, encoding="utf-8")
    return str(out)


# -- alignment ---------------------------------------------------------------

def test_align_keeps_a_order_and_places_b_only_after_their_b_predecessor():
    assert align.align(["x", "a", "b", "c"], ["x", "b", "d", "e", "c"]) == ["x", "a", "b", "d", "e", "c"]
    assert align.align(["x", "a"], ["new", "x"]) == ["new", "x", "a"]  # only in B, first in B
    assert align.align([], ["p", "q"]) == ["p", "q"]


def test_stage_rows_only_in_a_and_only_in_b():
    one = {"x": np.zeros((1, 2)), "gone": np.ones(2)}
    two = {"x": np.zeros((1, 2)), "fresh": np.ones(3)}
    from tracer.engine.executor import Stage

    a = {k: Stage(k, v, ("T", "C")[-v.ndim:], "") for k, v in one.items()}
    b = {k: Stage(k, v, ("T", "C")[-v.ndim:], "") for k, v in two.items()}
    rows = judge.compare_stages(a, b, 0, 0, 1e-9, 1e-9)
    # fresh follows x, its predecessor in B
    assert [(r.name, r.status) for r in rows] == [("x", "equal"), ("fresh", "only_in_b"), ("gone", "only_in_a")]


def test_structure_lines_for_pre_and_post_norm():
    lines = explain.structure_lines(PRE_NORM, POST_NORM)
    # Section 17.6: Pre-Norm attention receives LN(X), Post-Norm receives X ...
    assert "attention reads norm1(x) in A, x in B" in lines
    # ... and Post-Norm normalises after each residual add (17.9, answer 6).
    assert "B normalises after each residual add: norm1(residual1), norm2(residual2)" in lines
    assert "residual2 = norm1 + ffn only in B" in lines
    assert "output = residual1 + ffn in A, norm2 in B" in lines
    assert any(line.startswith("A normalises only what the sublayers read") for line in lines)
    assert explain.structure_lines(PRE_NORM, PRE_NORM) == []


# -- the equality rule -------------------------------------------------------

def test_compare_arrays_nonfinite_and_symmetric_tolerance():
    nan, inf = math.nan, math.inf
    same = judge.compare_arrays(np.array([nan, inf, -inf, 1.0]), np.array([nan, inf, -inf, 1.0]), 0.0, 0.0)
    assert same.equal and same.max_abs_diff == 0.0
    c = judge.compare_arrays(np.array([inf, 1.0]), np.array([5.0, 1.0]), 1e-9, 1e-9)
    assert not c.equal and c.max_abs_diff == inf and c.where == (0,)
    c = judge.compare_arrays(np.array([nan]), np.array([0.0]), 1.0, 1.0)
    assert not c.equal
    # |a - b| <= atol + rtol * max(|a|, |b|): 100 vs 101 with rtol 0.01 is equal either way round
    assert judge.compare_arrays(np.array([100.0]), np.array([101.0]), 0.0, 0.01).equal
    assert judge.compare_arrays(np.array([101.0]), np.array([100.0]), 0.0, 0.01).equal
    assert not judge.compare_arrays(np.array([101.0]), np.array([100.0]), 0.0, 0.009).equal


# -- the chapter's pair --------------------------------------------------------

def test_chapter_pair_first_diverging_stage_worked_by_hand():
    doc = diff_json(PRE, POST, code=1)
    # embed, position and x come before the block: the same weights and tokens give the same X.
    for name in ("embed", "position", "x"):
        assert stage(doc, name)["status"] == "equal"
    # norm1 is the first stage (in A's order) that differs. At t = 0 the two agree: pre-norm
    # normalises X_1 = [1, 0]; post-norm normalises X_1 + MHA(X)_1 = [1, 0] + [1, 1] = [2, 1]
    # (position 0 sees only its own key, so each head returns its own value [1, 0], and
    # [1, 0] W_O = [1, 1]); both LayerNorm to [a, -a].
    assert doc["first_diverging"] == "norm1"
    n1 = stage(doc, "norm1")
    assert n1["status"] == "differs"
    assert n1["value_a"] == pytest.approx([A, -A], abs=1e-12)
    assert n1["value_b"] == pytest.approx([A, -A], abs=1e-12)
    # At t = 1 pre-norm normalises X_2 = [0, 2] -> [-1, 1] / sqrt(1 + 1e-5). Post-norm adds
    # MHA(X)_2: head 0 (q = 0) averages values 1 and 0 -> 0.5; head 1 (q = 2, keys 0 and 2,
    # scores 0 and 4) gives 2 e^4 / (1 + e^4) = h. W_O: [0.5 + h, 0.5 - h]; the row is
    # [0.5 + h, 2.5 - h], i.e. mean +- delta with delta = h - 1, and LayerNorm gives
    # [delta, -delta] / sqrt(delta^2 + 1e-5). That is the largest difference in the array.
    h = 2 * math.exp(4) / (1 + math.exp(4))
    delta = h - 1
    expected = delta / math.sqrt(delta**2 + 1e-5) + 1 / math.sqrt(1 + 1e-5)
    assert n1["max_abs_diff"] == pytest.approx(expected, abs=1e-12)
    assert n1["where"][:2] == [0, 1]
    # attention at t = 0: pre-norm [0, 2a] (Table 17.1), post-norm [1, 1] (worked above).
    att = stage(doc, "attention")
    assert att["value_a"] == pytest.approx([0.0, 2 * A], abs=1e-12)
    assert att["value_b"] == pytest.approx([1.0, 1.0], abs=1e-12)
    # Y_1 = [1.999980, 2.999940] in Table 17.1.
    assert stage(doc, "output")["value_a"] == pytest.approx([1.999980, 2.999940], abs=5e-7)
    assert stage(doc, "residual2")["status"] == "only_in_b"
    assert doc["settings"]["differences"] == [{"field": "block.norm_order", "a": "pre", "b": "post"}]
    assert all(w["status"] == "equal" for w in doc["settings"]["weights"])


def test_chapter_pair_table_on_a_pipe():
    r = run_app("diff", PRE, POST)
    assert r.returncode == 1, r.stderr
    out = r.stdout
    assert "\x1b[" not in out  # piped: no colour codes
    assert "attention reads norm1(x) in A, x in B" in out
    assert "B normalises after each residual add: norm1(residual1), norm2(residual2)" in out
    assert "block.norm_order" in out
    assert "← first difference" in out
    row = next(line for line in out.splitlines() if line.startswith("│ norm1 ") and "[B,T,C]" in line)  # the stage row
    assert "← first difference" in row
    assert out.strip().splitlines()[-1].startswith("first diverging stage: norm1 (differs")
    assert "at b=0, t=0 the two agree" in out


def test_swapped_sides_follow_the_new_a_order():
    # In post-norm order attention comes before norm1, and it differs at t = 0 already.
    doc = diff_json(POST, PRE, code=1)
    assert doc["first_diverging"] == "attention"


# -- the same within tolerance -------------------------------------------------

def test_spec_with_itself_is_the_same():
    r = run_app("diff", PRE, PRE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("same: all 10 stages agree")


def test_spec_with_its_own_saved_trace(tmp_path):
    saved = save_trace(tmp_path, PRE, "pre.json")
    doc = diff_json(PRE, saved, code=0)
    assert doc["same"] is True and doc["first_diverging"] is None
    assert doc["b"]["source"] == "trace"
    assert doc["settings"]["weights"] is None  # saved without --with-weights
    assert any("weights not compared" in n for n in doc["notes"])
    with_weights = save_trace(tmp_path, PRE, "pre-w.json", "--with-weights", "--all")
    doc = diff_json(with_weights, PRE, "--all", code=0)
    assert len(doc["settings"]["weights"]) == 18  # E, P, 2 x (gamma, beta), 8 attention, 4 FFN
    assert any(s["name"] == "attn.weights" for s in doc["stages"])


def test_a_spec_written_as_json_is_a_spec_not_a_trace(tmp_path):
    import yaml

    as_json = tmp_path / "pre-spec.json"
    as_json.write_text(json.dumps(yaml.safe_load(PRE_TEXT.replace("1e-5", "1.0e-5"))), encoding="utf-8")
    doc = diff_json(PRE, str(as_json), code=0)
    assert doc["b"]["source"] == "spec"


def test_saved_pre_and_post_traces_differ(tmp_path):
    pre, post = save_trace(tmp_path, PRE, "pre.json"), save_trace(tmp_path, POST, "post.json")
    doc = diff_json(pre, post, code=1)
    assert doc["first_diverging"] == "norm1"
    assert "attention reads norm1(x) in A, x in B" in doc["structure"]["differences"]


def test_all_against_a_trace_saved_without_internals(tmp_path):
    saved = save_trace(tmp_path, PRE, "pre.json")
    doc = diff_json(PRE, saved, "--all", code=0)
    assert any("saved without --all" in n for n in doc["notes"])
    assert not any("." in s["name"] for s in doc["stages"])


def test_nonfinite_values_round_trip_through_a_saved_trace(tmp_path):
    text = PRE_TEXT.replace("b2: zeros", "b2: [.nan, .inf]") + "allow_nonfinite: true\n"
    spec = str(write_spec(tmp_path, text))
    r = run_app("run", spec, "--json", "--keep-going", "--with-weights")
    assert r.returncode in (0, 1), r.stderr  # 1 if NaN is flagged as a violation: the trace is written all the same
    saved = tmp_path / "nan.json"
    saved.write_text(r.stdout, encoding="utf-8")
    assert '"NaN"' in r.stdout and '"Infinity"' in r.stdout
    doc = diff_json(spec, str(saved), "--keep-going", code=0)
    out = stage(doc, "output")
    assert out["status"] == "equal"
    assert out["value_a"][0] == "NaN" and out["value_a"][1] == "Infinity"


# -- tolerances ------------------------------------------------------------------

def w_o(tmp_path, entry: str) -> str:
    return str(write_spec(tmp_path, PRE_TEXT.replace("w_o: [[1, 1], [1, -1]]", f"w_o: [[1, 1], [{entry}, -1]]"), f"wo-{entry}.yaml"))


def test_weight_change_below_atol_is_the_same(tmp_path):
    r = run_app("diff", PRE, w_o(tmp_path, "1.000000000001"))  # 1e-12, below the default atol 1e-9
    assert r.returncode == 0, r.stdout + r.stderr


def test_weight_change_above_atol_is_named(tmp_path):
    doc = diff_json(PRE, w_o(tmp_path, "1.000001"), code=1)
    changed = [w for w in doc["settings"]["weights"] if w["status"] != "equal"]
    assert [w["name"] for w in changed] == ["attn.w_o"]
    assert changed[0]["where"] == [1, 0]
    assert changed[0]["max_abs_diff"] == pytest.approx(1e-6, rel=1e-6)
    assert (changed[0]["a"], changed[0]["b"]) == (1.0, 1.000001)
    # norm1 does not read W_O, so attention is the first stage to move: at t = 0 the heads
    # give [a, -a], and column 0 of W_O now sums a - 1.000001 a = -1e-6 a.
    assert doc["first_diverging"] == "attention"
    assert stage(doc, "norm1")["status"] == "equal"
    assert stage(doc, "attention")["value_b"][0] == pytest.approx(-1e-6 * A, abs=1e-15)
    # a looser atol hides it; rtol alone does not, since attention[0] is 0 in A
    assert run_app("diff", PRE, w_o(tmp_path, "1.000001"), "--atol", "1e-5").returncode == 0
    assert run_app("diff", PRE, w_o(tmp_path, "1.000001"), "--rtol", "1e-5").returncode == 1


# -- different blocks: reported, never a crash ------------------------------------

def test_mismatched_dims_are_reported(tmp_path):
    wide = write_spec(tmp_path, "name: wide\ndims: {C: 4, H: 2, F: 3}\ninput:\n  tokens: [0, 1, 2, 1]\nseed: 0\n", "wide.yaml")
    doc = diff_json(PRE, str(wide), "--pos", "3", code=1)
    fields = {d["field"]: (d["a"], d["b"]) for d in doc["settings"]["differences"]}
    assert fields["dims.C"] == (2, 4) and fields["dims.T"] == (3, 4)
    assert stage(doc, "x")["status"] == "shapes_differ"
    assert stage(doc, "x")["max_abs_diff"] is None
    assert stage(doc, "position")["status"] == "only_in_a"  # wide has no position table
    assert stage(doc, "x")["value_a"] is None  # A has no t = 3
    assert len(stage(doc, "x")["value_b"]) == 4
    assert doc["first_diverging"] == "embed"
    r = run_app("diff", PRE, str(wide))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "shapes differ" in r.stdout


def test_extra_stage_only_in_b(tmp_path):
    final = write_spec(tmp_path, PRE_TEXT.replace("final_norm: false", "final_norm: true"), "final.yaml")
    doc = diff_json(PRE, str(final), code=1)
    assert stage(doc, "final_norm")["status"] == "only_in_b"
    assert doc["first_diverging"] == "final_norm"  # the block itself is unchanged
    assert {"field": "block.final_norm", "a": False, "b": True} in doc["settings"]["differences"]
    assert "final_norm = LayerNorm[final_norm](output) only in B" in doc["structure"]["differences"]


# -- exit code 2: trouble ------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ('{"schema_version": 1,', "not valid JSON"),
    ('{"hello": 1}', "not a tracer trace"),
    ('[1, 2]', "not a tracer trace"),
])
def test_trouble_reading_a_side(tmp_path, content, message):
    path = tmp_path / "side.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    r = run_app("diff", PRE, str(path))
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_unsupported_schema_version_and_malformed_stages(tmp_path):
    doc = json.loads(run_app("run", PRE, "--json").stdout)
    doc["schema_version"] = 2
    (tmp_path / "v2.json").write_text(json.dumps(doc), encoding="utf-8")
    r = run_app("diff", PRE, str(tmp_path / "v2.json"))
    assert r.returncode == 2 and "schema_version: 2 is not supported" in r.stderr

    doc["schema_version"] = 1
    doc["stages"][2]["values"][0].pop()  # x: one row short
    (tmp_path / "short.json").write_text(json.dumps(doc), encoding="utf-8")
    r = run_app("diff", str(tmp_path / "short.json"), PRE)
    assert r.returncode == 2
    assert "stages[2] (x).values: expected shape [1, 3, 2]" in r.stderr and "received [1, 2, 2]" in r.stderr

    doc = json.loads(run_app("run", PRE, "--json").stdout)
    doc["stages"][3]["values"][0][0][1] = "one"
    (tmp_path / "word.json").write_text(json.dumps(doc), encoding="utf-8")
    r = run_app("diff", PRE, str(tmp_path / "word.json"))
    assert r.returncode == 2 and "stages[3] (norm1).values[0, 0, 1]: expected a number" in r.stderr


def test_bad_spec_is_trouble(tmp_path):
    bad = write_spec(tmp_path, PRE_TEXT.replace("C: 2", "C: 3"), "bad.yaml")
    r = run_app("diff", str(bad), PRE)
    assert r.returncode == 2
    assert "bad.yaml:" in r.stderr and "H = 2 must divide C = 3" in r.stderr


def test_violation_is_trouble_unless_keep_going(tmp_path):
    # beta: [0] where [C] = [2] is due: NumPy would stretch it, tracer flags a broadcast violation.
    viol = str(write_spec(tmp_path, PRE_TEXT.replace("norm1: {gamma: ones, beta: zeros}", "norm1: {gamma: ones, beta: [0]}"), "viol.yaml"))
    r = run_app("diff", PRE, viol)
    assert r.returncode == 2
    assert "B (" in r.stderr and "broadcast violation: norm1: beta has shape [1]" in r.stderr and "--keep-going" in r.stderr
    # With --keep-going: compared. Stretching a zero gives the same numbers, but the weight's shape differs.
    doc = diff_json(PRE, viol, "--keep-going", code=1)
    assert doc["b"]["ok"] is False and doc["b"]["violations"][0]["kind"] == "broadcast"
    assert all(s["status"] == "equal" for s in doc["stages"])
    beta = next(w for w in doc["settings"]["weights"] if w["name"] == "norm1.beta")
    assert (beta["status"], beta["shape_a"], beta["shape_b"]) == ("shapes_differ", [2], [1])
    assert run_app("diff", viol, viol, "--keep-going").returncode == 0


@pytest.mark.parametrize("args, message", [
    (("--pos", "3"), "--pos 3 is out of range: T = 3 in A, 3 in B"),
    (("--batch", "1"), "--batch 1 is out of range"),
    (("--atol", "-1"), "--atol: expected a finite number of 0 or more (such as 1e-9), received -1"),
    (("--atol", "inf"), "--atol: expected a finite number of 0 or more (such as 1e-9), received inf"),
    (("--rtol", "nan"), "--rtol: expected a finite number of 0 or more (such as 1e-9), received nan"),
    (("--precision", "18"), "--precision 18 is out of range"),
])
def test_bad_options_are_trouble(args, message):
    r = run_app("diff", PRE, POST, *args)
    assert r.returncode == 2 and message in r.stderr


def test_with_weights_needs_json():
    r = run_app("run", PRE, "--with-weights")
    assert r.returncode == 2 and "--with-weights adds the weights to the JSON output or the --save archive" in r.stderr


# -- the JSON schema ------------------------------------------------------------------

def test_json_schema_keys_and_types():
    doc = diff_json(PRE, POST, code=1)
    assert set(doc) == {"schema_version", "kind", "same", "first_diverging", "summary", "a", "b", "tolerance",
                        "position", "structure", "settings", "stages", "notes"}
    assert doc["schema_version"] == 1 and doc["kind"] == "diff"
    assert doc["same"] is False and isinstance(doc["summary"], str)
    for side in (doc["a"], doc["b"]):
        assert set(side) == {"path", "source", "name", "ok", "violations"}
        assert side["source"] == "spec" and side["ok"] is True and side["violations"] == []
    assert doc["tolerance"] == {"atol": 1e-9, "rtol": 1e-9}
    assert doc["position"] == {"batch": 0, "pos": 0}
    assert set(doc["structure"]) == {"same", "steps", "differences"}
    assert doc["structure"]["same"] is False
    for step in doc["structure"]["steps"]:
        assert set(step) == {"name", "status", "a", "b", "settings_differ"} and isinstance(step["settings_differ"], list)
        assert step["status"] in {"equal", "differs", "only_in_a", "only_in_b"}
        for s in (step["a"], step["b"]):
            assert s is None or (set(s) == {"op", "inputs", "weights", "expr", "settings"} and isinstance(s["inputs"], list))
    assert all(isinstance(line, str) for line in doc["structure"]["differences"])
    assert set(doc["settings"]) == {"same", "differences", "weights"}
    for w in doc["settings"]["weights"]:
        assert set(w) == {"name", "status", "shape_a", "shape_b", "max_abs_diff", "where", "a", "b"}
    statuses = {"equal", "differs", "shapes_differ", "only_in_a", "only_in_b"}
    for s in doc["stages"]:
        assert set(s) == {"name", "status", "shape_a", "shape_b", "axes_a", "axes_b", "value_a", "value_b", "max_abs_diff", "where"}
        assert s["status"] in statuses
        if s["status"] in ("equal", "differs"):
            assert isinstance(s["max_abs_diff"], float) and s["shape_a"] == s["shape_b"]
    assert isinstance(doc["notes"], list)


# -- examples/exercise6 ------------------------------------------------------------------

def test_exercise6_record_is_the_prenorm_forward_record():
    record = str(EXAMPLES / "exercise6" / "prenorm-record.json")
    doc = diff_json(record, PRE, code=0)
    assert len(doc["settings"]["weights"]) == 18  # the record holds the weights
    doc = diff_json(record, POST, code=1)
    assert doc["first_diverging"] == "norm1"
    doc = diff_json(record, str(EXAMPLES / "exercise6" / "prenorm-eps-1e-3.yaml"), code=1)
    assert doc["settings"]["differences"] == [{"field": "block.eps", "a": 1e-5, "b": 1e-3}]
    # LayerNorm of [1, 0] with eps 1e-3: 0.5 / sqrt(0.25 + 0.001)
    assert stage(doc, "norm1")["value_b"][0] == pytest.approx(0.5 / math.sqrt(0.251), abs=1e-12)


def test_saved_trace_of_a_stack_keeps_its_layer_stages(tmp_path):
    # blocks.0.norm1 has a '.' in its name but is a step's stage, not an attention internal:
    # the stack diffed with its own saved trace is the same (it used to read 'only in B').
    saved = save_trace(tmp_path, str(SPECS / "stack-2-layers.yaml"), "stack.json")
    doc = diff_json(saved, str(SPECS / "stack-2-layers.yaml"), code=0)
    assert doc["same"] is True
    assert "blocks.1.norm2" in [s["name"] for s in doc["stages"]]
    assert "blocks.0.attn.q" not in [s["name"] for s in doc["stages"]]


# -- a label is not a computation: block.steps that compute the preset block are the preset block ------
PRESET_STEPS = """  steps:
    - {name: norm1, op: layer_norm, in: x, weights: norm1}
    - {name: attention, op: mha, in: norm1, weights: attn}
    - {name: residual1, op: add, in: [x, attention]}
    - {name: norm2, op: layer_norm, in: residual1, weights: norm2}
    - {name: hidden, op: ffn_hidden, in: norm2, weights: ffn}
    - {name: ffn, op: ffn_out, in: hidden, weights: ffn}
    - {name: output, op: add, in: [residual1, ffn]}
"""


def _written_out(tmp_path, steps: str = PRESET_STEPS):
    text = PRE_TEXT
    line = next(ln for ln in text.splitlines(keepends=True) if ln.lstrip().startswith("norm_order: pre"))
    return write_spec(tmp_path, text.replace(line, steps), "custom.yaml")


def test_the_preset_written_as_steps_is_the_same_block(tmp_path):
    ref = tmp_path / "reference.json"
    r = run_app("run", PRE, "--json")
    ref.write_text(r.stdout, encoding="utf-8")
    custom = _written_out(tmp_path)
    for a in (str(ref), PRE):
        d = run_app("diff", a, str(custom), "--json")
        doc = json.loads(d.stdout)
        assert d.returncode == 0, d.stdout[-800:]
        assert doc["settings"]["differences"] == [] and doc["structure"]["differences"] == []
    swapped = _written_out(tmp_path, PRESET_STEPS.replace("in: [x, attention]", "in: [attention, x]"))  # x + U = U + x
    assert run_app("diff", str(ref), str(swapped)).returncode == 0


def test_steps_that_compute_something_else_still_differ(tmp_path):
    wrong = _written_out(tmp_path, PRESET_STEPS.replace("in: [residual1, ffn]", "in: [x, ffn]"))
    d = run_app("diff", PRE, str(wrong), "--json")
    doc = json.loads(d.stdout)
    assert d.returncode == 1 and doc["structure"]["differences"]
    assert all(s["field"] != "block.norm_order" for s in doc["settings"]["differences"])
    post = run_app("diff", PRE, POST, "--json")
    assert {"field": "block.norm_order", "a": "pre", "b": "post"} in json.loads(post.stdout)["settings"]["differences"]


def test_at_100_columns_a_c2_table_keeps_its_shapes_whole():
    import io

    from rich.console import Console

    from tracer.compare.view import diff_view

    r = compared(PRE, POST)
    c = Console(width=100, file=io.StringIO(), no_color=True, emoji=False, highlight=False)
    c.print(diff_view(r, 6))
    out = c.file.getvalue()
    assert max(len(line) for line in out.splitlines()) <= 100
    rows = [line for line in out.splitlines() if "│" in line and "[B,T,C] = [1,3,2]" in line]
    assert len(rows) >= 9  # one shape column (the same on both sides), never folded: was '[B,T,C] =' / '[1,3,2]' twice a row
    assert "shape in A" not in out


# -- the stage table on a 100-column terminal -------------------------------------------------------------
STAGES_A_B = ["embed", "position", "x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "residual2", "output"]


def diff_on_tty(columns: int, *args: str) -> list[str]:
    import os

    from conftest import REPO, run_on_tty

    env = {**os.environ, "COLUMNS": str(columns), "LINES": "40", "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    code, out = run_on_tty(["diff", PRE, POST, *args], REPO, env)
    assert code == 1, out
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out).replace("\r", "").splitlines()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_c2_diff_fits_100_columns_without_wrapping_a_cell(lang):
    from rich.cells import cell_len

    lines = diff_on_tty(100, "--lang", lang)
    assert max(cell_len(line) for line in lines) <= 100
    lines = lines[next(i for i, line in enumerate(lines) if "|A - B| <=" in line):]  # the stage table, after its title
    rows = {name: [i for i, line in enumerate(lines) if re.match(rf"^\W*{re.escape(name)}\s", line)] for name in STAGES_A_B}
    for name, at in rows.items():
        assert len(at) == 1, (name, at)  # each stage on exactly one line
    order = [rows[name][0] for name in STAGES_A_B]
    assert order == sorted(order)
    for name, nxt in zip(STAGES_A_B, STAGES_A_B[1:]):
        if name != "hidden":  # [B,T,F] with F = 3: wider than a C = 2 value, it may wrap between its numbers
            assert rows[nxt][0] == rows[name][0] + 1, f"the row of {name} is not one line"
    numbers = re.findall(r"-?\d+\.\d{6}", "\n".join(lines))
    assert len(numbers) >= 40  # every value is printed whole: none cut to '…'
    assert "…" not in "\n".join(lines)


def test_a_wide_terminal_keeps_the_full_headers():
    text = "\n".join(diff_on_tty(200))
    assert "largest |A - B|" in text and "first difference" in text
    assert all(re.search(rf"^\W*{n}\s", text, re.M) for n in STAGES_A_B)
