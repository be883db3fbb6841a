"""tracer against TransformerLens on the same random GPT-2-shaped weights, in one run: float32 and float64.

    pip install -e '.[lens-bench]'      # transformer-lens==4.3.0 (optional: never a dependency of tracer)
    python benchmarks/transformerlens.py [--repeat 3] [--warm 5] [--T 32] [--tiny]

A random GPT2LMHeadModel (12 layers, C = 768, H = 12, V = 50257, T_max = 1024; --tiny: 2 layers, C = 64, V = 512) is
saved with save_pretrained in each dtype, imported with `tracer import --dtype` for T random tokens, and loaded into
TransformerLens 4's TransformerBridge from the same Hugging Face model (boot_transformers(hf_model=...): HF's weights,
not folded nor centred, so the same function).
Each row is one operation, on each side:
- cached run: tracer.load(spec).trace() (every stage kept) / model.run_with_cache(tokens);
- lens: model.lens() (each layer's residual through the final norm and the head, softmax) /
  run_with_cache, cache.accumulated_resid(apply_ln=True), model.unembed, softmax;
- patch sweep: model.patch(clean, corrupt) over blocks.*.output x positions / the same grid with run_with_hooks
  replacing blocks.L.hook_resid_post at t by the clean cache's;
- attribute: tracer attribute when the installed tracer has it (tracer.attribute), else skipped with a note.
Whole process: a fresh process that imports, loads the model and does the operation once (the parent's clock);
warm: the median of --warm repeats inside that process after the first.  The ratio is tracer / TransformerLens
(target: at or under 1.0 in every row).  Without transformer_lens installed it prints why and skips.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OPS = ("cached run", "lens", "patch sweep")

MAKE = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(n_layer={layers}, n_embd={C}, n_head={H}, vocab_size={V}, n_positions={T_max}, bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
GPT2LMHeadModel(cfg).to(torch.{dtype}).save_pretrained({folder!r})
"""

TRACER = """
import json, sys, time
import numpy as np
import tracer
op, spec, warm, clean, corrupt = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
m = tracer.load(spec)
def once():
    if op == "cached run":
        return float(m.trace()["logits"][0, -1].sum())
    if op == "lens":
        return float(m.lens().probs[:, -1].sum())
    return float(np.nansum(m.patch(clean, corrupt).delta))
value = once()
times = []
for _ in range(warm):
    t0 = time.perf_counter(); once(); times.append(time.perf_counter() - t0)
print(json.dumps({"value": value, "warm": times}))
"""

TL = """
import json, sys, time
import torch
from transformers import GPT2LMHeadModel
import transformer_lens
op, folder, dtype = sys.argv[1:4]
warm, clean, corrupt, threads = int(sys.argv[4]), json.loads(sys.argv[5]), json.loads(sys.argv[6]), int(sys.argv[7])
torch.set_num_threads(threads)
tdtype = getattr(torch, dtype)
hf = GPT2LMHeadModel.from_pretrained(folder, dtype=tdtype, attn_implementation="eager").eval()
from transformer_lens.model_bridge import TransformerBridge
model = TransformerBridge.boot_transformers(folder, dtype=tdtype, hf_model=hf, device="cpu")  # HF's own weights, unfolded
model.eval()
n_layers = hf.config.n_layer
ids, bad = torch.tensor([clean]), torch.tensor([corrupt])
def once():
    with torch.no_grad():
        if op == "cached run":
            logits, cache = model.run_with_cache(ids)
            return float(logits[0, -1].sum())
        if op == "lens":
            _, cache = model.run_with_cache(ids)
            resid = cache.accumulated_resid(apply_ln=True)
            return float(torch.softmax(model.unembed(resid), -1)[:, 0, -1].sum())
        _, good = model.run_with_cache(ids, names_filter=lambda n: n.endswith("hook_resid_post"))
        base = model(bad)[0, -1]
        tok = int(model(ids)[0, -1].argmax())
        total = 0.0
        for L in range(n_layers):
            name = f"blocks.{L}.hook_resid_post"
            for t in range(ids.shape[1]):
                def hook(x, hook, t=t, name=name):
                    x[:, t] = good[name][:, t]
                    return x
                out = model.run_with_hooks(bad, fwd_hooks=[(name, hook)])
                total += float(out[0, -1, tok] - base[tok])
        return total
value = once()
times = []
for _ in range(warm):
    t0 = time.perf_counter(); once(); times.append(time.perf_counter() - t0)
print(json.dumps({"value": value, "warm": times, "version": transformer_lens.__version__ if hasattr(transformer_lens, "__version__") else ""}))
"""


def child(code: str, args: list[str], threads: int) -> tuple[float, dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=3600)
    whole = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{r.stderr[-3000:]}")
    return whole, json.loads(r.stdout.strip().splitlines()[-1])


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("transformer-lens")
    except PackageNotFoundError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per side and row")
    ap.add_argument("--warm", type=int, default=5, help="warm repeats inside each process")
    ap.add_argument("--T", type=int, default=32, help="tokens of the input")
    ap.add_argument("--tiny", action="store_true", help="2 layers, C = 64, V = 512, T = 8 (the test's size)")
    ap.add_argument("--dtype", choices=("float32", "float64", "both"), default="both")
    ap.add_argument("--only", choices=OPS, action="append", help="only these rows (repeatable; default: every row)")
    a = ap.parse_args()
    if importlib.util.find_spec("transformer_lens") is None:
        print("TransformerLens is not installed (pip install -e '.[lens-bench]'): the comparison is skipped")
        return
    for m in ("torch", "transformers"):
        if importlib.util.find_spec(m) is None:
            print(f"{m} is not installed (pip install -e '.[torch]'): the comparison is skipped")
            return
    size = {"layers": 2, "C": 64, "H": 4, "V": 512, "T_max": 64} if a.tiny else {"layers": 12, "C": 768, "H": 12, "V": 50257, "T_max": 1024}
    T = 8 if a.tiny else a.T
    warm = 1 if a.tiny else a.warm
    threads = os.cpu_count() or 1
    import random

    rng = random.Random(0)
    clean = [rng.randrange(size["V"]) for _ in range(T)]
    corrupt = list(clean)
    corrupt[T // 2] = (clean[T // 2] + 1) % size["V"]
    has_attribute = importlib.util.find_spec("tracer.attribute") is not None
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"TransformerLens {version()}; GPT-2 shape {size}, T = {T}; {threads} threads; load average {load:.2f}")
    dtypes = ("float32", "float64") if a.dtype == "both" else (a.dtype,)
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in dtypes:
            folder = os.path.join(tmp, f"gpt2-{dtype}")
            subprocess.run([sys.executable, "-c", MAKE.format(folder=folder, dtype=dtype, **size)], check=True, capture_output=True)
            spec = os.path.join(tmp, f"gpt2-{dtype}.yaml")
            r = subprocess.run([sys.executable, "-m", "tracer", "import", folder, "-o", spec, "--dtype", dtype, "--tokens", ",".join(map(str, clean))],
                               capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            if r.returncode != 0:
                raise SystemExit(f"tracer import failed: {r.stderr}")
            print(f"\n{dtype}:")
            for op in a.only or OPS:
                whole: dict[str, list[float]] = {"tracer": [], "TL": []}
                hot: dict[str, list[float]] = {"tracer": [], "TL": []}
                values: dict[str, float] = {}
                for _ in range(a.repeat):  # interleaved: load on a shared machine hits both alike
                    w, out = child(TRACER, [op, spec, str(warm), json.dumps(clean), json.dumps(corrupt)], threads)
                    whole["tracer"].append(w)
                    hot["tracer"] += out["warm"]
                    values["tracer"] = out["value"]
                    w, out = child(TL, [op, folder, dtype, str(warm), json.dumps(clean), json.dumps(corrupt), str(threads)], threads)
                    whole["TL"].append(w)
                    hot["TL"] += out["warm"]
                    values["TL"] = out["value"]
                wt, wl = statistics.median(whole["tracer"]), statistics.median(whole["TL"])
                ht, hl = statistics.median(hot["tracer"]), statistics.median(hot["TL"])
                print(f"  {op:12s} whole process: tracer {wt:.3f} s, TL {wl:.3f} s, ratio tracer / TL {wt / wl:.2f}; "
                      f"warm: tracer {ht * 1e3:.1f} ms, TL {hl * 1e3:.1f} ms, ratio tracer / TL {ht / hl:.2f} (target <= 1.0); "
                      f"checksum tracer {values['tracer']:.6g}, TL {values['TL']:.6g}")
            if not has_attribute:
                print("  attribute    skipped: this tracer has no `tracer attribute` (tracer.attribute) yet")


if __name__ == "__main__":
    main()
