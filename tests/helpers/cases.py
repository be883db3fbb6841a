"""Random small blocks for the tests: every weight drawn here and written into the spec, so the same numbers feed
tracer and the independent oracle (tests/helpers/oracle.py), which gives the expected output."""

from __future__ import annotations

import json
import math
import random

import numpy as np

from helpers.oracle import BLOCKS, causal

SANDWICH_STEPS = """\
    - {name: norm1, op: layer_norm, in: x, weights: norm1}
    - {name: attention, op: mha, in: norm1, weights: attn}
    - {name: attn_norm, op: layer_norm, in: attention, weights: norm_a}
    - {name: residual1, op: add, in: [x, attn_norm]}
    - {name: norm2, op: layer_norm, in: residual1, weights: norm2}
    - {name: ffn, op: ffn, in: norm2, weights: ffn}
    - {name: ffn_norm, op: layer_norm, in: ffn, weights: norm_f}
    - {name: output, op: add, in: [residual1, ffn_norm]}
"""

PARALLEL_STEPS = """\
    - {name: norm1, op: layer_norm, in: x, weights: norm1}
    - {name: attention, op: mha, in: norm1, weights: attn}
    - {name: ffn, op: ffn, in: norm1, weights: ffn}
    - {name: both, op: add, in: [attention, ffn]}
    - {name: output, op: add, in: [x, both]}
"""

STEPS = {"sandwich": SANDWICH_STEPS, "parallel": PARALLEL_STEPS}
NORMS = {"pre": ("norm1", "norm2"), "post": ("norm1", "norm2"), "sandwich": ("norm1", "norm_a", "norm2", "norm_f"),
         "parallel": ("norm1",)}


def random_case(seed: int, kind: str | None = None, mask: str | None = None) -> dict:
    """A random small valid block: dims with H | C, every weight drawn here and written into the spec."""
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    H, d = rnd.randint(1, 3), rnd.randint(1, 3)
    B, T, C, F = rnd.randint(1, 3), rnd.randint(1, 6), H * d, rnd.randint(1, 8)
    kind = kind or rnd.choice(list(BLOCKS))
    mask = mask or rnd.choice(["causal", "none"])
    eps = rnd.choice([1e-5, 1e-6, 0.1])

    def m(*shape, scale=1.0):
        return rng.uniform(-scale, scale, shape)

    W = {"attn": {**{f"w_{n}": m(C, C, scale=1 / math.sqrt(C)) for n in "qkvo"}, **{f"b_{n}": m(C, scale=0.1) for n in "qkvo"}},
         "ffn": {"w1": m(C, F, scale=1 / math.sqrt(C)), "b1": m(F, scale=0.1), "w2": m(F, C, scale=1 / math.sqrt(F)), "b2": m(C, scale=0.1)}}
    for n in NORMS[kind]:
        W[n] = {"gamma": 1 + m(C, scale=0.2), "beta": m(C, scale=0.2)}
    x = m(B, T, C)
    if kind in STEPS:
        block = f"{{mask: {mask}, eps: {eps!r}, steps: [{', '.join(flow(STEPS[kind]))}]}}"
    else:
        block = json.dumps({"mask": mask, "eps": eps, "norm_order": kind})
    visible = causal(T) if mask == "causal" else None
    return {"text": spec_text(f"random case {seed} ({kind}, mask {mask})", x, W, H, F, block),
            "x": x, "W": W, "H": H, "eps": eps, "visible": visible, "kind": kind,
            "dims": (B, T, C, H, F), "mask": mask, "expected": BLOCKS[kind](x, W, H, eps, visible)}


def spec_text(name: str, x, W: dict, H: int, F: int, block: str) -> str:
    """A spec giving x and every weight explicitly (JSON flow style, floats written to round-trip exactly)."""
    weights = {g: {k: np.asarray(v).tolist() for k, v in ws.items()} for g, ws in W.items()}
    return "\n".join([f"name: {name}", f"dims: {json.dumps({'C': x.shape[-1], 'H': H, 'F': F})}", f"block: {block}",
                      f"input: {{x: {json.dumps(x.tolist())}}}", f"weights: {json.dumps(weights)}"]) + "\n"


def flow(steps: str) -> list[str]:
    """Block-style step lines ('    - {...}') as flow items ('{...}')."""
    return [line.strip()[2:] for line in steps.splitlines() if line.strip()]
