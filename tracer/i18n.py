"""The language tracer speaks to people: English (``en``) or the book's Chinese (``zh``).

The choice: ``--lang zh|en`` on every command that prints words; without it, the locale: the
first non-empty of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` (POSIX precedence) that starts with
``zh`` (``zh_CN.UTF-8``, ``zh_TW``, ``zh``) gives ``zh``; anything else (``C``, ``POSIX``,
``en_US.UTF-8``, unset) gives ``en``.  The CLI sets the language once per command
(``choose``); library code and tests may use ``using("zh")``.

What is translated, and how, is keyed, never parsed back from finished English:

- sentences (errors, notes, violations, diff, probe, graph, stage meanings) are messages made
  where they are made (tracer.messages: ``msg("unknown key {key}", key=...)``), rendered at the
  edge from the template's entry in ``zh.MESSAGES``;
- UI words (headers, captions, labels, status words): ``tr("value at b={b}, t={t}", b=0, t=1)``
  looks the English up in ``zh.UI`` and fills in the fields.

This module holds the language choice, ``tr``, ``spaced`` (the space the book sets between
Chinese and Latin text) and terminal widths.  Machine output (JSON, CSV) never goes through
here: its keys, status words and messages are English in every language, so scripts do not
depend on the locale.  Nothing here imports NumPy or rich.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

LANGUAGES = ("en", "zh")
LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")

_current = "en"


# -- the choice ----------------------------------------------------------------------

def from_locale(environ: Mapping[str, str] | None = None) -> str:
    """zh when the locale's language is Chinese, else en."""
    env = os.environ if environ is None else environ
    for name in LOCALE_VARIABLES:
        value = env.get(name, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def choose(option: str | None, environ: Mapping[str, str] | None = None) -> str:
    """Set the language from --lang (or the locale when not given) and return it.

    An unknown --lang raises UnknownLanguage, the locale's language chosen first, so the refusal is worded in it.
    """
    from tracer.errors import UnknownLanguage

    set_language(from_locale(environ))
    if option is None:
        return _current
    if option not in LANGUAGES:
        raise UnknownLanguage(option)
    set_language(option)
    return _current


def set_language(lang: str) -> None:
    global _current
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}")
    _current = lang


def language() -> str:
    return _current


@contextmanager
def using(lang: str) -> Iterator[None]:
    """Speak ``lang`` inside the block (tests, library callers)."""
    before = _current
    set_language(lang)
    try:
        yield
    finally:
        set_language(before)


# -- UI words ------------------------------------------------------------------------

def fill(template: str, fields: Mapping[str, object], show: Callable[[object], str] = str) -> str:
    """Put the fields into a template: ``{name}`` for a name in ``fields`` only, so other braces
    (``dims: {C: 2, H: 2, F: 3}``) stay as they are; ``show`` turns a field's value into its text."""
    if "{" not in template or not fields:
        return template
    out: list[str] = []
    pos = 0
    while (i := template.find("{", pos)) >= 0 and (j := template.find("}", i + 1)) >= 0:
        name = template[i + 1:j]
        if name in fields:
            out += [template[pos:i], show(fields[name])]
            pos = j + 1
        else:
            out.append(template[pos:i + 1])
            pos = i + 1
    out.append(template[pos:])
    return "".join(out)


def tr(text: str, **fields: object) -> str:
    """A UI word or line (a table's header, a status word, a label) in the current language: the English looked
    up in ``zh.UI`` (a key, never parsed), then the fields filled in.  Sentences are messages (tracer.messages)."""
    if _current == "zh":
        from tracer import zh

        text = zh.UI.get(text, text)
    return fill(text, fields) if fields else text


# -- spacing -----------------------------------------------------------------------------

_HAN = "\u3400-\u4dbf\u4e00-\u9fff"
_HAN_THEN_LATIN = f"([{_HAN}])([A-Za-z0-9\\[('\"`_.-])"
_LATIN_THEN_HAN = f"([A-Za-z0-9\\])'\"`_.%])([{_HAN}])"
_HAN_SPACE_HAN = f"([{_HAN}]) +(?=[{_HAN}])"


def spaced(text: str) -> str:
    """A space between Chinese and Latin text ('应为 pre | post 之一'), as the book sets them, and none
    between two Chinese words; the Latin itself (paths, shapes, values) is never touched, and a quoted
    value ('我，喜欢，你') is kept exactly as written: a space inside the quotes would read as part of it."""
    parts = re.split(r"('[^'\n]*')", text)  # odd indices: quoted values
    for i in range(0, len(parts), 2):
        part = re.sub(_HAN_SPACE_HAN, r"\1", parts[i])  # a translated field next to Chinese: no space between them
        parts[i] = re.sub(_LATIN_THEN_HAN, r"\1 \2", re.sub(_HAN_THEN_LATIN, r"\1 \2", part))
    for i in range(1, len(parts), 2):  # outside the quotes, the usual space between Chinese and the quoted value
        if re.search(f"[{_HAN}]$", parts[i - 1]):
            parts[i - 1] += " "
        if i + 1 < len(parts) and re.match(f"[{_HAN}]", parts[i + 1]):
            parts[i + 1] = " " + parts[i + 1]
    return "".join(parts)


# -- width -----------------------------------------------------------------------------

def cells(text: str) -> int:
    """Terminal cells of text: wide (W) and fullwidth (F) characters take two, combining marks none."""
    import unicodedata

    n = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def ljust(text: str, width: int) -> str:
    """text padded with spaces to `width` terminal cells (str.ljust counts characters, not cells)."""
    return text + " " * max(0, width - cells(text))
