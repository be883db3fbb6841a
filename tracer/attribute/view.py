"""The views of a logit attribution: the table (component, value, share), the heatmap of heads by layer, CSV.

The heatmap shades each head by |value| against the largest head (``░▒▓█``, as the attention and patching heatmaps do),
red where the head raises the logit and blue where it lowers it; the table gives the numbers.  They never print.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracer.i18n import tr
from tracer.messages import msg, render
from tracer.views.attention import fit, glyph
from tracer.views.text import csv_text, exact, fmt_number

if TYPE_CHECKING:
    from tracer.attribute.core import Attribution  # the result's module renders it with these: no import back

HEAD_CELL = 6  # terminal cells of a heatmap column


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


def heatmap(a: Attribution) -> Text:
    """Layers (rows, the first at the top) x heads (columns), one shade and colour a head."""
    layers, grid = a.heads()
    out = Text()
    if not layers:
        return out
    finite = grid[~(grid != grid)]
    vmax = float(abs(finite).max()) if finite.size and abs(finite).max() > 0 else 1.0
    width = max(len(f"blocks.{layers[-1]}"), 5)
    out.append(" " * (width + 1))
    for h in range(grid.shape[1]):
        out.append(fit(f"h{h}", HEAD_CELL))
    out.append("\n")
    for i, layer in enumerate(layers):
        out.append(fit(f"blocks.{layer}", width, "left") + " ")
        for v in grid[i]:
            x = float(v)
            if math.isnan(x):
                out.append(fit("", HEAD_CELL))
                continue
            out.append(fit(glyph(abs(x), vmax) * 3, HEAD_CELL), style="red" if x > 0 else "blue")
        out.append("\n")
    out.append(render(msg("heads by layer: shade |value| against the largest, {vmax}; red raises the logit, blue lowers it", vmax=f"{vmax:.4g}")))
    return out


def summary(a: Attribution) -> str:
    return render(msg("the parts sum to {total}; the run's logit{diff} is {logit} (difference {gap})", total=f"{a.total:.17g}",
                      diff="" if a.against is None else msg(" difference"), logit=f"{a.logit:.17g}", gap=f"{a.total - a.logit:.3g}"))


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
