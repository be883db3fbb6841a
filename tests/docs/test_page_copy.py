"""docs/pages/ch17-prenorm.html, the page of Table 17.1's block the guide links to, is exactly what
`tracer page specs/ch17-prenorm.yaml` writes now: it cannot go stale, and the page is the same on every run and
machine (no time, no absolute path in it).  docs/screenshots.sh makes it again."""

from __future__ import annotations

from conftest import PRE_REL, REPO, run_app

COPY = REPO / "docs" / "pages" / "ch17-prenorm.html"


def test_the_committed_page_is_what_tracer_page_writes_now(tmp_path) -> None:
    out = tmp_path / "ch17-prenorm.html"
    r = run_app("page", PRE_REL, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert COPY.is_file(), "docs/pages/ch17-prenorm.html is missing: run docs/screenshots.sh"
    assert out.read_bytes() == COPY.read_bytes(), "docs/pages/ch17-prenorm.html is stale: run docs/screenshots.sh"


def test_the_page_is_the_same_on_every_run_and_names_no_folder(tmp_path) -> None:
    first, second = tmp_path / "a.html", tmp_path / "b" / "c.html"
    second.parent.mkdir()
    assert run_app("page", PRE_REL, "-o", str(first)).returncode == 0
    assert run_app("page", PRE_REL, "-o", str(second)).returncode == 0
    assert first.read_bytes() == second.read_bytes()
    text = first.read_text(encoding="utf-8")
    assert str(tmp_path) not in text and str(REPO) not in text
