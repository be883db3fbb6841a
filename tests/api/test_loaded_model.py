"""tracer.load: a Model holds the checked spec and its weights; its traces read nothing again and equal tracer.trace's.

Three kinds of weights: seeded draws (specs/stack-2-layers.yaml), a tiny Hugging Face GPT-2 made with transformers'
own classes and imported with `tracer import`, and a spec reading its matrices from .npz files.  For each: every
stage of ``m.trace()`` equals ``tracer.trace(spec)`` bit for bit, a second trace reads no checkpoint and draws no
weight (the readers replaced by ones that fail), and the weights are read-only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, SPECS

import tracer
from tracer.checkpoints import formats, refs
from tracer.engine import executor, params
from tracer.errors import SpecError, UsageError

STACK = str(SPECS / "stack-2-layers.yaml")
CLEAN, CORRUPT = str(EXAMPLES / "interventions" / "clean.yaml"), str(EXAMPLES / "interventions" / "corrupt.yaml")


def same(a: tracer.Trace, b: tracer.Trace) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name], equal_nan=True), name


def no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way a run gets its weights (a checkpoint's tensors, seeded draws) made to fail."""

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a weight was read or drawn again")

    for where, name in ((refs, "read_refs"), (params, "load_params"), (params, "materialise"), (params, "fill_uniform"),
                        (executor, "load_params"), (formats.Checkpoint, "read"), (formats.Checkpoint, "read_rows")):
        monkeypatch.setattr(where, name, fail)


def gpt2(tmp_path: Path) -> Path:
    from helpers.hf_parity import imported, need_torch, saved

    torch, transformers = need_torch()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=48, n_positions=16, attn_implementation="eager")
    saved(torch, transformers.GPT2LMHeadModel, cfg, tmp_path / "gpt2")
    return imported(tmp_path, tmp_path / "gpt2", "--tokens", "5,17,42,3,29")


def npz_spec(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "attn.npz", q=rng.standard_normal((8, 8)), o=rng.standard_normal((8, 8)))
    np.savez(tmp_path / "ffn.npz", w1=rng.standard_normal((8, 16)), w2=rng.standard_normal((16, 8)))
    np.save(tmp_path / "emb.npy", rng.standard_normal((11, 8)).astype(np.float32))
    spec = tmp_path / "npz.yaml"
    spec.write_text("dims: {C: 8, H: 2, F: 16, T_max: 8}\nseed: 3\nblock: {norm_order: pre, head: tied, final_norm: true}\n"
                    "input: {tokens: [[1, 4, 9, 2], [0, 3, 3, 10]]}\nweights:\n  embedding: {file: emb.npy}\n"
                    "  attn: {w_q: {file: attn.npz, key: q}, w_o: {file: attn.npz, key: o}}\n"
                    "  ffn: {w1: {file: ffn.npz, key: w1}, w2: {file: ffn.npz, key: w2}}\n", encoding="utf-8")
    return spec


def written_with(spec: str, tokens: list[list[int]], tmp_path: Path) -> str:
    """The spec's YAML with this input written in it, beside it (its files are found from the same folder)."""
    import yaml

    doc = yaml.safe_load(Path(spec).read_text())
    doc["input"] = {"tokens": tokens}
    doc["dims"] = {k: v for k, v in doc["dims"].items() if k not in ("B", "T")}
    out = Path(spec).parent / "with-input.yaml" if Path(spec).parent == tmp_path else tmp_path / "with-input.yaml"
    out.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(out)


def kinds(tmp_path: Path, kind: str) -> str:
    return STACK if kind == "seeded" else str(gpt2(tmp_path) if kind == "gpt2" else npz_spec(tmp_path))


@pytest.mark.parametrize("kind", ["seeded", "gpt2", "npz"])
def test_a_models_traces_read_nothing_again_and_equal_tracer_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    spec = kinds(tmp_path, kind)
    want = tracer.trace(spec)
    m = tracer.load(spec)
    assert isinstance(m, tracer.Model) and m.spec.path == spec
    no_reading(monkeypatch)
    first, second = m.trace(), tracer.trace(m)
    same(first, want)
    same(second, want)
    other = [[int(i) for i in reversed(row)] for row in m.spec.input.value]  # another input of the same length
    t = m.trace(tokens=other)
    assert t.spec.input.value == other and not np.array_equal(t["logits"], want["logits"])
    monkeypatch.undo()
    same(t, tracer.trace(written_with(spec, other, tmp_path)))
    with pytest.raises(ValueError):  # read-only: a notebook cell cannot change a later trace's weights
        m.params["final_norm.gamma"][0] = 0.0
    assert all(not a.flags.writeable for a in m.params.values())
    assert all(not a.flags.writeable for a in first.params.values())


@pytest.mark.parametrize("kind", ["gpt2", "npz"])
def test_a_model_traces_after_its_checkpoint_is_gone(tmp_path: Path, kind: str) -> None:
    spec = kinds(tmp_path, kind)
    want = tracer.trace(spec)
    m = tracer.load(spec)
    files = [p for p in tmp_path.rglob("*") if p.suffix in (".safetensors", ".npz", ".npy")]
    assert files
    for f in files:
        f.rename(f.with_suffix(f.suffix + ".gone"))
    same(m.trace(), want)
    with pytest.raises(tracer.TracerError):  # the spec itself now names files that are not there
        tracer.trace(spec)


def test_another_input_equals_the_spec_written_with_it(tmp_path: Path) -> None:
    clean, corrupt = tracer.load(CLEAN), tracer.trace(CORRUPT)
    words = ["<s>", "the", "mat", "sat", "on"]
    same(clean.trace(tokens=words), corrupt)  # words of the vocab, as the spec writes them
    same(clean.trace(tokens=np.array([[0, 1, 5, 3, 4]])), corrupt)
    longer = clean.trace(tokens=[0, 1, 2, 3, 4, 5, 6])  # another T: its dims follow the input
    assert longer.shape_of("logits").size("T") == 7
    doc = (SPECS / "stack-2-layers.yaml").read_text()
    mine = tmp_path / "mine.yaml"
    mine.write_text(doc.replace("seed: 7", "seed: 8"), encoding="utf-8")
    m = tracer.load(str(mine))
    with pytest.raises(SpecError, match=r"input\.tokens"):
        m.trace(tokens=[0, 99])  # out of the vocabulary: the check a spec file gets, naming the field
    with pytest.raises(UsageError):
        m.with_input([0, 1], text="the cat")


def test_a_models_patch_lens_and_diff_are_the_librarys(tmp_path: Path) -> None:
    m = tracer.load(CLEAN)
    g = m.patch(["<s>", "the", "cat", "sat", "on"], ["<s>", "the", "mat", "sat", "on"], token="mat")
    want = tracer.patch(CLEAN, CORRUPT, token="mat")
    assert g.stages == want.stages and np.array_equal(g.logits, want.logits, equal_nan=True) and g.token == want.token
    options = {"stage": "blocks.*.attn.head.*", "token": "mat", "against": "cat", "metric": "logit-diff", "normalise": True}
    g, want = m.patch(["<s>", "the", "cat", "sat", "on"], ["<s>", "the", "mat", "sat", "on"], **options), tracer.patch(CLEAN, CORRUPT, **options)
    assert g.stages == want.stages and len(g.stages) > 1 and np.array_equal(g.values, want.values, equal_nan=True)
    assert np.array_equal(g.delta, want.delta, equal_nan=True) and np.isfinite(g.delta).any()
    lens, lens_want = m.lens(), tracer.trace(CLEAN).lens()
    assert lens.labels == lens_want.labels and np.array_equal(lens.probs, lens_want.probs)
    d, d_want = m.diff(CORRUPT), tracer.diff(CLEAN, CORRUPT)
    assert d.exit_code == d_want.exit_code == 1 and d.summary == d_want.summary


def test_a_dict_spec_loads_and_its_errors_are_tracer_loads(tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load((SPECS / "stack-2-layers.yaml").read_text())
    same(tracer.load(doc).trace(), tracer.trace(STACK))
    with pytest.raises(SpecError, match=r"^<dict>: dims\.H: expected a whole number"):
        tracer.load({**doc, "dims": {**doc["dims"], "H": "two"}})
    big = {"dims": {"C": 512, "H": 8, "F": 2048, "T": 4}, "seed": 1, "block": {"layers": 4}, "input": {"x": "random"}}  # ~100 MB
    with pytest.raises(UsageError, match=r"^<dict>: loading the model's weights needs about .* \(its weights 101 MB, .*over --max-memory 120MB"):
        tracer.load(big, max_memory="120MB")  # refused before any is drawn
    loaded = tracer.load(STACK)
    assert tracer.load(loaded) is loaded
    with pytest.raises(UsageError, match=r"this run needs about"):  # a trace's own run is checked too
        loaded.trace(max_memory="100MB", tokens=[[0] * 16] * 2048)
