"""Machine output: the trace as one JSON object (schema_version 1), via json.dumps.

Schema (stable; documented in docs/reference/output.md):
    {"schema_version": 1,
     "spec": {"path", "name"},
     "ok": bool,                       # false when a violation was flagged
     "dims": {"B","T","C","H","F","d", "V"?, "T_max"?},
     "block": {"norm_order","mask","eps","final_norm","positions", ...},  # every block setting; an encoder-decoder's decoder
     "model", "encoder": {...}         # encoder-decoder only: "encoder-decoder" and the encoder's settings
     "steps": [{"name","op","inputs","weights"}],
     "stages": [{"name","meaning","shape","axes","values"}],
                                       # --record stats: "values" null and "stats"
                                       # {"mean","std","min","max","b","t","value"}
     "violations": [{"kind","stage","message","shapes"}],
     "verify": {...},                  # only with --verify
     "dtype": "float64" | "float32",
     "init": "default" | "xavier",    # how drawn matrices are scaled
     "input": "tokens: [[0, 1, 2]]" | "x: random" | ...,  # the input as the spec gives it (tracer diff compares it);
     "source": ...,                   # an encoder-decoder's source too ("x: given" for a matrix too big to repeat)
     "weights": {name: nested list}    # only with --with-weights (e.g. "attn.w_q", "norm1.gamma")
     "tokens": {"text","special_added","ids","pieces"}  # only for a spec with a tokenizer: the tokens as text
    }
Values are nested lists of floats written with repr, so they read back to the
same doubles; NaN and infinities, which JSON lacks, are written as the strings
"NaN", "Infinity" and "-Infinity".
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from tracer.engine.executor import Recording, Stage
from tracer.process import is_utf
from tracer.spec import Spec

SCHEMA_VERSION = 1


def _finite_safe(values: Any) -> Any:
    if isinstance(values, list):
        return [_finite_safe(v) for v in values]
    if isinstance(values, float) and not math.isfinite(values):
        return "NaN" if math.isnan(values) else ("Infinity" if values > 0 else "-Infinity")
    return values


def array_json(a: np.ndarray) -> Any:
    """An array (or NumPy scalar) as nested lists of floats; NaN and infinities as strings."""
    values = np.asarray(a).tolist()
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        values = _finite_safe(values)
    return values


def stage_json(stage: Stage) -> dict[str, Any]:
    out: dict[str, Any] = {"name": stage.name, "meaning": stage.meaning, "shape": list(stage.shape), "axes": list(stage.axes)}
    if stage.data is not None:
        out["values"] = array_json(stage.data)
    elif stage.summary is not None:  # --record stats: no values, statistics and the value at (b, t)
        stats: dict[str, Any] = {k: _finite_safe(v) for k, v in stage.summary.as_json().items()}
        stats["value"] = array_json(stage.summary.value)
        out["values"] = None
        out["stats"] = stats
    if stage.intervention is not None:  # --ablate, --set, --from changed it (tracer.engine.interventions)
        out["intervention"] = stage.intervention
    return out


def steps_json(spec: Spec) -> list[dict[str, Any]]:
    return [{"name": s.name, "op": s.op, "inputs": list(s.inputs), "weights": s.weights, **s.own_params(),
             "shape": list(spec.stage_shapes[s.name][1]), "axes": list(spec.stage_shapes[s.name][0])} for s in spec.steps]


def block_json(blk: Any) -> dict[str, Any]:
    """Every setting of a stack (each field of the BlockSpec, derived, not listed: a saved trace carries every
    setting tracer diff compares); an explicit mask's matrix as lists of true/false, null when there is none."""
    out: dict[str, Any] = {}
    for key in blk._fields:
        value = getattr(blk, key)
        if isinstance(value, tuple):
            value = [list(row) if isinstance(row, tuple) else row for row in value]
        out[key] = value
    return out


class Streamed:
    """A list (or, with ``mapping``, an object) written one item at a time by ``chunks``: the stages and
    weights of a trace, so that only one of them is ever held as Python floats and JSON text."""

    def __init__(self, items: Iterable[Any], mapping: bool = False) -> None:
        self.items = items
        self.mapping = mapping


def chunks(obj: Any, ascii_only: bool | None = None) -> Iterator[str]:
    """The text ``dumps(obj)`` writes, piece by piece; a Streamed part is made item by item as it is written.
    ``ascii_only``: escape all but ASCII (default: where stdout is not UTF, as dumps)."""
    if ascii_only is None:
        ascii_only = not is_utf(sys.stdout)
    if isinstance(obj, dict):
        yield "{"
        for i, (key, value) in enumerate(obj.items()):
            yield (", " if i else "") + json.dumps(key, ensure_ascii=ascii_only) + ": "
            yield from chunks(value, ascii_only)
        yield "}"
    elif isinstance(obj, Streamed):
        yield "{" if obj.mapping else "["
        for i, item in enumerate(obj.items):
            if obj.mapping:
                key, item = item
                yield (", " if i else "") + json.dumps(key, ensure_ascii=ascii_only) + ": " + json.dumps(item, ensure_ascii=ascii_only, allow_nan=False)
            else:
                yield (", " if i else "") + json.dumps(item, ensure_ascii=ascii_only, allow_nan=False)
        yield "}" if obj.mapping else "]"
    else:
        yield json.dumps(obj, ensure_ascii=ascii_only, allow_nan=False)


def trace_json(trace: Recording, stages: list[Stage], verify: dict[str, Any] | None = None,
               weights: dict[str, np.ndarray] | None = None, streamed: bool = False) -> dict[str, Any]:
    """The trace as one JSON object; with ``streamed``, its stages and weights are Streamed (write it with chunks)."""
    spec = trace.spec
    blk = spec.block
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "spec": {"path": spec.path, "name": spec.name},
        "ok": trace.ok,
        "dims": spec.dims.as_dict(),
        "block": block_json(blk),
        "steps": steps_json(spec),
        "stages": Streamed(stage_json(s) for s in stages) if streamed else [stage_json(s) for s in stages],
        "violations": [v.as_json() for v in trace.violations],
    }
    if spec.encoder is not None:  # an encoder-decoder: "block" holds the decoder's settings
        out["model"] = spec.model
        out["encoder"] = block_json(spec.encoder)
    if verify is not None:
        out["verify"] = verify
    out["dtype"] = spec.dtype
    out["init"] = spec.init
    for key in ("input", "source"):
        given = getattr(spec, key)
        if given is not None:
            out[key] = input_words(given)
    if spec.interventions:  # what the run replaced, as the command line asked
        out["interventions"] = [iv.as_json() for iv in spec.interventions]
    if spec.tokenizer is not None:  # the input tokens as text beside their ids
        out["tokens"] = tokens_json(spec)
    if weights is not None:  # --with-weights: lets `tracer diff` name the weight that differs
        pairs = ((name, array_json(w)) for name, w in weights.items())
        out["weights"] = Streamed(pairs, mapping=True) if streamed else dict(pairs)
    return out


INPUT_WORDS_MAX = 100_000  # characters of an input written out in a trace's "input"; a longer one is "x: given"


def input_words(given: Any) -> str:
    """The input as tracer diff compares it: its kind and its values (token ids, a small matrix), or random."""
    words = f"{given.kind}: {given.value}"
    return words if len(words) <= INPUT_WORDS_MAX else f"{given.kind}: given"


def tokens_json(spec: Spec) -> dict[str, Any]:
    """{"text", "special_added", "ids": [B][T], "pieces": [B][T]}: the input tokens, each as its id and as text."""
    words = spec.tokens_text() or []
    ids = spec.input.value if isinstance(spec.input.value, list) else []
    return {"text": spec.text, "special_added": list(spec.specials_added), "ids": [list(r) for r in ids], "pieces": words}


def dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=not is_utf(sys.stdout), allow_nan=False) + "\n"  # \u escapes where stdout is not UTF
