"""tracer page: one self-contained HTML file whose embedded data decode to the trace's arrays bit for bit, whose
Table 17.1 strings are the terminal table's, within its budget, written as every file tracer writes.
(No browser here: the page's behaviour in Chromium is tested elsewhere.)"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, POST, PRE, REPO, SPECS, assert_refused, run_app, run_cli, write_spec

import tracer
from tracer.page import model
from tracer.page.strings import STRINGS

DATA = re.compile(r'<script id="tracer-data" type="application/json">(.*?)</script>', re.S)


def page_data(html: str) -> dict:
    found = DATA.findall(html)
    assert len(found) == 1
    return json.loads(found[0])


def decoded(payload: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(payload["b64"]), dtype="<f8").reshape(payload["shape"])


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a, dtype="<f8"), np.ascontiguousarray(b, dtype="<f8")
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def pre_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    out = tmp_path_factory.mktemp("page") / "pre.html"
    r = run_app("page", PRE, "-o", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    return html, page_data(html)


def terminal_rows(*args: str) -> dict[str, list[str]]:
    """The terminal table of `tracer run`, piped: stage -> [what it is, value, shape]."""
    r = run_app("run", *args)
    assert r.returncode in (0, 1), r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0].split("  ")[0]] = cells[1:]
    return rows


def test_a_long_row_reads_as_each_languages_terminal_prints_it(tmp_path):
    # a row of 32 values ends '… 32 values' in English, '… 共 32 个值' in Chinese: each language's page shows its own
    out = tmp_path / "stack.html"
    assert run_app("page", str(SPECS / "stack-2-layers.yaml"), "-o", str(out)).returncode == 0
    entry = page_data(out.read_text(encoding="utf-8"))["sides"][0]["stages"]["blocks.0.hidden"]
    (start,) = entry["pos_text"]["0,0"]  # the text before the row's ending, which is kept once for the stage, by language
    texts = {lang: start + entry["pos_suffix"][lang] for lang in ("en", "zh")}
    for lang in ("en", "zh"):
        r = run_app("run", str(SPECS / "stack-2-layers.yaml"), "--lang", lang, env={"COLUMNS": "250"})
        row = next(line for line in r.stdout.splitlines() if line.startswith("│ blocks.0.hidden "))
        assert texts[lang] == row.strip("│").split("│")[2].strip()
    assert texts["en"] != texts["zh"]


# -- one file, nothing outside it -------------------------------------------------------------

def test_the_page_is_one_file_with_no_external_reference(pre_page):
    html, data = pre_page
    assert html.startswith("<!-- tracer ") and "<!DOCTYPE html>" in html
    assert '<html lang="en">' in html
    for banned in ("http://", "https://", "//cdn", "<link", " src=", "url(", "@import"):
        assert banned not in html, banned
    script = html.split("<script>")[1]
    assert "eval(" not in script and "new Function" not in script
    assert data["kind"] == "run" and data["lang"] == "en"


def test_the_chapter_page_is_well_under_a_megabyte(pre_page):
    html, data = pre_page
    size = len(html.encode("utf-8"))
    assert size < 200_000
    assert data["budget"]["summarised"] == [] and not data["budget"]["over"]
    assert abs(data["budget"]["size"] - size) < 200  # the page says its own size (the mark line aside)


def test_every_stage_decodes_to_the_trace_bit_for_bit(pre_page):
    _, data = pre_page
    t = tracer.trace(PRE)
    stages = data["sides"][0]["stages"]
    assert set(stages) == set(t)
    for name, entry in stages.items():
        assert entry["summary"] is None
        assert same_bits(decoded(entry["value"]), t[name]), name
        assert entry["shape"] == list(t[name].shape) and entry["label"] == str(t.shape_of(name))


def test_the_diagram_follows_the_graph_sections(pre_page):
    _, data = pre_page
    sections = data["sides"][0]["sections"]
    assert [s["kind"] for s in sections] == ["entry", "path", "path"]
    assert sections[0]["stages"] == ["embed", "position", "x"]
    assert sections[1]["stages"][0] == "norm1" and sections[1]["stages"][-1] == "residual1"
    assert "attn.q" in sections[1]["stages"] and "attn.weights" in sections[1]["stages"]
    assert sections[2]["stages"] == ["norm2", "hidden", "ffn", "output"]
    assert sections[1]["title"]["zh"] != sections[1]["title"]["en"]


def test_axis_letters_name_the_keys_s():
    assert model.letters(("B", "H", "T", "T")) == ["b", "h", "t", "s"]
    assert model.letters(("B", "T", "C")) == ["b", "t", "c"]


# -- the numbers as the terminal prints them ---------------------------------------------------

@pytest.mark.parametrize("pos", [0, 1, 2])
def test_table_17_1_strings_are_the_terminal_tables(pre_page, pos):
    _, data = pre_page
    rows = terminal_rows(PRE, "--pos", str(pos))
    t17 = data["table17"]
    assert t17["stages"] == list(rows)
    stages = data["sides"][0]["stages"]
    for name, (meaning, value, shape) in rows.items():
        assert stages[name]["pos_text"][f"0,{pos}"] == value
        assert t17["meanings"][name]["en"] == meaning
        assert stages[name]["label"] == shape
    header = t17["headers"][f"0,{pos}"]["en"].split("\t")
    assert header[2] == f"value at b=0, t={pos}"


def test_a_precision_reaches_the_page(tmp_path):
    out = tmp_path / "p.html"
    assert run_app("page", PRE, "-o", str(out), "-p", "3", "-t", "-1").returncode == 0
    data = page_data(out.read_text(encoding="utf-8"))
    rows = terminal_rows(PRE, "-p", "3", "-t", "2")
    assert data["t"] == 2
    for name, (_, value, _) in rows.items():
        assert data["sides"][0]["stages"][name]["pos_text"]["0,2"] == value
    norm1 = data["sides"][0]["stages"]["norm1"]["value"]
    assert norm1["fmt"][0] == f"{tracer.trace(PRE)['norm1'].ravel()[0]:.3f}"


def test_non_finite_values_survive_and_the_violation_is_explained_as_the_terminal_does(tmp_path):
    spec = str(EXAMPLES / "violations" / "fully-masked-row.yaml")
    out = tmp_path / "nan.html"
    r = run_app("page", spec, "-o", str(out), "--keep-going")
    assert r.returncode == 1, r.stderr
    data = page_data(out.read_text(encoding="utf-8"))
    t = tracer.trace(spec, keep_going=True)
    entry = data["sides"][0]["stages"]["attn.weights"]
    got = decoded(entry["value"])
    assert np.isnan(got).sum() == np.isnan(t["attn.weights"]).sum() > 0
    assert same_bits(got, t["attn.weights"])
    assert entry["violation"]["kind"] == "nonfinite"
    terminal = run_app("run", spec, "--keep-going").stdout
    for line in entry["violation"]["text"]["en"].splitlines():
        assert line.strip() in terminal, line
    assert "nan" in entry["value"]["fmt"]


def test_encoding_keeps_every_double_exactly():
    a = np.array([0.1, -0.0, 5e-324, 1e308, np.inf, -np.inf, np.nan, 1 / 3])
    back = decoded({"b64": model.encode(a), "shape": [8]})
    assert a.tobytes() == back.tobytes()


AWKWARD = [0.1, 1.0, -0.0, 0.0, 1e-05, 0.0001, 1e16, 1e15, 123456789012345680.0, 1e21, 1e22, 5e-324, 1.7976931348623157e308,
           -2.5e-7, 0.30000000000000004, 100.0, 1234.5, 9007199254740993.0, 2.0 ** -1074 * 3, 1e-4 * 3, float("nan"),
           float("inf"), float("-inf"), 0.999998000005999799, -1.5e300, 12345678901234567890.0]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: the page's repr is checked with it")
def test_the_page_script_writes_python_repr_for_awkward_doubles():
    script = (REPO / "tracer" / "page" / "page.js").read_text(encoding="utf-8")
    body = script.split("/* pyrepr-begin */")[1].split("/* pyrepr-end */")[0]
    xs = list(AWKWARD)
    program = body + "\nconst u = Buffer.from(process.argv[1], 'base64');\n" \
                     "const xs = new Float64Array(u.buffer.slice(u.byteOffset, u.byteOffset + u.length));\n" \
                     "console.log(JSON.stringify(Array.from(xs, pyRepr)));\n"
    raw = base64.b64encode(np.array(xs, dtype="<f8").tobytes()).decode()
    r = subprocess.run(["node", "-e", program, raw], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [repr(x) for x in xs]


# -- the budget ----------------------------------------------------------------------------------

MID = """\
name: mid-sized
dims: {B: 1, T: 32, C: 48, H: 4, F: 96, V: 10, T_max: 32}
seed: 3
block: {norm_order: pre, mask: causal}
input: {tokens: random}
"""


@pytest.fixture(scope="module")
def mid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_spec(tmp_path_factory.mktemp("mid"), MID)


def test_a_small_budget_summarises_the_largest_stages_first(mid, tmp_path):
    out = tmp_path / "p.html"
    r = run_app("page", str(mid), "-o", str(out), "--page-budget", "0.25", "-t", "5")
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    assert len(html.encode("utf-8")) <= 250_000
    data = page_data(html)
    stages = data["sides"][0]["stages"]
    t = tracer.trace(str(mid))
    summarised = [n for n, e in stages.items() if e["summary"] is not None]
    full = [n for n, e in stages.items() if e["value"] is not None]
    assert summarised and full and data["budget"]["summarised"] == sorted(summarised)
    assert f"note: {len(summarised)} arrays summarised" in r.stderr
    assert min(t[n].size for n in summarised) >= max(t[n].size for n in full)  # the largest went first
    for n in summarised:
        s = stages[n]["summary"]
        assert same_bits(decoded(s["chosen"]), t.stage(n).at(0, 5)), n  # never the chosen position's values
        norms = np.sqrt(np.sum(np.square(t[n]), axis=-1))
        assert np.allclose(decoded(s["norms"]), norms, rtol=1e-15, atol=0)
        assert sum(s["hist"]["counts"]) + s["hist"]["nonfinite"] == t[n].size
    for n in full:
        assert same_bits(decoded(stages[n]["value"]), t[n])


def test_a_budget_even_the_summaries_exceed_is_refused_naming_one_that_works(mid, tmp_path):
    out = tmp_path / "p.html"
    r = run_app("page", str(mid), "-o", str(out), "--page-budget", "0.01")
    assert_refused(r, "--page-budget 0.01", "give --page-budget")
    assert not out.exists()
    smallest = re.search(r"give --page-budget ([0-9.]+) or more", r.stderr).group(1)
    r = run_app("page", str(mid), "-o", str(out), "--page-budget", smallest)
    assert r.returncode == 0, r.stderr
    assert len(out.read_bytes()) <= float(smallest) * 1_000_000


@pytest.mark.parametrize("budget", ["0", "-1", "nan", "inf"])
def test_a_bad_budget_is_one_line_exit_2(tmp_path, budget):
    out = tmp_path / "p.html"
    assert_refused(run_app("page", PRE, "-o", str(out), f"--page-budget={budget}"), f"--page-budget {budget}: expected a positive number")
    assert not out.exists()


def test_a_bad_language_and_a_missing_file_are_one_line_exit_2(tmp_path):
    assert_refused(run_app("page", PRE, "-o", str(tmp_path / "p.html"), "--lang", "fr"), "--lang fr")
    assert_refused(run_app("page", PRE), "-o FILE")


# -- languages -----------------------------------------------------------------------------------

def test_lang_zh_opens_the_page_in_chinese(tmp_path):
    out = tmp_path / "zh.html"
    r = run_app("page", PRE, "-o", str(out), "--lang", "zh")
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in html
    data = page_data(html)
    assert data["lang"] == "zh"
    rows = terminal_rows(PRE, "--lang", "zh")
    for name, (meaning, value, _) in rows.items():
        assert data["table17"]["meanings"][name]["zh"] == meaning
        assert data["sides"][0]["stages"][name]["pos_text"]["0,0"] == value


def test_every_page_string_has_english_and_chinese(pre_page):
    for key, (en, zh) in STRINGS.items():
        assert en.strip() and zh.strip(), key
        assert re.findall(r"\{\w+\}", en) == re.findall(r"\{\w+\}", zh), key
    _, data = pre_page
    for name, entry in data["sides"][0]["stages"].items():
        assert entry["meaning"]["en"] and entry["meaning"]["zh"], name
        if not entry["internal"]:
            assert entry["meaning"]["zh"] != entry["meaning"]["en"], name


# -- files ---------------------------------------------------------------------------------------

def assert_page_file_rules(tmp_path: Path, command: str, spec_name: str, option: str) -> Path:
    """`tracer COMMAND SPEC OPTION FILE` never writes over its input, nor over a file tracer did not write unless
    --force, and replaces its own page: the written page's path."""
    spec = write_spec(tmp_path, (SPECS / spec_name).read_text(encoding="utf-8"))
    source = str(SPECS / spec_name)
    assert_refused(run_app(command, str(spec), option, str(spec), "--force"))
    theirs = tmp_path / "notes.html"
    theirs.write_text("my notes\n")
    assert_refused(run_app(command, source, option, str(theirs)), "--force")
    assert theirs.read_text() == "my notes\n"
    assert run_app(command, source, option, str(theirs), "--force").returncode == 0
    assert theirs.read_text(encoding="utf-8").startswith("<!-- tracer ")
    assert run_app(command, source, option, str(theirs)).returncode == 0  # its own page: replaced without --force
    return theirs


def test_the_page_never_replaces_an_input_or_a_file_tracer_did_not_write(tmp_path):
    assert_page_file_rules(tmp_path, "page", "ch17-prenorm.yaml", "-o")


def test_the_page_never_writes_through_a_symlink(tmp_path):
    target = tmp_path / "target.html"
    target.write_text("kept\n")
    link = tmp_path / "link.html"
    os.symlink(target, link)
    assert_refused(run_app("page", PRE, "-o", str(link), "--force"))
    assert target.read_text() == "kept\n" and link.is_symlink()


def test_the_command_writes_the_page_as_a_process(tmp_path):
    out = tmp_path / "p.html"
    r = run_cli("page", PRE, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and "p.html" in r.stderr
    assert page_data(out.read_text(encoding="utf-8"))["title"] == tracer.trace(PRE).name


# -- --page on diff, grad and lens; the API ----------------------------------------------------------

def test_diff_page_marks_the_first_divergence_the_diff_reports(tmp_path):
    out = tmp_path / "d.html"
    r = run_app("diff", PRE, POST, "--page", str(out))
    assert r.returncode == 1, r.stderr
    data = page_data(out.read_text(encoding="utf-8"))
    report = json.loads(run_app("diff", PRE, POST, "--json").stdout)
    first = next(s["name"] for s in report["stages"] if s["status"] not in ("equal", "not recorded"))
    assert data["kind"] == "diff" and data["first_divergence"] == first
    assert [s["id"] for s in data["sides"]] == ["a", "b"]
    a, b = tracer.trace(PRE), tracer.trace(POST)
    assert same_bits(decoded(data["sides"][0]["stages"][first]["value"]), a[first])
    assert same_bits(decoded(data["sides"][1]["stages"][first]["value"]), b[first])
    assert data["verdict"]["en"].splitlines()[0] in run_app("diff", PRE, POST).stdout


def test_diff_page_refuses_several_sides(tmp_path):
    assert_refused(run_app("diff", PRE, POST, PRE, "--page", str(tmp_path / "d.html")), "--page")


def test_grad_page_holds_each_stages_gradient_beside_its_value(tmp_path):
    out = tmp_path / "g.html"
    r = run_app("grad", PRE, "--page", str(out))
    assert r.returncode == 0, r.stderr
    data = page_data(out.read_text(encoding="utf-8"))
    from tracer.grad.run import GradOptions, grad_path

    g = grad_path(PRE, GradOptions())
    stages = data["sides"][0]["stages"]
    for name, st in g.grads.items():
        if name in stages:
            assert same_bits(decoded(stages[name]["grad"]), st.array), name
    layers = {row["layer"]: row for row in data["layer_grads"]["rows"]}
    assert float(layers["ffn"]["norms"][2]["norm"]) == pytest.approx(float(np.linalg.norm(g.weight_grads["ffn.w2"])), rel=1e-12)


def test_lens_page_holds_the_lens_and_the_diagram(tmp_path):
    spec = str(SPECS / "stack-2-layers.yaml")
    out = tmp_path / "l.html"
    r = run_app("lens", spec, "--page", str(out))
    assert r.returncode == 0, r.stderr
    data = page_data(out.read_text(encoding="utf-8"))
    lens = tracer.trace(spec).lens()
    assert data["kind"] == "lens" and data["lens"]["labels"] == list(lens.labels)
    assert same_bits(decoded(data["lens"]), lens.p_token)
    assert data["sides"][0]["sections"]
    # each cell's text as the lens table prints it ('p 0.75', 'p 0.09488': significant digits)
    printed = []
    for label in lens.labels:
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith(f"│ {label} "))
        printed += [cell.strip().removeprefix("p ") for cell in line.strip("│").split("│")[1:]]
    assert data["lens"]["fmt"] == printed


def test_trace_page_returns_the_page_and_writes_it_by_the_file_rules(tmp_path):
    t = tracer.trace(PRE, pos=1)
    html = t.page()
    data = page_data(html)
    assert data["t"] == 1 and data["sides"][0]["stages"]["norm1"]["pos_text"]["0,1"] == terminal_rows(PRE, "--pos", "1")["norm1"][1]
    out = tmp_path / "t.html"
    assert t.page(str(out), lang="zh") is not None
    assert '<html lang="zh-CN">' in out.read_text(encoding="utf-8")
    theirs = tmp_path / "theirs.html"
    theirs.write_text("x")
    with pytest.raises(tracer.UsageError):
        t.page(str(theirs))
    with pytest.raises(tracer.UsageError):
        t.page(budget_mb=0)
    with pytest.raises(tracer.UsageError):
        t.page(lang="fr")


def test_diff_page_from_the_api(tmp_path):
    d = tracer.diff(PRE, POST)
    data = page_data(d.page())
    assert data["first_divergence"] == d.first_divergence.stage


# -- the GPT-2-sized block ----------------------------------------------------------------------------

@pytest.mark.slow  # traces the GPT-2-sized block (288 MiB, every stage kept) twice: several seconds
def test_the_gpt2_sized_page_stays_within_its_budget_and_refuses_one_megabyte(tmp_path):
    spec = str(SPECS / "gpt2-block.yaml")
    out = tmp_path / "gpt2.html"
    r = run_app("page", spec, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert len(out.read_bytes()) <= 20_000_000
    data = page_data(out.read_text(encoding="utf-8"))
    assert data["budget"]["summarised"] and not data["budget"]["over"]
    assert not data["positions_all"]
    r = run_app("page", spec, "-o", str(tmp_path / "small.html"), "--page-budget", "1")
    assert_refused(r, "--page-budget 1", "give --page-budget")
    assert math.isfinite(float(re.search(r"give --page-budget ([0-9.]+)", r.stderr).group(1)))


def test_the_heads_carry_the_mask_as_the_spec_sets_it_and_the_words_as_labels(pre_page):
    _, data = pre_page
    (att,) = data["heads"]
    assert (att["stage"], att["layer"], att["heads"], att["T"], att["S"]) == ("attn.weights", 0, 2, 3, 3)
    bits = np.unpackbits(np.frombuffer(base64.b64decode(att["mask"]), dtype=np.uint8))[:9].reshape(3, 3)
    assert bits.tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]  # causal: query t reads keys s <= t
    spec = str(SPECS / "stack-2-layers.yaml")
    heads = page_data(tracer.trace(spec).page())["heads"]
    assert [h["layer"] for h in heads] == [0, 1]
    assert heads[0]["queries"][1] == ["<s>", "the", "mat", "."] == heads[0]["keys"][1]


def test_the_page_and_another_output_may_not_share_a_file(tmp_path):
    same = str(tmp_path / "same.html")
    assert_refused(run_app("grad", PRE, "--page", same, "--html", same), "--page", "--html")
    assert not os.path.exists(same)


def test_a_name_with_markup_stays_data(tmp_path):
    hostile = "</script><script>alert(1)</script><!--"
    text = (SPECS / "ch17-prenorm.yaml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^name: .*$", "name: " + json.dumps(hostile), text)
    spec = write_spec(tmp_path, text)
    out = tmp_path / "p.html"
    assert run_app("page", str(spec), "-o", str(out)).returncode == 0
    html = out.read_text(encoding="utf-8")
    assert html.count("<script") == 2 and "alert(1)</script>" not in html
    assert page_data(html)["title"] == hostile
    assert "<title>&lt;/script&gt;" in html


def test_an_intervention_is_named_on_its_stage_as_the_terminal_names_it(tmp_path):
    out = tmp_path / "ab.html"
    assert run_app("page", PRE, "-o", str(out), "--ablate", "attention").returncode == 0
    stages = page_data(out.read_text(encoding="utf-8"))["sides"][0]["stages"]
    terminal = run_app("run", PRE, "--ablate", "attention").stdout
    said = stages["attention"]["intervention"]["en"]
    assert f"attention  ← {said}" in terminal
    assert stages["attention"]["pos_text"]["0,0"] == terminal_rows(PRE, "--ablate", "attention")["attention"][1]
    assert all(e["intervention"] is None for n, e in stages.items() if n != "attention")
