"""The gpt_neox family: Hugging Face GPT-NeoX and Pythia (GPTNeoXForCausalLM), its layout table and its config reader.

What is new beside GPT-2 and LLaMA: the parallel residual (use_parallel_residual: Y = X + MHA(LN1(X)) + FFN(LN2(X)),
tracer's norm_order parallel; false gives the sequential pre-norm block), partial rotary (rotary_pct or
rope_parameters.partial_rotary_factor: only each head's first r = int(d * pct) coordinates turned, paired as
rotate_half pairs them, tracer's rotary_dim with rotary_pairing half), and q, k, v packed per head in
query_key_value (its 3C outputs are [H, 3, d]: head h's q, then its k, then its v).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracer.checkpoints.families import base
from tracer.checkpoints.families.base import Config, Family, Field, Layout, ModelConfig, Options, Refusal, Take, group, norm, refuse, shape_of, stored_dtype
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg
from tracer.model.activations import HF_ACTIVATIONS


def table() -> dict[str, Take]:
    """nn.Linear stores [out, in]: transposed; query_key_value's outputs are [H, 3, d] (heads=-1: the spec's H)."""
    L = "gpt_neox.layers.{i}."
    table = {"embedding": Take("gpt_neox.embed_in.weight"), "head": Take("embed_out.weight", transpose=True),
             "classifier.w": Take("score.weight", transpose=True)}  # GPTNeoXForSequenceClassification
    table |= group("blocks.{i}.", "norm1", norm(L + "input_layernorm"))
    qkv = L + "attention.query_key_value"
    attn = {f"w_{x}": Take(qkv + ".weight", 3, part, 0, True, heads=-1) for part, x in enumerate("qkv")}
    attn |= {f"b_{x}": Take(qkv + ".bias", 3, part, 0, heads=-1) for part, x in enumerate("qkv")}
    attn |= {"w_o": Take(L + "attention.dense.weight", transpose=True), "b_o": Take(L + "attention.dense.bias")}
    table |= group("blocks.{i}.", "attn", attn)
    table |= group("blocks.{i}.", "norm2", norm(L + "post_attention_layernorm"))
    table |= group("blocks.{i}.", "ffn", {"w1": Take(L + "mlp.dense_h_to_4h.weight", transpose=True), "b1": Take(L + "mlp.dense_h_to_4h.bias"),
                                          "w2": Take(L + "mlp.dense_4h_to_h.weight", transpose=True), "b2": Take(L + "mlp.dense_4h_to_h.bias")})
    table |= group("", "final_norm", norm("gpt_neox.final_layer_norm"))
    return table


# Hugging Face's hidden_act -> tracer's activation (ACT2FN: gelu is the exact erf GELU, gelu_new the tanh one)

NEOX_KEYS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
                   "layer_norm_eps", "tie_word_embeddings", "use_parallel_residual", "rope_parameters", "rope_scaling",
                   "rotary_pct", "rotary_emb_base", "partial_rotary_factor", "rope_theta", "attention_bias"})


def rope(cfg: Config) -> tuple[float | None, float | None, str, str, str]:
    """(theta, the rotary fraction, the rope type, where theta and the fraction came from): transformers 5 writes
    rope_parameters; earlier configs rotary_emb_base, rotary_pct and rope_scaling."""
    params = cfg.mapping("rope_parameters")
    scaling = cfg.mapping("rope_scaling")
    theta, theta_from = cfg.number("rope_parameters.rope_theta", value=params.get("rope_theta")), "rope_parameters.rope_theta"
    if theta is None:
        theta, theta_from = (cfg.number("rotary_emb_base"), "rotary_emb_base") if cfg.has("rotary_emb_base") else (cfg.number("rope_theta"), "rope_theta")
    pct, pct_from = cfg.number("rope_parameters.partial_rotary_factor", value=params.get("partial_rotary_factor")), "rope_parameters.partial_rotary_factor"
    if pct is None:
        pct, pct_from = (cfg.number("rotary_pct"), "rotary_pct") if cfg.has("rotary_pct") else (cfg.number("partial_rotary_factor"), "partial_rotary_factor")
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    extra = sorted((set(params) | set(scaling)) - {"rope_type", "type", "rope_theta", "partial_rotary_factor"})
    if kind == "default" and extra:
        kind = "default with " + ", ".join(extra)
    return theta, pct, str(kind), theta_from, pct_from


def rotary_dim(cfg: Config, pct: float | None, pct_from: str, d: int, default: float, why: str) -> int:
    """r, the coordinates of each head turned: Hugging Face's int(head_dim * partial_rotary_factor), ``default`` (``why``) when absent."""
    r = int(d * (default if pct is None else pct))
    if pct is None:
        cfg.assume("rotary_dim", r, f"{why} {default:g}: int(d * {default:g}) = {r}")
    else:
        cfg.notes["rotary_dim"] = f"{pct_from} {pct:g}: int(d * {pct:g}) = {r} of each head's d = {d} coordinates turned"
    return r


def tied_head(cfg: Config, ckpt: Checkpoint, layout: Layout) -> bool:
    """Whether the head is the embedding: tie_word_embeddings true, or absent with no head tensor in the checkpoint."""
    tie = cfg.flag("tie_word_embeddings")
    return bool(tie) or (tie is None and shape_of(ckpt, layout, "head") is None)


def rotary_notes(tied: bool, partial: bool) -> dict[str, str]:
    """The notes of Hugging Face's rotary positions (rotate_half, over each head or its first r coordinates) and of the head."""
    return {"positions": "rotary (RoPE) on part of each head, inside each attention" if partial else "rotary (RoPE), inside each attention",
            "rotary_pairing": "Hugging Face's rotate_half over the rotary part: pairs (i, i + r/2)" if partial
            else "Hugging Face's rotate_half: pairs (i, i + d/2), no weight permutation",
            "head": "lm_head = embed_tokens (tie_word_embeddings)" if tied else "lm_head.weight, untied"}


def repeated(default: str) -> Callable[[Config, Any], None]:
    """--activation may only repeat what hidden_act gives (``default``, Hugging Face's name, when absent)."""
    def check(cfg: Config, act: Any) -> None:
        if cfg.options.activation is not None and cfg.options.activation != HF_ACTIVATIONS.get(act or default):
            raise CheckpointError(at(f"--activation {cfg.options.activation}",
                                     msg("{path} gives hidden_act = {act}: leave --activation out, or correct config.json", path=cfg.path, act=act or default)))
    return check


# what the gpt_neox reader reads: config.json's keys (any other refused by name) and the tensors they describe
NEOX_READS = Family("gpt_neox", needs=msg("a GPT-NeoX checkpoint needs its config.json (heads, rotary_pct, use_parallel_residual are not in the tensors); "
                                          "put it beside the weights"),
                    known=NEOX_KEYS, embedding=msg("holds no GPT-NeoX token embedding (gpt_neox.embed_in.weight); is it a GPT-NeoX checkpoint?"),
                    layer=msg("holds no GPT-NeoX layer (gpt_neox.layers.0.input_layernorm.weight)"),
                    fields=(Field("hidden_act", "text", "activation", "gelu", "GPT-NeoX's default hidden_act gelu", "hidden_act: {value}", HF_ACTIVATIONS,
                                  check=repeated("gelu")),
                            Field("layer_norm_eps", "number", "eps", 1e-5, "GPT-NeoX's layer_norm_eps"), Field("use_parallel_residual", "flag"),
                            Field("attention_bias", "flag")),
                    refusals=(Refusal("attention_bias", lambda v: v is False,
                                      msg("attention_bias = false: the gpt_neox layout reads query_key_value and dense with their biases")),))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face GPT-NeoX / Pythia: LayerNorm, GELU, a parallel residual, partial rotary positions, q/k/v packed per head."""
    read = NEOX_READS.read(config, ckpt, layout, options)
    cfg, V, C, H, F, layers = read.cfg, read.V, read.C, read.H, read.F, read.layers
    theta, pct, rope_type, theta_from, pct_from = rope(cfg)
    parallel = read.values["use_parallel_residual"]
    d = C // H
    refuse(cfg, [
        (rope_type != "default", msg("rope type {rope}: tracer's rotary positions are the default RoPE (no scaling)", rope=repr(rope_type))),
        (pct is not None and pct > 1, msg("{key} = {value}: at most 1 (the whole head turned)", key=pct_from, value=pct)),
    ])
    activation, eps = read.settings["activation"], read.settings["eps"]
    theta = cfg.setting("position_base", theta_from, theta, 10000.0, "GPT-NeoX's default rotary_emb_base")
    r = rotary_dim(cfg, pct, pct_from, d, 0.25, "GPT-NeoX's default rotary_pct")
    if parallel is None:
        cfg.assume("norm_order", "parallel", "GPT-NeoX's default use_parallel_residual true", shown="parallel")
    else:
        cfg.notes["norm_order"] = ("use_parallel_residual: Y = X + MHA(LN1(X)) + FFN(LN2(X))" if parallel
                                   else "use_parallel_residual false: the sequential pre-norm block")
    tied = tied_head(cfg, ckpt, layout)
    has_head = shape_of(ckpt, layout, "head") is not None
    head = ("tied" if tied else "separate") if tied or has_head else "none"  # no embed_out and not tied: a bare GPTNeoXModel
    dims = {"C": C, "H": H, "F": F, "V": V}
    notes = {"C": "hidden_size" if cfg.has("hidden_size") else "the width of embed_in",
             "F": "intermediate_size (dense_h_to_4h)" if cfg.has("intermediate_size") else "the width of dense_h_to_4h",
             "V": "vocab_size (rows of embed_in)" if cfg.has("vocab_size") else "rows of embed_in"} | cfg.notes
    block: dict[str, Any] = {"norm_order": "parallel" if parallel is not False else "pre", "layers": layers, "norm": "layernorm", "eps": eps,
                             "activation": activation, "positions": "rotary", "position_base": theta, "rotary_pairing": "half"}
    if r != d:
        block["rotary_dim"] = r
    block |= {"mask": "causal", "final_norm": True, "head": head}
    notes |= {"positions": "rotary (RoPE) on part of each head, inside each attention",
              "rotary_pairing": "Hugging Face's rotate_half over the rotary part: pairs (i, i + r/2)",
              "final_norm": "gpt_neox.final_layer_norm",
              "head": {"tied": "embed_out = embed_in (tie_word_embeddings)", "separate": "embed_out.weight, untied",
                       "none": "none: tie_word_embeddings false and no embed_out.weight"}[head]}
    base.score_head(cfg, ckpt, layout, block, dims, notes)
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())


LAYOUT = Layout("gpt_neox", "Hugging Face GPT-NeoX and Pythia (GPTNeoXForCausalLM)", table(), read_config,
                aliases=(("gpt_neox.", ""),), model_types=("gpt_neox",),
                # older checkpoints store the causal mask and the rotary frequencies: Hugging Face recomputes them
                harmless=(r"(gpt_neox\.)?layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)",), float32=base.ROTARY_SOFTMAX)
