"""The API's interventions: tracer.trace(ablate=, set=, start=) and tracer.patch, shown in a notebook as the CLI shows them."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES, SPECS

import tracer
from tracer.errors import UsageError

STACK = str(SPECS / "stack-2-layers.yaml")


def test_an_ablated_trace_shows_its_mark_in_a_notebook():
    t = tracer.trace(STACK, ablate="blocks.0.attn.head.1")
    html = t._repr_html_()
    assert "blocks.0.attention</span>" in html and "  ← head 1 ablated (zero)</span>" in html  # coloured as in the terminal
    assert "blocks.0.attention  ← head 1 ablated (zero)" in str(t.table())
    assert "←" not in tracer.trace(STACK)._repr_html_()


def test_a_dict_spec_takes_interventions_too(tmp_path):
    import yaml

    doc = yaml.safe_load((SPECS / "stack-2-layers.yaml").read_text())
    t = tracer.trace(doc, ablate=["blocks.1.ffn=mean", "blocks.0.attn.head.0"])
    assert t.stage("blocks.1.ffn").intervention is not None and t.stage("blocks.0.attention").intervention is not None
    assert np.allclose(t["blocks.1.ffn"], t["blocks.1.ffn"].mean(axis=1, keepdims=True), atol=0, rtol=0)


def test_patch_takes_loaded_specs_and_checks_its_arguments():
    clean, corrupt = tracer.load(str(EXAMPLES / "interventions" / "clean.yaml")), tracer.load(str(EXAMPLES / "interventions" / "corrupt.yaml"))
    g = tracer.patch(clean, corrupt, stage="blocks.1.output", token="mat")
    assert g.stages == ["blocks.1.output"] and g.token_text == "'mat'"
    with pytest.raises(UsageError):
        tracer.patch(clean, corrupt, stage=3)  # type: ignore[arg-type]
