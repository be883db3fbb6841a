"""Time tracer on the GPT-2-sized block against PyTorch's nn.TransformerEncoderLayer, in one run.

    pip install -e '.[bench]'          # torch==2.13.0, CPU
    python benchmarks/vs_pytorch.py [--spec specs/gpt2-block.yaml] [--repeat 7] [--dtype float64]

Both sides: same dims, same dtype, causal mask, pre-norm, no dropout, CPU, the same number of threads.
tracer records every stage (attention internals included); PyTorch records nothing.  The runs
alternate (tracer, torch, tracer, ...) so that load on a shared machine hits both alike, and the
medians are compared.  Prints the ratio tracer / PyTorch (the target is at most 1.0).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default=str(ROOT / "specs" / "gpt2-block.yaml"))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: pip install -e '.[bench]' (torch==2.13.0)", file=sys.stderr)
        return 2
    import numpy as np

    from tracer import executor
    from tracer.spec import load_spec

    spec = load_spec(args.spec)
    spec = spec._replace(dtype=args.dtype)
    d = spec.dims
    threads = torch.get_num_threads()
    tdtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    layer = torch.nn.TransformerEncoderLayer(d.C, d.H, d.F, dropout=0.0, activation="relu", batch_first=True,
                                             norm_first=spec.block.norm_order == "pre", dtype=tdtype).eval()
    x = torch.rand(d.B, d.T, d.C, dtype=tdtype)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(d.T, dtype=tdtype)

    def run_torch() -> float:
        with torch.no_grad():
            t0 = time.perf_counter()
            layer(x, src_mask=mask, is_causal=True)
            return time.perf_counter() - t0

    def run_tracer() -> tuple[float, float]:
        t0 = time.perf_counter()
        ex = executor.Executor(spec)  # draws the weights and the input from the seed
        t1 = time.perf_counter()
        with np.errstate(all="ignore"):
            trace = ex.run()
        t2 = time.perf_counter()
        assert trace.ok and len(trace.stages) > 10
        return t2 - t1, t2 - t0

    run_torch(), run_tracer()  # warm up both
    torch_t, trace_t, total_t = [], [], []
    for _ in range(args.repeat):
        a, b = run_tracer()
        trace_t.append(a)
        total_t.append(b)
        torch_t.append(run_torch())
    tm, tr, tot = statistics.median(torch_t), statistics.median(trace_t), statistics.median(total_t)
    stages = executor.run(spec).stages
    recorded = sum(s.array.nbytes for s in stages.values())
    print(f"spec: {spec.name}  [B,T,C] = [{d.B},{d.T},{d.C}], H = {d.H}, F = {d.F}, {args.dtype}, {threads} threads, {args.repeat} runs each")
    print(f"PyTorch nn.TransformerEncoderLayer forward (no recording): median {tm * 1000:.0f} ms")
    print(f"tracer trace, {len(stages)} stages recorded ({recorded / 2**20:.0f} MiB): median {tr * 1000:.0f} ms")
    print(f"tracer including drawing the weights from the seed: median {tot * 1000:.0f} ms")
    print(f"ratio tracer / PyTorch: {tr / tm:.2f} (trace), {tot / tm:.2f} (with weight drawing); target <= 1.00")
    return 0


if __name__ == "__main__":
    sys.exit(main())
