"""The smollm3 layout: Hugging Face SmolLM3 (SmolLM3ForCausalLM), rotary positions on some layers only (block.rotary_layers).

Without torch: tracer's own rotary_layers against the scalar reference, and its refusals.  With torch and transformers:
tiny random SmolLM3 models saved by transformers, imported with no flags and traced: every layer, the final norm and the
logits agree with HF's float64 forward to 1e-10 (its float32 rotary, RMSNorm and softmax lifted); through --layout llama
the same checkpoint is refused by name.
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app, write_spec
from helpers import hf_parity as hf
from helpers.tracing import run_refused, trace_text

from tracer.spec import load_spec
from tracer.views import reference_check as verify

IDS = [5, 17, 42, 3, 29, 0, 11, 8, 60, 33]  # T = 10, beyond the window of 4

SPEC = """name: rotary layers
dims: {{B: 1, T: 5, C: 8, H: 2, F: 12, V: 16}}
seed: 3
block: {{norm: rmsnorm, activation: swiglu, positions: {positions}, final_norm: true, head: tied, layers: 3, rotary_layers: {layers}}}
input: {{tokens: [[0, 1, 2, 3, 4]]}}
"""


def test_rotary_layers_turn_only_those_layers_and_the_reference_follows():
    trace = trace_text(SPEC.format(positions="rotary", layers="[0, 2]"))
    attention = {s.name: s for s in trace.spec.steps if s.op == "mha"}
    assert [attention[f"blocks.{i}.attention"].base is not None for i in range(3)] == [True, False, True]
    v = verify.verify(trace)
    assert v.plan.full and v.max_abs_diff < 1e-13
    turned = trace_text(SPEC.format(positions="rotary", layers="[0, 1, 2]"))  # layer 1 turned: its output differs
    assert (turned.stages["blocks.0.output"].array == trace.stages["blocks.0.output"].array).all()
    assert not (turned.stages["blocks.1.output"].array == trace.stages["blocks.1.output"].array).all()


def test_diff_says_which_layers_are_turned(tmp_path):
    every = write_spec(tmp_path, SPEC.format(positions="rotary", layers="[0, 1, 2]"))
    some = write_spec(tmp_path, SPEC.format(positions="rotary", layers="[0, 2]"), "some.yaml")
    r = run_app("diff", str(every), str(some))
    assert r.returncode == 1, r.stderr
    assert "rotary positions on layers 0, 2 only" in r.stdout and "rotary positions on layers 0, 1, 2 only" in r.stdout


@pytest.mark.parametrize("positions, layers, fragment", [
    ("learned", "[0]", "rotary_layers is for rotary positions, but positions is learned"),
    ("rotary", "[0, 3]", "layer 3 is not one of the 3 layers (0 .. 2)"),
    ("rotary", "[2, 0]", "expected each layer once, in increasing order"),
])
def test_a_wrong_rotary_layers_is_refused_by_name(tmp_path, positions, layers, fragment):
    run_refused(tmp_path, SPEC.format(positions=positions, layers=layers), "block.rotary_layers: " + fragment)


def _smollm3(tmp_path, **config):
    return hf.tiny(tmp_path, "SmolLM3", **({"num_hidden_layers": 4, "rms_norm_eps": 1e-6} | config))


@pytest.mark.parametrize("config, turned, sliding", [
    ({}, (0, 1, 2), None),
    ({"no_rope_layers": [1, 0, 1, 0], "use_sliding_window": True, "sliding_window": 4, "attention_bias": True, "tie_word_embeddings": False,
      "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"]}, (0, 2), (1, 3)),
])
def test_smollm3_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, turned, sliding, request):
    _, model, folder = _smollm3(tmp_path, **config)
    from transformers.models.smollm3 import modeling_smollm3 as mod

    s = hf.parity(tmp_path, monkeypatch, request, model, folder, mod, "SmolLM3", "smollm3", IDS)
    assert (s.block.rotary_layers, s.block.sliding_layers) == (turned, sliding)


@pytest.mark.parametrize("layers, turned", [("1-3", (0, 1)), ("0-2", None)])
def test_import_of_some_layers_renumbers_the_rotary_layers(tmp_path, layers, turned):
    folder = _smollm3(tmp_path)[2]  # layers 0, 1, 2 turned, 3 not
    spec = hf.imported(tmp_path, folder, "--layers", layers)
    assert load_spec(str(spec)).block.rotary_layers == turned


def test_the_llama_layout_refuses_smollm3_by_name(tmp_path):
    _, _, folder = _smollm3(tmp_path)
    assert_refused(run_app("import", str(folder), "--layout", "llama"), "model_type 'smollm3'", "no_rope_layers")


@pytest.mark.parametrize("config, fragment", [
    ({"no_rope_layers": [1, 1, 0]}, "no_rope_layers: expected a list of 4 entries, each 1 (rotary positions) or 0 (none)"),
    ({"layer_types": ["full_attention", "sliding_attention", "full_attention", "full_attention"], "sliding_window": 4},
     "layer_types: sliding_attention layers without a sliding_window"),
    ({"my_new_scale": 2.0}, "my_new_scale = 2.0: the smollm3 layout does not model this setting"),
])
def test_what_the_smollm3_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    hf.refused_with(_smollm3(tmp_path)[2], config, fragment)
