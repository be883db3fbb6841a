"""The bert family: Hugging Face BERT and RoBERTa (BertModel, RobertaModel); DistilBERT is distilbert.py, sharing its readers.

All three are the chapter's Post-Norm encoder in a real checkpoint: each layer is
LN1(X + MHA(X)), then LN2(R + FFN(R)), with bidirectional attention (no mask) and exact (erf) GELU.
Their embeddings are E[token] + P[t] (+ E_type[token type] for BERT and RoBERTa), then a LayerNorm:
tracer's ``embedding_norm`` and ``token_types`` block settings.  RoBERTa numbers its positions from
``padding_idx + 1`` (``position_offset``).  The encoder output is traced (no pooler, no MLM head):
a checkpoint that holds them is refused naming those tensors, unless --allow-unread.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import (
    Config,
    Layout,
    ModelConfig,
    Options,
    Take,
    group,
    layer_count,
    norm,
    received,
    refuse,
    shape_of,
    stored_dtype,
)
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import Message, at, msg
from tracer.model.activations import HF_ACTIVATIONS


def linear(key: str) -> dict[str, Take]:
    return {"w": Take(f"{key}.weight", transpose=True), "b": Take(f"{key}.bias")}


def table() -> dict[str, Take]:
    """BertModel / RobertaModel: every projection an nn.Linear [out,in] with a bias."""
    L = "encoder.layer.{i}."
    table = {"embedding": Take("embeddings.word_embeddings.weight"), "position": Take("embeddings.position_embeddings.weight"),
             "token_type": Take("embeddings.token_type_embeddings.weight")}
    table |= group("", "embed_norm", norm("embeddings.LayerNorm"))
    attn: dict[str, Take] = {}
    for letter, name in (("q", "query"), ("k", "key"), ("v", "value")):
        lin = linear(f"{L}attention.self.{name}")
        attn |= {f"w_{letter}": lin["w"], f"b_{letter}": lin["b"]}
    lin = linear(L + "attention.output.dense")
    attn |= {"w_o": lin["w"], "b_o": lin["b"]}
    table |= group("blocks.{i}.", "attn", attn)
    table |= group("blocks.{i}.", "norm1", norm(L + "attention.output.LayerNorm"))
    up, down = linear(L + "intermediate.dense"), linear(L + "output.dense")
    table |= group("blocks.{i}.", "ffn", {"w1": up["w"], "b1": up["b"], "w2": down["w"], "b2": down["b"]})
    table |= group("blocks.{i}.", "norm2", norm(L + "output.LayerNorm"))
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


def _refuse_unmodelled(cfg: Config) -> None:
    rules = []
    for key, (usual, why) in BERT_UNMODELLED.items():
        value = cfg.raw.get(key)
        rules.append((value is not None and value != usual,
                      msg("{key} = {value}: {why}, which tracer's BERT encoder does not model", key=key, value=received(value), why=why)))
    pruned = cfg.raw.get("pruned_heads")
    rules.append((bool(pruned), msg("pruned_heads = {value}: layers with pruned attention heads, which tracer's BERT encoder does not model", value=received(pruned))))
    refuse(cfg, rules)


def activation_setting(cfg: Config, key: str, options: Options) -> str:
    act = cfg.text(key)
    if act is not None and act not in HF_ACTIVATIONS:
        raise cfg.refuse(msg("{key} {act}: expected one of {join}", key=key, act=repr(act), join=", ".join(HF_ACTIVATIONS)))
    return str(cfg.setting("activation", key, HF_ACTIVATIONS.get(act or ""), "gelu", "BERT's exact GELU", shown=act))


def encoder_dims(cfg: Config, ckpt: Checkpoint, layout: Layout, keys: dict[str, str], what: str) -> tuple[int, int, int, int, int]:
    """V, C, layers, H and F, each checked against the tensors."""
    embed = shape_of(ckpt, layout, "embedding")
    if embed is None:
        raise CheckpointError(at(ckpt.path, msg("holds no {what} token embedding (embeddings.word_embeddings.weight); is it a {what} checkpoint?", what=what)))
    V, C = embed
    found = layout.locate("blocks.0.norm1.gamma", ckpt.key_set())
    assert found is not None
    layers = layer_count(ckpt.keys(), found[0].key.replace(".0.", ".{i}.", 1))
    if layers == 0:
        raise CheckpointError(at(ckpt.path, msg("holds no {what} layer ({key})", what=what, key=found[0].key)))
    embedding_key = layout.locate("embedding", ckpt.keys())[0].key  # type: ignore[index]
    cfg.same(keys["C"], C, "C", embedding_key, embed)
    cfg.same("vocab_size", V, "V", embedding_key, embed)
    cfg.same(keys["layers"], layers, "layers")
    H = cfg.integer(keys["H"])
    if H is None:
        raise cfg.fail(keys["H"], msg("a whole number"), None)
    if C % H:
        raise cfg.refuse(msg("{key} = {H} does not divide {width} = {C} (each head has width d = C / H)", key=keys["H"], H=H, width=keys["C"], C=C))
    cfg.notes["H"] = keys["H"]
    w1 = shape_of(ckpt, layout, "blocks.0.ffn.w1")
    F = w1[1] if w1 else cfg.integer(keys["F"])
    if w1 is not None:
        cfg.same(keys["F"], w1[1], "F")
    if F is None:
        raise cfg.fail(keys["F"], msg("a whole number"), None)
    return V, C, layers, H, F


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face BERT / RoBERTa: Post-Norm, no mask, exact GELU, token + position + token type, then LayerNorm."""
    if not config:
        raise CheckpointError(at(ckpt.path, msg("a BERT checkpoint needs its config.json (heads, layer_norm_eps, RoBERTa's padding_idx are not in the tensors); put it beside the weights")))
    cfg = Config(config, ckpt, options, "bert")
    model_type = cfg.model_type(layout.model_types, BERT_DIFFERENT)
    if model_type not in layout.model_types:  # XLM-RoBERTa, CamemBERT, ...: their positions and parity are not tested
        raise cfg.refuse(msg("model_type {kind}: the bert layout reads model_type 'bert' and 'roberta' only", kind=received(model_type)))
    _refuse_unmodelled(cfg)
    what = "RoBERTa" if model_type == "roberta" else "BERT"
    V, C, layers, H, F = encoder_dims(cfg, ckpt, layout, {"C": "hidden_size", "layers": "num_hidden_layers", "H": "num_attention_heads",
                                                  "F": "intermediate_size"}, what)
    activation = activation_setting(cfg, "hidden_act", options)
    eps = cfg.setting("eps", "layer_norm_eps", cfg.number("layer_norm_eps"), 1e-12, "BERT's layer_norm_eps")
    T_max = shape_of(ckpt, layout, "position")
    types = shape_of(ckpt, layout, "token_type")
    if T_max is None:
        raise CheckpointError(at(ckpt.path, msg("holds no {what} position table (embeddings.position_embeddings.weight)", what=what)))
    position_key = layout.locate("position", ckpt.keys())[0].key  # type: ignore[index]
    cfg.same("max_position_embeddings", T_max[0], "T_max", position_key, T_max)
    dims = {"C": C, "H": H, "F": F, "V": V, "T_max": T_max[0]}
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
    block |= {"final_norm": False, "head": "none"}
    notes |= {"final_norm": "none: each layer ends with its own LayerNorm", "head": "none: the encoder output (no pooler, no MLM head)"}
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record(),
                       padding_token=block["position_offset"] - 1 if model_type == "roberta" else None)


LAYOUT = Layout("bert", "Hugging Face BERT and RoBERTa encoders (BertModel, RobertaModel)", table(), read_config,
                aliases=(("", "bert."), ("", "roberta.")), model_types=("bert", "roberta"),
                # Hugging Face rebuilds these index buffers (arange, zeros); older checkpoints store them
                harmless=(r"((bert|roberta)\.)?embeddings\.(position_ids|token_type_ids)",),
                differ=tuple(BERT_DIFFERENT))
