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


def title(g: PatchGrid) -> str:
    what = msg("the logit of {token}", token=g.metric.words(g._speaker(), g.metric.tokens)) if g.metric.kind == "logit" else g.what()
    where, t = g.where(), g.t_last
    if g.title == "path":
        if g.metric.normalise:
            return render(msg("path patching: {what} at {where}, t={t}, (patched - corrupt) / (clean - corrupt): 0 is the corrupt run, 1 the clean one",
                              what=what, where=where, t=t))
        return render(msg("path patching: {what} at {where}, t={t}, patched run minus corrupt run", what=what, where=where, t=t))
    if g.metric.normalise:
        return render(msg("activation patching: {what} at {where}, t={t}, (patched - corrupt) / (clean - corrupt): 0 is the corrupt run, 1 the clean one",
                          what=what, where=where, t=t))
    return render(msg("activation patching: {what} at {where}, t={t}, patched run minus corrupt run", what=what, where=where, t=t))


def table(g: PatchGrid, precision: int) -> Table:
    out = Table(title=Text(title(g)), title_justify="left")
    out.add_column(tr("stage") if g.title == "activation" else tr("sender head"), overflow="fold")
    for w in g.words:
        out.add_column(w, justify="right", overflow="fold")
    many = len(g.samples) > 1
    sp = g.spread
    for i, name in enumerate(g.stages):
        cells = []
        for j, v in enumerate(g.delta[i]):
            text = fmt_number(float(v), precision)
            if many:  # the mean, then its spread over the samples read
                lo, hi = fmt_number(float(sp["min"][i, j]), precision), fmt_number(float(sp["max"][i, j]), precision)
                text += f"\n±{fmt_number(float(sp['std'][i, j]), precision)}\n{lo}..{hi}"
            cells.append(Text(text))
        out.add_row(Text(name), *cells)
    if many:
        out.caption = render(msg("each cell: the mean over {n} samples, ±its standard deviation, its min..max", n=len(g.samples)))
        out.caption_justify = "left"
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
    if g.metric.kind == "logit":
        out.append(render(msg("shade: |change| against the largest, {vmax}; red raises the logit, blue lowers it", vmax=f"{vmax:.4g}")))
    else:
        out.append(render(msg("shade: |change| against the largest, {vmax}; red raises the metric, blue lowers it", vmax=f"{vmax:.4g}")))
    return out


def patch_view(g: PatchGrid, precision: int = 4) -> RenderableType:
    parts: list[RenderableType] = [table(g, precision), heatmap(g), Text(render(g.summary()), style="bold")]
    for v in g.violations:
        parts.append(Text(render(v), style="bold red"))
    return Group(*parts)


PATCH_CSV_HEADER = ("stage", "t", "token", "logit", "delta")
SPREAD_CSV_HEADER = ("std", "min", "max")


def patch_csv(g: PatchGrid) -> str:
    """One row a cell; the value column is named after the metric (logit, logit-diff, prob, logprob); with several
    samples read, the spread of the change (std, min, max) too."""
    many = len(g.samples) > 1
    sp = g.spread
    rows = [[name, str(g._t(t)), str(g.token), repr(float(g.logits[i, t])), repr(float(g.delta[i, t]))]
            + ([repr(float(sp[k][i, t])) for k in SPREAD_CSV_HEADER] if many else [])
            for i, name in enumerate(g.stages) for t in range(len(g.words))]
    header = [*PATCH_CSV_HEADER[:3], g.metric.kind, PATCH_CSV_HEADER[4], *(SPREAD_CSV_HEADER if many else ())]
    return csv_text(header, rows)
