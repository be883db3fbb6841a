"""``tracer run``: the command line's options, checked, then the library's call, rendered once."""

import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import EXIT_INTERNAL, EXIT_OK, EXIT_VIOLATION, TracerError, UsageError
from tracer.messages import at, join, msg, shown

if TYPE_CHECKING:
    from tracer.views.export import Target


RUN_SECTIONS = {
    "What the table shows": ("--pos", "--batch", "--precision", "--all", "--stage", "--steps", "--attention", "--attention-stage", "--top"),
    "Output": ("--format", "--json", "--with-weights", "--save", "--svg", "--html", "--force", "--no-color", "--lang"),
    "Checks and exit codes": ("--verify", "--verify-budget", "--keep-going", "--exit-zero", "--confine"),
    "Memory": ("--max-memory", "--record", "--keep"),
    "Interventions": ("--ablate", "--set", "--from"),
}


def run(
    specs: Annotated[list[str], typer.Argument(metavar="SPEC", help="The YAML spec(s) to trace. With more than one: a status line each and a summary.",
                                               show_default=False)],
    pos: shared.PosOption = 0,
    batch: shared.BatchOption = 0,
    precision: shared.PrecisionOption = 6,
    show_all: Annotated[bool, typer.Option("--all", help="Also show attention internals (attn.q, attn.k, ...).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json: one JSON object (schema_version 1) per spec.")] = False,
    fmt: shared.FormatOption = None,
    stage: shared.StageOption = None,
    verify: Annotated[bool, typer.Option("--verify", help="Run the scalar reference beside NumPy; print the largest difference per stage.")] = False,
    verify_budget: Annotated[int, typer.Option("--verify-budget", help="Scalar operations the reference may take (about 15 million a second); beyond it, "
                                                                       "verify what is exact on its own.")] = 60_000_000,
    keep_going: Annotated[bool, typer.Option("--keep-going", help="Record NumPy's result at a violation and go on, flagging every violation.")] = False,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when a violation was flagged (for scripts that only collect reports).")] = False,
    steps: Annotated[bool, typer.Option("--steps", help="Print the step list the spec runs, with each stage's shape, and exit.")] = False,
    no_color: shared.NoColorOption = False,
    with_weights: Annotated[bool, typer.Option("--with-weights",
                                               help="With --json: also write every weight, so `tracer diff` can name the weight that differs. With --save: "
                                                    "also save them as weights.NAME (a checkpoint for layout: tracer).")] = False,
    attention: Annotated[bool, typer.Option("--attention",
                                            help="Draw the first attention stage's weights as heatmaps (one panel per head) instead of the table.")] = False,
    attention_stage: Annotated[list[str] | None, typer.Option("--attention-stage", metavar="NAME",
                                                              help="Draw this attention stage (e.g. blocks.1.attention, decoder.blocks.0.cross_attention, or "
                                                                   "all); repeatable; implies --attention.", show_default=False)] = None,
    svg: shared.SvgOption = None,
    html: shared.HtmlOption = None,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE",
                                            help="Refuse a run estimated to need more (4GB, 512MB, 2GiB, or none).")] = shared.DEFAULT_MAX_MEMORY,
    record: Annotated[str, typer.Option("--record", metavar="auto|all|main|stats",
                                        help="Keep what the output shows (auto: for the table, each stage's value at --batch/--pos and the block output), "
                                             "every stage (all), all but the attention internals (main), or statistics of big arrays (stats).")] = "auto",
    keep: Annotated[list[str] | None, typer.Option("--keep", metavar="STAGE", help="Keep this stage in full whatever --record says (repeatable).")] = None,
    save: Annotated[str | None, typer.Option("--save", metavar="FILE.npz", help="Write every recorded array to an .npz archive, under its stage name.")] = None,
    force: shared.ForceOption = False,
    confine: shared.ConfineOption = None,
    lang: shared.LangOption = None,
    ablate: shared.AblateOption = None,
    set_: shared.SetOption = None,
    start: shared.FromOption = None,
    top: shared.TopOption = 5,
) -> None:
    """Trace SPEC and print one row per stage (Table 17.1), then the output matrix.

    Several specs run in one process: one status line each (ok, violation, error) and a summary;
    the exit code is the worst of them.
    """

    def body() -> int:
        from tracer.run.command import Outcome, options, render_chunks, render_text, table_view, trace_one

        draw = attention or bool(attention_stage)
        opts = options(specs, fmt=fmt, as_json=as_json, steps=steps, draw=draw, exports=bool(svg or html), batch=batch, pos=pos,
                            precision=precision, show_all=show_all, verify=verify, keep_going=keep_going, exit_zero=exit_zero,
                            with_weights=with_weights, stages=tuple(stage or ()), verify_budget=verify_budget, record=record,
                            keep=tuple(keep or ()), max_memory=max_memory, save=save, force=force,
                            intervene=shared.intervene(ablate, set_, start), top=top)
        form = opts.form
        targets = shared.export_targets(svg, html, list(specs), form, force, save)
        if steps:
            return print_steps(specs[0], form, opts, no_color, targets)
        if len(specs) > 1:
            return run_many(specs, form, opts, no_color)
        if draw:
            from tracer.front.prepare import load_checked
            from tracer.model.blocks import internal_prefix
            from tracer.views.attention import resolve

            picked = resolve(load_checked(specs[0]), attention_stage or [])  # an unknown stage is exit 2 before anything runs
            drawn = tuple(f"{internal_prefix(st)}.weights" for st in picked)  # the picture needs them, whatever --record says
            opts = opts._replace(keep=opts.keep + drawn)
        try:
            from tracer.process import fault_in_ahead

            outcome = trace_one(specs[0], opts, meanwhile=lambda: _meanwhile(form), ahead=fault_in_ahead)
        except TracerError as e:
            if form == "json":  # the error object on stdout too, as with several specs
                sys.stdout.write(render_text(Outcome(specs[0], e.exit_code, error=e.message), form, opts))
            raise
        if form == "table":
            assert outcome.trace is not None
            shared.show(table_view(outcome, precision, picked if draw else None), no_color, targets, outcome.trace.spec.name, force)
        else:
            for chunk in render_chunks(outcome, form, opts):  # written as made: a big trace is never held as text
                sys.stdout.write(chunk)
            if form in ("json", "csv") and outcome.trace is not None:
                from tracer.views.text import unreached_note

                note = unreached_note(outcome.trace, outcome.only)
                if note:
                    shared.note_line(note)
        return outcome.code

    shared.guarded(body, lang, confine)


def _meanwhile(form: str) -> None:
    """While runs.trace_one draws a big spec's weights: this process reuses the memory of the stages it lets go
    (process.keep_freed_memory), and the table's renderer and rich are imported (they would be after the run)."""
    from tracer.process import keep_freed_memory

    keep_freed_memory()
    if form == "table":
        import tracer.views.tables  # noqa: F401


def print_steps(path: str, form: str, opts: object, no_color: bool, targets: "list[Target]") -> int:
    from tracer.front.prepare import load_checked, select_stages
    from tracer.run.command import RunOptions, steps_text

    assert isinstance(opts, RunOptions)
    s = load_checked(path)
    only = select_stages(s, opts.stages)
    if form == "table":
        from tracer.views.tables import steps_table

        shared.show(steps_table(s, only), no_color, targets, s.name, opts.force)
    else:
        sys.stdout.write(steps_text(s, form, only))
    return EXIT_OK


def run_many(specs: list[str], form: str, opts: object, no_color: bool) -> int:
    """Each spec in turn, in this process. Table: status lines on stdout. JSON (one object per line),
    CSV (one header) and Markdown: the results on stdout, the status lines on stderr."""
    from rich.text import Text

    from tracer.run.command import RunOptions, RunSummary, attempt, render_text, status_text
    from tracer.views.text import trace_csv

    assert isinstance(opts, RunOptions)
    status_out = shared.console(no_color, stderr=form != "table")
    style = {"ok": "green", "violation": "bold red", "error": "bold yellow"}
    summary = RunSummary()
    csv_parts = []
    for path in specs:
        o = attempt(path, opts)
        summary.outcomes.append(o)
        if form == "csv":
            if o.trace is not None:
                csv_parts.append((o.path, o.stages))
        elif form != "table":
            sys.stdout.write(render_text(o, form, opts) + ("\n" if form == "markdown" else ""))
            sys.stdout.flush()
        word = o.status()[0]
        status_out.print(Text(status_text(o), style=style[word]) if word != "ok" else Text(status_text(o)))
    if form == "csv":
        sys.stdout.write(trace_csv(csv_parts))
    status_out.print(Text(summary.line(), style="bold"))
    return summary.exit_code


def validate(
    specs: Annotated[list[str], typer.Argument(help="The YAML specs to check.", show_default=False, metavar="SPEC")],
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE",
                                            help="Report a spec whose run would need more as invalid (as run refuses it).")] = shared.DEFAULT_MAX_MEMORY,
    record: Annotated[str, typer.Option("--record", metavar="auto|all|main|stats",
                                        help="The recording the memory estimate assumes (auto: a plain `tracer run`).")] = "auto",
    confine: shared.ConfineOption = None,
    lang: shared.LangOption = None,
) -> None:
    """Check each SPEC without running it: one line per spec, 'ok', the violation a run would flag, or the error.

    What the shapes and settings alone show (beta: [0], LayerNorm over T, softmax over queries, positions
    beyond T_max) is reported as tracer run reports it.  Exit code: the worst of 0 valid, 1 a run would
    flag a violation, 2 not valid.
    """

    def body() -> int:
        from tracer.front.prepare import prepare
        from tracer.messages import render
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
                line, code = at(path, join([msg("internal error: {what}", what=f"{type(e).__name__}: {e}"), shared.BUG_REPORT])), EXIT_INTERNAL
            sys.stdout.write(" ".join(render(line).split()) + "\n")  # one line per spec, whatever the message
            worst = max(worst, code)
        return worst

    shared.guarded(body, lang, confine)


def new(
    preset: Annotated[str | None, typer.Option("--preset", "-P", autocompletion=shared.complete_preset, show_default=False,
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

    shared.guarded(body)


def schema() -> None:
    """Print the JSON Schema of the spec format, for an editor to check a spec as you type: tracer schema > spec.schema.json."""

    def body() -> int:
        from tracer.spec.schema import spec_schema_text

        sys.stdout.write(spec_schema_text())
        return EXIT_OK

    shared.guarded(body)


def stages(
    name: Annotated[str | None, typer.Argument(metavar="NAME", autocompletion=shared.complete_catalogue_name, show_default=False,
                                               help="Only this stage (blocks.3.norm1 finds norm1).")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT", autocompletion=shared.complete_format, show_default=False,
        help="table (default) | json | csv | markdown. CSV: one row per stage name; Markdown: a pipe table.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    no_color: shared.NoColorOption = False,
    lang: shared.LangOption = None,
) -> None:
    """List every stage name a trace can record, with its meaning, formula and shape."""

    def body() -> int:
        from tracer.model import catalogue
        from tracer.run.command import output_format
        from tracer.views.text import catalogue_csv, catalogue_markdown

        form = output_format(fmt, as_json)
        entries = catalogue.lookup(name) if name is not None else list(catalogue.CATALOGUE)
        note = "" if name is not None else catalogue.STACK_NOTE
        if form == "json":
            import json

            doc = {"schema_version": 1, "kind": "stages", "stages": [e.as_json() for e in entries]}
            from tracer.process import is_utf

            sys.stdout.write(json.dumps(doc, ensure_ascii=not is_utf(sys.stdout)) + "\n")
        elif form == "csv":
            sys.stdout.write(catalogue_csv(entries))
        elif form == "markdown":
            sys.stdout.write(catalogue_markdown(entries, note))
        else:
            from tracer.views.tables import catalogue_view

            shared.console(no_color).print(catalogue_view(entries, note))
        return EXIT_OK

    shared.guarded(body, lang)
