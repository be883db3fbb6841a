"""The helium layout: Hugging Face Helium (HeliumForCausalLM) imported with no flags, traced, and compared with its forward.

What is new against LLaMA: the rotary pairs are interleaved (2i, 2i+1); attention_bias gives q, k and v a bias, never o_proj.
Through --layout llama the same checkpoint is refused by name: its rotary pairing is not LLaMA's.
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf


def _helium(tmp_path, **config):
    return hf.tiny(tmp_path, "Helium", **({"head_dim": 12, "rms_norm_eps": 1e-6} | config))


@pytest.mark.parametrize("config", [{}, {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True}])
def test_helium_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, request):
    _, model, folder = _helium(tmp_path, **config)
    from transformers.models.helium import modeling_helium as mod

    s = hf.parity(tmp_path, monkeypatch, request, model, folder, mod, "Helium", "helium")
    assert s.block.rotary_pairing == "interleaved"
    assert (s.weights["blocks.0.attn.b_q"].source == "file") == bool(config) and s.weights["blocks.0.attn.b_o"].source != "file"


def test_the_llama_layout_refuses_helium_by_name(tmp_path):
    _, _, folder = _helium(tmp_path)
    assert_refused(run_app("import", str(folder), "--layout", "llama"), "model_type 'helium'", "(2i, 2i+1)")


@pytest.mark.parametrize("config, fragment", [
    ({"head_dim": 8}, "head_dim = 8: Helium's o_proj reads hidden_size = 48 inputs"),
    ({"sliding_window": 4}, "sliding_window = 4: the helium layout does not model this setting"),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}}, "rope_parameters: rope type 'yarn'"),
])
def test_what_the_helium_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    hf.refused_with(_helium(tmp_path)[2], config, fragment)
