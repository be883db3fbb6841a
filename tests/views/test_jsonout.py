"""The JSON contract (schema_version 1): one object on stdout, exact values, stable keys."""

import json
import math

import numpy as np
import pytest
from conftest import POST_REL, PRE_REL, PRE_TEXT, load_text, run_app, run_cli, write_spec

from tracer.engine import executor
from tracer.views import tables as render
from tracer.views import trace_json as jsonout

TOP_KEYS = {"schema_version", "spec", "ok", "dims", "block", "dtype", "init", "input", "steps", "stages", "violations"}
STAGE_KEYS = {"name", "meaning", "shape", "axes", "values"}
SEEDED = "dims: {B: 2, T: 5, C: 16, H: 4, F: 24}\ninput: {x: random}\nseed: 9\nweights:\n  ffn: {b1: random, b2: random}\n"


def strict_loads(text):
    """json.loads that refuses NaN / Infinity tokens (not JSON)."""
    def refuse(token):
        raise ValueError(f"non-JSON constant {token}")
    return json.loads(text, parse_constant=refuse)


def run_json(*args, **kw):
    r = run_app("run", *args, "--json", **kw)
    assert r.stderr == "", r.stderr
    doc = strict_loads(r.stdout)  # the whole of stdout is one JSON object...
    assert isinstance(doc, dict)
    assert r.stdout.endswith("}\n") and r.stdout.count("\n") == 1  # ...on one line, nothing else
    return r, doc


def test_chapter_spec_document():
    r, doc = run_json(PRE_REL)
    assert r.returncode == 0
    assert set(doc) == TOP_KEYS
    assert doc["schema_version"] == 1
    assert doc["spec"] == {"path": PRE_REL, "name": "Example 17.2, pre-norm"}
    assert doc["ok"] is True and doc["violations"] == []
    assert doc["dims"] == {"B": 1, "T": 3, "C": 2, "H": 2, "F": 3, "V": 3, "T_max": 3, "d": 1}
    # every setting of the block (each field of spec.BlockSpec), so that tracer diff compares a saved trace on all of them
    assert doc["block"] == {"norm_order": "pre", "mask": "causal", "eps": 1e-05, "final_norm": False, "positions": "learned",
                            "mask_matrix": None, "layers": 1, "norm": "layernorm", "activation": "relu", "position_base": 10000.0,
                            "head": "none", "rotary_pairing": "interleaved", "window": None,
                            "embedding_norm": False, "token_types": False, "position_offset": 0, "rope_scaling": None,
                            "rotary_dim": None, "head_bias": False, "experts": None, "top_k": None, "embedding_scale": False,
                            "qk_norm": False, "attention_scale": None, "attention_softcap": None, "head_softcap": None,
                            "sliding_layers": None, "relative": None, "head_scale": False,
                            "rotary_layers": None, "logit_scale": None, "local_position_base": None,
                            "embedding_multiplier": None, "residual_multiplier": None, "logits_divisor": None, "qk_projection": False,
                            "pooler": False, "classifier": None, "mlm": None}
    assert doc["init"] == "default"
    assert [s["name"] for s in doc["steps"]] == ["embed", "position", "x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output"]
    assert doc["steps"][5] == {"name": "residual1", "op": "add", "inputs": ["x", "attention"], "weights": None,
                               "shape": [1, 3, 2], "axes": ["B", "T", "C"]}
    names = [s["name"] for s in doc["stages"]]
    assert names == ["embed", "position", "x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output"]
    for s in doc["stages"]:
        assert set(s) == STAGE_KEYS
        assert list(np.array(s["values"]).shape) == s["shape"]
        assert len(s["axes"]) == len(s["shape"])
    out = next(s for s in doc["stages"] if s["name"] == "output")
    assert out["axes"] == ["B", "T", "C"]
    assert [[round(v, 6) for v in row] for row in out["values"][0]] == [[1.999980, 2.999940], [0.999912, 1.476742], [2.999964, 3.746396]]


def test_values_round_trip_bit_for_bit(tmp_path):
    write_spec(tmp_path, SEEDED)
    _, doc = run_json("spec.yaml", "--all", cwd=tmp_path)
    trace = executor.run(load_text(SEEDED))
    by_name = {s["name"]: s for s in doc["stages"]}
    assert list(by_name) == [s.name for s in trace.stages.values()]
    for name, stage in trace.stages.items():
        got = np.array(by_name[name]["values"], dtype=np.float64)
        assert got.shape == stage.array.shape
        assert got.tobytes() == stage.array.astype(np.float64).tobytes(), name  # every bit, signs of zero too
        assert by_name[name]["axes"] == list(stage.axes)


def test_float32_values_round_trip():
    text = SEEDED + "dtype: float32\n"
    trace = executor.run(load_text(text))
    doc = strict_loads(jsonout.dumps(jsonout.trace_json(trace, render.visible_stages(trace, True))))
    for s in doc["stages"]:
        arr = trace.stages[s["name"]].array
        assert np.array(s["values"], dtype=arr.dtype).tobytes() == arr.tobytes()


def test_all_adds_attention_internals():
    _, plain = run_json(POST_REL)
    _, full = run_json(POST_REL, "--all")
    internals = ["attn.q", "attn.k", "attn.v", "attn.scores", "attn.weights", "attn.heads"]
    assert not {s["name"] for s in plain["stages"]} & set(internals)
    names = [s["name"] for s in full["stages"]]
    assert names[names.index("x") + 1: names.index("attention")] == internals
    q = full["stages"][names.index("attn.q")]
    assert q["axes"] == ["B", "H", "T", "d"] and q["shape"] == [1, 2, 3, 1]


def test_verify_adds_the_verify_object():
    _, doc = run_json(PRE_REL, "--verify")
    assert set(doc) == TOP_KEYS | {"verify"}
    v = doc["verify"]
    assert set(v) == {"max_abs_diff", "stages", "rtol", "failing", "full", "samples", "positions", "note"}
    assert v["failing"] == [] and v["rtol"] == 1e-9
    assert v["full"] is True and v["samples"] == [0] and v["positions"] == [0, 1, 2] and v["note"] == ""
    assert set(v["stages"]) >= {s["name"] for s in doc["stages"]}
    assert max(v["stages"].values()) == v["max_abs_diff"] < 1e-12
    _, plain = run_json(PRE_REL)
    assert "verify" not in plain


def test_violation_document(tmp_path):
    write_spec(tmp_path, PRE_TEXT.replace("norm2: {gamma: ones, beta: zeros}", "norm2: {gamma: [2], beta: zeros}"))
    r, doc = run_json("spec.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert doc["ok"] is False
    (v,) = doc["violations"]
    assert set(v) == {"kind", "stage", "message", "shapes"}
    assert v["kind"] == "broadcast" and v["stage"] == "norm2"
    assert v["message"] == "norm2: gamma has shape [1] where [C] = [2] is due"
    assert v["shapes"] == {"gamma": "[?] = [1]"}
    assert [s["name"] for s in doc["stages"]][-1] == "norm2"  # the run stopped after the violating stage


def test_nonfinite_values_are_strings(tmp_path):
    write_spec(tmp_path, "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[.nan, 1], [.inf, -.inf]]}\nseed: 0\nallow_nonfinite: true\n")
    r = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr
    doc = strict_loads(r.stdout)
    stage = {s["name"]: s for s in doc["stages"]}
    assert stage["input"]["values"] == [[["NaN", 1.0], ["Infinity", "-Infinity"]]]
    assert stage["norm1"]["values"][0][0] == ["NaN", "NaN"]


def test_finite_safe_encoding():
    assert jsonout._finite_safe([1.5, math.nan, [math.inf, -math.inf]]) == [1.5, "NaN", ["Infinity", "-Infinity"]]


def test_dumps_refuses_raw_nan():
    with pytest.raises(ValueError):
        jsonout.dumps({"x": math.nan})


def test_unicode_names_are_written_as_utf8(tmp_path):
    write_spec(tmp_path, PRE_TEXT.replace('name: "Example 17.2, pre-norm"', 'name: "例 17.2"'))
    _, doc = run_json("spec.yaml", cwd=tmp_path)
    assert doc["spec"]["name"] == "例 17.2"


def test_an_error_is_its_error_object_on_stdout_as_with_several_specs(tmp_path):
    import json

    write_spec(tmp_path, "dims: {C: 3, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n")
    r = run_app("run", "spec.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 2 and "dims.H: H = 2 must divide C = 3" in r.stderr
    obj = json.loads(r.stdout)
    assert obj["ok"] is False and obj["spec"] == {"path": "spec.yaml", "name": None} and obj["error"]["exit_code"] == 2
    assert "dims.H: H = 2 must divide C = 3" in obj["error"]["message"]
    many = run_app("run", "spec.yaml", "spec.yaml", "--json", cwd=tmp_path)
    assert json.loads(many.stdout.splitlines()[0]) == obj  # the same object the multi-spec form prints
    table = run_app("run", "spec.yaml", cwd=tmp_path)
    assert table.returncode == 2 and table.stdout == ""  # the table: nothing on stdout, as before


def test_an_encoder_decoder_document_names_both_stacks():
    r = run_cli("run", "specs/encoder-decoder.yaml", "--json")
    assert r.returncode == 0, r.stderr
    doc = strict_loads(r.stdout)
    assert doc["model"] == "encoder-decoder"
    assert doc["encoder"]["mask"] == "none" and doc["block"]["mask"] == "causal"  # the spec leaves both masks to their defaults
