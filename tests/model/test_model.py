"""The whole decoder-only Transformer: batches, heads, seeds, positions, words, stacks, head, dtype.

Every expected value comes from tests/helpers/oracle.py (the formulas written out in NumPy, no tracer
code), from the reader's guide's printed table, or from a property the maths guarantees; the
tolerance is 1e-10 in float64.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from conftest import EXAMPLES, run_app, write_spec
from helpers import oracle as ind
from helpers.tracing import check_against_independent, flow, trace_text

from tracer.engine.params import load_inputs, load_params
from tracer.spec import load_spec_text

# -- batches: per-position operations stay per sample (section 17.5, last paragraph) ----------------

VOCAB = "[<s>, the, cat, sat, on, mat, ., a, dog, ran]"
BATCH = [["<s>", "the", "cat", "sat"], ["<s>", "a", "dog", "ran"], ["the", "mat", ".", "."]]


STACK = "norm_order: pre, layers: 2, positions: learned, final_norm: true, head: tied"


def stack_spec(tokens: str, extra: str = "", block: str = STACK) -> str:
    return f"""
vocab: {VOCAB}
dims: {{C: 8, H: 2, F: 16, T_max: 6}}
seed: 11
block: {{{block}}}
input: {{tokens: {tokens}}}
{extra}
"""


def sample_alone_matches(batch_trace, single_trace, b: int) -> None:
    for name, stage in batch_trace.stages.items():
        alone = single_trace.stages[name]
        got = stage.array[b] if stage.axes[0] == "B" else stage.array
        want = alone.array[0] if alone.axes[0] == "B" else alone.array
        assert got.shape == want.shape, name
        assert np.max(np.abs(got - want), initial=0.0) <= 1e-10, name


@pytest.mark.parametrize("block", [STACK, STACK + ", mask: none",
                                   "layers: 2, positions: rotary, norm: rmsnorm, activation: swiglu, head: separate"])
def test_each_sample_traces_as_if_alone(block):
    text = stack_spec(json.dumps(BATCH, ensure_ascii=False), block=block)
    batch = trace_text(text)
    assert batch.spec.dims.B == 3 and batch.ok
    assert batch.stages["blocks.1.attn.weights"].array.shape == (3, 2, 4, 4)
    for b, sample in enumerate(BATCH):
        alone = trace_text(text.replace(json.dumps(BATCH, ensure_ascii=False), json.dumps([sample], ensure_ascii=False)))
        assert alone.spec.dims.B == 1
        sample_alone_matches(batch, alone, b)


def test_batch_of_given_inputs_matches_independent_and_stays_per_sample():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 6))
    text = f"dims: {{C: 6, H: 3, F: 12}}\nseed: 3\nblock: {{mask: none}}\ninput: {{x: {flow(x)}}}\n"
    trace = check_against_independent(text)
    # without a mask every position reads every position of its own sample, never the other sample's
    x2 = x.copy()
    x2[1] += 5.0
    other = trace_text(text.replace(flow(x), flow(x2)))
    assert np.array_equal(other.stages["output"].array[0], trace.stages["output"].array[0])
    assert not np.allclose(other.stages["output"].array[1], trace.stages["output"].array[1])


# -- heads ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("H", [1, 2, 3, 4, 6, 12])
def test_heads_split_c_and_scale_by_sqrt_d(H):
    rng = np.random.default_rng(H)
    x = rng.normal(size=(2, 5, 12))
    text = f"dims: {{C: 12, H: {H}, F: 8}}\nseed: 5\ninput: {{x: {flow(x)}}}\n"
    trace = check_against_independent(text)
    d = 12 // H
    q, k = trace.stages["attn.q"], trace.stages["attn.k"]
    assert q.axes == ("B", "H", "T", "d") and q.array.shape == (2, H, 5, d)
    w_q = load_params(trace.spec)["attn.w_q"]
    n1 = trace.stages["norm1"].array
    for h in range(H):  # head h is columns h*d .. (h+1)*d - 1 of N1 W_Q
        assert np.max(np.abs(q.array[:, h] - (n1 @ w_q)[:, :, h * d:(h + 1) * d])) <= 1e-12
    scores = trace.stages["attn.scores"].array
    by_hand = np.einsum("bhtd,bhsd->bhts", q.array, k.array) / math.sqrt(d)
    assert np.max(np.abs(scores - by_hand)) <= 1e-12


def test_heads_must_divide_c(tmp_path):
    p = write_spec(tmp_path, "dims: {C: 12, H: 5, F: 8, T: 3}\nseed: 0\ninput: {x: random}\n")
    r = run_app("run", str(p))
    assert r.returncode == 2
    assert "H = 5" in r.stderr and "C = 12" in r.stderr and "dims.H" in r.stderr
    assert "spec.yaml:1:" in r.stderr and "Traceback" not in r.stderr


def test_rotary_needs_an_even_head_width(tmp_path):
    p = write_spec(tmp_path, "dims: {C: 6, H: 2, F: 8, T: 3}\nseed: 0\nblock: {positions: rotary}\ninput: {x: random}\n")
    r = run_app("run", str(p))
    assert r.returncode == 2
    assert "d = C / H = 3" in r.stderr and "even" in r.stderr


# -- seeds ------------------------------------------------------------------------------------------

SEEDED = """
vocab: [a, b, c, d, e, f, g, h, i, j, k, l]
dims: {C: 64, H: 4, F: 256, T_max: 40}
seed: 123
block: {layers: 2, positions: learned, final_norm: true, head: separate}
input: {tokens: [a, b, c]}
"""


def test_same_spec_twice_gives_identical_stages():
    one, two = trace_text(SEEDED), trace_text(SEEDED)
    assert list(one.stages) == list(two.stages)
    for name in one.stages:
        assert np.array_equal(one.stages[name].array, two.stages[name].array), name


def test_same_spec_in_two_processes_gives_identical_json():
    a = run_app("run", "specs/stack-2-layers.yaml", "--json", "--with-weights")
    b = run_app("run", "specs/stack-2-layers.yaml", "--json", "--with-weights")
    assert a.returncode == b.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    assert "blocks.1.attn.w_q" in json.loads(a.stdout)["weights"]


def _uniform_check(w: np.ndarray, bound: float) -> None:
    """Uniform on [-bound, bound]: inside it, reaching near both ends, mean 0 and variance bound^2 / 3."""
    n = w.size
    assert np.all(np.abs(w) <= bound)
    assert w.min() < -0.95 * bound and w.max() > 0.95 * bound
    sd_mean = bound / math.sqrt(3 * n)
    assert abs(w.mean()) < 5 * sd_mean
    assert abs(w.var() / (bound * bound / 3) - 1) < 0.1
    counts = np.histogram(w, bins=8, range=(-bound, bound))[0]
    assert np.all(np.abs(counts - n / 8) < 5 * math.sqrt(n / 8)), counts


def test_documented_distributions():
    spec = load_spec_text(SEEDED, "spec.yaml")
    p = load_params(spec)
    C, F, V = 64, 256, 12
    for layer in ("blocks.0.", "blocks.1."):
        for key in ("w_q", "w_k", "w_v", "w_o"):
            _uniform_check(p[f"{layer}attn.{key}"], 1 / math.sqrt(C))  # [n_in, n_out]: 1/sqrt(n_in)
        _uniform_check(p[f"{layer}ffn.w1"], 1 / math.sqrt(C))
        _uniform_check(p[f"{layer}ffn.w2"], 1 / math.sqrt(F))
        for key in ("b_q", "b_k", "b_v", "b_o"):
            assert np.array_equal(p[f"{layer}attn.{key}"], np.zeros(C))
        assert np.array_equal(p[f"{layer}ffn.b1"], np.zeros(F)) and np.array_equal(p[f"{layer}ffn.b2"], np.zeros(C))
        for norm in ("norm1", "norm2"):
            assert np.array_equal(p[f"{layer}{norm}.gamma"], np.ones(C))
            assert np.array_equal(p[f"{layer}{norm}.beta"], np.zeros(C))
    _uniform_check(p["embedding"], 1.0)
    _uniform_check(p["position"], 1.0)
    _uniform_check(p["head"], 1 / math.sqrt(C))
    assert p["embedding"].shape == (V, C) and p["position"].shape == (40, C) and p["head"].shape == (C, V)


def test_draws_are_numpys_own_uniform_doubles_from_the_pcg64_stream():
    """The stream is PCG64 (bits NumPy keeps stable); the doubles are NumPy's Generator.random on it.

    Generator.random turns a 64-bit word into (word >> 11) * 2^-53, so this pins tracer's own
    conversion to NumPy's documented one, on the stream docs/contributing.md describes.
    """
    spec = load_spec_text(SEEDED, "spec.yaml")
    p = load_params(spec)
    for name, bound in (("blocks.1.ffn.w2", 1 / math.sqrt(256)), ("embedding", 1.0)):
        key = int.from_bytes(hashlib.sha256(f"weights.{name}".encode()).digest()[:8], "little")
        gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([123, key])))
        want = (-bound + 2 * bound * gen.random(p[name].size)).reshape(p[name].shape)
        assert np.array_equal(p[name], want), name


def test_each_weight_has_its_own_stream():
    p = load_params(load_spec_text(SEEDED, "spec.yaml"))
    # different names, different numbers
    assert not np.array_equal(p["blocks.0.attn.w_q"], p["blocks.1.attn.w_q"])
    assert not np.array_equal(p["blocks.0.attn.w_q"], p["blocks.0.attn.w_k"])
    # giving one weight, adding a layer, or dropping the head changes none of the others
    given = np.full((64, 64), 0.5)
    variants = [
        SEEDED + f"weights: {{blocks: [{{attn: {{w_q: {flow(given)}}}}}, {{}}]}}\n",
        SEEDED.replace("layers: 2", "layers: 3"),
        SEEDED.replace("head: separate", "head: none").replace("final_norm: true", "final_norm: false"),
    ]
    for text in variants:
        q = load_params(load_spec_text(text, "spec.yaml"))
        for name, w in q.items():
            if name == "blocks.0.attn.w_q" and "w_q:" in text:
                assert np.array_equal(w, given)
            elif name in p:
                assert np.array_equal(w, p[name]), name


def test_another_seed_gives_other_numbers():
    p = load_params(load_spec_text(SEEDED, "spec.yaml"))
    q = load_params(load_spec_text(SEEDED.replace("seed: 123", "seed: 124"), "spec.yaml"))
    for name in ("embedding", "blocks.0.attn.w_q", "blocks.1.ffn.w1", "head"):
        assert not np.allclose(p[name], q[name])


def test_random_tokens_are_ids_below_v_and_reproducible():
    text = "dims: {C: 4, H: 2, F: 8, B: 3, T: 50, V: 7}\nseed: 4\ninput: {tokens: random}\n"
    ids = load_inputs(load_spec_text(text, "s.yaml"))["tokens"]
    assert ids.shape == (3, 50) and ids.dtype == np.int64
    assert ids.min() >= 0 and ids.max() <= 6 and len(np.unique(ids)) == 7
    assert np.array_equal(ids, load_inputs(load_spec_text(text, "s.yaml"))["tokens"])


# -- positions --------------------------------------------------------------------------------------

# The reader's guide, section 8 (its printed table: T = 4, C = 4, base 100).
GUIDE_TABLE = [
    [0.00, 1.00, 0.00, 1.00],
    [0.84, 0.54, 0.10, 1.00],
    [0.91, -0.42, 0.20, 0.98],
    [0.14, -0.99, 0.30, 0.96],
]
GUIDE = "/work/shared/seeds/001_33d7f4c3edd47ee5.txt"


def test_guide_table_above_is_the_guides_own():
    import os
    import re

    if not os.path.exists(GUIDE):
        pytest.skip("the reader's guide is not on this machine")
    with open(GUIDE, encoding="utf-8") as fh:
        text = fh.read()
    rows = re.findall(r"位置 (\d) 的编码:\[([^\]]*)\]", text)
    assert [int(i) for i, _ in rows] == [0, 1, 2, 3]
    assert [[float(v) for v in row.split(",")] for _, row in rows] == GUIDE_TABLE


def test_sinusoidal_base_100_reproduces_the_guides_table():
    trace = trace_text((EXAMPLES / "positions" / "sinusoidal-guide-table.yaml").read_text(encoding="utf-8"))
    pos = trace.stages["position"]
    assert pos.axes == ("T", "C") and pos.array.shape == (4, 4)
    assert np.round(pos.array, 2).tolist() == GUIDE_TABLE
    assert np.max(np.abs(pos.array - ind.sinusoidal_table(4, 4, 100.0))) <= 1e-12
    # position 1 by hand: sin(1), cos(1), sin(1/100^(2/4)) = sin(0.1), cos(0.1)
    assert np.max(np.abs(pos.array[1] - [math.sin(1), math.cos(1), math.sin(0.1), math.cos(0.1)])) <= 1e-15


def test_cli_prints_the_guides_position_1():
    r = run_app("run", "examples/positions/sinusoidal-guide-table.yaml", "--pos", "1", "--precision", "2")
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("│ position"))
    assert "[0.84, 0.54, 0.10, 1.00]" in row and "[T,C] = [4,4]" in row


@pytest.mark.parametrize("C,H,base,extra", [(6, 2, 10000.0, ""), (5, 1, 10000.0, ""), (8, 2, 37.5, ", position_base: 37.5")])
def test_sinusoidal_positions_match_the_formula(C, H, base, extra):
    rng = np.random.default_rng(C)
    x = rng.normal(size=(2, 7, C))
    trace = check_against_independent(f"dims: {{C: {C}, H: {H}, F: 4}}\nseed: 1\nblock: {{positions: sinusoidal{extra}}}\n"
                                      f"input: {{x: {flow(x)}}}\n")
    assert np.max(np.abs(trace.stages["position"].array - ind.sinusoidal_table(7, C, base))) <= 1e-12
    assert trace.stages["position"].meaning.endswith(f"base {base:g}")


def test_learned_positions_add_rows_of_p():
    rng = np.random.default_rng(2)
    E, P = rng.normal(size=(5, 4)), rng.normal(size=(6, 4))
    text = (f"dims: {{C: 4, H: 2, F: 8}}\nseed: 0\ninput: {{tokens: [[3, 1, 4, 1], [0, 2, 2, 4]]}}\n"
            f"weights: {{embedding: {flow(E)}, position: {flow(P)}}}\n")
    trace = check_against_independent(text)
    assert trace.spec.block.positions == "learned" and trace.spec.dims.T_max == 6
    assert np.array_equal(trace.stages["position"].array, P[:4])
    assert np.max(np.abs(trace.stages["x"].array[0] - (E[[3, 1, 4, 1]] + P[:4]))) <= 1e-15


def test_no_positions_leave_x_as_the_embedding():
    trace = check_against_independent("dims: {C: 4, H: 2, F: 8}\nseed: 2\ninput: {tokens: [1, 0, 1]}\n")
    assert "position" not in trace.stages
    assert np.array_equal(trace.stages["x"].array, trace.stages["embed"].array)
    # with no positions and no mask, attention cannot tell the two 1s apart: same token, same output
    t2 = trace_text("dims: {C: 4, H: 2, F: 8}\nseed: 2\nblock: {mask: none}\ninput: {tokens: [1, 0, 1]}\n")
    assert np.max(np.abs(t2.stages["output"].array[0, 0] - t2.stages["output"].array[0, 2])) <= 1e-12


ROTARY = "dims: {{C: 8, H: 2, F: 8}}\nseed: 8\nblock: {{mask: none, positions: {pos}{base}}}\ninput: {{tokens: [[2, 2, 2, 2, 2, 2]]}}\n"


@pytest.mark.parametrize("base", ["", ", position_base: 50"])
def test_rotary_scores_depend_only_on_the_offset(base):
    """Same token everywhere: before the turn every q is the same and every k is the same, so the
    score of query m and key n can only depend on m - n once rotary positions act."""
    trace = check_against_independent(ROTARY.format(pos="rotary", base=base))
    s = trace.stages["attn.scores"].array[0]  # [H,T,T]
    T = s.shape[-1]
    for m in range(T - 1):
        for n in range(T - 1):
            assert abs(s[:, m + 1, n + 1] - s[:, m, n]).max() <= 1e-12
    assert np.ptp(s[:, 0, :], axis=-1).min() > 1e-6  # yet offsets do matter
    # the turn keeps each head's vector's length
    plain = trace_text(ROTARY.format(pos="none", base=""))
    q_r, q_0 = trace.stages["attn.q"].array, plain.stages["attn.q"].array
    assert np.max(np.abs(np.linalg.norm(q_r, axis=-1) - np.linalg.norm(q_0, axis=-1))) <= 1e-12
    assert np.max(np.abs(q_r[:, :, 0] - q_0[:, :, 0])) <= 1e-15  # position 0 is not turned
    # without positions every score is the same number
    s0 = plain.stages["attn.scores"].array[0]
    assert np.max(np.abs(s0 - s0[:, :1, :1])) <= 1e-12
    assert "position" not in trace.stages and np.array_equal(trace.stages["x"].array, trace.stages["embed"].array)


def test_rotary_q_and_k_match_an_independent_rope():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(2, 5, 12))
    trace = check_against_independent(f"dims: {{C: 12, H: 3, F: 6}}\nseed: 6\nblock: {{positions: rotary, position_base: 100}}\n"
                                      f"input: {{x: {flow(x)}}}\n")
    p = load_params(trace.spec)
    n1 = trace.stages["norm1"].array
    raw_k = (n1 @ p["attn.w_k"]).reshape(2, 5, 3, 4).transpose(0, 2, 1, 3)
    assert np.max(np.abs(trace.stages["attn.k"].array - ind.rope(raw_k, 100.0))) <= 1e-12
    # the rotation of pair i at position t is by t * 100^(-2i/4): position 1, pair 1 turns by 0.1 rad
    a = 0.1
    k0, k1 = raw_k[0, 0, 1, 2], raw_k[0, 0, 1, 3]
    assert abs(trace.stages["attn.k"].array[0, 0, 1, 2] - (k0 * math.cos(a) - k1 * math.sin(a))) <= 1e-12
    assert abs(trace.stages["attn.k"].array[0, 0, 1, 3] - (k0 * math.sin(a) + k1 * math.cos(a))) <= 1e-12


# -- tokens as words ----------------------------------------------------------------------------------

WORDS = """
vocab: [我, 喜欢, 你]
dims: {C: 4, H: 2, F: 8}
seed: 3
block: {positions: sinusoidal}
input: {tokens: TOKENS}
"""


def test_words_are_the_same_as_their_ids():
    by_word = trace_text(WORDS.replace("TOKENS", "[我, 喜欢, 你, 我]"))
    by_id = trace_text(WORDS.replace("TOKENS", "[0, 1, 2, 0]"))
    for name in by_id.stages:
        assert np.array_equal(by_word.stages[name].array, by_id.stages[name].array), name
    E = load_params(by_word.spec)["embedding"]
    assert np.array_equal(by_word.stages["embed"].array[0], E[[0, 1, 2, 0]])
    assert by_word.spec.tokens_text() == [["我", "喜欢", "你", "我"]]


def test_table_labels_positions_with_their_words(tmp_path):
    p = write_spec(tmp_path, WORDS.replace("TOKENS", "[我, 喜欢, 你]"))
    r = run_app("run", str(p), "--pos", "1")
    assert r.returncode == 0, r.stderr
    assert "value at b=0, t=1 (喜欢)" in r.stdout
    for t, w in enumerate(["我", "喜欢", "你"]):
        assert f"t={t} ({w}): [" in r.stdout


@pytest.mark.parametrize("word,hint", [("喜歡", "did you mean '喜欢'?"), ("她们", "the vocab has 3 words")])
def test_unknown_word_is_a_spec_error_with_a_suggestion(tmp_path, word, hint):
    p = write_spec(tmp_path, WORDS.replace("TOKENS", f"[我, {word}, 你]"))
    r = run_app("run", str(p))
    assert r.returncode == 2
    assert f"spec.yaml:6:21: input.tokens[1]: '{word}' is not in the vocab; {hint}" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


# -- stacks, final norm, output head --------------------------------------------------------------------

def layer_stages(prefix: str) -> list[str]:
    return [prefix + s for s in ("norm1", "attention", "residual1", "norm2", "hidden", "ffn", "output")]


def test_stack_stage_names_in_order():
    trace = trace_text(stack_spec("[<s>, the, cat]", block=STACK.replace("layers: 2", "layers: 3")))
    shown = [s.name for s in trace.stages.values() if not s.internal]
    assert shown == (["embed", "position", "x"] + layer_stages("blocks.0.") + layer_stages("blocks.1.")
                     + layer_stages("blocks.2.") + ["final_norm", "logits", "probs"])
    internal = [s.name for s in trace.stages.values() if s.internal]
    assert internal[:6] == [f"blocks.0.attn.{k}" for k in ("q", "k", "v", "scores", "weights", "heads")]
    assert len(internal) == 18


@pytest.mark.parametrize("block", [
    STACK,
    STACK.replace("norm_order: pre", "norm_order: post"),
    "layers: 3, positions: sinusoidal, head: tied",
    "layers: 2, mask: none, final_norm: true, head: separate",
    "layers: 2, positions: learned",
])
def test_seeded_stack_matches_independent(block):
    check_against_independent(stack_spec(json.dumps(BATCH[:2], ensure_ascii=False), block=block))


def random_layer(rng: np.random.Generator, C: int, F: int) -> dict:
    w = lambda *shape: rng.normal(scale=0.5, size=shape)  # noqa: E731
    return {
        "norm1": {"gamma": w(C), "beta": w(C)}, "norm2": {"gamma": w(C), "beta": w(C)},
        "attn": {k: w(C, C) for k in ("w_q", "w_k", "w_v", "w_o")} | {k: w(C) for k in ("b_q", "b_k", "b_v", "b_o")},
        "ffn": {"w1": w(C, F), "b1": w(F), "w2": w(F, C), "b2": w(C)},
    }


def to_yaml(tree) -> str:
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k}: {to_yaml(v)}" for k, v in tree.items()) + "}"
    if isinstance(tree, list):
        return "[" + ", ".join(to_yaml(v) for v in tree) + "]"
    return flow(tree)


def flat(tree, prefix="") -> dict[str, np.ndarray]:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out |= flat(v, f"{prefix}{k}.")
        elif isinstance(v, list):
            for i, item in enumerate(v):
                out |= flat(item, f"{prefix}{k}.{i}.")
        else:
            out[prefix + k] = v
    return out


def test_per_layer_weights_given_as_a_blocks_list():
    rng = np.random.default_rng(17)
    C, F, V = 6, 10, 5
    tree = {"embedding": rng.normal(size=(V, C)), "position": rng.normal(size=(4, C)),
            "blocks": [random_layer(rng, C, F), random_layer(rng, C, F)],
            "final_norm": {"gamma": rng.normal(size=C), "beta": rng.normal(size=C)}, "head": rng.normal(size=(C, V))}
    text = (f"dims: {{C: {C}, H: 3, F: {F}}}\nblock: {{layers: 2, final_norm: true, head: separate}}\n"
            f"input: {{tokens: [[4, 0, 3, 3], [1, 2, 0, 4]]}}\nweights: {to_yaml(tree)}\n")
    trace = trace_text(text)  # no seed: every weight is given
    expected = ind.decoder_only(ind.model_from_yaml({"dims": {"H": 3}, "block": {"layers": 2, "final_norm": True, "head": "separate"},
                                                     "weights": {"position": 1}}),
                                flat(tree), tokens=[[4, 0, 3, 3], [1, 2, 0, 4]])
    ind.assert_matches(trace, expected)
    assert trace.stages["logits"].array.shape == (2, 4, V)


def test_blocks_list_mixes_given_and_seeded_layers():
    rng = np.random.default_rng(5)
    w1 = rng.normal(size=(8, 16))
    base = stack_spec("[<s>, the, cat]")
    mixed = base + f"weights: {{blocks: [{{}}, {{ffn: {{w1: {flow(w1)}}}}}]}}\n"
    p, q = load_params(load_spec_text(base, "a.yaml")), load_params(load_spec_text(mixed, "b.yaml"))
    assert np.array_equal(q["blocks.1.ffn.w1"], w1)
    for name in p:
        if name != "blocks.1.ffn.w1":
            assert np.array_equal(p[name], q[name]), name
    check_against_independent(mixed)


def test_blocks_list_must_have_one_entry_per_layer(tmp_path):
    p = write_spec(tmp_path, stack_spec("[<s>, the]", extra="weights: {blocks: [{}]}"))
    r = run_app("run", str(p))
    assert r.returncode == 2
    assert "weights.blocks: expected a list of 2 layer mappings (one per layer), received 1 entries" in r.stderr


@pytest.mark.parametrize("head", ["tied", "separate"])
def test_head_gives_logits_over_v_and_probabilities(head):
    trace = trace_text(stack_spec(json.dumps(BATCH, ensure_ascii=False)).replace("head: tied", f"head: {head}"))
    logits, probs = trace.stages["logits"], trace.stages["probs"]
    assert logits.axes == probs.axes == ("B", "T", "V") and logits.array.shape == (3, 4, 10)
    assert np.max(np.abs(probs.array.sum(axis=-1) - 1.0)) <= 1e-12 and probs.array.min() > 0
    p = load_params(trace.spec)
    w = p["embedding"].T if head == "tied" else p["head"]
    assert ("head" in p) == (head == "separate")
    assert np.max(np.abs(logits.array - trace.stages["final_norm"].array @ w)) <= 1e-12
    assert np.max(np.abs(probs.array[1, 2] - ind.softmax(logits.array[1, 2]))) <= 1e-12


def test_head_needs_token_input(tmp_path):
    p = write_spec(tmp_path, "dims: {C: 4, H: 2, F: 8, T: 2}\nseed: 0\nblock: {head: tied}\ninput: {x: random}\n")
    r = run_app("run", str(p))
    assert r.returncode == 2 and "block.head: an output head needs token input" in r.stderr


# -- dtype ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("block", [
    "{layers: 2, positions: learned, final_norm: true, head: tied}",
    "{norm: rmsnorm, positions: rotary, activation: swiglu, head: separate}",
    "{norm_order: post, positions: sinusoidal, activation: gelu, mask: none}",
    "{positions: sinusoidal, activation: gelu_tanh, final_norm: true, head: tied}",
])
def test_float32_on_request(block):
    text = f"vocab: [a, b, c, d, e]\ndims: {{C: 8, H: 2, F: 16}}\nseed: 21\nblock: {block}\ninput: {{tokens: [[a, b, c, d], [e, e, a, b]]}}\n"
    t64 = trace_text(text)
    t32 = trace_text(text + "dtype: float32\n")
    assert t32.ok and list(t32.stages) == list(t64.stages)
    for name, stage in t32.stages.items():
        assert stage.array.dtype == np.float32, name
        want = t64.stages[name].array
        assert np.max(np.abs(stage.array - want) / (1 + np.abs(want))) <= 2e-5, name


def test_float32_through_the_cli(tmp_path):
    p = write_spec(tmp_path, stack_spec("[<s>, the, cat]", extra="dtype: float32"))
    r = run_app("run", str(p), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["dtype"] == "float32"
    probs = np.array(next(s for s in doc["stages"] if s["name"] == "probs")["values"])
    assert np.array_equal(probs.astype(np.float32).astype(np.float64), probs)  # every value is a float32
    assert np.max(np.abs(probs.sum(axis=-1) - 1)) <= 1e-6
