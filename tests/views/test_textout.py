"""textout: the CSV and Markdown writers, in process.

Expected numbers come from the chapter (Example 17.2, section 17.6) worked by hand, not from
tracer's own output.
"""

from __future__ import annotations

import csv
import io
import math
import re

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from conftest import EXAMPLES, POST, PRE, compared
from hypothesis import given, settings

from tracer.compare import text as difftext
from tracer.engine import executor
from tracer.engine.executor import Stage
from tracer.spec import load_spec, load_spec_text
from tracer.views import text as textout

# Example 17.2: a = 0.5 / sqrt(0.25001); u = (2a - 1) / (2 sqrt(((2a - 1) / 2)^2 + 1e-5)); Y_1 = [1 + u, 2a + u]
A = 0.5 / math.sqrt(0.25001)
U = (2 * A - 1) / (2 * math.sqrt(((2 * A - 1) / 2) ** 2 + 1e-5))


def rows_of(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def pipes(line: str) -> int:
    """Unescaped '|' in a Markdown table line."""
    return len(re.findall(r"(?<!\\)\|", line))


# -- CSV layout ------------------------------------------------------------------

def test_btc_stage_one_row_per_sample_and_position():
    stage = Stage("x", np.arange(12, dtype=float).reshape(2, 3, 2), ("B", "T", "C"), "")
    rows = list(textout.stage_csv_rows("s.yaml", stage, 2))
    assert rows[0] == ["s.yaml", "x", "0", "", "0", "C", "0.0", "1.0"]
    assert rows[4] == ["s.yaml", "x", "1", "", "1", "C", "8.0", "9.0"]  # b=1, t=1: element [1,1,:]
    assert len(rows) == 6


def test_tc_stage_has_no_sample_cell_and_is_padded():
    stage = Stage("position", np.array([[0.0, 0.0], [0.0, 1.0]]), ("T", "C"), "")
    rows = list(textout.stage_csv_rows("s.yaml", stage, 4))
    assert rows[1] == ["s.yaml", "position", "", "", "1", "C", "0.0", "1.0", "", ""]


def test_bhtt_stage_has_head_and_query_cells_values_over_keys():
    w = np.zeros((1, 2, 3, 3))
    w[0, 1, 2] = [0.25, 0.25, 0.5]  # head 1, query 2
    stage = Stage("attn.weights", w, ("B", "H", "T", "T"), "")
    rows = list(textout.stage_csv_rows("s.yaml", stage, 3))
    assert len(rows) == 6  # 2 heads x 3 queries
    assert rows[5] == ["s.yaml", "attn.weights", "0", "1", "2", "T", "0.25", "0.25", "0.5"]


def test_values_read_back_exactly_and_nonfinite_are_spelled_as_in_json():
    values = np.array([[0.1 + 0.2, 1 / 3, math.nan, math.inf, -math.inf]])
    stage = Stage("x", values, ("T", "C"), "")
    (row,) = textout.stage_csv_rows("s.yaml", stage, 5)
    assert row[6:] == [repr(0.1 + 0.2), repr(1 / 3), "NaN", "Infinity", "-Infinity"]
    assert [float(v) for v in row[6:8]] == [0.1 + 0.2, 1 / 3]


def test_chapter_trace_csv_output_row_is_table_17_1():
    trace = executor.run(load_spec(PRE))
    text = textout.trace_csv([("pre.yaml", list(trace.stages.values()))])
    rows = rows_of(text)
    assert rows[0] == ["spec", "stage", "b", "h", "t", "axis", "v0", "v1", "v2"]  # widest: F = 3 (and T = 3)
    assert all(len(r) == 9 for r in rows)
    out = next(r for r in rows if r[1] == "output" and r[4] == "0")
    assert float(out[6]) == pytest.approx(1 + U, abs=1e-12)
    assert float(out[7]) == pytest.approx(2 * A + U, abs=1e-12)
    assert out[8] == ""


# -- Markdown ---------------------------------------------------------------------

def test_markdown_table_escapes_pipes_and_keeps_one_row_per_stage():
    text = """
name: "pipes | in | the | name"
vocab: ["a|b", c]
dims: {C: 2, H: 1, F: 2}
seed: 0
block: {norm_order: pre}
input: {tokens: ["a|b", c]}
"""
    trace = executor.run(load_spec_text(text, "p.yaml"))
    md = textout.run_markdown(trace, list(trace.stages.values()), 0, 0, 6)
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert "(a\\|b)" in table[0]  # the token label in the value column's header
    assert all(pipes(line) == pipes(table[0]) for line in table)
    assert len(table) == 2 + len(trace.stages)
    assert md.startswith("### pipes | in | the | name\n")


def test_markdown_marks_the_violation_row_and_quotes_the_panel():
    trace = executor.run(load_spec(str(EXAMPLES / "violations" / "beta-typo.yaml")))
    md = textout.run_markdown(trace, textout.visible_stages(trace, False), 0, 0, 6)
    assert "| `norm1` ← violation |" in md
    assert "> **broadcast violation at stage `norm1`**" in md
    assert "```" not in md  # no output matrix: the run stopped at norm1


# -- diff CSV ---------------------------------------------------------------------

def test_diff_csv_one_row_per_position_and_where_the_rows_part():
    r = compared(PRE, POST)
    rows = rows_of(difftext.diff_csv(r))
    assert rows[0] == difftext.DIFF_CSV_COLUMNS
    norm1 = {row[6]: row for row in rows if row[2] == "norm1"}
    # Post-norm's first row of X + MHA(X) is [2, 1]; LN maps it and X's [1, 0] to the same [a, -a] ...
    assert norm1["0"][3:] == ["differs", "0", "", "0", "equal", "0.0"]
    # ... while at t = 1 pre-norm normalises [0, 2] to ~[-1, 1] and post-norm ~[2.46, 0.54] to ~[1, -1].
    assert norm1["1"][7] == "differs"
    assert float(norm1["1"][8]) == pytest.approx(2.0, abs=1e-3)
    only_b = [row for row in rows if row[2] == "residual2"]
    assert only_b == [[PRE, POST, "residual2", "only_in_b", "", "", "", "only_in_b", ""]]


def test_diff_markdown_has_the_stage_table_and_the_summary():
    r = compared(PRE, POST)
    md = difftext.diff_markdown(r, 6)
    assert "- attention reads norm1(x) in A, x in B" in md
    table = [line for line in md.splitlines() if line.startswith("| `")]
    assert len(table) == len(r.stages)
    assert "← first difference" in next(line for line in table if line.startswith("| `norm1`"))
    assert md.rstrip().endswith(f"**{r.summary()}**")


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=3, max_dims=3, max_side=4),
                  elements=st.floats(allow_nan=True, allow_infinity=True, width=64)))
def test_csv_reads_back_to_the_same_array(a):
    stage = Stage("x", a, ("B", "T", "C"), "")
    width = a.shape[-1] + 2  # padded as when a wider stage shares the file
    back = np.empty_like(a)
    for row in csv.reader(io.StringIO(textout.csv_text(textout.trace_csv_header(width), textout.stage_csv_rows("s", stage, width)))):
        if row[0] == "spec":
            continue
        values = [float(v) for v in row[6:] if v != ""]
        back[int(row[2]), int(row[4])] = values
    assert np.array_equal(back, a, equal_nan=True)
    finite = ~np.isnan(a)  # NaN has no sign worth keeping (the JSON drops it too)
    assert np.array_equal(np.signbit(back[finite]), np.signbit(a[finite]))  # -0.0 stays -0.0
