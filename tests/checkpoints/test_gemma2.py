"""The gemma2 layout: Hugging Face Gemma 2 (Gemma2ForCausalLM) imported with no flags and traced.

Without torch: a Gemma 2-shaped checkpoint written with NumPy (tiny_llama's tensors with Gemma 2's four norms per
layer), the spec `tracer import` writes (norm_order sandwich, attention_softcap, head_softcap, the sliding window on
the layers layer_types names), layer 0 against the oracle's formulas, and every config key or tensor the layout does
not model refused by name.

With torch and transformers: a tiny random Gemma2ForCausalLM (3 layers, sliding_window 3 over T = 10 positions so
that the window matters, layers 0 and 2 sliding and layer 1 full, head_dim 12 apart from C / H = 8, grouped-query
attention, soft caps small enough to bend the scores and the logits, random norm weights) is saved, imported and
traced: every layer's output, the final norm, the logits and the attention weights agree with HF's forward to 1e-10
in float64 once HF's float32 internals are lifted, and within 1e-5 in float32 as shipped; `tracer grad`'s weight
gradients agree with torch autograd through HF's own model to 1e-10.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, run_app
from helpers import oracle
from helpers.hf_parity import measured
from test_llama import _compare, _hf_forward, _traced, imported

from tracer.spec import load_spec

TOL = 1e-10
IDS = [5, 17, 42, 88, 3, 61, 0, 29, 7, 50]  # T = 10 > sliding_window = 3


def write_gemma2(folder: Path, layers: int = 2, **config) -> dict[str, np.ndarray]:
    """A Gemma 2 checkpoint written with NumPy: C = 16, 4 heads of d = 4, 2 key/value heads, F = 24, V = 32, a tied head."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    C, F, V, H, H_kv, d = 16, 24, 32, 4, 2, 4
    t = {"model.embed_tokens.weight": rng.normal(size=(V, C)), "model.norm.weight": rng.normal(0, 0.3, size=C)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t |= {p + "self_attn.q_proj.weight": rng.normal(0, 0.4, (H * d, C)), p + "self_attn.k_proj.weight": rng.normal(0, 0.4, (H_kv * d, C)),
              p + "self_attn.v_proj.weight": rng.normal(0, 0.4, (H_kv * d, C)), p + "self_attn.o_proj.weight": rng.normal(0, 0.4, (C, H * d)),
              p + "mlp.gate_proj.weight": rng.normal(0, 0.4, (F, C)), p + "mlp.up_proj.weight": rng.normal(0, 0.4, (F, C)),
              p + "mlp.down_proj.weight": rng.normal(0, 0.4, (C, F))}
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            t[p + norm + ".weight"] = rng.normal(0, 0.3, size=C)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg = {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "vocab_size": V, "hidden_size": C, "intermediate_size": F,
           "num_hidden_layers": layers, "num_attention_heads": H, "num_key_value_heads": H_kv, "head_dim": d, "rms_norm_eps": 1e-6,
           "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": d, "sliding_window": 3, "attn_logit_softcapping": 2.0,
           "final_logit_softcapping": 3.0, "rope_parameters": {"rope_type": "default", "rope_theta": 100.0}, "tie_word_embeddings": True}
    cfg |= config
    (folder / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))
    return t


# -- without torch -----------------------------------------------------------------------

def test_import_writes_gemma_2s_settings(tmp_path):
    write_gemma2(tmp_path / "g", layers=3)
    text = imported(tmp_path, tmp_path / "g", "--tokens", "1,5,9,2").read_text()
    assert "layout: gemma2" in text
    for line in ("norm_order: sandwich", "norm: rmsnorm_offset", "activation: geglu", "embedding_scale: true", "head: tied",
                 "attention_softcap: 2.0", "head_softcap: 3.0", "sliding_layers: [0, 2]", "window: 3",
                 "layer_types assumed: Gemma2Config's own"):
        assert line in text, line
    spec = load_spec(str(tmp_path / "spec.yaml"))
    b = spec.block
    assert (b.norm_order, b.attention_softcap, b.head_softcap, b.window, b.sliding_layers) == ("sandwich", 2.0, 3.0, 3, (0, 2))
    windows = {s.name: s.window for s in spec.steps if s.op == "mha"}
    assert windows == {"blocks.0.attention": 3, "blocks.1.attention": None, "blocks.2.attention": 3}
    assert {s.name: s.softcap for s in spec.steps if s.op in ("mha", "softcap")}["logits"] == 3.0
    for i in range(3):
        assert spec.weights[f"blocks.{i}.attention_norm.gamma"].source == "file"
        assert spec.weights[f"blocks.{i}.ffn_norm.gamma"].source == "file"


def test_layer_types_from_config_and_all_sliding(tmp_path):
    write_gemma2(tmp_path / "g", layer_types=["full_attention", "sliding_attention"])
    spec = load_spec(str(imported(tmp_path, tmp_path / "g")))
    assert spec.block.sliding_layers == (1,)
    write_gemma2(tmp_path / "h", layer_types=["sliding_attention", "sliding_attention"])
    spec = load_spec(str(imported(tmp_path, tmp_path / "h")))
    assert spec.block.window == 3 and spec.block.sliding_layers is None  # every layer: the one window of Mistral's form
    write_gemma2(tmp_path / "f", layer_types=["full_attention", "full_attention"], sliding_window=None,
                 attn_logit_softcapping=None, final_logit_softcapping=None)
    spec = load_spec(str(imported(tmp_path, tmp_path / "f")))
    assert (spec.block.mask, spec.block.window, spec.block.attention_softcap, spec.block.head_softcap) == ("causal", None, None, None)
    assert "raw_logits" not in spec.stage_shapes


def test_a_range_of_layers_keeps_their_own_windows(tmp_path):
    """--layers renumbers sliding_layers from the first layer kept: layers 1-2 of (sliding, full, sliding) are blocks 0
    (full) and 1 (sliding), traced from a hidden state (no head, no logits' cap); layer 0 alone is windowed throughout; layer 1 alone is plain causal."""
    write_gemma2(tmp_path / "g", layers=3)
    spec = load_spec(str(imported(tmp_path, tmp_path / "g", "--layers", "1-2")))
    assert (spec.block.window, spec.block.sliding_layers, spec.block.head_softcap) == (3, (1,), None)  # from a hidden state: no head
    assert [s.window for s in spec.steps if s.op == "mha"] == [None, 3]
    spec = load_spec(str(imported(tmp_path, tmp_path / "g", "--layers", "0-0")))
    assert (spec.block.window, spec.block.sliding_layers, spec.block.head, spec.block.head_softcap) == (3, None, "none", None)
    spec = load_spec(str(imported(tmp_path, tmp_path / "g", "--layers", "1-1")))
    assert (spec.block.mask, spec.block.window) == ("causal", None)


def test_query_pre_attn_scalar_is_the_attention_scale(tmp_path):
    """Gemma2Attention scales the scores by query_pre_attn_scalar ** -0.5: block.attention_scale where that is not
    1/sqrt(head_dim) (Gemma 2 27B: 144 with head_dim 128), nothing written where it is."""
    write_gemma2(tmp_path / "g", query_pre_attn_scalar=9)
    text = imported(tmp_path, tmp_path / "g").read_text()
    assert "attention_scale: 0.333333" in text and "query_pre_attn_scalar ** -0.5" in text
    spec = load_spec(str(tmp_path / "spec.yaml"))
    assert spec.block.attention_scale == 9 ** -0.5
    assert {s.scale for s in spec.steps if s.op == "mha"} == {9 ** -0.5}
    write_gemma2(tmp_path / "h", query_pre_attn_scalar=4)  # = head_dim: 1/sqrt(d) itself
    spec = load_spec(str(imported(tmp_path, tmp_path / "h")))
    assert spec.block.attention_scale is None


def test_layer_0_is_gemma_2s_formulas(tmp_path):
    """Two layers and the logits against the oracle: sandwich norms with (1 + w), capped scores, a window on layer 0
    only, the capped logits."""
    t = write_gemma2(tmp_path / "g")
    ids = [3, 1, 4, 1, 5, 9]
    r = run_app("run", str(imported(tmp_path, tmp_path / "g", "--tokens", ",".join(map(str, ids)))), "--json", "--all")
    assert r.returncode == 0, r.stderr
    st = {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}
    x = oracle.embedding_scale(t["model.embed_tokens.weight"][ids][None])
    for i in range(2):
        p = f"model.layers.{i}."
        n1 = oracle.rms_norm_offset(x, t[p + "input_layernorm.weight"], 1e-6)
        w = {f"w_{n}": t[f"{p}self_attn.{n}_proj.weight"].T for n in "qkvo"}
        w.update({"b_q": np.zeros(16), "b_k": np.zeros(8), "b_v": np.zeros(8), "b_o": np.zeros(16)})
        mask = {"causal": True, "window": 3} if i == 0 else "causal"  # layer 0 slides, layer 1 reads every key
        a = oracle.attention(n1, n1, w, 4, mask, rope_base=100.0, H_kv=2, pairing="half", softcap=2.0)
        res = x + oracle.rms_norm_offset(a["output"], t[p + "post_attention_layernorm.weight"], 1e-6)
        n2 = oracle.rms_norm_offset(res, t[p + "pre_feedforward_layernorm.weight"], 1e-6)
        mlp = {"w1": t[p + "mlp.gate_proj.weight"].T, "w3": t[p + "mlp.up_proj.weight"].T, "w2": t[p + "mlp.down_proj.weight"].T,
               "b1": np.zeros(24), "b3": np.zeros(24), "b2": np.zeros(16)}
        ffn = oracle.ffn_hidden(n2, mlp, "geglu") @ mlp["w2"]
        y = res + oracle.rms_norm_offset(ffn, t[p + "post_feedforward_layernorm.weight"], 1e-6)
        for name, want in (("attn.scores", a["scores"]), ("attention", a["output"]), ("residual1", res), ("output", y)):
            got = st[f"blocks.{i}.{name}"]
            assert got.shape == want.shape, name
            keep = np.isfinite(want)
            assert np.max(np.abs(got[keep] - want[keep])) <= 1e-12, (i, name)
        x = y
    final = oracle.rms_norm_offset(x, t["model.norm.weight"], 1e-6)
    raw = final @ t["model.embed_tokens.weight"].T
    assert np.max(np.abs(st["raw_logits"] - raw)) <= 1e-12
    assert np.max(np.abs(st["logits"] - oracle.softcap(raw, 3.0))) <= 1e-12
    assert np.max(np.abs(st["blocks.0.attn.scores"][np.isfinite(st["blocks.0.attn.scores"])])) < 2.0  # capped
    assert run_app("run", str(tmp_path / "spec.yaml"), "--verify").returncode == 0  # against the scalar reference


@pytest.mark.parametrize("config, fragment", [
    ({"model_type": "gemma3_text"}, "model_type 'gemma3_text': Gemma 3 normalises q and k per head"),
    ({"model_type": "gemma"}, "model_type 'gemma': the gemma2 layout reads model_type gemma2 only"),
    ({"layer_types": ["sliding_attention"]}, "layer_types: expected a list of 2 entries, each 'full_attention' or 'sliding_attention'"),
    ({"sliding_window": None}, "layer_types: sliding_attention layers [0] without a sliding_window"),
    ({"attn_logit_softcapping": -1.0}, "attn_logit_softcapping: expected a positive number, received -1.0"),
    ({"hidden_activation": "gelu"}, "hidden_activation 'gelu'"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention = true"),
    ({"cache_implementation": "hybrid", "rope_local_base_freq": 10000.0}, "rope_local_base_freq = 10000.0: the gemma2 layout does not model this setting"),
])
def test_what_the_gemma2_layout_does_not_model_is_refused_by_name(tmp_path, config, fragment):
    write_gemma2(tmp_path / "g", **config)
    layout = ("--layout", "gemma2") if config.get("model_type") else ()
    assert_refused(run_app("import", str(tmp_path / "g"), *layout), "config.json: " + fragment)


def test_a_tensor_the_gemma2_layout_does_not_read_is_refused(tmp_path):
    from safetensors.numpy import load_file, save_file

    write_gemma2(tmp_path / "g")
    t = load_file(str(tmp_path / "g" / "model.safetensors"))
    t["model.layers.0.self_attn.q_norm.weight"] = np.ones(4)  # Gemma 3's: not Gemma 2's
    save_file(t, str(tmp_path / "g" / "model.safetensors"), metadata={"format": "pt"})
    assert_refused(run_app("import", str(tmp_path / "g")), "'model.layers.0.self_attn.q_norm.weight'")


def test_a_gemma_2_through_the_gemma_layout_is_refused_by_name(tmp_path):
    write_gemma2(tmp_path / "g")
    assert_refused(run_app("import", str(tmp_path / "g"), "--layout", "gemma"), "config.json: model_type 'gemma2'", "the gemma2 layout reads it")


# -- against Hugging Face (torch and transformers) ------------------------------------------

def _hf_gemma2(tmp_path: Path, **extra):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face needs transformers (optional extra)")
    torch.manual_seed(0)
    settings = {"vocab_size": 96, "hidden_size": 32, "intermediate_size": 56, "num_hidden_layers": 3, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 12, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "initializer_range": 0.3,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}, "pad_token_id": None, "sliding_window": 3,
                    "query_pre_attn_scalar": 16, "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0} | extra
    model = transformers.Gemma2ForCausalLM(transformers.Gemma2Config(**settings))
    with torch.no_grad():  # HF initialises the norm weights to 0 (the scale 1 + 0): random ones
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0, 0.5)
    folder = tmp_path / "gemma2"
    model.save_pretrained(str(folder))
    model = transformers.Gemma2ForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    return torch, model, folder


def _gemma2_float64(monkeypatch, torch, model) -> None:
    """HF's float32 internals lifted: Gemma2RMSNorm's x.float(), the rotary angles, the softmax (eager attention with
    its soft cap and the mask HF made, as HF adds them) and the embedding normaliser, a float32 buffer cast up."""
    from transformers.models.gemma2 import modeling_gemma2 as mg

    def rms_norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    def rotary(self, x, position_ids):
        d, theta = 2 * self.inv_freq.shape[0], self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        emb = torch.cat([position_ids[..., None].double() * inv_freq] * 2, dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def eager(mod, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None, **kwargs):
        k, v = mg.repeat_kv(key, mod.num_key_value_groups), mg.repeat_kv(value, mod.num_key_value_groups)
        w = torch.matmul(query, k.transpose(2, 3)) * scaling
        if softcap is not None:
            w = torch.tanh(w / softcap) * softcap
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float64)
        return torch.matmul(w, v).transpose(1, 2).contiguous(), w

    monkeypatch.setattr(mg.Gemma2RMSNorm, "forward", rms_norm)
    monkeypatch.setattr(mg.Gemma2RotaryEmbedding, "forward", rotary)
    monkeypatch.setattr(mg, "eager_attention_forward", eager)
    model.model.embed_tokens.embed_scale = torch.tensor(model.config.hidden_size ** 0.5, dtype=torch.float64)


def _as_hf(st: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return dict(st, embed=st["x"])  # HF's first hidden state is the scaled embeddings: tracer's x


def test_gemma2_matches_hugging_face_in_float64(tmp_path, monkeypatch, request):
    torch, model, folder = _hf_gemma2(tmp_path)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))  # no flags: the layout from model_type
    text = spec.read_text()
    assert "layout: gemma2" in text and "sliding_layers: [0, 2]" in text and "attention_scale: 0.25" in text  # 16 ** -0.5, not 1/sqrt(12)
    st = _as_hf(_traced(spec))
    _gemma2_float64(monkeypatch, torch, model)
    hidden, outputs, logits, attentions = _hf_forward(torch, model, IDS)
    found = _compare(st, hidden, outputs, logits, attentions, rtol=None, atol=TOL)
    assert max(found.values()) <= TOL
    measured(request, "gemma2", found)
    assert attentions[0][0, 0, 9, 5] == 0.0 and attentions[1][0, 0, 9, 5] > 0.0  # layer 0 is windowed, layer 1 reads every key
    assert np.abs(logits).max() < 3.0  # the logits' cap bends them
    # each of Gemma 2's choices is a real difference, far outside the tolerance
    for old, new in (("attention_softcap: 2.0", "attention_softcap: 200.0"), ("attention_scale: 0.25", "attention_scale: 0.3"),
                     ("head_softcap: 3.0", "head_softcap: 300.0"), ("sliding_layers: [0, 2]", "sliding_layers: [0, 1, 2]")):
        spec.write_text(text.replace(old, new))
        assert np.abs(_traced(spec)["logits"] - logits).max() > 1e-3, old
    spec.write_text(text)


def test_gemma2_in_float32_is_within_1e_5_of_hugging_face_as_shipped(tmp_path):
    torch, model, folder = _hf_gemma2(tmp_path)
    model = model.float()
    model.model.embed_tokens.embed_scale = torch.tensor(32 ** 0.5, dtype=torch.float32)  # the buffer as Gemma2Model makes it
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))
    spec.write_text(spec.read_text().replace("dtype: float64", "dtype: float32"))
    hidden, outputs, logits, attentions = _hf_forward(torch, model, IDS)
    found = _compare(_as_hf(_traced(spec)), hidden, outputs, logits, attentions, rtol=1e-5)
    assert max(found.values()) > 1e-9  # float32 is visible: this is not the float64 comparison


def test_gemma2_grad_matches_torch_autograd_through_hugging_face(tmp_path, monkeypatch):
    """tracer grad's next-token loss and weight gradients against autograd through HF's own model (float64 internals):
    through the capped logits, the capped scores, the window and all four norms of each layer."""
    torch, model, folder = _hf_gemma2(tmp_path)
    _gemma2_float64(monkeypatch, torch, model)
    logits = model(torch.tensor([IDS])).logits[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(IDS[1:]))
    loss.backward()
    hf = dict(model.named_parameters())
    from tracer.grad.run import GradOptions, grad

    spec = load_spec(str(imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))))
    gt = grad(spec, GradOptions(loss="next-token"))
    assert gt.loss is not None and abs(gt.loss.value - loss.item()) <= TOL
    pairs = {"embedding": ("model.embed_tokens.weight", False), "final_norm.gamma": ("model.norm.weight", False)}
    for i in range(3):
        p = f"model.layers.{i}."
        pairs |= {f"blocks.{i}.attn.w_{x}": (f"{p}self_attn.{x}_proj.weight", True) for x in "qkvo"}
        pairs |= {f"blocks.{i}.ffn.{w}": (f"{p}mlp.{proj}_proj.weight", True) for w, proj in (("w1", "gate"), ("w3", "up"), ("w2", "down"))}
        pairs |= {f"blocks.{i}.{g}.gamma": (p + norm + ".weight", False) for g, norm in
                  (("norm1", "input_layernorm"), ("attention_norm", "post_attention_layernorm"),
                   ("norm2", "pre_feedforward_layernorm"), ("ffn_norm", "post_feedforward_layernorm"))}
    for name, (key, transpose) in pairs.items():
        want = hf[key].grad.numpy()
        want = want.T if transpose else want
        got = gt.weight_grads[name]
        assert got.shape == want.shape, name
        assert np.max(np.abs(got - want)) <= TOL * max(1.0, float(np.max(np.abs(want)))), name
