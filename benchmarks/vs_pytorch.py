"""Time tracer on the GPT-2-sized block against PyTorch's nn.TransformerEncoderLayer: cold and warm.

    pip install -e '.[bench]'          # torch==2.13.0, CPU
    python benchmarks/vs_pytorch.py [--spec specs/gpt2-block.yaml] [--repeat 3] [--dtype float64] [--tiny]

Both sides: same dims, same dtype, causal mask, pre-norm, no dropout, CPU, the same number of threads.

Cold (what a user waits for): each repeat starts fresh processes, in turn,
  - ``python -m tracer run SPEC`` (draws the weights, traces, renders the table, exits),
  - ``python -m tracer run specs/ch17-prenorm.yaml`` (a tiny spec: the start-up alone),
  - a PyTorch process for each of PyTorch's two paths (training-mode, and eval mode's fast path under
    no_grad), which builds the layer and times its first forward (the cold one) with perf_counter.
  - a child that times the trace alone (the weights drawn and the imports done before its clock starts; no table),
  - a child that times the GEMM floor: the block's six products (Q, K, V, O, FFN up and down) at its shapes and dtype
    through NumPy's BLAS, each the best of a few calls.
tracer's cold time is the median of (big run - tiny run).  The fair ratio compares it with PyTorch's build of the layer
(its default init) and input plus its first forward, on the faster path; the old ratio with the forward alone.
The trace alone is compared with the floor (medians over the repeats).

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
TINY_BLOCK = "name: tiny block\ndims: {B: 1, T: 32, C: 64, H: 4, F: 128}\nseed: 0\nblock: {norm_order: pre, mask: causal}\ninput: {x: random}\n"

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

# The trace alone, in a fresh process: what `tracer run SPEC` traces (its record policy, glibc keeping freed memory as
# the command does), timed from the first step to the last; the imports, the weight drawing and the table are not counted.
# A second trace in the same child, in memory the first one already faulted in, shows what the first writes cost.
TRACE_CHILD = r"""
import sys, time
import numpy as np
from tracer.engine import executor
from tracer.process import keep_freed_memory
from tracer.spec import load_spec
from tracer.spec.memory import RecordPolicy
keep_freed_memory()
spec = load_spec(sys.argv[1])
times = []
for _ in range(2):  # the first trace of the process, then the same again in memory the first one faulted in
    ex = executor.Executor(spec, policy=RecordPolicy("table"))
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        trace = ex.run()
    times.append(time.perf_counter() - t0)
    assert trace.ok
    del trace, ex
print(*times)
"""

# The floor: the block's six products at its shapes and dtype through NumPy's BLAS, each the best of a few calls.
FLOOR_BEST = 5
FLOOR_CHILD = r"""
import sys, time
import numpy as np
N, C, F = map(int, sys.argv[1:4])
rng = np.random.default_rng(0)
x, h = (rng.random((N, n)).astype(sys.argv[4]) for n in (C, F))
w, w1, w2 = (rng.random(s).astype(sys.argv[4]) for s in ((C, C), (C, F), (F, C)))
def best(a, b):
    out = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    times = []
    for _ in range(int(sys.argv[5])):
        t0 = time.perf_counter()
        np.matmul(a, b, out=out)
        times.append(time.perf_counter() - t0)
    return min(times)
print(4 * best(x, w) + best(x, w1) + best(h, w2))
"""


def make_torch_layer(torch: Any, d: Any, pre: bool, tdtype: Any) -> Any:
    return torch.nn.TransformerEncoderLayer(d.C, d.H, d.F, dropout=0.0, activation="relu", batch_first=True,
                                            norm_first=pre, dtype=tdtype)


def openblas_core() -> str:
    """The kernel OpenBLAS runs in this process (after NumPy is imported), and OPENBLAS_CORETYPE when it is set:
    a forced older core (some machines set Haswell) makes every product of NumPy's, so tracer's, slower."""
    import ctypes

    forced = os.environ.get("OPENBLAS_CORETYPE")
    note = f"; OPENBLAS_CORETYPE={forced} is set" if forced else ""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1].lower()})
    except OSError:
        return f"core unknown{note}"
    for path in paths:
        try:
            lib: Any = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
                     "openblas_get_corename"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return f"core {fn().decode()}{note}"
    return f"core unknown{note}"


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
        from tracer.engine import blas as tracer_blas

        found = tracer_blas._openblas()
        env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ}
        pools = (f"{found[0]()} threads" if found is not None else f"{os.cpu_count()} CPUs") + f"; env {env or 'unset'}"
    return f"NumPy BLAS: {name} ({pools}; {openblas_core()})"


def load() -> str:
    return "load average " + ", ".join(f"{v:.1f}" for v in os.getloadavg())


def wall(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True)
    return time.perf_counter() - t0, done.stdout


def ms(values: list[float]) -> str:
    """The median and the spread (lowest-highest) of timings in seconds, in ms."""
    return (f"median {statistics.median(values) * 1000:.0f} ms (spread {min(values) * 1000:.0f}-{max(values) * 1000:.0f}; "
            f"runs {', '.join(f'{t * 1000:.0f}' for t in values)})")


def quickest(big: list[float], tiny: list[float]) -> str:
    """tracer's fastest big run less its fastest start-up, in ms (the medians' peer on a loaded machine)."""
    return f"{(min(big) - min(tiny)) * 1000:.0f} ms"


def child_env() -> dict[str, str]:
    """What every child runs with: this checkout's tracer, and OpenBLAS's idle threads sleeping at once, as the tracer
    command sets it (tracer/__main__.py), so that the trace-alone and floor children run NumPy as `tracer run` does."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    return env


def cold(spec_path: str, d: Any, pre: bool, dtype: str, threads: int, repeat: int) -> None:
    """The headline: tracer run minus start-up against a fresh PyTorch process building the layer (its default init)
    and the input, then its first forward; and the trace alone against the six products' floor, in the same run."""
    env = child_env()
    run = [sys.executable, "-m", "tracer", "run", spec_path]
    tiny = [sys.executable, "-m", "tracer", "run", str(TINY)]
    alone = [sys.executable, "-c", TRACE_CHILD, spec_path]
    floor = [sys.executable, "-c", FLOOR_CHILD, *map(str, (d.B * d.T, d.C, d.F)), dtype, str(FLOOR_BEST)]
    big_t: list[float] = []
    tiny_t: list[float] = []
    alone_t: list[float] = []
    again_t: list[float] = []
    floor_t: list[float] = []
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
        first, again = map(float, wall(alone, env)[1].split())
        alone_t.append(first)
        again_t.append(again)
        floor_t.append(float(wall(floor, env)[1]))
    diffs = [b - t for b, t in zip(big_t, tiny_t, strict=True)]
    whole = {p: [f + b for f, b in zip(torch_t[p], build_t[p], strict=True)] for p in PATHS}
    fair = {p: statistics.median(v) for p, v in whole.items()}
    fwd_only = {p: statistics.median(v) for p, v in torch_t.items()}
    best_fair = min(fair, key=lambda p: fair[p])
    best_fwd = min(fwd_only, key=lambda p: fwd_only[p])
    mine = statistics.median(diffs)
    print(f"COLD, whole fresh processes, {repeat} interleaved repeats")
    print(f"  tracer run {Path(spec_path).name}: {ms(big_t)}")
    print(f"  tracer run {TINY.name} (start-up): {ms(tiny_t)}")
    print(f"  tracer, run minus start-up: {ms(diffs)}")
    for p in PATHS:
        print(f"  PyTorch build + first forward, {p}: {ms(whole[p])}; building the layer (default init) and input "
              f"median {statistics.median(build_t[p]) * 1000:.0f} ms, the forward median {fwd_only[p] * 1000:.0f} ms")
    print(f"  fair ratio tracer / PyTorch build + forward ({best_fair}, the faster): {mine / fair[best_fair]:.2f}; "
          f"target <= 0.80")
    print(f"  old ratio tracer / PyTorch forward alone ({best_fwd}, the faster; building not counted): "
          f"{mine / fwd_only[best_fwd]:.2f}")
    print(f"  fair ratio of the fastest runs (a loaded machine's quietest moments): {quickest(big_t, tiny_t)} / "
          f"{min(min(v) for v in whole.values()) * 1000:.0f} ms = "
          f"{(min(big_t) - min(tiny_t)) / min(min(v) for v in whole.values()):.2f}")
    gflop = 2 * d.B * d.T * (4 * d.C * d.C + 2 * d.C * d.F) / 1e9
    low = statistics.median(floor_t)
    print(f"TRACE AND THE GEMM FLOOR, fresh child processes, the same {repeat} repeats")
    print(f"  the trace alone (no start-up, weight drawing or rendering): {ms(alone_t)}")
    print(f"  the same trace again in that child (its memory already faulted in): {ms(again_t)}")
    print(f"  GEMM floor, the six products (Q, K, V, O [{d.B * d.T},{d.C}]x[{d.C},{d.C}], FFN up [{d.B * d.T},{d.C}]"
          f"x[{d.C},{d.F}], down [{d.B * d.T},{d.F}]x[{d.F},{d.C}]), {dtype}, NumPy's BLAS, best of {FLOOR_BEST} each: "
          f"{ms(floor_t)}, {gflop:.2f} GFLOP at {gflop / low:.0f} GFLOP/s")
    print(f"  trace / floor: {statistics.median(alone_t) / low:.2f}; target <= 1.15 "
          f"(the second trace / floor: {statistics.median(again_t) / low:.2f})")
    print(f"  trace / floor of the fastest runs: {min(alone_t) * 1000:.0f} / {min(floor_t) * 1000:.0f} ms = "
          f"{min(alone_t) / min(floor_t):.2f}")


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
    ap.add_argument("--tiny", action="store_true", help="a tiny block, one repeat, cold only: checks that the script runs")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: pip install -e '.[bench]' (torch==2.13.0)", file=sys.stderr)
        return 2
    from tracer.spec import load_spec

    torch.set_num_threads(args.threads)
    scratch = Path(tempfile.mkdtemp(prefix="tracer-bench-"))
    if args.tiny:
        args.spec = str(scratch / "tiny-block.yaml")
        Path(args.spec).write_text(TINY_BLOCK, encoding="utf-8")
        args.repeat, args.skip_verify, args.skip_diff, args.skip_warm = 1, True, True, True
    spec = load_spec(args.spec)
    spec = spec._replace(dtype=args.dtype)
    d = spec.dims
    pre = spec.block.norm_order == "pre"
    print(f"spec: {spec.name}  [B,T,C] = [{d.B},{d.T},{d.C}], H = {d.H}, F = {d.F}, {args.dtype}")
    print(blas_line())
    print(f"PyTorch {torch.__version__}: {torch.get_num_threads()} threads; {load()}")
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
    print(f"at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
