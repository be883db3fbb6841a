"""The page as one HTML string (inline style and script, the data in a JSON script element), and the builders of
each kind of page: a run (`tracer page`, `Trace.page`), a gradient (`tracer grad --page`), a lens
(`tracer lens --page`), a logit attribution (`tracer attribute --page`), a diff (`tracer diff --page`)."""

from __future__ import annotations

import html
import json
import math
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple

from tracer import i18n
from tracer.errors import UsageError
from tracer.messages import msg
from tracer.page import model
from tracer.page.strings import STRINGS

if TYPE_CHECKING:
    import numpy as np

    from tracer.attribute.core import Attribution
    from tracer.compare.judge import DiffResult
    from tracer.engine.executor import Recording, Stage
    from tracer.grad.run import GradTrace
    from tracer.lens.core import LensResult

DEFAULT_BUDGET_MB = 20.0


class Page(NamedTuple):
    html: str
    size: int  # bytes of the UTF-8 page
    budget: int
    over: bool  # even with every big array summarised, the page is bigger than the budget
    summarised: tuple[str, ...]


def asset(name: str) -> str:
    return resources.files("tracer.page").joinpath(name).read_text(encoding="utf-8")


def check_budget(budget_mb: float) -> int:
    """--page-budget MB as bytes: a positive finite number."""
    if isinstance(budget_mb, bool) or not isinstance(budget_mb, (int, float)) or not math.isfinite(budget_mb) or budget_mb <= 0:
        shown = f"{budget_mb:g}" if isinstance(budget_mb, float) else budget_mb  # -1, as typed, not -1.0
        raise UsageError(msg("--page-budget {value}: expected a positive number of megabytes, e.g. 20", value=shown))
    return int(budget_mb * model.MB)


def check_lang(lang: str) -> str:
    if lang not in i18n.LANGUAGES:
        raise UsageError(msg("--lang {option}: expected one of zh | en (zh: the book's Chinese, en: English){hint}", option=lang, hint=""))
    return lang


def page_text(data: dict[str, Any]) -> str:
    """The whole page; '<' inside the data is written \\u003c, so nothing in it can end the script element."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    lang = "zh-CN" if data["lang"] == "zh" else "en"
    title = html.escape(f"{data['title']} · tracer page")
    return (f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{title}</title>\n'
            f"<style>\n{asset('page.css')}</style>\n</head>\n<body>\n<div id=\"app\"></div>\n"
            f'<script id="tracer-data" type="application/json">{payload}</script>\n'
            f"<script>\n{asset('page.js')}</script>\n</body>\n</html>\n")


def size_of(data: dict[str, Any]) -> int:
    return len(page_text(data).encode("utf-8"))


def megabytes(n: int) -> str:
    return f"{n / model.MB:.2f} MB"


def smallest_budget(size: int) -> str:
    return f"{math.ceil(size / (model.MB / 10)) / 10:g}"


def finish(data: dict[str, Any], arrays: dict[str, np.ndarray], stages: dict[str, Stage], budget_mb: float,
           b: int, t: int, precision: int, refuse: bool = True) -> Page:
    """Choose what is embedded in full, then write the page; over budget even when summarised: refused (exit 2)
    naming the smallest budget that works, or with ``refuse=False`` written and marked over budget."""
    budget = check_budget(budget_mb)
    data["budget"] = {"budget": budget, "budget_text": megabytes(budget), "size": 0, "size_text": "", "over": False, "summarised": []}

    def stage_of(key: str) -> Stage | None:
        return stages.get(key)

    margin = 256  # tracer's mark line and the size written on the page: the file stays within the budget
    size, over = model.apply_budget(data, arrays, budget - margin, size_of, stage_of, b, t, precision)
    if over and refuse:
        raise UsageError(msg("--page-budget {budget}: the page needs at least {size} MB even with every large stage summarised; "
                             "give --page-budget {size} or more", budget=f"{budget_mb:g}", size=smallest_budget(size + margin)))
    for _ in range(3):  # the size written on the page is the page's own size
        data["budget"].update(size=size, size_text=megabytes(size), over=over)
        size = size_of(data)
    return Page(page_text(data), size, budget, over, tuple(data["budget"]["summarised"]))


def base(kind: str, title: str, lang: str, b: int, t: int, dims: dict[str, int], precision: int) -> dict[str, Any]:
    return {"kind": kind, "title": title, "lang": check_lang(lang), "strings": {k: list(v) for k, v in STRINGS.items()},
            "b": b, "t": t, "dims": dims, "precision": precision, "sides": [], "table17": None, "heads": [],
            "first_divergence": None, "verdict": None, "words": None, "layer_grads": None, "lens": None, "attribution": None,
            "positions_all": True}


def run_page(run: Recording, *, b: int = 0, t: int = 0, precision: int = 6, lang: str = "en", budget_mb: float = DEFAULT_BUDGET_MB,
             grad: GradTrace | None = None, lens: LensResult | None = None, refuse: bool = True, grad_weight: str = "ffn.w2",
             attribution: Attribution | None = None) -> Page:
    """The page of one run: its diagram, every stage, Table 17.1, the heads; a gradient, a lens or a logit attribution beside."""
    spec = run.spec
    kind = "grad" if grad is not None else "lens" if lens is not None else "attribute" if attribution is not None else "run"
    data = base(kind, spec.name, lang, b, t, dict(spec.dims.as_dict()), precision)
    positions = model.kept_positions(spec, b, t)
    data["positions_all"] = len(positions) == spec.dims.B * spec.dims.T
    grads = {name: g.array for name, g in grad.grads.items() if g.data is not None} if grad is not None else None
    side, arrays = model.side_data(run, "a", "", b, t, precision, positions, grads)
    data["sides"].append(side)
    data["table17"] = model.table17(run, positions, precision)
    data["heads"] = model.heads_data(run, b)
    data["words"] = spec.tokens_text()  # the input's tokens as text, when the spec has a vocab or a tokenizer
    if grad is not None:
        data["layer_grads"] = layer_grads(grad, grad_weight)
    if lens is not None:
        data["lens"] = lens_data(lens)
    if attribution is not None:
        data["attribution"] = attribution_data(attribution)
    stages = {f"a:value:{n}": s for n, s in run.stages.items()}
    return finish(data, arrays, stages, budget_mb, b, t, precision, refuse)


def layer_grads(g: GradTrace, weight: str = "ffn.w2") -> dict[str, Any]:
    """The gradient pictures `tracer grad` prints: each layer's weight-gradient norms (its weights table, formatted as
    the terminal formats them) and, for a stack, ``--per-layer``'s |dL/dW| of one weight in every layer."""
    from tracer.errors import TracerError
    from tracer.grad.run import per_layer, weights_by_layer
    from tracer.grad.view import fmt_norm, per_layer_rows

    rows = [{"layer": ln.layer, "total": repr(ln.total), "total_fmt": fmt_norm(ln.total),
             "norms": [{"weight": w, "norm": repr(v), "fmt": fmt_norm(v)} for w, v in ln.norms.items()]} for ln in weights_by_layer(g)]
    stack = None
    try:
        found = per_layer(g, weight)
    except TracerError:  # one layer: nothing to compare across layers
        found = []
    if len(found) > 1:
        stack = {"weight": weight, "rows": [{"layer": r[0], "norm": repr(n), "fmt": r[1], "ratio": r[2]} for r, (_, n) in zip(per_layer_rows(found), found)]}
    return {"rows": rows, "per_layer": stack, "loss": model.both(g.loss.formula) if g.loss is not None else None,
            "loss_value": repr(float(g.loss.value)) if g.loss is not None else None}


def lens_data(r: LensResult) -> dict[str, Any]:
    from tracer.lens.view import fmt_p  # the lens table's own format: significant digits (0.75, 0.09488), not decimals

    p = r.p_token
    return {"labels": list(r.labels), "shape": list(p.shape), "b64": model.encode(p), "fmt": [fmt_p(v, r.precision) for v in p.ravel().tolist()],
            "words": list(r.words), "positions": [w or str(t) for t, (_, w) in enumerate(r.positions)], "chosen": model.both(r.chosen)}


def attribution_data(a: Attribution) -> dict[str, Any]:
    """`tracer attribute`'s table and heads heatmap: each value exact (repr) and as the table prints it (``fmt``)."""
    from tracer.attribute.view import title
    from tracer.views.text import fmt_number

    def number(x: float) -> dict[str, str]:
        return {"value": repr(float(x)), "fmt": fmt_number(x, a.precision)}

    layers, grid = a.heads()
    return {"title": model.in_both(lambda: title(a)),
            "components": [{"name": p.name, "layer": p.layer, "head": p.head, **number(p.value), "share": f"{100 * share:+.1f}%"}
                           for p, share in zip(a.parts, a.shares())],
            "sum": number(a.total), "logit": number(a.logit), "gap": repr(a.total - a.logit),
            "heads": {"layers": [f"blocks.{i}" for i in layers], "shape": list(grid.shape), "b64": model.encode(grid),
                      "fmt": ["" if math.isnan(x) else fmt_number(x, a.precision) for x in grid.ravel().tolist()]} if layers else None}


def diff_page(r: DiffResult, *, precision: int = 6, lang: str = "en", budget_mb: float = DEFAULT_BUDGET_MB, refuse: bool = True) -> Page:
    """Both sides side by side, the first divergence marked, |A − B| computed on the page from the two exact arrays."""
    from tracer.engine.executor import Recording

    b, t = r.batch, r.pos
    data = base("diff", f"{r.a.name} / {r.b.name}", lang, b, t, dict(r.a.dims), precision)
    arrays: dict[str, np.ndarray] = {}
    stages: dict[str, Stage] = {}
    for sid, side in (("a", r.a), ("b", r.b)):
        if side.spec is not None:
            run = Recording(side.spec, dict(side.stages), [])
            positions = model.kept_positions(side.spec, b, t)
            entry, found = model.side_data(run, sid, side.label, b, t, precision, positions)
        else:  # another program's arrays: one section, the stages in their order
            entry, found = arrays_side(side, sid, b, t, precision)
        arrays.update(found)
        stages.update({f"{sid}:value:{n}": s for n, s in side.stages.items()})
        data["sides"].append(entry)
    first = r.first_diverging
    data["first_divergence"] = first.name if first is not None else None
    data["verdict"] = model.in_both(lambda: verdict_text(r))
    return finish(data, arrays, stages, budget_mb, b, t, precision, refuse)


def verdict_text(r: DiffResult) -> str:
    from tracer.compare.text import diff_summary, hint_text

    lines = [diff_summary(r)]
    if r.hint is not None:
        lines.append(hint_text(r))
    return "\n".join(lines)


def arrays_side(side: Any, sid: str, b: int, t: int, precision: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    stages: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for name, st in side.stages.items():
        stages[name] = {"name": name, "axes": list(st.axes), "letters": model.letters(st.axes), "shape": list(st.shape), "label": st.shape_label,
                        "internal": bool(st.internal), "formula": {"en": "", "zh": ""}, "meaning": model.both(st.meaning),
                        "violation": None, **model.position_strings(st, [(b, t)], precision), "value": None, "summary": None, "grad": None}
        arrays[f"{sid}:value:{name}"] = st.array
    order = list(side.stages)
    section = {"title": model.both(side.describe()), "kind": "arrays", "note": None, "stages": order}
    return {"id": sid, "label": side.label, "name": side.name, "sections": [section], "order": order, "stages": stages}, arrays


# -- the file -----------------------------------------------------------------------------

def check_page(path: str, option: str, inputs: list[str], force: bool, others: dict[str, str | None] | None = None) -> None:
    """The page's file, checked before anything runs, as every file tracer writes (docs/files.md)."""
    from tracer import files

    files.check_distinct({**(others or {}), option: path})
    files.check_output(path, option, inputs, "html", force)


def write_page(path: str, page: Page, option: str, force: bool) -> None:
    """Atomically, under tracer's mark; never over an input (checked again now that every input has been read)."""
    from tracer import files

    files.check_not_input(path, option)
    body = page.html.encode("utf-8")
    data = files.text_mark("html", body) + body
    files.write_atomic(path, lambda fh: fh.write(data), option, "html", force)


def page_written(page: Page, path: str | None, inputs: list[str], force: bool) -> str:
    """The page's HTML, written to ``path`` too when given (never over a file tracer did not write, unless ``force``):
    what ``Trace.page`` and ``Diff.page`` return."""
    from tracer.spec import choices

    if path is not None:
        path = choices.file_path(path, "path")
        check_page(path, "path", inputs, choices.flag(force, "force"))
        write_page(path, page, "path", force)
    return page.html
