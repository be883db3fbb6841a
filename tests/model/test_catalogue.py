"""The stage catalogue (`tracer stages`): every name a trace records is in it, with its shape."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import EXAMPLES, REPO, SPECS, run_app, run_cli

from tracer.engine import executor
from tracer.model import catalogue
from tracer.spec import load_spec, load_spec_text
from tracer.spec.presets import PRESETS

SHIPPED = sorted(SPECS.glob("**/*.yaml")) + sorted((EXAMPLES / "positions").glob("*.yaml"))


def preset_specs():
    return [load_spec(str(p)) for p in SHIPPED] + [load_spec_text(p.text, f"{n}.yaml") for n, p in PRESETS.items() if n != "gpt2"]


def first_clause(text: str) -> str:
    return text.split(",")[0].split(" (")[0]


@pytest.mark.parametrize("spec", preset_specs(), ids=lambda s: s.path)
def test_every_recorded_stage_is_catalogued_with_its_axes_and_meaning(spec):
    trace = executor.run(spec, keep_going=True)
    custom = spec.block.norm_order == "custom"  # a spec's own steps carry its own meanings
    for name, stage in trace.stages.items():
        entries = catalogue.lookup(name)
        # an encoder layer's stages run over the S source positions; the catalogue lists the layer once, over T
        axes = tuple("T" if a == "S" and name.startswith("encoder.blocks.") else a for a in stage.axes)
        assert any(e.axes == axes or e.name.endswith("<stage>") for e in entries), (name, stage.axes, entries)
        assert custom or any(first_clause(e.meaning) == first_clause(stage.meaning) or e.name.endswith("<stage>")
                             for e in entries), (name, stage.meaning, [e.meaning for e in entries])


def test_one_name_with_two_meanings_is_listed_twice():
    norm1 = {e.section: e for e in catalogue.lookup("norm1")}
    assert norm1["pre-norm layer (norm_order: pre, Example 17.2)"].meaning == "first normalisation, N_1 = LN_1(X)"
    assert norm1["post-norm layer (norm_order: post, section 17.6)"].meaning == "first normalisation, R_post = LN_1(X + U)"
    rms = [e for e in catalogue.lookup("norm1") if "rmsnorm" in e.meaning]
    assert rms and "no mean subtracted" in rms[0].formula


def test_stack_and_encoder_names_find_their_layer_stage():
    assert {e.axes for e in catalogue.lookup("blocks.7.hidden")} == {("B", "T", "F")}
    assert "decoder.blocks.N.cross.weights" in [e.name for e in catalogue.lookup("decoder.blocks.0.cross.weights")]
    assert catalogue.lookup("decoder.blocks.0.cross.weights")[0].shape == "[B,H,T,S]"
    with pytest.raises(catalogue.UsageError, match="no stage is called 'nrom1'; did you mean 'norm1'"):
        catalogue.lookup("nrom1")


def test_catalogue_presets_and_cli_import_no_numpy():
    code = "import sys, tracer.model.catalogue, tracer.spec.presets, tracer.cli.app; print('numpy' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True, text=True)
    assert r.stdout.strip() == "False", r.stderr


def test_stages_command_json_lists_every_kind_of_name():
    r = run_cli("stages", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    names = {s["name"] for s in doc["stages"]}
    for name in ("embed", "input", "position", "x", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output",
                 "residual2", "attn.q", "attn.k", "attn.v", "attn.scores", "attn.weights", "attn.heads", "final_norm",
                 "logits", "probs", "encoder.embed", "encoder.x", "decoder.x", "decoder.blocks.N.cross_attention",
                 "decoder.blocks.N.norm3", "encoder.final_norm"):
        assert name in names, name
    weights = next(s for s in doc["stages"] if s["name"] == "attn.weights")
    assert weights["shape"] == "[B,H,T,T]" and "softmax over keys" in weights["meaning"]


def test_stages_command_table_and_one_name():
    r = run_app("stages")
    assert r.returncode == 0
    for section in catalogue.SECTIONS:
        assert section in r.stdout
    assert "E[token id]" in r.stdout  # brackets are text, not rich markup
    one = run_app("stages", "blocks.1.norm2", "--format", "markdown")
    assert one.returncode == 0
    assert "| `norm2` | second normalisation, N_2 = LN_2(R) |" in one.stdout
    bad = run_app("stages", "atention")
    assert bad.returncode == 2
    assert "no stage is called 'atention'; did you mean 'attention'" in bad.stderr
