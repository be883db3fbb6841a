"""Time `tracer grad` on the GPT-2-sized block against loss.backward() in PyTorch on the same block: cold and warm.

    pip install -e '.[bench]'          # torch==2.13.0, CPU
    python benchmarks/grad_vs_pytorch.py [--spec specs/gpt2-block.yaml] [--repeat 3] [--T 256] [--skip-cold] [--tiny]

Both sides: the same dims, float64, causal mask, pre-norm, no dropout, CPU, the same number of threads,
and the same loss, 0.5 * sum of Y^2.  tracer: what ``tracer grad SPEC`` does for its table: forward with every
stage recorded but the [B,H,T,T] attention scores and weights (the table shows neither), the loss, and the
backward pass with every stage's and weight's gradient kept (each head's attention weights made again).  PyTorch: nn.TransformerEncoderLayer's
forward (training-mode path), the loss and loss.backward() (weight gradients only).

Cold (what a user waits for): each repeat starts fresh processes, in turn,
  - ``python -m tracer grad SPEC`` (draws the weights, runs forward and backward, renders the table, exits),
  - ``python -m tracer grad specs/ch17-prenorm.yaml`` (a tiny spec: the start-up alone),
  - a PyTorch process that builds the layer (its default init) and the input, then runs its first forward + backward,
    timing both with perf_counter.
tracer's cold time is the median of (big run - tiny run).  The fair ratio compares it with PyTorch's build + forward +
backward; the old ratio with the forward + backward alone.

Warm (one process): the same weights (tracer's, copied into the torch layer) and input on both sides;
"first" is each side's first call in this process, then the runs alternate (tracer, torch, ...) and
the medians are compared; the largest difference of the weight gradients is printed as a check.
The aim: cold, tracer at most 1.0x PyTorch's build + forward + backward.
"""

from __future__ import annotations

import os

# As the tracer command does (tracer/__main__.py), before NumPy loads OpenBLAS: its idle threads sleep at once instead
# of spinning for about 0.1 s after each product on the cores that tracer's own threads (attention, blas.both) need.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse
import atexit
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vs_pytorch import TINY_BLOCK, blas_line, child_env, load, ms, quickest, wall  # benchmarks/vs_pytorch.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TINY = ROOT / "specs" / "ch17-prenorm.yaml"
TORCH_CHILD = r"""
import sys, time, torch
B, T, C, H, F, threads = map(int, sys.argv[1:])
torch.set_num_threads(threads)
t0 = time.perf_counter()
layer = torch.nn.TransformerEncoderLayer(C, H, F, dropout=0.0, activation="relu", batch_first=True, norm_first=True,
                                         dtype=torch.float64).train()
x = torch.rand(B, T, C, dtype=torch.float64)
mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
t1 = time.perf_counter()
y = layer(x, src_mask=mask, is_causal=True)
loss = 0.5 * (y * y).sum()
loss.backward()
print(time.perf_counter() - t1, t1 - t0)
"""

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


def cold(spec_path: str, d: Any, threads: int, repeat: int) -> None:
    """The headline: tracer grad minus start-up against a fresh PyTorch process building the layer (its default init)
    and the input, then its first forward + backward; and the old row, against the forward + backward alone."""
    env = child_env()
    big = [sys.executable, "-m", "tracer", "grad", spec_path]
    tiny = [sys.executable, "-m", "tracer", "grad", str(TINY)]
    torch_cmd = [sys.executable, "-c", TORCH_CHILD, *map(str, (d.B, d.T, d.C, d.H, d.F, threads))]
    big_t: list[float] = []
    tiny_t: list[float] = []
    torch_t: list[float] = []
    build_t: list[float] = []
    for _ in range(repeat):
        big_t.append(wall(big, env)[0])
        tiny_t.append(wall(tiny, env)[0])
        fwd_bwd, build = map(float, wall(torch_cmd, env)[1].split())
        torch_t.append(fwd_bwd)
        build_t.append(build)
    diffs = [b - t for b, t in zip(big_t, tiny_t, strict=True)]
    whole = [f + b for f, b in zip(torch_t, build_t, strict=True)]
    mine, theirs, fair = statistics.median(diffs), statistics.median(torch_t), statistics.median(whole)
    print(f"COLD, whole fresh processes, {repeat} interleaved repeats")
    print(f"  tracer grad {Path(spec_path).name}: {ms(big_t)}")
    print(f"  tracer grad {TINY.name} (start-up): {ms(tiny_t)}")
    print(f"  tracer, grad minus start-up: {ms(diffs)}")
    print(f"  PyTorch build + first forward + loss.backward(), training-mode: {ms(whole)}; building the layer "
          f"(default init) and input median {statistics.median(build_t) * 1000:.0f} ms, forward + backward median "
          f"{theirs * 1000:.0f} ms")
    print(f"  fair ratio tracer / PyTorch build + forward + backward: {mine / fair:.2f}; target <= 1.00")
    print(f"  old ratio tracer / PyTorch forward + backward alone (building not counted): {mine / theirs:.2f}")
    print(f"  fair ratio of the fastest runs (a loaded machine's quietest moments): {quickest(big_t, tiny_t)} / "
          f"{min(whole) * 1000:.0f} ms = {(min(big_t) - min(tiny_t)) / min(whole):.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default=str(ROOT / "specs" / "gpt2-block.yaml"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--T", type=int, default=None, help="Fewer positions than the spec's, for a quick warm run (the cold run uses the spec's).")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="a tiny block, one repeat: checks that the script runs")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: pip install -e '.[bench]' (torch==2.13.0)", file=sys.stderr)
        return 2
    import numpy as np

    from tracer.engine import executor
    from tracer.engine.params import load_params
    from tracer.grad.run import backward, lean_policy
    from tracer.spec import load_spec

    if args.tiny:
        scratch = Path(tempfile.mkdtemp(prefix="tracer-bench-"))
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        args.spec = str(scratch / "tiny-block.yaml")
        Path(args.spec).write_text(TINY_BLOCK, encoding="utf-8")
        args.repeat = 1
    spec = load_spec(args.spec)
    if args.T is not None:
        spec = spec._replace(dims=spec.dims._replace(T=args.T),
                             stage_shapes={k: (a, tuple(args.T if ax == "T" else n for ax, n in zip(a, s)))
                                           for k, (a, s) in spec.stage_shapes.items()})
    spec = spec._replace(dtype="float64")
    d = spec.dims
    threads = torch.get_num_threads()
    print(f"spec: {spec.name}  [B,T,C] = [{d.B},{d.T},{d.C}], H = {d.H}, F = {d.F}, float64, {threads} threads, {args.repeat} runs each")
    print(blas_line())
    print(f"PyTorch {torch.__version__}: {threads} threads; {load()}")
    if not args.skip_cold:
        cold(args.spec, load_spec(args.spec).dims, threads, args.repeat)
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
        last.clear()  # the previous run's trace and gradients go first, as zero_grad(set_to_none=True) frees torch's
        t0 = time.perf_counter()
        ex = executor.Executor(spec, policy=lean_policy(spec))  # draws the weights and the input from the seed, as tracer grad does
        with np.errstate(all="ignore"):
            trace = ex.run()
            t1 = time.perf_counter()
            g = backward(trace, "sum-squares", ex.params, ex.inputs, (0, 0))  # the table's b, t: arrays let go as tracer grad does
        t2 = time.perf_counter()
        assert trace.ok and g.loss is not None
        last["g"] = g
        forward_t.append(t1 - t0)
        backward_t.append(t2 - t1)
        return t2 - t0

    forward_t: list[float] = []  # weights drawn and the forward traced
    backward_t: list[float] = []  # the loss and the backward pass
    cold_tracer, cold_torch = run_tracer(), run_torch()
    torch_t, tracer_t = [], []
    for _ in range(args.repeat):
        tracer_t.append(run_tracer())
        torch_t.append(run_torch())
    tm, tr = statistics.median(torch_t), statistics.median(tracer_t)
    fw, bw = statistics.median(forward_t[1:]), statistics.median(backward_t[1:])
    named = dict(layer.named_parameters())
    worst = 0.0
    for ours, (theirs, transposed) in TORCH_NAMES.items():
        grad = named[theirs].grad
        want = (grad.T if transposed else grad).numpy()
        worst = max(worst, float(np.max(np.abs(last["g"].weight_grads[ours] - want))))
    print(f"WARM, one process{f', T = {d.T}' if args.T is not None else ''}, {args.repeat} interleaved repeats")
    print(f"  first call: tracer grad {cold_tracer * 1000:.0f} ms, PyTorch forward + backward {cold_torch * 1000:.0f} ms")
    print(f"  PyTorch forward + loss.backward(): median {tm * 1000:.0f} ms")
    print(f"  tracer forward + backward, as tracer grad's table: median {tr * 1000:.0f} ms "
          f"(forward with the weights drawn {fw * 1000:.0f} ms, loss and backward {bw * 1000:.0f} ms)")
    print(f"  warm ratio tracer / PyTorch: {tr / tm:.2f} (median), {cold_tracer / cold_torch:.2f} (first call); target <= 1.00")
    print(f"  largest |tracer - PyTorch| over the weight gradients: {worst:.3g}")
    print(f"at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
