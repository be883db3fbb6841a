"""Memory per output format: tracer's estimate (what --max-memory is compared with) against the peak.

For each way of running a spec (table, --json, --json --all, --json --with-weights, --format csv,
--format markdown, and reading a spec with many inline values) this prints the estimate and the peak
RSS (ru_maxrss) of a fresh process running the command with its output thrown away.  The estimate
should cover the peak: JSON and CSV are written a stage at a time, so their text costs the largest
stage, not the whole trace.

    python benchmarks/memory_formats.py [SPEC]

The estimate is computed as `tracer run` computes it before running (memory.check_run, and for reading
the spec memory.load_spec_within's count), in a separate process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from child import PEAK_CHILD, run_tracer  # benchmarks/child.py, beside this script

REPO = Path(__file__).resolve().parent.parent

FORMATS = [[], ["--json"], ["--json", "--all"], ["--json", "--with-weights"], ["--format", "csv"], ["--format", "markdown"]]


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def peak(argv: list[str]) -> int:
    with open(os.devnull, "w") as null:
        r = subprocess.run([sys.executable, "-c", PEAK_CHILD.format(body=run_tracer(["tracer", *argv, "--max-memory", "none"], ok=(0, 1)))], cwd=REPO,
                           env=env(), stdout=null, stderr=subprocess.PIPE, text=True)
    found = [ln for ln in r.stderr.splitlines() if ln.startswith("PEAK ")]
    if not found:
        sys.exit(f"tracer {' '.join(argv)} failed:\n{r.stderr}")
    return int(found[-1].split()[1])


ESTIMATE = r"""
import sys
from tracer.spec import memory, yamlio
from tracer.spec import load_spec
argv = {argv!r}
path = argv[1]
text = yamlio.read_text(path)
reading = memory.INTERPRETER_BYTES + (text.count(",") + text.count("\n") + 1) * memory.YAML_VALUE_BYTES
if argv[0] == "validate":
    print(reading)
else:
    s = load_spec(path)
    show_all = "--all" in argv
    form = argv[argv.index("--format") + 1] if "--format" in argv else ("json" if "--json" in argv else "table")
    est = memory.check_run(s, memory.policy_for(s, "all", None, 0, 0, show_all), "none", show_all=show_all, form=form,
                           with_weights="--with-weights" in argv)
    print(max(est.total, reading))
"""


def estimate(argv: list[str]) -> float:
    """What tracer compares with --max-memory for this command (runs.trace_one's check, computed the same way)."""
    r = subprocess.run([sys.executable, "-c", ESTIMATE.format(argv=argv)], cwd=REPO, env=env(), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"no estimate for {argv}:\n{r.stderr}")
    return float(r.stdout)


def inline_spec(folder: str, C: int = 256, F: int = 1024) -> str:
    """A spec that writes one [C,F] weight out in full: C * F values for the parser."""
    rows = ",\n    ".join("[" + ", ".join(f"{((i * F + j) % 997) / 997 - 0.5:.5f}" for j in range(F)) + "]" for i in range(C))
    path = os.path.join(folder, "inline.yaml")
    Path(path).write_text(f"dims: {{C: {C}, H: 8, F: {F}}}\ninput: {{tokens: [0, 1, 2]}}\nseed: 0\nweights:\n  ffn:\n    w1: [\n    {rows}]\n")
    return path


def main() -> int:
    spec = sys.argv[1] if len(sys.argv) > 1 else "specs/gpt2-block.yaml"
    print(f"{'command':58} {'estimate':>10} {'peak':>10}  covers")
    below = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [["run", spec, *f] for f in FORMATS] + [["run", inline_spec(tmp)], ["validate", inline_spec(tmp)]]
        for argv in cases:
            est, got = estimate(argv), peak(argv)
            below += est < got
            shown = " ".join(argv).replace(tmp, "TMP")
            print(f"{shown:58} {est / 1e6:8.1f} MB {got / 1e6:8.1f} MB  {'yes' if est >= got else 'NO'}")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
