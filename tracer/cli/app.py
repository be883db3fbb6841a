"""The command line: parse options, call one library function, render, print once.

Heavy modules (NumPy, the kernels, the renderers) are imported inside the
commands, so ``tracer --help`` and shell completion stay fast.

Exit codes: 0 clean, 1 a violation was flagged, 2 the spec or the command line
is wrong, 3 an internal error (a bug in tracer).  Around a command (process.py, docs/files.md):
2 when stdout cannot be written, a quiet 141 when its reader has gone, 130/143/129 on
SIGINT/SIGTERM/SIGHUP.
"""

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from tracer.cli import options as cliparams
from tracer.errors import EXIT_INTERNAL, EXIT_OK, EXIT_VIOLATION, TracerError, UnknownLanguage, UsageError
from tracer.messages import at, join, msg, nmsg, shown

DEFAULT_MAX_MEMORY = "4GB"  # memory.DEFAULT_MAX_MEMORY; repeated here so --help imports nothing more

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from tracer.compare.core import DiffResult
    from tracer.page.writer import Page
    from tracer.views.export import Target

APP_SETTINGS: dict[str, Any] = {
    "name": "tracer",
    "help": "Trace a Transformer block stage by stage: values, shapes, and the broadcast and axis mistakes NumPy lets slide.",
    "no_args_is_help": True,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}
app = typer.Typer(**APP_SETTINGS)

cliparams.install()  # plain text and numbers need no pydantic (see cliparams)

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
        _error(e.message)
        raise typer.Exit(e.exit_code) from None
    except Interrupted as e:  # Ctrl-C, SIGTERM, SIGHUP (process.install_signals), after every cleanup ran
        _error(msg("interrupted") if e.word == "interrupted" else msg("terminated"))
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        _error(msg("interrupted"))
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except Exception as e:  # a bug: say so, without a traceback unless asked
        if os.environ.get("TRACER_DEBUG"):
            raise
        _error(join([msg("internal error: {what}", what=f"{type(e).__name__}: {e}"), BUG_REPORT], "\n"))
        raise typer.Exit(EXIT_INTERNAL) from None
    finally:
        i18n.set_language(before)  # in-process callers (tests, CliRunner) get back the language they had
    raise typer.Exit(code)


def _error(message: str) -> None:
    _say("tracer: error: ", message)


def _note(text: str) -> None:
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


# -- completion: values of --format, --preset and --stage (no NumPy: completion runs on every Tab) --

def complete_format(incomplete: str) -> list[str]:
    from tracer.run.command import FORMATS

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
# -- i27-intervene: --ablate, --set, --from (tracer/engine/interventions.py) --------------------------------------
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
PageBudgetOption = Annotated[float, typer.Option("--page-budget", metavar="MB", help="The page's size budget in megabytes: arrays beyond it are summarised; refused (exit 2) if even the summaries do not fit.")]


def check_precision(precision: int) -> None:
    from tracer.spec.choices import precision as checked

    checked(precision)


TopOption = Annotated[int, typer.Option("--top", metavar="K", help="The next tokens the probs line shows at each position, most probable first, with their text and probability (0: the first values instead).")]


RUN_SECTIONS = {
    "What the table shows": ("--pos", "--batch", "--precision", "--all", "--stage", "--steps", "--attention", "--attention-stage", "--top"),
    "Output": ("--format", "--json", "--with-weights", "--save", "--svg", "--html", "--force", "--no-color", "--lang"),
    "Checks and exit codes": ("--verify", "--verify-budget", "--keep-going", "--exit-zero", "--confine"),
    "Memory": ("--max-memory", "--record", "--keep"),
    "Interventions": ("--ablate", "--set", "--from"),
}


@app.command(cls=cliparams.sectioned(RUN_SECTIONS))
def run(
    specs: Annotated[list[str], typer.Argument(metavar="SPEC", help="The YAML spec(s) to trace. With more than one: a status line each and a summary.", show_default=False)],
    pos: PosOption = 0,
    batch: BatchOption = 0,
    precision: PrecisionOption = 6,
    show_all: Annotated[bool, typer.Option("--all", help="Also show attention internals (attn.q, attn.k, ...).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json: one JSON object (schema_version 1) per spec.")] = False,
    fmt: FormatOption = None,
    stage: StageOption = None,
    verify: Annotated[bool, typer.Option("--verify", help="Run the scalar reference beside NumPy; print the largest difference per stage.")] = False,
    verify_budget: Annotated[int, typer.Option("--verify-budget", help="Scalar operations the reference may take (about 15 million a second); beyond it, verify what is exact on its own.")] = 60_000_000,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Record NumPy's result at a violation and go on, flagging every violation.")] = False,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when a violation was flagged (for scripts that only collect reports).")] = False,
    steps: Annotated[bool, typer.Option("--steps", help="Print the step list the spec runs, with each stage's shape, and exit.")] = False,
    no_color: NoColorOption = False,
    with_weights: Annotated[bool, typer.Option("--with-weights", help="With --json: also write every weight, so `tracer diff` can name the weight that differs. With --save: also save them as weights.NAME (a checkpoint for layout: tracer).")] = False,
    attention: Annotated[bool, typer.Option("--attention", help="Draw the first attention stage's weights as heatmaps (one panel per head) instead of the table.")] = False,
    attention_stage: Annotated[list[str] | None, typer.Option("--attention-stage", metavar="NAME", help="Draw this attention stage (e.g. blocks.1.attention, decoder.blocks.0.cross_attention, or all); repeatable; implies --attention.", show_default=False)] = None,
    svg: SvgOption = None,
    html: HtmlOption = None,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a run estimated to need more (4GB, 512MB, 2GiB, or none).")] = DEFAULT_MAX_MEMORY,
    record: Annotated[str, typer.Option("--record", metavar="auto|all|main|stats", help="Keep what the output shows (auto: for the table, each stage's value at --batch/--pos and the block output), every stage (all), all but the attention internals (main), or statistics of big arrays (stats).")] = "auto",
    keep: Annotated[list[str] | None, typer.Option("--keep", metavar="STAGE", help="Keep this stage in full whatever --record says (repeatable).")] = None,
    save: Annotated[str | None, typer.Option("--save", metavar="FILE.npz", help="Write every recorded array to an .npz archive, under its stage name.")] = None,
    force: ForceOption = False,
    confine: ConfineOption = None,
    lang: LangOption = None,
    ablate: AblateOption = None,
    set_: SetOption = None,
    start: FromOption = None,
    top: TopOption = 5,
) -> None:
    """Trace SPEC and print one row per stage (Table 17.1), then the output matrix.

    Several specs run in one process: one status line each (ok, violation, error) and a summary;
    the exit code is the worst of them.
    """

    def body() -> int:
        from tracer.run import command as runs

        draw = attention or bool(attention_stage)
        opts = runs.options(specs, fmt=fmt, as_json=as_json, steps=steps, draw=draw, exports=bool(svg or html), batch=batch, pos=pos,
                            precision=precision, show_all=show_all, verify=verify, keep_going=keep_going, exit_zero=exit_zero,
                            with_weights=with_weights, stages=tuple(stage or ()), verify_budget=verify_budget, record=record,
                            keep=tuple(keep or ()), max_memory=max_memory, save=save, force=force,
                            intervene=intervene(ablate, set_, start), top=top)
        form = opts.form
        targets = export_targets(svg, html, list(specs), form, force, save)
        if steps:
            return print_steps(specs[0], form, opts, no_color, targets)
        if len(specs) > 1:
            return run_many(specs, form, opts, no_color)
        if draw:
            from tracer.model.blocks import internal_prefix
            from tracer.run.attention import resolve
            from tracer.spec import load_spec

            picked = resolve(load_spec(specs[0]), attention_stage or [])  # an unknown stage is exit 2 before anything runs
            drawn = tuple(f"{internal_prefix(st)}.weights" for st in picked)  # the picture needs them, whatever --record says
            opts = opts._replace(keep=opts.keep + drawn)
        try:
            from tracer.process import fault_in_ahead

            outcome = runs.trace_one(specs[0], opts, meanwhile=lambda: _meanwhile(form), ahead=fault_in_ahead)
        except TracerError as e:
            if form == "json":  # the error object on stdout too, as with several specs
                sys.stdout.write(runs.render_text(runs.Outcome(specs[0], e.exit_code, error=e.message), form, opts))
            raise
        if form == "table":
            assert outcome.trace is not None
            show(runs.table_view(outcome, precision, picked if draw else None), no_color, targets, outcome.trace.spec.name, force)
        else:
            for chunk in runs.render_chunks(outcome, form, opts):  # written as made: a big trace is never held as text
                sys.stdout.write(chunk)
            if form in ("json", "csv") and outcome.trace is not None:
                from tracer.views.text import unreached_note

                note = unreached_note(outcome.trace, outcome.only)
                if note:
                    _note(note)
        return outcome.code

    guarded(body, lang, confine)


def _meanwhile(form: str) -> None:
    """While runs.trace_one draws a big spec's weights: this process reuses the memory of the stages it lets go
    (process.keep_freed_memory), and the table's renderer and rich are imported (they would be after the run)."""
    from tracer.process import keep_freed_memory

    keep_freed_memory()
    if form == "table":
        from tracer.views import tables as render  # noqa: F401


def print_steps(path: str, form: str, opts: object, no_color: bool, targets: "list[Target]") -> int:
    from tracer.run import command as runs
    from tracer.run.plan import select_stages
    from tracer.spec import load_spec

    assert isinstance(opts, runs.RunOptions)
    s = load_spec(path)
    only = select_stages(s, opts.stages)
    if form == "table":
        from tracer.views import tables as render

        show(render.steps_table(s, only), no_color, targets, s.name, opts.force)
    else:
        sys.stdout.write(runs.steps_text(s, form, only))
    return EXIT_OK


def run_many(specs: list[str], form: str, opts: object, no_color: bool) -> int:
    """Each spec in turn, in this process. Table: status lines on stdout. JSON (one object per line),
    CSV (one header) and Markdown: the results on stdout, the status lines on stderr."""
    from rich.text import Text

    from tracer.run import command as runs
    from tracer.views import text as textout

    assert isinstance(opts, runs.RunOptions)
    status_out = console(no_color, stderr=form != "table")
    style = {"ok": "green", "violation": "bold red", "error": "bold yellow"}
    summary = runs.RunSummary()
    csv_parts = []
    for path in specs:
        o = runs.attempt(path, opts)
        summary.outcomes.append(o)
        if form == "csv":
            if o.trace is not None:
                csv_parts.append((o.path, o.stages))
        elif form != "table":
            sys.stdout.write(runs.render_text(o, form, opts) + ("\n" if form == "markdown" else ""))
            sys.stdout.flush()
        word = o.status()[0]
        status_out.print(Text(runs.status_text(o), style=style[word]) if word != "ok" else Text(runs.status_text(o)))
    if form == "csv":
        sys.stdout.write(textout.trace_csv(csv_parts))
    status_out.print(Text(summary.line(), style="bold"))
    return summary.exit_code


@app.command()
def probe(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec of the block to probe.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Write one JSON object to stdout instead of the table.")] = False,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when a property fails.")] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour, even on a terminal.")] = False,
    exact: Annotated[bool, typer.Option("--exact", help="Prove causality with the backward pass: every later position's gradient exactly 0.")] = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a probe estimated to need more (it holds two runs at once).")] = DEFAULT_MAX_MEMORY,
    lang: LangOption = None,
    ablate: AblateOption = None,
    set_: SetOption = None,
) -> None:
    """Check causality and permutation equivariance empirically, by perturbing and permuting the input rows.

    With --exact, causality is proved for the given weights with the backward pass instead.
    """

    def body() -> int:
        from tracer.probe import view
        from tracer.probe.properties import probe as run_probe
        from tracer.probe.properties import unmeasured_error
        from tracer.probe.result import FAIL
        from tracer.spec import load_spec

        s = load_spec(spec)
        if ablate or set_:  # i27-intervene: the probe perturbs the intervened block (its input: no --from)
            from tracer.engine.interventions import Requests, attach

            s = attach(s, Requests(*intervene(ablate, set_, None)))
        props = run_probe(s, exact, max_memory)
        if as_json:
            sys.stdout.write(view.json_text(s, props))
        else:
            console(no_color).print(view.table(s, props))
        if any(p.result == FAIL for p in props):
            return EXIT_OK if exit_zero else EXIT_VIOLATION
        unmeasured_error(s, props)  # exit 2: the input cannot show the property either way
        return EXIT_OK

    guarded(body, lang)


GRAD_SECTIONS = {
    "What is traced": ("--loss", "--pos", "--batch", "--precision", "--all", "--stage", "--per-layer", "--weight"),
    "Output": ("--format", "--json", "--save", "--svg", "--html", "--page", "--page-budget", "--force", "--no-color", "--lang"),
    "Checks": ("--verify", "--keep-going", "--confine"),
    "Memory": ("--max-memory",),
    "Interventions": ("--ablate", "--set", "--from"),
}


@app.command(cls=cliparams.sectioned(GRAD_SECTIONS))
def grad(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec to run forward and backward.", show_default=False)],
    loss: Annotated[str | None, typer.Option("--loss", metavar="next-token|sum-squares", show_default=False,
                                             help="The scalar whose gradient is traced. Default: the spec's loss:, else next-token with an output head, sum-squares (0.5·ΣY²) without.")] = None,
    pos: PosOption = 0,
    batch: BatchOption = 0,
    precision: PrecisionOption = 6,
    show_all: Annotated[bool, typer.Option("--all", help="Also show the gradients of the attention internals (attn.q, attn.k, ...).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json: run's JSON, each stage with its grad, plus loss and weight_grads.")] = False,
    fmt: FormatOption = None,
    stage: StageOption = None,
    per_layer: Annotated[bool, typer.Option("--per-layer", help="Show one weight's gradient norm in every layer of the stack (--weight), with bars.")] = False,
    weight: Annotated[str, typer.Option("--weight", metavar="NAME", help="The weight --per-layer compares across layers.")] = "ffn.w2",
    verify: Annotated[bool, typer.Option("--verify", help="Check a sample of every weight's gradient by central finite differences.")] = False,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Take the gradient of what NumPy computed even after a violation.")] = False,
    save: Annotated[str | None, typer.Option("--save", metavar="FILE.npz", help="Write the stages, their gradients (grad/STAGE) and the weights' (grad/weights/NAME) to an .npz archive.")] = None,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a run (forward and backward) estimated to need more.")] = DEFAULT_MAX_MEMORY,
    no_color: NoColorOption = False,
    svg: SvgOption = None,
    html: HtmlOption = None,
    page: PageOption = None,
    page_budget: PageBudgetOption = 20.0,
    force: ForceOption = False,
    confine: ConfineOption = None,
    lang: LangOption = None,
    ablate: AblateOption = None,
    set_: SetOption = None,
    start: FromOption = None,
) -> None:
    """The training signal, stage by stage: a loss's gradient with respect to every stage and weight, in backward order."""

    def body() -> int:
        from tracer.grad.command import GradRequest, execute
        from tracer.run.command import output_format

        form = output_format(fmt, as_json)
        check_precision(precision)
        targets = export_targets(svg, html, [spec], form, force, save)
        if page is not None:
            page_checked(page, page_budget, [spec], force, {"--save": save, "--svg": svg, "--html": html})
        result = execute(GradRequest(spec, form, loss, batch, pos, precision, show_all, tuple(stage or ()), per_layer,
                                     weight, verify, keep_going, save, max_memory, force, intervene(ablate, set_, start), full=page is not None))
        if isinstance(result.output, str):
            sys.stdout.write(result.output)
        else:
            show(result.output, no_color, targets, result.title)
        for note in result.notes:
            _note(note)
        if page is not None and result.trace is not None:
            from tracer.page.writer import run_page

            g = result.trace
            write_page_file(page, run_page(g.forward, b=result.batch, t=result.pos, precision=precision, lang=page_language(),
                                           budget_mb=page_budget, grad=g if g.loss is not None else None, grad_weight=weight), force)
        return result.code

    guarded(body, lang, confine)


@app.command()
def diff(
    a: Annotated[str, typer.Argument(metavar="A", help="Side A: a YAML spec, a trace saved by `tracer run SPEC --json`, or arrays (as B).", show_default=False)],
    sides: Annotated[list[str], typer.Argument(metavar="B...", help="Side B: a YAML spec, a saved JSON trace, or your own arrays: an .npz "
                                                       "(one array per stage; a --save archive too) or a JSON object of stage name -> nested list. "
                                                       "Several (or a folder of them): each compared with A, a status line each, or JSON Lines.", show_default=False)],
    atol: Annotated[float | None, typer.Option("--atol", show_default=False, help="Absolute tolerance: equal when |A - B| <= atol + rtol * max(|A|, |B|); default 1e-9, or 1e-5 against float32 arrays (1e-2 float16).")] = None,
    rtol: Annotated[float | None, typer.Option("--rtol", show_default=False, help="Relative tolerance (see --atol): default 1e-9, or 1e-5 against float32 arrays.")] = None,
    pos: PosOption = 0,
    batch: BatchOption = 0,
    precision: PrecisionOption = 6,
    show_all: Annotated[bool, typer.Option("--all", help="Also compare attention internals (attn.q, attn.k, ...).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json: one JSON object instead of the tables.")] = False,
    fmt: FormatOption = None,
    stage: StageOption = None,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Compare even when a side has a violation (else exit 2).")] = False,
    names: Annotated[list[str] | None, typer.Option("--map", metavar="THEIRS=OURS", show_default=False,
                                                    help="Your array THEIRS is tracer's stage OURS (repeatable), or a YAML file of 'theirs: ours' lines.")] = None,
    grad: Annotated[bool, typer.Option("--grad", help="Compare the backward traces: each stage's and weight's gradient of the side's loss (as tracer grad).")] = False,
    no_color: NoColorOption = False,
    svg: SvgOption = None,
    html: HtmlOption = None,
    force: ForceOption = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a diff estimated to need more (both sides count).")] = DEFAULT_MAX_MEMORY,
    confine: ConfineOption = None,
    lang: LangOption = None,
    ablate: AblateOption = None,
    set_: SetOption = None,
    start: FromOption = None,
    ablate_a: Annotated[list[str] | None, typer.Option("--ablate-a", metavar="STAGE[=mean]", show_default=False, help="As --ablate, on side A only.")] = None,
    ablate_b: Annotated[list[str] | None, typer.Option("--ablate-b", metavar="STAGE[=mean]", show_default=False, help="As --ablate, on side B only.")] = None,
    set_a: Annotated[list[str] | None, typer.Option("--set-a", metavar="STAGE=FILE:KEY", show_default=False, help="As --set, on side A only.")] = None,
    set_b: Annotated[list[str] | None, typer.Option("--set-b", metavar="STAGE=FILE:KEY", show_default=False, help="As --set, on side B only.")] = None,
    start_a: Annotated[str | None, typer.Option("--from-a", metavar="STAGE=FILE:KEY", show_default=False, help="As --from, on side A only.")] = None,
    start_b: Annotated[str | None, typer.Option("--from-b", metavar="STAGE=FILE:KEY", show_default=False, help="As --from, on side B only.")] = None,
    token: Annotated[str | None, typer.Option("--token", metavar="ID|WORD", show_default=False, help="The token whose probability the effect sentence follows (default: the clean side's top next token at the last position).")] = None,
    page: PageOption = None,
    page_budget: PageBudgetOption = 20.0,
) -> None:
    """Compare two blocks stage by stage: structure, settings, and where the numbers first diverge.

    Either side may be the arrays your own implementation recorded (.npz or JSON): the diff then
    names the first stage where they leave tracer's, and what that usually means.

    Exit codes as diff(1): 0 the same within tolerance, 1 different, 2 trouble; with several B, the worst of them.
    """

    def body() -> int:
        from tracer.compare import text as difftext
        from tracer.compare.core import diff as diff_files
        from tracer.run.command import output_format
        from tracer.views import trace_json as jsonout

        form = output_format(fmt, as_json)
        check_precision(precision)

        both = intervene(ablate, set_, start)  # i27-intervene: both sides, then each side's own
        sides_asked = (intervene([*both[0], *(ablate_a or ())], [*both[1], *(set_a or ())], start_a or start),
                       intervene([*both[0], *(ablate_b or ())], [*both[1], *(set_b or ())], start_b or start))
        asked = None
        if any(any(x) for x in sides_asked):
            from tracer.engine.interventions import Requests

            asked = (Requests(*sides_asked[0]), Requests(*sides_asked[1]))

        def compared(b: str) -> "DiffResult":
            return diff_files(a, b, atol=atol, rtol=rtol, batch=batch, pos=pos, show_all=show_all, keep_going=keep_going,
                              only=tuple(stage or ()), names=tuple(names or ()), grad=grad, max_memory=max_memory,
                              intervene=asked, token=token)

        if len(sides) > 1 or os.path.isdir(sides[0]):
            if page is not None:
                raise UsageError(msg("--page shows one diff: give one side B"))
            return diff_many(a, sides, form, bool(svg or html), compared)
        b = sides[0]
        targets = export_targets(svg, html, [a, b], form, force)
        if page is not None:
            page_checked(page, page_budget, [a, b], force, {"--svg": svg, "--html": html})
        try:
            result = compared(b)
        except TracerError as e:
            if form == "json":  # the error object on stdout too, as with several sides
                from tracer.compare.many import error_json

                sys.stdout.write(jsonout.dumps(error_json(a, b, e.exit_code, e.message, jsonout.SCHEMA_VERSION)))
            raise
        if form == "table":
            from tracer.compare.view import diff_view

            show(diff_view(result, precision), no_color, targets, f"tracer diff {a} {b}", force)
        else:
            writers = {"json": lambda: jsonout.dumps(result.as_json()), "csv": lambda: difftext.diff_csv(result),
                       "markdown": lambda: difftext.diff_markdown(result, precision)}
            sys.stdout.write(writers[form]())
        if page is not None:
            from tracer.page.writer import diff_page

            write_page_file(page, diff_page(result, precision=precision, lang=page_language(), budget_mb=page_budget), force)
        return result.exit_code

    guarded(body, lang, confine)


def diff_many(a: str, paths: list[str], form: str, exports: bool, compared: "Callable[[str], DiffResult]") -> int:
    """Each hand-in against A, in this process: a status line each and a summary (table), or JSON Lines, one object
    per hand-in, an error as an object too (json; the status lines then on stderr)."""
    from tracer.compare import many
    from tracer.views import trace_json as jsonout

    if form not in ("table", "json"):
        raise UsageError(msg("--format {form} compares two sides; with several, give the table or --json (JSON Lines)", form=form))
    if exports:
        raise UsageError(msg("--svg and --html export one diff's view: give one side B"))
    sides = many.hand_ins(paths)
    outcomes = []
    for path in sides:
        h = many.compare_each(a, [path], compared)[0]
        outcomes.append(h)
        line = many.status_line(h)
        if form == "json":
            sys.stdout.write(jsonout.dumps(h.json(a)))
            sys.stdout.flush()
            sys.stderr.write(line + "\n")
        else:
            sys.stdout.write(line + "\n")
    (sys.stderr if form == "json" else sys.stdout).write(many.summary_line(outcomes) + "\n")
    return many.exit_code(outcomes)


# -- i27-intervene: tracer patch ------------------------------------------------------------------------------
@app.command()
def patch(
    clean: Annotated[str, typer.Argument(metavar="CLEAN", help="The spec of the clean run: its stage values are patched in.", show_default=False)],
    corrupt: Annotated[str, typer.Argument(metavar="CORRUPT", help="The spec of the corrupt run (the same model on another input): patched at each cell.", show_default=False)],
    stage: Annotated[list[str] | None, typer.Option("--stage", metavar="PATTERN", show_default=False,
                                                    help="The stages to patch, by name or pattern (default 'blocks.*.output'); repeatable.")] = None,
    token: Annotated[str | None, typer.Option("--token", metavar="ID|WORD", show_default=False, help="The token whose logit is followed (default: the clean run's top next token at the last position).")] = None,
    batch: BatchOption = 0,
    precision: Annotated[int, typer.Option("--precision", "-p", metavar="N", help="Decimals printed (0 to 17).")] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json: one JSON object instead of the table and heatmap.")] = False,
    fmt: Annotated[str | None, typer.Option("--format", metavar="table|json|csv", show_default=False, help="Output format (default: table, with the heatmap).")] = None,
    no_color: NoColorOption = False,
    svg: SvgOption = None,
    html: HtmlOption = None,
    force: ForceOption = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a sweep whose runs are estimated to need more.")] = DEFAULT_MAX_MEMORY,
    confine: ConfineOption = None,
    lang: LangOption = None,
) -> None:
    """Activation patching: each stage at each position patched from CLEAN into CORRUPT, and the change in a token's logit.

    Exit codes: 0 the sweep ran, 1 a run had a violation, 2 bad input.
    """

    def body() -> int:
        from tracer.patching.run import DEFAULT_STAGE
        from tracer.patching.run import patch as sweep
        from tracer.run.command import output_format
        from tracer.spec import load_spec

        form = output_format(fmt, as_json)
        if form == "markdown":
            raise UsageError(msg("--format markdown: tracer patch writes table, json or csv"))
        check_precision(precision)
        targets = export_targets(svg, html, [clean, corrupt], form, force)
        try:
            grid = sweep(load_spec(clean), load_spec(corrupt), tuple(stage or (DEFAULT_STAGE,)), token, batch, max_memory)
        except TracerError as e:
            if form == "json":  # the error object on stdout too, as tracer run and tracer diff write it
                from tracer.views import trace_json as jsonout

                sys.stdout.write(jsonout.dumps({"schema_version": jsonout.SCHEMA_VERSION, "kind": "patch", "ok": False,
                                                "error": {"exit_code": e.exit_code, "message": e.message}}))
            raise
        if form == "json":
            from tracer.views import trace_json as jsonout

            sys.stdout.write(jsonout.dumps(grid.as_json()))
        elif form == "csv":
            from tracer.patching.view import patch_csv

            sys.stdout.write(patch_csv(grid))
        else:
            from tracer.patching.view import patch_view

            show(patch_view(grid, precision), no_color, targets, "tracer patch", force)
        return grid.exit_code

    guarded(body, lang, confine)


@app.command()
def graph(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec of the block to draw.", show_default=False)],
    no_color: NoColorOption = False,
    svg: Annotated[str | None, typer.Option("--svg", metavar="FILE", help="Also write the drawing as an SVG picture.", show_default=False)] = None,
    html: Annotated[str | None, typer.Option("--html", metavar="FILE", help="Also write the drawing as an HTML page.", show_default=False)] = None,
    force: ForceOption = False,
    lang: PictureLangOption = None,
) -> None:
    """Draw the block as Figure 17.1 does: before the block, each residual path with every stage and its shape.

    Drawn from the spec's own step list and shapes; nothing is run.
    """

    def body() -> int:
        from tracer.graph.view import graph_view
        from tracer.spec import load_spec

        targets = export_targets(svg, html, [spec], "table", force)
        s = load_spec(spec)
        show(graph_view(s), no_color, targets, s.name, force)
        return EXIT_OK

    guarded(body, lang)


# -- i27-lens: tracer lens ------------------------------------------------------------------
LENS_SECTIONS = {
    "What the lens shows": ("--token", "--top", "--batch", "--precision", "--text", "--no-special"),
    "Interventions": ("--ablate", "--set"),
    "Output": ("--format", "--json", "--svg", "--html", "--page", "--page-budget", "--force", "--no-color", "--lang"),
    "Checks and limits": ("--max-memory", "--confine"),
}


@app.command(cls=cliparams.sectioned(LENS_SECTIONS))
def lens(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec to read out layer by layer (it needs a head).", show_default=False)],
    token: Annotated[str | None, typer.Option("--token", metavar="TEXT|ID", show_default=False,
                                              help="The token whose probability each cell shows: its text (e.g. Paris) or its id. Default: the model's own next token at each position.")] = None,
    top: Annotated[int, typer.Option("--top", metavar="K", help="The most probable tokens each cell lists.")] = 3,
    batch: BatchOption = 0,
    precision: Annotated[int, typer.Option("--precision", "-p", metavar="N", help="Decimals printed (0 to 17).")] = 4,
    text: Annotated[str | None, typer.Option("--text", metavar="TEXT", show_default=False,
                                             help="Read out this text instead of the spec's input, tokenized with the spec's tokenizer.")] = None,
    no_special: Annotated[bool, typer.Option("--no-special", help="With --text: do not add the tokenizer's special tokens (BOS, EOS).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    fmt: Annotated[str | None, typer.Option("--format", "-f", metavar="FORMAT", show_default=False, help="table (default) | json | csv.")] = None,
    no_color: NoColorOption = False,
    svg: SvgOption = None,
    html: HtmlOption = None,
    force: ForceOption = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a run estimated to need more (4GB, 512MB, 2GiB, or none).")] = DEFAULT_MAX_MEMORY,
    confine: ConfineOption = None,
    lang: LangOption = None,
    ablate: AblateOption = None,
    set_: SetOption = None,
    page: PageOption = None,
    page_budget: PageBudgetOption = 20.0,
) -> None:
    """The logit lens: every layer's residual stream through the final norm (with that layer's own statistics) and the head.

    A table (layer x position: p(token) and the top tokens) and a heatmap of p(token), layers x positions.
    """

    def body() -> int:
        from tracer.lens import command as lenses

        form = lenses.lens_format(fmt, as_json)
        targets = export_targets(svg, html, [spec], "table" if form == "table" else form, force)
        if page is not None:
            page_checked(page, page_budget, [spec], force, {"--svg": svg, "--html": html})
        result, run = lenses.lens_spec(spec, token=_int_or_text(token), top=top, batch=batch, max_memory=max_memory, precision=precision,
                                       text=text, special=not no_special, ablate=tuple(ablate or ()), set_=tuple(set_ or ()),
                                       record="all" if page is not None else "main")  # the page draws every stage
        if form == "table":
            from tracer.lens.view import lens_view

            show(lens_view(result), no_color, targets, result.spec.name, force)
        else:
            sys.stdout.write(lenses.lens_text(result, form))
        if page is not None:
            from tracer.page.writer import run_page

            write_page_file(page, run_page(run, b=result.batch, t=0, lang=page_language(), budget_mb=page_budget, lens=result), force)
        return EXIT_OK

    guarded(body, lang, confine)


def _int_or_text(token: str | None) -> str | int | None:
    return int(token) if token is not None and token.strip().isdigit() else token


PAGE_SECTIONS = {
    "What the page shows": ("--pos", "--batch", "--precision", "--text", "--no-special"),
    "Output": ("--output", "--page-budget", "--force", "--lang"),
    "Checks and limits": ("--keep-going", "--max-memory", "--confine"),
    "Interventions": ("--ablate", "--set", "--from"),
}


@app.command("page", cls=cliparams.sectioned(PAGE_SECTIONS))
def page_command(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec to trace and show.", show_default=False)],
    output: Annotated[str | None, typer.Option("--output", "-o", metavar="FILE", show_default=False,
                                               help="The HTML file to write (never over a file tracer did not write, unless --force).")] = None,
    pos: Annotated[int, typer.Option("--pos", "-t", metavar="T", help="The position the page opens at (-1: the last).")] = 0,
    batch: Annotated[int, typer.Option("--batch", "-b", metavar="B", help="The sample the page opens at (-1: the last).")] = 0,
    precision: PrecisionOption = 6,
    text: Annotated[str | None, typer.Option("--text", metavar="TEXT", show_default=False,
                                             help="Trace this text instead of the spec's input, tokenized with the spec's tokenizer.")] = None,
    no_special: Annotated[bool, typer.Option("--no-special", help="With --text: do not add the tokenizer's special tokens (BOS, EOS).")] = False,
    page_budget: PageBudgetOption = 20.0,
    force: ForceOption = False,
    lang: Annotated[str | None, typer.Option("--lang", metavar="zh|en", autocompletion=complete_lang, show_default=False,
                                             help="The language the page opens in (it switches between both) and of the messages: zh (the book's Chinese) or en. Default: the locale.")] = None,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Record NumPy's result at a violation and go on, flagging every violation.")] = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a run estimated to need more (every stage is kept).")] = DEFAULT_MAX_MEMORY,
    confine: ConfineOption = None,
    ablate: AblateOption = None,
    set_: SetOption = None,
    start: FromOption = None,
) -> None:
    """Write the worked example as one explorable HTML page: the block diagram, every stage as a heatmap and a
    table with its exact values, Table 17.1, the attention heads, in English and Chinese.

    Exit codes as tracer run: 0 clean, 1 a violation (the page shows it), 2 bad input or over budget.
    """

    def body() -> int:
        from tracer.run.result import trace

        if output is None:
            raise UsageError(msg("give the page's file: tracer page SPEC -o FILE"))
        check_precision(precision)
        page_checked(output, page_budget, [spec], force, {}, "--output")
        t = trace(spec, keep_going=keep_going, record="all", max_memory=max_memory, batch=batch, pos=pos, precision=precision,
                  text=text, special=not no_special, ablate=ablate or None, set=set_ or None, start=start)
        from tracer.page.writer import run_page

        write_page_file(output, run_page(t.run, b=t.batch, t=t.pos, precision=precision, lang=page_language(), budget_mb=page_budget),
                        force, "--output")
        return EXIT_OK if t.ok else EXIT_VIOLATION

    guarded(body, lang, confine)


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
    sys.stderr.write(tr("tracer: wrote {path}", path=shown(path)) + tr(" ({size}; budget {budget})", size=megabytes(page.size), budget=megabytes(page.budget)) + "\n")
    if page.summarised:
        _note(nmsg("{n} array summarised to stay within the budget (the page says what was left out)",
                   "{n} arrays summarised to stay within the budget (the page says what was left out)", len(page.summarised)))


@app.command()
def validate(
    specs: Annotated[list[str], typer.Argument(help="The YAML specs to check.", show_default=False, metavar="SPEC")],
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Report a spec whose run would need more as invalid (as run refuses it).")] = DEFAULT_MAX_MEMORY,
    record: Annotated[str, typer.Option("--record", metavar="auto|all|main|stats", help="The recording the memory estimate assumes (auto: a plain `tracer run`).")] = "auto",
    confine: ConfineOption = None,
    lang: LangOption = None,
) -> None:
    """Check each SPEC without running it: one line per spec, 'ok', the violation a run would flag, or the error.

    What the shapes and settings alone show (beta: [0], LayerNorm over T, softmax over queries, positions
    beyond T_max) is reported as tracer run reports it.  Exit code: the worst of 0 valid, 1 a run would
    flag a violation, 2 not valid.
    """

    def body() -> int:
        from tracer.messages import render
        from tracer.run.plan import prepare
        from tracer.spec import memory

        memory.parse_size(max_memory)
        worst = EXIT_OK
        for path in specs:
            try:
                ready = prepare(path, record=record, table=True, max_memory=max_memory)
                s, est = ready.spec, ready.check_memory()
                line: str = msg("{path}: ok, needs about {size} to run (--record {r})", path=path, size=memory.format_size(est.total), r=record)
                code = EXIT_OK
                from tracer.spec.preflight import violations

                found = violations(s)
                if found:
                    from tracer.i18n import tr
                    from tracer.views.text import kind_word

                    line = render(at(path, found[0].message)) + tr(" ({kind} violation: tracer run flags it)", kind=kind_word(found[0].kind))
                    code = EXIT_VIOLATION
            except TracerError as e:
                line, code = e.message, e.exit_code
            except Exception as e:  # a bug: say so for this spec, go on with the others
                if os.environ.get("TRACER_DEBUG"):
                    raise
                line, code = at(path, join([msg("internal error: {what}", what=f"{type(e).__name__}: {e}"), BUG_REPORT])), EXIT_INTERNAL
            sys.stdout.write(" ".join(render(line).split()) + "\n")  # one line per spec, whatever the message
            worst = max(worst, code)
        return worst

    guarded(body, lang, confine)


@app.command()
def check(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec whose stage was worked out by hand.", show_default=False)],
    stage: Annotated[str | None, typer.Option("--stage", "-s", autocompletion=complete_stage, show_default=False,
                                              help="The stage whose value was worked out (as tracer run names it).")] = None,
    expect: Annotated[str | None, typer.Option("--expect", "-e", metavar="NUMBERS", show_default=False,
                                               help='The hand-worked value at --pos and --batch, e.g. "[1, -2, -1]" (NumPy\'s "[ 1. -2. -1.]" too).')] = None,
    answers: Annotated[str | None, typer.Option("--answers", metavar="FILE", show_default=False,
                                                help="A YAML or JSON file of answers, 'STAGE@T: [numbers]' a line: each checked, one result each.")] = None,
    pos: Annotated[int, typer.Option("--pos", "-t", metavar="T", help="Position of the value (-1: the last).")] = 0,
    batch: Annotated[int, typer.Option("--batch", "-b", metavar="B", help="Sample of the value (-1: the last).")] = 0,
    precision: Annotated[int, typer.Option("--precision", "-p", metavar="N", help="Decimals that must agree, as tracer run --precision prints them.")] = 6,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per answer instead of the line.")] = False,
    confine: ConfineOption = None,
    lang: LangOption = None,
) -> None:
    """Check a hand-worked value: right or wrong to the printed precision.

    Exit code: 0 right, 1 wrong, 2 a bad spec, stage or option (a wrong count of numbers too); with --answers, the worst.
    """

    def body() -> int:
        from tracer.check import answer as answers_
        from tracer.messages import render
        from tracer.views import trace_json as jsonout

        check_precision(precision)
        if answers is not None:
            if expect is not None or stage is not None:
                raise UsageError(msg("--answers gives every stage and value: give it without --stage and --expect"))
            results = answers_.check_answers(spec, answers_.read_answers(answers, batch, pos), precision)
            for c in results:
                if as_json:
                    sys.stdout.write(jsonout.dumps(c.as_json(spec)))
                else:
                    sys.stdout.write(" ".join(render(c.verdict.line if c.verdict is not None else c.error).split()) + "\n")
            notes = next((c.verdict.notes for c in results if c.verdict is not None and c.verdict.notes), ())
            for note in notes:  # once for the spec, not once an answer
                sys.stderr.write(render(msg("note: {note}", note=note)) + "\n")
            counts = {w: sum(c.word == w for c in results) for w in ("right", "wrong", "error")}
            worst = max(c.code for c in results)
            line = render(nmsg("{n} answer: {right} right, {wrong} wrong, {errors}; exit code {code}",
                               "{n} answers: {right} right, {wrong} wrong, {errors}; exit code {code}", len(results),
                               right=counts["right"], wrong=counts["wrong"], errors=nmsg("{n} error", "{n} errors", counts["error"]), code=worst))
            (sys.stderr if as_json else sys.stdout).write(line + "\n")
            return worst
        if stage is None or expect is None:
            raise UsageError(msg("give --stage and --expect (one value), or --answers FILE (many)"))
        try:
            verdict = answers_.check(spec, stage, expect, pos, batch, precision)
        except TracerError as e:
            if as_json:  # the error object on stdout too
                sys.stdout.write(jsonout.dumps(answers_.answer_json(spec, stage, batch, pos, None, e.exit_code, e.message)))
            raise
        if as_json:
            sys.stdout.write(jsonout.dumps(answers_.answer_json(spec, stage, batch, pos, verdict, verdict.exit_code)))
        else:
            sys.stdout.write(render(verdict.line) + "\n")
            for note in verdict.notes:  # on stderr: stdout stays the one line a script reads
                sys.stderr.write(render(msg("note: {note}", note=note)) + "\n")
        return verdict.exit_code

    guarded(body, lang, confine)


@app.command()
def grade(
    students: Annotated[str, typer.Argument(metavar="STUDENTS", show_default=False,
                                            help="Folder of hand-ins: one subfolder per student (NAME/TASK.yaml), or NAME.yaml files for one task.")],
    reference: Annotated[str, typer.Argument(metavar="REFERENCE", show_default=False,
                                             help="Folder of reference traces, one TASK.json per task (tracer run SOLUTION.yaml --json --with-weights).")],
    task: Annotated[str | None, typer.Option("--task", metavar="TASK", show_default=False,
                                             help="The task a flat folder of NAME.yaml answers (needed when REFERENCE holds several).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON Lines on stdout instead of the sheet: one object per student and task.")] = False,
    csv_file: Annotated[str | None, typer.Option("--csv", metavar="FILE", show_default=False,
                                                 help="Also write the sheet as CSV to FILE (- : on stdout instead of the sheet).")] = None,
    atol: Annotated[float | None, typer.Option("--atol", show_default=False, help="Absolute tolerance of each diff, as tracer diff: default 1e-9, or 1e-5 against float32 arrays.")] = None,
    rtol: Annotated[float | None, typer.Option("--rtol", show_default=False, help="Relative tolerance of each diff, as tracer diff: default 1e-9, or 1e-5 against float32 arrays.")] = None,
    force: ForceOption = False,
    lang: LangOption = None,
) -> None:
    """Grade a class: each hand-in diffed against its task's reference (tracer diff --keep-going), scored, one sheet.

    Each hand-in may read only files inside its own folder (--confine is always on). Exit code: 0 the sheet
    was written (whatever the scores), 2 a folder is missing or empty, or a flat folder's task is not clear.
    """

    def body() -> int:
        from tracer.compare.core import check_tolerance
        from tracer.grade import sheet as grading
        from tracer.grade import view

        check_tolerance(1e-9 if atol is None else atol, 1e-9 if rtol is None else rtol)
        if as_json and csv_file == "-":
            raise UsageError(msg("--json and --csv - both write to stdout: give one, or --csv FILE"))
        studs, refs = grading.folder(students), grading.folder(reference)
        if csv_file not in (None, "-"):
            from tracer.files import check_output

            check_output(csv_file, "--csv", grading.inputs(studs, refs), "csv", force)  # never over a hand-in or a reference
        layout, grades = grading.sheet(studs, refs, atol, rtol, task)
        _note(view.layout_line(students, layout, grades))
        if csv_file not in (None, "-"):
            from tracer.files import write_atomic

            data = view.as_csv(grades).encode("utf-8")
            write_atomic(csv_file, lambda fh: fh.write(data), "--csv", "csv", force)
        if as_json:
            sys.stdout.write(view.as_json_lines(grades))
        elif csv_file == "-":
            sys.stdout.write(view.as_csv(grades))
        else:
            sys.stdout.write(view.as_text(grades))
        return EXIT_OK

    guarded(body, lang)


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


@app.command()
def new(
    preset: Annotated[str | None, typer.Option("--preset", "-P", autocompletion=complete_preset, show_default=False,
                                               help="ch17 | custom | gpt2 | stack | modern | encoder-decoder")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", show_default=False,
                                               help="Write the spec to this file (never over an existing one) instead of stdout.")] = None,
    list_presets: Annotated[bool, typer.Option("--list", help="List the presets, one line each, and exit.")] = False,
) -> None:
    """Print a commented spec to start from: `tracer new --preset ch17 > my-block.yaml`."""

    def body() -> int:
        from tracer.model.catalogue import suggest
        from tracer.spec.presets import PRESETS

        listing = "".join(f"  {name:<16} {p.summary}\n" for name, p in PRESETS.items())  # the presets' own words
        if list_presets:
            sys.stdout.write(listing)
            return EXIT_OK
        if preset is None:
            raise UsageError(join([msg("give --preset NAME, one of:"), listing.rstrip("\n")], "\n"))
        if preset not in PRESETS:
            raise UsageError(join([msg("--preset {name}: no such preset{hint}", name=preset, hint=suggest(preset, PRESETS)), msg("the presets are:"),
                                   listing.rstrip("\n")], "\n"))
        text = PRESETS[preset].text
        if output is None:
            sys.stdout.write(text)
            return EXIT_OK
        from tracer.files import check_output, write_atomic

        check_output(output, "--output", [], "yaml", replace=False)  # never over an existing file
        write_atomic(output, lambda fh: fh.write(text.encode("utf-8")), "--output", "yaml", replace=False)
        from tracer.messages import render

        sys.stderr.write(render(msg("wrote {path} (preset {preset}); trace it with: tracer run {path}", path=shown(output), preset=preset)) + "\n")
        return EXIT_OK

    guarded(body)


@app.command("import")
def import_(
    checkpoint: Annotated[str, typer.Argument(metavar="CHECKPOINT", show_default=False,
                                              help="A Hugging Face model folder, or a .safetensors, .npz or PyTorch .pt/.bin file.")],
    output: Annotated[str | None, typer.Option("--output", "-o", show_default=False,
                                               help="Write the spec to this file (replacing only a spec tracer import wrote and nobody edited since, unless --force) instead of stdout.")] = None,
    layout: Annotated[str | None, typer.Option("--layout", metavar="gpt2|torch|...", show_default=False,
                                               help="How the checkpoint's tensors map onto tracer's weights. Default: config.json's model_type.")] = None,
    layers: Annotated[str | None, typer.Option("--layers", metavar="FIRST-LAST", show_default=False,
                                               help="A contiguous range of layers, e.g. 0-1 (default: all).")] = None,
    tokens: Annotated[str | None, typer.Option("--tokens", metavar="IDS", show_default=False,
                                               help="Input token ids, e.g. 464,2068,7586 (default: a seeded random input).")] = None,
    heads: Annotated[int | None, typer.Option("--heads", metavar="H", show_default=False,
                                              help="Number of heads, when the checkpoint does not record it (a PyTorch state dict, no config.json). Refused if config.json says otherwise.")] = None,
    activation: Annotated[str | None, typer.Option("--activation", metavar="NAME", show_default=False,
                                                   help="The activation, when no config records it (gelu_tanh, gelu, relu, swiglu). Refused if config.json says otherwise.")] = None,
    eps: Annotated[float | None, typer.Option("--eps", metavar="EPS", show_default=False,
                                              help="The norms' epsilon, when no config records it. Refused if config.json says otherwise.")] = None,
    norm_order: Annotated[str | None, typer.Option("--norm-order", metavar="pre|post", show_default=False,
                                                   help="Pre- or post-norm, for a PyTorch state dict (norm_first=True is pre; default post).")] = None,
    allow_unread: Annotated[bool, typer.Option("--allow-unread",
                                               help="Import even when the spec would leave some of the checkpoint's tensors unread in the layers it traces; the spec lists them.")] = False,
    length: Annotated[int, typer.Option("--length", metavar="T", help="Positions of the random input when --tokens is not given.")] = 8,
    force: ForceOption = False,
    text: Annotated[str | None, typer.Option("--text", metavar="TEXT", show_default=False,
                                             help="Input text, tokenized with the folder's own tokenizer.json (needs the tokenizers package: the checkpoints extra).")] = None,
    no_special: Annotated[bool, typer.Option("--no-special", help="With --text: do not add the special tokens (BOS, EOS) the tokenizer's post-processor adds.")] = False,
    dtype: Annotated[str, typer.Option("--dtype", metavar="float64|float32",
                                       help="What the spec computes in: float64 (default), or float32 (a float32 checkpoint read as stored, as Hugging Face runs it).")] = "float64",
) -> None:
    """Write a spec that traces a real checkpoint: dims and settings from its config, weights read from the file."""

    def body() -> int:
        from tracer.checkpoints.importer import import_checkpoint
        from tracer.messages import render

        result = import_checkpoint(checkpoint, output, layout, layers, tokens, heads, length, force, activation=activation, eps=eps,
                                   norm_order=norm_order, allow_unread=allow_unread, text=text, special=not no_special, dtype=dtype)
        if result.assumed:  # once, whether the spec goes to a file or to stdout
            settings = ", ".join(f"{name} {value}" for name, value in result.assumed)
            sys.stderr.write(render(msg("assumed ({why}): {settings}", why=result.why_assumed, settings=settings)) + "\n")
        if output is None:
            from tracer.process import write_file_text

            write_file_text(result.text)
        else:
            from tracer.messages import render

            sys.stderr.write(render(msg("wrote {path} ({summary}); trace it with: tracer run {path}", path=shown(output), summary=shown(result.summary))) + "\n")
        return EXIT_OK

    guarded(body)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the spec format, for an editor to check a spec as you type: tracer schema > spec.schema.json."""

    def body() -> int:
        from tracer.spec.schema import spec_schema_text

        sys.stdout.write(spec_schema_text())
        return EXIT_OK

    guarded(body)


def complete_catalogue_name(incomplete: str) -> list[str]:
    from tracer.model.catalogue import names

    return [n for n in names() if n.startswith(incomplete)]


@app.command()
def stages(
    name: Annotated[str | None, typer.Argument(metavar="NAME", autocompletion=complete_catalogue_name, show_default=False,
                                               help="Only this stage (blocks.3.norm1 finds norm1).")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT", autocompletion=complete_format, show_default=False,
        help="table (default) | json | csv | markdown. CSV: one row per stage name; Markdown: a pipe table.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    no_color: NoColorOption = False,
    lang: LangOption = None,
) -> None:
    """List every stage name a trace can record, with its meaning, formula and shape."""

    def body() -> int:
        from tracer.model import catalogue
        from tracer.run.command import output_format
        from tracer.views import text as textout

        form = output_format(fmt, as_json)
        entries = catalogue.lookup(name) if name is not None else list(catalogue.CATALOGUE)
        note = "" if name is not None else catalogue.STACK_NOTE
        if form == "json":
            import json

            doc = {"schema_version": 1, "kind": "stages", "stages": [e.as_json() for e in entries]}
            from tracer.process import is_utf

            sys.stdout.write(json.dumps(doc, ensure_ascii=not is_utf(sys.stdout)) + "\n")
        elif form == "csv":
            sys.stdout.write(textout.catalogue_csv(entries))
        elif form == "markdown":
            sys.stdout.write(textout.catalogue_markdown(entries, note))
        else:
            from tracer.views.tables import catalogue_view

            console(no_color).print(catalogue_view(entries, note))
        return EXIT_OK

    guarded(body, lang)


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
        _error(str(e))
        raise SystemExit(e.exit_code) from None


if __name__ == "__main__":  # pragma: no cover
    main()
