"""The stablelm layout: Hugging Face StableLM imported with no flags, traced, and compared with its forward.

What is new: LayerNorm with a bias before a SwiGLU MLP, partial rotary (rotary_dim), grouped-query attention, the
q/k/v biases use_qkv_bias switches on, and use_parallel_residual's one norm before a parallel attention and MLP
(norm_order: parallel_shared).
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

from tracer.spec import load_spec


def _stablelm(tmp_path, **config):
    rope = {"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.5}
    return hf.tiny_family(tmp_path, "StableLmForCausalLM", "StableLmConfig", "stablelm", {"num_key_value_heads": 2, "rope_parameters": rope} | config)


@pytest.mark.parametrize("config, order", [({}, "pre"), ({"use_qkv_bias": True, "use_parallel_residual": True, "num_key_value_heads": 4}, "parallel_shared")])
def test_stablelm_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, order, request):
    torch, model, folder = _stablelm(tmp_path, **config)
    from transformers.models.stablelm import modeling_stablelm as mod

    hf.lift_float32(monkeypatch, torch, mod, "StableLm")
    spec, _ = hf.family_parity(tmp_path, request, "stablelm", torch, model, folder)
    s = load_spec(str(spec))
    assert (s.block.norm, s.block.norm_order, s.block.rotary_dim, s.block.activation) == ("layernorm", order, 6, "swiglu")
    assert s.weights["blocks.1.norm1.beta"].source == "file"
    assert s.weights["blocks.0.attn.b_q"].source == ("file" if config else "zeros")


@pytest.mark.parametrize("config, fragment", [
    ({"qk_layernorm": True}, "qk_layernorm = true"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"use_qkv_bias": True}, "use_qkv_bias = true, but the checkpoint holds no"),
    ({"use_parallel_residual": True}, "use_parallel_residual = true, but the checkpoint holds post_attention_layernorm"),
    ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}}, "rope type 'dynamic'"),
    ({"my_new_scale": 2.0}, "my_new_scale = 2.0: the stablelm layout does not model this setting"),
])
def test_what_the_stablelm_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    folder = hf.with_config(_stablelm(tmp_path)[2], config)
    assert_refused(run_app("import", str(folder)), "config.json: " + fragment)
