"""Inputs of the wrong YAML type or of absurd size are refused with exit 2 and one line
naming file:line:col, the field, expected and received, in every command that reads a spec."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_refused, run_app, where, write_spec

COMMANDS = ("run", "validate", "graph", "probe")
HEAD = "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n"
BIG = "1" + "0" * 400  # 10**400: more than a float64 holds


def refused_everywhere(tmp_path: Path, text: str, needle: str, *fragments: str) -> None:
    p = write_spec(tmp_path, text)
    for command in COMMANDS:
        r = run_app(command, str(p))
        if command == "validate":  # validate reports on stdout, one line
            assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr, (r.stdout, r.stderr)
            line = r.stdout.strip()
            assert len(line.splitlines()) == 1, line
            assert f"{p}:{where(text, needle)}" in line, line
            for f in fragments:
                assert f in line, (f, line)
        else:
            assert_refused(r, f"{p}:{where(text, needle)}", *fragments)


@pytest.mark.parametrize("value, needle, received", [
    ("[{x: 1}, x]", "{x: 1}", "received a mapping"),
    ("[[x], x]", "[x]", "received a list"),
    ("{x: 1}", "{x: 1}", "received a mapping"),
    ("null", "null", "received nothing (null)"),
    ("[x, 3]", "3]", "received 3"),
    ("[x, true]", "true", "received boolean"),
])
def test_step_input_of_any_other_type_is_refused(tmp_path: Path, value: str, needle: str, received: str) -> None:
    text = HEAD + f"block:\n  steps:\n    - {{name: a, op: add, in: {value}}}\n"
    refused_everywhere(tmp_path, text, needle, "expected the name of a stage", received)


def test_steps_null_is_refused(tmp_path: Path) -> None:
    text = HEAD + "block:\n  steps: null\n"
    refused_everywhere(tmp_path, text, "null", "block.steps", "expected a list of steps", "received nothing (null)")


@pytest.mark.parametrize("text, needle, field", [
    (HEAD + f"block: {{eps: {BIG}}}\n", BIG, "block.eps"),
    (HEAD + f"block: {{positions: sinusoidal, position_base: {BIG}}}\n", BIG, "block.position_base"),
    (HEAD + f"weights: {{norm1: {{gamma: [{BIG}, 1]}}}}\n", BIG, "weights.norm1.gamma[0]"),
    (f"dims: {{C: 2, H: 2, F: 3}}\ninput: {{x: [[{BIG}, 1]]}}\nseed: 0\n", BIG, "input.x[0][0]"),
    (f"dims: {{C: 2, H: 2, F: 3}}\ninput: {{tokens: [0, -{BIG}]}}\nseed: 0\n", "-" + BIG, "input.tokens[1]"),
    (f"dims: {{C: 2, H: 2, F: 3}}\ninput: {{tokens: [0, {BIG}]}}\nseed: 0\n", BIG, "input.tokens[1]"),
    (HEAD.replace("seed: 0", f"seed: {BIG}"), BIG, "seed"),
    (HEAD.replace("C: 2", f"C: {BIG}"), BIG, "dims.C"),
    (HEAD + f"block: {{eps: 0x1{'0' * 256}}}\n", "0x1", "block.eps"),  # 2**1024 in hex
    (HEAD + f"block: {{eps: {2**1024 - 2**970}}}\n", str(2**1024 - 2**970), "block.eps"),  # the first integer that rounds to inf
])
def test_integer_literals_beyond_float64_are_refused(tmp_path: Path, text: str, needle: str, field: str) -> None:
    refused_everywhere(tmp_path, text, needle, field, "expected a number smaller than about 1.8e308")


def test_a_million_digits_cost_nothing(tmp_path: Path) -> None:
    refused_everywhere(tmp_path, HEAD + f"block: {{eps: 1{'0' * 1_000_000}}}\n", "1000", "block.eps", "1000001 digits")


def test_the_largest_integer_a_float64_holds_is_read(tmp_path: Path) -> None:
    from conftest import load_text

    spec = load_text(HEAD + f"block: {{eps: {2**1024 - 2**971}}}\n")
    assert spec.block.eps == float(2**1024 - 2**971) == 1.7976931348623157e308


@pytest.mark.parametrize("token", ["10000000", "1" + "0" * 300])
def test_a_huge_token_id_without_an_embedding_is_out_of_range(tmp_path: Path, token: str) -> None:
    text = f"dims: {{C: 2, H: 2, F: 3}}\ninput: {{tokens: [0, 1, {token}]}}\nseed: 0\n"
    refused_everywhere(tmp_path, text, "[0, 1", "input.tokens", "is out of range", "at most 10,000,000")


def test_the_largest_inferred_vocabulary_is_allowed() -> None:
    from conftest import load_text

    assert load_text("dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 9999999]}\nseed: 0\n").dims.V == 10_000_000


def test_a_long_number_is_shortened_in_messages(tmp_path: Path) -> None:
    r = run_app("run", str(write_spec(tmp_path, HEAD.replace("seed: 0", "seed: 1" + "0" * 300))))
    assert_refused(r, "seed", "(301 characters)")
    assert len(r.stderr) < 300, r.stderr


# -- a hand-edited JSON trace: no setting may be NaN or infinite (JSON has no such numbers) ----------
def saved_trace(tmp_path: Path) -> tuple[Path, str]:
    spec = write_spec(tmp_path, HEAD)
    r = run_app("run", str(spec), "--json")
    assert r.returncode == 0, r.stderr
    return spec, r.stdout


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "0", "-0.5"])
def test_a_trace_whose_eps_is_not_a_positive_number_is_refused(tmp_path: Path, token: str) -> None:
    spec, text = saved_trace(tmp_path)
    edited = tmp_path / "edited.json"
    assert '"eps": 1e-05' in text
    edited.write_text(text.replace('"eps": 1e-05', f'"eps": {token}'))
    for extra in ((), ("--format", "csv")):
        assert_refused(run_app("diff", str(spec), str(edited), *extra), str(edited), "block.eps", token)
    refused_json(run_app("diff", str(spec), str(edited), "--json"), str(edited), "block.eps", token)


def refused_json(r, *fragments: str) -> None:
    """Refused with --json: exit 2, the message on stderr, and the same error as a JSON object on stdout."""
    import json

    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.startswith("tracer: error: "), r.stderr
    error = json.loads(r.stdout)["error"]
    assert error["exit_code"] == 2
    for fragment in fragments:
        assert fragment in r.stderr and fragment in error["message"], fragment


def test_a_nonfinite_number_in_any_setting_is_refused(tmp_path: Path) -> None:
    spec, text = saved_trace(tmp_path)
    edited = tmp_path / "edited.json"
    assert '"position_base": 10000.0' in text  # a saved trace records every block setting
    edited.write_text(text.replace('"position_base": 10000.0', '"position_base": NaN'))
    refused_json(run_app("diff", str(spec), str(edited), "--json"), "block.position_base", "expected a finite number")
    edited.write_text(text.replace('"violations": []', '"violations": [{"kind": "x", "stage": "y", "message": "z", "shapes": {"a": 1e999}}]'))
    refused_json(run_app("diff", str(spec), str(edited), "--json"), "violations[0].shapes.a", "expected a finite number")


def test_bare_nan_tokens_among_a_stages_values_read_as_numbers(tmp_path: Path) -> None:
    import json

    spec, text = saved_trace(tmp_path)
    doc = json.loads(text)
    first = doc["stages"][0]
    first["values"][0][0][0] = "NaN"  # the form tracer writes
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc).replace('"NaN"', "NaN", 1))  # the form Python's json writes
    r = run_app("diff", str(spec), str(edited), "--json")
    assert r.returncode == 1, r.stderr  # the stage differs; the diff is written as strict JSON
    out = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the output"))
    assert out["first_diverging"] == first["name"]


# -- messages and inputs that slipped through ---------------------------------------------------------
@pytest.mark.parametrize("text, needle, fragments", [
    (HEAD + "vocab: []\n", "[]", ("vocab", "expected a non-empty list of words, received an empty list")),
    (HEAD.replace("[0, 1, 2]", "[1, 2]") + "vocab: [a, 1, b]\n", "1, b", ("vocab[1]", "expected a word (text), received the number 1")),
    (HEAD.replace("[0, 1, 2]", "[0, 1]") + "block: {mask: [[1, 0], [0.5, 1]]}\n", "0.5",
     ("block.mask[1][0]", "expected 0 (masked) or 1 (may attend), received 0.5")),
    (HEAD.replace("[0, 1, 2]", "[0, 1]") + "block: {mask: [[1, 0], [true, 1]]}\n", "true", ("block.mask[1][0]", "received boolean")),
    ("model: encoder-decoder\ndims: {C: 2, H: 2, F: 3}\ninput: {source: [0, 1], target: [1, 0]}\nseed: 0\nencoder: {head: separate}\n",
     "head", ("encoder.head", "the output head belongs to the decoder")),
])
def test_wording_and_unused_settings(tmp_path: Path, text: str, needle: str, fragments: tuple[str, ...]) -> None:
    refused_everywhere(tmp_path, text, needle, *fragments)


def test_quoted_numbers_are_words(tmp_path: Path) -> None:
    from conftest import load_text

    spec = load_text(HEAD.replace("[0, 1, 2]", "['2', '1']") + "vocab: ['1', '2', on]\n")
    assert spec.vocab == ("1", "2", "on") and spec.input.value == [[1, 0]]


CONTROL = 'name: "a\\x1b[31mred\\x00\\u202e\\nb"\n'


@pytest.mark.parametrize("args", [(), ("--format", "markdown"), ("--format", "csv"), ("--json",), ("--steps",)])
def test_control_characters_from_a_spec_are_never_written_raw(tmp_path: Path, args: tuple[str, ...]) -> None:
    import re

    text = CONTROL + HEAD.replace("[0, 1, 2]", '["x\\ty", z]') + 'vocab: ["x\\ty", z]\n' + \
        'block:\n  steps:\n    - {name: n, op: layer_norm, in: x, weights: n, meaning: "m\\x1b]0;t\\x07"}\n'
    r = run_app("run", str(write_spec(tmp_path, text)), *args)
    assert r.returncode == 0, r.stderr
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", r.stdout), repr(r.stdout[:300])
    if "csv" not in args:  # the CSV has no name or meaning column
        assert "x1b" in r.stdout.replace("\\\\", "\\")  # shown as an escape, not dropped


def test_control_characters_in_svg_and_html(tmp_path: Path) -> None:
    import re

    spec = write_spec(tmp_path, CONTROL + HEAD)
    r = run_app("graph", str(spec), "--svg", str(tmp_path / "g.svg"), "--html", str(tmp_path / "g.html"))
    assert r.returncode == 0, r.stderr
    for name in ("g.svg", "g.html"):
        assert not re.search("[\x00-\x08\x0b-\x1f]", (tmp_path / name).read_text()), name


def test_control_characters_in_keys_are_escaped_in_messages(tmp_path: Path) -> None:
    r = run_app("run", str(write_spec(tmp_path, HEAD + 'block: {"e\\x1bps": 1}\n')))
    assert_refused(r, "block.e\\x1bps")
    assert "\x1b" not in r.stderr


def test_printable_leaves_ordinary_text_alone() -> None:
    from tracer.spec.yamlio import printable

    assert printable("Example 17.2 — 例 17.2, café\u00a0") == "Example 17.2 — 例 17.2, café\u00a0"
    assert printable("a\x1bb\x00c\nd\u202ee\x9bf") == "a\\x1bb\\x00c\\nd\\u202ee\\x9bf"
