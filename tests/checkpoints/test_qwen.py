"""The qwen2 layout and LLaMA's biases: Hugging Face Qwen2 and LLaMA with attention_bias / mlp_bias, imported and traced.

Without torch: the config and tensor checks (a bias the config switches on but the file lacks, or one the file
holds but the config switches off, is refused by name; Qwen2's per-layer sliding window when it would differ
between layers; Qwen3 by name).  With torch and transformers: tiny random Qwen2ForCausalLM and LlamaForCausalLM
(with biases) saved by transformers, imported with no flags and traced: every layer's output, the final norm,
the logits and the attention weights agree with HF's forward to 1e-10 once HF's float32 internals are lifted
(test_llama.py's _float64_internals), and within float32's rounding as shipped; `tracer grad`'s weight
gradients agree with torch autograd through HF's own model to 1e-10.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, run_app
from helpers.hf_parity import measured
from test_llama import IDS, RTOL_FLOAT32, _compare, _float64_internals, _hf_forward, _traced, imported, write_llama

from tracer.spec import load_spec

TOL = 1e-10


# -- without torch -----------------------------------------------------------------------

def _with_biases(folder: Path, attention: bool = True, mlp: bool = False, skip: str = "", **config) -> None:
    """tiny_llama's checkpoint with bias tensors added (``skip``: one key left out)."""
    from safetensors.numpy import load_file, save_file

    write_llama(folder, **config)
    t = load_file(str(folder / "model.safetensors"))
    rng = np.random.default_rng(1)
    for key in list(t):
        if (attention and ".self_attn." in key) or (mlp and ".mlp." in key):
            bias = key.replace(".weight", ".bias")
            if bias != skip:
                t[bias] = rng.standard_normal(t[key].shape[0])
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})


def test_llama_biases_are_read_when_the_config_switches_them_on(tmp_path):
    _with_biases(tmp_path / "ckpt", attention=True, mlp=True, attention_bias=True, mlp_bias=True)
    spec = load_spec(str(imported(tmp_path, tmp_path / "ckpt")))
    for name, key in (("blocks.1.attn.b_o", "model.layers.1.self_attn.o_proj.bias"), ("blocks.0.ffn.b1", "model.layers.0.mlp.gate_proj.bias"),
                      ("blocks.0.ffn.b3", "model.layers.0.mlp.up_proj.bias")):
        assert spec.weights[name].source == "file" and spec.weights[name].value.key == key
    write_llama(tmp_path / "plain")  # no biases, none switched on: zeros, as before
    spec = load_spec(str(imported(tmp_path, tmp_path / "plain")))
    assert spec.weights["blocks.0.attn.b_q"].source == "zeros" and spec.weights["blocks.0.ffn.b2"].source == "zeros"


@pytest.mark.parametrize("config, skip, fragment", [
    ({"attention_bias": True}, "model.layers.1.self_attn.v_proj.bias",
     "attention_bias = true, but the checkpoint holds no 'model.layers.1.self_attn.v_proj.bias'"),
    ({"attention_bias": False}, "",
     "attention_bias = boolean false, but the checkpoint holds 'model.layers.0.self_attn.q_proj.bias', which Hugging Face would not add"),
    ({}, "", "attention_bias = boolean false, but the checkpoint holds 'model.layers.0.self_attn.q_proj.bias'"),
])
def test_biases_and_config_that_disagree_are_refused(tmp_path, config, skip, fragment):
    _with_biases(tmp_path / "ckpt", skip=skip, **config)
    if not config:  # no attention_bias at all: Hugging Face's default is false
        cfg = json.loads((tmp_path / "ckpt" / "config.json").read_text())
        del cfg["attention_bias"]
        (tmp_path / "ckpt" / "config.json").write_text(json.dumps(cfg))
    assert_refused(run_app("import", str(tmp_path / "ckpt")), "config.json: " + fragment)


def test_mlp_bias_switched_on_without_its_tensors_is_refused(tmp_path):
    write_llama(tmp_path / "ckpt", mlp_bias=True)
    assert_refused(run_app("import", str(tmp_path / "ckpt")), "config.json: mlp_bias = true, but the checkpoint holds no 'model.layers.0.mlp.gate_proj.bias'")


def _qwen2(folder: Path, **config) -> None:
    """tiny_llama's tensors with q/k/v biases, under Qwen2's config."""
    _with_biases(folder, attention=True, model_type="qwen2", architectures=["Qwen2ForCausalLM"], attention_bias=None, mlp_bias=None, **config)
    from safetensors.numpy import load_file, save_file

    t = load_file(str(folder / "model.safetensors"))
    t = {k: v for k, v in t.items() if not k.endswith("o_proj.bias")}  # Qwen2's o_proj has no bias
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})


def test_qwen2_reads_its_qkv_biases_and_its_window(tmp_path):
    _qwen2(tmp_path / "q", use_sliding_window=False, sliding_window=4, max_window_layers=0)
    text = imported(tmp_path, tmp_path / "q").read_text()
    assert "layout: qwen2" in text and "mask: causal" in text  # use_sliding_window false: no window
    spec = load_spec(str(tmp_path / "spec.yaml"))
    assert spec.weights["blocks.1.attn.b_k"].value.key == "model.layers.1.self_attn.k_proj.bias"
    assert spec.weights["blocks.0.attn.b_o"].source == "zeros"
    _qwen2(tmp_path / "w", use_sliding_window=True, sliding_window=3, max_window_layers=0)
    spec = load_spec(str(imported(tmp_path, tmp_path / "w")))
    assert (spec.block.mask, spec.block.window) == ("causal", 3)
    _qwen2(tmp_path / "late", use_sliding_window=True, sliding_window=3)  # max_window_layers 28 > 2 layers: no layer slides
    assert load_spec(str(imported(tmp_path, tmp_path / "late"))).block.window is None


def test_qwen2_windows_on_some_layers_become_sliding_layers(tmp_path):
    _qwen2(tmp_path / "q", use_sliding_window=True, sliding_window=3, max_window_layers=1)  # layer 1 of 2 slides
    spec = load_spec(str(imported(tmp_path, tmp_path / "q")))
    assert (spec.block.window, spec.block.sliding_layers) == (3, (1,))
    _qwen2(tmp_path / "lt", use_sliding_window=True, sliding_window=3, layer_types=["sliding_attention", "full_attention"])
    assert load_spec(str(imported(tmp_path, tmp_path / "lt"))).block.sliding_layers == (0,)  # layer_types over max_window_layers


def test_qwen2_bad_layer_types_are_refused(tmp_path):
    _qwen2(tmp_path / "t", layer_types=["full_attention", "sliding"])
    assert_refused(run_app("import", str(tmp_path / "t")), "config.json: layer_types: expected a list of 2 entries")


def test_qwen2_through_the_llama_layout_and_qwen3_are_refused_by_name(tmp_path):
    _qwen2(tmp_path / "q")
    assert_refused(run_app("import", str(tmp_path / "q"), "--layout", "llama"), "config.json: model_type 'qwen2'", "the llama layout would trace it wrong")
    _with_biases(tmp_path / "q3", attention=False, model_type="qwen3")
    r = run_app("import", str(tmp_path / "q3"))  # the qwen3 layout reads Qwen3: LLaMA's tensors without q_norm are not Qwen3's
    assert_refused(r, "holds no Qwen3 q_norm (model.layers.0.self_attn.q_norm.weight)")
    assert_refused(run_app("import", str(tmp_path / "q3"), "--layout", "llama"), "model_type 'qwen3'", "q_norm, k_norm")


# -- against Hugging Face (torch and transformers) ------------------------------------------

def _hf(tmp_path: Path, kind: str, **extra):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face needs transformers (optional extra)")
    torch.manual_seed(0)
    config_class, model_class = {"qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
                                 "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM)}[kind]
    config = config_class(vocab_size=96, hidden_size=32, intermediate_size=56, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, initializer_range=0.3,
                          rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, **extra)
    model = model_class(config).double()
    with torch.no_grad():  # HF initialises biases to zero: random ones, or a bias read wrong would not show
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.5)
    folder = tmp_path / kind
    model.save_pretrained(str(folder))
    model = model_class.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    return torch, model, folder


def _module(kind: str):
    if kind == "qwen2":
        from transformers.models.qwen2 import modeling_qwen2 as m
        return m, "Qwen2"
    from transformers.models.llama import modeling_llama as m
    return m, "Llama"


CASES = {"qwen2": ("qwen2", {}), "qwen2-window": ("qwen2", {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 0}),
         "qwen2-window-layer-1": ("qwen2", {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 1}),
         "llama-biases": ("llama", {"attention_bias": True, "mlp_bias": True})}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_hugging_face_in_float64(tmp_path, monkeypatch, case, request):
    kind, extra = CASES[case]
    torch, model, folder = _hf(tmp_path, kind, **extra)
    ids = IDS + [7, 50]  # T = 10 > the window of 3
    shipped = _hf_forward(torch, model, ids)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, ids)))  # no flags: the layout from model_type
    text = spec.read_text()
    assert f"layout: {kind}" in text and ("window: 3" in text) == case.startswith("qwen2-window")
    assert ("sliding_layers: [1]" in text) == (case == "qwen2-window-layer-1")  # the window on layer 1 only
    st = _traced(spec)
    _compare(st, *shipped, RTOL_FLOAT32)  # HF as shipped: within float32's rounding
    module, prefix = _module(kind)
    _float64_internals(monkeypatch, torch, module, prefix)
    hidden, outputs, logits, attentions = _hf_forward(torch, model, ids)
    found = _compare(st, hidden, outputs, logits, attentions, rtol=None, atol=TOL)
    assert max(found.values()) <= TOL
    measured(request, case, found)
    if case.startswith("qwen2-window"):  # HF applies the window: the plain causal mask differs from position 3 on
        spec.write_text(re.sub(r"mask: \{[^}]*\}", "mask: causal", text))
        assert np.abs(_traced(spec)["logits"][0, 3:] - logits[0, 3:]).max(axis=-1).min() > 1e-3


@pytest.mark.parametrize("case", ["qwen2", "llama-biases"])
def test_grad_matches_torch_autograd_through_hugging_face(tmp_path, monkeypatch, case):
    """tracer grad's next-token loss and weight gradients against autograd through HF's own model (float64 internals)."""
    kind, extra = CASES[case]
    torch, model, folder = _hf(tmp_path, kind, **extra)
    module, prefix = _module(kind)
    _float64_internals(monkeypatch, torch, module, prefix)
    ids = IDS
    logits = model(torch.tensor([ids])).logits[0]  # HF's own loss upcasts to float32: the same mean cross-entropy in float64
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]))
    loss.backward()
    hf = dict(model.named_parameters())
    from tracer.grad.run import GradOptions, grad

    spec = load_spec(str(imported(tmp_path, folder, "--tokens", ",".join(map(str, ids)))))
    gt = grad(spec, GradOptions(loss="next-token"))
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    pairs = {"embedding": ("model.embed_tokens.weight", False), "head": ("lm_head.weight", True), "final_norm.gamma": ("model.norm.weight", False)}
    for i in range(2):
        p = f"model.layers.{i}."
        pairs |= {f"blocks.{i}.attn.w_{x}": (f"{p}self_attn.{x}_proj.weight", True) for x in "qkvo"}
        pairs |= {f"blocks.{i}.attn.b_{x}": (f"{p}self_attn.{x}_proj.bias", False) for x in "qkv"}
        pairs |= {f"blocks.{i}.ffn.{w}": (f"{p}mlp.{proj}_proj.weight", True) for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))}
        pairs |= {f"blocks.{i}.norm1.gamma": (p + "input_layernorm.weight", False), f"blocks.{i}.norm2.gamma": (p + "post_attention_layernorm.weight", False)}
        if kind == "llama":
            pairs[f"blocks.{i}.attn.b_o"] = (f"{p}self_attn.o_proj.bias", False)
            pairs |= {f"blocks.{i}.ffn.{b}": (f"{p}mlp.{proj}_proj.bias", False) for b, proj in (("b1", "gate"), ("b3", "up"), ("b2", "down"))}
    for name, (key, transpose) in pairs.items():
        want = hf[key].grad.numpy()
        want = want.T if transpose else want
        got = gt.weight_grads[name]
        assert got.shape == want.shape, name
        assert np.max(np.abs(got - want)) <= TOL * max(1.0, float(np.max(np.abs(want)))), name
    assert np.max(np.abs(hf["model.layers.0.self_attn.q_proj.bias"].grad.numpy())) > 1e-6  # a gradient that could be wrong


# -- rope scaling: linear and llama3 -------------------------------------------------------

RTOL_SCALED_FLOAT32 = 1e-5
ROPES = {"linear": {"rope_type": "linear", "factor": 4.0},
         # original_max_position_embeddings 100 puts the 8 speeds of d = 16 (wavelengths 6 to 2650) in all three llama3 regimes
         "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 100}}


def _scaled_rotary(monkeypatch, torch, module, prefix: str, rope: dict) -> None:
    """HF's rotary embedding with its inverse frequencies computed in float64, scaled as modeling_rope_utils says."""
    import math

    def rotary(self, x, position_ids):
        d, theta = 2 * self.inv_freq.shape[0], self.config.rope_parameters["rope_theta"]
        inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        factor = rope["factor"]
        if rope["rope_type"] == "linear":
            inv = inv / factor
        else:
            low, high, old = rope["low_freq_factor"], rope["high_freq_factor"], rope["original_max_position_embeddings"]
            wavelen = 2 * math.pi / inv
            slow = torch.where(wavelen > old / low, inv / factor, inv)
            smooth = (old / wavelen - low) / (high - low)
            medium = ~(wavelen < old / high) * ~(wavelen > old / low)
            assert bool(medium.any()) and bool((wavelen > old / low).any()) and bool((wavelen < old / high).any())
            inv = torch.where(medium, (1 - smooth) * slow / factor + smooth * slow, slow)
        emb = torch.cat([position_ids[..., None].double() * inv] * 2, dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    monkeypatch.setattr(getattr(module, f"{prefix}RotaryEmbedding"), "forward", rotary)


@pytest.mark.parametrize("kind", list(ROPES))
def test_rope_scaling_matches_hugging_face_in_float64(tmp_path, monkeypatch, kind, request):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face needs transformers (optional extra)")
    from transformers.models.llama import modeling_llama as ml

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=56, num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=1, max_position_embeddings=64, rms_norm_eps=1e-5, initializer_range=0.3,
                                      rope_parameters={**ROPES[kind], "rope_theta": 1000.0})
    model = transformers.LlamaForCausalLM(config).double()
    folder = tmp_path / kind
    model.save_pretrained(str(folder))
    model = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    ids = IDS + [7, 50, 11, 2]
    shipped = _hf_forward(torch, model, ids)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, ids)))
    text = spec.read_text()
    line = next(line for line in text.splitlines() if "rope_scaling:" in line)
    assert f"type: {kind}" in line and "# rope_parameters: rope type" in line
    st = _traced(spec)
    # HF as shipped scales the speeds in float32 too (llama3: several more roundings of each speed before the angle):
    # within 1e-5 of the largest value, still a hundred times below a real mistake; the exact match is the next one
    _compare(st, *shipped, RTOL_SCALED_FLOAT32)
    _float64_internals(monkeypatch, torch, ml, "Llama")
    _scaled_rotary(monkeypatch, torch, ml, "Llama", ROPES[kind])
    found = _compare(st, *_hf_forward(torch, model, ids), rtol=None, atol=TOL)
    assert max(found.values()) <= TOL
    measured(request, f"llama (rope scaling {kind})", found)
    # without the scaling the same weights are far off: the scaling is what the match shows
    spec.write_text("\n".join(line for line in text.splitlines() if "rope_scaling:" not in line) + "\n")
    assert _largest_logit_gap(_traced(spec), shipped[2]) > 1e-3


def _largest_logit_gap(st, logits) -> float:
    return float(np.max(np.abs(st["logits"] - logits)))


@pytest.mark.parametrize("rope, fragment", [
    ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4}}, "config.json: rope_parameters.factor: expected a positive number, received nothing"),
    ({"rope_scaling": {"type": "linear", "factor": -2}}, "config.json: rope_scaling.factor: expected a positive number, received -2"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5, "rope_theta": 1e4}},
     "config.json: rope_parameters.partial_rotary_factor: rope type 'linear' with partial_rotary_factor is not modelled"),
    ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
                          "original_max_position_embeddings": 64, "rope_theta": 1e4}},
     "config.json: rope_parameters: high_freq_factor = 1.0 must be above low_freq_factor = 4.0"),
])
def test_a_rope_scaling_tracer_cannot_read_is_refused(tmp_path, rope, fragment):
    write_llama(tmp_path / "ckpt", rope_theta=None, **rope)
    assert_refused(run_app("import", str(tmp_path / "ckpt")), fragment)


def test_rope_scaling_in_a_spec_is_checked_and_reaches_the_steps(tmp_path):
    from conftest import write_spec

    base = "dims: {B: 1, T: 6, C: 16, H: 2, F: 24}\nseed: 0\ninput: {x: random}\nblock: {positions: rotary, rope_scaling: %s}\n"
    good = write_spec(tmp_path, base % "{type: linear, factor: 4}")
    assert run_app("run", str(good), "--verify").returncode == 0
    plain = json.loads(run_app("run", str(write_spec(tmp_path, base % "{type: linear, factor: 1}", "p.yaml")), "--json").stdout)
    scaled = json.loads(run_app("run", str(good), "--json").stdout)
    assert plain["stages"][-1]["values"] != scaled["stages"][-1]["values"]
    llama3 = write_spec(tmp_path, base % "{type: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8}", "l3.yaml")
    assert run_app("run", str(llama3), "--verify").returncode == 0  # the kernel against the scalar reference
    assert run_app("grad", str(llama3), "--verify").returncode == 0  # the backward against central differences
    for bad, fragment in (("{type: yarn, factor: 2}", "rope_scaling.type"), ("{type: linear}", "rope_scaling.factor"),
                          ("{type: linear, factor: 2, low_freq_factor: 1}", "low_freq_factor is a llama3 setting")):
        r = run_app("run", str(write_spec(tmp_path, base % bad, "b.yaml")))
        assert_refused(r, fragment)
    r = run_app("run", str(write_spec(tmp_path, base.replace("positions: rotary", "positions: none") % "{type: linear, factor: 2}", "n.yaml")))
    assert_refused(r, "rope_scaling is for rotary positions")
