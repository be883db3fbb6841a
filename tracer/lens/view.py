"""The logit lens's views: the table (layer x position: top tokens and p(token)), the heatmap of p(token),
JSON and CSV.  They never print."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from tracer.i18n import tr
from tracer.messages import join, msg, render
from tracer.views.text import csv_text, exact

if TYPE_CHECKING:
    from tracer.lens.core import LensResult

LENS_SCHEMA_VERSION = 1
LENS_SHADES = " ░▒▓█"  # p(token) in [0, 1]: blank below 1/8, then up to a full block
# low to high: blue, cyan, green, yellow, orange (the attention heatmaps' palette), readable on dark and light
LENS_PALETTE = ((70, 110, 200), (40, 175, 205), (80, 190, 90), (235, 190, 35), (240, 100, 40))


def _colour(x: float) -> Style:
    x = min(max(x, 0.0), 1.0) * (len(LENS_PALETTE) - 1)
    i = min(int(x), len(LENS_PALETTE) - 2)
    f = x - i
    r, g, b = (round(a + (c - a) * f) for a, c in zip(LENS_PALETTE[i], LENS_PALETTE[i + 1]))
    return Style(color=f"rgb({r},{g},{b})")


def _shade(x: float) -> str:
    """x in [0, 1] (p over the map's largest p) as two cells: blank below 1/8, then ░ ▒ ▓ █ up to 1/4, 1/2, 3/4, 1."""
    if x != x:  # NaN
        return "!!"
    k = min(len(LENS_SHADES) - 1, int(x * (len(LENS_SHADES) - 1) + 0.5))
    return LENS_SHADES[k] * 2


def fmt_p(p: float, precision: int) -> str:
    """A probability to ``precision`` significant digits: 0.7437, 2.347e-05 (a small p never prints as 0.0000)."""
    return f"{p:.{max(precision, 1)}g}"


def quoted(word: str) -> str:
    return f"'{word}'"


def position_label(r: LensResult, t: int) -> str:
    i, word = r.positions[t]
    return f"t={t} {quoted(word)}" if word else f"t={t}"


def token_text(r: LensResult, t: int) -> str:
    word = r.words[t]
    return f"{quoted(word)} (id {r.tokens[t]})" if word else f"id {r.tokens[t]}"


def title(r: LensResult) -> str:
    same = len(set(r.tokens)) == 1
    what = token_text(r, 0) if same else render(r.chosen)
    line = render(msg("logit lens of {name}, sample b={b}: each layer's residual through the final norm (with that layer's own statistics) and "
                      "the head; p of {what}",
                      name=r.spec.name, b=r.batch, what=what))
    done = interventions(r)
    return line if not done else line + render(msg("; run while {what}", what=join([i.phrase() for i in done], ", ")))


def interventions(r: LensResult) -> list[Any]:
    """The --ablate/--set the lens was run with, in the spec's order."""
    from tracer.engine.interventions import by_stage

    return list(by_stage(r.spec).values())


def lens_table(r: LensResult) -> Table:
    table = Table(title=Text(title(r)), title_justify="left", show_lines=True)
    table.add_column(tr("layer"), no_wrap=True)
    T = r.probs.shape[1]
    same = len(set(r.tokens)) == 1
    for t in range(T):
        table.add_column(Text(position_label(r, t) + ("" if same else "\n→ " + token_text(r, t))), overflow="fold")
    for layer, label in enumerate(r.labels):
        row: list[RenderableType] = [Text(label)]
        for t in range(T):
            cell = r.cell(layer, t)
            text = Text(f"p {fmt_p(cell.p_token, r.precision)}", style="bold")
            for i, word, p in cell.top:
                text.append(f"\n{quoted(word) if word else 'id ' + str(i)} {fmt_p(p, r.precision)}")
            row.append(text)
        table.add_row(*row)
    return table


def heatmap(r: LensResult) -> Text:
    """Layers (rows, the first at the top) x positions (columns) of p(token), a shade and a colour a cell."""
    T = r.probs.shape[1]
    pt = r.p_token
    vmax = float(pt.max()) if pt.size and pt.max() > 0 else 1.0
    width = max(len(label) for label in r.labels)
    out = Text(tr("p(token), layers x positions, shaded up to the largest, {vmax} (░ ▒ ▓ █: up to 1/4, 1/2, 3/4, 1 of it; blank: below 1/8):",
                  vmax=fmt_p(vmax, r.precision)) + "\n")
    out.append(" " * width + "  " + " ".join(f"{t:<2d}" for t in range(T)) + "\n")
    for layer, label in enumerate(r.labels):
        out.append(f"{label:<{width}}  ")
        for t in range(T):
            x = float(pt[layer, t]) / vmax
            out.append(_shade(x), style=_colour(x))
            out.append(" ")
        out.append("\n")
    out.rstrip()
    return out


def lens_view(r: LensResult) -> Group:
    return Group(lens_table(r), heatmap(r), Text(render(msg("final layer: {what}", what=", ".join(
        f"t={t} {quoted(w) if w else 'id ' + str(i)} {fmt_p(float(r.probs[-1, t, i]), r.precision)}"
        for t, (i, w) in enumerate(zip(r.tokens, r.words))))), style="dim"))


def lens_json(r: LensResult) -> dict[str, Any]:
    T = r.probs.shape[1]
    return {
        "schema_version": LENS_SCHEMA_VERSION,
        "spec": {"path": r.spec.path, "name": r.spec.name},
        "batch": r.batch,
        "positions": [{"t": t, "id": r.positions[t][0], "text": r.positions[t][1]} for t in range(T)],
        "token": [{"t": t, "id": r.tokens[t], "text": r.words[t]} for t in range(T)],
        "interventions": [i.as_json() for i in interventions(r)],
        "layers": [{"layer": label, "cells": [
            {"t": t, "p_token": float(r.probs[layer, t, r.tokens[t]]),
             "top": [{"id": i, "text": w, "p": p} for i, w, p in r.cell(layer, t).top]} for t in range(T)]}
            for layer, label in enumerate(r.labels)],
    }


LENS_CSV_HEADER = ["layer", "t", "input_id", "input_text", "token_id", "token_text", "p_token", "rank", "top_id", "top_text", "top_p"]


def lens_csv(r: LensResult) -> str:
    rows = []
    for layer, label in enumerate(r.labels):
        for t in range(r.probs.shape[1]):
            cell = r.cell(layer, t)
            i_in, w_in = r.positions[t]
            for rank, (i, w, p) in enumerate(cell.top, 1):
                rows.append([label, str(t), "" if i_in is None else str(i_in), w_in, str(r.tokens[t]), r.words[t],
                             exact(cell.p_token), str(rank), str(i), w, exact(p)])
    return csv_text(LENS_CSV_HEADER, rows)
