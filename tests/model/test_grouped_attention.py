"""Grouped-query attention (dims.H_kv) and the rotary pairing (block.rotary_pairing): no torch needed.

tracer is checked against the independent model (tests/helpers/oracle.py: key/value heads repeated
as Hugging Face's repeat_kv does, rotary turns as complex multiplications), against the scalar
reference (--verify), and against numbers worked out by hand from cos and sin.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import assert_refused, run_app, run_cli, where, write_spec
from helpers import oracle as ind
from helpers.tracing import check_against_independent, flow, trace_text

from tracer.engine.kernels import attention, embeddings, multihead
from tracer.engine.params import load_params
from tracer.views import reference_check as verify

LLAMA_LIKE = """name: gqa
dims: {{B: 2, T: 5, C: 16, H: 4, H_kv: {H_kv}, F: 24}}
seed: 3
block: {{norm: rmsnorm, positions: rotary, rotary_pairing: {pairing}, activation: swiglu, final_norm: true, head: separate,
        layers: 2, norm_order: {order}}}
input: {{tokens: [[0, 1, 2, 3, 4], [5, 4, 3, 2, 1]]}}
"""


def llama_like(H_kv: int = 2, pairing: str = "half", order: str = "pre") -> str:
    return LLAMA_LIKE.format(H_kv=H_kv, pairing=pairing, order=order)


def verified(trace) -> float:
    """The scalar reference's largest difference from NumPy over a full run that compared the attention internals."""
    v = verify.verify(trace)
    assert v.plan.full and any(name.endswith(".k") for name in v.stages), v.plan.reason
    return v.max_abs_diff


# -- grouped-query attention ------------------------------------------------------------

@pytest.mark.parametrize("H_kv", [1, 2, 4])  # multi-query, grouped, plain multi-head
@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@pytest.mark.parametrize("order", ["pre", "post"])
def test_grouped_attention_matches_the_independent_model(H_kv, pairing, order):
    trace = check_against_independent(llama_like(H_kv, pairing, order), tol=1e-12)
    B, H, T, d = 2, 4, 5, 4
    assert trace.stages["blocks.0.attn.q"].array.shape == (B, H, T, d)
    assert trace.stages["blocks.1.attn.k"].array.shape == (B, H_kv, T, d)
    assert trace.stages["blocks.1.attn.v"].array.shape == (B, H_kv, T, d)
    assert trace.stages["blocks.0.attn.scores"].array.shape == (B, H, T, T)


@pytest.mark.parametrize("H_kv", [1, 2])
def test_grouped_attention_in_an_encoder_decoder(H_kv):
    text = (f"model: encoder-decoder\ndims: {{C: 8, H: 4, H_kv: {H_kv}, F: 8}}\nseed: 2\n"
            "encoder: {layers: 1}\ndecoder: {layers: 2, positions: rotary, rotary_pairing: half}\n"
            "input: {source: [1, 2, 3, 0], target: [0, 3, 2]}\n")
    trace = check_against_independent(text, tol=1e-12)
    assert trace.stages["decoder.blocks.1.cross.k"].array.shape == (1, H_kv, 4, 2)  # keys of the 4 source positions
    assert trace.stages["decoder.blocks.1.cross.weights"].array.shape == (1, 4, 3, 4)
    assert trace.stages["encoder.blocks.0.attn.v"].array.shape == (1, H_kv, 4, 2)


def test_grouped_attention_in_custom_steps():
    text = ("dims: {T: 3, C: 8, H: 4, H_kv: 2, F: 8}\nseed: 1\nblock:\n  positions: rotary\n  rotary_pairing: half\n  steps:\n"
            "    - {name: n, op: rms_norm, in: x, weights: n}\n    - {name: a, op: mha, in: n, weights: attn}\n"
            "    - {name: output, op: add, in: [x, a]}\ninput: {x: random}\n")
    trace = trace_text(text)
    assert trace.ok
    assert trace.stages["a.k"].axes == ("B", "H_kv", "T", "d") and trace.stages["a.k"].array.shape == (1, 2, 3, 2)
    assert trace.spec.steps[-2].pairing == "half"
    assert verified(trace) <= 1e-12


def test_a_key_head_is_shared_by_its_group_of_query_heads():
    """GQA with H_kv heads is plain MHA whose key/value heads are each copied H / H_kv times in a row."""
    rng = np.random.default_rng(0)
    B, T, C, H, H_kv = 2, 6, 12, 6, 2
    d, group = C // H, H // H_kv
    x = rng.normal(size=(B, T, C))
    w = {"w_q": rng.normal(size=(C, C)), "w_k": rng.normal(size=(C, H_kv * d)), "w_v": rng.normal(size=(C, H_kv * d)),
         "w_o": rng.normal(size=(C, C)), "b_q": rng.normal(size=C), "b_k": rng.normal(size=H_kv * d),
         "b_v": rng.normal(size=H_kv * d), "b_o": rng.normal(size=C)}
    gqa = multihead.mha(x, **w, H=H, H_kv=H_kv, causal=True, visible=~attention.causal_mask(T), rotary_base=100.0,
                      rotary_pairing="half")
    heads = [g for g in range(H_kv) for _ in range(group)]  # query head h -> key head h // group
    cols = np.concatenate([np.arange(g * d, (g + 1) * d) for g in heads])
    wide = dict(w, w_k=w["w_k"][:, cols], w_v=w["w_v"][:, cols], b_k=w["b_k"][cols], b_v=w["b_v"][cols])
    mha = multihead.mha(x, **wide, H=H, causal=True, visible=~attention.causal_mask(T), rotary_base=100.0, rotary_pairing="half")
    assert gqa["k"].shape == (B, H_kv, T, d) and mha["k"].shape == (B, H, T, d)
    for key in ("scores", "weights", "heads", "output"):
        assert np.max(np.abs(gqa[key] - mha[key])) <= 1e-12, key
    assert np.array_equal(mha["k"][:, group - 1], mha["k"][:, 0]) and not np.array_equal(mha["k"][:, group], mha["k"][:, 0])


def test_softmax_over_queries_with_grouped_heads_is_computed_as_numpy_would():
    text = ("dims: {T: 4, C: 8, H: 4, H_kv: 2, F: 8}\nseed: 1\nblock:\n  mask: none\n  steps:\n"
            "    - {name: a, op: mha, in: x, weights: attn, axis: queries}\n    - {name: output, op: add, in: [x, a]}\n"
            "input: {x: random}\n")
    trace = trace_text(text, keep_going=True)
    assert [v.kind for v in trace.violations] == ["axis"]
    w, v = trace.stages["a.weights"].array, trace.stages["a.v"].array
    assert np.max(np.abs(w.sum(axis=-2) - 1.0)) <= 1e-12  # each key's column sums to 1: the violation's arithmetic
    mixed = np.stack([w[:, h] @ v[:, h // 2] for h in range(4)], axis=1)  # query head h mixes value head h // 2
    heads = mixed.transpose(0, 2, 1, 3).reshape(1, 4, 8)
    assert np.max(np.abs(trace.stages["a.heads"].array - heads)) <= 1e-12


def test_seeded_key_and_value_weights_have_h_kv_heads_of_columns():
    trace = trace_text(llama_like())
    w = trace.spec.weights
    assert (w["blocks.0.attn.w_k"].axes, w["blocks.0.attn.w_k"].shape) == (("C", "C_kv"), (16, 8))
    assert (w["blocks.0.attn.b_v"].axes, w["blocks.0.attn.b_v"].shape) == (("C_kv",), (8,))
    assert w["blocks.0.attn.w_q"].shape == (16, 16) and w["blocks.0.attn.w_o"].shape == (16, 16)
    assert trace.spec.dims.as_dict()["H_kv"] == 2 and trace.spec.dims.as_dict()["C_kv"] == 8


def test_h_kv_equal_to_h_is_plain_multi_head_attention():
    grouped, plain = trace_text(llama_like(H_kv=4)), trace_text(llama_like().replace("H_kv: 2, ", ""))
    assert grouped.spec.dims == plain.spec.dims and "H_kv" not in grouped.spec.dims.as_dict()
    assert grouped.stages["blocks.0.attn.k"].axes == ("B", "H", "T", "d")
    for name, stage in plain.stages.items():
        assert np.array_equal(stage.array, grouped.stages[name].array), name


def test_given_key_weights_must_have_h_kv_heads(tmp_path):
    text = ("dims: {T: 2, C: 4, H: 2, H_kv: 1, F: 4}\nseed: 0\ninput: {x: random}\n"
            "weights: {attn: {w_k: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], b_v: [0, 0]}}\n")
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert_refused(r, f"spec.yaml:{where(text, '[[1, 0')}: weights.attn.w_k: expected [C,C_kv] = [4,2], received [4,4]")
    good = text.replace("[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]", "[[1, 0], [0, 1], [0, 0], [0, 0]]")
    trace = trace_text(good)
    # key head 0 is the first two coordinates of x: W_K picks them
    x = trace.stages["norm1"].array
    assert np.max(np.abs(trace.stages["attn.k"].array[:, 0] - x[..., :2])) <= 1e-15


@pytest.mark.parametrize("dims, fragment", [
    ("{T: 2, C: 12, H: 6, H_kv: 4, F: 4}", "dims.H_kv: H_kv = 4 must divide H = 6"),
    ("{T: 2, C: 12, H: 3, H_kv: 6, F: 4}", "dims.H_kv: H_kv = 6 must divide H = 3"),
    ("{T: 2, C: 12, H: 3, H_kv: 0, F: 4}", "dims.H_kv: expected a whole number from 1"),
    ("{T: 2, C: 12, H: 3, H_kv: two, F: 4}", "dims.H_kv: expected a whole number, received text 'two'"),
])
def test_h_kv_must_divide_h(tmp_path, dims, fragment):
    text = f"dims: {dims}\nseed: 0\ninput: {{x: random}}\n"
    r = run_app("run", str(write_spec(tmp_path, text)))
    col = text.index("H_kv: ") + len("H_kv: ") + 1  # the value
    assert_refused(r, f"spec.yaml:1:{col}: {fragment}")


def test_the_table_graph_steps_and_json_show_h_kv(tmp_path):
    spec = write_spec(tmp_path, llama_like())
    table = run_cli("run", str(spec), "--all")
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith("│ blocks.0.attn.k "))
    assert "[B,H_kv,T,d] = [2,2,5,4]" in row
    q_row = next(line for line in table.stdout.splitlines() if line.startswith("│ blocks.0.attn.q "))
    assert "[B,H,T,d] = [2,4,5,4]" in q_row
    assert "H = 4, H_kv = 2" in table.stdout and "C_kv = 8" in table.stdout
    graph = run_app("graph", str(spec))
    assert graph.returncode == 0, graph.stderr
    assert "[B,H_kv,T,d] = [2,2,5,4]" in graph.stdout and "split into H_kv = 2 heads, each read by H / H_kv = 2 query heads" in graph.stdout
    assert "[C,C_kv] = [16,8]" in graph.stdout and "pairs (i, i + d/2)" in graph.stdout
    steps = run_app("run", str(spec), "--steps")
    assert "pairing=half" in steps.stdout
    doc = json.loads(run_app("run", str(spec), "--json", "--all").stdout)
    assert doc["dims"]["H_kv"] == 2 and doc["block"]["rotary_pairing"] == "half"
    k = next(s for s in doc["stages"] if s["name"] == "blocks.1.attn.k")
    assert k["axes"] == ["B", "H_kv", "T", "d"] and k["shape"] == [2, 2, 5, 4]
    attention = next(s for s in doc["steps"] if s["name"] == "blocks.0.attention")
    assert attention["pairing"] == "half"


def test_stages_lists_the_grouped_and_rotary_variants():
    doc = json.loads(run_app("stages", "attn.k", "--json").stdout)
    by_meaning = {s["meaning"]: s for s in doc["stages"]}
    grouped = by_meaning["keys, split into heads (grouped-query attention, dims.H_kv < H)"]
    assert grouped["axes"] == ["B", "H_kv", "T", "d"]
    half = by_meaning["keys, split into heads, turned by rotary positions (block.rotary_pairing: half)"]
    assert "(i, i + d/2)" in half["formula"]
    assert "(2i, 2i+1)" in by_meaning["keys, split into heads, turned by rotary positions"]["formula"]


def test_verify_probe_and_diff_work_with_grouped_heads(tmp_path):
    spec = write_spec(tmp_path, llama_like(H_kv=1))
    r = run_app("run", str(spec), "--verify", "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["verify"]
    assert v["full"] and 0 <= v["max_abs_diff"] <= 1e-12 and "blocks.1.attn.k" in v["stages"]
    assert run_app("probe", str(spec)).returncode == 0
    saved = tmp_path / "trace.json"
    saved.write_text(run_app("run", str(spec), "--json", "--all").stdout)
    same = run_app("diff", str(saved), str(spec), "--all")
    assert same.returncode == 0, same.stdout[-2000:] + same.stderr
    other = write_spec(tmp_path, llama_like(H_kv=2), "other.yaml")
    d = run_app("diff", str(spec), str(other))
    assert d.returncode == 1 and "dims.H_kv" in d.stdout
    first = next(line for line in d.stdout.splitlines() if line.startswith("first diverging stage"))
    assert "blocks.0.attention" in first


# -- the rotary pairing ------------------------------------------------------------------

def test_rotate_half_by_hand():
    """d = 4, position 1, base 100: pair 0 = (x0, x2) turns by 1 rad, pair 1 = (x1, x3) by 100^(-1/2) = 0.1 rad."""
    x = [[0.5, -1.0, 2.0, 0.25], [1.5, 0.5, -0.75, 2.0]]  # positions 0 and 1
    text = ("dims: {C: 4, H: 1, F: 2}\nblock:\n  positions: rotary\n  position_base: 100\n  rotary_pairing: half\n"
            "  steps: [{name: a, op: mha, in: x, weights: attn}, {name: output, op: add, in: [x, a]}]\n"
            f"input: {{x: {flow(x)}}}\nweights: {{attn: {{w_q: identity, w_k: identity, w_v: identity, w_o: identity}}}}\n")
    trace = trace_text(text)
    q1 = trace.stages["a.q"].array[0, 0, 1]
    x0, x1, x2, x3 = x[1]
    c0, s0, c1, s1 = math.cos(1.0), math.sin(1.0), math.cos(0.1), math.sin(0.1)
    want = [x0 * c0 - x2 * s0, x1 * c1 - x3 * s1, x0 * s0 + x2 * c0, x1 * s1 + x3 * c1]
    assert np.max(np.abs(q1 - want)) <= 1e-15
    assert np.array_equal(trace.stages["a.q"].array[0, 0, 0], x[0])  # position 0 is not turned
    assert np.array_equal(trace.stages["a.k"].array, trace.stages["a.q"].array)  # same weights, same turn
    # interleaved, the default, turns (x0, x1) by 1 rad and (x2, x3) by 0.1 rad instead
    inter = trace_text(text.replace("  rotary_pairing: half\n", "")).stages["a.q"].array[0, 0, 1]
    assert np.max(np.abs(inter - [x0 * c0 - x1 * s0, x0 * s0 + x1 * c0, x2 * c1 - x3 * s1, x2 * s1 + x3 * c1])) <= 1e-15
    assert verified(trace) <= 1e-15


def test_the_default_pairing_is_interleaved_and_unchanged():
    base = llama_like().replace("rotary_pairing: half, ", "")
    default, inter, half = trace_text(base), trace_text(llama_like(pairing="interleaved")), trace_text(llama_like())
    assert default.spec.block.rotary_pairing == "interleaved"
    assert all(s.pairing is None for s in default.spec.steps)  # the default is not written into the step list
    for name, stage in default.stages.items():
        assert np.array_equal(stage.array, inter.stages[name].array), name
    assert np.max(np.abs(half.stages["blocks.0.attn.q"].array - default.stages["blocks.0.attn.q"].array)) > 0.01
    # before the turn both see the same q: position 0 is unturned in either pairing
    assert np.array_equal(half.stages["blocks.0.attn.q"].array[:, :, 0], default.stages["blocks.0.attn.q"].array[:, :, 0])


def test_half_pairing_is_interleaved_on_permuted_weights():
    """Hugging Face's checkpoints permute W_Q and W_K so that rotate-half on them computes what Meta's
    interleaved turn computed on the original weights: the scores are the same."""
    half = trace_text(llama_like(H_kv=2))
    d, H, H_kv = 4, 4, 2
    perm_head = np.array([i // 2 + (d // 2) * (i % 2) for i in range(d)])  # interleaved slot 2i <- i, 2i+1 <- i + d/2
    p = load_params(half.spec)
    weights = {}
    for layer in (0, 1):
        g = f"blocks.{layer}.attn"
        for key, heads in (("w_q", H), ("w_k", H_kv)):
            cols = np.concatenate([h * d + perm_head for h in range(heads)])
            weights.setdefault(str(layer), {})[key] = p[f"{g}.{key}"][:, cols].tolist()
    layers = ", ".join(f"{{attn: {{w_q: {json.dumps(weights[str(i)]['w_q'])}, w_k: {json.dumps(weights[str(i)]['w_k'])}}}}}"
                       for i in (0, 1))
    # the other weights are drawn from the same seed under the same names, so they are the same
    inter = trace_text(llama_like(H_kv=2, pairing="interleaved") + f"weights: {{blocks: [{layers}]}}\n")
    for name in ("blocks.0.attn.scores", "blocks.1.attn.weights", "blocks.1.output", "logits"):
        assert np.max(np.abs(inter.stages[name].array - half.stages[name].array)) <= 1e-12, name


def test_rotary_frequencies_are_hugging_faces_default_rope():
    """inv_freq = 1 / base^(2i/d), i = 0 .. d/2 - 1, as transformers' default rope init computes it."""
    d, base, T = 8, 500000.0, 3
    x = np.zeros((1, 1, T, d))
    x[..., : d // 2] = 1.0  # the first of each half-pair: its turn shows cos and sin of the angle
    out = embeddings.rotary(x, base, "half")
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    angle = np.arange(T)[:, None] * inv_freq[None, :]
    assert np.max(np.abs(out[0, 0, :, : d // 2] - np.cos(angle))) <= 1e-15
    assert np.max(np.abs(out[0, 0, :, d // 2:] - np.sin(angle))) <= 1e-15


def test_rotary_pairing_matches_the_independent_rope():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 3, 6, 8))
    for pairing in ("interleaved", "half"):
        assert np.max(np.abs(embeddings.rotary(x, 30.0, pairing) - ind.rope(x, 30.0, pairing))) <= 1e-14


@pytest.mark.parametrize("block, fragment", [
    ("{rotary_pairing: half}", "block.rotary_pairing: rotary_pairing is for rotary positions, but positions is none"),
    ("{positions: sinusoidal, rotary_pairing: half}", "rotary_pairing is for rotary positions, but positions is sinusoidal"),
    ("{positions: rotary, rotary_pairing: halves}", "block.rotary_pairing: expected one of interleaved | half, received text 'halves'"),
    ("{positions: rotary, rotary_paring: half}", "block.rotary_paring: unknown key 'rotary_paring'; did you mean 'rotary_pairing'?"),
])
def test_rotary_pairing_errors(tmp_path, block, fragment):
    text = f"dims: {{T: 2, C: 4, H: 1, F: 4}}\nseed: 0\nblock: {block}\ninput: {{x: random}}\n"
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert_refused(r, fragment)
    key = "rotary_paring" if "paring:" in block else "rotary_pairing"
    line, col = where(text, key).split(":")
    if "unknown key" not in fragment:
        col = str(int(col) + len(key) + 2)  # the value, after 'key: '
    assert f"spec.yaml:{line}:{col}: " in r.stderr
