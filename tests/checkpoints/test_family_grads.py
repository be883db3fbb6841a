"""tracer grad on each family's tiny model against torch autograd through Hugging Face's own model, at 1e-10.

The next-token loss and every weight's gradient.  A tracer weight is a selection of a stored tensor (a part of a packed
q/k/v, a transpose), so its gradient is the same selection of the stored tensor's gradient: the layout's own Take
turns HF's gradient into tracer's shape, and every weight the layout maps is compared.  Qwen2, the biased LLaMA,
Mixtral, the BERTs, Gemma and Gemma 2 have tests of their own (test_qwen.py, test_mixtral.py, test_bert.py, test_gemma.py,
test_gemma2.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import hf_parity as hf
from test_llama import _float64_internals

from tracer.checkpoints import families
from tracer.grad.run import GradOptions, grad
from tracer.spec import load_spec

TOL = 1e-10
IDS = [5, 17, 42, 3, 29, 0, 11, 8, 33, 2]  # T = 10: Mistral's window of 4 hides keys
SMALL = {"vocab_size": 64, "num_hidden_layers": 2, "max_position_embeddings": 32, "initializer_range": 0.2}


def _model(torch: Any, transformers: Any, family: str, folder: Path) -> Any:
    rope = {"rope_type": "default", "rope_theta": 1000.0}
    made = {
        "gpt2": (transformers.GPT2LMHeadModel, transformers.GPT2Config(n_embd=32, n_head=4, n_layer=2, vocab_size=64, n_positions=32,
                                                                      initializer_range=0.2)),
        "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig(**SMALL, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                                                        intermediate_size=48, rope_parameters=rope)),
        "mistral": (transformers.MistralForCausalLM, transformers.MistralConfig(**SMALL, hidden_size=32, num_attention_heads=4,
                                                                              num_key_value_heads=2, intermediate_size=48, sliding_window=4,
                                                                              rope_parameters=rope)),
        "gpt_neox": (transformers.GPTNeoXForCausalLM, transformers.GPTNeoXConfig(**SMALL, hidden_size=48, num_attention_heads=4, intermediate_size=80,
                                                                               rope_parameters={**rope, "partial_rotary_factor": 0.5})),
        "phi": (transformers.PhiForCausalLM, transformers.PhiConfig(**SMALL, hidden_size=48, num_attention_heads=4, intermediate_size=80,
                                                                  rope_parameters={**rope, "partial_rotary_factor": 0.5})),
    }
    width = {**SMALL, "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 48, "rope_parameters": rope,
             "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": None}  # StableLM, OLMo, StarCoder2, Granite
    made |= {
        "stablelm": (transformers.StableLmForCausalLM, transformers.StableLmConfig(**width | {"rope_parameters": {**rope, "partial_rotary_factor": 0.5}})),
        "olmo": (transformers.OlmoForCausalLM, transformers.OlmoConfig(**width)),
        "olmo2": (transformers.Olmo2ForCausalLM, transformers.Olmo2Config(**width)),
        "starcoder2": (transformers.Starcoder2ForCausalLM, transformers.Starcoder2Config(**width, sliding_window=4)),
        "granite": (transformers.GraniteForCausalLM, transformers.GraniteConfig(**width, embedding_multiplier=12.0, attention_multiplier=0.0625,
                                                                              residual_multiplier=0.22, logits_scaling=8.0)),
    }
    if family in NEXT:  # the families a user tries next: their parity tests' tiny models
        return NEXT[family][0](folder.parent)[1]
    model_class, config = made[family]
    return hf.saved(torch, model_class, config, folder)


def _next() -> dict[str, tuple[Any, Any]]:
    """Phi-3, Helium, SmolLM3, Cohere, Gemma 3: (the parity test's model maker, its lift of HF's float32 internals)."""
    import test_cohere
    import test_gemma3
    import test_helium
    import test_phi3
    import test_smollm3

    def rms(module: Any, prefix: str) -> Any:
        return lambda model: lambda monkeypatch, torch: hf.lift_float32(monkeypatch, torch, module(), prefix, rms=True)

    def gemma3_lift(model: Any) -> Any:
        from transformers.models.gemma3 import modeling_gemma3

        return lambda monkeypatch, torch: test_gemma3._lift(model)(monkeypatch, torch, modeling_gemma3)

    def cohere_lift(model: Any) -> Any:
        from transformers.models.cohere import modeling_cohere

        return lambda monkeypatch, torch: test_cohere._lift(monkeypatch, torch, modeling_cohere)

    def module(name: str) -> Any:
        return lambda: __import__(f"transformers.models.{name}.modeling_{name}", fromlist=["_"])

    return {"phi3": (test_phi3._phi3, rms(module("phi3"), "Phi3")), "helium": (test_helium._helium, rms(module("helium"), "Helium")),
            "smollm3": (test_smollm3._smollm3, rms(module("smollm3"), "SmolLM3")), "cohere": (test_cohere._cohere, cohere_lift),
            "gemma3": (test_gemma3._gemma3, gemma3_lift)}


NEXT = _next()


def _lift(monkeypatch: Any, torch: Any, family: str, model: Any) -> None:
    """HF's float32 internals (rotary angles, RMSNorm, softmax) as the same formulas in float64; GPT-2 has none."""
    if family in NEXT:
        NEXT[family][1](model)(monkeypatch, torch)
    elif family in ("llama", "mistral"):
        from transformers.models.llama import modeling_llama
        from transformers.models.mistral import modeling_mistral

        module, prefix = (modeling_llama, "Llama") if family == "llama" else (modeling_mistral, "Mistral")
        _float64_internals(monkeypatch, torch, module, prefix)
    elif family == "gpt_neox":
        from transformers.models.gpt_neox import modeling_gpt_neox

        hf.lift_float32(monkeypatch, torch, modeling_gpt_neox, "GPTNeoX")
    elif family == "phi":
        from transformers.models.phi import modeling_phi

        hf.lift_float32(monkeypatch, torch, modeling_phi, "Phi")
    elif family in ("stablelm", "olmo", "starcoder2"):
        from importlib import import_module

        from test_olmo import lift_layer_norm

        module = import_module(f"transformers.models.{family}.modeling_{family}")
        hf.lift_float32(monkeypatch, torch, module, {"stablelm": "StableLm", "olmo": "Olmo", "starcoder2": "Starcoder2"}[family])
        if family == "olmo":
            lift_layer_norm(monkeypatch, torch, module)
    elif family in ("granite", "olmo2"):
        from importlib import import_module

        _float64_internals(monkeypatch, torch, import_module(f"transformers.models.{family}.modeling_{family}"), family.capitalize())


def _stored_name(key: str, names: set[str]) -> str | None:
    """HF's parameter for a layout key: the same name, or the key under the model's prefix (GPT-2's 'transformer.')."""
    if key in names:
        return key
    found = [n for n in names if n.endswith("." + key)]
    return found[0] if len(found) == 1 else None


@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "gpt_neox", "phi", "stablelm", "olmo", "starcoder2", "granite", "olmo2", *NEXT])
def test_grad_matches_torch_autograd_through_hugging_face(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str,
                                                          request: pytest.FixtureRequest) -> None:
    torch, transformers = hf.need_torch()
    model = _model(torch, transformers, family, tmp_path / family)
    _lift(monkeypatch, torch, family, model)
    logits = model(torch.tensor([IDS])).logits[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(IDS[1:]))  # the mean next-token loss, in float64
    loss.backward()
    stored = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}

    path = hf.imported(tmp_path, tmp_path / family, "--tokens", ",".join(map(str, IDS)))
    spec = load_spec(str(path))
    gt = grad(spec, GradOptions(loss="next-token"))
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    name = "llama" if family == "mistral" else family  # the layout the import chose from config.json's model_type
    assert f"layout: {name}" in path.read_text()
    layout = families.layouts()[name]
    compared, largest = [], 0.0
    for pattern, take in layout.table.items():
        for i in range(2) if "{i}" in pattern else [None]:
            name = pattern.replace("{i}", str(i))
            key = _stored_name(take.key.replace("{i}", str(i)), set(stored))
            if name not in gt.weight_grads or key is None:  # a tied head (its gradient is the embedding's), an unused bias
                continue
            want = take._replace(heads=spec.dims.H if take.heads == -1 else take.heads).resolved(spec.dims.size).apply(stored[key])
            got = gt.weight_grads[name]
            assert got.shape == want.shape, name
            err = float(np.max(np.abs(got - want)))
            assert err <= TOL * max(1.0, float(np.max(np.abs(want)))), (name, err)
            compared.append(name)
            largest = max(largest, err)
    per_layer = {"olmo": 7, "olmo2": 11, "cohere": 8}.get(family, 10)  # OLMo's norms have no weights; OLMo 2's q and k have norms;
    # Cohere's layer: one norm without bias, the attention's four, the MLP's three
    assert len(compared) >= per_layer * 2 and "embedding" in compared, compared  # every layer's weights, not a lucky few
    assert all(f"blocks.1.attn.w_{x}" in compared for x in "qkvo")
    hf.measured(request, f"{family} (grad)", largest)


def test_t5_grad_matches_torch_autograd_through_hugging_face(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              request: pytest.FixtureRequest) -> None:
    """T5 (gated-gelu, d_kv != C/H, the scaled tied head): the next-token loss over the target and every weight's gradient,
    the shared table's (source, target and head together) and both relative-bias tables' among them."""
    from test_t5 import SOURCE, lift_t5_norm, saved_t5

    torch, transformers = hf.need_torch()
    model = saved_t5(torch, transformers, tmp_path / "t5", "gated-gelu", 6)
    path = hf.imported(tmp_path, tmp_path / "t5", "--tokens", ",".join(map(str, SOURCE)))
    target = [0] + SOURCE[:-1]
    lift_t5_norm(monkeypatch, torch)
    logits = model(input_ids=torch.tensor([SOURCE]), decoder_input_ids=torch.tensor([target])).logits[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(target[1:]))
    loss.backward()
    stored = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
    spec = load_spec(str(path))
    gt = grad(spec, GradOptions(loss="next-token"))
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    compared, largest = [], 0.0
    for pattern, take in families.layouts()["t5"].table.items():
        for i in range(2) if "{i}" in pattern else [None]:
            name = pattern.replace("{i}", str(i))
            keys = [k.replace("{i}", str(i)) for k in (take.key, take.alt) if k]
            key = next((k for k in keys if k in stored), None)
            if name not in gt.weight_grads or key is None:
                continue
            want = take.apply(stored[key])
            got = gt.weight_grads[name]
            assert got.shape == want.shape, name
            err = float(np.max(np.abs(got - want)))
            assert err <= TOL * max(1.0, float(np.max(np.abs(want)))), (name, err)
            compared.append(name)
            largest = max(largest, err)
    for name in ("embedding", "encoder.relative_bias", "decoder.relative_bias", "decoder.blocks.1.cross_attn.w_k", "encoder.blocks.1.ffn.w3"):
        assert name in compared, (name, compared)
    assert len(compared) >= 40, compared
    hf.measured(request, "t5 (grad)", largest)
