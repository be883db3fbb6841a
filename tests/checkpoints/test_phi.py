"""The phi layout: Hugging Face Phi imported with no flags, traced, and compared with its forward.

What is new: one LayerNorm before a parallel attention and MLP (norm_order: parallel_shared), partial rotary
(rotary_dim), the attention's dense projection and a head with a bias (head_bias).
"""

from __future__ import annotations

import json

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

from tracer.spec import load_spec

TOL = 1e-10


def _phi(tmp_path, **config):
    torch, transformers = hf.need_torch()
    settings = {"vocab_size": 64, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 80,
                "max_position_embeddings": 32, "layer_norm_eps": 1e-5, "initializer_range": 0.2,
                "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.5}}
    settings.update(config)
    model = hf.saved(torch, transformers.PhiForCausalLM, transformers.PhiConfig(**settings), tmp_path / "phi")
    return torch, model, tmp_path / "phi"


@pytest.mark.parametrize("config", [{}, {"num_key_value_heads": 2, "hidden_act": "gelu"}])
def test_phi_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, request):
    torch, model, folder = _phi(tmp_path, **config)
    from transformers.models.phi import modeling_phi as mod

    hf.lift_float32(monkeypatch, torch, mod, "Phi")
    spec = hf.imported(tmp_path, folder, "--tokens", ",".join(map(str, hf.IDS)))
    found = hf.compare(hf.traced(spec), *hf.hf_forward(torch, model, model.model.layers, hf.IDS))
    assert max(found.values()) <= TOL, found
    hf.measured(request, "phi", found)
    s = load_spec(str(spec))
    assert (s.block.norm_order, s.block.rotary_dim, s.block.head_bias) == ("parallel_shared", 6, True)
    assert s.weights["head_bias"].source == "file"
    steps = {st.name: st for st in s.steps}
    assert steps["blocks.0.hidden"].inputs == ("blocks.0.norm1",) and "blocks.0.norm2" not in steps  # one norm, both branches


@pytest.mark.parametrize("config, fragment", [
    ({"qk_layernorm": True}, "qk_layernorm = true"),
    ({"hidden_act": "silu"}, "hidden_act 'silu'"),
    ({"head_dim": 4}, "head_dim = 4"),
    ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}}, "rope type 'dynamic'"),
    ({"my_new_scale": 2.0}, "my_new_scale = 2.0: the phi layout does not model this setting"),
])
def test_what_the_phi_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    _, _, folder = _phi(tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(config)
    (folder / "config.json").write_text(json.dumps(cfg))
    assert_refused(run_app("import", str(folder)), "config.json: " + fragment)
