"""The distilbert family: Hugging Face DistilBERT (DistilBertModel), its layout table and its config reader.

DistilBERT is BERT's Post-Norm encoder without token types, under its own tensor names, with its LayerNorms'
eps fixed at 1e-12 in its code; the readers it shares with BERT are in bert.py.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import Config, Layout, ModelConfig, Options, Take, group, norm, received, shape_of, stored_dtype
from tracer.checkpoints.families.bert import activation_setting, encoder_dims, linear
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def table() -> dict[str, Take]:
    """DistilBertModel: no token types; q_lin/k_lin/v_lin/out_lin, sa_layer_norm, ffn.lin1/lin2, output_layer_norm."""
    L = "transformer.layer.{i}."
    table = {"embedding": Take("embeddings.word_embeddings.weight"), "position": Take("embeddings.position_embeddings.weight")}
    table |= group("", "embed_norm", norm("embeddings.LayerNorm"))
    attn: dict[str, Take] = {}
    for letter in "qkvo":
        lin = linear(f"{L}attention.{letter if letter != 'o' else 'out'}_lin")
        attn |= {f"w_{letter}": lin["w"], f"b_{letter}": lin["b"]}
    table |= group("blocks.{i}.", "attn", attn)
    table |= group("blocks.{i}.", "norm1", norm(L + "sa_layer_norm"))
    up, down = linear(L + "ffn.lin1"), linear(L + "ffn.lin2")
    table |= group("blocks.{i}.", "ffn", {"w1": up["w"], "b1": up["b"], "w2": down["w"], "b2": down["b"]})
    table |= group("blocks.{i}.", "norm2", norm(L + "output_layer_norm"))
    return table


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face DistilBERT: as BERT without token types; its LayerNorms have eps 1e-12, fixed in its code."""
    if not config:
        raise CheckpointError(at(ckpt.path, msg("a DistilBERT checkpoint needs its config.json (n_heads is not in the tensors); put it beside the weights")))
    cfg = Config(config, ckpt, options, "distilbert")
    if cfg.model_type(layout.model_types, {}) not in layout.model_types:
        raise cfg.refuse(msg("model_type {kind}: the distilbert layout reads model_type 'distilbert' only", kind=received(cfg.raw.get("model_type"))))
    V, C, layers, H, F = encoder_dims(cfg, ckpt, layout, {"C": "dim", "layers": "n_layers", "H": "n_heads", "F": "hidden_dim"}, "DistilBERT")
    activation = activation_setting(cfg, "activation", options)
    pos = shape_of(ckpt, layout, "position")
    if pos is None:
        raise CheckpointError(at(ckpt.path, msg("holds no {what} position table (embeddings.position_embeddings.weight)", what="DistilBERT")))
    position_key = layout.locate("position", ckpt.keys())[0].key  # type: ignore[index]
    cfg.same("max_position_embeddings", pos[0], "T_max", position_key, pos)
    dims = {"C": C, "H": H, "F": F, "V": V, "T_max": pos[0]}
    notes = cfg.notes | {"C": "dim", "F": "hidden_dim", "V": "vocab_size (rows of word_embeddings)",
                         "T_max": "max_position_embeddings (rows of position_embeddings" + (", sinusoidal values as stored)" if cfg.flag("sinusoidal_pos_embds") else ")"),
                         "eps": "1e-12, fixed in DistilBERT's code (nn.LayerNorm(dim, eps=1e-12))"}
    block = {"norm_order": "post", "layers": layers, "norm": "layernorm", "eps": 1e-12, "activation": activation,
             "positions": "learned", "mask": "none", "embedding_norm": True, "final_norm": False, "head": "none"}
    notes |= {"norm_order": "TransformerBlock: sa_layer_norm(x + attention), output_layer_norm(r + ffn) (Post-Norm)",
              "mask": "bidirectional: every position reads every key (no attention_mask)",
              "positions": "position_embeddings, a learned table", "embedding_norm": "embeddings.LayerNorm of word + position",
              "final_norm": "none: each layer ends with its own LayerNorm", "head": "none: the encoder output (no MLM head)"}
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())


LAYOUT = Layout("distilbert", "Hugging Face DistilBERT encoders (DistilBertModel)", table(), read_config,
                aliases=(("", "distilbert."),), model_types=("distilbert",),
                harmless=(r"(distilbert\.)?embeddings\.position_ids",))
