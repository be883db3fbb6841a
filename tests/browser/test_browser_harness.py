"""The harness the page tests stand on (tests/helpers/browser.py) catches what it claims to: a request outside the
page file, a console error, an uncaught exception; its PNG decoder reads the colours Chromium drew; a blank
screenshot is called blank."""

from __future__ import annotations

import pytest
from helpers.browser import Tabs, assert_not_blank, covered_by_fixed, png_pixels, png_stats

SQUARES = """<!doctype html><html><head><meta charset="utf-8"><style>
body { margin: 0; background: #fff; } div { position: absolute; width: 100px; height: 100px; }
</style></head><body>
<div style="left: 0; top: 0; background: rgb(255, 0, 0)"></div>
<div style="left: 100px; top: 0; background: rgb(0, 128, 255)"></div>
<div style="left: 0; top: 100px; background: rgb(10, 200, 30)"></div>
<div style="left: 100px; top: 100px; background: linear-gradient(90deg, #000, #fff)"></div>
<script>window.tracerPage = {ready: true};</script></body></html>"""


def pixel(rows: list[bytes], width: int, x: int, y: int) -> tuple[int, ...]:
    bpp = len(rows[0]) // width
    return tuple(rows[y][x * bpp:x * bpp + 3])


def test_the_png_decoder_reads_the_colours_drawn(tab, tmp_path) -> None:
    page = tmp_path / "squares.html"
    page.write_text(SQUARES, encoding="utf-8")
    t = tab(page, viewport={"width": 300, "height": 240})
    data = t.page.screenshot()
    width, height, rows = png_pixels(data)
    assert (width, height) == (300, 240)
    assert pixel(rows, width, 50, 50) == (255, 0, 0)
    assert pixel(rows, width, 150, 50) == (0, 128, 255)
    assert pixel(rows, width, 50, 150) == (10, 200, 30)
    assert pixel(rows, width, 250, 200) == (255, 255, 255)
    ramp = [pixel(rows, width, x, 150)[0] for x in range(100, 200)]
    assert ramp == sorted(ramp) and ramp[0] < 8 and ramp[-1] > 247, ramp  # a gradient: every filter row type in use
    colours, drawn = assert_not_blank(data)
    assert colours > 50 and abs(drawn - (4 * 100 * 100) / (300 * 240)) < 0.01


def test_a_blank_page_is_called_blank(tab, tmp_path) -> None:
    page = tmp_path / "blank.html"
    page.write_text("<!doctype html><html><body><script>window.tracerPage = {ready: true};</script></body></html>", encoding="utf-8")
    data = tab(page).page.screenshot()
    assert png_stats(data) == (1, 0.0)
    with pytest.raises(AssertionError, match="blank"):
        assert_not_blank(data)


def test_requests_console_errors_and_exceptions_are_caught(browser, tmp_path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<!doctype html><html><body><img src='https://cdn.example.org/x.png'>"
                    "<link rel='stylesheet' href='style.css'>"
                    "<script>console.error('boom'); window.tracerPage = {ready: true}; setTimeout(() => undefined.x, 0);</script>"
                    "</body></html>", encoding="utf-8")
    tabs = Tabs(browser)
    t = tabs(page)
    t.page.wait_for_timeout(200)
    problems = tabs.close()
    text = "\n".join(problems)
    assert "https://cdn.example.org/x.png" in text and (tmp_path / "style.css").as_uri() in text, text
    assert "console error: boom" in text and "page error" in text, text


def test_a_clean_page_has_no_problems(browser, tmp_path) -> None:
    page = tmp_path / "clean.html"
    page.write_text(SQUARES, encoding="utf-8")
    tabs = Tabs(browser)
    tabs(page)
    assert tabs.close() == []


FIXED_BAR = """<!doctype html><html><head><meta charset="utf-8"><style>
#bar {{ position: fixed; bottom: 0; left: 0; right: 0; height: 60px; background: #eee; }}
body {{ margin: 0; padding-bottom: {padding}px; }} p {{ height: 40px; margin: 0; }}
</style></head><body>{paragraphs}<div id="bar">readout</div>
<script>window.tracerPage = {{ready: true}};</script></body></html>"""


@pytest.mark.parametrize("padding, covers", [(0, True), (70, False)])
def test_a_fixed_bar_over_the_end_of_the_page_is_found(tab, tmp_path, padding, covers) -> None:
    page = tmp_path / "bar.html"
    page.write_text(FIXED_BAR.format(padding=padding, paragraphs="".join(f"<p>line {i}</p>" for i in range(40))), encoding="utf-8")
    t = tab(page)
    t.page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
    found = covered_by_fixed(t)
    assert bool(found) == covers, found
    if covers:
        assert any("line 39" in f for f in found), found
