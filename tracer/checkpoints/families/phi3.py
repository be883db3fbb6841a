"""The phi3 family: Hugging Face Phi-3 (Phi3ForCausalLM: Phi-3, Phi-3.5, Phi-4-mini), LLaMA's block with packed projections.

Phi3DecoderLayer is LLaMA's (RMSNorm, Pre-Norm, SwiGLU, rotate_half, grouped-query attention, no biases); what differs
is where the weights are:

- ``self_attn.qkv_proj`` [H*d + 2*H_kv*d, C] holds q, k and v one after the other: tracer's w_q, w_k, w_v are its rows
  0..H*d-1, the next H_kv*d and the last H_kv*d (a Take of unequal ``parts``, C_q, C_kv, C_kv, sized by the spec);
- ``mlp.gate_up_proj`` [2F, C] holds the gate then the up projection (Phi3MLP chunks it in two): w1 and w3;
- ``rope_parameters.partial_rotary_factor`` (Phi-4-mini's 0.75) turns only each head's first int(d * factor)
  coordinates, as rotate_half pairs them: ``rotary_dim``;
- ``sliding_window`` (Phi-3-mini's 2047), when set, is every layer's window (Phi3Model's create_sliding_window_causal_mask).

The rope type longrope (Phi-3's 128k models: per-frequency short and long factors) is not modelled: refused by name,
as is a head_dim apart from hidden_size / num_attention_heads.  The rest is read by llama.read_decoder.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Take, group, refuse
from tracer.checkpoints.families.gpt_neox import rope, rotary_dim
from tracer.checkpoints.formats import Checkpoint
from tracer.messages import msg


def table() -> dict[str, Take]:
    """LLaMA's keys, without biases (Phi-3 has none), q/k/v from qkv_proj's rows and the gate and up from gate_up_proj's halves."""
    L = "model.layers.{i}."
    out = {k: v for k, v in llama.table().items() if not any(w in k for w in (".attn.b_", ".attn.w_q", ".attn.w_k", ".attn.w_v", ".ffn."))}
    qkv = L + "self_attn.qkv_proj.weight"
    out |= group("blocks.{i}.", "attn", {f"w_{x}": Take(qkv, part=j, transpose=True, parts=("C_q", "C_kv", "C_kv")) for j, x in enumerate("qkv")})
    gate_up = L + "mlp.gate_up_proj.weight"
    out |= group("blocks.{i}.", "ffn", {"w1": Take(gate_up, 2, 0, 0, True), "w3": Take(gate_up, 2, 1, 0, True),
                                        "w2": Take(L + "mlp.down_proj.weight", transpose=True)})
    return out


# the config.json keys Phi3Config writes that the phi3 reader (with llama.read_decoder) reads; any other not harmless is refused by name
PHI3_KEYS = frozenset({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                       "hidden_act", "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor",
                       "tie_word_embeddings", "sliding_window", "head_dim",
                       "original_max_position_embeddings"})  # longrope's (refused) and generation's switch of it: not the default rope's
PHI3_DIFFERENT = {k: v for k, v in llama.LLAMA_DIFFERENT.items() if k != "phi"} | {
    "phimoe": msg("a mixture-of-experts MLP"), "phi4": msg("a multimodal model"),
    "phi": msg("Phi uses LayerNorm and one norm for a parallel attention and MLP (the phi layout reads it)")}

PHI3_READS = Family("phi3", needs=msg("a Phi-3 checkpoint needs its config.json (heads, key/value heads, rope_theta are not in the tensors); "
                                      "put it beside the weights"),
                    reads=("phi3",), differ=PHI3_DIFFERENT, known=PHI3_KEYS,
                    fields=(Field("head_dim"), Field("hidden_size"), Field("num_attention_heads")))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """Hugging Face Phi-3: LLaMA's settings (llama.read_decoder) from packed q/k/v and gate/up tensors, the partial rotary
    factor as rotary_dim, every key not modelled refused by name."""
    read = PHI3_READS.read(config, ckpt, layout, options)
    cfg, got = read.cfg, read.values
    C, H, head_dim = got["hidden_size"], got["num_attention_heads"], got["head_dim"]
    refuse(cfg, [(head_dim is not None and C is not None and H and head_dim * H != C,
                  msg("head_dim = {head_dim}: the phi3 layout reads heads of width hidden_size / num_attention_heads only", head_dim=head_dim))])
    _, pct, _, _, pct_from = rope(cfg)
    params = dict(cfg.mapping("rope_parameters"))
    params.pop("partial_rotary_factor", None)
    rest = {k: v for k, v in cfg.raw.items() if k not in ("partial_rotary_factor", "head_dim", "original_max_position_embeddings")}
    if params:
        rest["rope_parameters"] = params
    base = llama.read_decoder(rest, ckpt, layout, options, (), llama.mistral_window, PHI3_DIFFERENT)
    C, H = base.dims["C"], base.dims["H"]
    H_kv = base.dims.get("H_kv", H)
    d = C // H
    qkv = "model.layers.0.self_attn.qkv_proj.weight"
    stored = ckpt.info(qkv).shape if qkv in ckpt.key_set() else None
    refuse(cfg, [
        (stored is not None and stored[0] != (H + 2 * H_kv) * d,
         msg("{key} has {rows} rows, but num_attention_heads = {H} and num_key_value_heads = {H_kv} of width {d} need (H + 2 H_kv) d = {want}",
             key=qkv, rows=stored[0] if stored else 0, H=H, H_kv=H_kv, d=d, want=(H + 2 * H_kv) * d)),
        (pct is not None and not 0 < pct <= 1, msg("{key} = {value}: expected a fraction above 0, at most 1 (the whole head turned)", key=pct_from, value=pct)),
    ])
    block, notes = dict(base.block), dict(base.notes)
    r = d if pct is None else rotary_dim(cfg, pct, pct_from, d, 1.0, "")
    if r != d:  # written beside the other rotary settings
        block = {k: v for key, value in block.items() for k, v in ((key, value), ("rotary_dim", r))[:2 if key == "rotary_pairing" else 1]}
        notes |= {"rotary_dim": cfg.notes["rotary_dim"], "rotary_pairing": "Hugging Face's rotate_half over the rotary part: pairs (i, i + r/2)"}
    notes |= {"norm": "Phi3RMSNorm: x / sqrt(mean(x^2) + eps) * weight",
              "positions": "rotary (RoPE), inside each attention; q, k and v are the rows of self_attn.qkv_proj (H*d, H_kv*d, H_kv*d)",
              "F": "intermediate_size (each half of mlp.gate_up_proj)",
              "activation": "Phi3MLP: down_proj(silu(gate) * up), gate and up the two halves of mlp.gate_up_proj (w1, w3)"}
    return base._replace(block=block, notes=notes)


LAYOUT = Layout("phi3", "Hugging Face Phi-3 (Phi3ForCausalLM): LLaMA's block with q, k, v packed in qkv_proj and gate, up in gate_up_proj",
                table(), read_config, aliases=(("model.", ""),), model_types=("phi3",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), differ=tuple(PHI3_DIFFERENT), float32=base.RMS_ROTARY_SOFTMAX)
