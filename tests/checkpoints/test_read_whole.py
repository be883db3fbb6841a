"""A checkpoint is read whole, or refused; nothing is assumed silently; config.json's values are type-checked.

Tiny checkpoints are written with NumPy and safetensors under Hugging Face's key names (the examples'
tiny GPT-2 and LLaMA), then changed the way real models differ: Qwen3's per-head q/k norms, a Gemma-like
config, GPT-2's old attention-mask buffers, a stored lm_head, a config.json with nonsense values.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_refused, example_module, run_app

from tracer.spec import load_spec

make_gpt2 = example_module("checkpoints/tiny_gpt2.py").make
make_llama = example_module("checkpoints/tiny_llama.py").make


def _save(folder: Path, tensors: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))


def refused_by_validate(spec: Path, *fragments: str) -> None:
    """`tracer validate` reports on stdout, one line per spec, and exits 2."""
    r = run_app("validate", str(spec))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stdout.strip().splitlines()) == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout
    for fragment in fragments:
        assert fragment in r.stdout, (fragment, r.stdout)


def qk_normed(folder: Path, layers: int = 2, normed: tuple[int, ...] | None = None, model_type: str = "llama") -> dict[str, np.ndarray]:
    """A Qwen3-like checkpoint: LLaMA's tensors plus per-head q and k norm weights (in the layers ``normed``, default all),
    which the llama layout maps to nothing."""
    t = make_llama(str(folder), layers=layers, config={"model_type": model_type})
    rng = np.random.default_rng(5)
    for i in range(layers) if normed is None else normed:
        for x in "qk":
            t[f"model.layers.{i}.self_attn.{x}_norm.weight"] = 1 + rng.standard_normal(4)
    _save(folder, t)
    return t


# -- a checkpoint is read whole, or refused ------------------------------------------------

def test_tensors_the_llama_layout_has_no_place_for_are_refused_by_name(tmp_path: Path) -> None:
    qk_normed(tmp_path / "qwen")
    r = run_app("import", str(tmp_path / "qwen"), "--layout", "llama")
    assert_refused(r, "the llama layout leaves 4 of its tensors unread", "self_attn.q_norm.weight'", "--allow-unread")


def test_a_model_type_no_family_reads_gets_no_other_familys_layout_suggested(tmp_path: Path) -> None:
    """qwen3's layout maps every tensor, but the config says the model is another one: a suggestion could be a wrong
    trace, so none is made; forcing the layout is refused naming the model_type, unless --not-the-model says so."""
    qk_normed(tmp_path / "qwen", model_type="exotic")
    r = run_app("import", str(tmp_path / "qwen"))
    assert_refused(r, "model_type 'exotic' names no layout (tracer reads ")
    assert "--layout" not in r.stderr and "--not-the-model" not in r.stderr
    forced = run_app("import", str(tmp_path / "qwen"), "--layout", "qwen3")
    assert_refused(forced, "config.json: model_type 'exotic': the qwen3 layout reads model_type 'qwen3'")
    out = tmp_path / "q.yaml"
    r = run_app("import", str(tmp_path / "qwen"), "--layout", "qwen3", "--not-the-model", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "not the checkpoint's model: its exotic computed as qwen3" in r.stderr
    head = out.read_text().splitlines()[:4]
    assert head[2].startswith("# NOT THE CHECKPOINT'S MODEL (--not-the-model): its config.json's model_type 'exotic'"), head
    run = run_app("run", str(out))
    assert run.returncode == 0 and run.stdout.startswith("qwen: all 2 layers, not the checkpoint's model: its exotic computed as qwen3"), run.stdout[:200]


def test_not_the_model_is_refused_where_the_config_names_the_layouts_own_model(tmp_path: Path) -> None:
    qk_normed(tmp_path / "qwen")
    assert_refused(run_app("import", str(tmp_path / "qwen"), "--not-the-model"), "--not-the-model: ", "model_type 'llama' is the llama layout's own")


def test_without_a_config_only_a_layout_that_would_accept_it_is_suggested(tmp_path: Path) -> None:
    t = qk_normed(tmp_path / "qwen")
    (tmp_path / "qwen" / "config.json").unlink()
    r = run_app("import", str(tmp_path / "qwen"))  # qwen3 maps every tensor, and needs its config.json
    assert_refused(r, "the checkpoint has no config.json; the qwen3 layout maps its tensors, and refuses it: ", "config.json")
    assert "give --layout" not in r.stderr
    t["model.layers.0.self_attn.q_norm.bias"] = np.zeros(4)  # a tensor no layout has a place for
    _save(tmp_path / "qwen", t)
    r = run_app("import", str(tmp_path / "qwen"))
    assert_refused(r, "the checkpoint has no config.json", "none would trace it whole")
    assert "--layout" not in r.stderr


def test_allow_unread_imports_it_and_the_spec_lists_what_it_ignores(tmp_path: Path) -> None:
    qk_normed(tmp_path / "qwen")
    out = tmp_path / "q.yaml"
    r = run_app("import", str(tmp_path / "qwen"), "--layout", "llama", "--allow-unread", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "allow_unread: true" in text
    for x in "qk":
        assert f"#   model.layers.{{0-1}}.self_attn.{x}_norm.weight" in text
    assert run_app("run", str(out)).returncode == 0
    # the same spec without allow_unread: run and validate refuse, naming the tensors
    out.write_text(text.replace("  allow_unread: true", "  # (removed)"))
    fragments = ("q.yaml:", "weights.file", "leaves 4 tensors of what this spec traces unread", "q_norm.weight", "allow_unread: true")
    assert_refused(run_app("run", str(out)), *fragments)
    refused_by_validate(out, *fragments)


def test_tensors_of_layers_not_traced_are_not_unread(tmp_path: Path) -> None:
    qk_normed(tmp_path / "qwen", layers=3, normed=(2,))
    r = run_app("import", str(tmp_path / "qwen"), "--layout", "llama", "--layers", "0-1")
    assert r.returncode == 0, r.stderr
    assert "allow_unread" not in r.stdout
    r = run_app("import", str(tmp_path / "qwen"), "--layout", "llama", "--layers", "1-2")
    assert_refused(r, "leaves 2 of its tensors unread", "'model.layers.2.self_attn.k_norm.weight'")


def test_a_norm_the_spec_reads_in_part_is_refused(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "gpt2"), layers=1)
    spec = tmp_path / "s.yaml"
    spec.write_text("dims: {C: 32, H: 4, F: 128}\nblock: {layers: 1, norm: rmsnorm, activation: gelu_tanh, positions: learned, final_norm: true, head: tied}\n"
                    "weights: {file: gpt2, layout: gpt2}\ninput: {tokens: [1, 2, 3]}\n")
    refused_by_validate(spec, "s.yaml:3:", "'transformer.h.0.ln_1.bias'", "'transformer.h.0.ln_2.bias'", "'transformer.ln_f.bias'")
    spec.write_text(spec.read_text().replace("norm: rmsnorm", "norm: layernorm").replace("positions: learned", "positions: none"))
    refused_by_validate(spec, "'transformer.wpe.weight'")  # tokens read, their positions not


def test_mask_buffers_are_harmless_and_a_stored_tied_head_must_equal_the_embedding(tmp_path: Path) -> None:
    t = make_gpt2(str(tmp_path / "gpt2"), layers=1)
    t["transformer.h.0.attn.bias"] = np.tril(np.ones((1, 1, 32, 32), dtype=np.float32))  # what older GPT-2 files store
    t["transformer.h.0.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    t["lm_head.weight"] = t["transformer.wte.weight"].copy()
    _save(tmp_path / "gpt2", t)
    r = run_app("import", str(tmp_path / "gpt2"))
    assert r.returncode == 0, r.stderr
    assert "allow_unread" not in r.stdout and "head: tied" in r.stdout
    t["lm_head.weight"][3, 4] += 1.0  # no longer the embedding: a tied head would score with another matrix
    _save(tmp_path / "gpt2", t)
    assert_refused(run_app("import", str(tmp_path / "gpt2")), "'lm_head.weight'")
    _config(tmp_path / "gpt2", tie_word_embeddings=False)
    r = run_app("import", str(tmp_path / "gpt2"))
    assert r.returncode == 0 and "head: separate" in r.stdout, r.stderr


# -- what tracer does not model is refused by name --------------------------------------------

@pytest.mark.parametrize("config, fragment", [
    ({"model_type": "gemma"}, "model_type 'gemma': Gemma scales its embeddings by sqrt(hidden_size)"),
    ({"model_type": "gemma2"}, "model_type 'gemma2': Gemma scales"),
    ({"query_pre_attn_scalar": 8}, "query_pre_attn_scalar = 8"),
    ({"final_logit_softcapping": 30.0}, "final_logit_softcapping = 30.0"),
    ({"embedding_multiplier": 12.0}, "embedding_multiplier = 12.0"),
    ({"hidden_activation": "gelu_pytorch_tanh"}, "hidden_activation 'gelu_pytorch_tanh'"),
    ({"rope_scaling": {"factor": 2.0}}, "rope_scaling: rope type 'default with factor'"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
     "rope_parameters: rope type 'default with partial_rotary_factor 0.5'"),
])
def test_a_model_whose_maths_differ_is_refused_through_the_llama_layout(tmp_path: Path, config: dict, fragment: str) -> None:
    make_llama(str(tmp_path / "m"), config=config)
    assert_refused(run_app("import", str(tmp_path / "m"), "--layout", "llama"), "config.json: " + fragment)


# -- config.json's values, type-checked ----------------------------------------------------------

@pytest.mark.parametrize("change, fragment", [
    ({"n_head": True}, "n_head: expected a whole number, received boolean true"),
    ({"n_head": 4.5}, "n_head: expected a whole number, received 4.5"),
    ({"n_head": "x"}, "n_head: expected a whole number, received text 'x'"),
    ({"n_head": 0}, "n_head: expected a whole number, 1 or more, received 0"),
    ({"n_head": 5}, "n_head = 5 does not divide n_embd = 32"),
    ({"layer_norm_epsilon": True}, "layer_norm_epsilon: expected a positive number, received boolean true"),
    ({"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon: expected a positive number, received text '1e-5'"),
    ({"activation_function": ["gelu"]}, "activation_function: expected text, received a list"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings: expected true or false, received text 'yes'"),
    ({"n_embd": 48}, "n_embd = 48, but the checkpoint's tensors have C = 32 (transformer.wte.weight is [64,32])"),
    ({"n_positions": 16}, "n_positions = 16, but the checkpoint's tensors have T_max = 32"),
    ({"n_layer": 3}, "n_layer = 3, but the checkpoint's tensors have layers = 2"),
])
def test_gpt2_config_values_are_type_checked(tmp_path: Path, change: dict, fragment: str) -> None:
    make_gpt2(str(tmp_path / "gpt2"))
    _config(tmp_path / "gpt2", **change)
    assert_refused(run_app("import", str(tmp_path / "gpt2")), f"{tmp_path / 'gpt2' / 'config.json'}: {fragment}")


def test_an_n_head_of_null_is_not_a_number_of_heads(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "gpt2"))
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_head": None}))
    assert_refused(run_app("import", str(tmp_path / "gpt2")), "config.json does not record the number of heads; give --heads H")


@pytest.mark.parametrize("change, fragment", [
    ({"rope_theta": "x"}, "rope_theta: expected a positive number, received text 'x'"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": "x"}}, "rope_parameters.rope_theta: expected a positive number, received text 'x'"),
    ({"rms_norm_eps": None, "num_attention_heads": False}, "num_attention_heads: expected a whole number, received boolean false"),
    ({"num_key_value_heads": 2.5}, "num_key_value_heads: expected a whole number, received 2.5"),
    ({"rope_scaling": [1, 2]}, "rope_scaling: expected a mapping, received a list"),
    ({"hidden_size": 32}, "hidden_size = 32, but the checkpoint's tensors have C = 16"),
])
def test_llama_config_values_are_type_checked(tmp_path: Path, change: dict, fragment: str) -> None:
    make_llama(str(tmp_path / "m"), config=change)
    assert_refused(run_app("import", str(tmp_path / "m")), f"config.json: {fragment}")


@pytest.mark.parametrize("doc, got", [("[1, 2]", "a list"), ('"gpt2"', "text 'gpt2'"), ("7", "7")])
def test_a_config_that_is_not_a_mapping_is_refused(tmp_path: Path, doc: str, got: str) -> None:
    make_gpt2(str(tmp_path / "gpt2"))
    (tmp_path / "gpt2" / "config.json").write_text(doc)
    assert_refused(run_app("import", str(tmp_path / "gpt2")), f"config.json: expected a mapping of settings, received {got}")
    spec = tmp_path / "s.yaml"
    spec.write_text("dims: {C: 32, H: 4, F: 128}\nblock: {layers: 2, activation: gelu_tanh, positions: learned, head: tied}\n"
                    "weights: {file: gpt2}\ninput: {tokens: [1, 2, 3]}\n")
    refused_by_validate(spec, "weights.file", "config.json: expected a mapping of settings")


# -- nothing assumed silently ------------------------------------------------------------------

def test_settings_without_a_config_are_marked_assumed_and_listed_once(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "gpt2"))
    (tmp_path / "gpt2" / "config.json").unlink()
    f = str(tmp_path / "gpt2" / "model.safetensors")
    r = run_app("import", f, "--layout", "gpt2", "--heads", "4")
    assert r.returncode == 0, r.stderr
    for credit in ("# activation_function", "# layer_norm_epsilon", "# n_embd", "# vocab_size", "# n_positions", "# n_inner"):
        assert credit not in r.stdout, (credit, r.stdout)  # nothing credited to a config.json that is not there
    for line in ("activation: gelu_tanh", "eps: 1e-05"):
        assert any(ln.startswith("  " + line) and "# assumed: no config.json" in ln for ln in r.stdout.splitlines()), (line, r.stdout)
    assert r.stderr.count("assumed (no config.json): activation gelu_tanh, eps 1e-05") == 1, r.stderr
    r = run_app("import", f, "--layout", "gpt2", "--heads", "4", "--activation", "gelu", "--eps", "1e-6")
    assert r.returncode == 0 and "assumed" not in r.stderr, r.stderr
    assert "activation: gelu " in r.stdout and "# --activation" in r.stdout and "eps: 1e-06" in r.stdout and "# --eps" in r.stdout


def test_an_option_config_json_contradicts_is_refused_naming_both(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "gpt2"))
    cfg = tmp_path / "gpt2" / "config.json"
    assert_refused(run_app("import", str(tmp_path / "gpt2"), "--heads", "8"), "--heads 8:", f"{cfg} gives n_head = 4")
    assert_refused(run_app("import", str(tmp_path / "gpt2"), "--activation", "gelu"), "--activation gelu:", "activation_function = gelu_new")
    assert_refused(run_app("import", str(tmp_path / "gpt2"), "--eps", "1e-6"), "--eps 1e-06:", "layer_norm_epsilon = 1e-05")
    r = run_app("import", str(tmp_path / "gpt2"), "--heads", "4")  # the same as config.json: fine
    assert r.returncode == 0 and "H: 4" in r.stdout
    assert_refused(run_app("import", str(tmp_path / "gpt2"), "--activation", "gleu"), "--activation 'gleu': expected one of")
    # an option the family does not read is refused, not ignored
    assert_refused(run_app("import", str(tmp_path / "gpt2"), "--norm-order", "post"), "--norm-order post: the gpt2 layout does not take it")
    (tmp_path / "gpt2" / "config.json").unlink()  # swiglu would need a third matrix a GPT-2 does not have
    assert_refused(run_app("import", str(tmp_path / "gpt2"), "--layout", "gpt2", "--heads", "4", "--activation", "swiglu"),
                   "--activation swiglu: expected one of gelu_tanh, gelu, relu")


def test_a_state_dict_says_what_it_assumes_and_takes_the_options(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="a PyTorch state dict needs torch (optional extra)")
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    torch.save(layer.state_dict(), tmp_path / "layer.pt")
    r = run_app("import", str(tmp_path / "layer.pt"), "--layout", "torch", "--heads", "4")
    assert r.returncode == 0, r.stderr
    assert "norm_order: post" in r.stdout and "# assumed: a state dict does not record it" in r.stdout
    assert r.stderr.count("norm_order post, activation relu, eps 1e-05") == 1
    r = run_app("import", str(tmp_path / "layer.pt"), "--layout", "torch", "--heads", "4", "--norm-order", "pre", "--activation", "gelu")
    assert r.returncode == 0 and "norm_order: pre" in r.stdout and "activation: gelu" in r.stdout
    assert "eps 1e-05" in r.stderr and "norm_order" not in r.stderr


def test_tokens_beyond_the_learned_positions_are_refused_at_import(tmp_path: Path) -> None:
    make_gpt2(str(tmp_path / "gpt2"), T_max=8)
    ids = ",".join(str(i) for i in range(10))
    assert_refused(run_app("import", str(tmp_path / "gpt2"), "--tokens", ids), "--tokens: 10 tokens", "T_max = 8")
    r = run_app("import", str(tmp_path / "gpt2"), "--tokens", "1,2,3,4,5,6,7,0")
    assert r.returncode == 0, r.stderr


def test_an_allowed_import_loads_and_lists_nothing_when_nothing_is_left(tmp_path: Path) -> None:
    make_llama(str(tmp_path / "m"))
    r = run_app("import", str(tmp_path / "m"), "--allow-unread")
    assert r.returncode == 0 and "allow_unread" not in r.stdout, r.stderr
    (tmp_path / "s.yaml").write_text(r.stdout.replace(f"file: {tmp_path / 'm'}", "file: m"))
    assert load_spec(str(tmp_path / "s.yaml")).block.norm == "rmsnorm"


def test_a_tensor_name_is_data_in_the_listing_never_yaml(tmp_path: Path) -> None:
    t = make_llama(str(tmp_path / "m"))
    t["model.layers.0.evil\nallow_nonfinite: true\n#"] = np.zeros(2)
    _save(tmp_path / "m", t)
    r = run_app("import", str(tmp_path / "m"), "--allow-unread")
    assert r.returncode == 0, r.stderr
    assert "\nallow_nonfinite" not in r.stdout and "#   model.layers.0.evil\\nallow_nonfinite: true\\n#" in r.stdout
    assert "allow_nonfinite" not in r.stdout.replace("evil\\nallow_nonfinite", "")


@pytest.mark.parametrize("shard, got", [(None, "nothing (null)"), (7, "7"), (["a.safetensors"], "a list"), (True, "boolean true")])
def test_an_index_whose_shard_is_not_a_file_name_is_refused(tmp_path: Path, shard: object, got: str) -> None:
    """A weight_map value that is not text names no file; it is refused by key, not read as the file 'None' or '7'."""
    tensors = make_gpt2(str(tmp_path / "gpt2"))
    folder = tmp_path / "gpt2"
    weight_map: dict[str, object] = dict.fromkeys(tensors, "model.safetensors")
    weight_map["transformer.h.0.ln_1.weight"] = shard
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    assert_refused(run_app("import", str(folder)),
                   f"model.safetensors.index.json: weight_map: transformer.h.0.ln_1.weight: expected the name of a shard file, received {got}")
