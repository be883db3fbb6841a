"""tracer diff names the design differences in words: a parallel residual, a partial rotary width."""

from __future__ import annotations

from conftest import run_app


def _spec(order: str, extra: str = "") -> str:
    return (f"dims: {{C: 8, H: 2, F: 16, V: 7}}\nseed: 3\nblock: {{norm_order: {order}, positions: rotary, rotary_pairing: half{extra}, "
            f"head: tied}}\ninput: {{tokens: [1, 2, 3]}}\n")


def test_diff_of_a_sequential_and_a_parallel_block_says_parallel_residual(tmp_path):
    (tmp_path / "a.yaml").write_text(_spec("pre"))
    (tmp_path / "b.yaml").write_text(_spec("parallel", ", rotary_dim: 2"))
    r = run_app("diff", "a.yaml", "b.yaml", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "the design: A nothing of note; B parallel residual, partial rotary (2 coordinates of each head turned)" in r.stdout
    (tmp_path / "c.yaml").write_text(_spec("parallel_shared", ", rotary_dim: 2"))
    same_design = run_app("diff", "b.yaml", "c.yaml", cwd=tmp_path)  # one norm or two: both parallel, so no design line
    assert "the design:" not in same_design.stdout and "norm2" in same_design.stdout


def test_diff_of_a_llama_and_a_gemma_block_names_gemmas_three_choices(tmp_path):
    llama = _spec("pre", ", norm: rmsnorm, activation: swiglu, final_norm: true")
    (tmp_path / "llama.yaml").write_text(llama)
    (tmp_path / "gemma.yaml").write_text(llama.replace("norm: rmsnorm", "norm: rmsnorm_offset").replace("swiglu", "geglu")
                                         .replace("head: tied", "head: tied, embedding_scale: true"))
    r = run_app("diff", "llama.yaml", "gemma.yaml", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert ("the design: A nothing of note; B embeddings times sqrt(C), RMSNorm with (1 + gamma), "
            "GeGLU (a gated FFN through the tanh GELU)") in r.stdout
    assert "x = embed in A, embed * sqrt(C) in B" in r.stdout, r.stdout  # the scaled embeddings: X's own step
    assert "norm1 = RMSNorm[norm1](x) in A, RMSNorm_(1+gamma)[norm1](x) in B" in r.stdout, r.stdout
    assert "GELU_tanh(norm2 W1 + b1) * (norm2 W3 + b3)" in r.stdout, r.stdout
