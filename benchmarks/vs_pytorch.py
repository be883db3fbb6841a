"""Time tracer on the GPT-2-sized block against PyTorch's nn.TransformerEncoderLayer: cold and warm.

    pip install -e '.[bench]'          # torch==2.13.0, CPU
    python benchmarks/vs_pytorch.py [--spec specs/gpt2-block.yaml] [--repeat 3] [--dtype float64]

Both sides: same dims, same dtype, causal mask, pre-norm, no dropout, CPU, the same number of threads.

Cold (what a user waits for): each repeat starts fresh processes, in turn,
  - ``python -m tracer run SPEC`` (draws the weights, traces, renders the table, exits),
  - ``python -m tracer run specs/ch17-prenorm.yaml`` (a tiny spec: the start-up alone),
  - a PyTorch process for each of PyTorch's two paths (training-mode, and eval mode's fast path under
    no_grad), which builds the layer and times its first forward (the cold one) with perf_counter.
tracer's cold time is the median of (big run - tiny run); it is compared with the FASTER PyTorch path.

Warm (a loop inside one process): tracer's trace, keeping what `tracer run SPEC` keeps (and trace + weight
drawing), against the faster path.

Verify and diff (skip with --skip-verify, --skip-diff): `tracer run SPEC --verify` minus `tracer run SPEC`
against the time the reference's budget promises (tracer.engine.reference.OPS_PER_SECOND), and `tracer diff SPEC TWIN`
(the spec in the other dtype) against one run.
The runs alternate so that load on a shared machine hits both alike; medians are compared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TINY = ROOT / "specs" / "ch17-prenorm.yaml"
PATHS = ("training-mode", "eval fast path")

TORCH_CHILD = r"""
import sys, time, torch
B, T, C, H, F, pre, dtype, threads, path = sys.argv[1:]
B, T, C, H, F, threads = map(int, (B, T, C, H, F, threads))
torch.set_num_threads(threads)
tdtype = getattr(torch, dtype)
t0 = time.perf_counter()
layer = torch.nn.TransformerEncoderLayer(C, H, F, dropout=0.0, activation="relu", batch_first=True,
                                         norm_first=pre == "pre", dtype=tdtype)
x = torch.rand(B, T, C, dtype=tdtype)
mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=tdtype)
t1 = time.perf_counter()
if path == "training-mode":
    layer.train()
    y = layer(x, src_mask=mask, is_causal=True)
else:
    layer.eval()
    with torch.no_grad():
        y = layer(x, src_mask=mask, is_causal=True)
t2 = time.perf_counter()
print(t2 - t1, t1 - t0)
"""


def make_torch_layer(torch: Any, d: Any, pre: bool, tdtype: Any) -> Any:
    return torch.nn.TransformerEncoderLayer(d.C, d.H, d.F, dropout=0.0, activation="relu", batch_first=True,
                                            norm_first=pre, dtype=tdtype)


def blas_line() -> str:
    import numpy as np

    try:
        cfg: Any = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        name = f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # an older NumPy: no dicts
        name = "unknown"
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-not-found]

        pools = ", ".join(f"{p['internal_api']} {p['num_threads']} threads" for p in threadpool_info())
    except ImportError:
        env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ}
        pools = f"threadpoolctl not installed; {os.cpu_count()} CPUs; env {env or 'unset'}"
    return f"NumPy BLAS: {name} ({pools})"


def wall(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True)
    return time.perf_counter() - t0, done.stdout


def cold(spec_path: str, d: Any, pre: bool, dtype: str, threads: int, repeat: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    run = [sys.executable, "-m", "tracer", "run", spec_path]
    tiny = [sys.executable, "-m", "tracer", "run", str(TINY)]
    big_t: list[float] = []
    tiny_t: list[float] = []
    torch_t: dict[str, list[float]] = {p: [] for p in PATHS}
    build_t: dict[str, list[float]] = {p: [] for p in PATHS}
    for _ in range(repeat):
        big_t.append(wall(run, env)[0])
        tiny_t.append(wall(tiny, env)[0])
        for p in PATHS:
            out = wall([sys.executable, "-c", TORCH_CHILD, str(d.B), str(d.T), str(d.C), str(d.H), str(d.F),
                        "pre" if pre else "post", dtype, str(threads), p], env)[1]
            fwd, build = map(float, out.split())
            torch_t[p].append(fwd)
            build_t[p].append(build)
    diffs = [b - t for b, t in zip(big_t, tiny_t, strict=True)]
    med = {p: statistics.median(v) for p, v in torch_t.items()}
    best = min(med, key=lambda p: med[p])
    mine = statistics.median(diffs)
    print(f"COLD, whole fresh processes, {repeat} interleaved repeats")
    print(f"  tracer run {Path(spec_path).name}: median {statistics.median(big_t) * 1000:.0f} ms "
          f"(runs {', '.join(f'{t * 1000:.0f}' for t in big_t)})")
    print(f"  tracer run {TINY.name} (start-up): median {statistics.median(tiny_t) * 1000:.0f} ms")
    print(f"  tracer, run minus start-up: median {mine * 1000:.0f} ms (runs {', '.join(f'{t * 1000:.0f}' for t in diffs)})")
    for p in PATHS:
        print(f"  PyTorch first forward, {p}: median {med[p] * 1000:.0f} ms "
              f"(building the layer and input: {statistics.median(build_t[p]) * 1000:.0f} ms, not counted)")
    print(f"  cold ratio tracer / PyTorch ({best}, the faster): {mine / med[best]:.2f}; target <= 1.00")


def verify_and_diff(spec_path: str, dtype: str, repeat: int, scratch: Path, do_verify: bool, do_diff: bool) -> None:
    """--verify against what its budget promises, and tracer diff of the spec against its other-dtype twin
    against one run: whole fresh processes, interleaved, medians."""
    from tracer.engine.reference import DEFAULT_BUDGET, OPS_PER_SECOND

    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    base = [sys.executable, "-m", "tracer"]
    other = "float32" if dtype == "float64" else "float64"
    twin = scratch / f"twin-{other}.yaml"
    twin.write_text(Path(spec_path).read_text(encoding="utf-8") + f"\ndtype: {other}\n", encoding="utf-8")
    one_t: list[float] = []
    verify_t: list[float] = []
    diff_t: list[float] = []
    for _ in range(repeat):
        one_t.append(wall(base + ["run", spec_path], env)[0])
        if do_verify:
            verify_t.append(wall(base + ["run", spec_path, "--verify"], env)[0])
        if do_diff:
            t0 = time.perf_counter()
            subprocess.run(base + ["diff", spec_path, str(twin)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)  # exit 1: the two dtypes differ, as they should
            diff_t.append(time.perf_counter() - t0)
    one = statistics.median(one_t)
    print(f"VERIFY AND DIFF, whole fresh processes, {repeat} interleaved repeats; one run: median {one * 1000:.0f} ms")
    if do_verify:
        own = statistics.median(verify_t) - one
        promised = DEFAULT_BUDGET / OPS_PER_SECOND
        print(f"  tracer run --verify: median {statistics.median(verify_t) * 1000:.0f} ms; the reference's own part "
              f"{own:.2f} s against its budget's {DEFAULT_BUDGET:,} operations at {OPS_PER_SECOND / 1e6:.0f} million a second "
              f"= {promised:.1f} s: ratio {own / promised:.2f}; target <= 1.50")
    if do_diff:
        print(f"  tracer diff against the {other} twin: median {statistics.median(diff_t) * 1000:.0f} ms: "
              f"{statistics.median(diff_t) / one:.2f} x one run; target <= 2.20")


def warm(spec: Any, d: Any, pre: bool, dtype: str, repeat: int) -> None:
    import numpy as np
    import torch

    from tracer.engine import executor
    from tracer.spec.memory import RecordPolicy

    tdtype = getattr(torch, dtype)
    layer = make_torch_layer(torch, d, pre, tdtype)
    x = torch.rand(d.B, d.T, d.C, dtype=tdtype)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(d.T, dtype=tdtype)

    def run_torch(path: str) -> float:
        t0 = time.perf_counter()
        if path == "training-mode":
            layer.train()
            layer(x, src_mask=mask, is_causal=True)
        else:
            layer.eval()
            with torch.no_grad():
                layer(x, src_mask=mask, is_causal=True)
        return time.perf_counter() - t0

    def run_tracer() -> tuple[float, float]:
        t0 = time.perf_counter()
        ex = executor.Executor(spec, policy=RecordPolicy("table"))  # as `tracer run SPEC` keeps it; draws the weights
        t1 = time.perf_counter()
        with np.errstate(all="ignore"):
            trace = ex.run()
        t2 = time.perf_counter()
        assert trace.ok and len(trace.stages) >= 9
        return t2 - t1, t2 - t0

    for p in PATHS:
        run_torch(p)
    run_tracer()  # warm up both
    torch_t: dict[str, list[float]] = {p: [] for p in PATHS}
    trace_t, total_t = [], []
    for _ in range(repeat):
        a, b = run_tracer()
        trace_t.append(a)
        total_t.append(b)
        for p in PATHS:
            torch_t[p].append(run_torch(p))
    med = {p: statistics.median(v) for p, v in torch_t.items()}
    best = min(med, key=lambda p: med[p])
    tr, tot = statistics.median(trace_t), statistics.median(total_t)
    print(f"WARM, one process, {repeat} interleaved repeats")
    for p in PATHS:
        print(f"  PyTorch forward, {p}: median {med[p] * 1000:.0f} ms")
    print(f"  tracer trace: median {tr * 1000:.0f} ms; with drawing the weights: median {tot * 1000:.0f} ms")
    print(f"  warm ratio tracer / PyTorch ({best}, the faster): {tr / med[best]:.2f} (trace), "
          f"{tot / med[best]:.2f} (with weight drawing)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default=str(ROOT / "specs" / "gpt2-block.yaml"))
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repeats of each measurement (more: steadier)")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="PyTorch's threads (NumPy's BLAS uses every CPU)")
    ap.add_argument("--skip-warm", action="store_true")
    ap.add_argument("--skip-verify", action="store_true", help="do not time tracer run --verify (about 10 s a repeat)")
    ap.add_argument("--skip-diff", action="store_true", help="do not time tracer diff against the other dtype's twin")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: pip install -e '.[bench]' (torch==2.13.0)", file=sys.stderr)
        return 2
    from tracer.spec import load_spec

    torch.set_num_threads(args.threads)
    spec = load_spec(args.spec)
    spec = spec._replace(dtype=args.dtype)
    d = spec.dims
    pre = spec.block.norm_order == "pre"
    print(f"spec: {spec.name}  [B,T,C] = [{d.B},{d.T},{d.C}], H = {d.H}, F = {d.F}, {args.dtype}")
    print(blas_line())
    print(f"PyTorch {torch.__version__}: {torch.get_num_threads()} threads; load average {os.getloadavg()[0]:.1f}")
    scratch = Path(tempfile.mkdtemp(prefix="tracer-bench-"))
    try:
        spec_path = args.spec
        if args.dtype != "float64":  # the cold run reads a twin of the spec in the other dtype
            twin = scratch / Path(args.spec).name
            twin.write_text(Path(args.spec).read_text(encoding="utf-8") + f"\ndtype: {args.dtype}\n", encoding="utf-8")
            spec_path = str(twin)
        cold(spec_path, d, pre, args.dtype, args.threads, args.repeat)
        if not (args.skip_verify and args.skip_diff):
            verify_and_diff(spec_path, args.dtype, args.repeat, scratch, not args.skip_verify, not args.skip_diff)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not args.skip_warm:
        warm(spec, d, pre, args.dtype, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
