"""Every hint's words fit the case that shows them: the FFN's advice names the stage it reads (norm1 in post-norm),
attention's asks to record its internals only when they are not recorded; float32 arrays written as JSON are compared
at float32's tolerance and the note says why; the blind-spot note names every mistake the spec's weights hide."""

from __future__ import annotations

import json

import numpy as np
from conftest import SPECS, compared
from helpers import student

import tracer
from tracer.compare import hints


def _save(tmp_path, arrays, name="mine.npz"):
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


def test_the_ffn_advice_names_what_the_ffn_reads_in_post_norm(tmp_path):
    spec = str(SPECS / "ch17-postnorm.yaml")
    t = tracer.trace(spec)
    arrays = {n: np.asarray(t[n]).copy() for n in ("x", "attention", "residual1", "norm1", "hidden")}
    arrays["hidden"] = arrays["hidden"] * 1.3 + 0.1  # no variant makes this
    r = compared(spec, _save(tmp_path, arrays))
    text = r.hint.english()
    assert r.first_diverging.name == "hidden"
    assert "the FFN's first layer: act(norm1 W_1 + b_1), reading norm1" in text, text
    assert "second normalisation" not in text


def test_the_ffn_advice_in_pre_norm_reads_norm2(tmp_path):
    spec = str(SPECS / "ch17-prenorm.yaml")
    t = tracer.trace(spec)
    arrays = {n: np.asarray(t[n]).copy() for n in ("x", "norm1", "attention", "residual1", "norm2", "hidden")}
    arrays["hidden"] = arrays["hidden"] * 1.3 + 0.1
    r = compared(spec, _save(tmp_path, arrays))
    assert "act(norm2 W_1 + b_1), reading norm2" in r.hint.english()


def _attention_case(tmp_path, keys):
    path = tmp_path / "s.yaml"
    path.write_text(student.spec_text(4, 2))
    t = tracer.trace(str(path))
    arrays = student.numpy_block(np.asarray(t["x"])[0], dict(t.params), 2)
    arrays["attention"] = arrays["attention"] + 0.01 * np.cos(arrays["attention"])  # wrong after the heads: no variant
    return compared(str(path), _save(tmp_path, {k: v for k, v in arrays.items() if k in keys}))


def test_attention_advice_asks_for_the_internals_only_when_they_are_not_recorded(tmp_path):
    without = _attention_case(tmp_path, student.MAIN)
    assert without.first_diverging.name == "attention"
    assert "Record attn.weights and attn.heads to see which" in without.hint.english()
    recorded = _attention_case(tmp_path, set(student.MAIN) | {"attn.weights", "attn.heads"})
    assert recorded.first_diverging.name == "attention"
    text = recorded.hint.english()
    assert "the heads times W_O" in text and "Record attn.weights" not in text


def test_float32_arrays_written_as_json_are_compared_at_float32s_tolerance(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(student.spec_text(8, 2))
    t = tracer.trace(str(path))
    arrays = student.numpy_block(np.asarray(t["x"])[0], dict(t.params), 2, dtype=np.float32)
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({k: v.astype(np.float32).tolist() for k, v in arrays.items() if k in student.MAIN}))
    r = compared(str(path), str(mine))
    assert r.same and r.by_dtype == "float32" and (r.atol, r.rtol) == (1e-5, 1e-5), r.summary()
    assert any("numbers look like float32 rounding" in n for n in r.notes)
    typed = tmp_path / "typed.json"  # short decimals a person wrote: float64's tolerance, as before
    typed.write_text(json.dumps({"x": [[[0.5, 0.25]]]}))
    from tracer.compare.arrays import looks_float32

    assert not looks_float32([np.array([[0.5, 0.25, 1.0]])])
    assert looks_float32([np.float32([0.1, 0.7, 1.3]).astype(float)])


def test_the_chapters_blind_spots_name_what_its_weights_hide():
    t = tracer.trace(str(SPECS / "ch17-prenorm.yaml"))
    note = hints.spec_blind_spots(t.spec, dict(t.params), t.run.stages)[0]
    for words in ("d = 1", "every bias is zero", "gamma = 1 and beta = 0",
                  "the queries, keys or values made with another of W_Q, W_K and W_V (they are equal here)",
                  "the values taken as the input itself, without W_V", "the scores K Q^T (the queries and keys swapped)",
                  "W_O transposed"):
        assert words in note, (words, note)
    assert "b_K" not in note  # never shows, on any spec


# -- each stage's advice, in the case that shows it ----------------------------------------------------------------

ADVICE_CASES = {  # the stage made wrong by a change no variant makes -> words its advice must hold
    "norm1": "LayerNorm (divide by C, not C-1; ε inside the square root",
    "attention": "attention: the softmax over the keys (the last axis), not the queries",
    "attn.scores": "the scores: Q_h K_h^T / sqrt(d) for each head",
    "attn.weights": "the softmax: over the keys (the last axis), not the queries",
    "attn.heads": "the mixing: the weights times V for each head",
    "residual1": "the residual add: both terms, the stream and the sublayer's output",
    "hidden": "the FFN's first layer: act(norm2 W_1 + b_1), reading norm2",
    "ffn": "the FFN's second layer: hidden W_2 + b_2",
}


def test_each_stages_advice_is_the_one_for_what_it_computes(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(student.spec_text(4, 2))
    t = tracer.trace(str(path))
    good = student.numpy_block(np.asarray(t["x"])[0], dict(t.params), 2)
    order = ["x", "norm1", "attn.scores", "attn.weights", "attn.heads", "attention", "residual1", "norm2", "hidden", "ffn", "output"]
    for stage, words in ADVICE_CASES.items():
        kept = order[: order.index(stage) + 1]
        arrays = {k: good[k].copy() for k in kept}
        arrays[stage] = arrays[stage] + 0.01 * np.cos(3 * arrays[stage])  # no variant of any op makes this
        r = compared(str(path), _save(tmp_path, arrays, f"{stage}.npz"))
        assert r.first_diverging is not None and r.first_diverging.name == stage, (stage, r.first_diverging)
        text = r.hint.english()
        assert "no known mistake matches" in text and words in text, (stage, text)
