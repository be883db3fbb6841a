"""tracer diff's two sides, lined up: each side (a spec run here, a saved trace, another program's arrays) as a Side,
the two step lists aligned by step name (each step with all its settings), the stages aligned by name, another
program's arrays put under the reference's stage names, and its scores recorded after the mask read as such."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracer.compare.settings import of_spec
from tracer.compare.status import DIFFERS, EQUAL, ONLY_A, ONLY_B
from tracer.engine import executor
from tracer.engine.executor import Stage
from tracer.errors import DiffTrouble
from tracer.messages import Message, join, msg
from tracer.model.activations import ACTIVATIONS, DEFAULT_ACTIVATION
from tracer.model.blocks import ATTN_MEANINGS, Step, internal_prefix, shown_internal
from tracer.model.ops import OPS
from tracer.spec import Spec, memory
from tracer.views.trace_json import block_json


@dataclass
class Side:
    label: str  # "A" | "B"
    path: str
    source: str  # "spec" | "trace" | "arrays" (another program's arrays: names and values only)
    name: str
    dims: dict[str, int]
    block: dict[str, Any]
    dtype: str | None
    steps: tuple[Step, ...]
    stages: dict[str, Stage]
    weights: dict[str, np.ndarray] | None
    violations: list[dict[str, Any]]
    spec: Spec | None = None  # the spec a "spec" side was run from (hints recompute its typical bugs)
    settings: dict[str, Any] = field(default_factory=dict)  # every setting, flat and normalised (compare.settings)
    step_settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # each step's settings, by step name
    complete: bool = True  # False: a trace saved before traces recorded every setting (only those it has are compared)
    rows: dict[str, tuple[int, ...]] = field(default_factory=dict)  # a weight of which the run read only these rows

    @property
    def is_arrays(self) -> bool:
        return self.source == ARRAYS

    @property
    def has_internals(self) -> bool:
        return any(s.internal for s in self.stages.values())

    def describe(self) -> Message:
        if self.is_arrays:
            return msg("{label}: {path} (arrays, {name})", label=self.label, path=self.path, name=self.name)
        if self.source == "trace":
            return msg("{label}: {path} (trace, {name})", label=self.label, path=self.path, name=repr(self.name))
        return msg("{label}: {path} (spec, {name})", label=self.label, path=self.path, name=repr(self.name))


ARRAYS = "arrays"


def spec_side(spec: Spec, path: str, label: str, keep_going: bool, trace: executor.Recording | None = None,
              params: dict[str, np.ndarray] | None = None, grad: bool = False, lean: bool = False) -> Side:
    """A spec run here (or already run: ``trace`` and its ``params``); ``grad``: its gradients instead (tracer grad);
    ``lean``: run keeping no attention internals but the cross-attention weights (see load_side)."""
    if trace is None or params is None:
        policy = None
        if lean:
            shown = frozenset(f"{internal_prefix(st)}.{key}" for st in spec.steps for key in ATTN_MEANINGS if shown_internal(st, key))
            policy = memory.RecordPolicy("main", shown)
        with np.errstate(all="ignore"):  # NaN and Inf show up as stages, not as warnings
            ex = executor.Executor(spec, keep_going, policy=policy)
            trace = ex.run()
            params = ex.params
    block = block_json(spec.block)
    violations = [v.as_json() for v in trace.violations]
    stages = {n: st for n, st in trace.stages.items() if st.data is not None}
    weights = params
    if grad and (trace.ok or keep_going):
        from tracer.grad import losses
        from tracer.grad.run import backward

        g = backward(trace, losses.choose(spec, None))
        stages, weights = dict(g.grads), g.weight_grads
    flat, steps = of_spec(spec)
    from tracer.engine.params import embedding_rows

    read = embedding_rows(spec)  # an embedding from a checkpoint file: the run reads only its tokens' rows
    return Side(label, path, "spec", spec.name, spec.dims.as_dict(), block, spec.dtype, spec.steps, stages, weights, violations, spec,
                settings=flat, step_settings=steps, rows={} if read is None or grad else {"embedding": tuple(read)})


def arrays_side(arrays: dict[str, np.ndarray], path: str, label: str) -> Side:
    """Another program's arrays: stages in name only until matched against the other side (see activations.match)."""
    from tracer.compare.arrays import catalogue_stages, describe

    dtype = getattr(arrays, "dtype", None)  # the narrowest dtype they were written in (activations.Arrays): it sets the tolerance
    return Side(label, path, ARRAYS, describe(arrays), {}, {}, dtype, (), catalogue_stages(arrays), None, [], None)


def violation_lines(sides: tuple[Side, Side]) -> list[Message]:
    # a violation's message starts with its stage: "norm1: beta has shape [1] where [C] = [2] is due"
    return [msg("{label} ({path}): {kind} violation: {message}", label=s.label, path=s.path, kind=kind_message(v["kind"]), message=v["message"])
            for s in sides for v in s.violations]


def kind_message(kind: str) -> Message | str:
    """A violation's kind as a word of a sentence ('broadcast'); a hand-edited trace's unknown kind stays as written."""
    from tracer.model.contracts import kind_word

    return kind_word(kind)


def check_violations(sides: tuple[Side, Side], keep_going: bool) -> None:
    if keep_going:
        return
    found = violation_lines(sides)
    if found:
        raise DiffTrouble(join([join([msg("a side has a violation, so its later stages are not comparable:"), *found], "\n  "),
                                msg("(give --keep-going to compare anyway, with NumPy's result recorded at each violation)")], "\n"))


def align(a_names: list[str], b_names: list[str]) -> list[str]:
    """A's order; a name only in B goes right after the name that precedes it in B."""
    merged = list(a_names)
    seen = set(merged)
    for i, name in enumerate(b_names):
        if name in seen:
            continue
        at = merged.index(b_names[i - 1]) + 1 if i else 0
        merged.insert(at, name)
        seen.add(name)
    return merged


def setting_text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _default_setting(step: Step, key: str) -> Any:
    """A step setting an expression leaves unsaid: the op's contract axis, self-attention's causal mask, the input it
    reads by default (None: none, every value is said)."""
    op = OPS.get(step.op)
    if key == "axis":
        return op.axes[0] if op is not None and op.axes else None
    if key == "mask":
        return "none" if step.op == "cross_mha" else "causal"
    if key == "stream":
        return {"embed": "tokens", "input": "x"}.get(step.op)
    return None


def expr(step: Step, settings: dict[str, Any] | None = None) -> str:
    """The step's right-hand side in the book's notation (its record's ``expr``), with each of its settings that the
    notation does not show and that is not the usual one after a semicolon (``MHA(norm1); mask none``), so that two
    steps that compute differently never read the same; a hand-edited trace's unknown op as a call."""
    settings = step.params() if settings is None else settings
    op = OPS.get(step.op)
    template = None if op is None else op.expr
    text = None
    try:
        if template is not None:
            activation = str(settings.get("activation") or DEFAULT_ACTIVATION)
            record = ACTIVATIONS.get(activation)  # a saved trace's activation this tracer does not know: its name as written
            act = activation if record is None else record.expr
            gate = ""
            if record is not None and record.gate is not None and "{gate}" in template:  # SiLU(x W1 + b1) * (x W3 + b3), not 'SwiGLU(x W1 + b1)'
                act, gate = ACTIVATIONS[record.gate].expr, f" * ({step.inputs[0]} W3 + b3)"
            head = "E^T" if settings.get("head") == "tied" else "W_head"
            text = template.format(*step.inputs, w=step.weights, act=act, gate=gate, head=head)
    except IndexError:  # fewer inputs than the op's usual form (a hand-edited trace)
        pass
    if text is None:
        return f"{step.op}({', '.join(step.inputs)}{'; ' + step.weights if step.weights else ''})"
    said = {"activation"} if template is not None and "{act}" in template else set()
    if template is not None and "{head}" in template:
        said.add("head")
    rest = [f"{k} {setting_text(v)}" for k, v in settings.items()
            if k not in said and v is not None and v != _default_setting(step, k)]
    return text + ("; " + ", ".join(rest) if rest else "")


def _same_step(a: Step, b: Step, sa: dict[str, Any] | None = None, sb: dict[str, Any] | None = None) -> bool:
    """The same computation: the same op on the same stages with the same weights (an add's operands in either order)
    and the same settings (normalised: a mask by its matrix)."""
    return same_wiring(a, b) and setting_changes(a, b, sa, sb) == []


OP_FAMILIES = {"layer_norm": "norm", "rms_norm": "norm", "rms_norm_offset": "norm", "batch_norm": "norm"}  # one setting's choices


def same_wiring(a: Step, b: Step, by_family: bool = False) -> bool:
    """The same op on the same stages with the same weights (an add's operands in either order), settings aside;
    ``by_family``: any op of one family (a norm) is the same kind of op, its choice a setting."""
    ins_a, ins_b = (sorted(a.inputs), sorted(b.inputs)) if a.op == b.op == "add" else (list(a.inputs), list(b.inputs))
    op_a, op_b = (OP_FAMILIES.get(a.op, a.op), OP_FAMILIES.get(b.op, b.op)) if by_family else (a.op, b.op)
    return (op_a, ins_a, a.weights) == (op_b, ins_b, b.weights)


def setting_changes(a: Step, b: Step, sa: dict[str, Any] | None = None, sb: dict[str, Any] | None = None) -> list[str]:
    """The settings of two steps that differ (all of each step's settings, normalised), by name."""
    sa = a.params() if sa is None else sa
    sb = b.params() if sb is None else sb
    return [k for k in align(list(sa), list(sb)) if sa.get(k) != sb.get(k)]


@dataclass
class StepRow:
    name: str
    a: Step | None
    b: Step | None
    settings_a: dict[str, Any] | None = None  # the step's normalised settings (compare.settings)
    settings_b: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        if self.a is None:
            return ONLY_B
        if self.b is None:
            return ONLY_A
        return EQUAL if _same_step(self.a, self.b, self.settings_a, self.settings_b) else DIFFERS

    @property
    def changed(self) -> list[str]:
        """The settings that differ, by name (empty when a side lacks the step)."""
        if self.a is None or self.b is None:
            return []
        return setting_changes(self.a, self.b, self.settings_a, self.settings_b)

    def expr_a(self) -> str:
        assert self.a is not None
        return expr(self.a, self.settings_a)

    def expr_b(self) -> str:
        assert self.b is not None
        return expr(self.b, self.settings_b)


def step_rows(a_steps: tuple[Step, ...], b_steps: tuple[Step, ...], settings_a: dict[str, dict[str, Any]] | None = None,
              settings_b: dict[str, dict[str, Any]] | None = None) -> list[StepRow]:
    """The two step lists aligned by step name, each step with its settings."""
    A = {s.name: s for s in a_steps}
    B = {s.name: s for s in b_steps}
    sa, sb = settings_a or {}, settings_b or {}
    return [StepRow(n, A.get(n), B.get(n), sa.get(n), sb.get(n)) for n in align(list(A), list(B))]


@dataclass
class StageRow:
    name: str
    status: str
    a: Stage | None
    b: Stage | None
    value_a: np.ndarray | None  # at (batch, pos); None when that side has no such row
    value_b: np.ndarray | None
    max_abs_diff: float | None = None
    where: tuple[int, ...] | None = None

    def where_label(self) -> str:
        if self.where is None or self.a is None:
            return ""
        return ", ".join(f"{axis.lower()}={i}" for axis, i in zip(self.a.axes, self.where))


def value_at(stage: Stage | None, batch: int, pos: int) -> np.ndarray | None:
    if stage is None:
        return None
    try:
        return np.asarray(stage.at(batch, pos))
    except IndexError:  # this side has fewer samples or positions
        return None


@dataclass
class ArraysReport:
    """What became of the arrays of the side that holds them: matched, renamed, left over, reshaped."""

    label: str  # the side with the arrays ("B"; "A" when only A holds arrays)
    path: str
    reference: str  # the other side's label
    matched: list[str]  # stage names (the reference's)
    renamed: dict[str, str]  # stage -> the user's name, where they differ
    unmatched: list[str]  # the user's arrays that match no stage
    unbatched: list[str]  # given without the batch axis, read with B = 1
    not_recorded: list[str]  # the reference's stages the arrays do not hold

    def as_json(self) -> dict[str, Any]:
        return {"side": self.label, "path": self.path, "matched": list(self.matched), "renamed": dict(self.renamed),
                "unmatched": list(self.unmatched), "without_batch_axis": list(self.unbatched),
                "not_recorded": list(self.not_recorded)}


MASKED_BELOW = -1e4  # a recorded score at or below this where the mask hides a key is a masked score


def masked_scores(mine: dict[str, Stage], ref: Side) -> tuple[dict[str, Stage], list[str]]:
    """The student's attention scores recorded after the mask (-inf, or a large negative, wherever the spec's mask hides
    a key) are compared where the mask lets a key through: the masked entries are read as tracer's, the diff carries
    on to the weights, and a note says so.  The hidden keys are the mask's, not where tracer's weights are 0 (a weight
    that underflows to 0 is not a hidden key)."""
    from tracer.compare.recompute import visible_for

    out, masked = dict(mine), []
    for name, stage in mine.items():
        ours = ref.stages.get(name)
        step = next((s for s in ref.steps if s.op == "mha" and f"{internal_prefix(s)}.scores" == name), None)
        if ours is None or ours.data is None or step is None or stage.array.shape != ours.array.shape or ours.array.ndim != 4:
            continue
        n_q, n_k = ours.array.shape[-2:]
        if n_q != n_k:
            continue
        hidden = np.broadcast_to(~visible_for(ref.spec, ref.block, step, n_q)[None, None], ours.array.shape)
        theirs = stage.array
        if not hidden.any() or not np.all(theirs[hidden] <= MASKED_BELOW) or np.all(ours.array[hidden] <= MASKED_BELOW):
            continue
        out[name] = Stage(name, np.where(hidden, ours.array, theirs), stage.axes, stage.meaning, stage.internal)
        masked.append(name)
    return out, masked
