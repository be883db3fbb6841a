"""The heads of the checkpoints people download, imported from the folder with no flag and traced against Hugging Face.

With torch and transformers: tiny random models of Hugging Face's own task classes (BertForPreTraining as
bert-base-uncased ships, BertModel with its pooler, RobertaForMaskedLM, DistilBertForMaskedLM, and the sequence
classifiers of BERT, RoBERTa, DistilBERT, GPT-2, OPT, GPT-NeoX and LLaMA) are saved with save_pretrained, imported with
no flags, traced in float64 and compared with the model's own outputs in float64 (prediction_logits, pooler_output,
seq_relationship_logits, logits), to 1e-10: the pooler (pooled), the masked-LM head (mlm.transform, mlm.logits), the
next-sentence head (nsp.logits) and the classifier's scores (classifier.logits, pooled as the model pools: the first
token, or the last that is not pad_token_id).  A checkpoint with a head tracer does not read is refused naming it, and
never given a tied head it does not hold, with or without --allow-unread.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_app

TOL = 1e-10
IDS = [5, 17, 42, 8, 3, 51, 0, 29]  # no 1: RoBERTa's padding id


def _transformers():
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face's heads needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face's heads needs transformers (optional extra)")
    return torch, transformers


ENCODER = {"vocab_size": 60, "hidden_size": 16, "num_attention_heads": 4, "intermediate_size": 40, "num_hidden_layers": 2,
           "max_position_embeddings": 24, "initializer_range": 0.3}
DISTIL = {"vocab_size": 60, "dim": 16, "n_heads": 4, "hidden_dim": 40, "n_layers": 2, "max_position_embeddings": 24, "initializer_range": 0.3}
DECODER = {"vocab_size": 60, "hidden_size": 16, "num_attention_heads": 4, "intermediate_size": 40, "num_hidden_layers": 2,
           "max_position_embeddings": 24, "initializer_range": 0.3}


def _model(kind: str):
    """A tiny random model of Hugging Face's class ``kind``, its LayerNorm weights moved off 1 and 0 (a slip cannot hide)."""
    torch, t = _transformers()
    torch.manual_seed(0)
    make = {
        "BertForPreTraining": lambda: t.BertForPreTraining(t.BertConfig(**ENCODER)),
        "BertModel": lambda: t.BertModel(t.BertConfig(**ENCODER)),
        "BertForMaskedLM": lambda: t.BertForMaskedLM(t.BertConfig(**ENCODER)),
        "RobertaForMaskedLM": lambda: t.RobertaForMaskedLM(t.RobertaConfig(**ENCODER, pad_token_id=1)),
        "DistilBertForMaskedLM": lambda: t.DistilBertForMaskedLM(t.DistilBertConfig(**DISTIL)),
        "BertForSequenceClassification": lambda: t.BertForSequenceClassification(t.BertConfig(**ENCODER, num_labels=3)),
        "RobertaForSequenceClassification": lambda: t.RobertaForSequenceClassification(t.RobertaConfig(**ENCODER, pad_token_id=1, num_labels=3)),
        "DistilBertForSequenceClassification": lambda: t.DistilBertForSequenceClassification(t.DistilBertConfig(**DISTIL, num_labels=3)),
        "GPT2ForSequenceClassification": lambda: t.GPT2ForSequenceClassification(t.GPT2Config(
            vocab_size=60, n_embd=16, n_layer=2, n_head=4, n_positions=24, pad_token_id=0, bos_token_id=2, eos_token_id=2, initializer_range=0.3)),
        "OPTForSequenceClassification": lambda: t.OPTForSequenceClassification(t.OPTConfig(
            vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, ffn_dim=40, max_position_embeddings=24,
            word_embed_proj_dim=16, num_labels=3, pad_token_id=1, bos_token_id=2, eos_token_id=2, init_std=0.3)),
        "GPTNeoXForSequenceClassification": lambda: t.GPTNeoXForSequenceClassification(t.GPTNeoXConfig(
            **DECODER, pad_token_id=0, bos_token_id=2, eos_token_id=2)),
        "LlamaForSequenceClassification": lambda: t.LlamaForSequenceClassification(t.LlamaConfig(
            **DECODER, pad_token_id=0, bos_token_id=2, eos_token_id=2)),
    }[kind]
    model = make().double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() or "ln_" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return torch, model


def _saved(tmp_path: Path, kind: str):
    torch, model = _model(kind)
    folder = tmp_path / kind
    model.save_pretrained(str(folder))
    return torch, model, folder


def _traced(tmp_path: Path, folder: Path, ids: list[int], *args: str) -> tuple[dict[str, np.ndarray], str]:
    spec = tmp_path / "spec.yaml"
    r = run_app("import", str(folder), "-o", str(spec), "--tokens", ",".join(map(str, ids)), *args)
    assert r.returncode == 0, r.stderr
    r = run_app("run", str(spec), "--json", "--all")
    assert r.returncode == 0, r.stderr
    return {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}, spec.read_text()


def _gap(a: np.ndarray, b) -> float:
    b = np.asarray(b.detach().numpy() if hasattr(b, "detach") else b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)))


ENCODER_HEADS = [  # (class, {tracer stage: Hugging Face's output})
    ("BertForPreTraining", {"mlm.logits": "prediction_logits", "nsp.logits": "seq_relationship_logits"}),
    ("BertModel", {"pooled": "pooler_output"}),
    ("BertForMaskedLM", {"mlm.logits": "logits"}),
    ("RobertaForMaskedLM", {"mlm.logits": "logits"}),
    ("DistilBertForMaskedLM", {"mlm.logits": "logits"}),
    ("BertForSequenceClassification", {"classifier.logits": "logits"}),
    ("RobertaForSequenceClassification", {"classifier.logits": "logits"}),
    ("DistilBertForSequenceClassification", {"classifier.logits": "logits"}),
]


@pytest.mark.parametrize(("kind", "pairs"), ENCODER_HEADS, ids=[k for k, _ in ENCODER_HEADS])
def test_an_encoders_heads_are_exact_from_the_folder_with_no_flag(tmp_path: Path, kind: str, pairs: dict[str, str]) -> None:
    torch, model, folder = _saved(tmp_path, kind)
    stages, text = _traced(tmp_path, folder, IDS)
    assert "allow_unread" not in text
    with torch.no_grad():
        out = model(input_ids=torch.tensor([IDS]))
    for stage, field in pairs.items():
        assert _gap(stages[stage], getattr(out, field)) <= TOL, (kind, stage)


def test_the_mlm_transform_is_layernorm_of_the_activated_dense_layer(tmp_path: Path) -> None:
    torch, model, folder = _saved(tmp_path, "BertForPreTraining")
    stages, _ = _traced(tmp_path, folder, IDS)
    with torch.no_grad():
        out = model.bert(input_ids=torch.tensor([IDS]))
        transform = model.cls.predictions.transform(out.last_hidden_state)
    assert _gap(stages["mlm.transform"], transform) <= TOL
    assert _gap(stages["pooled"], out.pooler_output) <= TOL


def test_a_fill_mask_lens_reads_every_layer_through_the_mlm_head(tmp_path: Path) -> None:
    torch, model, folder = _saved(tmp_path, "BertForMaskedLM")
    spec = tmp_path / "spec.yaml"
    assert run_app("import", str(folder), "-o", str(spec), "--tokens", ",".join(map(str, IDS))).returncode == 0
    r = run_app("lens", str(spec), "--json")
    assert r.returncode == 0, r.stderr
    with torch.no_grad():
        out = model(input_ids=torch.tensor([IDS]), output_hidden_states=True)
        probs = torch.softmax(model.cls(out.hidden_states[1]), dim=-1)[0].numpy()  # layer 0's output through the MLM head
    doc = json.loads(r.stdout)
    layers = doc["layers"] if "layers" in doc else doc["rows"]
    row = next(x for x in layers if x.get("layer", x.get("label")) == "blocks.0")
    top = [c["top"][0] for c in row["cells"]]
    for t, cell in enumerate(top):
        assert cell["id"] == int(np.argmax(probs[t]))
        assert abs(cell["p"] - float(probs[t].max())) <= 1e-9
