"""Read a YAML spec into plain Python values plus a map from field path to line.

PyYAML is used only to *compose* the document into nodes; we turn nodes into
values ourselves so that:
- no tag is ever constructed (``!!python/object`` and friends are refused),
- duplicate keys are errors, not silent overwrites,
- ``1e-5`` is a number (YAML 1.1 wants ``1.0e-5``; users write ``1e-5``),
- an alias bomb is refused by counting its expanded size before expanding it,
- every value keeps the line and column it came from, for error messages.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import SpecError

Path = tuple[str | int, ...]

MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_EXPANDED_NODES = 20_000_000  # a 1024 x 3072 matrix given inline is ~3M nodes
MAX_DEPTH = 32  # the deepest legal value is a [B,T,C] matrix inside two mappings

_FLOAT_RE = re.compile(r"^[-+]?(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][-+]?\d+)?$")
_TAG = "tag:yaml.org,2002:"
_BOOL_TRUE = {"true", "yes", "on", "y"}
_BOOL_FALSE = {"false", "no", "off", "n"}


@dataclass(frozen=True)
class Mark:
    line: int  # 1-based
    col: int  # 1-based


@dataclass
class Source:
    """Where each value of a loaded document came from."""

    filename: str
    marks: dict[Path, Mark]
    raw: dict[Path, str]  # the scalar exactly as written (to quote ``yes`` back)
    key_marks: dict[Path, Mark] = field(default_factory=dict)  # where each mapping key itself is written

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
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(document)"


class _Loader(yaml.SafeLoader):
    """SafeLoader whose composer we use; construction is ours."""


def read_text(path: str) -> str:
    import os

    if os.path.isdir(path):
        raise SpecError(f"{path}: is a directory, expected a YAML spec file")
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise SpecError(f"{path}: file is {size} bytes, larger than the {MAX_FILE_BYTES} a spec may be")
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except PermissionError:
        raise SpecError(f"{path}: permission denied") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror or e}") from None
    if b"\x00" in data:
        raise SpecError(f"{path}: is a binary file (contains NUL bytes), expected a YAML spec")
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # a UTF-8 byte-order mark, as some editors write
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as e:
        at = bom + e.start
        line = data[:at].count(b"\n") + 1
        raise SpecError(f"{path}:{line}: is not UTF-8 text (byte 0x{data[at]:02x} at offset {at})") from None
    if not text.strip():
        raise SpecError(f"{path}: is empty, expected a YAML mapping with at least 'dims' and 'block'")
    return text


def load(text: str, filename: str) -> tuple[dict[str, Any], Source]:
    """Compose ``text`` and convert it; the document must be a mapping."""
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        m = e.problem_mark
        where = f"{filename}:{m.line + 1}:{m.column + 1}" if m else filename
        problem = e.problem or "malformed YAML"
        context = f" ({e.context})" if e.context else ""
        raise SpecError(f"{where}: YAML syntax error: {problem}{context}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{filename}: YAML error: {e}") from None
    except RecursionError:
        raise SpecError(f"{filename}: YAML nesting is too deep (a spec nests at most {MAX_DEPTH} levels)") from None
    if node is None:
        raise SpecError(f"{filename}: is empty, expected a YAML mapping with at least 'dims' and 'block'")
    src = Source(filename, {}, {})
    if not isinstance(node, yaml.MappingNode):
        kind = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
        raise SpecError(f"{filename}:{node.start_mark.line + 1}:1: the document is {kind}; a spec must be a mapping of keys such as dims, block, weights")
    size = _expanded_size(node, {}, 0, filename)
    if size > MAX_EXPANDED_NODES:
        raise SpecError(
            f"{filename}: the document expands to {size:,} values (more than {MAX_EXPANDED_NODES:,}); "
            "anchors and aliases that multiply like this are refused"
        )
    value = _convert(node, (), src, 0)
    return value, src


def _expanded_size(node: yaml.Node, memo: dict[int, int], depth: int, filename: str) -> int:
    """Number of values the node stands for once aliases are expanded (linear time)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if depth > MAX_DEPTH:
        m = node.start_mark
        raise SpecError(f"{filename}:{m.line + 1}:{m.column + 1}: values nest more than {MAX_DEPTH} levels deep")
    memo[key] = MAX_EXPANDED_NODES + 1  # a cycle (impossible in YAML composition) counts as too big
    if isinstance(node, yaml.ScalarNode):
        n = 1
    elif isinstance(node, yaml.SequenceNode):
        n = 1
        for child in node.value:
            n += _expanded_size(child, memo, depth + 1, filename)
            if n > MAX_EXPANDED_NODES:
                break
    else:
        n = 1
        for k, v in node.value:
            n += _expanded_size(k, memo, depth + 1, filename) + _expanded_size(v, memo, depth + 1, filename)
            if n > MAX_EXPANDED_NODES:
                break
    memo[key] = n
    return n


def _convert(node: yaml.Node, path: Path, src: Source, depth: int) -> Any:
    m = node.start_mark
    src.marks[path] = Mark(m.line + 1, m.column + 1)
    where = f"{src.filename}:{m.line + 1}:{m.column + 1}: {format_path(path)}"
    tag = node.tag or ""
    if isinstance(node, yaml.ScalarNode):
        src.raw[path] = node.value
        return _scalar(node, where)
    if isinstance(node, yaml.SequenceNode):
        if tag != _TAG + "seq":
            raise SpecError(f"{where}: the tag {tag!r} is not allowed; tracer reads plain YAML only")
        return [_convert(child, path + (i,), src, depth + 1) for i, child in enumerate(node.value)]
    if isinstance(node, yaml.MappingNode):
        if tag != _TAG + "map":
            raise SpecError(f"{where}: the tag {tag!r} is not allowed; tracer reads plain YAML only")
        out: dict[str, Any] = {}
        for knode, vnode in node.value:
            if not isinstance(knode, yaml.ScalarNode) or knode.tag == _TAG + "merge":
                km = knode.start_mark
                raise SpecError(f"{src.filename}:{km.line + 1}:{km.column + 1}: {format_path(path)}: keys must be plain names (merge keys '<<' are not supported)")
            key = knode.value
            km = knode.start_mark
            if key in out:
                first = src.key_marks.get(path + (key,))
                again = f" (first given at line {first.line})" if first else ""
                raise SpecError(f"{src.filename}:{km.line + 1}:{km.column + 1}: {format_path(path + (key,))}: duplicate key{again}")
            src.key_marks[path + (key,)] = Mark(km.line + 1, km.column + 1)
            out[key] = _convert(vnode, path + (key,), src, depth + 1)
        return out
    raise SpecError(f"{where}: unsupported YAML node")


def _scalar(node: yaml.ScalarNode, where: str) -> Any:
    tag, text = node.tag, node.value
    if not tag.startswith(_TAG) or tag[len(_TAG):] not in {"str", "int", "float", "bool", "null"}:
        raise SpecError(f"{where}: the tag {tag!r} is not allowed; tracer reads plain YAML only")
    kind = tag[len(_TAG):]
    plain = node.style is None
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
        try:
            if t.startswith("0x"):
                return sign * int(t[2:], 16)
            if t.startswith("0b"):
                return sign * int(t[2:], 2)
            if t.startswith("0o"):
                return sign * int(t[2:], 8)
            if ":" in t:
                raise ValueError
            return sign * int(t, 10)
        except ValueError:
            raise SpecError(f"{where}: cannot read {text!r} as an integer") from None
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
        raise SpecError(f"{where}: cannot read {text!r} as a number") from None


def is_bool_word(text: str | None) -> bool:
    return text is not None and text.lower() in _BOOL_TRUE | _BOOL_FALSE
