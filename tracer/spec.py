"""The spec: typed, validated data describing one block and its input.

Validation runs once, here, at the edge.  Every error names the file, line and
column, the field path, what was expected and what was received.  Nothing here
imports NumPy, so ``tracer validate`` and ``--help`` stay fast.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

from . import yamlio
from .blocks import Step, block_steps
from .errors import SpecError
from .yamlio import Path, Source, format_path

MAX_DIM = 10_000_000
KEYWORDS = ("identity", "zeros", "ones", "random")

TOP_KEYS = ("name", "description", "dims", "block", "input", "weights", "seed", "dtype", "allow_nonfinite")
DIM_KEYS = ("B", "T", "C", "H", "F", "V", "T_max")
BLOCK_KEYS = ("norm_order", "mask", "eps", "final_norm", "positions")
INPUT_KEYS = ("tokens", "x")
NORM_KEYS = {"gamma": ("C",), "beta": ("C",)}
WEIGHT_GROUPS: dict[str, dict[str, tuple[str, ...]]] = {
    "attn": {
        "w_q": ("C", "C"), "w_k": ("C", "C"), "w_v": ("C", "C"), "w_o": ("C", "C"),
        "b_q": ("C",), "b_k": ("C",), "b_v": ("C",), "b_o": ("C",),
    },
    "ffn": {"w1": ("C", "F"), "b1": ("F",), "w2": ("F", "C"), "b2": ("C",)},
    "norm1": NORM_KEYS,
    "norm2": NORM_KEYS,
    "final_norm": NORM_KEYS,
}
TABLES = {"embedding": ("V", "C"), "position": ("T_max", "C")}
# Not given: biases and beta start at zero, gamma at one (the usual init); the rest comes from the seed.
DEFAULT_FILL = {"b_q": "zeros", "b_k": "zeros", "b_v": "zeros", "b_o": "zeros", "b1": "zeros", "b2": "zeros",
                "gamma": "ones", "beta": "zeros"}


@dataclass(frozen=True)
class Dims:
    B: int
    T: int
    C: int
    H: int
    F: int
    V: int | None
    T_max: int | None

    @property
    def d(self) -> int:
        return self.C // self.H

    def size(self, letter: str) -> int:
        value = self.d if letter == "d" else getattr(self, letter)
        if value is None:
            raise KeyError(letter)
        return int(value)

    def as_dict(self) -> dict[str, int]:
        out = {k: getattr(self, k) for k in DIM_KEYS if getattr(self, k) is not None}
        out["d"] = self.d
        return out


@dataclass(frozen=True)
class BlockSpec:
    norm_order: str  # pre | post
    mask: str  # causal | none
    eps: float
    final_norm: bool
    positions: str  # learned | none


@dataclass(frozen=True)
class Weight:
    """One weight as the spec gives it: a nested list, a keyword, or 'seed'."""

    path: str  # e.g. "ffn.w1"
    axes: tuple[str, ...]  # e.g. ("C", "F")
    shape: tuple[int, ...]  # the shape the contract wants
    source: str  # "given" | "identity" | "zeros" | "ones" | "seed"
    value: Any = None  # nested list when source == "given"
    given_shape: tuple[int, ...] | None = None  # shape as given (may differ if NumPy could broadcast it)


@dataclass(frozen=True)
class InputSpec:
    kind: str  # tokens | x
    value: Any  # nested list [B][T] of ints, [B][T][C] of floats, or "random"


@dataclass(frozen=True)
class Spec:
    path: str
    name: str
    dims: Dims
    block: BlockSpec
    input: InputSpec
    weights: dict[str, Weight]
    seed: int | None
    dtype: str
    steps: tuple[Step, ...]

    def axes_shape(self, axes: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(self.dims.size(a) for a in axes)


def load_spec(path: str) -> Spec:
    text = yamlio.read_text(path)
    doc, src = yamlio.load(text, path)
    return _Validator(src).spec(doc)


def load_spec_text(text: str, filename: str = "<spec>") -> Spec:
    doc, src = yamlio.load(text, filename)
    return _Validator(src).spec(doc)


def shape_label(axes: tuple[str, ...], shape: tuple[int, ...]) -> str:
    return f"[{','.join(axes)}] = [{','.join(str(n) for n in shape)}]"


def _broadcastable(given: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """Would NumPy silently stretch ``given`` to ``want``?"""
    if len(given) > len(want):
        return False
    return all(g == w or g == 1 for g, w in zip(reversed(given), reversed(want)))


class _Validator:
    def __init__(self, src: Source) -> None:
        self.src = src

    # -- messages ---------------------------------------------------------
    def fail(self, path: Path, message: str) -> SpecError:
        return SpecError(f"{self.src.where(path)}: {format_path(path)}: {message}")

    def received(self, path: Path, value: Any) -> str:
        raw = self.src.raw.get(path)
        if isinstance(value, bool):
            return f"boolean {raw!r}" if raw is not None else f"boolean {value}"
        if isinstance(value, dict):
            return "a mapping"
        if isinstance(value, list):
            return "a list"
        if value is None:
            return "nothing (null)"
        if isinstance(value, str):
            return f"text {value!r}"
        return repr(raw if raw is not None else value)

    def keys(self, mapping: Any, path: Path, allowed: tuple[str, ...] | list[str], what: str) -> dict[str, Any]:
        if not isinstance(mapping, dict):
            raise self.fail(path, f"expected a mapping of {what}, received {self.received(path, mapping)}")
        for key in mapping:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
                raise SpecError(f"{self.src.where_key(path + (key,))}: {format_path(path + (key,))}: unknown key {key!r}{hint}")
        return mapping

    def integer(self, value: Any, path: Path, lo: int = 1, hi: int = MAX_DIM) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer() and not isinstance(value, bool):
                value = int(value)
            else:
                raise self.fail(path, f"expected a whole number, received {self.received(path, value)}")
        if not lo <= value <= hi:
            raise self.fail(path, f"expected a whole number from {lo} to {hi:,}, received {value}")
        return value

    def choice(self, value: Any, path: Path, options: tuple[str, ...]) -> str:
        if value not in options:
            raise self.fail(path, f"expected one of {' | '.join(options)}, received {self.received(path, value)}")
        return str(value)

    # -- the document -----------------------------------------------------
    def spec(self, doc: dict[str, Any]) -> Spec:
        self.keys(doc, (), TOP_KEYS, "spec sections")
        if "dims" not in doc:
            raise self.fail((), "missing required section 'dims' (e.g. dims: {C: 2, H: 2, F: 3})")
        name = doc.get("name", self.src.filename)
        if not isinstance(name, str):
            raise self.fail(("name",), f"expected text, received {self.received(('name',), name)}")
        seed = None
        if doc.get("seed") is not None:
            seed = self.integer(doc["seed"], ("seed",), 0, 2**63 - 1)
        dtype = self.choice(doc.get("dtype", "float64"), ("dtype",), ("float64", "float32"))
        allow_nonfinite = doc.get("allow_nonfinite", False)
        if not isinstance(allow_nonfinite, bool):
            raise self.fail(("allow_nonfinite",), f"expected true or false, received {self.received(('allow_nonfinite',), allow_nonfinite)}")
        self.allow_nonfinite = allow_nonfinite

        block = self.block(doc.get("block", {}), doc.get("weights") or {})
        dims_raw = self.keys(doc["dims"], ("dims",), DIM_KEYS, "dimensions")
        given = {k: self.integer(v, ("dims", k)) for k, v in dims_raw.items()}
        for k in ("C", "H", "F"):
            if k not in given:
                raise self.fail(("dims",), f"missing dimension {k} (dims needs C, H and F; B, T, V, T_max follow from input and tables)")
        if given["C"] % given["H"]:
            raise self.fail(("dims", "H"), f"H = {given['H']} must divide C = {given['C']} (each head has width d = C / H)")

        weights_raw = doc.get("weights")
        if weights_raw is None:
            weights_raw = {}
        weights_raw = self.keys(weights_raw, ("weights",), tuple(TABLES) + tuple(WEIGHT_GROUPS), "weights")
        if "input" not in doc:
            raise self.fail((), "missing required section 'input' (tokens: [...] or x: [[...]])")
        inp, B, T, max_token = self.input(doc["input"], given, seed, weights_raw)
        for letter, found in (("B", B), ("T", T)):
            if letter in given and given[letter] != found:
                raise self.fail(("dims", letter), f"{letter} = {given[letter]} but the input has {letter} = {found}")
        V = self.vocab(given, weights_raw, max_token, inp.kind == "tokens", seed)
        T_max = None
        if block.positions == "learned":
            T_max = self.table_rows(weights_raw, "position", given.get("T_max"), default=T)
        elif "T_max" in given:
            T_max = given["T_max"]
        dims = Dims(B=B, T=T, C=given["C"], H=given["H"], F=given["F"], V=V, T_max=T_max)
        if max_token is not None and V is not None and max_token >= V:
            path = ("input", "tokens")
            raise self.fail(path, f"token id {max_token} is out of range: the embedding table has V = {V} rows (ids 0 to {V - 1})")
        if inp.kind == "x" and inp.value != "random":
            C_in = len(inp.value[0][0])
            if C_in != dims.C:
                raise self.fail(("input", "x"), f"expected rows of width C = {dims.C}, received rows of width {C_in}")

        weights = self.weights(weights_raw, dims, block, inp.kind, seed)
        return Spec(
            path=self.src.filename, name=name, dims=dims, block=block, input=inp, weights=weights,
            seed=seed, dtype=dtype, steps=block_steps(block.norm_order, block.final_norm),
        )

    def block(self, raw: Any, weights_raw: Any) -> BlockSpec:
        raw = self.keys(raw if raw is not None else {}, ("block",), BLOCK_KEYS, "block settings")
        p = ("block",)
        norm_order = self.choice(raw.get("norm_order", "pre"), p + ("norm_order",), ("pre", "post"))
        mask = self.choice(raw.get("mask", "causal"), p + ("mask",), ("causal", "none"))
        eps = raw.get("eps", 1e-5)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
            raise self.fail(p + ("eps",), f"expected a positive number such as 1e-5, received {self.received(p + ('eps',), eps)}")
        final_norm = raw.get("final_norm", False)
        if not isinstance(final_norm, bool):
            raise self.fail(p + ("final_norm",), f"expected true or false, received {self.received(p + ('final_norm',), final_norm)}")
        has_table = isinstance(weights_raw, dict) and "position" in weights_raw
        positions = self.choice(raw.get("positions", "learned" if has_table else "none"), p + ("positions",), ("learned", "none"))
        return BlockSpec(norm_order, mask, float(eps), final_norm, positions)

    def input(self, raw: Any, given: dict[str, int], seed: int | None, weights_raw: dict[str, Any]) -> tuple[InputSpec, int, int, int | None]:
        raw = self.keys(raw, ("input",), INPUT_KEYS, "input")
        if len(raw) != 1:
            raise self.fail(("input",), "give exactly one of tokens (ids into weights.embedding) or x (a [T,C] or [B,T,C] matrix)")
        kind, value = next(iter(raw.items()))
        path: Path = ("input", kind)
        if value == "random":
            if seed is None:
                raise self.fail(path, "'random' input needs a seed (add seed: 0)")
            if "T" not in given:
                raise self.fail(("dims",), "'random' input needs dims.T")
            return InputSpec(kind, "random"), given.get("B", 1), given["T"], None
        if kind == "tokens":
            rows = self.nested(value, path, want_int=True)
            shape = self.rect(rows, path)
            if len(shape) == 1:
                rows, shape = [rows], (1,) + shape
            if len(shape) != 2:
                raise self.fail(path, f"expected a list of token ids [T] or one list per sample [B,T], received {len(shape)} levels of nesting")
            flat = [t for r in rows for t in r]
            if min(flat) < 0:
                raise self.fail(path, f"token ids must be 0 or more, received {min(flat)}")
            return InputSpec("tokens", rows), shape[0], shape[1], max(flat)
        rows = self.nested(value, path, want_int=False)
        shape = self.rect(rows, path)
        if len(shape) == 2:
            rows, shape = [rows], (1,) + shape
        if len(shape) != 3:
            raise self.fail(path, f"expected a [T,C] or [B,T,C] matrix, received {len(shape)} levels of nesting")
        return InputSpec("x", rows), shape[0], shape[1], None

    def vocab(self, given: dict[str, int], weights_raw: dict[str, Any], max_token: int | None, uses_tokens: bool, seed: int | None) -> int | None:
        if not uses_tokens:
            if "embedding" in weights_raw:
                raise self.fail(("weights", "embedding"), "an embedding table is given but the input is x, not tokens")
            return given.get("V")
        default = None if max_token is None else max_token + 1
        return self.table_rows(weights_raw, "embedding", given.get("V"), default=default)

    def table_rows(self, weights_raw: dict[str, Any], name: str, declared: int | None, default: int | None) -> int:
        letter = TABLES[name][0]
        value = weights_raw.get(name)
        if isinstance(value, list) and value:
            rows = len(value)
            if declared is not None and declared != rows:
                raise self.fail(("weights", name), f"table has {rows} rows but dims.{letter} = {declared}")
            return rows
        if declared is not None:
            return declared
        if default is None:
            raise self.fail(("dims",), f"dims.{letter} is needed to draw weights.{name} from the seed")
        return default

    # -- weights ----------------------------------------------------------
    def weights(self, raw: dict[str, Any], dims: Dims, block: BlockSpec, input_kind: str, seed: int | None) -> dict[str, Weight]:
        wanted: list[tuple[str, dict[str, tuple[str, ...]] | tuple[str, ...]]] = []
        if input_kind == "tokens":
            wanted.append(("embedding", TABLES["embedding"]))
        if block.positions == "learned":
            wanted.append(("position", TABLES["position"]))
        elif "position" in raw:
            raise self.fail(("weights", "position"), "a position table is given but block.positions is none")
        for group in ("norm1", "attn", "norm2", "ffn") + (("final_norm",) if block.final_norm else ()):
            wanted.append((group, WEIGHT_GROUPS[group]))
        if "final_norm" in raw and not block.final_norm:
            raise self.fail(("weights", "final_norm"), "final_norm weights are given but block.final_norm is false")

        out: dict[str, Weight] = {}
        for name, spec in wanted:
            if isinstance(spec, tuple):
                out[name] = self.weight(raw.get(name), ("weights", name), name, spec, dims, seed)
                continue
            group = raw.get(name)
            if group is None:
                group = {}
            group = self.keys(group, ("weights", name), tuple(spec), f"{name} weights")
            for key, axes in spec.items():
                out[f"{name}.{key}"] = self.weight(group.get(key), ("weights", name, key), f"{name}.{key}", axes, dims, seed, DEFAULT_FILL.get(key))
        return out

    def weight(self, value: Any, path: Path, name: str, axes: tuple[str, ...], dims: Dims, seed: int | None, fill: str | None = None) -> Weight:
        want = tuple(dims.size(a) for a in axes)
        label = shape_label(axes, want)
        if value is None:
            if fill is not None:
                return Weight(name, axes, want, fill)
            if seed is None:
                raise self.fail(path, f"missing weight {name} {label}, and there is no seed to draw it from (give it, or add seed: 0)")
            return Weight(name, axes, want, "seed")
        if isinstance(value, str):
            word = self.choice(value, path, KEYWORDS)
            if word == "identity" and (len(want) != 2 or want[0] != want[1]):
                raise self.fail(path, f"identity needs a square matrix, but {name} is {label}")
            if word == "random":
                if seed is None:
                    raise self.fail(path, "'random' needs a seed (add seed: 0)")
                word = "seed"
            return Weight(name, axes, want, word)
        rows = self.nested(value, path, want_int=False)
        shape = self.rect(rows, path)
        if name == "position":
            if len(shape) != 2 or shape[1] != dims.C:
                raise self.fail(path, f"expected [T_max,C] = [T_max,{dims.C}], received {_fmt(shape)}")
            return Weight(name, axes, shape, "given", rows, shape)
        if shape != want:
            # A vector NumPy would stretch (beta: [0] for [C]) is let through: the kernel flags it as a
            # broadcast violation, because that is exactly the mistake NumPy would have accepted.
            if len(want) == 1 and _broadcastable(shape, want):
                return Weight(name, axes, want, "given", rows, shape)
            raise self.fail(path, f"expected {label}, received {_fmt(shape)}")
        return Weight(name, axes, want, "given", rows, shape)

    # -- nested lists -----------------------------------------------------
    def nested(self, value: Any, path: Path, want_int: bool) -> Any:
        """Check every leaf is a number (an int for token ids); return the value."""
        if isinstance(value, list):
            if not value:
                raise self.fail(path, "expected numbers, received an empty list")
            for i, item in enumerate(value):
                self.nested(item, path + (i,), want_int)
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            what = "a whole number (token id)" if want_int else "a number"
            raise self.fail(path, f"expected {what}, received {self.received(path, value)}")
        if want_int and not isinstance(value, int):
            raise self.fail(path, f"expected a whole number (token id), received {value!r}")
        if not want_int and not math.isfinite(value) and not self.allow_nonfinite:
            raise self.fail(path, f"received {value} (not finite); add allow_nonfinite: true to study NaN and Inf on purpose")
        return value

    def rect(self, value: Any, path: Path) -> tuple[int, ...]:
        """Shape of a rectangular nested list; ragged lists are errors naming the row."""
        if not isinstance(value, list):
            return ()
        shapes = [self.rect(item, path + (i,)) for i, item in enumerate(value)]
        first = shapes[0]
        for i, s in enumerate(shapes):
            if s != first:
                raise self.fail(path + (i,), f"ragged: row {i} has shape {_fmt(s)} but row 0 has {_fmt(first)}")
        return (len(value),) + first


def _fmt(shape: tuple[int, ...]) -> str:
    return "a single number" if not shape else "[" + ",".join(str(n) for n in shape) + "]"
