"""The softmax's gradient where the softmax saturates: exact zeros stay zeros, tiny values keep their digits.

Huge inputs make huge scores, and a saturated softmax (weights 1 and 0 to the last bit) passes a gradient of 0,
or one far below 1e-300.  Computed as weights * (dweights - sum(dweights * weights)), the dominant key's
difference subtracts two roundings of the same number and leaves about 1e-16 of dweights, which huge q and k
then multiply into w_q's and w_k's gradients (1.8e-2 at inputs of 1e10, with exit 0).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_app, write_spec

from tracer.engine import kernels
from tracer.engine.kernels import attention


def _pairwise_reference(weights: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The softmax's gradient at these weights (made to sum to 1 in long double, as a softmax's do), in the
    pairwise form ds_i = p_i * sum_m p_m (dy_i - dy_m): no term is subtracted from a nearly equal one.  Also
    each element's scale, sum |p_i p_m (dy_i - dy_m)|, the size of what a rounding of the terms can leave."""
    p = weights.astype(np.longdouble)
    p /= p.sum(axis=-1, keepdims=True)
    diff = dy.astype(np.longdouble)[..., :, None] - dy.astype(np.longdouble)[..., None, :]  # [.., i, m]
    terms = p[..., :, None] * p[..., None, :] * diff
    return terms.sum(axis=-1), np.abs(terms).sum(axis=-1)


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps, reason="the reference needs a long double wider than a double")
@pytest.mark.parametrize("spread", [0.5, 5.0, 40.0, 300.0, 1e6])
def test_the_softmax_gradient_is_right_to_its_own_size_at_every_saturation(spread: float) -> None:
    """From uniform weights (spread 0.5) to weights of 1 and 0 (1e6): each score's gradient within a few units
    in the last place of its own size, not of dweights' (the unshifted formula fails from spread 40 on)."""
    rng = np.random.default_rng(7)
    scores = rng.standard_normal((2, 3, 6, 9)) * spread
    dy = rng.standard_normal(scores.shape)
    p = kernels.softmax(scores)
    exact, scale = _pairwise_reference(p, dy)
    tol = 16 * np.finfo(np.float64).eps * scale + np.finfo(np.float64).tiny
    got = kernels.softmax_backward(dy, p)
    assert np.all(np.abs(got - exact) <= tol), float(np.max(np.abs(got - exact) / tol))
    # the attention kernel's own row-by-row form (dweights = dmixed v^T): the same numbers
    B, H, T, S = scores.shape
    v = rng.standard_normal((B, H, S, 4))
    dmixed = rng.standard_normal((B, H, T, 4))
    ds, _, dweights = attention.attend_backward(dmixed, p, v)
    exact, scale = _pairwise_reference(p, dweights)
    assert np.all(np.abs(ds - exact) <= 16 * np.finfo(np.float64).eps * scale + np.finfo(np.float64).tiny)


def test_a_masked_key_still_gets_exactly_zero() -> None:
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((1, 2, 5, 5)) * 50
    scores[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] = -np.inf
    p = kernels.softmax(scores)
    ds = kernels.softmax_backward(rng.standard_normal(p.shape), p)
    assert np.all(ds[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0.0)


POSTNORM_X = """dims: {{B: 1, T: 4, C: 4, H: 2, F: 8}}
seed: 0
block: {{norm_order: post, mask: causal}}
input:
  x: {x}
"""


@pytest.mark.parametrize("scale", [1e3, 1e6, 1e10])
def test_grad_of_a_saturated_post_norm_attention_is_exactly_zero_for_w_q_and_w_k(tmp_path, scale: float) -> None:
    """Post-norm attention reading inputs of size 1e3 to 1e10: scores of 1e6 to 1e20, a softmax of ones and
    zeros, so no change of w_q or w_k changes the loss (to double precision): their gradients are exactly 0,
    while w_v's is not (the values still flow)."""
    x = np.random.default_rng(0).standard_normal((1, 4, 4)) * scale
    spec = write_spec(tmp_path, POSTNORM_X.format(x=json.dumps(x.tolist())))
    r = run_app("grad", str(spec), "--json", "--all")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    weights = {s["name"]: np.array(s["values"]) for s in doc["stages"] if s["name"] == "attn.weights"}["attn.weights"]
    assert set(np.unique(weights)) <= {0.0, 1.0}  # saturated, to the last bit
    grads = {w["name"]: np.array(w["values"]) for w in doc["weight_grads"]}
    assert np.all(grads["attn.w_q"] == 0.0) and np.all(grads["attn.w_k"] == 0.0)
    assert np.any(grads["attn.w_v"] != 0.0)
