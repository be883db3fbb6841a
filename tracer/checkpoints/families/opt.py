"""The opt family: Hugging Face OPT (OPTForCausalLM, OPTModel), its layout table and its config reader.

What is new beside GPT-2: learned positions read from row 2 (OPTLearnedPositionalEmbedding numbers the positions
from the attention mask's cumsum and adds an offset of 2, so an unpadded sequence reads rows 2 .. T+1: tracer's
position_offset), a block that is Pre-Norm or Post-Norm by ``do_layer_norm_before`` (OPT-350m is Post-Norm and
has no final LayerNorm), ReLU, the head tied to embed_tokens, biases on q/k/v/out_proj and fc1/fc2 (``enable_bias``;
false: none, zeros), LayerNorms with or without their weights (``layer_norm_elementwise_affine``; false: gamma
one, beta zero).  OPT scales q by 1/sqrt(d) before the product: the same scores.  ``word_embed_proj_dim`` other
than hidden_size (OPT-350m): embed_tokens is C_e wide (tracer's dims.C_e), projected to C by project_in after the
embedding and back by project_out before the head (stages project_in, project_out; linear steps whose bias is zeros).
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base
from tracer.checkpoints.families.base import Config, Family, Field, Layout, ModelConfig, Options, Take, group, refuse, shape_of, stored_dtype
from tracer.checkpoints.formats import Checkpoint, shape_text
from tracer.errors import CheckpointError
from tracer.messages import Message, at, msg
from tracer.model.activations import HF_ACTIVATIONS

OFFSET = 2  # OPTLearnedPositionalEmbedding.offset: the table has max_position_embeddings + 2 rows


def table() -> dict[str, Take]:
    """nn.Linear stores [out, in]: transposed.  The biases (enable_bias) and the LayerNorms' weights
    (layer_norm_elementwise_affine) are optional tensors: read_config checks the config and the tensors agree."""
    D = "model.decoder."
    L = D + "layers.{i}."
    table = {"embedding": Take(D + "embed_tokens.weight"), "position": Take(D + "embed_positions.weight"),
             "head": Take("lm_head.weight", transpose=True), "classifier.w": Take("score.weight", transpose=True)}

    def ln(key: str) -> dict[str, Take]:
        return {"gamma": Take(f"{key}.weight", optional=True), "beta": Take(f"{key}.bias", optional=True)}

    def linear(key: str, w: str, b: str) -> dict[str, Take]:
        return {w: Take(f"{key}.weight", transpose=True), b: Take(f"{key}.bias", optional=True)}

    table |= group("blocks.{i}.", "norm1", ln(L + "self_attn_layer_norm"))
    attn: dict[str, Take] = {}
    for x, name in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
        attn |= linear(f"{L}self_attn.{name}", f"w_{x}", f"b_{x}")
    table |= group("blocks.{i}.", "attn", attn)
    table |= group("blocks.{i}.", "norm2", ln(L + "final_layer_norm"))
    table |= group("blocks.{i}.", "ffn", linear(L + "fc1", "w1", "b1") | linear(L + "fc2", "w2", "b2"))
    table |= group("", "final_norm", ln(D + "final_layer_norm"))
    # word_embed_proj_dim != hidden_size (OPT-350m): embed_tokens is C_e wide, projected to C and back, without biases
    table |= {"project_in.w": Take(D + "project_in.weight", transpose=True), "project_out.w": Take(D + "project_out.weight", transpose=True)}
    return table


# Hugging Face's ACT2FN names -> tracer's activations: "gelu" is the exact erf GELU, gelu_new the tanh one

# what OPTConfig holds beyond the keys every config may carry: each read below, or (dropout, init) not in an eval forward
OPT_KEYS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers", "ffn_dim", "num_attention_heads", "max_position_embeddings",
                      "do_layer_norm_before", "_remove_final_layer_norm", "word_embed_proj_dim", "activation_function", "enable_bias",
                      "layer_norm_elementwise_affine", "tie_word_embeddings", "dropout", "activation_dropout", "layerdrop", "init_std"})

# the optional tensors: the config switch that says whether they exist, tracer's group and weights in every layer
SWITCHED = (("enable_bias", (("attn", ("b_q", "b_k", "b_v", "b_o")), ("ffn", ("b1", "b2")))),
            ("layer_norm_elementwise_affine", (("norm1", ("gamma", "beta")), ("norm2", ("gamma", "beta")))))


def _held(ckpt: Checkpoint, layout: Layout, name: str) -> bool:
    found = layout.locate(name, ckpt.key_set())
    return found is not None and found[1]


def switch_rules(cfg: Config, ckpt: Checkpoint, layout: Layout, layers: int, final: bool) -> list[tuple[bool, Message]]:
    """enable_bias and layer_norm_elementwise_affine against the tensors, in every layer (and the final norm): a tensor the
    config switches on but the file lacks would be traced as zeros or ones, so it is refused by name; one the file holds
    while the config switches it off is refused too (Hugging Face would not add it)."""
    rules: list[tuple[bool, Message]] = []
    for switch, groups in SWITCHED:
        on = cfg.flag(switch) is not False  # OPTConfig's default: true
        names = [f"blocks.{i}.{where}.{w}" for i in range(layers) for where, ws in groups for w in ws]
        if switch == "layer_norm_elementwise_affine" and final:
            names += ["final_norm.gamma", "final_norm.beta"]
        for name in names:
            found = layout.find(name)
            assert found is not None
            key = found[0].key.format(i=found[1]) if found[1] is not None else found[0].key
            held = _held(ckpt, layout, name)
            rules.append((on and not held, msg("{switch} = true, but the checkpoint holds no {key}", switch=switch, key=repr(key))))
            rules.append((held and not on, msg("{switch} = {value}, but the checkpoint holds {key}, which Hugging Face would not add",
                                               switch=switch, value="false", key=repr(key))))
    return rules


# what the opt reader reads: config.json's keys (any other refused by name) and the tensors they describe; C is q_proj's width,
# the token table being word_embed_proj_dim wide
OPT_READS = Family("opt", needs=msg("an OPT checkpoint needs its config.json (heads, do_layer_norm_before are not in the tensors); put it beside the weights"),
                   known=OPT_KEYS, embedding=msg("holds no OPT token embedding (model.decoder.embed_tokens.weight); is it an OPT checkpoint?"),
                   layer=msg("holds no OPT layer (model.decoder.layers.0.self_attn.q_proj.weight)"), layer_of="blocks.0.attn.w_q", width_of="blocks.0.attn.w_q",
                   fields=(Field("activation_function", "text", "activation", "relu", "OPT's default activation_function relu", "activation_function: {value}",
                                 HF_ACTIVATIONS),
                           Field("do_layer_norm_before", "flag"), Field("_remove_final_layer_norm", "flag")),
                   sizes={"C": "hidden_size", "V": "vocab_size", "layers": "num_hidden_layers", "H": "num_attention_heads", "F": "ffn_dim"}, heads="required")


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face OPT: learned positions from row 2, Pre-Norm or Post-Norm (do_layer_norm_before), ReLU, a tied head."""
    read = OPT_READS.read(config, ckpt, layout, options)
    cfg, V, C, H, F, layers, C_embed = read.cfg, read.V, read.C, read.H, read.F, read.layers, read.embedding[1]
    cfg.same("word_embed_proj_dim", C_embed, "C_e", read.embedding_key, read.embedding)
    projected = C_embed != C  # OPTDecoder: project_in and project_out exist exactly when word_embed_proj_dim != hidden_size
    for name, want in (("project_in.w", (C_embed, C)), ("project_out.w", (C, C_embed))):
        key = layout.find(name)[0].key  # type: ignore[index]
        held = _held(ckpt, layout, name)
        if projected and not held:
            raise cfg.refuse(msg("word_embed_proj_dim = {C_e}, but hidden_size = {C}, and the checkpoint holds no {key} to project between them",
                                 C_e=C_embed, C=C, key=repr(key)))
        if held and not projected:
            raise cfg.refuse(msg("the checkpoint holds {key}, but word_embed_proj_dim = hidden_size = {C}: Hugging Face would not apply it",
                                 key=repr(key), C=C))
        shape = shape_of(ckpt, layout, name)
        if held and shape != want:
            raise cfg.refuse(msg("{key} is {shape}: expected {want} (word_embed_proj_dim = {C_e}, hidden_size = {C})", key=repr(key),
                                 shape=shape_text(shape[::-1] if shape else ()), want=shape_text(want[::-1]), C_e=C_embed, C=C))
    pre, remove_final, activation = read.values["do_layer_norm_before"], read.values["_remove_final_layer_norm"], read.settings["activation"]
    final = pre is not False and not remove_final
    refuse(cfg, switch_rules(cfg, ckpt, layout, layers, final))
    has_final = any(_held(ckpt, layout, f"final_norm.{w}") for w in ("gamma", "beta"))
    if has_final and not final:
        why = "_remove_final_layer_norm = true" if remove_final else "do_layer_norm_before = false"
        raise cfg.refuse(msg("{why}, but the checkpoint holds model.decoder.final_layer_norm, which Hugging Face would not apply", why=why))
    positions = shape_of(ckpt, layout, "position")
    if positions is None:
        raise CheckpointError(at(ckpt.path, msg("holds no OPT position table (model.decoder.embed_positions.weight)")))
    position_key = layout.locate("position", ckpt.keys())[0].key  # type: ignore[index]
    if positions[0] <= OFFSET:
        raise cfg.refuse(msg("{key} has {rows} rows; OPT's positions start at row 2, so it needs at least 3", key=position_key, rows=positions[0]))
    cfg.same("max_position_embeddings", positions[0] - OFFSET, "T_max - 2", position_key, positions)
    tie = cfg.flag("tie_word_embeddings")
    has_head = shape_of(ckpt, layout, "head") is not None
    head = "tied" if tie is not False else ("separate" if has_head else "none")
    if pre is None:
        cfg.assume("norm_order", "pre", "OPTConfig's default do_layer_norm_before true", shown="pre")
    else:
        cfg.notes["norm_order"] = ("do_layer_norm_before true: LayerNorm before each sublayer (Pre-Norm)" if pre
                                   else "do_layer_norm_before false: LayerNorm after each residual sum (Post-Norm, as OPT-350m)")
    affine = cfg.flag("layer_norm_elementwise_affine") is not False
    bias = cfg.flag("enable_bias") is not False
    dims = {"C": C, "H": H, "F": F, "V": V, "T_max": positions[0]} | ({"C_e": C_embed} if projected else {})
    notes = cfg.notes | {"C": "hidden_size" if cfg.has("hidden_size") else "the width of q_proj",
                         "F": "ffn_dim (fc1)" if cfg.has("ffn_dim") else "the width of fc1",
                         "V": "vocab_size (rows of embed_tokens)" if cfg.has("vocab_size") else "rows of embed_tokens",
                         "T_max": "max_position_embeddings + 2 (rows of embed_positions)",
                         "C_e": "word_embed_proj_dim (the width of embed_tokens): project_in [C_e,C] after the embedding, project_out [C,C_e] before the head"}
    block: dict[str, Any] = {"norm_order": "pre" if pre is not False else "post", "layers": layers, "norm": "layernorm", "eps": 1e-5,
                             "activation": activation, "positions": "learned", "position_offset": OFFSET, "mask": "causal",
                             "final_norm": final, "head": head}
    notes |= {"eps": "nn.LayerNorm's default 1e-5 (OPT's config has no epsilon)"
                     + ("" if affine else "; layer_norm_elementwise_affine false: no gamma, no beta (ones, zeros)"),
              "layers": "num_hidden_layers" + ("" if bias else "; enable_bias false: no biases in q/k/v/out_proj, fc1, fc2 (zeros)"),
              "positions": "embed_positions, a learned table",
              "position_offset": "OPTLearnedPositionalEmbedding: positions cumsum(attention_mask) - 1, + 2: rows 2 .. T+1 (no padding)",
              "mask": "causal (OPTDecoder's causal mask)",
              "final_norm": ("model.decoder.final_layer_norm" if final else
                             "none: _remove_final_layer_norm true" if remove_final else "none: do_layer_norm_before false (Post-Norm) has no final LayerNorm"),
              "head": {"tied": "lm_head = embed_tokens (tie_word_embeddings" + (")" if tie is not None else ", true by default)"),
                       "separate": "lm_head.weight, untied (tie_word_embeddings false)",
                       "none": "none: tie_word_embeddings false and no lm_head.weight"}[head]}
    base.score_head(cfg, ckpt, layout, block, dims, notes)
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())


LAYOUT = Layout("opt", "Hugging Face OPT (OPTForCausalLM, OPTModel)", table(), read_config,
                aliases=(("model.decoder.", "decoder."),), model_types=("opt",))
