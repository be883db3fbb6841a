"""The browser the page tests drive: Playwright's Python package with Debian's Chromium, headless.

- `launch()` starts one browser (the session fixture `browser` in tests/conftest.py), or skips with the reason.
- `Tabs` opens a page file from file:// in a fresh context, routes every request (anything that is not the page
  file itself is refused and recorded) and collects console errors and page errors; `Tabs.close()` fails the test
  on any of them.
- `build()` writes a page with `tracer ...` in process (run_app) into a folder and returns its path.
- `png_stats()` decodes a PNG screenshot (zlib and struct, no imaging library) and `assert_not_blank()` requires
  some drawing in it; `shot()` takes a screenshot, checks it and, when TRACER_SCREENSHOTS=DIR is set, saves it
  there as page-NAME.png (docs/screenshots.sh makes docs/images/ this way).
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("TRACER_CHROMIUM", "/usr/bin/chromium")  # Debian's package
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1200, "height": 800}  # the screenshots' size (docs/images/page-*.png)
INSTALL = "install the browser extra and Debian's chromium (pip install -e '.[browser]'; apt-get install chromium)"
READY = "() => window.tracerPage !== undefined && window.tracerPage.ready === true"


def launch() -> Iterator[Any]:
    """One headless Chromium for the session; skips every browser test, with the reason, when there is none."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        pytest.skip(f"playwright is not installed: {INSTALL}")
    path = Path(CHROMIUM)
    if not path.is_file() and shutil.which(CHROMIUM) is None:
        pytest.skip(f"no Chromium at {CHROMIUM}: {INSTALL}")
    manager = sync_playwright().start()
    try:
        try:
            browser = manager.chromium.launch(executable_path=str(path), headless=True, args=ARGS)
        except Error as e:  # a broken install: say so once, as a skip with its first line
            pytest.skip(f"Chromium at {CHROMIUM} does not start ({str(e).splitlines()[0]}): {INSTALL}")
        yield browser
        browser.close()
    finally:
        manager.stop()


class Tab:
    """One page file opened in a fresh browser context, with what it asked the network for and what it logged."""

    def __init__(self, browser: Any, path: Path, *, viewport: dict[str, int] | None = None, media: str | None = None,
                 ready: bool = True) -> None:
        self.path = Path(path).resolve()
        self.url = self.path.as_uri()
        self.closed = False
        self.context = browser.new_context(viewport=viewport or VIEWPORT, service_workers="block")
        self.requests: list[str] = []  # every request but the page's own file (each one refused)
        self.errors: list[str] = []  # console errors and uncaught exceptions
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        if media:
            self.page.emulate_media(media=media)
        self.page.goto(self.url)
        if ready:
            self.wait_ready()

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url == self.url:
            route.continue_()
        else:
            self.requests.append(url)
            route.abort()

    def _console(self, message: Any) -> None:
        if message.type in ("error", "assert"):
            self.errors.append(f"console {message.type}: {message.text}")

    def wait_ready(self, timeout_ms: float = 30_000) -> None:
        self.page.wait_for_function(READY, timeout=timeout_ms)

    def problems(self) -> list[str]:
        return [f"request outside the page: {u}" for u in self.requests] + self.errors

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.context.close()


class Tabs:
    """The `tab` fixture: `tab(path)` opens a page; at the end of the test every page is closed, and any request
    outside the page file, console error or page error fails the test."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser
        self.opened: list[Tab] = []

    def __call__(self, path: Path, **options: Any) -> Tab:
        tab = Tab(self.browser, path, **options)
        self.opened.append(tab)
        return tab

    def close(self) -> list[str]:
        problems: list[str] = []
        for tab in self.opened:
            problems += [f"{tab.path.name}: {p}" for p in tab.problems()]
            tab.close()
        self.opened.clear()
        return problems


def build(folder: Path, name: str, *args: str, codes: tuple[int, ...] = (0,)) -> Path:
    """`tracer ARGS` run in process from the repository root, with every "{out}" in ARGS replaced by
    folder/name; its exit code must be one of codes and the page must have been written."""
    from conftest import run_app

    out = folder / name
    argv = [a.replace("{out}", str(out)) for a in args]
    r = run_app(*argv)
    assert r.returncode in codes, (argv, r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert out.is_file(), (argv, r.stderr[-2000:])
    return out


# --- screenshots ---------------------------------------------------------------------------------------------------


def _unfilter(kind: int, line: bytes, up: bytes, bpp: int) -> bytes:
    """One row under PNG's Average (3) or Paeth (4) filter, undone."""
    out = bytearray(line)
    if kind == 3:
        for i in range(len(out)):
            out[i] = (out[i] + (((out[i - bpp] if i >= bpp else 0) + up[i]) >> 1)) & 0xFF
        return bytes(out)
    for i in range(bpp):  # no left neighbour: the predictor is the byte above
        out[i] = (out[i] + up[i]) & 0xFF
    for i in range(bpp, len(out)):
        a, b, c = out[i - bpp], up[i], up[i - bpp]
        pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - c - c)
        out[i] = (out[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
    return bytes(out)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the rows of an 8-bit RGB or RGBA PNG (as Chromium writes them), each row one
    bytes object of width * channels bytes."""
    import numpy as np

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, bytearray(), b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, ("unexpected PNG format", depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(bytes(idat))
    stride = width * bpp
    rows: list[bytes] = []
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1)
        if kind == 0:
            cur = line.copy()
        elif kind == 1:  # Sub: a running sum along each channel
            cur = (np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint64) % 256).astype(np.uint8).reshape(stride)
        elif kind == 2:  # Up
            cur = line + prev
        else:  # Average, Paeth: byte by byte (the left neighbour is this row's own result)
            cur = np.frombuffer(_unfilter(kind, line.tobytes(), prev.tobytes(), bpp), dtype=np.uint8)
        rows.append(cur.tobytes())
        prev = cur
    return width, height, rows


def png_stats(data: bytes) -> tuple[int, float]:
    """The number of distinct colours in a PNG and the share of its pixels that differ from the most common one
    (the background)."""
    import numpy as np

    width, height, rows = png_pixels(data)
    pixels = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(height * width, -1)[:, :3].astype(np.uint32)
    _, counts = np.unique(pixels[:, 0] << 16 | pixels[:, 1] << 8 | pixels[:, 2], return_counts=True)
    return len(counts), 1 - int(counts.max()) / (width * height)


def assert_not_blank(data: bytes, *, colours: int = 8, drawn: float = 0.01) -> tuple[int, float]:
    """A screenshot with at least `colours` distinct colours and at least `drawn` of its pixels off the background."""
    found, share = png_stats(data)
    assert found >= colours and share >= drawn, f"a blank-looking screenshot: {found} colours, {share:.2%} of pixels drawn"
    return found, share


def shot(tab: Tab, name: str | None, *, full_page: bool = False, colours: int = 8, drawn: float = 0.01) -> bytes:
    """A screenshot of the tab, checked not blank; saved as page-NAME.png in $TRACER_SCREENSHOTS when that is set
    and the view has a name (the views docs/page.md shows)."""
    data: bytes = tab.page.screenshot(full_page=full_page)
    assert_not_blank(data, colours=colours, drawn=drawn)
    folder = os.environ.get("TRACER_SCREENSHOTS")
    if folder and name:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"page-{name}.png").write_bytes(data)
    return data


# --- reading the page -----------------------------------------------------------------------------------------------


def parse_index(text: str) -> dict[str, int]:
    """A readout's data-index, "b=0,t=1,c=2", as {axis letter: index} in order."""
    out: dict[str, int] = {}
    for part in text.split(","):
        axis, _, value = part.strip().partition("=")
        out[axis.strip()] = int(value)
    return out


def readout(tab: Tab) -> tuple[dict[str, int], str]:
    """The readout's index and exact value (its data-index and data-value)."""
    box = tab.page.locator("#readout")
    index = box.get_attribute("data-index")
    value = box.get_attribute("data-value")
    assert index and value is not None, ("the readout has no data-index/data-value", index, value)
    return parse_index(index), value


def cell_centre(box: dict[str, float], rows: int, cols: int, i: int, j: int) -> tuple[float, float]:
    """The centre of cell (row i, column j) of a heatmap drawn over the bounding box."""
    return box["x"] + (j + 0.5) * box["width"] / cols, box["y"] + (i + 0.5) * box["height"] / rows


def hover_cell(tab: Tab, canvas: Any, i: int, j: int) -> tuple[dict[str, int], str]:
    """Move the mouse over cell (i, j) of a heatmap canvas; the readout it gives."""
    canvas.scroll_into_view_if_needed()
    rows, cols = int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols"))
    box = canvas.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0, "the heatmap is not drawn"
    x, y = cell_centre(box, rows, cols, i, j)
    width, height = tab.page.evaluate("() => [window.innerWidth, window.innerHeight]")
    if not (0 <= x < width and 0 <= y < height):  # a heatmap bigger than the window: bring the cell into it
        tab.page.evaluate("([dx, dy]) => window.scrollBy(dx, dy)", [x - width / 2 if not 0 <= x < width else 0,
                                                                    y - height / 2 if not 0 <= y < height else 0])
        box = canvas.bounding_box()
        x, y = cell_centre(box, rows, cols, i, j)
    tab.page.mouse.move(x, y)
    return readout(tab)


def cell_colours(canvas: Any, rows: int, cols: int) -> list[list[str]]:
    """The most common colour inside each cell of a canvas (its middle half, away from borders)."""
    return canvas.evaluate("""(c, [rows, cols]) => {
        const ctx = c.getContext('2d');
        const out = [];
        for (let i = 0; i < rows; i++) {
            const row = [];
            for (let j = 0; j < cols; j++) {
                const w = c.width / cols, h = c.height / rows;
                const x0 = Math.floor(j * w + w / 4), y0 = Math.floor(i * h + h / 4);
                const data = ctx.getImageData(x0, y0, Math.max(1, Math.floor(w / 2)), Math.max(1, Math.floor(h / 2))).data;
                const count = {};
                for (let k = 0; k < data.length; k += 4) {
                    const key = data[k] + ',' + data[k + 1] + ',' + data[k + 2];
                    count[key] = (count[key] || 0) + 1;
                }
                row.push(Object.entries(count).sort((a, b) => b[1] - a[1])[0][0]);
            }
            out.push(row);
        }
        return out;
    }""", [rows, cols])


def covered_by_fixed(tab: Tab) -> list[str]:
    """The text elements a fixed (or stuck) element covers where the tab is scrolled: each as "TAG: text"."""
    found: list[str] = tab.page.evaluate("""() => {
        const all = [...document.body.querySelectorAll('*')];
        const fixed = all.filter(e => ['fixed', 'sticky'].includes(getComputedStyle(e).position) && e.offsetParent !== null
                                      || getComputedStyle(e).position === 'fixed');
        const inFixed = e => fixed.some(f => f.contains(e));
        const content = all.filter(e => !inFixed(e) && e.getClientRects().length && e.innerText && e.innerText.trim()
                                        && e.children.length === 0);
        const hits = [];
        for (const f of fixed) {
            const r = f.getBoundingClientRect();
            if (!r.width || !r.height) continue;
            for (const e of content) {
                const c = e.getBoundingClientRect();
                if (c.bottom > r.top + 1 && c.top < r.bottom - 1 && c.right > r.left + 1 && c.left < r.right - 1)
                    hits.push(e.tagName + ': ' + e.innerText.slice(0, 40));
            }
        }
        return hits;
    }""")
    return found


def table_cells(output: str) -> list[list[str]]:
    """The body rows of a rich table printed by tracer (box characters), each as its stripped cells."""
    rows = []
    for line in output.splitlines():
        if line.startswith("│") and line.rstrip().endswith("│"):
            rows.append([c.strip() for c in line.strip()[1:-1].split("│")])
    return rows


def table_header(output: str) -> list[str]:
    """The header cells of the first rich table printed by tracer."""
    for line in output.splitlines():
        if line.startswith("┃"):
            return [c.strip() for c in line.strip()[1:-1].split("┃")]
    raise AssertionError(f"no table in {output[:300]!r}")


def panel_lines(output: str) -> list[str]:
    """The text lines inside a rich panel (╭ ... ╰) printed by tracer."""
    lines, inside = [], False
    for line in output.splitlines():
        if line.startswith("╭"):
            inside = True
        elif line.startswith("╰"):
            inside = False
        elif inside and line.startswith("│"):
            lines.append(line.strip()[1:-1].strip())
    return lines


def words(text: str) -> str:
    """Text with every run of white space made one space (a page wraps where the terminal did not)."""
    return " ".join(text.split())
