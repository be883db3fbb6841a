"""The probs line of tracer run: the top k next tokens at each position, with their text and probability (--top)."""

from __future__ import annotations

import numpy as np
from conftest import SPECS, assert_refused, run_app, run_cli

WORDS = ["<s>", "the", "cat", "sat", "on", "mat", "."]


def _probs_lines(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("probs for sample b=0"))
    return [line.strip() for line in lines[start + 1:] if line.startswith("  t=")]


def test_the_probs_line_shows_the_most_probable_next_tokens_with_their_words():
    import tracer

    p = tracer.trace(str(SPECS / "stack-2-layers.yaml"))["probs"][0]
    r = run_app("run", str(SPECS / "stack-2-layers.yaml"), "--top", "3")
    assert r.returncode == 0, r.stderr
    lines = _probs_lines(r.stdout)
    assert len(lines) == p.shape[0]
    for t, line in enumerate(lines):
        order = np.argsort(-p[t], kind="stable")[:3]
        want = ", ".join(f"'{WORDS[i]}' {p[t, i]:.6f} (id {i})" for i in order)
        assert line.endswith(f"top 3: {want}"), (line, want)


def test_top_five_by_default_and_zero_shows_the_first_values():
    lines = _probs_lines(run_app("run", str(SPECS / "stack-2-layers.yaml")).stdout)
    assert all(line.count("(id ") == 5 for line in lines)
    lines = _probs_lines(run_app("run", str(SPECS / "stack-2-layers.yaml"), "--top", "0").stdout)
    assert all(": [" in line and "(id " not in line for line in lines)


def test_a_negative_top_is_refused():
    assert_refused(run_cli("run", str(SPECS / "stack-2-layers.yaml"), "--top", "-1"), "--top -1")
