"""block.head_scale: the head reads the stack's output times C^-1/2, a stage of its own (T5's tied head).

Checked by hand (the stage is final_norm times C ** -0.5, the logits read it), against the scalar reference (--verify),
finite differences of tracer grad, and by what validate refuses.
"""

from __future__ import annotations

import numpy as np
from conftest import assert_refused, run_app, write_spec
from helpers.tracing import trace_text

from tracer.grad.finite_diff import verify as verify_grad
from tracer.grad.run import GradOptions, grad
from tracer.spec import load_spec_text
from tracer.views import reference_check

DECODER = """name: head scaled
dims: {B: 1, T: 4, C: 8, H: 2, F: 12, V: 9}
seed: 3
block: {norm_order: pre, layers: 1, norm: rmsnorm, head: tied, final_norm: true, head_scale: true}
input: {tokens: [[0, 1, 2, 3]]}
"""

SEQ2SEQ = """name: head scaled seq2seq
model: encoder-decoder
dims: {C: 8, H: 2, F: 12, V: 9}
seed: 4
encoder: {norm_order: pre, layers: 1, final_norm: true}
decoder: {norm_order: pre, layers: 1, final_norm: true, head: tied, head_scale: true}
input: {source: [[0, 1, 2, 3]], target: [[4, 5, 6]]}
"""


def test_the_head_reads_the_output_times_c_to_the_minus_half():
    trace = trace_text(DECODER)
    st = {n: s.array for n, s in trace.stages.items()}
    assert np.array_equal(st["head_scale"], st["final_norm"] * 8 ** -0.5)
    assert [s.inputs for s in trace.spec.steps if s.name == "logits"] == [("head_scale",)]
    seq = trace_text(SEQ2SEQ)
    assert "decoder.head_scale" in seq.stages and seq.spec.steps[-2].inputs == ("decoder.head_scale",)


def test_the_scalar_reference_and_the_gradient_follow_the_scale():
    v = reference_check.verify(trace_text(DECODER))
    assert "head_scale" in v.stages and v.max_abs_diff < 1e-12
    for text in (DECODER, SEQ2SEQ):
        check = verify_grad(grad(load_spec_text(text), GradOptions()))
        assert check.ok, [(c.weight, c.index, c.analytic, c.numeric) for c in check.failed][:5]


def test_head_scale_without_a_head_is_refused(tmp_path):
    path = write_spec(tmp_path, DECODER.replace("head: tied, ", ""))
    r = run_app("validate", str(path))
    assert r.returncode == 2 and "block.head_scale: head_scale scales what the output head reads, but head is none" in r.stdout + r.stderr
    assert_refused(run_app("run", str(path)), "block.head_scale", "but head is none")
