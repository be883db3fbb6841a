"""The gemma3 layout: Hugging Face Gemma 3's text model (Gemma3ForCausalLM) imported with no flags, traced, and compared.

What is new against Gemma 2: each head's q and k normalised with (1 + w) (qk_norm under norm: rmsnorm_offset), and the
sliding layers' own rotary base, unscaled, while the full layers keep theirs and its linear scaling
(block.local_position_base).  HF's float32 steps (RMSNorm, the rotary angles per layer type, the softmax, the embedding
scale's float32 sqrt(C)) are lifted to float64, and then every layer, the final norm and the logits agree to 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_refused, run_app, write_spec
from helpers import hf_parity as hf
from helpers.tracing import run_refused, trace_text

from tracer.views import reference_check as verify

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


# -- Gemma 3's attention in tracer's own terms, no torch ------------------------------------------------

SPEC = """name: gemma 3 attention
dims: {B: 1, T: 6, C: 8, H: 2, F: 12, V: 16}
seed: 3
block: {norm: rmsnorm_offset, norm_order: sandwich, activation: geglu, positions: rotary, rotary_pairing: half, position_base: 1000000,
        local_position_base: 10000, qk_norm: true, final_norm: true, head: tied, layers: 3,
        mask: {causal: true, window: 3, sliding_layers: [0, 1]}, rope_scaling: {type: linear, factor: 8}}
input: {tokens: [[0, 1, 2, 3, 4, 5]]}
"""


def test_offset_qk_norms_start_at_the_scale_one_and_the_reference_and_grad_follow(tmp_path):
    trace = trace_text(SPEC)
    assert trace.spec.weights["blocks.0.attn.q_norm"].source == "zeros"  # (1 + 0): each head of q at unit RMS before the turn
    steps = {s.name: s for s in trace.spec.steps}
    assert [(steps[f"blocks.{i}.attention"].base, steps[f"blocks.{i}.attention"].scaling) for i in range(3)] == [
        (1e4, None), (1e4, None), (1e6, ("linear", 8.0))]
    no_turn = trace_text(SPEC.replace("positions: rotary, rotary_pairing: half, position_base: 1000000,\n        local_position_base: 10000, ",
                                      "positions: none, ").replace(", rope_scaling: {type: linear, factor: 8}", ""))
    q = no_turn.stages["blocks.0.attn.q"].array
    assert np.allclose(np.sqrt(np.mean(q ** 2, axis=-1)), 1.0, atol=1e-4)
    v = verify.verify(trace)
    assert v.plan.full and v.max_abs_diff < 1e-12
    r = run_app("grad", str(write_spec(tmp_path, SPEC)), "--verify")
    assert r.returncode == 0 and "all agree" in r.stdout, r.stderr


def test_local_position_base_needs_a_window(tmp_path):
    run_refused(tmp_path, SPEC.replace("mask: {causal: true, window: 3, sliding_layers: [0, 1]}", "mask: causal"),
                "block.local_position_base: local_position_base is the base of the sliding layers, but the mask has no window")
