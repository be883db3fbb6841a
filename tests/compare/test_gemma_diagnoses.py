"""tracer diff's diagnoses of a Gemma port's classic mistakes: the RMSNorm scaled by w instead of (1 + w), the
embeddings not scaled by sqrt(C), and the GeGLU gated by the exact GELU or by SiLU; each recomputed from the
student's own inputs, named at its stage, in both languages."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compared, run_app
from helpers import oracle
from helpers.tracing import flow, trace_text


def _spec(tmp_path):
    rng = np.random.default_rng(8)
    gammas = ", ".join(f"{n}: {{gamma: {flow(rng.normal(scale=0.5, size=8))}}}" for n in ("norm1", "norm2", "final_norm"))
    text = ("dims: {C: 8, H: 2, F: 12, V: 9}\nseed: 4\nblock: {norm: rmsnorm_offset, activation: geglu, positions: rotary, "
            "rotary_pairing: half, embedding_scale: true, final_norm: true, head: tied}\n"
            f"input: {{tokens: [[1, 4, 2, 8, 0], [3, 3, 7, 5, 6]]}}\nweights: {{{gammas}}}\n")
    path = tmp_path / "gemma.yaml"
    path.write_text(text)
    return path, trace_text(text)


def _stages(trace, *names):
    return {n: trace.stages[n].array.copy() for n in names}


def _hidden(trace, gate):
    from tracer.engine.params import load_params

    p = load_params(trace.spec)
    n2 = trace.stages["norm2"].array
    z = n2 @ p["ffn.w1"] + p["ffn.b1"]
    g = oracle.gelu(z) if gate == "gelu" else oracle.silu(z)
    return g * (n2 @ p["ffn.w3"] + p["ffn.b3"])


BEFORE_HIDDEN = ("embed", "x", "norm1", "attention", "residual1", "norm2")


def mistake(trace, bug):
    """The student's arrays up to the stage the mistake makes wrong."""
    if bug == "no_embedding_scale":
        arrays = _stages(trace, "embed")
        arrays["x"] = arrays["embed"].copy()
        return arrays, "x"
    if bug == "norm_without_offset":
        from tracer.engine.params import load_params

        arrays = _stages(trace, "embed", "x")
        x, g = arrays["x"], load_params(trace.spec)["norm1.gamma"]
        arrays["norm1"] = oracle.rms_norm(x, g, trace.spec.block.eps)  # gamma, not 1 + gamma
        return arrays, "norm1"
    arrays = _stages(trace, *BEFORE_HIDDEN)
    arrays["hidden"] = _hidden(trace, "gelu" if bug == "geglu_exact" else "silu")
    return arrays, "hidden"


@pytest.mark.parametrize("bug", ["no_embedding_scale", "norm_without_offset", "geglu_exact", "geglu_silu"])
def test_each_gemma_mistake_is_found_and_named(tmp_path, bug):
    path, trace = _spec(tmp_path)
    arrays, stage = mistake(trace, bug)
    np.savez(tmp_path / "mine.npz", **arrays)
    r = compared(str(path), str(tmp_path / "mine.npz"))
    assert r.exit_code == 1
    assert r.first_diverging is not None and r.first_diverging.name == stage
    assert r.hint is not None and r.hint.bug == bug, (r.hint, bug)


def test_the_correct_gemma_arrays_agree_and_the_hint_is_printed_in_both_languages(tmp_path):
    path, trace = _spec(tmp_path)
    np.savez(tmp_path / "right.npz", **_stages(trace, *BEFORE_HIDDEN, "hidden"))
    r = compared(str(path), str(tmp_path / "right.npz"))
    assert r.exit_code == 0 and r.hint is None
    arrays, _ = mistake(trace, "norm_without_offset")
    np.savez(tmp_path / "mine.npz", **arrays)
    en = run_app("diff", str(path), str(tmp_path / "mine.npz"))
    assert en.returncode == 1, en.stderr
    assert "hint: norm1 differs but x agrees. Your norm1" in en.stdout  # the named mistake alone, no checklist before it
    assert "scales by gamma where Gemma's RMSNorm scales by (1 + gamma)" in en.stdout
    zh = run_app("diff", str(path), str(tmp_path / "mine.npz"), "--lang", "zh")
    assert zh.returncode == 1 and "存储的权重是相对 1 的偏移" in zh.stdout
