"""No output replaces an input: every file a command reads (the spec, each weight file and shard, the index,
config.json) is refused as an output, with or without --force; and a file that appears at an output's path
during the run is never replaced (unless --force and it is provably tracer's own)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import SPECS, assert_refused, example_module, run_app, run_cli

from tracer import files
from tracer.errors import UsageError

make_gpt2 = example_module("checkpoints/tiny_gpt2.py").make


def digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and the SHA-256 of its bytes: what must be unchanged after a refusal."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def saved_stack(tmp_path: Path) -> Path:
    """A spec that reads its weights from a --save archive (layout: tracer): the documented round trip."""
    a = tmp_path / "a.yaml"
    a.write_text((SPECS / "stack-2-layers.yaml").read_text())
    r = run_app("run", str(a), "--save", str(tmp_path / "stack.npz"), "--with-weights")
    assert r.returncode == 0, r.stderr
    b = tmp_path / "b.yaml"
    b.write_text(a.read_text().replace("seed: 7", "weights: {file: stack.npz, layout: tracer}"))
    return b


@pytest.mark.parametrize("force", [(), ("--force",)])
@pytest.mark.parametrize("command", ["run", "grad"])
def test_save_never_replaces_the_checkpoint_the_spec_reads(saved_stack: Path, command: str, force: tuple[str, ...]) -> None:
    before = digests(saved_stack.parent)
    r = run_app(command, str(saved_stack), "--save", str(saved_stack.parent / "stack.npz"), *force)
    assert_refused(r, "--save", "stack.npz", "input")
    assert digests(saved_stack.parent) == before


def test_the_round_trip_still_runs_and_saves_elsewhere(saved_stack: Path) -> None:
    r = run_app("run", str(saved_stack), "--save", str(saved_stack.parent / "again.npz"))
    assert r.returncode == 0, r.stderr
    assert (saved_stack.parent / "again.npz").is_file()


def test_an_export_never_replaces_a_weight_file_even_with_force(saved_stack: Path) -> None:
    before = digests(saved_stack.parent)
    r = run_app("run", str(saved_stack), "--html", str(saved_stack.parent / "stack.npz"), "--force")
    assert_refused(r, "--html", "stack.npz", "input")
    assert digests(saved_stack.parent) == before


def test_force_never_replaces_a_weight_file_named_by_a_file_reference(tmp_path: Path) -> None:
    import numpy as np

    np.savez(tmp_path / "w.npz", attn_q=np.eye(4))
    spec = tmp_path / "s.yaml"
    spec.write_text("dims: {C: 4, H: 2, F: 8}\nseed: 1\ninput: {tokens: [0, 3, 4]}\n"
                    "weights:\n  attn: {w_q: {file: w.npz, key: attn_q}}\n")
    assert run_app("validate", str(spec)).returncode == 0
    before = digests(tmp_path)
    for out in ("--save", "--svg"):
        r = run_app("run", str(spec), out, str(tmp_path / "w.npz"), "--force")
        assert_refused(r, out, "w.npz", "input")
    assert digests(tmp_path) == before


@pytest.mark.parametrize("target", ["model.safetensors", "config.json"])
def test_import_never_writes_its_spec_over_the_checkpoint(tmp_path: Path, target: str) -> None:
    make_gpt2(str(tmp_path / "m"), layers=1, dtype="float64")
    before = digests(tmp_path)
    r = run_cli("import", str(tmp_path / "m"), "-o", str(tmp_path / "m" / target), "--force")
    assert_refused(r, "-o", target, "input")
    assert digests(tmp_path) == before


def test_an_input_reached_through_a_link_is_refused(saved_stack: Path) -> None:
    folder = saved_stack.parent
    (folder / "alias.npz").symlink_to(folder / "stack.npz")
    spec = folder / "c.yaml"
    spec.write_text(saved_stack.read_text().replace("stack.npz", "alias.npz"))
    before = digests(folder)
    r = run_app("run", str(spec), "--save", str(folder / "stack.npz"), "--force")
    assert_refused(r, "--save", "input")
    assert digests(folder) == before


# -- a file that appears at the path while the command runs ----------------------------------------------

def _ours(path: Path) -> None:
    """A file tracer provably wrote (its mark intact), as another tracer run would leave it."""
    body = b"<svg/>\n"
    path.write_bytes(files.text_mark("svg", body) + body)


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("appears", ["foreign", "ours"])
def test_a_file_that_appears_during_the_run_is_not_replaced(tmp_path: Path, appears: str, force: bool) -> None:
    out = tmp_path / "t.svg"
    files.check_output(str(out), "--svg", [], "svg", force)  # before the run: nothing there
    if appears == "ours":
        _ours(out)
    else:
        out.write_bytes(b"my own work\n")
    before = out.read_bytes()
    if appears == "ours" and force:  # --force, and provably tracer's own: replaced
        files.write_atomic(str(out), lambda fh: fh.write(b"new"), "--svg", "svg", force)
        assert out.read_bytes() == b"new"
        return
    with pytest.raises(UsageError, match="appeared or changed during the run"):
        files.write_atomic(str(out), lambda fh: fh.write(b"new"), "--svg", "svg", force)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.svg"]  # no temporary file left


def test_tracers_own_earlier_file_is_still_replaced(tmp_path: Path) -> None:
    out = tmp_path / "t.svg"
    _ours(out)
    files.check_output(str(out), "--svg", [], "svg")
    files.write_atomic(str(out), lambda fh: fh.write(b"new"), "--svg", "svg")
    assert out.read_bytes() == b"new"


def test_an_own_file_swapped_for_another_during_the_run_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "t.svg"
    _ours(out)
    files.check_output(str(out), "--svg", [], "svg")
    out.unlink()
    _ours(out)  # another run's file, in its place
    with pytest.raises(UsageError, match="appeared or changed during the run"):
        files.write_atomic(str(out), lambda fh: fh.write(b"new"), "--svg", "svg")


def test_the_api_never_saves_over_a_file_its_spec_read(saved_stack: Path) -> None:
    import tracer

    t = tracer.trace(str(saved_stack))
    before = digests(saved_stack.parent)
    for force in (False, True):
        with pytest.raises(tracer.TracerError, match="input"):
            t.save(str(saved_stack.parent / "stack.npz"), force=force)
    assert digests(saved_stack.parent) == before
