"""The matrix products of a short input through GPT-2-small, NumPy's BLAS against PyTorch's, in one run.

    pip install -e '.[bench]'      # torch==2.13.0 (optional: never a dependency of tracer)
    python benchmarks/products.py [--T 16] [--repeat 7] [--tiny]

A warm `tracer.load(spec).trace()` of a short input is mostly matrix products: per layer the [T, C] rows times w_q,
w_k, w_v, w_o ([C, C]), w1 ([C, F]) and w2 ([F, C]), then the head's [T, C] x [C, V].  At T = 16 each weight is used
by 16 rows only, so the time is how fast the BLAS streams the weights from memory.  This script times exactly those
products, each weight a distinct array as in a model (12 layers, C = 768, F = 3072, V = 50257; --tiny: 2 layers,
C = 64, F = 256, V = 512), in NumPy (`x @ w`, the form tracer's kernels use) and in PyTorch (`x @ w` and
`torch.nn.functional.linear(x, w^T)`, what Hugging Face's GPT-2 and TransformerLens call), float32 and float64, the
same threads on both sides.  The ratio NumPy / PyTorch is the floor that benchmarks/transformerlens.py's warm rows
stand on: where it is over 1, tracer's warm trace cannot be at TransformerLens's time however little else it does.
Without torch installed it prints why and skips.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]  # child.py; this checkout's tracer


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=16, help="rows of the input (tokens)")
    ap.add_argument("--repeat", type=int, default=7, help="timed passes per side (the median is printed)")
    ap.add_argument("--tiny", action="store_true", help="2 layers, C = 64, F = 256, V = 512 (the test's size)")
    a = ap.parse_args()
    if importlib.util.find_spec("torch") is None:
        print("torch is not installed (pip install -e '.[bench]'): the comparison is skipped")
        return
    threads = os.cpu_count() or 1
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    import torch
    from child import machine

    torch.set_num_threads(threads)
    layers, C, F, V = (2, 64, 256, 512) if a.tiny else (12, 768, 3072, 50257)
    _, line = machine(threads)
    print(f"{line}; torch {torch.__version__}")
    print(f"GPT-2 shape: {layers} layers, C = {C}, F = {F}, V = {V}; T = {a.T} rows; {6 * layers} layer products + the head")
    for dtype in ("float32", "float64"):
        print(measure(dtype, layers, C, F, V, a.T, a.repeat))


def measure(dtype: str, layers: int, C: int, F: int, V: int, T: int, repeat: int) -> str:
    """The line for one dtype: the layers' products and the head's, each side's medians, and the ratio."""
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    ws = [rng.standard_normal(shape).astype(dtype) for _ in range(layers) for shape in [(C, C)] * 4 + [(C, F), (F, C)]]
    head = rng.standard_normal((V, C)).astype(dtype)  # the tied embedding; the head is its transpose
    x, h = rng.standard_normal((T, C)).astype(dtype), rng.standard_normal((T, F)).astype(dtype)
    tx, th = torch.from_numpy(x), torch.from_numpy(h)
    tws = [torch.from_numpy(w) for w in ws]
    tlin = [torch.from_numpy(np.ascontiguousarray(w.T)) for w in ws]  # nn.Linear's [out, in] weight
    thead = torch.from_numpy(head)

    def np_layers() -> None:
        for w in ws:
            (h if w.shape[0] == F else x) @ w

    def t_layers() -> None:
        for w in tws:
            (th if w.shape[0] == F else tx) @ w

    def t_linear() -> None:
        for w in tlin:
            torch.nn.functional.linear(th if w.shape[1] == F else tx, w)

    with torch.no_grad():
        n_l, n_h = median_ms(np_layers, repeat), median_ms(lambda: x @ head.T, repeat)
        t_l, t_lin = median_ms(t_layers, repeat), median_ms(t_linear, repeat)
        t_h = median_ms(lambda: torch.nn.functional.linear(tx, thead), repeat)
    best = min(t_l, t_lin) + t_h
    return (f"{dtype}: NumPy layers {n_l:.2f} ms + head {n_h:.2f} ms = {n_l + n_h:.2f} ms; "
            f"PyTorch layers {t_l:.2f} ms (x @ w) / {t_lin:.2f} ms (linear) + head {t_h:.2f} ms = {best:.2f} ms; "
            f"ratio NumPy / PyTorch {(n_l + n_h) / best:.2f}")


if __name__ == "__main__":
    main()
