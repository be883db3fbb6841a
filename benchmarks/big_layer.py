"""Size: layer 0 of an 8B-class and a 70B-class model, traced from a synthetic sharded bfloat16 checkpoint in bounded memory.

    python benchmarks/big_layer.py [--shape 8b|70b|both] [--T 512] [--dtype float32] [--keep DIR] [--tiny]

Writes a synthetic sharded checkpoint in the Hugging Face layout (config.json, model.safetensors.index.json,
model-0000k-of-0000n.safetensors, LLaMA's tensor names), shard by shard and tensor by tensor (never whole in
memory: each tensor is a small random block of bfloat16 values tiled), then, in fresh processes:
`tracer import DIR --layers 0-0 --length T --dtype float32` and `tracer run SPEC --record main`, and prints
- the run's wall time (a cold process: start-up, reading the checkpoint, the trace, the table);
- the bytes it read from the checkpoint (counted by wrapping tracer's own reads: each tensor's bytes, each
  embedding row's) and the process's read bytes (/proc/self/io rchar: every read, headers and Python's own files too);
- which shards it opened (target: only those holding layer 0 and the embedding);
- its peak memory (ru_maxrss) against layer 0's weights in the run's dtype plus the recorded stages (target <= 1.25),
  with and without the interpreter's baseline, and the memory guard's estimate against the peak (it must cover it).

--shape 8b: LLaMA-3-8B's shape (C 4096, F 14336, 32 / 8 heads, 32 layers, V 128256), about 16 GB of shards.
--shape 70b: a 70B-class layer 0 (C 8192, F 28672, 64 / 8 heads, 80 layers in config.json and the index): only the
embedding's and layer 0's values are written (about 3.8 GB); every other tensor is a hole in its shard (zeros that take
no disk blocks), so the checkpoint is whole as tracer validates it. `--layers 0-0` traces no final norm and no head.
--tiny: a small shape of the same layout, for the test. The checkpoints are deleted at the end unless --keep DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from child import PEAK_CHILD, fresh, machine, run_tracer, tagged  # benchmarks/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = {
    "8b": {"C": 4096, "F": 14336, "H": 32, "H_kv": 8, "layers": 32, "written": 32, "V": 128256, "shard_bytes": 5 * 10**9},
    "70b": {"C": 8192, "F": 28672, "H": 64, "H_kv": 8, "layers": 80, "written": 1, "V": 128256, "shard_bytes": 5 * 10**9},
    "tiny": {"C": 64, "F": 160, "H": 4, "H_kv": 2, "layers": 4, "written": 4, "V": 512, "shard_bytes": 120_000},
    "tiny-70b": {"C": 64, "F": 160, "H": 4, "H_kv": 2, "layers": 8, "written": 1, "V": 512, "shard_bytes": 120_000},
}  # written: the layers whose values are written; the others are holes in the shard files (zeros, no disk blocks)
BLOCK = 1 << 20  # bfloat16 values in the random block each tensor is tiled from


def tensors(shape: dict[str, int]) -> list[tuple[str, tuple[int, ...]]]:
    """LLaMA's tensors, in the order a Hugging Face save writes them: the embedding, each layer, the final norm, the head."""
    C, F, H, H_kv = shape["C"], shape["F"], shape["H"], shape["H_kv"]
    d = C // H
    out: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (shape["V"], C))]
    for i in range(shape["layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (C,)), (p + "self_attn.q_proj.weight", (H * d, C)),
                (p + "self_attn.k_proj.weight", (H_kv * d, C)), (p + "self_attn.v_proj.weight", (H_kv * d, C)),
                (p + "self_attn.o_proj.weight", (C, H * d)), (p + "post_attention_layernorm.weight", (C,)),
                (p + "mlp.gate_proj.weight", (F, C)), (p + "mlp.up_proj.weight", (F, C)), (p + "mlp.down_proj.weight", (C, F))]
    return out + [("model.norm.weight", (C,)), ("lm_head.weight", (shape["V"], C))]


def written(key: str, shape: dict[str, int]) -> bool:
    """Whether a tensor's values are written (else it is a hole: zeros that take no disk blocks)."""
    if not key.startswith("model.layers."):
        return key == "model.embed_tokens.weight" or shape["written"] == shape["layers"]
    return int(key.split(".")[2]) < shape["written"]


def nbytes(shape: tuple[int, ...], itemsize: int = 2) -> int:
    n = itemsize
    for s in shape:
        n *= s
    return n


def write_checkpoint(folder: Path, shape: dict[str, int]) -> dict[str, list[str]]:
    """Shards of at most shape_bytes each, one tensor at a time from a tiled random block; returns shard -> its keys."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    C = shape["C"]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": C, "intermediate_size": shape["F"],
              "num_attention_heads": shape["H"], "num_key_value_heads": shape["H_kv"], "num_hidden_layers": shape["layers"],
              "vocab_size": shape["V"], "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
              "torch_dtype": "bfloat16", "bos_token_id": 0, "eos_token_id": 1}
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    groups: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for key, shp in tensors(shape):
        if groups[-1] and size + nbytes(shp) > shape["shard_bytes"]:
            groups.append([])
            size = 0
        groups[-1].append((key, shp))
        size += nbytes(shp)
    rng = np.random.default_rng(0)
    block = ((rng.standard_normal(BLOCK).astype(np.float32) * 0.02).view(np.uint32) >> 16).astype("<u2")
    ones = (np.ones(1, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")  # norms' weights: 1.0 in bfloat16
    names = {}
    for k, group in enumerate(groups):
        name = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        names[name] = [key for key, _ in group]
        header: dict[str, object] = {"__metadata__": {"format": "pt"}}
        offset = 0
        for key, shp in group:
            header[key] = {"dtype": "BF16", "shape": list(shp), "data_offsets": [offset, offset + nbytes(shp)]}
            offset += nbytes(shp)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(folder / name, "wb") as fh:
            fh.write(struct.pack("<Q", len(text)) + text)
            for j, (key, shp) in enumerate(group):
                n = nbytes(shp) // 2
                if not written(key, shape):
                    fh.seek(2 * n, os.SEEK_CUR)
                    continue
                if len(shp) == 1:
                    fh.write(np.repeat(ones, n).tobytes())
                    continue
                start = (j * 7919) % BLOCK  # each tensor starts elsewhere in the block
                tiled = np.roll(block, -start)
                for i in range(0, n, BLOCK):
                    fh.write(tiled[: min(BLOCK, n - i)].tobytes())
            fh.truncate()  # the holes at the end
    index = {"metadata": {"total_size": sum(nbytes(s) for _, s in tensors(shape))},
             "weight_map": {key: name for name, keys in names.items() for key in keys}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return names


INSTRUMENT = r"""
import json, os
from tracer.checkpoints import formats
_opened, _bytes = [], [0]
_open, _fill, _rows = formats._open_file, formats.SafetensorsFile.fill, formats.SafetensorsFile.rows
def _open_file(path):
    _opened.append(os.path.basename(path))
    return _open(path)
def fill(self, key, out):
    _bytes[0] += self.info(key).nbytes
    return _fill(self, key, out)
def rows(self, key, rows):
    info = self.info(key)
    _bytes[0] += len(rows) * (info.nbytes // max(1, info.shape[0]))
    return _rows(self, key, rows)
formats._open_file, formats.SafetensorsFile.fill, formats.SafetensorsFile.rows = _open_file, fill, rows
def _rchar():
    with open("/proc/self/io") as fh:
        return int(next(line for line in fh if line.startswith("rchar:")).split()[1])
_r0 = _rchar()
def _report():
    sys.stderr.write("\nREAD " + json.dumps({"opened": _opened, "bytes": _bytes[0], "rchar": _rchar() - _r0}) + "\n")
"""


def one_shape(label: str, shape: dict[str, int], folder: Path, args: argparse.Namespace, env: dict[str, str]) -> dict[str, object]:
    from tracer.spec import load_spec, memory

    need = sum(nbytes(s) for k, s in tensors(shape) if written(k, shape))
    if not (folder / "model.safetensors.index.json").exists():
        free = shutil.disk_usage(folder.parent if folder.parent.exists() else ROOT).free
        if need > free - 2 * 10**9:
            raise SystemExit(f"{label}: the checkpoint needs {need / 1e9:.1f} GB, the disk has {free / 1e9:.1f} GB free (keeping 2 GB)")
        t0 = time.perf_counter()
        write_checkpoint(folder, shape)
        made = f"written in {time.perf_counter() - t0:.1f} s"
    else:
        made = "found (--keep)"
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    shards = sorted(set(index.values()))
    on_disk = sum((folder / s).stat().st_blocks * 512 for s in shards)
    apparent = sum((folder / s).stat().st_size for s in shards)
    holes = "" if shape["written"] == shape["layers"] else f" ({shape['written']} written, the rest holes)"
    print(f"{label}: C = {shape['C']}, F = {shape['F']}, heads {shape['H']} / {shape['H_kv']}, {shape['layers']} layers"
          f"{holes}, V = {shape['V']}, bfloat16, {len(shards)} shards of {apparent / 1e9:.2f} GB, "
          f"{on_disk / 1e9:.2f} GB on disk ({made})")
    spec = folder.parent / f"{folder.name}-layer0.yaml"
    r = subprocess.run([sys.executable, "-m", "tracer", "import", str(folder), "--layers", "0-0", "--length", str(args.T),
                        "--dtype", args.dtype, "-o", str(spec), "--force"], cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    s = load_spec(str(spec))
    policy = memory.RecordPolicy("main")
    guard = memory.estimate(s, policy, by_layer=True)
    held = memory.estimate(s, policy)  # every weight the run reads, held at once: layer 0's and the embedding's T rows
    must = held.weights + held.recorded
    expected = {index[k] for k in index if k.startswith(("model.layers.0.", "model.embed_tokens."))}
    argv = ["tracer", "run", str(spec), "--record", "main", "--max-memory", "none"]
    body = PEAK_CHILD.format(body=INSTRUMENT + run_tracer(argv) + "_report()\n")
    _, base_err = fresh(PEAK_CHILD.format(body="import numpy, yaml, rich.console, rich.table, typer, safetensors\n"
                                                "import tracer.cli.app, tracer.engine.executor, tracer.views.tables"), env)
    base = int(tagged(base_err, "PEAK"))
    runs = []
    for _ in range(args.repeat):
        wall, err = fresh(body, env)
        runs.append((wall, int(tagged(err, "PEAK")), json.loads(tagged(err, "READ"))))
    wall = statistics.median(w for w, _, _ in runs)
    peak = max(p for _, p, _ in runs)
    read = runs[-1][2]
    opened = sorted(set(read["opened"]))
    print(f"  tracer run --layers 0-0, T = {args.T}, {args.dtype}, --record main: median {wall:.2f} s of {args.repeat} cold runs "
          f"(runs {', '.join(f'{w:.2f}' for w, _, _ in runs)})")
    print(f"  read from the checkpoint: {read['bytes'] / 1e9:.3f} GB (layer 0's tensors and {args.T} embedding rows as stored); "
          f"the process read {read['rchar'] / 1e9:.3f} GB in all (rchar)")
    ok_shards = set(opened) == expected
    print(f"  shards opened: {', '.join(opened)} of {len(shards)}; those holding layer 0 and the embedding: {', '.join(sorted(expected))}: "
          f"{'only those' if ok_shards else 'NOT only those'}")
    ratio = peak / must
    print(f"  peak memory {peak / 1e9:.3f} GB; layer 0's weights in {args.dtype} (and the embedding rows) {held.weights / 1e9:.3f} GB "
          f"+ recorded stages {held.recorded / 1e9:.3f} GB = {must / 1e9:.3f} GB; interpreter baseline {base / 1e9:.3f} GB")
    print(f"  ratio peak / (weights + stages) = {ratio:.2f}; target <= 1.25 ({'met' if ratio <= 1.25 else 'NOT met'}); "
          f"(peak - baseline) / (weights + stages) = {(peak - base) / must:.2f}")
    covers = guard.total >= peak
    print(f"  memory guard's estimate {guard.total / 1e9:.3f} GB against the peak {peak / 1e9:.3f} GB: "
          f"{'covers it' if covers else 'does NOT cover it'} (estimate / peak = {guard.total / peak:.2f})")
    return {"shape": label, "wall_s": wall, "bytes_read": read["bytes"], "rchar": read["rchar"], "opened": opened,
            "expected_shards": sorted(expected), "peak_bytes": peak, "weights_plus_stages": must, "baseline_bytes": base,
            "estimate_bytes": guard.total, "ratio": ratio}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=("8b", "70b", "both"), default="both")
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", metavar="DIR", help="write the checkpoints here (or find them there) and keep them")
    ap.add_argument("--tiny", action="store_true", help="a small shape of the same layout (for the test)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    if args.tiny:
        args.T = min(args.T, 16)
    env, line = machine(args.threads)
    print(line)
    tmp = tempfile.TemporaryDirectory(prefix="tracer-big-layer-")
    root = Path(args.keep) if args.keep else Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    shapes = ("8b", "70b") if args.shape == "both" else (args.shape,)
    results = []
    try:
        for label in shapes:
            key = ("tiny" if label == "8b" else "tiny-70b") if args.tiny else label
            folder = root / f"llama-{key}"
            results.append(one_shape(f"{label}{' (tiny)' if args.tiny else ''}", SHAPES[key], folder, args, env))
            if not args.keep:
                shutil.rmtree(folder)  # before the next one is written: never both on disk
    finally:
        tmp.cleanup()
    print(json.dumps(results))
    bad = [r for r in results if r["opened"] != r["expected_shards"] or r["estimate_bytes"] < r["peak_bytes"]]  # type: ignore[operator]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
