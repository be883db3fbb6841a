"""The encoder-decoder (guide section 9): an unmasked encoder, a causal decoder, and cross-attention
whose queries come from the decoder and whose keys and values come from the encoder output.
Compared with tests/helpers/oracle.py and, where installed, with PyTorch's encoder and decoder layers.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SPECS, run_app, run_cli, write_spec
from helpers import oracle as ind
from helpers.tracing import check_against_independent, trace_text

from tracer.engine.params import load_params
from tracer.views.reference_check import verify

SEQ2SEQ = """
model: encoder-decoder
vocab: [<s>, 今天, 天气, 真好, today, is, good, </s>, nice, day]
dims: {{C: 8, H: 2, F: 12}}
seed: {seed}
encoder: {{{encoder}}}
decoder: {{{decoder}}}
input:
  source: {source}
  target: {target}
"""
SOURCE = "[[今天, 天气, 真好], [天气, 天气, 今天]]"
TARGET = "[[<s>, today, is, good, </s>], [<s>, nice, day, </s>, </s>]]"


def seq2seq(encoder="layers: 2, positions: sinusoidal, final_norm: true",
            decoder="layers: 2, positions: sinusoidal, final_norm: true, head: tied",
            source=SOURCE, target=TARGET, seed=19) -> str:
    return SEQ2SEQ.format(encoder=encoder, decoder=decoder, source=source, target=target, seed=seed)


@pytest.mark.parametrize("encoder,decoder", [
    ("layers: 2, positions: sinusoidal, final_norm: true", "layers: 2, positions: sinusoidal, final_norm: true, head: tied"),
    ("norm_order: post, positions: learned", "norm_order: post, positions: learned, head: separate"),
    ("layers: 3, positions: sinusoidal, position_base: 100", "positions: rotary, norm: rmsnorm, activation: swiglu, final_norm: true"),
    ("mask: [[1, 1, 0], [1, 1, 0], [0, 1, 1]], final_norm: true",
     "mask: [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [0, 1, 1, 1, 1]], head: tied"),
])
def test_whole_encoder_decoder_matches_independent(encoder, decoder):
    trace = check_against_independent(seq2seq(encoder, decoder))
    assert trace.spec.dims.S == 3 and trace.spec.dims.T == 5 and trace.spec.dims.B == 2


def test_float32_encoder_decoder_agrees_with_float64():
    t64 = trace_text(seq2seq())
    t32 = trace_text(seq2seq() + "dtype: float32\n")
    assert list(t32.stages) == list(t64.stages)
    for name, stage in t32.stages.items():
        want = t64.stages[name].array
        assert stage.array.dtype == np.float32 and np.max(np.abs(stage.array - want) / (1 + np.abs(want))) <= 2e-5, name


def test_shipped_encoder_decoder_matches_independent():
    check_against_independent((SPECS / "encoder-decoder.yaml").read_text(encoding="utf-8"))


def test_each_stack_keeps_its_own_eps():
    trace = check_against_independent(seq2seq(encoder="eps: 0.5, final_norm: true", decoder="eps: 1e-5, final_norm: true"))
    x = trace.stages["encoder.x"].array
    assert np.max(np.abs(trace.stages["encoder.blocks.0.norm1"].array - ind.layer_norm(x, 1.0, 0.0, 0.5))) <= 1e-12
    check = verify(trace)  # and the scalar reference behind --verify agrees
    assert check.plan.full and check.max_abs_diff <= 1e-12


def test_shapes_and_masks():
    trace = trace_text(seq2seq())
    st = trace.stages
    B, H, S, T = 2, 2, 3, 5
    assert st["encoder.x"].axes == ("B", "S", "C") and st["encoder.x"].array.shape == (B, S, 8)
    assert st["decoder.x"].axes == ("B", "T", "C") and st["decoder.x"].array.shape == (B, T, 8)
    enc = st["encoder.blocks.1.attn.weights"]
    assert enc.axes == ("B", "H", "S", "S") and enc.array.shape == (B, H, S, S)
    assert enc.array.min() > 0  # no mask: every source position reads every source position
    dec = st["decoder.blocks.1.attn.weights"].array
    assert dec.shape == (B, H, T, T)
    assert np.all(dec[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0)  # causal
    assert np.all(dec[..., np.tril_indices(T)[0], np.tril_indices(T)[1]] > 0)
    cross = st["decoder.blocks.0.cross.weights"]
    assert cross.axes == ("B", "H", "T", "S") and cross.array.shape == (B, H, T, S)
    assert cross.array.min() > 0 and np.max(np.abs(cross.array.sum(-1) - 1)) <= 1e-12
    assert st["logits"].array.shape == (B, T, 10) and st["probs"].axes == ("B", "T", "V")


def test_cross_attention_reads_decoder_queries_and_encoder_keys_and_values():
    trace = trace_text(seq2seq())
    st, p = trace.stages, load_params(trace.spec)
    memory = st["encoder.final_norm"].array  # the encoder's output, after its final norm
    for i in (0, 1):
        pre = f"decoder.blocks.{i}."
        w = lambda k, pre=pre: p[f"{pre}cross_attn.{k}"]  # noqa: E731
        heads = lambda a: a.reshape(a.shape[0], a.shape[1], 2, 4).transpose(0, 2, 1, 3)  # noqa: E731
        assert np.max(np.abs(st[pre + "cross.q"].array - heads(st[pre + "norm2"].array @ w("w_q")))) <= 1e-12
        assert np.max(np.abs(st[pre + "cross.k"].array - heads(memory @ w("w_k")))) <= 1e-12
        assert np.max(np.abs(st[pre + "cross.v"].array - heads(memory @ w("w_v")))) <= 1e-12


def test_what_each_stack_can_see():
    base = trace_text(seq2seq())
    # a new last target token: the encoder does not move, earlier decoder positions do not move
    t2 = trace_text(seq2seq(target=TARGET.replace("good, </s>]", "good, nice]")))
    for name, stage in base.stages.items():
        if name.startswith("encoder."):
            assert np.array_equal(stage.array, t2.stages[name].array), name
    out, out2 = base.stages["probs"].array, t2.stages["probs"].array
    assert np.max(np.abs(out[0, :4] - out2[0, :4])) <= 1e-12 and np.max(np.abs(out[0, 4] - out2[0, 4])) > 1e-6
    assert np.array_equal(out[1], out2[1])  # the other sample is untouched
    # a new last source token: the whole encoder output moves, and so does every decoder position
    s2 = trace_text(seq2seq(source=SOURCE.replace("真好]", "今天]")))
    mem, mem2 = base.stages["encoder.final_norm"].array, s2.stages["encoder.final_norm"].array
    assert np.abs(mem[0, 0] - mem2[0, 0]).max() > 1e-6  # position 0 reads position 2: no mask
    assert np.abs(s2.stages["probs"].array[0] - out[0]).max(axis=-1).min() > 1e-9


def torch_stack(trace):
    """One nn.TransformerEncoderLayer and one nn.TransformerDecoderLayer (norm_first, relu, no dropout)
    with tracer's weights; torch's Linear computes x W^T + b, so every W is transposed."""
    torch = pytest.importorskip("torch")
    d = trace.spec.dims
    p = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in load_params(trace.spec).items()}
    kw = {"dropout": 0.0, "activation": "relu", "batch_first": True, "norm_first": True, "dtype": torch.float64}
    enc = torch.nn.TransformerEncoderLayer(d.C, d.H, d.F, layer_norm_eps=trace.spec.encoder.eps, **kw).eval()
    dec = torch.nn.TransformerDecoderLayer(d.C, d.H, d.F, layer_norm_eps=trace.spec.block.eps, **kw).eval()
    norms = [torch.nn.LayerNorm(d.C, eps=s.eps, dtype=torch.float64) for s in (trace.spec.encoder, trace.spec.block)]

    def attn(mod, g):
        mod.in_proj_weight.copy_(torch.cat([p[f"{g}.w_q"].T, p[f"{g}.w_k"].T, p[f"{g}.w_v"].T]))
        mod.in_proj_bias.copy_(torch.cat([p[f"{g}.b_q"], p[f"{g}.b_k"], p[f"{g}.b_v"]]))
        mod.out_proj.weight.copy_(p[f"{g}.w_o"].T)
        mod.out_proj.bias.copy_(p[f"{g}.b_o"])

    def norm(mod, g):
        mod.weight.copy_(p[f"{g}.gamma"])
        mod.bias.copy_(p[f"{g}.beta"])

    def ffn(layer, g):
        layer.linear1.weight.copy_(p[f"{g}.w1"].T)
        layer.linear1.bias.copy_(p[f"{g}.b1"])
        layer.linear2.weight.copy_(p[f"{g}.w2"].T)
        layer.linear2.bias.copy_(p[f"{g}.b2"])

    with torch.no_grad():
        attn(enc.self_attn, "encoder.blocks.0.attn")
        ffn(enc, "encoder.blocks.0.ffn")
        norm(enc.norm1, "encoder.blocks.0.norm1")
        norm(enc.norm2, "encoder.blocks.0.norm2")
        attn(dec.self_attn, "decoder.blocks.0.attn")
        attn(dec.multihead_attn, "decoder.blocks.0.cross_attn")
        ffn(dec, "decoder.blocks.0.ffn")
        for i in (1, 2, 3):
            norm(getattr(dec, f"norm{i}"), f"decoder.blocks.0.norm{i}")
        norm(norms[0], "encoder.final_norm")
        norm(norms[1], "decoder.final_norm")
    return torch, enc, dec, norms, p


@pytest.mark.parametrize("spec", ["shipped", "batch"])
def test_matches_torch_encoder_and_decoder_layers(spec):
    if spec == "shipped":
        text = (SPECS / "encoder-decoder.yaml").read_text(encoding="utf-8")
    else:
        text = seq2seq(encoder="positions: sinusoidal, final_norm: true, eps: 1e-3",
                       decoder="positions: sinusoidal, final_norm: true, head: tied, eps: 1e-4")
    trace = trace_text(text)
    torch, enc, dec, norms, p = torch_stack(trace)
    st = trace.stages
    T = st["decoder.x"].array.shape[1]
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    with torch.no_grad():
        memory = norms[0](enc(torch.from_numpy(st["encoder.x"].array)))
        h = dec(torch.from_numpy(st["decoder.x"].array), memory, tgt_mask=causal, tgt_is_causal=True)
        logits = norms[1](h) @ p["embedding"].T
    assert np.max(np.abs(st["encoder.final_norm"].array - memory.numpy())) <= 1e-10
    assert np.max(np.abs(st["decoder.blocks.0.output"].array - h.numpy())) <= 1e-10
    assert np.max(np.abs(st["logits"].array - logits.numpy())) <= 1e-10


def test_table_shows_both_stacks_and_the_cross_attention_weights():
    r = run_cli("run", str(SPECS / "encoder-decoder.yaml"), "--all")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[1]: line for line in r.stdout.splitlines() if line.startswith("│ ")}
    assert "[B,S,C] = [1,3,8]" in rows["encoder.blocks.0.output"]
    assert "[B,H,S,S] = [1,2,3,3]" in rows["encoder.blocks.0.attn.weights"]
    assert "[B,H,T,S] = [1,2,4,3]" in rows["decoder.blocks.0.cross.weights"]
    assert "[B,H,T,T] = [1,2,4,4]" in rows["decoder.blocks.0.attn.weights"]
    assert "[B,T,V] = [1,4,8]" in rows["probs"]
    assert "value at b=0, t=0 (<s>)" in r.stdout and "t=3 (good): top 5: " in r.stdout


@pytest.mark.parametrize("inputs,message", [
    ("{source: [今天], target: [[<s>, today], [<s>, is]]}", "input.target: source has B = 1 samples but target has B = 2"),
    ("{sauce: [今天], target: [<s>, today]}", "input.sauce: unknown key 'sauce'; did you mean 'source'?"),
    ("{target: [<s>, today]}", "an encoder-decoder needs input.source"),
    ("{source: [今天, 明天], target: [<s>]}", "'明天' is not in the vocab"),
])
def test_input_errors(tmp_path, inputs, message):
    text = f"model: encoder-decoder\nvocab: [<s>, 今天, today, is]\ndims: {{C: 4, H: 2, F: 8}}\nseed: 0\ninput: {inputs}\n"
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_encoder_decoder_sections_are_checked(tmp_path):
    text = "model: encoder-decoder\ndims: {C: 4, H: 2, F: 8}\nseed: 0\nblock: {layers: 2}\ninput: {source: [1], target: [2]}\n"
    r = run_app("run", str(write_spec(tmp_path, text)))
    assert r.returncode == 2 and "'encoder' and 'decoder' sections instead of 'block'" in r.stderr
