"""The language tracer speaks to people: English (``en``) or the book's Chinese (``zh``).

The choice: ``--lang zh|en`` on every command that prints words; without it, the locale: the
first non-empty of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` (POSIX precedence) that starts with
``zh`` (``zh_CN.UTF-8``, ``zh_TW``, ``zh``) gives ``zh``; anything else (``C``, ``POSIX``,
``en_US.UTF-8``, unset) gives ``en``.  The CLI sets the language once per command
(``choose``); library code and tests may use ``using("zh")``.

English is the key and the fallback.  Three kinds of text are translated, all at the edge
(where a view is drawn or a message printed), never where data is computed:

- UI words (headers, captions, labels, status words): ``tr("value at b={b}, t={t}", b=0, t=1)``
  looks the English template up in ``zh.UI`` and fills in the fields.
- stage meanings: ``meaning(text)``; the built-in stages in Table 17.1's own words
  (``zh.MEANINGS``), their RMSNorm / BatchNorm / activation variants derived from the same
  entries.  A meaning a spec writes itself is printed as written.
- sentences built elsewhere (spec errors, violations, notes, diff, probe, graph): ``message(text)``
  matches the English against the templates of ``zh.TEMPLATES``, whose placeholders carry
  file:line:col, field paths, shapes and values over verbatim.  A leading ``file:line:col:``,
  ``field.path:`` or ``--option value:`` is kept as it is and the rest translated; sentences
  joined by '; ' are translated one by one; ``zh.FRAGMENTS`` ('a mapping', 'boolean yes') are
  only tried inside a field marked ``!t``.  A sentence no template covers stays English.

Machine output (JSON, CSV) never goes through here: its keys, status words and messages are
English in every language, so scripts do not depend on the locale.  Nothing here imports
NumPy or rich.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import NamedTuple

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


# -- templates -----------------------------------------------------------------------

_FIELD_PATTERN = r"\{(\w+)(![tTa])?\}"  # compiled on first use: every command imports this module, few need a regex
_PATTERNS = {
    None: "(?P<{0}>(?:(?!; |: ).)+?)",  # a value: within one sentence, and never a 'file:line:col: field: ' prefix
    "!t": "(?P<{0}>(?:(?!; ).)+?)",  # translated text: within one sentence ('; did you mean ...?' is another)
    "!T": "(?P<{0}>.+?)",  # translated text that may hold several sentences joined by '; ' (a reason)
    "!a": "(?P<{0}>.+?)",  # a value that may hold anything (a spec's name)
}


class Template(NamedTuple):
    """An English sentence with {fields}, and its Chinese.  ``{x!t}`` marks a field whose text is
    itself translated (a fragment such as 'a whole number'; ``{x!T}`` when it may hold several
    sentences joined by '; '); the others are carried over verbatim (``{x!a}`` may hold ': ' and '; ')."""

    english: str
    zh: str
    regex: re.Pattern[str]
    translated: frozenset[str]
    literal: str  # the longest literal piece: a cheap filter before the regex
    leads_translated: bool  # starts with a translated field: tried only after a leading 'file:line:col:' is peeled
    weight: int  # letters of literal English: when several templates match, the most specific wins


def compile_template(english: str, zh_text: str) -> Template:
    parts: list[str] = []
    literals: list[str] = []
    seen: set[str] = set()
    translated: set[str] = set()
    pos = 0
    for m in re.finditer(_FIELD_PATTERN, english):
        literals.append(english[pos:m.start()])
        parts.append(re.escape(english[pos:m.start()]))
        name, mark = m.group(1), m.group(2)
        parts.append(f"(?P={name})" if name in seen else _PATTERNS[mark].format(name))
        seen.add(name)
        if mark in ("!t", "!T"):
            translated.add(name)
        pos = m.end()
    literals.append(english[pos:])
    parts.append(re.escape(english[pos:]))
    first = re.match(_FIELD_PATTERN, english)
    return Template(english, zh_text, re.compile("".join(parts), re.DOTALL), frozenset(translated), max(literals, key=len),
                    first is not None and first.group(1) in translated, len("".join(literals)))


def fill(template: str, fields: Mapping[str, object]) -> str:
    """Put the fields into a template: {name} only, so other braces stay as they are."""
    return re.sub(_FIELD_PATTERN, lambda m: str(fields[m.group(1)]) if m.group(1) in fields else m.group(0), template)


@lru_cache(maxsize=1)
def _templates() -> tuple[tuple[Template, ...], tuple[Template, ...]]:
    """(sentences, fragments): fragments are only tried inside a translated field."""
    from tracer import zh

    return (tuple(compile_template(en, z) for en, z in zh.TEMPLATES.items()),
            tuple(compile_template(en, z) for en, z in zh.FRAGMENTS.items()))


# -- UI words ------------------------------------------------------------------------

def tr(text: str, **fields: object) -> str:
    """A UI word or line in the current language: the English template looked up, the fields filled in."""
    if _current == "zh":
        from tracer import zh

        text = zh.UI.get(text, text)
    return fill(text, fields) if fields else text


# -- stage meanings ------------------------------------------------------------------

def meaning(text: str) -> str:
    """A stage's meaning in the current language (a meaning the spec wrote itself stays as written)."""
    if _current == "en" or not text:
        return text
    found = zh_meaning(text)
    return text if found is None else found


@lru_cache(maxsize=4096)
def zh_meaning(text: str) -> str | None:
    """The Chinese of a built-in meaning, or None.

    Variants are derived, the way blocks.configure derives them: 'first RMS normalisation,
    N_1 = RMS_1(X)' is the LayerNorm entry with the norm's word and letters; 'FFN after GELU, ...'
    the activation entry with its name; suffixes ('(pre-norm decoder layer)', ', turned by rotary
    positions', '(block.norm: rmsnorm)') are translated on their own.
    """
    from tracer import zh

    for suffix, zh_suffix in zh.MEANING_SUFFIXES:
        m = re.fullmatch(r"(.+?)" + re.escape(suffix).replace(r"\{x\}", "(?P<x>.+?)"), text, re.DOTALL)
        if m:
            head = zh_meaning(m.group(1))
            if head is not None:
                return head + fill(zh_suffix, {"x": m.groupdict().get("x", "")})
    for word, (key, letters) in zh.NORM_WORDS.items():  # 'RMS normalisation', RMS_: blocks.configure's words
        if word in text:
            base = text.replace(word, "normalisation").replace(letters, "LN_")
            return _meaning_entry(base, zh.NORM_ZH[key], letters, None)
    for name in zh.ACTIVATION_NAMES:  # longest first: 'GELU (tanh)' before 'GELU'
        if f"after {name}" in text or f"{name}(" in text:
            base = text.replace(f"after {name}", "after the activation").replace(f"{name}(", "act(")
            found = _meaning_entry(base, zh.NORM_ZH["normalisation"], "LN_", name)
            if found is not None:
                return found
    found = _meaning_entry(text, zh.NORM_ZH["normalisation"], "LN_", None)
    if found is not None:
        return found
    m = re.fullmatch(r"sinusoidal positions, base (?P<base>\S+)", text)
    if m:
        return fill(zh.SINUSOIDAL, m.groupdict())
    return None


_OP_MEANINGS: dict[str, str] = {}  # each op's own meaning, from its record (tracer.model.ops)


def add_meanings(meanings: Mapping[str, str]) -> None:
    """The Chinese of meanings declared outside the catalogue: each op's record holds its own."""
    _OP_MEANINGS.update(meanings)
    zh_meaning.cache_clear()


def _meaning_entry(base: str, norm: str, letters: str, act: str | None) -> str | None:
    from tracer import zh

    entry = zh.MEANINGS.get(base) or _OP_MEANINGS.get(base)
    if entry is None:
        return None
    prose = f" {act} " if act else "激活"
    formula = act or "act"
    out = fill(entry, {"norm": norm, "LN": letters, "act": prose, "actf": formula})
    return re.sub(r"  +", " ", out).strip()


# -- sentences and messages ----------------------------------------------------------

def message(text: str) -> str:
    """An error, violation, note or other sentence in the current language (English when no template covers it).

    Multi-line text is translated line by line; a line's leading ``file:line:col:`` and
    ``field.path:`` are kept verbatim.
    """
    render = getattr(text, "render", None)  # a tracer.messages.Message (which builds on this module): keyed, not parsed
    if render is not None:
        return str(render())
    if _current == "en" or not text:
        return text
    return "\n".join(_line(line) for line in text.split("\n"))


def zh_message(text: str) -> str | None:
    """The Chinese of one line, or None when no template covers it (for tests listing the coverage)."""
    return _translate(text, 0)


def _line(line: str) -> str:
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    prefix = ""
    for bullet in ("- ", "· "):
        if body.startswith(bullet):
            prefix, body = bullet, body[len(bullet):]
    found = _translate(body, 0)
    return indent + prefix + (found if found is not None else body)


# what may lead a message and is kept as it is: file:line:col, a field path, an option with its value (--save out.npz)
_LOCATION = r"(?P<head>[^\s:]+(?::\d+){1,2}|.+?:\d+(?::\d+)?|--[\w-]+ [^\s:]+|[^\s:]+): (?P<rest>.+)"


def _translate(text: str, depth: int) -> str | None:
    """One line: the template with the most literal English that matches it whole; else, for
    sentences joined with '; ', each on its own; else keep a leading 'file:line:col:' or
    'field.path:' and translate the rest; else a template that starts with a translated field
    ('{what!t} ... is given'); else as many of the '; ' sentences as are covered."""
    if depth > 8 or not text:
        return None
    found = _sentence(text, depth, leads_translated=False)
    if found is not None:
        return found
    parts = text.split("; ")
    done = [_translate(p, depth + 1) for p in parts] if len(parts) > 1 else []
    if done and all(d is not None for d in done):
        return "；".join(d for d in done if d is not None)
    m = re.fullmatch(_LOCATION, text, re.DOTALL)
    if m:
        rest = _translate(m.group("rest"), depth + 1)
        if rest is not None:
            return f"{m.group('head')}: {rest}"
    found = _sentence(text, depth, leads_translated=True)
    if found is not None:
        return found
    if any(d is not None for d in done):
        return "；".join(d if d is not None else p for d, p in zip(done, parts))
    return None


def _fragment(text: str, depth: int) -> str | None:
    """A translated field's text: a list of fragments joined by ', ' (every item covered), a
    sentence, else a fragment ('a mapping', 'boolean yes')."""
    items = text.split(", ")
    if len(items) > 1:  # first: one loose fragment ('{norm} feeds {reader}') must not swallow the whole list
        done = [_match(item, depth, _templates()[1], None) for item in items]
        if all(d is not None for d in done):
            return "，".join(d for d in done if d is not None)
    found = _translate(text, depth + 1)  # a whole sentence (a reason) before a loose fragment such as '{n} rows'
    if found is not None:
        return found
    return _match(text, depth, _templates()[1], None)


@lru_cache(maxsize=8192)
def _sentence(text: str, depth: int, leads_translated: bool) -> str | None:
    from tracer import zh

    if not leads_translated and text in zh.UI:
        return zh.UI[text]
    return _match(text, depth, _templates()[0], leads_translated)


def _match(text: str, depth: int, templates: tuple[Template, ...], leads_translated: bool | None) -> str | None:
    """The Chinese of the template that matches the whole text with the most literal English, or None."""
    best: Template | None = None
    best_match: re.Match[str] | None = None
    for t in templates:
        if leads_translated is not None and t.leads_translated != leads_translated:
            continue
        if t.literal not in text or (best is not None and best.weight >= t.weight):
            continue
        m = t.regex.fullmatch(text)
        if m is not None:
            best, best_match = t, m
    if best is None or best_match is None:
        return None
    fields: dict[str, str] = {}
    for name, value in best_match.groupdict().items():
        done = _fragment(value, depth + 1) if name in best.translated else None
        fields[name] = done if done is not None else value
    return spaced(fill(best.zh, fields))


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
