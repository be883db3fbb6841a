"""The distilbert family: Hugging Face DistilBERT (DistilBertModel), its layout table and its config reader.

DistilBERT is BERT's Post-Norm encoder without token types, under its own tensor names, with its LayerNorms'
eps fixed at 1e-12 in its code; the readers it shares with BERT are in bert.py, its masked-LM head and classifier too.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import Layout, ModelConfig, Options, Take, group, norm, stored_dtype
from tracer.checkpoints.families.bert import Heads, dense, encoder, legacy_norm, position_table, post_norm_layer, task_heads
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """DistilBertModel: no token types; q_lin/k_lin/v_lin/out_lin, sa_layer_norm, ffn.lin1/lin2, output_layer_norm."""
    L = "transformer.layer.{i}."
    table = {"embedding": Take("embeddings.word_embeddings.weight"), "position": Take("embeddings.position_embeddings.weight")}
    table |= group("", "embed_norm", legacy_norm("embeddings.LayerNorm"))
    attn = {x: f"{L}attention.{x}_lin" for x in "qkv"} | {"o": L + "attention.out_lin"}
    table |= post_norm_layer(attn, L + "sa_layer_norm", L + "ffn.lin1", L + "ffn.lin2", L + "output_layer_norm")
    # DistilBertForMaskedLM's head (vocab_transform, vocab_layer_norm, vocab_projector) and the classifier's (pre_classifier, classifier)
    table |= group("", "mlm_dense", dense("vocab_transform")) | group("", "mlm_norm", norm("vocab_layer_norm"))
    table |= {"head": Take("vocab_projector.weight", transpose=True), "head_bias": Take("vocab_projector.bias")}
    return table | group("", "classifier_dense", dense("pre_classifier")) | group("", "classifier", dense("classifier"))


DISTILBERT_HEADS = Heads("vocab_transform, vocab_layer_norm", "vocab_projector",
                         "classifier(relu(pre_classifier(h_[CLS]))): DistilBertForSequenceClassification", "relu")
# what the distilbert reader reads: BERT's sizes and activation under DistilBERT's keys
DISTILBERT_SIZES = {"C": "dim", "V": "vocab_size", "layers": "n_layers", "H": "n_heads", "F": "hidden_dim"}
DISTILBERT_READS = encoder("distilbert", "DistilBERT", "activation", DISTILBERT_SIZES)._replace(
    needs=msg("a DistilBERT checkpoint needs its config.json (n_heads is not in the tensors); put it beside the weights"),
    only=msg("model_type {kind}: the distilbert layout reads model_type 'distilbert' only", kind=""))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face DistilBERT: as BERT without token types; its LayerNorms have eps 1e-12, fixed in its code."""
    read = DISTILBERT_READS.read(config, ckpt, layout, options)
    cfg, V, C, H, F, layers, activation = read.cfg, read.V, read.C, read.H, read.F, read.layers, read.settings["activation"]
    dims = {"C": C, "H": H, "F": F, "V": V, "T_max": position_table(cfg, ckpt, layout, "DistilBERT")}
    notes = cfg.notes | {"C": "dim", "F": "hidden_dim", "V": "vocab_size (rows of word_embeddings)",
                         "T_max": "max_position_embeddings (rows of position_embeddings"
                                  + (", sinusoidal values as stored)" if cfg.flag("sinusoidal_pos_embds") else ")"),
                         "eps": "1e-12, fixed in DistilBERT's code (nn.LayerNorm(dim, eps=1e-12))"}
    block = {"norm_order": "post", "layers": layers, "norm": "layernorm", "eps": 1e-12, "activation": activation,
             "positions": "learned", "mask": "none", "embedding_norm": True, "final_norm": False}
    notes |= {"norm_order": "TransformerBlock: sa_layer_norm(x + attention), output_layer_norm(r + ffn) (Post-Norm)",
              "mask": "bidirectional: every position reads every key (no attention_mask)",
              "positions": "position_embeddings, a learned table", "embedding_norm": "embeddings.LayerNorm of word + position",
              "final_norm": "none: each layer ends with its own LayerNorm"}
    task_heads(cfg, ckpt, layout, block, dims, notes, activation, DISTILBERT_HEADS)
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())


LAYOUT = Layout("distilbert", "Hugging Face DistilBERT encoders (DistilBertModel)", table(), read_config,
                aliases=(("", "distilbert."),), model_types=("distilbert",),
                harmless=(r"(distilbert\.)?embeddings\.position_ids",))
