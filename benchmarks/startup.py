"""Start-up: `tracer run specs/ch17-prenorm.yaml` against the floor its dependencies set.

The floor is `python -c "import numpy, yaml, rich.console, rich.table, typer"`: a run cannot
start faster than importing what it needs.  Both commands run as fresh processes with the same
interpreter, alternating, many times; the script prints each median and their ratio.  The bound
is 1.15.

    python benchmarks/startup.py [--repeat N]

Python's bytecode cache is allowed (PYTHONDONTWRITEBYTECODE is dropped from the environment), as
on a user's machine, and a few warm-up runs fill it and the OS file cache first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOUND = 1.15
FLOOR = [sys.executable, "-c", "import numpy, yaml, rich.console, rich.table, typer"]
# What a user types: the `tracer` script pip installs beside this interpreter (it runs `tracer.cli.app.main` in this
# interpreter, without a shell shim in front), else `python -m tracer` when tracer is not installed.
_SCRIPT = Path(sys.executable).with_name("tracer")
RUN = ([str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "tracer"]) + ["run", "specs/ch17-prenorm.yaml"]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's tracer
    return env


def once(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.decode(errors='replace')}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=41, help="alternating pairs of runs (default 41)")
    args = parser.parse_args()
    env = environment()
    for _ in range(3):
        once(FLOOR, env)
        once(RUN, env)
    floor: list[float] = []
    run: list[float] = []
    for i in range(args.repeat):
        pair = [(FLOOR, floor), (RUN, run)]
        for cmd, times in pair if i % 2 == 0 else reversed(pair):  # alternate which goes first
            times.append(once(cmd, env))
    f, r = statistics.median(floor), statistics.median(run)
    ratio = r / f
    print(f"floor  {f * 1000:7.1f} ms  (median of {len(floor)})  {' '.join(FLOOR[1:])}")
    print(f"run    {r * 1000:7.1f} ms  (median of {len(run)})  {' '.join(RUN)}")
    print(f"ratio  {ratio:.3f}  (bound {BOUND}: {'met' if ratio <= BOUND else 'NOT met'})")
    return 0 if ratio <= BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
