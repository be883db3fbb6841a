"""The page's data: every stage of a run (or of both sides of a diff) with its shape, axis letters, formula and
meaning in both languages, its array (exact float64, base64 of the little-endian bytes) or, beyond the budget, a
summary, the graph's sections, the violations as the terminal explains them, the attention heads, Table 17.1's
strings as the terminal table prints them, and the budget's decisions.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from tracer import i18n
from tracer.messages import Message, render

if TYPE_CHECKING:
    from tracer.engine.executor import Recording, Stage
    from tracer.errors import Violation
    from tracer.graph.view import Section
    from tracer.spec import Spec

MB = 1_000_000  # --page-budget counts decimal megabytes
FMT_CELLS = 20_000  # an array up to this many values carries each value as the terminal table formats it
POSITIONS_KEPT = 256  # B*T up to this: the terminal's strings for every position; beyond, the chosen one only
HIST_BINS = 32
LAYER_NAME = re.compile(r"(?:^|\.)blocks\.(\d+)\.")


def both(text: object) -> dict[str, str]:
    """A message (or a plain string a spec wrote) in each language."""
    return in_both(lambda: text.render(i18n.language()) if isinstance(text, Message) else render(str(text)))


def in_both(make: Callable[[], str]) -> dict[str, str]:
    """Text made with tr() in the current language, made once in each."""
    out = {}
    for lang in i18n.LANGUAGES:
        with i18n.using(lang):
            out[lang] = make()
    return out


def encode(a: np.ndarray) -> str:
    """The array's float64 values as base64 of their little-endian bytes, C order: exact, NaN and infinities included."""
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode("ascii")


def packed(mask: np.ndarray) -> str:
    return base64.b64encode(np.packbits(np.asarray(mask, dtype=bool).ravel()).tobytes()).decode("ascii")


def letters(axes: Iterable[str]) -> list[str]:
    """The axis letters a page names indices by: b, h, t, c...; the keys of a [B,H,T,T] stage are s."""
    out: list[str] = []
    for a in axes:
        x = a.lower()
        if x in out:
            x = "s" if "s" not in out else f"{x}{len(out)}"
        out.append(x)
    return out


def formatted(a: np.ndarray, precision: int) -> list[str]:
    from tracer.views.text import fmt_number

    return [fmt_number(v, precision) for v in np.asarray(a, dtype=np.float64).ravel().tolist()]


def payload(a: np.ndarray, precision: int) -> dict[str, Any]:
    out: dict[str, Any] = {"shape": list(a.shape), "b64": encode(a)}
    if a.size <= FMT_CELLS:
        out["fmt"] = formatted(a, precision)
    return out


def summary_of(stage: Stage, b: int, t: int, precision: int) -> dict[str, Any]:
    """What a summarised stage keeps: its norm at each position (over the last axis), a histogram, the chosen values."""
    a = np.asarray(stage.array, dtype=np.float64)
    with np.errstate(all="ignore"):
        norms = np.sqrt(np.sum(np.square(a), axis=-1)) if a.ndim > 1 else np.sqrt(np.sum(np.square(a), keepdims=True))
    finite = a[np.isfinite(a)]
    if finite.size:
        counts, edges = np.histogram(finite, bins=HIST_BINS)
    else:
        counts, edges = np.zeros(0, dtype=np.int64), np.zeros(0)
    chosen_axes = chosen_view_axes(stage.axes)
    full, kept, seen_t = letters(stage.axes), [], False
    for axis, x in zip(stage.axes, letters(stage.axes)):
        if axis == "B" or (axis in ("T", "S") and not seen_t):
            seen_t = seen_t or axis != "B"
            continue
        kept.append(x)
    del full
    try:
        chosen = np.asarray(stage.at(b, t), dtype=np.float64)
    except (IndexError, LookupError):
        chosen = np.zeros(0)
    return {"norms": {"shape": list(norms.shape), "axes": list(stage.axes[:-1]) if a.ndim > 1 else ["N"], "b64": encode(norms)},
            "hist": {"counts": [int(c) for c in counts], "edges": [repr(float(e)) for e in edges], "nonfinite": int(a.size - finite.size)},
            "chosen": {**payload(chosen, precision), "axes": chosen_axes, "letters": kept}}


def chosen_view_axes(axes: Iterable[str]) -> list[str]:
    """The axes of Stage.at(b, t): B and the first position axis taken."""
    out, seen_t = [], False
    for a in axes:
        if a == "B":
            continue
        if a in ("T", "S") and not seen_t:
            seen_t = True
            continue
        out.append(a)
    return out


def violation_text(v: Violation) -> dict[str, str]:
    """The terminal's violation panel, line for line, in each language."""
    from tracer.i18n import tr
    from tracer.views.text import violation_lines, violation_title

    def make() -> str:
        lines = [violation_title(v)]
        for label, text in violation_lines(v):
            lines.append(tr("{label}: ", label=label) + text if label else text)
        return "\n".join(lines)

    return in_both(make)


def expand(name: str) -> list[str]:
    """'attn.q/k/v' -> attn.q, attn.k, attn.v (a graph row that stands for several recorded stages)."""
    if "/" not in name:
        return [name]
    head, _, tail = name.rpartition(".")
    return [f"{head}.{x}" for x in tail.split("/")]


def graph_info(spec: Spec) -> tuple[list[dict[str, Any]], dict[str, tuple[Any, Any]]]:
    """The graph's sections (their titles in both languages and the stages in each, in order) and, for every stage
    a graph row names, its (formula, meaning) as the graph words them."""
    from tracer.graph.view import Graph

    sections: list[dict[str, Any]] = []
    words: dict[str, tuple[Any, Any]] = {}

    def rows_of(s: Section) -> list[Any]:
        rows = list(s.rows)
        for br in s.branches:
            rows += rows_of(br)
        return rows + list(s.after)

    for s in Graph(spec).sections():
        names: list[str] = []
        for row in rows_of(s):
            if not row.stage or row.kind == "input":
                continue
            for n in expand(row.stage):
                if n not in names:
                    names.append(n)
                words.setdefault(n, (row.computes, row.meaning))
        sections.append({"title": both(s.title), "kind": s.kind, "note": both(s.note) if s.note else None, "stages": names})
    return sections, words


def position_strings(stage: Stage, positions: list[tuple[int, int]], precision: int) -> dict[str, Any]:
    """Each position's value as the terminal's table prints it, by position (``pos_text``).  A long row ends in each
    language's words ('… 16 values]', '… 共 16 个值]'), the same for every position of the stage: that ending is kept
    once, by language (``pos_suffix``), and such a position's text is [what comes before it].  A text that differs
    otherwise is kept in each language; the same in both, as one string."""
    from tracer.views.text import MISSING, fmt_value

    texts: dict[str, Any] = {}
    suffix: dict[str, str] | None = None
    for b, t in positions:
        try:
            value = stage.at(b, t)
        except (IndexError, LookupError):
            texts[f"{b},{t}"] = MISSING
            continue
        both_texts = in_both(functools.partial(fmt_value, value, precision))
        en, zh = both_texts["en"], both_texts["zh"]
        cut = en.rfind("… ")
        ending = {"en": en[cut:], "zh": zh[cut:]} if cut >= 0 and en[:cut] == zh[:cut] else None
        if en == zh:
            texts[f"{b},{t}"] = en
        elif ending is not None and ending == (suffix := suffix or ending):
            texts[f"{b},{t}"] = [en[:cut]]
        else:
            texts[f"{b},{t}"] = both_texts
    return {"pos_text": texts, "pos_suffix": suffix}


def kept_positions(spec: Spec, b: int, t: int) -> list[tuple[int, int]]:
    B, T = spec.dims.B, spec.dims.T
    if B * T <= POSITIONS_KEPT:
        return [(i, j) for i in range(B) for j in range(T)]
    return [(b, t)]


def side_data(run: Recording, sid: str, label: str, b: int, t: int, precision: int, positions: list[tuple[int, int]],
              grads: dict[str, np.ndarray] | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One block's diagram and stages; the arrays (by key) the budget then embeds in full or summarises."""
    spec = run.spec
    sections, words = graph_info(spec)
    flagged: dict[str, Violation] = {}
    for v in run.violations:
        flagged.setdefault(v.stage, v)
    placed = {n for s in sections for n in s["stages"]}
    extra = [n for n in run.stages if n not in placed]
    if extra:  # stages a deep stack's drawing leaves out (the layers between its first and last)
        from tracer.page.strings import STRINGS

        en, zh = STRINGS["more_stages"]
        sections.append({"title": {"en": en, "zh": zh}, "kind": "more", "note": None, "stages": extra})
    arrays: dict[str, np.ndarray] = {}
    stages: dict[str, Any] = {}
    for sec in sections:
        sec["stages"] = [n for n in sec["stages"] if n in run.stages]
    order = [n for sec in sections for n in sec["stages"]]
    for name in order:
        st = run.stages[name]
        formula, meaning = words.get(name, ("", st.meaning))
        found = flagged.get(name)
        entry: dict[str, Any] = {
            "name": name, "axes": list(st.axes), "letters": letters(st.axes), "shape": list(st.shape), "label": st.shape_label,
            "internal": bool(st.internal), "formula": both(formula) if formula else {"en": "", "zh": ""},
            "meaning": both(meaning or st.meaning), "violation": {"kind": found.kind, "text": violation_text(found)} if found is not None else None,
            **position_strings(st, positions, precision), "value": None, "summary": None, "grad": None,
            "intervention": both(st.intervention) if st.intervention is not None else None,  # --ablate, --set, --from
        }
        if st.data is not None:
            arrays[f"{sid}:value:{name}"] = st.data
        if grads is not None and name in grads:
            arrays[f"{sid}:grad:{name}"] = grads[name]
        stages[name] = entry
    return {"id": sid, "label": label, "name": spec.name, "sections": sections, "order": order, "stages": stages}, arrays


def table17(run: Recording, positions: list[tuple[int, int]], precision: int) -> dict[str, Any]:
    """Table 17.1 as `tracer run` prints it: its rows, its header for each position, each row's cells."""
    from tracer.views.text import caption, stage_header, visible_stages

    rows = visible_stages(run, False)
    spec = run.spec
    def header(b: int, t: int) -> Callable[[], str]:
        return lambda: "\t".join(stage_header(spec, b, t, False))

    headers = {f"{b},{t}": in_both(header(b, t)) for b, t in positions}
    return {"stages": [s.name for s in rows], "headers": headers, "meanings": {s.name: both(s.meaning) for s in rows},
            "flagged": sorted({v.stage for v in run.violations}), "caption": in_both(lambda: caption(spec))}


def heads_data(run: Recording, b: int) -> list[dict[str, Any]]:
    """Every attention step: its weights stage, heads, the mask (packed bits) and the labels of queries and keys."""
    from tracer.engine.executor import visible_keys
    from tracer.model.blocks import internal_prefix

    spec = run.spec
    out = []
    for step in spec.steps:
        if step.op not in ("mha", "cross_mha"):
            continue
        name = f"{internal_prefix(step)}.weights"
        st = run.stages.get(name)
        if st is None:
            continue
        _, H, T, S = st.shape
        mask = visible_keys(spec, step, T) if step.op == "mha" else None
        m = LAYER_NAME.search(name + ".")
        queries = spec.tokens_text() if not name.startswith("encoder.") else spec.tokens_text("source")
        keys = spec.tokens_text("source") if step.op == "cross_mha" or name.startswith("encoder.") else queries
        out.append({"stage": name, "layer": int(m.group(1)) if m else 0, "heads": H, "T": T, "S": S,
                    "mask": packed(mask[:T, :S]) if mask is not None else None,
                    "queries": [queries[bb][:T] for bb in range(len(queries))] if queries else None,
                    "keys": [keys[bb][:S] for bb in range(len(keys))] if keys else None})
    return out


# -- the budget ---------------------------------------------------------------------------

def b64_size(a: np.ndarray, precision: int) -> int:
    return 4 * math.ceil(a.size * 8 / 3) + (a.size * (precision + 6) if a.size <= FMT_CELLS else 0)


def apply_budget(data: dict[str, Any], arrays: dict[str, np.ndarray], budget: int, size_of: Callable[[dict[str, Any]], int],
                 stage_of: Callable[[str], Stage | None], b: int, t: int, precision: int) -> tuple[int, bool]:
    """Embed every array in full while the page stays within ``budget`` bytes, summarising the largest first
    (a summary keeps the chosen position's values).  Returns the page's size and whether it is over budget even
    with every array summarised."""
    made: dict[tuple[str, str], Any] = {}  # each payload or summary made once, however often the page is measured

    def full_of(key: str) -> dict[str, Any]:
        if ("full", key) not in made:
            made["full", key] = payload(arrays[key], precision)
        return made["full", key]

    def summary(key: str) -> dict[str, Any] | None:
        if ("summary", key) not in made:
            st = stage_of(key)
            made["summary", key] = summary_of(st, b, t, precision) if st is not None else None
        return made["summary", key]

    def place(full: set[str]) -> None:
        for key in arrays:
            sid, what, name = key.split(":", 2)
            entry = find(data, sid, name)
            entry[what] = full_of(key) if key in full else None
            if what == "value":
                entry["summary"] = None if key in full else summary(key)
        data["budget"]["summarised"] = sorted({k.split(":", 2)[2] + ("" if k.split(":", 2)[1] == "value" else " (grad)")
                                               for k in arrays if k not in full})

    full = set(arrays)
    place(set())
    smallest = size_of(data)  # every array summarised

    def summary_size(key: str) -> int:
        return len(json.dumps(summary(key), separators=(",", ":"))) if key.split(":", 2)[1] == "value" else 0

    total = smallest + sum(b64_size(a, precision) - summary_size(k) for k, a in arrays.items())
    for key in sorted(arrays, key=lambda k: -arrays[k].size):
        if total <= budget:
            break
        full.discard(key)
        total -= b64_size(arrays[key], precision) - summary_size(key)
    while True:
        place(full)
        size = size_of(data)
        if size <= budget or not full:
            return size, size > budget
        full.discard(max(full, key=lambda k: arrays[k].size))  # the estimate missed: summarise one more


def find(data: dict[str, Any], sid: str, name: str) -> dict[str, Any]:
    side = next(s for s in data["sides"] if s["id"] == sid)
    entry: dict[str, Any] = side["stages"][name]
    return entry
