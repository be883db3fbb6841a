"""Interventions: a stage's value replaced while the spec runs (--ablate, --set, --from).

``resolve`` turns the command line's (or the API's) requests into ``Intervention`` records, every name checked
against the spec (an unknown one is a UsageError naming the close ones) and every array read and its shape
checked before anything runs; ``attach`` puts them on the spec (``Spec.interventions``), so that every executor
run from it (tracer run, grad and its finite differences, probe, diff, patch) computes with them:

- ``--ablate blocks.0.attn.head.3``: head 3's slice of the heads (the [B,T,C] mix before W_O) is zero, so its
  contribution to the attention output is gone (W_O's rows of that head meet zeros);
- ``--ablate STAGE``: the stage is zero; ``--ablate STAGE=mean``: the stage is its mean over positions, for each
  sample (every position then holds the same vector);
- ``--set STAGE=FILE:KEY``: the stage is the array KEY of the .npz FILE (another run's --save, say), its shape
  checked;
- ``--from STAGE=FILE:KEY``: as --set, and the steps before STAGE are not computed at all (a later layer started
  from a recorded hidden state);
- ``--set ATTN.head.N=FILE:KEY``: head N's output alone (its [B,T,d] slice of the heads, before W_O) is the array;
  ``ATTN.head.N.q``, ``.k``, ``.v`` ([B,T,d] each; for k and v N is a key/value head) and ``.pattern`` ([B,T,S], the
  attention weights after the softmax) the same for one head's query, key, value or pattern: the attention step is
  computed with that head's part replaced, everything else as it comes (kind ``head``).

A replaced stage is a constant: the backward pass sends nothing through it to the steps before it.  A mean over
positions is a function of the stage, and its gradient is the gradient's mean over positions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tracer.errors import CheckpointError, UsageError
from tracer.messages import Message, at, msg
from tracer.model.blocks import internal_prefix
from tracer.model.shapes import shape_label

if TYPE_CHECKING:
    from tracer.spec import Spec



class Requests(NamedTuple):
    """What the command line (or the API) asks for, as written: ``--ablate``, ``--set``, ``--from`` values."""

    ablate: tuple[str, ...] = ()
    set: tuple[str, ...] = ()
    start: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ablate or self.set or self.start)


class Intervention(NamedTuple):
    stage: str  # the step's stage it replaces (for heads: the attention step's stage)
    kind: str  # zero | mean | set | from | heads | head
    option: str  # the option as given, e.g. "--ablate blocks.0.attn.head.3"
    value: np.ndarray | None = None  # set, from: the array
    source: str = ""  # set, from: FILE:KEY
    heads: tuple[int, ...] = ()  # heads: the heads zeroed
    d: int = 0  # heads: each head's width
    edits: tuple[HeadEdit, ...] = ()  # head: each head's part replaced (several parts and heads of one attention step)
    reference: tuple[Spec, str, int] | None = None  # --ablate X=mean-over:REF: the spec, its stage, the head (-1: none), until run

    def describe(self) -> Message:
        if self.kind == "head":
            return msg("{parts} set from {source}", parts=", ".join(e.label() for e in self.edits), source=", ".join(e.source for e in self.edits))
        if self.kind == "heads":
            return msg("head {heads} ablated (zero)", heads=", ".join(map(str, self.heads)))
        if self.kind == "zero":
            return msg("ablated (zero)")
        if self.kind == "mean":
            return msg("ablated (its mean over positions)")
        if self.kind == "set":
            return msg("set from {source}", source=self.source)
        return msg("started from {source}", source=self.source)

    def phrase(self) -> Message:
        """What it does, as the subject of a sentence: 'ablating head 3 of layer 0'."""
        if self.kind == "head":
            return msg("setting {parts} of {stage}", parts=", ".join(e.label() for e in self.edits), stage=self.stage)
        if self.kind == "heads":
            parts = self.stage.split(".")
            where: Message | str = (msg("layer {n}", n=parts[1]) if len(parts) == 3 and parts[0] == "blocks" and parts[2] == "attention"
                                    else self.stage)
            return msg("ablating head {heads} of {where}", heads=", ".join(map(str, self.heads)), where=where)
        if self.kind == "zero":
            return msg("zeroing {stage}", stage=self.stage)
        if self.kind == "mean":
            return msg("replacing {stage} by its mean over positions", stage=self.stage)
        if self.kind == "set":
            return msg("setting {stage} from {source}", stage=self.stage, source=self.source)
        return msg("starting at {stage} from {source}", stage=self.stage, source=self.source)

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"stage": self.stage, "kind": self.kind, "option": self.option}
        if self.source:
            out["source"] = self.source
        if self.heads:
            out["heads"] = list(self.heads)
        if self.edits:
            out["edits"] = [{"part": e.part, "head": e.head, "source": e.source} for e in self.edits]
        return out

    def kernel_edits(self) -> dict[str, list[tuple[int | None, np.ndarray]]]:
        """The edits as multihead.mha takes them: by its part's key (q, k, v, weights, heads, q_in, k_in, v_in)."""
        out: dict[str, list[tuple[int | None, np.ndarray]]] = {}
        for e in self.edits:
            out.setdefault(KERNEL_KEY.get(e.part, e.part), []).append((e.head, e.value))
        return out

    def head_mask(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """[C] ones with the ablated heads' slices zero (C = H d of the heads stage)."""
        mask = np.ones(shape[-1], dtype=dtype)
        for h in self.heads:
            mask[h * self.d:(h + 1) * self.d] = 0
        return mask


class HeadEdit(NamedTuple):
    """One head's part replaced inside an attention step: ``part`` q | k | v | pattern | output, ``head`` its index
    (None with q_in, k_in, v_in: the whole input the projections of q, k or v read, every head's, [B,T,C])."""

    part: str
    head: int | None
    value: np.ndarray
    source: str = ""

    def label(self) -> str:
        if self.head is None:
            return f"{self.part.removesuffix('_in')} input"
        return f"head {self.head}" + ("" if self.part == "output" else f" {self.part}")


HEAD_PARTS = ("output", "q", "k", "v", "pattern")  # ATTN.head.N (its output), ATTN.head.N.q, ...
KERNEL_KEY = {"output": "heads", "pattern": "weights"}  # a part by the name of the attention internal it is a head of


def head_targets(spec: Spec) -> dict[str, tuple[str, int, str]]:
    """'blocks.0.attn.head.1' -> (the attention step's stage, 1, 'output'); '.q', '.k', '.v', '.pattern' each a part of
    its own.  k and v count key/value heads (H_kv of them under grouped-query attention), the others H."""
    out = {}
    for step in spec.steps:
        if step.op in ("mha", "cross_mha"):
            prefix = internal_prefix(step)
            H_kv = spec.stage_shapes[f"{prefix}.k"][1][1]
            for part in HEAD_PARTS:
                for h in range(H_kv if part in ("k", "v") else spec.dims.H):
                    out[f"{prefix}.head.{h}" + ("" if part == "output" else f".{part}")] = (step.name, h, part)
    return out


def head_shape(spec: Spec, step_name: str, part: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The axes and sizes of one head's part: the attention internal's with its head axis taken out ([B,T,d], [B,T,S])."""
    step = next(s for s in spec.steps if s.name == step_name)
    prefix = internal_prefix(step)
    key = {"output": "heads", "pattern": "weights"}.get(part, part)
    axes, sizes = spec.stage_shapes[f"{prefix}.{key}"]
    if key == "heads":  # [B,T,C]: a head's slice is d wide
        H = spec.dims.H
        return (*axes[:-1], "d"), (*sizes[:-1], sizes[-1] // H)
    return (axes[0], *axes[2:]), (sizes[0], *sizes[2:])


def head_value(full: np.ndarray, part: str, h: int, H: int) -> np.ndarray:
    """One head's part of the attention internal ``full`` as recorded: [B,H,T,d] -> [B,T,d]; the heads [B,T,C] -> [B,T,d]."""
    if part == "output":
        d = full.shape[-1] // H
        return full[..., h * d:(h + 1) * d]
    return full[:, h]


def position_axis(axes: tuple[str, ...]) -> int | None:
    for i, a in enumerate(axes):
        if a in ("T", "S"):
            return i
    return None


def mean_over_positions(value: np.ndarray, axes: tuple[str, ...]) -> np.ndarray:
    """Each sample's mean over positions, at every position (the stage's shape)."""
    axis = position_axis(axes)
    assert axis is not None, "resolve refuses a mean over positions of a stage without them"
    return np.broadcast_to(value.mean(axis=axis, keepdims=True), value.shape).copy()


def refuse_head_edits(found: Iterable[Intervention], what: Message) -> None:
    """A head's part set (kind head) has no backward here: a UsageError naming the option."""
    for iv in found:
        if iv.kind == "head":
            raise UsageError(msg("{option}: {what} does not take a head's part set on its own (--ablate ATTN.head.N and a whole stage's --set it does)",
                                 option=iv.option, what=what))


def by_stage(spec: Spec) -> dict[str, Intervention]:
    return {iv.stage: iv for iv in getattr(spec, "interventions", ())}


def start_of(spec: Spec) -> int:
    """The index of the first step computed: the --from stage's, else 0."""
    names = [s.name for s in spec.steps]
    for iv in getattr(spec, "interventions", ()):
        if iv.kind == "from" and iv.stage in names:  # a variant of the spec without the stage (probe's bare block) starts at 0
            return names.index(iv.stage)
    return 0


# -- from the command line ------------------------------------------------------------------------

def _heads_of(spec: Spec) -> dict[str, tuple[str, int]]:
    """'blocks.0.attn.head.3' -> (the attention step's stage, 3), for every attention step and head."""
    out = {}
    for step in spec.steps:
        if step.op in ("mha", "cross_mha"):
            for h in range(spec.dims.H):
                out[f"{internal_prefix(step)}.head.{h}"] = (step.name, h)
    return out


def _unknown(option: str, name: str, spec: Spec, heads: dict[str, tuple[str, int]]) -> UsageError:
    from tracer.model.catalogue import suggest

    steps = [s.name for s in spec.steps]
    if name in spec.stage_shapes:  # an attention internal: inside one step
        return UsageError(msg("{option} {name}: an attention internal cannot be replaced on its own; intervene on a step's stage ({steps}) "
                              "or on a head ({head})",
                              option=option, name=name, steps=", ".join(steps[:4]) + (", ..." if len(steps) > 4 else ""),
                              head=next(iter(heads), "attn.head.0")))
    return UsageError(msg("{option} {name}: no stage or head of that name in {where}{hint} (`tracer run SPEC --steps` lists the stages; a head is "
                          "ATTN.head.N, e.g. {head})",
                          option=option, name=name, where=spec.path, hint=suggest(name, [*steps, *heads]),
                          head=next(iter(heads), "attn.head.0")))


def _read_array(option: str, stage: str, source: str, spec: Spec, shape: tuple[tuple[str, ...], tuple[int, ...]] | None = None) -> np.ndarray:
    """The array FILE:KEY names, read as tracer reads every file (regular files only, every header bounded,
    nothing unpickled), as the spec's dtype, its shape checked against the stage's (or ``shape``: a head's part)."""
    from tracer.checkpoints.formats import NpzFile
    from tracer.files import note_input, outside_confinement

    path, sep, key = source.rpartition(":")
    if not sep or not path or not key:
        raise UsageError(msg("{option} {stage}={source}: expected FILE:KEY, an .npz archive and the name of an array in it (e.g. trace.npz:blocks.0.output)",
                             option=option, stage=stage, source=source))
    if outside_confinement(os.path.abspath(path)):
        raise UsageError(at(path, msg("is outside the folder --confine allows; a spec may refer only to files inside it")))
    if not os.path.lexists(path):
        raise UsageError(at(path, msg("{option}: no such file", option=option)))
    note_input(path)
    try:
        archive = NpzFile(path, numbers_only=True)
    except CheckpointError as e:
        raise UsageError(msg("{option} {stage}={source}: {e}", option=option, stage=stage, source=source, e=e.message)) from None
    if key not in archive.tensors:
        from tracer.model.catalogue import suggest

        held = list(archive.tensors)
        raise UsageError(at(path, msg("{option}: no array {key} in the archive{hint}; it holds {n} arrays: {names}", option=option, key=repr(key),
                                      hint=suggest(key, held), n=len(held), names=", ".join(held[:8]) + (", ..." if len(held) > 8 else ""))))
    axes, sizes = shape or spec.stage_shapes[stage]
    got = archive.info(key).shape
    if tuple(got) != tuple(sizes):
        raise UsageError(at(path, msg("{option} {stage}={source}: expected shape {expected}, received {got}", option=option, stage=stage,
                                      source=source, expected=shape_label(axes, tuple(sizes)), got="[" + ",".join(map(str, got)) + "]")))
    try:
        value = archive.raw(key)
    except CheckpointError as e:
        raise UsageError(msg("{option} {stage}={source}: {e}", option=option, stage=stage, source=source, e=e.message)) from None
    finally:
        archive.zip.close()
    out = np.array(value, dtype=np.dtype(spec.dtype))  # a copy, in the run's dtype
    if not np.isfinite(out).all():
        raise UsageError(at(path, msg("{option} {stage}={source}: expected finite numbers, received NaN or Inf", option=option, stage=stage, source=source)))
    return out


def _check_head_number(option: str, name: str, known: Mapping[str, object], spec: Spec) -> None:
    """ATTN.head.N (or ATTN.head.N.PART) with N past the last head: a UsageError saying which heads there are."""
    prefix, dot_head, rest = name.rpartition(".head.")
    number, _, part = rest.partition(".")
    if dot_head and f"{prefix}.head.0" in known and name not in known:
        if part and part not in HEAD_PARTS[1:]:
            raise UsageError(msg("{option}: a head's part is q, k, v or pattern (ATTN.head.N alone: its output), received {got}",
                                 option=option, got=part))
        last = spec.stage_shapes[f"{prefix}.k"][1][1] if part in ("k", "v") else spec.dims.H
        raise UsageError(msg("{option}: expected a head 0 to {last} (H = {H}), received {got}", option=option, last=last - 1,
                             H=last, got=number))


def _mean_over(option: str, name: str, reference: str, spec: Spec, heads: dict[str, tuple[str, int]]) -> Intervention:
    """``--ablate STAGE=mean-over:REF``: the stage (or a head's output) replaced, at every sample and position, by its mean
    over every sample and position of the run of the spec REF (the same model on a reference set of prompts)."""
    from tracer.spec.loading import load

    if name not in heads and name not in {s.name for s in spec.steps}:
        raise _unknown("--ablate", name, spec, heads)
    ref = load(reference)
    stage, h = heads.get(name, (name, -1))
    inner = f"{name.rpartition('.head.')[0]}.heads" if h >= 0 else name
    if inner not in ref.stage_shapes or tuple(ref.stage_shapes[inner][1][2:]) != tuple(spec.stage_shapes[inner][1][2:]):
        raise UsageError(msg("{option}: {ref} does not trace {stage} with the shape {shape} has here (the reference must be the same model on other prompts)",
                             option=option, ref=reference, stage=inner, shape=shape_label(*spec.stage_shapes[inner])))
    axes = spec.stage_shapes[inner][0]
    if axes[:2] != ("B", "T"):
        raise UsageError(msg("{option}: {stage} {shape} has no samples and positions to take a mean over", option=option, stage=inner,
                             shape=shape_label(*spec.stage_shapes[inner])))
    sizes = spec.stage_shapes[inner][1]
    shape = tuple(sizes) if h < 0 else (*sizes[:-1], sizes[-1] // spec.dims.H)
    value = np.zeros(shape, dtype=np.dtype(spec.dtype))  # made when the spec runs (the executor runs the reference: mean_of)
    if h < 0:
        return Intervention(stage, "set", option, value, f"mean over {reference}", reference=(ref, inner, -1))
    return Intervention(stage, "head", option, edits=(HeadEdit("output", h, value, f"mean over {reference}"),), reference=(ref, inner, h))


def mean_of(iv: Intervention, run: Callable[[Spec, str], np.ndarray | None]) -> Intervention:
    """An intervention whose value is a reference run's mean (``--ablate STAGE=mean-over:REF``), that mean put in:
    ``run(spec, stage)`` runs the reference and returns the stage (None: the run had a violation)."""
    if iv.reference is None:
        return iv
    ref, inner, h = iv.reference
    got = run(ref, inner)
    if got is None:
        raise UsageError(msg("{option}: the reference run {ref} has a violation (`tracer run {ref}` shows it)", option=iv.option, ref=ref.path))
    mean = got.mean(axis=(0, 1))
    if h < 0:
        assert iv.value is not None
        return iv._replace(value=np.broadcast_to(mean, iv.value.shape).astype(iv.value.dtype), reference=None)
    e = iv.edits[0]
    d = e.value.shape[-1]
    return iv._replace(edits=(e._replace(value=np.broadcast_to(mean[h * d:(h + 1) * d], e.value.shape).astype(e.value.dtype)),), reference=None)


def _split(option: str, item: str) -> tuple[str, str]:
    name, sep, rest = item.partition("=")
    if not sep or not name or not rest:
        raise UsageError(msg("{option} {item}: expected STAGE=FILE:KEY", option=option, item=item))
    return name, rest


def resolve(spec: Spec, requests: Requests) -> tuple[Intervention, ...]:
    """Every request checked against the spec and its arrays read; a UsageError (exit 2) for any mistake."""
    steps = {s.name: i for i, s in enumerate(spec.steps)}
    heads = _heads_of(spec)
    d = spec.dims.d if hasattr(spec.dims, "d") else spec.dims.C // spec.dims.H
    found: dict[str, Intervention] = {}

    def add(iv: Intervention) -> None:
        have = found.get(iv.stage)
        if have is not None and not (have.kind == iv.kind and iv.kind in ("heads", "head")):
            raise UsageError(msg("{option}: {stage} is already replaced by {other}; give one intervention a stage",
                                 option=iv.option, stage=iv.stage, other=have.option))
        if have is not None and iv.kind == "head":  # several heads' parts of one attention step
            twice = [e for e in iv.edits if any((e.part, e.head) == (o.part, o.head) for o in have.edits)]
            if twice:
                raise UsageError(msg("{option}: {label} of {stage} is already set by {other}; set each head's part once",
                                     option=iv.option, label=twice[0].label(), stage=iv.stage, other=have.option))
            iv = have._replace(edits=have.edits + iv.edits, option=f"{have.option} {iv.option}")
        elif have is not None:  # several heads of one attention step
            iv = have._replace(heads=tuple(sorted({*have.heads, *iv.heads})))
        found[iv.stage] = iv

    for item in requests.ablate:
        name, sep, how = item.partition("=")
        option = f"--ablate {item}"
        if name not in heads:
            _check_head_number(option, name, heads, spec)
        if how.startswith("mean-over:"):  # the mean over a reference set of prompts: another spec of the same model
            add(_mean_over(option, name, how.removeprefix("mean-over:"), spec, heads))
            continue
        if name in heads:
            if sep:
                raise UsageError(msg("{option}: a head is ablated to zero; =mean is for a stage", option=option))
            stage, h = heads[name]
            add(Intervention(stage, "heads", option, heads=(h,), d=int(d)))
            continue
        if name not in steps:
            raise _unknown("--ablate", name, spec, heads)
        if sep and how not in ("zero", "mean"):
            raise UsageError(msg("{option}: expected STAGE, STAGE=zero or STAGE=mean, received ={how}", option=option, how=how))
        kind = how if sep else "zero"
        if kind == "mean" and position_axis(spec.stage_shapes[name][0]) is None:
            raise UsageError(msg("{option}: {stage} {shape} has no position axis to take a mean over", option=option, stage=name,
                                 shape=shape_label(*spec.stage_shapes[name])))
        add(Intervention(name, kind, option))
    for option_name, items, kind in (("--set", requests.set, "set"), ("--from", requests.start, "from")):
        targets = head_targets(spec) if items else {}
        for item in items:
            name, source = _split(option_name, item)
            if name in targets and kind == "set":  # one head's part
                stage, h, part = targets[name]
                value = _read_array(option_name, name, source, spec, head_shape(spec, stage, part))
                add(Intervention(stage, "head", f"{option_name} {item}", edits=(HeadEdit(part, h, value, source),)))
                continue
            if name in targets:
                raise UsageError(msg("{option} {item}: --from starts at a step's stage; a head's part is replaced with --set", option=option_name, item=item))
            _check_head_number(f"{option_name} {item}", name, targets, spec)
            if name not in steps:
                raise _unknown(option_name, name, spec, heads)
            add(Intervention(name, kind, f"{option_name} {item}", _read_array(option_name, name, source, spec), source))
    starts = [iv for iv in found.values() if iv.kind == "from"]
    if len(starts) > 1:
        raise UsageError(msg("--from: give one stage to start from, received {n}", n=len(starts)))
    if starts:
        first = steps[starts[0].stage]
        for step in spec.steps[first + 1:]:
            for read in step.inputs:
                if steps.get(read, first) < first:
                    raise UsageError(msg("{option}: {step} reads {read}, a stage before {stage}, which is not computed; start from a stage that carries "
                                         "everything the later steps read (a layer's output, say)",
                                         option=starts[0].option, step=step.name, read=read, stage=starts[0].stage))
        for iv in found.values():
            if steps[iv.stage] < first:
                raise UsageError(msg("{option}: {stage} comes before {start}, which the run starts from", option=iv.option, stage=iv.stage,
                                     start=starts[0].stage))
    return tuple(sorted(found.values(), key=lambda iv: steps[iv.stage]))


def attach(spec: Spec, requests: Requests | None) -> Spec:
    """The spec with these interventions on it (resolved: names, files, shapes checked); the spec itself if none."""
    if not requests:
        return spec
    return spec._replace(interventions=resolve(spec, requests))


def requests_of(ablate: Sequence[str] | str | None = None, set: Sequence[str] | str | None = None,
                start: Sequence[str] | str | None = None) -> Requests:
    def many(v: Sequence[str] | str | None, what: str) -> tuple[str, ...]:
        if v is None:
            return ()
        if isinstance(v, str):
            return (v,)
        if not all(isinstance(x, str) for x in v):
            raise UsageError(msg("{what}: expected text such as 'blocks.0.attn.head.3' or a list of them", what=what))
        return tuple(v)

    return Requests(many(ablate, "ablate"), many(set, "set"), many(start, "start"))
