"""Opening an attention head on a page, in Chromium: its heatmap with key and query labels aligned with the cells,
the causal mask drawn distinctly, a hovered query highlighting exactly the keys it attends to, and the readout
naming the query t and the key s.  The chapter's block (position numbers) and the 2-layer stack (token text)."""

from __future__ import annotations

import pytest
from conftest import PRE_REL
from helpers.browser import build, cell_centre, cell_colours, hover_cell, shot, words

STACK = "specs/stack-2-layers.yaml"  # vocab words: token labels; 2 layers of 2 heads
NEAR = 40  # px: a label this close to its row or column of cells reads as its label


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("attention")
    return {PRE_REL: build(folder, "ch17.html", "page", PRE_REL, "-o", "{out}"),
            STACK: build(folder, "stack.html", "page", STACK, "-o", "{out}")}


@pytest.fixture(scope="module")
def traces():
    import tracer

    return {PRE_REL: tracer.trace(PRE_REL), STACK: tracer.trace(STACK)}


def open_head(t, layer: int, head: int):
    button = t.page.locator(f'#heads button.head[data-layer="{layer}"][data-head="{head}"]')
    assert button.count() == 1, f"no head button for layer {layer}, head {head}"
    stage = button.get_attribute("data-stage")
    button.click()
    canvas = t.page.locator('canvas.heatmap[data-kind="attention"]')
    assert canvas.is_visible()
    return canvas, stage


def weights_stage(spec: str, layer: int, stage: str | None) -> str:
    if stage and stage.endswith("attn.weights"):
        return stage
    return "attn.weights" if spec == PRE_REL else f"blocks.{layer}.attn.weights"


def test_a_button_per_head_of_every_layer(tab, pages, traces) -> None:
    for spec, expect in ((PRE_REL, {(0, 0), (0, 1)}), (STACK, {(0, 0), (0, 1), (1, 0), (1, 1)})):
        t = tab(pages[spec])
        heads = t.page.locator("#heads button.head").evaluate_all(
            "bs => bs.map(b => [Number(b.dataset.layer), Number(b.dataset.head)])")
        assert {tuple(h) for h in heads} == expect, (spec, heads)


@pytest.mark.parametrize("spec", [PRE_REL, STACK])
def test_key_and_query_labels_line_up_with_the_cells(tab, pages, traces, spec) -> None:
    t = tab(pages[spec])
    canvas, _ = open_head(t, 0, 1)
    rows, cols = int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols"))
    T = traces[spec]["x"].shape[-2]
    assert (rows, cols) == (T, T)
    assert (canvas.get_attribute("data-row-axis"), canvas.get_attribute("data-col-axis")) == ("t", "s")
    box = canvas.bounding_box()
    keys, queries = t.page.locator(".key-label[data-s]"), t.page.locator(".query-label[data-t]")
    assert keys.count() == T and queries.count() == T, (keys.count(), queries.count())
    tokens = None
    if spec == STACK:
        tokens = ["<s>", "the", "cat", "sat"]  # the spec's input, sample b=0
    for i in range(T):
        key = t.page.locator(f'.key-label[data-s="{i}"]')
        query = t.page.locator(f'.query-label[data-t="{i}"]')
        kb, qb = key.bounding_box(), query.bounding_box()
        x, y = cell_centre(box, rows, cols, i, i)
        width, height = box["width"] / cols, box["height"] / rows
        assert abs(kb["x"] + kb["width"] / 2 - x) <= width / 2, ("key label off its column", i, kb, box)
        assert kb["y"] + kb["height"] <= box["y"] + 1, ("key labels go along the top", i, kb, box)
        assert abs(qb["y"] + qb["height"] / 2 - y) <= height / 2, ("query label off its row", i, qb, box)
        assert qb["x"] + qb["width"] <= box["x"] + 1, ("query labels go along the left", i, qb, box)
        assert box["y"] - (kb["y"] + kb["height"]) <= NEAR, ("key label far above the cells", i, kb, box)
        assert box["x"] - (qb["x"] + qb["width"]) <= NEAR, ("query label far left of the cells", i, qb, box)
        for label in (key, query):
            clipped = label.evaluate("e => e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1")
            assert not clipped, ("a label is cut off", i, label.inner_text())
        for label in (key, query):
            text = words(label.inner_text())
            assert (tokens[i] in text) if tokens else (str(i) in text), (i, text)


def test_masked_cells_are_drawn_apart_with_a_legend(tab, pages, traces) -> None:
    t = tab(pages[STACK])
    canvas, _ = open_head(t, 1, 0)
    T = int(canvas.get_attribute("data-rows"))
    colours = cell_colours(canvas, T, T)
    masked = {colours[i][j] for i in range(T) for j in range(T) if j > i}
    visible = {colours[i][j] for i in range(T) for j in range(T) if j <= i}
    assert len(masked) == 1, ("the masked cells are not drawn alike", colours)
    assert not masked & visible, ("a masked cell looks like a visible one", colours)
    legend = t.page.locator(".masked-legend")
    assert legend.is_visible() and "∞" in legend.inner_text(), legend.inner_text() if legend.count() else "no .masked-legend"


@pytest.mark.parametrize("spec", [PRE_REL, STACK])
def test_hovering_a_query_highlights_exactly_the_keys_it_attends_to(tab, pages, traces, spec) -> None:
    t = tab(pages[spec])
    layer, head = (0, 1) if spec == PRE_REL else (1, 1)
    canvas, stage = open_head(t, layer, head)
    weights = traces[spec][weights_stage(spec, layer, stage)][0, head]
    T = weights.shape[0]
    for q in range(T):
        expected = {s for s in range(T) if weights[q, s] > 0}
        t.page.locator(f'.query-label[data-t="{q}"]').hover(timeout=5000)
        lit = set(t.page.locator(".key-label.highlight").evaluate_all("ls => ls.map(l => Number(l.dataset.s))"))
        assert lit == expected, ("hovering query label", q, lit, expected)
        t.page.mouse.move(0, 0)
        hover_cell(t, canvas, q, 0)
        lit = set(t.page.locator(".key-label.highlight").evaluate_all("ls => ls.map(l => Number(l.dataset.s))"))
        assert lit == expected, ("hovering a cell of query row", q, lit, expected)
    if spec == PRE_REL:  # the picture docs/page.md shows: the last query's row lit
        t.page.locator("#attention").evaluate("e => e.scrollIntoView({block: 'center'})")
        hover_cell(t, canvas, T - 1, 1)
        shot(t, "attention")


@pytest.mark.parametrize("spec", [PRE_REL, STACK])
def test_reading_a_head_does_not_move_it_under_the_pointer(tab, pages, spec) -> None:
    t = tab(pages[spec])
    canvas, _ = open_head(t, 0, 1)
    canvas.scroll_into_view_if_needed()
    query = t.page.locator('.query-label[data-t="1"]')
    before, label = canvas.bounding_box(), query.bounding_box()
    t.page.mouse.move(label["x"] + label["width"] / 2, label["y"] + label["height"] / 2)
    assert canvas.bounding_box() == before, ("hovering a query label moved the heatmap", before, canvas.bounding_box())
    x, y = cell_centre(before, int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols")), 1, 1)
    t.page.mouse.move(x, y)
    assert canvas.bounding_box() == before, ("hovering a cell moved the heatmap", before, canvas.bounding_box())
    t.page.mouse.move(1, 1)
    assert canvas.bounding_box() == before, ("leaving the heatmap moved it", before, canvas.bounding_box())


@pytest.mark.parametrize("spec", [PRE_REL, STACK])
def test_the_attention_readout_names_query_t_and_key_s_with_the_exact_weight(tab, pages, traces, spec) -> None:
    t = tab(pages[spec])
    layer, head = 0, 1
    canvas, stage = open_head(t, layer, head)
    weights = traces[spec][weights_stage(spec, layer, stage)]
    T = weights.shape[-1]
    for q in range(T):
        for s in range(T):
            index, value = hover_cell(t, canvas, q, s)
            assert (index.get("t"), index.get("s")) == (q, s), index
            assert index.get("b") == 0 and index.get("h") == head, index
            expected = float(weights[0, head, q, s])
            assert value == repr(expected), (index, value, expected)
