"""Every option of `tracer import` is written into the spec or refused in one line naming it, in each combination
that could drop it: --tokens and --text with --layers from a later layer (the spec's x is then the hidden state those
tokens make entering it), --length with a given input, --dtype with a later first layer, --force without -o, and the
input options of a layout whose first layer reads vectors and of an encoder-decoder.

Without torch: examples/checkpoints/tiny_llama.py's NumPy LLaMA, traced by tracer both ways.  With torch and
transformers: a tiny LlamaForCausalLM in float64, its layer against Hugging Face's own (float32 internals lifted),
PyTorch's encoder layer, and a tiny T5.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, example_module, run_app
from helpers.hf_parity import IDS, hf_forward, imported, lift_float32, measured, tiny
from helpers.hf_parity import traced as stages

from tracer.spec import load_spec

_make = example_module("checkpoints/tiny_llama.py").make
TOKENS = "5,17,3,8,21"


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("options") / "llama"
    _make(str(folder), layers=3)
    return folder


@pytest.mark.parametrize("layers,first", [("1-2", 1), ("2-2", 2), ("2", 2)])
def test_tokens_with_a_later_first_layer_start_from_the_state_they_make(tmp_path: Path, llama: Path, layers: str, first: int) -> None:
    whole = stages(imported(tmp_path, llama, "--tokens", TOKENS, name="whole.yaml"))
    spec = imported(tmp_path, llama, "--layers", layers, "--tokens", TOKENS)
    loaded = load_spec(str(spec))
    assert loaded.input.kind == "x" and (loaded.dims.B, loaded.dims.T) == (1, 5)  # the tokens' positions, not --length's 8
    assert f"--tokens {TOKENS}" in spec.read_text()  # the spec says what made its x
    part = stages(spec)
    assert np.array_equal(part["x"], whole[f"blocks.{first - 1}.output"])  # the hidden state entering layer `first`
    last = 2 - first
    kept = "output" if last == 0 else f"blocks.{last}.output"
    assert np.max(np.abs(part[kept] - whole["blocks.2.output"])) <= 1e-12
    assert np.max(np.abs(part["final_norm"] - whole["final_norm"])) <= 1e-12


def test_dtype_float32_with_a_later_first_layer(tmp_path: Path, llama: Path) -> None:
    spec = imported(tmp_path, llama, "--layers", "1-2", "--tokens", TOKENS, "--dtype", "float32")
    loaded = load_spec(str(spec))
    assert loaded.dtype == "float32"
    x = np.array(loaded.input.value, dtype=np.float64)
    assert np.array_equal(x.astype(np.float32).astype(np.float64), x)  # the float32 run's state, written exactly
    whole = stages(imported(tmp_path, llama, "--tokens", TOKENS, name="whole.yaml"))
    assert 0 < np.max(np.abs(x - whole["blocks.0.output"])) <= 1e-5 * np.max(np.abs(whole["blocks.0.output"]))


def test_length_is_the_random_inputs_positions_with_a_later_first_layer(tmp_path: Path, llama: Path) -> None:
    loaded = load_spec(str(imported(tmp_path, llama, "--layers", "1-1", "--length", "5")))
    assert loaded.input.kind == "x" and loaded.dims.T == 5


@pytest.mark.parametrize("args,option", [
    (("--tokens", TOKENS, "--length", "4"), "--length"),
    (("--layers", "1-1", "--tokens", TOKENS, "--length", "4"), "--length"),
    (("--text", "hello", "--length", "4"), "--length"),
    (("--force",), "--force"),
    (("--layers", "1-1", "--tokens", "5,17,99"), "--tokens"),  # 99 is past V = 40, at a later first layer too
])
def test_an_option_that_would_be_dropped_is_refused_by_name(llama: Path, args: tuple[str, ...], option: str) -> None:
    assert_refused(run_app("import", str(llama), *args), f"tracer: error: {option}")


def test_a_start_from_layers_read_only_in_part_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "extra"
    _make(str(folder), layers=2)
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    tensors["model.layers.0.self_attn.rotary_emb.extra"] = np.ones(3)  # a tensor of layer 0 the llama layout does not read
    save_file(tensors, str(folder / "model.safetensors"))
    assert_refused(run_app("import", str(folder), "--layers", "1-1", "--tokens", TOKENS), "model.layers.0.self_attn.rotary_emb.extra")
    assert_refused(run_app("import", str(folder), "--layers", "1-1", "--tokens", TOKENS, "--allow-unread"), "--allow-unread", "layers 0-0")


# -- with torch and transformers --------------------------------------------------------------------------------------

def test_a_later_first_layer_from_tokens_matches_hugging_face(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    torch, model, folder = tiny(tmp_path, "Llama")
    from transformers.models.llama import modeling_llama

    lift_float32(monkeypatch, torch, modeling_llama, "Llama", rms=True)
    spec = imported(tmp_path, folder, "--layers", "1-1", "--tokens", ",".join(map(str, IDS)))
    st = stages(spec)
    hidden, outputs, _ = hf_forward(torch, model, model.model.layers, IDS)
    found = {"x": float(np.max(np.abs(st["x"] - hidden[1]))), "output": float(np.max(np.abs(st["output"] - outputs[1]))),
             "final_norm": float(np.max(np.abs(st["final_norm"] - hidden[2])))}
    assert max(found.values()) <= 1e-10, found
    measured(request, "llama (--layers 1-1 --tokens)", found)


def test_tokens_for_a_layer_that_reads_vectors_are_refused(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="a PyTorch layer needs torch (optional extra)")
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    torch.save(layer.state_dict(), str(tmp_path / "layer.pt"))
    args = ("import", str(tmp_path / "layer.pt"), "--layout", "torch", "--heads", "4")
    assert_refused(run_app(*args, "--tokens", "1,2,3"), "--tokens", "reads vectors")
    assert load_spec(str(imported(tmp_path, tmp_path / "layer.pt", *args[2:], "--length", "5"))).dims.T == 5


@pytest.fixture
def t5(tmp_path: Path) -> Path:
    pytest.importorskip("torch", reason="a T5 needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="a T5 needs transformers (optional extra)")
    config = transformers.T5Config(vocab_size=64, d_model=16, num_heads=2, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                                   relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0)
    transformers.T5ForConditionalGeneration(config).save_pretrained(str(tmp_path / "t5"))
    return tmp_path / "t5"


def test_an_encoder_decoders_input_options(tmp_path: Path, t5: Path) -> None:
    spec = load_spec(str(imported(tmp_path, t5, "--tokens", "4,9,2")))
    assert spec.source is not None and spec.source.value == [[4, 9, 2]]
    assert spec.dims.S == 3
    assert load_spec(str(imported(tmp_path, t5, "--length", "5", name="five.yaml"))).dims.S == 5
    assert_refused(run_app("import", str(t5), "--layers", "0-0"), "--layers")
    assert_refused(run_app("import", str(t5), "--tokens", "4,9,2", "--length", "5"), "--length")


def test_text_for_an_encoder_decoder_is_refused_by_name(tmp_path: Path, t5: Path) -> None:
    pytest.importorskip("tokenizers", reason="--text needs the tokenizers package (the checkpoints extra)")
    maker = example_module("text/make_tiny.py")
    maker.make(str(tmp_path / "gpt2"))
    (t5 / "tokenizer.json").write_bytes((tmp_path / "gpt2" / "tokenizer.json").read_bytes())
    assert_refused(run_app("import", str(t5), "--text", "a"), "--text", "--tokens")
