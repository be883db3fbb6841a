"""Read a YAML spec into plain Python values plus a map from field path to line.

PyYAML (libyaml's C parser when installed) is used only to *parse* the text into
events; we build values from the events ourselves so that:
- no tag is ever constructed (``!!python/object`` and friends are refused),
- duplicate keys are errors, not silent overwrites,
- ``1e-5`` is a number (YAML 1.1 wants ``1.0e-5``; users write ``1e-5``),
- an alias bomb is refused by counting what it stands for, never expanding it,
- nesting deeper than MAX_DEPTH is refused at once (no recursion anywhere),
- every value keeps the line and column it came from, for error messages.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import yaml

from tracer.errors import SpecError
from tracer.files import note_input
from tracer.messages import Message, at, join, message_of, msg, shown
from tracer.messages import at as at_  # read_text has a local 'at'

Path = tuple[str | int, ...]

MAX_FILE_BYTES = 32 * 1024 * 1024  # about 3M numbers given inline (a 768 x 3072 matrix); bigger weights come from the seed
MAX_EXPANDED_NODES = 20_000_000  # a 1024 x 3072 matrix given inline is ~3M values
MAX_DEPTH = 32  # the deepest legal value is a [B,T,C] matrix inside two mappings

_INT_RE = re.compile(r"^[-+]?[0-9][0-9_]*$")
_FLOAT_RE = re.compile(r"^[-+]?(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][-+]?\d+)?$")
_TAG = "tag:yaml.org,2002:"
_BOOL_TRUE = {"true", "yes", "on", "y"}


class Mark(NamedTuple):  # NamedTuple and a plain class here, not dataclasses: start-up time (see cliparams)
    line: int  # 1-based
    col: int  # 1-based


class Source:
    """Where each value of a loaded document came from."""

    def __init__(self, filename: str, marks: dict[Path, Mark], raw: dict[Path, str], key_marks: dict[Path, Mark] | None = None) -> None:
        self.filename = filename
        self.marks = marks
        self.raw = raw  # the scalar exactly as written (to quote ``yes`` back)
        self.key_marks: dict[Path, Mark] = {} if key_marks is None else key_marks  # where each mapping key itself is written

    def mark(self, path: Path) -> Mark | None:
        # fall back to the nearest enclosing value that has a mark
        while True:
            if path in self.marks:
                return self.marks[path]
            if not path:
                return None
            path = path[:-1]

    def where(self, path: Path) -> str:
        m = self.mark(path)
        return f"{self.filename}:{m.line}:{m.col}" if m else self.filename

    def where_key(self, path: Path) -> str:
        """The position of the key naming ``path`` (an unknown key is the key's fault, not its value's)."""
        m = self.key_marks.get(path)
        return f"{self.filename}:{m.line}:{m.col}" if m else self.where(path)


def format_path(path: Path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{printable(p)}" if out else printable(p))
    return out or "(document)"


# C0 and C1 controls, DEL, and the bidirectional overrides and isolates (text that reorders what follows it)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text from a spec or a trace as it may be printed anywhere (terminal, Markdown, CSV, SVG, HTML): every
    control character written as an escape (ESC as \\x1b, NUL as \\x00, a newline as \\n), so a name can
    neither drive the terminal nor break a table row, a CSV record or an XML document."""
    if not _UNPRINTABLE.search(text):
        return text
    return _UNPRINTABLE.sub(lambda m: {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(m.group(), m.group().encode("unicode_escape").decode("ascii")), text)


def scalar(value: Any) -> str:
    """A value as YAML that tracer writes (``tracer import``) holds it: one line, written by the YAML emitter, that
    reads back as exactly ``value``.  Text is data, never syntax: a name with a newline, a colon, a '#' or a word
    YAML would read as something else (true, null, 1e3) is quoted, control and bidirectional characters escaped;
    other non-ASCII letters are kept as they are (the file is UTF-8)."""
    def dumped(**style: Any) -> str:
        text: str = yaml.safe_dump(value, default_flow_style=True, width=2**31 - 1, **style)
        return text[:-len("\n...\n")] if text.endswith("\n...\n") else text.rstrip("\n")

    unicode = not isinstance(value, str) or value.isprintable()
    text = dumped(allow_unicode=unicode)
    if "\n" in text or yaml.safe_load(text) != value:
        text = dumped(allow_unicode=False, default_style='"')
    return text


def comment(text: str) -> str:
    """Text for a ``#`` comment of YAML tracer writes: one line whatever it holds (a newline would end the
    comment and start a key), control and bidirectional characters escaped."""
    return shown(text)


def read_text(path: str) -> str:
    """The spec's text; refused if it is not a regular file of UTF-8 text no larger than MAX_FILE_BYTES."""
    from tracer import reading

    if "\0" in path:
        raise SpecError(msg("{path}: the path holds a NUL byte", path=path.replace("\0", "\\x00")))
    try:
        fh, _ = reading.open_regular(path)  # regular files only, opened without blocking: a FIFO is refused at once
        with fh:
            note_input(path)
            data = fh.read(MAX_FILE_BYTES + 1)
    except reading.InputRefused as e:
        if e.reason == "missing":
            raise SpecError(msg("{path}: no such file", path=shown(path))) from None
        if e.reason == "permission":
            raise SpecError(msg("{path}: permission denied", path=shown(path))) from None
        if e.reason == "directory":
            raise SpecError(msg("{path}: is a directory, expected a YAML spec file", path=shown(path))) from None
        if e.reason == "special":
            raise SpecError(msg("{path}: is not a regular file (a pipe, socket or device), expected a YAML spec file", path=shown(path))) from None
        raise SpecError(at_(path, e.message)) from None
    except OSError as e:
        raise SpecError(msg("{path}: cannot read: {x}", path=shown(path), x=e.strerror or e)) from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(msg("{path}: is larger than {x} MiB, the most a spec may be; draw big weights from the seed instead of writing them out",
                            path=shown(path), x=MAX_FILE_BYTES // 2**20))
    if b"\x00" in data:
        raise SpecError(msg("{path}: is a binary file (contains NUL bytes), expected a YAML spec", path=shown(path)))
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # a UTF-8 byte-order mark, as some editors write
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as e:
        at = bom + e.start
        line = data[:at].count(b"\n") + 1
        raise SpecError(at_(f"{path}:{line}", msg("is not UTF-8 text (byte {byte} at offset {offset})", byte=f"0x{data[at]:02x}", offset=at))) from None
    if not text.strip():
        raise SpecError(msg("{path}: is empty, expected a YAML mapping with at least 'dims' and 'input'", path=shown(path)))
    return text


def _parser(text: str, pure: bool = False) -> Any:
    """libyaml's parser when PyYAML has it (about 50 times faster), else PyYAML's own: events only, both iterative."""
    cls = yaml.SafeLoader if pure else (getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader)
    return cls(text)


def load(text: str, filename: str) -> tuple[dict[str, Any], Source]:
    """Build the document from the parser's events; it must be one mapping.

    Composition is ours and iterative: nesting deeper than MAX_DEPTH is refused at the event
    that opens the level too many, and an alias counts as the values it stands for, so a
    document that would expand past MAX_EXPANDED_NODES is refused as soon as it gets there,
    without expanding anything (an aliased value is shared, not copied).
    """
    return _load(text, filename, pure=False)


def _load(text: str, filename: str, pure: bool) -> tuple[dict[str, Any], Source]:
    parser = _parser(text, pure)
    try:
        return _Composer(parser, filename, text).document()
    except yaml.MarkedYAMLError as e:
        if not pure and isinstance(parser, getattr(yaml, "CSafeLoader", ())) and _nested_too_deep(text, e):
            return _load(text, filename, pure=True)  # libyaml (PyYAML >= 6.0.4) stopped it in its own words: our composer names the level
        raise SpecError(_slip_message(text, e, filename) or _syntax_message(e, filename)) from None
    except yaml.YAMLError as e:
        raise SpecError(msg("{filename}: YAML error: {names}", filename=filename, names=' '.join(str(e).split()))) from None
    finally:
        parser.dispose()


def _nested_too_deep(text: str, e: yaml.MarkedYAMLError) -> bool:
    from tracer.spec.yamlslips import explain

    m = e.problem_mark or e.context_mark
    slip = explain(text, m.line + 1 if m else text.count("\n") + 1, MAX_DEPTH)
    return slip is not None and slip.kind == "deep"


def _slip_message(text: str, e: yaml.MarkedYAMLError, filename: str) -> Message | None:
    """A parser error explained by the slip that caused it (a tab, full-width punctuation, nesting too deep), in tracer's words."""
    from tracer.spec.yamlslips import describe, explain, tab_message

    m = e.problem_mark or e.context_mark
    slip = explain(text, m.line + 1 if m else text.count("\n") + 1, MAX_DEPTH)
    if slip is None:
        return None
    where = f"{filename}:{slip.line}:{slip.col}"
    if slip.kind == "deep":
        return at(where, _too_deep())
    if slip.kind == "tab":
        return at(where, tab_message(slip.line, slip.col))
    if slip.kind == "colon":
        from tracer.spec.yamlslips import colon_message

        line = text.split("\n")[slip.line - 1].rstrip("\r")
        start = len(line) - len(line.lstrip(" -"))
        return at(where, colon_message(line[start:].split(" #")[0].rstrip(), slip.col - 1 - start))
    return at(where, describe(slip.char))


def _too_deep() -> Message:
    return msg("values nest more than {n} levels deep (YAML nesting is too deep for a spec: its deepest value is a [B,T,C] matrix inside two mappings)",
               n=MAX_DEPTH)


def _syntax_message(e: yaml.MarkedYAMLError, filename: str) -> Message:
    m = e.problem_mark or e.context_mark
    where = f"{filename}:{m.line + 1}:{m.column + 1}" if m else filename
    problem = e.problem or "malformed YAML"
    if e.context and problem.startswith("but "):
        what = f"{e.context} {problem}"  # "expected a single document in the stream but found another document"
    elif e.context:
        what = f"{problem} ({e.context})"
    else:
        what = problem
    cm = e.context_mark
    if cm is not None and m is not None and cm.line != m.line:
        return at(where, msg("YAML syntax error: {problem}; it started at line {l}, column {c}", problem=what, l=cm.line + 1, c=cm.column + 1))
    return at(where, msg("YAML syntax error: {problem}", problem=what))


class _Frame:
    __slots__ = ("value", "path", "key", "anchor", "start", "is_map", "flow")

    def __init__(self, value: Any, path: Path, anchor: str | None, start: int, is_map: bool, flow: bool = False) -> None:
        self.value = value
        self.path = path
        self.key: str | None = None  # a mapping waiting for the value of this key
        self.anchor = anchor
        self.start = start  # values counted before this collection opened
        self.is_map = is_map
        self.flow = flow  # written [...] or {...}: full-width punctuation inside is a slip, not text


class _Composer:
    def __init__(self, parser: Any, filename: str, text: str = "") -> None:
        self.parser = parser
        self.text = text  # to point at a slip inside a scalar that spans lines
        self.src = Source(filename, {}, {})
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, values it stands for)
        self.count = 0  # values so far, aliases expanded
        self.aliased = False

    def where(self, mark: Any) -> str:
        return f"{self.src.filename}:{mark.line + 1}:{mark.column + 1}"

    def document(self) -> tuple[dict[str, Any], Source]:
        p, name = self.parser, self.src.filename
        p.get_event()  # stream start
        if p.check_event(yaml.StreamEndEvent):
            raise SpecError(msg("{name}: is empty, expected a YAML mapping with at least 'dims' and 'input'", name=name))
        p.get_event()  # document start
        value = self.node()
        p.get_event()  # document end
        if not p.check_event(yaml.StreamEndEvent):
            m = p.peek_event().start_mark
            raise SpecError(msg("{m}: a second YAML document ('---'); a spec is one document", m=self.where(m)))
        if not isinstance(value, dict):
            kind = msg("a list") if isinstance(value, list) else (msg("empty") if value is None else msg("a single value"))
            m = self.src.marks.get((), Mark(1, 1))
            raise SpecError(at(f"{name}:{m.line}:{m.col}", msg("the document is {kind}; a spec must be a mapping of keys such as dims, block, weights",
                                                               kind=kind)))
        return value, self.src

    def node(self) -> Any:
        """Read events until one complete node is built; return its value."""
        p = self.parser
        stack: list[_Frame] = []
        while True:
            ev = p.get_event()
            if isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                frame = stack.pop()
                value = frame.value
                if frame.anchor is not None:
                    self.anchors[frame.anchor] = (value, self.count - frame.start)
            else:
                path = self.path_of(stack, ev)
                if path is None:
                    continue  # a mapping key: stored on its frame
                m = ev.start_mark
                self.src.marks[path] = Mark(m.line + 1, m.column + 1)
                if isinstance(ev, yaml.AliasEvent):
                    value = self.alias(ev, path)
                elif isinstance(ev, yaml.ScalarEvent):
                    self.check_tag(ev, path)
                    self.src.raw[path] = ev.value
                    if not ev.style and stack:
                        self.check_slip(ev, path, stack[-1].flow, False)
                    try:
                        value = self.scalar(ev)
                    except ValueError as e:
                        raise SpecError(at(self.where(m), at(format_path(path), message_of(e)))) from None
                    self.add(1, m)
                    if ev.anchor is not None:
                        self.anchors[ev.anchor] = (value, 1)
                else:
                    self.check_tag(ev, path)
                    if len(stack) >= MAX_DEPTH:
                        raise SpecError(at(self.where(m), at(format_path(path), _too_deep())))
                    self.add(1, m)
                    is_map = isinstance(ev, yaml.MappingStartEvent)
                    stack.append(_Frame({} if is_map else [], path, ev.anchor, self.count, is_map, bool(ev.flow_style)))
                    continue
            if not stack:
                return value
            top = stack[-1]
            if top.is_map:
                assert top.key is not None
                top.value[top.key] = value
                top.key = None
            else:
                top.value.append(value)

    def path_of(self, stack: list[_Frame], ev: Any) -> Path | None:
        """The path of the node ``ev`` opens; None when ``ev`` is a mapping key (then kept on the frame)."""
        if not stack:
            return ()
        top = stack[-1]
        if not top.is_map:
            return top.path + (len(top.value),)
        if top.key is not None:
            return top.path + (top.key,)
        m = ev.start_mark
        plain_key = isinstance(ev, yaml.ScalarEvent) and ev.tag is None and ev.anchor is None
        if plain_key and self.resolve(ev) == _TAG + "merge":
            raise SpecError(msg("{m}: {path}: keys must be plain names (merge keys '<<' are not supported)", m=self.where(m), path=format_path(top.path)))
        if not plain_key:
            raise SpecError(msg("{m}: {path}: keys must be plain names (not lists, mappings, anchors or aliases)", m=self.where(m), path=format_path(top.path)))
        key = ev.value
        self.check_slip(ev, top.path + (key,), top.flow, True)
        if key in top.value:
            first = self.src.key_marks.get(top.path + (key,))
            again = msg("duplicate key (first given at line {n})", n=first.line) if first else msg("duplicate key")
            raise SpecError(at(self.where(m), at(format_path(top.path + (key,)), again)))
        self.src.key_marks[top.path + (key,)] = Mark(m.line + 1, m.column + 1)
        self.add(1, m)
        top.key = key
        return None

    def check_slip(self, ev: Any, path: Path, flow: bool, is_key: bool) -> None:
        """Full-width punctuation where YAML reads structure, or `mask:causal` (see yamlslips): named, with what to type instead."""
        if ":" in ev.value and not ev.style:
            from tracer.spec.yamlslips import colon_message, colon_slip

            colon = colon_slip(ev.value, path[-1] if path else None, is_key)
            if colon is not None and ev.start_mark.line == ev.end_mark.line:
                field = path[:-1] if is_key else path
                where = f"{self.src.filename}:{ev.start_mark.line + 1}:{ev.start_mark.column + 1 + colon}"
                slip = colon_message(ev.value, colon)
                raise SpecError(at_(where, at_(format_path(field), slip)) if field else at_(where, slip))
        if ev.value.isascii():  # no full-width character: the common case, without importing yamlslips
            return
        from tracer.spec.yamlslips import FULL_WIDTH, describe, plain_slip

        if not any(ch in FULL_WIDTH for ch in ev.value):
            return
        i = plain_slip(ev.value, path[-1] if path else None, flow, is_key)
        if i is None:
            return
        m = ev.start_mark
        col = m.column + 1 + i
        if ev.end_mark.line != m.line:  # folded over lines: find the character on the scalar's first line
            line = self.text.split("\n", m.line + 1)[m.line] if m.line < self.text.count("\n") + 1 else ""
            at = line.find(ev.value[i], m.column)
            col = at + 1 if at >= 0 else m.column + 1
        field = path[:-1] if is_key else path
        where = f"{self.src.filename}:{m.line + 1}:{col}"
        raise SpecError(at_(where, at_(format_path(field), describe(ev.value[i]))) if field else at_(where, describe(ev.value[i])))

    def scalar(self, ev: Any) -> Any:
        text = ev.value
        if not ev.style:  # plain: numbers first, they are most of a spec
            if _INT_RE.match(text):
                return _integer(text.replace("_", ""), 10)
            if _FLOAT_RE.match(text):
                return float(text.replace("_", ""))
        return _scalar(self.resolve(ev), text, not ev.style)

    def resolve(self, ev: Any) -> str:
        return str(self.parser.resolve(yaml.ScalarNode, ev.value, ev.implicit))

    def check_tag(self, ev: Any, path: Path) -> None:
        if ev.tag is not None:  # no tag is needed in a spec: !!python/object and friends are never constructed
            raise SpecError(msg("{start_mark}: {path}: the tag {tag} is not allowed; tracer reads plain YAML only (quote a value to make it text)",
                                start_mark=self.where(ev.start_mark), path=format_path(path), tag=repr(ev.tag)))

    def alias(self, ev: Any, path: Path) -> Any:
        if ev.anchor not in self.anchors:
            raise SpecError(msg("{start_mark}: {path}: the alias *{anchor} refers to no complete anchor before it (an anchor cannot be used "
                                "inside its own value)", start_mark=self.where(ev.start_mark), path=format_path(path), anchor=ev.anchor))
        value, size = self.anchors[ev.anchor]
        self.aliased = True
        self.add(size, ev.start_mark)
        return value  # shared, not copied: the validator reads it, nothing writes to it

    def add(self, n: int, mark: Any) -> None:
        self.count += n
        if self.count > MAX_EXPANDED_NODES:
            if self.aliased:
                raise SpecError(at(self.where(mark), join([msg("the document has more than {n} values once its aliases are expanded",
                                                               n=f"{MAX_EXPANDED_NODES:,}"),
                                                           msg("anchors and aliases that multiply like this are refused")])))
            raise SpecError(at(self.where(mark), msg("the document has more than {n} values ; a spec this large cannot be traced here (draw big weights "
                                                     "from the seed instead)", n=f"{MAX_EXPANDED_NODES:,}")))


def _integer(text: str, base: int) -> int:
    """An integer literal; ValueError unless a float64 can hold it (every number in a spec ends up as one).

    The length is checked before converting, so a million-digit literal costs nothing.
    """
    digits = text.lstrip("+-")
    bits_per_digit = {2: 1, 8: 3, 10: math.log2(10), 16: 4}[base]
    if (len(digits.lstrip("0")) - 1) * bits_per_digit >= 1024:
        raise ValueError(msg("expected a number smaller than about 1.8e308 in magnitude (the largest a float64 holds), received an integer of {n} digits",
                             n=len(digits.lstrip('0'))))
    try:
        value = int(text, base)
    except ValueError:
        raise ValueError(msg("cannot read {text} as an integer", text=repr(abbreviate(text)))) from None
    try:
        float(value)  # rounds to the nearest float64: at 2**1024 - 2**970 and beyond, that is infinity
    except OverflowError:
        raise ValueError(msg("expected a number smaller than about 1.8e308 in magnitude (the largest a float64 holds), received {text}",
                             text=abbreviate(text))) from None
    return value


def abbreviate(text: str, most: int = 40) -> str:
    """Text as written, cut in the middle when longer than ``most`` characters (a 400-digit literal in a message)."""
    if len(text) <= most:
        return text
    return f"{text[:most // 2]}…{text[-8:]} ({len(text)} characters)"


def _scalar(tag: str, text: str, plain: bool) -> Any:
    """The value of a scalar YAML resolved to ``tag``; ValueError with a short fact if there is none."""
    if not tag.startswith(_TAG) or tag[len(_TAG):] not in {"str", "int", "float", "bool", "null"}:
        raise ValueError(msg("the tag {tag} is not allowed; tracer reads plain YAML only", tag=repr(tag)))
    kind = tag[len(_TAG):]
    if kind == "str":
        if plain and _FLOAT_RE.match(text) and any(ch.isdigit() for ch in text):
            return float(text.replace("_", ""))  # 1e-5, 5E-6: numbers, whatever YAML 1.1 says
        return text
    if kind == "null":
        return None
    if kind == "bool":
        return text.lower() in _BOOL_TRUE
    if kind == "int":
        t = text.replace("_", "")
        sign = -1 if t.startswith("-") else 1
        t = t.lstrip("+-")
        base = {"0x": 16, "0b": 2, "0o": 8}.get(t[:2], 10)
        digits = t[2:] if base != 10 else t
        if ":" in t or not digits:
            raise ValueError(msg("cannot read {text} as an integer", text=repr(text)))
        return sign * _integer(digits, base)
    # float
    t = text.lower().replace("_", "")
    if t in {".inf", "+.inf"}:
        return math.inf
    if t == "-.inf":
        return -math.inf
    if t == ".nan":
        return math.nan
    try:
        return float(t)
    except ValueError:
        raise ValueError(msg("cannot read {text} as a number", text=repr(text))) from None
