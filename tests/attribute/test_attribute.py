"""tracer attribute: a token's logit split into the residual stream's parts, the final norm's scale frozen.

The parts must sum to the run's own logit (to 1e-10) on every kind of stack whose stream is a sum (Pre-Norm with
LayerNorm or RMSNorm, grouped-query attention, both parallel blocks, no final norm, OPT's projections, Gemma's scaled
embeddings, a mixture of experts); each part must be what an independent computation from the recorded attention
weights and values gives; a stack whose stream passes through a norm is refused in one line naming norm_order.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from conftest import SPECS, assert_refused, run_app, write_spec

import tracer

STACK = str(SPECS / "stack-2-layers.yaml")
TOL = 1e-10

BASE = {"name": "attribute", "vocab": ["<s>", "the", "cat", "sat", "on", "mat", "."], "dims": {"C": 8, "H": 2, "F": 16, "T_max": 16},
        "seed": 3, "input": {"tokens": [["<s>", "the", "cat", "sat"], ["<s>", "mat", "on", "."]]}}
PRE = {"norm_order": "pre", "layers": 2, "final_norm": True, "head": "tied", "positions": "learned"}
STACKS = {
    "layernorm": ({}, PRE),
    "rmsnorm": ({}, {**PRE, "norm": "rmsnorm", "positions": "rotary", "activation": "swiglu", "head": "separate"}),
    "grouped-query": ({"H": 4, "H_kv": 2}, {**PRE, "norm": "rmsnorm", "positions": "rotary", "head": "separate"}),
    "parallel": ({}, {**PRE, "norm_order": "parallel", "head": "separate", "head_bias": True}),
    "parallel-shared": ({}, {**PRE, "norm_order": "parallel_shared"}),
    "no-final-norm": ({}, {**PRE, "final_norm": False}),
    "projected": ({"C_e": 6}, PRE),
    "head-width": ({"d": 3}, PRE),
    "gemma": ({}, {**PRE, "norm": "rmsnorm_offset", "embedding_scale": True, "positions": "rotary"}),
    "experts": ({}, {**PRE, "norm": "rmsnorm", "positions": "rotary", "ffn": {"experts": 4, "top_k": 2}, "head": "separate"}),
    "one-layer": ({}, {**PRE, "layers": 1}),
}


def spec_of(name: str, seed: int = 3) -> dict:
    dims, block = STACKS[name]
    return {**BASE, "seed": seed, "dims": {**BASE["dims"], **dims}, "block": block}


@pytest.mark.parametrize("name", sorted(STACKS))
@pytest.mark.parametrize("seed", [3, 11])
def test_the_parts_sum_to_the_runs_logit(name, seed):
    spec = spec_of(name, seed)
    t = tracer.trace(spec)
    for b, pos, token in ((0, -1, "cat"), (1, 2, "mat"), (1, 0, 5)):
        a = tracer.attribution(spec, token=token, position=pos, batch=b)
        tok = t.spec.vocab.index(token) if isinstance(token, str) else token
        want = float(t["logits"][b, pos, tok])
        assert a.logit == want
        assert abs(a.total - want) <= TOL, (name, a.total - want)
        assert len({p.name for p in a.parts}) == len(a.parts)
        H = t.spec.dims.H
        assert sum(p.head is not None for p in a.parts) == H * t.spec.block.layers


def test_each_part_is_the_independent_split_of_the_recorded_heads_and_ffns():
    """Every part from the trace's own attention weights and values, its weights and the frozen LayerNorm: not from the
    heads mix the split reads."""
    t = tracer.trace(STACK)
    p = t.params
    b, pos, tok = 1, 3, t.spec.vocab.index("cat")
    r = t["blocks.1.output"][b, pos]
    sigma = np.sqrt(np.var(r) + 1e-5)
    u = p["embedding"][tok]

    def through(c):
        return float(((c - c.mean()) * p["final_norm.gamma"] / sigma) @ u)

    ids = t.spec.input.value[b]
    want = {"embed": through(p["embedding"][ids[pos]]), "position": through(p["position"][pos]),
            "final_norm.beta": float(p["final_norm.beta"] @ u)}
    H, d = 2, 4
    for layer in range(2):
        w_o = p[f"blocks.{layer}.attn.w_o"]
        for h in range(H):
            mix = t[f"blocks.{layer}.attn.weights"][b, h, pos] @ t[f"blocks.{layer}.attn.v"][b, h]
            want[f"blocks.{layer}.attn.head.{h}"] = through(mix @ w_o[h * d:(h + 1) * d])
        want[f"blocks.{layer}.attn.bias"] = through(p[f"blocks.{layer}.attn.b_o"])
        want[f"blocks.{layer}.ffn"] = through(t[f"blocks.{layer}.ffn"][b, pos])
    a = tracer.attribution(STACK, token="cat", position=pos, batch=b)
    got = {q.name: q.value for q in a.parts}
    assert set(got) == set(want)
    for name in want:
        assert abs(got[name] - want[name]) <= 1e-12, name
    assert abs(a.scale - 1 / sigma) <= 1e-12


def test_against_splits_the_logit_difference_part_by_part():
    a = tracer.attribution(STACK, token="cat", against="on")
    cat, on = tracer.attribution(STACK, token="cat"), tracer.attribution(STACK, token="on")
    t = tracer.trace(STACK)
    vocab = t.spec.vocab
    assert a.logit == t["logits"][0, -1, vocab.index("cat")] - t["logits"][0, -1, vocab.index("on")]
    assert abs(a.total - a.logit) <= TOL
    assert [p.name for p in a.parts] == [p.name for p in cat.parts]
    for mine, x, y in zip(a.parts, cat.parts, on.parts):
        assert abs(mine.value - (x.value - y.value)) <= 1e-13, mine.name
    assert a.against == vocab.index("on") and "'cat' - 'on'" in repr(a)


def test_the_token_defaults_to_the_runs_top_token_there():
    t = tracer.trace(STACK)
    a = tracer.attribution(STACK, position=2)
    assert a.token == int(np.argmax(t["logits"][0, 2])) and a.t == 2


def test_table_json_and_csv():
    r = run_app("attribute", STACK, "--token", "cat")
    assert r.returncode == 0, r.stderr
    assert "direct logit attribution of 'cat' at b=0, t=3 (sat)" in r.stdout
    assert "blocks.1.attn.head.0" in r.stdout and "sum of the parts" in r.stdout and "heads by layer" in r.stdout
    doc = json.loads(run_app("attribute", STACK, "--token", "cat", "--json").stdout)
    assert doc["kind"] == "attribute" and doc["token"] == {"id": 2, "text": "cat"} and doc["against"] is None
    assert doc["position"] == 3 and doc["b"] == 0
    assert all(set(c) >= {"name", "value"} for c in doc["components"])
    assert abs(sum(c["value"] for c in doc["components"]) - doc["logit"]) <= TOL
    a = tracer.attribution(STACK, token="cat")
    assert [c["name"] for c in doc["components"]] == [p.name for p in a.parts]
    assert [c["value"] for c in doc["components"]] == [p.value for p in a.parts]
    r = run_app("attribute", STACK, "--token", "cat", "--against", "mat", "--format", "csv", "--position", "1")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    b = tracer.attribution(STACK, token="cat", against="mat", position=1)
    assert [row["component"] for row in rows] == [p.name for p in b.parts]
    assert [float(row["value"]) for row in rows] == [p.value for p in b.parts]
    assert abs(sum(abs(float(row["share"])) for row in rows) - 1.0) <= 1e-12


@pytest.mark.parametrize("args, fragments", [
    (["--token", "zebra"], ["--token 'zebra'", "vocab"]),
    (["--token", "99"], ["--token 99", "V = 7"]),
    (["--against", "zebra"], ["--against 'zebra'"]),
    (["--position", "4"], ["--position", "4"]),
    (["--batch", "2"], ["--batch", "2"]),
    (["--format", "markdown"], ["--format markdown"]),
    (["--json", "--format", "csv"], ["--json"]),
    (["--precision", "18"], ["--precision 18"]),
])
def test_bad_options_are_refused_in_one_line(args, fragments):
    assert_refused(run_app("attribute", STACK, *args), *fragments)


@pytest.mark.parametrize("block, fragments", [
    ({**PRE, "norm_order": "post", "final_norm": False}, ["block.norm_order: post"]),
    ({**PRE, "norm_order": "sandwich", "norm": "rmsnorm_offset"}, ["block.norm_order: sandwich"]),
    ({**PRE, "head_softcap": 30.0}, ["block.head_softcap: 30"]),
    ({**PRE, "head": "none"}, ["block.head: none"]),
])
def test_a_stack_whose_stream_is_not_a_sum_is_refused(tmp_path, block, fragments):
    import yaml

    path = write_spec(tmp_path, yaml.safe_dump({**BASE, "block": block}))
    assert_refused(run_app("attribute", str(path)), *fragments)


def test_a_custom_block_whose_residual_passes_a_norm_is_refused_naming_the_stage(tmp_path):
    import yaml

    steps = [{"name": "attention", "op": "mha", "in": "x", "weights": "attn"}, {"name": "residual1", "op": "add", "in": ["x", "attention"]},
             {"name": "norm1", "op": "layer_norm", "in": "residual1", "weights": "norm1"},
             {"name": "hidden", "op": "ffn_hidden", "in": "norm1", "weights": "ffn"},
             {"name": "ffn", "op": "ffn_out", "in": "hidden", "weights": "ffn"}, {"name": "output", "op": "add", "in": ["norm1", "ffn"]}]
    path = write_spec(tmp_path, yaml.safe_dump({**BASE, "block": {"steps": steps, "layers": 2, "head": "tied", "positions": "learned"}}))
    assert_refused(run_app("attribute", str(path)), "blocks.1.norm1", "block.norm_order: custom")


def test_a_run_with_a_violation_exits_1(tmp_path):
    import yaml

    doc = {**BASE, "dims": {**BASE["dims"], "T_max": 3}, "block": PRE}  # 4 positions, a position table of 3 rows
    r = run_app("attribute", str(write_spec(tmp_path, yaml.safe_dump(doc))))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "position violation" in r.stderr and len(r.stderr.strip().splitlines()) == 1
