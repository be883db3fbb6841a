"""The spec: typed, validated data describing a model and its input.

Validation runs once, here, at the edge: the document is read section by section, each section by its own
module (checks.py holds the checks they share).  Every error names the file, line and column, the field path,
what was expected and what was received.  Nothing here imports NumPy, so ``tracer validate`` and ``--help`` stay
fast.

The result is a flat list of named steps (entry, one or more layers, final norm, output head), every stage's
shape inferred, and every weight checked: a Spec (typed.py).
"""

from __future__ import annotations

from typing import Any

from tracer.files import reading
from tracer.messages import msg
from tracer.spec import yamlio
from tracer.spec.block import stacks
from tracer.spec.checks import Checks
from tracer.spec.dims import dims_of, given_dims
from tracer.spec.inputs import input_section, loss_fields, vocab_list
from tracer.spec.keys import (
    BLOCK_KEYS,
    DIM_KEYS,
    FILE_KEYS,
    INITS,
    INPUT_KEYS,
    KEYWORDS,
    LOSSES,
    MODEL_FILE_KEYS,
    PAIRINGS,
    POSITIONS,
    SEQ2SEQ_INPUT_KEYS,
    STEP_KEYS,
    TOP_KEYS,
)
from tracer.spec.steps import expand, template
from tracer.spec.typed import GRAD_SETTINGS, SPEC_NOT_SETTINGS, SPEC_ONLY_SETTINGS, SPEC_SETTINGS, BlockSpec, Dims, InputSpec, Spec, Weight
from tracer.spec.weight_files import has_position_table, read_whole
from tracer.spec.weights import checked_weights, weights_section
from tracer.spec.yamlio import Source

# The package's surface: the loaders, the typed spec, and the keys and choices a spec may write (the JSON Schema's)
__all__ = [
    "load_spec", "load_spec_text", "load_spec_doc",
    "Spec", "Dims", "BlockSpec", "Weight", "InputSpec", "SPEC_SETTINGS", "SPEC_NOT_SETTINGS", "SPEC_ONLY_SETTINGS", "GRAD_SETTINGS",
    "TOP_KEYS", "DIM_KEYS", "BLOCK_KEYS", "STEP_KEYS", "INPUT_KEYS", "SEQ2SEQ_INPUT_KEYS", "MODEL_FILE_KEYS", "FILE_KEYS",
    "POSITIONS", "PAIRINGS", "KEYWORDS", "INITS", "LOSSES",
]


def load_spec(path: str) -> Spec:
    with reading() as read:
        text = yamlio.read_text(path)
        doc, src = yamlio.load(text, path)
        s = validated(doc, src)
    return s._replace(files_read=tuple(read.values()))


def load_spec_text(text: str, filename: str = "<spec>") -> Spec:
    doc, src = yamlio.load(text, filename)
    return load_spec_doc(doc, src)


def load_spec_doc(doc: dict[str, Any], src: Source) -> Spec:
    """A document already read (YAML, or a Python dict for the API): validated into a Spec."""
    with reading() as read:
        s = validated(doc, src)
    return s._replace(files_read=tuple(read.values()))


def validated(doc: dict[str, Any], src: Source) -> Spec:
    """The document, section by section: each reads what the sections before it decided."""
    c = Checks(src)
    name, seed, init, dtype, model = top_settings(c, doc)
    vocab, words = vocab_list(c, doc.get("vocab"))
    weights_raw = weights_section(c, doc)
    block, encoder, steps_raw = stacks(c, doc, model, has_position_table(c, weights_raw))
    given, head_dim = given_dims(c, doc["dims"], [block] + ([encoder] if encoder else []))
    read = input_section(c, doc, given, seed, words, model)
    dims, token_types = dims_of(c, given, head_dim, read, model, block, encoder, weights_raw, vocab)
    loss, targets = loss_fields(c, doc, read.raw_targets, dims, block.head != "none", model, words)
    layer = template(c, steps_raw, dims)
    steps, shapes = expand(c, model, block, encoder, layer, dims, read.input.kind == "tokens")
    weights = checked_weights(c, weights_raw, dims, seed, steps, shapes, block, encoder)
    read_whole(c, weights, block)
    return Spec(
        path=src.filename, name=name, dims=dims, block=block, input=read.input, weights=weights,
        seed=seed, dtype=dtype, steps=steps, stage_shapes=shapes, model=model, encoder=encoder,
        source=read.source, vocab=vocab, layer_template=layer, allow_nonfinite=c.allow_nonfinite,
        loss=loss, targets=targets, init=init, token_types=token_types,
        tokenizer=read.tokenizer, text=read.text, specials_added=read.specials_added,
        layout=None if c.model_source is None else c.model_source.layout.name,
    )


def top_settings(c: Checks, doc: dict[str, Any]) -> tuple[str, int | None, str, str, str]:
    """The document's own settings: (name, seed, init, dtype, model); allow_nonfinite is kept on ``c``, which
    checks every number given with it."""
    c.keys(doc, (), TOP_KEYS, msg("spec sections"))
    if "dims" not in doc:
        raise c.fail((), msg("missing required section 'dims' (e.g. dims: {C: 2, H: 2, F: 3})"))
    name = doc.get("name", c.src.filename)
    if not isinstance(name, str):
        raise c.fail(("name",), msg("expected text, received {got}", got=c.received(('name',), name)))
    name = yamlio.printable(name)  # text from a spec is printed everywhere: control characters as escapes
    seed = None
    if doc.get("seed") is not None:
        seed = c.integer(doc["seed"], ("seed",), 0, 2**63 - 1)
    init = c.choice(doc.get("init", "default"), ("init",), INITS)
    dtype = c.choice(doc.get("dtype", "float64"), ("dtype",), ("float64", "float32"))
    allow_nonfinite = doc.get("allow_nonfinite", False)
    if not isinstance(allow_nonfinite, bool):
        raise c.fail(("allow_nonfinite",), msg("expected true or false, received {got}", got=c.received(('allow_nonfinite',), allow_nonfinite)))
    c.allow_nonfinite = allow_nonfinite
    model = c.choice(doc.get("model", "decoder"), ("model",), ("decoder", "encoder-decoder"))
    return name, seed, init, dtype, model
