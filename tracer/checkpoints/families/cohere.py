"""The cohere family: Hugging Face Cohere (CohereForCausalLM, Command-R), a parallel block under one LayerNorm, logits scaled.

CohereDecoderLayer normalises X once (input_layernorm) and adds attention and the MLP of that one norm to X:
Y = X + MHA(LN(X)) + FFN(LN(X)), tracer's ``norm_order: parallel_shared`` (Phi's).  What else differs from LLaMA,
each a tracer setting:

- CohereLayerNorm subtracts the mean and has a weight but no bias: ``norm: layernorm`` with beta zeros (no tensor
  to read), eps layer_norm_eps, for every norm and the final norm;
- the rotary positions pair coordinates (2i, 2i+1) (its rotate_half takes x[..., ::2] and x[..., 1::2], its cos and
  sin repeat_interleave each frequency): ``rotary_pairing: interleaved``;
- CohereForCausalLM multiplies the logits by logit_scale (0.0625 by default): ``logit_scale: s``, the head's
  raw_logits, then logits = s * raw_logits;
- attention_bias gives q, k, v and o_proj a bias; the MLP (SwiGLU) has none.

use_qk_norm (Command-R+'s per-head LayerNorm of q and k, a weight per head) is not modelled: refused by name, as is any
key not read.  The rest is read by llama.read_decoder.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import llama
from tracer.checkpoints.families.base import Config, Family, Field, Layout, ModelConfig, Options, Refusal, Take
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """LLaMA's keys without post_attention_layernorm (one norm feeds both branches) and without MLP biases; the norms' weights
    as gamma (CohereLayerNorm has no bias: beta is zeros)."""
    return {k: v for k, v in llama.table().items() if not k.startswith("blocks.{i}.norm2.") and ".ffn.b" not in k}


COHERE_KEYS = frozenset({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                         "head_dim", "hidden_act", "layer_norm_eps", "rope_parameters", "rope_scaling", "rope_theta", "tie_word_embeddings",
                         "attention_bias", "logit_scale", "use_qk_norm"})
COHERE_DIFFERENT = {k: v for k, v in llama.LLAMA_DIFFERENT.items() if k != "cohere"} | {
    "cohere2": msg("Cohere 2 alternates sliding-window layers, some without rotary positions, which the cohere layout does not read")}

COHERE_READS = Family("cohere", needs=msg("a Cohere checkpoint needs its config.json (heads, logit_scale, rope_theta are not in the tensors); "
                                          "put it beside the weights"),
                      reads=("cohere",), differ=COHERE_DIFFERENT, known=COHERE_KEYS,
                      fields=(Field("layer_norm_eps", "number", "eps", 1e-5, "CohereConfig's layer_norm_eps"),
                              Field("logit_scale", "number", "logit_scale", 0.0625, "CohereConfig's logit_scale"),
                              Field("use_qk_norm", "flag")),
                      refusals=(Refusal("use_qk_norm", bool, msg("use_qk_norm = true: Cohere's per-head LayerNorm of q and k (a weight per head) "
                                                                 "is not modelled by tracer")),))


def _no_window(cfg: Config, model_type: str | None, layers: int) -> tuple[dict[str, Any] | None, str]:
    return None, ""  # CohereModel's mask is causal (its config has no sliding_window: refused by name if given)


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Cohere: LLaMA's settings (llama.read_decoder), then the parallel block under one LayerNorm without bias,
    interleaved rotary pairs and the scaled logits."""
    read = COHERE_READS.read(config, ckpt, layout, options)
    cfg, eps, scale = read.cfg, read.settings["eps"], read.settings["logit_scale"]
    rest = {k: v for k, v in cfg.raw.items() if k not in ("layer_norm_eps", "logit_scale", "use_qk_norm")} | {"rms_norm_eps": eps}
    base = llama.read_decoder(rest, ckpt, layout, options._replace(eps=None), ("attention_bias",), _no_window, COHERE_DIFFERENT)
    block: dict[str, Any] = {}
    for key, value in base.block.items():
        block[key] = {"norm_order": "parallel_shared", "norm": "layernorm", "eps": eps, "rotary_pairing": "interleaved"}.get(key, value)
        if key == "head" and value != "none" and scale != 1:
            block["logit_scale"] = scale
    notes = dict(base.notes) | {
        "norm_order": "CohereDecoderLayer: one input_layernorm, attention and MLP in parallel, Y = X + MHA(LN(X)) + FFN(LN(X))",
        "norm": "CohereLayerNorm: (x - mean) / sqrt(var + eps) * weight, no bias (beta zeros)",
        "eps": cfg.notes["eps"], "logit_scale": cfg.notes["logit_scale"] + ": logits = logit_scale * lm_head(x)",
        "rotary_pairing": "Cohere's rotate_half: pairs (2i, 2i+1), each frequency repeated twice (repeat_interleave)",
        "final_norm": "model.norm (a CohereLayerNorm)"}
    assumed = tuple(a for a in base.assumed if a[0] != "eps") + tuple(a for a in cfg.assumed if a[0] in ("eps", "logit_scale"))
    return base._replace(block=block, notes=notes, assumed=assumed)


LAYOUT = Layout("cohere", "Hugging Face Cohere (CohereForCausalLM): one LayerNorm before a parallel attention and MLP, the logits scaled",
                table(), read_config, aliases=(("model.", ""),), model_types=("cohere",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(COHERE_DIFFERENT))
