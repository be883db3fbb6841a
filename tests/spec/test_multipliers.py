"""Granite's multipliers as spec settings: block.embedding_multiplier, block.residual_multiplier, block.logits_divisor.

Each is a stage of its own, checked against the stages it reads (x = embed * m, attention_scaled = attention * m,
logits = raw_logits / s), and each is refused by name where it cannot apply.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO, assert_refused, run_app, trace_of, write_spec

BASE = """dims: {C: 8, H: 2, F: 16, V: 11}
seed: 0
block:
  layers: 2
  norm: rmsnorm
  activation: swiglu
  positions: rotary
  final_norm: true
  head: tied
"""
TOKENS = "input: {tokens: [1, 2, 3, 4]}\n"


def test_each_multiplier_is_a_stage_computed_from_the_one_it_reads():
    st = trace_of(BASE + "  embedding_multiplier: 12.0\n  residual_multiplier: 0.22\n  logits_divisor: 8.0\n" + TOKENS).stages
    a = {name: stage.array for name, stage in st.items()}
    assert np.array_equal(a["x"], a["embed"] * 12.0)
    for i in range(2):
        assert np.array_equal(a[f"blocks.{i}.attention_scaled"], a[f"blocks.{i}.attention"] * 0.22)
        assert np.array_equal(a[f"blocks.{i}.ffn_scaled"], a[f"blocks.{i}.ffn"] * 0.22)
        assert np.array_equal(a[f"blocks.{i}.output"], a[f"blocks.{i}.residual1"] + a[f"blocks.{i}.ffn_scaled"])
    assert np.array_equal(a["logits"], a["raw_logits"] / 8.0)
    plain = trace_of(BASE + TOKENS).stages  # without them: the same weights, no such stages, other numbers
    assert "raw_logits" not in plain and "blocks.0.attention_scaled" not in plain
    assert not np.allclose(plain["logits"].array, a["logits"])


def test_the_shipped_example_verifies_against_the_scalar_reference():
    r = run_app("run", str(REPO / "examples" / "families" / "granite-multipliers.yaml"), "--verify")
    assert r.returncode == 0, r.stderr
    assert "verify: largest |NumPy - reference|" in r.stdout


@pytest.mark.parametrize("extra, fragment", [
    ("  residual_multiplier: 0\n", "block.residual_multiplier: expected a positive number"),
    ("  norm_order: parallel\n  residual_multiplier: 0.5\n", "residual_multiplier scales the pre-norm block's sublayer outputs"),
    ("  embedding_multiplier: 2.0\n  embedding_scale: true\n", "embedding_multiplier and embedding_scale both scale the embeddings"),
    ("  logits_divisor: 4.0\n  head_softcap: 30\n", "logits_divisor with head_softcap"),
])
def test_a_multiplier_that_cannot_apply_is_refused_by_name(tmp_path, extra, fragment):
    assert_refused(run_app("run", str(write_spec(tmp_path, BASE + extra + TOKENS))), fragment)


def test_a_divisor_without_a_head_and_a_multiplier_without_tokens_are_refused(tmp_path):
    no_head = BASE.replace("  head: tied\n", "") + "  logits_divisor: 4.0\n" + TOKENS
    assert_refused(run_app("run", str(write_spec(tmp_path, no_head))), "logits_divisor divides the output head's logits, but head is none")
    given_x = BASE.replace("  head: tied\n", "").replace("V: 11", "T: 4") + "  embedding_multiplier: 2.0\ninput: {x: random}\n"
    assert_refused(run_app("run", str(write_spec(tmp_path, given_x, "x.yaml"))), "embedding_multiplier scales the token embeddings")
