"""Run tracer on a hostile input, bounded: its exit code, what it printed, how long it took and how much memory it held.

``bounded(args, cwd)`` runs ``tracer ARGS`` (this checkout's code, as run_cli does) in a process of its own under
``RLIMIT_AS`` (the address space it may take: a reader that grows without limit dies of MemoryError, exit 3, instead
of taking the machine) and a wall-clock timeout (a reader that blocks on a FIFO is killed and the test fails), and
reports its peak resident memory (``os.wait4``).  ``snapshot(folder)`` records every entry of a folder without
opening anything that is not a regular file (a FIFO would block the test itself); ``check`` runs a command and
asserts all of it: the exit code, one line on stderr naming the fragments, no traceback, the bounds, and that no
input file changed (the files a command writes are new ones).
"""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from conftest import LOCALE, REPO, _entry_point

GiB = 2**30
ADDRESS_SPACE = 3 * GiB  # NumPy, rich and typer start in about 600 MB of address space; a hostile file may not add GBs
PEAK_RSS = 1 * GiB  # what a refusal may hold at its peak (tracer starts in about 60 MB)
TIMEOUT = 30.0  # seconds: a refusal takes one or two on a loaded machine; a blocked reader would take forever


class Outcome(NamedTuple):
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss: int  # bytes
    cpu_seconds: float  # user + system time: steadier than the wall clock on a loaded machine


# A small launcher between the test and tracer: a child's peak resident memory (ru_maxrss) counts the memory of the
# process it was forked from, so tracer is forked from this launcher (a few MB), never from the test (hundreds).
_LAUNCHER = """
import os, resource, sys
limit, report, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
pid = os.fork()
if pid == 0:
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execv(args[0], args)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as fh:
    fh.write(f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""


def bounded(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = TIMEOUT,
            address_space: int | None = ADDRESS_SPACE, program: list[str] | None = None) -> Outcome:
    """``tracer ARGS`` in cwd, bounded in time and address space; ``address_space`` None for torch, which reserves
    more address space than it uses (its peak resident memory is still measured); ``program``: another command
    than tracer (a script that calls tracer's API, such as the grading script)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS") + LOCALE}
    full_env["LANG"] = "C.UTF-8"
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    command = list(program) if program is not None else _entry_point()
    if not os.path.isabs(command[0]):
        command[0] = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "maxrss")
        out_path, err_path = os.path.join(scratch, "out"), os.path.join(scratch, "err")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            start = time.monotonic()
            p = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(address_space or 0), report, *command, *args], cwd=cwd,
                                 env=full_env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                raise AssertionError(f"tracer {' '.join(args)} still ran after {timeout:.0f} s (blocked or unbounded)") from None
            seconds = time.monotonic() - start
        with open(report, encoding="ascii") as fh:
            peak_text, cpu_text = fh.read().split()
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, kilobytes on Linux
        with open(out_path, "rb") as o, open(err_path, "rb") as e:
            return Outcome(p.returncode, o.read().decode("utf-8", "replace"), e.read().decode("utf-8", "replace"), seconds,
                           int(peak_text) * scale, float(cpu_text))


def snapshot(folder: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under ``folder``: its kind, size and, for a regular file, a digest of its bytes (nothing else is opened)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as fh:
                    out[path] = ("file", st.st_size, hashlib.sha256(fh.read()).hexdigest())
            elif stat.S_ISLNK(st.st_mode):
                out[path] = ("link", 0, os.readlink(path))
            else:
                out[path] = (stat.filemode(st.st_mode)[0], st.st_size, "")
    return out


def assert_bounded(o: Outcome, what: str, seconds: float = TIMEOUT, peak: int = PEAK_RSS) -> None:
    assert o.seconds < seconds, (what, o.seconds)
    assert o.peak_rss < peak, (what, f"peak resident memory {o.peak_rss / 2**20:.0f} MB")


def assert_one_line(o: Outcome, code: int, *fragments: str) -> str:
    """Exit ``code``, one line on stderr (tracer: error: ...) naming every fragment, no traceback; the line."""
    assert o.returncode == code, (o.returncode, o.stdout[-800:], o.stderr[-2000:])
    assert "Traceback" not in o.stderr and "internal error" not in o.stderr, o.stderr
    message = o.stderr.strip()
    assert len(message.splitlines()) == 1 and message.startswith("tracer: error: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def check(args: list[str], folder: Path, code: int = 2, *fragments: str, env: dict[str, str] | None = None,
          address_space: int | None = ADDRESS_SPACE, timeout: float = TIMEOUT) -> Outcome:
    """Run ``tracer ARGS`` in ``folder`` on the hostile files there: exit ``code`` with one line naming ``fragments``
    (any code: see assert_one_line; 0 or 1: no check of stderr), within the bounds, every file there unchanged."""
    before = snapshot(folder)
    o = bounded(args, folder, env=env, timeout=timeout, address_space=address_space)
    if code == 2:
        assert_one_line(o, code, *fragments)
    else:
        assert o.returncode == code, (o.returncode, o.stdout[-800:], o.stderr[-2000:])
        assert "Traceback" not in o.stderr, o.stderr
    assert_bounded(o, " ".join(args))
    after = snapshot(folder)
    changed = sorted(path for path in before if after.get(path) != before[path])
    assert not changed, f"input files changed: {changed}"  # a command's own output (import -o) is new, never a change
    return o
