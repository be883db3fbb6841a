"""`tracer page`: the worked example as one explorable HTML file (also `--page` on diff, grad, lens and attribute, and
`Trace.page()`).  `writer.py` builds the page (`run_page`, `diff_page`), `model.py` its data, `page.js` and
`page.css` are inlined into it; `strings.py` holds every word of the page in English and Chinese.

The file has no external reference: inline style and script, the data in
``<script id="tracer-data" type="application/json">`` (every ``<`` written ``\\u003c``).  Each array is embedded
as base64 of its little-endian float64 bytes (exact, NaN and infinities included); the page shows a value's
exact repr (JS ``String`` normalised to Python's ``repr``) and, separately, the terminal table's format (made in
Python by ``tracer.views.text``).  Beyond ``--page-budget`` (MB, default 20) the largest stages are summarised:
their per-position norms, a histogram and the chosen position's values.

The DOM contract (the browser tests hold the page to it):

- ``<html lang="en">`` or ``lang="zh-CN"``, following the switch ``#lang-en`` / ``#lang-zh``;
  ``window.tracerPage.ready`` is true once drawn, ``window.tracerPage.select(stage)`` opens a stage.
- ``#diagram`` (a diff: ``#side-a`` and ``#side-b``, each with a ``.diagram``): one
  ``button.stage-box[data-stage]`` per stage, in the graph's order and sections, with ``span.shape``;
  a violated stage has class ``violation``, ``data-violation="KIND"`` and a ``.violation-text`` child with the
  terminal's explanation; a summarised one ``data-summary="true"``; a diff's first diverging stage
  ``first-divergence``.
- ``#stage[data-stage]`` (tabindex 0) with ``.formula``, ``.meaning``, ``.left-out`` (summarised),
  ``#position-values`` (the terminal table's value at the chosen position), ``#readout[data-index][data-value]``
  (a fixed height: nothing moves as it changes; ``#attention`` and ``#lens`` show a copy, ``.readout-local``,
  beside their cells) and ``canvas.heatmap[data-kind][data-rows][data-cols][data-row-axis][data-col-axis]``
  (tabindex 0; arrow keys move its cursor), with ``.axis-label``s; kinds: value, norms (summarised, beside
  ``.histogram``), grad, absdiff (diff, with ``data-side`` a/b on the values), attention, lens, attribution; the mask hatched on
  attention scores and weights (``.masked-legend``); ``table.values`` (inside ``.values-wrap``, which scrolls).
- ``select#sel-b``, ``select#sel-t``, and ``select#sel-h`` for a stage with heads.
- ``button#show-table`` opens ``table#table17``: ``tr[data-stage]`` with ``td.stage``, ``td.meaning``, ``td.value``,
  ``td.shape``.
- ``#heads`` with ``button.head[data-layer][data-head][data-stage]``; an open head: ``#attention`` with
  ``canvas.heatmap[data-kind="attention"]``, ``.key-label[data-s]`` and ``.query-label[data-t]`` aligned with the
  cells (``.highlight`` on the keys a hovered query attends to), masked cells hatched, legend ``.masked-legend``.
- Diff: ``#verdict``, ``button#follow-divergence``.  Grad: ``#layer-grads`` (``table.per-layer`` for a stack,
  ``table.layer-grads``).  Lens: ``#lens``.  Attribute: ``#attribution`` with
  ``table.attribution`` (``tr[data-component]``, ``td.value[title][data-value]`` the exact repr) and
  ``canvas.heatmap[data-kind="attribution"]`` (layers x heads).  ``#budget`` (size, budget, the summarised stages).
- ArrowDown/ArrowRight and ArrowUp/ArrowLeft (outside a heatmap or a select) move between stages.
"""
