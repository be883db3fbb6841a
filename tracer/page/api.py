"""``Trace.page()`` and ``Diff.page()``: attached by the API layer (tracer/__init__.py), since run and compare sit
below this feature and may not import it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer.page.writer import DEFAULT_BUDGET_MB, Page, check_page, diff_page, run_page, write_page
from tracer.spec import choices

if TYPE_CHECKING:
    from tracer.compare.sides import Diff
    from tracer.run.result import Trace


def _written(page: Page, path: str | None, inputs: list[str], force: bool) -> str:
    if path is not None:
        path = choices.file_path(path, "path")
        check_page(path, "path", inputs, choices.flag(force, "force"))
        write_page(path, page, "path", force)
    return page.html


def trace_page(self: Trace, path: str | None = None, *, lang: str = "en", budget_mb: float = DEFAULT_BUDGET_MB, force: bool = False) -> str:
    """The explorable page of this run (as ``tracer page``): one self-contained HTML file, returned as text and
    written to ``path`` when given (never over a file tracer did not write, unless ``force``; docs/files.md).
    ``lang``: the page's first language (en | zh); ``budget_mb``: as --page-budget."""
    page = run_page(self.run, b=self.batch, t=self.pos, precision=self.precision, lang=choices.text(lang, "lang"), budget_mb=budget_mb)
    return _written(page, path, [self.spec.path, *self.spec.files_read], force)


def diff_page_of(self: Diff, path: str | None = None, *, lang: str = "en", budget_mb: float = DEFAULT_BUDGET_MB, force: bool = False) -> str:
    """The diff as a page (as ``tracer diff A B --page``): both sides side by side, the first divergence marked."""
    r = self.result
    page = diff_page(r, precision=self.precision, lang=choices.text(lang, "lang"), budget_mb=budget_mb)
    return _written(page, path, [p for p in (r.a.path, r.b.path) if p], force)


def attach() -> None:
    from tracer.compare.sides import Diff
    from tracer.run.result import Trace

    Trace.page = trace_page  # type: ignore[attr-defined]
    Diff.page = diff_page_of  # type: ignore[attr-defined]
