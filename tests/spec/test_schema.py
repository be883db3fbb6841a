"""The JSON Schema of the spec (tracer/schema/spec.schema.json, printed by `tracer schema`).

An editor validates and completes a spec with it as the student types, so it must accept every spec
tracer accepts that we ship, reject the mistakes tracer's own validator rejects, name the same keys
and choices as tracer/spec.py, and be a valid JSON Schema itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO, SPECS, example_module, run_app

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema checks the spec schema (pip install -e '.[test]')")

from tracer import spec  # noqa: E402
from tracer.errors import SpecError  # noqa: E402
from tracer.model import blocks, ops  # noqa: E402
from tracer.model.activations import spec_activations  # noqa: E402
from tracer.spec import yamlio  # noqa: E402
from tracer.spec.presets import PRESETS  # noqa: E402
from tracer.spec.schema import spec_schema_text  # noqa: E402

SCHEMA_FILE = REPO / "tracer" / "spec" / "schema" / "spec.schema.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)
DEFS = SCHEMA["definitions"]


def doc_of(text: str, name: str = "spec.yaml"):
    """The spec as plain values, read by tracer's own YAML reader (as tracer reads it: 1e-5 is a number)."""
    return yamlio.load(text, name)[0]


def schema_errors(text: str) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(doc_of(text))]


# -- the schema itself ------------------------------------------------------------------------------

def test_the_schema_is_a_valid_draft_7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_every_property_has_a_description_for_the_editor_to_show() -> None:
    missing = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for key, sub in (node.get("properties") or {}).items():
                if isinstance(sub, dict) and "description" not in sub and "$ref" not in sub:
                    missing.append(f"{path}.{key}")
            for key, sub in node.items():
                if key not in ("if", "then", "else", "not", "allOf", "dependencies"):  # conditions, not what the editor shows
                    walk(sub, f"{path}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{path}[{i}]")

    walk(SCHEMA, "#")
    assert missing == []


def test_tracer_schema_prints_the_shipped_file() -> None:
    r = run_app("schema")
    assert r.returncode == 0, r.stderr
    assert r.stdout == SCHEMA_FILE.read_text(encoding="utf-8") == spec_schema_text()
    jsonschema.Draft7Validator.check_schema(json.loads(r.stdout))


def test_tracer_schema_imports_no_numpy() -> None:
    code = ("import sys\nsys.argv = ['tracer', 'schema']\nfrom tracer.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "sys.stderr.write(f'exit={code} numpy={\"numpy\" in sys.modules}\\n')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.stderr.strip().endswith("exit=0 numpy=False"), r.stderr
    assert json.loads(r.stdout)["title"] == "tracer spec"


def test_the_schema_ships_as_package_data() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    data = project["tool"]["setuptools"]["package-data"]
    assert any(Path("tracer/spec/schema/spec.schema.json").match(f"{pkg.replace('.', '/')}/{pattern}")
               for pkg, patterns in data.items() for pattern in patterns)


# -- the schema names what tracer/spec.py accepts ---------------------------------------------------

def enum(node: dict) -> list:
    return list(node["enum"])


def test_the_keys_are_the_validators_keys() -> None:
    assert list(SCHEMA["properties"]) == list(spec.TOP_KEYS)
    assert list(DEFS["dims"]["properties"]) == list(spec.DIM_KEYS)
    assert list(DEFS["block"]["properties"]) == list(spec.BLOCK_KEYS)
    assert list(DEFS["step"]["properties"]) == list(spec.STEP_KEYS)
    assert list(DEFS["input"]["properties"]) == list(spec.INPUT_KEYS)
    assert list(DEFS["seq2seq_input"]["properties"]) == list(spec.SEQ2SEQ_INPUT_KEYS)


def test_the_choices_are_the_validators_choices() -> None:
    block = DEFS["block"]["properties"]
    assert enum(block["positions"]) == list(spec.POSITIONS)
    assert enum(block["activation"]) == list(spec_activations()) == enum(DEFS["step"]["properties"]["activation"])
    assert enum(block["norm"]) == list(blocks.NORMS)
    assert enum(DEFS["keyword"]) == list(spec.KEYWORDS)
    assert enum(DEFS["step"]["properties"]["op"]) == [op for op, info in ops.OPS.items() if info.user]
    axes = {rule["if"]["properties"]["op"]["const"]: enum(rule["then"]["properties"]["axis"])
            for rule in DEFS["step"]["allOf"] if "const" in rule["if"]["properties"]["op"] and "axis" in rule["then"].get("properties", {})}
    assert axes == {op: list(info.axes) for op, info in ops.OPS.items() if info.axes}
    assert enum(block["rotary_pairing"]) == list(spec.PAIRINGS)
    assert enum(SCHEMA["properties"]["loss"]) == list(spec.LOSSES)


def test_the_checkpoint_fields_are_the_validators() -> None:
    from tracer.checkpoints import families

    assert list(DEFS["model_file"]["properties"]) == list(spec.MODEL_FILE_KEYS)
    assert list(DEFS["file_weight"]["properties"]) == list(spec.FILE_KEYS)
    assert enum(DEFS["model_file"]["properties"]["layout"]) == list(families.names())


def test_every_weight_key_of_every_group_is_named() -> None:
    group = DEFS["group"]["properties"]
    for kind, keys in ops.WEIGHT_GROUPS.items():
        assert set(keys) <= set(group), kind
    assert set(DEFS["attn_group"]["properties"]) == set(ops.WEIGHT_GROUPS["attn"]) | set(ops.QK_NORM_KEYS)  # block.qk_norm's two
    assert set(ops.QK_NORM_KEYS) <= set(group)
    assert set(DEFS["ffn_group"]["properties"]) == set(ops.WEIGHT_GROUPS["ffn_gated"])
    assert set(DEFS["norm_group"]["properties"]) == set(ops.WEIGHT_GROUPS["norm"])
    assert set(ops.TABLES) <= set(DEFS["weights"]["properties"])


# -- every spec we ship validates -------------------------------------------------------------------

SHIPPED = sorted([*SPECS.rglob("*.yaml"), *EXAMPLES.rglob("*.yaml")])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_shipped_spec_validates(path: Path) -> None:
    assert schema_errors(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_validates(name: str) -> None:
    assert schema_errors(PRESETS[name].text) == []


def test_shipped_specs_are_found() -> None:
    assert len(SHIPPED) >= 25 and SPECS / "ch17-prenorm.yaml" in SHIPPED


# -- it rejects what the validator rejects ----------------------------------------------------------

MIN = "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n"
STEPS = MIN + "block:\n  steps:\n    - {name: norm1, op: layer_norm, in: x, weights: norm1}\n"
SEQ2SEQ = "model: encoder-decoder\ndims: {C: 2, H: 2, F: 3}\ninput: {source: [0, 1], target: [1, 0]}\nseed: 0\n"
ROTARY = "dims: {C: 4, H: 2, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n"  # d = 2: rotary turns pairs
HEAD = MIN + "block: {head: tied}\n"

REJECTED = [
    # required fields
    ("missing dims", "input: {tokens: [0, 1]}\nseed: 0\n"),
    ("missing input", "dims: {C: 2, H: 2, F: 3}\nseed: 0\n"),
    ("missing dimension F", "dims: {C: 2, H: 2}\ninput: {tokens: [0, 1]}\nseed: 0\n"),
    ("step without in", MIN + "block:\n  steps:\n    - {name: norm1, op: layer_norm, weights: norm1}\n"),
    ("encoder-decoder without target", "model: encoder-decoder\ndims: {C: 2, H: 2, F: 3}\ninput: {source: [0, 1]}\nseed: 0\n"),
    ("select without axis", STEPS + "    - {name: first, op: select, in: norm1, index: 0}\n"),
    ("mha without weights", STEPS + "    - {name: attention, op: mha, in: norm1}\n"),
    # unknown keys
    ("unknown top key", MIN + "blok: {mask: causal}\n"),
    ("unknown dims key", "dims: {C: 2, H: 2, F: 3, Tmax: 4}\ninput: {tokens: [0, 1]}\nseed: 0\n"),
    ("unknown block key", MIN + "block: {normorder: pre}\n"),
    ("unknown input key", "dims: {C: 2, H: 2, F: 3}\ninput: {token: [0, 1]}\nseed: 0\n"),
    ("unknown weight in attn", MIN + "weights:\n  attn: {wq: identity}\n"),
    ("unknown weight in ffn", MIN + "weights:\n  ffn: {w_1: identity}\n"),
    ("unknown step field", STEPS + "    - {name: r, op: add, in: [x, norm1], scale: 2}\n"),
    # wrong types
    ("section not a mapping", MIN + "block: [pre]\n"),
    ("weight group not a mapping", MIN + "weights: {ffn: [1, 2]}\n"),
    ("dimension not whole", "dims: {C: 2.5, H: 1, F: 3}\ninput: {tokens: [0]}\nseed: 0\n"),
    ("dimension yes", "dims: {C: yes, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n"),
    ("dimension zero", "dims: {C: 2, H: 2, F: 0}\ninput: {tokens: [0]}\nseed: 0\n"),
    ("dimension too big", "dims: {C: 2, H: 2, F: 10000001}\ninput: {tokens: [0]}\nseed: 0\n"),
    ("seed negative", MIN.replace("seed: 0", "seed: -1")),
    ("seed yes", MIN.replace("seed: 0", "seed: yes")),
    ("allow_nonfinite maybe", MIN + "allow_nonfinite: maybe\n"),
    ("name not text", MIN + "name: [a]\n"),
    ("eps yes", MIN + "block: {eps: yes}\n"),
    ("eps zero", MIN + "block: {eps: 0}\n"),
    ("eps negative", MIN + "block: {eps: -1e-5}\n"),
    ("eps text", MIN + "block: {eps: small}\n"),
    ("final_norm not bool", MIN + "block: {final_norm: 1}\n"),
    ("layers zero", MIN + "block: {layers: 0}\n"),
    ("position_base 1", MIN + "block: {positions: sinusoidal, position_base: 1}\n"),
    ("token id negative", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, -1]}\nseed: 0\n"),
    ("token id not whole", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1.5]}\nseed: 0\n"),
    ("tokens nested too deep", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [[[0]]]}\nseed: 0\n"),
    ("x is a vector", "dims: {C: 2, H: 2, F: 3}\ninput: {x: [1, 2]}\nseed: 0\n"),
    ("text in a matrix", MIN + "weights:\n  attn: {w_o: [[1, a], [1, 1]]}\n"),
    ("boolean in a matrix", MIN + "weights:\n  attn: {w_o: [[1, yes], [1, 1]]}\n"),
    ("empty list", MIN + "weights:\n  ffn: {b1: []}\n"),
    ("mask with a 2", MIN + "block: {mask: [[1, 0, 0], [1, 2, 0], [1, 1, 1]]}\n"),
    ("empty vocab", "vocab: []\ndims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0]}\nseed: 0\n"),
    ("repeated vocab word", "vocab: [我, 你, 我]\ndims: {C: 2, H: 2, F: 3}\ninput: {tokens: [我]}\nseed: 0\n"),
    ("step name with a space", MIN + "block:\n  steps:\n    - {name: norm 1, op: layer_norm, in: x, weights: norm1}\n"),
    ("step named x", MIN + "block:\n  steps:\n    - {name: x, op: layer_norm, in: x, weights: norm1}\n"),
    ("add reads one stage", STEPS + "    - {name: r, op: add, in: norm1}\n"),
    ("add with weights", STEPS + "    - {name: r, op: add, in: [x, norm1], weights: norm1}\n"),
    # bad enum values
    ("model", MIN + "model: encoder\n"),
    ("dtype", MIN + "dtype: float16\n"),
    ("norm_order", MIN + "block: {norm_order: middle}\n"),
    ("mask", MIN + "block: {mask: full}\n"),
    ("positions", MIN + "block: {positions: absolute}\n"),
    ("norm", MIN + "block: {norm: groupnorm}\n"),
    ("activation", MIN + "block: {activation: softsign}\n"),
    ("head", MIN + "block: {head: untied}\n"),
    ("unknown keyword", MIN + "weights:\n  attn: {w_q: eye}\n"),
    ("unknown op", STEPS + "    - {name: n2, op: layernorm, in: norm1, weights: norm2}\n"),
    ("layer_norm axis F", MIN + "block:\n  steps:\n    - {name: norm1, op: layer_norm, in: x, weights: norm1, axis: F}\n"),
    ("mha axis T", STEPS + "    - {name: attention, op: mha, in: norm1, weights: attn, axis: T}\n"),
    ("select axis keys", STEPS + "    - {name: first, op: select, in: norm1, axis: keys}\n"),
    ("linear out T", STEPS + "    - {name: proj, op: linear, in: norm1, weights: proj, out: T}\n"),
    ("step activation", STEPS + "    - {name: h, op: ffn_hidden, in: norm1, weights: ffn, activation: softsign}\n"),
    # settings that exclude each other
    ("steps and norm_order", MIN + "block:\n  norm_order: pre\n  steps:\n    - {name: norm1, op: layer_norm, in: x, weights: norm1}\n"),
    ("steps and norm", MIN + "block:\n  norm: rmsnorm\n  steps:\n    - {name: norm1, op: rms_norm, in: x, weights: norm1}\n"),
    ("position_base with learned positions", MIN + "block: {positions: learned, position_base: 100}\n"),
    ("both tokens and x", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0], x: [[1, 2]]}\nseed: 0\n"),
    ("no tokens nor x", "dims: {C: 2, H: 2, F: 3}\ninput: {}\nseed: 0\n"),
    ("axis on an add", STEPS + "    - {name: r, op: add, in: [x, norm1], axis: C}\n"),
    ("index on a relu", STEPS + "    - {name: r, op: relu, in: norm1, index: 0}\n"),
    ("out on a relu", STEPS + "    - {name: r, op: relu, in: norm1, out: C}\n"),
    ("activation on an add", STEPS + "    - {name: r, op: add, in: [x, norm1], activation: relu}\n"),
    ("encoder in a decoder-only model", MIN + "encoder: {layers: 1}\n"),
    ("S in a decoder-only model", "dims: {C: 2, H: 2, F: 3, S: 2}\ninput: {tokens: [0]}\nseed: 0\n"),
    ("block in an encoder-decoder", SEQ2SEQ + "block: {layers: 1}\n"),
    ("tokens in an encoder-decoder", SEQ2SEQ.replace("{source: [0, 1], target: [1, 0]}", "{tokens: [0, 1]}")),
    ("steps in a decoder", SEQ2SEQ + "decoder:\n  steps:\n    - {name: norm1, op: layer_norm, in: x, weights: norm1}\n"),
    # grouped-query attention, the rotary pairing
    ("H_kv zero", "dims: {C: 4, H: 2, H_kv: 0, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n"),
    ("H_kv not whole", "dims: {C: 4, H: 2, H_kv: 1.5, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n"),
    ("rotary_pairing", ROTARY + "block: {positions: rotary, rotary_pairing: pairs}\n"),
    ("rotary_pairing without rotary positions", ROTARY + "block: {positions: sinusoidal, rotary_pairing: half}\n"),
    ("rotary_pairing without positions", ROTARY + "block: {rotary_pairing: half}\n"),
    # a sliding window
    ("a window without causal", MIN + "block: {mask: {window: 2}}\n"),
    ("a window with causal false", MIN + "block: {mask: {causal: false, window: 2}}\n"),
    ("a window of 0", MIN + "block: {mask: {causal: true, window: 0}}\n"),
    ("a window of 1.5", MIN + "block: {mask: {causal: true, window: 1.5}}\n"),
    ("an unknown mask key", MIN + "block: {mask: {causal: true, width: 2}}\n"),
    # tracer grad: the loss and the targets
    ("loss", MIN + "loss: cross-entropy\n"),
    ("next-token without a head", MIN + "loss: next-token\n"),
    ("next-token with head none", MIN + "loss: next-token\nblock: {head: none}\n"),
    ("next-token in an encoder-decoder without a head", SEQ2SEQ + "loss: next-token\n"),
    ("targets without a head", MIN.replace("tokens: [0, 1, 2]", "tokens: [0, 1, 2], targets: [1, 2, 0]")),
    ("targets with x", "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, 0], [0, 1]], targets: [0, 1]}\nseed: 0\nblock: {head: tied}\n"),
    ("targets negative", HEAD.replace("tokens: [0, 1, 2]", "tokens: [0, 1, 2], targets: [1, -1, 0]")),
    ("targets nested too deep", HEAD.replace("tokens: [0, 1, 2]", "tokens: [0, 1, 2], targets: [[[1, 2, 0]]]")),
    ("unknown seq2seq input key", SEQ2SEQ.replace("target: [1, 0]", "target: [1, 0], target_ids: [0, 1]")),
    # weights read from files
    ("unknown field of a weight from a file", MIN + "weights:\n  attn: {w_q: {file: w.npz, kee: attn_q}}\n"),
    ("a weight mapping without file", MIN + "weights:\n  attn: {w_q: {key: attn_q}}\n"),
    ("an empty file name", MIN + "weights:\n  attn: {w_q: {file: ''}}\n"),
    ("key not text", MIN + "weights:\n  attn: {w_q: {file: w.npz, key: [a]}}\n"),
    ("transpose maybe", MIN + "weights:\n  attn: {w_q: {file: w.npz, transpose: maybe}}\n"),
    ("a group beside a checkpoint", MIN + "weights: {file: model.safetensors, layout: gpt2, attn: {w_q: identity}}\n"),
    ("layout without file", MIN + "weights: {layout: gpt2}\n"),
    ("checkpoint file not text", MIN + "weights: {file: [a], layout: gpt2}\n"),
]


@pytest.mark.parametrize("case,text", REJECTED, ids=[c for c, _ in REJECTED])
def test_the_schema_rejects_what_the_validator_rejects(case: str, text: str) -> None:
    with pytest.raises(SpecError):
        spec.load_spec_text(text)
    assert schema_errors(text), f"the schema accepts {case!r}, which tracer rejects"


def test_the_schema_accepts_the_minimal_specs_the_rejections_start_from() -> None:
    """Each rejection above is about its one change, not about the spec it changes."""
    for text in (MIN, STEPS, SEQ2SEQ, ROTARY, HEAD):
        spec.load_spec_text(text)
        assert schema_errors(text) == []


# -- and it accepts what the validator accepts, the unusual cases included ---------------------------

ACCEPTED = [
    ("a vector NumPy would stretch (flagged when run, not a spec error)", MIN + "weights:\n  norm1: {beta: [0]}\n"),
    ("a single number for a vector (flagged when run)", MIN + "weights:\n  norm1: {gamma: 2}\n"),
    ("words as tokens", "vocab: [我, 喜欢, 你]\ndims: {C: 2, H: 2, F: 3}\ninput: {tokens: [我, 喜欢, 你]}\nseed: 0\n"),
    ("a word YAML reads as a boolean", "vocab: [the, cat, sat, on]\ndims: {C: 2, H: 2, F: 3}\ninput: {tokens: [the, cat, sat, on]}\nseed: 0\n"),
    ("one list per sample", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [[0, 1], [1, 0]]}\nseed: 0\n"),
    ("x given as [B,T,C]", "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[[1, 0], [0, 1]]]}\nseed: 0\n"),
    ("random x", "dims: {C: 2, H: 2, F: 3, T: 4}\ninput: {x: random}\nseed: 0\n"),
    ("an explicit mask", MIN + "block: {mask: [[1, 0, 0], [1, 1, 0], [0, 1, 1]]}\n"),
    ("a sliding window", MIN + "block: {mask: {causal: true, window: 2}}\n"),
    ("a sliding window wider than T", MIN + "block: {mask: {causal: true, window: 100}}\n"),
    ("causal written as a mapping", MIN + "block: {mask: {causal: true}}\n"),
    ("eps written 1E-5", MIN + "block: {eps: 1E-5}\n"),
    ("a whole number written 4.0", "dims: {C: 4.0, H: 2, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n"),
    ("rotary positions with a base", "dims: {C: 4, H: 2, F: 3}\ninput: {tokens: [0, 1]}\nblock: {positions: rotary, position_base: 500}\nseed: 0\n"),
    ("a modern stack", "dims: {C: 4, H: 2, F: 8}\ninput: {tokens: [0, 1, 2]}\nseed: 0\n"
                       "block: {layers: 2, norm: rmsnorm, activation: swiglu, positions: rotary, final_norm: true, head: separate}\n"),
    ("per-layer weights", "dims: {C: 2, H: 2, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\nblock: {layers: 2}\n"
                          "weights:\n  blocks:\n    - {norm1: {gamma: ones}, attn: {w_o: identity}}\n    - {ffn: {b1: zeros}}\n"),
    ("a step reading a one-item list", MIN + "block:\n  steps:\n    - {name: n, op: layer_norm, in: [x], weights: norm1, meaning: mine}\n"),
    ("linear, relu and select steps", MIN + "block:\n  steps:\n    - {name: up, op: linear, in: x, weights: up, out: F}\n"
                                            "    - {name: act, op: relu, in: up}\n    - {name: first, op: select, in: act, axis: T, index: 0}\n"
                                            "weights:\n  up: {w: random, b: [0, 0, 0]}\n"),
    ("an encoder-decoder with its weights", SEQ2SEQ + "encoder: {layers: 1}\ndecoder: {layers: 1, head: tied}\n"
                                            "weights:\n  decoder:\n    blocks:\n      - {cross_attn: {w_q: identity}, norm3: {beta: zeros}}\n"),
    ("grouped-query attention", "dims: {C: 4, H: 2, H_kv: 1, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n"
                                "weights:\n  attn: {w_k: [[1, 0], [0, 1], [0, 0], [0, 0]], b_v: [0, 0]}\n"),
    ("H_kv = H", "dims: {C: 4, H: 2, H_kv: 2, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n"),
    ("a head width of its own, H not dividing C", "dims: {C: 5, H: 2, d: 3, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\n"
                                                  "weights:\n  attn: {b_q: [0, 0, 0, 0, 0, 0]}\n"),
    ("the per-head q/k norm", "dims: {C: 4, H: 2, F: 3}\ninput: {tokens: [0, 1]}\nseed: 0\nblock: {qk_norm: true}\n"
                              "weights:\n  attn: {q_norm: [1, 2], k_norm: ones}\n"),
    ("rotary pairs (i, i + d/2)", ROTARY + "block: {positions: rotary, rotary_pairing: half}\n"),
    ("rotary pairs (2i, 2i+1), written out", ROTARY + "block: {positions: rotary, position_base: 500, rotary_pairing: interleaved}\n"),
    ("next-token with targets", MIN.replace("tokens: [0, 1, 2]", "tokens: [0, 1, 2], targets: [1, 2, 0]")
                                + "loss: next-token\nblock: {head: separate}\n"),
    ("targets as words, one list per sample", "vocab: [我, 喜欢, 你]\ndims: {C: 2, H: 2, F: 3}\nseed: 0\nblock: {head: tied}\n"
                                              "input: {tokens: [[我, 喜欢], [你, 我]], targets: [[喜欢, 你], [我, 喜欢]]}\n"),
    ("sum-squares without a head", MIN + "loss: sum-squares\n"),
    ("sum-squares with x", "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, 0], [0, 1]]}\nseed: 0\nloss: sum-squares\n"),
    ("an encoder-decoder's targets", SEQ2SEQ.replace("target: [1, 0]", "target: [1, 0], targets: [0, 1]")
                                     + "decoder: {head: tied}\nloss: next-token\n"),
]


@pytest.mark.parametrize("case,text", ACCEPTED, ids=[c for c, _ in ACCEPTED])
def test_the_schema_accepts_what_the_validator_accepts(case: str, text: str) -> None:
    spec.load_spec_text(text)
    assert schema_errors(text) == []


# -- weights from files: the validator opens them, so these specs sit beside real files ---------------

X_INPUT = "dims: {C: 2, H: 2, F: 3}\ninput: {x: [[1, 0], [0, 1]]}\nseed: 0\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """w.npz with one matrix q; t.npz, a whole two-layer model in the tracer layout (as tracer run --save names it)."""
    np = pytest.importorskip("numpy")
    np.savez(tmp_path / "w.npz", q=np.eye(2))
    weights = spec.load_spec_text(X_INPUT).weights
    np.savez(tmp_path / "t.npz", **{f"weights.blocks.{i}.{name}": np.zeros(w.shape) for i in (0, 1) for name, w in weights.items()})
    return tmp_path


def load_beside(folder: Path, text: str) -> spec.Spec:
    path = folder / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return spec.load_spec(str(path))


FROM_FILES = [
    ("one matrix from a file", X_INPUT + "weights:\n  attn: {w_q: {file: w.npz, key: q}}\n"),
    ("one matrix transposed", X_INPUT + "weights:\n  attn: {w_o: {file: w.npz, key: q, transpose: true}}\n"),
    ("the whole model", X_INPUT + "weights: {file: t.npz, layout: tracer}\n"),
    ("the whole model from its second layer", X_INPUT + "weights: {file: t.npz, layout: tracer, first_layer: 1}\n"),
]


@pytest.mark.parametrize("case,text", FROM_FILES, ids=[c for c, _ in FROM_FILES])
def test_the_schema_accepts_weights_from_files(files: Path, case: str, text: str) -> None:
    loaded = load_beside(files, text)
    assert any(w.source == "file" for w in loaded.weights.values())
    assert schema_errors(text) == []


FROM_FILES_REJECTED = [
    ("an unknown layout", X_INPUT + "weights: {file: t.npz, layout: xlnet}\n"),
    ("first_layer negative", X_INPUT + "weights: {file: t.npz, layout: tracer, first_layer: -1}\n"),
    ("first_layer not whole", X_INPUT + "weights: {file: t.npz, layout: tracer, first_layer: 1.5}\n"),
    ("an unknown checkpoint field", X_INPUT + "weights: {file: t.npz, layout: tracer, layers: 2}\n"),
]


@pytest.mark.parametrize("case,text", FROM_FILES_REJECTED, ids=[c for c, _ in FROM_FILES_REJECTED])
def test_the_schema_rejects_what_the_validator_rejects_in_file_fields(files: Path, case: str, text: str) -> None:
    with pytest.raises(SpecError):
        load_beside(files, text)
    assert schema_errors(text), f"the schema accepts {case!r}, which tracer rejects"


IMPORTS = [("checkpoints/tiny_gpt2.py", ()), ("checkpoints/tiny_gpt2.py", ("--layers", "1-1")),
           ("checkpoints/tiny_llama.py", ("--tokens", "5,17,3,8")), ("checkpoints/tiny_llama.py", ("--layers", "1"))]


@pytest.mark.parametrize("script,options", IMPORTS, ids=[f"{s.split('/')[-1]} {' '.join(o)}" for s, o in IMPORTS])
def test_the_specs_tracer_import_writes_validate(tmp_path: Path, script: str, options: tuple[str, ...]) -> None:
    """Written by tracer, so the editor must not underline a line of them: weights {file, layout, first_layer}, H_kv, the pairing."""
    pytest.importorskip("safetensors", reason="the example checkpoints are safetensors files")
    example_module(script).make(str(tmp_path / "model"))
    r = run_app("import", str(tmp_path / "model"), "-o", str(tmp_path / "spec.yaml"), *options)
    assert r.returncode == 0, r.stderr
    assert schema_errors((tmp_path / "spec.yaml").read_text(encoding="utf-8")) == []
