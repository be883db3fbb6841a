"""``tracer probe --exact``: causality proved with the backward pass, for the given weights.

Under a causal mask, the output at position t must not depend on any later position's input.  For
each sample b, position t < T-1 and output coordinate c, one backward pass from the output entry
[b, t, c] gives its gradient with respect to every stage; the gradient with respect to the input X at
every position after t must be exactly 0.0.  Exactly, not nearly: a causal block passes exactly zero
back through a masked attention weight (an exact 0) and through every per-position op, so a single
nonzero bit is a dependence.  Where one appears, the step that makes it is named: the step nearest
the output whose own gradient stays at positions <= t but which sends some to a position after t
(for attention, the internal stage that does it: attn.weights for a softmax taken over queries).

A spec with more than MAX_PASSES (sample, position, coordinate) entries is checked on a sample of
coordinates drawn from the seed, and the result says so: a proof for those entries only.
"""

from __future__ import annotations

import numpy as np

from tracer.engine import executor
from tracer.engine.backward import Backward, gradients
from tracer.engine.params import load_inputs, load_params, uniform_ints
from tracer.messages import msg
from tracer.model.blocks import Step, internal_prefix
from tracer.probe.result import FAIL, NOT_APPLICABLE, PASS, Property
from tracer.spec import Spec
from tracer.views.text import fmt_vector

MAX_PASSES = 2048


def _dirty(g: np.ndarray, axes: tuple[str, ...], t: int) -> bool:
    """Does the gradient reach any position after t (along the stage's first T axis)?"""
    if "T" not in axes:
        return False
    index = tuple(slice(t + 1, None) if i == axes.index("T") else slice(None) for i in range(len(axes)))
    return bool(np.any(g[index] != 0))  # NaN != 0 too: an undefined gradient proves nothing


ATTN_CHAIN = ("heads", "weights", "scores")  # the internals between an attention step's output and its q, k, v


def _origin(step: Step, grads: dict[str, executor.Stage], t: int) -> str:
    """The stage that makes the dependence, within a step found to make one: for attention, the internal
    just before the first one whose gradient reaches a later position (attn.weights for a softmax over queries)."""
    if step.op not in ("mha", "cross_mha"):
        return step.name
    p = internal_prefix(step)
    before = step.name
    for key in ATTN_CHAIN:
        stage = grads.get(f"{p}.{key}")
        if stage is not None and _dirty(stage.array, stage.axes, t):
            return before
        before = f"{p}.{key}"
    return step.name


def reads_later(spec: Spec) -> str | None:
    """Why causality does not apply (a message), or None when every self-attention of the block masks every later
    key: mask: causal (a sliding window included), or an explicit matrix, as the executor uses it, that is lower-triangular.
    A causal mask is not judged by its matrix: the probe measures whether it holds (a bug in the mask is caught)."""
    attention = [s for s in spec.steps if s.op == "mha" and spec.block_for(s.name) is spec.block]
    if not attention:
        return None if spec.block.mask == "causal" else msg("the block's mask is {mask}, not causal: later positions may be read by design",
                                                            mask=spec.block.mask)
    for step in attention:
        if step.mask == "causal":  # declared causal (a sliding window too): probed, the matrix not taken on trust
            continue
        n = spec.stage_shapes[step.name][1][1]
        visible = executor.visible_keys(spec, step, n)
        if visible is None:
            return msg("the block's mask is {mask}, not causal: later positions may be read by design", mask=spec.block.mask)
        later = np.argwhere(np.triu(visible, 1))
        if later.size:
            i, j = (int(v) for v in later[0])
            return msg("the block's {mask} mask lets position {i} read the later position {j}, so it is not causal: later positions may be read by design",
                       mask=spec.block.mask, i=i, j=j)
    return None


def causal_by_design(spec: Spec) -> Property | str:
    """The block's input stage to perturb (x; decoder.x), or the causality property already settled: not applicable,
    because the mask lets a position read a later one by design."""
    why = reads_later(spec)
    if why is not None:
        return Property("causality", NOT_APPLICABLE, why)
    return "decoder.x" if spec.model == "encoder-decoder" else "x"


def causality(spec: Spec) -> Property:
    name = "causality"
    xname = causal_by_design(spec)
    if isinstance(xname, Property):
        return xname
    with np.errstate(all="ignore"):
        trace = executor.run(spec, keep_going=True)
    params, inputs = load_params(spec), load_inputs(spec)
    out = trace.output
    if out.axes[:2] != ("B", "T") or xname not in trace.stages:
        return Property(name, NOT_APPLICABLE, msg("the output {shape} has no [B,T,...] positions to check", shape=out.shape_label))
    B, T, W = out.array.shape[0], min(out.array.shape[1], trace.stages[xname].array.shape[1]), out.array.shape[-1]
    if T < 2:
        return Property(name, NOT_APPLICABLE, msg("T = 1: there is no later position to depend on"))
    coords = list(range(W))
    per_coordinate = B * (T - 1)
    if per_coordinate * W > MAX_PASSES:
        n = max(1, MAX_PASSES // per_coordinate)
        coords = sorted(set(uniform_ints(spec.seed or 0, "probe.exact", (n,), W).tolist()))
    passes = 0
    for b in range(B):
        for t in range(T - 1):
            for c in coords:
                seed = np.zeros(out.array.shape, dtype=out.array.dtype)
                seed[(b, t) + (0,) * (out.array.ndim - 3) + (c,)] = 1.0
                makers: list[Step] = []

                def watch(bw: Backward, step: Step, stage: str, g: np.ndarray, t: int = t, makers: list[Step] = makers) -> None:
                    """A step whose own gradient stays at positions <= t but that sends some past t makes the dependence."""
                    if _dirty(g, trace.stages[stage].axes, t) and not _dirty(bw.grads[step.name], trace.stages[step.name].axes, t):
                        makers.append(step)

                grads, _, _ = gradients(trace, params, inputs, {out.name: seed}, watch)
                passes += 1
                gx = grads[xname].array
                if _dirty(gx, grads[xname].axes, t):
                    later = np.argwhere(gx[:, t + 1:] != 0)
                    s = int(later[0][1]) + t + 1
                    where = _origin(makers[-1], grads, t) if makers else xname
                    grad = (f"d {out.name}[b={b}, t={t}, {out.axes[-1]}={c}] / d {xname}[b={int(later[0][0])}, t={s}] = "
                            f"{fmt_vector(gx[later[0][0], s].tolist(), 6)}")
                    return Property(name, FAIL, msg("{grad} is not zero: position {t} depends on position {s}, although the mask is causal; "
                                                    "the dependence enters at stage {where}", grad=grad, t=t, s=s, where=where), where, t)
    whole = len(coords) == W
    scope = (msg("all {n} coordinates", n=W) if whole else msg("{k} of the {n} coordinates (sampled: over {passes} backward passes would be needed "
                                                               "for all; a proof for these only)", k=len(coords), n=W, passes=MAX_PASSES))
    return Property(name, PASS, msg("the gradient of {out} at every position t < {T}, sample and {scope}, with respect to {x} at every later position "
                                    "is exactly 0.0 ({n} backward passes): for these weights no position reads a later one",
                                    out=out.name, T=T - 1, scope=scope, x=xname, n=passes))
