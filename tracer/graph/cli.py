"""``tracer graph``: the command line's options, checked, then the library's call, rendered once."""

from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import EXIT_OK

if TYPE_CHECKING:
    pass


def graph(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec of the block to draw.", show_default=False)],
    no_color: shared.NoColorOption = False,
    svg: Annotated[str | None, typer.Option("--svg", metavar="FILE", help="Also write the drawing as an SVG picture.", show_default=False)] = None,
    html: Annotated[str | None, typer.Option("--html", metavar="FILE", help="Also write the drawing as an HTML page.", show_default=False)] = None,
    force: shared.ForceOption = False,
    lang: shared.PictureLangOption = None,
) -> None:
    """Draw the block as Figure 17.1 does: before the block, each residual path with every stage and its shape.

    Drawn from the spec's own step list and shapes; nothing is run.
    """

    def body() -> int:
        from tracer.front.prepare import load_checked
        from tracer.graph.view import graph_view

        targets = shared.export_targets(svg, html, [spec], "table", force)
        s = load_checked(spec)
        shared.show(graph_view(s), no_color, targets, s.name, force)
        return EXIT_OK

    shared.guarded(body, lang)
