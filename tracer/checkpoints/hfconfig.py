"""Read a checkpoint's config (Hugging Face config.json, or the tensor shapes) into the spec's own settings.

One function per layout: ``(config or None, checkpoint, layout, heads) -> ModelConfig``.  It says
what the spec's dims and block settings are and, for each, where it came from (written into the
imported spec as a comment).  Whatever the config sets that tracer cannot trace faithfully is
refused here, naming the setting, rather than traced wrongly.  Nothing here imports NumPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from tracer.checkpoints.formats import Checkpoint, CheckpointError

if TYPE_CHECKING:
    from tracer.checkpoints.layouts import Layout


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


def stored_dtype(ckpt: Checkpoint, layout: Layout, name: str) -> str:
    """How the checkpoint stores tracer weight ``name`` (float32, bfloat16, ...)."""
    found = layout.locate(name, ckpt.keys())
    return ckpt.info(found[0].key).dtype if found is not None and found[1] else "float32"


def _need_heads(heads: int | None, C: int, what: str) -> int:
    if heads is None:
        raise CheckpointError(f"{what} does not record the number of heads; give --heads H (H must divide C = {C})")
    if heads < 1 or C % heads:
        raise CheckpointError(f"--heads {heads}: H must divide C = {C} (each head has width d = C / H)")
    return heads


ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def gpt2(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, heads: int | None) -> ModelConfig:
    from tracer.checkpoints.layouts import layer_count

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
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json" if config else "tensor shapes")


def _rope(cfg: dict[str, Any]) -> tuple[float, str, str]:
    """rope_theta and the rope type: transformers 5 writes rope_parameters, earlier versions rope_theta and rope_scaling."""
    params = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    if "rope_theta" in params:
        theta, where = params["rope_theta"], "rope_parameters.rope_theta"
    elif "rope_theta" in cfg:
        theta, where = cfg["rope_theta"], "rope_theta"
    else:
        theta, where = 10000.0, "LLaMA's default rope_theta (config.json gives none)"
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    return float(theta), str(kind), where


def llama(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, heads: int | None) -> ModelConfig:
    """Hugging Face LLaMA / Mistral: RMSNorm, SwiGLU, rotary positions turned as rotate_half does, grouped-query attention."""
    from tracer.checkpoints.layouts import layer_count

    if not config:
        raise CheckpointError(f"{ckpt.path}: a LLaMA checkpoint needs its config.json (heads, key/value heads, rope_theta, "
                              "rms_norm_eps are not in the tensors); put it beside the weights")
    cfg = config
    embed = shape_of(ckpt, layout, "embedding")
    if embed is None:
        raise CheckpointError(f"{ckpt.path}: holds no LLaMA token embedding (model.embed_tokens.weight); is it a LLaMA checkpoint?")
    V, C = embed
    found = layout.locate("blocks.0.norm1.gamma", ckpt.keys())
    pattern = found[0].key.replace(".0.", ".{i}.", 1) if found else "model.layers.{i}.input_layernorm.weight"
    layers = layer_count(ckpt.keys(), pattern)
    if layers == 0:
        raise CheckpointError(f"{ckpt.path}: holds no LLaMA layer (model.layers.0.input_layernorm.weight)")
    H = int(cfg.get("num_attention_heads") or _need_heads(heads, C, "config.json"))
    H_kv = int(cfg.get("num_key_value_heads") or H)
    theta, rope_type, theta_from = _rope(cfg)
    refused = [
        (cfg.get("hidden_act", "silu") != "silu", f"hidden_act {cfg.get('hidden_act')!r}: tracer's SwiGLU gates with silu"),
        (bool(cfg.get("attention_bias")), "attention_bias = true: the llama layout reads q/k/v/o_proj without biases"),
        (bool(cfg.get("mlp_bias")), "mlp_bias = true: the llama layout reads gate/up/down_proj without biases"),
        (cfg.get("head_dim") not in (None, C // H), f"head_dim = {cfg.get('head_dim')}: tracer's heads have width d = C / H = {C // H}"),
        (rope_type != "default", f"rope type {rope_type!r}: tracer's rotary positions are the default RoPE (no scaling)"),
        (H_kv < 1 or H % H_kv, f"num_key_value_heads = {H_kv} must divide num_attention_heads = {H}"),
    ]
    for bad, why in refused:
        if bad:
            raise CheckpointError(f"config.json: {why}")
    w1 = shape_of(ckpt, layout, "blocks.0.ffn.w1")
    tied = bool(cfg.get("tie_word_embeddings", False))
    has_head = tied or shape_of(ckpt, layout, "head") is not None
    dims = {"C": C, "H": H} | ({"H_kv": H_kv} if H_kv != H else {}) | {"F": w1[1] if w1 else int(cfg["intermediate_size"]), "V": V}
    notes = {"C": "hidden_size", "H": "num_attention_heads", "H_kv": "num_key_value_heads (grouped-query attention)",
             "F": "intermediate_size (gate_proj, up_proj)", "V": "vocab_size (rows of embed_tokens)"}
    window = cfg.get("sliding_window")
    block = {"norm_order": "pre", "layers": layers, "norm": "rmsnorm", "eps": float(cfg.get("rms_norm_eps", 1e-6)),
             "activation": "swiglu", "positions": "rotary", "position_base": theta, "rotary_pairing": "half", "mask": "causal",
             "final_norm": True, "head": ("tied" if tied else "separate") if has_head else "none"}
    notes |= {"norm": "LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * weight", "eps": "rms_norm_eps",
              "activation": "mlp: down_proj(silu(gate_proj(x)) * up_proj(x))", "positions": "rotary (RoPE), inside each attention",
              "position_base": theta_from, "rotary_pairing": "Hugging Face's rotate_half: pairs (i, i + d/2), no weight permutation",
              "final_norm": "model.norm",
              "head": ("lm_head = embed_tokens (tie_word_embeddings)" if tied else "lm_head.weight, untied") if has_head
              else "no lm_head in the checkpoint (a bare LlamaModel)"}
    if window:
        notes["mask"] = f"Mistral's sliding_window = {window} keys changes nothing while T <= {window}"
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json")


def torch(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, heads: int | None) -> ModelConfig:
    """nn.TransformerEncoderLayer / nn.TransformerEncoder / nn.Transformer: everything from the shapes, H from --heads.

    A state dict does not record norm_first, the activation or eps: the spec gets PyTorch's defaults
    (post-norm, relu, 1e-5) and a comment saying so.
    """
    from tracer.checkpoints.layouts import layer_count

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
    dtype = stored_dtype(ckpt, layout, prefix + "attn.w_q")
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
