"""The gemma family: Hugging Face Gemma (GemmaForCausalLM), LLaMA's block with Gemma's three choices made visible.

Gemma's tensors are LLaMA's (model.embed_tokens, q/k/v/o_proj, gate/up/down_proj, input_layernorm,
post_attention_layernorm, model.norm; no MLP biases), and its attention is LLaMA's (rotate_half, grouped-query
heads, 1/sqrt(d)).  What differs is written into the spec as tracer settings, each a stage or an op of its own:

- ``embedding_scale: true``: GemmaTextScaledWordEmbedding multiplies the embeddings by hidden_size**0.5
  (the ``x`` stage, op embed_scale);
- ``norm: rmsnorm_offset``: GemmaRMSNorm is x / sqrt(mean(x^2) + eps) * (1 + weight), the weight as stored
  (not converted to 1 + weight at import), for every norm and the final norm (op rms_norm_offset);
- ``activation: geglu``: GemmaMLP is down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)) (hidden_act
  gelu_pytorch_tanh; the legacy 'gelu' of the released configs is computed so by transformers too);
- the head is tied (tie_word_embeddings, Gemma's default);
- head_dim other than hidden_size / num_attention_heads (the released Gemma 7B: 16 heads of 256 over 3072) is
  ``dims.d``, as llama.read_decoder reads it for LLaMA.

The rest is read by the llama family's reader (llama.read_decoder), after this file has refused every
config.json key it does not model, by name.  Gemma 2 (model_type gemma2) is its own family (gemma2.py, which reads
Gemma's settings through read_config here): through this layout it is refused by name.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama
from tracer.checkpoints.families.base import Config, Family, Field, Layout, ModelConfig, Options, Refusal, Take
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def table() -> dict[str, Take]:
    """LLaMA's table without the MLP biases (GemmaMLP's projections have none): a bias tensor in the file is left
    unread, and so refused by the import; q/k/v/o_proj keep their optional biases (attention_bias)."""
    return {k: v for k, v in llama.table().items() if not (".ffn." in k and k.rsplit(".", 1)[-1] in ("b1", "b2", "b3"))}


# the hidden_act values GemmaMLP computes as GELU's tanh approximation (transformers maps the legacy 'gelu' of
# the released Gemma configs to gelu_pytorch_tanh)
TANH_ACTS = ("gelu_pytorch_tanh", "gelu_new", "gelu")
# config.json keys the gemma reader reads (with llama.read_decoder's); any other key not harmless is refused by name
GEMMA_KEYS = frozenset({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                        "num_key_value_heads", "head_dim", "hidden_act", "hidden_activation", "rms_norm_eps", "rope_theta",
                        "rope_parameters", "rope_scaling", "tie_word_embeddings", "attention_bias", "use_bidirectional_attention"})
# Gemma's relatives whose maths differ: refused by name, with what is not modelled
GEMMA2 = msg("Gemma 2 adds a norm after each sublayer, soft-caps the scores and the logits and alternates sliding-window layers "
             "(the gemma2 layout reads it)")
GEMMA_DIFFERENT = {"gemma2": GEMMA2,
                   "gemma3": msg("Gemma 3 normalises q and k per head and turns its sliding layers at a base of their own "
                                 "(the gemma3 layout reads its text model)"),
                   "recurrent_gemma": msg("RecurrentGemma mixes recurrent blocks with attention, which tracer does not model"),
                   "paligemma": msg("PaliGemma reads images as well as tokens")}
MODEL_TYPES = ("gemma",)  # gemma2: its own family (gemma2.py), refused through this layout by name


def no_window(cfg: Config, model_type: str | None, layers: int) -> tuple[dict[str, Any] | None, str]:
    return None, ""  # GemmaForCausalLM has no sliding window (its config no sliding_window key: refused if given)


# what the gemma reader reads before LLaMA's reader reads the rest: Gemma's keys (any other refused by name) and its MLP's activation
GEMMA_READS = Family("", needs=msg("a Gemma checkpoint needs its config.json (heads, key/value heads, rope_theta, rms_norm_eps are not in the tensors); "
                                   "put it beside the weights"),
                     reads=("gemma",), differ=GEMMA_DIFFERENT, known=GEMMA_KEYS,
                     others=msg("the gemma layout reads model_type gemma only (another family's norms and embeddings differ)"),
                     fields=(Field("hidden_act", "text"), Field("hidden_activation", "text"), Field("use_bidirectional_attention", "flag")),
                     refusals=(Refusal("hidden_act", lambda v: v is not None and v not in TANH_ACTS,
                                       msg("hidden_act {act}: the gemma layout's MLP is GeGLU, its gate through GELU's tanh approximation "
                                           "(gelu_pytorch_tanh)", act="")),
                               Refusal("hidden_activation", lambda v: v is not None and v not in TANH_ACTS[:2],
                                       msg("hidden_activation {act}: transformers 4 computes Gemma's MLP with it, transformers 5 with hidden_act; "
                                           "tracer's GeGLU is the tanh approximation (gelu_pytorch_tanh)", act="")),
                               Refusal("use_bidirectional_attention", lambda v: v is True,
                                       msg("use_bidirectional_attention = true: every token reads every other, "
                                           "which the gemma layout (causal) does not model"))))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Gemma: LLaMA's settings (read by llama.read_decoder) and Gemma's scaled embeddings, (1 + w) RMSNorm
    and GeGLU, each a spec setting; every key not modelled refused by name first."""
    read = GEMMA_READS.read(config, ckpt, layout, options)
    cfg, act = read.cfg, read.values["hidden_act"]
    if options.activation not in (None, "geglu"):
        raise CheckpointError(at(f"--activation {options.activation}",
                                 msg("the gemma layout's MLP is GeGLU (down_proj(gelu_tanh(gate_proj(x)) * up_proj(x))): expected geglu")))
    # the rest is LLaMA's: read by its reader, without the keys read here (it would refuse a GELU MLP)
    rest = {k: v for k, v in cfg.raw.items() if k not in ("hidden_act", "hidden_activation", "use_bidirectional_attention", "model_type")}
    tie_assumed = cfg.flag("tie_word_embeddings") is None
    if tie_assumed:
        rest["tie_word_embeddings"] = True  # GemmaConfig's default
    base = llama.read_decoder(rest, ckpt, layout, options._replace(activation=None), ("attention_bias",), no_window, {})
    assumed = [a for a in base.assumed if a[0] != "activation"]
    notes = dict(base.notes)
    if act is not None:
        legacy = " (transformers computes the legacy 'gelu' of Gemma's configs as gelu_pytorch_tanh)"
        notes["activation"] = f"hidden_act {act}" + (legacy if act == "gelu" else "")
    else:
        assumed.append(("activation", "geglu"))
        notes["activation"] = f"assumed: {base.assumed_why or 'not in config.json'} (GemmaConfig's default hidden_act gelu_pytorch_tanh)"
    block: dict[str, Any] = {}
    for key, value in base.block.items():
        block[key] = {"norm": "rmsnorm_offset", "activation": "geglu"}.get(key, value)
        if key == "positions":
            block["embedding_scale"] = True
    notes |= {"norm": "GemmaRMSNorm: x / sqrt(mean(x^2) + eps) * (1 + weight), the weight as stored",
              "embedding_scale": "GemmaTextScaledWordEmbedding: embed_tokens(ids) * hidden_size**0.5",
              "final_norm": "model.norm (a GemmaRMSNorm)"}
    if tie_assumed and block.get("head") == "tied":
        notes["head"] = "lm_head = embed_tokens (tie_word_embeddings assumed: not in config.json; GemmaConfig's default is true)"
    return base._replace(block=block, notes=notes, assumed=tuple(assumed))


LAYOUT = Layout("gemma", "Hugging Face Gemma (GemmaForCausalLM): scaled embeddings, RMSNorm with (1 + w), GeGLU, a tied head",
                table(), read_config, aliases=(("model.", ""),), model_types=MODEL_TYPES,
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(GEMMA_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)

