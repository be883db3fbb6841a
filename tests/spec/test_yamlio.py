"""The YAML reader: plain values, line/column marks, numbers as users write them, and refusals."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.errors import SpecError
from tracer.spec import yamlio


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


# -- slips of a Chinese keyboard and of the tab key (tracer.spec.yamlslips) ------------------------------
@pytest.fixture(params=["libyaml", "python"])
def parser(request, monkeypatch):
    """Both parsers PyYAML may use: libyaml's (refuses deep nesting with its own words in 6.0.4) and its own."""
    import yaml

    if request.param == "python":
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    elif not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML built without libyaml")
    return request.param


SLIPS = [  # text, the slipped character (its first occurrence is where the message points), field, what to type
    ("input: {tokens: [我，喜欢，你]}\n", "，", "input.tokens[0]", "type ',' instead"),
    ("vocab: [我，喜欢，你，猫]\n", "，", "vocab[0]", "type ',' instead"),
    ("dims: {C：4, H: 2}\n", "：", "dims", "type ':' and a space instead"),
    ("dims: {C: 4； H: 2}\n", "；", "dims.C", "YAML separates items with commas"),
    ("input:\n  tokens: ［0, 1］\n", "［", "input.tokens", "type '[' instead"),
    ("input: {tokens: [0, 1］}\n", "］", "input.tokens[1]", "type ']' instead"),
    ("dims: ｛C: 2｝\n", "｛", "dims", "type '{' instead"),
    ("block:\n  norm_order： pre\n  mask: causal\n", "：", "", "type ':' and a space instead"),
    ("dims:\n  C：2\n", "：", "dims", "type ':' and a space instead"),
    ("dims: {C:\u30002}\n", "\u3000", "dims", "type a space instead"),
    ("dims:\n\u3000\u3000C: 2\n", "\u3000", "", "type a space instead"),
    ("a: [1, （2）]\n", "（", "a[1]", "type '(' instead"),
]


@pytest.mark.parametrize("text,char,field,fix", SLIPS)
def test_full_width_punctuation_is_named_where_it_is(parser, text, char, field, fix):
    with pytest.raises(SpecError) as e:
        load(text)
    message = str(e.value)
    line = text[:text.index(char)].count("\n") + 1
    col = text.index(char) - text.rfind("\n", 0, text.index(char))
    assert message.startswith(f"s.yaml:{line}:{col}: "), message
    assert f"U+{ord(char):04X}" in message and "as a Chinese keyboard types it" in message and fix in message
    if char != "\u3000":
        assert f"'{char}'" in message
    if field:
        assert f": {field}: " in message


@pytest.mark.parametrize("text", [
    "name: '例 17.2，预归一化'\ndescription: 这是一个块，它有两层（见第 17 章）：预归一化\n",  # free text, quoted or not
    "a: ['我，喜欢', \"你：猫\"]\n",  # quoted: text, whatever it holds
    "a: [1, 2]  # 注释，可以有全角标点：［］\n",  # a comment
    "a: |\n  块标量，里面：随便写［］\nb: 1\n",  # a block scalar
    "steps:\n  - {name: s, op: add, in: [x, y], meaning: 残差，相加}\n",  # a meaning is text, even in a flow mapping
])
def test_full_width_punctuation_in_text_is_text(parser, text):
    load(text)


@pytest.mark.parametrize("text,line,col", [
    ("dims:\n\tC: 2\n", 2, 1),
    ("dims:\n  C: 2\n\tH: 2\n", 3, 1),
    ("dims:\n  \tC: 2\n", 2, 3),
])
def test_a_tab_in_the_indentation_is_named(parser, text, line, col):
    with pytest.raises(SpecError) as e:
        load(text)
    assert str(e.value) == f"s.yaml:{line}:{col}: a tab at {line}:{col}; YAML indents with spaces"


@pytest.mark.parametrize("text", ["a: " + "[" * 3000 + "]" * 3000 + "\n", "a: " + "{b: " * 3000 + "1" + "}" * 3000 + "\n",
                                  "a: " + "[" * 40 + "1" + "]" * 40 + "\n"])
def test_deep_nesting_is_refused_in_tracers_words_by_every_parser(parser, text):
    # libyaml (PyYAML 6.0.4) stops deep flow nesting itself, at about 1000 levels, before tracer sees level 33
    with pytest.raises(SpecError) as e:
        load(text)
    opener = [i for i, ch in enumerate(text) if ch in "[{"][31]  # the document's mapping is level 1: the 32nd bracket opens level 33
    assert str(e.value).startswith(f"s.yaml:1:{opener + 1}: a") and "values nest more than 32 levels deep" in str(e.value)
