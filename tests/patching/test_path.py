"""tracer patch --sender HEAD --receiver q|k|v: path patching, against the definition worked by hand.

By hand: the sender's change through W_O, d = (z_clean - z_corrupt)[head] W_O[head's rows], added to the corrupt
residual stream each later layer reads (every other head and MLP frozen at corrupt, so nothing else moves it); that
layer's first LayerNorm of it, through W_q (W_k, W_v) and split into heads, is each later head's query (key, value);
then the full corrupt run with every later head's query set to it (`--set ATTN.head.N.q`), the keys and values and
everything downstream computed as they come.  On a three-layer stack a sender in layer 0 has receivers in two layers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLES, assert_refused, run_app

import tracer
from tracer.spec import yamlio

CLEAN = str(EXAMPLES / "interventions" / "clean.yaml")
CORRUPT = str(EXAMPLES / "interventions" / "corrupt.yaml")
WORDS = {CLEAN: ["<s>", "the", "cat", "sat", "on"], CORRUPT: ["<s>", "the", "mat", "sat", "on"]}


def stack(path: str, layers: int) -> dict:
    doc, _ = yamlio.load(yamlio.read_text(path), path)
    doc["vocab"] = list(tracer.trace(path).spec.vocab)  # YAML's plain 'on' as tracer reads it, a word
    doc["input"]["tokens"] = [WORDS[path]]
    doc["block"]["layers"] = layers
    return doc


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


def by_hand(tmp_path, clean_spec, corrupt_spec, layer: int, h: int, part: str, tok: int) -> float:
    clean, corrupt = tracer.trace(clean_spec), tracer.trace(corrupt_spec)
    w, H, layers = corrupt.params, corrupt.spec.dims.H, corrupt.spec.block.layers
    d = corrupt[f"blocks.{layer}.attn.heads"].shape[-1] // H
    cols = slice(h * d, (h + 1) * d)
    change = (clean[f"blocks.{layer}.attn.heads"][..., cols] - corrupt[f"blocks.{layer}.attn.heads"][..., cols]) @ w[f"blocks.{layer}.attn.w_o"][cols]
    eps = next(s for s in corrupt.spec.steps if s.name == "blocks.0.norm1").epsilon()
    sets, arrays = [], {}
    for later in range(layer + 1, layers):
        n = layer_norm(corrupt[f"blocks.{later - 1}.output"] + change, w[f"blocks.{later}.norm1.gamma"], w[f"blocks.{later}.norm1.beta"], eps)
        proj = n @ w[f"blocks.{later}.attn.w_{part}"] + w[f"blocks.{later}.attn.b_{part}"]  # [B,T,C]
        for g in range(H):
            arrays[f"l{later}h{g}"] = proj[..., g * d:(g + 1) * d]
            sets.append(f"blocks.{later}.attn.head.{g}.{part}={tmp_path}/path.npz:l{later}h{g}")
    np.savez(tmp_path / "path.npz", **arrays)
    return float(tracer.trace(corrupt_spec, set=sets)["logits"][0, -1, tok])


@pytest.mark.parametrize("layers", [2, 3])
def test_every_sender_and_receiver_is_the_path_worked_by_hand(tmp_path, layers):
    clean_spec, corrupt_spec = stack(CLEAN, layers), stack(CORRUPT, layers)
    from tracer.patching.path import path_patch
    from tracer.patching.run import Ask
    from tracer.spec.loading import load

    g = path_patch(load(clean_spec), load(corrupt_spec), ["blocks.*.attn.head.*"] if layers == 3 else ["blocks.0.attn.head.*"], [], Ask(token="cat"))
    senders = [f"blocks.{layer}.attn.head.{h}" for layer in range(layers - 1) for h in (0, 1)]
    assert g.stages == senders and g.words == ["q", "k", "v"]
    tok = tracer.trace(CLEAN).spec.vocab.index("cat")
    worst = 0.0
    for i, name in enumerate(senders):
        for j, part in enumerate("qkv"):
            worst = max(worst, abs(g.logits[i, j] - by_hand(tmp_path, clean_spec, corrupt_spec, int(name.split(".")[1]), int(name[-1]), part, tok)))
    assert worst <= 1e-12, worst
    assert np.abs(g.delta).max() > 1e-3  # something moved: a grid of the corrupt logit would not pass the comparison either way


def test_the_command_json_and_normalised():
    args = ("patch", CLEAN, CORRUPT, "--sender", "blocks.0.attn.head.1", "--receiver", "v", "--token", "cat")
    r = run_app(*args)
    assert r.returncode == 0, r.stderr
    assert "path patching: the logit of 'cat' at b=0, t=4, patched run minus corrupt run" in r.stdout
    assert "the path from blocks.0.attn.head.1 to the later heads' v moves it most" in r.stdout
    doc = json.loads(run_app(*args, "--json").stdout)
    assert doc["patching"] == "path" and doc["stages"] == ["blocks.0.attn.head.1"] and doc["receivers"] == ["v"]
    assert doc["cells"][0]["receiver"] == "v"
    n = json.loads(run_app(*args, "--normalise", "--json").stdout)
    share = doc["cells"][0]["delta"] / (doc["logit"]["clean"] - doc["logit"]["corrupt"])
    assert abs(n["cells"][0]["delta"] - share) <= 1e-12


def test_path_mistakes_are_refused():
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--sender", "blocks.1.attn.head.0"), "--sender blocks.1.attn.head.0: no self-attention comes after it")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--sender", "blocks.0.attn.head.3"), "--sender blocks.0.attn.head.3: no head of")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--sender", "blocks.0.attn.head.0", "--receiver", "o"), "--receiver o: expected q, k or v")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--receiver", "q"), "--receiver is for path patching")
    assert_refused(run_app("patch", CLEAN, CORRUPT, "--sender", "blocks.0.attn.head.0", "--stage", "blocks.*.output"), "--stage and --positions are for")
