"""The command line: parse options, call one library function, render, print once.

Heavy modules (NumPy, the kernels, the renderers) are imported inside the
commands, so ``tracer --help`` and shell completion stay fast.

Exit codes: 0 clean, 1 a violation was flagged, 2 the spec or the command line
is wrong, 3 an internal error (a bug in tracer).
"""

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from . import cliparams
from .errors import EXIT_INTERNAL, EXIT_OK, EXIT_VIOLATION, TracerError, UsageError

DEFAULT_MAX_MEMORY = "4GB"  # memory.DEFAULT_MAX_MEMORY; repeated here so --help imports nothing more

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from .export import Target

app = typer.Typer(
    name="tracer",
    help="Trace a Transformer block stage by stage: values, shapes, and the broadcast and axis mistakes NumPy lets slide.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

cliparams.install()  # plain text and numbers need no pydantic (see cliparams)

T = TypeVar("T")
BUG_REPORT = "this is a bug in tracer; please report it with the spec and the command you ran (set TRACER_DEBUG=1 to see the traceback)"


def console(no_color: bool = False, stderr: bool = False) -> "Console":
    """A console that never wraps or colours piped output."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    return Console(
        file=stream,
        no_color=no_color or "NO_COLOR" in os.environ or not tty,
        highlight=False,
        width=None if tty else 1000,  # piped: as wide as the content, never wrapped at 80
        soft_wrap=not tty,
        emoji=False,
    )


def guarded(fn: Callable[[], int]) -> None:
    """The one exit path: TracerError -> its exit code and a message; anything else -> 3."""
    try:
        code = fn()
    except TracerError as e:
        _error(str(e))
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        _error("interrupted")
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except Exception as e:  # a bug: say so, without a traceback unless asked
        if os.environ.get("TRACER_DEBUG"):
            raise
        _error(f"internal error: {type(e).__name__}: {e}\n{BUG_REPORT}")
        raise typer.Exit(EXIT_INTERNAL) from None
    raise typer.Exit(code)


def _error(message: str) -> None:
    sys.stderr.write(f"tracer: error: {message}\n")
    sys.stderr.flush()


def _version(value: bool) -> None:
    if value:
        from . import __version__

        sys.stdout.write(f"tracer {__version__}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Trace a Transformer block stage by stage: values, shapes, and the broadcast and axis mistakes NumPy lets slide."""


@app.command()
def run(
    spec: Annotated[str, typer.Argument(help="The YAML spec of the block to trace.", show_default=False)],
    pos: Annotated[int, typer.Option("--pos", "-t", help="Position whose values the table shows.")] = 0,
    batch: Annotated[int, typer.Option("--batch", "-b", help="Sample whose values the table shows.")] = 0,
    precision: Annotated[int, typer.Option("--precision", "-p", help="Decimals printed (0 to 17).")] = 6,
    show_all: Annotated[bool, typer.Option("--all", help="Also show attention internals (attn.q, attn.k, ...).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Write one JSON object to stdout (schema_version 1) instead of the table.")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="Run the scalar reference beside NumPy; print the largest difference per stage.")] = False,
    verify_budget: Annotated[int, typer.Option("--verify-budget", help="Scalar operations the reference may take (about 15 million a second); beyond it, verify what is exact on its own.")] = 60_000_000,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Record NumPy's result at a violation and go on, flagging every violation.")] = False,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when a violation was flagged (for scripts that only collect reports).")] = False,
    steps: Annotated[bool, typer.Option("--steps", help="Print the step list the spec runs, with each stage's shape, and exit.")] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour, even on a terminal (NO_COLOR is honoured too).")] = False,
    with_weights: Annotated[bool, typer.Option("--with-weights", help="With --json: also write every weight, so `tracer diff` can name the weight that differs.")] = False,
    attention: Annotated[bool, typer.Option("--attention", help="Draw the first attention stage's weights as heatmaps (one panel per head) instead of the table.")] = False,
    attention_stage: Annotated[list[str] | None, typer.Option("--attention-stage", metavar="NAME", help="Draw this attention stage (e.g. blocks.1.attention, decoder.blocks.0.cross_attention, or all); repeatable; implies --attention.", show_default=False)] = None,
    svg: Annotated[str | None, typer.Option("--svg", metavar="FILE", help="Also write what the terminal shows as an SVG picture.", show_default=False)] = None,
    html: Annotated[str | None, typer.Option("--html", metavar="FILE", help="Also write what the terminal shows as an HTML page.", show_default=False)] = None,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Refuse a run estimated to need more (4GB, 512MB, 2GiB, or none).")] = DEFAULT_MAX_MEMORY,
    record: Annotated[str, typer.Option("--record", metavar="all|main|stats", help="Keep every stage (all), skip the attention internals (main), or keep statistics of big arrays (stats).")] = "all",
    keep: Annotated[list[str] | None, typer.Option("--keep", metavar="STAGE", help="Keep this stage in full whatever --record says (repeatable).")] = None,
    save: Annotated[str | None, typer.Option("--save", metavar="FILE.npz", help="Write every recorded array to an .npz archive, under its stage name.")] = None,
) -> None:
    """Trace SPEC and print one row per stage (Table 17.1), then the output matrix."""

    def body() -> int:
        from . import memory
        from .blocks import internal_prefix
        from .spec import load_spec

        if not 0 <= precision <= 17:
            raise UsageError(f"--precision {precision} is out of range: give 0 to 17")
        if with_weights and not as_json:
            raise UsageError("--with-weights only changes the JSON output: give --json too")
        draw = attention or bool(attention_stage)
        if draw and (as_json or steps):
            raise UsageError(f"--attention draws a picture; it does not combine with {'--json' if as_json else '--steps'}")
        targets = export_targets(svg, html, [spec], as_json)
        memory.parse_size(max_memory)
        s = load_spec(spec)
        if steps:
            from . import jsonout, render

            if as_json:
                sys.stdout.write(jsonout.dumps({"schema_version": jsonout.SCHEMA_VERSION, "spec": {"path": s.path, "name": s.name},
                                                "steps": jsonout.steps_json(s)}))
            else:
                show(render.steps_table(s), no_color, targets, s.name)
            return EXIT_OK
        picked = []
        if draw:
            from .render_attention import resolve

            picked = resolve(s, attention_stage or [])
        if not 0 <= batch < s.dims.B:
            raise UsageError(f"--batch {batch} is out of range: B = {s.dims.B} (samples 0 to {s.dims.B - 1})")
        if not 0 <= pos < s.dims.T:
            raise UsageError(f"--pos {pos} is out of range: T = {s.dims.T} (positions 0 to {s.dims.T - 1})")
        drawn = [f"{internal_prefix(st)}.weights" for st in picked]  # the picture needs them, whatever --record says
        policy = memory.policy_for(s, record, (keep or []) + drawn, batch, pos, show_all)
        if save is not None:
            from .outputs import check_output, looks_like_npz

            check_output(save, "--save", [spec], looks_like_npz, "npz")
        memory.check_run(s, policy, max_memory, as_json=as_json, show_all=show_all, verify=verify)

        from . import executor, render

        trace = executor.run(s, keep_going=keep_going, policy=policy)
        check = None
        if verify:
            from .verify import verify as run_verify

            if verify_budget < 1:
                raise UsageError(f"--verify-budget {verify_budget} must be at least 1")
            check = run_verify(trace, verify_budget)
        if save is not None:
            from .npzout import save as save_npz

            save_npz(trace, save)
        if as_json:
            from . import jsonout

            stages = render.visible_stages(trace, show_all)
            weights = None
            if with_weights:
                from .params import load_params

                weights = load_params(s)
            sys.stdout.write(jsonout.dumps(jsonout.trace_json(trace, stages, check.as_json() if check else None, weights)))
        elif draw:
            from rich.console import Group
            from rich.text import Text

            from .render_attention import attention_view

            picture = attention_view(trace, picked, batch)
            show(Group(picture, Text(verify_note(check))) if check is not None else picture, no_color, targets, s.name)
        else:
            note = ""
            if check is not None:
                note = verify_note(check)
            view = render.run_view(trace, batch, pos, precision, show_all, check.stages if check else None, note)
            show(view, no_color, targets, s.name)
        return EXIT_OK if trace.ok or exit_zero else EXIT_VIOLATION

    guarded(body)


@app.command()
def probe(
    spec: Annotated[str, typer.Argument(help="The YAML spec of the block to probe.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Write one JSON object to stdout instead of the table.")] = False,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when a property fails.")] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour, even on a terminal.")] = False,
) -> None:
    """Check causality and permutation equivariance empirically, by perturbing and permuting the input rows."""

    def body() -> int:
        from . import jsonout, render
        from .probe import FAIL
        from .probe import probe as run_probe
        from .spec import load_spec

        s = load_spec(spec)
        props = run_probe(s)
        ok = all(p.result != FAIL for p in props)
        if as_json:
            sys.stdout.write(jsonout.dumps({"schema_version": jsonout.SCHEMA_VERSION, "spec": {"path": s.path, "name": s.name},
                                            "ok": ok, "properties": [p.as_json() for p in props]}))
        else:
            console(no_color).print(render.probe_table(s, props))
        return EXIT_OK if ok or exit_zero else EXIT_VIOLATION

    guarded(body)


@app.command()
def diff(
    a: Annotated[str, typer.Argument(metavar="A", help="Side A: a YAML spec, or a trace saved by `tracer run SPEC --json`.", show_default=False)],
    b: Annotated[str, typer.Argument(metavar="B", help="Side B: a YAML spec, or a saved JSON trace.", show_default=False)],
    atol: Annotated[float, typer.Option("--atol", help="Absolute tolerance: equal when |A - B| <= atol + rtol * max(|A|, |B|).")] = 1e-9,
    rtol: Annotated[float, typer.Option("--rtol", help="Relative tolerance (see --atol).")] = 1e-9,
    pos: Annotated[int, typer.Option("--pos", "-t", help="Position whose values the table shows.")] = 0,
    batch: Annotated[int, typer.Option("--batch", "-b", help="Sample whose values the table shows.")] = 0,
    precision: Annotated[int, typer.Option("--precision", "-p", help="Decimals printed (0 to 17).")] = 6,
    show_all: Annotated[bool, typer.Option("--all", help="Also compare attention internals (attn.q, attn.k, ...).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Write one JSON object to stdout instead of the tables.")] = False,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Compare even when a side has a violation (else exit 2).")] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour, even on a terminal (NO_COLOR is honoured too).")] = False,
    svg: Annotated[str | None, typer.Option("--svg", metavar="FILE", help="Also write what the terminal shows as an SVG picture.", show_default=False)] = None,
    html: Annotated[str | None, typer.Option("--html", metavar="FILE", help="Also write what the terminal shows as an HTML page.", show_default=False)] = None,
) -> None:
    """Compare two blocks stage by stage: structure, settings, and where the numbers first diverge.

    Exit codes as diff(1): 0 the same within tolerance, 1 different, 2 trouble.
    """

    def body() -> int:
        from . import diff as diffing
        from . import jsonout

        if not 0 <= precision <= 17:
            raise UsageError(f"--precision {precision} is out of range: give 0 to 17")
        targets = export_targets(svg, html, [a, b], as_json)
        result = diffing.diff(a, b, atol=atol, rtol=rtol, batch=batch, pos=pos, show_all=show_all, keep_going=keep_going)
        if as_json:
            sys.stdout.write(jsonout.dumps(result.as_json()))
        else:
            from .render_diff import diff_view

            show(diff_view(result, precision), no_color, targets, f"tracer diff {a} {b}")
        return result.exit_code

    guarded(body)


@app.command()
def graph(
    spec: Annotated[str, typer.Argument(help="The YAML spec of the block to draw.", show_default=False)],
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour, even on a terminal (NO_COLOR is honoured too).")] = False,
    svg: Annotated[str | None, typer.Option("--svg", metavar="FILE", help="Also write the drawing as an SVG picture.", show_default=False)] = None,
    html: Annotated[str | None, typer.Option("--html", metavar="FILE", help="Also write the drawing as an HTML page.", show_default=False)] = None,
) -> None:
    """Draw the block as Figure 17.1 does: before the block, each residual path with every stage and its shape.

    Drawn from the spec's own step list and shapes; nothing is run.
    """

    def body() -> int:
        from .render_graph import graph_view
        from .spec import load_spec

        targets = export_targets(svg, html, [spec], False)
        s = load_spec(spec)
        show(graph_view(s), no_color, targets, s.name)
        return EXIT_OK

    guarded(body)


@app.command()
def validate(
    specs: Annotated[list[str], typer.Argument(help="The YAML specs to check.", show_default=False, metavar="SPEC...")],
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE", help="Report a spec whose run would need more as invalid (as run refuses it).")] = DEFAULT_MAX_MEMORY,
    record: Annotated[str, typer.Option("--record", metavar="all|main|stats", help="The recording the memory estimate assumes.")] = "all",
) -> None:
    """Check each SPEC without running it: one line per spec, 'ok' or the error.

    Exit code: 0 when every spec is valid, 2 when any is not.
    """

    def body() -> int:
        from . import memory
        from .spec import load_spec

        memory.parse_size(max_memory)
        worst = EXIT_OK
        for path in specs:
            try:
                s = load_spec(path)
                est = memory.check_run(s, memory.policy_for(s, record, None, 0, 0), max_memory)
                line = f"{path}: ok, needs about {memory.format_size(est.total)} to run (--record {record})"
                code = EXIT_OK
            except TracerError as e:
                line, code = str(e), e.exit_code
            except Exception as e:  # a bug: say so for this spec, go on with the others
                if os.environ.get("TRACER_DEBUG"):
                    raise
                line, code = f"{path}: internal error: {type(e).__name__}: {e}; {BUG_REPORT}", EXIT_INTERNAL
            sys.stdout.write(" ".join(line.split()) + "\n")  # one line per spec, whatever the message
            worst = max(worst, code)
        return worst

    guarded(body)


def export_targets(svg: str | None, html: str | None, inputs: list[str], as_json: bool) -> "list[Target]":
    """--svg / --html, checked before anything runs (never over an input, never somewhere unwritable)."""
    if svg is None and html is None:
        return []
    if as_json:
        raise UsageError("--svg and --html export the table the terminal shows; they do not combine with --json")
    from .export import check_targets

    return check_targets(svg, html, inputs)


def show(view: "RenderableType", no_color: bool, targets: "list[Target]", title: str) -> None:
    """Print the view once; write the exports asked for (at the content's natural width)."""
    console(no_color).print(view)
    if targets:
        from .export import export

        for path in export(view, targets, title, no_color):
            sys.stderr.write(f"tracer: wrote {path}\n")


def verify_note(check: object) -> str:
    from .verify import Verification

    assert isinstance(check, Verification)
    p = check.plan
    if p.skipped:
        return f"verify: skipped: {p.reason}"
    head = f"verify: largest |NumPy - reference| over all stages = {check.max_abs_diff:.3g}"
    if p.full:
        return head + " (every sample and position)"
    return head + f"\nverify: partial: {p.reason}"


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
