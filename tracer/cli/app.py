"""The command line: the commands, each beside its feature (run/cli.py, compare/cli.py, ...), put together in one
typer app.  What they share (the one exit path, the console, the options) is cli/shared.py.

Exit codes: 0 clean, 1 a violation was flagged, 2 the spec or the command line
is wrong, 3 an internal error (a bug in tracer).  Around a command (process.py, docs/files.md):
2 when stdout cannot be written, a quiet 141 when its reader has gone, 130/143/129 on
SIGINT/SIGTERM/SIGHUP.
"""

import os
import sys
from typing import Annotated, Any

import typer

from tracer.attribute import cli as attribute_cli
from tracer.check import cli as check_cli
from tracer.checkpoints import import_cli
from tracer.cli import options
from tracer.cli.shared import error_line
from tracer.compare import cli as diff_cli
from tracer.errors import EXIT_OK
from tracer.grad import cli as grad_cli
from tracer.grade import cli as grade_cli
from tracer.graph import cli as graph_cli
from tracer.lens import cli as lens_cli
from tracer.page import cli as page_cli
from tracer.patching import cli as patch_cli
from tracer.probe import cli as probe_cli
from tracer.run import cli as run_cli

APP_SETTINGS: dict[str, Any] = {
    "name": "tracer",
    "help": "Trace a Transformer block stage by stage: values, shapes, and the broadcast and axis mistakes NumPy lets slide.",
    "no_args_is_help": True,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}


app = typer.Typer(**APP_SETTINGS)


def _version(value: bool) -> None:
    if value:
        from tracer.version import __version__

        sys.stdout.write(f"tracer {__version__}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Trace a Transformer block stage by stage: values, shapes, and the broadcast and axis mistakes NumPy lets slide."""


options.install()  # plain text and numbers need no pydantic (see cliparams)


# The commands, in the order --help lists them.
app.command(cls=options.sectioned(run_cli.RUN_SECTIONS))(run_cli.run)
app.command()(probe_cli.probe)
app.command(cls=options.sectioned(grad_cli.GRAD_SECTIONS))(grad_cli.grad)
app.command()(diff_cli.diff)
app.command()(patch_cli.patch)
app.command()(graph_cli.graph)
app.command(cls=options.sectioned(lens_cli.LENS_SECTIONS))(lens_cli.lens)
app.command(cls=options.sectioned(attribute_cli.ATTRIBUTE_SECTIONS))(attribute_cli.attribute)
app.command("page", cls=options.sectioned(page_cli.PAGE_SECTIONS))(page_cli.page_command)
app.command()(run_cli.validate)
app.command()(check_cli.check)
app.command()(grade_cli.grade)
app.command()(run_cli.new)
app.command("import")(import_cli.import_)
app.command()(run_cli.schema)
app.command()(run_cli.stages)


def app_for(args: list[str]) -> typer.Typer:
    """The whole app, or, when the first word names a command, an app holding that command alone.

    typer builds every command's parameters at each start (about a millisecond a command); a run needs one.
    The command behaves exactly as in the whole app (same callback, options, help and exit codes).
    """
    if not args or os.environ.get("_TRACER_COMPLETE"):
        return app
    info = next((c for c in app.registered_commands if (c.name or getattr(c.callback, "__name__", "")) == args[0]), None)
    if info is None:
        return app
    slim = typer.Typer(**APP_SETTINGS)
    slim.registered_callback = app.registered_callback
    slim.registered_commands = [info]
    return slim


def main() -> None:
    from tracer.errors import ClosedPipe, OutputError
    from tracer.process import install_signals, prepare_streams

    install_signals()  # tracer/__main__.py does it before typer is imported; here for callers of cli.main
    prepare_streams()
    try:
        try:
            app_for(sys.argv[1:])()
        finally:
            sys.stdout.flush()  # what --version left in the buffer fails here, not as the interpreter exits
    except ClosedPipe as e:  # outside a command (--help, --version): as guarded() does inside one
        raise SystemExit(e.exit_code) from None
    except OutputError as e:
        error_line(str(e))
        raise SystemExit(e.exit_code) from None


if __name__ == "__main__":  # pragma: no cover
    main()
