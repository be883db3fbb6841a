"""Exact or refused, for every model type the installed transformers knows.

Each model type's default config.json (as transformers writes it), next to a checkpoint, goes through `tracer
import`.  A model type a family reads must have a parity test against Hugging Face (COVERED names it); any other is
refused with exit 2 and one line that names the model type and lists the families tracer reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_app

from tracer.checkpoints import families

# model_type -> the parity test that reads a tiny random model of it and compares every layer with Hugging Face
COVERED = {
    "gpt2": "test_checkpoints_hf.py::test_gpt2_matches_hugging_face",
    "llama": "test_llama.py::test_llama_with_float64_internals_matches_to_1e_12",
    "mistral": "test_llama.py::test_mistral_sliding_window_matches_hugging_face_at_every_position",
    "qwen2": "test_qwen.py::test_matches_hugging_face_in_float64",
    "mixtral": "test_mixtral.py::test_mixtral_matches_hugging_face_to_1e_10",
    "bert": "test_bert.py::test_encoder_matches_hugging_face_in_float64",
    "roberta": "test_bert.py::test_encoder_matches_hugging_face_in_float64",
    "distilbert": "test_bert.py::test_encoder_matches_hugging_face_in_float64",
    "gpt_neox": "test_gpt_neox.py::test_pythia_matches_hugging_face_at_every_layer",
    "phi": "test_phi.py::test_phi_matches_hugging_face_at_every_layer",
    "gemma": "test_gemma.py::test_gemma_matches_hugging_face_in_float64",
    "opt": "test_opt.py::test_pre_norm_opt_matches_hugging_face_at_every_layer",
    "qwen3": "test_qwen3.py::test_matches_hugging_face_in_float64",
    "t5": "test_t5.py::test_t5_matches_hugging_face_in_float64",
    "stablelm": "test_stablelm.py::test_stablelm_matches_hugging_face_at_every_layer",
    "olmo": "test_olmo.py::test_olmo_matches_hugging_face_at_every_layer",
    "starcoder2": "test_starcoder2.py::test_starcoder2_matches_hugging_face_at_every_layer",
    "granite": "test_granite.py::test_granite_matches_hugging_face_at_every_layer",
    "olmo2": "test_olmo2.py::test_olmo2_matches_hugging_face_at_every_layer",
    "phi3": "test_phi3.py::test_phi3_matches_hugging_face_at_every_layer",
    "helium": "test_helium.py::test_helium_matches_hugging_face_at_every_layer",
    "smollm3": "test_smollm3.py::test_smollm3_matches_hugging_face_at_every_layer",
    "cohere": "test_cohere.py::test_cohere_matches_hugging_face_at_every_layer",
    "gemma3_text": "test_gemma3.py::test_gemma3_matches_hugging_face_at_every_layer",
    # a model type a family names only to refuse it by name, with the reason (its test shows the refusal)
    "gemma2": "test_gemma2.py::test_gemma2_matches_hugging_face_in_float64",
    "umt5": "test_t5.py::test_umt5_saved_by_transformers_is_refused_by_name",
}


def read_model_types() -> set[str]:
    return {t for family in families.layouts().values() for t in family.model_types}


def test_every_model_type_a_family_reads_has_a_parity_test() -> None:
    here = Path(__file__).parent
    assert read_model_types() == set(COVERED)
    for test in COVERED.values():
        module, name = test.split("::")
        assert f"def {name}(" in (here / module).read_text(encoding="utf-8"), test


@pytest.mark.slow
def test_every_model_type_transformers_knows_is_read_or_refused_in_one_line(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers", reason="the model types come from transformers (optional extra)")
    from safetensors.numpy import save_file

    read = read_model_types()
    folder = tmp_path / "model"
    folder.mkdir()
    save_file({"encoder.unknown.weight": np.zeros((4, 2))}, str(folder / "model.safetensors"))  # a tensor no layout maps
    refused = 0
    for model_type in sorted(transformers.CONFIG_MAPPING.keys()):
        try:
            text = transformers.CONFIG_MAPPING[model_type]().to_json_string()
        except Exception:  # a config that cannot be made with its defaults: its model_type alone
            text = json.dumps({"model_type": model_type})
        doc = json.loads(text)
        doc["model_type"] = model_type
        (folder / "config.json").write_text(json.dumps(doc), encoding="utf-8")
        if model_type in read:
            assert model_type in COVERED  # read, and compared with Hugging Face by its parity test
            continue
        r = run_app("import", str(folder), "-o", str(tmp_path / "spec.yaml"))
        assert r.returncode == 2, (model_type, r.returncode, r.stdout[-300:])
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stderr, (model_type, r.stderr)
        assert f"model_type {model_type!r} names no layout (tracer reads {', '.join(sorted(read))})" in lines[0], (model_type, lines[0])
        assert not (tmp_path / "spec.yaml").exists()
        refused += 1
    assert refused > 100 and refused + len(read & set(transformers.CONFIG_MAPPING.keys())) == len(transformers.CONFIG_MAPPING.keys())


# -- every causal-LM and masked-LM model type, as a tiny random model transformers builds and saves ---------------------
SIZES = {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 64, "max_position_embeddings": 64, "head_dim": 8}
SWEEP_IDS = [5, 17, 42, 3, 29, 11, 8]
MOST_PARAMETERS = 2_000_000  # a tiny model has about 50,000


def _tiny_model(transformers, torch, model_type: str, folder: Path):
    """transformers' causal-LM (else masked-LM) class of ``model_type``, at SIZES where its config has those settings and its
    token ids inside the vocabulary, random in float64, saved to ``folder``; None when transformers cannot build it so."""
    from transformers.models.auto import modeling_auto as auto

    name = auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) or auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES.get(model_type)
    try:
        config_class = transformers.CONFIG_MAPPING[model_type]
        default = config_class()
        own = {v: k for k, v in getattr(default, "attribute_map", {}).items()}
        settings = {own.get(k, k): v for k, v in SIZES.items() if hasattr(default, k)}
        for key in ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "decoder_start_token_id"):
            value = getattr(default, key, None)
            if isinstance(value, int) and value >= SIZES["vocab_size"]:
                settings[key] = 60 + len(key) % 4
        config = config_class(**settings)
        with torch.device("meta"):  # sized first: a model type whose other defaults stay large (a vision tower) is left out
            size = sum(p.numel() for p in getattr(transformers, name)(config).parameters())
        if size > MOST_PARAMETERS:
            return None
        torch.manual_seed(0)
        model = getattr(transformers, name)(config).double().eval()
        with torch.no_grad():
            for p in model.parameters():
                if p.ndim == 1:
                    p.add_(0.1 * torch.randn_like(p))
        model.save_pretrained(str(folder))
        load = {"attn_implementation": "eager", "dtype": torch.float64}
        try:  # a mixture of experts: its experts one by one (the grouped kernel takes no float64)
            return getattr(transformers, name).from_pretrained(str(folder), experts_implementation="eager", **load).eval()
        except (TypeError, ValueError):
            return getattr(transformers, name).from_pretrained(str(folder), **load).eval()
    except Exception:  # a model type that needs more than sizes (a vision tower, a tokenizer, remote code): not buildable here
        return None


def _one_line_refusal(r) -> str | None:
    """What is wrong with a refusal: None when it is exit 2 with one line on stderr, nothing on stdout, no traceback."""
    lines = r.stderr.strip().splitlines()
    if r.returncode == 2 and len(lines) == 1 and r.stdout == "" and "Traceback" not in r.stderr:
        return None
    return f"exit {r.returncode}, {r.stderr.strip()[-300:]!r}"


def _agrees(torch, model, spec: Path) -> str | None:
    """None when the spec's logits are Hugging Face's (to float32 rounding: HF keeps rotary, norms and softmax in float32
    inside a float64 model, so the exact figures are the families' own parity tests'); else what differs."""
    import tracer

    with torch.no_grad():
        want = model(torch.tensor([SWEEP_IDS])).logits.numpy()
    t = tracer.trace(str(spec))
    names = list(t)
    name = next((n for n in ("logits", "mlm.logits") if n in names), None)
    if name is None:
        return f"no logits stage (its last stages: {names[-4:]})"
    got = np.asarray(t[name])
    if got.shape != want.shape:
        return f"logits {got.shape}, Hugging Face {want.shape}"
    err = float(np.max(np.abs(got - want)))
    return None if err <= 1e-5 * max(1.0, float(np.max(np.abs(want)))) else f"logits off by {err:.3g}"


@pytest.mark.slow
def test_every_buildable_model_is_exact_or_refused_and_every_suggestion_is_accepted(tmp_path: Path) -> None:
    """Each causal-LM / masked-LM model type transformers can build with tiny sizes, saved as transformers saves it:
    imported with no flag, it is traced as Hugging Face computes it, or refused in one line that suggests no other family's
    layout; forced through --layout llama (the layout whose tensors most models share), it is refused unless it is a LLaMA;
    with its config.json taken away, every layout the refusal suggests is accepted when followed."""
    torch = pytest.importorskip("torch", reason="the models are built by transformers (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the models are built by transformers (optional extra)")
    from transformers.models.auto import modeling_auto as auto

    kinds = sorted(set(auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES))
    wrong: list[str] = []
    built = traced = refused = followed = 0
    for model_type in kinds:
        folder = tmp_path / model_type
        model = _tiny_model(transformers, torch, model_type, folder)
        if model is None:
            continue
        built += 1
        spec = tmp_path / f"{model_type}.yaml"
        r = run_app("import", str(folder), "-o", str(spec), "--tokens", ",".join(map(str, SWEEP_IDS)))
        if r.returncode == 0:
            traced += 1
            if (why := _agrees(torch, model, spec)) is not None:
                wrong.append(f"{model_type}: imported with no flag, {why}")
        else:
            refused += 1
            if (why := _one_line_refusal(r)) is not None or "--layout" in r.stderr:
                wrong.append(f"{model_type}: refused as {why or repr(r.stderr.strip()[-300:])}")
        if model_type not in ("llama", "mistral"):
            forced = run_app("import", str(folder), "--layout", "llama", "-o", str(tmp_path / "forced.yaml"))
            if (why := _one_line_refusal(forced)) is not None:
                wrong.append(f"{model_type}: --layout llama gave {why}")
        bare = tmp_path / f"{model_type}-weights"
        bare.mkdir()
        for f in folder.iterdir():
            if f.name != "config.json":
                (bare / f.name).write_bytes(f.read_bytes())
        r = run_app("import", str(bare), "-o", str(tmp_path / "bare.yaml"))
        if r.returncode != 0 and "give --layout " in r.stderr:
            heads = str(model.config.num_attention_heads)
            for suggestion in r.stderr.strip().split("give --layout ", 1)[1].rstrip(".").split(" | "):
                args = suggestion.replace("--heads H", f"--heads {heads}").split()
                again = run_app("import", str(bare), "--layout", *args, "-o", str(tmp_path / "bare.yaml"))
                followed += 1
                if again.returncode != 0:
                    wrong.append(f"{model_type} without config.json: --layout {suggestion} suggested, then refused: {again.stderr.strip()[-300:]}")
    print(f"{len(kinds)} model types, {built} built: {traced} traced, {refused} refused; {followed} suggestions followed without config.json")
    assert not wrong, "\n".join(wrong)
    assert built > 100 and traced >= 20
