"""tracer graph: Figure 17.1 drawn from the step list, for the presets, custom blocks, stacks and an encoder-decoder.

Expected shapes follow from the chapter's dimensions (Example 17.2: B = 1, T = 3, C = 2, H = 2, d = 1,
F = 3), worked out by hand, not copied from tracer's output.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from conftest import EXAMPLES, POST, PRE, REPO, SPECS, run_cli, run_on_tty, write_spec
from rich.console import Console

from tracer.graph.view import Graph, graph_view
from tracer.spec import load_spec, load_spec_text


def draw(path: str, width: int = 400) -> str:
    c = Console(width=width, file=io.StringIO(), no_color=True, color_system=None, emoji=False, highlight=False)
    c.print(graph_view(load_spec(path)))
    return c.file.getvalue()


def rows(text: str) -> list[tuple[str, str, str]]:
    """(rail, stage, shape) of every drawn stage row, in order."""
    out = []
    for line in text.splitlines():
        m = re.match(r"│ (.) {2,5}(\(not recorded\)|\S+) +(\[[A-Za-z_,]+\] = \[[0-9,]+\])", line)  # rich pads the rail by a version's own rule
        if m:
            out.append(m.groups())
    return out


def titles(text: str) -> list[str]:
    return re.findall(r"╭─ (.+?) ─", text)


def test_prenorm_paths_stages_and_shapes_in_order():
    text = draw(PRE)
    assert titles(text) == ["before the block", "first residual path: residual1 = x + attention",
                            "second residual path: output = residual1 + ffn"]
    BTC, BHTd, BHTT, BTF = "[B,T,C] = [1,3,2]", "[B,H,T,d] = [1,2,3,1]", "[B,H,T,T] = [1,2,3,3]", "[B,T,F] = [1,3,3]"
    assert rows(text) == [
        (" ", "embed", BTC), (" ", "position", "[T,C] = [3,2]"), (" ", "x", BTC),
        ("┬", "x", BTC), ("│", "norm1", BTC), ("│", "attn.q/k/v", BHTd), ("│", "attn.scores", BHTT),
        ("│", "attn.weights", BHTT), ("│", "(not recorded)", BHTd), ("│", "attn.heads", BTC), ("│", "attention", BTC),
        ("⊕", "residual1", BTC),
        ("┬", "residual1", BTC), ("│", "norm2", BTC), ("│", "hidden", BTF), ("│", "ffn", BTC), ("⊕", "output", BTC),
    ]
    assert "x + attention" in text and "residual1 + ffn" in text
    assert "▼ x [B,T,C] = [1,3,2]" in text and "▼ residual1 [B,T,C] = [1,3,2]" in text
    assert "attn.w_q/w_k/w_v [C,C] = [2,2]" in text and "ffn.w1 [C,F] = [2,3]" in text and "position [T_max,C] = [3,2]" in text


def test_postnorm_second_path_starts_at_norm1_and_norms_follow_the_add():
    r = [row[:2] for row in rows(draw(POST))]
    assert r[3:] == [
        ("┬", "x"), ("│", "attn.q/k/v"), ("│", "attn.scores"), ("│", "attn.weights"), ("│", "(not recorded)"), ("│", "attn.heads"),
        ("│", "attention"), ("⊕", "residual1"),
        ("┬", "norm1"), ("│", "hidden"), ("│", "ffn"), ("⊕", "residual2"), (" ", "norm2"), (" ", "output"),
    ]


def test_sandwich_norm_custom_block():
    text = draw(str(EXAMPLES / "graph" / "sandwich-norm.yaml"))
    r = [row[:2] for row in rows(text)]
    assert r[r.index(("│", "attention")) + 1:r.index(("⊕", "residual1")) + 1] == [("│", "post_attention"), ("⊕", "residual1")]
    assert r[-3:] == [("│", "ffn"), ("│", "post_ffn"), ("⊕", "output")]
    assert "first residual path: residual1 = x + post_attention" in titles(text)


def test_parallel_block_has_one_residual_and_its_two_branches_side_by_side():
    text = draw(str(EXAMPLES / "graph" / "parallel-block.yaml"))
    assert titles(text)[1:] == ["first residual path: output = x + both", "attention branch: attention", "FFN branch: ffn"]
    side = [line for line in text.splitlines() if "attention branch: attention" in line]
    assert len(side) == 1 and "FFN branch: ffn" in side[0]  # two boxes on the same lines
    r = [row[:2] for row in rows(text)]
    assert r[3] == ("┬", "x") and r[-1] == ("⊕", "output")
    assert ("│", "norm1") in r and ("│", "both") in r  # norm1 feeds both branches; adding them is not a residual: no ⊕
    assert "attention + ffn" in text and "ReLU(norm1 W_1 + b_1) W_2 + b_2" in text  # the FFN reads norm1, beside attention
    assert "x goes three ways: into both branches, side by side, and unchanged into the add." in text
    rows_of = [line for line in text.splitlines() if re.search(r"│ +attn\.weights .*│ +│ +\S", line)]
    assert rows_of, "the FFN box's rows sit beside the attention box's"


def test_a_pre_norm_block_has_no_branches():
    text = draw(PRE)
    assert not any("branch:" in t for t in titles(text))


def test_two_layer_stack_draws_both_layers_and_the_head():
    text = draw(str(SPECS / "stack-2-layers.yaml"))
    t = titles(text)
    assert t == ["before the block",
                 "layer blocks.0: first residual path: blocks.0.residual1 = x + blocks.0.attention",
                 "layer blocks.0: second residual path: blocks.0.output = blocks.0.residual1 + blocks.0.ffn",
                 "layer blocks.1: first residual path: blocks.1.residual1 = blocks.0.output + blocks.1.attention",
                 "layer blocks.1: second residual path: blocks.1.output = blocks.1.residual1 + blocks.1.ffn",
                 "after the stack"]
    r = rows(text)
    assert [x[1] for x in r[-3:]] == ["final_norm", "logits", "probs"]
    assert r[-1][2] == "[B,T,V] = [2,4,7]"
    adds = [x[1] for x in r if x[0] == "⊕"]
    assert adds == ["blocks.0.residual1", "blocks.0.output", "blocks.1.residual1", "blocks.1.output"]


def test_a_deep_stack_draws_first_and_last_layer():
    spec = load_spec_text("dims: {C: 4, H: 2, F: 8, T: 2}\nseed: 0\nblock: {layers: 6}\ninput: {x: random}\n")
    c = Console(width=300, file=io.StringIO(), no_color=True)
    c.print(graph_view(spec))
    text = c.file.getvalue()
    assert "blocks.1 to blocks.4: 4 more layers, the same steps as blocks.0" in text
    assert "blocks.0.residual1" in text and "blocks.5.output" in text and "blocks.3.norm1" not in text


def test_encoder_decoder_cross_attention_shapes():
    text = draw(str(SPECS / "encoder-decoder.yaml"))
    r = {x[1]: x for x in rows(text)}
    assert r["decoder.blocks.0.cross.q"][2] == "[B,H,T,d] = [1,2,4,4]"
    assert r["decoder.blocks.0.cross.k/v"][2] == "[B,H,S,d] = [1,2,3,4]"
    assert r["decoder.blocks.0.cross.weights"][2] == "[B,H,T,S] = [1,2,4,3]"
    assert r["encoder.blocks.0.attn.weights"][2] == "[B,H,S,S] = [1,2,3,3]"
    assert "encoder.final_norm W_K, W_V" in text and "encoder.final_norm is the memory" in text
    assert "decoder layer blocks.0: third residual path: decoder.blocks.0.output" in text


def test_contract_breaks_are_marked_before_running():
    # the same fact the run flags (tests/spec/test_validate.py checks that validate and run agree)
    text = draw(str(EXAMPLES / "violations" / "ex5-residual-broadcast.yaml"))
    assert "⚠ broadcast violation when run: x [2, 5, 16] and update0 [1, 5, 16] differ" in text
    text = draw(str(EXAMPLES / "violations" / "ex3-layernorm-over-positions.yaml"))
    assert "layer_norm(x) over T" in text and "⚠ axis violation when run: LayerNorm statistics taken over T (5 entries)" in text
    text = draw(str(EXAMPLES / "violations" / "beta-typo.yaml"))
    assert "⚠ broadcast violation when run: beta has shape [1] where [C] = [2] is due" in text
    text = draw(str(EXAMPLES / "violations" / "softmax-over-queries.yaml"))
    assert "⚠ axis violation when run: softmax taken over queries" in text


def test_residual_detection_needs_an_ancestor():
    g = Graph(load_spec(str(EXAMPLES / "graph" / "parallel-block.yaml")))
    steps = {s.name: s for s in g.steps}
    assert g.residual(steps["both"]) is None
    assert g.residual(steps["output"]) == ("x", "both")
    assert g.is_ancestor("norm1", "ffn") and not g.is_ancestor("attention", "ffn")


def test_a_narrow_console_folds_instead_of_dropping_columns():
    text = draw(PRE, width=90)
    assert max(len(line) for line in text.splitlines()) <= 90
    assert "attn.w_o" in text and "norm1.gamma/beta" in text


def test_cli_graph_does_not_import_numpy():
    code = (f"import sys\nfrom tracer.cli.app import main\nsys.argv = ['tracer', 'graph', {PRE!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'numpy' not in sys.modules, 'numpy was imported'\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": ""},
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert "first residual path" in r.stdout


def test_cli_graph_bad_spec_exit_2(tmp_path):
    p = write_spec(tmp_path, "dims: {C: 3, H: 2, F: 3}\ninput: {x: [[1, 2, 3]]}\n")
    r = run_cli("graph", str(p))
    assert r.returncode == 2 and "H = 2 must divide C = 3" in r.stderr and r.stdout == ""


# -- a narrow terminal: the rail runs down every wrapped line ------------------------------------------------
ALL_SPECS = sorted(str(p) for p in [*SPECS.glob("*.yaml"), *(SPECS / "variants").glob("*.yaml")])
PATH_LINE = re.compile(r"^│ (\S)")  # a row's first cell inside a panel: the rail (┬ │ ⊕) or nothing


def check_rails(text: str, width: int) -> int:
    """Every line from a path's ┬ to its ⊕ starts with the rail; no line is wider than the terminal.
    Returns how many wrapped lines (rail, no stage) were seen, so a test can make sure it saw some."""
    from rich.cells import cell_len

    wrapped, on_path = 0, False
    for line in text.splitlines():
        assert cell_len(line) <= width, line
        if line.startswith(("╭", "╰")):
            assert not on_path, "a path ended without its ⊕ row"
            continue
        if not line.startswith("│ "):
            continue
        m = PATH_LINE.match(line)
        rail = m.group(1) if m else ""
        if rail == "┬":
            on_path = True
        elif on_path:
            assert rail in ("│", "⊕"), f"the rail is lost on a line of the path: {line!r}"
            if rail == "│" and re.match(r"^│ │\s{12}", line):
                wrapped += 1
            if rail == "⊕":
                on_path = False
    return wrapped


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: p.split("specs/")[-1])
def test_every_wrapped_line_of_a_path_keeps_the_rail_at_80_columns(path, lang):
    from tracer.i18n import using

    with using(lang):
        text = draw(path, width=80)
    assert check_rails(text, 80) > 0  # the 80-column drawing does wrap rows on the rail


@pytest.mark.parametrize(("spec", "lang"), [("gpt2-block.yaml", "en"), ("ch17-prenorm.yaml", "zh")])
def test_graph_on_an_80_column_terminal_keeps_the_rail(spec, lang):
    env = {**os.environ, "COLUMNS": "80", "LINES": "40", "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    code, out = run_on_tty(["graph", str(SPECS / spec), "--lang", lang], REPO, env)
    assert code == 0, out
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out).replace("\r", "")
    assert check_rails(text, 80) > 0


def test_an_eleventh_residual_path_is_titled_by_its_number(tmp_path):
    """Past the tenth ordinal word, a path is 'residual path 11' (one colon before what it adds, as for the others)."""
    adds = "\n".join(f"    - {{name: r{i}, op: add, in: [{'x' if i == 1 else f'r{i - 1}'}, x]}}" for i in range(1, 13))
    spec = write_spec(tmp_path, f"""
name: many paths
dims: {{C: 2, H: 2, F: 3}}
block:
  steps:
{adds}
input: {{tokens: [0, 1]}}
weights: {{embedding: [[1, 0], [0, 1]], position: [[0, 0], [0, 1]]}}
""")
    found = titles(draw(str(spec)))
    assert "tenth residual path: r11 = r10 + x" in found and "residual path 11: r12 = r11 + x" in found, found  # r1 = x + x adds no path
