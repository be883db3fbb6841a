"""positions: relative, T5's relative position bias: one stage per stack (position_bias [H,T,T]), made once from the
stack's table (weights <stack>.relative_bias [K_rel,H]) and added to the scores of every self-attention of the stack.

Checked against the independent model (tests/helpers/oracle.py buckets each distance itself), Hugging Face's bucketing
(with torch), the scalar reference, finite differences of tracer grad, and what validate, run, graph and diff say.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_refused, compared, run_app, write_spec
from helpers import oracle
from helpers.tracing import check_against_independent, trace_text

from tracer.engine.kernels import embeddings
from tracer.grad.finite_diff import verify as verify_grad
from tracer.grad.run import GradOptions, grad
from tracer.model import relative
from tracer.spec import load_spec_text
from tracer.spec.memory import RecordPolicy, estimate
from tracer.views import reference_check

SEQ2SEQ = """name: relative
model: encoder-decoder
dims: {{C: 8, H: 2, F: 12, V: 9}}
seed: 4
encoder: {{norm_order: pre, layers: 2, final_norm: true, norm: rmsnorm, positions: relative, relative: {{buckets: {k}, max_distance: {m}}}, attention_scale: 1}}
decoder: {{norm_order: pre, layers: 2, final_norm: true, head: tied, norm: rmsnorm, positions: relative, \
relative: {{buckets: {k}, max_distance: {m}}}, attention_scale: 1}}
input: {{source: [[0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2], [3, 3, 2, 1, 0, 8, 7, 6, 5, 4, 3, 2]], \
target: [[4, 5, 6, 7, 8, 1, 2, 3, 0, 5, 1], [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2]]}}
"""

DECODER = """name: relative decoder-only
dims: {{C: 8, H: 2, F: 12, V: 9}}
seed: 7
block: {{norm_order: pre, layers: 2, positions: relative, relative: {{buckets: 8, max_distance: 12}}, mask: {mask}, head: tied, final_norm: true}}
input: {{tokens: [[0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4]]}}
"""


def seq2seq(k: int = 8, m: int = 10) -> str:
    return SEQ2SEQ.format(k=k, m=m)


@pytest.mark.parametrize("k, m", [(8, 10), (6, 5), (32, 128)])
def test_an_encoder_decoder_with_relative_positions_matches_the_independent_model(k, m):
    trace = check_against_independent(seq2seq(k, m), tol=1e-12)
    assert trace.stages["encoder.position_bias"].array.shape == (2, 12, 12)
    assert trace.stages["decoder.position_bias"].array.shape == (2, 11, 11)
    steps = {s.name: s for s in trace.spec.steps}
    assert steps["encoder.blocks.1.attention"].inputs == ("encoder.blocks.1.norm1", "encoder.position_bias")
    assert steps["decoder.blocks.1.attention"].inputs[1] == "decoder.position_bias"
    assert steps["decoder.blocks.0.cross_attention"].inputs == ("decoder.blocks.0.norm2", "encoder.final_norm")  # no bias
    assert steps["encoder.position_bias"].relative == (k, m, True) and steps["decoder.position_bias"].relative == (k, m, False)


@pytest.mark.parametrize("mask", ["causal", "none"])
def test_a_decoder_only_block_with_relative_positions_matches_the_independent_model(mask):
    check_against_independent(DECODER.format(mask=mask), tol=1e-12)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("k, m", [(4, 3), (8, 16), (10, 33), (32, 128), (64, 300)])
def test_the_buckets_are_the_pure_python_ones_and_the_oracles(bidirectional, k, m):
    got = embeddings.relative_buckets(40, 300, bidirectional, k, m)
    for i in (0, 7, 39):
        for j in range(300):
            b = relative.bucket(j - i, bidirectional, k, m)
            assert got[i, j] == b == oracle.t5_bucket(j - i, bidirectional, k, m), (i, j)
    assert relative.largest_bucket(40, 300, bidirectional, k, m) == got.max()


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("k, m", [(8, 16), (32, 128), (16, 20), (64, 1000)])
def test_the_buckets_are_hugging_faces(bidirectional, k, m):
    torch = pytest.importorskip("torch")
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    rel = torch.arange(-3000, 3000)
    want = t5.T5Attention._relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=k, max_distance=m).numpy()
    got = np.array([relative.bucket(int(r), bidirectional, k, m) for r in rel])
    assert np.array_equal(got, want)
    assert np.array_equal(embeddings.relative_buckets(3000, 3001, bidirectional, k, m)[-1], want[1:3002])  # j - 2999, j = 0 .. 3000


def test_the_scalar_reference_follows_the_position_bias():
    v = reference_check.verify(trace_text(seq2seq()))
    assert any(name.endswith("position_bias") for name in v.stages)
    assert v.max_abs_diff < 1e-12


def test_the_gradient_of_the_table_agrees_with_finite_differences():
    g = grad(load_spec_text(seq2seq()), GradOptions())
    assert "encoder.relative_bias" in g.weight_grads and "decoder.relative_bias" in g.weight_grads
    assert np.any(g.weight_grads["decoder.relative_bias"] != 0)
    check = verify_grad(g)
    assert check.ok, [(c.weight, c.index, c.analytic, c.numeric) for c in check.failed][:5]


def test_the_lean_backward_pass_gives_the_same_table_gradient_to_the_bit():
    spec = load_spec_text(seq2seq())
    full, lean = grad(spec, GradOptions()), grad(spec, GradOptions(internals=False))
    for name, dw in full.weight_grads.items():
        assert np.array_equal(dw, lean.weight_grads[name]), name


def _short_table(rows: int, T: int = 12, mask: str = "none") -> str:
    table = json.dumps([[0.1 * (i + h) for h in range(2)] for i in range(rows)])
    tokens = json.dumps([list(range(T))])
    return (f"dims: {{C: 8, H: 2, F: 12, V: {T}}}\nseed: 1\n"
            f"block: {{positions: relative, relative: {{buckets: 8, max_distance: 16}}, mask: {mask}}}\n"
            f"weights: {{relative_bias: {table}}}\ninput: {{tokens: {tokens}}}\n")


def test_a_bucket_beyond_the_table_is_a_position_violation(tmp_path):
    path = write_spec(tmp_path, _short_table(5))
    r = run_app("run", str(path))
    assert r.returncode == 1, r.stdout[-800:]
    assert "position" in r.stdout and "K_rel = 5" in r.stdout and "bucket 7" in r.stdout
    assert run_app("validate", str(path)).returncode == 1
    doc = json.loads(run_app("run", str(path), "--json", "--keep-going").stdout)
    assert doc["violations"][0]["kind"] == "position" and doc["violations"][0]["stage"] == "position_bias"


def test_a_short_table_the_positions_do_not_outgrow_is_no_violation(tmp_path):
    # causal, 3 positions: the distances 0 .. 2 read buckets 0 .. 2 of the 5 rows
    assert run_app("run", str(write_spec(tmp_path, _short_table(5, T=3, mask="causal")))).returncode == 0


@pytest.mark.parametrize("block, fragment", [
    ("{positions: learned, relative: {buckets: 8}}", "relative is for positions: relative"),
    ("{positions: relative, relative: {buckets: 8, max_distance: 4}}", "above buckets / 2 = 4"),
    ("{positions: relative, relative: {buckets: 2}}", "buckets"),
    ("{positions: relative, relative: {bucket: 8}}", "bucket"),
])
def test_bad_relative_settings_are_refused(tmp_path, block, fragment):
    text = f"dims: {{C: 8, H: 2, F: 12}}\nseed: 1\nblock: {block}\ninput: {{tokens: [[0, 1, 2]]}}\n"
    assert_refused(run_app("run", str(write_spec(tmp_path, text))), fragment)


def test_graph_draws_the_position_bias_and_the_scores_it_joins(tmp_path):
    r = run_app("graph", str(write_spec(tmp_path, seq2seq())))
    assert r.returncode == 0, r.stderr
    assert "encoder.position_bias" in r.stdout and "table[bucket(j - i)]" in r.stdout
    assert "q kᵀ · 1 + encoder.position_bias" in r.stdout


def test_diff_names_the_relative_settings(tmp_path):
    a, b = write_spec(tmp_path, seq2seq(8, 10), "a.yaml"), write_spec(tmp_path, seq2seq(8, 12), "b.yaml")
    r = compared(str(a), str(b), keep_going=True)
    assert r.exit_code == 1
    assert "encoder.relative" in [s.field for s in r.settings]


def test_the_memory_estimate_counts_the_position_bias():
    spec = load_spec_text(seq2seq())
    est = estimate(spec, RecordPolicy())
    assert any(s.name == "encoder.position_bias" for s in est.stages)


def test_a_soft_cap_with_a_relative_bias_is_refused_not_guessed(tmp_path):
    """No model caps the scores and adds T5's bias: whether the bias comes before or after the cap is not guessed."""
    text = ("dims: {T: 4, C: 4, H: 2, F: 8}\n"
            "block: {positions: relative, relative: {buckets: 8, max_distance: 16}, attention_softcap: 50}\n"
            "input: {x: random}\nseed: 1\n")
    write_spec(tmp_path, text)
    assert_refused(run_app("run", "spec.yaml", cwd=tmp_path), "block.attention_softcap", "positions: relative", "does not guess")
    ok = run_app("run", str(write_spec(tmp_path, text.replace(", attention_softcap: 50", ""), "b.yaml")))
    assert ok.returncode == 0, ok.stderr
