"""Shared test helpers: run the installed `tracer` entry point against this checkout; the `slow` marker and --slow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
EXAMPLES = REPO / "examples"
# The chapter's two blocks (Example 17.2), pre-norm and post-norm: as paths, as typed from the repository root (where
# run_cli and run_app run, and what their messages and rows then name), and as texts.
PRE, POST = str(SPECS / "ch17-prenorm.yaml"), str(SPECS / "ch17-postnorm.yaml")
PRE_REL, POST_REL = "specs/ch17-prenorm.yaml", "specs/ch17-postnorm.yaml"
PRE_TEXT, POST_TEXT = (SPECS / "ch17-prenorm.yaml").read_text(encoding="utf-8"), (SPECS / "ch17-postnorm.yaml").read_text(encoding="utf-8")
# Table 17.1 of the chapter (section 17.5), copied from the book: each stage of PRE, its words in the Chinese edition,
# its first position (six decimals) and its shape [T, C]; and the block's whole output Y, six decimals.
TABLE_17_1 = [
    ("x", "token 与位置相加，X", [1.000000, 0.000000], (3, 2)),
    ("norm1", "第一次归一化，N_1", [0.999980, -0.999980], (3, 2)),
    ("attention", "注意力输出，U", [0.000000, 1.999960], (3, 2)),
    ("residual1", "第一次残差相加，R", [1.000000, 1.999960], (3, 2)),
    ("norm2", "第二次归一化，N_2", [-0.999980, 0.999980], (3, 2)),
    ("hidden", "FFN 的 ReLU 之后", [0.000000, 1.999960, 0.999980], (3, 3)),
    ("ffn", "FFN 输出", [0.999980, 0.999980], (3, 2)),
    ("output", "块的最终输出，Y", [1.999980, 2.999940], (3, 2)),
]
BOOK_Y = [[1.999980, 2.999940], [0.999912, 1.476742], [2.999964, 3.746396]]
# The scripts of this interpreter's environment, where pip put the `tracer` entry point: tests run that one, never
# whichever `tracer` PATH finds (the virtual environment need not be activated).
BIN = Path(sys.executable).parent

# In-process tests import this checkout's tracer, not whichever copy `pip install -e` points at.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# As the tracer command does (tracer/__main__.py), before NumPy loads OpenBLAS: its idle threads sleep at once instead
# of spinning on the cores that the other test workers need.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook turns "auto" into a number of workers
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole suite (`python -m pytest`, no paths) runs in parallel with pytest-xdist, a worker a core, unless
    told otherwise (-n 0, -p no:xdist, --pdb), sharing the tests out by work stealing; a file or a test named on the command line runs in this process,
    where starting workers would cost more than it saves.  Without pytest-xdist everything runs in this process."""
    opt = config.option
    whole = getattr(config, "args_source", None) == pytest.Config.ArgsSource.TESTPATHS
    if (whole and config.pluginmanager.hasplugin("xdist") and getattr(opt, "numprocesses", 0) is None and not getattr(opt, "usepdb", False)
            and getattr(opt, "dist", "no") == "no" and "PYTEST_XDIST_WORKER" not in os.environ):
        opt.numprocesses = "auto"
        opt.dist = "worksteal"  # an idle worker takes tests queued for a busy one: the long ones no longer end the run alone


SLOW_REASON = "slow: run it with `python -m pytest --slow` (CI does)"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the tests marked slow, and the full hypothesis budgets (CI runs with it: .ci/run)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --slow, a test marked slow is skipped with a reason that says how to run it."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason=SLOW_REASON)
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def slow_run() -> bool:
    """True under --slow (everything, as CI runs it): the slow tests, the docs' long commands (tests/docs/test_docs.py)
    and the full budgets of the property tests (which CI, setting CI, gets without it too)."""
    return _SLOW[0]


_SLOW = [False]


def pytest_configure(config: pytest.Config) -> None:
    _SLOW[0] = bool(config.getoption("--slow", default=False))
    if not hasattr(config, "workerinput"):  # once, in the process that starts xdist's workers (or the only one)
        compile_tracer()


def compile_tracer() -> None:
    """Compile this checkout's tracer/ to bytecode once, before any test starts a `tracer`.

    The suite starts a few hundred `tracer` processes as a user would.  Where PYTHONDONTWRITEBYTECODE is set (as on
    the CI machines) no process writes the bytecode it compiles, so each of them compiled tracer's ~100 modules from
    source again: 0.25 CPU-seconds of the 0.4 a `tracer run` of the chapter's spec takes, about a fifth of the whole
    quick suite.  Compiled here once, each process reads them as an installed tracer's are read.  The files are the
    interpreter's own (__pycache__/, ignored by git), written only where they are missing or stale."""
    if not sys.dont_write_bytecode:
        return  # Python writes them itself, the first time each module is imported
    import compileall

    compileall.compile_dir(str(REPO / "tracer"), quiet=2)


_PARITY: dict[str, float] = {}  # family -> the largest |tracer - Hugging Face| its passing parity tests measured


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the figures the parity tests record (tests/helpers/hf_parity.measured), from xdist's workers too."""
    if report.when == "call" and report.passed:
        for key, value in report.user_properties:
            if key == "parity":
                family, figure = value
                _PARITY[family] = max(_PARITY.get(family, 0.0), float(figure))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The parity figures measured in this run, one line a family (the figures docs/families.md quotes)."""
    if _PARITY:
        terminalreporter.write_sep("-", "parity with Hugging Face: the largest |tracer - HF| measured (float64 unless said)")
        width = max(len(family) for family in _PARITY)
        for family in sorted(_PARITY):
            terminalreporter.write_line(f"{family:<{width}}  {_PARITY[family]:.1e}")


# Hypothesis: the same examples every run; --slow or CI gets the full budgets, see test_fuzz.
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("tracer", derandomize=True, database=None)
    _hypothesis_settings.load_profile("tracer")
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass


LOCALE = ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")  # tracer's default language follows LC_ALL, LC_MESSAGES, LANG


def _entry_point() -> list[str]:
    """The `tracer` script pip installed beside this interpreter; the module when it is not installed."""
    exe = BIN / ("tracer.exe" if os.name == "nt" else "tracer")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "tracer"]


def bin_first(env: dict[str, str]) -> dict[str, str]:
    """env with this interpreter's scripts first on PATH: a shell script's `tracer` and `python3` are this
    environment's, whether or not it is activated."""
    return {**env, "PATH": str(BIN) + os.pathsep + env.get("PATH", os.defpath)}


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `tracer ARGS` as a user would, with this checkout's code first on the path."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS") + LOCALE}
    full_env["LANG"] = "C.UTF-8"  # English unless a test asks for a locale: the default language follows it
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run(_entry_point() + list(args), cwd=cwd or REPO, env=full_env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


def example_module(relative: str):
    """A script under examples/ imported as a module (e.g. "checkpoints/tiny_gpt2.py"), for its functions."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(relative).stem, EXAMPLES / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_on_tty(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run `python -m tracer ARGS` with stdout and stderr on a pseudo-terminal: its exit code and all it printed."""
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "tracer", *args], cwd=cwd, env=env, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=60)
    os.close(master)
    return p.returncode, b"".join(chunks).decode("utf-8", "replace")


def write_spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def load_text(text: str, filename: str = "spec.yaml"):
    """A validated Spec from YAML text (in process)."""
    from tracer.spec import load_spec_text

    return load_spec_text(text, filename)


def trace_of(text: str, keep_going: bool = False):
    """Run a spec given as YAML text through the executor (in process)."""
    from tracer.engine import executor

    return executor.run(load_text(text), keep_going=keep_going)


def where(text: str, needle: str, nth: int = 1) -> str:
    """line:col (1-based) of the nth occurrence of needle in text: where an error message must point."""
    i = -1
    for _ in range(nth):
        i = text.index(needle, i + 1)
    return f"{text.count(chr(10), 0, i) + 1}:{i - text.rfind(chr(10), 0, i)}"


def _runner():
    """typer's CliRunner with stderr apart from stdout: click < 8.2 mixes them unless told not to."""
    import inspect

    from typer.testing import CliRunner

    return CliRunner(mix_stderr=False) if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters else CliRunner()


def run_app(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `tracer ARGS` in this process (typer's CliRunner): the same app, exit codes and output as run_cli,
    about ten times faster; for tests that run many specs, or whose subject is not the process itself (its
    streams, signals, start-up).  run_cli stays the end-to-end check.  ``env``: variables set for the call, as
    run_cli's (LANG is C.UTF-8 unless given, as there)."""
    from tracer.cli.app import app

    old = os.getcwd()
    os.chdir(cwd or REPO)
    try:
        full: dict[str, str | None] = {"NO_COLOR": None, "FORCE_COLOR": None, "COLUMNS": None, **dict.fromkeys(LOCALE),
                                       "LANG": "C.UTF-8", **(env or {})}
        res = _runner().invoke(app, list(args), env=full)
    finally:
        os.chdir(old)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return subprocess.CompletedProcess(["tracer", *args], res.exit_code, res.stdout, res.stderr)



def assert_refused(r: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 2, one paragraph on stderr naming every fragment, no traceback, nothing on stdout."""
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert r.stdout == "", r.stdout[:500]
    assert "Traceback" not in r.stderr, r.stderr
    message = r.stderr.strip()
    assert message.startswith("tracer: error: "), message
    assert "\n\n" not in message and len(message.splitlines()) == 1, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium for the page tests (tests/browser), one for the session; they skip, saying why, without
    playwright or Chromium (tests/helpers/browser.py)."""
    from helpers.browser import launch

    yield from launch()


@pytest.fixture
def tab(browser):
    """`tab(path)` opens a page file from file:// in a fresh context of the shared browser; the test fails on any
    request outside the file, console error or page error (tests/helpers/browser.py)."""
    from helpers.browser import Tabs

    tabs = Tabs(browser)
    yield tabs
    problems = tabs.close()
    if problems:
        pytest.fail("the page misbehaved:\n" + "\n".join(problems), pytrace=False)


def compared(a, b, **options):
    """tracer diff's comparison of two sides, as the library gives it (tracer.diff(...).result): the tests' short hand."""
    import tracer

    return tracer.diff(a, b, **options).result
