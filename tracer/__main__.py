"""``python -m tracer`` and the ``tracer`` console script.

The signal handlers go in before typer is imported (a quarter of a second), so Ctrl-C at any
moment ends with one line and exit 130, never a traceback.
"""

import sys


def main() -> None:
    try:
        from .process import install_signals

        install_signals()
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:  # before the handlers were in place
        _stopped("interrupted", 130)
    except SystemExit as e:
        word = getattr(e, "word", None)  # process.Interrupted outside a command (while loading or parsing)
        if word is None:
            raise
        _stopped(word, e.code)


def _stopped(word: str, code: object) -> None:
    try:
        sys.stderr.write(f"tracer: error: {word}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    raise SystemExit(code)


if __name__ == "__main__":
    main()
