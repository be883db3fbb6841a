"""Start-up: --help, validate and shell completion import neither NumPy nor the kernels; no pydantic on a run.

Each check runs a fresh interpreter (sys.modules of this test process already hold NumPy).
No timing here: speed is measured by benchmarks/startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import POST, PRE, PRE_REL, REPO, SPECS

HEAVY = ("numpy", "tracer.engine.kernels", "tracer.engine.executor", "tracer.engine.params", "pydantic")

PROBE = """
import json, sys
sys.argv = {argv!r}
code = 0
if sys.argv[1:]:
    from tracer.cli.app import main
    try:
        main()
    except SystemExit as e:
        code = e.code
else:
    import tracer.cli.app
sys.stdout.flush()
sys.__stderr__.write("\\nMODULES " + json.dumps({{"code": code, "loaded": [m for m in {heavy!r} if m in sys.modules]}}) + "\\n")
"""


def loaded_after(*argv: str, env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    code = PROBE.format(argv=["tracer", *argv], heavy=HEAVY)
    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=full_env, capture_output=True, text=True, timeout=60)
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("MODULES "))
    doc = json.loads(line[len("MODULES "):])
    return doc["code"], doc["loaded"], r.stdout


def test_importing_the_cli_loads_no_numpy() -> None:
    code, loaded, _ = loaded_after()
    assert loaded == []


@pytest.mark.parametrize("argv", [("--help",), ("run", "--help"), ("validate", "--help"), ("--version",)])
def test_help_loads_no_numpy(argv: tuple[str, ...]) -> None:
    code, loaded, out = loaded_after(*argv)
    assert code in (0, None) and loaded == [] and out


def test_validate_loads_no_numpy() -> None:
    code, loaded, out = loaded_after("validate", PRE, str(SPECS / "gpt2-block.yaml"))
    assert code == 0 and loaded == []
    assert out.count(": ok") == 2


def test_shell_completion_loads_no_numpy() -> None:
    env = {"_TRACER_COMPLETE": "complete_bash", "COMP_WORDS": "tracer r", "COMP_CWORD": "1"}
    code, loaded, out = loaded_after("r", env=env)
    assert loaded == []
    assert "run" in out


def test_a_run_loads_no_pydantic() -> None:
    code, loaded, out = loaded_after("run", PRE, "--pos", "1", "--precision", "3")
    assert code == 0 and "t=1: [1.000, 1.477]" in out
    assert "pydantic" not in loaded and "numpy" in loaded


def test_plain_coercion_keeps_typers_messages() -> None:
    from conftest import run_app

    r = run_app("run", PRE, "--pos", "x")
    assert r.returncode == 2 and "'--pos'" in r.stderr and "'x'" in r.stderr and "Traceback" not in r.stderr  # click's usage error
    r = run_app("run", PRE, "--pos", "-4")  # -1 is the last position; T = 3
    assert r.returncode == 2 and "--pos -4 is out of range" in r.stderr
    r = run_app("validate", PRE, POST)
    assert r.returncode == 0 and r.stdout.count(": ok") == 2


def test_a_number_option_is_read_without_pydantic_and_refuses_a_word() -> None:
    from conftest import run_app

    code, loaded, out = loaded_after("diff", PRE, PRE, "--atol", "1e-3", "--rtol", "0")
    assert code == 0 and "pydantic" not in loaded
    for args in (("diff", PRE, POST, "--atol", "tiny"), ("page", PRE, "-o", "never.html", "--page-budget", "tiny")):
        r = run_app(*args)
        assert r.returncode == 2 and f"'{args[-2]}'" in r.stderr and "'tiny'" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_named_command_builds_alone_and_behaves_the_same():
    # main() builds only the command the first word names (typer builds every command's parameters at start-up).
    from typer.testing import CliRunner

    from tracer.cli.app import app, app_for

    slim = app_for(["run", PRE_REL])
    assert [c.callback.__name__ for c in slim.registered_commands] == ["run"]
    assert app_for([]) is app and app_for(["no-such-command"]) is app and app_for(["--version"]) is app
    runner = CliRunner()
    for args in (["run", "--help"], ["run", PRE_REL], ["run", PRE_REL, "--pos", "9"]):
        a, b = runner.invoke(app, args), runner.invoke(slim, args)
        assert (a.exit_code, a.output) == (b.exit_code, b.output), args
