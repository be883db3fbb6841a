"""The GPT-2-sized block's page (specs/gpt2-block.yaml) opens in Chromium: built within its budget, ready, a stage
opened and a cell read.  How long it took is recorded (the test's `page_seconds` property), not asserted: the
timings are benchmarks/page.py's."""

from __future__ import annotations

import time

import pytest
from helpers.browser import build, hover_cell

GPT2 = "specs/gpt2-block.yaml"


@pytest.mark.slow  # traces a 768-wide block over 1024 positions (seconds), writes a page of megabytes and opens it
def test_the_gpt2_sized_page_opens_within_its_budget(tab, tmp_path, record_property) -> None:
    start = time.perf_counter()
    page = build(tmp_path, "gpt2.html", "page", GPT2, "-o", "{out}")
    built = time.perf_counter() - start
    size = page.stat().st_size
    assert size <= 20_000_000, f"{size} bytes: over the default budget of 20 MB"
    start = time.perf_counter()
    t = tab(page, ready=False)
    t.wait_ready(timeout_ms=60_000)
    opened = time.perf_counter() - start
    record_property("page_seconds", {"build": round(built, 2), "open": round(opened, 2), "bytes": size})
    print(f"gpt2 page: {size / 1e6:.1f} MB, built in {built:.1f} s, ready in {opened:.2f} s")
    stages = t.page.locator("#diagram .stage-box").evaluate_all("bs => bs.map(b => b.dataset.stage)")
    assert "output" in stages and "norm1" in stages
    t.page.evaluate("s => window.tracerPage.select(s)", "output")
    canvas = t.page.locator('#stage canvas.heatmap').first
    assert canvas.is_visible()
    index, value = hover_cell(t, canvas, 5, 7)
    import tracer

    output = tracer.trace(GPT2, record="main")["output"]
    assert value == repr(float(output[tuple(index.values())])), (index, value)
