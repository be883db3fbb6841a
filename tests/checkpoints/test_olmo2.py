"""The olmo2 layout: Hugging Face OLMo 2 imported with no flags, traced, and compared with its forward.

What is new: no norm before a sublayer and an RMSNorm on its output before the residual add (norm_order:
post_sublayer), and q and k RMS-normalised over their whole projections before the split into heads (qk_norm:
projection, weights attn.q_norm [C_q], attn.k_norm [C_kv]).
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

from tracer.spec import load_spec


def _olmo2(tmp_path, **config):
    return hf.tiny_family(tmp_path, "Olmo2ForCausalLM", "Olmo2Config", "olmo2", {"num_key_value_heads": 2, "pad_token_id": 1, "eos_token_id": 2} | config)


@pytest.mark.parametrize("config", [{}, {"attention_bias": True, "num_key_value_heads": 4, "rms_norm_eps": 1e-6}])
def test_olmo2_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, request):
    torch, model, folder = _olmo2(tmp_path, **config)
    from transformers.models.olmo2 import modeling_olmo2 as mod

    hf.lift_float32(monkeypatch, torch, mod, "Olmo2")
    hf.lift_rms_norm(monkeypatch, torch, mod.Olmo2RMSNorm)
    spec, _ = hf.family_parity(tmp_path, request, "olmo2", torch, model, folder)
    s = load_spec(str(spec))
    assert (s.block.norm_order, s.block.norm, s.block.qk_norm, s.block.qk_projection) == ("post_sublayer", "rmsnorm", True, True)
    assert s.block.eps == config.get("rms_norm_eps", 1e-5)
    assert s.weights["blocks.1.attn.q_norm"].shape == (48,) and s.weights["blocks.1.attn.k_norm"].shape == (48 if config else 24,)
    steps = {st.name: st for st in s.steps}
    assert steps["blocks.0.attention"].inputs == ("x",) and steps["blocks.0.hidden"].inputs == ("blocks.0.residual1",)


@pytest.mark.parametrize("config, fragment", [
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"attention_bias": True}, "attention_bias = true, but the checkpoint holds no"),
    ({"clip_qkv": 8.0}, "clip_qkv = 8.0: the olmo2 layout does not model this setting"),
    ({"model_type": "olmo3"}, "model_type 'olmo3'"),
])
def test_what_the_olmo2_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    folder = hf.with_config(_olmo2(tmp_path)[2], config)
    args = ("--layout", "olmo2") if "model_type" in config else ()
    assert_refused(run_app("import", str(folder), *args), "config.json: " + fragment)
