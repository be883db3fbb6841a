"""The granite layout: Hugging Face Granite imported with no flags, traced, and compared with its forward.

What is new: LLaMA's block with four multipliers, each a setting and a stage: the embeddings times
embedding_multiplier (op scale), the scores times attention_multiplier in place of 1/sqrt(d) (attention_scale),
each sublayer's output times residual_multiplier before its residual add (attention_scaled, ffn_scaled), and the
logits divided by logits_scaling (raw_logits, then logits).
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

from tracer.spec import load_spec

MULTIPLIERS = {"embedding_multiplier": 12.0, "attention_multiplier": 0.0625, "residual_multiplier": 0.22, "logits_scaling": 8.0}


def _granite(tmp_path, **config):
    return hf.tiny_family(tmp_path, "GraniteForCausalLM", "GraniteConfig", "granite",
                   {"num_key_value_heads": 2, "rms_norm_eps": 1e-6, "bos_token_id": 0, "eos_token_id": 0} | MULTIPLIERS | config)


@pytest.mark.parametrize("config", [{}, {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True, "attention_multiplier": 1.0}])
def test_granite_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, config, request):
    torch, model, folder = _granite(tmp_path, **config)
    from transformers.models.granite import modeling_granite as mod

    hf.lift_float32(monkeypatch, torch, mod, "Granite")
    hf.lift_rms_norm(monkeypatch, torch, mod.GraniteRMSNorm)
    spec, _ = hf.family_parity(tmp_path, request, "granite", torch, model, folder, first="x")  # HF's first hidden state: the scaled embeddings
    s = load_spec(str(spec))
    b = s.block
    assert (b.embedding_multiplier, b.attention_scale, b.residual_multiplier, b.logits_divisor) == (12.0, config.get("attention_multiplier", 0.0625),
                                                                                                  0.22, 8.0)
    steps = {st.name: st for st in s.steps}
    assert steps["blocks.1.output"].inputs == ("blocks.1.residual1", "blocks.1.ffn_scaled") and steps["logits"].inputs == ("raw_logits",)
    assert s.weights["blocks.0.ffn.b1"].source == ("file" if config else "zeros")


def test_a_multiplier_of_one_writes_nothing(tmp_path):
    _, _, folder = _granite(tmp_path, embedding_multiplier=1.0, residual_multiplier=1.0, logits_scaling=1.0)
    b = load_spec(str(hf.imported(tmp_path, folder))).block
    assert (b.embedding_multiplier, b.residual_multiplier, b.logits_divisor, b.attention_scale) == (None, None, None, 0.0625)


@pytest.mark.parametrize("config, fragment", [
    ({"model_type": "granitemoe"}, "model_type 'granitemoe': GraniteMoE's MLP is a mixture of experts"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"residual_multiplier": -1.0}, "residual_multiplier: expected a positive number"),
    ({"mlp_bias": True}, "mlp_bias = true, but the checkpoint holds no"),
    ({"sliding_window": 4}, "sliding_window = 4: the granite layout does not model this setting"),
])
def test_what_the_granite_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    folder = hf.with_config(_granite(tmp_path)[2], config)
    args = ("--layout", "granite") if "model_type" in config else ()
    assert_refused(run_app("import", str(folder), *args), "config.json: " + fragment)


@pytest.mark.parametrize("layers, embedding", [("1-1", None), ("0-0", 12.0)])
def test_a_layer_range_keeps_what_its_layers_compute(tmp_path, layers, embedding):
    """--layers: the residual multiplier is each layer's, kept; the logits' divisor goes with the head; the embedding
    multiplier stays only where the trace starts from the tokens (layer 0)."""
    _, _, folder = _granite(tmp_path)
    b = load_spec(str(hf.imported(tmp_path, folder, "--layers", layers, "--tokens", "1,2,3"))).block
    assert (b.head, b.logits_divisor, b.residual_multiplier, b.embedding_multiplier) == ("none", None, 0.22, embedding)
