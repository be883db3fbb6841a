"""The gemma3 layout: Hugging Face Gemma 3's text model (Gemma3ForCausalLM) imported with no flags, traced, and compared.

What is new against Gemma 2: each head's q and k normalised with (1 + w) (qk_norm under norm: rmsnorm_offset), and the
sliding layers' own rotary base, unscaled, while the full layers keep theirs and its linear scaling
(block.local_position_base).  HF's float32 steps (RMSNorm, the rotary angles per layer type, the softmax, the embedding
scale's float32 sqrt(C)) are lifted to float64, and then every layer, the final norm and the logits agree to 1e-10.
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

IDS = [5, 17, 42, 3, 29, 0, 11, 8, 60, 33]  # T = 10, beyond the window of 4
ROPE = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}, "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}


def _gemma3(tmp_path, **config):
    settings = {"num_hidden_layers": 3, "head_dim": 12, "rms_norm_eps": 1e-6, "query_pre_attn_scalar": 16, "sliding_window": 4,
                "layer_types": ["sliding_attention", "sliding_attention", "full_attention"], "rope_parameters": ROPE,
                "hidden_activation": "gelu_pytorch_tanh"}
    return hf.tiny(tmp_path, "Gemma3", "Gemma3TextConfig", **(settings | config))


def _lift(model):
    def lift(monkeypatch, torch, mod):
        hf.lift_float32(monkeypatch, torch, mod, "Gemma3")  # the softmax (and a rotary forward replaced below)

        def rms_norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

        def rotary(self, x, position_ids, layer_type):
            params = self.config.rope_parameters[layer_type]
            d = 2 * getattr(self, f"{layer_type}_inv_freq").shape[0]
            inv_freq = 1.0 / params["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
            if params.get("rope_type") == "linear":
                inv_freq = inv_freq / params["factor"]
            emb = torch.cat([position_ids[..., None].double() * inv_freq] * 2, dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

        monkeypatch.setattr(mod.Gemma3RMSNorm, "forward", rms_norm)
        monkeypatch.setattr(mod.Gemma3RotaryEmbedding, "forward", rotary)
        model.model.embed_tokens.embed_scale = torch.tensor(model.config.hidden_size ** 0.5, dtype=torch.float64)
    return lift


@pytest.mark.parametrize("config, local", [
    ({}, 1e4),
    ({"rope_parameters": {t: {"rope_type": "default", "rope_theta": 1e4} for t in ROPE}, "num_key_value_heads": 4,
      "query_pre_attn_scalar": 12, "layer_types": None, "num_hidden_layers": 2, "tie_word_embeddings": False}, None),
])
def test_gemma3_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, local, request):
    _, model, folder = _gemma3(tmp_path, **config)
    from transformers.models.gemma3 import modeling_gemma3 as mod

    s = hf.parity(tmp_path, monkeypatch, request, model, folder, mod, "Gemma3", "gemma3", IDS, lift=_lift(model), entry="x")
    assert s.block.qk_norm and s.block.norm == "rmsnorm_offset" and s.block.local_position_base == local
    steps = {st.name: st for st in s.steps}
    assert steps["blocks.0.attention"].qk_norm == "offset"
    if local is not None:  # the sliding layers at 1e4, unscaled; the full layer at 1e6, scaled by 8
        assert (steps["blocks.0.attention"].base, steps["blocks.0.attention"].scaling) == (1e4, None)
        assert steps["blocks.2.attention"].base == 1e6 and steps["blocks.2.attention"].scaling == ("linear", 8.0)


def test_the_gemma2_layout_refuses_gemma3_by_name(tmp_path):
    folder = _gemma3(tmp_path)[2]
    assert_refused(run_app("import", str(folder), "--layout", "gemma2"), "model_type 'gemma3_text'", "the gemma3 layout")


@pytest.mark.parametrize("config, fragment", [
    ({"rope_parameters": ROPE | {"sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}},
     "rope_parameters.sliding_attention: rope type 'linear'"),
    ({"rope_parameters": ROPE | {"full_attention": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e6}}}, "rope_parameters: rope type 'yarn'"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention = true"),
    ({"my_new_scale": 2.0}, "my_new_scale = 2.0: the gemma3 layout does not model this setting"),
])
def test_what_the_gemma3_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    hf.refused_with(_gemma3(tmp_path)[2], config, fragment)
