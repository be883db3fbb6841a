"""The mixtral family: Hugging Face Mixtral (MixtralForCausalLM), LLaMA's block with a mixture of experts for its MLP.

Attention, the norms, the rotary positions and the head are LLaMA's (Mistral's sliding window included), so the
table and the config reading start from the llama family's; the MLP is ``block_sparse_moe``: a router
``gate`` [E,C] and E SwiGLU experts ``experts.{e}.w1/w3/w2`` (gate, up, down), tracer's ``moe`` weight group
(router, w1_e, w3_e, w2_e).  Hugging Face's MixtralTopKRouter takes a softmax over the E experts, keeps the
``num_experts_per_tok`` largest and divides them by their sum (always: Mixtral has no norm_topk_prob); the
experts' outputs, each times its gate, are added: tracer's router, router_softmax, top_k and expert_mix steps.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import base, llama
from tracer.checkpoints.families.base import Family, Field, Layout, ModelConfig, Options, Refusal, Take, group, refuse, shape_of
from tracer.checkpoints.formats import Checkpoint, received
from tracer.errors import CheckpointError
from tracer.messages import at, msg

MAX_EXPERTS = 64  # the table maps experts 0..63 (Mixtral 8x7B and 8x22B have 8); more are refused by name


def table() -> dict[str, Take]:
    """LLaMA's table without its MLP, and the mixture of experts: every nn.Linear [out,in], transposed, no biases."""
    L = "model.layers.{i}.block_sparse_moe."
    out = {k: v for k, v in llama.table().items() if ".ffn." not in k}
    moe = {"router": Take(L + "gate.weight", transpose=True)}
    for e in range(MAX_EXPERTS):
        moe |= {f"{w}_{e}": Take(f"{L}experts.{e}.{w}.weight", transpose=True) for w in ("w1", "w3", "w2")}
    return out | group("blocks.{i}.", "moe", moe)


# config.json keys of Mixtral's that do not change the forward pass tracer traces (training and outputs only)
FORWARD_ONLY = {"router_aux_loss_coef": "the load-balancing loss's weight (training)",
                "output_router_logits": "whether the model returns the router logits",
                "router_jitter_noise": "noise on the router's input, applied in training only"}


# what the mixtral reader reads before LLaMA's reader reads the rest
MIXTRAL_READS = Family("mixtral", needs=msg("a Mixtral checkpoint needs its config.json (heads, experts, top-k, rope_theta are not all in the tensors); "
                                           "put it beside the weights"),
                       fields=(Field("num_local_experts"), Field("num_experts_per_tok")),
                       refusals=(Refusal("norm_topk_prob", lambda v: v is False,
                                         msg("norm_topk_prob = false: Mixtral's gates are renormalised over the chosen experts, which tracer's top_k does")),))


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    """LLaMA's settings (read by the llama family's reader) and the experts: num_local_experts E, num_experts_per_tok k."""
    read = MIXTRAL_READS.read(config, ckpt, layout, options)
    cfg, experts, top_k = read.cfg, read.values["num_local_experts"], read.values["num_experts_per_tok"]
    router = shape_of(ckpt, layout, "blocks.0.moe.router")
    if router is None:
        raise CheckpointError(at(ckpt.path, msg("holds no Mixtral router (model.layers.0.block_sparse_moe.gate.weight); is it a Mixtral checkpoint?")))
    E = router[1]
    refuse(cfg, [
        (experts is None, msg("num_local_experts is missing: the number of experts (the router has {E} rows)", E=E)),
        (top_k is None, msg("num_experts_per_tok is missing: how many experts each position is sent to")),
        (experts is not None and experts > MAX_EXPERTS, msg("num_local_experts = {n}: the mixtral layout maps at most {m} experts", n=experts, m=MAX_EXPERTS)),
        (top_k is not None and experts is not None and top_k > experts,
         msg("num_experts_per_tok = {k} is more than num_local_experts = {n}", k=top_k, n=experts)),
    ])
    assert experts is not None and top_k is not None
    cfg.same("num_local_experts", E, "E", "model.layers.0.block_sparse_moe.gate.weight", (E, router[0]))
    for key in FORWARD_ONLY:
        if key in ("router_aux_loss_coef", "router_jitter_noise"):
            cfg.number(key, positive=False)
        else:
            cfg.flag(key)
    # LLaMA's reader refuses a mixture of experts it does not model: here the experts are read above, so it reads the rest
    rest = {k: v for k, v in cfg.raw.items() if k not in ("num_local_experts", "num_experts_per_tok", *FORWARD_ONLY)}
    base = llama.read_config(rest, ckpt, layout, options)
    w1 = shape_of(ckpt, layout, "blocks.0.moe.w1_0")
    if w1 is not None and w1[1] != base.dims["F"]:
        raise cfg.refuse(msg("intermediate_size = {F}, but the checkpoint's tensors have F = {found}; the config does not describe these weights",
                             F=base.dims["F"], found=w1[1]))
    block = dict(base.block, ffn={"experts": experts, "top_k": top_k})
    notes = dict(base.notes, ffn=f"num_local_experts {experts}, num_experts_per_tok {top_k}: router softmax over the experts, "
                                 "the top k renormalised (MixtralTopKRouter)",
                 F="intermediate_size (each expert's w1, w3)",
                 activation="each expert: w2(silu(w1(x)) * w3(x)) (block_sparse_moe.experts)")
    if cfg.raw.get("router_jitter_noise") not in (None, 0, 0.0):
        notes["ffn"] += f"; router_jitter_noise {received(cfg.raw['router_jitter_noise'])} acts in training only"
    return base._replace(block=block, notes=notes)


LAYOUT = Layout("mixtral", "Hugging Face Mixtral (MixtralForCausalLM): LLaMA's block with a mixture of SwiGLU experts", table(), read_config,
                aliases=(("model.", ""),), model_types=("mixtral",),
                harmless=(r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",), float32=base.RMS_ROTARY_SOFTMAX)
