"""--ablate STAGE=mean-over:REF: the stage (or one head's output) replaced by its mean over every sample and position of
a reference run (the same model on other prompts), checked against that mean taken here with numpy and given by --set."""

from __future__ import annotations

import numpy as np
from conftest import EXAMPLES, SPECS, assert_refused, run_app

import tracer

CORRUPT = str(EXAMPLES / "interventions" / "corrupt.yaml")
REF = str(EXAMPLES / "interventions" / "pairs-clean.yaml")


def test_a_stage_and_a_head_take_the_reference_sets_mean(tmp_path):
    ref = tracer.trace(REF)
    assert ref.spec.dims.B == 3  # a mean over three prompts, not the batch's own
    np.savez(tmp_path / "m.npz", ffn=np.broadcast_to(ref["blocks.0.ffn"].mean(axis=(0, 1)), (1, 5, 8)),
             head=np.broadcast_to(ref["blocks.0.attn.heads"][..., 4:].mean(axis=(0, 1)), (1, 5, 4)))
    for option, by_set in ((f"blocks.0.ffn=mean-over:{REF}", f"blocks.0.ffn={tmp_path}/m.npz:ffn"),
                           (f"blocks.0.attn.head.1=mean-over:{REF}", f"blocks.0.attn.head.1={tmp_path}/m.npz:head")):
        a, b = tracer.trace(CORRUPT, ablate=option), tracer.trace(CORRUPT, set=by_set)
        assert np.max(np.abs(a["logits"] - b["logits"])) <= 1e-12
        assert np.max(np.abs(a["logits"] - tracer.trace(CORRUPT)["logits"])) > 1e-3


def test_mean_over_mistakes_are_refused():
    assert_refused(run_app("run", CORRUPT, "--ablate", f"blocks.0.ffn=mean-over:{SPECS / 'ch17-prenorm.yaml'}"), "does not trace blocks.0.ffn with the shape")
    assert_refused(run_app("run", CORRUPT, "--ablate", "blocks.0.ffn=mean-over:nope.yaml"), "nope.yaml")
    assert_refused(run_app("run", CORRUPT, "--ablate", f"blocks.9.ffn=mean-over:{REF}"), "--ablate blocks.9.ffn")
