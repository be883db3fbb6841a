"""Interventions (--ablate, --set, --from) are part of the computation: every later stage and the backward pass see them.

Each is checked against an independent computation: a head's ablation against the oracle's attention with that head's
rows of W_O zeroed, a mean-ablation against NumPy's mean over positions, --set and --from against the run whose
values they take; the gradients of an intervened run against central finite differences; and every mistake a user
can make is one line, exit 2.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import PRE, SPECS, assert_refused, run_app, run_cli
from helpers import oracle

import tracer
from tracer.engine import executor
from tracer.engine.interventions import Requests, attach
from tracer.errors import UsageError
from tracer.spec import load_spec

STACK = str(SPECS / "stack-2-layers.yaml")
CLEAN = str(SPECS.parent / "examples" / "interventions" / "clean.yaml")
CORRUPT = str(SPECS.parent / "examples" / "interventions" / "corrupt.yaml")


def attention_params(params: dict[str, np.ndarray], group: str) -> dict[str, np.ndarray]:
    return {k: params[f"{group}.{k}"] for k in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")}


@pytest.mark.parametrize("path, prefix, head", [(PRE, "", 1), (STACK, "blocks.0.", 0), (STACK, "blocks.1.", 1)])
def test_an_ablated_head_is_the_oracles_attention_with_its_rows_of_w_o_zeroed(path, prefix, head):
    clean = tracer.trace(path)
    t = tracer.trace(path, ablate=f"{prefix}attn.head.{head}")
    spec = t.spec
    d = spec.dims.d
    w = attention_params(t.params, f"{prefix}attn")
    w["w_o"] = w["w_o"].copy()
    w["w_o"][head * d:(head + 1) * d] = 0.0  # the head's slice of the heads meets zeros
    want = oracle.attention(t[f"{prefix}norm1"], t[f"{prefix}norm1"], w, spec.dims.H, "causal")["output"]
    assert np.max(np.abs(t[f"{prefix}attention"] - want)) <= 1e-12
    assert not np.allclose(t[f"{prefix}attention"], clean[f"{prefix}attention"])  # the head did contribute
    heads = t[f"{prefix}attn.heads"]
    assert np.all(heads[..., head * d:(head + 1) * d] == 0.0)  # the recorded heads are the ones W_O reads
    other = [c for c in range(spec.dims.C) if not head * d <= c < (head + 1) * d]
    assert np.array_equal(heads[..., other], clean[f"{prefix}attn.heads"][..., other])
    assert np.array_equal(t[f"{prefix}residual1"], t["x" if not prefix or prefix == "blocks.0." else "blocks.0.output"]
                          + t[f"{prefix}attention"])  # the next stage reads the ablated one
    for name in ("norm1", "attn.q", "attn.weights"):  # nothing before it changed
        assert np.array_equal(t[f"{prefix}{name}"], clean[f"{prefix}{name}"])


def test_mean_ablation_is_numpys_mean_over_positions():
    clean = tracer.trace(STACK)
    t = tracer.trace(STACK, ablate="blocks.0.ffn=mean")
    want = np.broadcast_to(clean["blocks.0.ffn"].mean(axis=1, keepdims=True), clean["blocks.0.ffn"].shape)
    assert np.max(np.abs(t["blocks.0.ffn"] - want)) <= 1e-15
    assert np.array_equal(t["blocks.0.hidden"], clean["blocks.0.hidden"])
    assert np.array_equal(t["blocks.0.output"], t["blocks.0.residual1"] + t["blocks.0.ffn"])
    assert t.stage("blocks.0.ffn").intervention == "ablated (its mean over positions)"


def test_zero_ablation_zeroes_the_stage_and_every_later_step_reads_zeros():
    t = tracer.trace(STACK, ablate=["blocks.1.attention"])
    assert np.all(t["blocks.1.attention"] == 0.0)
    assert np.array_equal(t["blocks.1.residual1"], t["blocks.0.output"])  # X + 0


def test_setting_layer_0s_output_from_run_a_gives_run_as_later_stages_exactly(tmp_path):
    a = tracer.trace(CLEAN)
    a.save(str(tmp_path / "a.npz"))
    b = tracer.trace(CORRUPT)
    patched = tracer.trace(CORRUPT, set="blocks.0.output=" + str(tmp_path / "a.npz") + ":blocks.0.output")
    assert not np.array_equal(a["blocks.0.output"], b["blocks.0.output"])
    later = [n for n in a if n.startswith("blocks.1.") or n in ("final_norm", "logits", "probs")]
    assert len(later) > 10
    for name in ["blocks.0.output", *later]:
        assert np.array_equal(patched[name], a[name]), name
    for name in ("embed", "blocks.0.norm1", "blocks.0.ffn"):  # before it: run B's own
        assert np.array_equal(patched[name], b[name]), name


def test_from_starts_a_later_layer_and_computes_nothing_before(tmp_path):
    full = tracer.trace(STACK)
    full.save(str(tmp_path / "t.npz"))
    t = tracer.trace(STACK, start="blocks.0.output=" + str(tmp_path / "t.npz") + ":blocks.0.output")
    assert list(t)[0] == "blocks.0.output"
    assert "embed" not in t and "blocks.0.norm1" not in t
    for name in t:
        assert np.array_equal(t[name], full[name]), name
    # layer 1 on the input layer 0 saw: the way to compare two layers of one checkpoint on the same input
    same_input = tracer.trace(STACK, start="blocks.0.output=" + str(tmp_path / "t.npz") + ":x")
    assert np.array_equal(same_input["blocks.0.output"], full["x"])
    assert not np.allclose(same_input["blocks.1.output"], full["blocks.0.output"])


def test_the_table_and_json_mark_the_intervened_stage():
    r = run_app("run", STACK, "--ablate", "blocks.0.attn.head.1", "--ablate", "blocks.1.ffn=mean")
    assert r.returncode == 0, r.stderr
    lines = {line.split("│")[1].strip() for line in r.stdout.splitlines() if line.startswith("│")}
    assert "blocks.0.attention  ← head 1 ablated (zero)" in lines
    assert "blocks.1.ffn  ← ablated (its mean over positions)" in lines
    assert "blocks.0.ffn" in lines  # the others unmarked
    doc = json.loads(run_app("run", STACK, "--ablate", "blocks.0.attn.head.1", "--json").stdout)
    marked = {s["name"]: s["intervention"] for s in doc["stages"] if "intervention" in s}
    assert marked == {"blocks.0.attention": "head 1 ablated (zero)"}
    assert doc["interventions"] == [{"stage": "blocks.0.attention", "kind": "heads", "option": "--ablate blocks.0.attn.head.1", "heads": [1]}]
    assert "interventions" not in json.loads(run_app("run", STACK, "--json").stdout)


# -- the backward pass --------------------------------------------------------------------------------

@pytest.mark.parametrize("option", [["--ablate", "blocks.0.attn.head.1"], ["--ablate", "blocks.0.ffn=mean"],
                                    ["--ablate", "blocks.1.attention"]])
def test_the_gradients_of_an_intervened_run_agree_with_finite_differences(option):
    r = run_app("grad", STACK, "--verify", *option)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert "all agree" in r.stdout


def test_a_replaced_stage_sends_no_gradient_back_and_an_ablated_heads_rows_of_w_o_get_none():
    from tracer.grad.losses import choose
    from tracer.grad.run import backward

    spec = attach(load_spec(STACK), Requests(ablate=("blocks.1.attention", "blocks.0.attn.head.0")))
    ex = executor.Executor(spec)
    g = backward(ex.run(), choose(spec, None), ex.params, ex.inputs)
    assert np.all(g.grads["blocks.1.norm1"].array == 0.0)  # read only by the zeroed attention
    assert np.all(g.weight_grads["blocks.1.attn.w_q"] == 0.0)
    d = spec.dims.d
    assert np.all(g.weight_grads["blocks.0.attn.w_o"][:d] == 0.0) and np.any(g.weight_grads["blocks.0.attn.w_o"][d:] != 0.0)


def test_probe_sees_a_mean_over_positions_break_causality():
    r = run_app("probe", STACK, "--ablate", "blocks.0.ffn=mean", "--json")
    assert r.returncode == 1, r.stderr
    result = {p["name"]: p["result"] for p in json.loads(r.stdout)["properties"]}
    assert result["causality"] == "fail"
    assert run_app("probe", STACK, "--json").returncode == 0


# -- mistakes --------------------------------------------------------------------------------------------

def test_an_unknown_stage_or_head_names_the_close_ones():
    assert_refused(run_app("run", STACK, "--ablate", "blocks.0.atention"), "--ablate blocks.0.atention", "'blocks.0.attention'")
    assert_refused(run_app("run", STACK, "--ablate", "blocks.0.attn.head.7"), "expected a head 0 to 1 (H = 2), received 7")
    assert_refused(run_app("run", STACK, "--ablate", "blocks.0.attn.q"), "attention internal", "blocks.0.attn.head.0")
    assert_refused(run_app("run", STACK, "--set", "blocks.9.ffn=t.npz:x"), "--set blocks.9.ffn", "did you mean")
    assert_refused(run_app("run", STACK, "--ablate", "blocks.0.ffn=median"), "expected STAGE, STAGE=zero or STAGE=mean")
    assert_refused(run_app("run", STACK, "--ablate", "blocks.0.ffn", "--ablate", "blocks.0.ffn=mean"), "already replaced")
    assert_refused(run_app("run", STACK, "--set", "blocks.0.ffn"), "expected STAGE=FILE:KEY")


def test_an_array_of_the_wrong_shape_or_a_missing_key_is_refused(tmp_path):
    tracer.trace(STACK).save(str(tmp_path / "t.npz"))
    arch = str(tmp_path / "t.npz")
    assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={arch}:blocks.0.hidden"),
                   "expected shape [B,T,C] = [2,4,8], received [2,4,32]")
    assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={arch}:blocks.0.fnn"), "no array 'blocks.0.fnn'", "'blocks.0.ffn'")
    assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={tmp_path}/none.npz:x"), "none.npz", "no such file")
    assert_refused(run_app("run", STACK, "--from", f"blocks.0.norm1={arch}:blocks.0.norm1"),
                   "blocks.0.residual1 reads x", "not computed")
    assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={arch}:blocks.0.ffn", "--verify"), "--verify")


def test_a_hostile_file_is_refused_by_the_reading_layer(tmp_path):
    text = tmp_path / "notes.npz"
    text.write_text("not a zip")
    assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={text}:x"), "notes.npz")
    np.savez(tmp_path / "obj.npz", x=np.array([{"a": 1}], dtype=object))  # a pickle inside: never loaded
    assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={tmp_path}/obj.npz:x"), "obj.npz")
    big = tmp_path / "lying.npz"  # a member whose header declares far more than it holds
    with zipfile.ZipFile(big, "w") as zf:
        zf.writestr("x.npy", b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (2, 4, 8), }"
                    + b" " * 52 + b"\n" + b"\0" * 16)
    assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={big}:x"), "lying.npz")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.npz")
        assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={tmp_path}/fifo.npz:x"), "fifo.npz")
    nan = tmp_path / "nan.npz"
    np.savez(nan, x=np.full((2, 4, 8), np.nan))
    assert_refused(run_app("run", STACK, "--set", f"blocks.0.ffn={nan}:x"), "expected finite numbers")


def test_the_api_refuses_what_the_command_line_refuses():
    with pytest.raises(UsageError, match="no stage or head of that name"):
        tracer.trace(STACK, ablate="blocks.0.nope")
    with pytest.raises(UsageError, match="expected text"):
        tracer.trace(STACK, ablate=[3])  # type: ignore[list-item]


def test_a_real_process_ablates_and_refuses():
    ok = run_cli("run", STACK, "--ablate", "blocks.0.attn.head.1", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["interventions"][0]["heads"] == [1]
    assert_refused(run_cli("run", STACK, "--ablate", "blocks.0.attn.head.2"), "expected a head 0 to 1")


def test_intervened_runs_are_the_same_from_the_api_and_the_command_line(tmp_path: Path):
    r = run_app("run", STACK, "--ablate", "blocks.0.attn.head.0", "--json")
    cli = {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}
    api = tracer.trace(STACK, ablate="blocks.0.attn.head.0", record="main")
    for name in cli:
        assert np.array_equal(cli[name], api[name]), name


def test_markdown_marks_the_intervened_stage_and_a_cross_attention_head_is_ablated():
    md = run_app("run", STACK, "--ablate", "blocks.0.attn.head.1", "--format", "markdown").stdout
    assert "| `blocks.0.attention` ← head 1 ablated (zero) |" in md
    enc = str(SPECS / "encoder-decoder.yaml")
    clean = tracer.trace(enc)
    t = tracer.trace(enc, ablate="decoder.blocks.0.cross.head.1")
    d = t.spec.dims.d
    w = attention_params(t.params, "decoder.blocks.0.cross_attn")
    w["w_o"] = w["w_o"].copy()
    w["w_o"][d:2 * d] = 0.0
    want = oracle.attention(t["decoder.blocks.0.norm2"], t["encoder.final_norm"], w, t.spec.dims.H, "none")["output"]
    assert np.max(np.abs(t["decoder.blocks.0.cross_attention"] - want)) <= 1e-12
    assert np.array_equal(t["encoder.final_norm"], clean["encoder.final_norm"])


def test_from_and_map_compare_two_layers_on_one_input(tmp_path):
    """layer 1 started from the input layer 0 saw, diffed against layer 0 with --map: the two layers on one input."""
    full = tracer.trace(STACK)
    full.save(str(tmp_path / "run.npz"))
    layer1 = tracer.trace(STACK, start=f"blocks.0.output={tmp_path}/run.npz:x")
    layer1.save(str(tmp_path / "layer1.npz"))
    r = run_app("diff", STACK, str(tmp_path / "layer1.npz"), "--map", "blocks.1.output=blocks.0.output", "--stage", "blocks.0.output", "--json")
    row = json.loads(r.stdout)["stages"][0]
    assert r.returncode == 1 and row["name"] == "blocks.0.output"
    assert row["max_abs_diff"] == float(np.max(np.abs(full["blocks.0.output"] - layer1["blocks.1.output"])))
