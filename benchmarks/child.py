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
