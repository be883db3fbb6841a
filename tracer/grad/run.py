"""``tracer grad``: run a spec forward and backward, and collect what the views show."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np

from tracer.engine import executor
from tracer.engine.backward import Norms, gradients, norm
from tracer.engine.executor import Recording, Stage
from tracer.engine.params import load_inputs, load_params
from tracer.errors import UsageError
from tracer.grad import losses
from tracer.messages import msg
from tracer.model.blocks import internal_prefix, shown_internal
from tracer.spec import Spec, load_spec, memory


class GradTrace:
    """The forward trace, the loss, and the gradient of the loss with respect to every stage and weight."""

    def __init__(self, forward: Recording, loss: losses.Loss | None, grads: dict[str, Stage], weights: dict[str, np.ndarray],
                 weight_grads: dict[str, np.ndarray], norms: dict[str, Norms] | None = None) -> None:
        self.forward = forward
        self.spec: Spec = forward.spec
        self.loss = loss  # None when the forward run stopped at a violation
        self.grads = grads  # stage name -> its gradient, as a Stage, in backward order
        self.weights = weights
        self.weight_grads = weight_grads

        # stage name -> |dL/dstage| and |stage|, each taken once (given for the stages kept as one value: GradOptions.point)
        self._norms: dict[str, float] = {name: n.grad for name, n in (norms or {}).items()}
        self._value_norms: dict[str, float] = {name: n.value for name, n in (norms or {}).items()}

    def grad_norm(self, name: str) -> float:
        """|dL/dstage|."""
        if name not in self._norms:
            self._norms[name] = norm(self.grads[name].array)
        return self._norms[name]

    def ratio(self, name: str) -> float:
        """|dL/dstage| / |stage|: how big the training signal is next to the value it reaches."""
        if name not in self._value_norms:
            self._value_norms[name] = norm(self.forward.stages[name].array)
        g, v = self.grad_norm(name), self._value_norms[name]
        return g / v if v else (math.inf if g else math.nan)


class GradOptions(NamedTuple):
    loss: str | None = None  # --loss
    keep_going: bool = False
    max_memory: str = memory.DEFAULT_MAX_MEMORY
    as_json: bool = False
    # keep the attention scores and weights ([B,H,T,S] each) and their gradients; False when the output shows
    # neither (the plain table): the backward pass makes each head's weights again instead, the same numbers
    internals: bool = True
    # the table's (b, t): keep each stage and its gradient as their values there and their norms, all the table and
    # Markdown show, and let the arrays go as the backward pass is done with them (their memory serves the rest of it)
    point: tuple[int, int] | None = None


def check_memory(spec: Spec, max_memory: str, as_json: bool) -> memory.Estimate:
    """The forward pass recorded in full, plus a gradient the size of every stage and every weight."""
    limit = memory.parse_size(max_memory)
    est = memory.estimate(spec, memory.RecordPolicy(), as_json=as_json)
    itemsize = memory.ITEMSIZE[spec.dtype]
    est.extra["backward gradients"] = (sum(s.full_bytes for s in est.stages)
                                       + sum(math.prod(w.shape) for w in spec.weights.values()) * itemsize)
    if as_json:
        est.extra["--json gradients"] = est.extra.get("--json output", 0)
    if limit is not None and est.total > limit:
        parts = memory.sized(est.largest(3))
        raise UsageError(msg("{path}: tracer grad keeps every stage and the gradient of each stage and weight: about {breakdown}, over --max-memory "
                             "{max_memory}. Largest: {parts}. Lower B, T or the number of layers, or raise --max-memory if this machine has the memory.",
                             path=spec.path, breakdown=est.breakdown(), max_memory=max_memory, parts=parts))
    return est


def backward(trace: Recording, loss_name: str, params: dict[str, np.ndarray] | None = None,
             inputs: dict[str, np.ndarray] | None = None, point: tuple[int, int] | None = None) -> GradTrace:
    """The loss of a forward trace recorded in full, and its gradient with respect to everything
    (``params`` and ``inputs``: the forward's own, when at hand; else drawn again from the spec; ``point``: see
    GradOptions)."""
    params = load_params(trace.spec) if params is None else params
    inputs = load_inputs(trace.spec) if inputs is None else inputs
    with np.errstate(all="ignore"):
        loss = losses.compute(trace, loss_name, inputs)
    grads, weight_grads, norms = gradients(trace, params, inputs, {loss.stage: loss.seed}, point=point)
    return GradTrace(trace, loss, grads, params, weight_grads, norms)


def lean_policy(spec: Spec) -> memory.RecordPolicy:
    """Every stage in full but the attention scores and weights that no view shows (the cross-attention
    weights are in the plain table; a softmax over queries, the violation, is traced as it is)."""
    kept = [s.name for s in memory.plan_stages(spec, memory.RecordPolicy()) if s.internal]
    pair = ("scores", "weights")  # made again together by the backward pass, so dropped together
    lean = {f"{internal_prefix(step)}.{key}" for step in spec.steps
            if step.op in ("mha", "cross_mha") and step.axis != "queries" and not any(shown_internal(step, k) for k in pair)
            for key in pair}
    return memory.RecordPolicy(mode="main", keep=frozenset(kept) - lean)


def grad(spec: Spec, opts: GradOptions) -> GradTrace:
    loss_name = losses.choose(spec, opts.loss)
    check_memory(spec, opts.max_memory, opts.as_json)
    with np.errstate(all="ignore"):  # NaN and Inf (a given value beyond float32 too) are violations, not warnings
        ex = executor.Executor(spec, keep_going=opts.keep_going, policy=None if opts.internals else lean_policy(spec))
        trace = ex.run()
        if not trace.ok and not opts.internals:  # traced again in full: every stage a violation names is there to show
            ex = executor.Executor(spec, keep_going=opts.keep_going)
            trace = ex.run()
    if not trace.ok and not opts.keep_going:
        stopped = any(v.kind != "nonfinite" or not spec.allow_nonfinite for v in trace.violations)
        if stopped:
            return GradTrace(trace, None, {}, {}, {})
    return backward(trace, loss_name, ex.params, ex.inputs, opts.point)


def grad_path(path: str, opts: GradOptions) -> GradTrace:
    return grad(load_spec(path), opts)


# -- weights grouped by layer ---------------------------------------------------
LAYER = re.compile(r"^((?:encoder\.|decoder\.)?blocks\.(\d+))\.")


def layer_of(name: str) -> str:
    """'blocks.3.ffn.w2' -> 'blocks.3'; a weight outside the stack (embedding, final_norm, head) -> its own name's group."""
    m = LAYER.match(name)
    if m:
        return m.group(1)
    head, _, _ = name.rpartition(".")
    return head or name


class LayerNorms(NamedTuple):
    layer: str
    norms: dict[str, float]  # weight name (without the layer prefix) -> |dL/dW|
    total: float


def weights_by_layer(g: GradTrace) -> list[LayerNorms]:
    groups: dict[str, dict[str, float]] = {}
    for name, dw in g.weight_grads.items():
        layer = layer_of(name)
        short = name[len(layer) + 1:] if name.startswith(layer + ".") else name
        groups.setdefault(layer, {})[short] = norm(dw)
    return [LayerNorms(layer, n, math.sqrt(sum(v * v for v in n.values()))) for layer, n in groups.items()]


def per_layer(g: GradTrace, weight: str) -> list[tuple[str, float]]:
    """|dL/dW| of one weight of every layer of the stack (e.g. 'ffn.w2'), layer 0 first."""
    out = []
    for name, dw in g.weight_grads.items():
        m = LAYER.match(name)
        if m and name[len(m.group(1)) + 1:] == weight:
            out.append((m.group(1), norm(dw)))
    if not out:
        known = sorted({n[len(m.group(1)) + 1:] for n in g.weight_grads if (m := LAYER.match(n))})
        if not known:
            raise UsageError(msg("{path}: --per-layer compares the layers of a stack, and this spec has none (block.layers > 1)", path=g.spec.path))
        from tracer.model.catalogue import suggest

        raise UsageError(msg("--weight {weight}: no layer has it{x}", weight=repr(weight),
                             x=suggest(weight, known) or msg("; the layers have {names}", names=", ".join(known))))
    return out
