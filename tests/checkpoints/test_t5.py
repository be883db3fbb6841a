"""The t5 layout: Hugging Face T5 (T5ForConditionalGeneration) imported with no flags and traced.

A tiny random T5ForConditionalGeneration (d_model 32, 4 heads, d_kv 8 and 6, d_ff 64, 2 + 2 layers, vocab 64,
8 buckets up to distance 16, a source of 10 ids so that the logarithmic buckets are used) is saved with
save_pretrained and imported with no flags; every encoder layer's output, the encoder's final norm, every decoder
layer's output, the decoder's final norm and the logits agree with HF's forward to 1e-10 in float64 (relu and
gated-gelu), once T5LayerNorm's float32 variance is lifted to float64; the spec's settings and the refusals
(model_type umt5, a config key not modelled, a tensor not read) are checked too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import assert_refused, run_app
from helpers.hf_parity import imported, measured, need_torch, traced

TOL = 1e-10
SOURCE = [5, 17, 42, 3, 29, 0, 11, 8, 60, 33]  # 10 ids: distances up to 9, past the 8 buckets' exact range


def t5_config(transformers: Any, ffn: str, d_kv: int, **extra: Any) -> Any:
    return transformers.T5Config(vocab_size=64, d_model=32, num_heads=4, d_kv=d_kv, d_ff=64, num_layers=2, num_decoder_layers=2,
                                 relative_attention_num_buckets=8, relative_attention_max_distance=16, feed_forward_proj=ffn,
                                 decoder_start_token_id=0, **extra)


def saved_t5(torch: Any, transformers: Any, folder: Path, ffn: str = "relu", d_kv: int = 8, dtype: Any = None, model_class: str = "T5ForConditionalGeneration",
             double: bool = False, **extra: Any) -> Any:
    """A random T5 saved to ``folder`` (norm weights away from 1, so that a misplaced one shows; ``double``: stored in float64), loaded back."""
    torch.manual_seed(0)
    cls = getattr(transformers, model_class)
    model = cls(t5_config(transformers, ffn, d_kv, **extra)).eval()
    if double:
        model = model.double()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(str(folder))
    return cls.from_pretrained(str(folder), dtype=dtype or torch.float64).eval()


def lift_t5_norm(monkeypatch: Any, torch: Any) -> None:
    """T5LayerNorm computes the variance in float32 even for float64 input: the same formula in the input's dtype."""
    from transformers.models.t5 import modeling_t5 as mt

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))

    monkeypatch.setattr(mt.T5LayerNorm, "forward", forward)


def hf_t5(torch: Any, model: Any, source: list[int], target: list[int]) -> dict[str, np.ndarray]:
    """HF's stages under tracer's names: each layer's output (a hook), both final norms and the logits."""
    got: dict[str, np.ndarray] = {}
    hooks = []
    for side, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        for i, block in enumerate(stack.block):
            hooks.append(block.register_forward_hook(lambda mod, args, out, n=f"{side}.blocks.{i}.output": got.__setitem__(n, out[0].numpy())))
        hooks.append(stack.final_layer_norm.register_forward_hook(lambda mod, args, out, n=f"{side}.final_norm": got.__setitem__(n, out.numpy())))
    try:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([source]), decoder_input_ids=torch.tensor([target]))
    finally:
        for h in hooks:
            h.remove()
    got["logits"] = out.logits.numpy()
    return got


def compare(st: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> dict[str, float]:
    found = {}
    for name, w in want.items():
        assert st[name].shape == w.shape, (name, st[name].shape, w.shape)
        found[name] = float(np.max(np.abs(st[name] - w)))
    return found


def agrees(request: Any, family: str, spec: Path, want: dict[str, np.ndarray]) -> None:
    """The spec's trace against Hugging Face's stages ``want``: recorded as ``family``'s figure, and within TOL."""
    found = compare(traced(spec), want)
    measured(request, family, found)
    assert max(found.values()) <= TOL, found


def target_of(spec: Path) -> tuple[list[int], list[int]]:
    import yaml

    given = yaml.safe_load(spec.read_text())["input"]
    return [int(t) for t in given["source"]], [int(t) for t in given["target"]]


@pytest.mark.parametrize("ffn, d_kv", [("relu", 8), ("gated-gelu", 8), ("relu", 6), ("gated-gelu", 6)])
def test_t5_matches_hugging_face_in_float64(tmp_path, monkeypatch, request, ffn, d_kv):
    torch, transformers = need_torch()
    model = saved_t5(torch, transformers, tmp_path / "t5", ffn, d_kv)
    spec = imported(tmp_path, tmp_path / "t5", "--tokens", ",".join(map(str, SOURCE)))
    text = spec.read_text()
    for line in ("model: encoder-decoder", "norm: rmsnorm", "positions: relative", "relative: {buckets: 8, max_distance: 16}",
                 "attention_scale: 1", "head: tied", "head_scale: true", "activation: " + ("geglu" if ffn == "gated-gelu" else "relu")):
        assert line in text, line
    assert ("  d: 6" in text) == (d_kv == 6)
    source, target = target_of(spec)
    assert source == SOURCE and target == [0] + SOURCE[:-1]
    lift_t5_norm(monkeypatch, torch)
    agrees(request, "t5", spec, hf_t5(torch, model, source, target))


def test_t5_imports_with_no_flags(tmp_path):
    torch, transformers = need_torch()
    saved_t5(torch, transformers, tmp_path / "t5")
    spec = imported(tmp_path, tmp_path / "t5")
    source, target = target_of(spec)
    assert len(source) == 8 and target[0] == 0 and target[1:] == source[:-1]
    r = run_app("run", str(spec), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ok"] is True


def test_t5_untied_config_has_no_head_scale(tmp_path, monkeypatch):
    """tie_word_embeddings false (T5 v1.1's configs): transformers does not scale the decoder's output."""
    torch, transformers = need_torch()
    model = saved_t5(torch, transformers, tmp_path / "t5", "gated-gelu", 8, tie_word_embeddings=False)
    config = json.loads((tmp_path / "t5" / "config.json").read_text())
    config["tie_word_embeddings"], config["scale_decoder_outputs"] = False, False
    (tmp_path / "t5" / "config.json").write_text(json.dumps(config))
    spec = imported(tmp_path, tmp_path / "t5", "--tokens", ",".join(map(str, SOURCE)))
    assert "head_scale" not in spec.read_text()
    model = transformers.T5ForConditionalGeneration.from_pretrained(str(tmp_path / "t5"), dtype=torch.float64).eval()
    assert model.config.scale_decoder_outputs is False
    lift_t5_norm(monkeypatch, torch)
    found = compare(traced(spec), hf_t5(torch, model, *target_of(spec)))
    assert max(found.values()) <= TOL, found


@pytest.mark.parametrize("change, fragment", [
    ({"model_type": "umt5"}, "model_type 'umt5': UMT5 gives every layer its own relative position table"),
    ({"feed_forward_proj": "gated-silu"}, "feed_forward_proj 'gated-silu'"),
    ({"dense_act_fn": "gelu"}, "dense_act_fn 'gelu'"),
    ({"sliding_window": 4}, "sliding_window = 4: the t5 layout does not model this setting"),
    ({"num_heads": "4"}, "num_heads: expected a whole number"),
])
def test_what_the_t5_layout_does_not_model_is_refused_by_name(tmp_path, change, fragment):
    torch, transformers = need_torch()
    saved_t5(torch, transformers, tmp_path / "t5")
    config = json.loads((tmp_path / "t5" / "config.json").read_text())
    config.update(change)
    (tmp_path / "t5" / "config.json").write_text(json.dumps(config))
    layout = ("--layout", "t5") if change.get("model_type") == "umt5" else ()
    assert_refused(run_app("import", str(tmp_path / "t5"), *layout), "config.json: " + fragment)


def test_a_tensor_the_t5_layout_does_not_read_is_refused(tmp_path):
    torch, transformers = need_torch()
    saved_t5(torch, transformers, tmp_path / "t5")
    from safetensors.numpy import load_file, save_file

    t = load_file(str(tmp_path / "t5" / "model.safetensors"))
    t["encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"] = np.zeros((8, 4), dtype=np.float32)  # UMT5's per-layer table
    save_file(t, str(tmp_path / "t5" / "model.safetensors"), metadata={"format": "pt"})
    assert_refused(run_app("import", str(tmp_path / "t5")), "'encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight'")


def test_umt5_saved_by_transformers_is_refused_by_name(tmp_path):
    """UMT5 gives every layer its own relative position table: refused by name, with the reason, with no flags."""
    torch, transformers = need_torch()
    torch.manual_seed(0)
    config = transformers.UMT5Config(vocab_size=64, d_model=32, num_heads=4, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                     relative_attention_num_buckets=8, relative_attention_max_distance=16)
    transformers.UMT5ForConditionalGeneration(config).save_pretrained(str(tmp_path / "umt5"))
    assert_refused(run_app("import", str(tmp_path / "umt5")), "model_type 'umt5': UMT5 gives every layer its own relative position table")


def test_t5_with_its_own_lm_head_matches_hugging_face(tmp_path, monkeypatch, request):
    """T5 v1.1's shape: an lm_head.weight of its own in the file, tie_word_embeddings and scale_decoder_outputs false:
    head: separate, no head_scale, and Hugging Face (which then does not tie them) agrees to 1e-10."""
    torch, transformers = need_torch()
    saved_t5(torch, transformers, tmp_path / "t5", "gated-gelu", 6)
    from safetensors.numpy import load_file, save_file

    t = load_file(str(tmp_path / "t5" / "model.safetensors"))
    t["lm_head.weight"] = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    save_file(t, str(tmp_path / "t5" / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((tmp_path / "t5" / "config.json").read_text())
    config["tie_word_embeddings"], config["scale_decoder_outputs"] = False, False
    (tmp_path / "t5" / "config.json").write_text(json.dumps(config))
    spec = imported(tmp_path, tmp_path / "t5", "--tokens", ",".join(map(str, SOURCE)))
    text = spec.read_text()
    assert "head: separate" in text and "head_scale" not in text
    model = transformers.T5ForConditionalGeneration.from_pretrained(str(tmp_path / "t5"), dtype=torch.float64).eval()
    assert np.array_equal(model.lm_head.weight.detach().numpy(), t["lm_head.weight"].astype(np.float64))
    lift_t5_norm(monkeypatch, torch)
    agrees(request, "t5 (own lm_head)", spec, hf_t5(torch, model, *target_of(spec)))


@pytest.mark.parametrize("written", ["as saved", {"tie_word_embeddings": False, "scale_decoder_outputs": True},
                                     {"tie_word_embeddings": True, "scale_decoder_outputs": None},
                                     {"tie_word_embeddings": False, "scale_decoder_outputs": None}])
def test_t5_v1_1_as_transformers_saves_it_matches_hugging_face(tmp_path, monkeypatch, request, written):
    """T5 v1.1 / Flan-T5 as transformers 5 saves it (gated-gelu, tie_word_embeddings=False given, so the file says
    scale_decoder_outputs false beside tie_word_embeddings true and holds no lm_head): imported with no flags, the
    decoder's scale is what Hugging Face reads from the config, whichever of the two keys it writes, and it agrees to 1e-10."""
    torch, transformers = need_torch()
    saved_t5(torch, transformers, tmp_path / "t5", "gated-gelu", 8, double=True, tie_word_embeddings=False)
    path = tmp_path / "t5" / "config.json"
    config = json.loads(path.read_text())
    if written == "as saved":
        assert (config["scale_decoder_outputs"], config["tie_word_embeddings"]) == (False, True)
    else:
        config |= written
        path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    model = transformers.T5ForConditionalGeneration.from_pretrained(str(tmp_path / "t5"), dtype=torch.float64).eval()
    spec = imported(tmp_path, tmp_path / "t5", "--tokens", ",".join(map(str, SOURCE)))
    text = spec.read_text()
    assert "activation: geglu" in text and "head: tied" in text
    assert ("head_scale: true" in text) == model.config.scale_decoder_outputs
    lift_t5_norm(monkeypatch, torch)
    agrees(request, "t5 v1.1 (as transformers 5 saves it)", spec, hf_t5(torch, model, *target_of(spec)))


@pytest.mark.parametrize("ffn, d_kv", [("relu", 8), ("gated-gelu", 6)])
def test_t5_encoder_model_matches_hugging_face(tmp_path, monkeypatch, request, ffn, d_kv):
    """T5EncoderModel (the file holds shared.weight and the encoder only): the encoder traced as a stack of its own,
    every layer's output and the final norm (HF's last_hidden_state) to 1e-10."""
    torch, transformers = need_torch()
    model = saved_t5(torch, transformers, tmp_path / "enc", ffn, d_kv, model_class="T5EncoderModel", double=True)
    spec = imported(tmp_path, tmp_path / "enc", "--tokens", ",".join(map(str, SOURCE)))
    text = spec.read_text()
    for line in ("mask: none", "positions: relative", "head: none", "final_norm: true", "attention_scale: 1"):
        assert line in text, line
    assert "model: encoder-decoder" not in text
    lift_t5_norm(monkeypatch, torch)
    want: dict[str, np.ndarray] = {}
    hooks = [block.register_forward_hook(lambda mod, args, out, n=f"blocks.{i}.output": want.__setitem__(n, out[0].numpy()))
             for i, block in enumerate(model.encoder.block)]
    with torch.no_grad():
        want["final_norm"] = model(input_ids=torch.tensor([SOURCE])).last_hidden_state.numpy()
    for h in hooks:
        h.remove()
    agrees(request, "t5 encoder", spec, want)


def test_t5_with_a_decoder_and_no_encoder_is_refused(tmp_path):
    torch, transformers = need_torch()
    saved_t5(torch, transformers, tmp_path / "t5")
    from safetensors.numpy import load_file, save_file

    t = {k: v for k, v in load_file(str(tmp_path / "t5" / "model.safetensors")).items() if not k.startswith("encoder.")}
    save_file(t, str(tmp_path / "t5" / "model.safetensors"), metadata={"format": "pt"})
    assert_refused(run_app("import", str(tmp_path / "t5")), "holds no", "encoder.block.0.")
