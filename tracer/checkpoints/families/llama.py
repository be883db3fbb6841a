"""The llama family: Hugging Face LLaMA and Mistral (LlamaForCausalLM, MistralForCausalLM), its layout table and its config reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracer.checkpoints.families import base
from tracer.checkpoints.families.base import Config, Family, Field, Layout, ModelConfig, Options, Refusal, Take, group, refuse, shape_of, stored_dtype
from tracer.checkpoints.formats import Checkpoint, received
from tracer.errors import CheckpointError
from tracer.messages import Message, at, msg
from tracer.model.rope import ROPE_TYPES  # the rope types tracer models besides the default


def table(qkv_bias: bool = False) -> dict[str, Take]:
    """Hugging Face LLaMA / Mistral (LlamaForCausalLM): every projection an nn.Linear [out,in].

    RMSNorm has only a weight (gamma); the MLP is down(silu(gate(x)) * up(x)), tracer's SwiGLU with
    W_1 = gate, W_3 = up, W_2 = down.  q and k need no permutation: the spec turns them with
    rotary_pairing: half, as Hugging Face's rotate_half does.  The biases are optional tensors:
    attention_bias = true gives q/k/v/o_proj theirs, mlp_bias = true gate/up/down_proj theirs
    (read_config checks the config and the tensors agree).  ``qkv_bias``: Qwen2's table, whose
    q/k/v_proj always have a bias and o_proj and the MLP never.
    """
    L = "model.layers.{i}."
    table = {"embedding": Take("model.embed_tokens.weight"), "head": Take("lm_head.weight", transpose=True),
             "classifier.w": Take("score.weight", transpose=True)}  # LlamaForSequenceClassification
    table |= group("blocks.{i}.", "norm1", {"gamma": Take(L + "input_layernorm.weight")})
    table |= group("blocks.{i}.", "attn", {f"w_{x}": Take(f"{L}self_attn.{x}_proj.weight", transpose=True) for x in "qkvo"})
    if qkv_bias:
        table |= group("blocks.{i}.", "attn", {f"b_{x}": Take(f"{L}self_attn.{x}_proj.bias") for x in "qkv"})
    else:
        table |= group("blocks.{i}.", "attn", {f"b_{x}": Take(f"{L}self_attn.{x}_proj.bias", optional=True) for x in "qkvo"})
    table |= group("blocks.{i}.", "norm2", {"gamma": Take(L + "post_attention_layernorm.weight")})
    table |= group("blocks.{i}.", "ffn", {w: Take(f"{L}mlp.{proj}_proj.weight", transpose=True)
                                          for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))})
    if not qkv_bias:
        table |= group("blocks.{i}.", "ffn", {b: Take(f"{L}mlp.{proj}_proj.bias", optional=True)
                                              for b, proj in (("b1", "gate"), ("b3", "up"), ("b2", "down"))})
    table |= group("", "final_norm", {"gamma": Take("model.norm.weight")})
    return table


# the optional biases: config.json's switch, tracer's group, its weights and the projections that hold them
BIASES = (("attention_bias", "attn", ("b_q", "b_k", "b_v", "b_o")), ("mlp_bias", "ffn", ("b1", "b3", "b2")),
          ("use_qkv_bias", "attn", ("b_q", "b_k", "b_v")),  # StableLM's
          ("use_bias", "attn", ("b_q", "b_k", "b_v", "b_o")), ("use_bias", "ffn", ("b1", "b2")))  # StarCoder2's


def bias_rules(cfg: Config, ckpt: Checkpoint, layout: Layout, layers: int,
               switches: tuple[str, ...] = ("attention_bias", "mlp_bias")) -> list[tuple[bool, Message]]:
    """Each switch of ``switches`` and the checkpoint's bias tensors must agree, in every layer: a bias the config switches on
    but the file lacks (it would be zeros), or one the file holds but the config switches off (Hugging Face would not add it),
    is refused by name."""
    rules: list[tuple[bool, Message]] = []
    keys = ckpt.key_set()
    for switch, where, names in BIASES:
        if switch not in switches:
            continue
        on = bool(cfg.flag(switch))
        for i in range(layers):
            for name in names:
                take = layout.find(f"blocks.{i}.{where}.{name}")
                if take is None:
                    continue
                key = take[0].key.format(i=i)
                found = layout.locate(f"blocks.{i}.{where}.{name}", keys)
                held = found is not None and found[1]
                rules.append((on and not held, msg("{switch} = true, but the checkpoint holds no {key}", switch=switch, key=repr(key))))
                rules.append((held and not on, msg("{switch} = {value}, but the checkpoint holds {key}, which Hugging Face would not add",
                                                   switch=switch, value=received(cfg.raw.get(switch, False)), key=repr(key))))
    return rules


def swiglu_note(cfg: Config, notes: dict[str, str], mlp: str, defaults: str) -> None:
    """The activation's note for a SwiGLU MLP (``mlp``: its class), hidden_act silu recorded as assumed when config.json has
    none (``defaults``: the config class whose default it is)."""
    notes["activation"] = f"{mlp}: down_proj(silu(gate_proj(x)) * up_proj(x))"
    if not cfg.has("hidden_act"):
        cfg.assumed.append(("activation", "swiglu"))
        notes["activation"] += f" (hidden_act assumed: not in config.json; {defaults}'s default silu)"


# model_types whose tensors fit the llama layout but whose maths differ: refused by name through --layout llama
LLAMA_DIFFERENT: dict[str, Message] = {"gemma": msg("Gemma scales its embeddings by sqrt(hidden_size) and its RMSNorm by (1 + weight)"),
                                       "granite": msg("Granite scales its embeddings, residuals, attention and logits by multipliers"),
                                       "cohere": msg("Cohere computes attention and the MLP in parallel, with LayerNorm and a logit scale"),
                                       "olmo": msg("OLMo's norms have no weight (or normalise q and k)"),
                                       "phi": msg("Phi packs q, k and v and rotates only part of each head"),
                                       "stablelm": msg("StableLM uses LayerNorm and rotates only part of each head (the stablelm layout reads it)"),
                                       "qwen2": msg("Qwen2 always adds q, k and v biases and sets its sliding window per layer (the qwen2 layout reads it)"),
                                       # mixtral: its own family (mixtral.py)
                                       "qwen3": msg("Qwen3 normalises q and k per head (q_norm, k_norm; the qwen3 layout reads it)"),
                                       "helium": msg("Helium pairs its rotary coordinates (2i, 2i+1), not (i, i + d/2) (the helium layout reads it)"),
                                       "smollm3": msg("SmolLM3 leaves the rotary positions out of some layers (no_rope_layers; the smollm3 layout reads it)")}
# config.json keys that mark maths the llama block does not model (Gemma's, Granite's, Cohere's, ...): refused when set
UNMODELLED: dict[str, Message] = {"query_pre_attn_scalar": msg("scores scaled by 1/sqrt(query_pre_attn_scalar), not 1/sqrt(d)"),
                                  "attn_logit_softcapping": msg("attention scores soft-capped"),
                                  "final_logit_softcapping": msg("logits soft-capped"),
                                  "embedding_multiplier": msg("embeddings scaled by a multiplier"),
                                  "residual_multiplier": msg("residual branches scaled by a multiplier"),
                                  "attention_multiplier": msg("attention scores scaled by a multiplier"),
                                  "logits_scaling": msg("logits scaled"),
                                  "logit_scale": msg("logits scaled"),
                                  "partial_rotary_factor": msg("rotary positions on part of each head only"),
                                  "num_local_experts": msg("a mixture-of-experts MLP"),
                                  "num_experts": msg("a mixture-of-experts MLP"),
                                  "qkv_bias": msg("q, k and v biases"),
                                  "use_qkv_bias": msg("q, k and v biases"),
                                  "use_qk_norm": msg("q and k normalised")}


# what the llama reader reads (LLaMA, Mistral, and the families read as LLaMA is: Qwen2, Qwen3, Gemma, Mixtral), and the
# config.json keys whose values mark maths tracer's LLaMA block does not model (Gemma's, Granite's, Cohere's, ...)
LLAMA_READS = Family("", needs=msg('a LLaMA checkpoint needs its config.json (heads, key/value heads, rope_theta, rms_norm_eps are not in the tensors); '
                                   'put it beside the weights'),
                     fields=(Field("hidden_act", "text", "activation", "swiglu", "Hugging Face's hidden_act silu",
                                   "mlp: down_proj(silu(gate_proj(x)) * up_proj(x))",
                                   {"silu": "swiglu"}),
                             Field("rms_norm_eps", "number", "eps", 1e-6, "Hugging Face's rms_norm_eps"),
                             Field("hidden_activation", "text"), Field("head_dim"), Field("num_key_value_heads")),
                     refusals=(Refusal("hidden_act", lambda v: v not in (None, "silu"), msg("hidden_act {act}: tracer's SwiGLU gates with silu", act="")),
                               Refusal("hidden_activation", lambda v: v not in (None, "silu"),
                                       msg("hidden_activation {act}: tracer's SwiGLU gates with silu", act="")),
                               *(Refusal(key, lambda v: v not in (None, False, 0, 1, 1.0),
                                         msg("{key} = {value}: {why}, which tracer's LLaMA block does not model", key=key, value="", why=why))
                                 for key, why in UNMODELLED.items())),
                     embedding=msg('holds no LLaMA token embedding (model.embed_tokens.weight); is it a LLaMA checkpoint?'),
                     layer=msg('holds no LLaMA layer (model.layers.0.input_layernorm.weight)'), divides=None)  # its heads divide C unless head_dim is given


def _rope(cfg: Config) -> tuple[float | None, str, str, str]:
    """rope_theta and the rope type: transformers 5 writes rope_parameters, earlier versions rope_theta and rope_scaling."""
    params = cfg.mapping("rope_parameters")
    scaling = cfg.mapping("rope_scaling")
    theta: float | None
    if params.get("rope_theta") is not None:
        theta, where = cfg.number("rope_parameters.rope_theta", value=params["rope_theta"]), "rope_parameters.rope_theta"
    else:
        theta, where = cfg.number("rope_theta"), "rope_theta"
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    key = "rope_parameters" if params.get("rope_type") else "rope_scaling"
    for extra in ("factor", "partial_rotary_factor"):  # a scaling by any other name
        if params.get(extra) not in (None, 1, 1.0) and kind == "default":
            kind, key = f"default with {extra} {params[extra]}", "rope_parameters"
    if scaling and kind == "default" and set(scaling) - {"rope_type", "type", "rope_theta"}:
        kind = "default with " + ", ".join(sorted(set(scaling) - {"rope_type", "type", "rope_theta"}))
    return theta, str(kind), where, key


def rope_scaling(cfg: Config, kind: str, key: str) -> tuple[dict[str, Any] | None, str]:
    """Rope type linear or llama3 as the spec's ``rope_scaling`` (tracer/model/rope.py), with its note; None for the default.
    Every number the type needs must be there and positive; a key the type does not read is refused by name."""
    if kind not in ROPE_TYPES:
        return None, ""
    found = cfg.mapping(key)
    need = ("factor",) + (("low_freq_factor", "high_freq_factor", "original_max_position_embeddings") if kind == "llama3" else ())
    extra = sorted(set(found) - set(need) - {"rope_type", "type", "rope_theta"})
    refuse(cfg, [(bool(extra), msg("{key}.{extra}: rope type {rope} with {extra} is not modelled", key=key, extra=extra[0] if extra else "", rope=repr(kind)))])
    out: dict[str, Any] = {"type": kind}
    for k in need:
        value = cfg.number(f"{key}.{k}", value=found.get(k))
        if value is None:
            raise cfg.fail(f"{key}.{k}", msg("a positive number"), None)
        out[k] = int(value) if k == "original_max_position_embeddings" and value.is_integer() else value
    refuse(cfg, [(kind == "llama3" and out.get("high_freq_factor", 1) <= out.get("low_freq_factor", 0),
                  msg("{key}: high_freq_factor = {high} must be above low_freq_factor = {low}", key=key, high=out.get("high_freq_factor"),
                      low=out.get("low_freq_factor")))])
    note = (f"{key}: rope type linear, every speed / {out['factor']:g}" if kind == "linear" else
            f"{key}: rope type llama3 (Llama 3.1's), factor {out['factor']:g}, by wavelength against {out['original_max_position_embeddings']} positions")
    return out, note


def mistral_window(cfg: Config, model_type: str | None, layers: int) -> tuple[dict[str, Any] | None, str]:
    """Mistral's sliding_window W (every layer): query t reads keys t - W + 1..t (transformers' sliding_window_overlay,
    kv > q - W); LlamaForCausalLM reads no sliding_window, so a llama config's is not applied, nor one
    use_sliding_window turns off.  The window and the note saying where it came from."""
    window = cfg.integer("sliding_window") if model_type != "llama" and cfg.raw.get("use_sliding_window") is not False else None
    if not window:
        return None, ""
    return {"causal": True, "window": window}, f"sliding_window: each position reads itself and the {window - 1} before it"


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face LLaMA / Mistral: RMSNorm, SwiGLU, rotary positions turned as rotate_half does, grouped-query attention,
    the biases attention_bias and mlp_bias switch on."""
    return read_decoder(config, ckpt, layout, options, ("attention_bias", "mlp_bias"), mistral_window, LLAMA_DIFFERENT)


WindowRule = Callable[[Config, "str | None", int], "tuple[dict[str, Any] | None, str]"]  # the mask, and where it came from


def read_decoder(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options, switches: tuple[str, ...],
                 window_of: WindowRule, different: dict[str, Message]) -> ModelConfig:
    """A LLaMA-like decoder (LLaMA, Mistral, Qwen2): ``switches`` are the config's bias switches the family reads
    (the others' biases are fixed by its table), ``window_of`` its sliding-window rule, ``different`` the model_types
    it refuses by name."""
    if options.activation not in (None, "swiglu"):
        raise CheckpointError(at(f"--activation {options.activation}",
                                 msg("the llama layout's MLP is SwiGLU (down_proj(silu(gate_proj(x)) * up_proj(x))): expected swiglu")))
    read = LLAMA_READS._replace(differ=different).read(config, ckpt, layout, options)
    cfg, model_type, V, C, H, layers, F = read.cfg, read.kind, read.V, read.C, read.H, read.layers, read.F
    head_dim = read.values["head_dim"]
    H_kv = read.values["num_key_value_heads"] or H
    theta, rope_type, theta_from, rope_key = _rope(cfg)
    # what tracer's LLaMA block does not model beside the keys LLAMA refuses, one rule a line
    refuse(cfg, [
        (head_dim is None and C % H != 0, msg("num_attention_heads = {H} does not divide hidden_size = {C} (each head has width d = C / H)", H=H, C=C)),
        (rope_type not in ("default",) + ROPE_TYPES,
         msg("{key}: rope type {rope}: tracer's rotary positions are the default RoPE, linear or llama3", key=rope_key, rope=repr(rope_type))),
        (H % H_kv != 0, msg("num_key_value_heads = {H_kv} must divide num_attention_heads = {H}", H_kv=H_kv, H=H)),
    ] + bias_rules(cfg, ckpt, layout, layers, switches))
    if not cfg.has("num_key_value_heads"):
        cfg.notes["H_kv"] = "assumed: not in config.json (= num_attention_heads, as Hugging Face does)"
    q = layout.locate("blocks.0.attn.w_q", ckpt.key_set())
    if head_dim is not None and q is not None and q[1]:  # head_dim and q_proj's H * d rows must agree
        stored = ckpt.info(q[0].key).shape
        cfg.same("head_dim", stored[0] // H if stored[0] % H == 0 else stored[0], "d", q[0].key, stored)
    eps = read.settings["eps"]
    theta = cfg.setting("position_base", theta_from, theta, 10000.0, "LLaMA's default rope_theta")
    tie = cfg.flag("tie_word_embeddings")
    tied = bool(tie)
    has_head = tied or shape_of(ckpt, layout, "head") is not None
    if tie is None and shape_of(ckpt, layout, "head") is not None:
        cfg.assumed.append(("head", "separate"))
    own_width = head_dim is not None and (C % H != 0 or head_dim != C // H)  # Hugging Face's head_dim, set apart from C / H
    dims = {"C": C, "H": H} | ({"H_kv": H_kv} if H_kv != H else {}) | ({"d": head_dim} if own_width else {}) | {"F": F, "V": V}
    notes = {"C": "hidden_size" if cfg.has("hidden_size") else "the width of embed_tokens",
             "H_kv": "num_key_value_heads (grouped-query attention)",
             "d": "head_dim, not hidden_size / num_attention_heads: q_proj is [H*d, C], o_proj [C, H*d]; scores scaled by 1/sqrt(head_dim)",
             "F": "intermediate_size (gate_proj, up_proj)" if cfg.has("intermediate_size") else "the width of gate_proj",
             "V": "vocab_size (rows of embed_tokens)" if cfg.has("vocab_size") else "rows of embed_tokens"} | cfg.notes
    window_mask, window_note = window_of(cfg, model_type, layers)
    block = {"norm_order": "pre", "layers": layers, "norm": "rmsnorm", "eps": eps,
             "activation": "swiglu", "positions": "rotary", "position_base": theta, "rotary_pairing": "half", "mask": "causal",
             "final_norm": True, "head": ("tied" if tied else "separate") if has_head else "none"}
    notes |= {"norm": "LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * weight",
              "positions": "rotary (RoPE), inside each attention",
              "rotary_pairing": "Hugging Face's rotate_half: pairs (i, i + d/2), no weight permutation",
              "final_norm": "model.norm",
              "head": ("lm_head = embed_tokens (tie_word_embeddings)" if tied else
                       "lm_head.weight, untied" + ("" if tie is not None else f" (tie_word_embeddings assumed: {cfg.why_assumed()})")) if has_head
              else "no lm_head in the checkpoint (a bare LlamaModel)"}
    scaling, scaling_note = rope_scaling(cfg, rope_type, rope_key)
    if scaling is not None:
        block["rope_scaling"] = scaling
        notes["rope_scaling"] = scaling_note
    if window_mask is not None:
        block["mask"] = window_mask
        notes["mask"] = window_note
    base.score_head(cfg, ckpt, layout, block, dims, notes)
    return ModelConfig(layers, dims, block, notes, stored_dtype(ckpt, layout, "embedding"), "config.json", **cfg.record())


LAYOUT = Layout("llama", "Hugging Face LLaMA and Mistral-style models (LlamaForCausalLM, MistralForCausalLM)", table(), read_config,
                aliases=(("model.", ""),), model_types=("llama", "mistral"),  # a bare LlamaModel has no 'model.'
                # older checkpoints store the rotary frequencies per layer: LlamaRotaryEmbedding recomputes them from rope_theta
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",),
                differ=tuple(LLAMA_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
