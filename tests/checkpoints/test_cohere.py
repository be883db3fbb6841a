"""The cohere layout: Hugging Face Cohere (CohereForCausalLM) imported with no flags, traced, and compared with its forward.

What is new: one LayerNorm without bias before a parallel attention and MLP (norm_order: parallel_shared, beta zeros),
interleaved rotary pairs, and the logits times logit_scale (block.logit_scale: the head's raw_logits, then logits).
Without torch: block.logit_scale against the scalar reference and through tracer grad --verify, and its refusals.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_refused, run_app, write_spec
from helpers import hf_parity as hf
from helpers.tracing import run_refused, trace_text

from tracer.views import reference_check as verify

SPEC = """name: logit scale
dims: {{B: 1, T: 5, C: 8, H: 2, F: 12, V: 16}}
seed: 3
block: {{norm_order: parallel_shared, activation: swiglu, positions: rotary, final_norm: true, head: {head}, layers: 2, logit_scale: {scale}}}
input: {{tokens: [[0, 1, 2, 3, 4]]}}
"""


def _cohere(tmp_path, **config):
    return hf.tiny(tmp_path, "Cohere", **({"layer_norm_eps": 1e-5, "logit_scale": 0.25} | config))


def _lift(monkeypatch, torch, mod):
    """Cohere's float32 steps in float64: its LayerNorm, its rotary angles (each frequency repeated twice), the turn itself
    (apply_rotary_pos_emb casts q and k to float32) and the softmax."""
    hf.lift_float32(monkeypatch, torch, mod, "Cohere")

    def layer_norm(self, x):
        mean = x.mean(-1, keepdim=True)
        return self.weight * ((x - mean) * torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    def rotary(self, x, position_ids):
        d = 2 * self.inv_freq.shape[0]
        inv_freq = 1.0 / self.config.rope_parameters["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        emb = torch.repeat_interleave(position_ids[..., None].double() * inv_freq, 2, dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def turn(q, k, cos, sin, unsqueeze_dim=1):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos + mod.rotate_half(q) * sin, k * cos + mod.rotate_half(k) * sin

    monkeypatch.setattr(mod.CohereLayerNorm, "forward", layer_norm)
    monkeypatch.setattr(mod.CohereRotaryEmbedding, "forward", rotary)
    monkeypatch.setattr(mod, "apply_rotary_pos_emb", turn)


@pytest.mark.parametrize("config", [{}, {"attention_bias": True, "tie_word_embeddings": False, "num_key_value_heads": 4}])
def test_cohere_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, request):
    _, model, folder = _cohere(tmp_path, **config)
    from transformers.models.cohere import modeling_cohere as mod

    s = hf.parity(tmp_path, monkeypatch, request, model, folder, mod, "Cohere", "cohere", lift=_lift)
    assert (s.block.norm_order, s.block.norm, s.block.rotary_pairing, s.block.logit_scale) == ("parallel_shared", "layernorm", "interleaved", 0.25)
    assert s.weights["blocks.0.norm1.beta"].source == "zeros" and s.weights["final_norm.gamma"].source == "file"


def test_the_llama_layout_refuses_cohere_by_name(tmp_path):
    _, _, folder = _cohere(tmp_path)
    assert_refused(run_app("import", str(folder), "--layout", "llama"), "model_type 'cohere'")


@pytest.mark.parametrize("config, fragment", [
    ({"use_qk_norm": True}, "use_qk_norm = true"),
    ({"sliding_window": 4}, "sliding_window = 4: the cohere layout does not model this setting"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
])
def test_what_the_cohere_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    hf.refused_with(_cohere(tmp_path)[2], config, fragment)


# -- block.logit_scale itself, no torch ----------------------------------------------------------

def test_logit_scale_multiplies_the_heads_logits_and_the_reference_follows(tmp_path):
    trace = trace_text(SPEC.format(head="tied", scale=0.25))
    raw, logits = trace.stages["raw_logits"].array, trace.stages["logits"].array
    assert np.array_equal(logits, raw * 0.25)
    v = verify.verify(trace)
    assert v.plan.full and v.max_abs_diff < 1e-13
    r = run_app("grad", str(write_spec(tmp_path, SPEC.format(head="tied", scale=0.25))), "--verify")
    assert r.returncode == 0 and "all agree" in r.stdout, r.stderr


@pytest.mark.parametrize("head, scale, fragment", [
    ("none", "0.25", "logit_scale scales the output head's logits, but head is none"),
    ("tied", "0", "expected a positive number such as 0.0625"),
    ("tied", "0.25, head_softcap: 30", "logit_scale with head_softcap"),
])
def test_a_wrong_logit_scale_is_refused_by_name(tmp_path, head, scale, fragment):
    run_refused(tmp_path, SPEC.format(head=head, scale=scale), "block.logit_scale: " + fragment)
