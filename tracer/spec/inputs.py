"""The input section (input:, vocab: and tokenizer:): the tokens, x, or an encoder-decoder's source and target.

Tokens are ids or the vocab's words (as written: ``on`` is a word, not a boolean), or text tokenized with the
spec's tokenizer.json; the targets of tracer grad and BERT's token types are read here too, and checked once the
dimensions they must fit are known.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tracer.errors import UsageError
from tracer.messages import join, msg
from tracer.spec import yamlio
from tracer.spec.checks import Checks, close_matches, did_you_mean, nesting_levels
from tracer.spec.keys import INPUT_KEYS, LOSSES, SEQ2SEQ_INPUT_KEYS
from tracer.spec.typed import BlockSpec, Dims, InputSpec
from tracer.spec.weight_files import confined, spec_dir, table_rows
from tracer.spec.yamlio import Path


class InputSection(NamedTuple):
    """The input section as read: the inputs and their sizes, and what is checked once the dims are known."""

    input: InputSpec  # decoder-only: tokens or x; encoder-decoder: the target tokens
    source: InputSpec | None  # encoder-decoder: the source tokens
    B: int
    T: int
    S: int | None
    max_token: int | None  # the largest token id given (None: no tokens given, or random ones)
    raw_targets: Any  # input.targets as written (checked with the loss, against dims.V)
    raw_types: Any  # input.token_types as written (checked with block.token_types)
    tokenizer: str | None = None  # tokenizer: the tokenizer.json's resolved path
    text: str | None = None  # input.text, as written
    specials_added: tuple[str, ...] = ()  # the special tokens the tokenizer added to the text


def input_section(c: Checks, doc: dict[str, Any], given: dict[str, int], seed: int | None, words: tuple[str, ...] | None,
                  model: str) -> InputSection:
    """input: (with its targets and token types set apart), read with the spec's tokenizer and vocab."""
    if "input" not in doc:
        raise c.fail((), msg("missing required section 'input' (tokens: [...] or x: [[...]])"))
    raw_input, raw_targets, raw_types = doc["input"], None, None
    if isinstance(raw_input, dict) and "targets" in raw_input:
        raw_input = {k: v for k, v in raw_input.items() if k != "targets"}
        raw_targets = doc["input"]["targets"]
    if isinstance(raw_input, dict) and "token_types" in raw_input:
        raw_input = {k: v for k, v in raw_input.items() if k != "token_types"}
        raw_types = doc["input"]["token_types"]
    tokenizer = tokenizer_file(c, doc.get("tokenizer"))
    text: str | None = None
    specials_added: tuple[str, ...] = ()
    if isinstance(raw_input, dict) and "text" in raw_input:
        raw_input, text, specials_added = text_input(c, raw_input, tokenizer)
    elif isinstance(raw_input, dict) and "special" in raw_input:
        raise c.fail_key(("input", "special"), msg("special says whether the tokenizer adds its special tokens to input.text: it needs input.text"))
    if model == "decoder":
        if "S" in given:
            raise c.fail(("dims", "S"), msg("S (source positions) belongs to model: encoder-decoder"))
        inp, B, T, max_token = decoder_input(c, raw_input, given, seed, words)
        source, S = None, None
    else:
        source, inp, B, S, T, max_token = seq2seq_input(c, raw_input, given, seed, words)
    return InputSection(inp, source, B, T, S, max_token, raw_targets, raw_types, tokenizer, text, specials_added)


def tokenizer_file(c: Checks, raw: Any) -> str | None:
    """tokenizer: the path of a tokenizer.json, relative to the spec's folder (as a weight file)."""
    if raw is None:
        return None
    path: Path = ("tokenizer",)
    if not isinstance(raw, str) or not raw:
        raise c.fail(path, msg("expected the path of a tokenizer.json, received {got}", got=c.received(path, raw)))
    confined(c, path, raw)
    from tracer.checkpoints import refs
    from tracer.checkpoints.tokenizer import CheckpointError, load

    file = refs.resolve(spec_dir(c), raw)
    try:
        load(file)
    except (CheckpointError, UsageError) as e:
        raise c.fail(path, e.message) from None
    return file


def text_input(c: Checks, raw: dict[str, Any], tokenizer: str | None) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    """input: {text: "...", special: false}: the text tokenized with the spec's tokenizer, as input.tokens
    (and the text, and the special tokens the tokenizer added to it)."""
    path: Path = ("input", "text")
    text = raw["text"]
    if not isinstance(text, str) or not text:
        raise c.fail(path, msg("expected the text to tokenize, received {got}", got=c.received(path, text)))
    if "tokens" in raw or "x" in raw:
        raise c.fail(("input",), msg("give exactly one of tokens (ids into weights.embedding) or x (a [T,C] or [B,T,C] matrix)"))
    if tokenizer is None:
        raise c.fail(path, msg("input.text is tokenized with the checkpoint's own tokenizer: add tokenizer: tokenizer.json (its path, relative to this spec)"))
    special = c.boolean(raw.get("special", True), ("input", "special"))
    from tracer.checkpoints.tokenizer import CheckpointError, encode, load

    try:
        enc = encode(load(tokenizer), text, special)
    except (CheckpointError, UsageError) as e:
        raise c.fail(path, e.message) from None
    if not enc.ids:
        raise c.fail(path, msg("the tokenizer makes no token of this text"))
    return {k: v for k, v in raw.items() if k not in ("text", "special")} | {"tokens": list(enc.ids)}, text, enc.added


def decoder_input(c: Checks, raw: Any, given: dict[str, int], seed: int | None, words: tuple[str, ...] | None) -> tuple[InputSpec, int, int, int | None]:
    raw = c.keys(raw, ("input",), INPUT_KEYS, msg("input"))
    if len(raw) != 1:
        raise c.fail(("input",), msg("give exactly one of tokens (ids into weights.embedding) or x (a [T,C] or [B,T,C] matrix)"))
    kind, value = next(iter(raw.items()))
    path: Path = ("input", kind)
    if value == "random":
        if seed is None:
            raise c.fail(path, msg("'random' input needs a seed (add seed: 0)"))
        if "T" not in given:
            raise c.fail(("dims",), msg("'random' input needs dims.T"))
        return InputSpec(kind, "random"), given.get("B", 1), given["T"], None
    if kind == "tokens":
        rows, (B, T) = token_ids(c, value, path, words)
        return InputSpec("tokens", rows), B, T, max(t for r in rows for t in r)
    rows = c.nested(value, path, want_int=False)
    shape = c.rect(rows, path)
    if len(shape) == 2:
        rows, shape = [rows], (1,) + shape
    if len(shape) != 3:
        raise c.fail(path, msg("expected a [T,C] or [B,T,C] matrix, received {shape}", shape=nesting_levels(shape)))
    return InputSpec("x", rows), shape[0], shape[1], None


def seq2seq_input(c: Checks, raw: Any, given: dict[str, int], seed: int | None, words: tuple[str, ...] | None
                  ) -> tuple[InputSpec, InputSpec, int, int, int, int | None]:
    raw = c.keys(raw, ("input",), SEQ2SEQ_INPUT_KEYS, msg("encoder-decoder input"))
    found: dict[str, tuple[InputSpec, int, int]] = {}
    max_token: int | None = None
    for key, letter in (("source", "S"), ("target", "T")):
        if key not in raw:
            raise c.fail(("input",), msg("an encoder-decoder needs input.{key} (token ids or words)", key=key))
        value, path = raw[key], ("input", key)
        if value == "random":
            if seed is None:
                raise c.fail(path, msg("'random' input needs a seed (add seed: 0)"))
            if letter not in given:
                raise c.fail(("dims",), msg("'random' {key} tokens need dims.{letter}", key=key, letter=letter))
            found[key] = (InputSpec("tokens", "random"), given.get("B", 1), given[letter])
            continue
        rows, (B, n) = token_ids(c, value, path, words)
        found[key] = (InputSpec("tokens", rows), B, n)
        top = max(t for r in rows for t in r)
        max_token = top if max_token is None else max(max_token, top)
    (src, B_s, S), (tgt, B_t, T) = found["source"], found["target"]
    if B_s != B_t:
        raise c.fail(("input", "target"), msg("source has B = {B_s} samples but target has B = {B_t}", B_s=B_s, B_t=B_t))
    return src, tgt, B_s, S, T, max_token


def vocab_list(c: Checks, raw: Any) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """vocab: the words tokens may be written as: (the words as labels print them, the words as written)."""
    if raw is None:
        return None, None
    p: Path = ("vocab",)
    if not isinstance(raw, list) or not raw:
        got = msg("an empty list") if raw == [] else c.received(p, raw)
        raise c.fail(p, msg("expected a non-empty list of words, received {got}", got=got))
    seen: dict[str, int] = {}
    for i, w in enumerate(raw):
        if isinstance(w, (int, float)) and not isinstance(w, bool):
            # tokens: [1, 2] are ids, so a word that reads as a number could never be written as a token
            raise c.fail(p + (i,), msg("expected a word (text), received the number {got}; quote it ('{w}') if it is a word: "
                                       "unquoted numbers in tokens are ids", got=c.received(p + (i,), w), w=c.src.raw.get(p + (i,), w)))
        if not isinstance(w, (str, bool)):
            raise c.fail(p + (i,), msg("expected a word, received {got}", got=c.received(p + (i,), w)))
        word = c.src.raw.get(p + (i,), str(w))  # a word as written: 'on' is a word here
        if word in seen:
            raise c.fail(p + (i,), join([msg("{word} is already word {n}", word=repr(word), n=seen[word]), msg("each word needs its own id")]))
        seen[word] = i
    return tuple(map(yamlio.printable, seen)), tuple(seen)  # what labels print; tokens are looked up by the words as written


def token_ids(c: Checks, value: Any, path: Path, words: tuple[str, ...] | None) -> tuple[list[list[int]], tuple[int, int]]:
    """Token ids [B][T] from ids or words (``words``: the spec's vocab as written, None without one)."""
    index = {w: i for i, w in enumerate(words)} if words else {}

    def convert(v: Any, p: Path) -> Any:
        if isinstance(v, list):
            if not v:
                raise c.fail(p, msg("expected token ids or words, received an empty list"))
            return [convert(item, p + (i,)) for i, item in enumerate(v)]
        return token_id(c, v, p, words, index)

    rows = convert(value, path)
    shape = c.rect(rows, path)
    if len(shape) == 1:
        rows, shape = [rows], (1,) + shape
    if len(shape) != 2:
        raise c.fail(path, msg("expected a list of token ids [T] or one list per sample [B,T], received {shape}", shape=nesting_levels(shape)))
    return rows, (shape[0], shape[1])


def token_id(c: Checks, v: Any, p: Path, words: tuple[str, ...] | None, index: dict[str, int]) -> int:
    """One token: an id (0 or more), or a word of the vocab as written (``yes`` and ``on`` are words then)."""
    word = c.src.raw.get(p)
    if isinstance(v, bool) and (words is None or word not in index):
        what = msg("a token id or a word of the vocab") if words else msg("a whole number (token id)")
        raise c.fail(p, msg("expected {what}, received {got}", what=what, got=c.received(p, v)))
    if words is not None and (isinstance(v, (str, bool)) or (word is not None and word in index and not isinstance(v, int))):
        w = word if word is not None else str(v)
        if w not in index:
            close = close_matches(w, list(index), n=1, cutoff=0.5)
            hint = did_you_mean(close, msg("the vocab has {n} words", n=len(index)))
            raise c.fail(p, join([msg("{w} is not in the vocab", w=repr(w)), hint]))
        return index[w]
    if isinstance(v, int):
        if v < 0:
            raise c.fail(p, msg("token ids must be 0 or more, received {v}", v=v))
        return v
    if words:
        raise c.fail(p, msg("expected a token id or a word of the vocab, received {got}", got=c.received(p, v)))
    if isinstance(v, str):
        raise c.fail(p, msg("expected {what}, received {got} (add a vocab list to write tokens as words)", what=msg("a whole number (token id)"),
                            got=c.received(p, v)))
    raise c.fail(p, msg("expected {what}, received {got}", what=msg("a whole number (token id)"), got=c.received(p, v)))


def token_types(c: Checks, raw: Any, block: BlockSpec, model: str, uses_tokens: bool, given: dict[str, int],
                weights_raw: dict[str, Any], B: int, T: int) -> tuple[InputSpec | None, int | None]:
    """input.token_types (BERT's segment ids, [B,T]; zeros when not given) and V_type, the rows of their table."""
    path: Path = ("input", "token_types")
    if not block.token_types:
        if raw is not None:
            raise c.fail_key(path, msg("token types are given but block.token_types is false (a token-type table needs token_types: true)"))
        if "V_type" in given:
            raise c.fail_key(("dims", "V_type"), msg("V_type is the rows of the token-type table: it needs block.token_types: true"))
        return None, None
    if model != "decoder" or not uses_tokens:
        raise c.fail(("block", "token_types"), msg("token types are added to token embeddings: they need input.tokens (and a decoder-only model)"))
    if raw is None:
        rows = [[0] * T for _ in range(B)]
    else:
        rows, shape = token_ids(c, raw, path, None)
        if shape != (B, T):
            raise c.fail(path, msg("expected one token type per sample and position [B,T] = [{B},{T}], received [{b},{t}]", B=B, T=T, b=shape[0], t=shape[1]))
    top = max(t for r in rows for t in r)
    V_type = table_rows(c, weights_raw, "token_type", given.get("V_type"), default=max(2, top + 1))
    if top >= V_type:
        raise c.fail(path, msg("token type {top} is out of range: the token-type table has V_type = {V} rows (types 0 to {x})",
                               top=top, V=V_type, x=V_type - 1))
    return InputSpec("tokens", rows), V_type


def loss_fields(c: Checks, doc: dict[str, Any], raw_targets: Any, dims: Dims, has_head: bool, model: str,
                words: tuple[str, ...] | None) -> tuple[str | None, tuple[tuple[int, ...], ...] | None]:
    """loss: and input.targets, for tracer grad; next-token needs the output head."""
    loss = None
    if doc.get("loss") is not None:
        loss = c.choice(doc["loss"], ("loss",), LOSSES)
        if loss == "next-token" and not has_head:
            where = "decoder" if model == "encoder-decoder" else "block"
            raise c.fail(("loss",), msg("next-token scores the vocabulary: it needs an output head ({where}.head: tied or separate)", where=where))
    if raw_targets is None:
        return loss, None
    path: Path = ("input", "targets")
    if not has_head:
        raise c.fail(path, msg("targets are the tokens next-token predicts: they need an output head (block.head)"))
    rows, shape = token_ids(c, raw_targets, path, words)
    if shape != (dims.B, dims.T):
        raise c.fail(path, msg("expected one target id per sample and position [B,T] = [{B},{T}], received [{shape},{shape2}]",
                               B=dims.B, T=dims.T, shape=shape[0], shape2=shape[1]))
    assert dims.V is not None
    top = max(t for r in rows for t in r)
    if top >= dims.V:
        raise c.fail(path, msg("token id {top} is out of range: the vocabulary has V = {V} ids (0 to {x})", top=top, V=dims.V, x=dims.V - 1))
    return loss, tuple(tuple(r) for r in rows)
