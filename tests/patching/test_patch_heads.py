"""tracer patch over one head at a time: a head's output (its slice of the heads before W_O), its q, k, v, its pattern.

Each cell is held to two other computations: the full corrupt run with that head's part set by `--set ATTN.head.N[.PART]`
(the same numbers to 1e-12), and the full corrupt run with the whole attention stage set (`--set blocks.L.attention`)
to the output that numpy makes here from the recorded q, k, v and W_O with that head's part replaced: the per-head
intervention is checked against arithmetic that does not go through it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLES, assert_refused, run_app

import tracer

CLEAN = str(EXAMPLES / "interventions" / "clean.yaml")
CORRUPT = str(EXAMPLES / "interventions" / "corrupt.yaml")
PARTS = {"": "output", ".q": "q", ".k": "k", ".v": "v", ".pattern": "pattern"}


def head_part(trace: tracer.Trace, layer: int, h: int, part: str) -> np.ndarray:
    p = f"blocks.{layer}.attn"
    if part == "output":
        d = trace[f"{p}.heads"].shape[-1] // 2
        return trace[f"{p}.heads"][..., h * d:(h + 1) * d]
    return trace[f"{p}.{'weights' if part == 'pattern' else part}"][:, h]


def attention_with(trace: tracer.Trace, layer: int, h: int, part: str, value: np.ndarray) -> np.ndarray:
    """The attention stage [B,T,C] with head h's part replaced, by hand: the head's pattern from q and k (causal
    softmax), its mix of v, then W_O over every head's slice; the other heads as recorded."""
    p, w = f"blocks.{layer}.attn", trace.params
    q, k, v = (trace[f"{p}.{x}"][:, h].copy() for x in "qkv")
    heads = trace[f"{p}.heads"].copy()
    d = q.shape[-1]
    if part in ("q", "k", "v"):
        {"q": q, "k": k, "v": v}[part][...] = value
    if part == "pattern":
        pattern = value
    else:
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
        pattern = np.exp(scores - scores.max(-1, keepdims=True))
        pattern /= pattern.sum(-1, keepdims=True)
    heads[..., h * d:(h + 1) * d] = value if part == "output" else pattern @ v
    return heads @ w[f"{p}.w_o"] + w[f"{p}.b_o"]


@pytest.mark.parametrize("suffix", list(PARTS))
def test_each_head_cell_is_the_set_run_of_that_head_and_the_attention_made_by_hand(tmp_path, suffix):
    part = PARTS[suffix]
    g = tracer.patch(CLEAN, CORRUPT, stage=f"blocks.*.attn.head.*{suffix}", token="cat")
    assert g.stages == [f"blocks.{layer}.attn.head.{h}{suffix}" for layer in (0, 1) for h in (0, 1)]  # layer x head
    clean, corrupt = tracer.trace(CLEAN), tracer.trace(CORRUPT)
    tok = clean.spec.vocab.index("cat")
    worst, moved = 0.0, 0.0
    for i, name in enumerate(g.stages):
        layer, h = int(name.split(".")[1]), int(name.split(".")[4])
        for t in range(5):
            value = head_part(corrupt, layer, h, part).copy()
            value[:, t] = head_part(clean, layer, h, part)[:, t]
            np.savez(tmp_path / "cell.npz", v=value, a=attention_with(corrupt, layer, h, part, value))
            by_head = tracer.trace(CORRUPT, set=f"{name}={tmp_path}/cell.npz:v")["logits"][0, -1, tok]
            by_hand = tracer.trace(CORRUPT, set=f"blocks.{layer}.attention={tmp_path}/cell.npz:a")["logits"][0, -1, tok]
            worst = max(worst, abs(g.logits[i, t] - by_head), abs(g.logits[i, t] - by_hand))
            moved = max(moved, abs(g.delta[i, t]))
    assert worst <= 1e-12, worst
    assert moved > 1e-3  # the sweep measured something: a grid of zeros would pass the comparison too


def test_a_head_patched_with_the_corrupt_runs_own_value_changes_nothing(tmp_path):
    corrupt = tracer.trace(CORRUPT)
    np.savez(tmp_path / "own.npz", q=head_part(corrupt, 1, 0, "q"), p=head_part(corrupt, 1, 1, "pattern"))
    again = tracer.trace(CORRUPT, set=[f"blocks.1.attn.head.0.q={tmp_path}/own.npz:q", f"blocks.1.attn.head.1.pattern={tmp_path}/own.npz:p"])
    assert np.max(np.abs(again["logits"] - corrupt["logits"])) <= 1e-13
    assert "head 0 q, head 1 pattern set from" in str(again.stage("blocks.1.attention").intervention)


def test_every_position_at_once():
    g = tracer.patch(CLEAN, CORRUPT, stage="blocks.*.attn.head.*", token="cat", positions="all")
    assert g.words == ["all"] and g.delta.shape == (4, 1)
    clean = tracer.trace(CLEAN)
    whole = tracer.patch(CLEAN, CORRUPT, stage="blocks.1.output", token="cat", positions="all")
    assert whole.logits[0, 0] == clean["logits"][0, -1, clean.spec.vocab.index("cat")]  # the last layer, every position: the clean run
    doc = json.loads(run_app("patch", CLEAN, CORRUPT, "--stage", "blocks.*.attn.head.*", "--positions", "all", "--token", "cat", "--json").stdout)
    assert [c["t"] for c in doc["cells"]] == ["all"] * 4
    assert [c["delta"] for c in doc["cells"]] == [float(x) for x in g.delta[:, 0]]


def test_head_mistakes_are_refused(tmp_path):
    np.savez(tmp_path / "a.npz", v=np.zeros((1, 5, 4)), wide=np.zeros((1, 5, 8)))
    assert_refused(run_app("run", CORRUPT, "--set", f"blocks.0.attn.head.2={tmp_path}/a.npz:v"), "expected a head 0 to 1 (H = 2), received 2")
    assert_refused(run_app("run", CORRUPT, "--set", f"blocks.0.attn.head.0.z={tmp_path}/a.npz:v"), "a head's part is q, k, v or pattern")
    assert_refused(run_app("run", CORRUPT, "--set", f"blocks.0.attn.head.0={tmp_path}/a.npz:wide"), "expected shape [B,T,d] = [1,5,4]")
    assert_refused(run_app("run", CORRUPT, "--set", f"blocks.0.attn.head.0.pattern={tmp_path}/a.npz:v"), "expected shape [B,T,T] = [1,5,5]")
    assert_refused(run_app("run", CORRUPT, "--from", f"blocks.0.attn.head.0={tmp_path}/a.npz:v"), "a head's part is replaced with --set")
    assert_refused(run_app("run", CORRUPT, "--set", f"blocks.0.attn.head.0={tmp_path}/a.npz:v", "--set", f"blocks.0.attn.head.0={tmp_path}/a.npz:v"),
                   "head 0 of blocks.0.attention is already set")
    assert_refused(run_app("grad", CORRUPT, "--set", f"blocks.0.attn.head.0={tmp_path}/a.npz:v"), "the backward pass does not take a head's part")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--stage", "blocks.*.attn.head.*.z"), "--stage blocks.*.attn.head.*.z")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--positions", "some"), "--positions some")
