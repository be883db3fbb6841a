"""A class graded, and a diff of two GPT-2-sized specs, as fresh processes (what a teacher waits for).

    python benchmarks/grade.py [--students 30] [--big 300] [--repeat 3]

Makes a flat folder of hand-ins, a realistic mix: the three sample students of examples/coursework in turn (the
same, a post-norm block, a broadcast violation) and, for every fourth student, the arrays of a student's own NumPy
block with a mistake beyond the worded records (tests/helpers/mistakes.py's kind: the diagnosis searches every
variant), and a reference trace; then prints the median wall time of
- `tracer grade HAND-IN REFERENCE` for --students hand-ins (aim: under 2 s for 30) and for --big (aim: under 15 s
  for 300), each a fresh process;
- examples/coursework/grade.py as it was before `tracer grade` existed (its own diff loop in one process; taken
  from git history, commit OLD_SCRIPT, when this checkout has it), and the ratio;
- `tracer diff specs/gpt2-block.yaml POST` (the same block in post-norm order) against `tracer run
  specs/gpt2-block.yaml`, the runs interleaved, and the ratio (aim: at most 2.2: the trace of each side and the
  comparison should be all a diff costs).
The machine may be shared: times are medians of --repeat runs, and still noisy.  No test times anything.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OLD_SCRIPT = "b0b696b"  # `next` before tracer grade: examples/coursework/grade.py did the grading itself
SAMPLES = ("alice", "bob", "carol")
GPT2 = REPO / "specs" / "gpt2-block.yaml"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def once(cmd: list[str]) -> float:
    start = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if p.returncode not in (0, 1, 2) or "Traceback" in p.stderr:
        raise SystemExit(f"benchmarks/grade.py: {' '.join(cmd[:4])} ... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return took


def timed(cmd: list[str], repeat: int) -> float:
    return statistics.median(once(cmd) for _ in range(repeat))


def student_arrays(n: int) -> dict[str, np.ndarray]:
    """A student's own block in NumPy with one mistake no worded record knows (the n-th of a few), as arrays."""
    sys.path.insert(0, str(REPO))
    import tracer

    t = tracer.trace(str(REPO / "specs" / "ch17-prenorm.yaml"))
    w, x = dict(t.params), np.asarray(t["x"])[0]
    T, C, H, d = 3, 2, 2, 1

    def ln(v: np.ndarray, g: np.ndarray, b: np.ndarray, centre: bool = True) -> np.ndarray:
        mu = v.mean(-1, keepdims=True) if centre else 0.0
        return g * (v - mu) / np.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-5) + b

    mistake = n % 4
    n1 = ln(x, w["norm1.gamma"], w["norm1.beta"], centre=mistake != 0)
    q, k, v = ((n1 @ w[f"attn.w_{m}"] + w[f"attn.b_{m}"]).reshape(T, H, d).transpose(1, 0, 2) for m in "qkv")
    s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
    s = np.where(np.triu(np.ones((T, T), bool), k=2 if mistake == 1 else 1), -np.inf, s)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    u = (a @ v).transpose(1, 0, 2).reshape(T, C) @ w["attn.w_o"] + w["attn.b_o"]
    r = x + u
    n2 = ln(r, w["norm2.gamma"], w["norm2.beta"])
    h = n2 @ w["ffn.w1"] + w["ffn.b1"]
    h = h / (1 + np.exp(-h)) if mistake == 2 else np.maximum(h, 0)
    f = h @ w["ffn.w2"] + w["ffn.b2"]
    y = (x if mistake == 3 else r) + f
    return {"x": x, "norm1": n1, "attention": u, "residual1": r, "norm2": n2, "hidden": h, "ffn": f, "output": y}


def make_class(root: Path, n: int) -> tuple[Path, Path]:
    hand_in, reference = root / f"hand-in-{n}", root / "reference"
    hand_in.mkdir()
    reference.mkdir(exist_ok=True)
    trace = subprocess.run([sys.executable, "-m", "tracer", "run", "specs/ch17-prenorm.yaml", "--json", "--with-weights"],
                           cwd=REPO, env=env(), capture_output=True, text=True, check=True).stdout
    (reference / "prenorm.json").write_text(trace, encoding="utf-8")
    for i in range(n):
        if i % 4 == 3:
            arrays: dict[str, Any] = student_arrays(i // 4)
            np.savez(hand_in / f"student{i:03d}.npz", **arrays)
            continue
        sample = SAMPLES[i % len(SAMPLES)]
        shutil.copy(REPO / "examples" / "coursework" / "students" / sample / "prenorm.yaml", hand_in / f"student{i:03d}.yaml")
    return hand_in, reference


def old_script(root: Path) -> Path | None:
    """The grading script before tracer grade, from git history (None when this checkout has no such commit)."""
    p = subprocess.run(["git", "show", f"{OLD_SCRIPT}:examples/coursework/grade.py"], cwd=REPO, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        return None
    path = root / "old_grade.py"
    path.write_text(p.stdout, encoding="utf-8")
    return path


def diff_ratio(root: Path, repeat: int) -> tuple[float, float]:
    """(one run, the diff of the block against its post-norm twin), medians of interleaved fresh processes."""
    post = root / "gpt2-post.yaml"
    post.write_text(GPT2.read_text(encoding="utf-8").replace("norm_order: pre", "norm_order: post"), encoding="utf-8")
    runs, diffs = [], []
    for _ in range(repeat):
        runs.append(once([sys.executable, "-m", "tracer", "run", str(GPT2)]))
        diffs.append(once([sys.executable, "-m", "tracer", "diff", str(GPT2), str(post)]))
    return statistics.median(runs), statistics.median(diffs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--big", type=int, default=300, help="a second, bigger class (0: none)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        hand_in, reference = make_class(root, args.students)
        grade = timed([sys.executable, "-m", "tracer", "grade", str(hand_in), str(reference)], args.repeat)
        print(f"tracer grade, {args.students} hand-ins (a quarter of them arrays), fresh process: {grade:.2f} s (aim: under 2 s for 30)")
        if args.big:
            big, _ = make_class(root, args.big)
            big_time = timed([sys.executable, "-m", "tracer", "grade", str(big), str(reference)], max(1, args.repeat // 2))
            print(f"tracer grade, {args.big} hand-ins, fresh process: {big_time:.2f} s (aim: under 15 s for 300)")
        old = old_script(root)
        specs_only = root / "specs-only"
        specs_only.mkdir()
        for p in hand_in.glob("*.yaml"):
            shutil.copy(p, specs_only / p.name)
        if old is not None:
            mine = timed([sys.executable, "-m", "tracer", "grade", str(specs_only), str(reference)], args.repeat)
            before = timed([sys.executable, str(old), str(specs_only), str(reference)], args.repeat)
            print(f"the specs alone: tracer grade {mine:.2f} s, grade.py as it was ({OLD_SCRIPT}) {before:.2f} s; ratio {mine / before:.2f}x")
        else:
            print(f"grade.py as it was: commit {OLD_SCRIPT} not in this checkout, not timed")
        run, diff = diff_ratio(root, args.repeat)
        print(f"tracer run specs/gpt2-block.yaml: {run:.2f} s; tracer diff of it and its post-norm twin: {diff:.2f} s; "
              f"diff / run = {diff / run:.2f}x (aim: at most 2.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
