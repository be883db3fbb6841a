"""tracer diff with interventions: --ablate/--set/--from on both sides, --ablate-a/-b (and --set-a/-b, --from-a/-b) on
one, and the sentence the diff ends with: what the intervention does to the chosen token's probability, computed here
again from each side's logits."""

from __future__ import annotations

import json

import numpy as np
from conftest import PRE, SPECS, assert_refused, run_app, run_cli

import tracer

STACK = str(SPECS / "stack-2-layers.yaml")


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def test_ablating_a_head_on_side_b_ends_with_its_effect_on_the_top_token():
    r = run_app("diff", STACK, STACK, "--ablate-b", "blocks.0.attn.head.1")
    assert r.returncode == 1, r.stderr
    clean, ablated = tracer.trace(STACK), tracer.trace(STACK, ablate="blocks.0.attn.head.1")
    la, lb = clean["logits"][0, -1], ablated["logits"][0, -1]
    tok = int(np.argmax(la))
    word = clean.spec.vocab[tok]
    pa, pb = softmax(la)[tok], softmax(lb)[tok]
    verb = "lowers" if pb < pa else "raises"
    last = r.stdout.strip().splitlines()[-1]
    assert last == f"ablating head 1 of layer 0 {verb} p({word!r}) at b=0, t=3 from {pa:.4g} to {pb:.4g} (its logit from {la[tok]:.4g} to {lb[tok]:.4g})"
    assert "first diverging stage: blocks.0.attention" in r.stdout
    doc = json.loads(run_app("diff", STACK, STACK, "--ablate-b", "blocks.0.attn.head.1", "--json").stdout)
    effect = doc["effect"]
    assert (effect["token"], effect["text"], effect["t"]) == (tok, word, 3)
    assert abs(effect["p"]["clean"] - pa) < 1e-15 and abs(effect["p"]["changed"] - pb) < 1e-15
    assert doc["first_diverging"] == "blocks.0.attention"


def test_side_a_ablated_makes_b_the_clean_side_and_token_picks_the_word():
    r = run_app("diff", STACK, STACK, "--ablate-a", "blocks.1.ffn=mean", "--token", "cat", "--json")
    doc = json.loads(r.stdout)
    clean, changed = tracer.trace(STACK), tracer.trace(STACK, ablate="blocks.1.ffn=mean")
    tok = clean.spec.vocab.index("cat")
    assert doc["effect"]["token"] == tok
    assert abs(doc["effect"]["p"]["clean"] - softmax(clean["logits"][0, -1])[tok]) < 1e-15
    assert abs(doc["effect"]["p"]["changed"] - softmax(changed["logits"][0, -1])[tok]) < 1e-15
    assert doc["effect"]["sentence"].startswith("replacing blocks.1.ffn by its mean over positions")
    assert json.loads(run_app("diff", STACK, STACK, "--ablate-b", "blocks.0.ffn", "--token", "2", "--json").stdout)["effect"]["token"] == 2


def test_both_sides_ablated_alike_are_the_same():
    r = run_app("diff", STACK, STACK, "--ablate", "blocks.0.attn.head.0")
    assert r.returncode == 0, r.stdout[-1500:]
    assert "going from side A to side B leaves p(" in r.stdout


def test_set_on_one_side_copies_the_other_runs_stage(tmp_path):
    clean = str(SPECS.parent / "examples" / "interventions" / "clean.yaml")
    corrupt = str(SPECS.parent / "examples" / "interventions" / "corrupt.yaml")
    tracer.trace(clean).save(str(tmp_path / "c.npz"))
    doc = json.loads(run_app("diff", clean, corrupt, "--set-b", f"blocks.1.output={tmp_path}/c.npz:blocks.1.output", "--json").stdout)
    status = {s["name"]: s["status"] for s in doc["stages"]}
    assert status["blocks.0.output"] == "differs" and status["blocks.1.output"] == "equal" and status["logits"] == "equal"


def test_mistakes_are_refused():
    assert_refused(run_app("diff", STACK, STACK, "--ablate-b", "blocks.0.nope"), "--ablate blocks.0.nope", "did you mean")
    assert_refused(run_app("diff", STACK, STACK, "--ablate-b", "blocks.0.ffn", "--token", "dog"), "--token 'dog'", "vocab")
    assert_refused(run_app("diff", STACK, STACK, "--ablate-b", "blocks.0.ffn", "--token", "99"), "expected a token id 0 to 6 (V = 7)")
    assert_refused(run_app("diff", PRE, PRE, "--ablate-b", "attn.head.0", "--token", "1"), "--token", "no logits")


def test_a_real_process_diffs_an_ablation():
    r = run_cli("diff", STACK, STACK, "--ablate-b", "blocks.0.attn.head.1")
    assert r.returncode == 1 and "ablating head 1 of layer 0" in r.stdout.splitlines()[-1]
