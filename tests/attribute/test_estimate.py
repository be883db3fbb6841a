"""Attribution patching: each patch cell's first-order estimate, (clean - corrupt) . gradient at the corrupt run, held
to tracer patch's own cells.

Where the logit is linear in the stage (the last layer's FFN output and the layer's output, without a final norm) the
estimate is the patch exactly.  Elsewhere its error is second order: two vocab words whose embeddings differ by eps
give an error that falls as eps^2 while the change itself falls as eps (a wrong gradient would leave an error of the
order of eps).
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from conftest import EXAMPLES, assert_refused, run_app

import tracer

CLEAN = str(EXAMPLES / "interventions" / "clean.yaml")
CORRUPT = str(EXAMPLES / "interventions" / "corrupt.yaml")
VOCAB = ["<s>", "the", "cat", "sat", "on", "mat", "."]


def pair(eps: float, final_norm: bool = True) -> tuple[dict, dict]:
    """One model on '<s> the cat sat on' and '<s> the mat sat on', the embeddings of cat and mat eps apart."""
    rng = np.random.default_rng(0)
    E = rng.standard_normal((7, 8))
    E[5] = E[2] + eps * rng.standard_normal(8)
    doc = {"name": "pair", "vocab": VOCAB, "dims": {"C": 8, "H": 2, "F": 16, "T_max": 8}, "seed": 4,
           "block": {"norm_order": "pre", "layers": 2, "final_norm": final_norm, "head": "tied", "positions": "learned"},
           "weights": {"embedding": E.tolist()}, "input": {"tokens": ["<s>", "the", "cat", "sat", "on"]}}
    return doc, {**doc, "input": {"tokens": ["<s>", "the", "mat", "sat", "on"]}}


def test_the_estimate_is_the_patch_where_the_logit_is_linear_in_the_stage():
    g = tracer.attribution_patching(*pair(0.5, final_norm=False), stage=["blocks.1.ffn", "blocks.1.output"], token="cat", against="on", real=True)
    assert g.real is not None and float(np.abs(g.real).max()) > 0.05  # a change worth estimating
    assert float(np.abs(g.error).max()) <= 1e-12
    assert np.all(g.real[:, :4] == 0.0) and np.all(g.estimate[:, :4] == 0.0)  # causal: earlier positions never reach the logit


def test_the_error_is_second_order_in_the_difference():
    stages = ["x", "blocks.*.attention", "blocks.*.ffn", "blocks.*.output"]
    found = []
    for eps in (1e-2, 5e-3, 2.5e-3):
        g = tracer.attribution_patching(*pair(eps), stage=stages, token="cat", real=True)
        found.append((float(np.abs(g.error).max()), float(np.abs(g.real).max())))
    for (e1, r1), (e2, r2) in zip(found, found[1:]):
        assert 1.8 < r1 / r2 < 2.2  # the change itself halves with eps
        assert 3.5 < e1 / e2 < 4.5  # its error falls by four
    assert found[-1][0] <= 1e-2 * found[-1][1]  # within 1% of the largest change


def test_each_cell_is_the_gradient_of_the_patched_logit_dotted_with_the_difference():
    clean, corrupt = tracer.trace(CLEAN), tracer.trace(CORRUPT)
    g = tracer.attribution_patching(CLEAN, CORRUPT, token="cat", real=True)
    patched = tracer.patch(CLEAN, CORRUPT, token="cat")
    assert g.stages == patched.stages and np.array_equal(g.real, patched.delta)
    assert g.metric_clean == patched.logit_clean and g.metric_corrupt == patched.logit_corrupt
    # the last layer's output feeds only the final norm and the head: its gradient in closed form
    tok = clean.spec.vocab.index("cat")
    p = corrupt.params
    r = corrupt["blocks.1.output"][0, -1]
    sigma = np.sqrt(np.var(r) + 1e-5)
    u = p["embedding"][tok] * p["final_norm.gamma"]
    rhat = (r - r.mean()) / sigma
    grad = (u - u.mean() - rhat * np.mean(u * rhat)) / sigma  # LayerNorm's backward of u
    want = float((clean["blocks.1.output"][0, -1] - r) @ grad)
    assert abs(g.estimate[1, -1] - want) <= 1e-12


def test_the_heads_estimates_add_up_to_their_attention_stage_s():
    # the attention output is the heads times W_O plus b_O, so its change is the sum of each head's slice through W_O:
    # a first-order estimate, linear in the change, splits the same way
    g = tracer.attribution_patching(CLEAN, CORRUPT, stage=["blocks.*.attention", "blocks.*.attn.head.*"], token="cat")
    assert g.stages == ["blocks.0.attn.head.0", "blocks.0.attn.head.1", "blocks.0.attention", "blocks.1.attn.head.0", "blocks.1.attn.head.1",
                        "blocks.1.attention"]
    for layer in (0, 3):
        assert float(np.abs(g.estimate[layer + 2]).max()) > 0.01
        assert np.allclose(g.estimate[layer] + g.estimate[layer + 1], g.estimate[layer + 2], rtol=0, atol=1e-13)


def test_the_error_of_every_head_part_is_second_order_in_the_difference():
    found = []
    for eps in (1e-2, 5e-3, 2.5e-3):
        g = tracer.attribution_patching(*pair(eps), stage=["blocks.*.attn.head.*", "blocks.*.attn.head.*.*"], token="cat", real=True)
        assert len(g.stages) == 2 * 2 * 5  # two layers, two heads, output q k v pattern
        found.append((float(np.abs(g.error).max()), float(np.abs(g.real).max())))
    for (e1, r1), (e2, r2) in zip(found, found[1:]):
        assert 1.8 < r1 / r2 < 2.2
        assert 3.5 < e1 / e2 < 4.5


def test_real_is_tracer_patch_with_the_same_metric_and_sample():
    a, b = (str(EXAMPLES / "interventions" / f"pairs-{k}.yaml") for k in ("clean", "corrupt"))
    g = tracer.attribution_patching(a, b, stage="blocks.*.attn.head.*", token="cat", against="mat", batch=1, real=True)
    p = tracer.patch(a, b, stage="blocks.*.attn.head.*", token="cat", against="mat", metric="logit-diff", batch=1)
    assert g.stages == p.stages and np.array_equal(g.real, p.delta)
    assert (g.metric_clean, g.metric_corrupt) == (p.logit_clean, p.logit_corrupt)


def test_against_estimates_the_logit_difference():
    both = tracer.attribution_patching(CLEAN, CORRUPT, token="cat", against="mat", real=True)
    a, b = (tracer.attribution_patching(CLEAN, CORRUPT, token=w, real=True) for w in ("cat", "mat"))
    assert np.allclose(both.estimate, a.estimate - b.estimate, rtol=0, atol=1e-13)
    assert np.allclose(both.real, a.real - b.real, rtol=0, atol=1e-13)
    assert np.array_equal(both.real, tracer.patch(CLEAN, CORRUPT, token="cat", against="mat", metric="logit-diff").delta)


def test_table_json_and_csv():
    r = run_app("attribute", CLEAN, "--corrupt", CORRUPT, "--token", "cat", "--real")
    assert r.returncode == 0, r.stderr
    assert "attribution patching: the first-order estimate of the change of the logit of 'cat' at b=0, t=4" in r.stdout
    assert "the largest |error| of the estimate is" in r.stdout and "shade: |estimate|" in r.stdout
    g = tracer.attribution_patching(CLEAN, CORRUPT, token="cat", real=True)
    doc = json.loads(run_app("attribute", CLEAN, "--corrupt", CORRUPT, "--token", "cat", "--real", "--json").stdout)
    assert doc["kind"] == "attribution-patching" and doc["token"] == {"id": 2, "text": "cat"} and doc["stages"] == g.stages
    cells = {(c["stage"], c["t"]): c for c in doc["cells"]}
    assert len(cells) == 2 * 5
    for i, s in enumerate(g.stages):
        for t in range(5):
            assert cells[s, t]["estimate"] == g.estimate[i, t] and cells[s, t]["real"] == g.real[i, t]
            assert cells[s, t]["error"] == g.estimate[i, t] - g.real[i, t]
    r = run_app("attribute", CLEAN, "--corrupt", CORRUPT, "--format", "csv", "--stage", "blocks.0.attention")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [row["stage"] for row in rows] == ["blocks.0.attention"] * 5 and all(row["real"] == "" for row in rows)
    plain = json.loads(run_app("attribute", CLEAN, "--corrupt", CORRUPT, "--json").stdout)
    assert all("real" not in c for c in plain["cells"])


@pytest.mark.parametrize("args, fragments", [
    (["--stage", "blocks.*.output"], ["--stage", "--corrupt"]),
    (["--real"], ["--real", "--corrupt"]),
    (["--corrupt", CORRUPT, "--real", "--position", "2"], ["--real", "--position 2"]),
    (["--corrupt", CORRUPT, "--text", "the cat"], ["--text"]),
    (["--corrupt", CORRUPT, "--stage", "blocks.*.nothing"], ["--stage blocks.*.nothing"]),
    (["--corrupt", str(EXAMPLES.parent / "specs" / "stack-2-layers.yaml")], ["clean and corrupt must trace the same stages"]),
    (["--corrupt", CORRUPT, "--token", "zebra"], ["--token 'zebra'"]),
])
def test_bad_options_are_refused_in_one_line(args, fragments):
    assert_refused(run_app("attribute", CLEAN, *args), *fragments)
