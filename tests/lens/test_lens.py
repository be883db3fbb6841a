"""tracer lens: each layer's residual through the final norm, with that layer's own statistics, and the head.

Checked against the independent NumPy model (tests/helpers/oracle.py): its residual after each layer, its final
norm applied to that residual (its own mean and variance, or RMS), its head and softmax."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from conftest import assert_refused, run_app, run_cli, write_spec
from helpers import oracle as ind
from helpers.tracing import independent_stages

BASE = """
name: lens {norm}
vocab: [<s>, the, cat, sat, in, mat, ., Paris]
dims: {{C: 8, H: 2, F: 16, T_max: 8}}
seed: {seed}
block:
  norm_order: pre
  norm: {norm}
  layers: 3
  mask: causal
  positions: learned
  final_norm: true
  head: {head}
  eps: 0.01
input:
  tokens: [[<s>, the, cat, sat, in], [<s>, the, mat, ., Paris]]
"""


def _text(norm: str = "layernorm", head: str = "tied", seed: int = 3) -> str:
    return BASE.format(norm=norm, head=head, seed=seed)


def _lens_by_hand(text: str, t) -> np.ndarray:
    """[layers, B, T, V]: the oracle's residual entering layer 0 and after each layer, each normalised with its own
    statistics by the oracle's final norm, through the head, softmaxed."""
    st = independent_stages(t.run, text)
    doc = yaml.safe_load(text)
    p = {k: np.asarray(v, dtype=np.float64) for k, v in t.params.items()}
    eps = doc["block"]["eps"]
    rows = [st["x"]] + [st[f"blocks.{i}.output"] for i in range(doc["block"]["layers"])]
    out = []
    for h in rows:
        if doc["block"]["norm"] == "rmsnorm":
            n = ind.rms_norm(h, p["final_norm.gamma"], eps)
        else:
            n = ind.layer_norm(h, p["final_norm.gamma"], p["final_norm.beta"], eps)
        w = p["embedding"].T if doc["block"]["head"] == "tied" else p["head"]
        out.append(ind.softmax(n @ w))
    return np.stack(out)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("head", ["tied", "separate"])
def test_each_layer_agrees_with_its_own_statistics(norm, head):
    import tracer

    text = _text(norm, head)
    t = tracer.trace(yaml.safe_load(text))
    want = _lens_by_hand(text, t)
    for b in range(2):
        r = t.lens(batch=b)
        assert r.labels == ("embed", "blocks.0", "blocks.1", "blocks.2")
        np.testing.assert_allclose(r.probs, want[:, b], rtol=0, atol=1e-12)
        # the last layer's read-out is the run's own probs, bit for bit
        assert np.array_equal(r.probs[-1], t["probs"][b])


def test_the_last_layers_statistics_would_give_other_numbers():
    """The lens must not normalise an early layer with the last layer's scale (the known lens bug)."""
    import tracer

    text = _text("layernorm")
    t = tracer.trace(yaml.safe_load(text))
    r = t.lens()
    p = t.params
    h, last = t["blocks.0.output"][0], t["blocks.2.output"][0]
    mean, std = last.mean(-1, keepdims=True), np.sqrt(last.var(-1, keepdims=True) + 0.01)
    wrong = ind.softmax(((h - mean) / std * p["final_norm.gamma"] + p["final_norm.beta"]) @ p["embedding"].T)
    assert np.abs(r.probs[1] - wrong).max() > 1e-3


def test_the_chosen_token_and_the_top_tokens():
    import tracer

    t = tracer.trace(yaml.safe_load(_text()))
    r = t.lens("Paris", top=2)
    assert set(r.tokens) == {7}
    np.testing.assert_array_equal(r.p_token, r.probs[:, :, 7])
    cell = r.cell(2, 3)
    order = np.argsort(-r.probs[2, 3], kind="stable")[:2]
    assert [i for i, _, _ in cell.top] == [int(i) for i in order]
    assert cell.top[0][1] == ["<s>", "the", "cat", "sat", "in", "mat", ".", "Paris"][order[0]]
    own = t.lens()  # default: each position's own final prediction
    assert list(own.tokens) == [int(i) for i in np.argmax(t["probs"][0], axis=-1)]
    assert t.lens(7).tokens == r.tokens


def test_cli_table_heatmap_json_and_csv(tmp_path):
    spec = write_spec(tmp_path, _text())
    r = run_cli("lens", str(spec), "--token", "Paris")
    assert r.returncode == 0, r.stderr
    assert "logit lens of lens layernorm" in r.stdout and "'Paris' (id 7)" in r.stdout
    assert "layers x positions" in r.stdout and "blocks.2" in r.stdout
    import tracer

    probs = tracer.trace(str(spec)).lens("Paris").probs
    js = json.loads(run_app("lens", str(spec), "--token", "Paris", "--json").stdout)
    assert [layer["layer"] for layer in js["layers"]] == ["embed", "blocks.0", "blocks.1", "blocks.2"]
    assert js["layers"][2]["cells"][1]["p_token"] == probs[2, 1, 7]
    assert js["positions"][1] == {"t": 1, "id": 1, "text": "the"}
    csv = run_app("lens", str(spec), "--token", "7", "--format", "csv", "--top", "1").stdout.splitlines()
    assert csv[0].startswith("layer,t,input_id") and len(csv) == 1 + 4 * 5
    assert float(csv[1].split(",")[6]) == probs[0, 0, 7]
    zh = run_app("lens", str(spec), "--lang", "zh").stdout
    assert "logit lens" in zh and "每一层的残差路径" in zh


def test_svg_export(tmp_path):
    spec = write_spec(tmp_path, _text())
    r = run_app("lens", str(spec), "--svg", str(tmp_path / "lens.svg"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "lens.svg").read_text(encoding="utf-8").startswith("<!-- tracer")


def test_refused_where_the_lens_has_no_meaning(tmp_path):
    assert_refused(run_cli("lens", str(write_spec(tmp_path, _text(head="none"), "a.yaml"))), "has none (block.head: none)")
    r = run_app("lens", str(write_spec(tmp_path, _text().replace("final_norm: true", "final_norm: false"), "b.yaml")))
    assert r.returncode == 2 and "no final norm" in r.stderr
    spec = str(write_spec(tmp_path, _text(), "c.yaml"))
    assert_refused(run_cli("lens", spec, "--token", "Berlin"), "--token 'Berlin'", "vocab")
    r = run_app("lens", spec, "--token", "8")
    assert r.returncode == 2 and "out of range" in r.stderr
    r = run_app("lens", spec, "--top", "0")
    assert r.returncode == 2 and "--top 0" in r.stderr


@pytest.mark.slow  # saves a tiny Hugging Face model of every family (torch), imports and reads each out
@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "qwen2", "mixtral", "gpt_neox", "phi", "gemma", "opt", "opt-post", "bert"])
def test_every_family_reads_out_or_is_refused_in_one_line(family, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib.util

    from tests.conftest import EXAMPLES

    spec_ = importlib.util.spec_from_file_location("tiny_hf_for_lens", EXAMPLES / "checkpoints" / "tiny_hf.py")
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    folder = tmp_path / family
    module.make(family, str(folder))
    out = tmp_path / "s.yaml"
    r = run_app("import", str(folder), "--tokens", "3,5,7,9", "-o", str(out))
    assert r.returncode == 0, r.stderr
    import tracer

    t = tracer.trace(str(out))
    if t.spec.block.head == "none":  # BERT: tracer traces no head, so there is nothing to read out with
        assert_refused(run_cli("lens", str(out)), "has none (block.head: none)")
        return
    r = t.lens()
    assert len(r.labels) == t.spec.block.layers + 1
    assert np.array_equal(r.probs[-1], t["probs"][0])
    np.testing.assert_allclose(r.probs.sum(-1), 1.0, atol=1e-12)


def test_an_ablated_head_moves_the_lens_from_its_layer_on(tmp_path):
    """--ablate on the lens: the layers before the ablated head read as without it, the ones from it on as tracer.trace
    with the same ablation reads them, and the title and JSON say what was done."""
    import tracer

    spec = write_spec(tmp_path, _text())
    plain = tracer.trace(str(spec)).lens("Paris").probs
    ablated = tracer.trace(str(spec), ablate=["blocks.1.attn.head.0"]).lens("Paris").probs
    js = json.loads(run_app("lens", str(spec), "--token", "Paris", "--json", "--ablate", "blocks.1.attn.head.0").stdout)
    got = np.array([[cell["p_token"] for cell in layer["cells"]] for layer in js["layers"]])
    T = plain.shape[1]
    assert np.array_equal(got, ablated[:, np.arange(T), 7])
    assert np.array_equal(got[:2], plain[:2, np.arange(T), 7])  # embed and blocks.0: before the ablated head
    assert not np.allclose(got[2:], plain[2:, np.arange(T), 7])  # blocks.1 on: moved
    assert js["interventions"] == [{"stage": "blocks.1.attention", "kind": "heads", "option": "--ablate blocks.1.attn.head.0", "heads": [0]}]
    table = run_app("lens", str(spec), "--token", "Paris", "--ablate", "blocks.1.attn.head.0")
    assert table.returncode == 0 and "; run while ablating head 0 of layer 1" in table.stdout
    bad = run_app("lens", str(spec), "--ablate", "blocks.9.attn.head.0")
    assert_refused(bad, "--ablate")


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("head", ["tied", "separate"])
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("values", [None, 1])  # the default (every layer in one tail), and one layer a tail
def test_the_stacked_read_out_agrees_with_one_layer_at_a_time(norm, head, dtype, tol, values, monkeypatch):
    """read_out reads the layers' rows of the sample through one stacked tail; each layer's own tail on the whole batch
    (the lens before, _by_layer) gives the same numbers to rounding, and the last layer is the run's own probs."""
    import tracer
    from tracer.lens import core

    if values is not None:
        monkeypatch.setattr(core, "LENS_VALUES", values)
    doc = yaml.safe_load(_text(norm, head))
    doc["dtype"] = dtype
    t = tracer.trace(doc)
    p = core.plan(t.spec)
    assert core.stackable(t.spec, p)
    rows = [t.run.stages[n].data for n in p.rows]
    for b in range(2):
        got = t.lens(batch=b).probs
        want = core._by_layer(t.spec, p, rows, None, t.params, {"tokens": np.asarray(t.spec.input.value)}, b)
        assert got.dtype == np.dtype(dtype) and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=tol)
        assert np.array_equal(got[-1], t["probs"][b])
        assert not np.array_equal(got[1], got[2])  # the layers are not mixed up


@pytest.mark.parametrize("values", [None, 1])
def test_the_stacked_tail_writes_its_probabilities_straight_into_the_lens(values, monkeypatch):
    """The tail's softmax is given the lens's own [layers, T, V] rows to write into (no second array made and copied);
    one tail or one a layer, every layer's rows but the last (the run's own) are written there."""
    import tracer
    from tracer.engine import kernels
    from tracer.lens import core

    if values is not None:
        monkeypatch.setattr(core, "LENS_VALUES", values)
    t = tracer.trace(yaml.safe_load(_text()))
    given: list[np.ndarray] = []
    real = kernels.softmax_by_rows

    def spy(x, rows, out=None):
        if out is not None:
            given.append(out)
        return real(x, rows, out=out)

    monkeypatch.setattr(kernels, "softmax_by_rows", spy)
    probs = t.lens().probs
    assert given and all(np.shares_memory(g, probs) for g in given)
    assert sum(g.size for g in given) == probs[:-1].size  # every layer's rows but the last, each once


@pytest.mark.parametrize("head", ["tied", "separate"])
def test_the_tail_given_an_array_writes_its_logits_and_probabilities_there(head, monkeypatch):
    """_tail into an array: the head's logits and then the softmax over them are written there, with the same numbers
    as a tail making its own arrays, so it makes no [rows, V] array at all."""
    import tracer
    from tracer.engine import executor
    from tracer.lens import core

    t = tracer.trace(yaml.safe_load(_text(head=head)))
    p = core.plan(t.spec)
    inputs = {"tokens": np.asarray(t.spec.input.value)}
    h = t.run.stages[p.rows[1]].data[:1]
    plain = core._tail(t.spec, p, h, t.params, inputs)
    made: list[executor.Executor] = []
    real = executor.Executor

    def keep(*a, **k):  # type: ignore[no-untyped-def]
        made.append(real(*a, **k))
        return made[-1]

    monkeypatch.setattr(executor, "Executor", keep)
    buf = np.full(plain.shape, np.nan, dtype=plain.dtype)
    got = core._tail(t.spec, p, h, t.params, inputs, into=buf)
    assert np.array_equal(got, plain) and np.shares_memory(got, buf)
    stages = made[-1].trace.stages
    ops = {s.name: s.op for s in t.spec.steps[p.tail_start:]}
    written = [n for n, op in ops.items() if op in ("head", "softmax")]
    assert len(written) == 2 and all(np.shares_memory(stages[n].data, buf) for n in written)


def test_a_tail_intervention_reads_out_layer_by_layer(tmp_path):
    """--set on a tail step: its value has the run's own shape, so each layer is read out by its own tail, as before."""
    import tracer
    from tracer.lens import core

    spec = write_spec(tmp_path, _text())
    t = tracer.trace(str(spec), ablate=["final_norm"])
    assert not core.stackable(t.spec, core.plan(t.spec))
    r = t.lens()
    np.testing.assert_allclose(r.probs, 1 / 8, rtol=0, atol=1e-12)  # every layer's norm zeroed: uniform over the vocab
