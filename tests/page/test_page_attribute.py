"""tracer attribute --page: the run's page with the components table and the heads-by-layer heatmap, each value the
split's own (exact repr, and as the terminal table prints it), written by the rules of every page tracer writes.
(No browser here: tests/browser/test_page_results.py reads it in Chromium.)"""

from __future__ import annotations

import json

import numpy as np
from conftest import EXAMPLES, SPECS, assert_refused, run_app
from helpers.browser import table_cells
from test_page_file import assert_page_file_rules, decoded, page_data, same_bits

import tracer

STACK = str(SPECS / "stack-2-layers.yaml")


def written(tmp_path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "attribute.html"
    r = run_app("attribute", STACK, *args, "--page", str(out))
    assert r.returncode == 0, r.stderr
    assert "attribute.html" in r.stderr
    return page_data(out.read_text(encoding="utf-8")), r.stdout


def test_the_page_holds_every_component_as_the_split_computes_it(tmp_path):
    data, stdout = written(tmp_path, "--token", "cat", "--against", "on", "--position", "2", "--batch", "0")
    a = tracer.attribution(STACK, token="cat", against="on", position=2)
    page = data["attribution"]
    assert data["kind"] == "attribute" and (data["b"], data["t"]) == (0, 2)
    assert [c["name"] for c in page["components"]] == [p.name for p in a.parts]
    for c, p in zip(page["components"], a.parts):
        assert float(c["value"]).hex() == p.value.hex() and c["value"] == repr(p.value), p.name
        assert (c["layer"], c["head"]) == (p.layer, p.head)
    # the same numbers as --json, and the sum is the run's own logit difference, read from the trace
    doc = json.loads(run_app("attribute", STACK, "--token", "cat", "--against", "on", "--position", "2", "--json").stdout)
    assert [float(c["value"]) for c in page["components"]] == [c["value"] for c in doc["components"]]
    t = tracer.trace(STACK)
    cat, on = t.spec.vocab.index("cat"), t.spec.vocab.index("on")
    logit = float(t["logits"][0, 2, cat] - t["logits"][0, 2, on])
    assert float(page["logit"]["value"]) == logit
    assert abs(float(page["sum"]["value"]) - logit) <= 1e-12
    assert float(page["gap"]) == float(page["sum"]["value"]) - logit
    # each row as the terminal table prints it
    printed = {row[0]: row[1:] for row in table_cells(stdout) if len(row) == 3}
    for c in page["components"]:
        assert [c["fmt"], c["share"]] == printed[c["name"]], c["name"]


def test_the_heads_heatmap_is_each_layers_heads_values(tmp_path):
    data, _ = written(tmp_path, "--token", "on")
    a = tracer.attribution(STACK, token="on")
    heads = data["attribution"]["heads"]
    layers, grid = a.heads()
    assert heads["layers"] == [f"blocks.{i}" for i in layers] == ["blocks.0", "blocks.1"]
    assert same_bits(decoded(heads), grid)
    for p in a.parts:
        if p.head is not None:
            assert decoded(heads)[p.layer, p.head] == p.value
    assert len(heads["fmt"]) == grid.size and not np.isnan(grid).any()
    assert data["sides"][0]["sections"] and data["heads"]  # the run's own page around it: diagram, attention heads


def test_the_page_opens_in_chinese_with_the_title_in_both_languages(tmp_path):
    data, _ = written(tmp_path, "--token", "on", "--lang", "zh")
    title = data["attribution"]["title"]
    assert data["lang"] == "zh" and title["en"].startswith("direct logit attribution of 'on'") and "直接 logit 归因" in title["zh"]


def test_the_page_never_replaces_an_input_or_a_file_tracer_did_not_write(tmp_path):
    page = assert_page_file_rules(tmp_path, "attribute", "stack-2-layers.yaml", "--page")
    assert_refused(run_app("attribute", STACK, "--page", str(page), "--html", str(page)))  # two outputs, one file


def test_page_with_attribution_patching_or_a_bad_budget_is_refused_before_anything_runs(tmp_path):
    clean, corrupt = (str(EXAMPLES / "interventions" / f"{k}.yaml") for k in ("clean", "corrupt"))
    out = tmp_path / "p.html"
    assert_refused(run_app("attribute", clean, "--corrupt", corrupt, "--page", str(out)), "--page", "--corrupt")
    assert_refused(run_app("attribute", STACK, "--page", str(out), "--page-budget", "0"), "--page-budget 0")
    assert_refused(run_app("attribute", STACK, "--token", "zebra", "--page", str(out)), "--token 'zebra'")
    assert not out.exists()
