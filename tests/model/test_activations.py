"""Every activation is one record (tracer.model.activations) and every record is whole: a part left out fails here,
by name; every activation a spec may name has one; and a record registered at run time is all tracer needs to run,
verify and differentiate a spec with it."""

from __future__ import annotations

import json
import math
import string

import numpy as np
import pytest
from conftest import SPECS, assert_refused, run_app, write_spec

from tracer import zh
from tracer.compare.hints import DIAGNOSES
from tracer.messages import Message, given
from tracer.model import catalogue
from tracer.model.activations import ACTIVATIONS, DEFAULT_ACTIVATION, HF_ACTIVATIONS, NOT_ACTIVATIONS, Activation, spec_activations
from tracer.model.named import resolve
from tracer.spec import load_spec, load_spec_text

STACK_TEXT = (SPECS / "stack-2-layers.yaml").read_text(encoding="utf-8")


def _code(ref: object) -> str | None:
    """What is wrong with an engine part, ``module:function`` or the function itself (None: it resolves to one)."""
    if not callable(ref) and (not isinstance(ref, str) or ":" not in ref):
        return f"{ref!r} is not module:function"
    try:
        fn = resolve(ref)  # type: ignore[arg-type]
    except (ImportError, AttributeError) as e:
        return f"{ref!r} does not resolve ({type(e).__name__})"
    return None if callable(fn) else f"{ref!r} is not a function"


def missing_parts(a: Activation) -> list[str]:
    """Every part the record lacks or gets wrong, worded for the developer who wrote it."""
    out = [f"{part} is empty" for part in ("name", "label", "expr", "formula") if not getattr(a, part).strip()]
    if not isinstance(a.meaning, Message) or not str(a.meaning).strip() or not getattr(a.meaning, "zh", "").strip():
        out.append("meaning: no English and Chinese (messages.given)")
    fields = {f for _, f, _, _ in string.Formatter().parse(a.formula) if f is not None}
    if not fields <= {"0"}:
        out.append(f"formula reads {sorted(fields)}: only {{0}}, the stage the FFN's first half reads")
    for part in ("forward", "backward", "reference"):
        why = _code(getattr(a, part))
        if why:
            out.append(f"{part}: {why}")
    if not callable(a.temporaries) or not isinstance(a.temporaries(1 << 20, 8), int) or a.temporaries(1 << 20, 8) < 0:
        out.append("temporaries: not a function of (hidden bytes, itemsize) giving bytes")
    if not a.neighbours:
        out.append("neighbours: none (what a student writes instead, for tracer diff's diagnosis search)")
    for n in a.neighbours:
        if n == a.name or (n not in NOT_ACTIVATIONS and (n not in ACTIVATIONS or ACTIVATIONS[n].gate is not None)):
            out.append(f"neighbour {n!r} is neither another plain activation's record nor one of NOT_ACTIVATIONS")
    worded = {d.bug for d in DIAGNOSES}
    for n, diagnosis in a.diagnoses:
        if n not in a.neighbours or diagnosis not in worded:
            out.append(f"diagnosis {diagnosis!r} of {n!r}: not a neighbour, or no worded diagnosis of compare/hints.py")
    if a.gate is not None:
        gate = ACTIVATIONS.get(a.gate)
        if gate is None or gate.gate is not None:
            out.append(f"gate {a.gate!r} is not a plain activation's record")
        elif (a.forward, a.backward, a.reference) != (gate.forward, gate.backward, gate.reference):
            out.append("a gated record's kernels and reference are not its gate's")
    if a.design_from not in ("settings", "steps") or (a.design is not None and not isinstance(a.design, Message)):
        out.append("design: a Message (or None), said from the settings or from the steps")
    return out


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_every_record_has_every_part(name):
    a = ACTIVATIONS[name]
    assert a.name == name
    assert missing_parts(a) == []


def test_the_completeness_check_names_what_is_missing():
    relu = ACTIVATIONS["relu"]
    assert missing_parts(relu._replace(backward="tracer.engine.kernels.ffn:no_such_kernel")) == [
        "backward: 'tracer.engine.kernels.ffn:no_such_kernel' does not resolve (AttributeError)"]
    assert missing_parts(relu._replace(neighbours=("relu", "softsign"))) == [
        "neighbour 'relu' is neither another plain activation's record nor one of NOT_ACTIVATIONS",
        "neighbour 'softsign' is neither another plain activation's record nor one of NOT_ACTIVATIONS"]
    assert missing_parts(relu._replace(meaning="ReLU")) == ["meaning: no English and Chinese (messages.given)"]
    assert missing_parts(ACTIVATIONS["swiglu"]._replace(gate="swiglu")) == ["gate 'swiglu' is not a plain activation's record"]


def test_every_activation_the_spec_accepts_has_a_record_and_no_other():
    assert DEFAULT_ACTIVATION in spec_activations()
    for name in spec_activations():
        spec = load_spec_text(STACK_TEXT.replace("  layers: 2\n", f"  layers: 2\n  activation: {name}\n"))
        assert {s.activation for s in spec.steps if s.op == "ffn_hidden"} == {name}
    assert not ACTIVATIONS["silu"].spec  # only SwiGLU's gate


def test_a_gate_only_activation_is_refused_by_the_spec(tmp_path):
    path = write_spec(tmp_path, STACK_TEXT.replace("  layers: 2\n", "  layers: 2\n  activation: silu\n"))
    assert_refused(run_app("run", str(path)), "block.activation", "relu2")


def test_the_formulas_are_in_the_catalogue():
    missing = [a.formula for a in ACTIVATIONS.values() if catalogue.formula_template(a.formula) not in zh.MESSAGES]
    assert not missing, missing


def test_hugging_faces_names_map_to_plain_activations_a_spec_may_name():
    assert HF_ACTIVATIONS["gelu_new"] == HF_ACTIVATIONS["gelu_pytorch_tanh"] == "gelu_tanh" and HF_ACTIVATIONS["relu2"] == "relu2"
    assert all(ACTIVATIONS[a].spec and ACTIVATIONS[a].gate is None for a in HF_ACTIVATIONS.values())


Z = [-3.5, -1.0, -0.25, -0.0, 0.0, 1e-3, 0.5, 1.0, 2.75, 40.0]


@pytest.mark.parametrize("name", [n for n, a in ACTIVATIONS.items() if a.gate is None])
def test_each_kernel_agrees_with_its_reference_and_its_gradient_with_the_slope(name):
    """The kernel against the scalar reference (in place and not, the same bits), and the backward kernel against
    central differences of the reference."""
    a = ACTIVATIONS[name]
    z = np.array(Z)
    out = a.run_forward()(z.copy())
    assert np.array_equal(a.run_forward()(z.copy(), inplace=True), out)
    assert np.allclose(out, a.run_reference()(Z), rtol=1e-14, atol=1e-300)
    h = 1e-6
    slope = [(p - m) / (2 * h) for p, m in zip(a.run_reference()([v + h for v in Z]), a.run_reference()([v - h for v in Z]))]
    smooth = [i for i, v in enumerate(Z) if abs(v) > 1e-2]  # ReLU's kink at 0 has no slope
    grad = a.run_backward()(np.ones_like(z), z)
    assert np.allclose(grad[smooth], np.array(slope)[smooth], rtol=1e-6, atol=1e-6)


def test_relu2_is_relu_squared():
    z = np.linspace(-3, 3, 13)
    assert np.array_equal(ACTIVATIONS["relu2"].run_forward()(z), np.maximum(z, 0) ** 2)


# -- an activation added at run time: its record alone --------------------------------------------------------------

def scaled_tanh(x: np.ndarray, inplace: bool = False) -> np.ndarray:  # [...] -> [...], 2 tanh(x)
    y = np.tanh(x, out=x if inplace else None)
    y *= 2.0
    return y


def scaled_tanh_backward(dy: np.ndarray, z: np.ndarray) -> np.ndarray:
    return dy * (2.0 * (1.0 - np.tanh(z) ** 2))


def scaled_tanh_reference(x: list[float]) -> list[float]:
    return [2.0 * math.tanh(v) for v in x]


FAKE = Activation("tanh2", "2tanh", "2tanh", given("twice tanh", "两倍的 tanh"), "2 tanh({0} W_1 + b_1)", scaled_tanh,
                  scaled_tanh_backward, scaled_tanh_reference, lambda hidden, itemsize: hidden, ("relu", "none"))


@pytest.fixture
def fake_spec(tmp_path, monkeypatch):
    monkeypatch.setitem(ACTIVATIONS, FAKE.name, FAKE)
    return write_spec(tmp_path, STACK_TEXT.replace("  layers: 2\n", "  layers: 2\n  activation: tanh2\n"))


def test_a_record_registered_at_run_time_runs_and_verifies(fake_spec):
    assert missing_parts(FAKE) == []
    r = run_app("run", str(fake_spec), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    stages = {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}
    from tracer.engine.params import load_params

    params = load_params(load_spec(str(fake_spec)))
    for layer in (0, 1):
        z = stages[f"blocks.{layer}.norm2"] @ params[f"blocks.{layer}.ffn.w1"] + params[f"blocks.{layer}.ffn.b1"]
        assert np.allclose(stages[f"blocks.{layer}.hidden"], 2.0 * np.tanh(z), rtol=1e-13, atol=1e-15)
    r = run_app("run", str(fake_spec), "--verify")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "FFN after 2tanh" in r.stdout and "verify: largest |NumPy - reference|" in r.stdout
    largest = float(r.stdout.split("verify: largest |NumPy - reference| over all stages = ")[1].split()[0])
    assert largest < 1e-12


def test_a_record_registered_at_run_time_differentiates_and_verifies(fake_spec):
    r = run_app("grad", str(fake_spec), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert math.isfinite(doc["loss"]["value"]) and doc["loss"]["value"] > 0
    assert any(w["name"] == "blocks.0.ffn.w1" for w in doc["weight_grads"])
    r = run_app("grad", str(fake_spec), "--verify")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "all agree" in r.stdout


# -- ReLU²: every command knows it from its record -------------------------------------------------------------------

def _relu2_spec(tmp_path):
    from conftest import PRE_TEXT

    return write_spec(tmp_path, PRE_TEXT.replace("  eps: 1e-5\n", "  eps: 1e-5\n  activation: relu2\n"), "relu2.yaml")


def test_diff_names_relu2_and_diagnoses_it_both_ways(tmp_path):
    from conftest import PRE

    relu2 = _relu2_spec(tmp_path)
    r = run_app("diff", PRE, str(relu2))
    assert r.returncode == 1, r.stderr[-2000:]
    assert "hidden = ReLU(norm2 W1 + b1) in A, ReLU²(norm2 W1 + b1) in B (activation: relu | relu2)" in r.stdout
    assert "the design: only B has squared ReLU (ReLU²)" in r.stdout
    for spec, student, words in ((str(relu2), PRE, "with ReLU where the spec asks for ReLU²"),
                                 (PRE, str(relu2), "with ReLU² where the spec asks for ReLU")):
        saved = tmp_path / "student.npz"
        assert run_app("run", student, "--save", str(saved)).returncode == 0
        r = run_app("diff", spec, str(saved))
        assert r.returncode == 1 and words in r.stdout, r.stdout[-1500:]


def test_relu2_needs_no_more_memory_than_relu_and_gelu_tanh_more():
    """The FFN's working memory in the estimate (its op's temporaries) is its activation record's."""
    from tracer.model.ops import OPS

    def held(activation: str) -> int:
        spec = load_spec_text(STACK_TEXT.replace("  layers: 2\n", f"  layers: 2\n  activation: {activation}\n"))
        step = next(s for s in spec.steps if s.op == "ffn_hidden")
        return OPS[step.op].temporary_bytes(spec, step, 8 * 8 * 8, 8 * 8 * 32)

    assert held("relu2") == held("relu") == 0 < held("swiglu") < held("geglu")
    assert held("gelu_tanh") == 3 * 8 * 8 * 32
