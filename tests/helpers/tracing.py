"""In-process helpers for the model tests: trace a spec, and build the independent model's stages for it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from helpers import oracle as ind
from tracer.engine import executor
from tracer.engine.params import load_inputs, load_params
from tracer.spec import load_spec, load_spec_text


def trace_text(text: str, keep_going: bool = False) -> executor.Recording:
    return executor.run(load_spec_text(text, "spec.yaml"), keep_going=keep_going)


def trace_file(path: str | Path, keep_going: bool = False) -> executor.Recording:
    return executor.run(load_spec(str(path)), keep_going=keep_going)


def flow(a: np.ndarray) -> str:
    """An array as a YAML flow list; json writes floats with repr, so they read back to the same doubles."""
    return json.dumps(np.asarray(a).tolist())


def independent_stages(trace: executor.Recording, text: str) -> dict[str, np.ndarray]:
    """The independent model's stages for the spec ``text``, with tracer's weights and input.

    The weights (seeded or given) and the token ids are tracer's own: what is checked here is
    everything computed from them.  Seeded draws and word-to-id lookup have tests of their own.
    """
    spec = trace.spec
    model = ind.model_from_yaml(yaml.safe_load(text))
    params = {k: np.asarray(v, dtype=np.float64) for k, v in load_params(spec).items()}
    inputs = load_inputs(spec)
    if spec.model == "encoder-decoder":
        return ind.encoder_decoder(model, params, inputs["source"], inputs["target"])
    if "tokens" in inputs:
        return ind.decoder_only(model, params, tokens=inputs["tokens"])
    return ind.decoder_only(model, params, x=inputs["x"])


def check_against_independent(text: str, tol: float = 1e-10) -> executor.Recording:
    trace = trace_text(text)
    assert trace.ok, [v.message for v in trace.violations]
    ind.assert_matches(trace, independent_stages(trace, text), tol)
    return trace


def run_refused(tmp_path: Path, text: str, fragment: str) -> None:
    """`tracer run` of the spec ``text`` exits 2 with one line naming ``fragment``."""
    from conftest import assert_refused, run_app, write_spec

    assert_refused(run_app("run", str(write_spec(tmp_path, text))), fragment)
