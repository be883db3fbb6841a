"""The gpt2 family: Hugging Face GPT-2 (GPT2Model, GPT2LMHeadModel), its layout table and its config reader."""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Refusal, Take, group, norm, packed_attention, shape_of, stored_dtype
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import Message, at, msg
from tracer.model.activations import HF_ACTIVATIONS


def table() -> dict[str, Take]:
    L = "h.{i}."
    table = {"embedding": Take("wte.weight"), "position": Take("wpe.weight"), "head": Take("lm_head.weight", transpose=True),
             "classifier.w": Take("score.weight", transpose=True)}  # GPT2ForSequenceClassification
    table |= group("blocks.{i}.", "norm1", norm(L + "ln_1"))
    # Conv1D stores [in, out] already: c_attn is [C,3C] with q, k, v side by side along axis 1.
    table |= group("blocks.{i}.", "attn", packed_attention(L + "attn.c_attn", L + "attn.c_proj", 1, False))
    table |= group("blocks.{i}.", "norm2", norm(L + "ln_2"))
    table |= group("blocks.{i}.", "ffn", {"w1": Take(L + "mlp.c_fc.weight"), "b1": Take(L + "mlp.c_fc.bias"),
                                          "w2": Take(L + "mlp.c_proj.weight"), "b2": Take(L + "mlp.c_proj.bias")})
    table |= group("", "final_norm", norm("ln_f"))
    return table


GPT2_ACTIVATIONS = ("gelu_tanh", "gelu", "relu")  # what --activation may give a GPT-2 without config.json

# model_types a config may carry through --layout gpt2 whose maths differ from GPT-2's although their tensors may fit
GPT2_DIFFERENT: dict[str, Message] = {"gpt_bigcode": msg("GPTBigCode shares one key/value head among all heads (multi-query attention)"),
                                      "gpt_neo": msg("GPT-Neo alternates local and global attention and does not scale its scores"),
                                      "gptj": msg("GPT-J computes attention and the MLP in parallel, with rotary positions")}


# what the gpt2 reader reads: config.json's keys and the tensors they describe, and what tracer's GPT-2 block does not model
GPT2_READS = Family("gpt2", differ=GPT2_DIFFERENT,
                    fields=(Field("activation_function", "text", "activation", "gelu_tanh", "GPT-2's gelu_new", "activation_function: {value}", HF_ACTIVATIONS),
                            Field("layer_norm_epsilon", "number", "eps", 1e-5, "GPT-2's layer_norm_epsilon"),
                            Field("scale_attn_weights", "flag"), Field("scale_attn_by_inverse_layer_idx", "flag")),
                    refusals=(Refusal("scale_attn_weights", lambda v: v is False, msg("{key} = {cfg}: tracer's attention scales scores by 1/sqrt(d) only",
                                                                                        key="scale_attn_weights", cfg=False)),
                              Refusal("scale_attn_by_inverse_layer_idx", bool, msg("{key} = {cfg}: tracer's attention scales scores by 1/sqrt(d) only",
                                                                                    key="scale_attn_by_inverse_layer_idx", cfg=True))),
                    embedding=msg('holds no GPT-2 token embedding (wte.weight or transformer.wte.weight); is it a GPT-2 checkpoint?'),
                    layer=msg('holds no GPT-2 layer (h.0.ln_1.weight)'), sizes={"C": "n_embd", "V": "vocab_size", "layers": "n_layer", "H": "n_head"},
                    divides=msg("n_head = {H} does not divide n_embd = {C} (each head has width d = C / H)", H="H", C="C"))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    if options.activation not in (None,) + GPT2_ACTIVATIONS:
        raise CheckpointError(at(f"--activation {options.activation}", msg("expected one of {join} (GPT-2's activations)", join=", ".join(GPT2_ACTIVATIONS))))
    read = GPT2_READS.read(config, ckpt, layout, options)
    cfg, V, C, H, layers = read.cfg, read.V, read.C, read.H, read.layers
    wpe = shape_of(ckpt, layout, "position")
    w1 = shape_of(ckpt, layout, "blocks.0.ffn.w1")
    if wpe is not None:
        cfg.same("n_positions", wpe[0], "T_max", layout.locate("position", ckpt.keys())[0].key, wpe)  # type: ignore[index]
    if w1 is not None and cfg.integer("n_inner") is not None:
        cfg.same("n_inner", w1[1], "F", layout.locate("blocks.0.ffn.w1", ckpt.keys())[0].key, (C, w1[1]))  # type: ignore[index]
    activation, eps = read.settings["activation"], read.settings["eps"]
    tie = cfg.flag("tie_word_embeddings")
    tied = (tie is None or tie) or shape_of(ckpt, layout, "head") is None
    if tie is None and shape_of(ckpt, layout, "head") is not None:
        cfg.assumed.append(("head", "tied"))
    dims = {"C": C, "H": H, "F": w1[1] if w1 else (cfg.integer("n_inner") or 4 * C), "V": V}
    notes = cfg.notes | {"C": "n_embd" if cfg.has("n_embd") else "the width of wte",
                         "V": "vocab_size (rows of wte)" if cfg.has("vocab_size") else "rows of wte",
                         "F": ("n_inner" if cfg.has("n_inner") else "the width of c_fc") if w1 else "n_inner (4 n_embd when null)"}
    if wpe is not None:
        dims["T_max"] = wpe[0]
        notes["T_max"] = "n_positions (rows of wpe)" if cfg.has("n_positions") else "rows of wpe"
    block = {"norm_order": "pre", "layers": layers, "norm": "layernorm", "eps": eps,
             "activation": activation, "positions": "learned", "mask": "causal", "final_norm": True,
             "head": "tied" if tied else "separate"}
    notes |= {"positions": "wpe, a learned table", "final_norm": "ln_f",
              "head": ("lm_head = wte (tie_word_embeddings)" if tie is not None or shape_of(ckpt, layout, "head") is None
                       else f"lm_head = wte (assumed: {cfg.why_assumed()}; GPT-2 ties them)") if tied else "lm_head.weight, untied"}
    base.score_head(cfg, ckpt, layout, block, dims, notes)
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json" if config else "tensor shapes",
                       **cfg.record())


LAYOUT = Layout("gpt2", "Hugging Face GPT-2 (GPT2Model, GPT2LMHeadModel)", table(), read_config,
                aliases=(("", "transformer."),), model_types=("gpt2",),
                # older GPT-2 checkpoints store the causal mask as buffers (attn.bias [1,1,n,n], attn.masked_bias):
                # GPT2Attention builds its mask itself, so nothing reads them
                harmless=(r"(transformer\.)?h\.\d+\.attn\.(masked_)?bias",),
                differ=tuple(GPT2_DIFFERENT))
