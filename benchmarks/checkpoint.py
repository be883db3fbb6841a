"""A real checkpoint: tracer on a 12-layer GPT-2-small Hugging Face model against Hugging Face's own forward, in one run.

    pip install -e '.[torch]'           # torch==2.13.0 (CPU) and transformers
    python benchmarks/checkpoint.py [--dtype float32|float64] [--folder DIR] [--T 1024] [--repeat 3] [--tiny]

Makes a random-initialised GPT2LMHeadModel (12 layers, C = 768, H = 12, V = 50257, T_max = 1024), saved with
save_pretrained as safetensors in --dtype (float32 by default, as models are shipped; about 0.5 GB; kept in --folder
when given), imports it with `tracer import --dtype` (the run in the checkpoint's dtype) for T = 1024 random tokens,
all layers, and prints, measured in the same run, interleaved:
- tracer: a whole cold `tracer run SPEC --record main` process (start-up, reading the checkpoint, the 12 layers, the
  final norm, the logits and their softmax, the table), each repeat a fresh process;
- Hugging Face: the forward of the loaded model (model(ids), eager attention, no_grad, the same number of threads),
  in a fresh process each repeat, after one warm-up forward; loading the model is not counted;
- the ratio of the medians (targets: float32 <= 1.0, float64 <= 1.2), each side's runs, and the peak memory of
  tracer's run against its memory guard's estimate.
It prints the BLAS, the threads and the load average; the machine may be shared: read the figures as noisy.
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

from child import PEAK_CHILD, first_touch, fresh, machine, run_tracer, tagged  # benchmarks/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MAKE = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(n_layer={layers}, n_embd={C}, n_head={H}, vocab_size={V}, n_positions={T_max}, bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
model = GPT2LMHeadModel(cfg)
model.to(torch.{dtype}).save_pretrained({folder!r})
"""
HF = """
import json, sys, time, torch
from transformers import GPT2LMHeadModel
torch.set_num_threads({threads})
model = GPT2LMHeadModel.from_pretrained({folder!r}, attn_implementation="eager", dtype=torch.{dtype}).eval()
ids = torch.tensor([{tokens!r}])
with torch.no_grad():
    model(ids)  # warm-up: the first call allocates and picks kernels
    t = time.perf_counter()
    model(ids)
    took = time.perf_counter() - t
sys.stderr.write("\\nHF " + json.dumps(took) + "\\n")
"""


def runs_text(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--folder", help="where the checkpoint is (made there if missing); default: a temporary folder")
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tiny", action="store_true", help="2 layers, C = 64, V = 1000, T = 32 (for the test)")
    args = ap.parse_args()
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        print("torch and transformers are not installed: pip install -e '.[torch]'", file=sys.stderr)
        return 2

    from tracer.spec import load_spec, memory  # no torch in this process: each measurement runs in a child

    layers, C, H, V, T = (2, 64, 4, 1000, min(args.T, 32)) if args.tiny else (12, 768, 12, 50257, args.T)
    threads = str(args.threads)
    env, line = machine(args.threads)
    tmp = tempfile.TemporaryDirectory(prefix="tracer-ckpt-bench-")
    folder = Path(args.folder) if args.folder else Path(tmp.name) / f"gpt2-{args.dtype}"
    t0 = time.perf_counter()
    if not (folder / "model.safetensors").exists():
        fresh(MAKE.format(layers=layers, C=C, H=H, V=V, T_max=max(T, 1024 if not args.tiny else 64), folder=str(folder),
                          dtype=args.dtype), env)
    size = (folder / "model.safetensors").stat().st_size
    print(line)
    print(f"checkpoint: {layers} layers, C = {C}, H = {H}, V = {V}, {args.dtype} safetensors, {size / 1e9:.2f} GB "
          f"({time.perf_counter() - t0:.1f} s to make or find); T = {T}; medians of {args.repeat} interleaved repeats")

    import random

    rng = random.Random(0)
    tokens = [rng.randrange(V) for _ in range(T)]
    spec = Path(tmp.name) / "all.yaml"
    r = subprocess.run([sys.executable, "-m", "tracer", "import", str(folder), "--tokens", ",".join(map(str, tokens)),
                        "--dtype", args.dtype, "-o", str(spec)], cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    s = load_spec(str(spec))
    assert s.dtype == args.dtype
    argv = ["tracer", "run", str(spec), "--record", "main"]
    touch = [first_touch(env)]
    ours, theirs, peaks = [], [], []
    for _ in range(args.repeat):  # interleaved: tracer's cold process, then HF's forward in its own process
        wall, err = fresh(PEAK_CHILD.format(body=run_tracer(argv)), env)
        ours.append(wall)
        peaks.append(int(tagged(err, "PEAK")))
        _, err = fresh(HF.format(threads=threads, folder=str(folder), tokens=tokens, dtype=args.dtype), env)
        theirs.append(json.loads(tagged(err, "HF")))
    t, h = statistics.median(ours), statistics.median(theirs)
    target = 1.0 if args.dtype == "float32" else 1.2
    print(f"  tracer run --record main, all {layers} layers (a cold process: start-up and reading included): median {t:.2f} s "
          f"(runs {runs_text(ours)})")
    print(f"  HF forward of the loaded model (model(ids), eager, no_grad; loading not counted): median {h:.2f} s (runs {runs_text(theirs)})")
    ratio = t / h
    print(f"  ratio tracer / HF ({args.dtype}): {ratio:.2f}; target <= {target:.1f} ({'met' if ratio <= target else 'NOT met'})")
    est = memory.estimate(s, memory.RecordPolicy("main"), by_layer=True)
    peak = max(peaks)
    print(f"  tracer's peak memory {peak / 1e9:.3f} GB; its memory guard's estimate {est.total / 1e9:.3f} GB "
          f"({'covers it' if est.total >= peak else 'does NOT cover it'})")
    touch.append(first_touch(env))
    print(f"  the first write to fresh memory on this machine (a fresh process writing 256 MB): {touch[0]:.2f} ms/MB before "
          f"the runs, {touch[1]:.2f} ms/MB after (what tracer's kept stages and HF's first forward pay; HF's timed forward follows a warm-up)")
    print(json.dumps({"first_touch_ms_per_mb": touch, "dtype": args.dtype, "tracer_s": ours, "hf_s": theirs, "ratio": ratio, "peak_bytes": peak,
                      "estimate_bytes": est.total}))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
