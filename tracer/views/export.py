"""Export what the terminal shows as SVG or HTML, for reports (``--svg FILE``, ``--html FILE``).

The picture is recorded at the content's natural width, not the terminal's, so
the same command gives the same file on any terminal or in a pipe.  Files are
written atomically and begin with tracer's mark, so that only a file tracer wrote is
ever replaced (files.py has the rule, docs/files.md explains it).  Nothing here imports NumPy.
"""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table

from tracer import files

MAX_WIDTH = 1000  # the piped console's width: no export is wider
MIN_WIDTH = 20
CHAR_WIDTH = 20 * 0.61  # rich's SVG cell: char_height 20 times the default font_aspect_ratio
SVG_TEXT = re.compile(r'textLength="([0-9.e+-]+)"([^>]*)>([^<]*)</text>')


@dataclass(frozen=True)
class Target:
    kind: str  # svg | html
    path: str


def check_targets(svg: str | None, html: str | None, inputs: list[str], force: bool = False,
                  others: dict[str, str | None] | None = None) -> list[Target]:
    """The export files asked for, checked before anything runs: exit 2 rather than lose the user's work.

    ``others``: the command's other outputs (--save), which no export may share a file with."""
    targets = [Target(kind, path) for kind, path in (("svg", svg), ("html", html)) if path is not None]
    files.check_distinct({**(others or {}), "--svg": svg, "--html": html})
    for t in targets:
        files.check_output(t.path, f"--{t.kind}", inputs, t.kind, force)
    return targets


def natural_width(renderable: RenderableType) -> int:
    """The width the content wants, measured on a console as wide as a pipe."""
    probe = Console(width=MAX_WIDTH, file=io.StringIO(), emoji=False, highlight=False)
    return max(MIN_WIDTH, min(MAX_WIDTH, probe.measure(renderable).maximum), caption_width(renderable))


def caption_width(renderable: RenderableType) -> int:
    """The widest table title or caption: rich's measure leaves them out, so a table narrower than its
    caption (a Chinese table, whose meanings are short) would wrap the caption in the export."""
    if isinstance(renderable, Group):
        return max((caption_width(r) for r in renderable.renderables), default=0)
    if isinstance(renderable, Table):
        texts = [t for t in (renderable.title, renderable.caption) if t is not None]
        return min(MAX_WIDTH, max((cell_len(str(t)) for t in texts), default=0))
    return 0


def record(renderable: RenderableType, no_color: bool = False) -> Console:
    width = natural_width(renderable)
    rec = Console(record=True, width=width, file=io.StringIO(), force_terminal=True, color_system=None if no_color else "truecolor",
                  no_color=no_color, emoji=False, highlight=False, soft_wrap=False)
    rec.print(renderable)
    return rec


def fix_wide_text(svg: str) -> str:
    """Give each SVG text run the width of its terminal cells.

    rich sizes a run by its character count, so a run with wide characters (Chinese tokens) would be
    squeezed into half its cells; the next run's position already counts cells, so only the length changes.
    """

    def fix(m: re.Match[str]) -> str:
        text = html.unescape(m.group(3))
        if cell_len(text) == len(text):
            return m.group(0)
        return f'textLength="{format(CHAR_WIDTH * cell_len(text), "g")}"{m.group(2)}>{m.group(3)}</text>'

    return SVG_TEXT.sub(fix, svg)


WIDE_RUN = re.compile("[\u1100-\u115f\u2e80-\u303e\u3040-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6"
                      "\U00020000-\U0003fffd]+")


def fix_wide_html(page: str) -> str:
    """Give each run of wide characters (Chinese) exactly two cells a character in the HTML page.

    A browser's font draws a CJK character about 1.6 to 2 columns wide, not exactly 2, so every row with
    Chinese would drift out of line with the table's borders; a box of 2ch per character keeps the grid.
    Only the text inside <code> is touched, never a tag or the page's title.
    """
    head, sep, body = page.partition("<code")
    if not sep:
        return page

    def box(m: re.Match[str]) -> str:
        return f'<span style="display:inline-block;width:{cell_len(m.group(0))}ch;white-space:nowrap">{m.group(0)}</span>'

    parts = re.split(r"(<[^>]*>)", body)  # tags at odd indices: only the text between them is boxed
    return head + sep + "".join(p if i % 2 else WIDE_RUN.sub(box, p) for i, p in enumerate(parts))


def render_exports(renderable: RenderableType, targets: list[Target], title: str, no_color: bool = False) -> dict[str, str]:
    """The text of each export asked for, by kind."""
    out: dict[str, str] = {}
    if not targets:
        return out
    rec = record(renderable, no_color)
    for t in targets:
        if t.kind == "svg":
            out[t.kind] = fix_wide_text(rec.export_svg(title=title, clear=False))
        else:
            out[t.kind] = fix_wide_html(rec.export_html(clear=False, inline_styles=True))
    return out


def write_atomic(target: Target, text: str, force: bool = False) -> None:
    """Write the whole file or nothing, under tracer's mark (its first line)."""
    body = text.encode("utf-8")
    data = files.text_mark(target.kind, body) + body
    files.write_atomic(target.path, lambda fh: fh.write(data), f"--{target.kind}", target.kind, force)


def export(renderable: RenderableType, targets: list[Target], title: str, no_color: bool = False, force: bool = False) -> list[str]:
    """Write every export; return the paths written."""
    texts = render_exports(renderable, targets, title, no_color)
    for t in targets:
        write_atomic(t, texts[t.kind], force)
    return [t.path for t in targets]
