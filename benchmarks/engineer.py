"""An engineer's everyday question: GPT-2-small from its folder, one sentence, all layers, the full table.

    pip install -e '.[torch]'           # torch==2.13.0 (CPU), transformers, tokenizers
    python benchmarks/engineer.py [--folder DIR] [--repeat 5] [--tiny]

Makes a random-initialised GPT2LMHeadModel (12 layers, C = 768, H = 12, V = 50257), saved with save_pretrained
(float32 safetensors, as models are shipped) plus a tokenizer.json (a WordLevel tokenizer made with the `tokenizers`
package from a few sentences: no network), writes the spec once with `tracer import DIR --text SENTENCE`
(16 words, T = 16), then times, as whole cold processes interleaved:
- `tracer run SPEC`: start-up, reading the checkpoint, all 12 layers, the full table printed;
- the same question as a Hugging Face script: import torch and transformers, from_pretrained, tokenize the
  sentence, the forward with output_hidden_states=True, print each layer's hidden state at the first position.
Prints both medians with their runs, the ratio HF / tracer (tracer should be several times faster), the BLAS,
the threads and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from child import machine  # benchmarks/child.py, beside this script

ROOT = Path(__file__).resolve().parent.parent

SENTENCE = "the quick brown fox jumps over the lazy dog while the cat sleeps by the fire"  # 16 words
CORPUS = [SENTENCE, "a model reads every word of the sentence", "the engineer asks what each layer does to the words"]

MAKE = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
cfg = GPT2Config(n_layer={layers}, n_embd={C}, n_head={H}, vocab_size={V}, n_positions=1024, bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
GPT2LMHeadModel(cfg).save_pretrained({folder!r})
tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.train_from_iterator({corpus!r}, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
tok.save({folder!r} + "/tokenizer.json")
"""
HF = """
import torch
from tokenizers import Tokenizer
from transformers import GPT2LMHeadModel
torch.set_num_threads({threads})
model = GPT2LMHeadModel.from_pretrained({folder!r}).eval()
ids = Tokenizer.from_file({folder!r} + "/tokenizer.json").encode({sentence!r}).ids
with torch.no_grad():
    out = model(torch.tensor([ids]), output_hidden_states=True)
for i, h in enumerate(out.hidden_states):
    print(i, tuple(h.shape), h[0, 0, :3].tolist())
print("logits", tuple(out.logits.shape), out.logits[0, -1, :3].tolist())
"""


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", help="where the model is (made there if missing); default: a temporary folder")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tiny", action="store_true", help="a 2-layer C = 64 model (for the test)")
    args = ap.parse_args()
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "tokenizers")):
        print("torch, transformers and tokenizers are needed: pip install -e '.[torch]'", file=sys.stderr)
        return 2

    layers, C, H, V = (2, 64, 4, 1000) if args.tiny else (12, 768, 12, 50257)
    threads = str(args.threads)
    env, line = machine(args.threads)
    tmp = tempfile.TemporaryDirectory(prefix="tracer-engineer-bench-")
    folder = Path(args.folder) if args.folder else Path(tmp.name) / "gpt2"
    if not (folder / "model.safetensors").exists() or not (folder / "tokenizer.json").exists():
        r = subprocess.run([sys.executable, "-c", MAKE.format(layers=layers, C=C, H=H, V=V, folder=str(folder), corpus=CORPUS)],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stderr[-2000:])
    spec = Path(tmp.name) / "question.yaml"
    r = subprocess.run([sys.executable, "-m", "tracer", "import", str(folder), "--text", SENTENCE, "-o", str(spec)],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    hf_script = Path(tmp.name) / "hf_question.py"
    hf_script.write_text(HF.format(threads=threads, folder=str(folder), sentence=SENTENCE))
    size = (folder / "model.safetensors").stat().st_size
    sys.path.insert(0, str(ROOT))
    from tracer.spec import load_spec

    T = load_spec(str(spec)).dims.T
    print(line)
    print(f"GPT-2{'' if args.tiny else '-small'}: {layers} layers, C = {C}, H = {H}, V = {V}, float32 safetensors "
          f"({size / 1e6:.0f} MB), one sentence of {len(SENTENCE.split())} words (T = {T}), all layers, the full table")
    tracer_argv = [sys.executable, "-m", "tracer", "run", str(spec)]
    hf_argv = [sys.executable, str(hf_script)]
    timed(tracer_argv, env)  # one of each first: the page cache holds the checkpoint for both
    timed(hf_argv, env)
    ours, theirs = [], []
    for _ in range(args.repeat):
        ours.append(timed(tracer_argv, env))
        theirs.append(timed(hf_argv, env))
    t, h = statistics.median(ours), statistics.median(theirs)
    print(f"  tracer run SPEC (cold process, the table): median {t:.2f} s (runs {', '.join(f'{x:.2f}' for x in ours)})")
    print(f"  Hugging Face script (cold process: import, from_pretrained, forward with hidden states): median {h:.2f} s "
          f"(runs {', '.join(f'{x:.2f}' for x in theirs)})")
    print(f"  ratio HF / tracer: {h / t:.1f}x faster with tracer (tracer / HF = {t / h:.2f}); aim: several times faster")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
