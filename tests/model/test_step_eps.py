"""A norm's epsilon is on its step (Step.eps): configure gives every norm step, and every attention that normalises
its q and k per head, its stack's block.eps; the kernels read it from the step; --steps and a saved trace show it as
the stack's setting."""

from __future__ import annotations

import json

import pytest
from conftest import PRE_TEXT, SPECS, run_app, write_spec

from tracer.model import blocks
from tracer.model.blocks import NORM_OPS, STACK_GIVEN, StackSettings
from tracer.spec import load_spec, load_spec_text

BERT = SPECS.parent / "examples" / "families" / "bert-embeddings.yaml"  # its embedding LayerNorm is an entry step


@pytest.mark.parametrize("norm", list(blocks.NORMS))
@pytest.mark.parametrize("order", list(blocks.NORM_ORDERS))
def test_every_preset_norm_step_carries_its_stacks_eps(norm, order):
    for step in blocks.configure(blocks.NORM_ORDERS[order], StackSettings(norm=norm, eps=3e-4), preset=True):
        assert (step.eps == 3e-4) == (step.op in NORM_OPS), step
    assert blocks.final_norm("", "x", StackSettings(norm=norm, eps=2e-3)).eps == 2e-3


def test_a_spec_gives_each_stack_its_own_eps_and_qk_norm_its_stacks():
    text = (SPECS / "encoder-decoder.yaml").read_text(encoding="utf-8")
    spec = load_spec_text(text.replace("encoder: {layers: 1,", "encoder: {eps: 1e-3, layers: 1,")
                              .replace("decoder: {layers: 1,", "decoder: {eps: 1e-2, layers: 1,"))
    norms = [s for s in spec.steps if s.op in NORM_OPS]
    assert norms and all(s.eps == (1e-3 if s.name.startswith("encoder.") else 1e-2) for s in norms)
    assert all(s.eps is None for s in spec.steps if s.op not in NORM_OPS)
    qk = load_spec_text("dims: {C: 4, H: 2, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\nblock: {qk_norm: true, eps: 1e-6}\n")
    attention = next(s for s in qk.steps if s.op == "mha")
    assert attention.qk_norm and attention.eps == attention.epsilon() == 1e-6


def test_custom_steps_and_the_embedding_norm_carry_it(tmp_path):
    custom = load_spec_text("""dims: {B: 1, T: 2, C: 4, H: 2, F: 6}
seed: 1
input: {x: random}
block:
  eps: 1e-4
  final_norm: true
  steps:
    - {name: n, op: rms_norm, in: x, weights: n}
    - {name: output, op: layer_norm, in: n, weights: out}
""")
    assert [(s.name, s.eps) for s in custom.steps if s.op in NORM_OPS] == [("n", 1e-4), ("output", 1e-4), ("final_norm", 1e-4)]
    bert = load_spec(str(BERT))
    assert next(s for s in bert.steps if s.name == "x").eps == bert.block.eps


def test_a_step_without_eps_says_so():
    with pytest.raises(ValueError, match="norm1"):
        blocks.PRE_NORM[0].epsilon()


def test_the_kernels_read_the_steps_eps(tmp_path):
    """A step's eps is what the run computes with: the same block with eps 1e-3 written on the block, and set on
    the steps by hand, give the same numbers; the steps list and the saved trace keep it as the stack's."""
    from tracer.engine import executor

    spec = load_spec_text(PRE_TEXT)
    steps = tuple(s._replace(eps=1e-3) if s.eps is not None else s for s in spec.steps)
    by_hand = executor.run(spec._replace(steps=steps))
    written = executor.run(load_spec_text(PRE_TEXT.replace("  eps: 1e-5\n", "  eps: 1e-3\n")))
    assert (by_hand.stages["norm1"].array == written.stages["norm1"].array).all()
    assert (by_hand.stages["norm1"].array != executor.run(spec).stages["norm1"].array).any()
    assert STACK_GIVEN == ("eps",) and "eps" not in spec.steps[3].own_params() and spec.steps[3].params()["eps"] == 1e-5
    r = run_app("run", str(write_spec(tmp_path, PRE_TEXT)), "--json")
    doc = json.loads(r.stdout)
    assert doc["block"]["eps"] == 1e-5 and all("eps" not in s for s in doc["steps"])

