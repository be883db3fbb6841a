"""A class of 30 graded: `tracer grade` as a fresh process, against the grading script the old way.

    python benchmarks/grade.py [--students 30] [--repeat 3]

Makes a flat folder of --students hand-ins (the three sample students of examples/coursework, in turn:
the same, a post-norm block, a broadcast violation) and a reference trace, then prints the median
wall time of
- `tracer grade HAND-IN REFERENCE`, a fresh process as a teacher types it (aim: under 2 s for 30);
- examples/coursework/grade.py as it was before `tracer grade` existed (its own diff loop in one
  process; taken from git history, commit OLD_SCRIPT, when this checkout has it), and the ratio;
- one `tracer diff REFERENCE SPEC --keep-going` process per student (the shell loop of coursework.md),
  and the ratio.
The machine may be shared: times are medians of --repeat runs, and still noisy.  No test times anything.
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

REPO = Path(__file__).resolve().parent.parent
OLD_SCRIPT = "b0b696b"  # `next` before tracer grade: examples/coursework/grade.py did the grading itself
SAMPLES = ("alice", "bob", "carol")


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def timed(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        p = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if p.returncode not in (0, 1, 2) or "Traceback" in p.stderr:
            raise SystemExit(f"benchmarks/grade.py: {' '.join(cmd[:4])} ... failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return statistics.median(times)


def make_class(root: Path, n: int) -> tuple[Path, Path]:
    hand_in, reference = root / "hand-in", root / "reference"
    hand_in.mkdir()
    reference.mkdir()
    trace = subprocess.run([sys.executable, "-m", "tracer", "run", "specs/ch17-prenorm.yaml", "--json", "--with-weights"],
                           cwd=REPO, env=env(), capture_output=True, text=True, check=True).stdout
    (reference / "prenorm.json").write_text(trace, encoding="utf-8")
    for i in range(n):
        sample = SAMPLES[i % len(SAMPLES)]
        shutil.copy(REPO / "examples" / "coursework" / "students" / sample / "prenorm.yaml", hand_in / f"student{i:02d}.yaml")
    return hand_in, reference


def old_script(root: Path) -> Path | None:
    """The grading script before tracer grade, from git history (None when this checkout has no such commit)."""
    p = subprocess.run(["git", "show", f"{OLD_SCRIPT}:examples/coursework/grade.py"], cwd=REPO, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        return None
    path = root / "old_grade.py"
    path.write_text(p.stdout, encoding="utf-8")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        hand_in, reference = make_class(root, args.students)
        grade = timed([sys.executable, "-m", "tracer", "grade", str(hand_in), str(reference)], args.repeat)
        print(f"tracer grade, {args.students} hand-ins, fresh process: {grade:.2f} s (aim: under 2 s for 30)")
        old = old_script(root)
        if old is not None:
            before = timed([sys.executable, str(old), str(hand_in), str(reference)], args.repeat)
            print(f"grade.py as it was ({OLD_SCRIPT}), fresh process: {before:.2f} s; tracer grade / old grade.py = {grade / before:.2f}x")
        else:
            print(f"grade.py as it was: commit {OLD_SCRIPT} not in this checkout, not timed")
        specs = sorted(hand_in.iterdir())
        start = time.perf_counter()
        for spec in specs:
            subprocess.run([sys.executable, "-m", "tracer", "diff", str(reference / "prenorm.json"), str(spec), "--keep-going"],
                           cwd=REPO, env=env(), capture_output=True, check=False)
        loop = time.perf_counter() - start
        print(f"one tracer diff process per hand-in: {loop:.2f} s; tracer grade / loop = {grade / loop:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
