"""Read a trace saved by ``tracer run SPEC --json`` back into arrays, validated.

The inverse of jsonout.  Every field is checked once, here, at the edge: a file
that is not a tracer trace, an unsupported schema_version, or a malformed stage
is a TraceFileError (exit 2) naming the file, the field, expected and received.
The strings "NaN", "Infinity" and "-Infinity" decode back to the doubles they
stand for; every other value reads back to exactly the double that was written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracer.engine.executor import Stage
from tracer.errors import TraceFileError
from tracer.messages import Message, at, msg
from tracer.model.blocks import STEP_SETTINGS, Step
from tracer.spec.yamlio import printable
from tracer.views.trace_json import SCHEMA_VERSION

NONFINITE_VALUES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
REQUIRED_DIMS = ("B", "T", "C", "H", "F")


@dataclass
class SavedTrace:
    path: str  # the JSON file
    spec_path: str  # the spec it was traced from, as recorded
    name: str
    ok: bool
    dims: dict[str, int]
    block: dict[str, Any]
    dtype: str | None  # None in traces written before the field existed
    steps: tuple[Step, ...]
    stages: dict[str, Stage]  # in the saved order; attention internals are the stages no step records
    violations: list[dict[str, Any]]
    weights: dict[str, np.ndarray] | None  # only in traces saved with --with-weights
    top: dict[str, Any] = field(default_factory=dict)  # the other settings it records: encoder, model, init, input, source (where written)


def sniff(path: str, text: str) -> Any | None:
    """The parsed document if the file is to be read as a saved trace, else None (read it as a spec).

    A JSON object with schema_version or stages is a trace. A JSON object with dims and no
    schema_version is a spec written as JSON (YAML reads it). Any other .json file is read as a
    trace, so that it gets a clear "not a tracer trace" message; any other file is a spec.
    """
    is_json_name = path.lower().endswith(".json")
    if not is_json_name and not text.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(text, parse_constant=_Unreadable, parse_float=_float, parse_int=_int)
    except json.JSONDecodeError as e:
        if not is_json_name:
            return None  # a YAML flow mapping, most likely
        raise TraceFileError(msg("{path}:{lineno}:{colno}: not valid JSON: {msg}", path=path, lineno=e.lineno, colno=e.colno, msg=e.msg)) from None
    except RecursionError:
        raise TraceFileError(msg("{path}: JSON nests too deeply to be a tracer trace", path=path)) from None
    if isinstance(doc, dict) and ("schema_version" in doc or "stages" in doc):
        return doc
    if isinstance(doc, dict) and "dims" in doc:
        return None
    return doc if is_json_name else None


class _Unreadable:
    """A number JSON cannot carry: the tokens NaN / Infinity / -Infinity (Python writes them, JSON has none),
    or a literal no double holds (1e999).  Kept as written so the reader can name it and its field."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.value = float(text) if text in ("NaN", "Infinity", "-Infinity") else math.copysign(math.inf, float(text))

    def __repr__(self) -> str:
        return self.text


class _HugeInt:
    """A JSON integer of more digits than a double's largest (309): no number a trace holds.  Kept as its length
    (Python refuses to read integers of more than 4,300 digits at all), refused where it is found."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"a whole number of {self.digits:,} digits"


def _int(text: str) -> int | _HugeInt:
    return int(text) if len(text) <= 320 else _HugeInt(text)


def _float(text: str) -> float | _Unreadable:
    value = float(text)
    return value if math.isfinite(value) else _Unreadable(text)


def load_trace(doc: Any, path: str) -> SavedTrace:
    """Validate a parsed JSON document as a saved trace."""
    return _Reader(path).trace(doc)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return msg("boolean {v}", v=str(value).lower())
    if value is None:
        return "null"
    if isinstance(value, dict):
        return msg("an object")
    if isinstance(value, list):
        return msg("a list")
    if isinstance(value, str):
        return msg("text {v}", v=repr(value)[:55])
    if isinstance(value, _HugeInt):
        return msg("a whole number of {n} digits", n=f"{value.digits:,}")
    if isinstance(value, _Unreadable):
        return msg("{text} (not a finite number; only a stage's values may hold \"NaN\", \"Infinity\" or \"-Infinity\", as strings)", text=value.text[:40])
    return repr(value)


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, field: str, message: str) -> TraceFileError:
        return TraceFileError(at(self.path, at(field, message)))

    def want(self, value: Any, field: str, types: type | tuple[type, ...], what: Message) -> Any:
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise self.fail(field, msg("expected {what}, received {value}", what=what, value=_kind(value)))
        if not isinstance(value, types):
            raise self.fail(field, msg("expected {what}, received {value}", what=what, value=_kind(value)))
        return printable(value) if isinstance(value, str) else value  # names and meanings are printed: no control characters

    def trace(self, doc: Any) -> SavedTrace:
        not_a_trace = "is not a tracer trace (expected the JSON written by `tracer run SPEC --json`)"
        if not isinstance(doc, dict):
            raise TraceFileError(msg("{path}: {not_a_trace}; the document is {doc}", path=self.path, not_a_trace=not_a_trace, doc=_kind(doc)))
        if doc.get("kind") == "diff":
            raise TraceFileError(msg("{path}: is the output of `tracer diff --json`, not a trace; save a trace with `tracer run SPEC --json`", path=self.path))
        if "schema_version" not in doc or "stages" not in doc:
            missing = "schema_version" if "schema_version" not in doc else "stages"
            raise TraceFileError(msg("{path}: {not_a_trace}; it has no {missing} field", path=self.path, not_a_trace=not_a_trace, missing=repr(missing)))
        version = doc["schema_version"]
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise self.fail("schema_version", msg("{version} is not supported: this tracer reads schema_version {SCHEMA_VERSION}", version=_kind(version),
                                                  SCHEMA_VERSION=SCHEMA_VERSION))

        spec = self.want(doc.get("spec", {}), "spec", dict, msg("an object {path, name}"))
        name = self.want(spec.get("name", self.path), "spec.name", str, msg("text"))
        spec_path = self.want(spec.get("path", ""), "spec.path", str, msg("text"))
        dims = self.dims(self.want(doc.get("dims"), "dims", dict, msg("an object of dimensions {B, T, C, H, F, ...}")))
        block = self.block(self.want(doc.get("block"), "block", dict, msg("an object {norm_order, mask, eps, ...}")))
        dtype = doc.get("dtype")
        if dtype is not None:
            self.want(dtype, "dtype", str, msg("text"))
        steps = self.steps(self.want(doc.get("steps"), "steps", list, msg("a list of steps")))
        stages = self.stages(self.want(doc["stages"], "stages", list, msg("a list of stages")), {s.name for s in steps})
        violations = self.violations(self.want(doc.get("violations", []), "violations", list, msg("a list of violations")))
        ok = self.want(doc.get("ok", not violations), "ok", bool, msg("true or false"))
        weights = None
        if "weights" in doc:
            raw = self.want(doc["weights"], "weights", dict, msg("an object {weight name: nested list}"))
            weights = {k: self.array(v, f"weights.{k}") for k, v in raw.items()}
        top: dict[str, Any] = {}
        if "encoder" in doc:
            top["encoder"] = self.block(self.want(doc["encoder"], "encoder", dict, msg("an object {norm_order, mask, eps, ...}")), "encoder")
        for key in ("model", "init", "input", "source"):
            if key in doc:
                top[key] = self.want(doc[key], key, str, msg("text"))
        return SavedTrace(self.path, spec_path, name, ok, dims, block, dtype, steps, stages, violations, weights, top)

    def dims(self, raw: dict[str, Any]) -> dict[str, int]:
        for key in REQUIRED_DIMS:
            if key not in raw:
                raise self.fail("dims", msg("missing dimension {key}", key=key))
        out = {}
        for key, value in raw.items():
            self.want(value, f"dims.{key}", int, msg("a whole number"))
            if value < 1:
                raise self.fail(f"dims.{key}", msg("expected a whole number of 1 or more, received {value}", value=value))
            out[key] = value
        return out

    def block(self, raw: dict[str, Any], section: str = "block") -> dict[str, Any]:
        for key, types, what in (("norm_order", str, msg("text")), ("mask", str, msg("text")), ("eps", (int, float), msg("a positive number such as 1e-5"))):
            if key not in raw:
                raise self.fail(section, msg("missing setting {key}", key=key))
            self.want(raw[key], f"{section}.{key}", types, what)
        if not raw["eps"] > 0:
            raise self.fail(f"{section}.eps", msg("expected a positive number such as 1e-5, received {eps}", eps=_kind(raw['eps'])))
        self.settled(raw, section)
        return dict(raw)

    def settled(self, value: Any, field: str) -> None:
        """No NaN or infinity anywhere in a setting: they have no JSON form, and no setting means them."""
        stack = [(value, field)]
        while stack:
            v, f = stack.pop()
            if isinstance(v, _Unreadable):
                raise self.fail(f, msg("expected a finite number, received {v}", v=_kind(v)))
            if isinstance(v, dict):
                stack += [(item, f"{f}.{k}") for k, item in v.items()]
            elif isinstance(v, list):
                stack += [(item, f"{f}[{i}]") for i, item in enumerate(v)]

    def steps(self, raw: list[Any]) -> tuple[Step, ...]:
        out = []
        for i, s in enumerate(raw):
            f = f"steps[{i}]"
            self.want(s, f, dict, msg("an object {name, op, inputs, weights}"))
            name = self.want(s.get("name"), f + ".name", str, msg("text"))
            op = self.want(s.get("op"), f + ".op", str, msg("text"))
            inputs = self.want(s.get("inputs"), f + ".inputs", list, msg("a list of stage names"))
            for j, n in enumerate(inputs):
                self.want(n, f"{f}.inputs[{j}]", str, msg("a stage name"))
            weights = s.get("weights")
            if weights is not None:
                self.want(weights, f + ".weights", str, msg("a weight group name or null"))
            params: dict[str, Any] = {}
            for key in STEP_SETTINGS:  # the op's settings, as steps_json writes them (a trace before them has none)
                value = s.get(key)
                if value is not None:
                    params[key] = self.want(value, f"{f}.{key}", (str, int, float), msg("text or a number"))
            self.settled(params, f)
            out.append(Step(name, op, tuple(inputs), weights, **params))
        return tuple(out)

    def stages(self, raw: list[Any], step_names: set[str]) -> dict[str, Stage]:
        """Stages in the saved order; a stage no step records is an attention internal (attn.q, blocks.0.attn.q)."""
        if not raw:
            raise self.fail("stages", msg("expected at least one stage, received an empty list"))
        out: dict[str, Stage] = {}
        for i, s in enumerate(raw):
            f = f"stages[{i}]"
            self.want(s, f, dict, msg("an object {name, meaning, shape, axes, values}"))
            name = self.want(s.get("name"), f + ".name", str, msg("text"))
            f = f"stages[{i}] ({name})"
            if name in out:
                raise self.fail(f + ".name", msg("appears twice; stage names are unique in a trace"))
            meaning = self.want(s.get("meaning", ""), f + ".meaning", str, msg("text"))
            shape = self.want(s.get("shape"), f + ".shape", list, msg("a list of whole numbers"))
            for n in shape:
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    raise self.fail(f + ".shape", msg("expected whole numbers of 0 or more, received {n}", n=_kind(n)))
            axes = self.want(s.get("axes"), f + ".axes", list, msg("a list of axis letters"))
            if len(axes) != len(shape) or not all(isinstance(a, str) for a in axes):
                raise self.fail(f + ".axes", msg("expected {n} axis letters (one per entry of shape {shape}), received {axes}", n=len(shape), shape=shape,
                                                 axes=repr(axes)[:120]))
            if "values" not in s:
                raise self.fail(f, msg("missing values"))
            if s["values"] is None and "stats" in s:
                raise self.fail(f + ".values", msg("the stage was kept as statistics (tracer run --record stats); comparing needs every value: save the "
                                                   "trace with --record all"))
            array = self.array(s["values"], f + ".values", tuple(shape))
            out[name] = Stage(name, array, tuple(axes), meaning, internal=name not in step_names)
        return out

    def violations(self, raw: list[Any]) -> list[dict[str, Any]]:
        out = []
        for i, v in enumerate(raw):
            f = f"violations[{i}]"
            self.want(v, f, dict, msg("an object {kind, stage, message}"))
            for key in ("kind", "stage", "message"):
                self.want(v.get(key), f"{f}.{key}", str, msg("text"))
            self.settled(v, f)
            out.append({k: printable(x) if isinstance(x, str) else x for k, x in v.items()})
        return out

    def array(self, values: Any, field: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """A nested list of numbers (or the nonfinite strings) -> float64 array, checked against shape."""
        if not isinstance(values, list):
            raise self.fail(field, msg("expected a nested list of numbers, received {values}", values=_kind(values)))
        try:
            obj = np.array(values, dtype=object)
        except ValueError:
            raise self.fail(field, msg("ragged: the rows of this nested list have different lengths")) from None
        if shape is not None and obj.shape != shape:
            raise self.fail(field, msg("expected shape {shape} as the stage's shape says, received {shape2}", shape=list(shape), shape2=list(obj.shape)))
        types = set(map(type, obj.flat))
        if _HugeInt in types:
            raise self.fail(field, msg("holds a whole number too large for a double"))
        if _Unreadable in types:  # a bare NaN or 1e999 among the values: tracer writes strings, Python's json the tokens
            for where, v in np.ndenumerate(obj):
                if isinstance(v, _Unreadable):
                    obj[where] = v.value
            types = set(map(type, obj.flat))
        if not types <= {float, int, str}:
            bad = next(t for t in types if t not in (float, int, str))
            where = next(i for i, v in np.ndenumerate(obj) if type(v) is bad)
            raise self.fail(f"{field}{list(where)}", msg("expected a number, received {obj}", obj=_kind(obj[where])))
        if str in types:
            for where, v in np.ndenumerate(obj):
                if isinstance(v, str):
                    if v not in NONFINITE_VALUES:
                        raise self.fail(f"{field}{list(where)}", msg('expected a number or one of "NaN", "Infinity", "-Infinity", received {v}', v=_kind(v)))
                    obj[where] = NONFINITE_VALUES[v]
        try:
            return obj.astype(np.float64)
        except OverflowError:
            raise self.fail(field, msg("holds a whole number too large for a double")) from None
