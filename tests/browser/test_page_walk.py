"""The chapter's page (`tracer page specs/ch17-prenorm.yaml`) clicked through as a student would, in Chromium:
open a stage, read hovered cells against the trace, the keyboard, Table 17.1 against the terminal, the selectors,
the language switch, print.  One page built for the module; a fresh tab per test (tests/helpers/browser.py)."""

from __future__ import annotations

import re

import pytest
from conftest import PRE_REL, run_app
from helpers.browser import build, cell_colours, covered_by_fixed, hover_cell, readout, shot, table_cells, table_header, words

WIDE = {"COLUMNS": "250"}  # the terminal's table on one line a row


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    return build(tmp_path_factory.mktemp("page"), "ch17.html", "page", PRE_REL, "-o", "{out}")


@pytest.fixture(scope="module")
def trace():
    import tracer

    return tracer.trace(PRE_REL)


def header(*options: str) -> list[str]:
    """The header of the table `tracer run specs/ch17-prenorm.yaml OPTIONS` prints."""
    return table_header(run_app("run", PRE_REL, *options, env=WIDE).stdout)


def page_header(tab) -> list[str]:
    cells = tab.page.locator("table#table17 th").all_inner_texts()
    return [words(c) for c in cells if words(c)]


def terminal(*options: str) -> dict[str, list[str]]:
    """`tracer run specs/ch17-prenorm.yaml OPTIONS` as printed: each stage's row (stage, what it is, value, shape)."""
    r = run_app("run", PRE_REL, *options, env=WIDE)
    assert r.returncode == 0, r.stderr
    return {row[0]: row for row in table_cells(r.stdout)}


def diagram_stages(tab) -> list[str]:
    return tab.page.locator("#diagram .stage-box").evaluate_all("boxes => boxes.map(b => b.dataset.stage)")


def value_at(trace, stage: str, index: dict[str, int]) -> float:
    return float(trace[stage][tuple(index.values())])


def test_the_diagram_has_a_box_per_stage_of_the_table_with_its_shape(tab, page_file) -> None:
    t = tab(page_file)
    rows = terminal()
    boxes = diagram_stages(t)
    assert set(rows) <= set(boxes), (sorted(rows), boxes)
    assert [b for b in boxes if b in rows] == list(rows), "the diagram's order is not the table's"
    for stage, (_, _, _, shape) in rows.items():
        box = t.page.locator(f'#diagram .stage-box[data-stage="{stage}"] .shape')
        assert words(box.inner_text()) == shape, (stage, box.inner_text(), shape)


def test_clicking_a_box_opens_its_stage_with_formula_and_meaning(tab, page_file) -> None:
    t = tab(page_file)
    rows = terminal()
    for stage in ("norm1", "hidden"):
        t.page.locator(f'#diagram .stage-box[data-stage="{stage}"]').click()
        assert t.page.locator("#stage").get_attribute("data-stage") == stage
        assert t.page.locator("#stage .formula").inner_text().strip(), f"{stage}: no formula"
        meaning = t.page.locator("#stage .meaning")
        assert meaning.is_visible()
        assert rows[stage][1] in words(meaning.inner_text()), (stage, meaning.inner_text(), rows[stage][1])
    t.page.locator("#stage").evaluate("e => e.scrollIntoView({block: 'start'})")
    hover_cell(t, t.page.locator('#stage canvas.heatmap[data-kind="value"]'), 1, 1)
    shot(t, "stage")


def test_hovering_a_cell_reads_the_traced_value_exactly(tab, page_file, trace) -> None:
    t = tab(page_file)
    for stage in ("norm1", "hidden", "output"):
        t.page.evaluate("s => window.tracerPage.select(s)", stage)
        canvas = t.page.locator('#stage canvas.heatmap[data-kind="value"]')
        assert canvas.get_attribute("data-row-axis") == "t"
        assert canvas.get_attribute("data-col-axis") == ("f" if stage == "hidden" else "c")
        rows, cols = int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols"))
        assert (rows, cols) == trace[stage].shape[1:], (stage, rows, cols)
        for i in range(rows):
            for j in range(cols):
                index, value = hover_cell(t, canvas, i, j)
                assert list(index) == ["b", "t", canvas.get_attribute("data-col-axis")], index
                assert (index["t"], index[canvas.get_attribute("data-col-axis")]) == (i, j), (stage, i, j, index)
                expected = value_at(trace, stage, index)
                assert float(value) == expected and value == repr(expected), (stage, index, value, repr(expected))
                shown = t.page.locator("#readout").inner_text()
                assert value in shown, ("the readout does not show the exact value", shown, value)


def test_the_heatmap_has_its_axis_letters(tab, page_file) -> None:
    t = tab(page_file)
    t.page.evaluate("s => window.tracerPage.select(s)", "hidden")
    canvas = t.page.locator('#stage canvas.heatmap[data-kind="value"]')
    letters = {canvas.get_attribute("data-row-axis"), canvas.get_attribute("data-col-axis")}
    labels = t.page.locator("#stage .axis-label").all_inner_texts()
    shown = {w.lower() for label in labels for w in re.findall(r"[A-Za-z]+", label)}
    assert letters == {"t", "f"} and letters <= shown, (letters, labels)


def luminance(colour: str) -> float:
    """The relative luminance (WCAG) of an "r,g,b" colour: what a reader without colour vision still sees."""
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(float(x)) for x in colour.split(","))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.parametrize("stage, signed", [("hidden", False), ("output", False), ("norm1", True), ("attention", True)])
def test_the_colours_order_the_values_by_lightness_alone(tab, page_file, trace, stage, signed) -> None:
    """Colour-blind readers: a one-signed stage is drawn darker to lighter as it grows (cividis), a signed one from
    light at 0 to dark as |value| grows on each side (blue below 0, orange above: a pair colour-blind readers tell
    apart), so lightness orders the cells of each sign."""
    t = tab(page_file)
    t.page.evaluate("s => window.tracerPage.select(s)", stage)
    canvas = t.page.locator('#stage canvas.heatmap[data-kind="value"]')
    values = trace[stage][0]
    assert (values.min() < 0) == signed
    colours = cell_colours(canvas, *values.shape)
    cells = [(float(values[i, j]), luminance(colours[i][j])) for i in range(values.shape[0]) for j in range(values.shape[1])]
    for v, light in cells:
        for w, other in cells:
            if signed and v * w > 0 and abs(v) < abs(w) - 1e-9 or not signed and v < w - 1e-9:
                assert (light >= other - 0.01) if signed else (light <= other + 0.01), (stage, v, light, w, other)


def test_a_head_stage_has_a_head_selector(tab, page_file, trace) -> None:
    t = tab(page_file)
    t.page.evaluate("s => window.tracerPage.select(s)", "attn.weights")
    t.page.locator("#sel-h").select_option("1")
    canvas = t.page.locator('#stage canvas.heatmap[data-kind="value"]')
    index, value = hover_cell(t, canvas, 2, 1)
    assert (index["h"], index["t"]) == (1, 2), index
    assert value == repr(value_at(trace, "attn.weights", index))


def test_arrow_keys_in_a_focused_heatmap_move_the_readout(tab, page_file, trace) -> None:
    t = tab(page_file)
    t.page.evaluate("s => window.tracerPage.select(s)", "hidden")
    canvas = t.page.locator('#stage canvas.heatmap[data-kind="value"]')
    canvas.focus()
    t.page.keyboard.press("ArrowRight")
    first, _ = readout(t)
    moves = [("ArrowRight", "f", 1), ("ArrowDown", "t", 1), ("ArrowLeft", "f", -1), ("ArrowUp", "t", -1)]
    for key, axis, step in moves:
        before, _ = readout(t)
        t.page.keyboard.press(key)
        after, value = readout(t)
        expected = dict(before)
        limit = 3  # hidden is [1,3,3]: a move from the edge stays put
        expected[axis] = min(max(before[axis] + step, 0), limit - 1)
        assert after == expected, (key, before, after)
        assert value == repr(value_at(trace, "hidden", after))
    assert t.page.locator("#stage").get_attribute("data-stage") == "hidden", "keys inside a heatmap changed the stage"
    assert first["b"] == 0


def test_arrow_down_on_the_page_moves_to_the_next_stage(tab, page_file) -> None:
    t = tab(page_file)
    order = diagram_stages(t)
    t.page.evaluate("s => window.tracerPage.select(s)", order[0])
    t.page.evaluate("() => document.activeElement && document.activeElement.blur()")
    for nxt in order[1:4]:
        t.page.keyboard.press("ArrowDown")
        assert t.page.locator("#stage").get_attribute("data-stage") == nxt
    t.page.keyboard.press("ArrowUp")
    assert t.page.locator("#stage").get_attribute("data-stage") == order[2]


def test_tab_reaches_the_stage_heatmap_and_focus_is_visible(tab, page_file) -> None:
    t = tab(page_file)
    t.page.evaluate("s => window.tracerPage.select(s)", "norm1")
    t.page.evaluate("() => document.activeElement && document.activeElement.blur()")
    for _ in range(80):
        t.page.keyboard.press("Tab")
        if t.page.evaluate("() => document.activeElement.matches('#stage canvas.heatmap')"):
            break
    else:
        pytest.fail("Tab never reached the stage's heatmap")
    outline = t.page.evaluate("() => { const s = getComputedStyle(document.activeElement); "
                              "return [s.outlineStyle, parseFloat(s.outlineWidth)]; }")
    assert outline[0] != "none" and outline[1] >= 2, ("focus is not visible", outline)


def test_table_17_1_equals_the_terminal_number_for_number(tab, page_file) -> None:
    t = tab(page_file)
    t.page.locator("#show-table").click()
    table = t.page.locator("table#table17")
    assert table.is_visible()
    table.evaluate("e => e.scrollIntoView({block: 'center'})")
    shot(t, "table")

    def shown() -> dict[str, tuple[str, str, str]]:
        rows = table.locator("tr[data-stage]")
        return {rows.nth(i).get_attribute("data-stage"): tuple(words(rows.nth(i).locator(f".{c}").inner_text())
                                                                 for c in ("stage", "value", "shape"))
                for i in range(rows.count())}

    for pos in (0, 2):
        if pos:
            t.page.locator("#sel-t").select_option(str(pos))
        expected = {stage: (stage, value, shape) for stage, (_, _, value, shape) in terminal("--pos", str(pos)).items()}
        got = shown()
        assert list(got) == list(expected), (list(got), list(expected))
        assert got == expected
        assert page_header(t) == header("--pos", str(pos)), (page_header(t), header("--pos", str(pos)))


def test_the_selectors_show_the_trace_at_the_chosen_position(tab, page_file, trace) -> None:
    t = tab(page_file)
    t.page.evaluate("s => window.tracerPage.select(s)", "output")
    assert t.page.locator("#sel-b").is_visible() and t.page.locator("#sel-t").is_visible()
    for pos in (1, 2, 0):
        t.page.locator("#sel-t").select_option(str(pos))
        value = terminal("--pos", str(pos))["output"][2]
        shown = words(t.page.locator("#position-values").inner_text())
        assert value in shown, (pos, shown, value)
        numbers = [float(x) for x in value.strip("[]").split(",")]
        assert numbers == [round(float(v), 6) for v in trace["output"][0, pos]], (numbers, trace["output"][0, pos])


def test_the_language_switch_changes_every_meaning_and_back(tab, page_file) -> None:
    t = tab(page_file)
    english, chinese = terminal(), terminal("--lang", "zh")
    assert t.page.evaluate("() => document.documentElement.lang") == "en"
    t.page.evaluate("s => window.tracerPage.select(s)", "norm2")
    t.page.locator("#lang-zh").click()
    assert t.page.evaluate("() => document.documentElement.lang") == "zh-CN"
    meaning = words(t.page.locator("#stage .meaning").inner_text())
    assert chinese["norm2"][1] in meaning and english["norm2"][1] not in meaning, meaning
    t.page.locator("#show-table").click()
    for stage, row in chinese.items():
        cell = words(t.page.locator(f'table#table17 tr[data-stage="{stage}"]').inner_text())
        assert row[1] in cell, (stage, cell, row[1])
    assert page_header(t) == header("--lang", "zh"), (page_header(t), header("--lang", "zh"))
    shot(t, "zh")
    t.page.locator("#lang-en").click()
    assert t.page.evaluate("() => document.documentElement.lang") == "en"
    assert english["norm2"][1] in words(t.page.locator("#stage .meaning").inner_text())


def test_lang_zh_sets_the_first_language(tab, tmp_path) -> None:
    page = build(tmp_path, "zh.html", "page", PRE_REL, "-o", "{out}", "--lang", "zh")
    t = tab(page)
    assert t.page.evaluate("() => document.documentElement.lang") == "zh-CN"
    t.page.evaluate("s => window.tracerPage.select(s)", "norm1")
    assert terminal("--lang", "zh")["norm1"][1] in words(t.page.locator("#stage .meaning").inner_text())


def test_nothing_fixed_covers_the_end_of_the_page(tab, page_file) -> None:
    t = tab(page_file)
    t.page.locator("#show-table").click()
    t.page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
    covered = covered_by_fixed(t)
    assert covered == [], covered


def test_the_page_fits_the_window_without_scrolling_sideways(tab, page_file) -> None:
    t = tab(page_file)
    t.page.locator("#show-table").click()
    for stage in diagram_stages(t):
        t.page.evaluate("s => window.tracerPage.select(s)", stage)
        wide = t.page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert wide <= 0, (stage, f"the page is {wide} px wider than the window")


def test_the_printed_page_shows_the_diagram_the_stage_and_table_17_1(tab, page_file) -> None:
    t = tab(page_file, media="print")
    t.page.evaluate("s => window.tracerPage.select(s)", "norm1")
    for selector in ("#diagram", "#stage", "table#table17"):
        assert t.page.locator(selector).is_visible(), f"{selector} is hidden in print"
    shot(t, None, full_page=True)  # checked, not one of the docs' pictures
    pdf = t.page.pdf()
    assert pdf[:5] == b"%PDF-" and len(pdf) > 5000
