"""Memory: peak of `tracer run specs/gpt2-block.yaml` against what it must hold.

What a run must hold: the interpreter with everything a run imports, the weights, and the
recorded arrays.  The peak (ru_maxrss of a fresh process running the command) should be at most
1.5 times their sum.  The script also prints tracer's own estimate (what --max-memory is compared
with), which should not be below the peak, for each --record mode.

    python benchmarks/memory.py [SPEC]

Each measurement runs in its own process, started from this one while it is still small: ru_maxrss
is a high-water mark that never goes down, and on Linux a child's starts from its parent's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from child import PEAK_CHILD, run_tracer  # benchmarks/child.py, beside this script

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
BOUND = 1.5

IMPORTS = "import numpy, yaml, rich.console, rich.table, typer\nimport tracer.cli.app, tracer.engine.executor, tracer.views.tables, tracer.spec.memory"


HELD = """
import json, sys
import numpy as np
from tracer.engine import executor
from tracer.spec import memory
from tracer.spec import load_spec

spec = load_spec({spec!r})
ex = executor.Executor(spec, policy=memory.RecordPolicy({mode!r}))
with np.errstate(all="ignore"):
    trace = ex.run()
seen = list(ex.params.values())
recorded = 0
for stage in trace.stages.values():
    a = stage.data if stage.data is not None else stage.summary.value
    if any(np.shares_memory(a, b) for b in seen):
        continue  # a view of a weight or of an earlier stage: no memory of its own
    seen.append(a)
    recorded += a.nbytes
est = memory.estimate(spec, memory.RecordPolicy({mode!r})).total
print(json.dumps([recorded, sum(p.nbytes for p in ex.params.values()), len(trace.stages), est]))
"""


def child(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"measurement failed (exit {r.returncode}):\n{r.stderr}")
    return r


def peak_of(body: str) -> int:
    lines = [ln for ln in child(PEAK_CHILD.format(body=body)).stderr.splitlines() if ln.startswith("PEAK ")]
    return int(lines[-1].split()[1])


def held(spec_path: str, mode: str) -> tuple[int, int, int, int]:
    """Bytes of the recorded arrays (each buffer once) and of the weights in a real run, its stage count, tracer's estimate."""
    recorded, weights, n, est = json.loads(child(HELD.format(spec=spec_path, mode=mode)).stdout)
    return recorded, weights, n, est


def mb(n: float) -> str:
    return f"{n / 1e6:8.1f} MB"


def main() -> int:
    spec_path = sys.argv[1] if len(sys.argv) > 1 else "specs/gpt2-block.yaml"
    os.chdir(REPO)
    interpreter = peak_of(IMPORTS)
    print(f"spec {spec_path}")
    print(f"interpreter with a run's imports {mb(interpreter)}  (ru_maxrss of a process that only imports)")
    status = 0
    for mode in ("all", "main", "stats"):
        peak = peak_of(run_tracer(["tracer", "run", spec_path, "--record", mode]))
        recorded, weights, n, est = held(spec_path, mode)
        base = interpreter + weights + recorded
        ratio = peak / base
        print(f"--record {mode:5}: recorded {mb(recorded)} ({n} stages) + weights {mb(weights)} + interpreter = {mb(base)};"
              f" peak {mb(peak)}; ratio {ratio:.2f}; tracer's estimate {mb(est)} ({'covers' if est >= peak else 'BELOW'} the peak)")
        if mode == "all":
            met = ratio <= BOUND
            status = 0 if met else 1
            print(f"ratio for --record all: {ratio:.2f} (bound {BOUND}: {'met' if met else 'NOT met'})")
    return status


if __name__ == "__main__":
    sys.exit(main())
