"""tracer.spec.memory: sizes, the estimate against what a run really holds, and refusing a run over --max-memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, SPECS, assert_refused, run_app, write_spec

from tracer.cli import shared as cli
from tracer.engine import executor
from tracer.errors import UsageError
from tracer.spec import load_spec, load_spec_text, memory

HUGE_T = """\
name: GPT-2 width, 100000 positions
dims: {B: 1, T: 100000, C: 768, H: 12, F: 3072}
block: {norm_order: pre, mask: causal}
input: {x: random}
seed: 0
"""


@pytest.mark.parametrize("text, size", [("4GB", 4 * 10**9), ("512MB", 512 * 10**6), ("2GiB", 2 * 2**30), ("1.5G", 1_500_000_000),
                                        ("100kB", 100_000), ("3 TiB", 3 * 2**40), ("1000", 1000), ("64mib", 64 * 2**20)])
def test_parse_size(text: str, size: int) -> None:
    assert memory.parse_size(text) == size


def test_parse_size_none_is_no_limit() -> None:
    assert memory.parse_size("none") is None


@pytest.mark.parametrize("text", ["", "lots", "4 GiBs", "-1", "0", "1e9"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(UsageError):
        memory.parse_size(text)


def test_default_is_the_same_in_cli_and_memory() -> None:
    assert cli.DEFAULT_MAX_MEMORY == memory.DEFAULT_MAX_MEMORY
    assert memory.parse_size(memory.DEFAULT_MAX_MEMORY) == 4 * 10**9


def _held(trace: executor.Recording, free: list[np.ndarray]) -> int:
    """Bytes of the recorded arrays, each buffer once; views of ``free`` arrays (inputs, weights) cost nothing."""
    seen = list(free)
    total = 0
    for s in trace.stages.values():
        a = s.data if s.data is not None else (s.summary or s.point).value  # type: ignore[union-attr]
        if any(np.shares_memory(a, b) for b in seen):
            continue
        seen.append(a)
        total += a.nbytes
    return total


@pytest.mark.parametrize("name", ["ch17-prenorm.yaml", "ch17-postnorm.yaml", "stack-2-layers.yaml", "encoder-decoder.yaml",
                                  "variants/modern-decoder.yaml"])
@pytest.mark.parametrize("mode", memory.POLICY_MODES)
def test_estimate_of_recorded_stages_matches_a_real_run(name: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "STATS_MIN_VALUES", 4)  # small specs: let stats mode summarise
    spec = load_spec(str(SPECS / name))
    policy = memory.RecordPolicy(mode, b=0, t=1)
    est = memory.estimate(spec, policy)
    ex = executor.Executor(spec, policy=policy)
    trace = ex.run()
    planned = {s.name: s.how for s in est.stages if s.how != "skip"}
    kept = {n: ("stats" if s.summary is not None else "point" if s.point is not None else "full") for n, s in trace.stages.items()}
    assert kept == planned  # the executor's StageKeeper keeps exactly what the estimate counted
    n_stats = sum(1 for s in est.stages if s.how == "stats")
    real = _held(trace, list(ex.inputs.values()) + list(ex.params.values()))
    assert real == est.recorded - memory.STATS_BYTES * n_stats
    assert est.weights == sum(a.nbytes for a in ex.params.values()) + sum(a.nbytes for a in ex.inputs.values())


def test_attention_scores_are_b_h_t_squared_in_the_dtype() -> None:
    spec = load_spec(str(SPECS / "gpt2-block.yaml"))
    stages = {s.name: s for s in memory.plan_stages(spec, memory.RecordPolicy())}
    assert stages["attn.scores"].full_bytes == 1 * 12 * 1024 * 1024 * 8
    assert stages["hidden"].full_bytes == 1 * 1024 * 3072 * 8
    est = memory.estimate(spec, memory.RecordPolicy())
    assert est.weights == (4 * 768 * 768 + 2 * 768 * 3072 + 4 * 768 + 3072 + 768 + 4 * 768 + 1024 * 768) * 8


def test_float32_halves_the_arrays(tmp_path: Path) -> None:
    text = (SPECS / "gpt2-block.yaml").read_text() + "dtype: float32\n"
    spec32 = load_spec(str(write_spec(tmp_path, text)))
    spec64 = load_spec(str(SPECS / "gpt2-block.yaml"))
    r32 = memory.estimate(spec32, memory.RecordPolicy()).recorded
    r64 = memory.estimate(spec64, memory.RecordPolicy()).recorded
    assert r32 * 2 == r64


def test_recording_less_is_estimated_smaller() -> None:
    spec = load_spec(str(SPECS / "gpt2-block.yaml"))
    all_, main, stats, table = (memory.estimate(spec, memory.RecordPolicy(m)) for m in ("all", "main", "stats", "table"))
    assert all_.recorded > main.recorded > stats.recorded > table.recorded
    assert main.recorded == all_.recorded - sum(s.full_bytes for s in all_.stages if s.internal)
    # under stats the scores and weights are made whole to be summarised: working memory, not recorded
    assert stats.working >= 2 * 12 * 1024 * 1024 * 8
    # under main and table nobody keeps them: attention works a block of 256 rows at a time, never a [B,H,T,T] array
    assert main.working < 12 * 1024 * 1024 * 8 and table.working < 12 * 1024 * 1024 * 8
    assert table.total < main.total < all_.total


def test_auto_keeps_the_least_for_the_plain_table_and_everything_for_other_outputs() -> None:
    assert memory.record_mode("auto", table=True) == "table"
    assert memory.record_mode("auto", table=False) == "all"
    assert [memory.record_mode(m, table=True) for m in ("all", "main", "stats")] == ["all", "main", "stats"]
    with pytest.raises(UsageError):
        memory.record_mode("table", table=True)  # an internal mode, not an option value


def test_the_plain_table_of_a_huge_t_is_refused_without_blaming_attention(tmp_path: Path) -> None:
    r = run_app("run", str(write_spec(tmp_path, HUGE_T)))
    assert_refused(r, "spec.yaml: this run needs about", "over --max-memory 4GB", "lower T or B")
    assert "attn.scores" not in r.stderr and "TB" not in r.stderr  # no [B,H,T,T] array is made for the table


def test_huge_t_is_refused_naming_the_largest_stages(tmp_path: Path) -> None:
    r = run_app("run", str(write_spec(tmp_path, HUGE_T)), "--record", "all")
    assert_refused(r, "spec.yaml: this run needs about", "over --max-memory 4GB",
                   "attn.scores [B,H,T,T] = [1,12,100000,100000]", "960 GB", "lower T or B")


def test_huge_t_is_refused_without_allocating(tmp_path: Path) -> None:
    """With the address space capped at 300 MB, any real attempt would die of MemoryError (exit 3)."""
    p = write_spec(tmp_path, HUGE_T)
    limit = 300 * 2**20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    code = "import sys; from tracer.cli.app import main; sys.argv = ['tracer', 'run', sys.argv[1], '--record', sys.argv[2]]; main()"
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1")
    for record in ("auto", "all"):
        r = subprocess.run([sys.executable, "-c", code, str(p), record], env=env, capture_output=True, text=True, timeout=60,
                           preexec_fn=cap)
        assert r.returncode == 2, r.stderr
        assert "over --max-memory" in r.stderr and "Traceback" not in r.stderr


def test_limit_names_the_recording_that_fits(tmp_path: Path) -> None:
    spec = str(SPECS / "gpt2-block.yaml")
    est = {m: memory.estimate(load_spec(spec), memory.RecordPolicy(m)).total for m in memory.POLICY_MODES}
    between = (est["stats"] + est["all"]) // 2  # stats fits, all does not
    r = run_app("run", spec, "--max-memory", str(between), "--record", "all")
    assert_refused(r, "--record stats keeps statistics of big arrays", "fits")
    assert r.stderr.count("fits") == 1 or est["main"] <= between


def test_no_limit(tmp_path: Path) -> None:
    r = run_app("validate", str(write_spec(tmp_path, HUGE_T)), "--max-memory", "none", "--record", "all")
    assert r.returncode == 0 and ": ok, needs about" in r.stdout and "TB" in r.stdout


def test_a_sliding_window_counts_its_mask() -> None:
    """Plain causal attention masks block by block (a [256,256] square at most); a window that hides keys holds its
    [T,T] mask and its complement, as an explicit mask does; a window of T or more runs, and is counted, as causal."""
    from tracer.model.ops import OPS

    def extra(mask: str, T: int = 40) -> int:
        s = load_spec_text(f"dims: {{B: 1, T: {T}, C: 4, H: 2, F: 8}}\nseed: 0\ninput: {{x: random}}\nblock: {{mask: {mask}}}\n")
        step = next(st for st in s.steps if st.op == "mha")
        return OPS["mha"].temporary_bytes(s, step, 0, 0)

    assert extra("{causal: true, window: 5}") - extra("causal") == 2 * 40 * 40 - 40 * 40
    assert extra("{causal: true, window: 5}") == extra(str(np.tril(np.ones((40, 40), dtype=int)).tolist()))
    assert extra("{causal: true, window: 40}") == extra("causal")
