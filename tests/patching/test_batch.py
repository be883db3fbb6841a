"""tracer patch on several clean/corrupt pairs at once (B > 1): every sample patched, the metric read in each, the
cells their mean with its spread.  Each sample's change is held to the sweep of that pair alone (B = 1), built here
from the same model, so the batch neither mixes its samples nor loses one; the mean, std, min and max to numpy's."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from conftest import EXAMPLES, assert_refused, run_app

import tracer
from tracer.spec import yamlio

PAIRS_CLEAN = str(EXAMPLES / "interventions" / "pairs-clean.yaml")
PAIRS_CORRUPT = str(EXAMPLES / "interventions" / "pairs-corrupt.yaml")
ANSWERS = ["cat", "mat", "cat"]


ROWS = {PAIRS_CLEAN: [["<s>", "the", "cat", "sat", "on"], ["<s>", "the", "mat", "sat", "on"], ["<s>", ".", "cat", "sat", "on"]],
        PAIRS_CORRUPT: [["<s>", "the", "mat", "sat", "on"], ["<s>", "the", "cat", "sat", "on"], ["<s>", ".", "mat", "sat", "on"]]}


def one_pair(path: str, i: int) -> dict:
    """The spec with its i-th input alone (its tokens as the file writes them: the batch is checked against them)."""
    doc, _ = yamlio.load(yamlio.read_text(path), path)
    doc["vocab"] = list(tracer.trace(path).spec.vocab)  # YAML's plain 'on' read as tracer reads it, a word
    doc["input"]["tokens"] = [ROWS[path][i]]
    return doc


def test_the_rows_are_the_files():
    for path, rows in ROWS.items():
        vocab = tracer.trace(path).spec.vocab
        assert [[vocab[j] for j in row] for row in tracer.trace(path).spec.input.value] == rows


@pytest.mark.parametrize("normalise", [False, True])
def test_each_sample_is_its_pair_alone_and_the_cell_their_mean_and_spread(normalise):
    stage = ["blocks.*.attn.head.*", "blocks.0.output"]
    g = tracer.patch(PAIRS_CLEAN, PAIRS_CORRUPT, stage=stage, token=ANSWERS, metric="logit-diff", against=["mat", "cat", "mat"], normalise=normalise)
    assert g.samples == (0, 1, 2) and g.per_sample.shape == (5, 5, 3)
    for i, answer in enumerate(ANSWERS):
        other = "mat" if answer == "cat" else "cat"
        alone = tracer.patch(one_pair(PAIRS_CLEAN, i), one_pair(PAIRS_CORRUPT, i), stage=stage, token=answer, against=other, metric="logit-diff",
                             normalise=normalise)
        assert alone.stages == g.stages
        assert np.max(np.abs(g.per_sample[:, :, i] - alone.delta)) <= 1e-12, i
        assert abs(g.clean_values[i] - alone.logit_clean) <= 1e-12 and abs(g.corrupt_values[i] - alone.logit_corrupt) <= 1e-12
    p = g.per_sample
    assert np.max(np.abs(g.delta - p.sum(-1) / 3)) <= 1e-12
    assert np.max(np.abs(g.spread["std"] - np.sqrt(((p - p.sum(-1, keepdims=True) / 3) ** 2).sum(-1) / 3))) <= 1e-12
    assert np.array_equal(g.spread["min"], p.min(-1)) and np.array_equal(g.spread["max"], p.max(-1))
    assert g.spread["std"].max() > 1e-3  # the pairs differ: a spread of zeros would pass the mean's check too


def test_the_table_json_and_csv_carry_the_spread():
    args = ("patch", PAIRS_CLEAN, PAIRS_CORRUPT, "--token", "cat", "--token", "mat", "--token", "cat")
    r = run_app(*args)
    assert r.returncode == 0, r.stderr
    assert "at the mean over b=0..2, t=4" in r.stdout and "each cell: the mean over 3 samples, ±its standard deviation, its min..max" in r.stdout
    g = tracer.patch(PAIRS_CLEAN, PAIRS_CORRUPT, token=ANSWERS)
    doc = json.loads(run_app(*args, "--json").stdout)
    assert doc["samples"] == [0, 1, 2] and doc["b"] is None and doc["metric"]["tokens"] == list(g.metric.tokens)
    cell = doc["cells"][4]  # blocks.0.output at t=4
    assert (cell["stage"], cell["t"]) == ("blocks.0.output", 4)
    assert cell["delta"] == g.delta[0, 4] and cell["std"] == g.spread["std"][0, 4] and cell["min"] == g.spread["min"][0, 4]
    assert cell["samples"] == [float(x) for x in g.per_sample[0, 4]]
    rows = list(csv.reader(io.StringIO(run_app(*args, "--format", "csv").stdout)))
    assert rows[0] == ["stage", "t", "token", "logit", "delta", "std", "min", "max"] and float(rows[5][7]) == g.spread["max"][0, 4]
    one = json.loads(run_app(*args[:5], "--batch", "1", "--json").stdout)
    assert one["samples"] == [1] and one["b"] == 1 and "std" not in one["cells"][0]


def test_batch_mistakes_are_refused():
    assert_refused(run_app("patch", PAIRS_CLEAN, PAIRS_CORRUPT, "--token", "cat", "--token", "mat"),
                   "give one token for every sample or one a sample (3), received 2")
    assert_refused(run_app("patch", PAIRS_CLEAN, PAIRS_CORRUPT, "--batch", "3"), "--batch")
