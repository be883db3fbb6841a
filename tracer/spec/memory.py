"""How much memory a run will take, worked out from the spec alone: no NumPy, nothing allocated.

A run holds, at its peak:
- the interpreter with NumPy, rich, typer and PyYAML loaded (INTERPRETER_BYTES);
- the values given inline in the spec, as read (YAML_VALUE_BYTES each: the parse keeps where each came from);
- the output text: JSON and CSV are written a stage at a time, so the largest stage's text;
- the weights and the inputs as arrays;
- every recorded stage: in full, as statistics plus the value at the table's (b, t), as that value alone,
  or not at all, as the RecordPolicy says (``--record auto|all|main|stats`` and ``--keep``);
- the working memory of the most demanding step: arrays a step computes that are not recorded
  in full but are alive while it runs (a stage not kept in full, until the last step that reads it;
  attention's scores and weights are made only when kept: otherwise a block of rows at a time), and each
  kernel's temporaries.

Attention is what grows: its scores and weights are [B,H,T,T], B * H * T^2 values each, so
T = 1024 with 12 heads is 100 MB per array in float64 and T = 100000 is 960 GB.  The executor's
The executor's StageKeeper keeps each stage as ``plan_stages`` says, so the estimate and what is recorded cannot
drift apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from tracer import reading
from tracer.checkpoints.formats import READ_BLOCK, STORED_ITEMSIZE
from tracer.errors import UsageError
from tracer.messages import Message, at, join, msg
from tracer.model.blocks import ATTN_MEANINGS, Step, internal_prefix, shown_internal
from tracer.model.ops import OPS
from tracer.model.shapes import ITEMSIZE, PY_VALUE_BYTES, shape_label
from tracer.spec import Spec

RECORD_MODES = ("auto", "all", "main", "stats")  # --record; auto is "table" for the plain table, else "all" (record_mode)
POLICY_MODES = ("all", "main", "stats", "table")  # RecordPolicy.mode
DEFAULT_MAX_MEMORY = "4GB"
STATS_MIN_VALUES = 1 << 16  # under --record stats, smaller arrays are kept in full: statistics would save little
INTERPRETER_BYTES = 64 * 2**20  # Python with NumPy, rich, typer and PyYAML imported (see benchmarks/memory.py)
# One number given inline, while the spec is read: its float and list slot, the parser's event, and the line,
# column, path and text kept for error messages (measured: 412 bytes at 524,288 inline values; benchmarks/memory_formats.py).
YAML_VALUE_BYTES = 440
JSON_VALUE_BYTES = 112  # one value of the stage being written by --json: a Python float from tolist(), its text, the encoder's pieces
CSV_VALUE_BYTES = 96  # one value of the stage being written as CSV: its text, the row's list of cell strings
STATS_BYTES = 256  # shape, mean, std, min, max of one stage
DRAW_CHUNK = 1 << 15  # values drawn at a time from a weight's stream (params.uniform)
SUMMARY_TEMP_BYTES = 2 * 8 * 2**20  # statistics are taken over blocks of 1M values: two float64 temporaries

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")
MAX_SIZE = 2**60  # 1 EiB: a larger --max-memory is a typo, not a machine


def parse_size(text: str, option: str = "--max-memory") -> int | None:
    """'4GB', '512MB', '2GiB', '1.5G', '1000000' (bytes) -> bytes; 'none' -> no limit."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    m = _SIZE_RE.match(text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise UsageError(msg("{option} {text}: expected a size such as 4GB, 512MB, 2GiB or a number of bytes, or none for no limit (KB, MB, GB, TB are powers "
                             "of 1000; KiB, MiB, GiB, TiB powers of 1024)", option=option, text=repr(text)))
    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-8:]}"
    digits = m.group(1)
    if digits.isdigit() and len(digits) <= 18:  # a whole number: exact as an int (the default 4GB; no decimal import)
        number: Any = int(digits)
        too_big = number * _UNITS[unit] > MAX_SIZE
    else:
        from decimal import Decimal

        number = Decimal(digits)  # exact: a float of 400 digits is inf, and int(inf) an OverflowError
        too_big = number.adjusted() > 30 or number * _UNITS[unit] > MAX_SIZE
    if too_big:
        raise UsageError(msg("{option} {shown}: more than any machine has: at most 1 EiB (none turns the limit off)", option=option, shown=repr(shown)))
    size = int(number * _UNITS[unit])
    if size <= 0:
        raise UsageError(msg("{option} {text}: the limit must be more than 0 bytes (none turns it off)", option=option, text=repr(text)))
    return size


LOWER_T_OR_B = msg("lower T or B")


def format_size(n: int | float) -> str:
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            v = n / scale
            return f"{v:.3g} {unit}" if v < 1000 else f"{v:,.0f} {unit}"
    return f"{int(n)} B"


class RecordPolicy(NamedTuple):  # NamedTuples, not dataclasses, here: a tenth of the import time
    """What the StageKeeper keeps of each stage: 'full', 'stats', 'point' (the value at (b, t) alone) or 'skip'."""

    mode: str = "all"  # all | main | stats | table (what the plain table shows: --record auto)
    keep: frozenset[str] = frozenset()  # stages kept in full whatever the mode
    b: int = 0  # under stats and table, the sample and position whose value is kept for the table
    t: int = 0

    def how(self, name: str, internal: bool, values: int, final: bool, shown: bool = False) -> str:
        """``shown``: an internal stage the default table shows all the same (the cross-attention weights)."""
        if name in self.keep:
            return "full"
        if (self.mode == "main" or (self.mode == "table" and not shown)) and internal:
            return "skip"
        if self.mode == "table" and not final:
            return "point"  # the table shows its value at (b, t); the block output is shown in full
        if self.mode == "stats" and not final and values >= STATS_MIN_VALUES:
            return "stats"  # the block output (the table's matrix) is always kept in full
        return "full"


class PlannedStage(NamedTuple):
    name: str
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    itemsize: int
    internal: bool
    how: str  # full | stats | point | skip
    alias: bool = False  # the same memory as an input, a weight or an earlier stage: costs nothing more

    @property
    def values(self) -> int:
        return math.prod(self.shape)

    @property
    def full_bytes(self) -> int:
        return 0 if self.alias else self.values * self.itemsize

    @property
    def kept_bytes(self) -> int:
        if self.how == "full":
            return self.full_bytes
        value = math.prod(n for _, n in _value_axes(self.axes, self.shape)) * self.itemsize
        if self.how == "stats":
            return STATS_BYTES + value
        if self.how == "point":
            return value
        return 0

    @property
    def label(self) -> str:
        return f"{self.name} {shape_label(self.axes, self.shape)}"


def _value_axes(axes: tuple[str, ...], shape: tuple[int, ...]) -> list[tuple[str, int]]:
    """The axes left in a stage's value at one (b, t): B and the first position axis are fixed."""
    out, seen_t = [], False
    for a, n in zip(axes, shape):
        if a == "B" or (a in ("T", "S") and not seen_t):
            seen_t = seen_t or a != "B"
            continue
        out.append((a, n))
    return out




def stage_names(spec: Spec) -> list[str]:
    """Every stage a run records under --record all, in order."""
    return [s.name for s in plan_stages(spec, RecordPolicy())]


def _internals(step: Step) -> list[str]:
    prefix = internal_prefix(step)
    return [f"{prefix}.{key}" for key in ATTN_MEANINGS] if OPS[step.op].attention else []


def plan_stages(spec: Spec, policy: RecordPolicy) -> list[PlannedStage]:
    """The stages the executor records, with their shapes, in order, and how each is kept."""
    itemsize = ITEMSIZE[spec.dtype]
    final = spec.steps[-1].name if spec.steps else ""
    out: list[PlannedStage] = []
    by_name: dict[str, PlannedStage] = {}

    def add(name: str, internal: bool = False, alias_of: str | None = None, shown: bool = False) -> None:
        axes, shape = spec.stage_shapes[name]
        how = policy.how(name, internal, math.prod(shape), name == final, shown)
        # An alias costs nothing more, unless it keeps in full an array its source let go.
        source = by_name.get(alias_of) if alias_of else None
        alias = alias_of == "" or (source is not None and (source.how == "full" or how != "full"))
        stage = PlannedStage(name, tuple(axes), tuple(shape), itemsize, internal, how, alias)
        out.append(stage)
        by_name[name] = stage

    for step in spec.steps:
        for name in _internals(step):
            add(name, internal=True, shown=shown_internal(step, name.rpartition(".")[2]))
        view = OPS[step.op].view  # a stage that is a view of an array that exists anyway
        if view == "given":
            add(step.name, alias_of="")  # the input, or rows of the position table: counted with them
        elif view == "input":
            add(step.name, alias_of=step.inputs[0])
        else:
            add(step.name)
    return out


class Estimate:
    def __init__(self, spec: Spec, policy: RecordPolicy, stages: list[PlannedStage], weights: int, spec_values: int,
                 working: int, working_at: Message | str) -> None:
        self.spec = spec
        self.policy = policy
        self.stages = stages
        self.weights = weights  # weights and inputs as arrays
        self.spec_values = spec_values
        self.working = working  # the largest working memory of one step
        self.working_at = working_at  # which step, and what it holds
        self.extra: dict[str, int] = {}  # --json, --format csv, --with-weights, --verify
        self.form = "table"
        self.interpreter = INTERPRETER_BYTES

    @property
    def recorded(self) -> int:
        return sum(s.kept_bytes for s in self.stages)

    @property
    def total(self) -> int:
        return self.interpreter + self.spec_values + self.weights + self.recorded + self.working + sum(self.extra.values())

    def largest(self, n: int = 3) -> list[tuple[str, int]]:
        def kept(s: PlannedStage) -> Message:
            if s.how == "stats":
                return msg("{label} (statistics and one slice)", label=s.label)
            return msg("{label} (one slice)", label=s.label) if s.how == "point" else msg("{label} (recorded)", label=s.label)

        parts: list[tuple[str, int]] = [(kept(s), s.kept_bytes) for s in self.stages if s.kept_bytes]
        parts.append((msg("weights and inputs"), self.weights))
        parts.append((msg("working memory of {what}", what=self.working_at), self.working))
        parts += [(extra_word(k), v) for k, v in self.extra.items()]
        return sorted((p for p in parts if p[1]), key=lambda p: -p[1])[:n]

    def breakdown(self) -> Message:
        total, a, b, c, d = (format_size(n) for n in (self.total, self.recorded, self.weights, self.working, self.interpreter))
        if not self.extra:
            return msg("{total} (recorded stages {a}, weights and inputs {b}, working memory {c}, interpreter {d})", total=total, a=a, b=b, c=c, d=d)
        return msg("{total} (recorded stages {a}, weights and inputs {b}, working memory {c}, interpreter {d}, {extra})",
                   total=total, a=a, b=b, c=c, d=d, extra=sized(self.extra.items(), ", "))


# What the extra parts of an estimate are called (the keys of Estimate.extra), in words
EXTRA_WORDS: dict[str, Message] = {
    "--json output": msg("--json output"),
    "--format csv output": msg("--format csv output"),
    "--with-weights": msg("--with-weights"),
    "--verify reference": msg("--verify reference"),
    "backward gradients": msg("backward gradients"),
    "--json gradients": msg("--json gradients"),
}


def extra_word(key: str) -> str:
    return EXTRA_WORDS.get(key, key)


def sized(parts: Iterable[tuple[str, int]], sep: str = "; ") -> Message:
    """'attn.scores [..] (recorded) 101 MB; weights and inputs 63 MB': each part and its size."""
    return join([msg("{label} {size}", label=extra_word(label), size=format_size(n)) for label, n in parts], sep)


def _input_sizes(spec: Spec) -> dict[str, tuple[int, int]]:
    """Each input stream: (values, bytes per value) as an array."""
    d, out = spec.dims, {}
    for stream, inp in spec.inputs().items():
        n = (d.S or 0) if stream == "source" else d.T
        if inp.kind == "tokens":
            out[stream] = (d.B * n, 8)
        else:
            out[stream] = (d.B * n * d.C, ITEMSIZE[spec.dtype])
    return out


def _held_values(spec: Spec, name: str, shape: tuple[int, ...], source: str) -> int:
    """Values a run holds for one weight: an embedding table from a checkpoint that no tied head reads holds
    only the rows of the input's tokens (params.embedding_rows); the rest are zero pages, never resident."""
    if name == "embedding" and source == "file" and spec.block.head != "tied":
        d = spec.dims
        tokens = d.B * (d.T + (d.S or 0))
        return min(shape[0], tokens) * shape[1]
    return math.prod(shape)


def _given_values(spec: Spec) -> int:
    n = sum(math.prod(w.given_shape or w.shape) for w in spec.weights.values() if w.source == "given")
    for stream, inp in spec.inputs().items():
        if inp.value != "random":
            n += _input_sizes(spec)[stream][0]
    return n


def _reading_bytes(spec: Spec, w: Any) -> int:
    """The memory reading weight ``w`` from its checkpoint holds beyond the weight itself."""
    stored, take = w.value.stored, w.value.take
    itemsize = ITEMSIZE[spec.dtype]
    block = 0 if stored.dtype == spec.dtype else 3 * READ_BLOCK  # the stored block, its widened copy, the converted block
    # a part of a packed tensor is made from the whole tensor as read; a matrix taken transposed is read straight into
    # its transpose (refs.read_refs)
    whole = math.prod(stored.shape) * itemsize if (take.split or take.rows or (take.transpose and len(stored.shape) != 2)) else 0
    if w.path == "embedding" and w.source == "file" and spec.block.head != "tied":
        # its rows as stored, widened (bfloat16) and converted, before they are put in the table
        return _held_values(spec, w.path, w.shape, w.source) * (STORED_ITEMSIZE.get(stored.dtype, 8) + 4 + itemsize)
    return block + whole


READ_AHEAD = 4  # groups of weights tracer run reads ahead of the one in use (a layer's: two norms, attention, FFN)


def by_layer_weights(spec: Spec) -> int:
    """The most weights read from files that tracer run holds at once when it reads each group's (a layer's norms,
    attention, FFN) ahead of its first step and lets them go after its last (params.LayerWeights): group k of the
    groups read, in order, is held from the step where group k - READ_AHEAD is handed to the run until its own last step."""
    itemsize = ITEMSIZE[spec.dtype]
    steps: dict[str, list[int]] = {}
    for i, step in enumerate(spec.steps):
        if step.weights:
            steps.setdefault(step.weights, []).append(i)
    size: dict[str, int] = {}
    for name, w in spec.weights.items():
        group = name.rpartition(".")[0]
        if w.source == "file" and group in steps:
            size[group] = size.get(group, 0) + math.prod(w.shape) * itemsize
    order = sorted(size, key=lambda g: steps[g][0])
    held = [0] * (len(spec.steps) + 1)
    for k, group in enumerate(order):
        start = steps[order[k - READ_AHEAD]][0] if k >= READ_AHEAD else 0
        for i in range(start, steps[group][-1] + 1):
            held[i] += size[group]
    return max(held, default=0)


def _later(spec: Spec, name: str) -> bool:
    """Is weight ``name`` one that tracer run reads when its group's first step starts (by_layer_weights)?"""
    group = name.rpartition(".")[0]
    return spec.weights[name].source == "file" and any(step.weights == group for step in spec.steps if step.weights)


def _working(spec: Spec, stages: list[PlannedStage]) -> tuple[int, Message | str]:
    """The most memory one step holds beyond what is recorded in full, and which step."""
    by_name = {s.name: s for s in stages}

    def transient(name: str) -> int:  # alive while computed and read, whether recorded or not
        s = by_name[name]
        return 0 if s.how == "full" or s.alias else s.values * s.itemsize

    def made(step: Step) -> list[str]:  # attention's scores and weights are made only when one of them is kept
        names = _internals(step)
        if all(by_name[n].how == "skip" for n in names if n.endswith((".scores", ".weights"))):
            names = [n for n in names if not n.endswith((".scores", ".weights"))]
        return names

    # Loading: a drawn weight is made a chunk at a time from raw 64-bit words, then doubles (then float32 if asked),
    # straight into the weight's array (counted with the weights).
    itemsize = ITEMSIZE[spec.dtype]
    drawn = [math.prod(w.shape) for w in spec.weights.values() if w.source == "seed"]
    drawn += [n for stream, (n, _) in _input_sizes(spec).items() if spec.inputs()[stream].value == "random"]
    biggest = min(max(drawn, default=0), DRAW_CHUNK)
    best: tuple[int, Message | str] = (biggest * (16 + (8 if itemsize != 8 else 0)), msg("loading the weights"))  # a chunk of raw words and their doubles
    # From a checkpoint: one tensor at a time, read into the run's dtype through a block of the stored bytes
    # (READ_BLOCK, and its widened copy), then, when the spec takes a part of it or its transpose, that part made from
    # it (counted with the weights): the whole tensor as read is held meanwhile.
    read = [_reading_bytes(spec, w) for w in spec.weights.values() if w.source == "file"]
    best = max(best, (max(read, default=0), msg("reading the checkpoint")))
    summary = SUMMARY_TEMP_BYTES if any(s.how == "stats" for s in stages) else 0  # summarising works in blocks

    last_use: dict[str, int] = {}
    for i, step in enumerate(spec.steps):
        for name in step.inputs:
            last_use[name] = i
    # One sweep: a stage is alive from the step after the one that makes it to the last step that reads it.
    alive = 0
    leaving = [0] * (len(spec.steps) + 1)  # bytes that stop being alive at step i
    for i, step in enumerate(spec.steps):
        alive -= leaving[i]
        own = transient(step.name) + sum(transient(n) for n in made(step)) + summary
        in_bytes = sum(by_name[n].values * by_name[n].itemsize for n in step.inputs if n in by_name)
        own += OPS[step.op].temporary_bytes(spec, step, in_bytes, by_name[step.name].values * by_name[step.name].itemsize)
        if alive + own > best[0]:
            held = msg("scores and weights") if OPS[step.op].attention and len(made(step)) == len(_internals(step)) else msg("its temporaries")
            best = (alive + own, msg("step {name} ({held})", name=step.name, held=held))
        if last_use.get(step.name, -1) > i:
            alive += transient(step.name)
            leaving[last_use[step.name] + 1] += transient(step.name)
    return best


def estimate(spec: Spec, policy: RecordPolicy, as_json: bool = False, visible: set[str] | None = None, verify: bool = False,
             form: str | None = None, with_weights: bool = False, by_layer: bool = False) -> Estimate:
    """What a run of ``spec`` under ``policy`` will hold at its peak (see the module's docstring).

    JSON and CSV are written a stage (a weight) at a time, so their text costs the largest one, not the sum.
    ``by_layer``: tracer run, which reads a layer's weights from files when it starts and lets them go after
    (by_layer_weights); the other weights are held throughout."""
    itemsize = ITEMSIZE[spec.dtype]
    stages = plan_stages(spec, policy)
    weights = sum(_held_values(spec, w.path, w.shape, w.source) for name, w in spec.weights.items()
                  if not (by_layer and _later(spec, name))) * itemsize
    if by_layer:
        weights += by_layer_weights(spec)
    weights += sum(n * size for n, size in _input_sizes(spec).values())
    working, working_at = _working(spec, stages)
    est = Estimate(spec, policy, stages, weights, _given_values(spec) * YAML_VALUE_BYTES, working, working_at)
    est.form = form or ("json" if as_json else "table")
    form = est.form
    shown = [s.values for s in stages if s.how == "full" and (visible is None or s.name in visible)]
    if form == "json":
        est.extra["--json output"] = max(shown, default=0) * JSON_VALUE_BYTES
    elif form == "csv":
        est.extra["--format csv output"] = max(shown, default=0) * CSV_VALUE_BYTES
    if with_weights:  # a second copy of the weights, written one at a time
        sizes = [math.prod(w.shape) for w in spec.weights.values()]
        est.extra["--with-weights"] = sum(sizes) * itemsize + max(sizes, default=0) * JSON_VALUE_BYTES
    if verify:
        est.extra["--verify reference"] = sum(math.prod(w.shape) for w in spec.weights.values()) * PY_VALUE_BYTES
    return est


# A saved JSON trace, per byte of its text: the text itself, then json.loads's lists of Python floats (about
# 32 bytes per ~20-byte value), the object array jsonin builds from them and the float64 array (benchmarks/memory.py).
SAVED_TRACE_BYTES_PER_BYTE = 4


def load_spec_within(path: str, max_memory: str) -> Spec:
    """load_spec, refused first (exit 2) if reading the spec's text would take more than --max-memory: each
    value written in it costs YAML_VALUE_BYTES while it is read, counted from the text before it is parsed."""
    from tracer.spec import load_spec_text, yamlio

    text = yamlio.read_text(path)
    values = text.count(",") + text.count("\n") + 1  # at most one scalar per separator, roughly
    limit = parse_size(max_memory)
    refuse_over(at(path, msg("reading this spec")), {msg("its values (about {n})", n=f"{values:,}"): values * YAML_VALUE_BYTES},
                limit, max_memory, msg("draw big weights from the seed instead of writing them out"))
    with reading.within(limit):  # the checkpoints it names: their headers are parsed within --max-memory too
        return load_spec_text(text, path)


def run_bytes(spec: Spec) -> int:
    """What one full run of ``spec`` (--record all, as diff and probe run it) holds beyond the interpreter."""
    return estimate(spec, RecordPolicy()).total - INTERPRETER_BYTES


def saved_trace_bytes(text_bytes: int) -> int:
    return text_bytes * SAVED_TRACE_BYTES_PER_BYTE


def compare_bytes(specs: list[Spec | None], show_all: bool) -> int:
    """Comparing two stages holds a few float64 arrays of the larger one's size (|a - b|, the tolerance, masks);
    attention internals are compared only with --all."""
    largest = max((st.values for s in specs if s is not None for st in plan_stages(s, RecordPolicy()) if show_all or not st.internal),
                  default=0)
    return 4 * 8 * largest


def refuse_over(what: str, parts: dict[str, int], limit: int | None, limit_text: str, advice: str = LOWER_T_OR_B) -> int:
    """The interpreter plus ``parts``; UsageError (exit 2) naming the parts if that is over --max-memory."""
    total = INTERPRETER_BYTES + sum(parts.values())
    if limit is not None and total > limit:
        detail = sized(parts.items(), ", ")
        raise UsageError(msg("{what} needs about {total} ({detail}, interpreter {INTERPRETER_BYTES}), over --max-memory {limit_text}; {advice}, or raise "
                             "--max-memory if this machine has the memory", what=what, total=format_size(total), detail=detail,
                             INTERPRETER_BYTES=format_size(INTERPRETER_BYTES), limit_text=limit_text, advice=advice))
    return total


def check(est: Estimate, limit: int | None, limit_text: str) -> None:
    """Refuse a run whose estimate is over ``limit``, naming the largest parts and how to record less."""
    if limit is None or est.total <= limit:
        return
    spec = est.spec
    parts = sized(est.largest(3))
    advice: list[Message] = []
    floor = estimate(spec, RecordPolicy("stats", frozenset(), est.policy.b, est.policy.t))
    if est.policy.mode == "table":  # the plain table already keeps the least: each stage's value at one position
        advice.append(join([msg("none: the table keeps only each stage's value at one position and the block output, and {what} alone holds {size}",
                                what=est.working_at, size=format_size(est.working)), LOWER_T_OR_B]
                           + ([msg("keep fewer stages in full with --keep")] if est.policy.keep else [])))
    elif floor.total > limit:
        biggest = max(floor.stages, key=lambda s: s.values)
        advice.append(join([msg("none: even --record stats needs about {a}, {b} of it while {stage} runs (the largest array, {label}, has {n} values)",
                                a=format_size(floor.total), b=format_size(floor.working), stage=floor.working_at, label=biggest.label,
                                n=f"{biggest.values:,}"), LOWER_T_OR_B]))
    else:
        for mode in ("main", "stats"):
            if est.policy.mode == mode:
                continue
            alt = estimate(spec, RecordPolicy(mode, est.policy.keep, est.policy.b, est.policy.t), verify="--verify reference" in est.extra,
                           form=est.form, with_weights="--with-weights" in est.extra)
            fits = msg("fits") if alt.total <= limit else msg("still too much")
            if mode == "main":
                advice.append(msg("--record main skips the attention internals (about {n}, {fits})", n=format_size(alt.total), fits=fits))
            else:
                advice.append(msg("--record stats keeps statistics of big arrays (about {n}, {fits})", n=format_size(alt.total), fits=fits))
        if est.policy.keep:
            advice.append(msg("keep fewer stages in full with --keep"))
    raise UsageError(
        msg("{path}: this run needs about {breakdown}, over --max-memory {limit_text}{x}. Largest: {parts}. To record less: {names}; or raise --max-memory if "
            "this machine has the memory.", path=spec.path, breakdown=est.breakdown(), limit_text=limit_text,
            x='' if format_size(limit).replace(' ', '') == limit_text else f' ({format_size(limit)})', parts=parts, names=join(advice))
    )


def record_mode(record: str, table: bool) -> str:
    """--record as a RecordPolicy mode: ``auto`` keeps what the output shows.  The plain table (``table``: no --all,
    --json, --format csv, --save, --verify or --with-weights) shows each stage's value at (b, t) and the block output
    in full, so only those are kept ("table"); any other output reads every stage ("all")."""
    if record not in RECORD_MODES:
        raise UsageError(msg("--record {record}: expected one of {names}", record=repr(record), names=' | '.join(RECORD_MODES)))
    if record == "auto":
        return "table" if table else "all"
    return record


def policy_for(spec: Spec, record: str, keep: list[str] | None, b: int, t: int, show_all: bool = False) -> RecordPolicy:
    """Check --record (a mode record_mode returned) and --keep (and --all) against the spec's stages and build the policy."""
    if record not in POLICY_MODES:
        raise UsageError(msg("--record {record}: expected one of {names}", record=repr(record), names=' | '.join(RECORD_MODES)))
    names = stage_names(spec)
    for name in keep or []:
        if name not in names:
            import difflib

            close = difflib.get_close_matches(name, names, n=1)
            hint = msg("did you mean {names}?", names=repr(close[0])) if close else msg("this spec's stages: {names}", names=", ".join(names))
            raise UsageError(msg("--keep {name}: no such stage; {hint}", name=repr(name), hint=hint))
    policy = RecordPolicy(record, frozenset(keep or ()), b, t)
    if show_all and not any(s.internal and s.how != "skip" for s in plan_stages(spec, policy)) and record == "main":
        raise UsageError(msg("--all shows the attention internals, which --record main does not keep; use --record all or stats, or name the ones to keep with "
                             "--keep (e.g. --keep attn.scores)"))
    return policy


def check_run(spec: Spec, policy: RecordPolicy, max_memory: str, as_json: bool = False, show_all: bool = False,
              verify: bool = False, form: str | None = None, with_weights: bool = False, by_layer: bool = False) -> Estimate:
    """Estimate a run and refuse it (UsageError, exit 2) if it needs more than --max-memory."""
    limit = parse_size(max_memory)
    visible = None if show_all else {s.name for s in plan_stages(spec, policy) if not s.internal}
    est = estimate(spec, policy, as_json=as_json, visible=visible, verify=verify, form=form, with_weights=with_weights,
                   by_layer=by_layer)
    check(est, limit, max_memory)
    return est
