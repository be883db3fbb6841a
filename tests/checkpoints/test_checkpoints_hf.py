"""Real checkpoints traced by tracer agree with the implementations people use: Hugging Face GPT-2 and PyTorch nn.Transformer*.

Each test builds a small random model from a config (no download), saves it as its library does
(``save_pretrained`` as safetensors, ``torch.save(state_dict)``), runs ``tracer import`` and
``tracer run --json`` as a user would, and compares every layer's output, the final norm, the
logits and the attention weights with the library's own forward pass, in float64, to 1e-10.
Every parameter is redrawn at random first, so a LayerNorm beta or a bias that a mapping dropped
would show (the libraries initialise those to 0 and 1).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_app, run_cli
from helpers.hf_parity import measured

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    pytest.skip("the comparisons with PyTorch and Hugging Face need torch and transformers (pip install 'tracer[torch]')",
                allow_module_level=True)


class _Lazy:
    """A module imported when first used, not while pytest collects (torch and transformers take seconds to import,
    in every test worker, for the one that runs these tests)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("_"):  # what pytest and its plugins ask of every name in a test module while collecting
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)


torch, transformers = _Lazy("torch"), _Lazy("transformers")

TOL = 1e-10


def randomise(model) -> None:
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)


def stages_of(spec: Path, *args: str) -> dict[str, np.ndarray]:
    r = run_app("run", str(spec), "--json", "--all", *args)
    assert r.returncode == 0, r.stderr
    return {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}


def close(a: np.ndarray, b, what: str) -> float:
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    err = float(np.abs(a - b).max())
    assert err <= TOL, f"{what}: largest difference {err:.3g}"
    return err


def gpt2_model(tmp_path: Path, tie: bool = True, layers: int = 2):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=layers, n_embd=32, n_head=4, vocab_size=60, n_positions=16, bos_token_id=0, eos_token_id=0,
                     tie_word_embeddings=tie, attn_implementation="eager")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).double().eval()
    randomise(model)
    if tie:
        model.tie_weights()
    model.save_pretrained(str(tmp_path / "gpt2"))
    return model


TOKENS = [7, 31, 2, 59, 11]


@pytest.mark.parametrize("tie", [True, False], ids=["tied-head", "separate-head"])
def test_gpt2_matches_hugging_face(tmp_path: Path, tie: bool, request: pytest.FixtureRequest) -> None:
    model = gpt2_model(tmp_path, tie)
    spec = tmp_path / "gpt2.yaml"
    r = run_cli("import", str(tmp_path / "gpt2"), "--tokens", ",".join(map(str, TOKENS)), "-o", str(spec))
    assert r.returncode == 0, r.stderr
    assert ("head: tied" if tie else "head: separate") in spec.read_text()
    st = stages_of(spec)
    with torch.no_grad():
        hf = model(torch.tensor([TOKENS]), output_hidden_states=True, output_attentions=True)
    found = [close(st["x"], hf.hidden_states[0], "x = wte + wpe"),
             close(st["blocks.0.output"], hf.hidden_states[1], "blocks.0.output"),
             close(st["final_norm"], hf.hidden_states[2], "final_norm (HF's last hidden state is after ln_f)")]
    for i in range(2):
        found.append(close(st[f"blocks.{i}.attn.weights"], hf.attentions[i], f"blocks.{i}.attn.weights"))
    found.append(close(st["logits"], hf.logits, "logits"))
    measured(request, "gpt2", max(found))


def test_gpt2_layer_range(tmp_path: Path) -> None:
    """--layers 0-0 traces layer 0 alone (no final norm, no logits); first_layer: 1 traces layer 1 from its real input."""
    model = gpt2_model(tmp_path, layers=3)
    with torch.no_grad():
        hf = model(torch.tensor([TOKENS]), output_hidden_states=True, output_attentions=True)
    first = tmp_path / "l0.yaml"
    assert run_app("import", str(tmp_path / "gpt2"), "--layers", "0-0", "--tokens", ",".join(map(str, TOKENS)), "-o", str(first)).returncode == 0
    st = stages_of(first)
    assert "logits" not in st and "final_norm" not in st
    close(st["output"], hf.hidden_states[1], "layer 0 output")
    close(st["attn.weights"], hf.attentions[0], "layer 0 attention weights")
    # Layers 1-2 from the hidden state HF hands to layer 1: the spec's random x replaced by it.
    mid = tmp_path / "l12.yaml"
    assert run_app("import", str(tmp_path / "gpt2"), "--layers", "1-2", "-o", str(mid)).returncode == 0
    text = mid.read_text()
    assert "first_layer: 1" in text
    x = json.dumps(hf.hidden_states[1][0].tolist())
    text = text.replace("  B: 1\n", "").replace("x: random", f"x: {x}")
    mid.write_text("\n".join(line for line in text.splitlines() if not line.startswith("  T: ")) + "\n")
    st = stages_of(mid)
    close(st["blocks.0.output"], hf.hidden_states[2], "layer 1 output")
    close(st["blocks.1.attn.weights"], hf.attentions[2], "layer 2 attention weights")
    close(st["final_norm"], hf.hidden_states[3], "final norm after layer 2")


def _torch_import(tmp_path: Path, module, name: str, *args: str) -> Path:
    torch.save(module.state_dict(), tmp_path / f"{name}.pt")
    spec = tmp_path / f"{name}.yaml"
    r = run_app("import", str(tmp_path / f"{name}.pt"), "--layout", "torch", "--heads", "4", "-o", str(spec), *args)
    assert r.returncode == 0, r.stderr
    return spec


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_torch_encoder_layer_matches(tmp_path: Path, norm_first: bool) -> None:
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=torch.float64).eval()
    randomise(layer)
    spec = _torch_import(tmp_path, layer, "layer")
    if norm_first:  # a state dict does not record norm_first: the spec says so, and the user edits it
        spec.write_text(spec.read_text().replace("norm_order: post", "norm_order: pre"))
    st = stages_of(spec)
    with torch.no_grad():
        out = layer(torch.tensor(st["x"]))
    close(st["output"], out, "encoder layer output")


def test_torch_encoder_stack_matches(tmp_path: Path) -> None:
    base = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, dtype=torch.float64)
    enc = torch.nn.TransformerEncoder(base, 2, norm=torch.nn.LayerNorm(32, dtype=torch.float64), enable_nested_tensor=False).eval()
    randomise(enc)
    spec = _torch_import(tmp_path, enc, "encoder")
    assert "final_norm: true" in spec.read_text()
    st = stages_of(spec)
    x = torch.tensor(st["x"])
    with torch.no_grad():
        close(st["blocks.0.output"], enc.layers[0](x), "layer 0 output")
        close(st["final_norm"], enc(x), "encoder output (after its norm)")


def test_torch_transformer_with_cross_attention_matches(tmp_path: Path) -> None:
    model = torch.nn.Transformer(32, 4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64, dropout=0.0,
                                 batch_first=True, dtype=torch.float64).eval()
    randomise(model)
    spec = _torch_import(tmp_path, model, "transformer", "--tokens", "3,1,4,1,5")
    assert "model: encoder-decoder" in spec.read_text()
    st = stages_of(spec)
    src, tgt = torch.tensor(st["encoder.x"]), torch.tensor(st["decoder.x"])
    T = tgt.shape[1]
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    with torch.no_grad():
        memory = model.encoder(src)
        out = model(src, tgt, tgt_mask=mask, tgt_is_causal=True)
        close(st["encoder.final_norm"], memory, "encoder output")
        close(st["decoder.blocks.0.output"], model.decoder.layers[0](tgt, memory, tgt_mask=mask, tgt_is_causal=True), "decoder layer 0")
        close(st["decoder.final_norm"], out, "decoder output")
        _, cross = model.decoder.layers[0].multihead_attn(
            model.decoder.layers[0].norm1(tgt + model.decoder.layers[0].self_attn(tgt, tgt, tgt, attn_mask=mask)[0]),
            memory, memory, average_attn_weights=False)
        close(st["decoder.blocks.0.cross.weights"], cross, "decoder layer 0 cross-attention weights")


def test_torch_layout_without_heads_is_refused(tmp_path: Path) -> None:
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    torch.save(layer.state_dict(), tmp_path / "l.pt")
    r = run_app("import", str(tmp_path / "l.pt"), "--layout", "torch")
    assert r.returncode == 2 and "give --heads H" in r.stderr


class _Planted:
    """Unpickling this would create a file: weights_only=True must refuse it without running it."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_that_is_not_a_state_dict_is_refused_unrun(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    torch.save({"weights": torch.ones(2), "planted": _Planted(str(marker))}, tmp_path / "evil.pt")
    spec = tmp_path / "s.yaml"
    spec.write_text("dims: {C: 4, H: 2, F: 8, T: 3}\nseed: 1\ninput: {x: random}\nweights: {file: evil.pt, layout: torch}\n")
    r = run_app("run", str(spec))
    assert r.returncode == 2 and "evil.pt" in r.stderr and "weights_only=True" in r.stderr and "Traceback" not in r.stderr
    assert not marker.exists()


def test_a_truncated_torch_file_is_refused(tmp_path: Path) -> None:
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    torch.save(layer.state_dict(), tmp_path / "l.pt")
    (tmp_path / "l.pt").write_bytes((tmp_path / "l.pt").read_bytes()[:300])
    spec = tmp_path / "s.yaml"
    spec.write_text("dims: {C: 8, H: 2, F: 16, T: 3}\nseed: 1\ninput: {x: random}\nweights: {file: l.pt, layout: torch}\n")
    r = run_app("run", str(spec))
    assert r.returncode == 2 and "s.yaml:4:17: weights.file: " in r.stderr and "truncated or corrupt" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_folder_with_pytorch_model_bin(tmp_path: Path) -> None:
    """An older Hugging Face folder: config.json and pytorch_model.bin (read with weights_only=True)."""
    model = gpt2_model(tmp_path)
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "config.json").write_text((tmp_path / "gpt2" / "config.json").read_text())
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    spec = tmp_path / "bin.yaml"
    assert run_app("import", str(folder), "--tokens", ",".join(map(str, TOKENS)), "-o", str(spec)).returncode == 0
    st = stages_of(spec)
    with torch.no_grad():
        hf = model(torch.tensor([TOKENS]))
    close(st["logits"], hf.logits, "logits")
