"""Attention weights as heatmaps in the terminal (``tracer run SPEC --attention``).  They never print.

One panel per head; rows are queries, columns are keys, labelled with the tokens
when the spec has a vocab.  A masked cell is a dim ``·``; a cell the mask lets
through shows a shade (``░▒▓█``, and a colour on a colour terminal), plus its
value when the keys are few.  When the grid would be too large to read, each
cell is the mean of a block of queries and keys, and the picture says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.style import Style
from rich.table import Table
from rich.text import Text

from tracer.engine.executor import Recording, visible_keys
from tracer.errors import UsageError
from tracer.i18n import tr
from tracer.messages import Message, join, msg, render
from tracer.model.blocks import Step, internal_prefix
from tracer.model.ops import OPS
from tracer.model.shapes import shape_label
from tracer.spec import Spec
from tracer.views.tables import violation_panel

GLYPHS = "░▒▓█"  # (0, 1/4], (1/4, 1/2], (1/2, 3/4], (3/4, 1] of the scale
MASKED = "·"
NONFINITE_MARK = "!"
NUMBER_KEYS = 12  # up to this many keys (and NUMBER_QUERIES queries) every cell shows its value
NUMBER_QUERIES = 40
CELL_LIMIT = 48  # up to this many queries and keys every cell is drawn, as a shade
BINS = 32  # beyond CELL_LIMIT an axis is cut into this many blocks; a cell shows its block's mean
PER_ROW = 4  # head panels side by side, at most
LABEL_CELLS = 12  # a token label longer than this is cut, with an ellipsis
# low to high: blue, cyan, green, yellow, orange; every step readable on a dark and on a light background
PALETTE = ((70, 110, 200), (40, 175, 205), (80, 190, 90), (235, 190, 35), (240, 100, 40))


# -- which attention ---------------------------------------------------------
def attention_steps(spec: Spec) -> list[Step]:
    return [s for s in spec.steps if OPS[s.op].attention]


def resolve(spec: Spec, names: Iterable[str]) -> list[Step]:
    """The attention steps to draw: the first when no name is given; 'all' for every one.

    A name may be the step (``blocks.1.attention``), its internals' prefix (``blocks.1.attn``)
    or the weights stage itself (``blocks.1.attn.weights``).
    """
    steps = attention_steps(spec)
    if not steps:
        raise UsageError(msg("{path}: the model has no attention step (op mha or cross_mha), so there are no attention weights to draw", path=spec.path))
    names = list(names)
    if not names:
        return steps[:1]
    out: list[Step] = []
    for name in names:
        if name == "all":
            picked = steps
        else:
            picked = [s for s in steps if name in (s.name, internal_prefix(s), internal_prefix(s) + ".weights")]
        if not picked:
            known = ", ".join(s.name for s in steps)
            raise UsageError(msg("--attention-stage {name}: no attention step of that name; {path} has: {known} (or 'all')", name=repr(name), path=spec.path,
                                 known=known))
        out += [s for s in picked if s not in out]
    return out


# -- the grid ----------------------------------------------------------------
@dataclass
class Grid:
    """What one head's panel shows: values [R,K], masked cells, and the labels of rows and columns."""

    values: np.ndarray  # [R,K] float: weights, or block means
    masked: np.ndarray  # [R,K] bool: every weight under the cell is masked
    rows: list[str]
    cols: list[str]
    mode: str  # values | shades | blocks
    vmax: float  # the top of the shade scale: 1 for weights, the largest block mean for blocks


def bin_edges(n: int) -> np.ndarray:
    """Block boundaries along an axis: every position when small, else at most BINS blocks of ceil(n / BINS)."""
    size = 1 if n <= CELL_LIMIT else math.ceil(n / BINS)
    return np.append(np.arange(0, n, size), n)


def block_means(a: np.ndarray, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    sums = np.add.reduceat(np.add.reduceat(a, r[:-1], axis=0), c[:-1], axis=1)
    return sums / np.outer(np.diff(r), np.diff(c))


def _range_label(a: int, b: int) -> str:
    return str(a) if b - a == 1 else f"{a}–{b - 1}"


def make_grid(w: np.ndarray, visible: np.ndarray | None, q_words: list[str] | None, k_words: list[str] | None) -> Grid:
    """One head's weights [T,S] (queries by keys) as a grid of cells."""
    nq, nk = w.shape
    hidden = np.zeros(w.shape, dtype=bool) if visible is None else ~visible
    if nq <= CELL_LIMIT and nk <= CELL_LIMIT:
        mode = "values" if nk <= NUMBER_KEYS and nq <= NUMBER_QUERIES else "shades"
        width = len(str(nq - 1))
        rows = [f"{i:>{width}} {q_words[i]}" if q_words else f"{i:>{width}}" for i in range(nq)]
        cols = [k_words[j] if k_words and mode == "values" else str(j) for j in range(nk)]
        return Grid(np.array(w, dtype=float), hidden, rows, cols, mode, 1.0)
    r, c = bin_edges(nq), bin_edges(nk)
    means = block_means(np.asarray(w, dtype=float), r, c)
    all_hidden = block_means(hidden.astype(float), r, c) == 1.0
    finite = means[np.isfinite(means) & ~all_hidden]
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    rows = [_range_label(int(a), int(b)) for a, b in pairwise(r)]
    cols = [str(int(a)) for a in c[:-1]]
    return Grid(means, all_hidden, rows, cols, "blocks", vmax)


def colour(x: float) -> Style:
    """The colour of x in [0, 1] on the PALETTE scale."""
    x = min(max(x, 0.0), 1.0) * (len(PALETTE) - 1)
    i = min(int(x), len(PALETTE) - 2)
    f = x - i
    rgb = tuple(round(a + (b - a) * f) for a, b in zip(PALETTE[i], PALETTE[i + 1]))
    return Style(color=f"rgb({rgb[0]},{rgb[1]},{rgb[2]})")


def glyph(v: float, vmax: float) -> str:
    if v <= 0:
        return " "
    return GLYPHS[min(len(GLYPHS) - 1, max(0, math.ceil(v / vmax * len(GLYPHS)) - 1))]


def fit(text: str, width: int, align: str = "center") -> str:
    """Pad or cut text to exactly `width` terminal cells (wide characters count twice)."""
    if cell_len(text) > width:
        out = ""
        for ch in text:
            if cell_len(out + ch) > width - 1:
                break
            out += ch
        text = out + "…"
    pad = width - cell_len(text)
    if align == "left":
        return text + " " * pad
    if align == "right":
        return " " * pad + text
    return " " * (pad // 2) + text + " " * (pad - pad // 2)


def put(out: Text, text: str, width: int, align: str = "center", style: str | Style = "") -> None:
    """Append text padded to `width` cells; the padding is unstyled, so exports keep it as plain space."""
    cells = fit(text, width, align)
    core = cells.strip(" ")
    lead = len(cells) - len(cells.lstrip(" "))
    out.append(cells[:lead])
    out.append(core, style=style)
    out.append(cells[lead + len(core):])


def _cut_label(label: str) -> str:
    return fit(label, LABEL_CELLS, "left").rstrip() if cell_len(label) > LABEL_CELLS else label


def _header(out: Text, cols: list[str], cell: int, stride: int, gap: int) -> None:
    """Column labels every `stride` columns, over cells `cell` wide with `gap` between them."""
    span = cell * stride + gap * stride
    for j in range(0, len(cols), stride):
        last = j + stride >= len(cols)
        if stride == 1 and gap:
            put(out, cols[j], cell, "center", "bold")
            if not last:
                out.append(" " * gap)
        else:
            put(out, cols[j], span if not last else cell_len(cols[j]), "left", "bold")


def panel_text(g: Grid) -> Text:
    rows = [_cut_label(r) for r in g.rows]
    label_w = max(cell_len(r) for r in rows)
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(" " * (label_w + 1))
    if g.mode == "values":
        cell, gap, stride = 5, 1, 1
    else:
        cell, gap = 2, 0
        longest = max(len(c) for c in g.cols)
        stride = 5 if g.mode == "shades" else next(s for s in (1, 2, 4, 8, 16, 32) if cell * s >= longest + 1)
    _header(out, g.cols, cell, stride, gap)
    out.append("\n")
    for i, label in enumerate(rows):
        put(out, label, label_w, "left", "bold")
        out.append(" ")
        for j in range(len(g.cols)):
            v = float(g.values[i, j])
            if j and gap:
                out.append(" " * gap)
            if not math.isfinite(v):  # before the mask: a fully masked row is 0/0 = NaN, and must show as such
                put(out, ("nan" if math.isnan(v) else "inf") if g.mode == "values" else NONFINITE_MARK * 2, cell, "right", "bold red")
            elif g.masked[i, j]:
                put(out, MASKED, cell, "center", "dim")
            else:
                mark = glyph(v, g.vmax)
                shade = colour(v / g.vmax)
                if g.mode == "values":
                    out.append(mark, style=shade)
                    out.append(f"{v:4.2f}" if v < 9.995 else f"{v:4.1f}")
                else:
                    out.append(mark * 2, style=shade)
        if i < len(rows) - 1:
            out.append("\n")
    return out


# -- layout ------------------------------------------------------------------
class Tiles:
    """Panels side by side, PER_ROW at most and as many as fit the width; measured at its natural width."""

    def __init__(self, items: list[RenderableType], per_row: int = PER_ROW, gap: int = 2) -> None:
        self.items = items
        self.per_row = per_row
        self.gap = gap

    def _rows(self, widths: list[int], max_width: int) -> list[list[int]]:
        rows: list[list[int]] = [[]]
        used = 0
        for i, w in enumerate(widths):
            row = rows[-1]
            if row and (len(row) == self.per_row or used + self.gap + w > max_width):
                rows.append([])
                row, used = rows[-1], 0
            used += (self.gap if row else 0) + w
            row.append(i)
        return rows

    def _widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        return [Measurement.get(console, options, item).maximum for item in self.items]

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widths = self._widths(console, options)
        rows = self._rows(widths, options.max_width)
        natural = max(sum(widths[i] for i in row) + self.gap * (len(row) - 1) for row in rows)
        return Measurement(max(widths), natural)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self._widths(console, options)
        for row in self._rows(widths, options.max_width):
            grid = Table.grid(padding=(0, self.gap, 0, 0))
            for _ in row:
                grid.add_column(no_wrap=True)
            grid.add_row(*[self.items[i] for i in row])
            yield grid


# -- one attention stage -----------------------------------------------------
def _words(spec: Spec, stage_axis: str, b: int) -> list[str] | None:
    """Token labels for positions along T (target / decoder-only) or S (source)."""
    if spec.source is not None:
        words = spec.tokens_text("source" if stage_axis == "S" else "target")
    else:
        words = spec.tokens_text()
    return words[b] if words is not None else None


class Legend:
    """The key to the shades; the colour bar only on a console that shows colour."""

    def __init__(self, mode: str, vmax: float) -> None:
        self.mode = mode
        self.vmax = vmax

    def text(self, colour_bar: bool) -> Text:
        out = Text()
        n = len(GLYPHS)
        width = 1 if self.mode == "values" else 2
        for k in reversed(range(n)):
            out.append(GLYPHS[k] * width + " ", style=colour((k + 1) / n))
            if self.mode == "blocks":
                out.append(tr("> {p}% of the head's largest block mean   ", p=k * 100 // n))
            else:
                out.append(f"> {k / n:g}   ")
        out.append(tr("   blank: exactly 0   "))
        out.append(MASKED + " ", style="dim")
        out.append(tr("masked (the whole block)   ") if self.mode == "blocks" else tr("masked: the mask hides that key   "))
        out.append((NONFINITE_MARK * 2 if self.mode != "values" else "nan") + " ", style="bold red")
        out.append(tr("= NaN or Inf"))
        if colour_bar:
            out.append(tr("\ncolour scale: 0 "))
            for k in range(24):
                out.append("█", style=colour(k / 23))
            out.append(tr(" max") if self.mode == "blocks" else f" {self.vmax:g}")
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.text(colour_bar=console.color_system is not None and not console.no_color)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.text(colour_bar=True))


def mask_words(step: Step) -> Message:
    if step.op == "cross_mha":
        return msg("cross-attention, no mask: every target position reads every source position")
    if step.mask == "causal" and step.window is not None:
        return msg("sliding-window causal mask, W = {w}: query t reads keys t - {m} to t only", w=step.window, m=step.window - 1)
    return {
        "causal": msg("causal mask: a query reads only its own and earlier positions"),
        "none": msg("no mask: every query reads every key"),
        "explicit": msg("explicit mask from the spec (block.mask)"),
    }.get(step.mask or "none", msg("{mask} mask", mask=step.mask))


def stage_view(trace: Recording, step: Step, b: int) -> RenderableType:
    spec = trace.spec
    name = internal_prefix(step) + ".weights"
    stage = trace.stages.get(name)
    if stage is None:
        if trace.violations:
            return Text(render(msg("{name}: not recorded (the run stopped at the violation at {stage}; --keep-going records what NumPy would do)",
                                    name=name, stage=trace.violations[0].stage)), style="yellow")
        return Text(render(msg("{name}: not recorded", name=name)), style="yellow")
    axes = stage.axes
    w = np.asarray(stage.array[b])  # [H,T,S]
    H, nq, nk = w.shape
    visible = visible_keys(spec, step, nq) if step.op == "mha" else None
    q_words, k_words = _words(spec, axes[2], b), _words(spec, axes[3], b)
    grids = [make_grid(w[h], visible, q_words, k_words) for h in range(H)]
    g0 = grids[0]
    head = Text()
    head.append(name + "  ", style="bold")
    head.append(tr("{meaning}; sample b={b}; {shape}", meaning=render(stage.meaning), b=b, shape=shape_label(axes, stage.array.shape))
                + "\n")
    head.append(tr("rows: queries ({q}), columns: keys ({k}); {mask}", q=f"{axes[2]} = {nq}", k=f"{axes[3]} = {nk}",
                   mask=render(mask_words(step))))
    if step.axis == "queries":
        head.append("\n" + render(msg("softmax over queries (an axis violation): each column sums to 1, not each row")), style="bold red")
    if g0.mode == "blocks":
        rb, cb = (int(np.diff(bin_edges(n))[0]) for n in (nq, nk))
        q, k = msg("queries") if rb > 1 else msg("query"), msg("keys") if cb > 1 else msg("key")
        cells = (msg("{nq} × {nk} cells per head are too many to print: each cell is the mean weight of a block of {rb} {q} × {cb} {k} ({r} × {c} blocks, "
                     "the last ones smaller)",
                     nq=nq, nk=nk, rb=rb, q=q, cb=cb, k=k, r=len(g0.rows), c=len(g0.cols)) if nq % rb or nk % cb
                 else msg("{nq} × {nk} cells per head are too many to print: each cell is the mean weight of a block of {rb} {q} × {cb} {k} ({r} × {c} blocks)",
                          nq=nq, nk=nk, rb=rb, q=q, cb=cb, k=k, r=len(g0.rows), c=len(g0.cols)))
        head.append("\n" + render(join([cells, msg("shades are relative to the largest mean in each head"),
                                          msg("a cell is · only when its whole block is masked")])), style="yellow")
    elif g0.mode == "shades":
        head.append("\n" + render(msg("more than {NUMBER_KEYS} keys: shades only, no numbers (tracer run --all --json has every value)",
                                      NUMBER_KEYS=NUMBER_KEYS)))
    if g0.mode == "shades" and k_words and k_words != q_words:
        head.append("\n" + tr("keys: ") + ", ".join(f"{j} {word}" for j, word in enumerate(k_words)))
    panels: list[RenderableType] = [
        Panel(panel_text(g), title=tr("head {h}", h=h) + (tr(" (max {m})", m=f"{g.vmax:.3g}") if g.mode == "blocks" else ""),
              title_align="left", expand=False, padding=(0, 1))
        for h, g in enumerate(grids)
    ]
    return Group(head, Tiles(panels), Legend(g0.mode, 1.0))


def attention_view(trace: Recording, steps: list[Step], b: int) -> Group:
    parts: list[RenderableType] = [Text(tr("{name}: attention weights", name=trace.spec.name), style="bold")]
    for step in steps:
        parts += [Text(""), stage_view(trace, step, b)]
    for v in trace.violations:
        parts.append(violation_panel(v))
    return Group(*parts)
