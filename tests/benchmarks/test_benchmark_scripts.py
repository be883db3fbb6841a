"""Each real-checkpoint benchmark runs on a tiny size and prints its ratio lines (never their timings: those are
the scripts' business, on a quiet machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


def bench(tmp_path: Path, script: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--tiny", "--repeat", "1", *args], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    return r.stdout


def needs(*modules: str) -> None:
    for m in modules:
        pytest.importorskip(m, reason=f"the benchmark needs {m} (optional extra)")


@pytest.mark.slow  # two fresh processes that import torch and transformers, and a model made and saved: about a minute
def test_checkpoint_benchmark_prints_its_ratio(tmp_path: Path) -> None:
    needs("torch", "transformers")
    out = bench(tmp_path, "checkpoint.py")
    assert "BLAS " in out and "threads" in out and "load average" in out
    assert "ratio tracer / HF (float32): " in out and "target <= 1.0" in out
    assert "memory guard's estimate" in out and "covers it" in out and "does NOT cover" not in out


@pytest.mark.slow  # a model and a tokenizer made with torch and tokenizers, then HF's script as a cold process: about a minute
def test_engineer_benchmark_prints_its_ratio(tmp_path: Path) -> None:
    needs("torch", "transformers", "tokenizers")
    out = bench(tmp_path, "engineer.py")
    assert "load average" in out and "T = 16" in out
    assert "tracer run SPEC (cold process, the table): median" in out
    assert "ratio HF / tracer: " in out


@pytest.mark.slow  # two sharded checkpoints written and traced in fresh processes: a few seconds
def test_big_layer_benchmark_opens_only_layer_zeros_shards_and_the_guard_covers_the_peak(tmp_path: Path) -> None:
    out = bench(tmp_path, "big_layer.py")
    for shape in ("8b (tiny)", "70b (tiny)"):
        assert shape in out
    assert out.count(": only those") == 2 and "NOT only those" not in out
    assert out.count("ratio peak / (weights + stages) = ") == 2
    assert out.count("covers it") == 2 and "does NOT cover" not in out
    assert "read from the checkpoint: " in out and "peak memory " in out
    assert list(tmp_path.iterdir()) == []  # nothing left behind without --keep


@pytest.mark.slow  # fresh processes importing torch, transformers and TransformerLens, per row and dtype: a few minutes
def test_transformerlens_benchmark_prints_every_rows_ratio_or_why_it_skips(tmp_path: Path) -> None:
    import importlib.util

    out = bench(tmp_path, "transformerlens.py")
    if importlib.util.find_spec("transformer_lens") is None:
        assert "TransformerLens is not installed" in out and "skipped" in out
        return
    assert out.startswith("TransformerLens ") and "load average" in out
    for dtype in ("float32:", "float64:"):
        assert dtype in out
    for row in ("cached run", "lens", "patch sweep"):
        assert out.count(f"  {row} ") == 2
    assert out.count("ratio tracer / TL") == 12
    assert "attribute" in out


@pytest.mark.slow  # a fresh process importing torch: a few seconds
def test_products_benchmark_prints_the_blas_floor_of_each_dtype(tmp_path: Path) -> None:
    needs("torch")
    out = bench(tmp_path, "products.py")
    assert "BLAS " in out and "OpenBLAS core " in out and "load average" in out and "T = 16 rows" in out
    for dtype in ("float32", "float64"):
        line = next(ln for ln in out.splitlines() if ln.startswith(f"{dtype}: "))
        assert "NumPy layers " in line and "PyTorch layers " in line
        assert float(line.rsplit("ratio NumPy / PyTorch ", 1)[1]) > 0
