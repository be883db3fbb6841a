"""The pages of the other commands, in Chromium: `tracer diff A B --page` (the two blocks side by side, the first
divergence followed, |A - B| read exactly), `tracer grad --page` (each stage's gradient, the per-layer picture),
`tracer lens --page` (the lens heatmap), `tracer attribute --page` (the components table and the heads heatmap), a
violation marked on its box with the terminal's explanation, and a summarised stage saying what was left out.  Each page built once for the module."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, POST_REL, PRE_REL, run_app, write_spec
from helpers.browser import build, hover_cell, panel_lines, shot, table_cells, words

STACK = "specs/stack-2-layers.yaml"  # a head and a vocabulary: tracer lens reads it
VIOLATION = "examples/violations/ex5-residual-broadcast.yaml"  # a broadcast at residual1
WIDE = {"COLUMNS": "250"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def diff_page(folder):
    return build(folder, "diff.html", "diff", PRE_REL, POST_REL, "--page", "{out}", codes=(1,))  # they differ: exit 1, as without --page


@pytest.fixture(scope="module")
def grad_page(folder):
    return build(folder, "grad.html", "grad", STACK, "--page", "{out}")


@pytest.fixture(scope="module")
def lens_page(folder):
    return build(folder, "lens.html", "lens", STACK, "--page", "{out}")


@pytest.fixture(scope="module")
def attribute_page(folder):
    return build(folder, "attribute.html", "attribute", STACK, "--token", "cat", "--against", "on", "--page", "{out}")


def select(t, stage: str) -> None:
    t.page.evaluate("s => window.tracerPage.select(s)", stage)
    assert t.page.locator("#stage").get_attribute("data-stage") == stage


# --- diff ------------------------------------------------------------------------------------------------------------


def test_diff_page_puts_the_two_blocks_side_by_side_and_marks_the_first_divergence(tab, diff_page) -> None:
    verdict = json.loads(run_app("diff", PRE_REL, POST_REL, "--json").stdout)
    t = tab(diff_page)
    a, b = t.page.locator("#side-a"), t.page.locator("#side-b")
    assert a.is_visible() and b.is_visible()
    ba, bb = a.bounding_box(), b.bounding_box()
    assert bb["x"] >= ba["x"] + ba["width"] - 1 and bb["y"] < ba["y"] + ba["height"], ("not side by side", ba, bb)
    for side in (a, b):
        assert side.locator(".stage-box").count() >= 10
    marked = set(t.page.locator(".stage-box.first-divergence").evaluate_all("bs => bs.map(b => b.dataset.stage)"))
    assert marked == {verdict["first_diverging"]}, (marked, verdict["first_diverging"])
    assert words(verdict["summary"]) in words(t.page.locator("#verdict").inner_text())
    shot(t, "diff")


def test_following_the_divergence_opens_it_with_an_exact_absdiff_heatmap(tab, diff_page) -> None:
    import tracer

    first = json.loads(run_app("diff", PRE_REL, POST_REL, "--json").stdout)["first_diverging"]
    A, B = tracer.trace(PRE_REL)[first], tracer.trace(POST_REL)[first]
    t = tab(diff_page)
    t.page.locator("#follow-divergence").click()
    assert t.page.locator("#stage").get_attribute("data-stage") == first
    canvas = t.page.locator('#stage canvas.heatmap[data-kind="absdiff"]')
    assert canvas.is_visible()
    rows, cols = int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols"))
    assert (rows, cols) == A.shape[1:]
    for i in range(rows):
        for j in range(cols):
            index, value = hover_cell(t, canvas, i, j)
            expected = abs(float(A[tuple(index.values())]) - float(B[tuple(index.values())]))
            assert (index["t"], list(index.values())[-1]) == (i, j), index
            assert value == repr(expected), (index, value, expected)
    for side, array in (("a", A), ("b", B)):
        values = t.page.locator(f'#stage canvas.heatmap[data-kind="value"][data-side="{side}"]')
        assert values.is_visible(), f"side {side}'s values are not shown beside |A - B|"
        index, value = hover_cell(t, values, 1, 0)
        assert value == repr(float(array[tuple(index.values())])), (side, index, value)


# --- grad ------------------------------------------------------------------------------------------------------------


def test_grad_page_shows_each_stage_gradient_beside_its_value_exactly(tab, grad_page) -> None:
    stages = {s["name"]: s for s in json.loads(run_app("grad", STACK, "--json").stdout)["stages"]}
    t = tab(grad_page)
    for stage in ("blocks.0.norm1", "blocks.1.hidden"):
        select(t, stage)
        grad = t.page.locator('#stage canvas.heatmap[data-kind="grad"]')
        value = t.page.locator('#stage canvas.heatmap[data-kind="value"]')
        assert grad.is_visible() and value.is_visible()
        g, v = grad.bounding_box(), value.bounding_box()
        assert g["x"] >= v["x"] + v["width"] - 1 or g["y"] >= v["y"] + v["height"] - 1, ("grad drawn over the value", g, v)
        index, shown = hover_cell(t, grad, 2, 1)
        b, pos, c = index.values()
        assert shown == repr(float(stages[stage]["grad"][b][pos][c])), (stage, index, shown)
    shot(t, "grad")


def test_grad_page_has_the_per_layer_gradient_picture(tab, grad_page) -> None:
    r = run_app("grad", STACK, env=WIDE)
    t = tab(grad_page)
    picture = t.page.locator("#layer-grads")
    assert picture.is_visible()
    text = words(picture.inner_text())
    layer_rows = [row for row in table_cells(r.stdout) if len(row) == 4]  # layer (blank: the one above), weight, shape, |dL/dW|
    assert layer_rows, r.stdout[-2000:]
    for layer, weight, _, norm in layer_rows:
        assert (not layer or layer in text) and weight in text and norm in text, (layer, weight, norm, text[:800])


# --- lens ------------------------------------------------------------------------------------------------------------


def test_lens_page_has_the_lens_heatmap_with_exact_probabilities(tab, lens_page) -> None:
    lens = json.loads(run_app("lens", STACK, "--json").stdout)
    t = tab(lens_page)
    assert t.page.locator("#diagram .stage-box").count() > 10
    canvas = t.page.locator('#lens canvas.heatmap[data-kind="lens"]')
    assert canvas.is_visible()
    rows, cols = int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols"))
    assert (rows, cols) == (len(lens["layers"]), len(lens["positions"]))
    for i, layer in enumerate(lens["layers"]):
        for j, cell in enumerate(layer["cells"]):
            _, value = hover_cell(t, canvas, i, j)
            assert value == repr(cell["p_token"]), (layer["layer"], j, value, cell["p_token"])
    t.page.locator("#lens").evaluate("e => e.scrollIntoView({block: 'center'})")
    hover_cell(t, canvas, 2, 3)
    shot(t, "lens")


def test_attribute_page_has_the_components_and_the_heads_heatmap_exactly(tab, attribute_page) -> None:
    doc = json.loads(run_app("attribute", STACK, "--token", "cat", "--against", "on", "--json").stdout)
    t = tab(attribute_page)
    rows = t.page.locator("#attribution table.attribution tr[data-component]")
    assert rows.count() == len(doc["components"])
    for i, c in enumerate(doc["components"]):
        row = rows.nth(i)
        assert row.get_attribute("data-component") == c["name"]
        cell = row.locator("td.value")
        assert cell.get_attribute("title") == repr(c["value"]) == cell.get_attribute("data-value"), c["name"]
    heads = {(c["layer"], c["head"]): c["value"] for c in doc["components"] if c["head"] is not None}
    canvas = t.page.locator('#attribution canvas.heatmap[data-kind="attribution"]')
    assert canvas.is_visible()
    assert (int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols"))) == (2, 2)
    for (layer, h), value in heads.items():
        index, shown = hover_cell(t, canvas, layer, h)
        assert (index["layer"], index["h"]) == (layer, h) and shown == repr(value), (layer, h, shown, value)
        assert repr(value) in t.page.locator("#attribution .readout-local").inner_text()
    shot(t, "attribute")


def test_reading_the_lens_does_not_move_it_under_the_pointer(tab, lens_page) -> None:
    t = tab(lens_page)
    canvas = t.page.locator('#lens canvas.heatmap[data-kind="lens"]')
    canvas.scroll_into_view_if_needed()
    before = canvas.bounding_box()
    hover_cell(t, canvas, 1, 1)
    assert canvas.bounding_box() == before, ("hovering a cell moved the lens heatmap", before, canvas.bounding_box())
    t.page.mouse.move(1, 1)
    assert canvas.bounding_box() == before, ("leaving the heatmap moved it", before, canvas.bounding_box())


def test_a_wide_stage_does_not_push_the_page_sideways(tab, lens_page) -> None:
    t = tab(lens_page)
    for stage in ("blocks.0.hidden", "blocks.1.attn.weights", "logits"):
        select(t, stage)
        wide = t.page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert wide <= 0, (stage, f"the page is {wide} px wider than the window")


def test_the_sample_selector_shows_the_other_sample(tab, lens_page) -> None:
    import tracer

    x = tracer.trace(STACK)["blocks.0.residual1"]
    t = tab(lens_page)
    select(t, "blocks.0.residual1")
    t.page.locator("#sel-b").select_option("1")
    t.page.locator("#sel-t").select_option("2")
    rows = {row[0]: row for row in table_cells(run_app("run", STACK, "--batch", "1", "--pos", "2", env=WIDE).stdout)}
    assert rows["blocks.0.residual1"][2] in words(t.page.locator("#position-values").inner_text())
    canvas = t.page.locator('#stage canvas.heatmap[data-kind="value"]')
    index, value = hover_cell(t, canvas, 3, 5)
    assert (index["b"], index["t"], index["c"]) == (1, 3, 5), index
    assert value == repr(float(x[1, 3, 5]))


# --- violations and the budget ---------------------------------------------------------------------------------------


def test_a_violation_is_marked_on_its_box_with_the_terminals_explanation(tab, folder) -> None:
    page = build(folder, "violation.html", "page", VIOLATION, "-o", "{out}", codes=(1,))  # exit 1, as tracer run
    terminal = run_app("run", VIOLATION, env=WIDE)
    panel = panel_lines(terminal.stdout)
    assert terminal.returncode == 1 and panel, terminal.stdout
    t = tab(page)
    box = t.page.locator('#diagram .stage-box[data-stage="residual1"]')
    assert "violation" in (box.get_attribute("class") or "").split()
    assert box.get_attribute("data-violation") == "broadcast"
    assert t.page.locator("#diagram .stage-box.violation").count() == 1
    text = words(box.locator(".violation-text").text_content())
    for line in panel[1:]:  # the first names the kind and the stage, which the box says itself
        assert words(line) in text, (line, text)


GRID = """name: wide enough to summarise
dims: {B: 1, T: 32, C: 64, H: 4, F: 256}
seed: 0
block: {norm_order: pre, mask: causal}
input: {x: random}
"""


def test_a_summarised_stage_says_what_was_left_out(tab, folder) -> None:
    spec = write_spec(folder, GRID, "grid.yaml")
    page = build(folder, "summary.html", "page", str(spec), "-o", "{out}", "--page-budget", "0.25")
    assert page.stat().st_size <= 250_000, page.stat().st_size  # --page-budget counts decimal megabytes
    t = tab(page)
    summarised = t.page.locator('#diagram .stage-box[data-summary="true"]')
    assert summarised.count() >= 1, "nothing was summarised under a 0.25 MB budget"
    full = t.page.locator('#diagram .stage-box:not([data-summary="true"])')
    assert full.count() >= 1, "everything was summarised"
    stage = summarised.first.get_attribute("data-stage")
    summarised.first.click()
    panel = t.page.locator("#stage")
    assert panel.get_attribute("data-stage") == stage and panel.get_attribute("data-summary") == "true"
    left_out = panel.locator(".left-out")
    assert left_out.is_visible() and len(words(left_out.inner_text())) > 20, left_out.inner_text()
    assert words(t.page.locator("#position-values").inner_text()), "the chosen position's values are gone"
    budget = words(t.page.locator("#budget").inner_text())
    assert "0.25" in budget, budget
    full.first.click()
    assert t.page.locator("#stage").get_attribute("data-summary") != "true"
    assert t.page.locator("#stage .left-out:visible").count() == 0


@pytest.mark.slow  # seven pages written and opened: seconds
def test_every_violation_example_marks_the_box_the_terminal_names(tab, folder) -> None:
    for n, spec in enumerate(sorted((EXAMPLES / "violations").glob("*.yaml"))):
        rel = spec.relative_to(EXAMPLES.parent).as_posix()
        found = {(v["stage"], v["kind"]) for v in json.loads(run_app("run", rel, "--json").stdout)["violations"]}
        page = build(folder, f"v{n}.html", "page", rel, "-o", "{out}", codes=(1,))
        t = tab(page)
        marked = t.page.locator("#diagram .stage-box.violation").evaluate_all(
            "bs => bs.map(b => [b.dataset.stage, b.dataset.violation])")
        assert {tuple(m) for m in marked} == found, (rel, marked, found)
        t.close()
