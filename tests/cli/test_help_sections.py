"""`tracer run --help` and `tracer grad --help` read in sections: every option under a heading, in the
order the command declares its sections, --help last."""

import re

import pytest
import typer
from conftest import run_app

from tracer.cli import app as cli
from tracer.cli.options import OTHER_SECTION, sectioned
from tracer.grad import cli as grad_cli
from tracer.page import cli as page_cli
from tracer.run import cli as run_cli


def headings(text: str) -> list[str]:
    return [line[:-1] for line in text.splitlines() if re.fullmatch(r"[A-Z][\w ]*:", line)]


@pytest.mark.parametrize(("command", "sections"), [("run", run_cli.RUN_SECTIONS), ("grad", grad_cli.GRAD_SECTIONS), ("page", page_cli.PAGE_SECTIONS)])
def test_every_option_is_in_a_named_section(command, sections):
    r = run_app(command, "--help")
    assert r.returncode == 0, r.stderr
    shown = headings(r.stdout)
    assert shown[shown.index("Arguments") + 1:] == [*sections, "Options"], shown
    assert OTHER_SECTION not in r.stdout
    declared = {name for names in sections.values() for name in names}
    command_obj = typer.main.get_command(cli.app).commands[command]  # type: ignore[attr-defined]
    longs = {o for p in command_obj.params for o in getattr(p, "opts", []) if o.startswith("--") and p.param_type_name == "option"}
    assert declared == longs - {"--help"}, (declared ^ (longs - {"--help"}))


def test_an_option_no_section_names_goes_under_other_options():
    app = typer.Typer(rich_markup_mode=None)

    @app.command(cls=sectioned({"Shown": ("--shown",)}))
    def main(shown: bool = typer.Option(False, "--shown", help="in a section"),
             forgotten: bool = typer.Option(False, "--forgotten", help="in none")) -> None:
        pass

    from typer.testing import CliRunner

    text = CliRunner().invoke(app, ["--help"]).stdout
    assert headings(text)[-3:] == ["Shown", OTHER_SECTION, "Options"], text
    shown_at, other_at = text.index("Shown:"), text.index(OTHER_SECTION + ":")
    assert shown_at < text.index("--shown") < other_at < text.index("--forgotten")
