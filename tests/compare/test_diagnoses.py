"""tracer diff's diagnoses: each classic mistake, made in a student's own block (NumPy, and PyTorch where installed),
is found at its first stage and named, and no other mistake's check matches it; the guards at C from 2 to 8192;
scores recorded after the mask; float32 arrays at float32's tolerance; what a spec cannot show."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import PRE, compared, run_cli
from helpers import student

import tracer
from tracer.compare import hints, judge, recompute
from tracer.compare.align import Side
from tracer.engine.executor import Stage
from tracer.model.blocks import Step

SIZES = {"chapter": 2, "gpt2": 768}
SIZE_PARAMS = ["chapter", pytest.param("gpt2", marks=pytest.mark.slow)]  # C = 768: a few seconds each under load


def traced(tmp_path, C, H, activation="relu"):
    path = tmp_path / f"student-{C}-{H}-{activation}.yaml"
    path.write_text(student.spec_text(C, H, activation=activation))
    t = tracer.trace(str(path))
    return str(path), dict(t.params), np.asarray(t["x"])[0]


def heads_for(C, bug):
    if C == 2:  # the chapter's width: d = 2 (H = 1), or two heads of d = 1 for the mistakes only heads show
        return 2 if bug in student.HEADS else 1
    return 12


def activation_for(bug):
    return {"gelu_exact": "gelu_tanh", "gelu_tanh": "gelu"}.get(bug, "relu")


def save(tmp_path, arrays, keys, name="mine.npz"):
    path = tmp_path / name
    np.savez(path, **{k: v for k, v in arrays.items() if k in keys})
    return str(path)


def check_found(r, bug):
    assert r.exit_code == 1
    assert r.first_diverging is not None and r.first_diverging.name == student.MISTAKES[bug]
    assert r.hint is not None and r.hint.bug == bug, (r.hint and r.hint.english())
    ref, mine = (r.a, r.b)
    ctx = recompute.Context(r.first_diverging.name, ref, mine, recompute.diagnosis_tolerance(mine.dtype))
    assert hints.matching(ctx, mine.stages[r.first_diverging.name].array) == [bug]  # no other mistake's check matches


@pytest.mark.parametrize("size", SIZE_PARAMS)
@pytest.mark.parametrize("bug", student.MISTAKES)
def test_each_mistake_in_numpy_is_found_and_named(tmp_path, bug, size):
    C = SIZES[size]
    spec, params, x = traced(tmp_path, C, heads_for(C, bug), activation_for(bug))
    arrays = student.numpy_block(x, params, heads_for(C, bug), activation=activation_for(bug), bug=bug)
    r = compared(spec, save(tmp_path, arrays, student.MAIN))
    check_found(r, bug)
    assert "no known mistake" not in r.hint.english()


@pytest.mark.parametrize("size", SIZE_PARAMS)
@pytest.mark.parametrize("bug", student.MISTAKES)
def test_each_mistake_in_torch_is_found_and_named(tmp_path, bug, size):
    pytest.importorskip("torch", reason="a student's PyTorch block needs torch (optional extra)")
    C = SIZES[size]
    spec, params, x = traced(tmp_path, C, heads_for(C, bug), activation_for(bug))
    arrays = student.torch_block(x, params, heads_for(C, bug), activation=activation_for(bug), bug=bug)
    r = compared(spec, save(tmp_path, arrays, student.MAIN))
    check_found(r, bug)


@pytest.mark.parametrize("size", SIZES)
def test_the_correct_block_agrees_and_nothing_is_named(tmp_path, size):
    C = SIZES[size]
    spec, params, x = traced(tmp_path, C, heads_for(C, None))
    arrays = student.numpy_block(x, params, heads_for(C, None))
    r = compared(spec, save(tmp_path, arrays, set(arrays)))
    assert r.exit_code == 0, [(s.name, s.max_abs_diff) for s in r.stages_differ]
    assert r.hint is None
    assert any("masked scores" in n for n in r.notes)  # attn.scores recorded after the mask


def test_a_bug_no_record_knows_says_so_then_the_checklist(tmp_path):
    spec, params, x = traced(tmp_path, 4, 2)
    arrays = student.numpy_block(x, params, 2)
    arrays["norm1"] = arrays["norm1"] * 1.5
    r = compared(spec, save(tmp_path, arrays, student.MAIN))
    assert r.hint is not None and r.hint.bug is None
    assert r.hint.english().startswith("norm1 differs but x agrees: no known mistake matches; look at LayerNorm")
    assert r.as_json()["diagnosis"] is None


def test_the_json_holds_the_diagnosis_apart(tmp_path):
    spec, params, x = traced(tmp_path, 2, 1)
    path = save(tmp_path, student.numpy_block(x, params, 1, bug="no_scale"), student.MAIN)
    out = run_cli("diff", spec, path, "--json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["diagnosis"]["bug"] == "no_scale" and "1/sqrt(d)" in doc["diagnosis"]["text"]
    assert doc["diagnosis"]["text"] in doc["hint"]
    zh = run_cli("diff", spec, path, "--lang", "zh")
    assert "没有 1/sqrt(d) 缩放的注意力" in zh.stdout


def test_an_input_not_recorded_is_tracers_and_said_so(tmp_path):
    spec, params, x = traced(tmp_path, 2, 1)
    arrays = student.numpy_block(x, params, 1, bug="no_eps")
    r = compared(spec, save(tmp_path, arrays, ("norm1", "attention")))
    assert r.hint is not None and r.hint.bug == "no_eps"
    assert "worked out from tracer's x: your file does not hold them" in r.hint.english()


# -- the guard: at every width, the ddof check names ddof=1 and nothing else -------------------------------------

def _ln_sides(x, theirs, gamma, beta):
    step = Step("norm1", "layer_norm", ("x",), "norm1")
    correct = hints._layer_norm(x, gamma, beta, 1e-5)
    stages = {"x": Stage("x", x, ("B", "T", "C"), ""), "norm1": Stage("norm1", correct, ("B", "T", "C"), "")}
    ref = Side("A", "spec", "spec", "ln", {}, {}, None, (step,), stages, {"norm1.gamma": gamma, "norm1.beta": beta}, [])
    dtype = "float32" if theirs.dtype == np.float32 else None
    mine = Side("B", "mine.npz", "arrays", "mine", {}, {}, dtype, (),
                {"x": stages["x"], "norm1": Stage("norm1", theirs.astype(np.float64), ("B", "T", "C"), "")}, None, [])
    return recompute.Context("norm1", ref, mine, recompute.diagnosis_tolerance(dtype))


@pytest.mark.parametrize("C", [2, 3, 8, 64, 512, 768, 2048, 5120, 8192])
def test_the_layer_norm_guards_hold_from_c_2_to_8192(C):
    rng = np.random.default_rng(C)
    x = rng.standard_normal((1, 3, C))
    gamma, beta = rng.uniform(0.5, 1.5, C), rng.uniform(-0.5, 0.5, C)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    written = {  # what a student's LayerNorm may be -> the one diagnosis it must get (None: none)
        None: gamma * (x - mu) / np.sqrt(var + 1e-5) + beta,
        "ddof": gamma * (x - mu) / np.sqrt(x.var(-1, keepdims=True, ddof=1) + 1e-5) + beta,
        "no_eps": gamma * (x - mu) / np.sqrt(var) + beta,
        "gamma_beta_swapped": beta * (x - mu) / np.sqrt(var + 1e-5) + gamma,
        "eps outside the sqrt": gamma * (x - mu) / (np.sqrt(var) + 1e-5) + beta,
        "float32": (gamma * (x - mu) / np.sqrt(var + 1e-5) + beta).astype(np.float32),
    }
    for what, theirs in written.items():
        ctx = _ln_sides(x, theirs, gamma, beta)
        found = hints.matching(ctx, theirs.astype(np.float64))
        expected = [what] if what in ("ddof", "no_eps", "gamma_beta_swapped") else []
        assert found == expected, (C, what, found)


# -- scores recorded after the mask ---------------------------------------------------------------------------

@pytest.mark.parametrize("fill", [-np.inf, -1e9])
def test_masked_scores_are_accepted_and_the_diff_carries_on_to_the_weights(tmp_path, fill):
    spec, params, x = traced(tmp_path, 4, 2)
    arrays = student.numpy_block(x, params, 2, bug="softmax_queries")
    T = x.shape[0]
    arrays["attn.scores"] = np.where(np.triu(np.ones((T, T), dtype=bool), k=1), fill, arrays["attn.scores"])
    r = compared(spec, save(tmp_path, arrays, set(arrays)))
    row = next(s for s in r.stages if s.name == "attn.scores")
    assert row.status == "equal"
    assert any("attn.scores holds masked scores" in n for n in r.notes)
    assert r.first_diverging is not None and r.first_diverging.name == "attn.weights"
    assert r.hint is not None and r.hint.bug == "softmax_queries"


def test_masked_scores_without_the_scale_are_named_at_the_scores(tmp_path):
    spec, params, x = traced(tmp_path, 4, 2)
    arrays = student.numpy_block(x, params, 2, bug="no_scale")
    r = compared(spec, save(tmp_path, arrays, set(arrays)))
    assert r.first_diverging is not None and r.first_diverging.name == "attn.scores"
    assert r.hint is not None and r.hint.bug == "no_scale"


# -- tolerance by dtype ----------------------------------------------------------------------------------------

def test_float32_arrays_are_compared_at_float32s_tolerance_and_it_says_so(tmp_path):
    spec, params, x = traced(tmp_path, 8, 2)
    arrays = student.numpy_block(x, params, 2, dtype=np.float32)
    path = save(tmp_path, arrays, student.MAIN)
    r = compared(spec, path)
    assert r.exit_code == 0 and (r.atol, r.rtol) == judge.DTYPE_TOLERANCE["float32"] and r.by_dtype == "float32"
    assert any("B holds float32 arrays: compared at atol 1e-05, rtol 1e-05" in n for n in r.notes)
    doc = json.loads(run_cli("diff", spec, path, "--json").stdout)
    assert doc["tolerance"] == {"atol": 1e-5, "rtol": 1e-5, "by_dtype": "float32"}
    given = compared(spec, path, atol=1e-9)  # an explicit tolerance wins
    assert given.exit_code == 1 and given.by_dtype is None and (given.atol, given.rtol) == (1e-9, 1e-9)


def test_a_float32_mistake_is_still_named(tmp_path):
    spec, params, x = traced(tmp_path, 8, 2)
    arrays = student.numpy_block(x, params, 2, bug="ddof", dtype=np.float32)
    r = compared(spec, save(tmp_path, arrays, student.MAIN))
    assert r.hint is not None and r.hint.bug == "ddof"


def test_float64_arrays_keep_the_default_tolerance(tmp_path):
    spec, params, x = traced(tmp_path, 8, 2)
    r = compared(spec, save(tmp_path, student.numpy_block(x, params, 2), student.MAIN))
    assert (r.atol, r.rtol) == (1e-9, 1e-9) and r.by_dtype is None and r.exit_code == 0


# -- what a spec cannot show -----------------------------------------------------------------------------------

def test_the_chapters_spec_says_which_mistakes_it_cannot_show(tmp_path):
    from helpers import oracle

    arrays = {k: v for k, v in oracle.chapter_block().items() if k in student.MAIN}
    r = compared(PRE, save(tmp_path, arrays, student.MAIN))
    note = next(n for n in r.notes if "cannot show every classic mistake" in n)
    for prop in ("d = 1", "every bias is zero", "gamma = 1 and beta = 0", "specs/variants/diagnose.yaml"):
        assert prop in note
    assert "H = 1" not in note and "T = 1" not in note


def test_a_spec_that_shows_every_mistake_has_no_such_note():
    t = tracer.trace("specs/variants/diagnose.yaml")
    assert hints.spec_blind_spots(t.spec, dict(t.params)) == []


def test_one_position_and_one_head_are_named(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text("name: tiny\ndims: {B: 1, T: 1, C: 4, H: 1, F: 8}\nseed: 1\ninput: {x: random}\nblock: {norm_order: pre, mask: causal}\n")
    t = tracer.trace(str(path))
    note = hints.spec_blind_spots(t.spec, dict(t.params))[0]
    assert "H = 1" in note and "T = 1" in note and "d = 1" not in note


def test_the_mask_off_by_one_filled_with_a_large_negative_is_named(tmp_path):
    spec, params, x = traced(tmp_path, 2, 1)
    arrays = student.numpy_block(x, params, 1, bug="mask_off_by_one", fill=-1e9)
    assert np.allclose(arrays["attn.weights"][0, 0], 1 / 3)  # row 0 reads no key: uniform
    r = compared(spec, save(tmp_path, arrays, student.MAIN))
    assert r.hint is not None and r.hint.bug == "mask_off_by_one"


def test_the_api_reads_the_dtype_of_the_arrays_it_is_given(tmp_path):
    spec, params, x = traced(tmp_path, 8, 2)
    arrays = {k: v for k, v in student.numpy_block(x, params, 2, dtype=np.float32).items() if k in student.MAIN}
    d = tracer.diff(spec, arrays)
    assert d.exit_code == 0 and d.result.by_dtype == "float32"
    assert tracer.diff(spec, arrays, atol=1e-12, rtol=0).exit_code == 1
