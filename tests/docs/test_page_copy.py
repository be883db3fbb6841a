"""docs/pages/ch17-prenorm.html, the page of Table 17.1's block the guide links to, is exactly what
`tracer page specs/ch17-prenorm.yaml` writes now (every word and printed number; the exact float64 values to the last
bit a NumPy build's exp may round differently): it cannot go stale, and the page is the same on every run (no time,
no absolute path in it).  docs/screenshots.sh makes it again."""

from __future__ import annotations

import base64
import re

import numpy as np
from conftest import PRE_REL, REPO, run_app

COPY = REPO / "docs" / "pages" / "ch17-prenorm.html"


def test_the_committed_page_is_what_tracer_page_writes_now(tmp_path) -> None:
    out = tmp_path / "ch17-prenorm.html"
    r = run_app("page", PRE_REL, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert COPY.is_file(), "docs/pages/ch17-prenorm.html is missing: run docs/screenshots.sh"
    written, committed = out.read_text(encoding="utf-8"), COPY.read_text(encoding="utf-8")
    stale = "docs/pages/ch17-prenorm.html is stale: run docs/screenshots.sh"
    # Every word, string and formatted number must be the same; the exact float64 payloads may differ in the last
    # bit where another NumPy build's exp rounds the other way (the header's checksum then differs too).
    assert without_payloads(written) == without_payloads(committed), stale
    ours, theirs = payloads(written), payloads(committed)
    assert len(ours) == len(theirs), stale
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and np.allclose(a, b, rtol=4 * np.finfo(float).eps, atol=0.0, equal_nan=True), stale


B64 = re.compile(r'"b64":"([A-Za-z0-9+/=]*)"')


def without_payloads(page: str) -> str:
    return B64.sub('"b64":""', page.split("\n", 1)[1])  # the first line is the checksum of the whole page


def payloads(page: str) -> list[np.ndarray]:
    return [np.frombuffer(base64.b64decode(m), dtype="<f8") for m in B64.findall(page)]


def test_the_copy_check_sees_a_changed_value() -> None:
    text = COPY.read_text(encoding="utf-8")
    first = B64.search(text)
    assert first is not None
    values = payloads(text)[0].copy()
    values[0] += 1e-9
    changed = text.replace(first.group(1), base64.b64encode(values.tobytes()).decode("ascii"), 1)
    assert without_payloads(changed) == without_payloads(text)
    assert not np.allclose(payloads(changed)[0], payloads(text)[0], rtol=4 * np.finfo(float).eps, atol=0.0)


def test_the_page_is_the_same_on_every_run_and_names_no_folder(tmp_path) -> None:
    first, second = tmp_path / "a.html", tmp_path / "b" / "c.html"
    second.parent.mkdir()
    assert run_app("page", PRE_REL, "-o", str(first)).returncode == 0
    assert run_app("page", PRE_REL, "-o", str(second)).returncode == 0
    assert first.read_bytes() == second.read_bytes()
    text = first.read_text(encoding="utf-8")
    assert str(tmp_path) not in text and str(REPO) not in text
