"""Slips of the keyboard that YAML misreads: full-width punctuation, tabs, brackets nested too deep.

A Chinese keyboard types ，：；［］｛｝（） and the full-width space U+3000 where YAML needs ASCII
punctuation; PyYAML then reads `[我，喜欢，你]` as one word, `{C：4}` as a key 'C：4', or stops
with words about tokens and scanners.  A tab in the indentation stops it with "found character
that cannot start any token".  This module names the slip itself: the line, the column, the
character and what to type instead, in tracer's own words whatever the PyYAML version.

Two ways in:
- ``plain_slip``: the composer (yamlio) asks about each unquoted scalar it builds, knowing its
  field path and whether it sits in a flow collection ([...] or {...});
- ``scan``: when the parser fails, a lexical pass over the text finds the slip that made it
  fail (or flow brackets nested deeper than the composer would have allowed: libyaml refuses
  deep nesting with its own message before the composer sees the level too many).

Text inside quotes, comments and block scalars is never a slip: quoting a value makes it text.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from tracer.messages import Message, msg

# character -> (what it is, what to type instead)
FULL_WIDTH: dict[str, tuple[Message, str]] = {
    "，": (msg("a full-width comma"), "','"),
    "：": (msg("a full-width colon"), msg("':' and a space")),
    "；": (msg("a full-width semicolon"), msg("',' (YAML separates items with commas)")),
    "［": (msg("a full-width bracket"), "'['"),
    "］": (msg("a full-width bracket"), "']'"),
    "【": (msg("a full-width bracket"), "'['"),
    "】": (msg("a full-width bracket"), "']'"),
    "｛": (msg("a full-width brace"), "'{'"),
    "｝": (msg("a full-width brace"), "'}'"),
    "（": (msg("a full-width parenthesis"), "'('"),
    "）": (msg("a full-width parenthesis"), "')'"),
    "\u3000": (msg("a full-width space"), msg("a space")),
}
OPENERS = "［【｛（\u3000"  # in block context a slip only where a value starts: `tokens: ［0, 1］`
TEXT_KEYS = ("name", "description", "meaning")  # free text: full-width punctuation is the writer's own
_KEY = re.compile(r"[A-Za-z_][\w.-]*")
# `mask:causal`: a key, a colon and a value with no space between (YAML then reads one word); not a URL (`http://`),
# a Windows drive (`C:\`) or a time (`12:30`, the key starts with a letter)
_NO_SPACE = re.compile(r"(?:^|(?<=\s))([A-Za-z_][\w.-]*):(?=[^\s/\\:])")


class Slip(NamedTuple):
    line: int  # 1-based
    col: int  # 1-based
    char: str
    kind: str  # full-width | tab | deep | colon (`mask:causal`, no space after the colon)


def describe(char: str) -> Message:
    """'a full-width comma '，' (U+FF0C), as a Chinese keyboard types it; ...: type ',' instead'."""
    what, fix = FULL_WIDTH[char]
    code = f"U+{ord(char):04X}"
    if char == "\u3000":
        return msg("{what} ({code}), as a Chinese keyboard types it; YAML reads only ASCII punctuation: type {fix} instead", what=what, code=code, fix=fix)
    return msg("{what} '{char}' ({code}), as a Chinese keyboard types it; YAML reads only ASCII punctuation: type {fix} instead",
               what=what, char=char, code=code, fix=fix)


def colon_slip(text: str, key: str | int | None, is_key: bool) -> int | None:
    """Index of the colon of `mask:causal` in an unquoted scalar (a key and a value meant, no space after ':'), or None.
    The values of free-text fields (name, description, meaning) are the writer's own words."""
    if ":" not in text or (not is_key and key in TEXT_KEYS):
        return None
    m = _NO_SPACE.search(text)
    return m.end(1) if m else None


def colon_message(text: str, i: int) -> Message:
    """`mask:causal`: no space after the colon, and what to type instead."""
    start = text.rfind(" ", 0, i) + 1
    end = len(text) if text.find(" ", i) < 0 else text.find(" ", i)
    word = text[start:end]
    return msg("{word}: no space after the colon, so YAML reads one word, not a key and its value; type {fixed}",
               word=repr(word), fixed=repr(word[:i - start + 1] + " " + word[i - start + 1:]))


_LOOKALIKE = str.maketrans("0o1l", "o0l1")  # the digit for the letter and back: w_0 for w_o, l1 for 11


def lookalike(word: str, options: list[str] | tuple[str, ...]) -> Message | None:
    """'did you mean ...?' for a name typed with a slip the spelling distance misses or misranks: `Gelu` for
    `gelu` (tracer's names are lower case), `w_0` for `w_o` (the digit zero for the letter o); else None."""
    for option in options:
        if word != option and word.lower() == option:
            return msg("did you mean {name}? (tracer's names are lower case)", name=repr(option))
    for option in options:
        if len(word) == len(option) and word != option and all(a == b or a.translate(_LOOKALIKE) == b
                                                                for a, b in zip(word.lower(), option)):
            return msg("did you mean {name}? (a digit 0 or 1 typed for the letter o or l)", name=repr(option))
    return None


def tab_message(line: int, col: int) -> Message:
    return msg("a tab at {line}:{col}; YAML indents with spaces", line=line, col=col)


def plain_slip(text: str, key: str | int | None, flow: bool, is_key: bool) -> int | None:
    """Index of the first full-width slip in an unquoted scalar, or None.

    In a flow collection every full-width character is a slip (`[我，喜欢，你]` meant three words);
    in block context only where structure was meant: a value that starts with ［｛（ or U+3000,
    a key written with ：, `C：4` given where a key and a value were meant.  The values of free-text
    fields (name, description, meaning) are the writer's own words.
    """
    if not is_key and key in TEXT_KEYS:
        return None
    for i, ch in enumerate(text):
        if ch not in FULL_WIDTH:
            continue
        if flow or is_key or (i == 0 and ch in OPENERS) or _keyed(text, i):
            return i
    return None


def _keyed(text: str, i: int) -> bool:
    """`C：4` or `C:　4`: a key and a value were meant, the character at i stands where ': ' belongs."""
    ch = text[i]
    return (ch == "：" and _KEY.fullmatch(text[:i]) is not None) or (ch == "\u3000" and i > 0 and text[i - 1] == ":"
                                                                     and _KEY.fullmatch(text[:i - 1]) is not None)


def scan(text: str, max_depth: int) -> list[Slip]:
    """Every slip the text shows, in order: full-width punctuation where YAML reads structure,
    a tab in the indentation, and the flow bracket that opens level max_depth + 1."""
    slips: list[Slip] = []
    depth = 0
    quote = ""  # the quote of a quoted scalar still open at the end of a line
    block_indent = -1  # inside a block scalar (| or >): lines indented more than this are its text
    deep = False
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        size = len(line)
        indent = len(line) - len(line.lstrip(" "))
        if block_indent >= 0:
            if not line.strip() or indent > block_indent:
                continue
            block_indent = -1
        i = 0
        if not quote and depth == 0:
            while i < size and line[i] in " \t\u3000":
                if line[i] == "\t":
                    slips.append(Slip(n, i + 1, "\t", "tab"))
                    break
                if line[i] == "\u3000":
                    slips.append(Slip(n, i + 1, line[i], "full-width"))
                    break
                i += 1
        start = True  # at the start of a scalar: a quote opens one, [ { open a flow collection
        plain = i  # where the current plain scalar began
        while i < size:
            ch = line[i]
            if quote:
                if ch == "\\" and quote == '"':
                    i += 2
                    continue
                if ch == quote:
                    if quote == "'" and i + 1 < size and line[i + 1] == "'":
                        i += 2
                        continue
                    quote = ""
                i += 1
                continue
            if ch in " \t":
                i += 1
                continue
            if ch == "#" and (i == 0 or line[i - 1] in " \t"):
                break  # a comment
            ends_key = ch == ":" and (i + 1 >= size or line[i + 1] in " \t" or depth > 0)
            if start and ch in "'\"":
                quote, start = ch, False
            elif start and depth == 0 and ch in "|>":
                block_indent = indent
                break
            elif (start or depth > 0) and ch in "[{":
                depth += 1
                if depth > max_depth and not deep:
                    slips.append(Slip(n, i + 1, ch, "deep"))
                    deep = True
                start = True
            elif depth > 0 and ch in "]}":
                depth -= 1
                start = False
            elif (depth > 0 and ch == ",") or ends_key or (start and ch in "-?" and (i + 1 >= size or line[i + 1] in " \t")):
                start = True  # a value, an item or a key starts next
            elif ch in FULL_WIDTH:
                if start:
                    plain = i
                if depth > 0 or (start and ch in OPENERS) or _keyed(line[plain:], i - plain):
                    slips.append(Slip(n, i + 1, ch, "full-width"))
                start = False
            else:
                if start:
                    plain = i
                    if depth == 0:
                        colon = colon_slip(line[i:].split(" #")[0].rstrip(), None, False)
                        if colon is not None and line[i:i + colon].find(" ") < 0:  # the scalar's first word
                            slips.append(Slip(n, i + colon + 1, ":", "colon"))
                start = False
            i += 1
    return slips


def explain(text: str, line: int, max_depth: int) -> Slip | None:
    """The slip that explains a parser error reported at `line` (1-based): flow brackets nested too
    deep anywhere before it, else the first tab, full-width or `mask:causal` slip on the lines up to it (a slip on an
    earlier line can make YAML fail only later: a key typed with ： fails where the next key starts)."""
    slips = [s for s in scan(text, max_depth) if s.line <= line]
    deep = [s for s in slips if s.kind == "deep"]
    if deep:
        return deep[0]
    near = [s for s in slips if s.line >= line - 1]
    return near[0] if near else None
