"""Stream faults: every command with stdout closed, on a full disk, into a pipe whose reader has gone,
and with an ASCII-only encoding; stderr unwritable; COLUMNS=0 on a terminal; Ctrl-C at start-up.

The documented outcomes (docs/files.md): an unwritable stdout is exit 2 with one line; a closed
pipe is a quiet exit 141 (128 + SIGPIPE, as grep); a non-UTF-8 stdout gets ASCII; never a traceback.
Each case runs `python -m tracer` in a fresh process, as the fault needs real descriptors.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, POST, PRE, REPO, SPECS, run_on_tty

VIOLATION = str(EXAMPLES / "violations" / "ex5-residual-broadcast.yaml")
ED = str(SPECS / "encoder-decoder.yaml")
STACK = str(SPECS / "stack-2-layers.yaml")

# (command, its exit code when all goes well).  Every fault meets every command under --slow; the quick run keeps
# a table, Chinese words, a diff (exit 1) and --version (written outside any command).  Each case is a fresh process.
SLOW = pytest.mark.slow
COMMANDS = [
    pytest.param(["run", PRE], 0, id="run"),
    pytest.param(["run", VIOLATION], 1, id="run-violation-panel", marks=SLOW),
    pytest.param(["run", ED, "--attention-stage", "all", "--lang", "zh"], 0, id="run-attention-zh"),
    pytest.param(["run", str(SPECS / "gpt2-block.yaml"), "--record", "stats", "--stage", "norm1"], 0, id="run-elided-vectors",
                 marks=SLOW),
    pytest.param(["run", PRE, POST], 0, id="run-many", marks=SLOW),
    pytest.param(["run", PRE, POST, "--json"], 0, id="run-many-json", marks=SLOW),
    pytest.param(["run", PRE, "--format", "csv"], 0, id="run-csv", marks=SLOW),
    pytest.param(["validate", PRE, POST], 0, id="validate-many", marks=SLOW),
    pytest.param(["diff", PRE, POST], 1, id="diff"),
    pytest.param(["probe", PRE], 0, id="probe", marks=SLOW),
    pytest.param(["graph", ED], 0, id="graph", marks=SLOW),
    pytest.param(["stages"], 0, id="stages", marks=SLOW),
    pytest.param(["stages", "--json"], 0, id="stages-json", marks=SLOW),
    pytest.param(["new", "--preset", "ch17"], 0, id="new", marks=SLOW),
    pytest.param(["--version"], 0, id="version"),
]


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "FORCE_COLOR", "LC_ALL", "LANG", "LANGUAGE")}
    e.update(PYTHONPATH=str(REPO), LANG="C.UTF-8", **extra)
    return e


def tracer(args: list[str], stdout: object = subprocess.PIPE, extra_env: dict[str, str] | None = None,
           preexec: object = None, stderr: object = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tracer", *args], cwd=REPO, stdout=stdout, stderr=stderr,
                          env=env(**(extra_env or {})), preexec_fn=preexec, timeout=180)  # type: ignore[arg-type]


def no_traceback(r: subprocess.CompletedProcess[bytes]) -> str:
    err = (r.stderr or b"").decode("utf-8", "replace")
    assert "Traceback" not in err and "Exception ignored" not in err, err
    return err


def unwritable(args: list[str], why: str) -> str:
    return f"tracer: 错误：无法写出输出：{why}" if "zh" in args else f"tracer: error: cannot write the output: {why}"


@pytest.mark.parametrize("args, code", COMMANDS)
def test_stdout_closed_is_exit_2_with_one_line(args: list[str], code: int) -> None:
    r = tracer(args, stdout=subprocess.DEVNULL, preexec=lambda: os.close(1))
    err = no_traceback(r)
    assert r.returncode == 2, err
    assert err.splitlines()[-1] == unwritable(args, "标准输出已关闭" if "zh" in args else "standard output is closed"), err


@pytest.mark.parametrize("args, code", COMMANDS)
def test_stdout_on_a_full_disk_is_exit_2_with_one_line(args: list[str], code: int) -> None:
    with open("/dev/full", "w") as full:
        r = tracer(args, stdout=full)
    err = no_traceback(r)
    assert r.returncode == 2, err
    assert err.splitlines()[-1] == unwritable(args, "No space left on device"), err


@pytest.mark.parametrize("args, code", COMMANDS)
def test_a_pipe_whose_reader_has_gone_is_a_quiet_141(args: list[str], code: int) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before tracer writes its first line
    try:
        r = tracer(args, stdout=write)
    finally:
        os.close(write)
    err = no_traceback(r)
    assert r.returncode == 141, err
    assert "error" not in err, err  # quiet: nothing went wrong that the user must hear about


@pytest.mark.parametrize("args, code", COMMANDS)
def test_a_pipe_closed_after_one_line(args: list[str], code: int) -> None:
    p = subprocess.Popen([sys.executable, "-m", "tracer", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env())
    assert p.stdout is not None and p.stderr is not None
    first = p.stdout.readline()
    p.stdout.close()  # as `| head -1` does
    err = p.stderr.read()
    p.wait(timeout=180)
    p.stderr.close()
    assert first
    assert b"Traceback" not in err, err
    assert p.returncode in (code, 141), (p.returncode, err)  # done before the reader left, or stopped quietly


def test_a_reader_gone_during_one_big_write_is_a_quiet_141() -> None:
    """tracer grad --json writes its whole text at once (107 kB here, more than a pipe holds): the reader takes 10
    bytes and goes while the write waits; that is the quiet 141 too, not exit 0 with the output cut short."""
    p = subprocess.Popen([sys.executable, "-m", "tracer", "grad", STACK, "--json"], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env())
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.read(10) == b'{"schema_v'
    p.stdout.close()
    err = p.stderr.read()
    p.wait(timeout=180)
    p.stderr.close()
    assert b"Traceback" not in err and b"error" not in err, err
    assert p.returncode == 141, (p.returncode, err)


def test_many_clean_specs_into_head_never_claim_a_violation() -> None:
    r = subprocess.run(f"{sys.executable} -m tracer run {PRE} {POST} {PRE} {POST} | head -1; echo \"status=${{PIPESTATUS[0]}}\"",
                       shell=True, executable="/bin/bash", cwd=REPO, env=env(), capture_output=True, text=True, timeout=180)
    assert "Traceback" not in r.stderr
    status = int(r.stdout.strip().splitlines()[-1].split("=")[1])
    assert status in (0, 141), r.stdout


@pytest.mark.parametrize("args, code", COMMANDS)
@pytest.mark.parametrize("encoding", [
    pytest.param({"PYTHONIOENCODING": "ascii"}, id="PYTHONIOENCODING=ascii"),
    pytest.param({"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}, id="LC_ALL=POSIX"),
])
def test_an_ascii_stdout_gets_ascii(args: list[str], code: int, encoding: dict[str, str]) -> None:
    r = tracer(args, extra_env=encoding)
    err = no_traceback(r)
    assert r.returncode == code, err
    assert r.stdout and r.stdout.isascii()
    if args[0] != "new":  # the views use boxes, arrows, ellipses: all turned into ASCII
        assert b"\\u" not in r.stdout or "--lang" in args or "--json" in args or ED in args


@pytest.mark.slow  # four processes, one of them the GPT-2-sized spec
def test_ascii_keeps_json_exact_and_draws_ascii_boxes() -> None:
    import json

    utf = tracer(["run", ED, "--json"])
    ascii_ = tracer(["run", ED, "--json"], extra_env={"PYTHONIOENCODING": "ascii"})
    assert ascii_.stdout.isascii() and json.loads(ascii_.stdout) == json.loads(utf.stdout)  # \u escapes: the same data
    table = tracer(["run", PRE], extra_env={"PYTHONIOENCODING": "ascii"}).stdout.decode("ascii")
    assert "+---" in table and "|" in table
    graph = tracer(["graph", PRE], extra_env={"PYTHONIOENCODING": "ascii"}).stdout.decode("ascii")
    assert "o ... + a residual path" in graph  # the rail: a tap (o), the steps, the add (+)
    vectors = tracer(["run", str(SPECS / "gpt2-block.yaml"), "--record", "stats", "--stage", "norm1"],
                     extra_env={"PYTHONIOENCODING": "ascii"}).stdout.decode("ascii")
    assert "..., " in vectors or "... 768 values" in vectors  # an elided vector: ... for the ellipsis


@pytest.mark.parametrize("stderr", ["closed", "full"])
@pytest.mark.parametrize("args", [["run", "no-such-spec.yaml"], ["run", PRE, "--pos", "99"], ["validate", "no-such.yaml"]])
def test_errors_exit_2_when_stderr_cannot_be_written(args: list[str], stderr: str) -> None:
    if stderr == "closed":
        r = tracer(args, stderr=subprocess.DEVNULL, preexec=lambda: os.close(2))
    else:
        with open("/dev/full", "w") as full:
            r = tracer(args, stderr=full)
    assert r.returncode == 2


def test_stderr_closed_never_lands_in_a_file_tracer_writes(tmp_path: Path) -> None:
    out = tmp_path / "t.npz"
    r = tracer(["run", PRE, "--save", str(out)], stderr=subprocess.DEVNULL, preexec=lambda: os.close(2))
    assert r.returncode == 0
    import numpy as np

    with np.load(out) as z:  # the archive opened as descriptor 2 would be corrupted by any message
        assert "output" in z.files


@pytest.mark.parametrize("columns", ["0", "00", "abc", "-5"])
def test_columns_zero_on_a_terminal_still_prints(columns: str) -> None:
    code, text = run_on_tty(["run", PRE], REPO, env(COLUMNS=columns))
    assert code == 0
    assert "residual1" in text and "norm2" in text


# -- Ctrl-C at start-up ----------------------------------------------------------------------------

def _catches_sigterm(pid: int) -> bool:
    """Has the process installed tracer's handlers yet?  (Python alone catches SIGINT only.)"""
    try:
        with open(f"/proc/{pid}/status") as fh:
            caught = next(int(line.split()[1], 16) for line in fh if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc to see when tracer's handlers are in place")
@pytest.mark.parametrize("delay_ms", [0, 20, 50, 100, 200])
def test_ctrl_c_at_start_up_is_exit_130_without_a_traceback(delay_ms: int) -> None:
    """From tracer's first line on (handlers installed before typer is imported), at any moment.

    Before that line the interpreter is still starting (site, .pth files): that Ctrl-C is Python's."""
    p = subprocess.Popen([sys.executable, "-m", "tracer", "run", PRE], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env())
    deadline = time.monotonic() + 30
    while not _catches_sigterm(p.pid) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0002)
    time.sleep(delay_ms / 1000)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert b"Traceback" not in err, err.decode()
    if p.returncode in (0, -signal.SIGINT):  # the run had finished already: a complete table
        # (-SIGINT: the signal came while the interpreter was shutting down, after tracer's last line,
        # when Python has put the default handlers back; nothing is left to interrupt or clean up)
        assert b"residual1" in out and b"t=2:" in out
    else:
        assert p.returncode == 130, err
        assert err.decode().strip().splitlines()[-1] == "tracer: error: interrupted"
