"""tracer diff names the design differences in words: a parallel residual, a partial rotary width, post-norm, ..."""

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
    assert "the design: only B has parallel residual, partial rotary (2 coordinates of each head turned)" in r.stdout
    swapped = run_app("diff", "b.yaml", "a.yaml", cwd=tmp_path)  # the side that makes the choices is named, never "A none"
    assert "the design: only A has parallel residual, partial rotary (2 coordinates of each head turned)" in swapped.stdout
    (tmp_path / "c.yaml").write_text(_spec("parallel_shared", ", rotary_dim: 2"))
    one_norm = run_app("diff", "b.yaml", "c.yaml", cwd=tmp_path)  # both parallel: only the one norm is a difference of design
    assert "the design: A parallel residual; B parallel residual, one norm" in one_norm.stdout and "norm2" in one_norm.stdout
    (tmp_path / "d.yaml").write_text(_spec("parallel", ", rotary_dim: 2").replace("seed: 3", "seed: 4"))
    same_design = run_app("diff", "b.yaml", "d.yaml", cwd=tmp_path)  # other weights, the same design: no design line
    assert same_design.returncode == 1 and "the design:" not in same_design.stdout


GPT2_LIKE = ("dims: {C: 8, H: 2, F: 16, V: 7, T_max: 8}\nseed: 3\nblock: {norm_order: pre, positions: learned, activation: gelu_tanh, head: tied}\n"
             "input: {tokens: [1, 2, 3]}\n")
BERT_LIKE = ("dims: {C: 8, H: 2, F: 16, V: 7, T_max: 8}\nseed: 3\nblock: {norm_order: post, mask: none, positions: learned, activation: gelu, "
             "embedding_norm: true, token_types: true}\ninput: {tokens: [1, 2, 3]}\n")
LLAMA_LIKE = ("dims: {C: 8, H: 2, H_kv: 1, F: 16, V: 7}\nseed: 3\nblock: {norm: rmsnorm, activation: swiglu, positions: rotary, "
              "rotary_pairing: half, mask: {causal: true, window: 2}, head: tied}\ninput: {tokens: [1, 2, 3]}\n")


def test_diff_of_two_families_names_what_each_block_chooses(tmp_path):
    """GPT-2 against BERT: 'post-norm, bidirectional, token types' (the issue's words); against a LLaMA-style block:
    RMSNorm, SwiGLU, rotary positions, grouped-query attention, a sliding window."""
    (tmp_path / "gpt2.yaml").write_text(GPT2_LIKE)
    (tmp_path / "bert.yaml").write_text(BERT_LIKE)
    (tmp_path / "llama.yaml").write_text(LLAMA_LIKE)
    r = run_app("diff", "gpt2.yaml", "bert.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert "the design: A GELU (tanh); B post-norm, bidirectional, exact GELU, a norm on the embeddings, token types" in r.stdout
    r = run_app("diff", "gpt2.yaml", "llama.yaml", "--json", cwd=tmp_path)
    import json

    first = json.loads(r.stdout)["structure"]["differences"][0]
    assert first == ("the design: A GELU (tanh); B rotary positions, RMSNorm, SwiGLU, sliding window (causal, window 2), "
                     "grouped-query attention (H_kv = 1)")
    zh = run_app("diff", "gpt2.yaml", "bert.yaml", "--lang", "zh", cwd=tmp_path)
    assert "设计：A GELU（tanh 近似）；B " in zh.stdout and "双向注意力" in zh.stdout


def test_diff_of_a_llama_and_a_gemma_block_names_gemmas_three_choices(tmp_path):
    llama = _spec("pre", ", norm: rmsnorm, activation: swiglu, final_norm: true")
    (tmp_path / "llama.yaml").write_text(llama)
    (tmp_path / "gemma.yaml").write_text(llama.replace("norm: rmsnorm", "norm: rmsnorm_offset").replace("swiglu", "geglu")
                                         .replace("head: tied", "head: tied, embedding_scale: true"))
    r = run_app("diff", "llama.yaml", "gemma.yaml", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert ("the design: A RMSNorm, SwiGLU; B embeddings times sqrt(C), RMSNorm with (1 + gamma), "
            "GeGLU (a gated FFN through the tanh GELU)") in r.stdout
    assert "x = embed in A, embed * sqrt(C) in B" in r.stdout, r.stdout  # the scaled embeddings: X's own step
    assert "norm1 = RMSNorm[norm1](x) in A, RMSNorm_(1+gamma)[norm1](x) in B" in r.stdout, r.stdout
    assert "GELU_tanh(norm2 W1 + b1) * (norm2 W3 + b3)" in r.stdout, r.stdout
