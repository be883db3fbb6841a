"""The gemma layout: Hugging Face Gemma (GemmaForCausalLM) imported with no flags and traced.

Without torch: a Gemma-shaped checkpoint written with NumPy (tiny_llama's tensors under model_type gemma), the
spec `tracer import` writes (embedding_scale, norm rmsnorm_offset, activation geglu, a tied head), layer 0
against the oracle's formulas, and every config key or model type the layout does not model refused by name.

With torch and transformers: a tiny random GemmaForCausalLM (2 layers, grouped-query attention, C = 32 so that
sqrt(C) is not a whole number, random norm weights, since HF initialises them to 0) is saved, imported and traced:
every layer's output, the final norm, the logits and the attention weights agree with HF's forward to 1e-10 in
float64 once HF's float32 internals are lifted (GemmaRMSNorm's x.float(), the rotary angles, the softmax, and the
embedding normaliser, a float32 buffer even in a float64 model), and within float32's rounding as shipped;
`tracer grad`'s weight gradients agree with torch autograd through HF's own model to 1e-10.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, run_app
from helpers import oracle
from helpers.hf_parity import measured
from test_llama import IDS, RTOL_FLOAT32, _compare, _float64_internals, _hf_forward, _traced, imported, write_llama

from tracer.spec import load_spec

TOL = 1e-10
GEMMA = {"model_type": "gemma", "architectures": ["GemmaForCausalLM"], "hidden_act": "gelu_pytorch_tanh", "mlp_bias": None,
         "rope_scaling": None}


def write_gemma(folder: Path, **config) -> dict[str, np.ndarray]:
    """tiny_llama's tensors (a tied head) under Gemma's config.json: the tensors of the two families have the same names."""
    return write_llama(folder, tied=True, **(GEMMA | config))


# -- without torch -----------------------------------------------------------------------

def test_import_writes_gemmas_settings(tmp_path):
    write_gemma(tmp_path / "g")
    text = imported(tmp_path, tmp_path / "g", "--tokens", "1,5,9,2").read_text()  # the layout from model_type
    assert "layout: gemma" in text
    for line in ("norm: rmsnorm_offset", "activation: geglu", "embedding_scale: true", "head: tied", "rotary_pairing: half",
                 "# GemmaRMSNorm: x / sqrt(mean(x^2) + eps) * (1 + weight)", "# GemmaTextScaledWordEmbedding"):
        assert line in text, line
    spec = load_spec(str(tmp_path / "spec.yaml"))
    b = spec.block
    assert (b.norm, b.activation, b.embedding_scale, b.head, b.final_norm) == ("rmsnorm_offset", "geglu", True, "tied", True)
    ops = {s.name: s.op for s in spec.steps}
    assert ops["x"] == "embed_scale" and ops["blocks.0.norm1"] == ops["final_norm"] == "rms_norm_offset"
    assert spec.weights["blocks.1.ffn.w3"].source == "file" and spec.weights["blocks.0.ffn.b1"].source == "zeros"


def test_layer_0_is_gemmas_formulas(tmp_path):
    """Layer 0 and the logits of a one-layer Gemma against the oracle: E[ids] * sqrt(C), (1 + w) RMSNorms, GeGLU, tied head."""
    t = write_gemma(tmp_path / "g", layers=1, rope_theta=100.0)
    ids = [3, 1, 4, 1, 5, 9]
    r = run_app("run", str(imported(tmp_path, tmp_path / "g", "--tokens", ",".join(map(str, ids)))), "--json", "--all")
    assert r.returncode == 0, r.stderr
    st = {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}
    p = "model.layers.0."
    E = t["model.embed_tokens.weight"]
    x = oracle.embedding_scale(E[ids][None])
    n1 = oracle.rms_norm_offset(x, t[p + "input_layernorm.weight"], 1e-6)
    w = {f"w_{n}": t[f"{p}self_attn.{n}_proj.weight"].T for n in "qkvo"}
    w.update({"b_q": np.zeros(16), "b_k": np.zeros(8), "b_v": np.zeros(8), "b_o": np.zeros(16)})
    a = oracle.attention(n1, n1, w, 4, "causal", rope_base=100.0, H_kv=2, pairing="half")
    res = x + a["output"]
    n2 = oracle.rms_norm_offset(res, t[p + "post_attention_layernorm.weight"], 1e-6)
    mlp = {"w1": t[p + "mlp.gate_proj.weight"].T, "w3": t[p + "mlp.up_proj.weight"].T, "w2": t[p + "mlp.down_proj.weight"].T,
           "b1": np.zeros(24), "b3": np.zeros(24), "b2": np.zeros(16)}
    hidden = oracle.ffn_hidden(n2, mlp, "geglu")  # gelu_tanh(gate) * up
    y = res + hidden @ mlp["w2"]
    final = oracle.rms_norm_offset(y, t["model.norm.weight"], 1e-6)
    for name, want in (("x", x), ("norm1", n1), ("attention", a["output"]), ("norm2", n2), ("hidden", hidden), ("output", y),
                       ("final_norm", final), ("logits", final @ E.T)):
        assert st[name].shape == want.shape, name
        assert np.max(np.abs(st[name] - want)) <= 1e-12, name
    assert np.max(np.abs(st["x"] - st["embed"] * 4.0)) <= 1e-15  # C = 16: the scale is 4 exactly
    assert run_app("run", str(tmp_path / "spec.yaml"), "--verify").returncode == 0  # against the scalar reference


@pytest.mark.parametrize("config, fragment", [
    ({"model_type": "gemma2"}, "model_type 'gemma2': Gemma 2 adds a norm after each sublayer"),  # through --layout gemma
    ({"model_type": "gemma3_text"}, "model_type 'gemma3_text': Gemma 3 normalises q and k per head"),
    ({"model_type": "llama"}, "model_type 'llama': the gemma layout reads model_type gemma only"),
    ({"query_pre_attn_scalar": 8}, "query_pre_attn_scalar = 8: the gemma layout does not model this setting"),
    ({"final_logit_softcapping": 30.0}, "final_logit_softcapping = 30.0: the gemma layout does not model this setting"),
    ({"sliding_window": 4}, "sliding_window = 4: the gemma layout does not model this setting"),
    ({"hidden_act": "silu"}, "hidden_act 'silu': the gemma layout's MLP is GeGLU"),
    ({"hidden_activation": "gelu"}, "hidden_activation 'gelu': transformers 4 computes Gemma's MLP with it"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention = true"),
    ({"hidden_act": 3}, "hidden_act: expected text, received 3"),
])
def test_what_the_gemma_layout_does_not_model_is_refused_by_name(tmp_path, config, fragment):
    write_gemma(tmp_path / "g", **config)
    layout = ("--layout", "gemma") if config.get("model_type") in ("llama", "gemma3_text", "gemma2") else ()
    assert_refused(run_app("import", str(tmp_path / "g"), *layout), "config.json: " + fragment)


def test_gemma_accepts_its_legacy_gelu_and_refuses_other_activations_and_an_mlp_bias(tmp_path):
    write_gemma(tmp_path / "g", hidden_act="gelu", hidden_activation="gelu_pytorch_tanh")  # the released configs' pair
    text = imported(tmp_path, tmp_path / "g").read_text()
    assert "activation: geglu" in text and "legacy 'gelu'" in text
    assert_refused(run_app("import", str(tmp_path / "g"), "--activation", "swiglu"), "--activation swiglu", "expected geglu")
    from safetensors.numpy import load_file, save_file

    t = load_file(str(tmp_path / "g" / "model.safetensors"))
    t["model.layers.0.mlp.up_proj.bias"] = np.zeros(24)  # GemmaMLP has no biases: a tensor the layout does not read
    save_file(t, str(tmp_path / "g" / "model.safetensors"), metadata={"format": "pt"})
    assert_refused(run_app("import", str(tmp_path / "g")), "'model.layers.0.mlp.up_proj.bias'")


def test_a_gemma_through_the_llama_layout_is_still_refused(tmp_path):
    write_gemma(tmp_path / "g")
    assert_refused(run_app("import", str(tmp_path / "g"), "--layout", "llama"), "config.json: model_type 'gemma'", "(1 + weight)")


# -- against Hugging Face (torch and transformers) ------------------------------------------

def _hf_gemma(tmp_path: Path, **extra):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face needs transformers (optional extra)")
    torch.manual_seed(0)
    config = transformers.GemmaConfig(vocab_size=96, hidden_size=32, intermediate_size=56, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
                                      initializer_range=0.3, rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
                                      pad_token_id=None, **({"head_dim": 8} | extra))  # IDS holds 0: a padding row would get no gradient from its lookup
    model = transformers.GemmaForCausalLM(config)
    with torch.no_grad():  # HF initialises the norm weights to 0 (the scale 1 + 0): random ones, or (1 + w) read as w would not show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0, 0.5)
    folder = tmp_path / "gemma"
    model.save_pretrained(str(folder))
    model = transformers.GemmaForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    return torch, model, folder


def _gemma_float64(monkeypatch, torch, model) -> None:
    """HF's float32 internals lifted: LLaMA's three (the rotary angles, the softmax, and the RMSNorm as GemmaRMSNorm
    computes it, x.float() * rsqrt(...) * (1 + weight.float())) and the embedding normaliser, a float32 buffer
    (torch.tensor(hidden_size**0.5)) cast up to float64, set to hidden_size**0.5 in float64."""
    from transformers.models.gemma import modeling_gemma as mg

    _float64_internals(monkeypatch, torch, mg, "Gemma")

    def rms_norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    monkeypatch.setattr(mg.GemmaRMSNorm, "forward", rms_norm)
    embed = model.model.embed_tokens
    embed.embed_scale = torch.tensor(model.config.hidden_size ** 0.5, dtype=torch.float64)


def _as_hf(st: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """HF's first hidden state is the scaled embeddings: tracer's x stage (compared as 'embed')."""
    return dict(st, embed=st["x"])


def test_gemma_matches_hugging_face_in_float64(tmp_path, monkeypatch, request):
    torch, model, folder = _hf_gemma(tmp_path)
    # loaded in float64, the normaliser buffer is hidden_size**0.5 in float64 (made after .double(), it would be float32's)
    assert model.model.embed_tokens.embed_scale.dtype == torch.float64
    shipped = _hf_forward(torch, model, IDS)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))  # no flags: the layout from model_type
    assert "layout: gemma" in spec.read_text()
    st = _as_hf(_traced(spec))
    _compare(st, *shipped, RTOL_FLOAT32)  # HF as shipped: within float32's rounding
    _gemma_float64(monkeypatch, torch, model)
    hidden, outputs, logits, attentions = _hf_forward(torch, model, IDS)
    found = _compare(st, hidden, outputs, logits, attentions, rtol=None, atol=TOL)
    assert max(found.values()) <= TOL
    measured(request, "gemma", found)
    # each of Gemma's choices is a real difference, far outside the tolerance
    for old, new in (("norm: rmsnorm_offset", "norm: rmsnorm"), ("activation: geglu", "activation: swiglu"),
                     ("embedding_scale: true", "embedding_scale: false")):
        spec.write_text(spec.read_text().replace(old, new))
        assert np.abs(_traced(spec)["logits"] - logits).max() > 1e-3, old
        spec.write_text(spec.read_text().replace(new, old))


def test_gemma_in_float32_is_within_1e_5_of_hugging_face_as_shipped(tmp_path):
    torch, model, folder = _hf_gemma(tmp_path)
    model = model.float()
    model.model.embed_tokens.embed_scale = torch.tensor(32 ** 0.5, dtype=torch.float32)  # the buffer as GemmaModel makes it
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))
    spec.write_text(spec.read_text().replace("dtype: float64", "dtype: float32"))
    hidden, outputs, logits, attentions = _hf_forward(torch, model, IDS)
    st = _as_hf(_traced(spec))
    found = _compare(st, hidden, outputs, logits, attentions, rtol=1e-5)  # float32 on both sides: within 1e-5 of each stage's largest
    assert found["embed"] == 0.0  # float32(sqrt(32)) times each float32 embedding: the same product
    assert max(found.values()) > 1e-9  # float32 is visible: this is not the float64 comparison


def test_gemma_grad_matches_torch_autograd_through_hugging_face(tmp_path, monkeypatch):
    """tracer grad's next-token loss and weight gradients against autograd through HF's own model (float64 internals):
    the norms' gradients are those of w in (1 + w), the embedding's gathers both the scaled lookup and the tied head."""
    torch, model, folder = _hf_gemma(tmp_path)
    _gemma_float64(monkeypatch, torch, model)
    logits = model(torch.tensor([IDS])).logits[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(IDS[1:]))
    loss.backward()
    hf = dict(model.named_parameters())
    from tracer.grad.run import GradOptions, grad

    spec = load_spec(str(imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))))
    gt = grad(spec, GradOptions(loss="next-token"))
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    pairs = {"embedding": ("model.embed_tokens.weight", False), "final_norm.gamma": ("model.norm.weight", False)}
    for i in range(2):
        p = f"model.layers.{i}."
        pairs |= {f"blocks.{i}.attn.w_{x}": (f"{p}self_attn.{x}_proj.weight", True) for x in "qkvo"}
        pairs |= {f"blocks.{i}.ffn.{w}": (f"{p}mlp.{proj}_proj.weight", True) for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))}
        pairs |= {f"blocks.{i}.norm1.gamma": (p + "input_layernorm.weight", False), f"blocks.{i}.norm2.gamma": (p + "post_attention_layernorm.weight", False)}
    for name, (key, transpose) in pairs.items():
        want = hf[key].grad.numpy()
        want = want.T if transpose else want
        got = gt.weight_grads[name]
        assert got.shape == want.shape, name
        assert np.max(np.abs(got - want)) <= TOL * max(1.0, float(np.max(np.abs(want)))), name
    assert np.max(np.abs(hf["model.layers.0.mlp.up_proj.weight"].grad.numpy())) > 1e-6  # a gradient that could be wrong


def test_a_gemma_head_width_apart_from_c_over_h_is_dims_d(tmp_path):
    """head_dim = 8 with C = 32 and 4 heads of C / H = 8 stays unwritten; head_dim 12 (Gemma 7B's 256 over 3072 / 16,
    in small) is dims.d, q_proj [H*d, C] read as w_q [C, C_q]."""
    write_gemma(tmp_path / "g", head_dim=4)  # tiny_llama: C = 16, 4 heads: C / H = 4
    assert "d: 4" not in imported(tmp_path, tmp_path / "g").read_text()
    write_gemma(tmp_path / "g6", head_dim=6)  # q_proj holds 4 * 4 rows: head_dim 6 does not describe these weights
    assert_refused(run_app("import", str(tmp_path / "g6")), "config.json: head_dim = 6")


def test_gemma_with_its_own_head_width_matches_hugging_face_in_float64(tmp_path, monkeypatch, request):
    torch, model, folder = _hf_gemma(tmp_path, head_dim=12)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))
    text = spec.read_text()
    assert "d: 12" in text and "head_dim, not hidden_size / num_attention_heads" in text
    loaded = load_spec(str(spec))
    assert loaded.weights["blocks.0.attn.w_q"].shape == (32, 48) and loaded.weights["blocks.0.attn.w_k"].shape == (32, 24)
    _gemma_float64(monkeypatch, torch, model)
    found = _compare(_as_hf(_traced(spec)), *_hf_forward(torch, model, IDS), rtol=None, atol=TOL)
    assert max(found.values()) <= TOL


def test_gemma_with_its_own_head_width_grad_matches_torch_autograd(tmp_path, monkeypatch):
    torch, model, folder = _hf_gemma(tmp_path, head_dim=12)
    _gemma_float64(monkeypatch, torch, model)
    logits = model(torch.tensor([IDS])).logits[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(IDS[1:]))
    loss.backward()
    hf = dict(model.named_parameters())
    from tracer.grad.run import GradOptions, grad

    gt = grad(load_spec(str(imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS))))), GradOptions(loss="next-token"))
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    for i in range(2):
        for x in "qkvo":
            want = hf[f"model.layers.{i}.self_attn.{x}_proj.weight"].grad.numpy().T
            got = gt.weight_grads[f"blocks.{i}.attn.w_{x}"]
            assert got.shape == want.shape and np.max(np.abs(got - want)) <= TOL * max(1.0, float(np.max(np.abs(want)))), (i, x)


def test_gemma_2_saved_by_transformers_is_refused_by_name_through_the_gemma_layout(tmp_path):
    torch = pytest.importorskip("torch", reason="saving Hugging Face's models needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="saving Hugging Face's models needs transformers (optional extra)")
    torch.manual_seed(0)
    config = transformers.Gemma2Config(vocab_size=48, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, head_dim=4, max_position_embeddings=32)
    transformers.Gemma2ForCausalLM(config).save_pretrained(str(tmp_path / "g2"))
    assert_refused(run_app("import", str(tmp_path / "g2"), "--layout", "gemma"), "config.json: model_type 'gemma2'",
                   "soft-caps the scores and the logits", "the gemma2 layout reads it")
