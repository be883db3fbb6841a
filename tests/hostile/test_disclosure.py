"""Nothing disclosed: a message never quotes a file's bytes, lists only checkpoint-like names of a folder, and
under --confine a spec's references outside its folder are refused naming only the reference."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, REPO, SPECS, assert_refused, run_app, run_cli

SECRET = b"hunter2!and the rest of a private file"
HEAD = "dims: {C: 4, H: 2, F: 8}\nseed: 1\ninput: {tokens: [0, 3, 4]}\n"


def _spec(folder: Path, file: str, name: str = "s.yaml") -> Path:
    p = folder / name
    p.write_text(HEAD + f"weights:\n  attn: {{w_q: {{file: {file}}}}}\n")
    return p


@pytest.fixture
def hand_in(tmp_path: Path) -> Path:
    """A student's folder beside a private file."""
    (tmp_path / "private.txt").write_bytes(SECRET)
    student = tmp_path / "alice"
    student.mkdir()
    return student


def test_a_safetensors_link_to_any_file_does_not_show_its_bytes(hand_in: Path) -> None:
    (hand_in / "w.safetensors").symlink_to(hand_in.parent / "private.txt")
    r = run_app("run", str(_spec(hand_in, "w.safetensors")))
    assert_refused(r, "w.safetensors", "safetensors")
    (n,) = struct.unpack("<Q", SECRET[:8])
    for leak in ("hunter2", str(n), f"{n:,}"):
        assert leak not in r.stderr, r.stderr


def test_a_folder_listing_shows_only_checkpoint_like_names(hand_in: Path) -> None:
    folder = hand_in / "model"
    folder.mkdir()
    for name in (".ssh_key", "diary.txt", "passwords", "weights.npz", "notes.json"):
        (folder / name).write_bytes(b"x")
    r = run_app("run", str(_spec(hand_in, "model")))
    assert_refused(r, "model")
    assert "weights.npz" in r.stderr and "notes.json" in r.stderr
    for hidden in (".ssh_key", "diary.txt", "passwords"):
        assert hidden not in r.stderr, r.stderr


@pytest.mark.parametrize("reference", ["../private.txt", "/etc/hostname", "link.npz", "inner/w.npz"])
def test_confine_refuses_a_reference_outside_naming_only_the_reference(hand_in: Path, reference: str) -> None:
    (hand_in / "link.npz").symlink_to(hand_in.parent / "private.txt")  # a link that leads out
    (hand_in / "inner").mkdir()
    (hand_in / "inner" / "w.npz").symlink_to(hand_in.parent / "private.txt")
    spec = _spec(hand_in, reference)
    for command in (["run"], ["validate"], ["grad"]):
        r = run_app(*command, str(spec), "--confine", str(hand_in))
        message = (r.stdout + r.stderr).strip()
        assert r.returncode == 2, message
        assert "--confine" in message and reference in message and "hunter2" not in message, message
        assert str(hand_in.parent / "private.txt") not in message, message  # nothing about what is there


def test_confine_lets_a_reference_inside_run(hand_in: Path) -> None:
    np.savez(hand_in / "w.npz", w_q=np.eye(4))
    spec = _spec(hand_in, "w.npz")
    for command in ("run", "validate", "grad"):
        r = run_app(command, str(spec), "--confine", str(hand_in))
        assert r.returncode == 0, r.stdout + r.stderr
    r = run_app("check", str(spec), "--stage", "embed", "--expect", "[0, 0, 0, 0]", "--confine", str(hand_in))
    assert r.returncode in (0, 1), r.stderr  # a verdict, not a refusal
    r = run_app("diff", str(spec), str(spec), "--confine", str(hand_in))
    assert r.returncode == 0, r.stderr


def test_confine_refuses_in_check_and_diff_too(hand_in: Path) -> None:
    spec = _spec(hand_in, "../private.txt")
    r = run_app("check", str(spec), "--stage", "embed", "--expect", "[0, 0, 0, 0]", "--confine", str(hand_in))
    assert_refused(r, "'../private.txt'", "--confine")
    r = run_app("diff", str(SPECS / "ch17-prenorm.yaml"), str(spec), "--confine", str(hand_in))
    assert r.returncode == 2 and "--confine" in r.stderr and "hunter2" not in r.stderr


def test_confine_needs_a_folder(tmp_path: Path) -> None:
    r = run_cli("run", str(SPECS / "ch17-prenorm.yaml"), "--confine", str(tmp_path / "nowhere"))
    assert_refused(r, "--confine")


def test_the_grading_script_confines_each_spec_to_its_folder(hand_in: Path) -> None:
    import subprocess
    import sys

    (hand_in / "w.safetensors").symlink_to(hand_in.parent / "private.txt")
    refs = hand_in.parent / "refs"
    refs.mkdir()
    r = run_app("run", str(SPECS / "ch17-prenorm.yaml"), "--json")
    (refs / "t.json").write_text(r.stdout)
    _spec(hand_in, "../private.txt", "t.yaml")
    bob = hand_in.parent / "bob"
    bob.mkdir()
    (bob / "w.safetensors").symlink_to(hand_in.parent / "private.txt")
    _spec(bob, "w.safetensors", "t.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, str(EXAMPLES / "coursework" / "grade.py"), str(hand_in.parent), str(refs), "--csv"],
                       capture_output=True, text=True, env=env, timeout=120)
    rows = [line for line in p.stdout.splitlines() if line.startswith(("alice,t,", "bob,t,"))]
    assert len(rows) == 2 and all("--confine" in row for row in rows), p.stdout + p.stderr
    # the links themselves are listed, never followed
    assert sum("symbolic link" in line for line in p.stdout.splitlines()) == 2, p.stdout
    assert "hunter2" not in p.stdout + p.stderr
