"""The gpt2 family: Hugging Face GPT-2 (GPT2Model, GPT2LMHeadModel), its layout table and its config reader."""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import Layout, ModelConfig, Take, group, layer_count, need_heads, norm, packed_attention, shape_of, stored_dtype
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def table() -> dict[str, Take]:
    L = "h.{i}."
    table = {"embedding": Take("wte.weight"), "position": Take("wpe.weight"), "head": Take("lm_head.weight", transpose=True)}
    table |= group("blocks.{i}.", "norm1", norm(L + "ln_1"))
    # Conv1D stores [in, out] already: c_attn is [C,3C] with q, k, v side by side along axis 1.
    table |= group("blocks.{i}.", "attn", packed_attention(L + "attn.c_attn", L + "attn.c_proj", 1, False))
    table |= group("blocks.{i}.", "norm2", norm(L + "ln_2"))
    table |= group("blocks.{i}.", "ffn", {"w1": Take(L + "mlp.c_fc.weight"), "b1": Take(L + "mlp.c_fc.bias"),
                                          "w2": Take(L + "mlp.c_proj.weight"), "b2": Take(L + "mlp.c_proj.bias")})
    table |= group("", "final_norm", norm("ln_f"))
    return table


HF_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, heads: int | None) -> ModelConfig:
    cfg = config or {}
    wte = shape_of(ckpt, layout, "embedding")
    if wte is None:
        raise CheckpointError(at(ckpt.path, msg('holds no GPT-2 token embedding (wte.weight or transformer.wte.weight); is it a GPT-2 checkpoint?')))
    V, C = wte
    wpe = shape_of(ckpt, layout, "position")
    w1 = shape_of(ckpt, layout, "blocks.0.ffn.w1")
    found = layout.locate("blocks.0.norm1.gamma", ckpt.key_set())
    pattern = found[0].key.replace(".0.", ".{i}.", 1) if found else "h.{i}.ln_1.weight"
    layers = layer_count(ckpt.keys(), pattern)
    if layers == 0:
        raise CheckpointError(at(ckpt.path, msg('holds no GPT-2 layer (h.0.ln_1.weight)')))
    for key, ok in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False)):
        if cfg.get(key, ok) != ok:
            raise CheckpointError(msg("config.json: {key} = {cfg}: tracer's attention scales scores by 1/sqrt(d) only", key=key, cfg=cfg[key]))
    act = cfg.get("activation_function", "gelu_new")
    if act not in HF_ACTIVATIONS:
        raise CheckpointError(msg('config.json: activation_function {act}: expected one of {join}', act=repr(act), join=', '.join(HF_ACTIVATIONS)))
    H = int(cfg["n_head"]) if "n_head" in cfg else need_heads(heads, C, f"{ckpt.path} without config.json")
    tied = bool(cfg.get("tie_word_embeddings", True)) or shape_of(ckpt, layout, "head") is None
    dims = {"C": C, "H": H, "F": w1[1] if w1 else int(cfg.get("n_inner") or 4 * C), "V": V}
    notes = {"C": "n_embd", "H": "n_head" if "n_head" in cfg else "--heads", "F": "n_inner (4 n_embd when null)", "V": "vocab_size (rows of wte)"}
    if wpe is not None:
        dims["T_max"] = wpe[0]
        notes["T_max"] = "n_positions (rows of wpe)"
    block = {"norm_order": "pre", "layers": layers, "norm": "layernorm", "eps": float(cfg.get("layer_norm_epsilon", 1e-5)),
             "activation": HF_ACTIVATIONS[act], "positions": "learned", "mask": "causal", "final_norm": True,
             "head": "tied" if tied else "separate"}
    notes |= {"eps": "layer_norm_epsilon", "activation": f"activation_function: {act}", "positions": "wpe, a learned table",
              "final_norm": "ln_f", "head": "lm_head = wte (tie_word_embeddings)" if tied else "lm_head.weight, untied"}
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json" if config else "tensor shapes")


LAYOUT = Layout("gpt2", "Hugging Face GPT-2 (GPT2Model, GPT2LMHeadModel)", table(), read_config,
                aliases=(("", "transformer."),), model_types=("gpt2",))
