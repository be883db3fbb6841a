"""tracer grad: the command's contract (formats, options, errors), the losses, --verify, and the shipped examples."""

from __future__ import annotations

import functools
import json
import math
import re

import numpy as np
import pytest
from conftest import EXAMPLES, PRE, PRE_TEXT, SPECS, assert_refused, run_app, run_cli, where, write_spec

from tracer.engine import executor
from tracer.engine.kernels import attention, embeddings, ffn
from tracer.engine.params import load_inputs, load_params
from tracer.grad import losses
from tracer.grad.finite_diff import Forward, verify
from tracer.grad.run import GradOptions, grad, per_layer
from tracer.model.activations import ACTIVATIONS
from tracer.spec import load_spec, load_spec_text

STACK = str(SPECS / "stack-2-layers.yaml")


def test_table_in_backward_order_with_weights_view():
    r = run_app("grad", STACK)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    order = [name for name in ("probs", "logits", "final_norm", "blocks.1.output", "blocks.0.norm1", "x", "embed")
             if any(line.startswith(f"│ {name} ") for line in lines)]
    assert order == ["probs", "logits", "final_norm", "blocks.1.output", "blocks.0.norm1", "x", "embed"]
    first = [i for i, line in enumerate(lines) if line.startswith(("│ probs ", "│ embed "))]
    assert first == sorted(first)
    assert "weight gradients, grouped by layer" in r.stdout and "blocks.1" in r.stdout and "ffn.w2" in r.stdout
    assert "loss next-token = 4.11188" in r.stdout


def test_json_is_runs_schema_with_grad_loss_and_weight_grads():
    r = run_app("grad", STACK, "--json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    g = grad(load_spec(STACK), GradOptions())
    assert doc["schema_version"] == 1 and doc["loss"]["name"] == "next-token"
    assert doc["loss"]["value"] == g.loss.value
    for stage in doc["stages"]:
        assert np.shape(stage["grad"]) == tuple(stage["shape"]) == np.shape(stage["values"])
        assert np.array_equal(np.array(stage["grad"]), g.grads[stage["name"]].array)
    assert [w["name"] for w in doc["weight_grads"]] == list(g.weight_grads)
    for w in doc["weight_grads"]:
        assert list(np.shape(w["values"])) == w["shape"] == list(g.weights[w["name"]].shape)


def test_csv_markdown_stage_and_all():
    csv = run_app("grad", PRE, "--format", "csv", "--stage", "norm1").stdout.splitlines()
    assert csv[0].startswith("spec,stage,b,h,t,axis,v0")
    g = grad(load_spec(PRE), GradOptions())
    assert [float(v) for v in csv[1].split(",")[6:8]] == g.grads["norm1"].array[0, 0].tolist()
    assert len(csv) == 1 + 3  # one row per position
    md = run_app("grad", PRE, "--format", "markdown").stdout
    assert md.startswith("### ") and "| `output` |" in md and "| embedding |" in md
    shown = run_app("grad", PRE, "--all").stdout
    assert "attn.scores" in shown and "attn.scores" not in run_app("grad", PRE).stdout


def test_ratio_and_norm_columns_are_the_arrays_own():
    g = grad(load_spec(PRE), GradOptions())
    y = g.forward.stages["output"].array
    assert g.loss.name == "sum-squares" and g.loss.value == pytest.approx(0.5 * float(np.sum(y * y)), rel=1e-15)
    assert np.array_equal(g.grads["output"].array, y)  # d(0.5 ΣY²)/dY = Y
    assert g.ratio("output") == pytest.approx(1.0)


@pytest.mark.parametrize("spec, loss", [(STACK, "sum-squares"), (STACK, "next-token"), (PRE, None),
                                        (str(SPECS / "encoder-decoder.yaml"), None)])
def test_the_backward_pass_writes_into_no_forward_stage(spec, loss):
    """The backward works in place only in arrays of its own: the forward stages (the sum-squares seed is the
    output stage itself) and the gradients two stages share (a residual add) keep their values."""
    from tracer.engine import executor

    s = load_spec(spec)
    g = grad(s, GradOptions(loss=loss))
    fresh = executor.run(s)
    for name, stage in fresh.stages.items():
        assert np.array_equal(g.forward.stages[name].array, stage.array), name
    alone = grad(s, GradOptions(loss=loss))  # a second pass: the same gradients, to the bit
    for name, stage in g.grads.items():
        assert np.array_equal(stage.array, alone.grads[name].array), name
    if g.loss is not None and g.loss.name == "sum-squares":
        assert np.array_equal(g.grads[g.loss.stage].array, fresh.stages[g.loss.stage].array)


def test_lang_zh_uses_the_guides_words():
    r = run_app("grad", PRE, "--lang", "zh")
    assert r.returncode == 0 and "训练信号" in r.stdout and "梯度" in r.stdout


def test_save_writes_gradients_under_grad(tmp_path):
    out = tmp_path / "g.npz"
    r = run_app("grad", STACK, "--save", str(out))
    assert r.returncode == 0
    z = np.load(out)
    g = grad(load_spec(STACK), GradOptions())
    assert np.array_equal(z["grad/blocks.0.norm1"], g.grads["blocks.0.norm1"].array)
    assert np.array_equal(z["grad/weights/blocks.1.ffn.w2"], g.weight_grads["blocks.1.ffn.w2"])
    assert np.array_equal(z["blocks.0.norm1"], g.forward.stages["blocks.0.norm1"].array)
    assert float(z["loss"]) == g.loss.value


def test_verify_agrees_and_catches_a_wrong_kernel(monkeypatch):
    g = grad(load_spec(STACK), GradOptions())
    v = verify(g)
    assert v.ok and len({c.weight for c in v.checks}) == len(g.weights)

    def wrong(dy, z):
        return ffn.relu_backward(dy, z) * 1.01

    monkeypatch.setitem(ACTIVATIONS, "relu", ACTIVATIONS["relu"]._replace(backward=wrong))
    bad = verify(grad(load_spec(STACK), GradOptions()))
    assert not bad.ok and any(c.weight.endswith("ffn.w1") for c in bad.failed)


@pytest.mark.parametrize("path", [STACK, str(SPECS / "encoder-decoder.yaml")])
def test_verify_passes_from_a_weights_layer_give_the_whole_passes_loss(path):
    """--verify starts a perturbed weight's pass at its layer's first step, from the stages of one whole pass:
    with the weights as they are, that loss is the whole pass's to the bit, for every weight, twice (nothing it
    starts from is written over); and a layer's weight does start later than step 0."""
    spec = load_spec(path)
    params = {k: v.astype(np.float64) for k, v in load_params(spec).items()}
    forward = Forward(spec, params, losses.choose(spec, None))
    whole = losses.compute(executor.run(spec, keep_going=True), forward.loss_name, load_inputs(spec)).value
    starts = set()
    for name in params:
        assert forward.loss(name) == whole and forward.loss(name) == whole, name
        starts.add(forward.start(name)[0])
    assert 0 in starts and len(starts) > 2, starts


def test_verify_on_the_command_line():
    r = run_app("grad", PRE, "--verify")
    assert r.returncode == 0 and "--verify:" in r.stdout and "all agree" in r.stdout


GQA = SPECS / "variants" / "grouped-query.yaml"  # H = 4 query heads, H_kv = 2, rotary_pairing: half


def test_verify_grouped_query_half_pairing_on_the_command_line():
    r = run_app("grad", str(GQA), "--verify")
    assert r.returncode == 0, r.stderr
    assert "--verify:" in r.stdout and "all agree" in r.stdout and "[C,C_kv] = [16,8]" in r.stdout


@pytest.mark.parametrize("H_kv", [1, 2])
def test_verify_grouped_query_half_pairing_catches_wrong_kernels(monkeypatch, H_kv):
    spec = load_spec_text(GQA.read_text(encoding="utf-8").replace("H_kv: 2", f"H_kv: {H_kv}"))
    v = verify(grad(spec, GradOptions()))
    assert v.ok and len({c.weight for c in v.checks}) == len(spec.weights)
    turn, scores = embeddings.rotary_backward, attention.qk_scores_backward

    def interleaved(dy, base, pairing="interleaved", dim=None, scaling=None):  # the pairing ignored: turned back in the wrong pairs
        return turn(dy, base)

    monkeypatch.setattr(embeddings, "rotary_backward", interleaved)
    bad = verify(grad(spec, GradOptions()))
    assert not bad.ok and {c.weight for c in bad.failed} >= {"attn.w_q", "attn.w_k"}
    monkeypatch.setattr(embeddings, "rotary_backward", turn)

    def first_of_group(ds, q, k, *causal):  # dk from the first query head of each group only: the group sum forgotten
        G = q.shape[1] // k.shape[1]
        return scores(ds, q, k, *causal)[0], scores(ds[:, ::G], q[:, ::G], k, *causal)[1]

    monkeypatch.setattr(attention, "qk_scores_backward", first_of_group)
    bad = verify(grad(spec, GradOptions()))
    assert not bad.ok and "attn.w_k" in {c.weight for c in bad.failed} and "attn.w_v" not in {c.weight for c in bad.failed}


def test_next_token_by_hand():
    text = """dims: {C: 4, H: 2, F: 6}
seed: 1
block: {head: tied}
input: {tokens: [[0, 2, 1]]}
"""
    spec = load_spec_text(text)
    g = grad(spec, GradOptions())
    p = g.forward.stages["probs"].array
    assert g.loss.value == pytest.approx(-(math.log(p[0, 0, 2]) + math.log(p[0, 1, 1])) / 2, rel=1e-13)
    assert not np.any(g.grads["logits"].array[0, 2])  # the last position predicts nothing
    want = p[0, 0].copy()
    want[2] -= 1
    assert np.allclose(g.grads["logits"].array[0, 0], want / 2, rtol=1e-12, atol=1e-15)


def test_targets_count_every_position():
    spec = load_spec_text("dims: {C: 4, H: 2, F: 6}\nseed: 1\nblock: {head: tied}\ninput: {tokens: [[0, 2, 1]], targets: [[1, 1, 0]]}\n")
    g = grad(spec, GradOptions())
    p = g.forward.stages["probs"].array
    assert g.loss.value == pytest.approx(-(math.log(p[0, 0, 1]) + math.log(p[0, 1, 1]) + math.log(p[0, 2, 0])) / 3, rel=1e-13)


def test_loss_field_chooses_and_the_option_overrides(tmp_path):
    text = (SPECS / "stack-2-layers.yaml").read_text(encoding="utf-8") + "loss: sum-squares\n"
    spec = load_spec_text(text)
    assert losses.choose(spec, None) == "sum-squares" and losses.choose(spec, "next-token") == "next-token"
    assert losses.choose(load_spec(STACK), None) == "next-token"
    r = run_app("grad", str(write_spec(tmp_path, text)))
    assert "loss sum-squares" in r.stdout


@pytest.mark.parametrize("extra, needle, fragment", [
    ("loss: cross-entropy\n", "cross-entropy", "loss: expected one of"),
    ("loss: next-token\n", "next-token", "needs an output head"),
])
def test_bad_loss_field_is_exit_2_with_its_place(tmp_path, extra, needle, fragment):
    text = PRE_TEXT + extra
    r = run_app("grad", str(write_spec(tmp_path, text)))
    assert_refused(r, f"spec.yaml:{where(text, needle)}", fragment)


def test_bad_targets_are_exit_2(tmp_path):
    text = "dims: {C: 4, H: 2, F: 6}\nseed: 1\nblock: {head: tied}\ninput: {tokens: [[0, 2, 1]], targets: [[1, 1]]}\n"
    assert_refused(run_app("grad", str(write_spec(tmp_path, text))), "input.targets", "[B,T] = [1,3]")
    text = "dims: {C: 4, H: 2, F: 6}\nseed: 1\ninput: {tokens: [[0, 2, 1]], targets: [[1, 1, 0]]}\n"
    assert_refused(run_app("grad", str(write_spec(tmp_path, text))), "input.targets", "output head")


@pytest.mark.parametrize("args, fragment", [
    (["--loss", "nope"], "--loss nope: expected one of next-token | sum-squares"),
    (["--loss", "next-token"], "needs an output head"),
    (["--per-layer"], "--per-layer compares the layers of a stack"),
    (["--pos", "9"], "--pos 9 is out of range"),
    (["--max-memory", "1kB"], "over --max-memory 1kB"),
    (["--stage", "nosuch"], "nosuch"),
    (["--format", "json", "--per-layer"], "--per-layer"),
])
def test_bad_options_are_exit_2_one_line(args, fragment):
    assert_refused(run_app("grad", PRE, *args), fragment)


def test_memory_estimate_counts_the_gradients():
    from tracer.grad.run import check_memory
    from tracer.spec import memory

    spec = load_spec(STACK)
    est = check_memory(spec, "none", False)
    forward = memory.estimate(spec, memory.RecordPolicy())
    assert est.total - forward.total == est.extra["backward gradients"] >= forward.recorded


def test_violation_stops_before_the_gradient_and_keep_going_takes_it():
    spec = str(EXAMPLES / "violations" / "ex5-residual-broadcast.yaml")
    r = run_app("grad", spec)
    assert r.returncode == 1 and "no gradient" in r.stderr and "residual1" in r.stdout
    r = run_app("grad", spec, "--keep-going")
    assert r.returncode == 1 and "training signal" in r.stdout


def test_installed_entry_point_end_to_end(tmp_path):
    r = run_cli("grad", STACK, "--per-layer", "--svg", str(tmp_path / "p.svg"))
    mark, picture = (tmp_path / "p.svg").read_text(encoding="utf-8").split("\n", 1)  # tracer's mark, then the picture
    assert r.returncode == 0 and "blocks.1" in r.stdout and mark.startswith("<!-- tracer ") and picture.startswith("<svg")


# -- Xiong et al. 2020 on the shipped examples -----------------------------------------------
# Each backward pass through a 12-layer stack takes seconds: these experiments are marked slow (python -m pytest --slow).
PRE_STACK = EXAMPLES / "gradients" / "pre-norm-12-layers.yaml"
POST_STACK = EXAMPLES / "gradients" / "post-norm-12-layers.yaml"


def w2_norms(path, seed: int | None = None, layers: int | None = None) -> list[float]:
    """|dL/d ffn.w2| of every layer, layer 0 first, of a shipped stack (with another seed or depth when given)."""
    text = path.read_text(encoding="utf-8")
    if seed is not None:
        text, n = re.subn(r"(?m)^seed: \d+$", f"seed: {seed}", text)
        assert n == 1
    if layers is not None:
        text, n = re.subn(r"(?m)^  layers: \d+$", f"  layers: {layers}", text)
        assert n == 1
    return list(_w2_norms(text, str(path)))


@functools.cache
def _w2_norms(text: str, name: str) -> tuple[float, ...]:  # the same spec text, the same numbers: worked out once a process
    return tuple(v for _, v in per_layer(grad(load_spec_text(text, name), GradOptions()), "ffn.w2"))


def rank_correlation(values: list[float]) -> float:
    """Spearman's rho of the values with the layer index: +1 rising at every layer, -1 falling at every layer."""
    ranks = np.argsort(np.argsort(values))
    return float(np.corrcoef(np.arange(len(values)), ranks)[0, 1])


def assert_xiong_shape(pre: list[float], post: list[float], rising: float = 0.3) -> None:
    """Xiong et al.'s Figure 3 at initialisation (Xavier init): Pre-Norm's gradient shrinks toward the output at
    every layer or nearly; Post-Norm's grows toward the output (positive rank correlation with the layer index,
    the last layer at least the first); so, relative to its first layer, Post-Norm's last layer keeps at least
    twice what Pre-Norm's keeps (docs/gradients.md's figures)."""
    assert pre[-1] / pre[0] <= 1.0 and rank_correlation(pre) <= -0.8, pre
    assert rank_correlation(post) >= rising and post[-1] >= 0.97 * post[0], post
    assert post[-1] / post[0] >= 2.0 * (pre[-1] / pre[0]), (pre, post)


@pytest.mark.slow
def test_shipped_stacks_show_pre_norm_shrinking_and_post_norm_growing():
    pre, post = w2_norms(PRE_STACK), w2_norms(POST_STACK)
    assert_xiong_shape(pre, post, rising=0.7)  # the documented seed: Post-Norm rises clearly
    assert post[-1] >= 1.1 * post[0], post


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_shape_holds_for_other_seeds(seed):
    assert_xiong_shape(w2_norms(PRE_STACK, seed), w2_norms(POST_STACK, seed))


@pytest.mark.slow
def test_the_default_init_shows_pre_norm_shrinking_and_post_norm_level():
    """With nn.Linear's default bound (not the paper's Xavier init), Post-Norm stays level: the growth is the init's
    (docs/gradients.md shows both)."""
    def default_init(path):
        text, n = re.subn(r"(?m)^init: xavier$", "init: default", path.read_text(encoding="utf-8"))
        assert n == 1
        return [v for _, v in per_layer(grad(load_spec_text(text, str(path)), GradOptions()), "ffn.w2")]
    pre, post = default_init(PRE_STACK), default_init(POST_STACK)
    assert pre[-1] / pre[0] <= 0.7 and rank_correlation(pre) <= -0.8, pre
    assert all(0.75 <= v / post[0] <= 1.33 for v in post), post
    assert post[-1] / post[0] >= 1.5 * (pre[-1] / pre[0]), (pre, post)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_last_layer_gradient_with_depth_as_in_xiong_theorem_1(seed):
    """Xiong et al.'s Theorem 1: Post-LN's last-layer gradient does not shrink with the depth; Pre-LN's shrinks
    as 1/sqrt(L) (from 3 to 12 layers: about 0.5)."""
    post = [w2_norms(POST_STACK, seed, layers)[-1] for layers in (3, 12)]
    pre = [w2_norms(PRE_STACK, seed, layers)[-1] for layers in (3, 12)]
    assert 0.9 <= post[1] / post[0] <= 1.4, post
    assert 0.35 <= pre[1] / pre[0] <= 0.6, pre


@pytest.mark.slow
def test_sum_squares_of_a_post_norm_output_is_nearly_constant():
    """Why the shipped stacks use next-token: 0.5*sum(Y^2) of a LayerNorm output (gamma 1, beta 0) is
    0.5*C*var/(var + eps) per row, so almost nothing passes back through the last LayerNorm."""
    spec = load_spec(str(POST_STACK))
    squares = grad(spec, GradOptions(loss="sum-squares"))
    d = spec.dims
    assert squares.loss is not None and squares.loss.stage == "blocks.11.output"
    assert abs(squares.loss.value - 0.5 * d.B * d.T * d.C) < 1e-4 * 0.5 * d.B * d.T * d.C

    def passed_back(g) -> float:  # |dL/d the last LayerNorm's input| / |dL/d its output|
        return float(np.linalg.norm(g.grads["blocks.11.residual2"].array) / np.linalg.norm(g.grads["blocks.11.output"].array))

    assert passed_back(squares) < 1e-4
    assert passed_back(grad(spec, GradOptions())) > 0.1  # next-token: the signal passes


# -- tracer diff --grad ------------------------------------------------------------------------
GRADIENTS = EXAMPLES / "gradients"


def test_diff_grad_compares_the_backward_traces():
    from conftest import compared as diff

    a, b = str(GRADIENTS / "with-residual.yaml"), str(GRADIENTS / "without-residual.yaml")
    r = diff(a, b, grad=True, stages=("x", "blocks.0.output"))
    ga = grad(load_spec(a), GradOptions())
    rows = {row.name: row for row in r.stages}
    assert np.array_equal(rows["x"].a.array, ga.grads["x"].array)  # A's stage is its gradient, not its value
    assert rows["x"].status == "differs" and r.exit_code == 1
    assert [s.name for s in r.stages] == ["blocks.0.output", "x"]  # backward order
    same = run_app("diff", "--grad", a, a)
    assert same.returncode == 0, same.stdout[-500:]


def test_diff_grad_refuses_a_saved_trace(tmp_path):
    saved = tmp_path / "t.json"
    saved.write_text(run_app("run", PRE, "--json").stdout, encoding="utf-8")
    assert_refused(run_app("diff", "--grad", str(saved), PRE), "--grad runs the backward pass")


def test_the_residual_road_carries_more_signal_to_the_input():
    """The guide's straight road: with the residual adds the output's gradient reaches X undiminished, plus the branches'."""
    ratios = []
    for name in ("with-residual.yaml", "without-residual.yaml"):
        g = grad(load_spec(str(GRADIENTS / name)), GradOptions())
        ratios.append(np.linalg.norm(g.grads["x"].array) / np.linalg.norm(g.grads["blocks.5.output"].array))
    assert ratios[0] > 1.5 * ratios[1]


@pytest.mark.slow
def test_per_layer_table_markdown_and_html(tmp_path):
    path = str(GRADIENTS / "post-norm-12-layers.yaml")
    rows = per_layer(grad(load_spec(path), GradOptions()), "ffn.w2")
    assert [layer for layer, _ in rows] == [f"blocks.{i}" for i in range(12)]
    md = run_app("grad", path, "--per-layer", "--format", "markdown").stdout
    assert md.count("| blocks.") == 12 and f"| blocks.11 | {rows[-1][1]:.4g} |" in md
    r = run_app("grad", path, "--per-layer", "--html", str(tmp_path / "p.html"), "--weight", "attn.w_v")
    assert r.returncode == 0 and "|dL/d attn.w_v|" in r.stdout and "█" in r.stdout
    mark, page = (tmp_path / "p.html").read_text(encoding="utf-8").split("\n", 1)  # tracer's mark, then the page
    assert mark.startswith("<!-- tracer ") and page.lower().startswith("<!doctype html")
    assert_refused(run_app("grad", path, "--per-layer", "--weight", "ffn.w9"), "--weight 'ffn.w9': no layer has it")
