"""--svg and --html on run, diff and graph: content, natural width, atomic writes, and refusing to lose the user's files."""

from __future__ import annotations

import html
import os
import re
import shutil
from xml.etree import ElementTree

import pytest
from conftest import POST, PRE, SPECS, run_app
from rich.table import Table
from rich.text import Text

from tracer.errors import UsageError
from tracer.views import export


def svg_text(path) -> str:
    """The characters an SVG shows, with rich's non-breaking spaces as spaces."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8"))).replace("\xa0", " ")


def html_text(path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


@pytest.fixture
def specs(tmp_path):
    a, b = tmp_path / "pre.yaml", tmp_path / "post.yaml"
    shutil.copy(PRE, a)
    shutil.copy(POST, b)
    return a, b


def test_run_exports_the_table_with_the_chapter_numbers(specs, tmp_path):
    a, _ = specs
    svg, page = tmp_path / "run.svg", tmp_path / "run.html"
    r = run_app("run", str(a), "--svg", str(svg), "--html", str(page))
    assert r.returncode == 0, r.stderr
    assert f"wrote {svg}" in r.stderr and f"wrote {page}" in r.stderr
    assert "residual1" in r.stdout  # the terminal still gets the table
    mark, rest = svg.read_text(encoding="utf-8").split("\n", 1)  # tracer's mark, then the picture
    assert mark.startswith("<!-- tracer ") and " svg sha256=" in mark and rest.startswith("<svg")
    assert ElementTree.fromstring(svg.read_bytes()).tag.endswith("svg")  # the comment keeps it one valid XML document
    mark, rest = page.read_text(encoding="utf-8").split("\n", 1)
    assert " html sha256=" in mark and rest.startswith("<!DOCTYPE html>")
    # Table 17.1: the first row's stages, to six decimals
    for text in (svg_text(svg), html_text(page)):
        for name in ("x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output"):
            assert re.search(rf"\b{name}\b", text), name
        for value in ("[0.999980, -0.999980]", "[0.000000, 1.999960]", "[0.000000, 1.999960, 0.999980]", "[1.999980, 2.999940]"):
            assert value in text
        assert "[B,T,F] = [1,3,3]" in text


def test_graph_exports_stages_and_shapes(specs, tmp_path):
    a, _ = specs
    svg, page = tmp_path / "g.svg", tmp_path / "g.html"
    r = run_app("graph", str(a), "--svg", str(svg), "--html", str(page))
    assert r.returncode == 0, r.stderr
    for text in (svg_text(svg), html_text(page)):
        assert "first residual path: residual1 = x + attention" in text
        assert "[B,H,T,T] = [1,2,3,3]" in text and "attn.weights" in text


def test_diff_exports_the_comparison(specs, tmp_path):
    a, b = specs
    svg = tmp_path / "d.svg"
    r = run_app("diff", str(a), str(b), "--svg", str(svg))
    assert r.returncode == 1, r.stderr  # the blocks differ; the export does not change the exit code
    text = svg_text(svg)
    assert "Structure" in text and "residual2" in text and "first difference" in text


def test_attention_heatmap_export(specs, tmp_path):
    a, _ = specs
    svg = tmp_path / "attn.svg"
    r = run_app("run", str(a), "--attention", "--svg", str(svg))
    assert r.returncode == 0, r.stderr
    text = svg_text(svg)
    assert "head 0" in text and "head 1" in text and "1.00" in text and "0.88" in text


def test_export_width_is_the_content_not_the_terminal(specs, tmp_path):
    a, _ = specs
    one, two = tmp_path / "one.svg", tmp_path / "two.svg"
    assert run_app("graph", str(a), "--svg", str(one), env={"COLUMNS": "40"}).returncode == 0
    assert run_app("graph", str(a), "--svg", str(two), env={"COLUMNS": "300"}).returncode == 0
    assert one.read_bytes() == two.read_bytes()  # same file whatever the terminal, and run to run
    width = max(len(line) for line in svg_text(one).splitlines())
    assert width < 200  # not the pipe's 1000 columns


def test_natural_width():
    assert export.natural_width(Text("x" * 150)) == 150
    t = Table()
    t.add_column("a")
    t.add_row("y" * 300)
    assert export.natural_width(t) == 304  # two borders and a cell of padding each side
    assert export.natural_width(Text("z")) == export.MIN_WIDTH


@pytest.mark.parametrize("cmd", ["run", "graph", "diff-a", "diff-b"])
def test_never_overwrites_an_input(specs, cmd):
    a, b = specs
    before = (a.read_bytes(), b.read_bytes())
    target = b if cmd == "diff-b" else a
    args = ["diff", str(a), str(b)] if cmd.startswith("diff") else [cmd, str(a)]
    for opt in ("--svg", "--html"):
        r = run_app(*args, opt, str(target))
        assert r.returncode == 2
        assert f"{opt} {target} would overwrite the input" in r.stderr
        assert r.stdout == ""
    assert (a.read_bytes(), b.read_bytes()) == before


def test_never_overwrites_an_input_by_another_name(specs, tmp_path):
    a, _ = specs
    os.link(a, tmp_path / "same.svg")
    r = run_app("run", str(a), "--svg", str(tmp_path / "same.svg"))
    assert r.returncode == 2 and "would overwrite the input" in r.stderr
    r = run_app("run", str(a), "--svg", str(tmp_path / "." / "pre.yaml"))
    assert r.returncode == 2 and "would overwrite the input" in r.stderr


def test_refuses_a_file_that_is_not_an_export(specs, tmp_path):
    a, _ = specs
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n", encoding="utf-8")
    r = run_app("graph", str(a), "--svg", str(notes))
    assert r.returncode == 2 and "exists and is not an SVG file tracer wrote; refusing to overwrite it" in r.stderr
    assert notes.read_text(encoding="utf-8") == "my notes\n"
    r = run_app("graph", str(a), "--html", str(notes))
    assert r.returncode == 2 and "is not an HTML file tracer wrote" in r.stderr


def test_replaces_an_earlier_export(specs, tmp_path):
    a, _ = specs
    svg = tmp_path / "g.svg"
    export.write_atomic(export.Target("svg", str(svg)), "<svg>STALE EXPORT</svg>")  # an earlier export, with tracer's mark
    assert run_app("graph", str(a), "--svg", str(svg)).returncode == 0
    assert "STALE" not in svg.read_text(encoding="utf-8") and "residual1" in svg_text(svg)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("where, message", [
    ("missing/x.svg", "cannot write there: '{folder}/missing' does not exist"),
    ("pre.yaml/x.svg", "cannot write there: '{folder}/pre.yaml' is not a folder"),
    (".", "is a directory; give a file name inside it"),
])
def test_unwritable_places_exit_2(specs, tmp_path, where, message):
    a, _ = specs
    r = run_app("graph", str(a), "--svg", str(tmp_path / where) if where != "." else str(tmp_path))
    assert r.returncode == 2
    assert message.format(folder=tmp_path) in r.stderr
    assert r.stdout == ""


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write into a read-only folder")
def test_read_only_folder_exit_2(specs, tmp_path):
    a, _ = specs
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        r = run_app("graph", str(a), "--svg", str(ro / "x.svg"))
        assert r.returncode == 2 and "is not writable" in r.stderr
    finally:
        ro.chmod(0o755)


def test_option_conflicts_exit_2(specs, tmp_path):
    a, _ = specs
    r = run_app("run", str(a), "--svg", str(tmp_path / "x.svg"), "--html", str(tmp_path / "x.svg"))
    assert r.returncode == 2 and "name the same file" in r.stderr
    r = run_app("run", str(a), "--json", "--svg", str(tmp_path / "x.svg"))
    assert r.returncode == 2 and "do not combine with --format json" in r.stderr
    assert not (tmp_path / "x.svg").exists()


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.svg"
    export.write_atomic(export.Target("svg", str(target)), "<svg>old</svg>")
    old = target.read_bytes()

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(UsageError, match=r"cannot write '.*report.svg': Permission denied"):
        export.write_atomic(export.Target("svg", str(target)), "<svg>new</svg>")
    assert target.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["report.svg"]


def test_wide_characters_get_their_full_width_in_svg():
    svg = '<text class="r1" x="0" y="20" textLength="24.4" clip-path="url(#c)">今天</text>'
    fixed = export.fix_wide_text(svg)
    assert 'textLength="48.8"' in fixed  # two characters, four cells of 12.2
    ascii_run = '<text x="0" textLength="24.4" clip-path="url(#c)">ab</text>'
    assert export.fix_wide_text(ascii_run) == ascii_run


def test_chinese_tokens_survive_the_export(tmp_path):
    svg = tmp_path / "ed.svg"
    r = run_app("run", str(SPECS / "encoder-decoder.yaml"), "--attention-stage", "decoder.blocks.0.cross_attention", "--svg", str(svg))
    assert r.returncode == 0, r.stderr
    text = svg_text(svg)
    assert "今天" in text and "today" in text


def test_a_folder_without_write_permission_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(UsageError, match=r"--svg out.svg: cannot write there: the folder '\.' is not writable"):
        export.check_targets("out.svg", None, [])


def test_html_in_chinese_gives_each_wide_character_two_cells(tmp_path):
    """A browser draws a CJK character about 1.6-2 columns wide: each run is boxed at exactly 2ch a character,
    so the table's borders stay in line (checked by hand in headless Chromium: before, every Chinese row drifted)."""
    import re

    from conftest import run_app

    page = tmp_path / "zh.html"
    r = run_app("run", PRE, "--lang", "zh", "--html", str(page))
    assert r.returncode == 0, r.stderr
    text = page.read_text(encoding="utf-8")
    code = text[text.index("<code"):]
    boxes = re.findall(r'<span style="display:inline-block;width:(\d+)ch;white-space:nowrap">([^<]*)</span>', code)
    assert boxes and all(int(w) == 2 * len(run) for w, run in boxes)
    outside = re.sub(r'<span style="display:inline-block;[^"]*">[^<]*</span>', "", code)
    assert not re.search("[\u4e00-\u9fff\uff0c\uff08\uff09\uff1a]", re.sub(r"<[^>]*>", "", outside))
    assert "<title>" not in code and "残差" in text  # the page's text is unchanged, only boxed
