"""The terminal's views in a notebook: ``_repr_html_`` draws the same rich renderable the CLI prints, as HTML."""

from __future__ import annotations

from rich.console import RenderableType

# A fragment, not a page: Jupyter puts it inside its own output cell.
HTML_FRAGMENT = ('<pre style="font-family: Menlo, \'DejaVu Sans Mono\', Consolas, monospace; line-height: 1.25; '
                 'white-space: pre; overflow-x: auto">{code}</pre>')


def html(view: RenderableType) -> str:
    """The view as an HTML fragment with inline colours, at the width the content wants (never wrapped)."""
    from ..export import record

    return record(view).export_html(inline_styles=True, code_format=HTML_FRAGMENT)


def text(view: RenderableType) -> str:
    """The view as plain text, as a pipe would receive it."""
    from ..export import record

    return record(view, no_color=True).export_text()
