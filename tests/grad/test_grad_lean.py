"""tracer grad's plain table keeps no attention scores and weights: the backward pass makes each head's weights
again (attention.attention_backward).  Every gradient it keeps must be the full trace's to the last bit."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES, SPECS, run_app

from tracer.engine import blas, kernels
from tracer.engine.backward import Backward
from tracer.engine.kernels import attention, norms
from tracer.grad.run import GradOptions, grad
from tracer.spec import load_spec, load_spec_text


def same_to_the_bit(text_or_path: str, expect_lean: bool = True) -> None:
    spec = load_spec(text_or_path) if text_or_path.endswith(".yaml") else load_spec_text(text_or_path)
    full = grad(spec, GradOptions())
    lean = grad(spec, GradOptions(internals=False))
    assert full.loss is not None and lean.loss is not None
    assert lean.loss.value == full.loss.value
    dropped = set(full.grads) - set(lean.grads)
    assert set(lean.grads) <= set(full.grads) and list(lean.grads) == [n for n in full.grads if n in lean.grads]
    assert all(n.endswith((".scores", ".weights")) for n in dropped)
    assert bool(dropped) == expect_lean
    assert not dropped & set(lean.forward.stages)  # not traced either
    for name, stage in lean.grads.items():
        assert np.array_equal(stage.array, full.grads[name].array, equal_nan=True), name
    assert list(lean.weight_grads) == list(full.weight_grads)
    for name, dw in lean.weight_grads.items():
        assert np.array_equal(dw, full.weight_grads[name], equal_nan=True), name
    assert any(np.any(dw != 0) for dw in lean.weight_grads.values())


def block(mask: str = "causal", T: int = 7, H: int = 4, H_kv: int | None = None, B: int = 2, extra: str = "",
          positions: str = "rotary", layers: int = 2, order: str = "pre") -> str:
    kv = f", H_kv: {H_kv}" if H_kv else ""
    return (f"dims: {{B: {B}, T: {T}, C: 16, H: {H}{kv}, F: 24, V: 11}}\nseed: 5\n"
            f"block: {{norm_order: {order}, mask: {mask}, layers: {layers}, positions: {positions}, head: tied, final_norm: true}}\n"
            f"input: {{tokens: random}}\n{extra}")


@pytest.mark.parametrize("name", ["stack-2-layers.yaml", "encoder-decoder.yaml", "ch17-prenorm.yaml", "ch17-postnorm.yaml",
                                  "variants/rotary.yaml", "variants/swiglu.yaml", "variants/modern-decoder.yaml",
                                  "variants/grouped-query.yaml", "variants/gelu.yaml", "variants/rmsnorm.yaml"])
def test_shipped_specs(name):
    same_to_the_bit(str(SPECS / name))


def test_none_and_explicit_masks():
    same_to_the_bit(block(mask="none", positions="learned", order="post"))
    mask = [[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 1]]
    same_to_the_bit(block(mask=str(mask), T=4))
    same_to_the_bit(str(EXAMPLES / "guide" / "mask-none.yaml"))


@pytest.mark.parametrize("H_kv", [None, 2, 1])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_row_blocks_grouped_heads_and_threads(monkeypatch, H_kv, threads):
    """Blocks of 2 query rows over T = 7 (a short last block), grouped and plain heads, on 1 to 3 Python threads
    (the heads shared out as the big specs have them: here forced, the blocks being small)."""
    monkeypatch.setattr(attention, "ROW_BLOCK", 2)
    monkeypatch.setattr(blas, "workers", lambda tasks, work, at_least=0: min(tasks, threads))
    same_to_the_bit(block(H_kv=H_kv))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_sliding_window_across_row_blocks(monkeypatch, threads):
    """A window of 3 over blocks of 2 query rows: the lean pass makes the window's weights again as the forward did."""
    monkeypatch.setattr(attention, "ROW_BLOCK", 2)
    monkeypatch.setattr(blas, "workers", lambda tasks, work, at_least=0: min(tasks, threads))
    same_to_the_bit(block(mask="{causal: true, window: 3}", H_kv=2))
    same_to_the_bit(block(mask="{causal: true, window: 1}", order="post", positions="learned"))


def test_the_backward_kernels_share_heads_out_alike(monkeypatch):
    """attend_backward, qk_scores_backward (the weights kept) and attention_backward (made again) give each Python
    thread whole key heads, the same ones for the same work: each product then runs on a BLAS with the same number of
    threads either way (a one-thread and a two-thread product of the same operands can differ in the last bit)."""
    calls: dict[str, tuple[list, int]] = {}
    real = blas.by_heads

    def spy(heads, items, work):
        calls[heads.__qualname__.split(".")[0]] = (items, work)
        real(heads, items, work)

    monkeypatch.setattr(blas, "by_heads", spy)
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 4, 9, 3)), rng.standard_normal((2, 2, 9, 3)), rng.standard_normal((2, 2, 9, 3))
    _, w, _ = attention.attend(q, k, v, None, True)
    dm = rng.standard_normal(q.shape)
    ds, _, _ = attention.attend_backward(dm, w, v, True)
    attention.qk_scores_backward(ds, q, k, True)
    attention.attention_backward(dm, q, k, v, None, True)
    assert set(calls) >= {"attend_backward", "qk_scores_backward", "attention_backward"}
    assert calls["attend_backward"] == calls["qk_scores_backward"] == calls["attention_backward"]


@pytest.mark.slow  # two grad runs over 300 positions: a few seconds on a loaded machine
def test_csv_and_save_agree_to_the_bit_beyond_one_block_of_rows(tmp_path):
    """--format csv (the lean pass) and --save (every weight kept) past ROW_BLOCK = 256 positions, where the heads
    go on threads: the docs say bit for bit, and CSV's repr digits read back to the same doubles."""
    import csv
    import io

    spec = tmp_path / "long.yaml"
    spec.write_text("dims: {B: 1, T: 300, C: 16, H: 2, F: 32}\nblock: {layers: 2}\nseed: 3\ninput: {x: random}\n")
    out = run_app("grad", str(spec), "--format", "csv", "--save", str(tmp_path / "g.npz"))
    assert out.returncode == 0, out.stderr
    saved = np.load(tmp_path / "g.npz")
    alone = run_app("grad", str(spec), "--format", "csv")  # the lean pass: the CSV without --save
    assert alone.returncode == 0, alone.stderr
    seen = 0
    for text in (alone.stdout, out.stdout):
        for row in csv.DictReader(io.StringIO(text)):
            values = np.array([float(row[f"v{i}"]) for i in range(32) if row.get(f"v{i}")])
            g = saved[f"grad/{row['stage']}"]
            want = g[int(row["b"]), int(row["h"]), int(row["t"])] if row["h"] else g[int(row["b"]), int(row["t"])]
            assert np.array_equal(values, want.reshape(-1)), (row["stage"], row["t"])
            seen += 1
    assert seen > 2 * 300

    text = """model: encoder-decoder
dims: {B: 2, S: 5, T: 4, C: 8, H: 2, F: 12, V: 9}
seed: 31
encoder: {layers: 1, norm_order: pre, positions: sinusoidal}
decoder: {layers: 1, norm_order: post, positions: rotary, head: separate}
input: {source: random, target: random}
"""
    same_to_the_bit(text)
    lean = grad(load_spec_text(text), GradOptions(internals=False))
    assert "decoder.blocks.0.cross.weights" in lean.grads and "decoder.blocks.0.attn.weights" not in lean.grads


def test_the_plain_output_prints_what_all_prints():
    """The command keeps the internals for --all (and --json, --save, a --stage naming them) only: the rows both show agree."""
    spec = str(SPECS / "stack-2-layers.yaml")
    plain, every = run_app("grad", spec, "--format", "csv"), run_app("grad", spec, "--format", "csv", "--all")
    assert plain.returncode == every.returncode == 0
    def rows(out: str) -> list[str]:  # the values, without the header and the padding to the widest stage
        return [line.rstrip(",") for line in out.splitlines()[1:]]

    assert len(rows(plain.stdout)) > 100 and set(rows(plain.stdout)) < set(rows(every.stdout))
    assert "attn.weights" in every.stdout and "attn.weights" not in plain.stdout
    one = run_app("grad", spec, "--stage", "blocks.0.attn.weights", "--format", "csv")
    assert one.returncode == 0 and rows(one.stdout) == [r for r in rows(every.stdout) if ",blocks.0.attn.weights," in r]


@pytest.mark.skipif(blas.workers(2, 1 << 30) < 2, reason="the BLAS is not OpenBLAS with two threads: linear_backward runs its products in turn")
def test_linear_backward_products_at_once(monkeypatch):
    """dW and dX of a big linear layer on two threads, each with a one-thread BLAS: the numbers of a one-thread BLAS
    in turn, and those of the whole BLAS but for the last bits of a sum it blocks differently."""
    rng = np.random.default_rng(2)
    dy, x, w, b = rng.standard_normal((2, 300, 384)), rng.standard_normal((2, 300, 200)), rng.standard_normal((200, 384)), np.zeros(384)
    at_once = kernels.linear_backward(dy, x, w, b)
    monkeypatch.setattr(blas, "workers", lambda tasks, work, at_least=0: 1)
    with blas.single_threaded():
        one_thread = kernels.linear_backward(dy, x, w, b)
    whole = kernels.linear_backward(dy, x, w, b)
    for a, c, d in zip(at_once, one_thread, whole, strict=True):
        assert np.array_equal(a, c) and np.allclose(a, d, rtol=1e-13, atol=1e-13)
    assert np.allclose(whole[1], x.reshape(-1, 200).T @ dy.reshape(-1, 384)) and np.array_equal(whole[2], dy.sum(axis=(0, 1)))


def test_the_table_keeps_one_value_per_stage_and_prints_what_all_prints():
    """The table and Markdown keep each stage and its gradient at (b, t) with their norms, the arrays let go during the
    backward pass (GradOptions.point); --all keeps every array: the rows both print agree."""
    spec = str(SPECS / "stack-2-layers.yaml")
    plain = run_app("grad", spec, "--format", "markdown", "--batch", "1", "--pos", "2")
    every = run_app("grad", spec, "--format", "markdown", "--batch", "1", "--pos", "2", "--all")
    assert plain.returncode == every.returncode == 0
    rows = [line for line in plain.stdout.splitlines() if line.startswith("| `")]
    assert len(rows) > 15 and set(rows) < set(every.stdout.splitlines())
    g = grad(load_spec(spec), GradOptions(internals=False, point=(1, 2)))
    full = grad(load_spec(spec), GradOptions())
    assert all(s.data is None and s.point is not None for s in g.grads.values())
    assert all(s.data is None for s in g.forward.stages.values() if s.name in g.grads)  # let go, the values too
    for name, stage in g.grads.items():
        assert np.array_equal(stage.at(1, 2), full.grads[name].at(1, 2)), name
        assert g.grad_norm(name) == full.grad_norm(name) and g.ratio(name) == full.ratio(name), name
    for name, dw in g.weight_grads.items():
        assert np.array_equal(dw, full.weight_grads[name]), name


def test_a_violation_is_shown_as_before():
    """A forward pass that breaks a rule is traced again in full, so the flagged attention weights are in the table."""
    r = run_app("grad", str(EXAMPLES / "violations" / "fully-masked-row.yaml"))
    assert r.returncode == 1
    assert any(line.startswith("│ attn.weights") and "violation" in line for line in r.stdout.splitlines())


def test_relu_gradient_written_over_the_hidden_stage_only_when_nothing_else_holds_it():
    """With GradOptions.point, ReLU's gradient is written over the hidden stage's value (its own step is the last to read
    it), not when the walk still holds that memory (here the loss's seed: the block output is the hidden stage itself)."""
    head = "dims: {B: 2, T: 4, C: 8, H: 2, F: 12}\nseed: 9\ninput: {x: random}\n"
    alias = """block:
  steps:
    - {name: norm1, op: layer_norm, in: x, weights: norm1}
    - {name: hidden, op: ffn_hidden, in: norm1, weights: ffn}
    - {name: same, op: identity, in: hidden}
"""
    for text, spared in ((head + "block: {norm_order: pre, mask: causal, positions: none}\n", True), (head + alias, False)):
        spec = load_spec_text(text)
        full = grad(spec, GradOptions())
        seen: list[bool] = []

        def spy(self: Backward, name: str, seen: list[bool] = seen, spare=Backward.spare) -> bool:
            seen.append(spare(self, name))
            return seen[-1]

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(Backward, "spare", spy)
            lean = grad(spec, GradOptions(internals=False, point=(1, 3)))
        assert seen == [spared]
        for name, stage in lean.grads.items():
            assert np.array_equal(stage.at(1, 3), full.grads[name].at(1, 3)) and lean.grad_norm(name) == full.grad_norm(name), name
            assert lean.ratio(name) == full.ratio(name), name
        assert all(np.array_equal(dw, full.weight_grads[n]) for n, dw in lean.weight_grads.items())


@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("threads", [2, 3])
def test_a_big_norm_shares_its_rows_between_threads(monkeypatch, norm, threads):
    """LayerNorm and RMSNorm over the last axis of a big array: rows computed on 2 or 3 threads, the same bits as in
    one piece (a constant row, huge and tiny values included)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 333, 400)) * np.array([1.0, 1e200])[:, None, None]
    x[0, 7] = 3.0
    x[1, 9, :5] = 1e-300
    g, b = rng.standard_normal(400), rng.standard_normal(400)

    def run() -> np.ndarray:
        return norms.layer_norm(x, g, b, 1e-5) if norm == "layer" else norms.rms_norm(x, g, 1e-5)

    monkeypatch.setattr(kernels, "ROWS_ON_THREADS", 1000)
    calls: list[int] = []
    on_threads = blas.on_threads
    monkeypatch.setattr(blas, "on_threads", lambda fn, parts: calls.append(len(parts)) or on_threads(fn, parts))
    monkeypatch.setattr(blas, "workers", lambda tasks, work, at_least=0: threads)
    shared = run()
    monkeypatch.setattr(blas, "workers", lambda tasks, work, at_least=0: 1)
    alone = run()
    assert calls == [threads] and np.array_equal(shared, alone) and np.all(np.isfinite(alone))


def test_threads_keep_the_callers_numpy_errstate():
    """Kernels on threads (attention, big norms, dW and dX at once) silence NaN and Inf warnings as their caller does."""
    import warnings

    inf = [np.array([np.inf, 1.0]), np.array([np.inf])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            assert [bool(np.isnan(r).any()) for r in blas.on_threads(lambda a: a - a, inf)] == [True, True]
        with pytest.raises(RuntimeWarning):
            blas.on_threads(lambda a: a - a, inf)
