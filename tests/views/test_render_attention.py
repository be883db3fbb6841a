"""Attention heatmaps: one panel per head, token labels, masked cells, the large-T view, the CLI.

Expected weights are worked out by hand from Example 17.2 (two one-coordinate causal heads), not
copied from tracer's output.
"""

from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest
from conftest import EXAMPLES, PRE, SPECS, run_app, write_spec
from rich.console import Console
from rich.style import Style

from tracer.engine import executor
from tracer.errors import UsageError
from tracer.spec import load_spec, load_spec_text
from tracer.views.attention import BINS, GLYPHS, MASKED, attention_view, make_grid, panel_text, resolve

STACK = str(SPECS / "stack-2-layers.yaml")
SEQ2SEQ = str(SPECS / "encoder-decoder.yaml")


def plain(renderable, width: int = 200) -> str:
    c = Console(width=width, file=io.StringIO(), no_color=True, color_system=None, emoji=False, highlight=False)
    c.print(renderable)
    return c.file.getvalue()


def view(path: str, names: list[str] | None = None, b: int = 0) -> str:
    spec = load_spec(path)
    return plain(attention_view(executor.run(spec), resolve(spec, names or []), b))


def panel_rows(text: str, head: int) -> list[str]:
    """The grid lines of one head's panel (the header line first), from side-by-side panels."""
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if f"head {head} " in line)
    k = [m.group(1) for m in re.finditer(r"╭─ head (\d+)", lines[top])].index(str(head))  # its place in the row
    out = []
    for line in lines[top + 1:]:
        parts = line.split("│")
        if len(parts) < 2 * k + 3:
            break
        out.append(parts[1 + 2 * k])
    return out


def ln2(x: list[float], eps: float = 1e-5) -> list[float]:
    mu = sum(x) / len(x)
    var = sum((v - mu) ** 2 for v in x) / len(x)
    return [(v - mu) / math.sqrt(var + eps) for v in x]


def example_weights() -> list[list[list[float]]]:
    """Example 17.2 by hand: X = E[tokens] + P, N1 = LN(X); head h reads coordinate h (W_Q = W_K = W_V = I, d = 1)."""
    E, P = [[1, 0], [0, 1], [1, 1]], [[0, 0], [0, 1], [1, 0]]
    n1 = [ln2([E[t][c] + P[t][c] for c in range(2)]) for t in range(3)]
    heads = []
    for h in range(2):
        rows = []
        for i in range(3):
            scores = [n1[i][h] * n1[j][h] for j in range(i + 1)]  # causal: keys 0..i
            z = sum(math.exp(s) for s in scores)
            rows.append([math.exp(s) / z for s in scores])
        heads.append(rows)
    return heads


def test_one_panel_per_head_with_the_chapter_weights():
    text = view(PRE)
    assert text.count("╭─ head ") == 2  # H = 2
    for h, rows in enumerate(example_weights()):
        grid = panel_rows(text, h)
        assert grid[0].split() == ["0", "1", "2"]  # no vocab: keys are labelled by position
        for i, want in enumerate(rows):
            line = grid[1 + i]
            assert line.split()[0] == str(i)
            numbers = re.findall(r"\d\.\d\d", line)
            assert numbers == [f"{w:.2f}" for w in want], (h, i, line)
            assert line.count(MASKED) == 2 - i  # causal: keys after the query are masked


def test_masked_cells_are_styled_differently_from_unmasked():
    w = np.array([[1.0, 0.0], [0.25, 0.75]])
    visible = np.array([[True, False], [True, True]])
    text = panel_text(make_grid(w, visible, None, None))
    styles = {text.plain[s.start:s.end]: s.style for s in text.spans}
    assert styles[MASKED] == "dim"
    shades = [s.style for s in text.spans if text.plain[s.start:s.end] in GLYPHS]
    assert len(shades) == 3  # three unmasked cells, each a shade in its own colour
    assert all(isinstance(st, Style) and st.color is not None for st in shades)
    assert len({st.color for st in shades}) == 3  # the colour scale is continuous: 0.25, 0.75 and 1 differ


def test_an_unmasked_zero_is_blank_not_a_masked_dot():
    w = np.array([[1.0, 0.0], [0.0, 1.0]])
    lines = panel_text(make_grid(w, None, None, None)).plain.splitlines()
    assert MASKED not in "".join(lines)
    assert " 0.00" in lines[1] and "█1.00" in lines[1]


def test_token_labels_on_rows_and_columns():
    text = view(STACK, ["blocks.1.attention"], b=1)  # sample 1: <s> the mat .
    grid = panel_rows(text, 0)
    assert grid[0].split() == ["<s>", "the", "mat", "."]
    assert [row.split()[:2] for row in grid[1:]] == [["0", "<s>"], ["1", "the"], ["2", "mat"], ["3", "."]]
    assert "blocks.1.attn.weights" in text and "sample b=1" in text


def test_cross_attention_rows_are_target_tokens_and_columns_source_tokens():
    text = view(SEQ2SEQ, ["decoder.blocks.0.cross_attention"])
    grid = panel_rows(text, 1)
    assert grid[0].split() == ["今天", "天气", "真好"]
    assert [row.split()[1] for row in grid[1:]] == ["<s>", "today", "is", "good"]
    assert MASKED not in "".join(grid[1:])  # cross-attention has no mask
    assert "[B,H,T,S] = [1,2,4,3]" in text


def test_every_row_of_weights_sums_to_one_in_the_cells_shown():
    text = view(SEQ2SEQ, ["encoder.blocks.0.attn"])
    for h in (0, 1):
        for line in panel_rows(text, h)[1:]:
            assert abs(sum(float(v) for v in re.findall(r"\d\.\d\d", line)) - 1) <= 0.015  # three values rounded to 0.01


def test_a_nan_row_shows_nan_not_a_masked_dot():
    text = view(str(EXAMPLES / "violations" / "fully-masked-row.yaml"))
    grid = panel_rows(text, 0)
    assert grid[2].split() == ["1", "nan", "nan", "nan"]  # query 1 reads no key: 0/0
    assert "violation: nonfinite" in text


def test_shades_without_numbers_between_13_and_48_keys():
    spec = load_spec_text("dims: {T: 20, C: 4, H: 1, F: 4}\nseed: 1\nblock: {mask: causal}\ninput: {x: random}\n")
    text = plain(attention_view(executor.run(spec), resolve(spec, []), 0))
    grid = panel_rows(text, 0)
    assert len(grid) == 21 and not re.search(r"\d\.\d\d", "".join(grid))
    assert grid[1].split()[1].startswith("██")  # query 0 reads only key 0: weight 1
    assert grid[20].count(MASKED) == 0 and grid[1].count(MASKED) == 19
    assert "shades only" in text


def test_large_t_is_shown_as_bounded_block_means():
    T = 1024
    visible = np.tril(np.ones((T, T), dtype=bool))
    w = np.where(visible, 1.0 / np.arange(1, T + 1)[:, None], 0.0)  # uniform over the visible keys
    g = make_grid(w, visible, None, None)
    assert g.mode == "blocks" and g.values.shape == (BINS, BINS)
    block = 1024 // BINS
    assert g.values[0, 0] == pytest.approx(w[:block, :block].mean())
    assert g.values[5, 2] == pytest.approx(w[5 * block:6 * block, 2 * block:3 * block].mean())
    assert g.masked[0, 1] and not g.masked[1, 1] and not g.masked[1, 0]  # a block is masked only when all of it is
    assert g.rows[0] == "0–31" and g.cols[1] == "32"
    lines = panel_text(g).plain.splitlines()
    assert len(lines) == BINS + 1 and max(len(line) for line in lines) < 80


def test_large_t_through_the_cli_stays_small_and_says_so(tmp_path):
    p = write_spec(tmp_path, "dims: {T: 300, C: 6, H: 3, F: 4}\nseed: 2\nblock: {mask: causal}\ninput: {x: random}\n")
    r = run_app("run", str(p), "--attention")
    assert r.returncode == 0, r.stderr
    assert "300 × 300 cells per head are too many to print" in r.stdout
    assert "block of 10 queries × 10 keys (30 × 30 blocks)" in r.stdout
    assert r.stdout.count("╭─ head ") == 3
    assert len(r.stdout.splitlines()) < 60 and max(len(line) for line in r.stdout.splitlines()) < 400


def test_resolve_names():
    spec = load_spec(STACK)
    assert [s.name for s in resolve(spec, [])] == ["blocks.0.attention"]
    assert [s.name for s in resolve(spec, ["all"])] == ["blocks.0.attention", "blocks.1.attention"]
    for name in ("blocks.1.attention", "blocks.1.attn", "blocks.1.attn.weights"):
        assert [s.name for s in resolve(spec, [name])] == ["blocks.1.attention"]
    with pytest.raises(UsageError, match=r"no attention step of that name; .* has: blocks.0.attention, blocks.1.attention"):
        resolve(spec, ["blocks.2.attn"])


def test_a_model_without_attention_is_a_usage_error():
    spec = load_spec_text(
        "dims: {C: 2, H: 1, F: 2}\ninput: {x: [[1, 0]]}\nseed: 0\n"
        "block:\n  steps:\n    - {name: norm1, op: layer_norm, in: x, weights: norm1}\n"
    )
    with pytest.raises(UsageError, match="no attention step"):
        resolve(spec, [])


def test_cli_attention_exit_codes():
    r = run_app("run", PRE, "--attention")
    assert r.returncode == 0 and r.stderr == ""
    assert "attn.weights" in r.stdout and "Y = R" not in r.stdout  # the heatmap replaces the stage table
    r = run_app("run", str(EXAMPLES / "violations" / "softmax-over-queries.yaml"), "--attention")
    assert r.returncode == 1 and "violation: axis" in r.stdout and "each column sums to 1" in r.stdout
    r = run_app("run", STACK, "--attention-stage", "nope")
    assert r.returncode == 2 and "--attention-stage 'nope': no attention step of that name" in r.stderr
    r = run_app("run", PRE, "--attention", "--json")
    assert r.returncode == 2 and "does not combine with --format json" in r.stderr
    r = run_app("run", str(EXAMPLES / "violations" / "ex3-layernorm-over-positions.yaml"), "--attention")
    assert r.returncode == 1 and "attn.weights: not recorded (the run stopped at the violation at norm1" in r.stdout


def test_cli_all_stages_of_an_encoder_decoder():
    r = run_app("run", SEQ2SEQ, "--attention-stage", "all")
    assert r.returncode == 0, r.stderr
    names = re.findall(r"^(\S+\.weights) ", r.stdout, flags=re.MULTILINE)
    assert names == ["encoder.blocks.0.attn.weights", "decoder.blocks.0.attn.weights", "decoder.blocks.0.cross.weights"]
