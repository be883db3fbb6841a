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
from .blocks import GROUP_KEYS, OPS, Shape, Step, block_steps, internal_prefix, output_shape, with_final_norm
from .errors import SpecError
from .yamlio import Path, Source, format_path

MAX_DIM = 10_000_000
KEYWORDS = ("identity", "zeros", "ones", "random")

TOP_KEYS = ("name", "description", "dims", "block", "input", "weights", "seed", "dtype", "allow_nonfinite")
DIM_KEYS = ("B", "T", "C", "H", "F", "V", "T_max")
BLOCK_KEYS = ("norm_order", "steps", "mask", "eps", "final_norm", "positions")
INPUT_KEYS = ("tokens", "x")
STEP_KEYS = ("name", "op", "in", "weights", "axis", "start", "stop", "index", "out", "meaning")
RESERVED_STAGES = ("embed", "input", "position", "x")
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
    norm_order: str  # pre | post | custom (block.steps given)
    mask: str  # causal | none | explicit (mask_matrix given)
    eps: float
    final_norm: bool
    positions: str  # learned | none
    mask_matrix: tuple[tuple[bool, ...], ...] | None = None  # [T,T], True where query i may read key j


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
    stage_shapes: dict[str, Shape]  # every stage's axes and sizes, inferred before running

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
                raise self.fail(path + (key,), f"unknown key {key!r}{hint}")
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

        block, steps_raw = self.block(doc.get("block", {}), doc.get("weights") or {})
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
        if not isinstance(weights_raw, dict):
            raise self.fail(("weights",), f"expected a mapping of weights, received {self.received(('weights',), weights_raw)}")
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

        if block.mask_matrix is not None and len(block.mask_matrix) != dims.T:
            raise self.fail(("block", "mask"), f"expected a [T,T] = [{dims.T},{dims.T}] mask, received {len(block.mask_matrix)} rows")
        steps, shapes = self.steps(steps_raw, block, dims)
        weights = self.weights(weights_raw, dims, block, inp.kind, seed, steps, shapes)
        return Spec(
            path=self.src.filename, name=name, dims=dims, block=block, input=inp, weights=weights,
            seed=seed, dtype=dtype, steps=steps, stage_shapes=shapes,
        )

    def block(self, raw: Any, weights_raw: Any) -> tuple[BlockSpec, Any]:
        raw = self.keys(raw if raw is not None else {}, ("block",), BLOCK_KEYS, "block settings")
        p = ("block",)
        if "steps" in raw and "norm_order" in raw:
            raise self.fail(p + ("steps",), "give either norm_order (a preset step list) or steps (your own list), not both")
        norm_order = "custom" if "steps" in raw else self.choice(raw.get("norm_order", "pre"), p + ("norm_order",), ("pre", "post"))
        mask_raw = raw.get("mask", "causal")
        mask_matrix = None
        if isinstance(mask_raw, list):
            mask_matrix = self.mask_matrix(mask_raw, p + ("mask",))
            mask = "explicit"
        else:
            mask = self.choice(mask_raw, p + ("mask",), ("causal", "none"))
        eps = raw.get("eps", 1e-5)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
            raise self.fail(p + ("eps",), f"expected a positive number such as 1e-5, received {self.received(p + ('eps',), eps)}")
        final_norm = raw.get("final_norm", False)
        if not isinstance(final_norm, bool):
            raise self.fail(p + ("final_norm",), f"expected true or false, received {self.received(p + ('final_norm',), final_norm)}")
        has_table = isinstance(weights_raw, dict) and "position" in weights_raw
        positions = self.choice(raw.get("positions", "learned" if has_table else "none"), p + ("positions",), ("learned", "none"))
        return BlockSpec(norm_order, mask, float(eps), final_norm, positions, mask_matrix), raw.get("steps")

    def mask_matrix(self, raw: list[Any], path: Path) -> tuple[tuple[bool, ...], ...]:
        shape = self.rect(self.nested(raw, path, want_int=True), path)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise self.fail(path, f"expected causal, none, or a square [T,T] matrix of 0 and 1, received {_fmt(shape)}")
        for i, row in enumerate(raw):
            for j, v in enumerate(row):
                if v not in (0, 1):
                    raise self.fail(path + (i, j), f"expected 0 (masked) or 1 (may attend), received {v}")
        return tuple(tuple(bool(v) for v in row) for row in raw)

    def steps(self, raw: Any, block: BlockSpec, dims: Dims) -> tuple[tuple[Step, ...], dict[str, Shape]]:
        """The step list (a preset or the spec's own), with every stage's shape inferred."""
        sizes = {k: v for k, v in dims.as_dict().items()}
        shapes: dict[str, Shape] = {"x": (("B", "T", "C"), (dims.B, dims.T, dims.C))}
        if raw is None:
            steps = block_steps(block.norm_order, block.final_norm)
            for step in steps:
                shapes[step.name] = output_shape(step, [shapes[i] for i in step.inputs], sizes)
            return steps, shapes
        p: Path = ("block", "steps")
        if not isinstance(raw, list) or not raw:
            got = "an empty list" if raw == [] else self.received(p, raw)
            raise self.fail(p, f"expected a list of steps such as {{name: norm1, op: layer_norm, in: x, weights: norm1}}, received {got}")
        out: list[Step] = []
        for i, item in enumerate(raw):
            step = self.step(item, p + (i,), shapes, sizes)
            out.append(step)
        steps = tuple(out)
        if block.final_norm:
            if "final_norm" in shapes:
                raise self.fail(("block", "final_norm"), "a step is already named final_norm; rename it, or drop final_norm: true")
            steps = with_final_norm(steps)
            try:
                shapes["final_norm"] = output_shape(steps[-1], [shapes[steps[-2].name]], sizes)
            except ValueError as e:
                raise self.fail(("block", "final_norm"), f"the final LayerNorm reads the last step, {steps[-2].name}: {e}") from None
        return steps, shapes

    def step(self, raw: Any, path: Path, shapes: dict[str, Shape], sizes: dict[str, int]) -> Step:
        raw = self.keys(raw, path, STEP_KEYS, "step fields")
        for key in ("name", "op", "in"):
            if key not in raw:
                raise self.fail(path, f"a step needs {key!r} (e.g. {{name: norm1, op: layer_norm, in: x, weights: norm1}})")
        name = raw["name"]
        if not isinstance(name, str) or not name or not all(ch.isalnum() or ch in "_-" for ch in name):
            raise self.fail(path + ("name",), f"expected a stage name of letters, digits, _ and -, received {self.received(path + ('name',), name)}")
        if name in shapes or name in RESERVED_STAGES:
            raise self.fail(path + ("name",), f"stage {name!r} is already defined; every step records a stage of its own")
        if isinstance(raw["op"], str) and raw["op"] not in OPS:
            close = difflib.get_close_matches(raw["op"], list(OPS), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known ops: {', '.join(OPS)}"
            raise self.fail(path + ("op",), f"unknown op {raw['op']!r}{hint}")
        op = self.choice(raw["op"], path + ("op",), tuple(OPS))
        info = OPS[op]
        ins = raw["in"] if isinstance(raw["in"], list) else [raw["in"]]
        if len(ins) != info.arity:
            raise self.fail(path + ("in",), f"{op} reads {info.arity} stage{'s' if info.arity > 1 else ''}, received {len(ins)}")
        for j, i in enumerate(ins):
            ipath = path + (("in", j) if isinstance(raw["in"], list) else ("in",))
            if i not in shapes:
                known = [k for k in shapes if "." not in k]
                close = difflib.get_close_matches(str(i), known, n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else f"; stages so far: {', '.join(known)}"
                raise self.fail(ipath, f"no stage {i!r} before this step{hint}")
        weights = raw.get("weights")
        if info.group is not None:
            if not isinstance(weights, str) or not weights:
                raise self.fail(path, f"{op} needs weights: the name of its weight group (e.g. weights: {'norm1' if op == 'layer_norm' else op})")
        elif weights is not None:
            raise self.fail(path + ("weights",), f"{op} takes no weights")
        axis = raw.get("axis")
        if axis is not None or op == "select":
            if not info.axes:
                raise self.fail(path + ("axis",), f"{op} takes no axis")
            axis = self.choice(axis, path + ("axis",), info.axes)
        start = stop = None
        if op == "select":
            if "index" in raw:
                start = self.integer(raw["index"], path + ("index",), 0)
                stop = start + 1
            else:
                start = self.integer(raw.get("start", 0), path + ("start",), 0)
                stop = self.integer(raw.get("stop", start + 1), path + ("stop",), 1)
        else:
            for key in ("index", "start", "stop"):
                if key in raw:
                    raise self.fail(path + (key,), f"only select takes {key}")
        out = None
        if op == "linear":
            out = self.choice(raw.get("out", "C"), path + ("out",), ("C", "F"))
        elif "out" in raw:
            raise self.fail(path + ("out",), "only linear takes out")
        meaning = raw.get("meaning", info.meaning)
        if not isinstance(meaning, str):
            raise self.fail(path + ("meaning",), f"expected text, received {self.received(path + ('meaning',), meaning)}")
        step = Step(name, op, tuple(ins), weights, meaning, axis, start, stop, out)
        try:
            shapes[name] = output_shape(step, [shapes[i] for i in ins], sizes)
        except ValueError as e:
            raise self.fail(path, str(e)) from None
        if op == "mha":
            prefix = internal_prefix(step)
            for key in ("q", "k", "v", "scores", "weights", "heads"):
                shapes[f"{prefix}.{key}"] = shapes[name]  # placeholder: internals are never step inputs
        return step

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
    def weights(self, raw: dict[str, Any], dims: Dims, block: BlockSpec, input_kind: str, seed: int | None,
                steps: tuple[Step, ...], shapes: dict[str, Shape]) -> dict[str, Weight]:
        wanted: list[tuple[str, dict[str, tuple[str, ...]] | tuple[str, ...]]] = []
        if input_kind == "tokens":
            wanted.append(("embedding", TABLES["embedding"]))
        if block.positions == "learned":
            wanted.append(("position", TABLES["position"]))
        elif "position" in raw:
            raise self.fail(("weights", "position"), "a position table is given but block.positions is none")
        kinds: dict[str, str] = {}
        group_keys: dict[str, dict[str, tuple[str, ...]]] = {}
        for step in steps:
            kind = OPS[step.op].group
            if kind is None or step.weights is None:
                continue
            group = step.weights
            if group in TABLES:
                raise self.fail(("block",), f"step {step.name}: {group!r} is a table, not a weight group")
            keys = GROUP_KEYS[kind]
            if kind == "linear":
                in_letter = shapes[step.inputs[0]][0][-1]
                keys = {"w": (in_letter, step.out or "C"), "b": (step.out or "C",)}
            if group in kinds:
                if kinds[group] != kind or group_keys[group] != keys:
                    raise self.fail(("block",), f"step {step.name}: weight group {group!r} is shared by steps that need different weights ({kinds[group]} and {kind})")
                continue
            kinds[group], group_keys[group] = kind, keys
            wanted.append((group, keys))
        for key in raw:
            if key not in TABLES and key not in kinds:
                close = difflib.get_close_matches(key, list(kinds), n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else (f"; the steps use: {', '.join(kinds)}" if kinds else "")
                if key == "final_norm" and not block.final_norm:
                    hint = " (block.final_norm is false)"
                raise self.fail(("weights", key), f"weight group {key!r} is given but no step uses it{hint}")

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
                fill = "zeros" if key == "b" else DEFAULT_FILL.get(key)
                out[f"{name}.{key}"] = self.weight(group.get(key), ("weights", name, key), f"{name}.{key}", axes, dims, seed, fill)
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
