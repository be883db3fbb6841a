"""The dims section: the sizes a spec gives (C, H, F, ...) and the ones that follow from its input and its tables.

``dims`` needs C, H and F; B, T and S follow from the input, V from the vocab, the embedding table or the largest
token id, T_max from the position table, V_type and K_rel from their tables.  A size given and a size found must
agree, and so must the input and the tables with the dims once they are known.
"""

from __future__ import annotations

from typing import Any

from tracer.messages import msg
from tracer.spec import yamlio
from tracer.spec.checks import Checks
from tracer.spec.inputs import InputSection, token_types
from tracer.spec.keys import DIM_KEYS, MAX_DIM
from tracer.spec.typed import BlockSpec, Dims, InputSpec
from tracer.spec.weight_files import file_rows, table_rows
from tracer.spec.weights import group_yaml_path, lookup
from tracer.spec.yamlio import Path


def given_dims(c: Checks, raw: Any, stacks: list[BlockSpec]) -> tuple[dict[str, int], int | None]:
    """The sizes the spec gives, and the heads' own width (dims.d; None when it is C / H)."""
    dims_raw = c.keys(raw, ("dims",), DIM_KEYS, msg("dimensions"))
    given = {k: c.integer(v, ("dims", k)) for k, v in dims_raw.items()}
    for k in ("C", "H", "F"):
        if k not in given:
            raise c.fail(("dims",), msg("missing dimension {k} (dims needs C, H and F; B, T, V, T_max follow from input and tables)", k=k))
    if "d" not in given and given["C"] % given["H"]:
        raise c.fail(("dims", "H"), msg("H = {H} must divide C = {C} (each head has width d = C / H)", H=given['H'], C=given['C']))
    if "H_kv" in given and given["H"] % given["H_kv"]:
        raise c.fail(("dims", "H_kv"), msg("H_kv = {H_kv} must divide H = {H} (each key/value head serves H / H_kv query heads)",
                                           H_kv=given['H_kv'], H=given['H']))
    head_dim = given.get("d")
    if head_dim is not None and given["C"] % given["H"] == 0 and head_dim == given["C"] // given["H"]:
        head_dim = None  # d = C / H: the plain heads (the same computation, the same weight shapes)
    d = given["C"] // given["H"] if head_dim is None else head_dim
    if any(st.positions == "rotary" and st.rotary_dim is None for st in stacks) and d % 2:
        if head_dim is not None:
            raise c.fail(("dims", "d"), msg("rotary positions rotate pairs of coordinates: d = {x} must be even", x=d))
        raise c.fail(("dims", "H"), msg("rotary positions rotate pairs of coordinates: d = C / H = {x} must be even", x=d))
    return given, head_dim


def dims_of(c: Checks, given: dict[str, int], head_dim: int | None, read: InputSection, model: str, block: BlockSpec,
            encoder: BlockSpec | None, weights_raw: dict[str, Any], vocab: tuple[str, ...] | None) -> tuple[Dims, InputSpec | None]:
    """Every size, given or found (and BERT's token types, whose table gives V_type), each checked against the others."""
    for letter, found in (("B", read.B), ("T", read.T), ("S", read.S)):
        if found is not None and letter in given and given[letter] != found:
            raise c.fail(("dims", letter), msg("{letter} = {given} but the input has {letter} = {found}", letter=letter, given=given[letter], found=found))
    uses_tokens = read.input.kind == "tokens"
    if not uses_tokens and block.head != "none":
        raise c.fail(("block", "head"), msg("an output head needs token input (it scores the vocabulary)"))
    if not uses_tokens and block.embedding_multiplier is not None:
        raise c.fail(("block", "embedding_multiplier"),
                     msg("embedding_multiplier scales the token embeddings: it needs input.tokens (an input x stands for vectors already scaled)"))
    if not uses_tokens and block.embedding_scale:
        raise c.fail(("block", "embedding_scale"),
                     msg("embedding_scale scales the token embeddings: it needs input.tokens (an input x stands for vectors already scaled)"))
    V = vocab_size(c, given, weights_raw, read.max_token, uses_tokens, vocab)
    T_max = None
    if block.positions == "learned" or (encoder is not None and encoder.positions == "learned"):
        T_max = table_rows(c, weights_raw, "position", given.get("T_max"), default=max(read.T, read.S or 0) + block.position_offset)
    elif "T_max" in given:
        T_max = given["T_max"]
    H_kv = given.get("H_kv")
    types, V_type = token_types(c, read.raw_types, block, model, uses_tokens, given, weights_raw, read.B, read.T)
    if "C_e" in given and (model != "decoder" or (not uses_tokens and block.head == "none")):
        raise c.fail(("dims", "C_e"), msg("C_e is the width of a decoder-only model's token embedding, projected to C after it and back before the head: "
                                          "it needs token input or a head"))
    dims = Dims(B=read.B, T=read.T, C=given["C"], H=given["H"], F=given["F"], V=V, T_max=T_max, S=read.S,
                H_kv=None if H_kv == given["H"] else H_kv, V_type=V_type, E=block.experts,  # H_kv = H is plain multi-head attention
                C_e=given.get("C_e"), head_dim=head_dim, K_rel=relative_rows(c, weights_raw, model, block, encoder, given), L=given.get("L"))
    if block.classifier is not None and dims.L is None:
        raise c.fail(("dims",), msg("missing dimension L, the classes of block.classifier's scores (Hugging Face's num_labels)"))
    if block.classifier is None and dims.L is not None:
        raise c.fail(("dims", "L"), msg("L is the classes of a classifier's scores, but the block has no classifier"))
    if block.classifier is not None and block.classifier[2] is not None and not uses_tokens:
        raise c.fail(("block", "classifier", "pad"), msg("classifier.pad passes over the padding tokens of input.tokens: it needs token input"))
    check_fits(c, dims, read, model, block, encoder)
    return dims, types


def check_fits(c: Checks, dims: Dims, read: InputSection, model: str, block: BlockSpec, encoder: BlockSpec | None) -> None:
    """The input and the masks written out fit the dims: every token id below V, rows of x C wide, a mask [T,T]."""
    if read.max_token is not None and dims.V is not None and read.max_token >= dims.V:
        where: Path = ("input", "tokens") if model == "decoder" else ("input",)
        raise c.fail(where, msg("token id {max_token} is out of range: the embedding table has V = {V} rows (ids 0 to {x})",
                                max_token=yamlio.abbreviate(str(read.max_token)), V=dims.V, x=dims.V - 1))
    inp = read.input
    if inp.kind == "x" and inp.value != "random":
        C_in = len(inp.value[0][0])
        if C_in != dims.C:
            raise c.fail(("input", "x"), msg("expected rows of width C = {C}, received rows of width {C_in}", C=dims.C, C_in=C_in))
    for st, sec in ((block, "decoder" if encoder else "block"), (encoder, "encoder")):
        if st is not None and st.mask_matrix is not None:
            n = read.S if sec == "encoder" else read.T
            if len(st.mask_matrix) != n:
                raise c.fail((sec, "mask"), msg("expected a [T,T] = [{n},{n}] mask, received {n2} rows", n=n, n2=len(st.mask_matrix)))


def vocab_size(c: Checks, given: dict[str, int], weights_raw: dict[str, Any], max_token: int | None, uses_tokens: bool,
               vocab: tuple[str, ...] | None) -> int | None:
    """V: the vocab's words, the embedding table's rows, dims.V, else the largest token id + 1."""
    if not uses_tokens:
        if "embedding" in weights_raw:
            raise c.fail(("weights", "embedding"), msg("an embedding table is given but the input is x, not tokens"))
        if vocab is not None:
            raise c.fail(("vocab",), msg("a vocab is given but the input is x, not tokens"))
        return given.get("V")
    if vocab is not None:
        if "V" in given and given["V"] != len(vocab):
            raise c.fail(("dims", "V"), msg("V = {V} but the vocab has {n} words", V=given['V'], n=len(vocab)))
        given = dict(given, V=len(vocab))
    default = None if max_token is None else max_token + 1
    if default is not None and default > MAX_DIM and given.get("V") is None and not isinstance(weights_raw.get("embedding"), list):
        where: Path = ("input", "tokens") if ("input", "tokens") in c.src.marks else ("input",)
        raise c.fail(where, msg("token id {max_token} is out of range: with no embedding table and no dims.V, V is the largest token id + 1, "
                                "at most {MAX_DIM} (ids 0 to {x})",
                                max_token=yamlio.abbreviate(str(max_token)), MAX_DIM=f"{MAX_DIM:,}", x=f"{MAX_DIM - 1:,}"))
    return table_rows(c, weights_raw, "embedding", given.get("V"), default=default, from_vocab=vocab is not None)


def relative_rows(c: Checks, weights_raw: dict[str, Any], model: str, block: BlockSpec, encoder: BlockSpec | None, given: dict[str, int]) -> int | None:
    """K_rel: the rows of the relative-bias tables (each stack's with positions: relative), else dims.K_rel, else the buckets."""
    stacks = [(encoder, "encoder."), (block, "decoder.")] if model == "encoder-decoder" else [(block, "")]
    wanted = [(st, prefix) for st, prefix in stacks if st is not None and st.relative is not None]
    if not wanted:
        if "K_rel" in given:
            raise c.fail_key(("dims", "K_rel"), msg("K_rel is the rows of the relative-bias table: it needs positions: relative"))
        return None
    for _st, prefix in wanted:
        name = prefix + "relative_bias"
        value = lookup(weights_raw, group_yaml_path(name)[1:])
        rows = len(value) if isinstance(value, list) and value else file_rows(c, name, value)
        if rows is not None:
            return rows
    return given.get("K_rel", max(st.relative[0] for st, _ in wanted if st.relative is not None))
