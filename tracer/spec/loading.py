"""tracer.load: a validated Spec from a file path or a Python dict.

A dict goes through the very validation a YAML file does, with the same messages; the location
is the field path (``<dict>: dims.H: expected a whole number, received 'two'``) where a file has
line:col.  NumPy arrays, tuples and NumPy numbers in the dict are read as the lists and numbers
YAML would give.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Union

from tracer.errors import SpecError
from tracer.messages import msg
from tracer.spec import Spec, load_spec, load_spec_doc
from tracer.spec.yamlio import MAX_DEPTH, Path, Source, format_path

DICT_NAME = "<dict>"

SpecLike = Union[Spec, str, "os.PathLike[str]", Mapping[str, Any]]


def load(spec: SpecLike, *, name: str = DICT_NAME) -> Spec:
    """A validated spec: ``spec`` is a path to a YAML (or JSON) spec, a dict of the same fields, or a Spec already loaded.

    ``name`` stands for the file name in a dict's messages. Raises SpecError (a TracerError) with the CLI's message.
    """
    inner = getattr(spec, "spec", None)
    if isinstance(inner, Spec):  # a loaded Model (tracer.load): its spec
        return inner
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load_spec(os.fspath(spec))
    if isinstance(spec, Mapping):
        doc = plain(spec, name)
        return load_spec_doc(doc, Source(name, {}, {}))
    raise SpecError(msg("{name}: expected a spec: a file path, a dict of spec fields or a loaded Spec, received {name__}", name=name,
                        name__=type(spec).__name__))


def plain(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The dict as YAML would have read it: mappings with text keys, lists, numbers, text, booleans, None."""
    out: dict[str, Any] = _plain(doc, (), name, 0)
    return out


def _plain(value: Any, path: Path, name: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise SpecError(msg("{name}: {path}: values nest more than {MAX_DEPTH} levels deep", name=name, path=format_path(path), MAX_DEPTH=MAX_DEPTH))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SpecError(msg("{name}: {path}: keys must be text, received {key}", name=name, path=format_path(path), key=repr(key)))
            out[key] = _plain(item, path + (key,), name, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, path + (i,), name, depth + 1) for i, item in enumerate(value)]
    if hasattr(value, "tolist"):  # a NumPy array or number (a torch tensor too)
        listed = value.tolist()
        if type(listed) is type(value) or hasattr(listed, "tolist") and not isinstance(listed, (list, tuple)):
            # a float128 (or another number NumPy cannot give as a Python one) lists as itself: refused, not recursed into
            raise SpecError(msg("{name}: {path}: expected a number, text, a list or a mapping, received {name__}", name=name, path=format_path(path),
                                name__=type(value).__name__))
        return _plain(listed, path, name, depth)
    raise SpecError(msg("{name}: {path}: expected a number, text, a list or a mapping, received {name__}", name=name, path=format_path(path),
                        name__=type(value).__name__))


# -- a spec's input replaced by text ---------------------------------------------------
def load_with_text(spec: SpecLike, text: str, special: bool = True, *, name: str = DICT_NAME) -> Spec:
    """The spec (a path or a dict) with ``input: {text: ..., special: ...}`` in place of its input, tokenized with its
    own ``tokenizer:``; the targets and token types of the old input are dropped (they were for other tokens)."""
    if not isinstance(text, str) or not text:
        raise SpecError(msg("text: expected the text to tokenize, received {got}", got=repr(text)))
    if not isinstance(spec, (str, os.PathLike, Mapping)):
        raise SpecError(msg("text= tokenizes into a spec read from a file or a dict (the spec's tokenizer: names the file); received {name__}",
                            name__=type(spec).__name__))
    return load_with_input(document(spec, name), {"text": text, "special": special})


Document = tuple[dict[str, Any], Source, tuple[str, ...]]  # a spec's fields as read, where they were, the files read


def document(spec: str | os.PathLike[str] | Mapping[str, Any], name: str = DICT_NAME) -> Document:
    """A spec's document as read, not yet validated: a path's YAML (a document that is not a mapping is refused here),
    or a dict as YAML would have read it (``plain``)."""
    from tracer.files import reading
    from tracer.spec import yamlio

    if isinstance(spec, (str, os.PathLike)):
        path = os.fspath(spec)
        with reading() as read:
            doc, src = yamlio.load(yamlio.read_text(path), path)
        return doc, src, tuple(read.values())
    return plain(spec, name), Source(name, {}, {}), ()


def load_with_input(doc: Document, given: dict[str, Any]) -> Spec:
    """The document validated with ``input:`` replaced by ``given`` (``{"tokens": ...}``, ``{"text": ..., "special": ...}``);
    the targets and token types of the old input are dropped (they were for other tokens)."""
    fields, src, files = doc

    def kept(where: dict[Path, Any]) -> dict[Path, Any]:  # the old input's words and places are not the new one's
        return {p: v for p, v in where.items() if p[:1] != ("input",)}

    s = load_spec_doc(dict(fields, input=given), Source(src.filename, kept(src.marks), kept(src.raw), kept(src.key_marks)))
    return s._replace(files_read=tuple(dict.fromkeys(files + s.files_read)))
