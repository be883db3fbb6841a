"""Weights from checkpoint files (tracer/checkpoints): formats, layouts, the spec's file weights, errors, `tracer import`.

Everything here runs without torch: checkpoints are written with NumPy and safetensors (a GPT-2
folder exactly as Hugging Face names and shapes it, by examples/checkpoints/tiny_gpt2.py).  The
comparisons against Hugging Face and PyTorch themselves are in test_checkpoints_hf.py.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, assert_refused, example_module, run_app, run_cli, where

from tracer.checkpoints import families, formats
from tracer.checkpoints.families.base import Layout, Take
from tracer.checkpoints.formats import open_checkpoint
from tracer.engine import executor
from tracer.errors import CheckpointError, SpecError
from tracer.spec import load_spec, memory

make_gpt2 = example_module("checkpoints/tiny_gpt2.py").make

GPT2_SPEC = """\
dims: {{C: 32, H: 4, F: 128}}
block: {{layers: {layers}, norm_order: pre, activation: gelu_tanh, positions: learned, final_norm: {final}, head: {head}}}
weights: {{file: {file}, layout: gpt2{extra}}}
input: {{tokens: [1, 5, 9, 2]}}
"""


def gpt2_spec(tmp_path: Path, file: str = "gpt2", layers: int = 2, final: bool = True, head: str = "tied", extra: str = "",
              name: str = "spec.yaml") -> tuple[Path, str]:
    text = GPT2_SPEC.format(file=file, layers=layers, final=str(final).lower(), head=head, extra=extra)
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p, text


@pytest.fixture
def gpt2(tmp_path: Path) -> dict[str, np.ndarray]:
    return make_gpt2(str(tmp_path / "gpt2"), layers=2, dtype="float64")


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...], bytes]]) -> None:
    """A safetensors file written by hand (NumPy has no bfloat16 for safetensors.numpy to write)."""
    header, offset, blobs = {}, 0, []
    for key, (dtype, shape, data) in tensors.items():
        header[key] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# -- formats ----------------------------------------------------------------------
def test_bfloat16_is_widened_exactly(tmp_path: Path) -> None:
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype("<u2")  # bfloat16: the top 16 bits of the float32
    expected = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    write_safetensors(tmp_path / "bf.safetensors", {"w": ("BF16", (3, 5), bits.tobytes())})
    got = open_checkpoint(str(tmp_path / "bf.safetensors")).read("w", "float64")
    assert got.dtype == np.float64 and np.array_equal(got, expected)
    assert np.abs(got - x).max() < 2 ** -7 * np.abs(x).max()  # within bfloat16's 8-bit precision of the original


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_safetensors_dtypes_convert_to_the_spec_dtype(tmp_path: Path, dtype: str) -> None:
    from safetensors.numpy import save_file

    x = np.random.default_rng(2).standard_normal((4, 3)).astype(dtype)
    save_file({"w": x}, str(tmp_path / "m.safetensors"))
    ck = open_checkpoint(str(tmp_path / "m.safetensors"))
    assert ck.info("w").dtype == dtype and ck.info("w").shape == (4, 3)
    for want in ("float64", "float32"):
        got = ck.read("w", want)
        assert got.dtype == want and np.array_equal(got, x.astype(want))


def test_npz_members_and_npy(tmp_path: Path) -> None:
    a, b = np.arange(6.0).reshape(2, 3), np.ones(4, dtype=np.float16)
    np.savez_compressed(tmp_path / "w.npz", a=a, b=b)
    np.save(tmp_path / "c.npy", a.T)
    z = open_checkpoint(str(tmp_path / "w.npz"))
    assert sorted(z.keys()) == ["a", "b"] and z.info("b").dtype == "float16" and z.info("a").shape == (2, 3)
    assert np.array_equal(z.read("a", "float64"), a)
    n = open_checkpoint(str(tmp_path / "c.npy"))
    assert n.keys() == ["c"] and np.array_equal(n.read("c", "float32"), a.T.astype(np.float32))


def test_integer_tensors_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "i.npy", np.arange(4))
    with pytest.raises(CheckpointError, match="holds int64, expected floating-point"):
        open_checkpoint(str(tmp_path / "i.npy")).read("i", "float64")


def test_layer_zero_reads_only_layer_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_gpt2(str(tmp_path / "gpt2"), layers=3)
    spec, _ = gpt2_spec(tmp_path, layers=1, final=False, head="none")
    read: list[str] = []
    real = formats.SafetensorsFile.fill
    monkeypatch.setattr(formats.SafetensorsFile, "fill", lambda self, key, out: read.append(key) or real(self, key, out))
    trace = executor.run(load_spec(str(spec)))
    assert trace.ok and read
    # wte is not read whole: no tied head reads it, so only the rows of the 4 tokens are (test_an_untied_run_...)
    assert all(k.startswith(("transformer.h.0.", "transformer.wpe")) for k in read), read
    assert len(read) == len(set(read))  # the packed q, k, v tensor is read once for the three of them


def test_sharded_folder_opens_only_the_shards_it_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from safetensors.numpy import load_file, save_file

    tensors = make_gpt2(str(tmp_path / "one"), layers=2)
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text((tmp_path / "one" / "config.json").read_text())
    shards: dict[str, dict[str, np.ndarray]] = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    for k, v in tensors.items():
        shards["model-00002-of-00002.safetensors" if ".h.1." in k else "model-00001-of-00002.safetensors"][k] = v
    for name, part in shards.items():
        save_file(part, str(folder / name))
    index = {"metadata": {}, "weight_map": {k: n for n, part in shards.items() for k in part}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    opened: list[str] = []
    real = formats._open_file
    monkeypatch.setattr(formats, "_open_file", lambda path: opened.append(Path(path).name) or real(path))
    spec, _ = gpt2_spec(tmp_path, layers=1, final=False, head="none")
    trace = executor.run(load_spec(str(spec)))
    assert opened == ["model-00001-of-00002.safetensors"]
    spec2, _ = gpt2_spec(tmp_path, file="one", layers=1, final=False, head="none", name="one.yaml")
    same = executor.run(load_spec(str(spec2)))
    assert np.array_equal(trace.stages["output"].array, same.stages["output"].array)
    assert load_file(str(folder / "model-00002-of-00002.safetensors"))  # the shard exists; it was simply never opened


# -- the families: one file each (table + config reader), one registry ----------------------------
# Families whose checkpoints carry no config.json, so no model_type picks them (--layout only).  A new
# Hugging Face family must list its model_types; one without config.json must be named here on purpose.
NO_CONFIG_JSON = {"torch", "tracer"}


def missing_parts(family: Layout) -> list[str]:
    """What a registered family lacks: its table, its config reader in its own file, its model_types."""
    import inspect

    module = sys.modules.get(getattr(family.read_config, "__module__", ""))
    missing = []
    if not family.name or not family.summary:
        missing.append("name and summary")
    if not family.table or not all(isinstance(k, str) and isinstance(t, Take) and t.key for k, t in family.table.items()):
        missing.append("layout table")
    if not callable(family.read_config) or len(inspect.signature(family.read_config).parameters) != 4:
        missing.append("config reader (config, checkpoint, layout, options)")
    elif (module is None or not module.__name__.startswith("tracer.checkpoints.families.") or module.__name__.endswith(".base")
          or getattr(getattr(module, "LAYOUT", None), "name", None) != family.name or getattr(module, "read_config", None) is not family.read_config
          or not callable(getattr(module, "table", None))):
        missing.append("one file holding table(), the config reader and LAYOUT")
    if not isinstance(family.model_types, tuple) or not all(isinstance(t, str) and t for t in family.model_types):
        missing.append("model_types (a tuple of names)")
    elif bool(family.model_types) == (family.name in NO_CONFIG_JSON):
        missing.append("model_types" if family.model_types == () else "model_types, or leave it out of NO_CONFIG_JSON")
    return missing


@pytest.mark.parametrize("name", families.names())
def test_every_registered_family_has_its_parts(name: str) -> None:
    family = families.layouts()[name]
    assert missing_parts(family) == []
    module = sys.modules[family.read_config.__module__]
    assert module.LAYOUT is family and module.table() == family.table  # the registry lists the file's own LAYOUT, built from its table


def test_a_family_without_a_part_is_caught() -> None:
    """The check above can fail: each part taken away from a real family is named."""
    gpt2, torch = families.layouts()["gpt2"], families.layouts()["torch"]
    assert missing_parts(gpt2._replace(table={})) == ["layout table"]
    assert missing_parts(gpt2._replace(model_types=())) == ["model_types"]
    assert missing_parts(torch._replace(model_types=("torch",))) == ["model_types, or leave it out of NO_CONFIG_JSON"]
    assert missing_parts(gpt2._replace(read_config=torch.read_config)) == ["one file holding table(), the config reader and LAYOUT"]
    assert missing_parts(gpt2._replace(read_config=lambda config, ckpt: None)) == ["config reader (config, checkpoint, layout, options)"]


def test_every_layout_and_model_type_name_picks_exactly_one_family() -> None:
    registered = families.FAMILIES
    assert families.names() == tuple(f.name for f in registered) == tuple(families.layouts())
    assert len(set(families.names())) == len(registered)
    for family in registered:
        assert families.layouts()[family.name] is family
        for model_type in family.model_types:
            assert [f.name for f in registered if model_type in f.model_types] == [family.name], model_type
            assert families.infer({"model_type": model_type}) == family.name
            assert model_type not in families.names() or model_type == family.name  # a model_type never names another --layout
    assert families.infer({"model_type": "xlnet"}) is None and families.infer(None) is None and families.infer({}) is None
    # Every family file in the folder is registered (writing the file is not enough: add it to FAMILIES).
    folder = REPO / "tracer" / "checkpoints" / "families"
    files = {p.stem for p in folder.glob("*.py")} - {"__init__", "base"}
    assert files == {f.read_config.__module__.rsplit(".", 1)[1] for f in registered}


def test_the_families_import_no_numpy() -> None:
    code = "import sys, tracer.checkpoints.families, tracer.checkpoints.refs, tracer.checkpoints.importer; print('numpy' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


# -- the spec's file weights --------------------------------------------------------
def _inline(a: np.ndarray) -> str:
    return json.dumps(a.tolist())


def test_gpt2_layout_is_the_same_as_writing_the_weights_out(tmp_path: Path, gpt2: dict[str, np.ndarray]) -> None:
    """The layout's table and splits give exactly the weights a user would write by hand from the tensors."""
    C = 32
    spec, _ = gpt2_spec(tmp_path, layers=1, final=False, head="none")
    t = {k.removeprefix("transformer."): v for k, v in gpt2.items()}
    w = t["h.0.attn.c_attn.weight"]
    b = t["h.0.attn.c_attn.bias"]
    inline = f"""\
dims: {{C: 32, H: 4, F: 128}}
block: {{layers: 1, norm_order: pre, activation: gelu_tanh, positions: learned}}
input: {{tokens: [1, 5, 9, 2]}}
weights:
  embedding: {_inline(t["wte.weight"])}
  position: {_inline(t["wpe.weight"])}
  norm1: {{gamma: {_inline(t["h.0.ln_1.weight"])}, beta: {_inline(t["h.0.ln_1.bias"])}}}
  norm2: {{gamma: {_inline(t["h.0.ln_2.weight"])}, beta: {_inline(t["h.0.ln_2.bias"])}}}
  attn:
    w_q: {_inline(w[:, :C])}
    w_k: {_inline(w[:, C:2 * C])}
    w_v: {_inline(w[:, 2 * C:])}
    b_q: {_inline(b[:C])}
    b_k: {_inline(b[C:2 * C])}
    b_v: {_inline(b[2 * C:])}
    w_o: {_inline(t["h.0.attn.c_proj.weight"])}
    b_o: {_inline(t["h.0.attn.c_proj.bias"])}
  ffn:
    w1: {_inline(t["h.0.mlp.c_fc.weight"])}
    b1: {_inline(t["h.0.mlp.c_fc.bias"])}
    w2: {_inline(t["h.0.mlp.c_proj.weight"])}
    b2: {_inline(t["h.0.mlp.c_proj.bias"])}
"""
    ref = tmp_path / "inline.yaml"
    ref.write_text(inline)
    a, b_ = executor.run(load_spec(str(spec))), executor.run(load_spec(str(ref)))
    assert list(a.stages) == list(b_.stages)
    for name in a.stages:
        assert np.array_equal(a.stages[name].array, b_.stages[name].array), name
    assert load_spec(str(spec)).dims.V == 64 and load_spec(str(spec)).dims.T_max == 32  # the tables' rows, from the file


def test_one_matrix_from_a_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    q, k, e = rng.standard_normal((4, 4)), rng.standard_normal((4, 4)), rng.standard_normal((5, 4))
    np.savez(tmp_path / "w.npz", attn_q=q)
    np.save(tmp_path / "k_out_in.npy", k.T)  # stored [out, in], as nn.Linear keeps it
    from safetensors.numpy import save_file

    (tmp_path / "sub").mkdir()
    save_file({"emb": e.astype(np.float32)}, str(tmp_path / "sub" / "e.safetensors"))
    head = "dims: {C: 4, H: 2, F: 8}\nseed: 1\ninput: {tokens: [0, 3, 4]}\n"
    spec = tmp_path / "spec.yaml"
    spec.write_text(head + "weights:\n  embedding: {file: sub/e.safetensors}\n"
                    "  attn: {w_q: {file: w.npz, key: attn_q}, w_k: {file: k_out_in.npy, transpose: true}}\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text(head + f"weights:\n  embedding: {_inline(e.astype(np.float32).astype(np.float64))}\n"
                     f"  attn: {{w_q: {_inline(q)}, w_k: {_inline(k)}}}\n")
    s = load_spec(str(spec))
    assert s.weights["attn.w_q"].source == "file" and s.weights["attn.w_v"].source == "seed" and s.dims.V == 5
    a, b = executor.run(s), executor.run(load_spec(str(plain)))
    for name in a.stages:
        assert np.array_equal(a.stages[name].array, b.stages[name].array), name


def test_tracer_layout_round_trips_a_saved_trace(tmp_path: Path) -> None:
    spec = tmp_path / "a.yaml"
    spec.write_text((REPO / "specs" / "stack-2-layers.yaml").read_text())
    r = run_app("run", str(spec), "--save", str(tmp_path / "t.npz"), "--with-weights")
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "t.npz") as z:
        assert "weights.blocks.1.attn.w_q" in z.files and "blocks.1.output" in z.files
    text = spec.read_text().replace("seed: 7", "weights: {file: t.npz, layout: tracer}")
    (tmp_path / "b.yaml").write_text(text)
    b = load_spec(str(tmp_path / "b.yaml"))
    assert b.seed is None and all(w.source == "file" for name, w in b.weights.items() if not name.endswith((".beta", ".gamma")))
    a_trace, b_trace = executor.run(load_spec(str(spec))), executor.run(b)
    assert np.array_equal(a_trace.stages["probs"].array, b_trace.stages["probs"].array)


# -- errors: exit 2, one line, the spec's file:line:col, the checkpoint, the key, the shapes ---------
def _refused(spec: Path, *fragments: str, command: str = "run") -> str:
    r = run_app(command, str(spec))
    assert_refused(r, *fragments)
    return r.stderr


def test_missing_checkpoint_file(tmp_path: Path) -> None:
    spec, text = gpt2_spec(tmp_path, file="nope.safetensors")
    _refused(spec, f"spec.yaml:{where(text, 'nope.safetensors')}: weights.file", "nope.safetensors", "no such file")


def test_missing_key_suggests_the_closest(tmp_path: Path) -> None:
    np.savez(tmp_path / "w.npz", attn_q=np.eye(4))
    text = "dims: {C: 4, H: 2, F: 8, T: 3}\nseed: 1\ninput: {x: random}\nweights:\n  attn: {w_q: {file: w.npz, key: attn_qq}}\n"
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    _refused(spec, f"spec.yaml:{where(text, '{file: w.npz')}: weights.attn.w_q", "w.npz", "no tensor 'attn_qq'", "did you mean 'attn_q'?")


def test_missing_key_in_a_layout(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    t = make_gpt2(str(tmp_path / "gpt2"), layers=1)
    del t["transformer.h.0.ln_2.bias"]
    save_file(t, str(tmp_path / "gpt2" / "model.safetensors"))
    spec, text = gpt2_spec(tmp_path, layers=1)
    _refused(spec, f"spec.yaml:{where(text, 'gpt2,')}: weights.file", "model.safetensors", "no tensor 'transformer.h.0.ln_2.bias'",
             "(for norm2.beta [C] = [32])", "did you mean 'transformer.h.0.ln_")


def test_wrong_shape_names_expected_and_received(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "gpt2"), layers=1, C=32)
    spec, text = gpt2_spec(tmp_path, layers=1)
    spec.write_text(text.replace("F: 128", "F: 64"))
    _refused(spec, "spec.yaml:3:", "weights.file", "model.safetensors", "tensor 'transformer.h.0.mlp.c_fc.weight'",
             "ffn.w1 [C,F] = [32,64]", "expected [32,64], received [32,128]")


def test_wrong_shape_of_a_packed_tensor(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    t = make_gpt2(str(tmp_path / "gpt2"), layers=1, C=32)
    t["transformer.h.0.attn.c_attn.weight"] = t["transformer.h.0.attn.c_attn.weight"][:, :64].copy()  # q and k only
    save_file(t, str(tmp_path / "gpt2" / "model.safetensors"))
    spec, text = gpt2_spec(tmp_path, layers=1)
    _refused(spec, f"spec.yaml:{where(text, 'gpt2,')}: weights.file", "model.safetensors", "'transformer.h.0.attn.c_attn.weight' "
             "(part 1 of 3 along axis 1) for attn.w_q [C,C] = [32,32]: expected [32,96], received [32,64]")


def test_truncated_safetensors(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "gpt2"), layers=1)
    f = tmp_path / "gpt2" / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    spec, text = gpt2_spec(tmp_path, layers=1)
    _refused(spec, f"spec.yaml:{where(text, 'gpt2,')}: weights.file", "model.safetensors", "is truncated")


def test_corrupt_safetensors_header(tmp_path: Path) -> None:
    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", 10) + b"not json!!" + b"\0" * 8)
    spec, _ = gpt2_spec(tmp_path, file="bad.safetensors")
    _refused(spec, "bad.safetensors", "not a safetensors file")


def test_truncated_npz(tmp_path: Path) -> None:
    np.savez(tmp_path / "w.npz", q=np.eye(4))
    (tmp_path / "w.npz").write_bytes((tmp_path / "w.npz").read_bytes()[:150])
    text = "dims: {C: 4, H: 2, F: 8, T: 3}\nseed: 1\ninput: {x: random}\nweights:\n  attn: {w_q: {file: w.npz, key: q}}\n"
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    _refused(spec, f"spec.yaml:{where(text, '{file: w.npz')}: weights.attn.w_q", "w.npz", "truncated")


def test_pickled_npy_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    text = "dims: {C: 4, H: 2, F: 8, T: 3}\nseed: 1\ninput: {x: random}\nweights:\n  attn: {w_q: {file: o.npy}}\n"
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    _refused(spec, "o.npy", "Python objects (a pickle)")


def test_a_pickle_without_torch_says_how_to_convert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04 not read")
    monkeypatch.setattr(formats, "torch_available", lambda: False)
    spec = tmp_path / "spec.yaml"
    text = "dims: {C: 4, H: 2, F: 8, T: 3}\nseed: 1\ninput: {x: random}\nweights: {file: model.pt, layout: torch}\n"
    spec.write_text(text)
    _refused(spec, f"spec.yaml:{where(text, 'model.pt')}: weights.file", "model.pt", "pip install 'tracer[torch]'",
             "save_file(torch.load('model.pt', weights_only=True)")


def test_nonfinite_tensor_is_refused_unless_allowed(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    t = make_gpt2(str(tmp_path / "gpt2"), layers=1)
    t["transformer.h.0.mlp.c_fc.bias"][3] = np.nan
    save_file(t, str(tmp_path / "gpt2" / "model.safetensors"))
    spec, text = gpt2_spec(tmp_path, layers=1)
    _refused(spec, f"spec.yaml:{where(text, 'gpt2,')}: weights.file", "model.safetensors", "'transformer.h.0.mlp.c_fc.bias'",
             "1 NaN and 0 Inf", "allow_nonfinite")
    spec.write_text(text + "allow_nonfinite: true\n")
    r = run_app("run", str(spec))
    assert r.returncode == 1 and "nonfinite" in r.stdout  # traced, and the NaN flagged where it first shows


def test_layout_errors(tmp_path: Path, gpt2: dict[str, np.ndarray]) -> None:
    spec, text = gpt2_spec(tmp_path)
    spec.write_text(text.replace("layout: gpt2", "layout: gtp2"))
    _refused(spec, "weights.layout", "expected one of gpt2 | llama | mixtral | torch | tracer", "received text 'gtp2'")
    spec.write_text(text.replace("layout: gpt2", "leyout: gpt2"))
    _refused(spec, "weights.leyout", "did you mean 'layout'?")
    from safetensors.numpy import save_file

    save_file({"w": np.eye(2)}, str(tmp_path / "plain.safetensors"))
    spec.write_text(text.replace("file: gpt2, layout: gpt2", "file: plain.safetensors"))
    _refused(spec, "weights.file", "which layout?")


def test_layout_is_inferred_from_config_json(tmp_path: Path, gpt2: dict[str, np.ndarray]) -> None:
    spec, text = gpt2_spec(tmp_path)
    spec.write_text(text.replace(", layout: gpt2", ""))
    assert load_spec(str(spec)).weights["blocks.1.attn.w_q"].source == "file"


def test_validate_reads_headers_only_and_loads_no_numpy(tmp_path: Path, gpt2: dict[str, np.ndarray]) -> None:
    spec, _ = gpt2_spec(tmp_path)
    code = (f"import sys\nsys.argv = ['tracer', 'validate', {str(spec)!r}]\nfrom tracer.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('EXIT', e.code, 'numpy' in sys.modules, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert "EXIT 0 False" in r.stderr, r.stderr
    assert ": ok" in r.stdout


def test_max_memory_counts_the_checkpoint_and_refuses_before_reading(tmp_path: Path, gpt2: dict[str, np.ndarray],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = gpt2_spec(tmp_path)
    s = load_spec(str(spec))
    est = memory.estimate(s, memory.RecordPolicy())
    n_weights = sum(int(np.prod(w.shape)) for w in s.weights.values())
    assert est.weights >= n_weights * 8
    read: list[str] = []
    for name in ("raw", "fill"):
        monkeypatch.setattr(formats.SafetensorsFile, name, lambda self, key, *out: read.append(key))
    r = run_app("run", str(spec), "--max-memory", "1MB")
    assert r.returncode == 2 and "over --max-memory" in r.stderr and read == []


# -- tracer import --------------------------------------------------------------------
def test_import_writes_a_spec_that_runs(tmp_path: Path, gpt2: dict[str, np.ndarray]) -> None:
    out = tmp_path / "specs" / "g.yaml"
    out.parent.mkdir()
    r = run_cli("import", str(tmp_path / "gpt2"), "--tokens", "3,1,4,1,5", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "file: ../gpt2" in text and "tokens: [3, 1, 4, 1, 5]" in text and "head: tied" in text
    assert "eps: 1e-05" in text and "activation: gelu_tanh" in text and "# activation_function: gelu_new" in text
    r = run_cli("run", "g.yaml", "--json", cwd=out.parent)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    names = [s["name"] for s in doc["stages"]]
    assert "blocks.1.output" in names and "logits" in names and doc["dims"]["V"] == 64


def test_import_a_layer_range_leaves_out_the_logits_and_says_so(tmp_path: Path, gpt2: dict[str, np.ndarray]) -> None:
    r = run_app("import", str(tmp_path / "gpt2"), "--layers", "0-0")
    assert r.returncode == 0, r.stderr
    assert "head: none" in r.stdout and "left out (no logits)" in r.stdout and "final_norm: false" in r.stdout
    assert "tokens: random" in r.stdout
    (tmp_path / "l0.yaml").write_text(r.stdout.replace(f"file: {tmp_path / 'gpt2'}", "file: gpt2"))
    s = load_spec(str(tmp_path / "l0.yaml"))
    assert "logits" not in s.stage_shapes and s.block.layers == 1
    r = run_app("import", str(tmp_path / "gpt2"), "--layers", "1-1")
    assert "first_layer: 1" in r.stdout and "x: random" in r.stdout and "positions: none" in r.stdout


def test_import_never_overwrites_a_users_file(tmp_path: Path, gpt2: dict[str, np.ndarray]) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("my notes\n")
    r = run_app("import", str(tmp_path / "gpt2"), "-o", str(mine))
    assert_refused(r, f"-o {mine}", "is not a YAML file tracer wrote")
    assert mine.read_text() == "my notes\n"
    ours = tmp_path / "ours.yaml"
    assert run_app("import", str(tmp_path / "gpt2"), "-o", str(ours)).returncode == 0
    first = ours.read_text()
    assert run_app("import", str(tmp_path / "gpt2"), "--layers", "0", "-o", str(ours)).returncode == 0
    assert ours.read_text() != first  # its own file: replaced
    edited = ours.read_text() + "# my note\n"
    ours.write_text(edited)
    assert_refused(run_app("import", str(tmp_path / "gpt2"), "-o", str(ours)), "is not a YAML file tracer wrote")
    assert ours.read_text() == edited  # edited since tracer wrote it: no longer provably its own
    assert run_app("import", str(tmp_path / "gpt2"), "-o", str(ours), "--force").returncode == 0
    assert "# my note" not in ours.read_text()  # --force: the user said so


@pytest.mark.parametrize(("args", "fragments"), [
    (("--layers", "0-5"), ("--layers 0-5", "the checkpoint has 2 layers (0 to 1)")),
    (("--layers", "one"), ("--layers 'one'", "expected a layer or a range")),
    (("--tokens", "1,99"), ("--tokens", "id 99 is out of range", "V = 64")),
    (("--tokens", "a,b"), ("--tokens 'a,b'", "expected token ids")),
    (("--layout", "gtp2"), ("--layout 'gtp2'", "expected one of gpt2 | llama | mixtral | torch | tracer")),
    (("--layout", "tracer"), ("a tracer archive holds weights, not the block's settings",)),
])
def test_import_bad_options(tmp_path: Path, gpt2: dict[str, np.ndarray], args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    assert_refused(run_app("import", str(tmp_path / "gpt2"), *args), *fragments)


def test_import_without_config_needs_layout_and_heads(tmp_path: Path, gpt2: dict[str, np.ndarray]) -> None:
    f = str(tmp_path / "gpt2" / "model.safetensors")
    (tmp_path / "gpt2" / "config.json").unlink()
    r = run_app("import", f)
    assert_refused(r, "has no config.json", "give --layout gpt2")
    assert "llama" not in r.stderr  # only a layout that would read it whole is suggested
    assert_refused(run_app("import", f, "--layout", "gpt2"), "does not record the number of heads; give --heads H")
    r = run_app("import", f, "--layout", "gpt2", "--heads", "4")
    assert r.returncode == 0 and "H: 4" in r.stdout and "# --heads" in r.stdout


def test_import_a_missing_checkpoint(tmp_path: Path) -> None:
    assert_refused(run_app("import", str(tmp_path / "nothing")), "nothing: no such file or folder")


def test_spec_error_from_a_checkpoint_is_a_spec_error(tmp_path: Path) -> None:
    spec, _ = gpt2_spec(tmp_path, file="missing")
    with pytest.raises(SpecError):
        load_spec(str(spec))


def test_an_untied_run_reads_only_the_embedding_rows_of_its_tokens(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    t = make_gpt2(str(tmp_path / "gpt2"), layers=1)
    t["transformer.wte.weight"][40] = np.nan  # a row no token of the input reads
    save_file(t, str(tmp_path / "gpt2" / "model.safetensors"))
    spec, text = gpt2_spec(tmp_path, layers=1, final=False, head="none")  # tokens 1, 5, 9, 2
    s = load_spec(str(spec))
    ex = executor.Executor(s)
    table = ex.params["embedding"]
    assert table.shape == (64, 32) and sorted(np.flatnonzero(np.abs(table).sum(axis=1))) == [1, 2, 5, 9]
    assert np.array_equal(table[[1, 2, 5, 9]], t["transformer.wte.weight"][[1, 2, 5, 9]].astype(np.float64))
    assert ex.run().ok
    est = memory.estimate(s, memory.RecordPolicy())
    assert est.weights < memory.estimate(s._replace(block=s.block._replace(head="tied")), memory.RecordPolicy()).weights
    spec.write_text(text.replace("[1, 5, 9, 2]", "[1, 5, 40, 2]"))  # now the NaN row is read
    _refused(spec, "'transformer.wte.weight'", "32 NaN")  # the whole row


def test_a_bfloat16_model_traces_as_its_widened_float32_values(tmp_path: Path) -> None:
    """LLaMA-family checkpoints ship in bf16: a bf16 folder traces exactly as float32 holding the same values."""
    from safetensors.numpy import save_file

    t = make_gpt2(str(tmp_path / "gpt2"), layers=1)  # float32; rewritten below as bfloat16 and as its exact float32 widening
    bits = {k: (v.view(np.uint32) >> 16).astype("<u2") for k, v in t.items()}
    write_safetensors(tmp_path / "gpt2" / "model.safetensors", {k: ("BF16", b.shape, b.tobytes()) for k, b in bits.items()})
    (tmp_path / "wide").mkdir()
    save_file({k: (b.astype(np.uint32) << 16).view(np.float32) for k, b in bits.items()}, str(tmp_path / "wide" / "model.safetensors"))
    a_spec, _ = gpt2_spec(tmp_path, layers=1)
    b_spec, _ = gpt2_spec(tmp_path, file="wide", layers=1, name="wide.yaml")
    a, b = executor.run(load_spec(str(a_spec))), executor.run(load_spec(str(b_spec)))
    for name in a.stages:
        assert np.array_equal(a.stages[name].array, b.stages[name].array), name
    r = run_app("import", str(tmp_path / "gpt2"), "--layers", "0")
    assert r.returncode == 0 and "the checkpoint stores bfloat16" in r.stdout


def test_a_float16_model_in_a_float32_spec(tmp_path: Path) -> None:
    t = make_gpt2(str(tmp_path / "gpt2"), layers=1, dtype="float16")
    spec, text = gpt2_spec(tmp_path, layers=1)
    spec.write_text(text + "dtype: float32\n")
    s = load_spec(str(spec))
    ex = executor.Executor(s)
    assert ex.params["ffn.w1"].dtype == np.float32
    assert np.array_equal(ex.params["ffn.w1"], t["transformer.h.0.mlp.c_fc.weight"].astype(np.float32))
    assert ex.run().stages["logits"].array.dtype == np.float32
