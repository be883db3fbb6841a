"""``tracer check``: the command line's options, checked, then the library's call, rendered once."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import TracerError, UsageError
from tracer.messages import msg, nmsg

if TYPE_CHECKING:
    pass


def check(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec whose stage was worked out by hand.", show_default=False)],
    stage: Annotated[str | None, typer.Option("--stage", "-s", autocompletion=shared.complete_stage, show_default=False,
                                              help="The stage whose value was worked out (as tracer run names it).")] = None,
    expect: Annotated[str | None, typer.Option("--expect", "-e", metavar="NUMBERS", show_default=False,
                                               help='The hand-worked value at --pos and --batch, e.g. "[1, -2, -1]" (NumPy\'s "[ 1. -2. -1.]" too).')] = None,
    answers: Annotated[str | None, typer.Option("--answers", metavar="FILE", show_default=False,
                                                help="A YAML or JSON file of answers, 'STAGE@T: [numbers]' a line: each checked, one result each.")] = None,
    pos: Annotated[int, typer.Option("--pos", "-t", metavar="T", help="Position of the value (-1: the last).")] = 0,
    batch: Annotated[int, typer.Option("--batch", "-b", metavar="B", help="Sample of the value (-1: the last).")] = 0,
    precision: Annotated[int, typer.Option("--precision", "-p", metavar="N", help="Decimals that must agree, as tracer run --precision prints them.")] = 6,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per answer instead of the line.")] = False,
    confine: shared.ConfineOption = None,
    lang: shared.LangOption = None,
) -> None:
    """Check a hand-worked value: right or wrong to the printed precision.

    Exit code: 0 right, 1 wrong, 2 a bad spec, stage or option (a wrong count of numbers too); with --answers, the worst.
    """

    def body() -> int:
        from tracer.check.answer import answer_json, check, check_answers, read_answers
        from tracer.messages import render
        from tracer.views.trace_json import dumps

        shared.check_precision(precision)
        if answers is not None:
            if expect is not None or stage is not None:
                raise UsageError(msg("--answers gives every stage and value: give it without --stage and --expect"))
            results = check_answers(spec, read_answers(answers, batch, pos), precision)
            for c in results:
                if as_json:
                    sys.stdout.write(dumps(c.as_json(spec)))
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
            verdict = check(spec, stage, expect, pos, batch, precision)
        except TracerError as e:
            if as_json:  # the error object on stdout too
                sys.stdout.write(dumps(answer_json(spec, stage, batch, pos, None, e.exit_code, e.message)))
            raise
        if as_json:
            sys.stdout.write(dumps(answer_json(spec, stage, batch, pos, verdict, verdict.exit_code)))
        else:
            sys.stdout.write(render(verdict.line) + "\n")
            for note in verdict.notes:  # on stderr: stdout stays the one line a script reads
                sys.stderr.write(render(msg("note: {note}", note=note)) + "\n")
        return verdict.exit_code

    shared.guarded(body, lang, confine)
