"""Property: whatever paths --save, --svg and --html name, nothing that is not tracer's own output changes.

Hypothesis builds a folder of every kind of thing an output path can meet: files of other formats
(a .docx, an XML and an HTML page, an .npz NumPy wrote, a bare ZIP magic, an empty file), tracer's
own earlier outputs (intact, edited, read-only), symbolic links (to those, to a folder, to
/dev/null, dangling), hard links, a folder, a FIFO, the command's own input, and the same path
named twice.  It then runs run, graph or diff with one to three outputs, with or without --force,
and checks the rule of tracer/outputs.py (docs/files.md):
- exit 0 or 2, never a traceback; on 2 the folder is exactly as before;
- a path may change only if an option names it directly (not through a link), it is a regular
  file the mode bits let this user write, not the input, and it carries tracer's intact mark or
  --force was given; every other entry keeps its bytes and what lstat says;
- every output written is a regular file with tracer's mark; no temporary file is left.

Derandomized like tests/fuzz/test_fuzz.py; TRACER_FUZZ_RANDOM=1 explores new cases, TRACER_FUZZ_EXAMPLES=N runs more.
150 scenes under `python -m pytest --slow` or when CI is set, as tests/fuzz/test_fuzz.py; 25 in a plain run.
"""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from conftest import PRE, run_app, slow_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer import files as outputs
from tracer.views import export

N = int(os.environ.get("TRACER_FUZZ_EXAMPLES") or (150 if os.environ.get("CI") or slow_run() else 25))
FUZZ = settings(max_examples=N, deadline=None, database=None, derandomize=not os.environ.get("TRACER_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

TRACER_MADE = {"tracer-npz": "npz", "tracer-svg": "svg", "tracer-html": "html"}
KINDS = ["new", "docx", "xml", "html-page", "numpy-npz", "zip-magic", "empty", *TRACER_MADE, "tracer-svg-edited",
         "read-only-tracer-npz", "read-only-foreign", "link-to-foreign", "link-to-tracer-npz", "link-to-folder", "link-to-dev-null",
         "dangling-link", "hard-link-to-tracer-svg", "folder", "fifo", "input", "same-as-previous"]


def make(folder: Path, kind: str, name: str, spec: Path, previous: str | None) -> str:
    """Create a thing of this kind in folder; return the path an option will name."""
    p = folder / name
    if kind == "new":
        pass
    elif kind == "docx":
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("word/document.xml", "<w:document>thesis</w:document>")
    elif kind == "xml":
        p.write_text('<?xml version="1.0"?>\n<project/>\n', encoding="utf-8")
    elif kind == "html-page":
        p.write_text("<!DOCTYPE html>\n<html><body>mine</body></html>\n", encoding="utf-8")
    elif kind == "numpy-npz":
        with p.open("wb") as fh:
            np.savez(fh, x=np.arange(4))
    elif kind == "zip-magic":
        p.write_bytes(b"PK\x03\x04 photos")
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind in TRACER_MADE or kind in ("tracer-svg-edited", "read-only-tracer-npz", "link-to-tracer-npz", "hard-link-to-tracer-svg"):
        own = p if kind in TRACER_MADE or kind in ("tracer-svg-edited", "read-only-tracer-npz") else folder / f"own-{name}"
        made = TRACER_MADE.get(kind, "npz" if "npz" in kind else "svg")
        if made == "npz":
            outputs.write_atomic(str(own), _tiny_npz, "--save", "npz")
        else:
            export.write_atomic(export.Target(made, str(own)), f"<{made}>earlier</{made}>")
        if kind == "tracer-svg-edited":
            with own.open("a", encoding="utf-8") as fh:
                fh.write("<!-- edited -->\n")
        elif kind == "read-only-tracer-npz":
            own.chmod(0o444)
        elif kind == "link-to-tracer-npz":
            p.symlink_to(own)
        elif kind == "hard-link-to-tracer-svg":
            os.link(own, p)
    elif kind == "read-only-foreign":
        p.write_text("notes\n", encoding="utf-8")
        p.chmod(0o444)
    elif kind == "link-to-foreign":
        (folder / f"real-{name}").write_text("mine\n", encoding="utf-8")
        p.symlink_to(folder / f"real-{name}")
    elif kind == "link-to-folder":
        (folder / f"dir-{name}").mkdir()
        p.symlink_to(folder / f"dir-{name}")
    elif kind == "link-to-dev-null":
        p.symlink_to(os.devnull)
    elif kind == "dangling-link":
        p.symlink_to(folder / f"nowhere-{name}")
    elif kind == "folder":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "input":
        return str(spec)
    elif kind == "same-as-previous" and previous is not None:
        return previous
    return str(p)


def _tiny_npz(fh: Any) -> None:
    from tracer.views.npz import write_npz

    write_npz(fh, {"x": np.arange(3.0)})


def snapshot(folder: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under folder: its type, mode, inode, size, mtime, link target and bytes."""
    out: dict[str, tuple[object, ...]] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            st_ = os.lstat(p)
            body = p.read_bytes() if stat.S_ISREG(st_.st_mode) else None
            link = os.readlink(p) if stat.S_ISLNK(st_.st_mode) else None
            out[str(p)] = (stat.S_IFMT(st_.st_mode), stat.S_IMODE(st_.st_mode), st_.st_ino, st_.st_size, st_.st_mtime_ns, link, body)
    return out


def replaceable(path: str, spec: Path, force: bool, kind: str) -> bool:
    """May tracer change what is at this path (named directly by an option)?"""
    try:
        st_ = os.lstat(path)
    except FileNotFoundError:
        return True
    if not stat.S_ISREG(st_.st_mode) or os.path.samefile(path, spec) or not outputs.mode_allows_write(st_):
        return False
    return force or outputs.proves_ours(path, kind)


COMMANDS = {"run": ("--save", "--svg", "--html"), "graph": ("--svg", "--html"), "diff": ("--svg", "--html", "--page"), "page": ("--output",)}


@st.composite
def scenes(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]], bool]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    options = draw(st.lists(st.sampled_from(COMMANDS[command]), min_size=1, max_size=len(COMMANDS[command]), unique=True))
    kinds = [draw(st.sampled_from(KINDS)) for _ in options]
    return command, list(zip(options, kinds, strict=True)), draw(st.booleans())


@FUZZ
@given(scene=scenes())
def test_no_foreign_file_ever_changes(tmp_path_factory: Any, scene: tuple[str, list[tuple[str, str]], bool]) -> None:
    command, picks, force = scene
    folder = tmp_path_factory.mktemp("out")
    spec = folder / "spec.yaml"
    shutil.copy(PRE, spec)
    named: list[tuple[str, str]] = []
    previous = None
    for i, (option, kind) in enumerate(picks):
        previous = make(folder, kind, f"o{i}.{option[2:]}", spec, previous)
        named.append((option, previous))
    before = snapshot(folder)
    kinds = {"--save": "npz", "--svg": "svg", "--html": "html", "--page": "html", "--output": "html"}
    allowed = {p for opt, p in named if replaceable(p, spec, force, kinds[opt])}

    args = [command, str(spec), *([str(spec)] if command == "diff" else [])]
    for option, path in named:
        args += [option, path]
    r = run_app(*args, *(["--force"] if force else []))

    assert r.returncode in (0, 1, 2), (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    after = snapshot(folder)
    assert not [p for p in after if outputs.TMP_TAG in p], "a temporary file was left"
    if r.returncode == 2:
        assert after == before, r.stderr  # refused before anything was written
        return
    paths = [p for _, p in named]
    assert len({os.path.realpath(p) for p in paths}) == len(paths)  # accepted only if every output has its own file
    for path, state in before.items():
        if path not in allowed:
            assert after.get(path) == state, (path, r.stderr)
    for option, path in named:
        assert path in allowed, (option, path, r.stderr)
        assert stat.S_ISREG(os.lstat(path).st_mode) and outputs.proves_ours(path, kinds[option])
