"""The torch family: PyTorch nn.TransformerEncoderLayer / nn.TransformerEncoder / nn.Transformer state dicts, its layout table and its config reader.

A state dict has no config.json (no model_type): this family is picked with ``--layout torch`` only.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Take, group, layer_count, need_heads, norm, packed_attention, shape_of
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def _layer(prefix: str, layer: str, cross: bool) -> dict[str, Take]:
    """One nn.TransformerEncoderLayer (or DecoderLayer, with cross-attention): in_proj packed [3C,C], Linear [out,in]."""
    t = group(prefix, "attn", packed_attention(layer + "self_attn.in_proj", layer + "self_attn.out_proj", 0, True))
    if cross:
        t |= group(prefix, "cross_attn", packed_attention(layer + "multihead_attn.in_proj", layer + "multihead_attn.out_proj", 0, True))
    t |= group(prefix, "ffn", {"w1": Take(layer + "linear1.weight", transpose=True), "b1": Take(layer + "linear1.bias"),
                               "w2": Take(layer + "linear2.weight", transpose=True), "b2": Take(layer + "linear2.bias")})
    for n in ("norm1", "norm2") + (("norm3",) if cross else ()):
        t |= group(prefix, n, norm(layer + n))
    return t


def table() -> dict[str, Take]:
    table = _layer("blocks.{i}.", "layers.{i}.", cross=False)  # a decoder-only trace of an encoder stack (or one layer)
    table |= group("", "final_norm", norm("norm"))
    table |= _layer("encoder.blocks.{i}.", "encoder.layers.{i}.", cross=False)
    table |= group("encoder.", "final_norm", norm("encoder.norm"))
    table |= _layer("decoder.blocks.{i}.", "decoder.layers.{i}.", cross=True)
    table |= group("decoder.", "final_norm", norm("decoder.norm"))
    return table


TORCH_ACTIVATIONS = ("relu", "gelu")  # nn.TransformerEncoderLayer's activation: relu (its default) or gelu (exact)
# what a state dict does not record, from the command line's options, else PyTorch's defaults
TORCH_READS = Family("torch", fields=(Field("", setting="norm_order", default="post", why="PyTorch's default norm_first=False"),
                                      Field("", setting="activation", default="relu", why="PyTorch's default"),
                                      Field("", setting="eps", default=1e-5, why="PyTorch's default layer_norm_eps")))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """nn.TransformerEncoderLayer / nn.TransformerEncoder / nn.Transformer: everything from the shapes, H from --heads.

    A state dict does not record nhead, norm_first, the activation or eps: H comes from --heads, the others
    from --norm-order, --activation and --eps, else PyTorch's defaults (post-norm, relu, 1e-5), each written
    '# assumed: ...' and listed on stderr.  A config.json beside it is not read.
    """
    keys = ckpt.keys()
    seq2seq = any(k.startswith("decoder.layers.") for k in keys)
    prefix = "decoder.blocks.0." if seq2seq else "blocks.0."
    w_q = shape_of(ckpt, layout, prefix + "attn.w_q")
    w1 = shape_of(ckpt, layout, prefix + "ffn.w1")
    if w_q is None or w1 is None:
        raise CheckpointError(at(ckpt.path, msg('holds no nn.TransformerEncoderLayer weights (self_attn.in_proj_weight, linear1.weight); '
                                                'is it a PyTorch nn.Transformer* state dict?')))
    C, F = w_q[0], w1[1]
    H = need_heads(options.heads, C, "a PyTorch state dict")
    if options.activation not in (None,) + TORCH_ACTIVATIONS:
        raise CheckpointError(at(f"--activation {options.activation}",
                                 msg("expected one of {join} (nn.TransformerEncoderLayer's activations)", join=", ".join(TORCH_ACTIVATIONS))))
    read = TORCH_READS.read(None, ckpt, layout, options, absent="a state dict does not record it")  # the options, or PyTorch's defaults
    cfg, settings = read.cfg, read.settings
    cfg.used.add("heads")
    dims = {"C": C, "H": H, "F": F}
    notes = {"C": "in_proj_weight is [3C,C]", "H": "--heads (a state dict does not record nhead)", "F": "linear1 is [F,C]"} | cfg.notes
    dtype = ckpt.info(layout.locate(prefix + "attn.w_q", ckpt.key_set())[0].key).dtype  # type: ignore[index]
    common = {"norm_order": settings["norm_order"], "norm": "layernorm", "eps": settings["eps"], "activation": settings["activation"],
              "positions": "none"}
    if seq2seq:
        enc_layers = layer_count(keys, "encoder.layers.{i}.linear1.weight")
        dec_layers = layer_count(keys, "decoder.layers.{i}.linear1.weight")
        encoder = common | {"layers": enc_layers, "mask": "none", "final_norm": "encoder.norm.weight" in keys}
        decoder = common | {"layers": dec_layers, "mask": "causal", "final_norm": "decoder.norm.weight" in keys}
        notes |= {"positions": "nn.Transformer adds no positions", "V": "nn.Transformer has no embedding: drawn from the seed"}
        return ModelConfig(dec_layers, dims, decoder, notes, dtype, "tensor shapes", "encoder-decoder", encoder, enc_layers,
                           embedding_given=False, **cfg.record())
    layers = layer_count(keys, "layers.{i}.linear1.weight") or layer_count(keys, "encoder.layers.{i}.linear1.weight") or 1
    block = common | {"layers": layers, "mask": "none", "final_norm": shape_of(ckpt, layout, "final_norm.gamma") is not None}
    notes |= {"positions": "the encoder adds no positions", "mask": "an encoder layer reads every position (no src_mask)"}
    return ModelConfig(layers, dims, block, notes, dtype, "tensor shapes", input="x", embedding_given=False, **cfg.record())


LAYOUT = Layout("torch", "PyTorch nn.TransformerEncoderLayer, nn.TransformerEncoder, nn.Transformer state dicts", table(), read_config,
                # a lone layer's keys have no 'layers.0.'; an nn.Transformer's encoder traced as a decoder-only stack
                aliases=(("layers.0.", ""), ("layers.", "encoder.layers."), ("norm.", "encoder.norm.")),
                model_types=())  # a state dict has no config.json
