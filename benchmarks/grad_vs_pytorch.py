"""Time `tracer grad` on the GPT-2-sized block against loss.backward() in PyTorch on the same block.

    pip install -e '.[bench]'          # torch==2.13.0, CPU
    python benchmarks/grad_vs_pytorch.py [--spec specs/gpt2-block.yaml] [--repeat 3] [--T 256]

Both sides: the same block with the same weights (tracer's, copied into nn.TransformerEncoderLayer),
the same input, float64, causal mask, pre-norm, no dropout, CPU, the same number of threads, and the
same loss, 0.5 * sum of Y^2.  tracer: forward with every stage recorded, the loss, and the backward
pass with every stage's and weight's gradient kept.  PyTorch: forward, the loss and loss.backward()
(weight gradients only).  "cold" is each side's first call in this process; then the runs alternate
(tracer, torch, ...) and the medians are compared.  The aim: tracer at most 1.0x PyTorch's forward
plus backward.  The largest difference of the weight gradients is printed as a check.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TORCH_NAMES = {  # tracer's weight -> (torch parameter, transposed?)
    "attn.w_o": ("self_attn.out_proj.weight", True), "attn.b_o": ("self_attn.out_proj.bias", False),
    "ffn.w1": ("linear1.weight", True), "ffn.b1": ("linear1.bias", False),
    "ffn.w2": ("linear2.weight", True), "ffn.b2": ("linear2.bias", False),
    "norm1.gamma": ("norm1.weight", False), "norm1.beta": ("norm1.bias", False),
    "norm2.gamma": ("norm2.weight", False), "norm2.beta": ("norm2.bias", False),
}


def torch_layer(torch: Any, params: dict[str, Any], C: int, H: int, F: int, eps: float) -> Any:
    layer = torch.nn.TransformerEncoderLayer(C, H, F, dropout=0.0, activation="relu", layer_norm_eps=eps, batch_first=True,
                                             norm_first=True, dtype=torch.float64)
    p = {k: torch.from_numpy(v.copy()) for k, v in params.items()}
    named = dict(layer.named_parameters())
    with torch.no_grad():
        named["self_attn.in_proj_weight"].copy_(torch.cat([p["attn.w_q"].T, p["attn.w_k"].T, p["attn.w_v"].T]))
        named["self_attn.in_proj_bias"].copy_(torch.cat([p["attn.b_q"], p["attn.b_k"], p["attn.b_v"]]))
        for ours, (theirs, transposed) in TORCH_NAMES.items():
            named[theirs].copy_(p[ours].T if transposed else p[ours])
    return layer.train()  # dropout is 0: train() only keeps the autograd path torch uses for training


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default=str(ROOT / "specs" / "gpt2-block.yaml"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--T", type=int, default=None, help="Fewer positions than the spec's, for a quick run.")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: pip install -e '.[bench]' (torch==2.13.0)", file=sys.stderr)
        return 2
    import numpy as np

    from tracer import executor
    from tracer.grad.run import backward
    from tracer.params import load_params
    from tracer.spec import load_spec

    spec = load_spec(args.spec)
    if args.T is not None:
        spec = spec._replace(dims=spec.dims._replace(T=args.T),
                             stage_shapes={k: (a, tuple(args.T if ax == "T" else n for ax, n in zip(a, s)))
                                           for k, (a, s) in spec.stage_shapes.items()})
    spec = spec._replace(dtype="float64")
    d = spec.dims
    threads = torch.get_num_threads()
    params = load_params(spec)
    layer = torch_layer(torch, params, d.C, d.H, d.F, spec.block.eps)
    x = torch.from_numpy(executor.Executor(spec).inputs["x"].copy())
    mask = torch.nn.Transformer.generate_square_subsequent_mask(d.T, dtype=torch.float64)

    def run_torch() -> float:
        layer.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        y = layer(x, src_mask=mask, is_causal=True)
        loss = 0.5 * (y * y).sum()
        loss.backward()
        return time.perf_counter() - t0

    last: dict[str, Any] = {}

    def run_tracer() -> float:
        t0 = time.perf_counter()
        ex = executor.Executor(spec)  # draws the weights and the input from the seed, as tracer grad does
        with np.errstate(all="ignore"):
            trace = ex.run()
            g = backward(trace, "sum-squares", ex.params, ex.inputs)
        t = time.perf_counter() - t0
        assert trace.ok and g.loss is not None
        last["g"] = g
        return t

    cold_tracer, cold_torch = run_tracer(), run_torch()
    torch_t, tracer_t = [], []
    for _ in range(args.repeat):
        tracer_t.append(run_tracer())
        torch_t.append(run_torch())
    tm, tr = statistics.median(torch_t), statistics.median(tracer_t)
    named = dict(layer.named_parameters())
    worst = 0.0
    for ours, (theirs, transposed) in TORCH_NAMES.items():
        grad = named[theirs].grad
        want = (grad.T if transposed else grad).numpy()
        worst = max(worst, float(np.max(np.abs(last["g"].weight_grads[ours] - want))))
    print(f"spec: {spec.name}  [B,T,C] = [{d.B},{d.T},{d.C}], H = {d.H}, F = {d.F}, float64, {threads} threads, {args.repeat} runs each")
    print(f"cold (first call): tracer grad {cold_tracer * 1000:.0f} ms, PyTorch forward + backward {cold_torch * 1000:.0f} ms")
    print(f"PyTorch forward + loss.backward(): median {tm * 1000:.0f} ms")
    print(f"tracer forward + backward, every stage and its gradient kept: median {tr * 1000:.0f} ms")
    print(f"ratio tracer / PyTorch: {tr / tm:.2f} (median), {cold_tracer / cold_torch:.2f} (cold); target <= 1.00")
    print(f"largest |tracer - PyTorch| over the weight gradients: {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
