"""Every view of `tracer probe`'s result: the rich table and the JSON object."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from tracer.i18n import tr
from tracer.messages import render
from tracer.probe.result import FAIL, NOT_APPLICABLE, PASS, UNMEASURED, Property
from tracer.spec import Spec
from tracer.views import trace_json

STYLES = {PASS: "green", FAIL: "bold red", NOT_APPLICABLE: "dim", UNMEASURED: "bold yellow"}


def ok(props: Sequence[Property]) -> bool:
    """No property failed, and each could be measured."""
    return all(p.result not in (FAIL, UNMEASURED) for p in props)


def table(spec: Spec, props: Sequence[Property]) -> Table:
    out = Table(title=Text(tr("{name}: properties", name=spec.name)), title_justify="left")
    out.add_column(tr("property"), overflow="fold")
    out.add_column(tr("result"), overflow="fold")
    out.add_column(tr("evidence"), overflow="fold")
    for p in props:
        out.add_row(Text(tr(p.name)), Text(tr(p.result), style=STYLES.get(p.result, "")), Text(render(p.evidence)))
    return out


def json_text(spec: Spec, props: Sequence[Property]) -> str:
    """One JSON object (schema_version 1): the spec, ok, and each property's result and evidence."""
    return trace_json.dumps({"schema_version": trace_json.SCHEMA_VERSION, "spec": {"path": spec.path, "name": spec.name},
                             "ok": ok(props), "properties": [p.as_json() for p in props]})
