"""Pieces the benchmarks share: a child process that runs tracer's command line and reports its peak memory.

Each measurement runs in a fresh child, because a child's peak RSS would otherwise start from its parent's.
"""

from __future__ import annotations

PEAK_CHILD = r"""
import resource, sys
{body}
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sys.stderr.write(f"\nPEAK {{peak * (1 if sys.platform == 'darwin' else 1024)}}\n")
"""


def run_tracer(argv: list[str], ok: tuple[int, ...] = (0,)) -> str:
    """Python source that runs ``tracer`` with ``argv`` (argv[0] included) in the child itself; an exit code
    outside ``ok`` is raised, so the child fails."""
    return (f"import sys\nsys.argv = {argv!r}\nfrom tracer.cli.app import main\ntry:\n    main()\n"
            f"except SystemExit as e:\n    if e.code not in {(*ok, None)!r}:\n        raise\n")


def machine(threads: int) -> tuple[dict[str, str], str]:
    """The children's environment (this checkout first on the path, ``threads`` BLAS threads) and the line that names
    the BLAS, the threads and the load average."""
    import os
    from pathlib import Path

    import numpy as np

    root = str(Path(__file__).resolve().parent.parent)
    n = str(threads)
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n)
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    from tracer.engine.blas import core

    blas = np.show_config("dicts")["Build Dependencies"]["blas"]
    kernels = core()
    name = f"BLAS {blas.get('name', '?')} {blas.get('version', '')}" + (f" (OpenBLAS core {kernels})" if kernels else "")
    return env, f"{name}, {n} threads on both sides, load average {load}; the machine may be shared (noisy)"


def fresh(body: str, env: dict[str, str]) -> tuple[float, str]:
    """Run ``body`` in a fresh interpreter from the repository root: (wall seconds of the whole process, its stderr)."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", body], env=env, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"child failed ({r.returncode}): {r.stderr[-3000:]}")
    return wall, r.stderr


def tagged(stderr: str, tag: str) -> str:
    """The rest of the line of ``stderr`` that starts with ``tag``."""
    return next(ln for ln in stderr.splitlines() if ln.startswith(tag + " "))[len(tag) + 1:]


FIRST_TOUCH = """
import time, numpy as np
t = time.perf_counter(); a = np.ones({mb} << 17); d = time.perf_counter() - t
import sys; print("TOUCH", d * 1000 / {mb}, file=sys.stderr)
"""


def first_touch(env: dict[str, str], mb: int = 256) -> float:
    """ms per MB that a fresh process takes to write ``mb`` MB of fresh memory: what every array a cold command makes
    first costs on this machine at this moment (on virtual machines it varies from 0.1 to 4 ms/MB, run to run)."""
    _, err = fresh(FIRST_TOUCH.format(mb=mb), env)
    return float(tagged(err, "TOUCH"))
