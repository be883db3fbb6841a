"""The YAML reader: plain values, line/column marks, numbers as users write them, and refusals."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer import yamlio
from tracer.errors import SpecError


def load(text):
    return yamlio.load(text, "s.yaml")


@pytest.mark.parametrize("text,value", [
    ("1e-5", 1e-5), ("1E-5", 1e-5), ("5e-6", 5e-6), ("-2.5e3", -2500.0), ("+1e-5", 1e-5),
    ("1.0e-5", 1e-5), ("0.00001", 1e-5), ("3", 3), ("-7", -7), ("0x1f", 31), (".5", 0.5),
])
def test_numbers_as_users_write_them(text, value):
    doc, _ = load(f"eps: {text}\n")
    assert doc["eps"] == value and type(doc["eps"]) is type(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=200, deadline=None)
def test_any_float_in_e_notation_reads_back_exactly(x):
    for text in (repr(x), f"{x:e}", f"{x:.17E}"):
        doc, _ = load(f"v: {text}\n")
        assert doc["v"] == float(text)


def test_quoted_numbers_stay_text():
    doc, _ = load("a: '1e-5'\nb: \"5e-6\"\n")
    assert doc == {"a": "1e-5", "b": "5e-6"}


def test_special_floats_and_booleans():
    doc, src = load("a: .inf\nb: -.inf\nc: .nan\nd: yes\ne: no\nf: true\ng: null\n")
    assert doc["a"] == math.inf and doc["b"] == -math.inf and math.isnan(doc["c"])
    assert doc["d"] is True and doc["e"] is False and doc["f"] is True and doc["g"] is None
    assert src.raw[("d",)] == "yes"  # kept to quote it back in messages


def test_marks_are_one_based_line_and_column():
    text = "dims: {C: 2, H: 2, F: 3}\nweights:\n  ffn:\n    w1: [[1, 0], [0, 1]]\n"
    _, src = load(text)
    assert src.marks[("dims", "H")] == yamlio.Mark(1, 17)  # the value's position
    assert src.marks[("weights", "ffn", "w1")] == yamlio.Mark(4, 9)
    assert src.marks[("weights", "ffn", "w1", 1, 0)] == yamlio.Mark(4, 19)
    assert src.where(("weights", "ffn", "w1", 5)) == "s.yaml:4:9"  # falls back to the nearest marked parent
    assert src.where(("nothing",)) == "s.yaml:1:1"


def test_format_path():
    assert yamlio.format_path(("weights", "ffn", "w1", 2, 0)) == "weights.ffn.w1[2][0]"
    assert yamlio.format_path(()) == "(document)"


@pytest.mark.parametrize("text,message", [
    ("a: !!python/object:os.system {}\n", "s.yaml:1:4: a: the tag 'tag:yaml.org,2002:python/object:os.system' is not allowed"),
    ("a: !!python/object/apply:os.system [ls]\n", "the tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed"),
    ("a: !!binary aGVsbG8=\n", "the tag 'tag:yaml.org,2002:binary' is not allowed"),
    ("a: !custom 3\n", "the tag '!custom' is not allowed"),
    ("a: 1\nb: 2\na: 3\n", "s.yaml:3:1: a: duplicate key (first given at line 1)"),
    ("w: {x: 1, x: 2}\n", "s.yaml:1:11: w.x: duplicate key (first given at line 1)"),
    ("base: &b {C: 2}\ndims:\n  <<: *b\n", "s.yaml:3:3: dims: keys must be plain names (merge keys '<<' are not supported)"),
    ("a: [1, 2\nb: 3\n", "YAML syntax error"),
    ("- 1\n- 2\n", "s.yaml:1:1: the document is a list; a spec must be a mapping"),
    ("42\n", "the document is a single value"),
    ("# only a comment\n", "s.yaml: is empty"),
    ("a: 1:30\n", "s.yaml:1:4: a: cannot read '1:30' as an integer"),
    ("a: " + "[" * 40 + "1" + "]" * 40 + "\n", "values nest more than 32 levels deep"),
    ("a: " + "[" * 3000 + "]" * 3000 + "\n", "nesting is too deep"),
])
def test_refusals(text, message):
    with pytest.raises(SpecError) as e:
        load(text)
    assert message in str(e.value)


def test_alias_bomb_is_refused_before_expansion():
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with pytest.raises(SpecError, match="anchors and aliases that multiply like this are refused"):
        load("\n".join(lines) + "\n")


def test_small_aliases_are_fine():
    doc, _ = load("row: &r [1, 2]\nm: [*r, *r]\n")
    assert doc["m"] == [[1, 2], [1, 2]]


@pytest.mark.parametrize("content,message", [
    (b"", "is empty"),
    (b"   \n\n", "is empty"),
    (b"dims: {C: 2\x00}", "is a binary file (contains NUL bytes)"),
    (b"dims: 1\n\xff\xfe\n", ":2: is not UTF-8 text (byte 0xff at offset 8)"),
])
def test_read_text_refusals(tmp_path, content, message):
    p = tmp_path / "s.yaml"
    p.write_bytes(content)
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        yamlio.read_text(str(p))


def test_read_text_missing_and_directory(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        yamlio.read_text(str(tmp_path / "nope.yaml"))
    with pytest.raises(SpecError, match="is a directory"):
        yamlio.read_text(str(tmp_path))


def test_read_text_strips_a_utf8_bom(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_bytes("\ufeffname: 例 17.2\n".encode("utf-8"))
    doc, _ = load(yamlio.read_text(str(p)))
    assert doc == {"name": "例 17.2"}
