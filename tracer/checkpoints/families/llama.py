"""The llama family: Hugging Face LLaMA and Mistral (LlamaForCausalLM, MistralForCausalLM), its layout table and its config reader."""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import Layout, ModelConfig, Take, group, layer_count, need_heads, shape_of, stored_dtype
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def table() -> dict[str, Take]:
    """Hugging Face LLaMA / Mistral (LlamaForCausalLM): every projection an nn.Linear [out,in], no biases.

    RMSNorm has only a weight (gamma); the MLP is down(silu(gate(x)) * up(x)), tracer's SwiGLU with
    W_1 = gate, W_3 = up, W_2 = down.  q and k need no permutation: the spec turns them with
    rotary_pairing: half, as Hugging Face's rotate_half does.
    """
    L = "model.layers.{i}."
    table = {"embedding": Take("model.embed_tokens.weight"), "head": Take("lm_head.weight", transpose=True)}
    table |= group("blocks.{i}.", "norm1", {"gamma": Take(L + "input_layernorm.weight")})
    table |= group("blocks.{i}.", "attn", {f"w_{x}": Take(f"{L}self_attn.{x}_proj.weight", transpose=True) for x in "qkvo"})
    table |= group("blocks.{i}.", "norm2", {"gamma": Take(L + "post_attention_layernorm.weight")})
    table |= group("blocks.{i}.", "ffn", {w: Take(f"{L}mlp.{proj}_proj.weight", transpose=True)
                                          for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))})
    table |= group("", "final_norm", {"gamma": Take("model.norm.weight")})
    return table


def _rope(cfg: dict[str, Any]) -> tuple[float, str, str]:
    """rope_theta and the rope type: transformers 5 writes rope_parameters, earlier versions rope_theta and rope_scaling."""
    params = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    if "rope_theta" in params:
        theta, where = params["rope_theta"], "rope_parameters.rope_theta"
    elif "rope_theta" in cfg:
        theta, where = cfg["rope_theta"], "rope_theta"
    else:
        theta, where = 10000.0, "LLaMA's default rope_theta (config.json gives none)"
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    return float(theta), str(kind), where


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, heads: int | None) -> ModelConfig:
    """Hugging Face LLaMA / Mistral: RMSNorm, SwiGLU, rotary positions turned as rotate_half does, grouped-query attention."""
    if not config:
        raise CheckpointError(at(ckpt.path, msg('a LLaMA checkpoint needs its config.json (heads, key/value heads, rope_theta, rms_norm_eps are not in the tensors); put it beside the weights')))
    cfg = config
    embed = shape_of(ckpt, layout, "embedding")
    if embed is None:
        raise CheckpointError(at(ckpt.path, msg('holds no LLaMA token embedding (model.embed_tokens.weight); is it a LLaMA checkpoint?')))
    V, C = embed
    found = layout.locate("blocks.0.norm1.gamma", ckpt.key_set())
    pattern = found[0].key.replace(".0.", ".{i}.", 1) if found else "model.layers.{i}.input_layernorm.weight"
    layers = layer_count(ckpt.keys(), pattern)
    if layers == 0:
        raise CheckpointError(at(ckpt.path, msg('holds no LLaMA layer (model.layers.0.input_layernorm.weight)')))
    H = int(cfg.get("num_attention_heads") or need_heads(heads, C, "config.json"))
    H_kv = int(cfg.get("num_key_value_heads") or H)
    theta, rope_type, theta_from = _rope(cfg)
    refused = [
        (cfg.get("hidden_act", "silu") != "silu", msg("hidden_act {act}: tracer's SwiGLU gates with silu", act=repr(cfg.get("hidden_act")))),
        (bool(cfg.get("attention_bias")), msg("attention_bias = true: the llama layout reads q/k/v/o_proj without biases")),
        (bool(cfg.get("mlp_bias")), msg("mlp_bias = true: the llama layout reads gate/up/down_proj without biases")),
        (cfg.get("head_dim") not in (None, C // H), msg("head_dim = {head_dim}: tracer's heads have width d = C / H = {d}", head_dim=cfg.get("head_dim"), d=C // H)),
        (rope_type != "default", msg("rope type {rope}: tracer's rotary positions are the default RoPE (no scaling)", rope=repr(rope_type))),
        (H_kv < 1 or H % H_kv, msg("num_key_value_heads = {H_kv} must divide num_attention_heads = {H}", H_kv=H_kv, H=H)),
    ]
    for bad, why in refused:
        if bad:
            raise CheckpointError(at("config.json", why))
    w1 = shape_of(ckpt, layout, "blocks.0.ffn.w1")
    tied = bool(cfg.get("tie_word_embeddings", False))
    has_head = tied or shape_of(ckpt, layout, "head") is not None
    dims = {"C": C, "H": H} | ({"H_kv": H_kv} if H_kv != H else {}) | {"F": w1[1] if w1 else int(cfg["intermediate_size"]), "V": V}
    notes = {"C": "hidden_size", "H": "num_attention_heads", "H_kv": "num_key_value_heads (grouped-query attention)",
             "F": "intermediate_size (gate_proj, up_proj)", "V": "vocab_size (rows of embed_tokens)"}
    window = cfg.get("sliding_window")
    block = {"norm_order": "pre", "layers": layers, "norm": "rmsnorm", "eps": float(cfg.get("rms_norm_eps", 1e-6)),
             "activation": "swiglu", "positions": "rotary", "position_base": theta, "rotary_pairing": "half", "mask": "causal",
             "final_norm": True, "head": ("tied" if tied else "separate") if has_head else "none"}
    notes |= {"norm": "LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * weight", "eps": "rms_norm_eps",
              "activation": "mlp: down_proj(silu(gate_proj(x)) * up_proj(x))", "positions": "rotary (RoPE), inside each attention",
              "position_base": theta_from, "rotary_pairing": "Hugging Face's rotate_half: pairs (i, i + d/2), no weight permutation",
              "final_norm": "model.norm",
              "head": ("lm_head = embed_tokens (tie_word_embeddings)" if tied else "lm_head.weight, untied") if has_head
              else "no lm_head in the checkpoint (a bare LlamaModel)"}
    if window:
        notes["mask"] = f"Mistral's sliding_window = {window} keys changes nothing while T <= {window}"
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json")


LAYOUT = Layout("llama", "Hugging Face LLaMA and Mistral-style models (LlamaForCausalLM, MistralForCausalLM)", table(), read_config,
                aliases=(("model.", ""),), model_types=("llama", "mistral"))  # a bare LlamaModel has no 'model.'
