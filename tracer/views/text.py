"""Plain text: the number formats and table rows the rich renderers share, and the CSV and Markdown writers.

Nothing here imports rich.  A table is a header and rows of strings; render.py
and render_diff.py draw them with rich, this module writes them as CSV (the csv
module, one header, "\\n" line ends) or as a Markdown pipe table.  Neither
depends on the terminal: the same trace always gives the same bytes.

CSV layout of a trace (``tracer run --format csv``): one row per stage and
position, columns

    spec, stage, b, h, t, axis, v0, v1, ..., v{W-1}

``b`` is the sample, ``h`` the head, ``t`` the position (T, or S for an
encoder's stages, or the query position of a [B,H,T,*] stage); a stage without
that axis leaves the cell empty ([T,C] ``position`` has no ``b``).  ``axis`` is
the letter of the axis the values run along (C, F, V, d, or T / S: the keys of
``attn.scores`` and ``attn.weights``).  W is the widest such axis among the
stages written; shorter rows end in empty cells.  Values are written with
repr, so they read back to the same doubles; NaN and infinities as ``NaN``,
``Infinity``, ``-Infinity`` (as in the JSON).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tracer.i18n import tr
from tracer.messages import join, msg, nmsg, render
from tracer.model import masks

if TYPE_CHECKING:
    from tracer.engine.executor import Recording, Stage
    from tracer.errors import Violation
    from tracer.spec import Spec

MAX_VALUES = 8  # a vector longer than this prints its first HEAD values and a count
HEAD = 3
MAX_ROWS = 6  # a matrix taller than this prints its first HEAD rows, a count, and its last row
MISSING = "—"
NONFINITE_WORDS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


# -- numbers -------------------------------------------------------------------

def fmt_number(v: float, precision: int) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if abs(v) >= 1e15:  # fixed point would print dozens of digits
        return f"{v:.{precision}e}"
    s = f"{v:.{precision}f}"
    if s.startswith("-") and not s.strip("-0."):  # -0.000000 prints as 0.000000
        s = s[1:]
    return s


def fmt_vector(values: Iterable[float], precision: int, limit: int = MAX_VALUES) -> str:
    vals = [float(v) for v in values]
    if len(vals) > limit:
        head = ", ".join(fmt_number(v, precision) for v in vals[:HEAD])
        return f"[{head}, {tr('… {n} values', n=len(vals))}]"
    return "[" + ", ".join(fmt_number(v, precision) for v in vals) + "]"


def fmt_value(a: np.ndarray, precision: int) -> str:
    """A stage's value at one position: a vector, or one row per head."""
    a = np.asarray(a)
    if a.ndim == 0:
        return fmt_number(float(a), precision)
    if a.ndim == 1:
        return fmt_vector(a.tolist(), precision)
    rows = [fmt_value(r, precision) for r in a[:HEAD]] if len(a) > MAX_ROWS else [fmt_value(r, precision) for r in a]
    if len(a) > MAX_ROWS:
        rows.append(tr("… {n} rows", n=len(a)))
    return "[" + ", ".join(rows) + "]"


def fmt_diff(d: float | None, precision: int) -> str:
    """A difference to `precision` significant digits (0 prints as 0, not 0.000000)."""
    return MISSING if d is None else f"{d:.{max(precision, 1)}g}"


def fmt_setting(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else str(value)


def exact(v: float) -> str:
    """A float as CSV writes it: repr (reads back to the same double); NaN and infinities spelled as in the JSON."""
    s = repr(float(v))
    return NONFINITE_WORDS.get(s, s)


# -- rows shared by the rich tables and the text formats --------------------------

def token_label(spec: Spec, b: int, t: int) -> str:
    """' (我)': the word at sample b, position t, when the spec has a vocab."""
    words = spec.tokens_text()
    if words is None or t >= len(words[b]):
        return ""
    if spec.tokenizer is not None and isinstance(spec.input.value, list):  # a tokenizer's piece, beside its id
        return f" ({words[b][t]}, id {spec.input.value[b][t]})"
    return f" ({words[b][t]})"


def caption(spec: Spec) -> str:
    order = {"custom": "custom steps", "parallel": "parallel residual", "parallel_shared": "parallel residual, one norm",
             "sandwich": "sandwich norms (each sublayer's output normalised before its residual add)"}.get(
        spec.block.norm_order, f"{spec.block.norm_order}-norm")
    line = tr("{order}, mask {mask}, eps {eps}; {dims}", order=tr(order), mask=masks.label(spec.block.mask, spec.block.window, spec.block.sliding_layers),
              eps=f"{spec.block.eps:g}", dims=", ".join(f"{k} = {v}" for k, v in spec.dims.as_dict().items()))
    return line + text_note(spec)


def text_note(spec: Spec) -> str:
    """'; tokens from the text by tokenizer.json, which added <s>': where a spec's tokens came from."""
    if spec.text is None:
        return ""
    import os

    from tracer.messages import render

    name = os.path.basename(spec.tokenizer or "")
    if spec.specials_added:
        return "; " + render(msg("tokens from the text by {name}, which added {added}", name=name, added=" ".join(spec.specials_added)))
    return "; " + render(msg("tokens from the text by {name}, no special token added", name=name))


VERIFY_HEADER = "max |NumPy - reference|"


def stage_header(spec: Spec, b: int, t: int, verify: bool) -> list[str]:
    # Table 17.1 (one sequence) heads its value column 第一个位置: the book's words, where they are exact
    value = "value at b=0, t=0{word}" if (b, t, spec.dims.B) == (0, 0, 1) else "value at b={b}, t={t}{word}"
    head = [tr("stage"), tr("what it is"), tr(value, b=b, t=t, word=token_label(spec, b, t)), tr("shape")]
    return head + ([tr(VERIFY_HEADER)] if verify else [])


def stage_rows(stages: Sequence[Stage], b: int, t: int, precision: int,
               verify_diffs: dict[str, float] | None = None) -> list[list[str]]:
    """One row per stage: name, what it is, its value at sample b and position t, its shape."""
    rows = []
    for stage in stages:
        try:
            value = fmt_value(stage.at(b, t), precision)
        except (IndexError, LookupError):  # a stage cut short (T beyond the position table)
            value = MISSING
        row = [stage.name, render(stage.meaning), value, stage.shape_label]
        if verify_diffs is not None:
            d = verify_diffs.get(stage.name)
            row.append(tr("not checked") if d is None else f"{d:.3g}")
        rows.append(row)
    return rows


def visible_stages(trace: Recording, show_all: bool, only: Sequence[str] | None = None) -> list[Stage]:
    """The stages a view shows: those named in ``only`` (--stage), else the steps' stages, the
    attention internals too with ``show_all``, and any stage flagged by a violation."""
    if only is not None:
        return [s for s in trace.stages.values() if s.name in only]
    flagged = {v.stage for v in trace.violations}
    return [s for s in trace.stages.values() if show_all or not s.internal or s.name in flagged]


def experts_note(trace: Recording, b: int, t: int) -> str:
    """A mixture of experts' choice at the traced position, layer by layer: 'experts chosen at b=0, t=0:
    blocks.0.moe.chosen 2 (0.76), 3 (0.24)' (the top_k stages' nonzero gates, largest first); '' without one."""
    found = []
    for step in trace.spec.steps:
        stage = trace.stages.get(step.name)
        if step.op != "top_k" or stage is None:
            continue
        try:
            gates = stage.at(b, t)
        except (LookupError, IndexError, AssertionError):
            continue
        order = sorted((e for e in range(len(gates)) if gates[e] != 0), key=lambda e: (-gates[e], e))
        found.append(msg("{stage} {experts}", stage=step.name, experts=", ".join(f"{e} ({gates[e]:.2f})" for e in order)))
    if not found:
        return ""
    return render(msg("experts chosen at b={b}, t={t}: {layers}", b=b, t=t, layers=join(found, "; ")))


def unreached_note(trace: Recording, only: Sequence[str] | None) -> str:
    """A note for --stage names the run never recorded (it stopped at a violation); '' when there are none."""
    missing = [name for name in only or () if name not in trace.stages]
    if not missing:
        return ""
    if trace.violations:
        return render(msg("not recorded: {names} (the run stopped at the violation at {stage}; --keep-going records every stage)",
                          names=", ".join(missing), stage=trace.violations[0].stage))
    return render(msg("not recorded: {names} (the run stopped at the violation; --keep-going records every stage)", names=", ".join(missing)))


def reached_end(trace: Recording) -> bool:
    """Did the run record the last step (clean, or --keep-going past a violation)?"""
    return trace.spec.steps[-1].name in trace.stages


DEFAULT_TOP = 5  # tracer run --top: the next tokens the probs line shows at each position


def token_word(spec: Spec, i: int) -> str:
    """Token id ``i`` as text: the tokenizer's piece, the vocab's word, else ''."""
    if spec.tokenizer is not None:
        from tracer.checkpoints.tokenizer import load as load_tokenizer
        from tracer.checkpoints.tokenizer import piece as piece_of

        return piece_of(load_tokenizer(spec.tokenizer), i)
    if spec.vocab is not None and 0 <= i < len(spec.vocab):
        return spec.vocab[i]
    return ""


def top_tokens(spec: Spec, p: np.ndarray, k: int) -> list[tuple[int, str, float]]:
    """The ``k`` most probable ids of one row of probabilities, with their text and probability (ties: the lower id first)."""
    p = np.asarray(p, dtype=np.float64)
    neg = -p
    order = None
    if 0 < k < p.size:  # a vocabulary's row: sort only the ids at or above the k-th probability (ties included)
        kth = np.partition(neg, k - 1)[k - 1]
        if not np.isnan(kth):
            ids = np.flatnonzero(neg <= kth)
            order = ids[np.argsort(neg[ids], kind="stable")][:k]
    if order is None:
        order = np.argsort(neg, kind="stable")[:k]
    return [(int(i), token_word(spec, int(i)), float(p[i])) for i in order]


def fmt_top(spec: Spec, p: np.ndarray, k: int, precision: int) -> str:
    """"'Paris' 0.41 (id 289), ..."; an id alone when the spec has no words for it."""
    parts = []
    for i, word, prob in top_tokens(spec, p, k):
        parts.append(f"'{word}' {fmt_number(prob, precision)} (id {i})" if word else f"id {i} {fmt_number(prob, precision)}")
    return ", ".join(parts)


def shows_top(stage: Stage, top: int) -> bool:
    """Does the output line show the top next tokens (the probs over V) instead of the first values?"""
    return top > 0 and stage.axes == ("B", "T", "V") and stage.name.endswith("probs")


def matrix_lines(trace: Recording, stage: Stage, b: int, precision: int, top: int = DEFAULT_TOP) -> list[str]:
    """The full [T, C] matrix of one sample (rows elided when tall): a header line, then one line per row.
    The probabilities over V show their ``top`` next tokens instead (--top; 0: the first values)."""
    if stage.axes[0] == "B" and b >= stage.array.shape[0]:  # a select along B kept fewer samples
        n = stage.array.shape[0]
        return [render(nmsg("{name} holds {n} sample (b = 0 to {last}): there is no sample b={b} to show",
                            "{name} holds {n} samples (b = 0 to {last}): there is no sample b={b} to show", n, name=stage.name, last=n - 1, b=b))]
    a = np.asarray(stage.array[b]) if stage.axes[0] == "B" else np.asarray(stage.array)
    lines = [tr("{name} for sample b={b}, {meaning}:", name=stage.name, b=b, meaning=render(stage.meaning))]
    rows = list(range(len(a)))
    if len(rows) > MAX_ROWS:
        rows = rows[:HEAD] + [-1] + rows[-1:]
    for i in rows:
        if i == -1:
            lines.append("  " + tr("… {n} rows", n=len(a)))
            continue
        word = token_label(trace.spec, b, i) if stage.axes[1:2] == ("T",) else ""
        if shows_top(stage, top):
            lines.append(f"  t={i}{word}: " + tr("top {k}: {tokens}", k=min(top, a.shape[-1]), tokens=fmt_top(trace.spec, a[i], top, precision)))
            continue
        lines.append(f"  t={i}{word}: " + fmt_vector(np.ravel(a[i]).tolist(), precision))
    return lines


STEP_HEADER = ["#", "stage", "op", "reads", "weights", "settings", "shape"]  # CSV keeps these English words


def step_header() -> list[str]:
    """The step list's header in the current language (table and Markdown)."""
    return [tr(h) for h in STEP_HEADER]


def step_rows(spec: Spec, only: Sequence[str] | None = None) -> list[list[str]]:
    """The step list a spec runs (``tracer run --steps``), with every stage's shape."""
    from tracer.model.shapes import shape_label

    rows = []
    for i, step in enumerate(spec.steps, 1):
        if only is not None and step.name not in only:
            continue
        settings = ", ".join(f"{k}={v}" for k, v in step.own_params().items() if k != "stream")
        if step.op == "select":
            settings = f"axis={step.axis}, {step.start}:{step.stop}"
        rows.append([str(i), step.name, step.op, ", ".join(step.inputs), step.weights or "", settings,
                     shape_label(*spec.stage_shapes[step.name])])
    return rows


def step_list_title(spec: Spec) -> str:
    if spec.model == "encoder-decoder":
        return render(msg("{name}: encoder-decoder", name=spec.name))
    if spec.block.norm_order == "pre":
        return render(msg("{name}: preset pre-norm", name=spec.name))
    if spec.block.norm_order == "post":
        return render(msg("{name}: preset post-norm", name=spec.name))
    if spec.block.norm_order == "parallel":
        return render(msg("{name}: preset parallel residual", name=spec.name))
    if spec.block.norm_order == "parallel_shared":
        return render(msg("{name}: preset parallel residual under one norm", name=spec.name))
    return render(msg("{name}: the spec's own steps", name=spec.name))


def violation_lines(v: Violation) -> list[tuple[str, str]]:
    """A violation as (label, text) pairs: the rule, each operand's shape, what NumPy would do, why it is wrong."""
    out = [("", render(v.message))]
    if v.rule:
        out.append((tr("rule"), render(v.rule)))
    out += [("", f"  {name}: {shape}") for name, shape in v.shapes.items()]
    if v.numpy_would:
        out.append((tr("NumPy would"), render(v.numpy_would)))
    if v.why:
        out.append((tr("why it is wrong here"), render(v.why)))
    return out


def violation_title(v: Violation) -> str:
    """'broadcast violation at stage norm1'; in zh the kind's word and the kind itself: 广播（broadcast）."""
    return tr("{kind} violation at stage {stage}", kind=kind_word(v.kind), stage=v.stage)


def kind_word(kind: str) -> str:
    word = tr(kind)
    return kind if word == kind else f"{word}（{kind}）"


# -- generic writers -----------------------------------------------------------------

def csv_text(header: Sequence[str] | None, rows: Iterable[Sequence[str]]) -> str:
    buf = io.StringIO()
    import csv  # here: only the CSV format needs it

    writer = csv.writer(buf, lineterminator="\n")
    if header is not None:
        writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def md_cell(text: str) -> str:
    """A table cell: pipes escaped, line breaks as <br>, so the row stays one row."""
    return str(text).replace("\\", "\\\\").replace("<", "\\<").replace("|", "\\|").replace("\n", "<br>")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def md_text(text: str) -> str:
    """Running text: backquotes and '<' escaped, so a name or '<s>' is not read as code or HTML."""
    return str(text).replace("\\", "\\\\").replace("`", "\\`").replace("<", "\\<")


# -- tracer run ----------------------------------------------------------------------

TRACE_CSV_COLUMNS = ["spec", "stage", "b", "h", "t", "axis"]
LEAD_COLUMN = {"B": "b", "H": "h"}  # every other leading axis (T, S, T_max) is a position: t


def value_width(stages: Iterable[Stage]) -> int:
    return max((s.array.shape[-1] for s in stages if s.array.ndim), default=0)


def trace_csv_header(width: int) -> list[str]:
    return TRACE_CSV_COLUMNS + [f"v{i}" for i in range(width)]


def stage_csv_rows(spec_path: str, stage: Stage, width: int) -> Iterator[list[str]]:
    """One row per position of a stage: its leading axes become the b, h, t cells, its last axis the
    values, padded with empty cells to ``width``."""
    a = np.asarray(stage.array)
    if a.ndim == 0:
        a = a.reshape(1)
    lead = [LEAD_COLUMN.get(axis, "t") for axis in stage.axes[:-1]]
    rows = a.reshape(-1, a.shape[-1])
    padding = [""] * (width - a.shape[-1])
    for index, row in zip(np.ndindex(*a.shape[:-1]), rows):
        yield [spec_path, stage.name, *position_cells(lead, index), stage.axes[-1]] + [exact(v) for v in row.tolist()] + padding


def position_cells(lead: Sequence[str], index: Sequence[int]) -> list[str]:
    """The b, h, t cells of one row (empty where the stage has no such axis)."""
    cells = {"b": "", "h": "", "t": ""}
    for column, i in zip(lead, index):
        cells[column] = str(i)
    return [cells["b"], cells["h"], cells["t"]]


def trace_csv(traces: Sequence[tuple[str, Sequence[Stage]]]) -> str:
    """Every (spec path, stages) pair under one header; W is the widest value axis of them all."""
    return "".join(trace_csv_chunks(traces))


def trace_csv_chunks(traces: Sequence[tuple[str, Sequence[Stage]]]) -> Iterator[str]:
    """trace_csv's text, one stage at a time: a big trace is never held whole as text."""
    width = max((value_width(stages) for _, stages in traces), default=0)
    yield csv_text(trace_csv_header(width), [])
    for path, stages in traces:
        for stage in stages:
            yield csv_text(None, stage_csv_rows(path, stage, width))


def run_markdown(trace: Recording, stages: Sequence[Stage], b: int, t: int, precision: int,
                 verify_diffs: dict[str, float] | None = None, verify_note: str = "", only: Sequence[str] | None = None,
                 top: int = DEFAULT_TOP) -> str:
    """The run as Markdown: a heading, the stage table, its caption, the output matrix (unless --stage chose
    the rows), violations."""
    spec = trace.spec
    flagged = {v.stage for v in trace.violations}
    rows = stage_rows(stages, b, t, precision, verify_diffs)
    marked = {st.name: st.intervention for st in stages if st.intervention is not None}  # --ablate, --set, --from
    for row in rows:
        name = row[0]
        row[0] = f"`{name}`" + (" " + tr("  ← violation").strip() if name in flagged else "")
        if name in marked:
            row[0] += " ← " + md_text(render(marked[name]))
    parts = [f"### {md_text(spec.name)}\n", markdown_table(stage_header(spec, b, t, verify_diffs is not None), rows),
             md_text(caption(spec)) + "\n"]
    if only is None and reached_end(trace):
        head, *lines = matrix_lines(trace, trace.output, b, precision, top)
        parts.append(md_text(head) + "\n\n```\n" + "\n".join(line.strip() for line in lines) + "\n```\n")
    if unreached_note(trace, only):
        parts.append(md_text(unreached_note(trace, only)) + "\n")
    for v in trace.violations:
        parts.append(violation_markdown(v))
    if verify_note:
        parts.append("\n".join(md_text(line) + "  " for line in verify_note.splitlines()).rstrip() + "\n")
    return "\n".join(parts)


def violation_markdown(v: Violation) -> str:
    title = tr("{kind} violation at stage {stage}", kind=kind_word(v.kind), stage="\0")
    lines = [f"> **{md_text(title).replace(chr(0), f'`{v.stage}`')}**"]
    for label, text in violation_lines(v):
        head = f"**{md_text(tr('{label}: ', label=label).strip())}** " if label else ""
        lines.append(f"> - {head}{md_text(text.strip())}")
    return "\n".join(lines) + "\n"


def steps_markdown(spec: Spec, only: Sequence[str] | None = None) -> str:
    return f"### {md_text(step_list_title(spec))}\n\n" + markdown_table(step_header(), step_rows(spec, only))


# -- tracer stages ---------------------------------------------------------------------

CATALOGUE_HEADER = ["stage", "what it is", "formula", "shape"]
CATALOGUE_CSV_COLUMNS = ["stage", "section", "meaning", "formula", "shape"]


def by_section(entries: Sequence[Any]) -> dict[str, list[list[str]]]:  # Sequence[catalogue.StageInfo]
    """Catalogue rows grouped by section, in catalogue order, in the current language (the CSV keeps English)."""
    out: dict[str, list[list[str]]] = {}
    for e in entries:
        out.setdefault(tr(e.section), []).append([e.name, render(e.meaning), render(e.formula), e.shape])
    return out


def catalogue_csv(entries: Sequence[Any]) -> str:
    return csv_text(CATALOGUE_CSV_COLUMNS, [[e.name, e.section, e.meaning, e.formula, e.shape] for e in entries])


def catalogue_markdown(entries: Sequence[Any], note: str) -> str:
    parts = []
    for section, rows in by_section(entries).items():
        parts.append(f"### {md_text(section)}\n\n" + markdown_table([tr(h) for h in CATALOGUE_HEADER], [[f"`{r[0]}`", *r[1:]] for r in rows]))
    return "\n".join(parts) + ("\n" + md_text(tr(note)) + "\n" if note else "")
