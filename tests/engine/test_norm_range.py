"""Every normalisation is computed without overflow, the reference agrees, and a
--verify difference above the tolerance is a violation (exit 1)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import SPECS, run_app, write_spec

from tracer.engine import reference
from tracer.engine.kernels import norms

ONES = np.ones(2)
ZEROS = np.zeros(2)


@pytest.mark.parametrize("dtype, big", [("float32", 1e20), ("float32", 3e38), ("float64", 1e155), ("float64", 1.7e308)])
def test_layer_norm_of_huge_rows_is_plus_minus_one(dtype: str, big: float) -> None:
    x = np.array([[[big, 1.0], [1.0, 1.0], [big, -big], [-big, -big]]], dtype=dtype)
    y = norms.layer_norm(x, ONES.astype(dtype), ZEROS.astype(dtype), 1e-5)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_allclose(y[0], [[1, -1], [0, 0], [1, -1], [0, 0]], atol=1e-6)
    assert reference.layer_norm([float(big), 1.0], [1.0, 1.0], [0.0, 0.0], 1e-5) == pytest.approx([1, -1])
    assert reference.layer_norm([-float(big)] * 3, [1.0] * 3, [0.0] * 3, 1e-5) == [0.0] * 3


@pytest.mark.parametrize("dtype, big", [("float32", 1e20), ("float64", 1e200)])
def test_rms_norm_and_batch_norm_of_huge_values(dtype: str, big: float) -> None:
    x = np.array([[[big, big], [big, -big]]], dtype=dtype)
    np.testing.assert_allclose(norms.rms_norm(x, ONES.astype(dtype), 1e-5)[0], [[1, 1], [1, -1]], rtol=1e-6)
    assert reference.rms_norm([big, -big], [1.0, 1.0], 1e-5) == pytest.approx([1, -1])
    np.testing.assert_allclose(norms.batch_norm(x, ONES.astype(dtype), ZEROS.astype(dtype), 1e-5, strict=False)[0], [[0, 1], [0, -1]], atol=1e-6)


@pytest.mark.parametrize("scale", [2.0**-20, 1.0, 3.0, 2.0**40])
def test_scaling_by_a_power_of_two_changes_no_bit_where_nothing_overflows(scale: float) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 8)) * scale
    g, b = rng.normal(size=8), rng.normal(size=8)
    mu = x.mean(axis=-1, keepdims=True)
    mu += (x - mu).mean(axis=-1, keepdims=True)
    xc = x - mu
    plain = g * (xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + 1e-5)) + b  # the textbook formula
    assert np.array_equal(norms.layer_norm(x, g, b, 1e-5), plain)


def test_zero_constant_and_nonfinite_rows() -> None:
    x = np.array([[[0.0, 0.0], [5.0, 5.0], [math.nan, 1.0], [math.inf, 1.0]]])
    with np.errstate(invalid="ignore"):
        y = norms.layer_norm(x, ONES, ZEROS, 1e-5)
    assert np.array_equal(y[0, :2], np.zeros((2, 2)))
    assert np.isnan(y[0, 2:]).all()  # NaN in, NaN out: flagged by the executor as nonfinite


@pytest.mark.parametrize("text, want", [
    ("input: {x: [[1e20, 1], [1, 1]]}\ndtype: float32\n", [1, -1]),
    ("input: {x: [[1e155, -1e155], [1, 1]]}\n", [1, -1]),
    ("input: {x: [[1e300, 1], [-1e300, 2e300]]}\nblock: {norm: rmsnorm}\n", [math.sqrt(2), 0]),
])
def test_huge_inputs_run_clean_and_verify(tmp_path: Path, text: str, want: list[float]) -> None:
    spec = write_spec(tmp_path, "dims: {C: 2, H: 2, F: 3}\nseed: 0\n" + text)
    r = run_app("run", str(spec), "--verify", "--json")
    assert r.returncode == 0, r.stdout[-500:] + r.stderr
    doc = json.loads(r.stdout)
    norm1 = next(s for s in doc["stages"] if s["name"] == "norm1")["values"][0][0]
    assert norm1 == pytest.approx(want, abs=1e-5)
    assert doc["verify"]["failing"] == [] and doc["verify"]["max_abs_diff"] < 1e-3


def test_a_verify_failure_is_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = norms.rms_norm
    monkeypatch.setattr(norms, "rms_norm", lambda x, g, eps, strict=True: real(x, g, eps, strict) * 1.5)  # a broken kernel
    spec = str(SPECS / "variants" / "rmsnorm.yaml")
    r = run_app("run", spec, "--verify", "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert not doc["ok"] and doc["violations"][0]["kind"] == "verify" and doc["violations"][0]["stage"] == doc["verify"]["failing"][0]
    text = run_app("run", spec, "--verify")
    assert text.returncode == 1 and "verify" in text.stdout
    assert run_app("run", spec, "--verify", "--exit-zero").returncode == 0
    assert run_app("run", spec).returncode == 0  # without --verify nothing is compared


def test_the_tolerance_scales_with_the_values() -> None:
    from tracer.views.reference_check import ReferenceCheck

    plan = reference.Plan([0], [0], True, 1, 1, "")
    v = ReferenceCheck(plan, {"a": 1e-7, "b": 1e-7, "c": math.inf}, {"a": 1.0, "b": 1e6, "c": 1.0}, 1e-9)
    assert v.failing == ["a", "c"]
    assert v.violation() is not None and "1 more stage" in v.violation().message  # type: ignore[union-attr]
    from tracer.views import trace_json as jsonout

    assert json.loads(jsonout.dumps(v.as_json()))["stages"]["c"] == "Infinity"  # strict JSON, never a raise
