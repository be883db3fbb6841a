"""The t5 family: Hugging Face T5 (T5ForConditionalGeneration), an encoder-decoder with T5's choices made visible.

T5's tensors: shared.weight (the one token table, encoder and decoder), per layer SelfAttention.q/k/v/o (no biases),
EncDecAttention.q/k/v/o in the decoder, DenseReluDense.wi/wo (relu) or wi_0/wi_1/wo (gated-gelu), a layer_norm per
sublayer (T5LayerNorm: an RMSNorm without mean and bias), encoder/decoder.final_layer_norm, and the relative position
table SelfAttention.relative_attention_bias [buckets, H] of layer 0 of each stack (shared by every layer).  What T5
computes is written into the spec as tracer settings, each a stage or an op of its own:

- ``norm: rmsnorm`` with eps = layer_norm_epsilon, ``norm_order: pre``, both final norms;
- ``positions: relative`` with ``relative: {buckets, max_distance}`` (relative_attention_num_buckets,
  relative_attention_max_distance): the stages encoder.position_bias [H,S,S] (both directions) and
  decoder.position_bias [H,T,T] (causal), added to every self-attention's scores; cross-attention has none;
- ``attention_scale: 1``: T5 does not divide the scores by sqrt(d); d = d_kv (dims.d when H * d_kv != C);
- the FFN: feed_forward_proj relu (wi, wo, tracer's relu FFN with zero biases) or gated-gelu (wi_0, wi_1, wo:
  ``activation: geglu``, the tanh GELU, Hugging Face's gelu_new);
- the head: lm_head.weight when the file holds one, else tied (lm_head = shared); when scale_decoder_outputs is true, or is
  not written and tie_word_embeddings is not false (transformers 5 reads them so, and saves T5 v1.1 with the first false
  beside the second true), the decoder's output times C ** -0.5 before it, ``head_scale: true`` (stage decoder.head_scale).

T5EncoderModel (no decoder in the file) is the encoder traced as one stack, under the single-stack names (blocks.{i}.*,
relative_bias, final_norm): no mask, no head, its final norm Hugging Face's last_hidden_state.

The input: the source ids (--tokens, or a default written out) and the target, decoder_start_token_id followed by the
source but its last id (the decoder input Hugging Face makes from labels = the source, shifted right).
UMT5 (a table per layer) is refused by name, and so is every config key not modelled.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Take, group, layer_count, refuse, shape_of, stored_dtype
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def _attention(prefix: str, name: str, layer: str) -> dict[str, Take]:
    return group(prefix, name, {f"w_{x}": Take(f"{layer}.{x}.weight", transpose=True) for x in "qkvo"})


def _ffn(prefix: str, layer: str) -> dict[str, Take]:
    """Both FFNs' tensors in one table: relu's wi (w1) and wo (w2); gated-gelu's wi_0 (w1, through the GELU, read where
    there is no wi), wi_1 (w3) and wo.  A relu FFN does not read w3 (optional: a relu checkpoint has no wi_1)."""
    return group(prefix, "ffn", {"w1": Take(f"{layer}.wi.weight", transpose=True, alt=f"{layer}.wi_0.weight"),
                                 "w3": Take(f"{layer}.wi_1.weight", transpose=True, optional=True),
                                 "w2": Take(f"{layer}.wo.weight", transpose=True)})


def table() -> dict[str, Take]:
    """T5's table; nn.Linear [out,in] transposed to tracer's [in,out]."""
    E, D = "encoder.block.{i}.layer.", "decoder.block.{i}.layer."
    ffn = _ffn
    t = {"embedding": Take("shared.weight"), "head": Take("lm_head.weight", transpose=True)}
    t |= group("encoder.", "", {"relative_bias": Take("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")})
    t |= _attention("encoder.blocks.{i}.", "attn", E + "0.SelfAttention")
    t |= group("encoder.blocks.{i}.", "norm1", {"gamma": Take(E + "0.layer_norm.weight")})
    t |= ffn("encoder.blocks.{i}.", E + "1.DenseReluDense")
    t |= group("encoder.blocks.{i}.", "norm2", {"gamma": Take(E + "1.layer_norm.weight")})
    t |= group("encoder.", "final_norm", {"gamma": Take("encoder.final_layer_norm.weight")})
    t |= group("decoder.", "", {"relative_bias": Take("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")})
    t |= _attention("decoder.blocks.{i}.", "attn", D + "0.SelfAttention")
    t |= group("decoder.blocks.{i}.", "norm1", {"gamma": Take(D + "0.layer_norm.weight")})
    t |= _attention("decoder.blocks.{i}.", "cross_attn", D + "1.EncDecAttention")
    t |= group("decoder.blocks.{i}.", "norm2", {"gamma": Take(D + "1.layer_norm.weight")})
    t |= ffn("decoder.blocks.{i}.", D + "2.DenseReluDense")
    t |= group("decoder.blocks.{i}.", "norm3", {"gamma": Take(D + "2.layer_norm.weight")})
    t |= group("decoder.", "final_norm", {"gamma": Take("decoder.final_layer_norm.weight")})
    # T5EncoderModel (no decoder in the file): the encoder as a stack of its own, tracer's single-stack names
    t["relative_bias"] = Take("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
    t |= _attention("blocks.{i}.", "attn", E + "0.SelfAttention")
    t |= group("blocks.{i}.", "norm1", {"gamma": Take(E + "0.layer_norm.weight")})
    t |= ffn("blocks.{i}.", E + "1.DenseReluDense")
    t |= group("blocks.{i}.", "norm2", {"gamma": Take(E + "1.layer_norm.weight")})
    t |= group("", "final_norm", {"gamma": Take("encoder.final_layer_norm.weight")})
    return {k.replace("..", "."): v for k, v in t.items()}  # the tables: encoder.relative_bias, decoder.relative_bias


# config.json keys the t5 reader reads; any other key not harmless is refused by name
T5_KEYS = frozenset({"vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
                     "relative_attention_num_buckets", "relative_attention_max_distance", "layer_norm_epsilon", "feed_forward_proj",
                     "dense_act_fn", "is_gated_act", "tie_word_embeddings", "scale_decoder_outputs", "dropout_rate", "initializer_factor",
                     "n_positions", "output_past", "feed_forward_hidden_act"})
# the FFNs tracer models: feed_forward_proj -> (tracer's activation, Hugging Face's dense_act_fn, gated)
FFNS = {"relu": ("relu", "relu", False), "gated-gelu": ("geglu", "gelu_new", True)}
T5_DIFFERENT = {"umt5": msg("UMT5 gives every layer its own relative position table, where tracer shares layer 0's across the stack"),
                "mt5": msg("mT5's checkpoints are read as T5 only once their parity is measured"),
                "longt5": msg("LongT5 attends locally or through transient global tokens, which tracer does not model"),
                "switch_transformers": msg("Switch Transformers route tokens to experts, which tracer does not model")}
T5_MODEL_TYPES = ("t5", "umt5")  # umt5 named so that its import is refused by name, with the reason


# what the t5 reader reads first: T5's keys (any other refused by name) and its FFN's switches
T5_READS = Family("", needs=msg("a T5 checkpoint needs its config.json (heads, d_kv, the relative buckets are not all in the tensors); "
                                 "put it beside the weights"),
                  reads=("t5",), differ=T5_DIFFERENT, others=msg("the t5 layout reads model_type t5 only"), known=T5_KEYS,
                  fields=(Field("feed_forward_proj", "text"), Field("dense_act_fn", "text"), Field("is_gated_act", "flag"),
                          Field("feed_forward_hidden_act", "text"), Field("num_heads", required=True)))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face T5: every size and switch from config.json, type-checked against the tensors; what is not modelled refused by name."""
    read = T5_READS.read(config, ckpt, layout, options)
    cfg, proj = read.cfg, read.values["feed_forward_proj"] or "relu"
    refuse(cfg, [(proj not in FFNS, msg("feed_forward_proj {proj}: tracer's T5 FFN is relu or gated-gelu", proj=repr(proj)))])
    activation, act_fn, gated = FFNS[proj]
    dense, is_gated, hidden_act = read.values["dense_act_fn"], read.values["is_gated_act"], read.values["feed_forward_hidden_act"]
    refuse(cfg, [
        (dense is not None and dense != act_fn,
         msg("dense_act_fn {act}: feed_forward_proj {proj} computes {want}", act=repr(dense), proj=repr(proj), want=repr(act_fn))),
        (is_gated is not None and is_gated != gated,
         msg("is_gated_act = {got}: feed_forward_proj {proj} says {want}", got=str(is_gated).lower(), proj=repr(proj), want=str(gated).lower())),
        (hidden_act is not None, msg("feed_forward_hidden_act {act}: not modelled (tracer reads feed_forward_proj)", act=repr(hidden_act))),
    ])
    ckpt_layout = layout
    keys_set = ckpt.key_set()
    relu_held = "encoder.block.0.layer.1.DenseReluDense.wi.weight" in keys_set
    wi = repr("encoder.block.0.layer.1.DenseReluDense.wi.weight")
    refuse(cfg, [(gated and relu_held, msg("feed_forward_proj {proj}, but the checkpoint holds {key}, relu's projection", proj=repr(proj), key=wi)),
                 (not gated and not relu_held, msg("feed_forward_proj {proj}, but the checkpoint holds no {key}", proj=repr(proj), key=wi))])
    embed = shape_of(ckpt, ckpt_layout, "embedding")
    if embed is None:
        raise CheckpointError(at(ckpt.path, msg("holds no T5 token table (shared.weight); is it a T5 checkpoint?")))
    V, C = embed
    cfg.same("d_model", C, "C", "shared.weight", embed)
    cfg.same("vocab_size", V, "V", "shared.weight", embed)
    keys = ckpt.keys()
    enc_layers = layer_count(keys, "encoder.block.{i}.layer.0.layer_norm.weight")
    dec_layers = layer_count(keys, "decoder.block.{i}.layer.0.layer_norm.weight")
    if enc_layers == 0:
        raise CheckpointError(at(ckpt.path, msg("holds no T5 encoder layers (encoder.block.0...)")))
    cfg.same("num_layers", enc_layers, "encoder layers")
    if dec_layers:  # none: T5EncoderModel, whose config keeps num_decoder_layers
        cfg.same("num_decoder_layers", dec_layers, "decoder layers")
    H = read.values["num_heads"]
    q = shape_of(ckpt, ckpt_layout, "encoder.blocks.0.attn.w_q")
    if q is None:
        raise CheckpointError(at(ckpt.path, msg("holds no T5 attention (encoder.block.0.layer.0.SelfAttention.q.weight)")))
    refuse(cfg, [(q[1] % H != 0, msg("num_heads = {H} does not divide the {n} rows of SelfAttention.q (H * d_kv)", H=H, n=q[1]))])
    d = q[1] // H
    cfg.same("d_kv", d, "d", "encoder.block.0.layer.0.SelfAttention.q.weight", (q[1], q[0]))
    w_out = shape_of(ckpt, ckpt_layout, "encoder.blocks.0.ffn.w2")
    if w_out is None:
        raise CheckpointError(at(ckpt.path, msg("holds no T5 FFN (encoder.block.0.layer.1.DenseReluDense.wo.weight)")))
    F = w_out[0]
    cfg.same("d_ff", F, "F")
    table_shape = shape_of(ckpt, ckpt_layout, "encoder.relative_bias")
    buckets = cfg.integer("relative_attention_num_buckets")
    if buckets is None:
        buckets = 32
        cfg.assumed.append(("relative.buckets", 32))
    distance = cfg.integer("relative_attention_max_distance")
    if distance is None:
        distance = 128
        cfg.assumed.append(("relative.max_distance", 128))
    if table_shape is not None:
        cfg.same("relative_attention_num_buckets", table_shape[0], "K_rel", "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", table_shape)
    eps = cfg.setting("eps", "layer_norm_epsilon", cfg.number("layer_norm_epsilon"), 1e-6, "T5Config's default layer_norm_epsilon")
    if options.activation not in (None, activation):
        raise CheckpointError(at(f"--activation {options.activation}",
                                 msg("the t5 layout's FFN is fixed by feed_forward_proj {proj}: expected {want}", proj=repr(proj), want=activation)))
    # transformers 5 reads scale_decoder_outputs where the config has it (it writes tie_word_embeddings true beside it,
    # and ties lm_head to shared unless the file holds an lm_head of its own), else tie_word_embeddings is not false
    tie, stated = cfg.flag("tie_word_embeddings"), cfg.flag("scale_decoder_outputs")
    scale = stated if stated is not None else tie is not False
    separate = shape_of(ckpt, ckpt_layout, "head") is not None
    relative = {"buckets": buckets, "max_distance": distance}
    common = {"norm_order": "pre", "norm": "rmsnorm", "eps": eps, "activation": activation, "positions": "relative",
              "relative": relative, "attention_scale": 1}
    encoder = common | {"layers": enc_layers, "mask": "none", "final_norm": True}
    own_width, dtype = H * d != C, stored_dtype(ckpt, ckpt_layout, "embedding")
    dims = {"C": C, "H": H} | ({"d": d} if own_width else {}) | {"F": F, "V": V}
    notes = {"C": "d_model (the width of shared.weight)", "H": "num_heads", "d": "d_kv, not d_model / num_heads: q is [H*d, C], o [C, H*d]",
             "F": "d_ff (DenseReluDense.wo is [C, F])", "V": "vocab_size (rows of shared.weight)",
             "norm": "T5LayerNorm: x / sqrt(mean(x^2) + eps) * weight, no mean, no bias",
             "positions": "T5's relative position bias, layer 0's table shared by every layer of the stack",
             "relative": "relative_attention_num_buckets, relative_attention_max_distance",
             "attention_scale": "T5 does not divide the scores by sqrt(d)",
             "activation": f"feed_forward_proj {proj}" + (": wo(gelu_new(wi_0(x)) * wi_1(x))" if gated else ": wo(relu(wi(x))), no biases"),
             "final_norm": "final_layer_norm",
             "head": "lm_head.weight (in the file)" if separate else "lm_head = shared (T5 ties them)",
             "head_scale": "the decoder's output times d_model ** -0.5 before lm_head (" + (
                 "scale_decoder_outputs true)" if stated is not None else "tie_word_embeddings not false)")} | cfg.notes
    if not dec_layers:
        block = common | {"layers": enc_layers, "mask": "none", "final_norm": True, "head": "none"}
        notes |= {"mask": "none: T5's encoder attends both ways", "final_norm": "encoder.final_layer_norm: its output is last_hidden_state",
                  "head": "none: the checkpoint holds no decoder and no lm_head (T5EncoderModel), so the encoder stack is traced alone"}
        return ModelConfig(enc_layers, dims, block, notes, dtype, "config.json", **cfg.record())
    decoder = common | {"layers": dec_layers, "mask": "causal", "final_norm": True, "head": "separate" if separate else "tied"}
    if scale:
        decoder["head_scale"] = True
    elif not separate:
        notes["head"] = "lm_head = shared (transformers ties them); scale_decoder_outputs " + (
            "false" if stated is not None else "unset and tie_word_embeddings false") + ": no d_model ** -0.5 before it"
    return ModelConfig(dec_layers, dims, decoder, notes, dtype, "config.json", "encoder-decoder",
                       encoder, enc_layers, target_start=cfg.integer("decoder_start_token_id", lo=0) or 0, **cfg.record())


LAYOUT = Layout("t5", "Hugging Face T5 (T5ForConditionalGeneration, T5EncoderModel): RMSNorm, relative position bias, no 1/sqrt(d), "
                "a tied head, scaled unless T5 v1.1",
                table(), read_config, model_types=T5_MODEL_TYPES,
                harmless=(r"(encoder|decoder)\.embed_tokens\.weight",), differ=("umt5", "mt5", "longt5", "switch_transformers"))
