"""--save FILE.npz: every recorded array under its stage name, written atomically, never over the user's files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import PRE, assert_refused, run_app, run_cli

from tracer.engine import executor
from tracer.spec import load_spec, memory


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    p = tmp_path / "ch17.yaml"
    shutil.copy(PRE, p)
    return p


def test_save_writes_every_stage_bit_for_bit(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.npz"
    r = run_cli("run", str(spec), "--save", str(out))
    assert r.returncode == 0, r.stderr
    trace = executor.run(load_spec(str(spec)))
    with np.load(out) as z:
        assert sorted(z.files) == sorted(trace.stages)
        for name, stage in trace.stages.items():
            assert np.array_equal(z[name], stage.array), name
        assert z["output"][0, 1].tolist() == pytest.approx([0.999912, 1.476742], abs=1e-6)  # Table 17.1's Y at t = 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_save_under_record_stats_keeps_statistics(spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "STATS_MIN_VALUES", 4)  # make the chapter's small arrays count as big
    out = tmp_path / "stats.npz"
    r = run_app("run", str(spec), "--record", "stats", "--keep", "norm1", "--pos", "2", "--save", str(out))
    assert r.returncode == 0, r.stderr
    full = executor.run(load_spec(str(spec)))
    with np.load(out) as z:
        a = full.stages["attn.weights"].array
        assert a is not None
        assert np.allclose(z["attn.weights.stats"], [a.mean(), a.std(), a.min(), a.max()])
        assert z["attn.weights.shape"].tolist() == list(a.shape)
        assert np.array_equal(z["attn.weights.at"], a[0, :, 2])  # [H,T] at b = 0, t = 2
        assert np.array_equal(z["norm1"], full.stages["norm1"].array)  # --keep: in full
        assert np.array_equal(z["output"], full.stages["output"].array)  # the block output: always in full
        assert "attn.weights" not in z.files


def test_save_over_an_earlier_trace_is_fine(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.npz"
    assert run_app("run", str(spec), "--save", str(out)).returncode == 0
    first = out.read_bytes()
    assert run_app("run", str(spec), "--save", str(out), "--record", "main").returncode == 0
    assert out.read_bytes() != first
    with np.load(out) as z:
        assert "attn.scores" not in z.files and "output" in z.files


def test_save_over_the_input_spec_is_refused(spec: Path) -> None:
    before = spec.read_bytes()
    assert_refused(run_app("run", str(spec), "--save", str(spec)), "--save", "would overwrite the input", "choose another file name")
    link = spec.parent / "link.npz"
    link.symlink_to(spec)
    assert_refused(run_app("run", str(spec), "--save", str(link)), "would overwrite the input")
    assert spec.read_bytes() == before


def test_save_over_some_other_file_is_refused(spec: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert_refused(run_app("run", str(spec), "--save", str(notes)), "--save", "exists and is not an NPZ file tracer wrote",
                   "refusing to overwrite it", "--force")
    assert notes.read_text() == "my notes\n"


@pytest.mark.parametrize("where, fragment", [("folder", "is a directory; give a file name inside it"), ("missing/trace.npz", "does not exist"),
                                              ("plain/trace.npz", "is not a folder")])
def test_save_to_an_impossible_place_is_refused_before_running(spec: Path, tmp_path: Path, where: str, fragment: str) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain").write_text("a file, not a folder\n")
    r = run_app("run", str(spec), "--save", str(tmp_path / where))
    assert_refused(r, "--save", fragment)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_save_to_an_unwritable_folder_is_refused(spec: Path, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert_refused(run_app("run", str(spec), "--save", str(locked / "t.npz")), "is not writable")
    finally:
        locked.chmod(0o700)


def test_a_failed_write_leaves_nothing_behind(spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "trace.npz"
    assert run_app("run", str(spec), "--save", str(out)).returncode == 0
    earlier = out.read_bytes()

    def half_then_fail(fh: object, array: object, **kwargs: object) -> None:
        fh.write(b"half an array")  # type: ignore[attr-defined]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np.lib.format, "write_array", half_then_fail)
    r = run_app("run", str(spec), "--save", str(out))
    assert_refused(r, "cannot write", "trace.npz': No space left on device", "nothing was written")
    assert out.read_bytes() == earlier  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ch17.yaml", "trace.npz"]
