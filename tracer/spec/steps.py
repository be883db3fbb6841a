"""The steps: one layer's own list (block.steps) checked step by step, and the whole model as one flat list.

A custom step names its stage, its op, the stages it reads and its weight group; each is checked against the op's
record (tracer/model/ops.py) and its shape inferred as it is read, so a step can only read a stage before it.
``expand`` then stacks the layers between the entry and the head and infers every stage's shape.
"""

from __future__ import annotations

from typing import Any

from tracer.messages import join, message_of, msg, nmsg
from tracer.model import blocks
from tracer.model.activations import spec_activations
from tracer.model.blocks import NORMS, Step, output_shape
from tracer.model.ops import OPS, TABLES, Op
from tracer.model.shapes import Shape
from tracer.spec import yamlio
from tracer.spec.checks import Checks, close_matches, did_you_mean
from tracer.spec.keys import STEP_KEYS
from tracer.spec.typed import BlockSpec, Dims
from tracer.spec.yamlio import Path

RESERVED_STAGES = ("embed", "input", "position", "x", "memory", "embeddings", "token_type", "typed", "embed_scaled", "position_bias", "head_scale")


def template(c: Checks, raw: Any, dims: Dims) -> tuple[Step, ...]:
    """One layer's steps: a preset, or the spec's own list (validated, shapes checked)."""
    if raw is None:
        return ()
    sizes = dims.as_dict()
    shapes: dict[str, Shape] = {"x": (("B", "T", "C"), (dims.B, dims.T, dims.C))}
    p: Path = ("block", "steps")
    if not isinstance(raw, list) or not raw:
        got = msg("an empty list") if raw == [] else c.received(p, raw)
        raise c.fail(p, msg("expected a list of steps such as {name: norm1, op: layer_norm, in: x, weights: norm1}, received {got}", got=got))
    return tuple(step(c, item, p + (i,), shapes, sizes) for i, item in enumerate(raw))


def step(c: Checks, raw: Any, path: Path, shapes: dict[str, Shape], sizes: dict[str, int]) -> Step:
    raw = c.keys(raw, path, STEP_KEYS, msg("step fields"))
    for key in ("name", "op", "in"):
        if key not in raw:
            raise c.fail(path, msg("a step needs {key} (e.g. {name: norm1, op: layer_norm, in: x, weights: norm1})", key=repr(key)))
    name = stage_name(c, raw["name"], path + ("name",), shapes)
    op = step_op(c, raw["op"], path + ("op",))
    info = OPS[op]
    ins = step_inputs(c, raw["in"], path, op, info.arity, shapes)
    weights = step_weights(c, raw, path, op, info)
    axis, start, stop = step_range(c, raw, path, op, info)
    out = None
    if op == "linear":
        out = c.choice(raw.get("out", "C"), path + ("out",), ("C", "F"))
    elif "out" in raw:
        raise c.fail(path + ("out",), msg("only linear takes out"))
    activation = None
    if "activation" in raw:
        if op not in ("ffn", "ffn_hidden"):
            raise c.fail(path + ("activation",), msg("only ffn and ffn_hidden take an activation"))
        activation = c.choice(raw["activation"], path + ("activation",), spec_activations())
    meaning = raw.get("meaning", info.meaning)
    if not isinstance(meaning, str):
        raise c.fail(path + ("meaning",), msg("expected text, received {got}", got=c.received(path + ('meaning',), meaning)))
    if "meaning" in raw:  # the spec's own words (a built-in meaning word for word is that meaning)
        meaning = blocks.known_meaning(yamlio.printable(meaning))
    made = Step(name, op, tuple(ins), weights, meaning, axis, start, stop, out, activation=activation)
    try:
        shapes[name] = output_shape(made, [shapes[i] for i in ins], sizes)
    except ValueError as e:
        raise c.fail(path, message_of(e)) from None
    if op == "mha":
        shapes.update(blocks.attention_internals(made, shapes[ins[0]], shapes[ins[0]], sizes))
    return made


def stage_name(c: Checks, name: Any, path: Path, shapes: dict[str, Shape]) -> str:
    """A new stage's name: letters, digits, _ and -, and no stage's before it (nor one tracer makes itself)."""
    if not isinstance(name, str) or not name or not all(ch.isalnum() or ch in "_-" for ch in name):
        raise c.fail(path, msg("expected a stage name of letters, digits, _ and -, received {got}", got=c.received(path, name)))
    if name in shapes or name in RESERVED_STAGES or name in ("logits", "probs", "project_in", "project_out", blocks.RAW_LOGITS):
        raise c.fail(path, join([msg("stage {name} is already defined", name=repr(name)), msg("every step records a stage of its own")]))
    return name


def step_op(c: Checks, op: Any, path: Path) -> str:
    """One of the ops a spec may write (the records marked ``user``)."""
    user_ops = tuple(k for k, v in OPS.items() if v.user)
    if isinstance(op, str) and op not in user_ops:
        close = close_matches(op, list(user_ops), n=1, cutoff=0.5)
        hint = did_you_mean(close, msg("known ops: {ops}", ops=', '.join(user_ops)))
        raise c.fail(path, join([msg("unknown op {op}", op=repr(op)), hint]))
    return c.choice(op, path, user_ops)


def step_inputs(c: Checks, raw_in: Any, path: Path, op: str, arity: int, shapes: dict[str, Shape]) -> list[str]:
    """in: the stages the op reads, as many as it takes, each recorded before this step."""
    ins = raw_in if isinstance(raw_in, list) else [raw_in]
    for j, i in enumerate(ins):
        ipath = path + (("in", j) if isinstance(raw_in, list) else ("in",))
        if not isinstance(i, str):
            raise c.fail(ipath, msg("expected the name of a stage before this step (e.g. in: x, or in: [x, attention]), received {got}",
                                    got=c.received(ipath, i)))
    if len(ins) != arity:
        raise c.fail(path + ("in",), nmsg("{op} reads {n} stage, received {m}", "{op} reads {n} stages, received {m}", arity, op=op, m=len(ins)))
    for j, i in enumerate(ins):
        ipath = path + (("in", j) if isinstance(raw_in, list) else ("in",))
        if i not in shapes:
            known = [k for k in shapes if "." not in k]
            close = close_matches(str(i), known, n=1, cutoff=0.5)
            hint = did_you_mean(close, msg("stages so far: {names}", names=', '.join(known)))
            raise c.fail(ipath, join([msg("no stage {name} before this step", name=repr(i)), hint]))
    return ins


def step_weights(c: Checks, raw: dict[str, Any], path: Path, op: str, info: Op) -> str | None:
    """weights: the name of the step's weight group, for an op that has weights (and only for one)."""
    weights = raw.get("weights")
    if info.weights is not None:
        if not isinstance(weights, str) or not weights or not all(ch.isalnum() or ch == "_" for ch in weights):
            raise c.fail(path, msg("{op} needs weights: the name of its weight group (e.g. weights: {x})", op=op, x='norm1' if op.endswith('norm') else op))
        if weights in TABLES or weights in ("blocks", "encoder", "decoder", "final_norm"):
            raise c.fail(path + ("weights",), msg("{weights} is a reserved name; choose another weight group name", weights=repr(weights)))
    elif weights is not None:
        raise c.fail(path + ("weights",), msg("{op} takes no weights", op=op))
    return weights


def step_range(c: Checks, raw: dict[str, Any], path: Path, op: str, info: Op) -> tuple[str | None, int | None, int | None]:
    """axis (for an op that has axes), and select's index or start and stop: (axis, start, stop)."""
    axis = raw.get("axis")
    if axis is not None or op == "select":
        if not info.axes:
            raise c.fail(path + ("axis",), msg("{op} takes no axis", op=op))
        axis = c.choice(axis, path + ("axis",), info.axes)
    start = stop = None
    if op == "select":
        if "index" in raw:
            start = c.integer(raw["index"], path + ("index",), 0)
            stop = start + 1
        else:
            start = c.integer(raw.get("start", 0), path + ("start",), 0)
            stop = c.integer(raw.get("stop", start + 1), path + ("stop",), 1)
    else:
        for key in ("index", "start", "stop"):
            if key in raw:
                raise c.fail(path + (key,), msg("only select takes {key}", key=key))
    return axis, start, stop


def expand(c: Checks, model: str, block: BlockSpec, encoder: BlockSpec | None, template: tuple[Step, ...], dims: Dims,
           uses_tokens: bool) -> tuple[tuple[Step, ...], dict[str, Shape]]:
    """Entry, layers, final norm and head as one flat step list, with every stage's shape."""
    if model == "encoder-decoder":
        assert encoder is not None
        steps, last = encoder_decoder_layers(block, encoder)
        prefix = "decoder."
    else:
        ds = block.settings()
        entry, x = blocks.entry("", "tokens" if uses_tokens else "x", ds, uses_tokens, projected=dims.C_e is not None)
        preset = not template
        order = blocks.PRE_NORM_MOE if block.experts is not None and preset else blocks.NORM_ORDERS.get(block.norm_order, ())
        layer = blocks.configure(order if preset else template, ds, preset=preset)
        body, last = blocks.expand(layer, "", block.layers, x, None, plain=block.layers == 1, sliding=block.sliding_layers,
                                    rotary=block.rotary_layers, local_base=block.local_position_base)
        steps = entry + body
        prefix = ""
    if block.final_norm:
        if any(s.name == prefix + "final_norm" for s in steps):
            raise c.fail(("block", "final_norm"), join([msg("a step is already named final_norm"), msg("rename it, or drop final_norm: true")]))
        steps.append(blocks.final_norm(prefix, last, block.settings()))
        last = steps[-1].name
    if (block.head != "none" or block.classifier is not None) and dims.C_e is not None:  # OPT's project_out: C -> C_e, what the head reads
        steps.append(blocks.project_out(last))
        last = steps[-1].name
    if block.head != "none" and block.head_scale:  # T5's tied head: the output times C ** -0.5 first, a stage of its own
        steps.append(blocks.head_scale(prefix, last))
        last = steps[-1].name
    tasks = task_steps(block, last)
    taken = {s.name for s in steps} & {s.name for s in tasks}
    if taken:
        raise c.fail(("block",), join([msg("stage {name} is already defined", name=repr(sorted(taken)[0])), msg("every step records a stage of its own")]))
    steps += tasks
    return tuple(steps), stage_shapes(c, steps, dims)


def task_steps(block: BlockSpec, last: str) -> list[Step]:
    """The head and the task heads after the stack's last stage ``last``: the pooler, a classifier, then the output head
    (after a masked-LM head's transform, its stages mlm.*)."""
    steps: list[Step] = []
    if block.pooler:
        steps += blocks.pooler_steps(last)
    if block.classifier is not None:
        steps += blocks.classifier_steps(last, *block.classifier)
    if block.mlm is not None:
        steps += blocks.mlm_steps(last, block.mlm, block.settings())
        return steps + blocks.head_steps(steps[-1].name, block.head_softcap, prefix=blocks.MLM)
    if block.head != "none":
        steps += blocks.head_steps(last, block.head_softcap, block.logits_divisor, block.logit_scale)
    return steps


def encoder_decoder_layers(block: BlockSpec, encoder: BlockSpec) -> tuple[list[Step], str]:
    """The encoder's entry, layers and final norm, then the decoder's entry and layers reading its memory."""
    es = encoder.settings()
    entry, x = blocks.entry(blocks.ENCODER, "source", es, True)
    layer = blocks.configure(blocks.NORM_ORDERS[encoder.norm_order], es, preset=True)
    body, last = blocks.expand(layer, blocks.ENCODER, encoder.layers, x, None, plain=False)
    steps = entry + body
    if encoder.final_norm:
        steps.append(blocks.final_norm(blocks.ENCODER, last, es))
        last = steps[-1].name
    memory = last
    ds = block.settings()
    entry, x = blocks.entry("decoder.", "target", ds, True)
    layer = blocks.configure(blocks.DECODER_NORM_ORDERS[block.norm_order], ds, preset=True)
    body, last = blocks.expand(layer, "decoder.", block.layers, x, memory, plain=False)
    return steps + entry + body, last


def stage_shapes(c: Checks, steps: list[Step], dims: Dims) -> dict[str, Shape]:
    """Every stage's axes and sizes, step by step (each attention's internals too), before anything runs."""
    sizes = dims.as_dict()
    shapes: dict[str, Shape] = {}
    step_names = {s.name for s in steps}
    for made in steps:
        ins = [shapes[i] for i in made.inputs]
        try:
            shapes[made.name] = output_shape(made, ins, sizes, blocks.position_axis(made.name))
        except ValueError as e:
            if made.name.endswith("final_norm") and made.op in NORMS.values():
                raise c.fail(("block", "final_norm"), msg("the final normalisation reads the last step, {inputs}: {e}",
                                                          inputs=made.inputs[0], e=message_of(e))) from None
            raise c.fail(("block",), msg("step {name}: {e}", name=made.name, e=message_of(e))) from None  # a custom layer that clashes once stacked
        if made.op in ("mha", "cross_mha"):
            internals = blocks.attention_internals(made, ins[0], ins[1] if made.op == "cross_mha" else ins[0], sizes)
            taken = [n for n in internals if n in shapes or n in step_names]
            if taken:
                internal = msg("step {name} records its attention internals as {prefix}.*, but stage {stage} already exists",
                               name=made.name, prefix=taken[0].rsplit('.', 1)[0], stage=repr(taken[0]))
                raise c.fail(("block",), join([internal, msg("rename one of the steps")]))
            shapes.update(internals)
    return shapes
