"""Messages translated where they are made (tracer.messages): the catalogue covers every template the code uses."""

from __future__ import annotations

import ast
import functools
import json
import pickle
from pathlib import Path
from typing import NamedTuple

from conftest import EXAMPLES, REPO, run_cli, write_spec

from tracer import i18n, zh
from tracer.errors import SpecError
from tracer.messages import Message, at, join, msg, nmsg, render

TRACER = REPO / "tracer"

# A msg() whose template is not a literal, and why that is safe: its template is one of a fixed set that
# is itself checked.  (file, function called, the argument's source) -> the reason.  tr() takes UI words,
# often from a table of them (STATUS_WORDS[...]): only its literal calls are checked here.
NON_LITERAL: dict[tuple[str, str, str], str] = {
    ("graph/view.py", "msg", "graph_template(OPS[step.op].graph)"): "an op's graph template, each in the catalogue (test_formulas_are_in_the_catalogue)",
    ("model/contracts.py", "msg", "AXIS_WORDS[letter]"): "the words of contracts.AXIS_WORDS, each in the catalogue (test_axis_words_are_in_the_catalogue)",
    ("model/catalogue.py", "msg", "formula_template(template)"):
        "an op's formula or one of catalogue's formula tables, each in the catalogue (test_formulas_are_in_the_catalogue)",
}


class Site(NamedTuple):
    path: str
    line: int
    func: str  # msg | nmsg | tr
    key: str | tuple[str, str] | None  # None: not a literal
    fields: frozenset[str] | None  # None: **kwargs
    source: str  # the template argument's source (for the whitelist)


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _segment(lines: list[str], node: ast.expr) -> str:
    """ast.get_source_segment, but with the file's lines split once (it splits the whole file at each call)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    end = node.end_col_offset
    if first == last:
        return lines[first].encode()[node.col_offset:end].decode()
    return "".join([lines[first].encode()[node.col_offset:].decode(), *lines[first + 1:last], lines[last].encode()[:end].decode()])


def sites() -> list[Site]:
    """Every msg(...), nmsg(...) and tr(...) call in tracer/, with its literal template."""
    found: list[Site] = []
    for path in sorted(TRACER.rglob("*.py")):
        rel = path.relative_to(TRACER)
        if rel.name in ("messages.py",):
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            func = _name(node.func)
            if func not in ("msg", "nmsg", "tr") or not node.args:
                continue
            fields = None if any(k.arg is None for k in node.keywords) else frozenset(k.arg for k in node.keywords if k.arg)
            if func == "nmsg":
                s, p = (_literal(a) for a in node.args[:2]) if len(node.args) >= 2 else (None, None)
                key: str | tuple[str, str] | None = (s, p) if s is not None and p is not None else None
                fields = None if fields is None else fields | {"n"}
            else:
                key = _literal(node.args[0])
            found.append(Site(str(rel), node.lineno, func, key, fields, _segment(lines, node.args[0])))
    return found


def _fields(template: str) -> set[str]:
    out, pos = set(), 0
    while (i := template.find("{", pos)) >= 0 and (j := template.find("}", i + 1)) >= 0:
        name = template[i + 1:j]
        if name.isidentifier():
            out.add(name)
            pos = j + 1
        else:
            pos = i + 1
    return out


def catalogue(func: str) -> dict:
    return {"msg": zh.MESSAGES, "nmsg": zh.PLURALS, "tr": zh.UI}[func]


@functools.cache
def all_sites() -> tuple[Site, ...]:
    """sites(), parsed once, when the first test asks (not as each worker collects)."""
    return tuple(sites())
FORMULA_LETTERS = {"LN", "actf"}  # first {norm}, N_1 = {LN}1(X): the Chinese is 第一次{norm}，N_1, as Table 17.1 has it


def test_every_template_is_a_literal():
    """Templates must be literals so this file can check them against the catalogue."""
    loose = [s for s in all_sites() if s.func != "tr" and s.key is None and (s.path, s.func, s.source) not in NON_LITERAL]
    assert not loose, "\n".join(f"tracer/{s.path}:{s.line}: {s.func}({s.source}, ...)" for s in loose)
    kwargs = [s for s in all_sites() if s.func != "tr" and s.fields is None]
    assert not kwargs, f"fields are given by name (no **kwargs), so they can be checked: {kwargs}"


def test_the_whitelist_is_current():
    used = {(s.path, s.func, s.source) for s in all_sites() if s.key is None}
    assert set(NON_LITERAL) <= used, set(NON_LITERAL) - used


def test_every_template_has_chinese_with_the_same_fields():
    missing, wrong = [], []
    for s in all_sites():
        if s.key is None or s.fields is None:
            continue
        table = catalogue(s.func)
        if s.key not in table:
            missing.append(f"tracer/{s.path}:{s.line}: {s.func}({s.key!r})")
            continue
        english = set().union(*(_fields(t) for t in (s.key if isinstance(s.key, tuple) else (s.key,))))
        given = set(s.fields) - ({"n"} - english if s.func == "nmsg" else set())  # nmsg's n picks the form even if unprinted
        if english != given and s.func != "tr":
            wrong.append(f"tracer/{s.path}:{s.line}: the template has {sorted(english)}, the call gives {sorted(s.fields)}")
        dropped = english - _fields(table[s.key])  # a stage meaning in Table 17.1's words may leave its formula's letters out
        if _fields(table[s.key]) - english or (dropped and not dropped <= FORMULA_LETTERS):
            wrong.append(f"tracer/{s.path}:{s.line}: the Chinese of {s.key!r} has {sorted(_fields(table[s.key]))}")
    assert not missing, "no zh entry:\n" + "\n".join(missing)
    assert not wrong, "\n".join(wrong)


def whitelisted_keys() -> set[str]:
    """The templates the whitelisted non-literal sites make: each table they read from."""
    from tracer.graph.view import graph_template
    from tracer.model import catalogue
    from tracer.model.activations import ACTIVATIONS
    from tracer.model.contracts import AXIS_WORDS
    from tracer.model.ops import OPS

    keys = set(AXIS_WORDS.values())
    keys |= {catalogue.formula_template(t) for t in [op.formula for op in OPS.values()]
             + [*(a.formula for a in ACTIVATIONS.values()), *catalogue.INTERNAL_FORMULAS.values()]}
    return keys | {graph_template(op.graph) for op in OPS.values()}


def test_every_zh_entry_is_used():
    used = {(s.func, s.key) for s in all_sites()} | {("msg", k) for k in whitelisted_keys()}
    for func, table in (("msg", zh.MESSAGES), ("nmsg", zh.PLURALS)):
        unused = sorted(str(k) for k in table if (func, k) not in used)
        assert not unused, f"zh entries no {func}() uses:\n" + "\n".join(unused)


def test_every_ui_word_is_in_the_code():
    """zh.UI (the fixed words tr() looks up: headers, status words, leads) has no dead entry: each key is written
    somewhere in tracer/ as a literal (a tr() call's, or a header table's that a view passes to tr())."""
    literals = {node.value for path in sorted((REPO / "tracer").rglob("*.py")) if path.name != "zh.py"
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    unused = sorted(k for k in [*zh.UI, *zh.KINDS] if k not in literals)
    assert not unused, "zh.UI/zh.KINDS entries no code writes:\n" + "\n".join(unused)


def coverage() -> tuple[int, int]:
    """(message sites with a zh entry, message sites) in tracer/."""
    counted = [s for s in all_sites() if s.func in ("msg", "nmsg")]
    whitelisted = sum(1 for s in counted if s.key is None and (s.path, s.func, s.source) in NON_LITERAL)  # checked by their own tests
    return sum(1 for s in counted if s.key is not None and s.key in catalogue(s.func)) + whitelisted, len(counted)


def test_coverage_is_complete(capsys):
    covered, total = coverage()
    with capsys.disabled():
        print(f"\nzh coverage: {covered} of {total} message sites ({100 * covered / max(total, 1):.1f}%)")
    assert total > 0 and covered == total


def test_axis_words_are_in_the_catalogue():
    from tracer.model.contracts import AXIS_WORDS

    assert set(AXIS_WORDS.values()) <= set(zh.MESSAGES)


def test_formulas_are_in_the_catalogue():
    from tracer.model import catalogue
    from tracer.model.activations import ACTIVATIONS
    from tracer.model.ops import OPS

    templates = [op.formula for op in OPS.values()] + [*(a.formula for a in ACTIVATIONS.values()), *catalogue.INTERNAL_FORMULAS.values()]
    missing = [t for t in templates if catalogue.formula_template(t) not in zh.MESSAGES]
    assert not missing, missing
    from tracer.graph.view import graph_template

    missing = [op.graph for op in OPS.values() if graph_template(op.graph) not in zh.MESSAGES]
    assert not missing, missing


def test_kinds_are_in_the_catalogue():
    assert set(zh.KINDS) <= set(zh.MESSAGES)


def test_ui_leads():
    assert {"tracer: error: ", "tracer: note: "} <= set(zh.UI)


# -- rendering -------------------------------------------------------------------------------

def test_fields_are_filled_after_translation():
    m = msg("unknown key {key}", key="'{n}'")  # a value that looks like a field is not filled again
    assert str(m) == "unknown key '{n}'"
    assert m.render("zh") == "未知的键 '{n}'"
    assert m.template == "unknown key {key}" and m.fields == {"key": "'{n}'"}


def test_braces_that_are_not_fields_stay():
    m = msg("missing required section 'dims' (e.g. dims: {C: 2, H: 2, F: 3})")
    assert str(m) == "missing required section 'dims' (e.g. dims: {C: 2, H: 2, F: 3})"
    assert m.render("zh") == "缺少必需的部分 'dims'（例如 dims: {C: 2, H: 2, F: 3}）"


def test_nested_messages_render_in_the_same_language():
    m = msg("expected {what}, received {got}", what=msg("a whole number"), got=msg("text {v}", v="'x'"))
    assert str(m) == "expected a whole number, received text 'x'"
    assert m.render("zh") == "应为整数，实际为文本 'x'"
    assert m.render("en") == str(m)


def test_plural_forms():
    one, two = (nmsg("{op} reads {n} stage, received {m}", "{op} reads {n} stages, received {m}", n, op="add", m=1) for n in (1, 2))
    assert str(one) == "add reads 1 stage, received 1" and str(two) == "add reads 2 stages, received 1"
    assert nmsg("{n} spec", "{n} specs", 0) == "0 specs"
    assert one.key == ("{op} reads {n} stage, received {m}", "{op} reads {n} stages, received {m}")


def test_str_is_english_while_zh_is_chosen():
    m = at("spec.yaml:4:1", at("blok", join([msg("unknown key {key}", key="'blok'"), msg("did you mean {names}?", names="'block'")])))
    with i18n.using("zh"):
        assert str(m) == "spec.yaml:4:1: blok: unknown key 'blok'; did you mean 'block'?"
        assert f"{m}" == str(m) and json.dumps(m) == json.dumps(str(m))
        assert render(m) == "spec.yaml:4:1: blok: 未知的键 'blok'；是不是想写 'block'？"
    assert render(m) == str(m)


def test_a_plain_str_is_printed_as_written():
    assert render("a checkpoint's own words", "en") == "a checkpoint's own words"
    assert render(None) == ""


def test_errors_carry_the_message_and_pickle():
    e = SpecError(at("s.yaml:1:1", msg("duplicate key")))
    assert str(e) == "s.yaml:1:1: duplicate key" and isinstance(e.message, Message)
    back = pickle.loads(pickle.dumps(e))
    assert back.message.render("zh") == "s.yaml:1:1: 重复的键"
    p = pickle.loads(pickle.dumps(nmsg("{n} stage not recorded", "{n} stages not recorded", 3)))
    assert str(p) == "3 stages not recorded" and p.key == ("{n} stage not recorded", "{n} stages not recorded")
    assert SpecError("plain").message == "plain"


def test_importing_messages_is_cheap():
    import subprocess
    import sys

    code = ("import sys, tracer; before = set(sys.modules); import tracer.messages; "
            "print(sorted(set(sys.modules) - before - {'tracer.messages'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip() == "[]", out  # not even re: no regex is compiled for a message


# -- machine output stays English ---------------------------------------------------------------

def test_json_of_a_violation_is_english_under_zh():
    path = EXAMPLES / "violations" / "beta-typo.yaml"
    en = run_cli("run", str(path), "--json", "--lang", "en")
    zh_ = run_cli("run", str(path), "--json", "--lang", "zh")
    assert en.returncode == zh_.returncode == 1
    assert en.stdout == zh_.stdout
    violations = json.loads(zh_.stdout)["violations"]
    assert violations and violations[0]["message"].isascii()


def test_a_worker_error_keeps_its_language(tmp_path):
    bad = write_spec(tmp_path, "dims: {C: 3, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n")
    res = run_cli("run", str(bad), "--lang", "zh")
    assert res.returncode == 2 and "H = 2 必须整除 C = 3" in res.stderr


def test_the_checkout_is_tested():
    import tracer

    assert Path(tracer.__file__).resolve().parent == TRACER
