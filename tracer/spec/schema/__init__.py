"""The JSON Schema of the spec format, shipped with the package; `tracer schema` prints it.

An editor's YAML extension (yaml-language-server) reads it to validate and complete a spec as it
is typed. It names the keys and choices tracer/spec/keys.py lists (tests/spec/test_schema.py holds the two
together). No NumPy here: the command is as fast as --help.
"""

from __future__ import annotations

SPEC_SCHEMA = "spec.schema.json"


def spec_schema_text() -> str:
    """The schema file's text, exactly as shipped."""
    from importlib.resources import files

    return files(__name__).joinpath(SPEC_SCHEMA).read_text(encoding="utf-8")
