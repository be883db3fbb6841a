"""The book's language: --lang zh|en, the locale default, Table 17.1's words, zh violations and errors, alignment."""

from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES, POST_REL, PRE, PRE_REL, REPO, load_text, run_app, run_cli, write_spec
from conftest import TABLE_17_1 as BOOK_TABLE
from rich.cells import cell_len

from tracer import i18n, zh
from tracer.errors import TracerError
from tracer.messages import Message, msg, render
from tracer.model import blocks, catalogue, ops
from tracer.model.activations import spec_activations

ZH = ("--lang", "zh")
HAN = re.compile(r"[\u4e00-\u9fff]")
ENGLISH_RUN = re.compile(r"\b[a-z]{3,} [a-z]{2,} [a-z]{3,}\b")  # three English words in a row: an untranslated sentence

# Table 17.1 (conftest) as the Chinese table prints it: stage, its words, the first position, the shape.
TABLE_17_1 = [(stage, words, "[" + ", ".join(f"{v:.6f}" for v in first) + "]", f"[{t},{c}]") for stage, words, first, (t, c) in BOOK_TABLE]


def table_rows(out: str) -> dict[str, list[str]]:
    """The rows of a rich table (piped, no colour): stage name -> its cells."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0]] = cells
    return rows


def box_widths(out: str) -> set[int]:
    """Terminal cells of every line drawn with box characters (a table's or a panel's)."""
    return {cell_len(line) for line in out.splitlines() if line[:1] in "┏┃┡│└╭╰"}


# -- the language choice -------------------------------------------------------------

@pytest.mark.parametrize("env, lang", [
    ({}, "en"),
    ({"LANG": "C"}, "en"),
    ({"LANG": "POSIX"}, "en"),
    ({"LANG": "en_US.UTF-8"}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "zh_TW.UTF-8"}, "zh"),
    ({"LANG": "zh"}, "zh"),
    ({"LC_ALL": "zh_CN.UTF-8", "LANG": "C"}, "zh"),  # LC_ALL first
    ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_GB.UTF-8"}, "zh"),  # then LC_MESSAGES
    ({"LC_ALL": "", "LANG": "zh_CN.UTF-8"}, "zh"),  # an empty variable is skipped
])
def test_language_follows_the_locale(env, lang):
    assert i18n.from_locale(env) == lang


def test_locale_default_end_to_end():
    zh_out = run_cli("run", PRE, env={"LANG": "zh_CN.UTF-8"})
    c_out = run_cli("run", PRE, env={"LANG": "C"})
    assert zh_out.returncode == c_out.returncode == 0
    assert "第一次归一化，N_1" in zh_out.stdout and "整个数组的 shape" in zh_out.stdout
    assert "first normalisation, N_1 = LN_1(X)" in c_out.stdout and not HAN.search(c_out.stdout.split("\n", 1)[1])
    # --lang wins over the locale, both ways
    en = run_cli("run", PRE, "--lang", "en", env={"LANG": "zh_CN.UTF-8"})
    assert en.stdout == c_out.stdout
    forced = run_cli("run", PRE, *ZH, env={"LANG": "C"})
    assert forced.stdout == zh_out.stdout


def test_unknown_language_is_exit_2_with_a_message():
    res = run_app("run", PRE, "--lang", "fr")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == "tracer: error: --lang fr: expected one of zh | en (zh: the book's Chinese, en: English)\n"
    near = run_app("stages", "--lang", "zh_CN")
    assert near.returncode == 2 and "did you mean 'zh'?" in near.stderr
    # under a Chinese locale the complaint itself is Chinese
    res = run_app("probe", PRE, "--lang", "fr", env={"LANG": "zh_CN.UTF-8"})
    assert res.returncode == 2 and res.stderr.startswith("tracer: 错误：--lang fr：应为 zh | en 之一")


@pytest.mark.parametrize("command", [
    ["run", PRE_REL], ["diff", PRE_REL, POST_REL],
    ["probe", PRE_REL], ["graph", PRE_REL], ["stages"],
    ["validate", PRE_REL],
])
def test_every_command_that_prints_words_takes_lang(command):
    en = run_app(*command, "--lang", "en")
    zh_ = run_app(*command, *ZH)
    assert en.returncode == zh_.returncode and en.returncode in (0, 1)
    assert not HAN.search(re.sub(r"今天 天气 真好|我|喜欢|你", "", en.stdout)), "English output holds no Chinese of tracer's own"
    assert HAN.search(zh_.stdout)


def test_in_process_commands_leave_the_language_as_they_found_it():
    assert i18n.language() == "en"
    run_app("run", PRE_REL, *ZH)
    assert i18n.language() == "en"
    with i18n.using("zh"):
        assert i18n.tr("stage") == "记录名"
    assert i18n.tr("stage") == "stage"


# -- Table 17.1 ----------------------------------------------------------------------

def test_zh_table_shows_table_17_1_words_and_numbers():
    res = run_app("run", PRE, *ZH)
    assert res.returncode == 0, res.stderr
    rows = table_rows(res.stdout)
    header = next(line for line in res.stdout.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["记录名", "阶段", "第一个位置", "整个数组的 shape"]  # Table 17.1's heads
    for stage, words, value, shape in TABLE_17_1:
        _, meaning, shown, full = rows[stage]
        assert (meaning, shown) == (words, value), stage
        assert full.endswith("= [1," + shape[1:]), (stage, full)  # the book drops B = 1
    assert "t=2: [2.999964, 3.746396]" in res.stdout  # the book's full Y
    assert "Pre-Norm，掩码 causal，eps 1e-05；B = 1, T = 3" in res.stdout


def test_zh_and_en_print_the_same_numbers():
    """Only words change: every number and shape of the English table is in the Chinese one, row by row."""
    for spec in ("ch17-prenorm.yaml", "ch17-postnorm.yaml", "stack-2-layers.yaml"):
        en = table_rows(run_app("run", f"specs/{spec}", "--all", "--lang", "en").stdout)
        zh_ = table_rows(run_app("run", f"specs/{spec}", "--all", *ZH).stdout)
        assert en.keys() == zh_.keys()
        for name, cells in en.items():
            # the value column: the same numbers, only '… 32 values' becomes '… 共 32 个值'
            assert zh_[name][2].replace("… 共 ", "… ").replace(" 个值]", " values]") == cells[2], name
            assert [cells[0], *cells[3:]] == [zh_[name][0], *zh_[name][3:]], name


def test_every_built_in_meaning_has_the_books_words():
    """Every meaning the step lists can produce (presets x norms x activations x positions, stacks,
    encoder-decoder, internals, the catalogue) is translated; none is left in English."""
    meanings = {e.meaning for e in catalogue.CATALOGUE}
    meanings |= {info.meaning for info in ops.OPS.values()} | set(blocks.ATTN_MEANINGS.values())
    for norm in blocks.NORMS:
        for activation in spec_activations():
            settings = blocks.StackSettings(norm=norm, activation=activation)
            for template in (*blocks.NORM_ORDERS.values(), *blocks.DECODER_NORM_ORDERS.values()):
                meanings |= {s.meaning for s in blocks.configure(template, settings, preset=True)}
    for positions in ("learned", "sinusoidal", "rotary", "none"):
        steps, _ = blocks.entry("", "tokens", blocks.StackSettings(positions=positions), True)
        meanings |= {s.meaning for s in steps}
    meanings |= {msg("{meaning}, turned by rotary positions", meaning=m) for m in blocks.ATTN_MEANINGS.values()}
    missing = sorted(m for m in meanings if not isinstance(m, Message) or m.render("zh") == m)
    assert not missing, missing
    for m in meanings:
        assert not ENGLISH_RUN.search(m.render("zh")), m


@pytest.mark.parametrize("english, chinese", [
    ("first RMS normalisation, N_1 = RMS_1(X)", "第一次 RMS 归一化，N_1"),
    ("FFN after GELU (tanh), GELU (tanh)(N_2 W_1 + b_1)", "FFN 的 GELU (tanh) 之后"),
    ("FFN after SwiGLU, SwiGLU(N_2 W_1 + b_1)", "FFN 的 SwiGLU 之后"),
    ("first normalisation, R_post = LN_1(X + U)", "第一次归一化，R_post = LN_1(X + U)"),
    ("second batch normalisation (over B and T), N_2 = BN_2(R)", "第二次批归一化（统计量跨 B 和 T），N_2"),
    ("sinusoidal positions, base 100", "正余弦位置编码，底数 100"),
    ("masked self-attention (post-norm decoder layer)", "带掩码的自注意力（Post-Norm 解码器层）"),
    ("keys, split into heads, turned by rotary positions", "键（K），拆成多个头，经旋转位置编码转动"),
    ("FFN after GELU, GELU(R_post W_1 + b_1)", "FFN 的 GELU 之后，GELU(R_post W_1 + b_1)"),
])
def test_variant_meanings_follow_the_base_entry(english, chinese):
    """A variant's meaning is its base entry's template with the norm's or the activation's words filled in."""
    made = {str(e.meaning): e.meaning for e in catalogue.CATALOGUE}
    for norm in blocks.NORMS:
        for activation in spec_activations():
            settings = blocks.StackSettings(norm=norm, activation=activation)
            for template in (*blocks.NORM_ORDERS.values(), *blocks.DECODER_NORM_ORDERS.values()):
                made.update({str(s.meaning): s.meaning for s in blocks.configure(template, settings, preset=True)})
    for positions in ("learned", "sinusoidal", "rotary", "none"):
        steps, _ = blocks.entry("", "tokens", blocks.StackSettings(positions=positions, position_base=100.0), True)
        made.update({str(s.meaning): s.meaning for s in steps})
    assert render(made[english], "zh") == chinese


def test_a_meaning_the_spec_writes_is_printed_as_written(tmp_path):
    spec = write_spec(tmp_path, """
dims: {C: 2, H: 1, F: 2}
block:
  steps:
    - {name: n, op: layer_norm, in: x, weights: n, meaning: "my own words, 自己的话"}
    - {name: r, op: relu, in: n}
input: {x: [[1, 2], [3, 5]]}
seed: 0
""")
    rows = table_rows(run_app("run", str(spec), *ZH).stdout)
    assert rows["n"][1] == "my own words, 自己的话"
    assert rows["r"][1] == "ReLU，max(x, 0)"  # the op's own meaning is the catalogue's


# -- violations ------------------------------------------------------------------------

VIOLATIONS = sorted((EXAMPLES / "violations").glob("*.yaml"))


@pytest.mark.parametrize("path", VIOLATIONS, ids=lambda p: p.stem)
def test_violation_panels_in_zh(path):
    en = run_app("run", str(path), "--lang", "en")
    res = run_app("run", str(path), *ZH)
    assert res.returncode == en.returncode == 1
    panel = res.stdout[res.stdout.index("╭"):]
    kind = re.search(r"violation: (\w+)", en.stdout).group(1)
    assert f"违规：{zh.KINDS[kind]}（{kind}）" in panel
    for label in ("规则：", "NumPy 会：", "为什么这里不对："):
        assert label in panel
    body = "\n".join(line.strip("│ ") for line in panel.splitlines())
    assert not ENGLISH_RUN.search(body), body
    # the shapes and the numbers of the English panel are all there
    en_panel = en.stdout[en.stdout.index("╭"):]
    for token in set(re.findall(r"\[[^\]]*\]|\b\d+(?:\.\d+)?\b", en_panel)):
        assert token in panel, token
    assert len(box_widths(panel)) == 1, "the panel's borders line up with wide characters"


def test_violation_markdown_in_zh():
    md = run_app("run", str(EXAMPLES / "violations" / "beta-typo.yaml"), *ZH, "--format", "markdown").stdout
    assert "> **阶段 `norm1` 出现广播（broadcast）违规**" in md
    assert "> - **规则：** beta 每个坐标恰好一个值：[C] = [2]" in md
    assert "| `norm1` 违规 |" not in md and "`norm1` ← 违规" in md


def test_verify_note_and_many_specs_in_zh():
    res = run_app("run", PRE_REL, "examples/violations/beta-typo.yaml", "nope.yaml", "--verify", *ZH)
    assert res.returncode == 2
    lines = res.stdout.splitlines()
    assert lines[0].startswith("通过       specs/ch17-prenorm.yaml（verify：所有阶段上 |NumPy - 参考实现| 的最大值 = ")
    assert lines[1].startswith("违规       examples/violations/beta-typo.yaml: norm1 处广播违规（verify：跳过：")
    assert lines[2] == "错误       nope.yaml: 文件不存在"
    assert lines[3] == "3 个 spec：1 个通过，1 个有违规，1 个出错；退出码 2"
    for line in lines[:3]:  # the path starts at cell 12 whatever the status word's width
        _, detail = line.split(None, 1)
        assert cell_len(line) - cell_len(detail) == 11, line


# -- errors ----------------------------------------------------------------------------

DIMS = "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n"


@pytest.mark.parametrize("text, chinese", [
    ("dims: {C: 3, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n", "dims.H: H = 2 必须整除 C = 3（每个头的宽度是 d = C / H）"),
    (DIMS + "blok: {norm_order: pre}\n", "blok: 未知的键 'blok'；是不是想写 'block'？"),
    (DIMS + "block: {norm_order: middle}\n",
     "block.norm_order: 应为 pre | post | parallel | parallel_shared | sandwich | post_sublayer 之一，实际为文本 'middle'"),
    (DIMS + "block: {eps: small}\n", "block.eps: 应为正数，例如 1e-5，实际为文本 'small'"),
    ("dims: {C: 2, H: 2, F: 3}\ndims: {C: 2}\ninput: {tokens: [0]}\n", "dims: 重复的键（第一次出现在第 1 行）"),
    ("dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 7]}\nweights: {embedding: [[1, 0], [0, 1]]}\nseed: 0\n",
     "input.tokens: token id 7 超出范围：嵌入表有 V = 2 行（id 为 0 到 1）"),
    (DIMS + "weights:\n  ffn: {w1: [[1, 2], [3, 4], [5, 6]]}\n", "weights.ffn.w1: 应为 [C,F] = [2,3]，实际为 [3,2]"),
    (DIMS + "weights:\n  atn: {w_q: identity}\n", "weights.atn: 给出了权重组 'atn'，但模型中没有任何步骤读取它；是不是想写 'attn'？"),
    ("dims: {C: 2, H: 2}\ninput: {tokens: [0]}\n", "dims: 缺少维度 F（dims 需要 C、H 和 F；B、T、V、T_max 由输入和表推出）"),
    ("dims: {C: 2, H: 2, F: 3}\n", "缺少必需的部分 'input'（tokens: [...] 或 x: [[...]]）"),
    ("dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1]}\n", "weights.embedding: 缺少权重 embedding [V,C] = [2,2]，也没有 seed 可以抽取它"),
    ("dims: !!python/object:os.system {C: 2}\n", "dims: 不允许使用标签 'tag:yaml.org,2002:python/object:os.system'；tracer 只读取普通 YAML"),
    ("dims: {C: 2, H: 2, F: 3\ninput: [", "YAML 语法错误："),
    ("- 1\n- 2\n", "文档是一个列表；spec 必须是由 dims、block、weights 等键组成的映射"),
    (DIMS + "block:\n  steps:\n    - {name: n, op: layer_nrom, in: x}\n", "block.steps[0].op: 未知的 op 'layer_nrom'；是不是想写 'layer_norm'？"),
])
def test_spec_errors_in_zh_keep_file_line_col(tmp_path, text, chinese):
    spec = write_spec(tmp_path, text)
    en = run_app("run", str(spec), "--lang", "en")
    res = run_app("run", str(spec), *ZH)
    assert en.returncode == res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("tracer: 错误：") and "Traceback" not in res.stderr
    assert chinese in res.stderr, res.stderr
    location = re.match(r"tracer: error: (\S+?:\d+:\d+: )", en.stderr)
    assert location is not None, en.stderr
    assert res.stderr.startswith("tracer: 错误：" + location.group(1)), (en.stderr, res.stderr)


@pytest.mark.parametrize("make, chinese", [
    (lambda d: d / "nope.yaml", "nope.yaml: 文件不存在"),
    (lambda d: d, ": 是一个目录，这里需要 YAML spec 文件"),
    (lambda d: write_spec(d, ""), "spec.yaml: 是空的，这里需要一个至少含 'dims' 和 'input' 的 YAML 映射"),
    (lambda d: (d / "latin1.yaml").write_bytes(b"name: caf\xe9\n") and d / "latin1.yaml", "latin1.yaml:1: 不是 UTF-8 文本（偏移 9 处的字节 0xe9）"),
])
def test_file_errors_in_zh(tmp_path, make, chinese):
    path = make(tmp_path)
    res = run_app("run", str(path), *ZH)
    assert res.returncode == 2 and chinese in res.stderr, res.stderr


@pytest.mark.parametrize("args, chinese", [
    (["run", PRE_REL, "--pos", "7"], "--pos 7 超出范围：T = 3（位置 0 到 2，或从末尾数 -1 到 -3）"),
    (["run", PRE_REL, "--format", "yaml"], "--format yaml：应为 table | json | csv | markdown 之一"),
    (["run", PRE_REL, "--stage", "norm9"], "--stage norm9：specs/ch17-prenorm.yaml 中没有这个名字的阶段；是不是想写 'norm2' 或 'norm1'？"),
    (["stages", "nrom1"], "没有叫 'nrom1' 的阶段；是不是想写 'norm1' 或 'norm2'？（`tracer stages` 列出所有名字）"),
    (["diff", PRE_REL, "examples/violations/beta-typo.yaml"], "有一侧出现违规，所以它之后的阶段无法比较："),
    (["run", PRE_REL, "--attention-stage", "norm1"], "--attention-stage 'norm1'：没有这个名字的注意力步骤"),
])
def test_command_line_errors_in_zh(args, chinese):
    res = run_app(*args, *ZH)
    assert res.returncode == 2 and chinese in res.stderr, res.stderr


# -- message coverage ------------------------------------------------------------------

ERROR_TEXTS = [  # a spread of real errors, produced by the loader itself
    "dims: {C: 3, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n",
    DIMS + "blok: 1\n",
    DIMS + "zzz: 1\n",
    DIMS + "block: {mask: full}\n",
    DIMS + "block: {final_norm: 1}\n",
    DIMS + "name: [1]\n",
    DIMS + "seed: yes\n",
    "dims: {C: 2, H: 2, F: 0}\ninput: {tokens: [0]}\nseed: 0\n",
    "dims: {C: 2.5, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n",
    "dims: {C: 2, H: 2, F: 3, T: 4}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n",
    "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, -1]}\nseed: 0\n",
    "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1.5]}\nseed: 0\n",
    "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, 2, 3]]}\nseed: 0\n",
    "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, .nan]]}\nseed: 0\n",
    "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0], x: [[1, 2]]}\nseed: 0\n",
    "dims: {C: 2, H: 2, F: 3}\ninput: {x: random}\n",
    DIMS + "weights:\n  norm1: {beta: [1, 2, 3]}\n",
    DIMS + "weights:\n  attn: {w_q: eye}\n",
    DIMS + "weights:\n  attn: {w_o: [[1, 2], [3]]}\n",
    DIMS + "weights:\n  ffn: {w1: identity}\n",
    DIMS + "weights:\n  position: [[0, 0]]\nblock: {positions: none}\n",
    DIMS + "block:\n  norm_order: pre\n  steps:\n    - {name: a, op: relu, in: x}\n",
    DIMS + "block:\n  steps:\n    - {name: a, op: add, in: x}\n",
    DIMS + "block:\n  steps:\n    - {name: a, op: relu, in: nrom1}\n",
    DIMS + "block:\n  steps:\n    - {name: x, op: relu, in: x}\n",
    DIMS + "block:\n  steps:\n    - {name: a, op: layer_norm, in: x}\n",
    DIMS + "block:\n  steps:\n    - {name: a, op: relu, in: x, weights: w}\n",
    DIMS + "block:\n  steps:\n    - {name: a, op: select, in: x, axis: F, index: 0}\n",
]


def verbatim_tokens(english: str) -> set[str]:
    """What a translation must carry over unchanged: locations, quoted names, shapes, numbers."""
    return set(re.findall(r"\S+\.yaml(?::\d+)+|'[^']*'|\[[^\]]*\]|-?\d+(?:[.,]\d+)*(?:e-?\d+)?", english))


def test_real_errors_are_covered_and_keep_their_values(tmp_path):
    """The loader's own errors, rendered in Chinese from their templates: no English sentence left, every value kept."""
    for text in ERROR_TEXTS:
        with pytest.raises(TracerError) as e:
            load_text(text)
        english, chinese = str(e.value), render(e.value.message, "zh")
        assert render(e.value.message, "en") == english
        assert HAN.search(chinese), f"not covered: {english}"
        assert not ENGLISH_RUN.search(chinese), chinese
        for token in verbatim_tokens(english):
            assert token in chinese, (token, english, chinese)


# One real message of each kind, made by tracer itself (a spec's text, or a command line), checked both ways:
# the Chinese has no English sentence left and carries every location, name, shape and number over.
COVERED: list[tuple[str | None, list[str]]] = [
    ("dims: {C: 3, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n", ["run"]),
    (DIMS + "blok: {norm_order: pre}\n", ["run"]),
    (DIMS + "zzz: 1\n", ["run"]),
    ("dims: {C: 2, H: 2, F: 3}\ndims: {C: 2}\ninput: {tokens: [0]}\n", ["run"]),
    ("dims: {C: 2, H: 2}\ninput: {tokens: [0]}\n", ["run"]),
    (DIMS + "weights:\n  attn: {w_q: [[1, 2, 3], [4, 5, 6]]}\n", ["run"]),
    (DIMS + "block: {eps: yes}\n", ["run"]),
    ("", ["run"]),
    ("dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 5]}\nweights: {embedding: [[1, 0], [0, 1]]}\nseed: 0\n", ["run"]),
    ("dims: !custom {C: 2}\n", ["run"]),
    ("dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0]}\n---\na: 1\n", ["run"]),
    ("dims: {C: 2, H: 2, F: 3}\n\tinput: {tokens: [0]}\n", ["run"]),
    ("dims: {C: 2，H: 2, F: 3}\ninput: {tokens: [0]}\n", ["run"]),
    (None, ["run", "specs/ch17-prenorm.yaml", "--precision", "18"]),
    (None, ["run", "specs/ch17-prenorm.yaml", "--pos", "7"]),
    (None, ["run", "specs/ch17-prenorm.yaml", "--format", "yaml"]),
    (None, ["run", "specs/ch17-prenorm.yaml", "--max-memory", "lots"]),
    (None, ["run", "specs/ch17-prenorm.yaml", "--keep", "nrom1"]),
    (None, ["run", "examples/violations/position-beyond-table.yaml", "--verify"]),
    (None, ["run", "examples/violations/ex5-residual-broadcast.yaml"]),
    (None, ["probe", "examples/violations/ex3-layernorm-over-positions.yaml"]),
    (None, ["diff", "specs/ch17-prenorm.yaml", "examples/coursework/students/bob/prenorm.yaml"]),
    (None, ["validate", "specs/ch17-prenorm.yaml"]),
    (None, ["stages", "nrom1"]),
    (None, ["run", "specs/gpt2-block.yaml", "--max-memory", "100MB"]),
]
PYYAML = re.compile(r"\(while parsing.*?\)|did not find expected.*?(?=（|；|$)|expected ',' or '\}', but got.*?(?=（|；|$)", re.M)


@pytest.mark.parametrize("text, args", COVERED)
def test_covered_messages(tmp_path, text, args):
    if text is not None:
        args = [*args, str(write_spec(tmp_path, text))]
    en, zh_ = run_app(*args, "--lang", "en"), run_app(*args, *ZH)
    assert en.returncode == zh_.returncode
    english, chinese = en.stderr or en.stdout, zh_.stderr or zh_.stdout
    words = re.sub(r"'[^']*'|\"[^\"]*\"|Example 17.2[^\n]*", "", PYYAML.sub("", chinese))  # names a spec writes itself
    assert HAN.search(chinese) and not ENGLISH_RUN.search(words), chinese
    lines = [line for line in english.splitlines() if not line.startswith(("│", "┃", "┏", "┡", "└", "╭", "╰"))]
    for token in verbatim_tokens("\n".join(lines)):
        assert token in chinese, (token, english, chinese)


def test_a_plain_string_is_printed_as_written():
    """Nothing is parsed back: a str that is not a message (a name, a spec's own words, PyYAML's) is printed as it is."""
    with i18n.using("zh"):
        assert render("something tracer never says") == "something tracer never says"
        assert render("expected ',' or '}', but got ':'") == "expected ',' or '}', but got ':'"


def test_every_ui_entry_has_its_fields():
    for english, chinese in zh.UI.items():
        assert set(re.findall(r"\{(\w+)\}", english)) == set(re.findall(r"\{(\w+)\}", chinese)), english


def test_no_regex_translation_is_left():
    """The regex layer is gone: the catalogue is a table of keys, i18n and messages look keys up and parse nothing back."""
    for name in ("TEMPLATES", "FRAGMENTS", "MEANINGS"):
        assert not hasattr(zh, name), name
    for name in ("message", "zh_message", "meaning", "zh_meaning", "compile_template", "_translate"):
        assert not hasattr(i18n, name), name
    for path in sorted((REPO / "tracer").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "zh.TEMPLATES" not in text and "zh.FRAGMENTS" not in text, path
    source = (REPO / "tracer" / "i18n.py").read_text(encoding="utf-8")
    assert "re.compile" not in source and "fullmatch" not in source  # spaced() only inserts spaces
    assert "import re" not in (REPO / "tracer" / "messages.py").read_text(encoding="utf-8")


# -- machine output does not change ------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["run", PRE_REL, "--json"],
    ["run", PRE_REL, "--format", "csv", "--all"],
    ["run", "examples/violations/beta-typo.yaml", "--json"],
    ["diff", PRE_REL, POST_REL, "--json"],
    ["diff", PRE_REL, POST_REL, "--format", "csv"],
    ["stages", "--format", "json"],
    ["stages", "--format", "csv"],
    ["probe", PRE_REL, "--json"],
    ["run", PRE_REL, "--steps", "--format", "csv"],
])
def test_json_and_csv_are_the_same_in_every_language(args):
    en = run_app(*args, "--lang", "en")
    zh_ = run_app(*args, *ZH)
    assert en.returncode == zh_.returncode
    assert en.stdout == zh_.stdout


# -- alignment ---------------------------------------------------------------------------

CHAPTER = ["ch17-prenorm.yaml", "ch17-postnorm.yaml", "guide-walkthrough.yaml", "stack-2-layers.yaml", "encoder-decoder.yaml"]


def box_groups(out: str) -> list[list[str]]:
    """Runs of consecutive lines drawn with box characters: one table, one panel, or one row of panels."""
    groups: list[list[str]] = []
    previous = False
    for line in out.splitlines():
        boxed = line[:1] in "┏┃┡│└╭╰"
        if boxed and not previous:
            groups.append([])
        if boxed:
            groups[-1].append(line)
        previous = boxed
    return groups


@pytest.mark.parametrize("spec", CHAPTER)
def test_zh_tables_align(spec):
    """Every line of a table has the same display width, wide characters counted as two cells."""
    out = run_app("run", f"specs/{spec}", "--all", *ZH).stdout
    (table,) = box_groups(out)
    assert len(table) > 5 and len({cell_len(line) for line in table}) == 1
    assert len({len(line) for line in table}) > 1, "Chinese cells: fewer characters, the same width in cells"


@pytest.mark.parametrize("args", [
    ["run", "examples/violations/ex3-layernorm-over-positions.yaml", "--verify"],
    ["run", PRE_REL, "--steps"],
    ["run", "specs/encoder-decoder.yaml", "--attention-stage", "all"],
    ["probe", "examples/violations/ex3-layernorm-over-positions.yaml"],
    ["graph", "specs/encoder-decoder.yaml"],
    ["graph", "examples/graph/parallel-block.yaml"],
    ["stages"],
    ["diff", PRE_REL, POST_REL],
])
def test_zh_views_align(args):
    out = run_app(*args, *ZH).stdout
    groups = box_groups(out)
    assert groups and HAN.search(out)
    for group in groups:
        assert len({cell_len(line) for line in group}) == 1, (args, group[0])


def test_stages_sections_in_zh():
    out = run_app("stages", *ZH).stdout
    assert "Pre-Norm 层（norm_order: pre，例 17.2）" in out and "注意力内部（--all 时显示）" in out
    assert not ENGLISH_RUN.search(re.sub(r"\(the encoder output|\(the decoder output", "", out))


def test_zh_markdown_is_a_table_of_the_same_columns():
    md = run_app("run", PRE_REL, "--format", "markdown", *ZH).stdout
    lines = [line for line in md.splitlines() if line.startswith("|")]
    assert lines[0] == "| 记录名 | 阶段 | 第一个位置 | 整个数组的 shape |"
    assert {len(re.findall(r"(?<!\\)\|", line)) for line in lines} == {5}
    for stage, words, value, _ in TABLE_17_1:
        assert f"| `{stage}` | {words} | {value} |" in md
    assert "样本 b=0 的 output（块的最终输出，Y）：" in md


def test_the_docs_document_the_language_choice():
    for page in ("docs/reference/language.md", "README.zh-CN.md"):
        text = (REPO / page).read_text(encoding="utf-8")
        assert "--lang" in text and "LC_MESSAGES" in text, page


def test_zh_export_keeps_the_caption_on_one_line():
    """An export is as wide as the content wants; the Chinese table is narrower than its caption, which must not wrap."""
    from tracer.engine import executor
    from tracer.spec import load_spec
    from tracer.views import export
    from tracer.views import tables as render

    with i18n.using("zh"):
        view = render.run_view(executor.run(load_spec(PRE)), 0, 0, 6, False)
        text = export.record(view, no_color=True).export_text()
    caption = "Pre-Norm，掩码 causal，eps 1e-05；B = 1, T = 3, C = 2, H = 2, F = 3, V = 3, T_max = 3, d = 1"
    assert caption in text.splitlines()
    table = [line for line in text.splitlines() if line.startswith("│")]
    assert cell_len(table[0]) < cell_len(caption)  # the case that used to wrap


def test_validate_in_zh(tmp_path):
    bad = write_spec(tmp_path, "dims: {C: 3, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n")
    res = run_app("validate", PRE_REL, str(bad), *ZH)
    assert res.returncode == 2
    good, wrong = res.stdout.splitlines()
    assert re.fullmatch(r"specs/ch17-prenorm\.yaml: 通过，运行约需 [\d.]+ [KMG]?B（--record auto）", good), good
    assert wrong == f"{bad}:1:17: dims.H: H = 2 必须整除 C = 3（每个头的宽度是 d = C / H）"


def test_memory_refusal_in_zh():
    res = run_app("run", "specs/gpt2-block.yaml", "--max-memory", "400MB", "--record", "all", *ZH)
    assert res.returncode == 2
    assert res.stderr.startswith("tracer: 错误：specs/gpt2-block.yaml: 这次运行约需 ")
    assert "超过 --max-memory 400MB。最大的部分：attn.scores [B,H,T,T] = [1,12,1024,1024]" in res.stderr


def test_zh_value_column_names_b_and_t_where_the_first_position_is_not_exact():
    out = run_app("run", PRE_REL, "--pos", "1", "--format", "markdown", *ZH).stdout
    assert "| b=0, t=1 处的值 |" in out


def test_a_quoted_chinese_word_keeps_no_inserted_spaces(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text("dims: {C: 2, H: 2, F: 3}\nvocab: [我, 喜欢, 你]\ninput: {tokens: ['我，喜欢']}\nseed: 0\n", encoding="utf-8")
    r = run_app("run", str(p), *ZH)
    assert r.returncode == 2 and "'我，喜欢' 不在词表中" in r.stderr and "' 我" not in r.stderr
    assert i18n.spaced("应为'pre'之一") == "应为 'pre' 之一"


def test_the_books_terms_not_coined_ones():
    # the book says 残差路径 (section 17.2, Figure 17.1); "残差流" is not its word
    assert not any("残差流" in z for z in [*zh.UI.values(), *zh.MESSAGES.values(), *zh.PLURALS.values()])
    out = run_app("graph", PRE_REL, *ZH).stdout
    assert "第一条残差路径" in out and "残差路径上的值" in out
