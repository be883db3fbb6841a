"""The bert and distilbert layouts: Hugging Face BERT, RoBERTa and DistilBERT encoders imported and traced.

With torch and transformers: a tiny random BertModel, RobertaModel and DistilBertModel (2 layers, no
pooler) is saved with save_pretrained, imported with no flags, traced in float64 and compared with
Hugging Face's forward in float64 at the embeddings' LayerNorm, every layer's output and every
layer's attention weights, to 1e-10.  BERT keeps nothing in float32 in a float64 model (nn.LayerNorm,
softmax and GELU follow the model's dtype), so nothing is lifted.  Token types are given to both.

Without torch: the config rules (what is refused, by name) on config.json files written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_app, run_cli
from helpers.hf_parity import measured

from tracer.spec import load_spec

TOL = 1e-10


def _hf(tmp_path: Path, kind: str, pooler: bool = False):
    torch = pytest.importorskip("torch", reason="the comparison with Hugging Face's BERT needs torch (optional extra)")
    transformers = pytest.importorskip("transformers", reason="the comparison with Hugging Face's BERT needs transformers (optional extra)")
    torch.manual_seed(0)
    if kind == "distilbert":
        config = transformers.DistilBertConfig(vocab_size=60, dim=16, n_heads=4, hidden_dim=40, n_layers=2, max_position_embeddings=24,
                                               initializer_range=0.3)
        model = transformers.DistilBertModel(config)
    else:
        cls = {"bert": (transformers.BertConfig, transformers.BertModel), "roberta": (transformers.RobertaConfig, transformers.RobertaModel)}[kind]
        config = cls[0](vocab_size=60, hidden_size=16, num_attention_heads=4, intermediate_size=40, num_hidden_layers=2,
                        max_position_embeddings=24, type_vocab_size=3, initializer_range=0.3)
        model = cls[1](config, add_pooling_layer=pooler)
    with torch.no_grad():  # LayerNorm weights start at 1 and 0: give them values, so that a slip cannot hide
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    folder = tmp_path / kind
    model.save_pretrained(str(folder))
    extra = {} if kind == "distilbert" else {"add_pooling_layer": pooler}
    loaded = type(model).from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float64, **extra).eval()
    return torch, loaded, folder


def imported(tmp_path: Path, ckpt: Path, *args: str) -> Path:
    out = tmp_path / "spec.yaml"
    r = run_app("import", str(ckpt), "-o", str(out), *args)
    assert r.returncode == 0, r.stderr
    return out


def _traced(spec: Path) -> dict[str, np.ndarray]:
    r = run_cli("run", str(spec), "--json", "--all")
    assert r.returncode == 0, r.stderr
    return {s["name"]: np.array(s["values"]) for s in json.loads(r.stdout)["stages"]}


IDS = [5, 17, 42, 8, 3, 51, 0, 29]  # no 1: RoBERTa's padding id (its padding tokens take position padding_idx)
TYPES = [0, 0, 0, 1, 1, 2, 2, 1]


def _parity(tmp_path: Path, kind: str) -> dict[str, float]:
    torch, model, folder = _hf(tmp_path, kind)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))  # layout and every setting from config.json
    kwargs = {"input_ids": torch.tensor([IDS]), "output_hidden_states": True, "output_attentions": True}
    if kind != "distilbert":
        spec.write_text(spec.read_text() + f"  token_types: {json.dumps(TYPES)}\n")
        kwargs["token_type_ids"] = torch.tensor([TYPES])
    st = _traced(spec)
    with torch.no_grad():
        out = model(**kwargs)
    hidden = [h.numpy() for h in out.hidden_states]
    pairs = {"x": hidden[0]}  # the embeddings after their LayerNorm
    for i in range(len(hidden) - 1):
        pairs[f"blocks.{i}.output"] = hidden[i + 1]
        pairs[f"blocks.{i}.attn.weights"] = out.attentions[i].numpy()
    found = {}
    for name, want in pairs.items():
        assert st[name].shape == want.shape, name
        found[name] = float(np.max(np.abs(st[name] - want)))
        assert found[name] <= TOL, (kind, name, found[name])
    np.testing.assert_array_equal(st["blocks.1.output"], st[f"blocks.{len(hidden) - 2}.output"])
    assert np.max(np.abs(out.last_hidden_state.numpy() - st["blocks.1.output"])) <= TOL
    return found


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_encoder_matches_hugging_face_in_float64(tmp_path, kind, request):
    found = _parity(tmp_path, kind)
    assert len(found) == 5
    measured(request, kind, found)


def test_roberta_positions_start_after_the_padding_id(tmp_path):
    torch, model, folder = _hf(tmp_path, "roberta")
    spec_path = imported(tmp_path, folder, "--tokens", "5,6,7")
    spec = load_spec(str(spec_path))
    assert spec.block.position_offset == 2 and spec.block.token_types and spec.block.embedding_norm
    st = _traced(spec_path)
    table = model.embeddings.position_embeddings.weight.detach().numpy()
    np.testing.assert_array_equal(st["position"], table[2:5])  # rows padding_idx + 1 .. padding_idx + T
    # read from row 0, as BERT does, the trace is another model: far from Hugging Face's
    spec_path.write_text(spec_path.read_text().replace("  position_offset: 2", "  position_offset: 0"))
    wrong = _traced(spec_path)
    with torch.no_grad():
        want = model(torch.tensor([[5, 6, 7]])).last_hidden_state.numpy()
    assert np.max(np.abs(wrong["blocks.1.output"] - want)) > 1e-3


def test_a_pooler_is_read_and_traced_not_left_unread(tmp_path):
    torch, model, folder = _hf(tmp_path, "bert", pooler=True)
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, IDS)))
    assert "allow_unread" not in spec.read_text() and "pooler: true" in spec.read_text()
    with torch.no_grad():
        want = model(input_ids=torch.tensor([IDS])).pooler_output.numpy()
    assert np.max(np.abs(_traced(spec)["pooled"] - want)) <= TOL


# -- without torch: the config rules -------------------------------------------------

def _fake_bert(folder: Path, **config) -> Path:
    """A BERT checkpoint of the right names and shapes (zeros), with config.json's keys overridden."""
    st = pytest.importorskip("safetensors.numpy")
    C, F, V = 4, 8, 10
    t = {"embeddings.word_embeddings.weight": (V, C), "embeddings.position_embeddings.weight": (12, C),
         "embeddings.token_type_embeddings.weight": (2, C), "embeddings.LayerNorm.weight": (C,), "embeddings.LayerNorm.bias": (C,)}
    L = "encoder.layer.0."
    for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
        t[f"{L}{name}.weight"], t[f"{L}{name}.bias"] = (C, C), (C,)
    t[f"{L}intermediate.dense.weight"], t[f"{L}intermediate.dense.bias"] = (F, C), (F,)
    t[f"{L}output.dense.weight"], t[f"{L}output.dense.bias"] = (C, F), (C,)
    for name in ("attention.output.LayerNorm", "output.LayerNorm"):
        t[f"{L}{name}.weight"], t[f"{L}{name}.bias"] = (C,), (C,)
    folder.mkdir()
    st.save_file({k: np.full(s, 0.5, dtype=np.float32) for k, s in t.items()}, str(folder / "model.safetensors"))
    base = {"model_type": "bert", "hidden_size": C, "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": F,
            "vocab_size": V, "max_position_embeddings": 12, "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12}
    (folder / "config.json").write_text(json.dumps(base | config))
    return folder


def test_import_reads_a_bert_config(tmp_path):
    spec = load_spec(str(imported(tmp_path, _fake_bert(tmp_path / "ckpt"), "--tokens", "1,2,3")))
    b = spec.block
    assert (b.norm_order, b.mask, b.activation, b.eps, b.embedding_norm, b.token_types, b.position_offset, b.head) == (
        "post", "none", "gelu", 1e-12, True, True, 0, "none")
    assert spec.dims.V_type == 2 and spec.weights["token_type"].source == "file"
    assert spec.weights["embed_norm.gamma"].source == "file"


@pytest.mark.parametrize(("key", "value"), [("position_embedding_type", "relative_key"), ("is_decoder", True),
                                            ("add_cross_attention", True), ("pruned_heads", {"0": [1]}), ("hidden_act", "swish"),
                                            ("model_type", "albert"), ("model_type", "xlm-roberta"), ("hidden_size", 8)])
def test_an_unmodelled_bert_setting_is_refused_by_name(tmp_path, key, value):
    r = run_app("import", str(_fake_bert(tmp_path / "ckpt", **{key: value})), "-o", str(tmp_path / "s.yaml"))
    assert r.returncode == 2, r.stdout
    line = r.stderr.strip()
    assert key in line and "\n" not in line and "Traceback" not in line
    assert not (tmp_path / "s.yaml").exists()


def test_token_types_beyond_the_table_are_refused(tmp_path):
    spec = imported(tmp_path, _fake_bert(tmp_path / "ckpt"), "--tokens", "1,2,3")
    spec.write_text(spec.read_text() + "  token_types: [0, 1, 2]\n")
    r = run_app("run", str(spec))
    assert r.returncode == 2 and "input.token_types" in r.stderr and "V_type = 2" in r.stderr


# -- the embeddings against the oracle, and tracer grad against torch autograd ---------

BERT_SPEC = """\
dims: {B: 2, T: 4, C: 6, H: 2, F: 10, V: 13, T_max: 9, V_type: 3}
seed: 5
block: {norm_order: post, positions: learned, mask: none, activation: gelu, eps: 1e-12, layers: 2, embedding_norm: true, token_types: true, position_offset: 3}
weights:
  embed_norm: {gamma: [0.5, 1.5, -1.0, 2.0, 0.25, 1.0], beta: [0.1, -0.2, 0.3, 0.0, 0.5, -0.4]}
input:
  tokens: [[3, 4, 12, 0], [7, 7, 1, 2]]
  token_types: [[0, 1, 2, 1], [2, 2, 0, 0]]
"""


def test_embeddings_match_the_oracle_and_the_scalar_reference(tmp_path):
    from helpers import oracle

    from tracer.engine.params import load_inputs, load_params
    from tracer.spec import load_spec_text

    spec = load_spec_text(BERT_SPEC)
    assert [s.name for s in spec.steps[:6]] == ["embed", "position", "embeddings", "token_type", "typed", "x"]
    p, inputs = load_params(spec), load_inputs(spec)
    want = oracle.bert_embeddings(p["embedding"], p["position"], inputs["tokens"].tolist(), p["embed_norm.gamma"], p["embed_norm.beta"],
                                  1e-12, offset=3, E_type=p["token_type"], types=inputs["token_types"].tolist())
    path = tmp_path / "bert.yaml"
    path.write_text(BERT_SPEC)
    st = _traced(path)
    assert float(np.max(np.abs(st["x"] - want))) <= 1e-14
    np.testing.assert_array_equal(st["position"], p["position"][3:7])
    r = run_app("run", str(path), "--verify")  # the scalar reference follows the new steps too
    assert r.returncode == 0, r.stderr
    # without types given, every position reads row 0 of the table
    no_types = load_spec_text(BERT_SPEC.replace("  token_types: [[0, 1, 2, 1], [2, 2, 0, 0]]\n", ""))
    assert load_inputs(no_types)["token_types"].tolist() == [[0] * 4] * 2


def test_positions_beyond_the_offset_table_are_a_violation(tmp_path):
    path = tmp_path / "bert.yaml"
    path.write_text(BERT_SPEC.replace("T_max: 9", "T_max: 6"))
    r = run_app("run", str(path))
    assert r.returncode == 1 and "position" in r.stdout
    assert run_app("validate", str(path)).returncode == 1


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_grad_matches_torch_autograd(tmp_path, kind):
    """tracer grad of 0.5 * sum of the encoder output squared: every weight's gradient against autograd through HF's model."""
    from tracer.checkpoints import families
    from tracer.grad.run import GradOptions, grad

    torch, model, folder = _hf(tmp_path, kind)
    ids = [5, 17, 42, 8, 3, 51, 9, 29]  # no padding id (0 for BERT and DistilBERT, 1 for RoBERTa): nn.Embedding freezes its row
    spec_path = imported(tmp_path, folder, "--tokens", ",".join(map(str, ids)))
    kwargs = {"input_ids": torch.tensor([ids])}
    if kind != "distilbert":
        spec_path.write_text(spec_path.read_text() + f"  token_types: {json.dumps(TYPES)}\n")
        kwargs["token_type_ids"] = torch.tensor([TYPES])
    gt = grad(load_spec(str(spec_path)), GradOptions())
    assert gt.loss is not None and gt.loss.name == "sum-squares"
    y = model(**kwargs).last_hidden_state
    loss = 0.5 * (y * y).sum()
    loss.backward()
    assert abs(gt.loss.value - loss.item()) <= TOL * max(1.0, loss.item())
    layout = families.layouts()["distilbert" if kind == "distilbert" else "bert"]
    hf = dict(model.named_parameters())
    compared = 0
    for name, dw in gt.weight_grads.items():
        take, _ = layout.locate(name, set(hf))
        want = hf[take.key].grad.numpy()
        want = want.T if take.transpose else want
        assert np.max(np.abs(dw - want)) <= TOL * max(1.0, float(np.max(np.abs(want)))), name
        compared += 1
    assert compared == len(hf)  # every parameter of the model


def test_roberta_input_holds_no_padding_token(tmp_path):
    """RoBERTa gives a padding token the position padding_idx: an import never draws it, and refuses it in --tokens."""
    _, _, folder = _hf(tmp_path, "roberta")
    spec = load_spec(str(imported(tmp_path, folder)))
    assert spec.input.value != "random" and 1 not in spec.input.value[0] and len(spec.input.value[0]) == 8
    r = run_app("import", str(folder), "--tokens", "3,1,4", "-o", str(tmp_path / "s.yaml"))
    assert r.returncode == 2 and "pad_token_id" in r.stderr and "\n" not in r.stderr.strip()


def test_a_padding_mask_is_an_explicit_mask_matrix(tmp_path):
    """attention_mask [1,1,1,0,0] (two padded keys) is block.mask with those columns 0: the same numbers as Hugging Face."""
    torch, model, folder = _hf(tmp_path, "bert")
    ids, keep = [5, 17, 42, 8, 3], [1, 1, 1, 0, 0]
    spec = imported(tmp_path, folder, "--tokens", ",".join(map(str, ids)))
    rows = json.dumps([keep] * len(ids))
    spec.write_text(spec.read_text().replace("  mask: none ", f"  mask: {rows} "))
    st = _traced(spec)
    with torch.no_grad():
        out = model(torch.tensor([ids]), attention_mask=torch.tensor([keep]), output_attentions=True)
    assert np.max(np.abs(st["blocks.1.output"] - out.last_hidden_state.numpy())) <= TOL
    assert np.max(np.abs(st["blocks.0.attn.weights"] - out.attentions[0].numpy())) <= TOL
    assert np.all(st["blocks.0.attn.weights"][..., 3:] == 0)


def test_one_layer_from_a_hidden_state_matches_that_layer(tmp_path):
    """--layers 1: no embeddings (no token types, no embedding norm), the layer's own output as Hugging Face's BertLayer gives it."""
    torch, model, folder = _hf(tmp_path, "bert")
    spec_path = imported(tmp_path, folder, "--layers", "1")
    spec = load_spec(str(spec_path))
    assert not spec.block.token_types and not spec.block.embedding_norm and spec.dims.V_type is None
    st = _traced(spec_path)
    with torch.no_grad():
        out = model.encoder.layer[1](torch.tensor(st["input"]))
    out = out[0] if isinstance(out, tuple) else out
    assert np.max(np.abs(st["output"] - out.numpy())) <= TOL
