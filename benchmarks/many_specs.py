"""How long grading a class takes: N specs in one `tracer run` against one process per spec.

    python benchmarks/many_specs.py [N]        (default 200; the per-process side times 20 and scales)

Prints both wall times. Run from the repository root with this checkout on PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    exe = shutil.which("tracer") or sys.executable
    cmd = [exe] if exe.endswith("tracer") else [exe, "-m", "tracer"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        text = (REPO / "specs" / "ch17-prenorm.yaml").read_text(encoding="utf-8")
        paths = []
        for i in range(n):
            p = Path(tmp) / f"student{i:03d}.yaml"
            p.write_text(text, encoding="utf-8")
            paths.append(str(p))
        start = time.perf_counter()
        subprocess.run(cmd + ["run", *paths], env=env, capture_output=True, check=True)
        one = time.perf_counter() - start
        sample = paths[:20]
        start = time.perf_counter()
        for path in sample:
            subprocess.run(cmd + ["run", path], env=env, capture_output=True, check=True)
        each = (time.perf_counter() - start) / len(sample)
    print(f"{n} specs in one process: {one:.2f} s")
    print(f"{n} specs, one process each: {each * n:.1f} s (measured on {len(sample)}, {each:.2f} s per spec)")


if __name__ == "__main__":
    main()
