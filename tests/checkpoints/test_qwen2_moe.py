"""Qwen2-MoE (Qwen2MoeForCausalLM) is refused in one line, by name, whichever way it is imported.

Its MLP is a mixture of experts beside a shared expert behind a sigmoid gate, and its top-k gates are not renormalised
unless norm_topk_prob: no layout models that, so `tracer import` with no flag, and with each layout whose tensors are
nearest (qwen2, mixtral, llama), exits 2 naming the model_type or the config field, and writes no spec.
"""

from __future__ import annotations

import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf


@pytest.mark.parametrize("layout, fragments", [
    ((), ("model_type 'qwen2_moe' names no layout",)),
    (("--layout", "qwen2"), ("model_type 'qwen2_moe'", "shared expert")),
    (("--layout", "mixtral"), ()),  # named below: the unrenormalised top k, or the model_type
    (("--layout", "llama"), ("model_type 'qwen2_moe'",)),
])
def test_qwen2_moe_is_refused_by_name(tmp_path, layout, fragments):
    folder = hf.tiny(tmp_path, "Qwen2Moe", moe_intermediate_size=24, shared_expert_intermediate_size=40, num_experts=4, num_experts_per_tok=2)[2]
    out = tmp_path / "spec.yaml"
    r = run_app("import", str(folder), *layout, "-o", str(out))
    assert_refused(r, *fragments)
    assert fragments or "norm_topk_prob = false" in r.stderr or "model_type 'qwen2_moe'" in r.stderr, r.stderr
    assert not out.exists()
