"""The rule for every file tracer writes (tracer/outputs.py, docs/files.md), case by case.

Each case is a way to lose a user's data: a foreign ZIP, XML or HTML file replaced, --save and
--svg on one path, symlinks replaced, read-only files replaced, temporary files left by SIGTERM,
a file created at the target during the run.  Every test compares the foreign file's bytes (and
what lstat says) before and after.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import PRE, REPO, assert_refused, run_app, write_spec

from tracer import files as outputs
from tracer.engine import executor
from tracer.errors import UsageError
from tracer.spec import load_spec


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    p = tmp_path / "ch17.yaml"
    shutil.copy(PRE, p)
    return p


def snapshot(path: Path) -> tuple[object, ...]:
    """What must not change: the bytes (through a link: the target's) and what lstat says."""
    st = os.lstat(path)
    body = path.read_bytes() if path.is_file() else None
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_ino, st.st_size, st.st_mtime_ns, link, body)


def docx(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", "<w:document>my thesis</w:document>")
    return path


def no_temporary_left(folder: Path) -> None:
    assert [p.name for p in folder.iterdir() if outputs.TMP_TAG in p.name] == []


# -- 1, 2: a magic number is not proof ---------------------------------------------------------

@pytest.mark.parametrize("make", [
    pytest.param(lambda p: docx(p), id="docx"),
    pytest.param(lambda p: (np.savez(p, x=np.arange(3)), p)[1], id="npz-written-by-numpy"),
    pytest.param(lambda p: (p.write_bytes(b"PK\x03\x04 photos"), p)[1], id="zip-magic-only"),
])
def test_save_never_replaces_a_zip_tracer_did_not_write(spec: Path, tmp_path: Path, make) -> None:
    target = make(tmp_path / "thesis.npz")
    before = snapshot(target)
    assert_refused(run_app("run", str(spec), "--save", str(target)), "--save", "is not an NPZ file tracer wrote", "--force")
    assert snapshot(target) == before
    no_temporary_left(tmp_path)


@pytest.mark.parametrize("option, name, text", [
    ("--svg", "pom.xml", '<?xml version="1.0"?>\n<project><artifactId>mine</artifactId></project>\n'),
    ("--svg", "logo.svg", '<svg xmlns="http://www.w3.org/2000/svg"><circle r="4"/></svg>\n'),
    ("--html", "index.html", "<!DOCTYPE html>\n<html><body>my page</body></html>\n"),
    ("--html", "empty.html", ""),
])
def test_exports_never_replace_a_file_tracer_did_not_write(spec: Path, tmp_path: Path, option: str, name: str, text: str) -> None:
    target = tmp_path / name
    target.write_text(text, encoding="utf-8")
    before = snapshot(target)
    for cmd in (["run", str(spec)], ["graph", str(spec)], ["diff", str(spec), str(spec)]):
        assert_refused(run_app(*cmd, option, str(target)), option, "file tracer wrote; refusing to overwrite it")
    assert snapshot(target) == before


def test_a_tracer_export_edited_since_is_no_longer_tracers(spec: Path, tmp_path: Path) -> None:
    svg = tmp_path / "g.svg"
    assert run_app("graph", str(spec), "--svg", str(svg)).returncode == 0
    assert run_app("graph", str(spec), "--svg", str(svg)).returncode == 0  # its own file: replaced
    with svg.open("a", encoding="utf-8") as fh:
        fh.write("<!-- my annotation -->\n")
    before = snapshot(svg)
    assert_refused(run_app("graph", str(spec), "--svg", str(svg)), "is not an SVG file tracer wrote")
    assert snapshot(svg) == before


def test_an_npz_edited_since_is_no_longer_tracers(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.npz"
    assert run_app("run", str(spec), "--save", str(out)).returncode == 0
    with zipfile.ZipFile(out, "a") as z:  # a member added by hand; the zip comment (tracer's mark) stays
        z.writestr("notes.npy", b"mine")
    before = snapshot(out)
    assert_refused(run_app("run", str(spec), "--save", str(out)), "is not an NPZ file tracer wrote")
    assert snapshot(out) == before


def test_force_replaces_a_foreign_file_but_nothing_else(spec: Path, tmp_path: Path) -> None:
    target = docx(tmp_path / "old.npz")
    assert run_app("run", str(spec), "--save", str(target), "--force").returncode == 0
    with np.load(target) as z:
        assert "output" in z.files
    page = tmp_path / "index.html"
    page.write_text("<html>mine</html>", encoding="utf-8")
    assert run_app("graph", str(spec), "--html", str(page), "--force").returncode == 0
    assert "mine" not in page.read_text(encoding="utf-8")
    # --force waives the proof of authorship only: links, read-only files and inputs stay refused
    link = tmp_path / "link.npz"
    link.symlink_to(target)
    assert_refused(run_app("run", str(spec), "--save", str(link), "--force"), "is a symbolic link")
    target.chmod(0o444)
    assert_refused(run_app("run", str(spec), "--save", str(target), "--force"), "is read-only")
    assert_refused(run_app("run", str(spec), "--svg", str(spec), "--force"), "would overwrite the input")


# -- 3: two outputs on one path ------------------------------------------------------------------

def test_save_and_an_export_never_share_a_file(spec: Path, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "d")
    pairs = [
        (str(tmp_path / "t.npz"), str(tmp_path / "t.npz")),
        (str(tmp_path / "t.npz"), str(tmp_path / "." / "t.npz")),
        (str(tmp_path / "d" / "t.npz"), str(tmp_path / "alias" / "t.npz")),  # the same file through a linked folder
    ]
    for save, other in pairs:
        for option in ("--svg", "--html"):
            assert_refused(run_app("run", str(spec), "--save", save, option, other), "--save and", "name the same file")
    assert_refused(run_app("run", str(spec), "--svg", pairs[0][0], "--html", pairs[0][1]), "--svg and --html name the same file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias", "ch17.yaml", "d"]


def test_save_and_an_export_never_share_a_hard_linked_file(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.npz"
    assert run_app("run", str(spec), "--save", str(out)).returncode == 0
    os.link(out, tmp_path / "same.svg")
    before = snapshot(out)
    assert_refused(run_app("run", str(spec), "--save", str(out), "--svg", str(tmp_path / "same.svg")), "name the same file")
    assert snapshot(out) == before


# -- 4: symbolic links -------------------------------------------------------------------------

@pytest.mark.parametrize("points_to", ["tracer-npz", "foreign", "dangling", "folder"])
def test_a_symlink_is_never_followed_nor_replaced(spec: Path, tmp_path: Path, points_to: str) -> None:
    real = tmp_path / "real.npz"
    if points_to == "tracer-npz":
        assert run_app("run", str(spec), "--save", str(real)).returncode == 0
    elif points_to == "foreign":
        docx(real)
    elif points_to == "folder":
        real.mkdir()
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    before = snapshot(link), (snapshot(real) if points_to != "dangling" else None)
    assert_refused(run_app("run", str(spec), "--save", str(link)), "is a symbolic link; tracer never writes through or over a link")
    for option in ("--svg", "--html"):
        assert_refused(run_app("graph", str(spec), option, str(link)), "is a symbolic link")
    assert (snapshot(link), (snapshot(real) if points_to != "dangling" else None)) == before
    assert not real.exists() if points_to == "dangling" else True


@pytest.mark.skipif(not os.path.islink("/dev/stdout"), reason="/dev/stdout is not a symbolic link here")
def test_svg_to_dev_stdout_never_replaces_the_system_link(spec: Path, tmp_path: Path) -> None:
    before = snapshot(Path("/dev/stdout"))
    with (tmp_path / "out.txt").open("w") as fh:  # stdout redirected to a file, as in the report
        r = subprocess.run([sys.executable, "-m", "tracer", "graph", str(spec), "--svg", "/dev/stdout"], cwd=REPO, stdout=fh,
                           stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert r.returncode == 2 and "is a symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert snapshot(Path("/dev/stdout")) == before


def test_tracer_new_never_writes_through_a_link(tmp_path: Path) -> None:
    dangling = tmp_path / "new.yaml"
    dangling.symlink_to(tmp_path / "elsewhere.yaml")
    assert_refused(run_app("new", "--preset", "ch17", "-o", str(dangling)), "is a symbolic link")
    assert not (tmp_path / "elsewhere.yaml").exists() and os.path.islink(dangling)


# -- 5: read-only files, checked from the mode bits (root bypasses permissions) ------------------------

@pytest.mark.parametrize("mode", [0o444, 0o400, 0o555, 0o044])
def test_a_read_only_file_is_never_replaced_even_by_root(spec: Path, tmp_path: Path, mode: int) -> None:
    out = tmp_path / "t.npz"
    assert run_app("run", str(spec), "--save", str(out)).returncode == 0  # tracer's own file, then made read-only
    out.chmod(mode)
    before = snapshot(out)
    assert_refused(run_app("run", str(spec), "--save", str(out)), "is read-only", f"mode {mode:04o}")
    assert snapshot(out) == before


def test_mode_bits_are_read_for_the_class_this_user_is_in() -> None:
    me, group = os.geteuid(), os.getegid()
    other_uid, other_gid = me + 12345, group + 12345
    st = lambda mode, uid, gid: os.stat_result((stat.S_IFREG | mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))  # noqa: E731
    assert outputs.mode_allows_write(st(0o644, me, group))
    assert not outputs.mode_allows_write(st(0o444, me, group))
    assert not outputs.mode_allows_write(st(0o464, me, group))  # the owner's bits count, not the group's
    assert outputs.mode_allows_write(st(0o464, other_uid, group))
    assert not outputs.mode_allows_write(st(0o644, other_uid, other_gid))  # another user's file: even root leaves it
    assert outputs.mode_allows_write(st(0o646, other_uid, other_gid))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to run as another user (setpriv)")
def test_another_users_run_leaves_a_read_only_file(spec: Path) -> None:
    # pytest's tmp_path lies under a folder only root may enter: work in a fresh world-readable one instead
    folder = Path(tempfile.mkdtemp(prefix="tracer-other-user-"))
    try:
        folder.chmod(0o777)
        theirs = folder / "spec.yaml"
        shutil.copyfile(spec, theirs)
        theirs.chmod(0o644)
        out = folder / "t.npz"
        assert run_app("run", str(theirs), "--save", str(out)).returncode == 0
        out.chmod(0o444)
        before = snapshot(out)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "tracer", "run",
                            str(theirs), "--save", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=str(REPO), HOME=str(folder)))
        if "No module named" in r.stderr or ("Permission denied" in r.stderr and "tracer:" not in r.stderr):
            pytest.skip("the unprivileged user cannot read this checkout or its packages")
        assert r.returncode == 2 and "is read-only" in r.stderr, r.stderr
        assert snapshot(out) == before
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- 6: temporary files are removed on every exit path ----------------------------------------------

def test_the_temporary_file_is_named_after_the_target_and_tracer(tmp_path: Path) -> None:
    seen: list[str] = []

    def write(fh) -> None:
        seen.extend(p.name for p in tmp_path.iterdir())
        fh.write(b"x")

    outputs.write_atomic(str(tmp_path / "report.svg"), write, "--svg", "svg", force=True)
    assert len(seen) == 1 and seen[0].startswith(".report.svg.tracer-") and seen[0].endswith(".tmp")
    no_temporary_left(tmp_path)


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt(), SystemExit(143), ValueError("a bug")])
def test_any_exception_while_writing_removes_the_temporary(tmp_path: Path, error: BaseException) -> None:
    def write(fh) -> None:
        fh.write(b"half")
        raise error

    with pytest.raises((UsageError, type(error))):
        outputs.write_atomic(str(tmp_path / "t.npz"), write, "--save", "npz")
    assert list(tmp_path.iterdir()) == []


def _with_tracers_signals(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh Python with tracer's signal handlers installed (``signal`` and ``process`` imported)."""
    code = "import signal\nfrom tracer import process\nprocess.install_signals()\n" + code
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_a_signal_during_a_held_step_is_raised_when_it_ends() -> None:
    """A signal is delivered to any thread (NumPy's too), and Python runs the handler in the main thread at
    once, so blocking it is not enough: signals_held notes it and raises it when the step is done."""
    code = (
        "import os\n"
        "try:\n"
        "    with process.signals_held():\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        for _ in range(100000): pass\n"
        "        print('step finished', flush=True)\n"
        "except process.Interrupted as e:\n"
        "    print('raised after it', e.exit_code, flush=True)\n"
    )
    r = _with_tracers_signals(code)
    assert r.stdout.splitlines() == ["step finished", "raised after it 143"], (r.stdout, r.stderr)


@pytest.mark.parametrize("where", ["weakref callback", "__del__"])
def test_a_signal_where_python_ignores_exceptions_still_stops_tracer(where: str) -> None:
    """A handler that runs inside a weakref callback (importlib's module locks, while tracer starts) or a
    __del__ cannot stop the program there: Python prints 'Exception ignored' with a traceback and goes on.
    tracer delivers it again a moment later (seen in CI: Ctrl-C at start-up, a traceback, the run went on)."""
    trigger = {
        "weakref callback": "class A: pass\na = A()\nr = weakref.ref(a, lambda _: signal.raise_signal(signal.SIGINT))\n",
        "__del__": "class A:\n    def __del__(self): signal.raise_signal(signal.SIGINT)\na = A()\n",
    }[where]
    code = (
        "import time, weakref\n"
        + trigger +
        "try:\n"
        "    del a\n"
        "    for _ in range(2000): time.sleep(0.001)\n"
        "    print('went on', flush=True)\n"
        "finally:\n"
        "    print('cleanup ran', flush=True)\n"
    )
    r = _with_tracers_signals(code)
    assert r.returncode == 130, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == ["cleanup ran"]
    assert "Traceback" not in r.stderr and "ignored" not in r.stderr, r.stderr


def _big_spec(tmp_path: Path) -> Path:
    return write_spec(tmp_path, "dims: {B: 4, T: 64, C: 256, H: 4, F: 1024}\nseed: 0\ninput: {x: random}\n", "big.yaml")


@pytest.mark.slow  # up to six runs of a big spec each, racing a signal against the write
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_save_leaves_no_temporary_and_no_half_file(tmp_path: Path, sig: int) -> None:
    spec = _big_spec(tmp_path)
    out = tmp_path / "t.npz"
    caught = 0
    for _ in range(6):
        p = subprocess.Popen([sys.executable, "-m", "tracer", "run", str(spec), "--save", str(out), "--force"], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        deadline = time.monotonic() + 60
        while p.poll() is None and time.monotonic() < deadline:
            if any(outputs.TMP_TAG in n for n in os.listdir(tmp_path)):  # the archive is being written: stop it now
                p.send_signal(sig)
                break
            time.sleep(0.0005)
        _, err = p.communicate(timeout=120)
        assert "Traceback" not in err, err
        no_temporary_left(tmp_path)
        if p.returncode == 128 + sig:
            caught += 1
            assert err.strip().endswith("interrupted" if sig == signal.SIGINT else "terminated")
        else:
            assert p.returncode == 0, err  # finished before the signal came: the whole archive
            with np.load(out) as z:
                assert "output" in z.files
            out.unlink()
        if caught >= 2:
            break
    assert caught, "the signal never arrived while the archive was being written"


# -- 7: the target is checked again at the moment of the move -----------------------------------------

@pytest.mark.parametrize("earlier", [None, "tracer"])
def test_a_file_that_appears_during_the_run_is_not_overwritten(spec: Path, tmp_path: Path, earlier: str | None) -> None:
    target = tmp_path / "t.npz"
    if earlier:
        assert run_app("run", str(spec), "--save", str(target)).returncode == 0
    outputs.check_output(str(target), "--save", [], "npz")  # fine before the run

    def write(fh) -> None:  # meanwhile, someone else writes a file there
        fh.write(b"tracer's archive")
        target.unlink(missing_ok=True)
        docx(target)

    with pytest.raises(UsageError, match="it appeared or changed during the run, and nothing was written"):
        outputs.write_atomic(str(target), write, "--save", "npz")
    assert zipfile.ZipFile(target).read("word/document.xml") == b"<w:document>my thesis</w:document>"
    no_temporary_left(tmp_path)


def test_a_link_that_appears_during_the_run_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "t.svg"

    def write(fh) -> None:
        fh.write(b"x")
        target.symlink_to("/dev/null")

    with pytest.raises(UsageError, match="is a symbolic link"):
        outputs.write_atomic(str(target), write, "--svg", "svg", force=True)
    assert os.readlink(target) == "/dev/null"


# -- 8: any stage name, every stage in the archive ----------------------------------------------------

NAMES = ["file", "allow_pickle", "args", "kwds", "self", "compress", "__tracer__", "a-b", "npy"]


def test_save_keeps_every_stage_whatever_its_name(tmp_path: Path) -> None:
    steps = "\n".join(f"    - {{name: '{n}', op: relu, in: '{prev}'}}" for prev, n in zip(["x", *NAMES], NAMES, strict=False))
    spec = write_spec(tmp_path, f"dims: {{B: 2, T: 3, C: 4, H: 2, F: 6}}\nseed: 1\ninput: {{x: random}}\nblock:\n  steps:\n{steps}\n")
    out = tmp_path / "t.npz"
    r = run_app("run", str(spec), "--save", str(out))
    assert r.returncode == 0, r.stderr
    trace = executor.run(load_spec(str(spec)))
    assert set(NAMES) <= set(trace.stages)
    with np.load(out, allow_pickle=False) as z:
        assert sorted(z.files) == sorted(trace.stages)
        for name, stage in trace.stages.items():
            assert z[name].dtype == stage.array.dtype and np.array_equal(z[name], stage.array), name
            assert z[name].tobytes() == stage.array.tobytes(), name  # bit for bit
    assert outputs.proves_ours(str(out), "npz")


# -- every refusal has its Chinese ---------------------------------------------------------------------

@pytest.mark.parametrize("make_refusal", [
    lambda d: run_app("run", str(docx(d / "t.npz").parent / "ch17.yaml"), "--save", str(d / "t.npz"), "--lang", "zh"),
    lambda d: (os.symlink(d / "x", d / "l.svg"), run_app("graph", str(d / "ch17.yaml"), "--svg", str(d / "l.svg"), "--lang", "zh"))[1],
    lambda d: run_app("run", str(d / "ch17.yaml"), "--save", str(d / "a.npz"), "--html", str(d / "a.npz"), "--lang", "zh"),
    lambda d: ((d / "ro.svg").write_text("x"), (d / "ro.svg").chmod(0o444),
               run_app("graph", str(d / "ch17.yaml"), "--svg", str(d / "ro.svg"), "--force", "--lang", "zh"))[2],
    lambda d: run_app("validate", str(d / "ch17.yaml"), "--max-memory", "9" * 400, "--lang", "zh"),
])
def test_refusals_are_translated(spec: Path, tmp_path: Path, make_refusal) -> None:
    import re

    r = make_refusal(tmp_path)
    assert r.returncode == 2
    words = re.sub(r"'[^']*'|--[\w-]+|[\w./-]+\.(npz|svg|html|yaml)|\b\d+\b|tracer|EiB|none|sha256", "", r.stderr)
    assert re.search(r"[\u4e00-\u9fff]", r.stderr) and not re.search(r"\b[a-z]{4,}\b", words), r.stderr
