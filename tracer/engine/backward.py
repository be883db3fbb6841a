"""Walk a spec's step list in reverse: one backward function per op, as the executor has one forward per op.

Each stage's gradient is complete when its step is reached (every step that reads it comes later in
the forward order), so the walk hands each step its output's gradient and each function adds what it
owes to its inputs' gradients and to its weights'.  The forward values come from a trace recorded in
full (every stage, attention internals included).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np

from tracer.engine import interventions, kernels
from tracer.engine.executor import Point, Recording, Stage, _blocks, _value_copy, attention_mask, experts_of, pool_index_of, qk_scale, relative_buckets_of
from tracer.engine.kernels import embeddings, ffn, multihead, norms
from tracer.model.activations import activation_of, is_gated
from tracer.model.blocks import ATTN_MEANINGS, Step, internal_prefix
from tracer.model.ops import OPS

ATTN_ORDER = ("heads", "weights", "scores", "q", "k", "v")  # the internals in the order the backward pass reaches them


def norm(a: np.ndarray) -> float:
    """The Euclidean norm, summed in float64 one block of about a million values at a time: no temporary
    the size of a [B,H,T,S] stage (a float64 block is a dot product with itself, without any)."""
    if a.flags.c_contiguous:
        flat = a.reshape(-1)
        parts: Iterable[np.ndarray] = (flat[i:i + NORM_BLOCK] for i in range(0, flat.size, NORM_BLOCK))
    else:
        parts = _blocks(a, NORM_BLOCK)
    return float(np.sqrt(sum(_squares(p) for p in parts)))


def _squares(p: np.ndarray) -> float:
    return float(np.dot(p, p) if p.dtype == np.float64 and p.ndim == 1 else np.sum(np.square(p, dtype=np.float64)))


NORM_BLOCK = 1 << 20


class Norms(NamedTuple):
    grad: float  # |dL/dstage|
    value: float  # |stage|


class Backward:
    def __init__(self, trace: Recording, params: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
                 on_send: Callable[[Backward, Step, str, np.ndarray], None] | None = None,
                 point: tuple[int, int] | None = None) -> None:
        self.trace = trace
        self.on_send = on_send  # sees what each step sends to each stage it reads (tracer probe --exact)
        # the table's (b, t): once the walk is done with a stage, its gradient and value are kept as their values at
        # (b, t) and their norms, and the arrays go (their memory serves the rest of the walk)
        self.point = point
        self.released: dict[str, tuple[Point, Norms, Point]] = {}  # stage -> its gradient, the norms, its value
        self.step: Step | None = None
        self.spec = trace.spec
        self.params = params
        self.inputs = inputs
        self.grads: dict[str, np.ndarray] = {}
        self.weight_grads: dict[str, np.ndarray] = {}
        self.owned: set[str] = set()  # stages whose gradient array is theirs alone: the next one adds into it in place
        self.interventions = interventions.by_stage(trace.spec)

    def value(self, name: str) -> np.ndarray:
        return self.trace.stages[name].array

    def send(self, name: str, g: np.ndarray) -> None:
        """Add g to the gradient of stage ``name`` (a stage read by several steps gathers from each)."""
        shape = self.trace.stages[name].shape
        if g.shape != shape:  # a stage cut short after a position violation (--keep-going)
            g = _fit(g, shape)
        if self.on_send is not None and self.step is not None:
            self.on_send(self, self.step, name, g)
        have = self.grads.get(name)
        if have is None:  # kept as it is, never copied: shared with another stage (a residual add) until a second gradient comes
            if g.flags.owndata and g.flags.writeable and not any(g is v for v in self.grads.values()):
                self.owned.add(name)
            self.grads[name] = g
        elif name in self.owned:
            have += g
        else:  # copy on write: the first gradient is also another stage's (or a view): the sum is a new array
            self.grads[name] = have + g
            self.owned.add(name)

    def send_weight(self, name: str, g: np.ndarray) -> None:
        """The kernels return weight gradients no one else holds (tracer/engine/kernels): kept without a copy."""
        have = self.weight_grads.get(name)
        self.weight_grads[name] = g if have is None else have + g

    def run(self, seed: dict[str, np.ndarray]) -> None:
        for name, s in seed.items():
            self.send(name, s)
            self.owned.discard(name)  # the caller's array (the loss's seed may be a forward stage itself): never written
        for step in reversed(self.spec.steps):
            if step.name not in self.trace.stages:
                continue  # the forward stopped before it
            if step.name not in self.grads:  # the loss does not read this stage: its gradient is zero
                self.grads[step.name] = _zeros(self.value(step.name))
            self.step = step
            if self.point is not None:  # before the step, which may write over its own value (spare)
                self.keep_point(step.name)
            iv = self.interventions.get(step.name)
            if iv is None or iv.kind == "heads":  # a head ablated: backward_mha masks W_O as the forward did
                OPS[step.op].run_backward()(self, step, self.grads[step.name])
            elif iv.kind == "mean":  # y = mean over positions of the step's value: each position gets the mean gradient
                self.intervened_backward(step, self.grads[step.name])
            # zero, set, from: the stage is a constant; nothing goes back to the steps before it
            if self.point is not None:
                self.release(step)

    def intervened_backward(self, step: Step, g: np.ndarray) -> None:
        """The step's own backward, fed the gradient's mean over positions, with its value before the mean in place."""
        fwd = self.trace.stages[step.name]
        axis = interventions.position_axis(fwd.axes)
        assert axis is not None
        mean_g = np.broadcast_to(g.mean(axis=axis, keepdims=True), g.shape).copy()
        ablated = fwd.data
        fwd.data = self.trace.originals[step.name]
        try:
            OPS[step.op].run_backward()(self, step, mean_g)
        finally:
            fwd.data = ablated

    def keep_point(self, name: str) -> None:
        """The stage's gradient (complete once its step is reached) and value, as their values at (b, t) and their norms."""
        assert self.point is not None
        b, t = self.point
        fwd, g = self.trace.stages[name], self.grads[name]
        if fwd.data is not None and name not in self.released:
            self.released[name] = (Point(tuple(g.shape), b, t, _value_copy(g, fwd.axes, b, t)), Norms(norm(g), norm(fwd.data)),
                                   Point(tuple(fwd.data.shape), b, t, _value_copy(fwd.data, fwd.axes, b, t)))

    def spare(self, name: str) -> bool:
        """Whether the step of stage ``name`` may write over the stage's value: it is kept as one value (keep_point
        has taken it) and no other array the walk still holds (a stage, a gradient, a weight, an input) shares its memory."""
        a = self.trace.stages[name].data
        if self.point is None or a is None or name not in self.released or not a.flags.writeable:
            return False
        held = [s.data for n, s in self.trace.stages.items() if n != name and s.data is not None]
        held += [*self.grads.values(), *self.params.values(), *self.inputs.values()]
        return not any(np.may_share_memory(a, other) for other in held)

    def release(self, step: Step) -> None:
        """The stage of a step the walk has just done, and its attention internals: no later step reads their values
        (the readers of a stage come after it in the forward order) nor sends to their gradients."""
        for name in [step.name] + internal_names(step):
            fwd = self.trace.stages.get(name)
            if fwd is None or fwd.data is None:
                continue
            self.keep_point(name)  # the internals: their gradients are made by the step itself
            del self.grads[name]
            self.owned.discard(name)
            self.trace.stages[name] = Stage(name, None, fwd.axes, fwd.meaning, fwd.internal, point=self.released[name][2])


def _zeros(like: np.ndarray) -> np.ndarray:  # np.zeros, not zeros_like: calloc'd pages cost nothing until written
    return np.zeros(like.shape, dtype=like.dtype)


def _fit(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """g placed into zeros of ``shape`` along its leading part (a forward stage cut to T_max positions)."""
    out = np.zeros(shape, dtype=g.dtype)
    out[tuple(slice(0, n) for n in g.shape)] = g[tuple(slice(0, n) for n in shape)]
    return out


# -- entry and exit ----------------------------------------------------------
def backward_embed(bw: Backward, step: Step, g: np.ndarray) -> None:
    table = bw.params["embedding"]
    bw.send_weight("embedding", embeddings.embedding_backward(g, bw.inputs[step.stream or "tokens"], table.shape[0]))


def backward_input(bw: Backward, step: Step, g: np.ndarray) -> None:  # no weights, no earlier stage
    return None


backward_sinusoidal = backward_input  # no weights, no earlier stage


def backward_position_table(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send_weight("position", embeddings.position_backward(g, bw.params["position"].shape[0]))


def backward_add_position(bw: Backward, step: Step, g: np.ndarray) -> None:
    dh, dpos = embeddings.add_position_backward(g)
    bw.send(step.inputs[0], dh)
    bw.send(step.inputs[1], dpos)


def backward_head(bw: Backward, step: Step, g: np.ndarray) -> None:
    tied = bw.spec.block.head == "tied"
    w = bw.params["embedding"].T if tied else bw.params["head"]
    dh, dw = embeddings.head_backward(g, bw.value(step.inputs[0]), w)
    bw.send(step.inputs[0], dh)
    bw.send_weight("embedding" if tied else "head", dw.T if tied else dw)
    if bw.spec.block.head_bias:
        bw.send_weight("head_bias", g.reshape(-1, g.shape[-1]).sum(axis=0))


def backward_softmax(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send(step.inputs[0], kernels.softmax_backward(g, bw.value(step.name)))


# -- block ops ---------------------------------------------------------------
def backward_layer_norm(bw: Backward, step: Step, g: np.ndarray) -> None:
    x = bw.value(step.inputs[0])
    gamma, beta = bw.params[f"{step.weights}.gamma"], bw.params[f"{step.weights}.beta"]
    axis = bw.trace.stages[step.inputs[0]].axes.index(step.axis or "C")
    dx, dgamma, dbeta = norms.layer_norm_backward(g, x, gamma, beta, step.epsilon(), axis)
    bw.send(step.inputs[0], dx)
    bw.send_weight(f"{step.weights}.gamma", dgamma)
    bw.send_weight(f"{step.weights}.beta", dbeta)


def backward_rms_norm(bw: Backward, step: Step, g: np.ndarray) -> None:
    dx, dgamma = norms.rms_norm_backward(g, bw.value(step.inputs[0]), bw.params[f"{step.weights}.gamma"],
                                           step.epsilon())
    bw.send(step.inputs[0], dx)
    bw.send_weight(f"{step.weights}.gamma", dgamma)


def backward_batch_norm(bw: Backward, step: Step, g: np.ndarray) -> None:
    gamma, beta = bw.params[f"{step.weights}.gamma"], bw.params[f"{step.weights}.beta"]
    dx, dgamma, dbeta = norms.batch_norm_backward(g, bw.value(step.inputs[0]), gamma, beta, step.epsilon())
    bw.send(step.inputs[0], dx)
    bw.send_weight(f"{step.weights}.gamma", dgamma)
    bw.send_weight(f"{step.weights}.beta", dbeta)


def backward_add(bw: Backward, step: Step, g: np.ndarray) -> None:
    a, b = (bw.value(n) for n in step.inputs)
    da, db = kernels.add_backward(g, a.shape, b.shape)
    bw.send(step.inputs[0], da)
    bw.send(step.inputs[1], db)


def backward_identity(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send(step.inputs[0], g)


def backward_relu(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send(step.inputs[0], ffn.relu_backward(g, bw.value(step.inputs[0])))


def backward_select(bw: Backward, step: Step, g: np.ndarray) -> None:
    x = bw.trace.stages[step.inputs[0]]
    assert step.start is not None and step.stop is not None
    bw.send(step.inputs[0], kernels.select_backward(g, x.shape, x.axes.index(step.axis or "B"), step.start, step.stop))


def backward_linear(bw: Backward, step: Step, g: np.ndarray) -> None:
    w, b = bw.params[f"{step.weights}.w"], bw.params[f"{step.weights}.b"]
    dx, dw, db = kernels.linear_backward(g, bw.value(step.inputs[0]), w, b)
    bw.send(step.inputs[0], dx)
    bw.send_weight(f"{step.weights}.w", dw)
    bw.send_weight(f"{step.weights}.b", db)


def backward_mha(bw: Backward, step: Step, g: np.ndarray) -> None:
    cross = step.op == "cross_mha"
    xq = bw.value(step.inputs[0])
    xkv = bw.value(step.inputs[1]) if cross else xq
    keys = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o") + (("q_norm", "k_norm") if step.qk_norm else ())
    w = {k: qk_scale(step, bw.params[f"{step.weights}.{k}"]) if k.endswith("_norm") else bw.params[f"{step.weights}.{k}"] for k in keys}
    ablated = bw.interventions.get(step.name)
    mask = None
    if ablated is not None and ablated.kind == "heads":  # as the forward: the head's rows of W_O meet zeros
        mask = ablated.head_mask(w["w_o"].shape[:1], w["w_o"].dtype)[:, None]
        w["w_o"] = w["w_o"] * mask
    prefix = internal_prefix(step)
    # the weights not recorded (tracer grad's plain table shows neither them nor their gradient): made again head by head
    parts = {k: bw.value(f"{prefix}.{k}") for k in ("q", "k", "v", "weights", "heads") if f"{prefix}.{k}" in bw.trace.stages}
    causal, visible = attention_mask(bw.spec, step, xq.shape[1], False)
    if "weights" in parts:  # the forward's weights are at hand, 0 where masked: no mask is needed
        visible = None
    dxq, dxkv, internals, dw = multihead.mha_backward(g, xq, xkv, parts, w, bw.spec.dims.H, step.base, step.axis == "queries",
                                                       step.pairing or "interleaved", causal=causal, visible=visible,
                                                       rotary_scaling=step.scaling, rotary_dim=step.rotary_dim,
                                                       qk_eps=step.epsilon() if step.qk_norm else None,
                                                       scale=step.scale, softcap=step.softcap,
                                                       bias=bw.value(step.inputs[1]) if not cross and len(step.inputs) > 1 else None,
                                                       qk_projection=bool(step.qk_projection))
    for key in ATTN_ORDER:
        if key in internals:
            bw.grads[f"{prefix}.{key}"] = internals[key]
    bw.send(step.inputs[0], dxq)
    if dxkv is not None:  # cross-attention: keys and values read the other stage
        bw.send(step.inputs[1], dxkv)
    if mask is not None:  # the ablated heads' rows of W_O multiply zeros: their gradient is zero
        dw["w_o"] = dw["w_o"] * mask
    if "bias" in internals:  # positions: relative: the stack's position bias, read by every self-attention of it
        bw.send(step.inputs[1], internals["bias"])
    for k in keys:
        bw.send_weight(f"{step.weights}.{k}", dw[k])


def _ffn_weights(bw: Backward, step: Step) -> dict[str, np.ndarray]:
    names = ("w1", "b1", "w3", "b3") if is_gated(step.activation) else ("w1", "b1")
    return {k: bw.params[f"{step.weights}.{k}"] for k in names}


def _hidden_backward(bw: Backward, step: Step, dh: np.ndarray, x_name: str, h: np.ndarray, spare_h: bool = False) -> None:
    p = _ffn_weights(bw, step)
    dx, dw = ffn.ffn_hidden_backward(dh, bw.value(x_name), p["w1"], p["b1"], step.activation, p.get("w3"), p.get("b3"), h,
                                         spare_h)
    bw.send(x_name, dx)
    for k, v in dw.items():
        bw.send_weight(f"{step.weights}.{k}", v)


def _out_backward(bw: Backward, step: Step, g: np.ndarray, h: np.ndarray) -> np.ndarray:
    dh, dw2, db2 = ffn.ffn_out_backward(g, h, bw.params[f"{step.weights}.w2"], bw.params[f"{step.weights}.b2"])
    bw.send_weight(f"{step.weights}.w2", dw2)
    bw.send_weight(f"{step.weights}.b2", db2)
    return dh


def backward_ffn(bw: Backward, step: Step, g: np.ndarray) -> None:  # both halves in one step: the hidden layer is recomputed
    x = bw.value(step.inputs[0])
    p = _ffn_weights(bw, step)
    h = ffn.ffn_hidden(x, p["w1"], p["b1"], step.activation, p.get("w3"), p.get("b3"), strict=False)
    _hidden_backward(bw, step, _out_backward(bw, step, g, h), step.inputs[0], h)


def backward_ffn_hidden(bw: Backward, step: Step, g: np.ndarray) -> None:
    _hidden_backward(bw, step, g, step.inputs[0], bw.value(step.name), bw.spare(step.name))


def backward_ffn_out(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send(step.inputs[0], _out_backward(bw, step, g, bw.value(step.inputs[0])))


# -- a mixture of experts ------------------------------------------------------
def backward_router(bw: Backward, step: Step, g: np.ndarray) -> None:
    dx, dw = ffn.router_backward(g, bw.value(step.inputs[0]), bw.params[f"{step.weights}.router"])
    bw.send(step.inputs[0], dx)
    bw.send_weight(f"{step.weights}.router", dw)


def backward_router_probs(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send(step.inputs[0], kernels.softmax_backward(g, bw.value(step.name), axis=-2 if step.axis == "T" else -1))


def backward_top_k(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send(step.inputs[0], ffn.top_k_backward(g, bw.value(step.inputs[0]), bw.value(step.name)))


def backward_expert_mix(bw: Backward, step: Step, g: np.ndarray) -> None:
    w1, w3, w2 = experts_of(bw.params, step.weights, bw.spec.dims.E or 0)
    dx, dgates, dw = ffn.expert_mix_backward(g, bw.value(step.inputs[0]), bw.value(step.inputs[1]), w1, w3, w2)
    bw.send(step.inputs[0], dx)
    bw.send(step.inputs[1], dgates)
    for k, v in dw.items():
        bw.send_weight(f"{step.weights}.{k}", v)


def internal_names(step: Step) -> list[str]:
    """An attention step's internals in the order the backward pass reaches them; none for another step."""
    return [f"{internal_prefix(step)}.{k}" for k in ATTN_ORDER] if step.op in ("mha", "cross_mha") else []


def stage_order(trace: Recording) -> list[str]:
    """The recorded stages in backward order: the steps reversed, each attention step followed by its internals."""
    out = []
    for step in reversed(trace.spec.steps):
        if step.name not in trace.stages:
            continue
        out.append(step.name)
        out += [name for name in internal_names(step) if name in trace.stages]
    return out


def gradients(trace: Recording, params: dict[str, np.ndarray], inputs: dict[str, np.ndarray], seed: dict[str, np.ndarray],
              on_send: Callable[[Backward, Step, str, np.ndarray], None] | None = None, point: tuple[int, int] | None = None
              ) -> tuple[dict[str, Stage], dict[str, np.ndarray], dict[str, Norms]]:
    """Every recorded stage's gradient (as Stages: same name, axes and meaning as the forward's), in backward
    order, and every weight's gradient, in the spec's weight order (zeros for a weight the loss does not reach).
    With ``point`` (b, t), each stage and its gradient are kept as their values at (b, t) only (Stage.point), the
    norms of both given in the third dict, and the arrays let go during the walk; else the third dict is empty."""
    bw = Backward(trace, params, inputs, on_send, point)
    with np.errstate(all="ignore"):
        bw.run(seed)
    stages = {}
    for name in stage_order(trace):
        fwd = trace.stages[name]
        if name in bw.released:
            stages[name] = Stage(name, None, fwd.axes, fwd.meaning, fwd.internal, point=bw.released[name][0])
            continue
        g = bw.grads.get(name)
        if g is None:
            g = _zeros(fwd.array)
        stages[name] = Stage(name, g, fwd.axes, fwd.meaning, fwd.internal)
    weights = {name: bw.weight_grads[name] if name in bw.weight_grads else _zeros(w) for name, w in params.items()}
    return stages, weights, {name: norms for name, (_, norms, _) in bw.released.items()}


assert set(ATTN_ORDER) == set(ATTN_MEANINGS)


# -- BERT's embeddings ---------------------------------------------
def backward_token_type_table(bw: Backward, step: Step, g: np.ndarray) -> None:
    table = bw.params["token_type"]
    bw.send_weight("token_type", embeddings.embedding_backward(g, bw.inputs["token_types"], table.shape[0]))


def backward_position_offset(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send_weight("position", embeddings.position_offset_backward(g, bw.params["position"].shape[0], step.start or 0))


# -- Gemma's scaled embeddings and its RMSNorm with (1 + gamma) -------------------------
def backward_embed_scale(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send(step.inputs[0], embeddings.embed_scale_backward(g))


def backward_rms_norm_offset(bw: Backward, step: Step, g: np.ndarray) -> None:
    dx, dgamma = norms.rms_norm_offset_backward(g, bw.value(step.inputs[0]), bw.params[f"{step.weights}.gamma"],
                                                  step.epsilon())
    bw.send(step.inputs[0], dx)
    bw.send_weight(f"{step.weights}.gamma", dgamma)


def backward_softcap(bw: Backward, step: Step, g: np.ndarray) -> None:
    assert step.softcap is not None, "a softcap step has its cap"
    bw.send(step.inputs[0], embeddings.softcap_backward(g, bw.value(step.inputs[0]), step.softcap))
# -- T5's relative position bias (positions: relative) -------------------------------------
def backward_relative_bias(bw: Backward, step: Step, g: np.ndarray) -> None:
    name = step.weights or "relative_bias"
    bw.send_weight(name, embeddings.relative_bias_backward(g, relative_buckets_of(step, g.shape[1], g.shape[2]), bw.params[name].shape[0]))


# -- Granite's multipliers: d(x * s) = dy * s, d(x / s) = dy / s --------------------------------------
def backward_scale(bw: Backward, step: Step, g: np.ndarray) -> None:
    assert step.scale is not None, "a scale step has its number"
    bw.send(step.inputs[0], embeddings.scale(g, step.scale))


def backward_divide(bw: Backward, step: Step, g: np.ndarray) -> None:
    assert step.scale is not None, "a divide step has its number"
    bw.send(step.inputs[0], embeddings.divide(g, step.scale))


# -- T5's tied head, the decoder's output times C ** -0.5 (block.head_scale) ---------------
def backward_head_scale(bw: Backward, step: Step, g: np.ndarray) -> None:
    bw.send(step.inputs[0], embeddings.head_scale_backward(g))


# -- the task heads (block.pooler, block.classifier, block.mlm) -------------------------------
def backward_pool(bw: Backward, step: Step, g: np.ndarray) -> None:
    x = bw.trace.stages[step.inputs[0]]
    index = pool_index_of(bw.spec, step, bw.inputs, x.shape[1])
    bw.send(step.inputs[0], embeddings.pool_backward(g, tuple(x.shape), index))


def backward_dense(bw: Backward, step: Step, g: np.ndarray) -> None:
    x = bw.value(step.inputs[0])
    w, b = bw.params[f"{step.weights}.w"], bw.params[f"{step.weights}.b"]
    dz = activation_of(step.activation).run_backward()(g, kernels.linear(x, w, b, False))
    dx, dw, db = kernels.linear_backward(dz, x, w, b)
    bw.send(step.inputs[0], dx)
    bw.send_weight(f"{step.weights}.w", dw)
    bw.send_weight(f"{step.weights}.b", db)


backward_score = backward_linear  # x W + b, at any rank
