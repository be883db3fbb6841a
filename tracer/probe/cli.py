"""``tracer probe``: the command line's options, checked, then the library's call, rendered once."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from tracer.cli import shared
from tracer.errors import EXIT_OK, EXIT_VIOLATION

if TYPE_CHECKING:
    pass


def probe(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="The YAML spec of the block to probe.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Write one JSON object to stdout instead of the table.")] = False,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when a property fails.")] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour, even on a terminal.")] = False,
    exact: Annotated[bool, typer.Option("--exact", help="Prove causality with the backward pass: every later position's gradient exactly 0.")] = False,
    max_memory: Annotated[str, typer.Option("--max-memory", metavar="SIZE",
                                            help="Refuse a probe estimated to need more (it holds two runs at once).")] = shared.DEFAULT_MAX_MEMORY,
    lang: shared.LangOption = None,
    ablate: shared.AblateOption = None,
    set_: shared.SetOption = None,
) -> None:
    """Check causality and permutation equivariance empirically, by perturbing and permuting the input rows.

    With --exact, causality is proved for the given weights with the backward pass instead.
    """

    def body() -> int:
        from tracer.front.prepare import load_checked
        from tracer.probe import view
        from tracer.probe.properties import probe as run_probe
        from tracer.probe.properties import unmeasured_error
        from tracer.probe.result import FAIL

        s = load_checked(spec, max_memory=max_memory)
        if ablate or set_:  # the probe perturbs the intervened block (its input: no --from)
            from tracer.engine.interventions import Requests, attach

            s = attach(s, Requests(*shared.intervene(ablate, set_, None)))
        props = run_probe(s, exact, max_memory)
        if as_json:
            sys.stdout.write(view.json_text(s, props))
        else:
            shared.console(no_color).print(view.table(s, props))
        if any(p.result == FAIL for p in props):
            return EXIT_OK if exit_zero else EXIT_VIOLATION
        unmeasured_error(s, props)  # exit 2: the input cannot show the property either way
        return EXIT_OK

    shared.guarded(body, lang)
