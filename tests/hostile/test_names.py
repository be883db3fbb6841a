"""A file's or folder's name is data, never syntax: in the YAML `tracer import` writes (values and comments), in
the file's encoding (UTF-8 whatever the terminal's), and in every message that shows a path (control and
bidirectional characters escaped)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import example_module, run_app, run_cli

from tracer.messages import at, shown
from tracer.spec import load_spec, yamlio

make_gpt2 = example_module("checkpoints/tiny_gpt2.py").make

INJECTION = "evil\nallow_nonfinite: true\n#"
BIDI = "\u202e"  # RIGHT-TO-LEFT OVERRIDE


def test_a_folder_name_cannot_inject_a_key_into_the_imported_spec(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / INJECTION), layers=1, dtype="float64")
    out = tmp_path / "s.yaml"
    r = run_cli("import", str(tmp_path / INJECTION), "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert "allow_nonfinite" not in doc and doc["weights"]["file"] == INJECTION
    for line in out.read_text(encoding="utf-8").splitlines():  # no line of the file starts a key of its own
        assert not line.startswith("allow_nonfinite"), line
    s = load_spec(str(out))
    assert not s.allow_nonfinite
    assert run_app("validate", str(out)).returncode == 0


def test_the_imported_spec_is_utf8_whatever_the_terminal(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "modèle"), layers=1, dtype="float64")
    import subprocess
    import sys

    from conftest import REPO

    env = {"PYTHONIOENCODING": "ascii", "PYTHONPATH": str(REPO), "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-m", "tracer", "import", "modèle"], cwd=tmp_path, env=env, capture_output=True)
    assert p.returncode == 0, p.stderr
    assert "modèle".encode() in p.stdout and b"\\u00e8" not in p.stdout
    (tmp_path / "s.yaml").write_bytes(p.stdout)
    r = run_cli("validate", "s.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_wrote_notice_escapes_control_and_bidi_characters(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "m"), layers=1, dtype="float64")
    odd = tmp_path / f"d{BIDI}ir"
    odd.mkdir()
    r = run_cli("import", str(tmp_path / "m"), "-o", str(odd / "x\ny.yaml"))
    assert r.returncode == 0, r.stderr
    assert BIDI not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "\\u202e" in r.stderr and "x\\ny.yaml" in r.stderr


def test_a_spec_path_with_control_characters_is_shown_escaped(tmp_path: Path) -> None:
    r = run_app("run", str(tmp_path / f"no\x1b[31m{BIDI}such.yaml"))
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and BIDI not in r.stderr and "\\x1b" in r.stderr


@pytest.mark.parametrize("value", [INJECTION, "true", "null", "a: b", "x #c", "", "modèle", f"r{BIDI}l", "[1]", "-", "1e3", 0.5, True, None, [1, 2]])
def test_a_generated_value_reads_back_as_itself_on_one_line(value: object) -> None:
    text = yamlio.scalar(value)
    assert "\n" not in text and BIDI not in text
    assert yaml.safe_load(f"k: {text}  # note\nother: 1\n") == {"k": value, "other": 1}


def test_a_comment_stays_one_line() -> None:
    assert "\n" not in yamlio.comment(INJECTION) and BIDI not in yamlio.comment(BIDI)
    assert shown("modèle") == "modèle" and shown("a\nb") == "a\\nb"
    assert str(at(f"x{BIDI}\n.yaml:1:2", "m")) == "x\\u202e\\n.yaml:1:2: m"
