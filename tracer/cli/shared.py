"""What every command of the command line shares: the console, the one exit path (``guarded``), the diagnostic
lines on stderr, the options several commands take (their names, help and completion) and the outputs they write
(--svg/--html, --page).  Each command lives beside its feature (run/cli.py, compare/cli.py, ...); cli/app.py puts
them together.

Heavy modules (NumPy, the kernels, the renderers) are imported inside the functions, so ``tracer --help`` and shell
completion stay fast.
"""

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from tracer.errors import EXIT_INTERNAL, TracerError, UnknownLanguage, UsageError
from tracer.messages import join, msg, nmsg, shown

FORMATS = ("table", "json", "csv", "markdown")  # what --format takes (tracer run, diff, grad); completion needs no NumPy

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from tracer.page.writer import Page
    from tracer.views.export import Target

DEFAULT_MAX_MEMORY = "4GB"  # memory.DEFAULT_MAX_MEMORY; repeated here so --help imports nothing more


T = TypeVar("T")


BUG_REPORT = msg("this is a bug in tracer; please report it with the spec and the command you ran (set TRACER_DEBUG=1 to see the traceback)")


def console(no_color: bool = False, stderr: bool = False) -> "Console":
    """A console that never wraps or colours piped output."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    width = None if tty else 1000  # piped: as wide as the content, never wrapped at 80
    if tty and os.environ.get("COLUMNS", "1").strip("0") == "":  # COLUMNS=0 would print nothing: ask the terminal
        width = os.get_terminal_size(stream.fileno()).columns or 80
    return Console(
        file=stream,
        no_color=no_color or "NO_COLOR" in os.environ or not tty,
        highlight=False,
        width=width,
        soft_wrap=not tty,
        emoji=False,
    )


def guarded(fn: Callable[[], int], lang: str | None = None, confine: str | None = None) -> None:
    """The one exit path: TracerError -> its exit code and a message; anything else -> 3.

    ``lang`` is --lang: the language is chosen first (an unknown one is exit 2, like any bad option),
    so every message of the command, errors included, is in that language.
    """
    from tracer import i18n
    from tracer.errors import ClosedPipe, Interrupted

    before = i18n.language()
    try:
        try:
            i18n.choose(lang)
        except UnknownLanguage:
            import difflib

            close = difflib.get_close_matches(lang or "", i18n.LANGUAGES, n=1, cutoff=0.5)
            hint = msg("; did you mean {names}?", names=repr(close[0])) if close else ""
            raise UsageError(msg("--lang {option}: expected one of zh | en (zh: the book's Chinese, en: English){hint}", option=lang, hint=hint)) from None
        from tracer.files import confined, reading

        with reading(), confined(confine):  # every file read is an input no output may replace; --confine (tracer.files)
            code = fn()
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not as the interpreter exits
    except ClosedPipe as e:  # the reader has gone (| head -1): nothing to say, and no verdict to give
        raise typer.Exit(e.exit_code) from None
    except TracerError as e:
        error_line(e.message)
        raise typer.Exit(e.exit_code) from None
    except Interrupted as e:  # Ctrl-C, SIGTERM, SIGHUP (process.install_signals), after every cleanup ran
        error_line(msg("interrupted") if e.word == "interrupted" else msg("terminated"))
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        error_line(msg("interrupted"))
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except Exception as e:  # a bug: say so, without a traceback unless asked
        if os.environ.get("TRACER_DEBUG"):
            raise
        error_line(join([msg("internal error: {what}", what=f"{type(e).__name__}: {e}"), BUG_REPORT], "\n"))
        raise typer.Exit(EXIT_INTERNAL) from None
    finally:
        i18n.set_language(before)  # in-process callers (tests, CliRunner) get back the language they had
    raise typer.Exit(code)


def error_line(message: str) -> None:
    _say("tracer: error: ", message)


def note_line(text: str) -> None:
    _say("tracer: note: ", text)


def _say(lead: str, text: str) -> None:
    """One diagnostic line on stderr, lead and message in the chosen language."""
    from tracer.i18n import tr
    from tracer.messages import render

    try:
        sys.stderr.write(f"{tr(lead)}{render(text)}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr closed or full: the exit code still tells
        pass


def complete_format(incomplete: str) -> list[str]:
    return [f for f in FORMATS if f.startswith(incomplete)]


def complete_preset(incomplete: str) -> list[tuple[str, str]]:
    from tracer.spec.presets import PRESETS

    return [(name, p.summary) for name, p in PRESETS.items() if name.startswith(incomplete)]


def complete_stage(ctx: typer.Context, incomplete: str) -> list[str]:
    """Stage names of the spec(s) already on the command line, else every name `tracer stages` knows."""
    from tracer.model.catalogue import names

    known: list[str] = []
    # While completing, click may stop parsing at the option being completed: the spec paths are then in ctx.args.
    given = [*(ctx.params.get("specs") or ()), ctx.params.get("a"), *(ctx.params.get("sides") or ()), *ctx.args]
    for path in dict.fromkeys(p for p in given if isinstance(p, str)):
        try:
            from tracer.spec import load_spec

            known += [n for n in load_spec(path).stage_shapes if n not in known]
        except Exception:  # a half-typed or broken spec: fall back to the catalogue
            continue
    return [n for n in (known or names()) if n.startswith(incomplete)]


def complete_lang(incomplete: str) -> list[tuple[str, str]]:
    return [(lang, help_) for lang, help_ in (("zh", "the book's Chinese (简体中文)"), ("en", "English")) if lang.startswith(incomplete)]


LANG_HELP = ("Language of the words printed for people: zh (the book's Chinese) or en. Default: the locale "
             "(LC_ALL, LC_MESSAGES, LANG starting with zh -> zh, else en).")


LangOption = Annotated[str | None, typer.Option(
    "--lang", metavar="zh|en", autocompletion=complete_lang, show_default=False,
    help=LANG_HELP + " JSON and CSV are the same in both.")]


PictureLangOption = Annotated[str | None, typer.Option(  # a command with no JSON or CSV output
    "--lang", metavar="zh|en", autocompletion=complete_lang, show_default=False, help=LANG_HELP)]


FormatOption = Annotated[str | None, typer.Option(
    "--format", "-f", metavar="FORMAT", autocompletion=complete_format, show_default=False,
    help="table (default) | json | csv | markdown. CSV: one row per stage and position; Markdown: a pipe table.")]


StageOption = Annotated[list[str] | None, typer.Option(
    "--stage", "-s", autocompletion=complete_stage, show_default=False,
    help="Only this stage (repeatable), in every format; internals such as attn.weights may be named too.")]


PrecisionOption = Annotated[int, typer.Option("--precision", "-p", metavar="N", help="Decimals printed (0 to 17).")]


NoColorOption = Annotated[bool, typer.Option("--no-color", help="No colour, even on a terminal (NO_COLOR is honoured too).")]


PosOption = Annotated[int, typer.Option("--pos", "-t", metavar="T", help="Position whose values the table shows (-1: the last).")]


BatchOption = Annotated[int, typer.Option("--batch", "-b", metavar="B", help="Sample whose values the table shows (-1: the last).")]


SvgOption = Annotated[str | None, typer.Option("--svg", metavar="FILE", help="Also write what the terminal shows as an SVG picture.", show_default=False)]


HtmlOption = Annotated[str | None, typer.Option("--html", metavar="FILE", help="Also write what the terminal shows as an HTML page.", show_default=False)]


ConfineOption = Annotated[str | None, typer.Option(
    "--confine", metavar="DIR", show_default=False,
    help="Every file the spec refers to (weights, checkpoint folders) must lie inside DIR, through links; "
         "a reference outside is refused (exit 2), naming only the reference. For grading untrusted work.")]


AblateOption = Annotated[list[str] | None, typer.Option(
    "--ablate", metavar="STAGE[=mean]", show_default=False,
    help="Zero a head's contribution (blocks.0.attn.head.3), a stage (STAGE), or replace a stage by its mean over positions (STAGE=mean); repeatable.")]


SetOption = Annotated[list[str] | None, typer.Option(
    "--set", metavar="STAGE=FILE:KEY", show_default=False,
    help="Replace a stage's value by the array KEY of the .npz FILE (another run's --save, say); repeatable.")]


FromOption = Annotated[str | None, typer.Option(
    "--from", metavar="STAGE=FILE:KEY", show_default=False,
    help="Start the run at STAGE with the array KEY of the .npz FILE; the steps before it are not computed.")]


def intervene(ablate: list[str] | None, set_: list[str] | None, start: str | None) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    return tuple(ablate or ()), tuple(set_ or ()), (start,) if start else ()


ForceOption = Annotated[bool, typer.Option("--force", help="Let the output files replace an existing file tracer cannot prove it wrote "
                                                        "(never a link, a read-only file or an input; see docs/files.md).")]


PageOption = Annotated[str | None, typer.Option("--page", metavar="FILE", show_default=False,
                                               help="Also write the result as one explorable HTML page (tracer page; docs/files.md's rules).")]


PageBudgetOption = Annotated[float, typer.Option("--page-budget", metavar="MB", help="The page's size budget in megabytes: arrays beyond it are summarised; "
                                                                                     "refused (exit 2) if even the summaries do not fit.")]


# the options of a command that writes a table, JSON or CSV of one run (tracer lens, tracer attribute)
JsonOption = Annotated[bool, typer.Option("--json", help="Same as --format json.")]
TableFormatOption = Annotated[str | None, typer.Option("--format", "-f", metavar="FORMAT", show_default=False, help="table (default) | json | csv.")]
NoSpecialOption = Annotated[bool, typer.Option("--no-special", help="With --text: do not add the tokenizer's special tokens (BOS, EOS).")]
MaxMemoryOption = Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a run estimated to need more (4GB, 512MB, 2GiB, or none).")]


def check_precision(precision: int) -> None:
    from tracer.spec.choices import precision as checked

    checked(precision)


TopOption = Annotated[int, typer.Option("--top", metavar="K", help="The next tokens the probs line shows at each position, most probable first, with their "
                                                                   "text and probability (0: the first values instead).")]


def export_targets(svg: str | None, html: str | None, inputs: list[str], form: str, force: bool = False,
                   save: str | None = None) -> "list[Target]":
    """--svg / --html, checked before anything runs (never over an input or --save, never somewhere unwritable)."""
    if svg is None and html is None:
        return []
    if form != "table":
        raise UsageError(msg("--svg and --html export the table the terminal shows; they do not combine with --format {form}", form=form))
    from tracer.views.export import check_targets

    return check_targets(svg, html, inputs, force, {"--save": save})


def show(view: "RenderableType", no_color: bool, targets: "list[Target]", title: str, force: bool = False) -> None:
    """Print the view once; write the exports asked for (at the content's natural width)."""
    if targets:  # the run has read every input by now: none may be an export (checked again as each is written)
        from tracer.files import check_not_input

        for t in targets:
            check_not_input(t.path, f"--{t.kind}")
    console(no_color).print(view)
    if targets:
        from tracer.i18n import tr
        from tracer.views.export import export

        for path in export(view, targets, title, no_color, force):
            sys.stderr.write(tr("tracer: wrote {path}", path=shown(path)) + "\n")


def page_checked(path: str, budget: float, inputs: list[str], force: bool, others: "dict[str, str | None]", option: str = "--page") -> None:
    """The page's budget and file, checked before anything runs."""
    from tracer.page.writer import check_budget, check_page

    check_budget(budget)
    check_page(path, option, inputs, force, others)


def page_language() -> str:
    from tracer import i18n

    return i18n.language()


def write_page_file(path: str, page: "Page", force: bool, option: str = "--page") -> None:
    from tracer.i18n import tr
    from tracer.page.writer import megabytes, write_page

    write_page(path, page, option, force)
    sys.stderr.write(tr("tracer: wrote {path}", path=shown(path)) + tr(" ({size}; budget {budget})", size=megabytes(page.size),
                                                                       budget=megabytes(page.budget)) + "\n")
    if page.summarised:
        note_line(nmsg("{n} array summarised to stay within the budget (the page says what was left out)",
                   "{n} arrays summarised to stay within the budget (the page says what was left out)", len(page.summarised)))


def int_or_text(token: str | None) -> str | int | None:
    return int(token) if token is not None and token.strip().isdigit() else token


def complete_catalogue_name(incomplete: str) -> list[str]:
    from tracer.model.catalogue import names

    return [n for n in names() if n.startswith(incomplete)]
