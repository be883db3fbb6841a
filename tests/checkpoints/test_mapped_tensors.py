"""A tensor stored in the run's dtype is read as the file lays it out (a read-only memory map, no copy); any other is
converted into an array of its own.  Either way a run prints the same numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import example_module, run_app

from tracer.checkpoints import formats

make_gpt2 = example_module("checkpoints/tiny_gpt2.py").make


def _file(tmp_path: Path) -> tuple[str, dict[str, np.ndarray]]:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    t = {"big": rng.standard_normal((600, 500)).astype(np.float32),  # 1.2 MB: mapped in float32
         "small": rng.standard_normal((4, 3)).astype(np.float32),
         "wide": rng.standard_normal((300, 500))}  # float64
    path = str(tmp_path / "m.safetensors")
    save_file(t, path)
    return path, t


def test_a_big_tensor_in_the_run_dtype_is_the_files_pages_read_only(tmp_path: Path) -> None:
    path, t = _file(tmp_path)
    ck = formats.SafetensorsFile(path)
    a = ck.read("big", "float32")
    assert type(a) is np.ndarray and a.dtype == np.float32 and np.array_equal(a, t["big"])
    assert not a.flags.writeable and not a.flags.owndata  # the map, not a copy: nothing can write into the file through it
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    at = ck.read("big", "float32", transpose=True)
    assert not at.flags.owndata and np.array_equal(at, t["big"].T)
    w = ck.read("wide", "float64")
    assert not w.flags.writeable and np.array_equal(w, t["wide"])


@pytest.mark.parametrize("key, dtype", [("big", "float64"), ("small", "float32"), ("wide", "float32")])
def test_a_tensor_converted_or_small_is_an_array_of_its_own(tmp_path: Path, key: str, dtype: str) -> None:
    path, t = _file(tmp_path)
    a = formats.SafetensorsFile(path).read(key, dtype)
    assert a.flags.owndata and a.flags.writeable and a.dtype == np.dtype(dtype)
    assert np.array_equal(a, t[key].astype(dtype))


def test_mapped_or_copied_a_run_of_a_checkpoint_prints_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_gpt2(str(tmp_path / "gpt2"), C=64, H=4, V=4096, T_max=32)  # the tied embedding: 1 MB in float32
    spec = tmp_path / "gpt2.yaml"
    r = run_app("import", str(tmp_path / "gpt2"), "--tokens", "1,5,9,4000", "--dtype", "float32", "-o", str(spec))
    assert r.returncode == 0, r.stderr
    monkeypatch.setattr(formats, "MAP_AT_LEAST", 1 << 10)  # every tensor of 1 kB or more mapped
    mapped = run_app("run", str(spec), "--json")
    monkeypatch.setattr(formats, "MAP_AT_LEAST", 1 << 62)  # none
    copied = run_app("run", str(spec), "--json")
    assert mapped.returncode == copied.returncode == 0, (mapped.stderr, copied.stderr)
    assert mapped.stdout == copied.stdout and '"probs"' in mapped.stdout


def test_the_finiteness_check_of_a_transposed_map_makes_no_copy(tmp_path: Path) -> None:
    import tracemalloc

    path, t = _file(tmp_path)
    at = formats.SafetensorsFile(path).read("big", "float32", transpose=True)  # F-ordered: the map's transpose
    assert at.flags.f_contiguous and not at.flags.c_contiguous
    tracemalloc.start()
    try:
        assert formats.all_finite(at)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < at.nbytes // 4  # a block's sum at most, not a C-ordered copy of the 1.2 MB tensor
