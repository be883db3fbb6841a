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
from helpers.hf_parity import measured

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
            **(DECODER | {"num_attention_heads": 2}), pad_token_id=0, bos_token_id=2, eos_token_id=2)),  # d = 8: 2 coordinates turned
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
def test_an_encoders_heads_are_exact_from_the_folder_with_no_flag(tmp_path: Path, request, kind: str, pairs: dict[str, str]) -> None:
    torch, model, folder = _saved(tmp_path, kind)
    stages, text = _traced(tmp_path, folder, IDS)
    assert "allow_unread" not in text
    with torch.no_grad():
        out = model(input_ids=torch.tensor([IDS]))
    found = {stage: _gap(stages[stage], getattr(out, field)) for stage, field in pairs.items()}
    measured(request, kind, found)
    assert max(found.values()) <= TOL, (kind, found)


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
    row = next(x for x in json.loads(r.stdout)["layers"] if x["layer"] == "blocks.0")
    top = [c["top"][0] for c in row["cells"]]
    assert len(top) == len(IDS)
    for t, cell in enumerate(top):
        assert cell["id"] == int(np.argmax(probs[t]))
        assert abs(cell["p"] - float(probs[t].max())) <= 1e-9


DECODER_CLASSIFIERS = [  # (class, the module whose float32 steps are lifted, its prefix, the padding id)
    ("GPT2ForSequenceClassification", None, "", 0),
    ("OPTForSequenceClassification", "opt", "", 1),
    ("GPTNeoXForSequenceClassification", "gpt_neox", "GPTNeoX", 0),
    ("LlamaForSequenceClassification", "llama", "Llama", 0),
]


def _lifted(monkeypatch, torch, name: str | None, prefix: str) -> None:
    """Hugging Face's float32 steps in a float64 model (rotary angles, softmax, LLaMA's RMSNorm) as the same formulas in float64."""
    if name is None:
        return
    if name == "opt":  # OPT's softmax only (no rotary, LayerNorm in float64)
        from test_opt import _lift_softmax

        _lift_softmax(monkeypatch, torch)
        return
    import importlib

    from helpers.hf_parity import lift_float32

    module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    lift_float32(monkeypatch, torch, module, prefix)
    if name == "llama":
        monkeypatch.setattr(module.LlamaRMSNorm, "forward",
                            lambda self, x: self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)))


@pytest.mark.parametrize(("kind", "module", "prefix", "pad"), DECODER_CLASSIFIERS, ids=[k for k, *_ in DECODER_CLASSIFIERS])
def test_a_decoders_classifier_scores_the_last_token_that_is_not_pad(tmp_path: Path, monkeypatch, request, kind: str, module: str | None,
                                                                     prefix: str, pad: int) -> None:
    torch, model, folder = _saved(tmp_path, kind)
    model = type(model).from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64).eval()
    _lifted(monkeypatch, torch, module, prefix)
    ids = [5, 17, 42, 8, 3, pad, pad]  # padded at the end: Hugging Face pools position 4
    stages, text = _traced(tmp_path, folder, ids)
    assert "allow_unread" not in text and "head: none" in text
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits
    assert stages["classifier.logits"].shape == tuple(logits.shape) == (1, model.config.num_labels)
    measured(request, kind, _gap(stages["classifier.logits"], logits))
    assert _gap(stages["classifier.logits"], logits) <= TOL
    assert _gap(stages["classifier.token"], stages[[n for n in stages if n.endswith("final_norm")][-1]][:, 4]) == 0.0


@pytest.mark.parametrize("kind", ["GPT2ForSequenceClassification", "OPTForSequenceClassification"])
def test_allow_unread_never_invents_a_head(tmp_path: Path, kind: str) -> None:
    _, _, folder = _saved(tmp_path, kind)
    r = run_app("import", str(folder), "--allow-unread")
    assert r.returncode == 0, r.stderr
    assert "head: none" in r.stdout and "head: tied" not in r.stdout and "classifier:" in r.stdout


def test_an_unknown_head_is_refused_by_name_not_tied(tmp_path: Path) -> None:
    torch, model, folder = _saved(tmp_path, "GPT2ForSequenceClassification")
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    tensors["value_head.weight"] = tensors.pop("score.weight")  # a head no layout reads, and no lm_head
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    for extra in ((), ("--allow-unread",)):
        r = run_app("import", str(folder), *extra)
        assert r.returncode == 2, r.stdout
        assert "value_head.weight" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert "head: tied" not in r.stdout


def test_a_refusal_names_the_tensor_not_a_line_of_an_unwritten_spec(tmp_path: Path) -> None:
    _, transformers = _transformers()
    import torch

    torch.manual_seed(0)
    folder = tmp_path / "neox"
    transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**DECODER)).double().save_pretrained(str(folder))
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    tensors["gpt_neox.final_layer_norm.weight"] = tensors["gpt_neox.final_layer_norm.weight"][:8]  # the wrong shape
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    out = tmp_path / "never.yaml"
    r = run_app("import", str(folder), "-o", str(out))
    assert r.returncode == 2
    assert "gpt_neox.final_layer_norm.weight" in r.stderr and "never.yaml" not in r.stderr and not out.exists()


def test_the_task_heads_settings_are_checked_by_name(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    base = "name: s\ndims: {C: 8, H: 2, F: 16%s}\nseed: 0\nblock:\n  mask: none\n%s\ninput:\n  tokens: [1, 2, 3]\n"
    cases = [("", "  mlm: gelu", "block.mlm"), ("", "  classifier: {task: sequence}", "dims"),
             (", L: 2", "  classifier: {reads: pooled}", "block.classifier.reads"),
             (", L: 2", "  classifier: {reads: first, pad: 0}", "block.classifier.pad"), (", L: 2", "  head: none", "dims.L"),
             ("", "  head: tied\n  mlm: gelu\n  head_softcap: 30", "block.head_softcap"),
             ("", "  head: tied\n  pooler: true\n  head_scale: true", "block.head_scale")]
    for dims, block, field in cases:
        spec.write_text(base % (dims, block))
        r = run_app("validate", str(spec))
        said = (r.stdout + r.stderr).strip()
        assert r.returncode == 2, (block, said)
        assert field in said and len(said.splitlines()) == 1, (block, said)
    spec.write_text(base % (", L: 2", "  classifier: {reads: last, pad: 0}\n  pooler: true"))
    assert run_app("run", str(spec)).returncode == 0


def test_the_classifier_pools_each_samples_last_token_that_is_not_pad_and_differentiates(tmp_path: Path) -> None:
    spec = tmp_path / "cls.yaml"
    spec.write_text("name: cls\ndims: {C: 8, H: 2, F: 16, L: 3}\nseed: 0\nblock:\n  layers: 2\n  final_norm: true\n"
                    "  classifier: {reads: last, pad: 0, hidden: tanh}\ninput:\n  tokens: [[1, 2, 3, 0], [4, 0, 0, 0], [5, 6, 7, 8]]\n")
    r = run_app("run", str(spec), "--json", "--all")
    assert r.returncode == 0, r.stderr
    st = {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}
    last = [2, 0, 3]  # each sample's last token that is not 0
    assert np.array_equal(st["classifier.token"], st["final_norm"][np.arange(3), last])
    assert st["classifier.logits"].shape == (3, 3)
    for text in (spec.read_text(), spec.read_text().replace("{reads: last, pad: 0, hidden: tanh}", "{task: next_sentence}\n  pooler: true")):
        spec.write_text(text)
        r = run_app("grad", str(spec), "--verify")  # the backward pass through the pool, the dense layer and the scores
        assert r.returncode == 0 and "all agree" in r.stdout, r.stdout + r.stderr


def test_a_decoder_the_file_stores_is_read_as_the_head(tmp_path: Path) -> None:
    """bert-base-uncased's own files store cls.predictions.decoder.weight (a copy of the token table): read as a separate head."""
    torch, model, folder = _saved(tmp_path, "BertForPreTraining")
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    with torch.no_grad():
        model.cls.predictions.decoder.weight = torch.nn.Parameter(model.cls.predictions.decoder.weight + 0.01)  # untied, and different
    tensors["cls.predictions.decoder.weight"] = model.cls.predictions.decoder.weight.detach().clone()
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    stages, text = _traced(tmp_path, folder, IDS)
    assert "head: separate" in text
    with torch.no_grad():
        out = model(input_ids=torch.tensor([IDS]))
    assert _gap(stages["mlm.logits"], out.prediction_logits) <= TOL


def test_layers_that_stop_before_the_end_leave_the_heads_out_and_read_whole(tmp_path: Path) -> None:
    _, _, folder = _saved(tmp_path, "BertForPreTraining")
    for layers, why in (("0-0", "the head reads the last layer"), ("1-1", "starts from a hidden state")):
        r = run_app("import", str(folder), "--layers", layers)
        assert r.returncode == 0, r.stderr
        assert why in r.stdout and "head: none" in r.stdout and "allow_unread" not in r.stdout
        assert not any(key in r.stdout for key in ("pooler:", "mlm:", "classifier:", "  L:"))


def test_bert_base_uncaseds_legacy_layernorm_names_are_read(tmp_path: Path) -> None:
    """The first BERT checkpoints name every LayerNorm's weight and bias gamma and beta (Hugging Face renames them on loading)."""
    torch, model, folder = _saved(tmp_path, "BertForPreTraining")
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    renamed = {(k[:-len("weight")] + "gamma" if k.endswith("LayerNorm.weight") else k[:-len("bias")] + "beta" if k.endswith("LayerNorm.bias") else k): v
               for k, v in tensors.items()}
    assert sum(k.endswith(".gamma") for k in renamed) == 2 * ENCODER["num_hidden_layers"] + 2  # each layer's two, the embeddings', the MLM head's
    save_file(renamed, str(folder / "model.safetensors"), metadata={"format": "pt"})
    stages, text = _traced(tmp_path, folder, IDS)
    assert "allow_unread" not in text
    with torch.no_grad():
        out = model(input_ids=torch.tensor([IDS]))
    assert _gap(stages["mlm.logits"], out.prediction_logits) <= TOL and _gap(stages["nsp.logits"], out.seq_relationship_logits) <= TOL


@pytest.mark.parametrize("kind", ["BertForTokenClassification", "RobertaForTokenClassification", "DistilBertForTokenClassification",
                                  "LlamaForTokenClassification", "BertForMultipleChoice"])
def test_a_token_classifier_is_refused_by_name_not_read_as_a_sequence_classifier(tmp_path: Path, kind: str) -> None:
    """The same tensor (classifier.weight, LLaMA's score.weight) scores every position, or one choice: refused, naming architectures."""
    torch, t = _transformers()
    config = {"Bert": lambda: t.BertConfig(**ENCODER), "Roberta": lambda: t.RobertaConfig(**ENCODER, pad_token_id=1),
              "DistilBert": lambda: t.DistilBertConfig(**DISTIL), "Llama": lambda: t.LlamaConfig(**DECODER, pad_token_id=0)}
    family = kind.split("For")[0]
    torch.manual_seed(0)
    getattr(t, kind)(config[family]()).save_pretrained(str(tmp_path / kind))
    for extra in ((), ("--allow-unread",)):
        r = run_app("import", str(tmp_path / kind), *extra)
        assert r.returncode == 2, r.stdout
        assert "architectures" in r.stderr and kind in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_berts_classifier_without_the_pooler_it_reads_is_refused_by_name(tmp_path: Path) -> None:
    _, _, folder = _saved(tmp_path, "BertForSequenceClassification")
    from safetensors.torch import load_file, save_file

    tensors = {k: v for k, v in load_file(str(folder / "model.safetensors")).items() if ".pooler." not in k}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    r = run_app("import", str(folder), "--allow-unread")
    assert r.returncode == 2 and "classifier.weight" in r.stderr and "pooler" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_bare_gpt_neox_model_has_no_head_rather_than_one_it_does_not_hold(tmp_path: Path) -> None:
    torch, t = _transformers()
    torch.manual_seed(0)
    t.GPTNeoXModel(t.GPTNeoXConfig(**(DECODER | {"num_attention_heads": 2}))).save_pretrained(str(tmp_path / "neox"))
    r = run_app("import", str(tmp_path / "neox"))
    assert r.returncode == 0, r.stderr
    assert "head: none" in r.stdout and "allow_unread" not in r.stdout
