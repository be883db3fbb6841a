"""The llama layout: Hugging Face LLaMA / Mistral checkpoints imported and traced.

Without torch: checkpoints written with NumPy and safetensors under Hugging Face's key names, the
spec `tracer import` writes, the config checks, and layer 0's q, k, RMSNorm and SwiGLU against
Hugging Face's formulas written out here in NumPy (rotate_half as ``cat(-x2, x1)``).

With torch and transformers: a random LlamaForCausalLM (2 layers, grouped-query attention, untied
head, float64) is saved, imported and traced, and every layer's output, the final norm, the logits
and the attention weights are compared with its forward.  Hugging Face computes RMSNorm, the rotary
angles and the softmax in float32 even in a float64 model, so that comparison allows what float32
rounding leaves (see RTOL_FLOAT32); the same model with those three computed in float64 agrees with
tracer to 1e-12, which shows that float32 is the only difference.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, example_module, run_app, run_cli
from helpers import oracle
from helpers.hf_parity import measured

from tracer.spec import load_spec

# -- a LLaMA checkpoint from NumPy ------------------------------------------------------

_make = example_module("checkpoints/tiny_llama.py").make


def write_llama(folder: Path, **kwargs) -> dict[str, np.ndarray]:
    """examples/checkpoints/tiny_llama.py's random LLaMA; keyword arguments the example does not take go to config.json."""
    own = ("layers", "C", "H", "H_kv", "F", "V", "tied", "prefix", "seed")
    config = {k: v for k, v in kwargs.items() if k not in own}
    return _make(str(folder), config=config, **{k: v for k, v in kwargs.items() if k in own})


def imported(tmp_path: Path, ckpt: Path, *args: str) -> Path:
    out = tmp_path / "spec.yaml"
    r = run_app("import", str(ckpt), "-o", str(out), *args)
    assert r.returncode == 0, r.stderr
    return out


def test_import_writes_the_llama_settings(tmp_path):
    write_llama(tmp_path / "ckpt", rms_norm_eps=1e-5, rope_theta=500000.0)
    spec = load_spec(str(imported(tmp_path, tmp_path / "ckpt", "--tokens", "1,5,9,2")))  # layout from model_type
    b = spec.block
    assert (b.norm, b.activation, b.positions, b.rotary_pairing, b.position_base, b.eps, b.head, b.final_norm) == (
        "rmsnorm", "swiglu", "rotary", "half", 500000.0, 1e-5, "separate", True)
    assert spec.dims.as_dict() == {"B": 1, "T": 4, "C": 16, "H": 4, "H_kv": 2, "F": 24, "V": 40, "d": 4, "C_kv": 8}
    assert spec.weights["blocks.1.attn.w_k"].shape == (16, 8) and spec.weights["blocks.1.attn.w_k"].source == "file"
    assert spec.weights["blocks.0.attn.b_q"].source == "zeros"  # LLaMA has no biases
    assert spec.weights["head"].source == "file"


def test_layer_0_is_hugging_faces_formulas(tmp_path):
    t = write_llama(tmp_path / "ckpt", layers=1, rope_theta=100.0)
    ids = [3, 1, 4, 1, 5, 9]
    trace_json = run_app("run", str(imported(tmp_path, tmp_path / "ckpt", "--tokens", ",".join(map(str, ids)))), "--json", "--all")
    assert trace_json.returncode == 0, trace_json.stderr
    st = {s["name"]: np.array(s["values"]) for s in json.loads(trace_json.stdout)["stages"]}
    p = "model.layers.0."
    x = t["model.embed_tokens.weight"][ids][None]  # [1,T,C]
    # the oracle's formulas with Hugging Face's weights: nn.Linear keeps W^T; LLaMA has no biases; rotary pairs (i, i + d/2)
    n1 = oracle.rms_norm(x, t[p + "input_layernorm.weight"], 1e-6)
    w = {f"w_{n}": t[f"{p}self_attn.{n}_proj.weight"].T for n in "qkvo"}
    w.update({"b_q": np.zeros(16), "b_k": np.zeros(8), "b_v": np.zeros(8), "b_o": np.zeros(16)})
    a = oracle.attention(n1, n1, w, 4, "causal", rope_base=100.0, H_kv=2, pairing="half")
    q, k, v, weights, attn = a["q"], a["k"], a["v"], a["weights"], a["output"]
    r = x + attn
    n2 = oracle.rms_norm(r, t[p + "post_attention_layernorm.weight"], 1e-6)
    mlp = {"w1": t[p + "mlp.gate_proj.weight"].T, "w3": t[p + "mlp.up_proj.weight"].T, "w2": t[p + "mlp.down_proj.weight"].T,
           "b1": np.zeros(24), "b3": np.zeros(24), "b2": np.zeros(16)}
    y = r + oracle.ffn(n2, mlp, "swiglu")  # down(silu(gate) * up)
    logits = oracle.rms_norm(y, t["model.norm.weight"], 1e-6) @ t["lm_head.weight"].T
    for name, want in (("norm1", n1), ("attn.q", q), ("attn.k", k), ("attn.v", v), ("attn.weights", weights),
                       ("attention", attn), ("norm2", n2), ("output", y), ("logits", logits)):
        assert st[name].shape == want.shape, name
        assert np.max(np.abs(st[name] - want)) <= 1e-12, name


def test_tied_bare_and_mistral_checkpoints(tmp_path):
    write_llama(tmp_path / "tied", tied=True)
    spec = load_spec(str(imported(tmp_path, tmp_path / "tied")))
    assert spec.block.head == "tied" and "head" not in spec.weights
    bare = write_llama(tmp_path / "bare", prefix="")  # LlamaModel.save_pretrained: no 'model.', no lm_head
    assert "embed_tokens.weight" in bare
    spec = load_spec(str(imported(tmp_path, tmp_path / "bare", "--tokens", "1,2")))
    assert spec.block.head == "none" and spec.weights["final_norm.gamma"].source == "file"
    write_llama(tmp_path / "mistral", model_type="mistral", sliding_window=4096, H_kv=1)
    text = imported(tmp_path, tmp_path / "mistral").read_text()
    assert "layout: llama" in text and "mask: {causal: true, window: 4096}" in text and "# sliding_window" in text
    spec = load_spec(str(tmp_path / "spec.yaml"))
    assert spec.dims.H_kv == 1 and (spec.block.mask, spec.block.window) == ("causal", 4096)
    r = run_cli("run", str(tmp_path / "spec.yaml"), "--verify", "--all")
    assert r.returncode == 0, r.stderr
    assert "[B,H_kv,T,d] = [1,1,8,4]" in r.stdout


def test_mistral_sliding_window_is_the_spec_mask(tmp_path):
    """sliding_window W becomes mask: {causal: true, window: W}, whatever T is (W >= T traces as causal); a llama
    config's sliding_window is not Mistral's (LlamaForCausalLM reads none) and a bad one is refused by name."""
    write_llama(tmp_path / "m", model_type="mistral", sliding_window=3)
    spec = load_spec(str(imported(tmp_path, tmp_path / "m", "--tokens", "1,2,3,4,5,6")))
    assert (spec.block.mask, spec.block.window) == ("causal", 3)
    st = {s["name"]: np.array(s["values"]) for s in json.loads(run_app("run", str(tmp_path / "spec.yaml"), "--json", "--all").stdout)["stages"]}
    assert np.all(st["blocks.0.attn.weights"][0, :, 5, :3] == 0.0)  # position 5 reads keys 3, 4, 5
    assert run_app("run", str(tmp_path / "spec.yaml"), "--verify").returncode == 0
    write_llama(tmp_path / "l", model_type="llama", sliding_window=3)
    assert load_spec(str(imported(tmp_path, tmp_path / "l"))).block.window is None
    write_llama(tmp_path / "off", model_type="mistral", sliding_window=3, use_sliding_window=False)  # Qwen2's switch
    assert load_spec(str(imported(tmp_path, tmp_path / "off"))).block.window is None
    for bad in (0, "4", 2.5, True):
        write_llama(tmp_path / "bad", model_type="mistral", sliding_window=bad)
        assert_refused(run_app("import", str(tmp_path / "bad"), "-o", str(tmp_path / "bad.yaml")), "config.json", "sliding_window",
                       "expected a whole number")


def test_a_later_layer_keeps_its_rotary_positions(tmp_path):
    write_llama(tmp_path / "ckpt", layers=3)
    spec = load_spec(str(imported(tmp_path, tmp_path / "ckpt", "--layers", "1-2")))
    assert spec.block.positions == "rotary" and spec.block.rotary_pairing == "half" and spec.input.kind == "x"
    assert spec.weights["blocks.0.attn.w_q"].value.key == "model.layers.1.self_attn.q_proj.weight"


@pytest.mark.parametrize("config, fragment", [
    ({"attention_bias": True}, "attention_bias = true, but the checkpoint holds no 'model.layers.0.self_attn.q_proj.bias'"),
    ({"mlp_bias": True}, "mlp_bias = true, but the checkpoint holds no 'model.layers.0.mlp.gate_proj.bias'"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"head_dim": 8}, "head_dim = 8, but the checkpoint's tensors have d = 4 (model.layers.0.self_attn.q_proj.weight is [16,16])"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "rope_scaling.low_freq_factor: expected a positive number, received nothing"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "rope_parameters: rope type 'yarn'"),
    ({"num_key_value_heads": 3}, "num_key_value_heads = 3 must divide num_attention_heads = 4"),
])
def test_what_tracer_cannot_trace_is_refused(tmp_path, config, fragment):
    write_llama(tmp_path / "ckpt", **config)
    r = run_app("import", str(tmp_path / "ckpt"))
    assert_refused(r, "config.json: " + fragment)


def test_rope_theta_from_either_config_style(tmp_path):
    write_llama(tmp_path / "new", rope_theta=None, rope_parameters={"rope_type": "default", "rope_theta": 123.0})
    assert load_spec(str(imported(tmp_path, tmp_path / "new"))).block.position_base == 123.0
    write_llama(tmp_path / "none", rope_theta=None)
    text = imported(tmp_path, tmp_path / "none").read_text()
    assert load_spec(str(tmp_path / "spec.yaml")).block.position_base == 10000.0 and "LLaMA's default rope_theta" in text


def test_a_llama_checkpoint_needs_its_config(tmp_path):
    write_llama(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "config.json").unlink()
    assert_refused(run_app("import", str(tmp_path / "ckpt"), "--layout", "llama"), "needs its config.json")
    # nothing to infer the layout from, and the one layout that maps its tensors refuses it: no suggestion, its reason
    r = run_app("import", str(tmp_path / "ckpt"))
    assert_refused(r, "the checkpoint has no config.json; the llama layout maps its tensors, and refuses it: ", "needs its config.json")
    assert "--layout" not in r.stderr


def test_a_wrong_shaped_tensor_names_key_and_shapes(tmp_path):
    write_llama(tmp_path / "ckpt")
    spec = imported(tmp_path, tmp_path / "ckpt")
    cfg = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    cfg["num_key_value_heads"] = 4  # the file's k_proj holds 2 heads
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(cfg))
    text = spec.read_text().replace("  H_kv: 2", "  H_kv: 4")
    spec.write_text(text)
    r = run_app("run", str(spec))
    assert_refused(r, "model.layers.0.self_attn.k_proj.weight", "expected [16,16], received [8,16]")


# -- against Hugging Face's own forward (torch and transformers) --------------------------

# float32's unit roundoff is 2^-24 = 6e-8.  HF rounds the RMSNorm output, cos and sin (of angles
# computed in float32) and the attention weights to float32 before going on in float64, so each
# stage carries a relative error of a few 6e-8, adding up over the layers: 1e-6 of the largest
# value of a stage (about 16 float32 roundings) holds it with room, while a real mistake (the other
# pairing, a wrong head, eps or theta) is 1e-3 or more, as the test checks too.
RTOL_FLOAT32 = 1e-6


def _hf_llama(tmp_path: Path, tied: bool = False, model_type: str = "llama"):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face's LLaMA needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face's LLaMA needs transformers (optional extra)")
    torch.manual_seed(0)
    kind = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
            "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM)}[model_type]
    config = kind[0](vocab_size=96, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=tied,
                     rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, initializer_range=0.2)
    model = kind[1](config).double().eval()
    folder = tmp_path / model_type
    model.save_pretrained(str(folder))
    model = kind[1].from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    return torch, model, folder


def _hf_forward(torch, model, ids):
    """HF's hidden states, each decoder layer's output (a hook: HF's last hidden state is after the final norm),
    the logits and the attention weights."""
    outputs = []
    hooks = [layer.register_forward_hook(lambda mod, args, out: outputs.append((out[0] if isinstance(out, tuple) else out).numpy()))
             for layer in model.model.layers]
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    return ([h.numpy() for h in out.hidden_states], outputs, out.logits.numpy(), [a.numpy() for a in out.attentions])


def _traced(spec: Path) -> dict[str, np.ndarray]:
    r = run_cli("run", str(spec), "--json", "--all")
    assert r.returncode == 0, r.stderr
    return {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}


def _largest(got: np.ndarray, want: np.ndarray) -> float:
    assert got.shape == want.shape
    return float(np.max(np.abs(got - want)))


def _compare(st, hidden, outputs, logits, attentions, rtol: float | None, atol: float | None = None) -> dict[str, float]:
    """Largest |tracer - HF| per compared stage, each within atol, or rtol times the stage's largest value.

    HF's hidden_states are the embeddings, then each layer's output but the last, then the final norm
    (its last hidden state is taken after model.norm); the last layer's own output comes from the hook.
    """
    L = len(outputs)
    pairs = {"embed": hidden[0], "final_norm": hidden[L], "logits": logits}
    for i in range(L):
        pairs[f"blocks.{i}.output"] = hidden[i + 1] if i + 1 < L else outputs[i]
        pairs[f"blocks.{i}.attn.weights"] = attentions[i]
    found = {}
    for name, want in pairs.items():
        found[name] = _largest(st[name], want)
        tol = atol if atol is not None else rtol * float(np.max(np.abs(want)))  # type: ignore[operator]
        assert found[name] <= tol, (name, found[name], tol)
    return found


IDS = [5, 17, 42, 88, 3, 61, 0, 29]


def test_llama_matches_hugging_face(tmp_path):
    torch, model, folder = _hf_llama(tmp_path)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))
    assert "H_kv: 2" in spec.read_text() and "head: separate" in spec.read_text()
    st = _traced(spec)
    assert st["blocks.0.attn.k"].shape == (1, 2, 8, 16) and st["blocks.0.attn.q"].shape == (1, 4, 8, 16)
    hidden, outputs, logits, attentions = _hf_forward(torch, model, IDS)
    assert len(hidden) == 3 and len(outputs) == 2
    found = _compare(st, hidden, outputs, logits, attentions, RTOL_FLOAT32)
    assert found["embed"] == 0.0  # a row lookup: exact
    assert max(found.values()) > 1e-12  # float32 is visible: this is not the float64 comparison below
    # the other pairing is a real difference, far outside the tolerance
    spec.write_text(spec.read_text().replace("rotary_pairing: half", "rotary_pairing: interleaved"))
    wrong = _traced(spec)
    assert _largest(wrong["blocks.0.attn.weights"], attentions[0]) > 1e3 * RTOL_FLOAT32


def test_llama_with_float64_internals_matches_to_1e_12(tmp_path, monkeypatch, request):
    """Hugging Face's three float32 steps replaced by the same formulas in float64: tracer agrees to 1e-12."""
    torch, model, folder = _hf_llama(tmp_path)
    from transformers.models.llama import modeling_llama as ml

    _float64_internals(monkeypatch, torch, ml, "Llama")
    st = _traced(imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS))))
    measured(request, "llama", _compare(st, *_hf_forward(torch, model, IDS), rtol=None, atol=1e-12))


@pytest.mark.parametrize("tied, model_type", [(True, "llama"), (False, "mistral")])
def test_tied_llama_and_mistral_match_hugging_face(tmp_path, tied, model_type):
    torch, model, folder = _hf_llama(tmp_path, tied, model_type)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))  # layout from config.json's model_type
    assert f"head: {'tied' if tied else 'separate'}" in spec.read_text()
    _compare(_traced(spec), *_hf_forward(torch, model, IDS), RTOL_FLOAT32)


def test_a_later_layer_matches_hugging_face_from_its_hidden_state(tmp_path):
    torch, model, folder = _hf_llama(tmp_path)
    hidden, outputs, logits, attentions = _hf_forward(torch, model, IDS)
    spec = imported(tmp_path, folder, "--layers", "1-1", "--length", str(len(IDS)))
    text = spec.read_text().replace("x: random", "x: " + json.dumps(hidden[1].tolist()))
    spec.write_text(text)  # the hidden state entering layer 1, as HF computed it
    st = _traced(spec)  # one layer: its stages are named without blocks.0.
    assert _largest(st["output"], outputs[1]) <= RTOL_FLOAT32 * float(np.max(np.abs(outputs[1])))
    assert _largest(st["attn.weights"], attentions[1]) <= RTOL_FLOAT32
    assert _largest(st["final_norm"], hidden[2]) <= RTOL_FLOAT32 * float(np.max(np.abs(hidden[2])))


def _float64_internals(monkeypatch, torch, module, prefix: str) -> None:
    """HF's three float32 steps (RMSNorm, the rotary angles, the softmax) as the same formulas in float64."""

    def rms_norm(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    def rotary(self, x, position_ids):
        d, theta = 2 * self.inv_freq.shape[0], self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        emb = torch.cat([position_ids[..., None].double() * inv_freq] * 2, dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def eager(mod, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):  # the mask HF made, added as HF does
        k, v = module.repeat_kv(key, mod.num_key_value_groups), module.repeat_kv(value, mod.num_key_value_groups)
        w = torch.matmul(query, k.transpose(2, 3)) * scaling
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float64)
        return torch.matmul(w, v).transpose(1, 2).contiguous(), w

    monkeypatch.setattr(getattr(module, f"{prefix}RMSNorm"), "forward", rms_norm)
    monkeypatch.setattr(getattr(module, f"{prefix}RotaryEmbedding"), "forward", rotary)
    monkeypatch.setattr(module, "eager_attention_forward", eager)


MISTRAL_IDS = [5, 17, 42, 88, 3, 61, 0, 29, 7, 50]  # T = 10 > W = 4


def test_mistral_sliding_window_matches_hugging_face_at_every_position(tmp_path, monkeypatch, request):
    """A tiny random MistralForCausalLM with sliding_window = 4 < T = 10 (eager attention, float64): tracer's import
    traces it to 1e-12 at every position, its logits included; HF does apply the window (without it positions 4 on
    differ), and the same spec with a plain causal mask is off from position 4 on."""
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face's Mistral needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face's Mistral needs transformers (optional extra)")
    from transformers.models.mistral import modeling_mistral as mm

    torch.manual_seed(0)
    config = transformers.MistralConfig(vocab_size=96, hidden_size=16, intermediate_size=40, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                        rms_norm_eps=1e-5, sliding_window=4, initializer_range=0.3,
                                        rope_parameters={"rope_type": "default", "rope_theta": 1000.0})
    model = transformers.MistralForCausalLM(config).double().eval()
    folder = tmp_path / "mistral"
    model.save_pretrained(str(folder))
    model = transformers.MistralForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    assert model.config._attn_implementation == "eager" and model.config.sliding_window == 4
    _float64_internals(monkeypatch, torch, mm, "Mistral")
    hidden, outputs, logits, attentions = _hf_forward(torch, model, MISTRAL_IDS)
    for a in attentions:  # HF's weights: query t reads keys t - 3..t only
        for t in range(10):
            assert np.all(a[0, :, t, : max(0, t - 3)] == 0.0) and np.all(a[0, :, t, max(0, t - 3): t + 1] > 0.0)
    model.config.sliding_window = None  # the same weights without the window: HF then differs from position 4 on
    _, _, plain_logits, _ = _hf_forward(torch, model, MISTRAL_IDS)
    model.config.sliding_window = 4
    assert np.array_equal(plain_logits[0, :4], logits[0, :4]) and np.abs(plain_logits[0, 4:] - logits[0, 4:]).max(axis=-1).min() > 1e-3

    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, MISTRAL_IDS)))
    assert "mask: {causal: true, window: 4}" in spec.read_text()
    st = _traced(spec)
    found = _compare(st, hidden, outputs, logits, attentions, rtol=None, atol=1e-12)
    assert found["logits"] <= 1e-12
    measured(request, "mistral (window 4, T 10)", found)
    spec.write_text(spec.read_text().replace("mask: {causal: true, window: 4}", "mask: causal"))
    causal = _traced(spec)["logits"]
    assert np.abs(causal[0, :4] - logits[0, :4]).max() <= 1e-12  # positions 0..3 read every key either way
    assert np.abs(causal[0, 4:] - logits[0, 4:]).max(axis=-1).min() > 1e-3  # each later position is off


@pytest.mark.parametrize("kind", ["qwen2", "gemma"])
def test_a_hugging_face_model_the_llama_layout_would_trace_wrong_is_refused(tmp_path, kind):
    """Qwen2 (q/k/v biases, read by the qwen2 layout) and Gemma (scaled embeddings) saved by transformers, forced through
    --layout llama: exit 2, by model_type."""
    torch = pytest.importorskip("torch", reason="saving Hugging Face's models needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="saving Hugging Face's models needs transformers (optional extra)")
    torch.manual_seed(0)
    config_class, model_class = {"qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
                                 "gemma": (transformers.GemmaConfig, transformers.GemmaForCausalLM)}[kind]
    config = config_class(vocab_size=48, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=4, max_position_embeddings=32, hidden_act="silu")
    model_class(config).save_pretrained(str(tmp_path / kind))
    r = run_app("import", str(tmp_path / kind), "--layout", "llama")
    if kind == "qwen2":
        assert_refused(r, "config.json: model_type 'qwen2'", "q, k and v biases")
        assert run_app("import", str(tmp_path / kind)).returncode == 0  # its own layout, from model_type
    else:
        assert_refused(r, "config.json: model_type 'gemma'", "scales its embeddings")
        assert "--layout" not in run_app("import", str(tmp_path / kind)).stderr  # no layout suggested that would trace it wrong
