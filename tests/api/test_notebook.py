"""examples/notebook.ipynb: its code cells run in order, with plain Python (no Jupyter needed), as a kernel would run them."""

from __future__ import annotations

import ast
import json

import pytest
from conftest import EXAMPLES, REPO

NOTEBOOK = EXAMPLES / "notebook.ipynb"


def code_cells() -> list[str]:
    doc = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert doc["nbformat"] == 4
    return ["".join(c["source"]) for c in doc["cells"] if c["cell_type"] == "code"]


def run_cell(source: str, namespace: dict) -> object:
    """Run a cell; return the value of its last line if that is an expression (what Jupyter displays)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    return None if last is None else eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)


@pytest.mark.parametrize("cwd", [EXAMPLES, REPO], ids=["from examples/", "from the repository root"])
def test_the_notebooks_cells_run_in_order_and_display(monkeypatch, cwd):
    monkeypatch.chdir(cwd)
    namespace: dict = {"__name__": "__main__"}
    shown = []
    for source in code_cells():
        value = run_cell(source, namespace)
        if value is not None and hasattr(value, "_repr_html_"):
            shown.append(value._repr_html_())
    assert len(shown) == 4  # the trace, its attention heatmaps, the two diffs
    assert "1.476742" in shown[0] and "first diverging stage: norm1" in shown[-1] and "ddof=1" in shown[-1]
