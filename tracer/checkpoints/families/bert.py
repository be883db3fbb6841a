"""The bert family: Hugging Face BERT and RoBERTa (BertModel, RobertaModel); DistilBERT is distilbert.py, sharing its readers.

All three are the chapter's Post-Norm encoder in a real checkpoint: each layer is
LN1(X + MHA(X)), then LN2(R + FFN(R)), with bidirectional attention (no mask) and exact (erf) GELU.
Their embeddings are E[token] + P[t] (+ E_type[token type] for BERT and RoBERTa), then a LayerNorm:
tracer's ``embedding_norm`` and ``token_types`` block settings.  RoBERTa numbers its positions from
``padding_idx + 1`` (``position_offset``).  The encoder output is traced, and
the heads Hugging Face's task classes add are block settings when the checkpoint holds them: the pooler
(``pooled``), the masked-LM head (``mlm.transform``, ``mlm.logits``), the next-sentence head (``nsp.logits``) and a
sequence classifier (``classifier.logits``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from tracer.checkpoints.families import base
from tracer.checkpoints.families.base import HF_SIZES, Config, Family, Field, Layout, ModelConfig, Options, Refusal, Take, group, shape_of, stored_dtype
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import Message, at, msg
from tracer.model.activations import HF_ACTIVATIONS

# Hugging Face's ACT2FN names -> tracer's activations: "gelu" is the exact erf GELU


def post_norm_layer(projections: dict[str, str], norm1: str, up: str, down: str, norm2: str) -> dict[str, Take]:
    """One Post-Norm encoder layer, every projection an nn.Linear [out,in] with a bias: ``projections`` (q, k, v, o -> its key),
    the LayerNorm after attention, the FFN's up and down projections, the LayerNorm after the FFN."""
    attn: dict[str, Take] = {}
    for x, key in projections.items():
        attn |= {f"w_{x}": Take(f"{key}.weight", transpose=True), f"b_{x}": Take(f"{key}.bias")}
    ffn = {"w1": Take(f"{up}.weight", transpose=True), "b1": Take(f"{up}.bias"), "w2": Take(f"{down}.weight", transpose=True), "b2": Take(f"{down}.bias")}
    return (group("blocks.{i}.", "attn", attn) | group("blocks.{i}.", "norm1", legacy_norm(norm1)) | group("blocks.{i}.", "ffn", ffn)
            | group("blocks.{i}.", "norm2", legacy_norm(norm2)))


def legacy_norm(key: str) -> dict[str, Take]:
    """A LayerNorm's weight and bias, or, in the files of BERT's first checkpoints (bert-base-uncased's), its gamma and beta,
    which Hugging Face renames on loading."""
    return {"gamma": Take(f"{key}.weight", alt=f"{key}.gamma"), "beta": Take(f"{key}.bias", alt=f"{key}.beta")}


def dense(key: str, alt: str = "") -> dict[str, Take]:
    """An nn.Linear of a task head as tracer's linear group: w [in,out] (stored [out,in]: transposed), b [out]."""
    return {"w": Take(key + ".weight", transpose=True, alt=alt and alt + ".weight"), "b": Take(key + ".bias", alt=alt and alt + ".bias")}


def table() -> dict[str, Take]:
    """BertModel / RobertaModel, with the heads Hugging Face's task classes add: the pooler, BERT's MLM and next-sentence heads
    (cls.predictions, cls.seq_relationship), RoBERTa's (lm_head), and the classifiers (BERT's classifier, RoBERTa's
    classifier.dense and classifier.out_proj)."""
    L = "encoder.layer.{i}."
    table = {"embedding": Take("embeddings.word_embeddings.weight"), "position": Take("embeddings.position_embeddings.weight"),
             "token_type": Take("embeddings.token_type_embeddings.weight")}
    table |= group("", "embed_norm", legacy_norm("embeddings.LayerNorm"))
    attn = {"q": L + "attention.self.query", "k": L + "attention.self.key", "v": L + "attention.self.value", "o": L + "attention.output.dense"}
    table |= post_norm_layer(attn, L + "attention.output.LayerNorm", L + "intermediate.dense", L + "output.dense", L + "output.LayerNorm")
    table |= group("", "pooler", dense("pooler.dense"))
    # RoBERTa's masked-LM head is BERT's under lm_head (ROBERTA_HEAD: the layout's aliases)
    table |= group("", "mlm_dense", dense("cls.predictions.transform.dense"))
    table |= group("", "mlm_norm", legacy_norm("cls.predictions.transform.LayerNorm"))
    table |= {"head": Take("cls.predictions.decoder.weight", transpose=True), "head_bias": Take("cls.predictions.bias")}
    table |= group("", "nsp", dense("cls.seq_relationship"))
    table |= group("", "classifier", dense("classifier", "classifier.out_proj")) | group("", "classifier_dense", dense("classifier.dense"))
    return table


# model_types whose tensors may fit the bert layout but whose maths differ: refused by name
BERT_DIFFERENT: dict[str, Message] = {
    "albert": msg("ALBERT factorises its embeddings and shares one layer's weights across the stack"),
    "electra": msg("ELECTRA projects its embeddings to another width before the encoder"),
    "deberta": msg("DeBERTa uses disentangled relative-position attention"),
    "xlm-roberta-xl": msg("XLM-RoBERTa-XL is a Pre-Norm encoder"),
}
# config.json keys whose values change BERT's maths in ways tracer's Post-Norm encoder does not model: refused when set
BERT_UNMODELLED: dict[str, tuple[Any, Message]] = {
    "position_embedding_type": ("absolute", msg("relative position scores inside attention")),
    "is_decoder": (False, msg("a causal (decoder) mask")),
    "add_cross_attention": (False, msg("cross-attention to an encoder")),
    "embedding_size": (None, msg("embeddings projected from another width")),
}


def encoder(name: str, what: str, act: str, sizes: Mapping[str, str] = HF_SIZES) -> Family:
    """What the bert and distilbert readers read alike: the sizes under the keys of ``sizes`` (H required), the activation
    under ``act``, their messages naming the family ``what`` (BERT, RoBERTa, DistilBERT)."""
    return Family(name, embedding=msg("holds no {what} token embedding (embeddings.word_embeddings.weight); is it a {what} checkpoint?", what=what),
                  layer=msg("holds no {what} layer ({key})", what=what, key=""), sizes=sizes, heads="required",
                  divides=msg("{key} = {H} does not divide {width} = {C} (each head has width d = C / H)", key="", H="H", width="", C="C"),
                  fields=(Field(act, "text", "activation", "gelu", "BERT's exact GELU", choices=HF_ACTIVATIONS),))


def position_table(cfg: Config, ckpt: Checkpoint, layout: Layout, what: str) -> int:
    """T_max: the rows of the position table, which max_position_embeddings must give."""
    T_max = shape_of(ckpt, layout, "position")
    if T_max is None:
        raise CheckpointError(at(ckpt.path, msg("holds no {what} position table (embeddings.position_embeddings.weight)", what=what)))
    cfg.same("max_position_embeddings", T_max[0], "T_max", layout.locate("position", ckpt.keys())[0].key, T_max)  # type: ignore[index]
    return T_max[0]


def _set_but(usual: Any) -> Callable[[Any], bool]:
    return lambda value: value is not None and value != usual


def bert(what: str) -> Family:
    """What the bert reader reads, its messages naming BERT or RoBERTa; XLM-RoBERTa, CamemBERT, ...: their positions and parity
    are not tested, so any model_type but bert and roberta is refused."""
    family = encoder("bert", what, "hidden_act")
    unmodelled = tuple(Refusal(key, _set_but(usual), msg("{key} = {value}: {why}, which tracer's BERT encoder does not model", key=key, value="", why=why))
                       for key, (usual, why) in BERT_UNMODELLED.items())
    pruned = msg("pruned_heads = {value}: layers with pruned attention heads, which tracer's BERT encoder does not model", value="")
    return family._replace(
        needs=msg("a BERT checkpoint needs its config.json (heads, layer_norm_eps, RoBERTa's padding_idx are not in the tensors); put it beside the weights"),
        differ=BERT_DIFFERENT, only=msg("model_type {kind}: the bert layout reads model_type 'bert' and 'roberta' only", kind=""),
        refusals=(*unmodelled, Refusal("pruned_heads", bool, pruned)),
        fields=(*family.fields, Field("layer_norm_eps", "number", "eps", 1e-12, "BERT's layer_norm_eps")))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face BERT / RoBERTa: Post-Norm, no mask, exact GELU, token + position + token type, then LayerNorm."""
    what = "RoBERTa" if isinstance(config, dict) and config.get("model_type") == "roberta" else "BERT"
    read = bert(what).read(config, ckpt, layout, options)
    cfg, model_type, V, C, H, F, layers = read.cfg, read.kind, read.V, read.C, read.H, read.F, read.layers
    activation, eps = read.settings["activation"], read.settings["eps"]
    dims = {"C": C, "H": H, "F": F, "V": V, "T_max": position_table(cfg, ckpt, layout, what)}
    types = shape_of(ckpt, layout, "token_type")
    notes = cfg.notes | {"C": "hidden_size", "F": "intermediate_size", "V": "vocab_size (rows of word_embeddings)",
                         "T_max": "max_position_embeddings (rows of position_embeddings)"}
    block: dict[str, Any] = {"norm_order": "post", "layers": layers, "norm": "layernorm", "eps": eps, "activation": activation,
                             "positions": "learned", "mask": "none", "embedding_norm": True}
    notes |= {"norm_order": "BertLayer: LayerNorm(x + sublayer(x)) after each sublayer (Post-Norm)",
              "mask": "bidirectional: every position reads every key (no attention_mask)",
              "positions": "position_embeddings, a learned table",
              "embedding_norm": "embeddings.LayerNorm of word + position + token type"}
    if types is not None:
        type_key = layout.locate("token_type", ckpt.keys())[0].key  # type: ignore[index]
        cfg.same("type_vocab_size", types[0], "V_type", type_key, types)
        dims["V_type"] = types[0]
        block["token_types"] = True
        notes["V_type"] = "type_vocab_size (rows of token_type_embeddings)"
        notes["token_types"] = "token_type_embeddings[token_type_ids]; input.token_types, zeros when not given"
    if model_type == "roberta":
        pad = cfg.integer("pad_token_id", lo=0)
        if pad is None:
            raise cfg.fail("pad_token_id", msg("a whole number"), None)
        block["position_offset"] = pad + 1
        notes["position_offset"] = "pad_token_id + 1: RoBERTa numbers positions from padding_idx + 1 (no padding token in the input)"
    block |= {"final_norm": False}
    notes |= {"final_norm": "none: each layer ends with its own LayerNorm"}
    task_heads(cfg, ckpt, layout, block, dims, notes, "gelu" if model_type == "roberta" else activation, BERT_HEADS[model_type or "bert"])
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record(),
                       padding_token=block["position_offset"] - 1 if model_type == "roberta" else None)


class Heads(NamedTuple):
    """How a family's checkpoint writes its task heads, for the notes: the MLM head, its decoder and bias, the classifier."""

    mlm: str  # cls.predictions.transform | lm_head | vocab_transform
    decoder: str  # cls.predictions.decoder | lm_head.decoder | vocab_projector
    classifier: str  # how its classifier reads the encoder, in words
    hidden: str | None  # the activation of the classifier's own dense layer (RoBERTa's tanh, DistilBERT's ReLU), when it has one


BERT_HEADS = {"bert": Heads("cls.predictions.transform", "cls.predictions.decoder", "classifier(pooled): BertForSequenceClassification", None),
              "roberta": Heads("lm_head", "lm_head.decoder", "out_proj(tanh(dense(h_<s>))): RobertaClassificationHead", "tanh")}


def task_heads(cfg: Config, ckpt: Checkpoint, layout: Layout, block: dict[str, Any], dims: dict[str, int], notes: dict[str, str],
               mlm_activation: str, heads: Heads) -> None:
    """The heads the checkpoint holds after the encoder, as block settings: the pooler (pooled), a masked-LM head (mlm.transform,
    mlm.logits: the decoder tied to the token table unless the file holds its own), a next-sentence head or a classifier
    (nsp.logits, classifier.logits [B,L]); none: the encoder output."""
    held = {name: shape_of(ckpt, layout, name) for name in ("pooler.w", "mlm_dense.w", "head", "head_bias", "nsp.w", "classifier.w", "classifier_dense.w")}
    block["head"] = "none"
    words = []  # the stages of the heads it holds
    if held["pooler.w"] is not None:
        block["pooler"] = True
        notes["pooler"] = "pooler.dense: pooled = tanh(h_[CLS] W + b)"
        words.append("pooled")
    if held["mlm_dense.w"] is not None:
        block |= {"mlm": mlm_activation, "head": "separate" if held["head"] is not None else "tied", "head_bias": held["head_bias"] is not None}
        notes["mlm"] = f"{heads.mlm}: mlm.transform = LayerNorm({mlm_activation}(x W + b))"
        notes["head"] = (f"{heads.decoder}.weight, as stored" if held["head"] is not None else
                         f"{heads.decoder} = word_embeddings (tied: the file holds no decoder of its own)")
        notes["head_bias"] = "the decoder's bias" if held["head_bias"] is not None else "none in the file"
        words.append("mlm.logits")
    for task, name in (("next_sentence", "nsp.w"), ("sequence", "classifier.w")):
        shape = held[name]
        if shape is None:
            continue
        if "classifier" in block:
            raise cfg.refuse(msg("the checkpoint holds both a next-sentence head and a classifier, which no Hugging Face class has"))
        if task == "sequence":
            base.sequence_classifier(cfg, layout.locate(name, ckpt.key_set())[0].key)  # type: ignore[index]
        hidden = heads.hidden if held["classifier_dense.w"] is not None and task == "sequence" else None
        if (heads.hidden is None or task == "next_sentence") and not block.get("pooler"):  # BERT's heads read the pooler's output
            raise cfg.refuse(msg("the checkpoint holds {key} but no pooler (pooler.dense), whose output it reads",
                                 key=repr(layout.locate(name, ckpt.key_set())[0].key)))  # type: ignore[index]
        reads = "pooled" if hidden is None and heads.hidden is None else "first"
        block["classifier"] = {"task": task, "reads": reads} | ({"hidden": hidden} if hidden else {})
        dims["L"] = shape[1]
        notes["L"] = "classes of the classifier's scores (num_labels; its rows)"
        notes["classifier"] = ("cls.seq_relationship(pooled): next-sentence scores, nsp.logits" if task == "next_sentence" else
                               f"{heads.classifier}: classifier.logits [B,L]")
        words.append("nsp.logits" if task == "next_sentence" else "classifier.logits")
    if not words:
        notes["head"] = "none: the encoder output (the checkpoint holds no pooler and no head)"
    elif block["head"] == "none":
        notes["head"] = "none: no MLM head in the checkpoint"


# RoBERTa's lm_head: BERT's cls.predictions under other names
ROBERTA_HEAD = (("cls.predictions.transform.dense.", "lm_head.dense."), ("cls.predictions.transform.LayerNorm.", "lm_head.layer_norm."),
                ("cls.predictions.decoder.", "lm_head.decoder."), ("cls.predictions.bias", "lm_head.bias"))

LAYOUT = Layout("bert", "Hugging Face BERT and RoBERTa encoders (BertModel, RobertaModel)", table(), read_config,
                aliases=(("", "bert."), ("", "roberta."), *ROBERTA_HEAD), model_types=("bert", "roberta"),
                # Hugging Face rebuilds these index buffers (arange, zeros); older checkpoints store them
                harmless=(r"((bert|roberta)\.)?embeddings\.(position_ids|token_type_ids)",),
                differ=tuple(BERT_DIFFERENT))
