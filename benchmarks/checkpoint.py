"""A real checkpoint: tracer on a GPT-2-small-sized Hugging Face model against Hugging Face's own forward, in one run.

    pip install -e '.[torch]'           # torch==2.13.0 (CPU) and transformers
    python benchmarks/checkpoint.py [--folder DIR] [--layers 12] [--C 768] [--T 1024] [--repeat 3]

Makes a random-initialised GPT2LMHeadModel (12 layers, C = 768, H = 12, V = 50257, T_max = 1024),
float64, saved with save_pretrained as safetensors (about 1 GB; kept in --folder when given), imports
it with `tracer import` and prints, measured in the same run:
- the time of a cold `tracer run` (a fresh process, as a user types it) on layer 0 alone and on all
  layers with --record main, against Hugging Face's forward over the same layers with the same
  number of threads (aim: at most 1.0x);
- the time to open the checkpoint and read one layer's tensors, in a fresh process (aim: well
  under 0.3 s, whatever the checkpoint's size);
- the peak memory of the layer-0 run against that layer's tensors plus its recorded stages
  (aim: at most 1.5x), with and without the interpreter's own baseline.
The machine may be shared: times are medians of --repeat runs, and still noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from child import run_tracer  # benchmarks/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import resource, sys, time
t0 = time.perf_counter()
{body}
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
sys.stderr.write(f"\nBENCH {{peak}} {{time.perf_counter() - t0}}\n")
"""
READ_LAYER = """
import numpy, safetensors  # loaded by any run before the checkpoint is opened: not part of reading it
from tracer.checkpoints.formats import open_checkpoint
t = time.perf_counter()
ck = open_checkpoint({folder!r})
for key in [k for k in ck.keys() if k.startswith(("h.0.", "transformer.h.0."))]:
    ck.read(key, "float64")
sys.stderr.write(f"\\nREAD {{time.perf_counter() - t}}\\n")
"""


def child(body: str, threads: int) -> tuple[float, int, str]:
    """Run ``body`` in a fresh interpreter: (wall seconds of the whole process, peak bytes, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD.format(body=body)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"child failed ({r.returncode}): {r.stderr[-2000:]}")
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("BENCH "))
    return wall, int(line.split()[1]), r.stderr


MAKE = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(n_layer={layers}, n_embd={C}, n_head={H}, vocab_size={V}, n_positions={T_max}, bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
GPT2LMHeadModel(cfg).double().save_pretrained({folder!r})
"""
HF = """
import json, statistics, torch
from transformers import GPT2LMHeadModel
torch.set_num_threads({threads})
model = GPT2LMHeadModel.from_pretrained({folder!r}, attn_implementation="eager").double().eval()
tr, ids = model.transformer, torch.tensor([{tokens!r}])
def timed(fn):
    with torch.no_grad():
        fn()  # warm-up: the first call allocates and picks kernels
    times = []
    for _ in range({repeat}):
        t = time.perf_counter()
        with torch.no_grad():
            fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)
layer0 = timed(lambda: tr.h[0](tr.wte(ids) + tr.wpe(torch.arange(ids.shape[1])[None])))
full = timed(lambda: model(ids))
sys.stderr.write("\\nHF " + json.dumps({{"layer0": layer0, "full": full}}) + "\\n")
"""


def tagged(stderr: str, tag: str) -> str:
    return next(ln for ln in stderr.splitlines() if ln.startswith(tag + " "))[len(tag) + 1:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", help="where the checkpoint is (made there if missing); default: a temporary folder")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--C", type=int, default=768)
    ap.add_argument("--H", type=int, default=12)
    ap.add_argument("--V", type=int, default=50257)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        print("torch and transformers are not installed: pip install -e '.[torch]'", file=sys.stderr)
        return 2
    # Every measurement runs in a child of this process, which stays small (no torch here): ru_maxrss is a
    # high-water mark, and on Linux a child's starts from its parent's.
    from tracer.spec import load_spec, memory

    threads = args.threads
    tmp = tempfile.TemporaryDirectory(prefix="tracer-ckpt-bench-")
    folder = Path(args.folder) if args.folder else Path(tmp.name) / "gpt2"
    t0 = time.perf_counter()
    if not (folder / "model.safetensors").exists() and not (folder / "model.safetensors.index.json").exists():
        child(MAKE.format(layers=args.layers, C=args.C, H=args.H, V=args.V, T_max=args.T, folder=str(folder)), threads)
    size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    print(f"checkpoint: {args.layers} layers, C = {args.C}, H = {args.H}, V = {args.V}, float64, {size / 1e9:.2f} GB "
          f"({time.perf_counter() - t0:.1f} s to make or find); T = {args.T}; {threads} threads on both sides; "
          f"medians of {args.repeat} runs on a machine that may be shared (noisy)")

    import random

    rng = random.Random(0)
    tokens = [rng.randrange(args.V) for _ in range(args.T)]
    specs = Path(tmp.name)
    one, full = specs / "layer0.yaml", specs / "all.yaml"
    for out, extra in ((one, ["--layers", "0-0"]), (full, [])):
        r = subprocess.run([sys.executable, "-m", "tracer", "import", str(folder), "--tokens", ",".join(map(str, tokens)), "-o", str(out),
                            *extra], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stderr)

    def tracer_run(spec: Path, *extra: str) -> tuple[float, int]:
        argv = ["tracer", "run", str(spec), "--max-memory", "none", *extra]
        runs = [child(run_tracer(argv), threads) for _ in range(args.repeat)]
        return statistics.median(w for w, _, _ in runs), max(p for _, p, _ in runs)

    # -- speed: a cold tracer run against HF's forward over the same layers ---------------------------
    t_one, _ = tracer_run(one)  # as a user types it: the table, --record auto
    t_full, _ = tracer_run(full, "--record", "main")
    _, _, err = child(HF.format(threads=threads, folder=str(folder), tokens=tokens, repeat=args.repeat), threads)
    hf = json.loads(tagged(err, "HF"))
    print(f"layer 0:        tracer run {t_one:.3f} s (cold: a fresh process, reading the checkpoint)   "
          f"HF forward {hf['layer0']:.3f} s (model loaded)   ratio {t_one / hf['layer0']:.2f}x")
    print(f"all {args.layers} layers: tracer run --record main {t_full:.3f} s (cold)   HF forward {hf['full']:.3f} s   "
          f"ratio {t_full / hf['full']:.2f}x")

    # -- reading one layer ----------------------------------------------------------------------------
    reads = [float(tagged(child(READ_LAYER.format(folder=str(folder)), threads)[2], "READ")) for _ in range(args.repeat)]
    print(f"open the checkpoint and read layer 0's tensors: {statistics.median(reads):.3f} s (a fresh process, page cache warm)")

    # -- memory: the layer-0 run against its tensors and recorded stages -----------------------------
    spec = load_spec(str(one))
    _, peak_one = tracer_run(one, "--record", "all")  # every stage kept, as the estimate below counts them
    est = memory.estimate(spec, memory.RecordPolicy())
    _, base, _ = child("import numpy, yaml, rich.console, rich.table, typer, safetensors\nimport tracer.cli.app, tracer.engine.executor, tracer.views.tables", threads)
    must = est.weights + est.recorded
    print(f"layer 0, --record all: peak {peak_one / 1e6:.0f} MB; its tensors and inputs {est.weights / 1e6:.0f} MB + recorded stages "
          f"{est.recorded / 1e6:.0f} MB = {must / 1e6:.0f} MB; interpreter baseline {base / 1e6:.0f} MB")
    print(f"  peak / (tensors + stages + baseline) = {peak_one / (must + base):.2f}x; "
          f"(peak - baseline) / (tensors + stages) = {(peak_one - base) / must:.2f}x; tracer's own estimate {est.total / 1e6:.0f} MB")
    print(json.dumps({"tracer_layer0_s": t_one, "hf_layer0_s": hf["layer0"], "tracer_all_main_s": t_full, "hf_all_s": hf["full"],
                      "read_layer_s": statistics.median(reads), "peak_layer0_bytes": peak_one, "tensors_plus_stages_bytes": must,
                      "baseline_bytes": base}))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
