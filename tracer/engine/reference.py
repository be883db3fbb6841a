"""The scalar reference: the same model with plain Python loops over floats.

No NumPy in its arithmetic (NumPy only hands over the weights as nested lists
and receives the answers for comparison), so it is an independent check of the
vectorised path, as the chapter's reference.py is.  Every op is written out
per position; attention loops over heads and keys.

The reference costs about layers * B * T * (4C^2 + 2CF + 2TC) scalar operations.
When that is over the budget it verifies a prefix of positions of the first
sample: with a causal mask everywhere the first positions depend on nothing
later, so they are exact on their own.  Without a mask (or with an encoder,
whose every position reads every source position) only a full run is exact; if
that is too big, verification is skipped and says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import mul
from typing import Any

from tracer.messages import join, msg
from tracer.model import rope
from tracer.model.activations import activation_of, is_gated
from tracer.model.blocks import ATTN_MEANINGS, QK_OFFSET, Step, internal_prefix, position_axis
from tracer.model.ops import OPS
from tracer.model.shapes import shape_label
from tracer.spec import Spec

Vec = list[float]
Mat = list[list[float]]
OPS_PER_SECOND = 15_000_000  # scalar multiply-adds a second the reference is promised to run at (--verify-budget's help)
DEFAULT_BUDGET = 60_000_000  # scalar multiply-adds: about four seconds of pure Python


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
    """Scalar operations for one position through every step."""
    C, F, V = spec.dims.C, spec.dims.F, spec.dims.V or 0
    cost = 0
    for step in spec.steps:
        if step.op in ("mha", "cross_mha"):
            cost += 4 * C * C + 2 * keys * C
        elif step.op in ("ffn_hidden", "ffn_out", "ffn"):
            cost += C * F * (3 if is_gated(step.activation) else 1) * (2 if step.op == "ffn" else 1)
        elif step.op == "linear":
            cost += C * max(C, F)
        elif step.op == "head":
            cost += C * V
        else:
            cost += 5 * C
    return cost


def unsupported(spec: Spec) -> str:
    """Why the reference cannot follow this step list ("" when it can)."""
    d = spec.dims
    if d.T_max is not None and any(s.op == "position_table" for s in spec.steps) and max(d.T, d.S or 0) > d.T_max:
        return msg("T = {t} runs past the position table's T_max = {n} rows", t=max(d.T, d.S or 0), n=d.T_max)
    for w in spec.weights.values():
        if w.given_shape is not None and w.given_shape != w.shape:
            return msg("weights.{w} is {given} where {due} is due", w=w.path, given=list(w.given_shape), due=shape_label(w.axes, w.shape))
    for step in spec.steps:
        if (OPS[step.op].reference is None or (step.op == "layer_norm" and step.axis not in (None, "C"))
                or (step.op == "mha" and step.axis == "queries")):
            return join([msg("step {formula} breaks the per-position contract the reference is written for", formula=step.formula()),
                         msg("the violation report is the check here")])
    return ""


def plan(spec: Spec, budget: int = DEFAULT_BUDGET) -> Plan:
    B, T = spec.dims.B, spec.dims.T
    keys = max(T, spec.dims.S or 0)
    full_cost = B * (T + (spec.dims.S or 0)) * position_cost(spec, keys)
    reason = unsupported(spec)
    if reason:
        return Plan([], [], False, 0, full_cost, reason)
    if full_cost <= budget:
        return Plan(list(range(B)), list(range(T)), True, full_cost, full_cost, "")
    too_big = msg("a full reference run takes ~{n} scalar operations (budget {b})", n=f"{full_cost:,}", b=f"{budget:,}")
    causal = all(s.mask == "causal" for s in spec.steps if s.op == "mha") and not any(s.op == "cross_mha" for s in spec.steps)
    if not causal:
        return Plan([], [], False, 0, full_cost,
                    join([too_big, msg("without a causal mask on every attention step each position reads all keys, so no prefix is exact on its own")]))
    k = 0
    while k < T and (k + 1) * position_cost(spec, k + 1) <= budget:
        k += 1
    if k == 0:
        return Plan([], [], False, 0, full_cost,
                    msg("even one position takes ~{n} scalar operations (budget {b})", n=f"{position_cost(spec, 1):,}", b=f"{budget:,}"))
    return Plan([0], list(range(k)), False, k * position_cost(spec, k), full_cost,
                join([too_big, msg("under the causal mask positions 0..{k} of sample 0 are exact on their own, so those are verified", k=k - 1)]))


# -- scalar ops ------------------------------------------------------------
def vec_add(a: Vec, b: Vec) -> Vec:
    return [x + y for x, y in zip(a, b)]


def _scaled(x: Vec) -> tuple[Vec, int]:
    """x / 2^k with 2^k at or above the largest magnitude (k >= 0), and k: squares of the result cannot overflow."""
    m = max(abs(v) for v in x)
    k = max(math.frexp(m)[1], 0) if math.isfinite(m) else 0
    return [math.ldexp(v, -k) for v in x], k


def _mean(y: Vec) -> float:
    return math.fsum(y) / len(y) if all(math.isfinite(v) for v in y) else sum(y) / len(y)  # fsum: correctly rounded


def layer_norm(x: Vec, gamma: Vec, beta: Vec, eps: float) -> Vec:
    # LN(x) = LN(x / 2^k) with eps / 4^k: the same value, computed without overflow for any finite x
    y, k = _scaled(x)
    mu = _mean(y)
    mu += _mean([v - mu for v in y])  # fsum's mean is rounded once more by the division: a constant row must centre to 0
    var = _mean([(v - mu) * (v - mu) for v in y])
    s = math.sqrt(var + math.ldexp(eps, -2 * k))
    return [gamma[c] * ((y[c] - mu) / s if s else 0.0) + beta[c] for c in range(len(x))]


def rms_norm(x: Vec, gamma: Vec, eps: float) -> Vec:
    y, k = _scaled(x)
    s = math.sqrt(_mean([v * v for v in y]) + math.ldexp(eps, -2 * k))
    return [gamma[c] * (y[c] / s if s else 0.0) for c in range(len(x))]


def matvec(x: Vec, cols: Mat, b: Vec | None = None) -> Vec:
    """x [n_in] times W [n_in, n_out] given as its columns, plus b [n_out].

    Each entry is the sum of x_i w_i in doubles, by ``sum`` (in C, twice as fast as the loop written out in Python;
    left to right, and from Python 3.12 with a compensation that makes it, if anything, a little more exact).
    """
    if b is None:
        return [float(sum(map(mul, x, col))) for col in cols]
    return [sum(map(mul, x, col)) + bj for col, bj in zip(cols, b)]


def relu(x: Vec) -> Vec:
    return [v if v > 0.0 else 0.0 for v in x]


def tanh(x: Vec) -> Vec:
    return [math.tanh(v) for v in x]


def relu2(x: Vec) -> Vec:  # Primer's squared ReLU
    return [v * v if v > 0.0 else 0.0 for v in x]


def gelu(x: Vec) -> Vec:
    return [0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x]


def gelu_tanh(x: Vec) -> Vec:
    k = math.sqrt(2.0 / math.pi)
    return [0.5 * v * (1.0 + math.tanh(k * (v + 0.044715 * v * v * v))) for v in x]


def silu(x: Vec) -> Vec:
    return [v / (1.0 + math.exp(-v)) for v in x]


def softmax(x: Vec) -> Vec:
    m = max(x)
    e = [math.exp(v - m) for v in x]
    z = sum(e)
    return [v / z for v in e]


def sinusoidal_row(t: int, C: int, base: float) -> Vec:
    row = []
    for c in range(C):
        i2 = c - (c % 2)  # 2i for both the sin column 2i and the cos column 2i+1
        angle = t / base ** (i2 / C)
        row.append(math.sin(angle) if c % 2 == 0 else math.cos(angle))
    return row


def rotate(v: Vec, t: int, base: float, pairing: str = "interleaved", dim: int | None = None,
           scaling: tuple[object, ...] | None = None) -> Vec:
    """Turn pair i of a head's vector by the angle t * base^(-2i/d) (its speed scaled as ``scaling`` says: model/rope.py).

    Pair i is (2i, 2i+1) when interleaved, (i, i + d/2) when half (Hugging Face's rotate_half).
    ``dim`` (partial rotary): only the first r = dim coordinates are paired and turned, by t * base^(-2i/r); the rest kept.
    """
    d = len(v) if dim is None else dim
    out = list(v)
    speeds = rope.scaled([base ** (-2 * i / d) for i in range(d // 2)], scaling)
    for i in range(d // 2):
        a = t * speeds[i]
        c, s = math.cos(a), math.sin(a)
        j, k = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
        out[j] = v[j] * c - v[k] * s
        out[k] = v[j] * s + v[k] * c
    return out


# -- the model ---------------------------------------------------------------
class Reference:
    def __init__(self, spec: Spec, params: dict[str, Any], inputs: dict[str, Any], columns: dict[str, Mat] | None = None) -> None:
        """``columns``: matrices by their columns (W.T as nested lists), which then need not be in ``params`` too."""
        self.spec = spec
        self.w = params  # nested lists
        given = columns or {}
        self.cols = {k: [list(c) for c in zip(*v)] for k, v in params.items()
                     if _is_matrix(v) and k not in ("embedding", "position", "token_type") and not k.endswith("relative_bias") and k not in given}
        self.cols.update(given)
        if spec.block.head == "tied":
            self.cols["head"] = [list(row) for row in params["embedding"]]  # columns of E^T are rows of E
        self.inputs = inputs  # by stream: token ids [B][T] or input rows [B][T][C]

    def run(self, samples: list[int], positions: list[int]) -> dict[str, dict[tuple[int, int], Any]]:
        out: dict[str, dict[tuple[int, int], Any]] = {}
        for b in samples:
            stages: dict[str, dict[int, Any]] = {}
            for step in self.spec.steps:
                pos = list(range(self.spec.dims.S or 0)) if position_axis(step.name) == "S" else positions
                self.step(step, b, pos, stages)
            for name, by_pos in stages.items():
                for t, value in by_pos.items():
                    out.setdefault(name, {})[(b, t)] = value
        return out

    def step(self, step: Step, b: int, positions: list[int], st: dict[str, dict[int, Any]]) -> None:
        """One step for sample b at ``positions``, by its op's reference_NAME (its record names it: tracer.model.ops)."""
        st[step.name] = OPS[step.op].run_reference()(self, step, b, positions, [st[i] for i in step.inputs], st)

    def ffn_hidden(self, g: str | None, x: Vec, activation: str | None) -> Vec:
        """act(x W_1 + b_1) by the activation's record; gated: its gate's of x W_1 + b_1, times x W_3 + b_3."""
        record = activation_of(activation)
        h: Vec = record.run_reference()(matvec(x, self.cols[f"{g}.w1"], self.w[f"{g}.b1"]))
        if record.gate is None:
            return h
        up = matvec(x, self.cols[f"{g}.w3"], self.w[f"{g}.b3"])
        return [u * v for u, v in zip(h, up)]

    def ffn_out(self, g: str | None, h: Vec) -> Vec:
        return matvec(h, self.cols[f"{g}.w2"], self.w[f"{g}.b2"])

    def mha(self, step: Step, xq: dict[int, Vec], xkv: dict[int, Vec], positions: list[int], st: dict[str, dict[int, Any]]) -> None:
        g, H, d = step.weights, self.spec.dims.H, self.spec.dims.d
        group = H // self.spec.dims.kv_heads  # query head h reads key/value head h // group
        cross = step.op == "cross_mha"
        key_positions = sorted(xkv) if cross else positions

        def project(name: str, x: dict[int, Vec], where: list[int]) -> dict[int, list[Vec]]:
            out = {}
            for t in where:
                full = matvec(x[t], self.cols[f"{g}.w_{name}"], self.w[f"{g}.b_{name}"])
                if step.qk_projection and name in ("q", "k"):  # OLMo 2: the whole projection RMS-normalised, then split and turned
                    full = head_rms(full, self.w[f"{g}.{name}_norm"], step.epsilon())
                heads = [full[h * d:(h + 1) * d] for h in range(len(full) // d)]
                if step.qk_norm and not step.qk_projection and name in ("q", "k"):  # Qwen3: each head RMS-normalised over its d coordinates, then turned
                    gamma = self.w[f"{g}.{name}_norm"]
                    gamma = [1.0 + x for x in gamma] if step.qk_norm == QK_OFFSET else gamma  # Gemma 3's (1 + w)
                    heads = [head_rms(v, gamma, step.epsilon()) for v in heads]
                if step.base is not None and name in ("q", "k"):
                    heads = [rotate(v, t, step.base, step.pairing or "interleaved", step.rotary_dim, step.scaling) for v in heads]
                out[t] = heads  # [H][d] for q, [H_kv][d] for k and v
            return out

        q, k, v = project("q", xq, positions), project("k", xkv, key_positions), project("v", xkv, key_positions)
        explicit = None
        if step.mask == "explicit":
            blk = self.spec.block_for(step.name)
            explicit = blk.mask_matrix
        n_keys = (self.spec.dims.S or 0) if cross or position_axis(step.name) == "S" else self.spec.dims.T
        scale = 1.0 / math.sqrt(d) if step.scale is None else step.scale  # block.attention_scale
        bias = st[step.inputs[1]] if not cross and len(step.inputs) > 1 else None  # positions: relative: [H][S] at each t
        scores, weights, heads, out = {}, {}, {}, {}
        for t in positions:
            if explicit is not None:
                keys = [j for j in key_positions if explicit[t][j]]
            elif step.mask == "causal" and step.window is not None:
                keys = [j for j in key_positions if t - step.window < j <= t]  # a sliding window: t and the W - 1 keys before
            elif step.mask == "causal":
                keys = [j for j in key_positions if j <= t]  # the causal mask: keys up to t
            else:
                keys = list(key_positions)
            s_rows, w_rows, mixed = [], [], []
            for h in range(H):
                s = {}
                for j in key_positions:
                    acc = 0.0
                    for a, bb in zip(q[t][h], k[j][h // group]):
                        acc += a * bb
                    s[j] = acc * scale
                    if step.softcap is not None:  # Gemma 2: cap * tanh(score / cap), before the mask
                        s[j] = step.softcap * math.tanh(s[j] / step.softcap)
                    if bias is not None:
                        s[j] += bias[t][h][j]
                s_rows.append([s.get(j, math.nan) for j in range(n_keys)])  # keys not computed: NaN, skipped in comparison
                if not keys:  # a fully masked row: softmax is 0/0
                    w_rows.append([math.nan] * n_keys)
                    mixed.extend([math.nan] * d)
                    continue
                m = max(s[j] for j in keys)  # subtract the max so exp never overflows
                e = {j: math.exp(s[j] - m) for j in keys}
                z = sum(e.values())
                w = [e[j] / z if j in e else 0.0 for j in range(n_keys)]
                mix = [0.0] * d
                for j in keys:
                    for c in range(d):
                        mix[c] += w[j] * v[j][h // group][c]
                w_rows.append(w)
                mixed.extend(mix)
            scores[t], weights[t], heads[t] = s_rows, w_rows, mixed
            out[t] = matvec(mixed, self.cols[f"{g}.w_o"], self.w[f"{g}.b_o"])
        prefix = internal_prefix(step)
        found: dict[str, dict[int, Any]] = {"q": q, "k": {t: k[t] for t in positions if t in k}, "v": {t: v[t] for t in positions if t in v},
                 "scores": scores, "weights": weights, "heads": heads}
        for key in ATTN_MEANINGS:
            st[f"{prefix}.{key}"] = found[key]
        st[step.name] = out


# -- each op's step, reference_NAME, as its record names it: the stage's value by position ----------
Values = dict[int, Any]  # position -> the stage's value there


def reference_embed(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    ids = r.inputs[step.stream or "tokens"][b]
    return {t: list(r.w["embedding"][ids[t]]) for t in positions}


def reference_input(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    return {t: list(r.inputs[step.stream or "x"][b][t]) for t in positions}


def reference_position_table(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values],
                             st: dict[str, Values]) -> Values:
    return {t: list(r.w["position"][t]) for t in positions}


def reference_sinusoidal(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    assert step.base is not None
    return {t: sinusoidal_row(t, r.spec.dims.C, step.base) for t in positions}


def reference_add(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    return {t: vec_add(ins[0][t], ins[1][t]) for t in positions}


reference_add_position = reference_add


def reference_identity(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    return dict(ins[0])


def reference_layer_norm(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    g, eps = step.weights, step.epsilon()
    return {t: layer_norm(ins[0][t], r.w[f"{g}.gamma"], r.w[f"{g}.beta"], eps) for t in positions}


def reference_rms_norm(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    g, eps = step.weights, step.epsilon()
    return {t: rms_norm(ins[0][t], r.w[f"{g}.gamma"], eps) for t in positions}


def reference_relu(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    return {t: relu(ins[0][t]) for t in positions}


def reference_linear(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    g = step.weights
    return {t: matvec(ins[0][t], r.cols[f"{g}.w"], r.w[f"{g}.b"]) for t in positions}


def reference_ffn(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    g = step.weights
    return {t: r.ffn_out(g, r.ffn_hidden(g, ins[0][t], step.activation)) for t in positions}


def reference_ffn_hidden(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    return {t: r.ffn_hidden(step.weights, ins[0][t], step.activation) for t in positions}


def reference_ffn_out(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    return {t: r.ffn_out(step.weights, ins[0][t]) for t in positions}


def reference_mha(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    r.mha(step, ins[0], ins[1] if step.op == "cross_mha" else ins[0], positions, st)  # records the internals too
    return st[step.name]


def reference_head(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    bias = r.w["head_bias"] if r.spec.block.head_bias else None
    return {t: matvec(ins[0][t], r.cols["head"], bias) for t in positions}


def reference_softmax(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    return {t: softmax(ins[0][t]) for t in positions}


# a mixture of experts
def top_k_gates(p: Vec, k: int) -> Vec:
    """The k largest of p (ties: the lower expert), renormalised to sum to 1; 0 for the others."""
    chosen = sorted(range(len(p)), key=lambda e: (-p[e], e))[:k]
    total = 0.0
    for e in chosen:  # in the order chosen, largest first, as the kernel sums them
        total += p[e]
    return [p[e] / total if e in chosen else 0.0 for e in range(len(p))]


def reference_router(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    return {t: matvec(ins[0][t], r.cols[f"{step.weights}.router"]) for t in positions}


def reference_router_probs(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    if step.axis == "T":  # the slip of a softmax over the positions: each expert's column over the positions computed
        E = len(ins[0][positions[0]])
        cols = [softmax([ins[0][t][e] for t in positions]) for e in range(E)]
        return {t: [cols[e][i] for e in range(E)] for i, t in enumerate(positions)}
    return {t: softmax(ins[0][t]) for t in positions}


def reference_top_k(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    k = r.spec.block_for(step.name).top_k or 1
    return {t: top_k_gates(ins[0][t], k) for t in positions}


def reference_expert_mix(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    g, C = step.weights, r.spec.dims.C
    out = {}
    for t in positions:
        x, gates = ins[0][t], ins[1][t]
        y = [0.0] * C
        for e, gate in enumerate(gates):
            if gate == 0.0:
                continue
            a = matvec(x, r.cols[f"{g}.w1_{e}"])
            up = matvec(x, r.cols[f"{g}.w3_{e}"])
            h = matvec([u * v for u, v in zip(silu(a), up)], r.cols[f"{g}.w2_{e}"])
            y = [yc + hc * gate for yc, hc in zip(y, h)]
        out[t] = y
    return out


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
    if isinstance(a, float) and math.isnan(a):
        return math.inf  # NumPy gave NaN where the reference has a number: they disagree
    return abs(a - b)


def max_abs(a: Any) -> float:
    """Largest |value| over nested lists, NaN (not computed) left out."""
    if isinstance(a, list):
        return max((max_abs(x) for x in a), default=0.0)
    return 0.0 if math.isnan(a) else abs(a)


# -- BERT's embeddings ---------------------------------------------
def reference_token_type_table(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values],
                               st: dict[str, Values]) -> Values:
    types = r.inputs["token_types"][b]
    return {t: list(r.w["token_type"][types[t]]) for t in positions}


def reference_position_offset(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values],
                              st: dict[str, Values]) -> Values:
    offset = step.start or 0
    return {t: list(r.w["position"][offset + t]) for t in positions}


# -- Gemma's scaled embeddings and its RMSNorm with (1 + gamma) -------------------------
def reference_embed_scale(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    factor = float(r.spec.dims.C) ** 0.5  # the reference computes in doubles
    return {t: [v * factor for v in ins[0][t]] for t in positions}


def reference_rms_norm_offset(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values],
                              st: dict[str, Values]) -> Values:
    g, eps = step.weights, step.epsilon()
    scale = [1.0 + w for w in r.w[f"{g}.gamma"]]
    return {t: rms_norm(ins[0][t], scale, eps) for t in positions}


def head_rms(v: Vec, gamma: Vec, eps: float) -> Vec:  # one head [d]: v / sqrt(mean(v^2) + eps) * gamma, a plain loop
    acc = 0.0
    for a in v:
        acc += a * a
    r = math.sqrt(acc / len(v) + eps)
    return [a / r * g for a, g in zip(v, gamma)]


def reference_softcap(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    cap = step.softcap or 1.0  # Gemma 2's logits: cap * tanh(x / cap), one value at a time
    return {t: [cap * math.tanh(v / cap) for v in ins[0][t]] for t in positions}


# -- T5's relative position bias (positions: relative) -------------------------------------
def reference_relative_bias(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    """At query t: [H][S], head h's bias for every key j, the table's row of the bucket of j - t (a plain loop)."""
    from tracer.model.relative import bucket

    assert step.relative is not None
    buckets, distance, bidirectional = step.relative
    table = r.w[step.weights or "relative_bias"]
    n_k = r.spec.stage_shapes[step.name][1][2]
    H = r.spec.dims.H
    out = {}
    for t in positions:
        rows = [table[bucket(j - t, bidirectional, buckets, distance)] for j in range(n_k)]
        out[t] = [[rows[j][h] for j in range(n_k)] for h in range(H)]
    return out


# -- Granite's multipliers, one value at a time -------------------------------------------------------------
def reference_scale(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    s = step.scale or 1.0
    return {t: [v * s for v in ins[0][t]] for t in positions}


def reference_divide(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    s = step.scale or 1.0
    return {t: [v / s for v in ins[0][t]] for t in positions}


# -- T5's tied head, the decoder's output times C ** -0.5 (block.head_scale) ---------------
def reference_head_scale(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    factor = float(r.spec.dims.C) ** -0.5  # the reference computes in doubles
    return {t: [v * factor for v in ins[0][t]] for t in positions}


# the task heads: a dense layer with its activation, and a task head's scores, position by position
def reference_dense(r: Reference, step: Step, b: int, positions: list[int], ins: list[Values], st: dict[str, Values]) -> Values:
    g, act = step.weights, activation_of(step.activation).run_reference()
    return {t: act(matvec(ins[0][t], r.cols[f"{g}.w"], r.w[f"{g}.b"])) for t in positions}


reference_score = reference_linear
