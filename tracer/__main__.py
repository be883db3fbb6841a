"""``python -m tracer`` and the ``tracer`` console script.

The signal handlers go in before typer is imported (a quarter of a second), so Ctrl-C at any
moment ends with one line and exit 130, never a traceback.  Once the command is done, the process
ends at once (``_leave``) instead of tearing the interpreter down.
"""

import os
import sys
from typing import NoReturn


def main() -> None:
    # Before NumPy loads OpenBLAS: its idle threads then sleep at once, instead of spinning for about 0.1 s after
    # every product on the cores that attention's own threads are about to use (tracer/blas.py); measured here,
    # a GPT-2-sized attention took 0.05 s instead of 0.1 s.  A value the user set is kept.
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    try:
        from tracer.process import install_signals

        install_signals()
        from tracer.cli.app import main as cli_main

        cli_main()
    except KeyboardInterrupt:  # before the handlers were in place
        _stopped("interrupted", 130)
    except SystemExit as e:
        word = getattr(e, "word", None)  # process.Interrupted outside a command (while loading or parsing)
        if word is None:
            _leave(e.code)
        _stopped(word, e.code)


def _leave(code: object) -> NoReturn:
    """Exit now that the command is done and its output written: the interpreter's teardown would spend
    tens of milliseconds freeing arrays and modules that the operating system reclaims anyway.
    tracer keeps no file open and registers no exit handler, and every temporary file is gone by now
    (docs/files.md); anything unusual (a code that is not a number, a stream that cannot be flushed)
    takes Python's own way out, as before."""
    if not isinstance(code, int) or isinstance(code, bool):
        raise SystemExit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        raise SystemExit(code) from None
    os._exit(code)


def _stopped(word: str, code: object) -> None:
    try:
        sys.stderr.write(f"tracer: error: {word}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    raise SystemExit(code)


if __name__ == "__main__":
    main()
