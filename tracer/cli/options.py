"""How the command line reads its options: plain coercion of values, and --help in sections.

Plain coercion, so a run never imports pydantic.

Recent typer (0.2x) coerces every non-boolean parameter through a pydantic
TypeAdapter.  Importing pydantic and building the adapters costs about 60 ms on
every call of ``tracer run``, half again what NumPy, PyYAML, rich and typer
together cost, for parameters that are plain text, numbers, flags and lists
of text.  ``install()`` gives exactly those parameters a plain coercion and leaves
every other annotation to typer.  On a typer without this machinery it does
nothing: tracer then just starts a little slower.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args, get_origin

from typer.core import TyperCommand

_installed = False
_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off"}


def _plain(annotation: Any) -> bool:
    if annotation in (str, int, bool, float):
        return True
    return get_origin(annotation) is list and get_args(annotation) in ((str,), (int,))


def install() -> None:
    global _installed
    if _installed:
        return
    try:
        from typer import core
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam, TypeDescriptor
    except ImportError:  # an older typer: coercion goes through click's own types, no pydantic
        return
    original = getattr(core, "build_runtime_param", None)
    if original is None:
        return

    def leaf(kind: type, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if kind is str:
            return str(value)
        if kind is bool:
            if isinstance(value, bool):
                return value
            word = str(value).strip().lower()
            if word in _TRUE | _FALSE:
                return word in _TRUE
            raise BadParameter(f"{value!r} is not true or false.", ctx=ctx, param=param)
        if kind is float:
            if isinstance(value, (int, float)):
                return float(value)
            try:
                return float(str(value).strip().replace("_", ""))
            except ValueError:
                raise BadParameter(f"{value!r} is not a number.", ctx=ctx, param=param) from None
        if isinstance(value, int):
            return int(value)
        try:
            return int(str(value).strip().replace("_", ""), 10)
        except ValueError:
            raise BadParameter(f"{value!r} is not a whole number.", ctx=ctx, param=param) from None

    class PlainRuntimeParam(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            annotation: Any = self.annotation
            if get_origin(annotation) is list:
                (kind,) = get_args(annotation)
                items = value if isinstance(value, (list, tuple)) else [value]
                return [leaf(kind, item, param, ctx) for item in items]
            return leaf(annotation, value, param, ctx)

    def build_runtime_param(descriptor: TypeDescriptor) -> Any:
        info = descriptor.parameter_info
        simple = (getattr(info, "parser", None) is None and getattr(info, "min", None) is None
                  and getattr(info, "max", None) is None and descriptor.file_annotation is None)
        if simple and _plain(descriptor.annotation):
            return PlainRuntimeParam(parameter_info=info, annotation=descriptor.annotation)
        return original(descriptor)

    setattr(core, "build_runtime_param", build_runtime_param)  # noqa: B010 (an older typer's stubs have no such attribute)
    _plain_help_words(core)
    _installed = True


HELP_WORDS = {"<int>": "INTEGER", "<str>": "TEXT", "<float>": "NUMBER", "<list[str]>": "TEXT...", "<list[int]>": "INTEGER..."}


def _plain_help_words(core: Any) -> None:
    """--help in words, not Python types: `--pos T` (a metavar) or `--atol NUMBER`, never `<int>`;
    an argument named by its metavar (SPEC...) shows no type after it.  Recent typer only."""
    param = getattr(core, "_TyperParameter", None)
    argument = getattr(core, "TyperArgument", None)
    if param is None or argument is None or not hasattr(param, "display_type"):
        return
    original = param.display_type

    def display_type(self: Any, ctx: Any) -> str:
        label = str(original(self, ctx))
        return HELP_WORDS.get(label, label.strip("<>").upper())

    def argument_type(self: Any, ctx: Any) -> str | None:
        return None if self.metavar is not None else display_type(self, ctx)

    param.display_type = display_type
    argument.display_type_rich = argument_type


# -- --help in sections ---------------------------------------------------------------------------

OTHER_SECTION = "Other options"


def sectioned(sections: Mapping[str, Sequence[str]]) -> type[TyperCommand]:
    """A command class whose --help lists its options under headings, in the order given: ``sections`` maps a
    heading to the long names of its options (``"--pos"``).  --help itself comes last, under "Options"; an option
    no section names goes under OTHER_SECTION (tests/cli/test_help_sections.py checks that none does).  The app prints help
    without rich (rich_markup_mode None: a quicker start), where typer's own rich_help_panel is not drawn."""
    where = {name: heading for heading, names in sections.items() for name in names}

    class Sectioned(TyperCommand):
        def format_options(self, ctx: Any, formatter: Any) -> None:
            arguments: list[tuple[str, str]] = []
            grouped: dict[str, list[tuple[str, str]]] = {heading: [] for heading in (*sections, OTHER_SECTION, "Options")}
            for param in self.get_params(ctx):
                record = param.get_help_record(ctx)
                if record is None:
                    continue
                if param.param_type_name == "argument":
                    arguments.append(record)
                    continue
                names = [n for n in param.opts if n.startswith("--")]
                heading = "Options" if "--help" in names else next((where[n] for n in names if n in where), OTHER_SECTION)
                grouped[heading].append(record)
            if arguments:
                with formatter.section("Arguments"):
                    formatter.write_dl(arguments)
            for heading, records in grouped.items():
                if records:
                    with formatter.section(heading):
                        formatter.write_dl(records)

    return Sectioned
