"""The olmo layout: Hugging Face OLMo imported with no flags, traced, and compared with its forward.

What is new: LayerNorms without a weight or a bias (OlmoLayerNorm, eps 1e-5 fixed): the spec's gamma and beta are
filled (1 and 0), not read; the q/k/v/o biases attention_bias switches on; clip_qkv refused by name.
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

from tracer.spec import load_spec


def _olmo(tmp_path, **config):
    return hf.tiny_family(tmp_path, "OlmoForCausalLM", "OlmoConfig", "olmo", {"num_key_value_heads": 2, "pad_token_id": 1, "eos_token_id": 2} | config)


def lift_layer_norm(monkeypatch, torch, module) -> None:
    """OlmoLayerNorm computes in float32 even in a float64 model: the same formula in float64."""
    def forward(self, x):
        return torch.nn.functional.layer_norm(x, self.normalized_shape, None, None, eps=1e-5)

    monkeypatch.setattr(module.OlmoLayerNorm, "forward", forward)


@pytest.mark.parametrize("config", [{}, {"attention_bias": True, "num_key_value_heads": 4, "tie_word_embeddings": True}])
def test_olmo_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, request):
    torch, model, folder = _olmo(tmp_path, **config)
    from transformers.models.olmo import modeling_olmo as mod

    hf.lift_float32(monkeypatch, torch, mod, "Olmo")
    lift_layer_norm(monkeypatch, torch, mod)
    spec, _ = hf.family_parity(tmp_path, request, "olmo", torch, model, folder)
    s = load_spec(str(spec))
    assert (s.block.norm, s.block.eps, s.block.activation, s.block.head) == ("layernorm", 1e-5, "swiglu", "tied" if config else "separate")
    assert (s.weights["blocks.1.norm1.gamma"].source, s.weights["final_norm.beta"].source) == ("ones", "zeros")  # no weights: filled
    assert s.weights["blocks.0.attn.b_o"].source == ("file" if config else "zeros")


@pytest.mark.parametrize("config, fragment", [
    ({"clip_qkv": 8.0}, "clip_qkv = 8.0"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"attention_bias": True}, "attention_bias = true, but the checkpoint holds no"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}, "rope_parameters: rope type 'linear'"),
    ({"model_type": "olmo2"}, "model_type 'olmo2'"),
    ({"layer_norm_eps": 1e-6}, "layer_norm_eps = 1e-06: the olmo layout does not model this setting"),
])
def test_what_the_olmo_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    folder = hf.with_config(_olmo(tmp_path)[2], config)
    args = ("--layout", "olmo") if "model_type" in config else ()
    assert_refused(run_app("import", str(folder), *args), "config.json: " + fragment)
