"""Text in: a spec's tokenizer: and input.text, tracer import --text, and every token shown as text beside its id.

The tokenizer is trained here (examples/text/make_tiny.py: a byte-level BPE on a few sentences, one Chinese),
so nothing is downloaded; the tests skip without the tokenizers package."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO, assert_refused, run_app, run_cli

tokenizers = pytest.importorskip("tokenizers", reason="text input needs the tokenizers package (the checkpoints extra)")


def _maker():
    spec = importlib.util.spec_from_file_location("make_tiny_text", EXAMPLES / "text" / "make_tiny.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A tiny GPT-2 checkpoint with its own tokenizer.json."""
    pytest.importorskip("safetensors")
    out = tmp_path_factory.mktemp("text") / "tiny"
    _maker().make(str(out))
    return out


@pytest.fixture(scope="module")
def tok(folder):
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


TEXTS = ["The capital of France is", "我爱巴黎 Paris", "Berlin, Germany.", "x"]


def _spec(folder: Path, tmp: Path, body: str, name: str = "spec.yaml") -> Path:
    """The imported spec of ``folder`` with its input section replaced by ``body``."""
    r = run_app("import", str(folder), "--tokens", "1,2")
    assert r.returncode == 0, r.stderr
    text = r.stdout.split("\ninput:\n")[0] + "\n" + body
    p = tmp / name
    p.write_text(text.replace(f"file: {folder}", f"file: {os.path.relpath(folder, tmp)}"), encoding="utf-8")
    return p


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("special", [True, False])
def test_input_text_is_the_tokenizers_own_encoding(folder, tok, tmp_path, text, special):
    from tracer.spec import load_spec

    body = f"tokenizer: {folder / 'tokenizer.json'}\ninput:\n  text: {json.dumps(text)}\n" + ("" if special else "  special: false\n")
    s = load_spec(str(_spec(folder, tmp_path, body)))
    want = tok.encode(text, add_special_tokens=special)
    assert s.input.value == [want.ids]
    added = [t for t, m in zip(want.tokens, want.special_tokens_mask) if m] if special else []
    assert list(s.specials_added) == added
    assert s.text == text
    if special:
        assert s.specials_added == ("<s>",) and s.input.value[0][0] == tok.token_to_id("<s>")


def test_pieces_are_readable_text_and_partial_bytes_are_shown_as_bytes(tok):
    from tracer.checkpoints import tokenizer as text_tokens

    # a whole Chinese piece reads as its characters, not as the byte-level alphabet's mojibake
    ids = tok.encode("我爱巴黎", add_special_tokens=False).ids
    pieces = [text_tokens.piece(tok, i) for i in ids]
    assert "".join(pieces) == "我爱巴黎"
    assert any(c in "".join(pieces) for c in "我爱巴黎")
    # the lone byte 0xE6 (the first byte of 我) is no whole character: shown as <0xE6>
    lone = tok.token_to_id("æ")  # GPT-2's byte-level alphabet writes byte 0xE6 as 'æ'
    assert text_tokens.piece(tok, lone) == "<0xE6>"
    assert text_tokens.piece(tok, tok.token_to_id("Ġ")) == " "
    assert text_tokens.piece(tok, tok.token_to_id("<s>")) == "<s>"


def test_import_text_writes_the_tokenizer_and_the_text_and_the_run_shows_tokens_as_text(folder, tok, tmp_path):
    out = tmp_path / "t.yaml"
    r = run_cli("import", str(folder), "--text", "The capital of France is", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    assert "tokenizer: " in text and "text: The capital of France is" in text and "adds <s>" in text
    r = run_app("run", str(out))
    assert r.returncode == 0, r.stderr
    ids = tok.encode("The capital of France is").ids
    assert f"value at b=0, t=0 (<s>, id {ids[0]})" in r.stdout
    assert "which added <s>" in " ".join(r.stdout.split())  # the caption says which special tokens were added
    assert f"t=1 (The, id {ids[1]}): top 5: " in r.stdout
    js = json.loads(run_app("run", str(out), "--json").stdout)
    assert js["tokens"]["ids"] == [ids] and js["tokens"]["special_added"] == ["<s>"]
    assert js["tokens"]["pieces"][0][:2] == ["<s>", "The"]


def test_import_no_special_leaves_the_special_tokens_out(folder, tok, tmp_path):
    out = tmp_path / "t.yaml"
    r = run_app("import", str(folder), "--text", "我爱巴黎", "--no-special", "-o", str(out))
    assert r.returncode == 0, r.stderr
    from tracer.spec import load_spec

    s = load_spec(str(out))
    assert s.input.value == [tok.encode("我爱巴黎", add_special_tokens=False).ids] and s.specials_added == ()
    assert "我爱巴黎" in run_app("run", str(out)).stdout


def test_trace_with_text_replaces_the_input(folder, tok, tmp_path):
    import tracer

    out = tmp_path / "t.yaml"
    assert run_app("import", str(folder), "--text", "Paris", "-o", str(out)).returncode == 0
    t = tracer.trace(str(out), text="Berlin is")
    assert t.spec.input.value == [tok.encode("Berlin is").ids]
    assert t.shape_of("probs").sizes[1] == len(tok.encode("Berlin is").ids)


@pytest.mark.parametrize("content,fragment", [
    ("{not json", "not valid JSON"),
    ("[" * 200 + "]" * 200, "nests deeper"),
    ('{"model": {"type": "nothing-known"}}', "not a tokenizer tracer can read"),
])
def test_a_hostile_tokenizer_is_refused_in_one_line(folder, tmp_path, content, fragment):
    bad = tmp_path / "tokenizer.json"
    bad.write_text(content, encoding="utf-8")
    spec = _spec(folder, tmp_path, "tokenizer: tokenizer.json\ninput:\n  text: hello\n")
    assert_refused(run_cli("run", str(spec)), "tokenizer", fragment)


def test_a_linked_tokenizer_is_read_as_its_file_and_confine_follows_the_link(folder, tmp_path):
    """A Hugging Face cache's files are links: read through them, as weight files are; --confine judges the target."""
    os.symlink(folder / "tokenizer.json", tmp_path / "tokenizer.json")
    spec = _spec(folder, tmp_path, "tokenizer: tokenizer.json\ninput:\n  text: hello\n")
    linked, direct = (run_app("run", str(spec), "--json"),
                      run_app("run", str(_spec(folder, tmp_path, f"tokenizer: {folder / 'tokenizer.json'}\ninput:\n  text: hello\n", "d.yaml")),
                              "--json"))
    assert linked.returncode == 0, linked.stderr
    assert json.loads(linked.stdout)["tokens"] == json.loads(direct.stdout)["tokens"]
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    os.symlink(fifo, tmp_path / "to-fifo.json")
    assert_refused(run_app("run", str(_spec(folder, tmp_path, "tokenizer: to-fifo.json\ninput:\n  text: hello\n", "f.yaml"))), "regular file")
    inside = tmp_path / "inside"
    inside.mkdir()
    os.symlink(folder / "tokenizer.json", inside / "tokenizer.json")
    spec = inside / "s.yaml"
    spec.write_text(_spec(folder, tmp_path, "tokenizer: tokenizer.json\ninput:\n  text: hello\n", "c.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    r = run_app("run", str(spec), "--confine", str(inside))
    assert r.returncode == 2 and "outside the folder --confine allows" in r.stderr


def test_missing_tokenizer_and_text_without_one_are_refused(folder, tmp_path):
    spec = _spec(folder, tmp_path, "tokenizer: nowhere.json\ninput:\n  text: hello\n")
    assert_refused(run_cli("run", str(spec)), "tokenizer", "no such file")
    spec = _spec(folder, tmp_path, "input:\n  text: hello\n", "b.yaml")
    assert_refused(run_cli("run", str(spec)), "input.text", "tokenizer: tokenizer.json")
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((folder / name).read_bytes())
    assert_refused(run_cli("import", str(bare), "--text", "hello"), "tokenizer.json")
    assert_refused(run_cli("import", str(folder), "--text", "hello", "--tokens", "1,2"), "--text", "--tokens")


def test_without_the_tokenizers_package_a_text_spec_names_the_extra_and_a_plain_spec_never_imports_it(folder, tmp_path):
    spec = _spec(folder, tmp_path, f"tokenizer: {folder / 'tokenizer.json'}\ninput:\n  text: hello\n")
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "tokenizers.py").write_text("raise ImportError('blocked by the test')\n", encoding="utf-8")
    env = {"PYTHONPATH": f"{blocker}{os.pathsep}{REPO}"}
    assert_refused(run_cli("run", str(spec), env=env), "tokenizers", "tracer[checkpoints]")
    plain = subprocess.run([sys.executable, "-c", "import sys, tracer; tracer.trace('specs/stack-2-layers.yaml');"
                            " sys.exit('tokenizers' in sys.modules)"], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert plain.returncode == 0


def test_the_graph_and_the_attention_heatmaps_show_the_tokens_as_text(folder, tok, tmp_path):
    out = tmp_path / "t.yaml"
    assert run_app("import", str(folder), "--text", "我爱巴黎 Paris", "-o", str(out)).returncode == 0
    ids = tok.encode("我爱巴黎 Paris").ids
    graph = run_app("graph", str(out)).stdout
    assert f"'<s>' ({ids[0]})" in graph and f"' Paris' ({ids[-1]})" in graph
    assert "我爱巴黎" in run_app("run", str(out), "--attention").stdout


def test_diff_and_patch_read_token_as_the_tokenizers_text(folder, tok, tmp_path):
    """--token of diff (the effect sentence) and patch is looked up in the spec's tokenizer as lens' is."""
    out = tmp_path / "t.yaml"
    assert run_app("import", str(folder), "--text", "The capital of France is", "-o", str(out)).returncode == 0
    paris = tok.token_to_id("ĠParis")  # the byte-level piece of ' Paris'
    r = run_app("diff", str(out), str(out), "--ablate-b", "blocks.1.attn.head.0", "--token", " Paris", "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["effect"]["token"] == paris and doc["effect"]["text"] == " Paris"
    by_id = json.loads(run_app("diff", str(out), str(out), "--ablate-b", "blocks.1.attn.head.0", "--token", str(paris), "--json").stdout)
    assert by_id["effect"]["p"] == doc["effect"]["p"]
    p = run_app("patch", str(out), str(out), "--token", " Paris", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["token"] == {"id": paris, "text": " Paris"}
    bad = run_app("diff", str(out), str(out), "--ablate-b", "blocks.1.attn.head.0", "--token", "no such piece")
    assert_refused(bad, "--token 'no such piece'")
