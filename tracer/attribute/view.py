"""The views of a logit attribution: the table (component, value, share), the heatmap of heads by layer, CSV.

The heatmap shades each head by |value| against the largest head (``░▒▓█``, as the attention and patching heatmaps do),
red where the head raises the logit and blue where it lowers it; the table gives the numbers.  They never print.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracer.i18n import tr
from tracer.messages import msg, render
from tracer.views.attention import fit, glyph
from tracer.views.text import csv_text, exact, fmt_number

if TYPE_CHECKING:
    from tracer.attribute.core import Attribution  # the results' modules render them with these: no import back
    from tracer.attribute.estimate import EstimateGrid

HEAD_CELL = 6  # terminal cells of a heads heatmap column
ESTIMATE_CELL = 8  # of an attribution-patching heatmap column


def title(a: Attribution) -> str:
    from tracer.views.text import token_label

    where = f"b={a.b}, t={a.t}{token_label(a.spec, a.b, a.t)}"
    if a.scale is None:
        return render(msg("direct logit attribution of {what} at {where}: the residual stream's parts through the head", what=a.what(), where=where))
    return render(msg("direct logit attribution of {what} at {where}: the residual stream's parts through the final norm (its scale frozen at "
                      "{scale}, from the whole stream) and the head", what=a.what(), where=where, scale=f"{a.scale:.6g}"))


def table(a: Attribution) -> Table:
    out = Table(title=Text(title(a)), title_justify="left")
    out.add_column(tr("component"), overflow="fold")
    out.add_column(tr("value"), justify="right")
    out.add_column(tr("share"), justify="right")
    for p, share in zip(a.parts, a.shares()):
        out.add_row(Text(p.name), Text(fmt_number(p.value, a.precision)), Text(f"{100 * share:+.1f}%"))
    out.add_section()
    out.add_row(Text(tr("sum of the parts"), style="bold"), Text(fmt_number(a.total, a.precision), style="bold"), Text(""))
    return out


def shade_map(rows: list[str], columns: list[str], grid: np.ndarray, cell: int = HEAD_CELL) -> tuple[Text, float]:
    """Rows x columns of ``grid``, a shade and a colour a cell (blank where NaN), and the largest |value| it shades by."""
    finite = grid[~np.isnan(grid)]
    vmax = float(abs(finite).max()) if finite.size and abs(finite).max() > 0 else 1.0
    width = max([len(r) for r in rows] + [5])
    out = Text(" " * (width + 1))
    for c in columns:
        out.append(fit(c, cell))
    out.append("\n")
    for label, values in zip(rows, grid):
        out.append(fit(label, width, "left") + " ")
        for v in values:
            x = float(v)
            if math.isnan(x):
                out.append(fit("", cell))
                continue
            out.append(fit(glyph(abs(x), vmax) * (cell // 2), cell), style="red" if x > 0 else "blue")
        out.append("\n")
    return out, vmax


def heatmap(a: Attribution) -> Text:
    """Layers (rows, the first at the top) x heads (columns), one shade and colour a head."""
    layers, grid = a.heads()
    if not layers:
        return Text()
    out, vmax = shade_map([f"blocks.{i}" for i in layers], [f"h{h}" for h in range(grid.shape[1])], grid)
    out.append(render(msg("heads by layer: shade |value| against the largest, {vmax}; red raises the logit, blue lowers it", vmax=f"{vmax:.4g}")))
    return out


def summary(a: Attribution) -> str:
    return render(msg("the parts sum to {total}, the run's logit{diff} {logit}: sum - logit = {gap}", total=fmt_number(a.total, a.precision),
                      diff="" if a.against is None else msg(" difference"), logit=fmt_number(a.logit, a.precision), gap=f"{a.total - a.logit:.3g}"))


def attribution_view(a: Attribution) -> RenderableType:
    parts: list[RenderableType] = [table(a)]
    map_ = heatmap(a)
    if map_.plain:
        parts.append(map_)
    parts.append(Text(summary(a), style="bold"))
    return Group(*parts)


ATTRIBUTE_CSV_HEADER = ("component", "layer", "head", "value", "share")


def attribution_csv(a: Attribution) -> str:
    rows = [[p.name, "" if p.layer is None else str(p.layer), "" if p.head is None else str(p.head), exact(p.value), exact(float(s))]
            for p, s in zip(a.parts, a.shares())]
    return csv_text(list(ATTRIBUTE_CSV_HEADER), rows)


# -- attribution patching ---------------------------------------------------------------------------------------

def estimate_table(g: EstimateGrid, precision: int) -> Table:
    if g.real is None:
        head = msg("attribution patching: the first-order change of the logit of {what} at b={b}, t={t} with each stage patched from the clean run, "
                   "(clean - corrupt) . gradient at the corrupt run", what=g.what(), b=g.b, t=g.t)
    else:
        head = msg("attribution patching: the first-order estimate of the change of the logit of {what} at b={b}, t={t}, beside tracer patch's own "
                   "(estimate / real / error)", what=g.what(), b=g.b, t=g.t)
    out = Table(title=Text(render(head)), title_justify="left", show_lines=g.real is not None)
    out.add_column(tr("stage"), overflow="fold")
    for w in g.words:
        out.add_column(w, justify="right", overflow="fold")
    for i, name in enumerate(g.stages):
        cells = []
        for t in range(len(g.words)):
            text = fmt_number(float(g.estimate[i, t]), precision)
            if g.real is not None:
                text += "\n" + fmt_number(float(g.real[i, t]), precision) + "\n" + fmt_number(float(g.estimate[i, t] - g.real[i, t]), precision)
            cells.append(Text(text))
        out.add_row(Text(name), *cells)
    return out


def estimate_summary(g: EstimateGrid) -> str:
    line = render(msg("logit of {what} at b={b}, t={t}: clean {clean}, corrupt {corrupt}", what=g.what(), b=g.b, t=g.t,
                      clean=f"{g.metric_clean:.6g}", corrupt=f"{g.metric_corrupt:.6g}"))
    err = g.error
    if err is None or not np.isfinite(err).any():
        return line
    return line + render(msg("; the largest |error| of the estimate is {err} (the largest |real| change {real})", err=f"{float(np.nanmax(abs(err))):.3g}",
                             real=f"{float(np.nanmax(abs(g.real))):.4g}" if g.real is not None else "-"))


def estimate_view(g: EstimateGrid, precision: int = 4) -> RenderableType:
    map_, vmax = shade_map(g.stages, [w.split(" ")[0] for w in g.words], g.estimate, ESTIMATE_CELL)
    map_.append(render(msg("shade: |estimate| against the largest, {vmax}; red raises the logit, blue lowers it", vmax=f"{vmax:.4g}")))
    parts: list[RenderableType] = [estimate_table(g, precision), map_, Text(estimate_summary(g), style="bold")]
    parts += [Text(render(v), style="bold red") for v in g.violations]
    return Group(*parts)


ESTIMATE_CSV_HEADER = ("stage", "t", "estimate", "real", "error")


def estimate_csv(g: EstimateGrid) -> str:
    rows = []
    for i, name in enumerate(g.stages):
        for t in range(len(g.words)):
            est = float(g.estimate[i, t])
            got = "" if g.real is None else exact(float(g.real[i, t]))
            rows.append([name, str(t), exact(est), got, "" if g.real is None else exact(est - float(g.real[i, t]))])
    return csv_text(list(ESTIMATE_CSV_HEADER), rows)
