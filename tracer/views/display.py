"""The terminal's views in a notebook: the same rich renderable the CLI prints, as HTML for Jupyter.

A View wraps a renderable so that it shows itself everywhere: ``_repr_html_`` in Jupyter, ``__rich__``
for rich (``rich.print(view)``), ``str()`` as plain text.
"""

from __future__ import annotations

from rich.console import RenderableType

# A fragment, not a page: Jupyter puts it inside its own output cell.
HTML_FRAGMENT = ('<pre style="font-family: Menlo, \'DejaVu Sans Mono\', Consolas, monospace; line-height: 1.25; '
                 'white-space: pre; overflow-x: auto">{code}</pre>')


class View:
    """A rich renderable (a table, the heatmaps) that also shows in Jupyter."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich__(self) -> RenderableType:
        return self.renderable

    def _repr_html_(self) -> str:
        return html(self.renderable)

    def __str__(self) -> str:
        return text(self.renderable)


def _unwrap(view: RenderableType | View) -> RenderableType:
    return view.renderable if isinstance(view, View) else view


def html(view: RenderableType | View) -> str:
    """The view as an HTML fragment with inline colours, at the width the content wants (never wrapped)."""
    from tracer.views.export import record

    return record(_unwrap(view)).export_html(inline_styles=True, code_format=HTML_FRAGMENT)


def text(view: RenderableType | View) -> str:
    """The view as plain text, as a pipe would receive it."""
    from tracer.views.export import record

    return record(_unwrap(view), no_color=True).export_text()
