"""tracer diff sees every setting: each field of the spec format, changed alone, is a named difference.

The lists of what to change are checked against the spec's own dataclasses (spec.Spec, spec.BlockSpec and
blocks.Step): a field added to any of them and not added here fails the first tests, and the diff must then name it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import PRE, PRE_TEXT, compared, run_app, write_spec

from tracer.compare import align, explain, judge, settings
from tracer.messages import render
from tracer.model.blocks import STEP_SETTINGS, Step
from tracer.spec import Spec, load_spec_text
from tracer.spec.keys import BLOCK_KEYS, STEP_KEYS
from tracer.spec.typed import SPEC_NOT_SETTINGS, SPEC_SETTINGS, BlockSpec

# A block whose weights are drawn, so that any setting may change alone.
BLOCK: dict[str, Any] = {"norm_order": "pre", "mask": "causal", "eps": 1e-5, "final_norm": False}
BASE: dict[str, Any] = {"name": "base", "dims": {"C": 4, "H": 2, "F": 6}, "seed": 0, "block": BLOCK,
                        "input": {"tokens": [[0, 1, 2, 3]]}}
ROTARY = {**BLOCK, "positions": "rotary"}
WINDOW_2 = [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]  # each position reads itself and the one before

# Each block setting: (the block's settings in A, in B); the field diff must name.
BLOCK_VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "norm_order": (BLOCK, {**BLOCK, "norm_order": "post"}, "block.norm_order"),
    "mask": (BLOCK, {**BLOCK, "mask": "none"}, "block.mask"),
    "eps": (BLOCK, {**BLOCK, "eps": 1e-3}, "block.eps"),
    "final_norm": (BLOCK, {**BLOCK, "final_norm": True}, "block.final_norm"),
    "positions": (BLOCK, {**BLOCK, "positions": "sinusoidal"}, "block.positions"),
    "mask_matrix": (BLOCK, {**BLOCK, "mask": WINDOW_2}, "block.mask"),  # an explicit matrix: compared as the mask
    "window": (BLOCK, {**BLOCK, "mask": {"causal": True, "window": 2}}, "block.mask"),  # a sliding window: the mask too
    "layers": (BLOCK, {**BLOCK, "layers": 2}, "block.layers"),
    "norm": (BLOCK, {**BLOCK, "norm": "rmsnorm"}, "block.norm"),
    "activation": (BLOCK, {**BLOCK, "activation": "gelu"}, "block.activation"),
    "position_base": (ROTARY, {**ROTARY, "position_base": 500}, "block.position_base"),
    "head": (BLOCK, {**BLOCK, "head": "tied"}, "block.head"),
    "rotary_pairing": (ROTARY, {**ROTARY, "rotary_pairing": "half"}, "block.rotary_pairing"),
    "embedding_norm": (BLOCK, {**BLOCK, "embedding_norm": True}, "block.embedding_norm"),
    "token_types": (BLOCK, {**BLOCK, "token_types": True}, "block.token_types"),
    "position_offset": ({**BLOCK, "positions": "learned"}, {**BLOCK, "positions": "learned", "position_offset": 2}, "block.position_offset"),
    "rope_scaling": (ROTARY, {**ROTARY, "rope_scaling": {"type": "linear", "factor": 4}}, "block.rope_scaling"),
    "rotary_dim": (ROTARY, {**ROTARY, "rotary_dim": 2}, "block.rotary_dim"),
    "head_bias": ({**BLOCK, "head": "tied"}, {**BLOCK, "head": "tied", "head_bias": True}, "block.head_bias"),
    "experts": ({**BLOCK, "ffn": {"experts": 2, "top_k": 1}}, {**BLOCK, "ffn": {"experts": 3, "top_k": 1}}, "block.experts"),
    "top_k": ({**BLOCK, "ffn": {"experts": 3, "top_k": 1}}, {**BLOCK, "ffn": {"experts": 3, "top_k": 2}}, "block.top_k"),
    "embedding_scale": (BLOCK, {**BLOCK, "embedding_scale": True}, "block.embedding_scale"),  # Gemma's embeddings times sqrt(C)
    "qk_norm": (BLOCK, {**BLOCK, "qk_norm": True}, "block.qk_norm"),  # Qwen3's per-head q/k RMSNorm
    "attention_scale": (BLOCK, {**BLOCK, "attention_scale": 1}, "block.attention_scale"),  # T5's scores QK^T, no 1/sqrt(d)
    "attention_softcap": (BLOCK, {**BLOCK, "attention_softcap": 0.5}, "block.attention_softcap"),  # Gemma 2's capped scores
    "head_softcap": ({**BLOCK, "head": "tied"}, {**BLOCK, "head": "tied", "head_softcap": 0.5}, "block.head_softcap"),  # capped logits
    "sliding_layers": ({**BLOCK, "layers": 2, "mask": {"causal": True, "window": 2}},
                       {**BLOCK, "layers": 2, "mask": {"causal": True, "window": 2, "sliding_layers": [1]}}, "block.sliding_layers"),
    "relative": ({**BLOCK, "positions": "relative"}, {**BLOCK, "positions": "relative", "relative": {"buckets": 8, "max_distance": 16}},
                 "block.relative"),  # T5's relative position bias: its buckets
    "head_scale": ({**BLOCK, "head": "tied"}, {**BLOCK, "head": "tied", "head_scale": True}, "block.head_scale"),  # T5's tied head, C^-1/2
    "embedding_multiplier": (BLOCK, {**BLOCK, "embedding_multiplier": 2.0}, "block.embedding_multiplier"),  # Granite's embeddings times m
    "residual_multiplier": (BLOCK, {**BLOCK, "residual_multiplier": 0.5}, "block.residual_multiplier"),  # Granite's sublayer outputs times m
    "logits_divisor": ({**BLOCK, "head": "tied"}, {**BLOCK, "head": "tied", "logits_divisor": 4.0}, "block.logits_divisor"),  # Granite's logits / s
    "qk_projection": ({**BLOCK, "qk_norm": True}, {**BLOCK, "qk_norm": "projection"}, "block.qk_projection"),  # OLMo 2's q/k norm, whole projections
    "rotary_layers": ({**ROTARY, "layers": 2}, {**ROTARY, "layers": 2, "rotary_layers": [0]}, "block.rotary_layers"),  # SmolLM3's no_rope_layers
    "logit_scale": ({**BLOCK, "head": "tied"}, {**BLOCK, "head": "tied", "logit_scale": 0.5}, "block.logit_scale"),  # Cohere's scaled logits
    "local_position_base": ({**ROTARY, "mask": {"causal": True, "window": 2}},  # Gemma 3's sliding layers' own rotary base
                            {**ROTARY, "mask": {"causal": True, "window": 2}, "local_position_base": 500}, "block.local_position_base"),
    "pooler": (BLOCK, {**BLOCK, "pooler": True}, "block.pooler"),  # BERT's pooler
    "classifier": ({**BLOCK, "classifier": {"reads": "first"}}, {**BLOCK, "classifier": {"reads": "last"}}, "block.classifier"),
    "mlm": ({**BLOCK, "head": "tied", "mlm": "gelu"}, {**BLOCK, "head": "tied", "mlm": "relu"}, "block.mlm"),  # a masked-LM head's activation
}
BLOCK_DIMS: dict[str, dict[str, int]] = {"classifier": {"L": 2}}  # the dims a variant's setting needs (a classifier's classes)
# More than one value of a setting: the functions differ, so the diff must too.
MORE_VARIANTS: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    ({**BLOCK, "activation": "gelu"}, {**BLOCK, "activation": "gelu_tanh"}, "block.activation"),
    (BLOCK, {**BLOCK, "activation": "swiglu"}, "block.activation"),  # the gated FFN
    ({**BLOCK, "head": "tied"}, {**BLOCK, "head": "separate"}, "block.head"),
    (BLOCK, {**BLOCK, "norm": "batchnorm"}, "block.norm"),
    ({**BLOCK, "norm_order": "sandwich"}, {**BLOCK, "norm_order": "post_sublayer"}, "block.norm_order"),  # OLMo 2's: no norm before a sublayer
    ({**BLOCK, "positions": "sinusoidal"}, {**BLOCK, "positions": "sinusoidal", "position_base": 100}, "block.position_base"),
    ({**BLOCK, "positions": "learned"}, {**BLOCK, "positions": "none"}, "block.positions"),
    ({**ROTARY, "rope_scaling": {"type": "linear", "factor": 4}}, {**ROTARY, "rope_scaling": {"type": "llama3", "factor": 4, "low_freq_factor": 1,
      "high_freq_factor": 4, "original_max_position_embeddings": 8}}, "block.rope_scaling"),
    (BLOCK, {**BLOCK, "norm_order": "parallel"}, "block.norm_order"),  # the parallel residual (GPT-NeoX)
    ({**BLOCK, "norm_order": "parallel"}, {**BLOCK, "norm_order": "parallel_shared"}, "block.norm_order"),  # one norm (Phi)
    ({**BLOCK, "activation": "swiglu"}, {**BLOCK, "activation": "geglu"}, "block.activation"),  # Gemma's gate: the tanh GELU
    ({**BLOCK, "norm": "rmsnorm"}, {**BLOCK, "norm": "rmsnorm_offset"}, "block.norm"),  # Gemma's (1 + gamma)
]
ENC_DEC: dict[str, Any] = {"name": "seq2seq", "model": "encoder-decoder", "dims": {"C": 4, "H": 2, "F": 6}, "seed": 0,
                           "encoder": {"norm_order": "pre"}, "decoder": {"norm_order": "pre", "head": "tied"},
                           "input": {"source": [[0, 1, 2]], "target": [[3, 1, 2, 0]]}}
# Each spec setting: (spec A, spec B, the field diff must name, the diff's options).
SPEC_VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any], str, dict[str, Any]]] = {
    "dims": (BASE, {**BASE, "dims": {"C": 4, "H": 1, "F": 6}}, "dims.H", {}),
    "block": (BASE, {**BASE, "block": {**BLOCK, "eps": 1e-3}}, "block.eps", {}),
    "encoder": (ENC_DEC, {**ENC_DEC, "encoder": {"norm_order": "pre", "eps": 1e-3}}, "encoder.eps", {}),
    "model": ({**ENC_DEC, "decoder": {"norm_order": "pre", "head": "tied"}},
              {**{k: v for k, v in ENC_DEC.items() if k not in ("model", "encoder", "decoder")}, "block": {"norm_order": "pre", "head": "tied"},
               "input": {"tokens": [[3, 1, 2, 0]]}}, "model", {}),
    "dtype": (BASE, {**BASE, "dtype": "float32"}, "dtype", {}),
    "init": (BASE, {**BASE, "init": "xavier"}, "init", {}),
    "input": (BASE, {**BASE, "input": {"tokens": [[0, 1, 2, 2]]}}, "input", {}),
    "token_types": ({**BASE, "block": {**BLOCK, "token_types": True}},
                    {**BASE, "block": {**BLOCK, "token_types": True}, "input": {"tokens": [[0, 1, 2, 3]], "token_types": [[0, 0, 1, 1]]}}, "token_types", {}),
    "source": (ENC_DEC, {**ENC_DEC, "input": {"source": [[0, 1, 1]], "target": [[3, 1, 2, 0]]}}, "source", {}),
    "loss": ({**BASE, "block": {**BLOCK, "head": "tied"}}, {**BASE, "block": {**BLOCK, "head": "tied"}, "loss": "sum-squares"}, "loss",
             {"grad": True}),
    "targets": ({**BASE, "block": {**BLOCK, "head": "tied"}},
                {**BASE, "block": {**BLOCK, "head": "tied"}, "input": {"tokens": [[0, 1, 2, 3]], "targets": [[3, 3, 3, 3]]}}, "targets",
                {"grad": True}),
}


def _write(tmp_path, doc: dict[str, Any], name: str) -> str:
    return str(write_spec(tmp_path, json.dumps(doc, ensure_ascii=False), name))


def _named(tmp_path, a: dict[str, Any], b: dict[str, Any], field: str, **options: Any) -> judge.DiffResult:
    """Diff A and B: exit 1, and ``field`` named in the settings rows, the JSON and the closing line."""
    r = compared(_write(tmp_path, a, "a.yaml"), _write(tmp_path, b, "b.yaml"), keep_going=True, **options)
    assert r.exit_code == 1
    assert field in [s.field for s in r.settings], [s.field for s in r.settings]
    assert field in [d["field"] for d in r.as_json()["settings"]["differences"]]
    assert field in render(r.summary())
    return r


def test_every_field_of_a_spec_is_a_setting_or_said_to_be_compared_otherwise():
    assert set(SPEC_SETTINGS) | set(SPEC_NOT_SETTINGS) == set(Spec._fields)
    assert not set(SPEC_SETTINGS) & set(SPEC_NOT_SETTINGS)


def test_the_variants_cover_every_setting_of_the_spec_format():
    assert set(BLOCK_VARIANTS) == set(BlockSpec._fields)  # a new block setting needs a variant here
    assert set(SPEC_VARIANTS) == set(SPEC_SETTINGS)  # a new spec setting too
    # and the YAML keys a spec may write are those fields (block.steps are steps; a step's index is its start:stop)
    assert set(BLOCK_KEYS) - {"steps", "ffn"} <= set(BlockSpec._fields)  # ffn: {experts, top_k} sets two
    assert set(STEP_KEYS) - {"name", "op", "in", "weights", "meaning", "index"} <= set(STEP_SETTINGS)


@pytest.mark.parametrize("key", list(BLOCK_VARIANTS))
def test_each_block_setting_changed_alone_is_named(tmp_path, key):
    a, b, field = BLOCK_VARIANTS[key]
    base = {**BASE, "dims": {**BASE["dims"], **BLOCK_DIMS.get(key, {})}}
    _named(tmp_path, {**base, "block": a}, {**base, "block": b}, field)


@pytest.mark.parametrize("a, b, field", MORE_VARIANTS)
def test_each_value_of_a_setting_is_a_difference(tmp_path, a, b, field):
    _named(tmp_path, {**BASE, "block": a}, {**BASE, "block": b}, field)


@pytest.mark.parametrize("key", list(SPEC_VARIANTS))
def test_each_spec_setting_changed_alone_is_named(tmp_path, key):
    a, b, field, options = SPEC_VARIANTS[key]
    _named(tmp_path, a, b, field, **options)


def test_each_step_setting_changed_alone_is_named():
    """Every field of a Step but what names it and what it reads (blocks.STEP_SETTINGS, derived from Step):
    a step that differs in it alone differs, and the structure line names it."""
    assert set(STEP_SETTINGS) == set(Step._fields) - {"name", "meaning", "op", "inputs", "weights"}
    spec = load_spec_text(PRE_TEXT)
    steps = spec.steps
    def mask_of(step: Step) -> Any:  # what of_spec compares an attention's mask by: what its fields make
        return (step.mask, step.window)

    for key in STEP_SETTINGS:
        i = next(i for i, s in enumerate(steps) if s.op == "mha")  # any step will do: the field alone changes
        changed = steps[i]._replace(**{key: "other" if key != "mask" else "none"})
        other = steps[:i] + (changed,) + steps[i + 1:]
        named = "mask" if settings.mask_fields({key: None}) else key  # a window is compared as the mask it makes
        theirs = settings.step_settings(other, mask_of, None)
        mine = settings.step_settings(steps, mask_of, None)
        rows = align.step_rows(steps, other, mine, theirs)
        row = next(r for r in rows if r.name == changed.name)
        assert row.status == "differs" and row.changed == [named], key
        assert row.expr_a() != row.expr_b()
        lines = [render(line) for line in explain.structure_lines(steps, other, mine, theirs)]
        assert any(f"{named}: " in line for line in lines), (key, lines)


def test_step_settings_written_in_custom_steps_are_named(tmp_path):
    """A step's own settings in block.steps: a layer norm's axis, a select's slice, a linear's width, an activation."""
    steps = [{"name": "norm1", "op": "layer_norm", "in": "x", "weights": "norm1"},
             {"name": "part", "op": "select", "in": "norm1", "axis": "C", "start": 0, "stop": 2},
             {"name": "wide", "op": "linear", "in": "norm1", "weights": "lin", "out": "F"},
             {"name": "hidden", "op": "ffn_hidden", "in": "norm1", "weights": "ffn", "activation": "relu"},
             {"name": "output", "op": "identity", "in": "norm1"}]
    base = {**BASE, "block": {"steps": steps, "eps": 1e-5}}
    for i, key, value in ((0, "axis", "T"), (1, "start", 1), (1, "stop", 1), (2, "out", "C"), (3, "activation", "gelu")):
        changed = [dict(s) for s in steps]
        changed[i][key] = value
        if key == "stop":
            changed[i]["start"] = 0
        r = compared(_write(tmp_path, base, "a.yaml"), _write(tmp_path, {**base, "block": {"steps": changed, "eps": 1e-5}}, "b.yaml"),
                      keep_going=True)
        assert r.exit_code == 1, key
        doc = r.as_json()
        row = next(s for s in doc["structure"]["steps"] if s["name"] == steps[i]["name"])
        assert row["status"] == "differs" and key in row["settings_differ"], (key, row)
        assert any(f"{key}: " in line for line in doc["structure"]["differences"]), (key, doc["structure"]["differences"])


# -- a mask is its matrix ----------------------------------------------------------------------

def test_a_causal_mask_written_out_is_the_causal_mask(tmp_path):
    lower = [[1 if j <= i else 0 for j in range(3)] for i in range(3)]
    written = write_spec(tmp_path, PRE_TEXT.replace("mask: causal", f"mask: {lower}"), "written.yaml")
    r = run_app("diff", PRE, str(written), "--json")
    assert r.returncode == 0, r.stdout[-600:]
    doc = json.loads(r.stdout)
    assert doc["settings"]["differences"] == [] and doc["structure"]["same"]
    # and a saved trace of either is the same as the other spec
    saved = tmp_path / "written.json"
    saved.write_text(run_app("run", str(written), "--json").stdout, encoding="utf-8")
    assert run_app("diff", str(saved), PRE).returncode == 0
    assert run_app("diff", PRE, str(saved)).returncode == 0


def test_a_sliding_window_is_the_same_as_its_matrix_written_out(tmp_path):
    """mask: {causal: true, window: 2} and the band it makes, written as a 0/1 matrix: one function, exit 0."""
    a = write_spec(tmp_path, PRE_TEXT.replace("mask: causal", "mask: {causal: true, window: 2}"), "a.yaml")
    b = write_spec(tmp_path, PRE_TEXT.replace("mask: causal", "mask: [[1, 0, 0], [1, 1, 0], [0, 1, 1]]"), "b.yaml")
    r = run_app("diff", str(a), str(b), "--json")
    assert r.returncode == 0, r.stdout
    assert json.loads(r.stdout)["settings"]["differences"] == []


def test_a_mask_that_is_not_causal_is_named_by_its_matrix(tmp_path):
    window = write_spec(tmp_path, PRE_TEXT.replace("mask: causal", "mask: [[1, 0, 0], [1, 1, 0], [0, 1, 1]]"), "window.yaml")
    r = run_app("diff", PRE, str(window), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert {"field": "block.mask", "a": "causal", "b": "causal, window 2"} in doc["settings"]["differences"]
    assert "attention = MHA(norm1) in A, MHA(norm1); mask causal, window 2 in B (mask: causal | causal, window 2)" in doc["structure"]["differences"]
    assert settings.describe_mask(None) == "none"


# -- by hand, as a user sees it: the chapter's block against each one-setting variant ----------------------

CHAPTER_VARIANTS = {
    "activation": ("  eps: 1e-5\n", "  eps: 1e-5\n  activation: gelu\n", "block.activation", "GELU(norm2 W1 + b1)"),
    "gelu_tanh": ("  eps: 1e-5\n", "  eps: 1e-5\n  activation: gelu_tanh\n", "block.activation", "GELU_tanh(norm2 W1 + b1)"),
    "head": ("  eps: 1e-5\n", "  eps: 1e-5\n  head: tied\n", "block.head", "logits = output E^T only in B"),
    "init": ("name:", "init: xavier\nname:", "init", ""),
    "mask": ("mask: causal", "mask: none", "block.mask", "MHA(norm1); mask none"),
    "eps": ("eps: 1e-5", "eps: 1e-3", "block.eps", ""),
    "gated": ("  eps: 1e-5\n", "  eps: 1e-5\n  activation: swiglu\n", "block.activation", "SiLU(norm2 W1 + b1) * (norm2 W3 + b3)"),
}


@pytest.mark.parametrize("key", list(CHAPTER_VARIANTS))
def test_the_chapter_block_against_a_one_setting_variant(tmp_path, key):
    old, new, field, words = CHAPTER_VARIANTS[key]
    assert old in PRE_TEXT
    text = PRE_TEXT.replace(old, new, 1)
    if key == "gated":  # SwiGLU's third matrix, which the ReLU block does not have
        text = text.replace("    b2: zeros\n", "    b2: zeros\n    w3: [[1, 0, 1], [0, 1, 0]]\n", 1)
    variant = write_spec(tmp_path, text, f"{key}.yaml")
    r = run_app("diff", PRE, str(variant))
    assert r.returncode == 1, r.stdout[-800:]
    assert field in r.stdout and words in r.stdout
    doc = json.loads(run_app("diff", PRE, str(variant), "--json").stdout)
    assert field in [d["field"] for d in doc["settings"]["differences"]] and doc["same"] is False


def test_the_chapter_block_with_rms_norm_names_the_norm(tmp_path):
    text = PRE_TEXT.replace("  eps: 1e-5\n", "  eps: 1e-5\n  norm: rmsnorm\n").replace(
        "  norm1: {gamma: ones, beta: zeros}\n  norm2: {gamma: ones, beta: zeros}", "  norm1: {gamma: ones}\n  norm2: {gamma: ones}")
    r = run_app("diff", PRE, str(write_spec(tmp_path, text, "rms.yaml")))
    assert r.returncode == 1
    assert "norm1 = LayerNorm[norm1](x) in A, RMSNorm[norm1](x) in B" in r.stdout
    assert "settings differ: block.norm" in " ".join(r.stdout.split())


def test_a_trace_saved_before_traces_recorded_every_setting_says_what_it_cannot_compare(tmp_path):
    doc = json.loads(run_app("run", PRE, "--json").stdout)
    doc["block"] = {k: doc["block"][k] for k in ("norm_order", "mask", "eps", "final_norm", "positions")}
    del doc["init"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc), encoding="utf-8")
    r = compared(str(old), PRE)
    assert r.exit_code == 0
    note = " ".join(render(n) for n in r.notes)
    assert "saved before traces recorded every setting" in note and "block.activation" in note and "init" in note


def test_an_older_trace_of_a_tied_head_is_the_same_as_its_spec(tmp_path):
    """The head's tied | separate is a block setting an older trace does not record: not a difference, a note."""
    tied = write_spec(tmp_path, PRE_TEXT.replace("  eps: 1e-5\n", "  eps: 1e-5\n  head: tied\n"), "tied.yaml")
    doc = json.loads(run_app("run", str(tied), "--json").stdout)
    doc["block"] = {k: doc["block"][k] for k in ("norm_order", "mask", "eps", "final_norm", "positions")}
    del doc["init"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc), encoding="utf-8")
    r = compared(str(old), str(tied))
    assert r.exit_code == 0 and r.structure == [] and r.settings == []
    assert "block.head" in " ".join(render(n) for n in r.notes)
