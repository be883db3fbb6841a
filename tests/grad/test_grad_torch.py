"""tracer grad against PyTorch autograd, float64, to 1e-10: every stage gradient and every weight gradient.

The torch model (torch_model.py) is independent.py's model written again in torch: built from the
formulas, not from tracer's step lists or backward kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from helpers import oracle as ind

torch = pytest.importorskip("torch", reason="the autograd comparison needs torch (the optional extra)")
from helpers import torch_model as tm  # noqa: E402  (needs torch)

from tracer.engine.params import load_inputs, load_params  # noqa: E402
from tracer.grad import losses  # noqa: E402
from tracer.grad.run import GradOptions, grad  # noqa: E402
from tracer.spec import load_spec_text  # noqa: E402

TOL = 1e-10


def torch_grads(text: str, spec, loss_name: str):
    """Stage and weight gradients by autograd, and the loss."""
    doc = yaml.safe_load(text)
    m = ind.model_from_yaml(doc)
    p = {k: torch.tensor(v, requires_grad=True) for k, v in load_params(spec).items()}
    inputs = load_inputs(spec)
    if spec.model == "encoder-decoder":
        st = tm.encoder_decoder(m, p, inputs["source"], inputs["target"])
    elif "tokens" in inputs:
        st = tm.decoder_only(m, p, tokens=inputs["tokens"])
    else:
        st = tm.decoder_only(m, p, x=inputs["x"])
    if loss_name == "next-token":
        ids = inputs["target" if spec.source is not None else "tokens"]
        targets, counted = losses.token_targets(spec, ids)
        logp = torch.log(st["probs"]).gather(-1, torch.as_tensor(targets)[..., None])[..., 0]
        loss = -(logp * torch.as_tensor(counted)).sum() / int(counted.sum())
    else:
        y = st[losses.output_stage(spec)]
        loss = 0.5 * (y * y).sum()
    loss.backward()

    def g(t):
        return np.zeros(tuple(t.shape)) if t.grad is None else t.grad.detach().numpy()

    return {k: g(v) for k, v in st.items()}, {k: g(v) for k, v in p.items()}, loss.item()


def compare(text: str, loss: str | None = None, keep_going: bool = False):
    spec = load_spec_text(text)
    gt = grad(spec, GradOptions(loss=loss, keep_going=keep_going))
    assert gt.loss is not None
    stages, weights, value = torch_grads(text, spec, gt.loss.name)
    assert abs(gt.loss.value - value) <= TOL * max(1.0, abs(value))
    assert set(gt.grads) == set(gt.forward.stages)
    for name, stage in gt.grads.items():
        assert name in stages, f"the torch model has no stage {name}"
        want = stages[name]
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        assert stage.array.shape == want.shape, name
        assert np.max(np.abs(stage.array - want), initial=0.0) <= TOL * scale, f"stage {name}"
    assert set(gt.weight_grads) == set(weights)
    for name, dw in gt.weight_grads.items():
        scale = max(1.0, float(np.max(np.abs(weights[name]))))
        assert np.max(np.abs(dw - weights[name]), initial=0.0) <= TOL * scale, f"weight {name}"
    assert any(np.any(dw != 0) for dw in gt.weight_grads.values())  # a test that could not fail would pass on zeros
    return gt


def block_spec(order="pre", mask="causal", layers=1, norm="layernorm", activation="relu", positions="learned",
               head="none", final_norm=False, B=2, T=5, C=8, H=2, F=12, seed=3, tokens=True, extra="",
               H_kv=None, pairing=None) -> str:
    turn = f", rotary_pairing: {pairing}" if pairing else ""
    block = (f"{{norm_order: {order}, mask: {mask}, layers: {layers}, norm: {norm}, activation: {activation}, "
             f"positions: {positions}, head: {head}, final_norm: {str(final_norm).lower()}{turn}}}")
    tables = f", V: 11, T_max: {T + 2}" if positions == "learned" else ", V: 11"
    inp = "tokens: random" if tokens else "x: random"
    dims = f"{{B: {B}, T: {T}, C: {C}, H: {H}, F: {F}{tables if tokens else ''}}}"
    if not tokens and positions == "learned":
        dims = f"{{B: {B}, T: {T}, C: {C}, H: {H}, F: {F}, T_max: {T + 2}}}"
    if H_kv is not None:
        dims = dims.replace(f"H: {H},", f"H: {H}, H_kv: {H_kv},")
    return f"dims: {dims}\nseed: {seed}\nblock: {block}\ninput: {{{inp}}}\n{extra}"


def gamma_beta_weights(seed: int, names, C: int) -> str:
    """Non-trivial gamma and beta (the defaults 1 and 0 would hide a missing term)."""
    rng = np.random.default_rng(seed)
    parts = [f"{n}: {{gamma: {(rng.normal(size=C) + 1).round(3).tolist()}, beta: {rng.normal(size=C).round(3).tolist()}}}" for n in names]
    return "weights: {" + ", ".join(parts) + "}\n"


@pytest.mark.parametrize("order", ["pre", "post"])
@pytest.mark.parametrize("mask", ["causal", "none"])
def test_one_layer_every_stage_and_weight(order, mask):
    compare(block_spec(order, mask, extra=gamma_beta_weights(1, ["norm1", "norm2"], 8)))


@pytest.mark.parametrize("order", ["pre", "post"])
@pytest.mark.parametrize("head", ["tied", "separate"])
def test_stack_with_final_norm_and_head(order, head):
    gt = compare(block_spec(order, layers=3, head=head, final_norm=True, H=4, seed=5))
    assert gt.loss is not None and gt.loss.name == "next-token"


@pytest.mark.parametrize("head", ["tied", "separate"])
def test_stack_sum_squares_through_a_head(head):
    gt = compare(block_spec("pre", layers=2, head=head, final_norm=True), loss="sum-squares")
    assert gt.loss is not None and gt.loss.stage == "final_norm"


@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "swiglu", "relu"])
def test_norms_and_activations(norm, activation):
    compare(block_spec("pre", layers=2, norm=norm, activation=activation, seed=11, F=10))


@pytest.mark.parametrize("positions", ["rotary", "sinusoidal", "none"])
@pytest.mark.parametrize("order", ["pre", "post"])
def test_positions(positions, order):
    compare(block_spec(order, positions=positions, layers=2, H=2, C=8, seed=13))


@pytest.mark.parametrize("H_kv", [1, 2, None])
@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@pytest.mark.parametrize("order", ["pre", "post"])
def test_grouped_query_and_rotary_pairings(H_kv, pairing, order):
    """H = 4 query heads sharing H_kv key/value heads (None: 4, plain multi-head), rotary turned in either pairing."""
    text = block_spec(order, positions="rotary", pairing=pairing, layers=2, head="separate", final_norm=True,
                      B=3, T=5, C=16, H=4, H_kv=H_kv, seed=37 + (H_kv or 4), extra=gamma_beta_weights(2, ["final_norm"], 16))
    gt = compare(text)
    assert gt.loss is not None and gt.loss.name == "next-token"
    kv = H_kv or 4
    assert gt.grads["blocks.1.attn.k"].array.shape == (3, kv, 5, 4)
    assert gt.weight_grads["blocks.0.attn.w_v"].shape == (16, 4 * kv)


@pytest.mark.parametrize("H_kv", [1, None])
@pytest.mark.parametrize("loss", ["next-token", "sum-squares"])
def test_causal_row_blocks(monkeypatch, H_kv, loss):
    """Under a causal mask the backward works in blocks of ROW_BLOCK query rows, as the forward does, and never
    touches the keys after a block: blocks of 2 rows over T = 7 (a short last block), grouped and plain heads."""
    from tracer.engine.kernels import attention

    monkeypatch.setattr(attention, "ROW_BLOCK", 2)
    gt = compare(block_spec("pre", positions="rotary", layers=2, head="tied", final_norm=True, B=2, T=7, C=16, H=4,
                            H_kv=H_kv, seed=47), loss=loss)
    for layer in (0, 1):
        scores = gt.grads[f"blocks.{layer}.attn.scores"].array
        assert np.any(np.tril(scores) != 0) and not np.any(np.triu(scores, k=1))  # exactly 0 after the diagonal
        assert np.any(np.triu(gt.grads[f"blocks.{layer}.attn.weights"].array, k=1) != 0)  # the weights' gradient is whole


@pytest.mark.parametrize("H_kv", [1, 2])
def test_grouped_query_sum_squares_none_mask(H_kv):
    compare(block_spec("pre", mask="none", positions="rotary", pairing="half", C=16, H=4, H_kv=H_kv, seed=41))


def test_given_input_matrix_gets_its_gradient():
    gt = compare(block_spec("pre", tokens=False, positions="none", seed=17))
    assert np.any(gt.grads["input"].array != 0)


def test_explicit_mask():
    mask = [[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 1]]
    text = block_spec("pre", mask="causal", T=4, seed=19).replace("mask: causal", f"mask: {mask}")
    compare(text)


def test_next_token_with_given_targets():
    text = block_spec("pre", layers=2, head="tied", final_norm=True, B=2, T=3, seed=23)
    text = text.replace("input: {tokens: random}", "input: {tokens: [[1, 2, 3], [4, 5, 6]], targets: [[2, 3, 0], [5, 6, 10]]}")
    gt = compare(text.replace("B: 2, T: 3, ", ""))
    assert gt.loss is not None and gt.loss.name == "next-token"


def test_batchnorm_with_keep_going():
    compare(block_spec("pre", norm="batchnorm", seed=29), keep_going=True)


@pytest.mark.parametrize("order", ["pre", "post"])
def test_encoder_decoder(order):
    text = f"""model: encoder-decoder
dims: {{B: 2, S: 5, T: 4, C: 8, H: 2, F: 12, V: 9}}
seed: 31
encoder: {{layers: 2, norm_order: {order}, positions: sinusoidal, final_norm: true}}
decoder: {{layers: 2, norm_order: {order}, positions: sinusoidal, final_norm: true, head: separate}}
input: {{source: random, target: random}}
"""
    gt = compare(text)
    assert any(n.endswith("cross.weights") for n in gt.grads)


@pytest.mark.parametrize("H_kv", [1, 2])
def test_encoder_decoder_grouped_query(H_kv):
    """Cross-attention's keys and values come from the encoder's memory, in H_kv heads as the self-attention's."""
    text = f"""model: encoder-decoder
dims: {{B: 2, S: 5, T: 4, C: 16, H: 4, H_kv: {H_kv}, F: 12, V: 9}}
seed: 43
encoder: {{layers: 1, norm_order: pre, positions: rotary, rotary_pairing: half, final_norm: true}}
decoder: {{layers: 2, norm_order: post, positions: rotary, rotary_pairing: half, final_norm: true, head: tied}}
input: {{source: random, target: random}}
"""
    gt = compare(text)
    assert gt.grads["decoder.blocks.0.cross.v"].array.shape == (2, H_kv, 5, 4)


def test_shipped_specs():
    from conftest import SPECS

    for name in ("stack-2-layers.yaml", "encoder-decoder.yaml", "ch17-prenorm.yaml", "ch17-postnorm.yaml",
                 "variants/rotary.yaml", "variants/swiglu.yaml", "variants/modern-decoder.yaml",
                 "variants/grouped-query.yaml"):
        compare((SPECS / name).read_text(encoding="utf-8"))


# -- the parallel residual, partial rotary and a biased head (GPT-NeoX, Phi) ------------------------------
@pytest.mark.parametrize("order", ["parallel", "parallel_shared"])
@pytest.mark.parametrize("head", ["separate", "tied"])
def test_parallel_blocks_with_partial_rotary_and_a_head_bias(order, head):
    text = block_spec(order, positions="rotary", pairing="half", layers=2, head=head, final_norm=True, C=16, H=2, seed=17,
                      activation="gelu", extra=gamma_beta_weights(2, ["blocks.0.norm1", "blocks.1.norm1"], 16).replace(
                          "blocks.0.norm1", "blocks: [{norm1").replace(", blocks.1.norm1", "}, {norm1").replace("}}\n", "}}]}\n"))
    text = text.replace("rotary_pairing: half", "rotary_pairing: half, rotary_dim: 4, head_bias: true")
    gt = compare(text)
    assert "blocks.0.branches" in gt.grads and "head_bias" in gt.weight_grads
    assert np.any(gt.weight_grads["head_bias"] != 0)


def _gammas(seed: int, layers: int, C: int) -> str:
    """Random gammas for every norm of a stack (Gemma's (1 + gamma) at its default 0 would hide a missing 1)."""
    rng = np.random.default_rng(seed)

    def g() -> list[float]:
        return rng.normal(scale=0.5, size=C).round(3).tolist()

    layer = ", ".join(f"{{norm1: {{gamma: {g()}}}, norm2: {{gamma: {g()}}}}}" for _ in range(layers))
    return f"weights: {{blocks: [{layer}], final_norm: {{gamma: {g()}}}}}\n"


@pytest.mark.parametrize("positions", ["rotary", "learned"])
def test_gemma_block_scaled_embeddings_offset_norms_and_geglu(positions):
    """Gemma's choices together: X = E[token] * sqrt(C) (with learned positions: scaled, then the positions added), every
    RMSNorm times (1 + gamma), the GeGLU FFN, a tied head: every stage and weight gradient against autograd."""
    text = block_spec("pre", layers=2, norm="rmsnorm_offset", activation="geglu", positions=positions, head="tied", final_norm=True,
                      C=8, H=2, F=10, seed=17, extra=_gammas(4, 2, 8))
    text = text.replace("final_norm: true", "final_norm: true, embedding_scale: true")
    gt = compare(text)
    assert ("x" if positions == "rotary" else "embed_scaled") in gt.grads
    assert np.max(np.abs(gt.weight_grads["blocks.1.ffn.w3"])) > 1e-6


@pytest.mark.parametrize("activation", ["geglu", "swiglu"])
def test_gated_ffns_with_an_offset_norm(activation):
    compare(block_spec("post", layers=2, norm="rmsnorm_offset", activation=activation, seed=19, F=10, final_norm=True, head="separate",
                       extra=_gammas(5, 2, 8)))


# -- a head width set apart from C / H (dims.d) -----------------------------------------------------
@pytest.mark.parametrize("H_kv", [None, 2])
def test_a_head_width_of_its_own(H_kv):
    text = block_spec(positions="rotary", pairing="half", layers=2, head="tied", final_norm=True, C=10, H=4, H_kv=H_kv, seed=23,
                      norm="rmsnorm", activation="swiglu").replace("H: 4,", "H: 4, d: 6,")
    gt = compare(text)
    assert gt.weight_grads["blocks.0.attn.w_q"].shape == (10, 24) and gt.weight_grads["blocks.1.attn.w_o"].shape == (24, 10)
