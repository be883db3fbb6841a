"""The scalar reference: the same block with plain Python loops over floats.

No NumPy in its arithmetic (NumPy only hands over the weights as nested lists
and receives the answers for comparison), so it is an independent check of the
vectorised path, as the chapter's reference.py is.  Every op is written out
per position; attention loops over heads and keys.

The reference costs about B * T * (4C^2 + 2CF + 2TC) scalar operations.  When
that is over the budget it verifies a prefix of positions of the first sample:
with a causal mask the first positions depend on nothing later, so they are
exact on their own.  Without a mask every position reads every key, so only a
full run is exact; if that is too big, verification is skipped and says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .blocks import Step, internal_prefix
from .spec import Spec, shape_label

Vec = list[float]
Mat = list[list[float]]
DEFAULT_BUDGET = 20_000_000  # scalar multiply-adds: a few seconds of pure Python


@dataclass
class Plan:
    samples: list[int]
    positions: list[int]
    full: bool
    cost: int  # scalar operations the plan takes
    full_cost: int  # scalar operations a full run would take
    reason: str  # why the plan is partial or skipped ("" when full)

    @property
    def skipped(self) -> bool:
        return not self.positions


def position_cost(spec: Spec, keys: int) -> int:
    C, F = spec.dims.C, spec.dims.F
    return 4 * C * C + 2 * C * F + 2 * keys * C + 20 * C


def unsupported(spec: Spec) -> str:
    """Why the reference cannot follow this step list ("" when it can)."""
    d = spec.dims
    if spec.block.positions == "learned" and d.T_max is not None and d.T > d.T_max:
        return f"T = {d.T} runs past the position table's T_max = {d.T_max} rows; the violation report is the check here"
    for w in spec.weights.values():
        if w.given_shape is not None and w.given_shape != w.shape:
            return (f"weights.{w.path} is {list(w.given_shape)} where {shape_label(w.axes, w.shape)} is due; "
                    "the violation report is the check here")
    for step in spec.steps:
        if step.op == "select" or (step.op == "layer_norm" and step.axis not in (None, "C")) or (step.op == "mha" and step.axis == "queries"):
            return (f"step {step.formula()} breaks the per-position contract the reference is written for; "
                    "the violation report is the check here")
    return ""


def plan(spec: Spec, budget: int = DEFAULT_BUDGET) -> Plan:
    B, T = spec.dims.B, spec.dims.T
    full_cost = B * T * position_cost(spec, T)
    reason = unsupported(spec)
    if reason:
        return Plan([], [], False, 0, full_cost, reason)
    if full_cost <= budget:
        return Plan(list(range(B)), list(range(T)), True, full_cost, full_cost, "")
    if spec.block.mask != "causal":
        return Plan([], [], False, 0, full_cost,
                    f"a full reference run takes ~{full_cost:,} scalar operations (budget {budget:,}); "
                    "without a causal mask every position reads all T keys, so no prefix is exact on its own")
    k = 0
    while k < T and (k + 1) * position_cost(spec, k + 1) <= budget:
        k += 1
    if k == 0:
        return Plan([], [], False, 0, full_cost,
                    f"even one position takes ~{position_cost(spec, 1):,} scalar operations (budget {budget:,})")
    return Plan([0], list(range(k)), False, k * position_cost(spec, k), full_cost,
                f"a full reference run takes ~{full_cost:,} scalar operations (budget {budget:,}); "
                f"under the causal mask positions 0..{k - 1} of sample 0 are exact on their own, so those are verified")


# -- scalar ops ------------------------------------------------------------
def vec_add(a: Vec, b: Vec) -> Vec:
    return [x + y for x, y in zip(a, b)]


def layer_norm(x: Vec, gamma: Vec, beta: Vec, eps: float) -> Vec:
    n = len(x)
    mu = 0.0
    for v in x:
        mu += v
    mu /= n
    var = 0.0
    for v in x:
        var += (v - mu) * (v - mu)
    var /= n
    s = math.sqrt(var + eps)
    return [gamma[c] * ((x[c] - mu) / s) + beta[c] for c in range(n)]


def matvec(x: Vec, cols: Mat, b: Vec) -> Vec:
    """x [n_in] times W [n_in, n_out] given as its columns, plus b [n_out]."""
    out = []
    for j, col in enumerate(cols):
        acc = 0.0
        for xi, wi in zip(x, col):
            acc += xi * wi
        out.append(acc + b[j])
    return out


def relu(x: Vec) -> Vec:
    return [v if v > 0.0 else 0.0 for v in x]


# -- the block -------------------------------------------------------------
class Reference:
    def __init__(self, spec: Spec, params: dict[str, Any], inputs: Any) -> None:
        self.spec = spec
        self.w = {k: v for k, v in params.items()}  # nested lists
        self.cols = {k: [list(c) for c in zip(*v)] for k, v in params.items() if _is_matrix(v) and k not in ("embedding", "position")}
        self.inputs = inputs  # token ids [B][T] or input rows [B][T][C]

    def run(self, samples: list[int], positions: list[int]) -> dict[str, dict[tuple[int, int], Any]]:
        out: dict[str, dict[tuple[int, int], Any]] = {}
        for b in samples:
            stages: dict[str, dict[int, Any]] = {}
            self.entry(b, positions, stages)
            for step in self.spec.steps:
                self.step(step, positions, stages)
            for name, by_pos in stages.items():
                for t, value in by_pos.items():
                    out.setdefault(name, {})[(b, t)] = value
        return out

    def entry(self, b: int, positions: list[int], st: dict[str, dict[int, Any]]) -> None:
        spec = self.spec
        if spec.input.kind == "tokens":
            st["embed"] = {t: list(self.w["embedding"][self.inputs[b][t]]) for t in positions}
            h = st["embed"]
        else:
            st["input"] = {t: list(self.inputs[b][t]) for t in positions}
            h = st["input"]
        if spec.block.positions == "learned":
            st["position"] = {t: list(self.w["position"][t]) for t in positions}
            st["x"] = {t: vec_add(h[t], st["position"][t]) for t in positions}
        else:
            st["x"] = dict(h)

    def step(self, step: Step, positions: list[int], st: dict[str, dict[int, Any]]) -> None:
        ins = [st[i] for i in step.inputs]
        g = step.weights
        if step.op == "layer_norm":
            eps = self.spec.block.eps
            st[step.name] = {t: layer_norm(ins[0][t], self.w[f"{g}.gamma"], self.w[f"{g}.beta"], eps) for t in positions}
        elif step.op == "add":
            st[step.name] = {t: vec_add(ins[0][t], ins[1][t]) for t in positions}
        elif step.op == "identity":
            st[step.name] = dict(ins[0])
        elif step.op == "relu":
            st[step.name] = {t: relu(ins[0][t]) for t in positions}
        elif step.op == "linear":
            st[step.name] = {t: matvec(ins[0][t], self.cols[f"{g}.w"], self.w[f"{g}.b"]) for t in positions}
        elif step.op == "ffn":
            w1, b1, w2, b2 = self.cols[f"{g}.w1"], self.w[f"{g}.b1"], self.cols[f"{g}.w2"], self.w[f"{g}.b2"]
            st[step.name] = {t: matvec(relu(matvec(ins[0][t], w1, b1)), w2, b2) for t in positions}
        elif step.op == "ffn_hidden":
            st[step.name] = {t: relu(matvec(ins[0][t], self.cols[f"{g}.w1"], self.w[f"{g}.b1"])) for t in positions}
        elif step.op == "ffn_out":
            st[step.name] = {t: matvec(ins[0][t], self.cols[f"{g}.w2"], self.w[f"{g}.b2"]) for t in positions}
        elif step.op == "mha":
            self.mha(step, ins[0], positions, st)
        else:
            raise KeyError(f"the reference has no op {step.op!r}")

    def mha(self, step: Step, x: dict[int, Vec], positions: list[int], st: dict[str, dict[int, Any]]) -> None:
        g, H, d = step.weights, self.spec.dims.H, self.spec.dims.d
        blk = self.spec.block
        visible = blk.mask_matrix  # explicit [T,T] mask, or None
        proj = {}
        for name in ("q", "k", "v"):
            full = {t: matvec(x[t], self.cols[f"{g}.w_{name}"], self.w[f"{g}.b_{name}"]) for t in positions}
            proj[name] = {t: [full[t][h * d:(h + 1) * d] for h in range(H)] for t in positions}  # [H][d]
        scale = 1.0 / math.sqrt(d)
        T = self.spec.dims.T
        scores, weights, heads, out = {}, {}, {}, {}
        for t in positions:
            if visible is not None:
                keys = [j for j in positions if visible[t][j]]
            else:
                keys = [j for j in positions if blk.mask != "causal" or j <= t]  # the causal mask: keys up to t
            s_rows, w_rows, mixed = [], [], []
            for h in range(H):
                q = proj["q"][t][h]
                s = {}
                for j in positions:
                    acc = 0.0
                    for a, bb in zip(q, proj["k"][j][h]):
                        acc += a * bb
                    s[j] = acc * scale
                if not keys:  # a fully masked row: softmax is 0/0
                    s_rows.append([s.get(j, math.nan) for j in range(T)])
                    w_rows.append([math.nan] * T)
                    mixed.extend([math.nan] * d)
                    continue
                m = max(s[j] for j in keys)  # subtract the max so exp never overflows
                e = {j: math.exp(s[j] - m) for j in keys}
                z = sum(e.values())
                w = [e[j] / z if j in e else 0.0 for j in range(T)]
                mix = [0.0] * d
                for j in keys:
                    for c in range(d):
                        mix[c] += w[j] * proj["v"][j][h][c]
                s_rows.append([s.get(j, math.nan) for j in range(T)])  # keys not computed: NaN, skipped in comparison
                w_rows.append(w)
                mixed.extend(mix)
            scores[t], weights[t], heads[t] = s_rows, w_rows, mixed
            out[t] = matvec(mixed, self.cols[f"{g}.w_o"], self.w[f"{g}.b_o"])
        prefix = internal_prefix(step)
        st[f"{prefix}.q"], st[f"{prefix}.k"], st[f"{prefix}.v"] = proj["q"], proj["k"], proj["v"]
        st[f"{prefix}.scores"], st[f"{prefix}.weights"], st[f"{prefix}.heads"] = scores, weights, heads
        st[step.name] = out


def _is_matrix(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and isinstance(v[0], list)


def max_abs_diff(a: Any, b: Any) -> float:
    """Largest |a - b| over nested lists; NaN in the reference marks 'not computed'."""
    if isinstance(a, list):
        return max((max_abs_diff(x, y) for x, y in zip(a, b)), default=0.0)
    if isinstance(b, float) and math.isnan(b):
        return 0.0
    if a == b:  # also covers equal infinities
        return 0.0
    return abs(a - b)
