"""Diagnosis as a search (tracer/compare/search.py): mistakes beyond the 18 worded records, made in a student's own
NumPy block (tests/helpers/mistakes.py, written from the chapter), are named at their first stage, and never with a
wrong name; pairs, a float32 student's other ε that hides just under the tolerance, and a softmax that overflows."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SPECS, compared, run_app
from helpers import mistakes, student

import tracer


def _spec(tmp_path, C: int, H: int, T: int, seed: int = 7) -> str:
    text = (f"name: s\ndims: {{B: 1, T: {T}, C: {C}, H: {H}, F: {2 * C}}}\nseed: {seed}\ninput: {{x: random}}\n"
            "block: {norm_order: pre, mask: causal, eps: 1e-5}\n"
            "weights:\n  attn: {b_q: random, b_k: random, b_v: random, b_o: random}\n  ffn: {b1: random, b2: random}\n"
            "  norm1: {gamma: random, beta: random}\n  norm2: {gamma: random, beta: random}\n")
    path = tmp_path / f"s{C}-{H}-{T}.yaml"
    path.write_text(text)
    return str(path)


def _diff(tmp_path, spec: str, arrays: dict[str, np.ndarray]):
    path = tmp_path / "mine.npz"
    np.savez(path, **arrays)
    return compared(spec, str(path))


def _named(r) -> set[str]:
    """Every name the finding gives (variants that give the same numbers are named together)."""
    doc = r.as_json()["diagnosis"]
    return set() if doc is None else {doc["bug"], *doc.get("same_numbers", [])}


SHAPES = [(4, 2, 4), (8, 2, 5)]  # d = 2 with sqrt(C) = d, and d = 4


@pytest.mark.parametrize("C,H,T", SHAPES)
def test_new_mistakes_are_named_and_never_wrongly(tmp_path, C, H, T):
    spec = _spec(tmp_path, C, H, T)
    t = tracer.trace(spec)
    x, w = np.asarray(t["x"])[0], dict(t.params)
    named, wrong = [], []
    for bug, (right, stage) in mistakes.NEW.items():
        with np.errstate(all="ignore"):
            r = _diff(tmp_path, spec, mistakes.block(x, w, H, bug))
        assert r.first_diverging is not None and r.first_diverging.name == stage, (bug, r.first_diverging)
        names = _named(r)
        if names & right:
            named.append(bug)
        elif names:
            wrong.append((bug, names, r.hint.english()))
    assert not wrong, wrong
    assert len(named) >= 0.9 * len(mistakes.NEW), sorted(set(mistakes.NEW) - set(named))


def test_on_the_chapters_spec_nothing_is_named_wrongly(tmp_path):
    """W_Q = W_K = W_V = I, W_O symmetric, d = 1, zero biases: many mistakes give the same numbers as another, or as
    the correct block; what is named is one of the mistakes that gives the student's numbers."""
    spec = str(SPECS / "ch17-prenorm.yaml")
    t = tracer.trace(spec)
    x, w = np.asarray(t["x"])[0], dict(t.params)
    same_here = {"attention_reads_x_and_no_b_o": {"post_norm", "reads=x"}, "scale_sqrt_c_and_no_b_o": {"scale=1/sqrt(C)"},
                 "ln_over_all": {"ln_over_t", "axis=TC"}}
    for bug, (right, _) in mistakes.NEW.items():
        with np.errstate(all="ignore"):
            r = _diff(tmp_path, spec, mistakes.block(x, w, 2, bug))
        names = _named(r)
        assert not names or names & (right | same_here.get(bug, set())), (bug, names, r.hint.english())


def test_a_pair_of_mistakes_is_named_as_a_pair(tmp_path):
    spec = _spec(tmp_path, 8, 2, 5)
    t = tracer.trace(spec)
    r = _diff(tmp_path, spec, mistakes.block(np.asarray(t["x"])[0], dict(t.params), 2, "scale_sqrt_c_and_no_b_o"))
    text = r.hint.english()
    assert "computed with b_O left out and the scores divided by sqrt(C) = sqrt(8), not by sqrt(d) = sqrt(4)" in text, text


def test_mistakes_that_give_the_same_numbers_are_named_together(tmp_path):
    spec = _spec(tmp_path, 4, 2, 4)  # sqrt(C) = 2 = d
    t = tracer.trace(spec)
    r = _diff(tmp_path, spec, mistakes.block(np.asarray(t["x"])[0], dict(t.params), 2, "scale_d"))
    assert _named(r) == {"scale=1/sqrt(C)", "scale=1/d"}
    assert "(or, giving the same numbers here, the scores divided by d = 2, not by sqrt(d))" in r.hint.english()
    out = run_app("diff", spec, str(tmp_path / "mine.npz"), "--json")
    assert json.loads(out.stdout)["diagnosis"]["same_numbers"] == ["scale=1/d"]


def test_a_float32_students_other_eps_just_under_the_tolerance_is_found_at_norm1(tmp_path):
    """The float32 tolerance hides norm1's error (0.95 of it) and the first stage over it is norm2: the hint judges by
    the jump in error from stage to stage and names the ε at norm1."""
    path = tmp_path / "st.yaml"
    path.write_text(student.spec_text(8, 2, T=6, seed=0))
    t = tracer.trace(str(path))
    arrays = student.numpy_block(np.asarray(t["x"])[0], dict(t.params), 2, eps=1e-6, dtype=np.float32)
    r = _diff(tmp_path, str(path), {k: v for k, v in arrays.items() if k in student.MAIN})
    assert r.first_diverging is not None and r.first_diverging.name == "norm2"
    assert r.hint is not None and r.hint.stage == "norm1" and r.hint.bug == "eps=1e-06"
    text = r.hint.english()
    assert text.startswith("norm1 agrees within the tolerance, but only just (") and "ε = 1e-06 where the spec says 1e-05" in text
    assert r.as_json()["diagnosis"]["stage"] == "norm1"


def test_an_eps_no_common_list_holds_is_solved_for(tmp_path):
    path = tmp_path / "st.yaml"
    path.write_text(student.spec_text(4, 2, T=6, seed=1))
    t = tracer.trace(str(path))
    arrays = student.numpy_block(np.asarray(t["x"])[0], dict(t.params), 2, eps=3e-6)
    r = _diff(tmp_path, str(path), {k: v for k, v in arrays.items() if k in student.MAIN})
    assert r.hint is not None and r.hint.bug == "eps=3e-06", r.hint and r.hint.english()


def test_a_softmax_that_overflows_is_named_with_its_fix(tmp_path):
    """Scores near 4000: exp overflows without the row's max subtracted, and the student's attention is NaN."""
    eye = "[[40, 0, 0, 0], [0, 40, 0, 0], [0, 0, 40, 0], [0, 0, 0, 40]]"
    spec = tmp_path / "big.yaml"
    spec.write_text("dims: {B: 1, T: 4, C: 4, H: 2, F: 8}\nseed: 7\ninput: {x: random}\nblock: {norm_order: pre, mask: causal}\n"
                    f"weights:\n  attn: {{w_q: {eye}, w_k: {eye}}}\n")
    t = tracer.trace(str(spec))
    w, x = dict(t.params), np.asarray(t["x"])[0]
    T, C, H, d = 4, 4, 2, 2
    n1 = np.asarray(t["norm1"])[0]
    q, k, v = ((n1 @ w[f"attn.w_{m}"] + w[f"attn.b_{m}"]).reshape(T, H, d).transpose(1, 0, 2) for m in "qkv")
    s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, q @ k.transpose(0, 2, 1) / np.sqrt(d))
    assert s.max() > 709
    with np.errstate(all="ignore"):
        e = np.exp(s)  # no max subtracted
        u = ((e / e.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(T, C) @ w["attn.w_o"] + w["attn.b_o"]
    assert np.isnan(u).any()
    r = _diff(tmp_path, str(spec), {"x": x, "norm1": n1, "attention": u})
    assert r.hint is not None and r.hint.bug == "stable=False"
    text = r.hint.english()
    assert "exp overflows" in text and "subtract the row's max before exp" in text


def test_an_unlisted_mistake_is_still_not_named(tmp_path):
    spec = _spec(tmp_path, 8, 2, 5)
    t = tracer.trace(spec)
    arrays = {k: v for k, v in student.numpy_block(np.asarray(t["x"])[0], dict(t.params), 2).items() if k in student.MAIN}
    arrays["attention"] = arrays["attention"] + 0.01 * np.sin(arrays["attention"])  # no variant makes this
    r = _diff(tmp_path, spec, arrays)
    assert r.first_diverging.name == "attention" and r.hint.bug is None and "no known mistake matches" in r.hint.english()


def test_attention_reading_x_is_not_post_norm_when_norm1_is_recorded(tmp_path):
    spec = str(SPECS / "variants" / "diagnose.yaml")
    t = tracer.trace(spec)
    w, x = dict(t.params), np.asarray(t["x"])[0]
    good = student.numpy_block(x, w, 2)
    T, C, H, d = 4, 4, 2, 2
    q, k, v = ((x @ w[f"attn.w_{m}"] + w[f"attn.b_{m}"]).reshape(T, H, d).transpose(1, 0, 2) for m in "qkv")
    s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, q @ k.transpose(0, 2, 1) / np.sqrt(d))
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    u = (a @ v).transpose(1, 0, 2).reshape(T, C) @ w["attn.w_o"] + w["attn.b_o"]
    r = _diff(tmp_path, spec, {"x": x, "norm1": good["norm1"], "attention": u})
    assert r.hint.bug == "reads=x", r.hint.english()
    assert "Post-Norm" not in r.hint.english()
    without = _diff(tmp_path, spec, {"x": x, "attention": u})  # norm1 not recorded: Post-Norm's attention, by its record
    assert without.hint.bug == "post_norm"


def test_masked_scores_are_known_by_the_mask_not_by_weights_that_underflow(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text("dims: {B: 1, T: 4, C: 4, H: 2, F: 8}\nseed: 7\ninput: {x: random}\nblock: {norm_order: pre, mask: causal}\n"
                    "weights:\n  norm1: {gamma: [60, 60, 60, 60]}\n")
    t = tracer.trace(str(spec))
    arrays = {n: np.asarray(t[n]).copy() for n in ("x", "norm1", "attn.scores", "attn.weights", "attention")}
    assert (arrays["attn.weights"][np.tril(np.ones((4, 4), bool))[None, None].repeat(2, 1)] == 0).any()  # some visible weights underflow
    arrays["attn.scores"] = np.where(np.triu(np.ones((4, 4), bool), 1), -np.inf, arrays["attn.scores"])
    r = _diff(tmp_path, str(spec), arrays)
    assert r.exit_code == 0, r.summary()
    assert any("holds masked scores" in n for n in r.notes)
