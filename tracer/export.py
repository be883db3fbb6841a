"""Export what the terminal shows as SVG or HTML, for reports (``--svg FILE``, ``--html FILE``).

The picture is recorded at the content's natural width, not the terminal's, so
the same command gives the same file on any terminal or in a pipe.  Files are
written atomically (a temporary file in the same directory, then os.replace),
never over an input of the command, and never over a file that is not already
an export of the same kind.  Nothing here imports NumPy.
"""

from __future__ import annotations

import functools
import html
import io
import re
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table

from . import outputs
from .errors import UsageError
from .outputs import check_output, same_file

MAX_WIDTH = 1000  # the piped console's width: no export is wider
MIN_WIDTH = 20
SNIFF = {"svg": ("<svg", "<?xml"), "html": ("<!doctype html", "<html")}
CHAR_WIDTH = 20 * 0.61  # rich's SVG cell: char_height 20 times the default font_aspect_ratio
SVG_TEXT = re.compile(r'textLength="([0-9.e+-]+)"([^>]*)>([^<]*)</text>')


@dataclass(frozen=True)
class Target:
    kind: str  # svg | html
    path: str


def _looks_like(path: str, kind: str) -> bool:
    """Is the existing file an export of this kind (so replacing it loses nothing the user wrote)?"""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n").lower()
    return text.startswith(SNIFF[kind]) or (not head)


def check_targets(svg: str | None, html: str | None, inputs: list[str]) -> list[Target]:
    """The export files asked for, checked before anything runs: exit 2 rather than lose the user's work."""
    targets = [Target(kind, path) for kind, path in (("svg", svg), ("html", html)) if path is not None]
    if len(targets) == 2 and same_file(targets[0].path, targets[1].path):
        raise UsageError(f"--svg and --html name the same file {svg!r}: give each its own name")
    for t in targets:
        check_output(t.path, f"--{t.kind}", inputs, functools.partial(_looks_like, kind=t.kind), t.kind)
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


def write_atomic(path: str, text: str) -> None:
    """Write the whole file or nothing: a temporary file beside it, then os.replace."""
    data = text.encode("utf-8")
    outputs.write_atomic(path, lambda fh: fh.write(data))


def export(renderable: RenderableType, targets: list[Target], title: str, no_color: bool = False) -> list[str]:
    """Write every export; return the paths written."""
    texts = render_exports(renderable, targets, title, no_color)
    for t in targets:
        write_atomic(t.path, texts[t.kind])
    return [t.path for t in targets]
