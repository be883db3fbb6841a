"""A checkpoint's own tokenizer (``tokenizer.json``): text to token ids, and each id back to readable text.

A spec names the file (``tokenizer: tokenizer.json``, relative to the spec, as a weight file is); ``input: {text:
"..."}`` is then tokenized with it, and every view shows the tokens as text beside their ids.  The ``tokenizers``
package (the ``checkpoints`` extra) reads the file; a spec with neither a tokenizer nor text never imports it.

The file is untrusted: it is opened only if it is a regular file and not a symbolic link (tracer made no link, so
it follows none), read bounded in size, its JSON checked for depth before it is parsed, and anything the
``tokenizers`` library refuses (or panics on) is a CheckpointError (exit 2) in one line, never a traceback.

``piece`` shows one id as text: the tokenizer's own decoding when it gives whole characters (a byte-level BPE's
``Ġthe`` is `` the``, ``æĪĳ`` is 我), else the bytes that are not whole characters as ``<0xE6>``.  Nothing here
imports NumPy.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer import reading
from tracer.errors import CheckpointError, InputRefused, UsageError
from tracer.messages import at, msg

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MAX_TOKENIZER_BYTES = 256 * 2**20  # the largest real tokenizer.json files are tens of MB
MAX_TOKENIZER_DEPTH = 64  # a tokenizer.json nests a few levels (a normalizer's sequence, a template's pieces)
MAX_TEXT_CHARS = 1_000_000


class Encoded(NamedTuple):
    ids: tuple[int, ...]
    pieces: tuple[str, ...]  # each id as readable text (``piece``)
    added: tuple[str, ...]  # the special tokens the post-processor added (BOS, EOS, ...), as text


def _library() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise UsageError(msg("reading a tokenizer.json needs the tokenizers package: pip install 'tracer[checkpoints]' (or pip install tokenizers)")) from None
    return tokenizers


def _refused(path: str, why: str) -> CheckpointError:
    return CheckpointError(at(path, msg("not a tokenizer tracer can read: {why}", why=why)))


@lru_cache(maxsize=8)
def _load(path: str, size: int, mtime: int) -> Tokenizer:
    lib = _library()
    try:
        data = reading.read_bytes(path, MAX_TOKENIZER_BYTES, msg("a tokenizer.json"))
        reading.json_value(data, msg("a tokenizer.json"), depth=MAX_TOKENIZER_DEPTH, finite=False)  # bounded before the library parses it
    except InputRefused as e:
        raise CheckpointError(at(path, e.message)) from None
    try:
        tok = lib.Tokenizer.from_str(data.decode("utf-8"))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # the library's errors, and a Rust panic (pyo3's PanicException is a BaseException)
        raise _refused(path, " ".join(str(e).split())[:200] or type(e).__name__) from None
    return tok


def load(path: str) -> Tokenizer:
    """The tokenizer at ``path`` (cached while the file is unchanged); CheckpointError if it cannot be read."""
    from tracer.files import note_input

    try:
        st = os.stat(path)  # through a link, as a weight file is read (a Hugging Face cache's files are links)
    except FileNotFoundError:
        raise CheckpointError(at(path, msg("no such file"))) from None
    except (OSError, ValueError) as e:
        raise CheckpointError(at(path, msg("cannot read: {x}", x=getattr(e, "strerror", None) or type(e).__name__))) from None
    tok = _load(path, st.st_size, st.st_mtime_ns)
    note_input(path)
    return tok


def encode(tok: Tokenizer, text: str, special: bool = True) -> Encoded:
    """``text`` as token ids, with the special tokens the tokenizer's post-processor adds (``special``)."""
    if len(text) > MAX_TEXT_CHARS:
        raise UsageError(msg("the text has {n} characters, more than the {most} tracer tokenizes", n=len(text), most=MAX_TEXT_CHARS))
    try:
        enc = tok.encode(text, add_special_tokens=special)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        raise UsageError(msg("the tokenizer could not encode the text: {why}", why=" ".join(str(e).split())[:200])) from None
    ids = tuple(int(i) for i in enc.ids)
    plain = tok.encode(text, add_special_tokens=False).ids
    specials = set(special_ids(tok))
    added = tuple(piece(tok, i) for i, m in zip(ids, enc.special_tokens_mask) if m and i in specials) if len(ids) != len(plain) else ()
    return Encoded(ids, tuple(piece(tok, i) for i in ids), added)


def special_ids(tok: Tokenizer) -> list[int]:
    return [i for i, t in tok.get_added_tokens_decoder().items() if t.special]


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet reversed: the printable character each byte is written as -> the byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars)}


BYTE_DECODER = _byte_decoder()


def _bytes_text(data: bytes) -> str:
    """Bytes as text: whole UTF-8 characters as themselves, every other byte as <0xE6>."""
    text = data.decode("utf-8", errors="surrogateescape")
    return "".join(f"<0x{ord(c) - 0xDC00:02X}>" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)


def printable(text: str) -> str:
    """Control characters as escapes (a newline piece is \\n): a piece never breaks a line or a table."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def piece(tok: Tokenizer, i: int) -> str:
    """Token id ``i`` as readable text (see the module's docstring); ``<id 123>`` for an id the tokenizer lacks."""
    token = tok.id_to_token(i)
    if token is None:
        return f"<id {i}>"
    if i in set(special_ids(tok)):
        return printable(token)
    text = tok.decode([i], skip_special_tokens=False)
    if "\ufffd" not in text and text:
        return printable(text)
    if token and all(c in BYTE_DECODER for c in token):  # a byte-level BPE piece: its bytes
        return printable(_bytes_text(bytes(BYTE_DECODER[c] for c in token)))
    return printable(token)


def find(tok: Tokenizer, word: str) -> int | None:
    """The id of ``word`` as one token: the piece whose text is ``word`` (with or without a leading space), else None."""
    direct = tok.token_to_id(word)
    if direct is not None:
        return int(direct)
    for text in (word, " " + word):
        ids = tok.encode(text, add_special_tokens=False).ids
        if len(ids) == 1:
            return int(ids[0])
    return None


def token_id(path: str, word: str, V: int) -> int:
    """--token WORD of a spec with ``tokenizer: path``: its id below V, or a UsageError (lens, diff and patch read it so)."""
    found = find(load(path), word)
    if found is not None and found < V:
        return found
    raise UsageError(msg("--token {token}: the tokenizer has no single token with this text (give its id instead)", token=repr(word)))
