"""The starcoder2 layout: Hugging Face StarCoder2 imported with no flags, traced, and compared with its forward.

What is new: LayerNorm with a bias before a two-matrix GELU (tanh) MLP, c_fc and c_proj; biases on every projection
(use_bias); a sliding window on every layer (sliding_window); a tied head.
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

from tracer.spec import load_spec


def _starcoder2(tmp_path, **config):
    return hf.tiny_family(tmp_path, "Starcoder2ForCausalLM", "Starcoder2Config", "starcoder2",
                   {"num_key_value_heads": 2, "bos_token_id": 0, "eos_token_id": 0} | config)


@pytest.mark.parametrize("config", [{}, {"sliding_window": 3, "use_bias": False, "tie_word_embeddings": False, "hidden_act": "gelu"}])
def test_starcoder2_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, request):
    torch, model, folder = _starcoder2(tmp_path, **config)
    from transformers.models.starcoder2 import modeling_starcoder2 as mod

    hf.lift_float32(monkeypatch, torch, mod, "Starcoder2")
    spec, _ = hf.family_parity(tmp_path, request, "starcoder2", torch, model, folder)
    s = load_spec(str(spec))
    assert (s.block.norm, s.block.activation, s.block.window) == ("layernorm", "gelu" if config else "gelu_tanh", 3 if config else None)
    assert (s.block.head, s.weights["blocks.1.ffn.b1"].source) == (("separate", "zeros") if config else ("tied", "file"))


@pytest.mark.parametrize("config, fragment", [
    ({"use_bias": False}, "use_bias = boolean false, but the checkpoint holds"),
    ({"hidden_act": "swish"}, "hidden_act 'swish'"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}, "rope_parameters: rope type 'linear'"),
    ({"attention_bias": True}, "attention_bias = boolean true: the starcoder2 layout does not model this setting"),
])
def test_what_the_starcoder2_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    folder = hf.with_config(_starcoder2(tmp_path)[2], config)
    assert_refused(run_app("import", str(folder)), "config.json: " + fragment)
