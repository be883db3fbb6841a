"""The phi3 layout: Hugging Face Phi-3 (Phi3ForCausalLM) imported with no flags, traced, and compared with its forward.

What is new against LLaMA: q, k and v packed in qkv_proj (unequal parts with grouped-query attention), the gate and up
projections packed in gate_up_proj, a partial rotary factor (Phi-4-mini's) and a sliding window on every layer.
"""

from __future__ import annotations

import pytest
from helpers import hf_parity as hf

IDS = [5, 17, 42, 3, 29, 0, 11, 8, 60, 33]  # T = 10, beyond the window of 4


def _phi3(tmp_path, **config):
    return hf.tiny(tmp_path, "Phi3", **({"rms_norm_eps": 1e-5} | config))


@pytest.mark.parametrize("config", [{}, {"num_key_value_heads": 4, "tie_word_embeddings": True},
                                    {"sliding_window": 4, "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0,
                                                                              "partial_rotary_factor": 0.5}}])
def test_phi3_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, request):
    _, model, folder = _phi3(tmp_path, **config)
    from transformers.models.phi3 import modeling_phi3 as mod

    s = hf.parity(tmp_path, monkeypatch, request, model, folder, mod, "Phi3", "phi3", IDS)
    assert (s.block.norm, s.block.rotary_pairing, s.block.activation) == ("rmsnorm", "half", "swiglu")
    assert s.block.rotary_dim == (6 if "sliding_window" in config else None)
    assert s.block.window == (4 if "sliding_window" in config else None)
    H_kv = config.get("num_key_value_heads", 2)
    assert s.weights["blocks.0.attn.w_k"].shape == (48, H_kv * 12)


@pytest.mark.parametrize("config, fragment", [
    ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 6, "long_factor": [2.0] * 6}},
     "rope_parameters: rope type 'longrope'"),
    ({"head_dim": 8}, "head_dim = 8"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"my_new_scale": 2.0}, "my_new_scale = 2.0: the phi3 layout does not model this setting"),
    ({"num_key_value_heads": 1}, "model.layers.0.self_attn.qkv_proj.weight has 96 rows, but num_attention_heads = 4 and num_key_value_heads = 1"),
])
def test_what_the_phi3_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    hf.refused_with(_phi3(tmp_path)[2], config, fragment)


def test_a_spec_whose_heads_do_not_fit_qkv_proj_is_refused_naming_the_rows(tmp_path):
    from conftest import assert_refused, run_app

    folder = _phi3(tmp_path)[2]  # 4 heads and 2 key/value heads of width 12: qkv_proj holds 48 + 24 + 24 rows
    spec = hf.imported(tmp_path, folder)
    spec.write_text(spec.read_text().replace("  H_kv: 2 ", "  H_kv: 4 "))  # the spec now wants 48 + 48 + 48 rows
    assert_refused(run_app("run", str(spec)), "tensor 'model.layers.0.self_attn.qkv_proj.weight' (rows 0 to 47 of 144 along axis 0, transposed)",
                   "expected [144,48], received [96,48]")
