"""Reading a checkpoint's tensors: straight into the run's dtype, a block at a time; tracer run holding about one
layer's weights at a time, read a layer ahead on a helper (params.LayerWeights), with the same numbers; the memory
estimate of that."""

from __future__ import annotations

import gc
import json
import struct
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest
from conftest import example_module

from tracer.checkpoints import formats, refs
from tracer.checkpoints.formats import open_checkpoint
from tracer.engine import executor, params
from tracer.spec import load_spec, memory

make_gpt2 = example_module("checkpoints/tiny_gpt2.py").make

SPEC = """\
dims: {{C: 32, H: 4, F: 128}}
dtype: {dtype}
block: {{layers: 3, norm_order: pre, activation: gelu_tanh, positions: learned, final_norm: true, head: tied}}
weights: {{file: gpt2, layout: gpt2}}
input: {{tokens: [1, 5, 9, 2]}}
"""


def write_bf16(path: Path, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A safetensors file of bfloat16 tensors (each float32 value cut to its top 16 bits), and the float32 values it holds."""
    header, blobs, offset, held = {}, [], 0, {}
    for key, a in tensors.items():
        top = (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
        held[key] = (top.astype(np.uint32) << 16).view(np.float32)
        blob = top.tobytes()
        header[key] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return held


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bfloat16_is_widened_block_by_block_to_the_same_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    rng = np.random.default_rng(0)
    held = write_bf16(tmp_path / "w.safetensors", {"a": rng.standard_normal((37, 11)), "b": rng.standard_normal(5)})
    monkeypatch.setattr(formats, "READ_BLOCK", 64)  # 32 values a block: many blocks, the last one short
    ck = open_checkpoint(str(tmp_path / "w.safetensors"))
    for key, want in held.items():
        got = ck.read(key, dtype)
        assert got.dtype == np.dtype(dtype) and got.shape == want.shape
        assert np.array_equal(got, want.astype(dtype))


@pytest.mark.parametrize(("stored", "dtype"), [("float32", "float32"), ("float32", "float64"), ("float64", "float32"), ("float64", "float64")])
def test_a_tensor_is_read_into_the_runs_dtype_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: str, dtype: str) -> None:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(1)
    a = rng.standard_normal((50, 7)).astype(stored)
    save_file({"a": a}, str(tmp_path / "w.safetensors"))
    monkeypatch.setattr(formats, "READ_BLOCK", 96)
    got = open_checkpoint(str(tmp_path / "w.safetensors")).read("a", dtype)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, a.astype(dtype))
    assert got.flags.writeable and got.flags.owndata  # an array of its own, not a view of the file


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_matrix_is_read_straight_into_its_transpose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(2)
    held = write_bf16(tmp_path / "b.safetensors", {"w": rng.standard_normal((45, 13))})["w"]
    a = rng.standard_normal((45, 13)).astype(np.float32)
    save_file({"w": a}, str(tmp_path / "f.safetensors"))
    monkeypatch.setattr(formats, "READ_BLOCK", 4 * 13 * 4 * 3)  # 3 rows a block: the last block short
    for name, want in (("b", held), ("f", a)):
        got = open_checkpoint(str(tmp_path / f"{name}.safetensors")).read("w", dtype, transpose=True)
        assert got.shape == (13, 45) and got.flags.c_contiguous and got.dtype == np.dtype(dtype)
        assert np.array_equal(got, want.T.astype(dtype))


def test_the_finiteness_check_finds_a_nan_or_inf_in_any_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "READ_BLOCK", 80)  # 10 float64 values a block
    a = np.ones((9, 7))
    assert formats.all_finite(a)
    for bad in (np.nan, np.inf, -np.inf):
        b = a.copy()
        b.flat[57] = bad  # in the sixth block
        assert not formats.all_finite(b)
    big = np.full(40, 1e308)  # a block's sum overflows though every value is finite
    assert formats.all_finite(big)


def run(spec_path: Path, by_layer: bool, record: str = "main") -> executor.Executor:
    s = load_spec(str(spec_path))
    drawn = params.draw_params(s, by_layer=by_layer).result()
    ex = executor.Executor(s, policy=memory.RecordPolicy(record), params=drawn, by_layer=by_layer)
    with np.errstate(all="ignore"):
        ex.run()
    return ex


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("record", ["main", "all"])
def test_a_layer_at_a_time_gives_the_same_numbers(tmp_path: Path, dtype: str, record: str) -> None:
    make_gpt2(str(tmp_path / "gpt2"), layers=3)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(dtype=dtype))
    whole, layered = run(spec, False, record), run(spec, True, record)
    assert whole.trace.stages.keys() == layered.trace.stages.keys()
    for name, st in whole.trace.stages.items():
        other = layered.trace.stages[name]
        assert st.data is not None and other.data is not None and st.data.dtype == np.dtype(dtype)
        assert np.array_equal(st.data, other.data), name  # to the last bit
    # what is left: the tables (a tied head reads the embedding last), never a layer's or the final norm's weights
    assert sorted(layered.params) == ["embedding", "position"]
    assert any(k.startswith("blocks.") for k in whole.params)


def test_a_layers_weights_are_gone_once_the_run_is_a_layer_past_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_gpt2(str(tmp_path / "gpt2"), layers=4)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(dtype="float32").replace("layers: 3", "layers: 4"))
    alive: dict[str, weakref.ref[np.ndarray]] = {}
    seen: list[tuple[int, list[int]]] = []
    real = refs.read_refs

    def reading(wanted, dtype, allow_nonfinite, rows=None):
        gc.collect()
        first = next(iter(wanted))
        if first.startswith("blocks."):
            held = sorted({int(k.split(".")[1]) for k, r in alive.items() if r() is not None and k.startswith("blocks.")})
            seen.append((int(first.split(".")[1]), held))
        out = real(wanted, dtype, allow_nonfinite, rows)
        alive.update({k: weakref.ref(v) for k, v in out.items()})
        return out

    monkeypatch.setattr(refs, "read_refs", reading)
    ex = run(spec, True)
    assert ex.trace.ok
    assert [layer for layer, _ in seen] == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4  # norm1, attention, norm2, FFN of each layer
    assert all(min(held, default=layer) >= layer - 1 for layer, held in seen), seen  # read ahead by one layer at most
    gc.collect()
    assert sorted(k for k, r in alive.items() if r() is not None) == ["embedding", "position"]  # the tables the executor keeps
    assert not [t for t in threading.enumerate() if t.name == "tracer-reads"]  # the helper is done


def test_the_estimate_counts_the_groups_held_at_once(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "gpt2"), layers=3)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(dtype="float32"))
    s = load_spec(str(spec))
    whole = memory.estimate(s, memory.RecordPolicy("main"))
    layered = memory.estimate(s, memory.RecordPolicy("main"), by_layer=True)
    ffn = sum(int(np.prod(s.weights[f"blocks.0.ffn.{k}"].shape)) for k in ("w1", "b1", "w2", "b2")) * 4
    layer = sum(int(np.prod(w.shape)) for name, w in s.weights.items() if name.startswith("blocks.1.")) * 4
    tables = int(np.prod(s.weights["embedding"].shape)) * 4 + int(np.prod(s.weights["position"].shape)) * 4  # a tied head reads all of wte
    inputs = 4 * 8
    # held at once, at most: a layer's FFN in use and the next layer's four groups read ahead
    assert layered.weights == tables + inputs + ffn + layer
    assert whole.weights > layered.weights


def test_a_run_from_a_later_step_reads_only_the_layers_it_computes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_gpt2(str(tmp_path / "gpt2"), layers=3)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(dtype="float64"))
    s = load_spec(str(spec))
    start = next(i for i, step in enumerate(s.steps) if step.name == "blocks.2.norm1")
    whole = run(spec, False)
    read: list[str] = []
    real = refs.read_refs
    monkeypatch.setattr(refs, "read_refs", lambda wanted, *a, **k: read.extend(wanted) or real(wanted, *a, **k))
    drawn = params.draw_params(s, by_layer=True).result()
    ex = executor.Executor(s, policy=memory.RecordPolicy("main"), params=drawn, by_layer=True)
    live = {"blocks.1.output": whole.trace.stages["blocks.1.output"].array}
    done: list[executor.Recording] = []
    worker = threading.Thread(target=lambda: done.append(ex.run(start=start, live=live)), daemon=True)
    worker.start()
    worker.join(60)
    assert done, "the run from a later step never finished"
    assert not any(k.startswith(("blocks.0.", "blocks.1.")) for k in read), read
    assert np.array_equal(done[0].stages["blocks.2.output"].array, whole.trace.stages["blocks.2.output"].array)
