"""Every mistake a user can make with a spec file: exit 2, one paragraph naming the file, the line
where there is one and the field; never a traceback, never a hang, nothing written.

Most cases call the command line in this process (fast); a few go through the installed entry
point to show the real process behaves the same.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_refused, run_app, run_cli, write_spec

GOOD = """\
dims: {C: 2, H: 2, F: 3}
input: {tokens: [0, 1, 2]}
seed: 0
"""


def refused(tmp_path: Path, text: str | bytes, *fragments: str, name: str = "spec.yaml") -> None:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    r = run_app("run", str(p))
    assert_refused(r, str(p), *fragments)
    v = run_app("validate", str(p))  # validate agrees, on stdout, one line
    assert v.returncode == 2 and len(v.stdout.strip().splitlines()) == 1 and str(p) in v.stdout, v.stdout


def test_the_good_spec_runs(tmp_path: Path) -> None:
    r = run_app("run", str(write_spec(tmp_path, GOOD)))
    assert r.returncode == 0, r.stderr


# -- the file itself ------------------------------------------------------------
def test_missing_file(tmp_path: Path) -> None:
    assert_refused(run_app("run", str(tmp_path / "nope.yaml")), "nope.yaml: no such file")


def test_directory(tmp_path: Path) -> None:
    assert_refused(run_app("run", str(tmp_path)), str(tmp_path), "is a directory")


def test_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    r = run_cli("run", str(fifo), timeout=30)  # a blocking open would hang here
    assert_refused(r, "is not a regular file")


@pytest.mark.parametrize("text", ["", "   \n\n", "# only a comment\n", "---\n...\n"])
def test_empty(tmp_path: Path, text: str) -> None:
    refused(tmp_path, text, "empty")


def test_binary_bytes(tmp_path: Path) -> None:
    refused(tmp_path, b"dims: {C: 2}\x00\x01\x02\xff", "binary")


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    refused(tmp_path, GOOD.encode() + b'name: "caf\xe9"\n', ":4:", "not UTF-8", "0xe9")


def test_utf8_byte_order_mark_is_fine(tmp_path: Path) -> None:
    p = tmp_path / "bom.yaml"
    p.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert run_app("run", str(p)).returncode == 0


def test_too_large_file_is_refused_before_parsing(tmp_path: Path) -> None:
    from tracer.spec import yamlio

    p = tmp_path / "big.yaml"
    with open(p, "wb") as fh:
        fh.truncate(yamlio.MAX_FILE_BYTES + 1)  # sparse: no time spent writing it
    assert_refused(run_app("run", str(p)), "larger than", "MiB")


# -- YAML -------------------------------------------------------------------------
def test_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    refused(tmp_path, "dims: {C: 2, H: 2\ninput: [\n", "spec.yaml:2:6:", "YAML syntax error", "started at line 1, column 7")


def test_bad_indentation(tmp_path: Path) -> None:
    refused(tmp_path, "dims:\n  C: 2\n H: 2\n", "spec.yaml:3:", "YAML syntax error")


@pytest.mark.parametrize("text, kind", [("- 1\n- 2\n", "a list"), ("42\n", "a single value"), ("just words\n", "a single value"),
                                        ("~\n", "empty")])
def test_document_that_is_not_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    refused(tmp_path, text, "spec.yaml:1:1:", f"the document is {kind}")


def test_two_documents(tmp_path: Path) -> None:
    refused(tmp_path, GOOD + "---\n" + GOOD, "spec.yaml:4:1:", "second YAML document")


# -- keys -------------------------------------------------------------------------
def test_unknown_key(tmp_path: Path) -> None:
    refused(tmp_path, GOOD + "colour: red\n", "spec.yaml:4:1:", "colour", "unknown key")


def test_misspelt_keys_get_a_suggestion(tmp_path: Path) -> None:
    refused(tmp_path, GOOD.replace("input:", "imput:"), "imput", "did you mean 'input'?")
    refused(tmp_path, GOOD + "block: {norm_ordr: pre}\n", "block.norm_ordr", "did you mean 'norm_order'?")


def test_duplicate_key_names_both_lines(tmp_path: Path) -> None:
    refused(tmp_path, GOOD + "seed: 1\n", "spec.yaml:4:1:", "seed: duplicate key (first given at line 3)")
    refused(tmp_path, GOOD.replace("F: 3}", "F: 3, C: 4}"), "dims.C: duplicate key")


def test_keys_must_be_plain_names(tmp_path: Path) -> None:
    refused(tmp_path, GOOD + "[a, b]: 1\n", "keys must be plain names")
    refused(tmp_path, GOOD + "weights: &w {<<: *w}\n", "keys must be plain names (merge keys '<<' are not supported)")


# -- values -----------------------------------------------------------------------
@pytest.mark.parametrize("value, received", [("two", "text 'two'"), ("[2]", "a list"), ("{a: 1}", "a mapping"),
                                             ("yes", "boolean 'yes'"), ("no", "boolean 'no'"), ("on", "boolean 'on'"),
                                             ("true", "boolean 'true'"), ("2.5", "received 2.5"), ("~", "nothing (null)")])
def test_dims_must_be_whole_numbers(tmp_path: Path, value: str, received: str) -> None:
    refused(tmp_path, GOOD.replace("C: 2,", f"C: {value},"), "spec.yaml:1:", "dims.C", "expected a whole number", received)


@pytest.mark.parametrize("value", ["-2", "0", "2e30", "99999999999999999999999999", "10000001"])
def test_dims_out_of_range(tmp_path: Path, value: str) -> None:
    refused(tmp_path, GOOD.replace("C: 2,", f"C: {value},"), "dims.C", "from 1 to 10,000,000", f"received {value}")


def test_heads_must_divide_width(tmp_path: Path) -> None:
    refused(tmp_path, GOOD.replace("H: 2", "H: 3"), "dims.H", "must divide C")


def test_wrong_type_for_a_setting(tmp_path: Path) -> None:
    refused(tmp_path, GOOD + "block: {mask: 3}\n", "block.mask", "expected one of", "received 3")
    refused(tmp_path, GOOD + "name: [1]\n", "name", "expected text")
    refused(tmp_path, GOOD + "block: {eps: -1}\n", "block.eps", "positive number")


def test_ragged_matrix(tmp_path: Path) -> None:
    refused(tmp_path, "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, 2], [3]]}\n", "spec.yaml:2:", "input.x[1]", "ragged")


def test_wrong_shaped_matrix(tmp_path: Path) -> None:
    refused(tmp_path, GOOD + "weights: {ffn: {w1: [[1, 2], [3, 4], [5, 6]]}}\n", "spec.yaml:4:", "weights.ffn.w1",
            "expected [C,F] = [2,3], received [3,2]")


def test_text_inside_a_matrix(tmp_path: Path) -> None:
    refused(tmp_path, GOOD + "weights: {ffn: {w1: [[1, 2, x], [3, 4, 5]]}}\n", "weights.ffn.w1[0][2]", "expected a number")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e999", ".NaN"])
def test_nonfinite_weights_are_refused(tmp_path: Path, value: str) -> None:
    refused(tmp_path, GOOD + f"weights: {{ffn: {{w1: [[1, {value}, 0], [3, 4, 5]]}}}}\n", "spec.yaml:4:",
            "weights.ffn.w1[0][1]", "not finite", "allow_nonfinite: true")


def test_nonfinite_weights_with_allow_nonfinite_run(tmp_path: Path) -> None:
    text = GOOD + "weights: {ffn: {w1: [[1, .inf, 0], [3, 4, 5]]}}\nallow_nonfinite: true\n"
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert r.returncode == 1, r.stderr  # it runs, and the nonfinite stage is flagged as a violation
    assert "nonfinite" in r.stdout


# -- tags, aliases, nesting -------------------------------------------------------------
@pytest.mark.parametrize("tagged", ["!!python/object:os.system {}", "!!python/object/apply:os.getcwd []",
                                    "!!python/name:os.system", "!custom 2", "!!binary aGk=", "!!set {a, b}", "!!str 2",
                                    "!!timestamp 2001-12-14"])
def test_tags_are_refused(tmp_path: Path, tagged: str) -> None:
    refused(tmp_path, GOOD.replace("C: 2,", f"C: {tagged},"), "dims.C", "is not allowed", "plain YAML only")


def test_python_object_is_never_constructed(tmp_path: Path) -> None:
    marker = tmp_path / "constructed"
    text = GOOD + f'name: !!python/object/apply:os.system ["touch {marker}"]\n'
    refused(tmp_path, text, "name", "not allowed")
    assert not marker.exists()


def _alias_bomb(levels: int = 9) -> str:
    lines = ["dims: {C: 2, H: 2, F: 3}", "input: {tokens: [0, 1, 2]}", "seed: 0",
             "description:", "  a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"  # 10**levels values once expanded


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    refused(tmp_path, _alias_bomb(), "more than 20,000,000 values", "aliases")


def test_alias_bomb_is_refused_within_bounded_memory(tmp_path: Path) -> None:
    p = write_spec(tmp_path, _alias_bomb(12))  # a trillion values if expanded
    limit = 400 * 2**20  # address space: far below what expanding even a millionth of it would take

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    code = "import sys; from tracer.cli.app import main; sys.argv = ['tracer', 'validate', sys.argv[1]]; main()"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code, str(p)], env=env, capture_output=True, text=True, timeout=60, preexec_fn=cap)
    assert r.returncode == 2, r.stderr
    assert "more than 20,000,000 values" in r.stdout and "Traceback" not in r.stderr


def test_alias_to_itself_or_unknown(tmp_path: Path) -> None:
    refused(tmp_path, GOOD + "description: &d [1, *d]\n", "*d", "no complete anchor")
    refused(tmp_path, GOOD + "description: *nowhere\n", "spec.yaml:4:14:", "*nowhere", "no complete anchor")


@pytest.mark.parametrize("text", ["dims: " + "[" * 100_000 + "]" * 100_000 + "\n",
                                  "dims: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
                                  "dims:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 2000)),
                                  "dims:\n" + "".join("  " * i + "-\n" for i in range(1, 2000))])
def test_absurdly_deep_nesting(tmp_path: Path, text: str) -> None:
    refused(tmp_path, text, "nest more than 32 levels")


# -- the command line ------------------------------------------------------------
def test_bad_option_values(tmp_path: Path) -> None:
    spec = str(write_spec(tmp_path, GOOD))
    assert_refused(run_app("run", spec, "--record", "everything"), "--record", "all | main | stats")
    assert_refused(run_app("run", spec, "--keep", "norm9"), "--keep 'norm9'", "no such stage", "did you mean 'norm")
    for size in ("4 gigs", "-1GB", "GB", "1.5.2GB"):
        assert_refused(run_app("run", spec, "--max-memory", size), f"--max-memory '{size}'", "4GB, 512MB, 2GiB")
    assert_refused(run_app("run", spec, "--max-memory", "0"), "more than 0 bytes")
    assert_refused(run_app("run", spec, "--pos", "7"), "--pos 7 is out of range")


def test_entry_point_gives_the_same_contract(tmp_path: Path) -> None:
    p = write_spec(tmp_path, GOOD.replace("C: 2,", "C: yes,"))
    assert_refused(run_cli("run", str(p)), f"{p}:1:11: dims.C", "boolean 'yes'")


# -- what a Chinese keyboard types (full-width punctuation) and a tab key ---------------------------
WORDS = "dims: {C: 2, H: 2, F: 3}\nvocab: [我, 喜欢, 你, 猫]\ninput: {tokens: [我, 喜欢, 你]}\nseed: 0\n"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("old,new,char,field", [
    ("tokens: [我, 喜欢, 你]", "tokens: [我，喜欢，你]", "，", "input.tokens[0]"),  # was: '我，喜欢，你' is not in the vocab
    ("vocab: [我, 喜欢, 你, 猫]", "vocab: [我，喜欢，你，猫]", "，", "vocab[0]"),  # was: the vocab has 1 words
    ("dims: {C: 2, H: 2", "dims: {C：2, H: 2", "：", "dims"),  # was: unknown key 'C：2'
    ("seed: 0", "seed:\u30000", "\u3000", ""),
])
def test_a_chinese_keyboards_punctuation_is_named_in_both_languages(tmp_path: Path, lang: str, old: str, new: str, char: str,
                                                                     field: str) -> None:
    assert run_app("run", str(write_spec(tmp_path, WORDS))).returncode == 0
    text = WORDS.replace(old, new)
    i = text.index(char)
    at = f"spec.yaml:{text.count(chr(10), 0, i) + 1}:{i - text.rfind(chr(10), 0, i)}: "
    r = run_app("run", str(write_spec(tmp_path, text)), "--lang", lang)
    if lang == "en":
        assert_refused(r, at, f"U+{ord(char):04X}")
    else:  # the same contract, in Chinese
        assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stderr.startswith("tracer: 错误：") and at in r.stderr and f"U+{ord(char):04X}" in r.stderr
    assert "vocab has" not in r.stderr and "not in the vocab" not in r.stderr and "unknown key" not in r.stderr  # the slip, not what it led to
    if field:
        assert f"{at}{field}: " in r.stderr
    if lang == "zh":
        assert "中文输入法" in r.stderr and "请改为" in r.stderr
    else:
        assert "as a Chinese keyboard types it" in r.stderr and "instead" in r.stderr


@pytest.mark.parametrize("lang,words", [("en", "a tab at 2:1; YAML indents with spaces"), ("zh", "第 2 行第 1 列是制表符（Tab）；YAML 只用空格缩进")])
def test_a_tab_in_the_indentation_is_named_in_both_languages(tmp_path: Path, lang: str, words: str) -> None:
    r = run_app("validate", str(write_spec(tmp_path, "dims:\n\tC: 2\n")), "--lang", lang)
    assert r.returncode == 2 and r.stdout.strip().endswith(f"spec.yaml:2:1: {words}"), r.stdout


# -- slips a targeted hint names: `mask:causal`, 【】, w_0 for w_o, Gelu for gelu ---------------------------------
@pytest.mark.parametrize("extra,where,words", [
    ("block:\n  mask:causal\n", "spec.yaml:5:7: block: ", "'mask:causal': no space after the colon"),  # YAML: block is the text 'mask:causal'
    ("block:\n  mask:causal\n  eps: 1e-5\n", "spec.yaml:5:7: ", "'mask:causal': no space after the colon"),  # YAML: a parser error
    ("block: {mask:causal}\n", "spec.yaml:4:13: block: ", "'mask:causal': no space after the colon"),  # YAML: a key 'mask:causal'
    ("block: {norm_order: post, mask:causal}\n", "spec.yaml:4:31: block: ", "type 'mask: causal'"),
    ("input2:\n  tokens: 【0, 1, 2】\n", "spec.yaml:5:11: ", "a full-width bracket '【' (U+3010)"),
    ("block: {activation: Gelu}\n", "spec.yaml:4:21: block.activation: ", "received text 'Gelu'; did you mean 'gelu'? (tracer's names are lower case)"),
    ("block: {norm_order: Pre}\n", "spec.yaml:4:21: block.norm_order: ", "did you mean 'pre'?"),
    ("weights: {attn: {w_0: identity}}\n", "spec.yaml:4:18: weights.attn.w_0: ", "did you mean 'w_o'? (a digit 0 or 1 typed for the letter o or l)"),
])
def test_slips_get_a_targeted_hint(tmp_path: Path, extra: str, where: str, words: str) -> None:
    text = GOOD + extra
    if extra.startswith("input2"):  # the tokens typed with full-width brackets, in block context
        text = GOOD.replace("input: {tokens: [0, 1, 2]}\n", "") + "input:\n  tokens: 【0, 1, 2】\n"
        where = "spec.yaml:4:11: input.tokens: "
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert_refused(r, where, words)
    zh = run_app("run", str(write_spec(tmp_path, text)), "--lang", "zh")
    assert zh.returncode == 2 and zh.stderr.startswith("tracer: 错误：") and where.split(" ")[0] in zh.stderr, zh.stderr
    assert "did you mean" not in zh.stderr and "no space" not in zh.stderr


@pytest.mark.parametrize("extra", [
    'name: "ratio:2"\n', "name: ratio:2 of a:b\n", "description: see https://example.com/x\n",
    "block: {mask: causal}\n", "block:\n  mask: causal   # mask:causal would be a slip\n",
])
def test_colons_that_are_not_slips(tmp_path: Path, extra: str) -> None:
    r = run_app("run", str(write_spec(tmp_path, GOOD + extra)))
    assert r.returncode == 0, r.stderr
