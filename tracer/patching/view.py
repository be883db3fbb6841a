"""The views of a patching sweep: the table of logit changes, a terminal heatmap (stages x positions), CSV.

The heatmap shades each cell by |change| against the largest (``░▒▓█``, as the attention heatmaps do), red where
patching raises the token's logit and blue where it lowers it; the table gives the numbers.
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
from tracer.views.text import csv_text, fmt_number

if TYPE_CHECKING:
    from tracer.patching.run import PatchGrid  # the grid's module renders it with these: no import back

CELL = 8  # terminal cells of a heatmap column


def table(g: PatchGrid, precision: int) -> Table:
    title = render(msg("activation patching: the logit of {token} at b={b}, t={t}, patched run minus corrupt run",
                       token=g.token_text, b=g.b, t=g.t_last))
    out = Table(title=Text(title), title_justify="left")
    out.add_column(tr("stage"), overflow="fold")
    for w in g.words:
        out.add_column(w, justify="right", overflow="fold")
    for i, name in enumerate(g.stages):
        out.add_row(Text(name), *(Text(fmt_number(float(v), precision)) for v in g.delta[i]))
    return out


def heatmap(g: PatchGrid) -> Text:
    finite = g.delta[~(g.delta != g.delta)]
    vmax = float(abs(finite).max()) if finite.size and abs(finite).max() > 0 else 1.0
    width = max([len(s) for s in g.stages] + [5])
    out = Text()
    out.append(" " * (width + 1))
    for w in g.words:
        out.append(fit(w.split(" ")[0], CELL))
    out.append("\n")
    for i, name in enumerate(g.stages):
        out.append(fit(name, width, "left") + " ")
        for v in g.delta[i]:
            x = float(v)
            if math.isnan(x):
                out.append(fit("?", CELL))
                continue
            cell = glyph(abs(x), vmax) * 4
            out.append(fit(cell, CELL), style="red" if x > 0 else "blue")
        out.append("\n")
    out.append(render(msg("shade: |change| against the largest, {vmax}; red raises the logit, blue lowers it", vmax=f"{vmax:.4g}")))
    return out


def patch_view(g: PatchGrid, precision: int = 4) -> RenderableType:
    parts: list[RenderableType] = [table(g, precision), heatmap(g), Text(render(g.summary()), style="bold")]
    for v in g.violations:
        parts.append(Text(render(v), style="bold red"))
    return Group(*parts)


PATCH_CSV_HEADER = ("stage", "t", "token", "logit", "delta")


def patch_csv(g: PatchGrid) -> str:
    rows = [[name, str(t), str(g.token), repr(float(g.logits[i, t])), repr(float(g.delta[i, t]))]
            for i, name in enumerate(g.stages) for t in range(len(g.words))]
    return csv_text(list(PATCH_CSV_HEADER), rows)
