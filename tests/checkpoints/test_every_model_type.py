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
