"""Export what the terminal shows as SVG or HTML, for reports (``--svg FILE``, ``--html FILE``).

The picture is recorded at the content's natural width, not the terminal's, so
the same command gives the same file on any terminal or in a pipe.  Files are
written atomically (a temporary file in the same directory, then os.replace),
never over an input of the command, and never over a file that is not already
an export of the same kind.  Nothing here imports NumPy.
"""

from __future__ import annotations

import html
import io
import os
import re
import tempfile
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table

from .errors import UsageError

MAX_WIDTH = 1000  # the piped console's width: no export is wider
MIN_WIDTH = 20
SNIFF = {"svg": ("<svg", "<?xml"), "html": ("<!doctype html", "<html")}
CHAR_WIDTH = 20 * 0.61  # rich's SVG cell: char_height 20 times the default font_aspect_ratio
SVG_TEXT = re.compile(r'textLength="([0-9.e+-]+)"([^>]*)>([^<]*)</text>')


@dataclass(frozen=True)
class Target:
    kind: str  # svg | html
    path: str


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


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
    if len(targets) == 2 and _same_file(targets[0].path, targets[1].path):
        raise UsageError(f"--svg and --html name the same file {svg!r}: give each its own name")
    for t in targets:
        opt = f"--{t.kind} {t.path}"
        if not t.path or t.path.endswith((os.sep, "/")):
            raise UsageError(f"{opt}: expected a file name such as report.{t.kind}")
        for inp in inputs:
            if _same_file(t.path, inp):
                raise UsageError(f"{opt} would overwrite the input {inp!r}; choose another file name")
        folder = os.path.dirname(os.path.abspath(t.path))
        shown = os.path.dirname(t.path) or "."  # the folder as the user wrote it
        if os.path.isdir(t.path):
            raise UsageError(f"{opt}: {t.path!r} is a directory; give a file name inside it, e.g. {os.path.join(t.path, 'trace.' + t.kind)}")
        if not os.path.isdir(folder):
            what = "is not a folder" if os.path.exists(folder) else "does not exist"
            raise UsageError(f"{opt}: cannot write there: {shown!r} {what}")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"{opt}: cannot write there: the folder {shown!r} is not writable")
        if os.path.exists(t.path):
            if not os.path.isfile(t.path):
                raise UsageError(f"{opt}: {t.path!r} exists and is not a regular file")
            if not _looks_like(t.path, t.kind):
                raise UsageError(f"{opt}: {t.path!r} exists and is not an {t.kind.upper()} file; "
                                 "refusing to overwrite it (delete it or choose another name)")
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
            out[t.kind] = rec.export_html(clear=False, inline_styles=True)
    return out


def write_atomic(path: str, text: str) -> None:
    """Write the whole file or nothing: a temporary file beside it, then os.replace."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    except OSError as e:
        raise UsageError(f"cannot write {path!r}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise UsageError(f"cannot write {path!r}: {e.strerror or e}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def export(renderable: RenderableType, targets: list[Target], title: str, no_color: bool = False) -> list[str]:
    """Write every export; return the paths written."""
    texts = render_exports(renderable, targets, title, no_color)
    for t in targets:
        write_atomic(t.path, texts[t.kind])
    return [t.path for t in targets]
