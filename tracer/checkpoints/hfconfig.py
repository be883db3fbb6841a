"""Read a checkpoint's config (Hugging Face config.json, or the tensor shapes) into the spec's own settings.

One function per layout: ``(config or None, checkpoint, layout, heads) -> ModelConfig``.  It says
what the spec's dims and block settings are and, for each, where it came from (written into the
imported spec as a comment).  Whatever the config sets that tracer cannot trace faithfully is
refused here, naming the setting, rather than traced wrongly.  Nothing here imports NumPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .formats import Checkpoint, CheckpointError

if TYPE_CHECKING:
    from .layouts import Layout


class ModelConfig(NamedTuple):
    layers: int  # layers in the checkpoint (the decoder's, for an encoder-decoder)
    dims: dict[str, int]  # C, H, F and, where known, V and T_max
    block: dict[str, Any]  # the spec's block settings (the decoder's, for an encoder-decoder)
    notes: dict[str, str]  # setting -> where it came from, written as a comment
    dtype: str  # what the checkpoint stores (float32, bfloat16, ...)
    source: str  # "config.json" or "tensor shapes"
    model: str = "decoder"  # decoder | encoder-decoder
    encoder: dict[str, Any] | None = None  # encoder-decoder: the encoder's settings
    encoder_layers: int = 0
    input: str = "tokens"  # tokens | x: what the first layer reads
    embedding_given: bool = True  # False: the checkpoint has no embedding table (drawn from the seed)


def shape_of(ckpt: Checkpoint, layout: Layout, name: str) -> tuple[int, ...] | None:
    """The shape tracer weight ``name`` has in this checkpoint (after the layout's conversion), or None."""
    found = layout.locate(name, ckpt.keys())
    if found is None or not found[1]:
        return None
    take, _ = found
    return take.shape(ckpt.info(take.key).shape)


def _need_heads(heads: int | None, C: int, what: str) -> int:
    if heads is None:
        raise CheckpointError(f"{what} does not record the number of heads; give --heads H (H must divide C = {C})")
    if heads < 1 or C % heads:
        raise CheckpointError(f"--heads {heads}: H must divide C = {C} (each head has width d = C / H)")
    return heads


ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def gpt2(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, heads: int | None) -> ModelConfig:
    from .layouts import layer_count

    cfg = config or {}
    wte = shape_of(ckpt, layout, "embedding")
    if wte is None:
        raise CheckpointError(f"{ckpt.path}: holds no GPT-2 token embedding (wte.weight or transformer.wte.weight); is it a GPT-2 checkpoint?")
    V, C = wte
    wpe = shape_of(ckpt, layout, "position")
    w1 = shape_of(ckpt, layout, "blocks.0.ffn.w1")
    found = layout.locate("blocks.0.norm1.gamma", ckpt.keys())
    pattern = found[0].key.replace(".0.", ".{i}.", 1) if found else "h.{i}.ln_1.weight"
    layers = layer_count(ckpt.keys(), pattern)
    if layers == 0:
        raise CheckpointError(f"{ckpt.path}: holds no GPT-2 layer (h.0.ln_1.weight)")
    for key, ok in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False)):
        if cfg.get(key, ok) != ok:
            raise CheckpointError(f"config.json: {key} = {cfg[key]}: tracer's attention scales scores by 1/sqrt(d) only")
    act = cfg.get("activation_function", "gelu_new")
    if act not in ACTIVATIONS:
        raise CheckpointError(f"config.json: activation_function {act!r}: expected one of {', '.join(ACTIVATIONS)}")
    H = int(cfg["n_head"]) if "n_head" in cfg else _need_heads(heads, C, f"{ckpt.path} without config.json")
    tied = bool(cfg.get("tie_word_embeddings", True)) or shape_of(ckpt, layout, "head") is None
    dims = {"C": C, "H": H, "F": w1[1] if w1 else int(cfg.get("n_inner") or 4 * C), "V": V}
    notes = {"C": "n_embd", "H": "n_head" if "n_head" in cfg else "--heads", "F": "n_inner (4 n_embd when null)", "V": "vocab_size (rows of wte)"}
    if wpe is not None:
        dims["T_max"] = wpe[0]
        notes["T_max"] = "n_positions (rows of wpe)"
    block = {"norm_order": "pre", "layers": layers, "norm": "layernorm", "eps": float(cfg.get("layer_norm_epsilon", 1e-5)),
             "activation": ACTIVATIONS[act], "positions": "learned", "mask": "causal", "final_norm": True,
             "head": "tied" if tied else "separate"}
    notes |= {"eps": "layer_norm_epsilon", "activation": f"activation_function: {act}", "positions": "wpe, a learned table",
              "final_norm": "ln_f", "head": "lm_head = wte (tie_word_embeddings)" if tied else "lm_head.weight, untied"}
    return ModelConfig(layers, dims, block, notes, ckpt.info(layout.locate("embedding", ckpt.keys())[0].key).dtype,  # type: ignore[index]
                       "config.json" if config else "tensor shapes")


def torch(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, heads: int | None) -> ModelConfig:
    """nn.TransformerEncoderLayer / nn.TransformerEncoder / nn.Transformer: everything from the shapes, H from --heads.

    A state dict does not record norm_first, the activation or eps: the spec gets PyTorch's defaults
    (post-norm, relu, 1e-5) and a comment saying so.
    """
    from .layouts import layer_count

    keys = ckpt.keys()
    seq2seq = any(k.startswith("decoder.layers.") for k in keys)
    prefix = "decoder.blocks.0." if seq2seq else "blocks.0."
    w_q = shape_of(ckpt, layout, prefix + "attn.w_q")
    w1 = shape_of(ckpt, layout, prefix + "ffn.w1")
    if w_q is None or w1 is None:
        raise CheckpointError(f"{ckpt.path}: holds no nn.TransformerEncoderLayer weights (self_attn.in_proj_weight, linear1.weight); "
                              "is it a PyTorch nn.Transformer* state dict?")
    C, F = w_q[0], w1[1]
    H = _need_heads(heads, C, "a PyTorch state dict")
    dims = {"C": C, "H": H, "F": F}
    notes = {"C": "in_proj_weight is [3C,C]", "H": "--heads (a state dict does not record nhead)", "F": "linear1 is [F,C]",
             "norm_order": "PyTorch's default norm_first=False; use pre if the model was built with norm_first=True",
             "activation": "PyTorch's default; a state dict does not record it", "eps": "PyTorch's default layer_norm_eps"}
    dtype = ckpt.info(layout.locate(prefix + "attn.w_q", keys)[0].key).dtype  # type: ignore[index]
    common = {"norm_order": "post", "norm": "layernorm", "eps": 1e-5, "activation": "relu", "positions": "none"}
    if seq2seq:
        enc_layers = layer_count(keys, "encoder.layers.{i}.linear1.weight")
        dec_layers = layer_count(keys, "decoder.layers.{i}.linear1.weight")
        encoder = common | {"layers": enc_layers, "mask": "none", "final_norm": "encoder.norm.weight" in keys}
        decoder = common | {"layers": dec_layers, "mask": "causal", "final_norm": "decoder.norm.weight" in keys}
        notes |= {"positions": "nn.Transformer adds no positions", "V": "nn.Transformer has no embedding: drawn from the seed"}
        return ModelConfig(dec_layers, dims, decoder, notes, dtype, "tensor shapes", "encoder-decoder", encoder, enc_layers,
                           embedding_given=False)
    layers = layer_count(keys, "layers.{i}.linear1.weight") or layer_count(keys, "encoder.layers.{i}.linear1.weight") or 1
    block = common | {"layers": layers, "mask": "none", "final_norm": shape_of(ckpt, layout, "final_norm.gamma") is not None}
    notes |= {"positions": "the encoder adds no positions", "mask": "an encoder layer reads every position (no src_mask)"}
    return ModelConfig(layers, dims, block, notes, dtype, "tensor shapes", input="x", embedding_given=False)


def tracer(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, heads: int | None) -> ModelConfig:
    raise CheckpointError(f"{ckpt.path}: a tracer archive holds weights, not the block's settings; reference it from the spec "
                          f"that made it: weights: {{file: {ckpt.path}, layout: tracer}}")
