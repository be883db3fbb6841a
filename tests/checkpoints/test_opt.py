"""The opt layout: Hugging Face OPT imported with no flags, traced, and compared with its forward.

What is new: learned positions read from row 2 (position_offset: 2), the Pre-Norm block (do_layer_norm_before true,
with a final LayerNorm) and the Post-Norm one (false, as OPT-350m: no final LayerNorm), ReLU, biases on every
projection, the head tied to embed_tokens.  Hugging Face keeps OPT's softmax in float32 in a float64 model: the test
lifts it to float64 (OPT has no rotary angles, and its LayerNorms and ReLU follow the model's dtype), so the
comparison is float64 against float64, at 1e-10; tracer grad agrees with autograd through HF's model at 1e-10.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import assert_refused, run_app
from helpers import hf_parity as hf

from tracer.spec import load_spec

TOL = 1e-10
IDS = [5, 17, 42, 3, 29, 0, 11, 8]  # no 1: OPT's pad_token_id, whose embedding row nn.Embedding freezes (its gradient is 0)


def _opt(tmp_path: Path, **config: Any) -> tuple[Any, Any, Path]:
    torch, transformers = hf.need_torch()
    settings = {"vocab_size": 64, "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 80,
                "max_position_embeddings": 32, "init_std": 0.2}
    settings.update(config)
    model = hf.saved(torch, transformers.OPTForCausalLM, transformers.OPTConfig(**settings), tmp_path / "opt")
    return torch, model, tmp_path / "opt"


def _lift_softmax(monkeypatch: Any, torch: Any) -> None:
    """OPT's eager attention with its softmax in float64 (Hugging Face computes it in float32); q arrives scaled."""
    from transformers.models.opt import modeling_opt as mod

    def eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        w = torch.matmul(query, key.transpose(-1, -2)) * scaling
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float64)
        return torch.matmul(w, value).transpose(1, 2).contiguous(), w

    monkeypatch.setattr(mod, "eager_attention_forward", eager)


def _parity(tmp_path: Path, monkeypatch: Any, **config: Any) -> tuple[dict[str, float], Any]:
    torch, model, folder = _opt(tmp_path, **config)
    _lift_softmax(monkeypatch, torch)
    spec = hf.imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))  # layout and every setting from config.json
    st = hf.traced(spec)
    decoder = model.model.decoder
    hidden, outputs, logits = hf.hf_forward(torch, model, decoder.layers, IDS)
    table = decoder.embed_positions.weight.detach().numpy()
    pairs = {"embed": decoder.embed_tokens.weight.detach().numpy()[IDS][None], "position": table[2:2 + len(IDS)],
             "x": hidden[0], "logits": logits}
    for i, out in enumerate(outputs):
        pairs[f"blocks.{i}.output"] = out
    last = torch.tensor(outputs[-1])
    with torch.no_grad():
        if decoder.final_layer_norm is not None:
            last = decoder.final_layer_norm(last)
            pairs["final_norm"] = last.numpy()
        else:
            assert "final_norm" not in st
        if decoder.project_in is not None:  # word_embed_proj_dim != hidden_size: OPT-350m's projections
            pairs["project_in"] = decoder.project_in(torch.tensor(pairs["embed"])).numpy()
            pairs["project_out"] = decoder.project_out(last).numpy()
        else:
            assert "project_in" not in st and "project_out" not in st
    found = {}
    for name, want in pairs.items():
        assert st[name].shape == want.shape, (name, st[name].shape, want.shape)
        found[name] = float(np.max(np.abs(st[name] - want)))
    assert max(found.values()) <= TOL, found
    return found, load_spec(str(spec))


def test_pre_norm_opt_matches_hugging_face_at_every_layer(tmp_path, monkeypatch, request):
    found, spec = _parity(tmp_path, monkeypatch)
    hf.measured(request, "opt", found)
    assert len(found) == 7
    b = spec.block
    assert (b.norm_order, b.positions, b.position_offset, b.activation, b.final_norm, b.head, b.eps) == (
        "pre", "learned", 2, "relu", True, "tied", 1e-5)
    assert spec.dims.T_max == 34 and "head" not in spec.weights
    assert spec.weights["blocks.1.attn.b_o"].source == "file" and spec.weights["blocks.0.ffn.b2"].source == "file"


def test_post_norm_opt_matches_hugging_face_at_every_layer(tmp_path, monkeypatch):
    """do_layer_norm_before false (OPT-350m): LayerNorm after each residual sum, and no final LayerNorm."""
    _, spec = _parity(tmp_path, monkeypatch, do_layer_norm_before=False)
    assert (spec.block.norm_order, spec.block.final_norm, spec.block.head) == ("post", False, "tied")


@pytest.mark.parametrize("norm_before", [False, True])
def test_a_projected_embedding_matches_hugging_face(tmp_path, monkeypatch, norm_before):
    """word_embed_proj_dim 32 != hidden_size 48 (OPT-350m's shape): embed [B,T,C_e], project_in to C, ..., project_out to C_e,
    the tied head over the C_e-wide embedding."""
    found, spec = _parity(tmp_path, monkeypatch, word_embed_proj_dim=32, do_layer_norm_before=norm_before)
    assert "project_in" in found and "project_out" in found
    assert spec.dims.C_e == 32 and spec.stage_shapes["embed"] == (("B", "T", "C_e"), (1, 8, 32))
    assert spec.stage_shapes["project_out"] == (("B", "T", "C_e"), (1, 8, 32))
    assert spec.weights["project_in.w"].shape == (32, 48) and spec.weights["project_in.w"].source == "file"
    assert spec.weights["project_out.b"].source == "zeros"  # OPT's projections have no bias
    names = [s.name for s in spec.steps]
    assert names.index("project_in") == names.index("embed") + 1 and names[names.index("logits") - 1] == "project_out"


def test_gelu_and_an_untied_head(tmp_path, monkeypatch):
    _, spec = _parity(tmp_path, monkeypatch, activation_function="gelu", tie_word_embeddings=False)
    assert (spec.block.activation, spec.block.head) == ("gelu", "separate") and spec.weights["head"].source == "file"


def test_no_biases_and_norms_without_weights(tmp_path, monkeypatch):
    """enable_bias false and layer_norm_elementwise_affine false (Galactica's settings): zeros and ones, not drawn."""
    _, spec = _parity(tmp_path, monkeypatch, enable_bias=False, layer_norm_elementwise_affine=False)
    assert spec.weights["blocks.0.attn.b_q"].source == "zeros" and spec.weights["blocks.1.ffn.b1"].source == "zeros"
    assert spec.weights["blocks.0.norm1.gamma"].source == "ones" and spec.weights["final_norm.beta"].source == "zeros"


def test_positions_from_row_0_are_another_model(tmp_path, monkeypatch):
    """Read from row 0, as GPT-2 reads its table, the trace is far from Hugging Face's: the offset matters."""
    torch, model, folder = _opt(tmp_path)
    spec = hf.imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))
    spec.write_text(spec.read_text().replace("  position_offset: 2 ", "  position_offset: 0 "))
    wrong = hf.traced(spec)
    with torch.no_grad():
        want = model(torch.tensor([IDS])).logits.numpy()
    assert np.max(np.abs(wrong["logits"] - want)) > 1e-3


def test_token_1_is_an_ordinary_token(tmp_path):
    """OPT numbers positions from the attention mask, not the ids: its pad_token_id 1 may be in --tokens (unlike RoBERTa's)."""
    _, _, folder = _opt(tmp_path)
    spec = load_spec(str(hf.imported(tmp_path, folder, "--tokens", "3,1,4")))
    assert spec.input.value == [[3, 1, 4]]


@pytest.mark.parametrize("config", [{}, {"do_layer_norm_before": False, "word_embed_proj_dim": 32}])
def test_grad_matches_torch_autograd(tmp_path, monkeypatch, config):
    """tracer grad's next-token loss and every weight's gradient against autograd through HF's own model."""
    from tracer.checkpoints import families
    from tracer.grad.run import GradOptions, grad

    torch, model, folder = _opt(tmp_path, **config)
    _lift_softmax(monkeypatch, torch)
    logits = model(torch.tensor([IDS])).logits[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(IDS[1:]))
    loss.backward()
    gt = grad(load_spec(str(hf.imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS))))), GradOptions(loss="next-token"))
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    layout = families.layouts()["opt"]
    params = dict(model.named_parameters())
    compared = set()
    for name, dw in gt.weight_grads.items():
        found = layout.locate(name, set(params))
        if name in ("project_in.b", "project_out.b"):  # zeros: OPT's projections have no bias
            assert found is None
            continue
        assert found is not None and found[1], name
        take = found[0]
        want = params[take.key].grad.numpy()
        want = want.T if take.transpose else want
        assert dw.shape == want.shape, name
        assert np.max(np.abs(dw - want)) <= TOL * max(1.0, float(np.max(np.abs(want)))), name
        compared.add(take.key)
    assert compared == set(params)  # every parameter (lm_head is embed_tokens: one tensor)
    assert np.max(np.abs(params["model.decoder.embed_positions.weight"].grad.numpy()[2:2 + len(IDS)])) > 1e-6


# -- what the opt layout cannot trace, refused by name ---------------------------------------

@pytest.mark.parametrize("config, fragment", [
    ({"activation_function": "silu"}, "activation_function 'silu'"),
    ({"word_embed_proj_dim": 32}, "word_embed_proj_dim = 32, but the checkpoint's tensors have C_e = 48"),
    ({"num_attention_heads": 5}, "num_attention_heads = 5 does not divide hidden_size = 48"),
    ({"do_layer_norm_before": "yes"}, "do_layer_norm_before: expected true or false"),
    ({"ffn_dim": 81}, "ffn_dim = 81"),
    ({"max_position_embeddings": 40}, "max_position_embeddings = 40"),
    ({"enable_bias": False}, "enable_bias = false, but the checkpoint holds"),
    ({"do_layer_norm_before": False}, "do_layer_norm_before = false, but the checkpoint holds model.decoder.final_layer_norm"),
    ({"_remove_final_layer_norm": True}, "_remove_final_layer_norm = true, but the checkpoint holds model.decoder.final_layer_norm"),
    ({"scale_embedding": True}, "scale_embedding = boolean true: the opt layout does not model this setting"),
])
def test_what_the_opt_layout_cannot_trace_is_refused(tmp_path, config, fragment):
    _, _, folder = _opt(tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(config)
    (folder / "config.json").write_text(json.dumps(cfg))
    assert_refused(run_app("import", str(folder)), "config.json: " + fragment)


def test_a_missing_bias_is_refused_by_name(tmp_path):
    """enable_bias true but a layer without its q_proj bias: it would be traced as zeros, so it is refused, naming the tensor."""
    from safetensors.numpy import load_file, save_file

    _, _, folder = _opt(tmp_path)
    t = load_file(str(folder / "model.safetensors"))
    del t["model.decoder.layers.1.self_attn.q_proj.bias"]
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})
    assert_refused(run_app("import", str(folder)), "enable_bias = true, but the checkpoint holds no 'model.decoder.layers.1.self_attn.q_proj.bias'")


def test_projections_and_the_config_must_agree(tmp_path):
    """word_embed_proj_dim != hidden_size without project_in is refused naming the tensor; so is a project_out that HF would not apply."""
    from safetensors.numpy import load_file, save_file

    _, _, folder = _opt(tmp_path, word_embed_proj_dim=32)
    t = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in t.items() if "project_in" not in k}, str(folder / "model.safetensors"), metadata={"format": "pt"})
    assert_refused(run_app("import", str(folder)),
                   "word_embed_proj_dim = 32, but hidden_size = 48, and the checkpoint holds no 'model.decoder.project_in.weight'")
    _, _, plain = _opt(tmp_path / "plain")
    t = load_file(str(plain / "model.safetensors"))
    t["model.decoder.project_out.weight"] = np.zeros((48, 48), dtype=np.float64)
    save_file(t, str(plain / "model.safetensors"), metadata={"format": "pt"})
    assert_refused(run_app("import", str(plain)), "the checkpoint holds 'model.decoder.project_out.weight', but word_embed_proj_dim = hidden_size = 48")


def test_c_e_needs_tokens_or_a_head(tmp_path):
    """A spec's dims.C_e with neither an embedding nor a head to project is refused, naming it."""
    path = tmp_path / "s.yaml"
    path.write_text("dims: {B: 1, T: 3, C: 8, H: 2, F: 16, C_e: 4}\nseed: 0\nblock: {head: none}\ninput: {x: random}\n")
    r = run_app("validate", str(path))
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "dims.C_e" in out and "it needs token input or a head" in out and "Traceback" not in out
