"""tracer run faults in the memory its kept stages will take, on a helper thread (process.fault_in_ahead): the memory is
there before the run writes it, nothing the run computes changes, and a program that imported tracer keeps its allocator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, run_app

from tracer import process

glibc_linux = pytest.mark.skipif(not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
                                 reason="fault_in_ahead works with glibc's allocator on Linux only")


@glibc_linux
def test_the_helper_faults_in_the_heap_the_run_will_write_and_changes_no_value() -> None:
    script = textwrap.dedent("""
        import json, os
        from tracer import process
        process._own = True  # as the entry point makes it (install_signals)
        def resident():
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        before = resident()
        job = process.fault_in_ahead(64 << 20)
        job.thread.join()
        after = resident()
        import numpy as np
        a = np.arange(4 << 20, dtype=np.float64)  # 32 MB, placed in the memory faulted in
        print(json.dumps({"done": job.done, "refused": job.refused, "grew": after - before, "sum": float(a.sum()),
                          "span": job.hi - job.lo}))
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    if got["refused"]:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14)")
    assert got["span"] >= (64 << 20) - 8192 and got["done"] == got["span"]
    assert got["grew"] >= 0.9 * (64 << 20)  # resident before the run writes a byte of it
    n = 4 << 20
    assert got["sum"] == n * (n - 1) / 2


def test_a_program_that_imported_tracer_keeps_its_allocator() -> None:
    assert not process._own  # the test process imported tracer; only the entry point owns its process
    assert process.fault_in_ahead(1 << 30) is None


def test_a_small_run_faults_nothing_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "_own", True)
    assert process.fault_in_ahead(process.FAULT_IN_AT_LEAST - 1) is None


RUN_WATCHED = """
import sys
from tracer import process
real = process.fault_in_ahead

def watched(nbytes):
    job = real(nbytes)
    if job is not None:
        stop = job.stop
        def stopped():
            stop()
            sys.stderr.write(f"FAULTED {job.done} {job.hi - job.lo} {job.refused}\\n")
        job.stop = stopped
    return job

process.fault_in_ahead = watched
from tracer.__main__ import main
sys.argv = ["tracer"] + sys.argv[1:]
main()
"""


def run_watched(*args: str) -> tuple[subprocess.CompletedProcess[str], tuple[int, int, bool] | None]:
    """`tracer ARGS` in its own process, as the entry point runs it, telling on stderr what the fault-in did."""
    r = subprocess.run([sys.executable, "-c", RUN_WATCHED, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400", "LANG": "C.UTF-8"})
    line = next((ln for ln in r.stderr.splitlines() if ln.startswith("FAULTED ")), None)
    if line is None:
        return r, None
    done, span, refused = line.split()[1:]
    return r, (int(done), int(span), refused == "True")


@glibc_linux
def test_tracer_runs_numbers_are_the_same_with_its_memory_faulted_in_ahead() -> None:
    from tracer.front.prepare import prepare

    kept = prepare("specs/gpt2-block.yaml", record="all", table=True).check_memory(by_layer=True, form="table").recorded
    assert kept >= process.FAULT_IN_AT_LEAST  # the attention's scores and weights too: about 260 MB
    args = ("run", "specs/gpt2-block.yaml", "--record", "all", "--precision", "17")  # every digit
    own, faulted = run_watched(*args)  # its own process: the memory faulted in ahead
    inside = run_app(*args, env={"COLUMNS": "400"})  # in this process: not
    assert own.returncode == inside.returncode == 0, (own.stderr, inside.stderr)
    assert own.stdout == inside.stdout and "hidden" in own.stdout
    assert faulted is not None, own.stderr
    done, span, refused = faulted
    if refused and done == 0:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14)")
    assert not refused and span >= 0.99 * kept and done > 0  # it ran, over the stages' bytes, and was not cut short


@glibc_linux
@pytest.mark.slow
def test_a_run_whose_weights_are_drawn_meanwhile_keeps_its_grown_heap(tmp_path) -> None:
    """keep_freed_memory, called while a big spec's weights are drawn, must not lower the trim threshold that keeps the
    heap grown for the fault-in: with over 512 MiB kept, the heap was handed back and the fault-in stopped at 72 MiB."""
    spec = tmp_path / "b3.yaml"
    spec.write_text((REPO / "specs" / "gpt2-block.yaml").read_text().replace("B: 1", "B: 3"))
    assert "B: 3" in spec.read_text()
    own, faulted = run_watched("run", str(spec), "--record", "all")
    assert own.returncode == 0, own.stderr
    assert faulted is not None and faulted[1] > 512 << 20
    assert faulted[0] == faulted[1] and not faulted[2], faulted


@glibc_linux
@pytest.mark.slow
def test_more_than_the_trim_threshold_is_faulted_in_up_to_it() -> None:
    script = textwrap.dedent("""
        import json
        from tracer import process
        process._own = True
        job = process.fault_in_ahead(3 << 30)
        job.thread.join()
        print(json.dumps({"done": job.done, "span": job.hi - job.lo, "refused": job.refused}))
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["span"] <= process.FAULT_IN_AT_MOST and got["span"] >= process.FAULT_IN_AT_MOST - 8192
    assert got["done"] == got["span"] and not got["refused"], got
