"""Every family as shipped: a float32 model, Hugging Face's forward as it is (its float32 internals kept), against
`tracer import` then `tracer run` (float64 from the stored float32 weights), within 1e-5 of the stage's scale.

The float64 parity tests (test_llama.py, test_qwen.py, test_bert.py, ...) show the maths is the same to 1e-14; this
shows what a user comparing with their own float32 model sees: float32's rounding, and nothing more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import hf_parity as hf

RTOL = 1e-5  # of the largest |value| of the stage compared
IDS = [5, 17, 42, 3, 29, 0, 11, 8, 33, 2]
SMALL = {"vocab_size": 64, "num_hidden_layers": 2, "max_position_embeddings": 32, "initializer_range": 0.2}
ROPE = {"rope_type": "default", "rope_theta": 1000.0}
ENCODERS = ("bert", "roberta", "distilbert")


def _model(torch: Any, t: Any, family: str, folder: Path) -> Any:
    decoder = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 48, "rope_parameters": ROPE}
    made = {
        "gpt2": (t.GPT2LMHeadModel, t.GPT2Config(n_embd=32, n_head=4, n_layer=2, vocab_size=64, n_positions=32, initializer_range=0.2)),
        "llama": (t.LlamaForCausalLM, t.LlamaConfig(**SMALL, **decoder)),
        "mistral": (t.MistralForCausalLM, t.MistralConfig(**SMALL, **decoder, sliding_window=4)),
        "qwen2": (t.Qwen2ForCausalLM, t.Qwen2Config(**SMALL, **decoder)),
        "mixtral": (t.MixtralForCausalLM, t.MixtralConfig(**SMALL, **decoder, num_local_experts=4, num_experts_per_tok=2)),
        "gpt_neox": (t.GPTNeoXForCausalLM, t.GPTNeoXConfig(**SMALL, hidden_size=48, num_attention_heads=4, intermediate_size=80,
                                                          rope_parameters={**ROPE, "partial_rotary_factor": 0.5})),
        "phi": (t.PhiForCausalLM, t.PhiConfig(**SMALL, hidden_size=48, num_attention_heads=4, intermediate_size=80,
                                             rope_parameters={**ROPE, "partial_rotary_factor": 0.5})),
        "qwen3": (t.Qwen3ForCausalLM, t.Qwen3Config(**SMALL, **decoder, head_dim=12)),  # d = 12, not C/H = 8
        "gemma": (t.GemmaForCausalLM, t.GemmaConfig(**SMALL, **decoder, head_dim=8, pad_token_id=None)),
        "gemma2": (t.Gemma2ForCausalLM, t.Gemma2Config(**SMALL, **decoder, head_dim=12, pad_token_id=None, sliding_window=3,  # T = 10 > 3
                                                       query_pre_attn_scalar=16, attn_logit_softcapping=2.0, final_logit_softcapping=3.0)),
        "opt": (t.OPTForCausalLM, t.OPTConfig(**{k: v for k, v in SMALL.items() if k != "initializer_range"}, hidden_size=32,
                                             num_attention_heads=4, ffn_dim=48, init_std=0.2)),
        "bert": (t.BertModel, t.BertConfig(**SMALL, hidden_size=32, num_attention_heads=4, intermediate_size=48)),
        "roberta": (t.RobertaModel, t.RobertaConfig(**SMALL, hidden_size=32, num_attention_heads=4, intermediate_size=48, pad_token_id=1)),
        "distilbert": (t.DistilBertModel, t.DistilBertConfig(vocab_size=64, dim=32, n_heads=4, n_layers=2, hidden_dim=48,
                                                            max_position_embeddings=32, initializer_range=0.2)),
    }
    tokens = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": None}  # StableLM, OLMo, OLMo 2, StarCoder2, Granite
    made |= {
        "stablelm": (t.StableLmForCausalLM, t.StableLmConfig(**SMALL, **decoder | {"rope_parameters": {**ROPE, "partial_rotary_factor": 0.5}},
                                                              **tokens)),
        "olmo": (t.OlmoForCausalLM, t.OlmoConfig(**SMALL, **decoder, **tokens)),
        "olmo2": (t.Olmo2ForCausalLM, t.Olmo2Config(**SMALL, **decoder, **tokens)),
        "starcoder2": (t.Starcoder2ForCausalLM, t.Starcoder2Config(**SMALL, **decoder, **tokens, sliding_window=4)),
        "granite": (t.GraniteForCausalLM, t.GraniteConfig(**SMALL, **decoder, **tokens, embedding_multiplier=12.0, attention_multiplier=0.0625,
                                                          residual_multiplier=0.22, logits_scaling=8.0)),
    }
    model_class, config = made[family]
    torch.manual_seed(0)
    model = model_class(config, add_pooling_layer=False) if family in ("bert", "roberta") else model_class(config)
    with torch.no_grad():  # biases and norms away from their 0 / 1 start, so that a misplaced one shows
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.eval().save_pretrained(str(folder))  # float32, as models are shipped
    return model_class.from_pretrained(str(folder), attn_implementation="eager").eval()


@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "qwen2", "qwen3", "mixtral", "gemma", "gemma2", "opt", "gpt_neox", "phi", *ENCODERS,
                                    "stablelm", "olmo", "olmo2", "starcoder2", "granite"])
def test_a_float32_model_as_shipped_is_within_float32_rounding(tmp_path: Path, family: str, request: pytest.FixtureRequest) -> None:
    torch, transformers = hf.need_torch()
    model = _model(torch, transformers, family, tmp_path / family)
    ids = IDS if family != "roberta" else [i for i in IDS if i != 1]  # RoBERTa: no padding token in the input
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    assert out.hidden_states[-1].dtype == torch.float32
    spec = hf.imported(tmp_path, tmp_path / family, "--tokens", ",".join(map(str, ids)))
    assert "the checkpoint stores float32" in spec.read_text()
    st = hf.traced(spec)
    pairs = {"blocks.0.output": out.hidden_states[1].numpy()}
    if family in ENCODERS:
        pairs["blocks.1.output"] = out.last_hidden_state.numpy()
    else:
        pairs |= {"final_norm": out.hidden_states[-1].numpy(), "logits": out.logits.numpy()}
    largest = 0.0
    for name, want in pairs.items():
        got = st[name]
        assert got.shape == want.shape, name
        scale = max(1.0, float(np.max(np.abs(want))))
        err = float(np.max(np.abs(got - want)))
        assert err <= RTOL * scale, (family, name, err, scale)
        assert err > 0.0 or name == "blocks.0.output"  # float32 against float64: a real, small difference
        largest = max(largest, err / scale)
    hf.measured(request, f"{family} (float32 as shipped, relative)", largest)


@pytest.mark.parametrize("ffn", ["relu", "gated-gelu"])
def test_a_float32_t5_as_shipped_is_within_float32_rounding(tmp_path: Path, ffn: str, request: pytest.FixtureRequest) -> None:
    """T5 in float32 as shipped (T5LayerNorm's float32 variance kept): both final norms and the logits within 1e-5."""
    from test_t5 import SOURCE, hf_t5, saved_t5

    torch, transformers = hf.need_torch()
    model = saved_t5(torch, transformers, tmp_path / "t5", ffn, 6, dtype=torch.float32)
    spec = hf.imported(tmp_path, tmp_path / "t5", "--tokens", ",".join(map(str, SOURCE)))
    assert "the checkpoint stores float32" in spec.read_text()
    want = hf_t5(torch, model, SOURCE, [0] + SOURCE[:-1])
    assert want["logits"].dtype == np.float32
    st = hf.traced(spec)
    largest = 0.0
    for name, w in want.items():
        scale = max(1.0, float(np.max(np.abs(w))))
        err = float(np.max(np.abs(st[name] - w)))
        assert err <= RTOL * scale, (name, err, scale)
        largest = max(largest, err / scale)
    assert largest > 0.0
    hf.measured(request, "t5 (float32 as shipped, relative)", largest)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen3", "bert"])
def test_import_dtype_float32_runs_in_float32_within_its_rounding(tmp_path: Path, family: str, request: pytest.FixtureRequest) -> None:
    """`tracer import --dtype float32`: the float32 checkpoint read as stored and the run in float32, as Hugging Face
    runs it; each stage within float32's rounding of HF's (both sides round, so not bit for bit)."""
    torch, transformers = hf.need_torch()
    model = _model(torch, transformers, family, tmp_path / family)
    with torch.no_grad():
        out = model(torch.tensor([IDS]), output_hidden_states=True)
    spec = hf.imported(tmp_path, tmp_path / family, "--tokens", ",".join(map(str, IDS)), "--dtype", "float32")
    text = spec.read_text()
    assert any(line.startswith("dtype: float32 ") and line.endswith("# as the checkpoint stores it") for line in text.splitlines())
    st = hf.traced(spec)
    pairs = {"blocks.0.output": out.hidden_states[1].numpy(), "blocks.1.output": (out.last_hidden_state if family in ENCODERS
                                                                                   else out.hidden_states[-1]).numpy()}
    if family not in ENCODERS:
        pairs = {"blocks.0.output": pairs["blocks.0.output"], "final_norm": pairs["blocks.1.output"], "logits": out.logits.numpy()}
    largest = 0.0
    for name, want in pairs.items():
        scale = max(1.0, float(np.max(np.abs(want))))
        err = float(np.max(np.abs(st[name] - want)))
        assert err <= RTOL * scale, (family, name, err, scale)
        largest = max(largest, err / scale)
    hf.measured(request, f"{family} (--dtype float32, relative)", largest)


def test_import_dtype_is_checked(tmp_path: Path) -> None:
    from conftest import run_app

    r = run_app("import", str(tmp_path), "--dtype", "float16")
    assert r.returncode == 2 and r.stderr.startswith("tracer: error: --dtype 'float16'") and "Traceback" not in r.stderr
