"""The gpt_neox layout: Hugging Face GPT-NeoX / Pythia imported with no flags, traced, and compared with its forward.

What is new: the parallel residual (norm_order: parallel), partial rotary (rotary_dim) and q, k, v packed per head.
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

from tracer.spec import load_spec

TOL = 1e-10


def _neox(tmp_path, **config):
    torch, transformers = hf.need_torch()
    settings = {"vocab_size": 64, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 80,
                "max_position_embeddings": 32, "layer_norm_eps": 1e-5, "initializer_range": 0.2,
                "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.5}}
    settings.update(config)
    model = hf.saved(torch, transformers.GPTNeoXForCausalLM, transformers.GPTNeoXConfig(**settings), tmp_path / "neox")
    return torch, model, tmp_path / "neox"


def _parity(tmp_path, monkeypatch, **config) -> dict[str, float]:
    torch, model, folder = _neox(tmp_path, **config)
    from transformers.models.gpt_neox import modeling_gpt_neox as mod

    hf.lift_float32(monkeypatch, torch, mod, "GPTNeoX")
    spec = hf.imported(tmp_path, folder, "--tokens", ",".join(map(str, hf.IDS)))
    found = hf.compare(hf.traced(spec), *hf.hf_forward(torch, model, model.gpt_neox.layers, hf.IDS))
    assert max(found.values()) <= TOL, found
    return found


def test_pythia_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, request):
    hf.measured(request, "gpt_neox", _parity(tmp_path, monkeypatch))
    spec = load_spec(str(tmp_path / "spec.yaml"))
    assert (spec.block.norm_order, spec.block.rotary_dim, spec.block.rotary_pairing) == ("parallel", 6, "half")
    steps = {s.name: s for s in spec.steps}
    assert steps["blocks.0.norm2"].inputs == ("x",) and steps["blocks.1.norm2"].inputs == ("blocks.0.output",)  # both branches read X


def test_sequential_neox_and_its_default_rotary_fraction(tmp_path, monkeypatch):
    """use_parallel_residual false is the pre-norm block; the default rotary fraction 0.25 turns 2 of each head's 12 (int(3.0) = 3, odd:
    hidden 64 / 4 heads = 16, a quarter is 4)."""
    _parity(tmp_path, monkeypatch, use_parallel_residual=False, hidden_size=64, rope_parameters={"rope_theta": 10000.0})
    spec = load_spec(str(tmp_path / "spec.yaml"))
    assert (spec.block.norm_order, spec.block.rotary_dim) == ("pre", 4)


def test_query_key_value_is_unpacked_per_head():
    """query_key_value's 3C outputs are [H, 3, d]: head h's q rows, then its k rows, then its v rows (not three thirds)."""
    import numpy as np

    from tracer.checkpoints.families import gpt_neox

    H, d, C = 3, 2, 6
    rows = np.array([[100 * h + 10 * part + i] * C for h in range(H) for part in range(3) for i in range(d)], dtype=float)  # [3C, C]
    table = gpt_neox.table()
    for part, x in enumerate("qkv"):
        take = table[f"blocks.{{i}}.attn.w_{x}"]._replace(heads=H)
        got = take.apply(rows)  # [C_in, C_out]: column h * d + i is head h's coordinate i
        assert got.shape == (C, H * d)
        assert list(got[0]) == [100 * h + 10 * part + i for h in range(H) for i in range(d)]
        bias = table[f"blocks.{{i}}.attn.b_{x}"]._replace(heads=H).apply(rows[:, 0])
        assert list(bias) == list(got[0])
    assert "within each head" in str(table["blocks.{i}.attn.w_k"].describe())


@pytest.mark.parametrize("config, fragment", [
    ({"attention_bias": False}, "attention_bias = false"),
    ({"hidden_act": "silu"}, "hidden_act 'silu'"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}, "rope type 'linear'"),
    ({"use_flash_magic": 3}, "use_flash_magic = 3: the gpt_neox layout does not model this setting"),
])
def test_what_the_gpt_neox_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    _, _, folder = _neox(tmp_path)
    import json

    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(config)
    (folder / "config.json").write_text(json.dumps(cfg))
    assert_refused(run_app("import", str(folder)), "config.json: " + fragment)
