"""Messages translated where they are made, gettext style.

A message is a template with named fields, kept as made: ``msg("unknown key {key}", key="'blok'")``
(gettext's ``_``), ``nmsg("{n} stage", "{n} stages", n)`` (ngettext: ``n`` picks the form and is
a field too), ``join([a, b])`` (sentences joined by '; '), ``at("spec.yaml:4:1", message)`` (a
location kept as it is, then ': ' and the message).  A Message *is* its English: it is a ``str``
whose value is the English sentence, so ``str()``, f-strings, ``==``, JSON and CSV see English in
every language, as before.  ``message.render(lang)`` (the current language when not given) looks
the *template* up in the catalogue (``tracer.zh``: MESSAGES keyed by the English template, PLURALS
by the (singular, plural) pair) and only then fills the fields in: a field that is itself a Message
is rendered in the same language, anything else is put in as ``str()`` gives it (paths, shapes,
numbers verbatim).  A template the catalogue lacks is filled in English.

``given(template, zh, **fields)`` is a message whose Chinese comes with it (an op's record keeps
its own words).  ``render(text)`` is the edge's helper: a Message in the current language, a plain
``str`` (a name or a meaning a spec wrote itself) as it is: nothing is ever parsed back.

Cheap to import: no regex, no NumPy, no rich; the catalogue is imported on the first Chinese render.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Message", "msg", "nmsg", "given", "join", "at", "render", "fill", "message_of", "shown"]


def _language(lang: str | None) -> str:
    if lang is not None:
        return lang
    from tracer import i18n

    return i18n.language()


def _text(value: object, lang: str) -> str:
    if isinstance(value, Message):
        return value.render(lang)
    return str(value)


def fill(template: str, fields: Mapping[str, object], lang: str = "en") -> str:
    """Put the fields into a template (i18n.fill: ``{name}`` for a name in ``fields`` only, other braces stay);
    a Message field is rendered in ``lang``."""
    from tracer import i18n

    return i18n.fill(template, fields, lambda value: _text(value, lang))


def _rebuild(cls: type[Message], args: tuple[Any, ...]) -> Message:
    return cls._make(*args)


class Message(str):
    """A sentence (or a fragment) as made: its template and fields.  Its str value is the English."""

    template: str
    fields: dict[str, object]

    @classmethod
    def _make(cls, template: str, fields: dict[str, object]) -> Message:
        self = str.__new__(cls, fill(template, fields))
        self.template = template
        self.fields = fields
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (a worker's error) and copies keep the structure
        return _rebuild, (type(self), self._args())

    def _args(self) -> tuple[Any, ...]:
        return self.template, self.fields

    @property
    def key(self) -> str | tuple[str, str]:
        """What the catalogue is keyed by."""
        return self.template

    def render(self, lang: str | None = None) -> str:
        """The sentence in ``lang`` (the current language when None)."""
        lang = _language(lang)
        if lang == "en":
            return str(self)
        return self._render(lang)

    def _render(self, lang: str) -> str:
        from tracer import i18n, zh

        found = zh.PLURALS.get(self.key) if isinstance(self.key, tuple) else zh.MESSAGES.get(self.key)
        if found is None:
            return fill(self._english_template(), self.fields, lang)
        return i18n.spaced(fill(found, self.fields, lang))

    def _english_template(self) -> str:
        return self.template

    def refill(self, **fields: object) -> Message:
        """The same template with some fields given anew (a meaning's norm or activation)."""
        return Message._make(self.template, {**self.fields, **fields})


class Given(Message):
    """A message whose Chinese comes with it, not from the catalogue: an op's record holds its own words."""

    zh: str

    @classmethod
    def _make(cls, template: str, zh: str, fields: dict[str, object]) -> Given:  # type: ignore[override]
        self = str.__new__(cls, fill(template, fields))
        self.template, self.fields, self.zh = template, fields, zh
        return self

    def _args(self) -> tuple[Any, ...]:
        return self.template, self.zh, self.fields

    def refill(self, **fields: object) -> Message:
        return Given._make(self.template, self.zh, {**self.fields, **fields})

    def _render(self, lang: str) -> str:
        from tracer import i18n

        return i18n.spaced(fill(self.zh, self.fields, lang))


class Plural(Message):
    """ngettext: the singular when n == 1, else the plural."""

    singular: str
    plural: str

    @classmethod
    def _make_plural(cls, singular: str, plural: str, fields: dict[str, object]) -> Plural:
        n = fields["n"]
        template = singular if n == 1 else plural
        self = str.__new__(cls, fill(template, fields))
        self.template, self.fields, self.singular, self.plural = template, fields, singular, plural
        return self

    def _args(self) -> tuple[Any, ...]:
        return self.singular, self.plural, self.fields

    @classmethod
    def _make(cls, *args: Any) -> Plural:
        return cls._make_plural(*args)

    @property
    def key(self) -> tuple[str, str]:
        return self.singular, self.plural


class Joined(Message):
    """Messages joined by a separator (sentences by '; ', lines by '\\n'); each rendered on its own."""

    parts: tuple[object, ...]
    sep: str
    keep: bool  # the separator as written in every language (a list of names: 'dims.C, dims.H')

    @classmethod
    def _make(cls, parts: tuple[object, ...], sep: str, keep: bool = False) -> Joined:  # type: ignore[override]
        self = str.__new__(cls, sep.join(str(p) for p in parts))
        self.template, self.fields, self.parts, self.sep, self.keep = "", {}, parts, sep, keep
        return self

    def _args(self) -> tuple[Any, ...]:
        return self.parts, self.sep, self.keep

    def _render(self, lang: str) -> str:
        from tracer import zh

        sep = self.sep if self.keep else zh.SEPARATORS.get(self.sep, self.sep)
        return sep.join(_text(p, lang) for p in self.parts)


class Located(Message):
    """A location kept verbatim ('spec.yaml:4:1', 'block.eps', '--pos 7'), ': ', then the message."""

    where: str
    body: object

    @classmethod
    def _make(cls, where: str, body: object) -> Located:
        self = str.__new__(cls, f"{where}: {body}")
        self.template, self.fields, self.where, self.body = "", {}, where, body
        return self

    def _args(self) -> tuple[Any, ...]:
        return self.where, self.body

    def _render(self, lang: str) -> str:
        return f"{self.where}: {_text(self.body, lang)}"


def msg(template: str, /, **fields: object) -> Message:
    """A message: an English template (a literal, so tests can check the catalogue) and its fields."""
    return Message._make(template, fields)


def given(template: str, zh: str, /, **fields: object) -> Message:
    """A message with its Chinese beside it (``zh``, the same fields): for words a record keeps with itself."""
    return Given._make(template, zh, fields)


def nmsg(singular: str, plural: str, n: int, /, **fields: object) -> Message:
    """A message with plural forms: ``singular`` when n == 1, else ``plural``; ``n`` is a field too."""
    return Plural._make_plural(singular, plural, {"n": n, **fields})


def join(parts: Iterable[object], sep: str = "; ", keep: bool = False) -> Message:
    """Messages (or plain text) joined by ``sep``, each translated on its own; one part is returned as it is.
    ``sep`` is translated too ('; ' -> '；'), unless ``keep`` (a list of names keeps its ', ')."""
    items = tuple(p for p in parts if p != "")
    if len(items) == 1 and isinstance(items[0], Message):
        return items[0]
    return Joined._make(items, sep, keep)


def at(where: object, body: object) -> Message:
    """``where: body``: a location (file:line:col, a field path, an option and its value) kept as it is, but for
    any unprintable character in it (``shown``)."""
    return Located._make(shown(str(where)), body)


_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def shown(text: str) -> str:
    """A path (or any name that comes from outside) as a message may show it: every control, bidirectional or
    other unprintable character written as an escape (\\n, \\x1b, \\u202e), so that a file's name can neither
    break a one-line message, nor drive the terminal, nor reorder what is printed after it."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _ESCAPES.get(c) or c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


def message_of(error: BaseException) -> str:
    """The Message (or plain str) an exception was raised with, for a message that quotes it; else its str."""
    args = error.args
    return args[0] if len(args) == 1 and isinstance(args[0], str) else str(error)


def render(text: object, lang: str | None = None) -> str:
    """What the edge prints: a Message in ``lang`` (the current language when None); a plain str as it is."""
    if isinstance(text, Message):
        return text.render(lang)
    if text is None:
        return ""
    return str(text)
