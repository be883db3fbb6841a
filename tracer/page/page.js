/* tracer page: draws the data of the JSON element #tracer-data (no network, no eval, no library). */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("tracer-data").textContent);
  var state = { lang: D.lang, stage: null, b: D.b, t: D.t, h: 0, head: null, tableOpen: false, cursor: {} };
  var cache = {};

  // -- words ------------------------------------------------------------------------------
  function s(key) { var p = D.strings[key]; return p ? p[state.lang === "zh" ? 1 : 0] : key; }
  function L(o) { return o ? (o[state.lang] !== undefined ? o[state.lang] : o.en) : ""; }
  // a position's text (model.position_strings): the same in both languages, [its start] before the stage's ending in
  // this language, or one text a language
  function S(v, e) { return typeof v === "string" ? v : Array.isArray(v) ? v[0] + L(e.pos_suffix) : L(v); }
  function colon() { return state.lang === "zh" ? "：" : ": "; }
  function fill(text, fields) { return text.replace(/\{(\w+)\}/g, function (m, k) { return fields[k] !== undefined ? fields[k] : m; }); }

  // -- numbers: the exact value as Python's repr writes it (shortest round trip) -----------------
  /* pyrepr-begin */
  function pyRepr(x) {
    if (x !== x) return "nan";
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    if (x === 0) return 1 / x < 0 ? "-0.0" : "0.0";
    var m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(x.toExponential());
    var sign = m[1], digits = m[2] + (m[3] || ""), n = parseInt(m[4], 10), point = n + 1;
    if (point <= -4 || point > 16) {
      var e = Math.abs(n);
      return sign + (digits.length > 1 ? digits[0] + "." + digits.slice(1) : digits) + "e" + (n < 0 ? "-" : "+") + (e < 10 ? "0" : "") + e;
    }
    if (point <= 0) return sign + "0." + new Array(1 - point).join("0") + digits;
    if (point >= digits.length) return sign + digits + new Array(point - digits.length + 1).join("0") + ".0";
    return sign + digits.slice(0, point) + "." + digits.slice(point);
  }
  /* pyrepr-end */

  function decode(p) {
    if (!p) return null;
    if (cache[p.b64] === undefined) {
      var bin = atob(p.b64), n = bin.length, u = new Uint8Array(n);
      for (var i = 0; i < n; i++) u[i] = bin.charCodeAt(i);
      cache[p.b64] = new Float64Array(u.buffer);
    }
    return cache[p.b64];
  }

  // -- the DOM ----------------------------------------------------------------------------
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (attrs[k] === null || attrs[k] === undefined || attrs[k] === false) continue;
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else e.setAttribute(k, attrs[k] === true ? "" : attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function $(sel) { return document.querySelector(sel); }

  function side(i) { return D.sides[i]; }
  function allOrder() {
    var out = [];
    D.sides.forEach(function (sd) { sd.order.forEach(function (n) { if (out.indexOf(n) < 0) out.push(n); }); });
    return out;
  }
  function entryOf(sd, name) { return sd.stages[name] || null; }
  function anyEntry(name) {
    for (var i = 0; i < D.sides.length; i++) if (D.sides[i].stages[name]) return D.sides[i].stages[name];
    return null;
  }

  // -- a 2-D view of an array at the chosen leading indices ------------------------------------
  function view(payload, shape, letters, prefix, fmt) {
    var arr = decode(payload), nd = shape.length, rows, cols, rowAxis, colAxis, offset = 0, stride = 1, lead = [];
    if (nd === 0) { rows = 1; cols = 1; rowAxis = ""; colAxis = ""; }
    else if (nd === 1) { rows = 1; cols = shape[0]; rowAxis = ""; colAxis = letters[0]; }
    else {
      rows = shape[nd - 2]; cols = shape[nd - 1]; rowAxis = letters[nd - 2]; colAxis = letters[nd - 1];
      var strides = [], acc = 1;
      for (var i = nd - 1; i >= 0; i--) { strides[i] = acc; acc *= shape[i]; }
      for (var j = 0; j < nd - 2; j++) {
        var ix = letters[j] === "b" ? state.b : letters[j] === "h" ? state.h : 0;
        ix = Math.min(ix, shape[j] - 1);
        lead.push(letters[j] + "=" + ix);
        offset += ix * strides[j];
      }
    }
    var head = (prefix || []).concat(lead);
    return {
      rows: rows, cols: cols, rowAxis: rowAxis, colAxis: colAxis, arr: arr, offset: offset,
      get: function (r, c) { return arr[offset + r * cols + c]; },
      flat: function (r, c) { return offset + r * cols + c; },
      index: function (r, c) {
        var parts = head.slice();
        if (rowAxis) parts.push(rowAxis + "=" + r);
        if (colAxis) parts.push(colAxis + "=" + c);
        return parts.join(",");
      },
      fmt: function (r, c) { return fmt ? fmt[offset + r * cols + c] : null; }
    };
  }

  // -- colours: cividis (sequential), blue-orange (diverging) ---------------------------------
  var CIVIDIS = [[0, 34, 78], [61, 77, 110], [112, 113, 115], [164, 152, 116], [216, 194, 98], [254, 232, 56]];
  var DIVERGING = [[33, 102, 172], [146, 197, 222], [247, 247, 247], [253, 184, 99], [230, 97, 1]];
  function ramp(stops, u) {
    u = Math.max(0, Math.min(1, u));
    var x = u * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), f = x - i, a = stops[i], b = stops[i + 1];
    return [a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f, a[2] + (b[2] - a[2]) * f];
  }
  function scale(v) {
    var lo = Infinity, hi = -Infinity;
    for (var r = 0; r < v.rows; r++) for (var c = 0; c < v.cols; c++) {
      var x = v.get(r, c);
      if (isFinite(x)) { if (x < lo) lo = x; if (x > hi) hi = x; }
    }
    var bad = 0;
    for (var r2 = 0; r2 < v.rows; r2++) for (var c2 = 0; c2 < v.cols; c2++) if (!isFinite(v.get(r2, c2))) bad++;
    if (lo === Infinity) { lo = 0; hi = 1; }
    var signed = lo < 0 && hi > 0;
    var m = Math.max(Math.abs(lo), Math.abs(hi)) || 1;
    return {
      signed: signed, nonfinite: bad,
      colour: function (x) {
        if (!isFinite(x)) return [0, 0, 0];
        if (signed) return ramp(DIVERGING, 0.5 + x / (2 * m));
        return ramp(CIVIDIS, hi > lo ? (x - lo) / (hi - lo) : 0.5);
      }
    };
  }

  // -- a heatmap: canvas, axis labels, hover and keyboard cursor, readout --------------------
  function cellSize(v, kind) {
    var cs = Math.floor(Math.min(640 / v.cols, 420 / v.rows));
    if (kind === "attention" && v.cols <= 40) cs = Math.max(cs, 18);
    return Math.max(1, Math.min(28, cs));
  }

  function heatmap(kind, v, extra) {
    extra = extra || {};
    var cs = cellSize(v, kind), cw = Math.max(cs, Math.ceil(16 / v.cols)), ch = Math.max(cs, Math.ceil(16 / v.rows));  // a strip is 16 px thick
    cw = Math.min(cw, 64); ch = Math.min(ch, 64);
    var w = v.cols * cw, hgt = v.rows * ch, sc = scale(v);
    var canvas = el("canvas", {
      cls: "heatmap", "data-kind": kind, "data-rows": v.rows, "data-cols": v.cols, "data-row-axis": v.rowAxis, "data-col-axis": v.colAxis,
      "data-side": extra.side || null, tabindex: "0", width: w, height: hgt, "aria-label": kind + " heatmap " + (extra.title || "")
    });
    canvas.style.width = w + "px"; canvas.style.height = hgt + "px";
    var ctx = canvas.getContext("2d"), img = ctx ? ctx.createImageData(w, hgt) : null;
    if (img) {
      for (var r = 0; r < v.rows; r++) for (var c = 0; c < v.cols; c++) {
        var masked = extra.masked && extra.masked(r, c);
        var col = masked ? [200, 200, 200] : sc.colour(v.get(r, c));
        for (var y = r * ch; y < (r + 1) * ch; y++) for (var x = c * cw; x < (c + 1) * cw; x++) {
          var k = (y * w + x) * 4;
          img.data[k] = col[0]; img.data[k + 1] = col[1]; img.data[k + 2] = col[2]; img.data[k + 3] = 255;
        }
      }
    }
    var cursor = state.cursor[kind + (extra.side || "")] || { r: 0, c: 0 };
    if (cursor.r >= v.rows || cursor.c >= v.cols) cursor = { r: 0, c: 0 };
    var rowMark = -1;
    function draw() {
      if (!ctx) return;
      ctx.putImageData(img, 0, 0);
      if (extra.masked && cw >= 6 && ch >= 6) {
        ctx.strokeStyle = "rgba(90,90,90,0.8)"; ctx.lineWidth = 1;
        for (var r = 0; r < v.rows; r++) for (var c = 0; c < v.cols; c++) if (extra.masked(r, c)) {
          ctx.beginPath(); ctx.moveTo(c * cw, (r + 1) * ch); ctx.lineTo((c + 1) * cw, r * ch); ctx.stroke();
        }
      }
      if (rowMark >= 0) { ctx.strokeStyle = "#000"; ctx.lineWidth = 2; ctx.strokeRect(1, rowMark * ch + 1, w - 2, Math.max(ch - 2, 1)); }
      if (document.activeElement === canvas) {
        ctx.strokeStyle = "#d400d4"; ctx.lineWidth = 2; ctx.strokeRect(cursor.c * cw + 1, cursor.r * ch + 1, Math.max(cw - 2, 1), Math.max(ch - 2, 1));
      }
    }
    function show(r, c) {
      readout(kind, v, r, c, extra, canvas);
      if (extra.onRow) { rowMark = r; extra.onRow(r); }
      draw();
    }
    canvas.addEventListener("mousemove", function (ev) {
      var rect = canvas.getBoundingClientRect();
      var c = Math.floor((ev.clientX - rect.left) * (w / rect.width) / cw), r = Math.floor((ev.clientY - rect.top) * (hgt / rect.height) / ch);
      if (r >= 0 && r < v.rows && c >= 0 && c < v.cols) show(r, c);
    });
    canvas.addEventListener("mouseleave", function () { if (extra.onRow) { rowMark = -1; extra.onRow(-1); draw(); } });
    canvas.addEventListener("focus", function () { show(cursor.r, cursor.c); });
    canvas.addEventListener("blur", draw);
    canvas.addEventListener("keydown", function (ev) {
      var moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], Home: [0, -v.cols], End: [0, v.cols] };
      var m = moves[ev.key];
      if (!m) return;
      ev.preventDefault(); ev.stopPropagation();
      cursor = { r: Math.max(0, Math.min(v.rows - 1, cursor.r + m[0])), c: Math.max(0, Math.min(v.cols - 1, cursor.c + m[1])) };
      state.cursor[kind + (extra.side || "")] = cursor;
      show(cursor.r, cursor.c);
    });
    draw();
    canvas.tracerShow = show;
    var legend = el("div", { cls: "legend", text: (sc.signed ? s("legend_div") : s("legend_seq")) + (sc.nonfinite ? "; " + s("nonfinite_black") + colon() + sc.nonfinite : "") });
    var grid = el("div", { cls: "heatmap-grid" });
    grid.style.gridTemplateColumns = "auto " + w + "px";
    grid.appendChild(el("div", { cls: "corner" }));
    var top = el("div", { cls: "col-labels" });
    top.appendChild(el("span", { cls: "axis-label col-axis", text: (extra.colName ? extra.colName + " " : "") + v.colAxis + " →" }));
    if (extra.keyLabels) {
      var keys = el("div", { cls: "key-labels" });
      for (var c2 = 0; c2 < v.cols; c2++) {
        var kl = el("span", { cls: "key-label", "data-s": c2, text: extra.keyLabels[c2], title: v.colAxis + "=" + c2 });
        kl.style.width = cw + "px"; kl.style.lineHeight = cw + "px";
        keys.appendChild(kl);
      }
      top.appendChild(keys);
    }
    grid.appendChild(top);
    var left = el("div", { cls: "row-labels" });
    left.appendChild(el("span", { cls: "axis-label row-axis", text: (extra.rowName ? extra.rowName + " " : "") + (v.rowAxis || "") + (v.rowAxis ? " ↓" : "") }));
    if (extra.queryLabels) {
      var qs = el("div", { cls: "query-labels" });
      for (var r2 = 0; r2 < v.rows; r2++) {
        var ql = el("span", { cls: "query-label", "data-t": r2, text: extra.queryLabels[r2], title: v.rowAxis + "=" + r2 });
        ql.style.height = ch + "px"; ql.style.lineHeight = ch + "px";
        (function (row) { ql.addEventListener("mouseenter", function () { show(row, cursor.c); }); })(r2);
        qs.appendChild(ql);
      }
      left.appendChild(qs);
    }
    grid.appendChild(left);
    grid.appendChild(canvas);
    var maskLegend = extra.masked ? el("div", { cls: "legend masked-legend" }, [el("span", { cls: "swatch masked" }), s("masked")]) : null;
    return el("div", { cls: "heatmap-wrap" }, [extra.title ? el("div", { cls: "heatmap-title", text: extra.title }) : null, grid, legend, maskLegend]);
  }

  function readout(kind, v, r, c, extra, canvas) {
    var box = $("#readout");
    if (!box) return;

    var x = v.get(r, c), exact = pyRepr(x), f = v.fmt(r, c), idx = v.index(r, c);
    box.setAttribute("data-index", idx);
    box.setAttribute("data-value", exact);
    box.setAttribute("data-kind", kind);
    box.textContent = "";
    var where = idx;
    if (kind === "attention") where = s("query") + " " + v.rowAxis + "=" + (v.rowOf ? v.rowOf(r) : r) + ", " + s("key") + " " + v.colAxis + "=" + c + " (" + idx + ")";
    var word = { value: s("value"), norms: s("norms"), grad: s("grad"), absdiff: s("absdiff"), attention: s("attention_word"), lens: s("lens_word"), attribution: s("attribution_word") }[kind] || kind;
    box.appendChild(el("span", { cls: "readout-index", text: (extra.side ? extra.side.toUpperCase() + " " : "") + word + " " + where }));
    box.appendChild(el("span", { cls: "readout-exact", text: s("exact") + colon() + exact }));
    if (kind !== "absdiff")  // the terminal prints no cell of |A - B|: only the exact value to give
      box.appendChild(el("span", { cls: "readout-fmt", text: s("as_table") + colon() + (f !== null && f !== undefined ? f : "— (" + s("fmt_missing") + ")") }));
    if (extra.masked && extra.masked(r, c)) box.appendChild(el("span", { cls: "readout-masked", text: s("masked") }));
    var local = canvas && canvas.closest("#attention, #lens, #attribution");  // a copy beside the cells, in a box that keeps its height
    local = local && local.querySelector(".readout-local");
    if (local) {
      local.textContent = "";
      for (var k = 0; k < box.childNodes.length; k++) local.appendChild(box.childNodes[k].cloneNode(true));
    }
  }

  // -- the diagram ------------------------------------------------------------------------
  function box(sd, name) {
    var e = entryOf(sd, name);
    var b = el("button", {
      type: "button", cls: "stage-box" + (e.internal ? " internal" : "") + (e.violation ? " violation" : "") +
        (D.first_divergence === name ? " first-divergence" : "") + (state.stage === name ? " selected" : ""),
      "data-stage": name, "data-violation": e.violation ? e.violation.kind : null, "data-summary": e.summary ? "true" : null,
      "aria-pressed": state.stage === name ? "true" : "false"
    }, [el("span", { cls: "name", text: name }), el("span", { cls: "shape", text: e.label })]);
    if (e.violation) b.appendChild(el("span", { cls: "violation-text", text: L(e.violation.text) }));
    if (e.intervention) { b.classList.add("intervened"); b.appendChild(el("span", { cls: "intervention", text: "← " + L(e.intervention) })); }
    b.addEventListener("click", function () { select(name); });
    return b;
  }

  function diagram(sd, attrs) {
    var d = el("nav", attrs);
    sd.sections.forEach(function (sec) {
      var part = el("div", { cls: "section section-" + sec.kind }, [el("h3", { cls: "section-title", text: L(sec.title) })]);
      sec.stages.forEach(function (n) { part.appendChild(box(sd, n)); });
      if (sec.note) part.appendChild(el("p", { cls: "section-note", text: L(sec.note) }));
      d.appendChild(part);
    });
    return d;
  }

  // -- the stage panel --------------------------------------------------------------------
  function maskOf(name) {  // an attention stage's [T,S] mask as a test of (query, key): true where masked
    for (var i = 0; i < D.heads.length; i++) {
      var a = D.heads[i];
      if (!a.mask || (a.stage !== name && a.stage.replace(/\.weights$/, ".scores") !== name)) continue;
      var bin = atob(a.mask), S = a.S;
      return function (r, c) { var k = r * S + c; return !((bin.charCodeAt(k >> 3) >> (7 - (k & 7))) & 1); };
    }
    return null;
  }

  function stageHeatmaps(sd, e, sideId) {
    var out = [];
    var fmt = e.value && e.value.fmt;
    if (e.value) {
      var masked = D.kind !== "diff" ? maskOf(e.name) : null;
      out.push(heatmap("value", view(e.value, e.shape, e.letters, [], fmt), { side: sideId, masked: masked, title: (sideId ? sideId.toUpperCase() + colon() : "") + s("value") }));
    } else if (e.summary) {
      var ch = e.summary.chosen;
      var prefix = [];
      if (e.letters.indexOf("b") >= 0) prefix.push("b=" + D.b);
      prefix.push(positionLetter(e) + "=" + D.t);
      out.push(heatmap("value", view(ch, ch.shape, ch.letters, prefix, ch.fmt), { side: sideId, title: (sideId ? sideId.toUpperCase() + colon() : "") + s("value") + " (" + prefix.join(",") + ")" }));
      var nm = e.summary.norms;
      out.push(heatmap("norms", view(nm, nm.shape, e.letters.slice(0, Math.max(1, e.letters.length - 1)), [], null), { side: sideId, title: s("norms") }));
      out.push(histogram(e.summary.hist));
    }
    if (e.grad) out.push(heatmap("grad", view(e.grad, e.shape, e.letters, [], e.grad.fmt), { side: sideId, title: s("grad") }));
    else if (D.kind === "grad" && D.budget.summarised.indexOf(e.name + " (grad)") >= 0) out.push(el("p", { cls: "left-out", text: s("grad") + colon() + s("grad_left_out") }));
    return out;
  }

  function positionLetter(e) {
    for (var i = 0; i < e.axes.length; i++) if (e.axes[i] === "T" || e.axes[i] === "S") return e.letters[i];
    return "t";
  }

  function histogram(h) {
    var wrap = el("div", { cls: "histogram" }, [el("div", { cls: "heatmap-title", text: s("histogram") })]);
    var max = Math.max.apply(null, h.counts.concat([1]));
    var bars = el("div", { cls: "bars" });
    h.counts.forEach(function (n, i) {
      var bar = el("span", { cls: "bar", title: "[" + h.edges[i] + ", " + h.edges[i + 1] + "]: " + n });
      bar.style.height = Math.round(60 * n / max) + "px";
      bars.appendChild(bar);
    });
    wrap.appendChild(bars);
    if (h.nonfinite) wrap.appendChild(el("div", { text: s("nonfinite") + colon() + h.nonfinite }));
    return wrap;
  }

  function valuesTable(e, payload, fmt) {
    var v = view(payload, e.shape, e.letters, [], fmt);
    var t = el("table", { cls: "values" });
    var big = v.rows * v.cols > 400;
    var head = el("tr", {}, [el("th", { text: (v.rowAxis || "") + " \\ " + (v.colAxis || "") })]);
    for (var c = 0; c < Math.min(v.cols, big ? 64 : v.cols); c++) head.appendChild(el("th", { text: v.colAxis + "=" + c }));
    t.appendChild(head);
    var rowsShown = big ? [Math.min(state.t, v.rows - 1)] : null;
    for (var r = 0; r < v.rows; r++) {
      if (rowsShown && rowsShown.indexOf(r) < 0) continue;
      var tr = el("tr", {}, [el("th", { text: v.rowAxis ? v.rowAxis + "=" + r : "" })]);
      for (var c2 = 0; c2 < Math.min(v.cols, big ? 64 : v.cols); c2++) tr.appendChild(el("td", { text: pyRepr(v.get(r, c2)), "data-index": v.index(r, c2) }));
      t.appendChild(tr);
    }
    var out = [el("div", { cls: "values-wrap" }, [t])];
    if (big) out.push(el("p", { cls: "note", text: s("values_note") }));
    return out;
  }

  function stagePanel() {
    var panel = el("section", { id: "stage", "data-stage": state.stage, tabindex: "0", "aria-label": s("stage") + " " + state.stage });
    var e = anyEntry(state.stage);
    if (!e) return panel;
    if (e.summary) panel.setAttribute("data-summary", "true");
    panel.appendChild(el("h2", { text: state.stage + " " }, [el("span", { cls: "shape", text: e.label })]));
    panel.appendChild(el("div", { cls: "formula" }, [el("span", { cls: "label", text: s("formula") + colon() }), L(e.formula)]));
    panel.appendChild(el("div", { cls: "meaning" }, [el("span", { cls: "label", text: s("meaning") + colon() }), L(e.meaning)]));
    if (e.violation) panel.appendChild(el("pre", { cls: "violation-text", text: L(e.violation.text) }));
    if (e.intervention) panel.appendChild(el("p", { cls: "intervention", text: "← " + L(e.intervention) }));
    if (e.summary) panel.appendChild(el("p", { cls: "left-out", text: s("left_out") }));
    var key = state.b + "," + state.t;
    var pvKids = [el("span", { cls: "label", text: s("position_values") + " (b=" + state.b + ", t=" + state.t + ")" + colon() })];
    D.sides.forEach(function (sd, i) {  // a diff: each side's value, named by its side; one block: its value
      var se = sd.stages[state.stage];
      if (!se || (D.kind !== "diff" && i > 0)) return;
      var pv = se.pos_text[key];
      if (D.kind === "diff") pvKids.push(el("span", { cls: "label side-label", text: (pvKids.length > 1 ? "  " : "") + sd.id.toUpperCase() + ": " }));
      pvKids.push(el("code", { cls: "value", "data-side": sd.id, text: pv !== undefined ? S(pv, se) : s("not_precomputed") }));
    });
    panel.appendChild(el("div", { id: "position-values", "data-b": state.b, "data-t": state.t }, pvKids));
    panel.appendChild(el("div", { id: "readout", "data-index": "", "data-value": "", "aria-live": "polite", text: s("readout_hint") }));
    var maps = el("div", { cls: "heatmaps" });
    var payloads = [];
    D.sides.forEach(function (sd) {
      var se = entryOf(sd, state.stage);
      var sid = D.kind === "diff" ? sd.id : "";
      if (!se) { if (sid) maps.appendChild(el("p", { cls: "note", text: sd.label + colon() + s("not_in_trace") })); return; }
      stageHeatmaps(sd, se, sid).forEach(function (m) { maps.appendChild(m); });
      if (se.value) payloads.push(se);
    });
    if (D.kind === "diff" && payloads.length === 2 && payloads[0].shape.join() === payloads[1].shape.join()) {
      var A = decode(payloads[0].value), B = decode(payloads[1].value), d = new Float64Array(A.length);
      for (var i = 0; i < A.length; i++) d[i] = Math.abs(A[i] - B[i]);
      var dv = view({ b64: "" }, payloads[0].shape, payloads[0].letters, [], null);
      var vv = view(payloads[0].value, payloads[0].shape, payloads[0].letters, [], null);
      dv = { rows: vv.rows, cols: vv.cols, rowAxis: vv.rowAxis, colAxis: vv.colAxis, get: function (r, c) { return d[vv.flat(r, c)]; }, index: vv.index, fmt: function () { return null; } };
      maps.appendChild(heatmap("absdiff", dv, { title: s("absdiff") }));
    }
    panel.appendChild(maps);
    if (e.value) valuesTable(e, e.value, e.value.fmt).forEach(function (x) { panel.appendChild(x); });
    return panel;
  }

  // -- controls ---------------------------------------------------------------------------
  function selector(id, label, n, value, onchange, words) {
    var sel = el("select", { id: id, "aria-label": label });
    for (var i = 0; i < n; i++) sel.appendChild(el("option", { value: i, text: label + " " + i + (words && words[i] !== undefined ? " (" + words[i] + ")" : ""), selected: i === value ? true : null }));
    sel.value = String(value);
    sel.addEventListener("change", function () { onchange(parseInt(sel.value, 10)); });
    return el("label", { cls: "control" }, [sel]);
  }

  function controls() {
    var c = el("div", { id: "controls" });
    var dims = D.dims;
    c.appendChild(selector("sel-b", "b", dims.B || 1, state.b, function (v) { state.b = v; rerender(); }));
    c.appendChild(selector("sel-t", "t", dims.T || 1, state.t, function (v) { state.t = v; rerender(); }, D.words ? D.words[state.b] : null));
    var e = state.stage ? anyEntry(state.stage) : null;
    if ((e && e.letters.indexOf("h") >= 0) || state.head) c.appendChild(selector("sel-h", "h", dims.H || 1, state.h, function (v) { state.h = v; if (state.head) state.head.h = v; rerender(); }));
    c.appendChild(el("span", { cls: "keys-hint", text: s("keys_hint") }));
    return c;
  }

  // -- Table 17.1 -------------------------------------------------------------------------
  function table17() {
    var T = D.table17;
    var wrap = el("div", { id: "table17-wrap" });
    var btn = el("button", { id: "show-table", type: "button", "aria-expanded": state.tableOpen ? "true" : "false", text: state.tableOpen ? s("hide_table") : s("show_table") });
    btn.addEventListener("click", function () { state.tableOpen = !state.tableOpen; rerender("#show-table"); });
    wrap.appendChild(btn);
    var key = state.b + "," + state.t;
    var heads = T.headers[key] ? L(T.headers[key]).split("\t") : [s("stage"), s("meaning"), s("value") + " (b=" + state.b + ", t=" + state.t + ")", s("shape")];
    var table = el("table", { id: "table17", hidden: state.tableOpen ? null : true });
    table.appendChild(el("caption", { text: D.title }));
    table.appendChild(el("tr", {}, [el("th", { text: heads[0] }), el("th", { text: heads[1] }), el("th", { text: heads[2] }), el("th", { text: heads[3] }), el("th", {})]));
    var sd = side(0);
    T.stages.forEach(function (n) {
      var e = sd.stages[n];
      var v = e.pos_text[key];
      var flagged = T.flagged.indexOf(n) >= 0;
      var row = el("tr", { "data-stage": n, cls: flagged ? "flagged" : null }, [
        el("td", { cls: "stage", text: n }), el("td", { cls: "meaning", text: L(T.meanings[n]) }),
        el("td", { cls: "value", text: v !== undefined ? S(v, e) : s("not_precomputed") }), el("td", { cls: "shape", text: e.label }),
        el("td", { cls: "mark", text: (flagged ? "← " + s("violation") : "") + (e.intervention ? "← " + L(e.intervention) : "") })]);
      row.addEventListener("click", function () { select(n); });
      table.appendChild(row);
    });
    wrap.appendChild(table);
    wrap.appendChild(el("p", { cls: "caption", hidden: state.tableOpen ? null : true, text: L(T.caption) }));
    return wrap;
  }

  // -- attention heads --------------------------------------------------------------------
  function heads() {
    var wrap = el("section", { id: "heads" }, [el("h2", { text: s("heads") })]);
    D.heads.forEach(function (a) {
      var row = el("div", { cls: "head-row" }, [el("span", { cls: "label", text: a.stage + " (" + s("layer") + " " + a.layer + ")" + colon() })]);
      for (var h = 0; h < a.heads; h++) (function (h) {
        var open = state.head && state.head.stage === a.stage && state.head.h === h;
        var b = el("button", { type: "button", cls: "head" + (open ? " selected" : ""), "data-layer": a.layer, "data-head": h, "data-stage": a.stage, "aria-pressed": open ? "true" : "false", text: s("head") + " " + h });
        b.addEventListener("click", function () { state.head = { stage: a.stage, h: h }; state.h = h; rerender(); var x = $("#attention canvas.heatmap"); if (x) x.scrollIntoView({ block: "nearest" }); });
        row.appendChild(b);
      })(h);
      wrap.appendChild(row);
    });
    if (state.head) wrap.appendChild(attentionPanel());
    return wrap;
  }

  function attentionPanel() {
    var a = D.heads.filter(function (x) { return x.stage === state.head.stage; })[0];
    var e = side(0).stages[a.stage];
    var panel = el("div", { id: "attention", "data-stage": a.stage, "data-head": state.head.h });
    panel.appendChild(el("h3", { text: a.stage + " · " + s("head") + " " + state.head.h + " · b=" + state.b }));
    panel.appendChild(el("div", { cls: "readout-local", "aria-hidden": "true", text: s("readout_hint") }));
    if (e && !e.value && e.summary && e.summary.chosen.shape.length === 2) {  // summarised: the chosen query's row of this head
      panel.appendChild(el("p", { cls: "left-out", text: s("left_out") }));
      var ch = e.summary.chosen, arr = decode(ch), S = ch.shape[1], h0 = Math.min(state.head.h, ch.shape[0] - 1), fmt = ch.fmt;
      var row = { rows: 1, cols: S, rowAxis: "t", colAxis: "s", rowOf: function () { return D.t; }, get: function (r, c) { return arr[h0 * S + c]; },
        index: function (r, c) { return "b=" + D.b + ",h=" + h0 + ",t=" + D.t + ",s=" + c; }, fmt: function (r, c) { return fmt ? fmt[h0 * S + c] : null; } };
      var labels = []; for (var i = 0; i < S; i++) labels.push(a.keys && a.keys[D.b] ? a.keys[D.b][i] : String(i));
      var qlabel = a.queries && a.queries[D.b] ? a.queries[D.b][D.t] : String(D.t);
      var maskRow = null;
      if (a.mask) { var mb = atob(a.mask); maskRow = function (r, c) { var k = D.t * a.S + c; return !((mb.charCodeAt(k >> 3) >> (7 - (k & 7))) & 1); }; }
      panel.appendChild(heatmap("attention", row, { title: s("query") + " t=" + D.t, masked: maskRow, rowName: s("query"), colName: s("key"), keyLabels: labels, queryLabels: [qlabel] }));
      return panel;
    }
    if (!e || !e.value) { panel.appendChild(el("p", { cls: "left-out", text: s("left_out") })); return panel; }
    var saveH = state.h; state.h = state.head.h;
    var v = view(e.value, e.shape, e.letters, [], e.value.fmt);
    state.h = saveH;
    var bits = null;
    if (a.mask) { var bin = atob(a.mask); bits = function (r, c) { var i = r * a.S + c; return !((bin.charCodeAt(i >> 3) >> (7 - (i & 7))) & 1); }; }
    var words = function (list, n) { var out = []; for (var i = 0; i < n; i++) out.push(list && list[state.b] ? list[state.b][i] : String(i)); return out; };
    var keyEls = null;
    var extra = {
      title: s("query") + " " + v.rowAxis + " × " + s("key") + " " + v.colAxis, masked: bits, rowName: s("query"), colName: s("key"),
      keyLabels: words(a.keys, a.S), queryLabels: words(a.queries, a.T),
      onRow: function (r) {
        keyEls = keyEls || panel.querySelectorAll(".key-label");
        for (var c = 0; c < keyEls.length; c++) keyEls[c].classList.toggle("highlight", r >= 0 && v.get(r, c) > 0);
        var qs = panel.querySelectorAll(".query-label");
        for (var q = 0; q < qs.length; q++) qs[q].classList.toggle("highlight", q === r);
      }
    };
    panel.appendChild(heatmap("attention", v, extra));
    return panel;
  }

  // -- grad, lens, diff extras ---------------------------------------------------------------
  function bars(rows, key) {
    var max = 0;
    rows.forEach(function (r) { var x = parseFloat(r[key]); if (isFinite(x)) max = Math.max(max, x); });
    return function (r) {
      var bar = el("span", { cls: "bar-h" });
      var x = parseFloat(r[key]);
      bar.style.width = (max > 0 && isFinite(x) ? Math.round(200 * x / max) : 0) + "px";
      return bar;
    };
  }

  function layerGrads() {
    var g = D.layer_grads;
    var wrap = el("section", { id: "layer-grads" }, [el("h2", { text: s("layer_grads") })]);
    if (g.loss) wrap.appendChild(el("p", { cls: "loss", text: L(g.loss) + " = " + g.loss_value }));
    if (g.per_layer) {
      var p = g.per_layer, bar1 = bars(p.rows, "norm");
      var t1 = el("table", { cls: "per-layer" }, [el("tr", {}, [el("th", { text: s("layer") }), el("th", { text: "|dL/d " + p.weight + "|" }), el("th", { text: "/ " + s("layer") + " 0" }), el("th", {})])]);
      p.rows.forEach(function (r) {
        t1.appendChild(el("tr", { "data-layer": r.layer }, [el("th", { text: r.layer }), el("td", { cls: "value", text: r.fmt, title: r.norm, "data-value": r.norm }), el("td", { text: r.ratio }), el("td", {}, [bar1(r)])]));
      });
      wrap.appendChild(t1);
    }
    var bar2 = bars(g.rows, "total");
    var t = el("table", { cls: "layer-grads" }, [el("tr", {}, [el("th", { text: s("layer") }), el("th", { text: "|dL/dW|" }), el("th", {}), el("th", { text: s("weights_word") })])]);
    g.rows.forEach(function (r) {
      t.appendChild(el("tr", { "data-layer": r.layer }, [el("th", { text: r.layer }), el("td", { cls: "value", text: r.total_fmt, title: r.total, "data-value": r.total }), el("td", {}, [bar2(r)]),
        el("td", { cls: "weights", text: r.norms.map(function (n) { return n.weight + " " + n.fmt; }).join(", ") })]));
    });
    wrap.appendChild(t);
    return wrap;
  }

  function lensPanel() {
    var l = D.lens;
    var wrap = el("section", { id: "lens" }, [el("h2", { text: s("lens") }), el("p", { text: L(l.chosen) }),
      el("div", { cls: "readout-local", "aria-hidden": "true", text: s("readout_hint") })]);
    var v = view(l, l.shape, ["layer", "t"], [], l.fmt);
    wrap.appendChild(heatmap("lens", v, { title: l.labels.join(" · "), keyLabels: l.positions, queryLabels: l.labels }));
    return wrap;
  }

  function attributionPanel() {  // tracer attribute's table and heads heatmap; each value's exact repr in its title
    var a = D.attribution;
    var wrap = el("section", { id: "attribution" }, [el("h2", { text: s("attribution") }), el("p", { cls: "attribution-title", text: L(a.title) })]);
    var t = el("table", { cls: "attribution" }, [el("tr", {}, [el("th", { text: s("component") }), el("th", { text: s("value") }), el("th", { text: s("share") })])]);
    a.components.forEach(function (c) {
      t.appendChild(el("tr", { "data-component": c.name }, [el("td", { cls: "component", text: c.name }),
        el("td", { cls: "value", text: c.fmt, title: c.value, "data-value": c.value }), el("td", { cls: "share", text: c.share })]));
    });
    t.appendChild(el("tr", { cls: "sum" }, [el("th", { text: s("sum_of_parts") }), el("td", { cls: "value", text: a.sum.fmt, title: a.sum.value, "data-value": a.sum.value }), el("td", {})]));
    t.appendChild(el("tr", { cls: "logit" }, [el("th", { text: s("run_logit") }), el("td", { cls: "value", text: a.logit.fmt, title: a.logit.value, "data-value": a.logit.value }),
      el("td", { cls: "gap", text: s("sum_minus_logit") + " = " + a.gap })]));
    wrap.appendChild(t);
    if (a.heads) {
      var hs = a.heads, heads = [];
      for (var h = 0; h < hs.shape[1]; h++) heads.push("h" + h);
      wrap.appendChild(el("div", { cls: "readout-local", "aria-hidden": "true", text: s("readout_hint") }));
      var v = view(hs, hs.shape, ["layer", "h"], [], hs.fmt);
      wrap.appendChild(heatmap("attribution", v, { title: s("heads_by_layer"), keyLabels: heads, queryLabels: hs.layers }));
    }
    return wrap;
  }

  // -- the page ---------------------------------------------------------------------------
  function budget() {
    var B = D.budget;
    var kids = [B.over ? fill(s("over_budget"), { size: B.size_text, budget: B.budget_text }) : fill(s("budget"), { size: B.size_text, budget: B.budget_text })];
    if (B.summarised.length) kids.push(" " + fill(s("summarised_list"), { names: B.summarised.join(", ") }));
    if (!D.positions_all) kids.push(" " + fill(s("positions_note"), { which: "b=" + D.b + ", t=" + D.t }));
    return el("p", { id: "budget", cls: B.over ? "over" : null }, kids);
  }

  function render() {
    var app = document.getElementById("app");
    app.textContent = "";
    document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
    var head = el("header", {}, [el("h1", { text: D.title }),
      el("div", { id: "langs", role: "group", "aria-label": s("language") }, [
        el("button", { id: "lang-en", type: "button", "aria-pressed": state.lang === "en" ? "true" : "false", text: "English" }),
        el("button", { id: "lang-zh", type: "button", "aria-pressed": state.lang === "zh" ? "true" : "false", text: "中文" })]), budget()]);
    app.appendChild(head);
    app.appendChild(controls());
    var main = el("main", {});
    if (D.kind === "diff") {
      main.appendChild(el("pre", { id: "verdict", text: L(D.verdict) }));
      var follow = el("button", { id: "follow-divergence", type: "button", disabled: D.first_divergence ? null : true, text: D.first_divergence ? s("follow") + colon() + D.first_divergence : s("no_divergence") });
      follow.addEventListener("click", function () { if (D.first_divergence) { select(D.first_divergence); var p = $("#stage"); if (p) p.focus(); } });
      main.appendChild(follow);
      var sides = el("div", { cls: "sides" });
      D.sides.forEach(function (sd) {
        sides.appendChild(el("div", { id: "side-" + sd.id, cls: "side" }, [el("h2", { text: s("side_" + sd.id) + colon() + sd.name }), diagram(sd, { cls: "diagram", "aria-label": s("diagram") })]));
      });
      main.appendChild(sides);
    } else {
      main.appendChild(el("h2", { text: s("diagram") }));
      main.appendChild(diagram(side(0), { id: "diagram", cls: "diagram", "aria-label": s("diagram") }));
    }
    main.appendChild(stagePanel());
    if (D.table17) main.appendChild(table17());
    if (D.heads.length) main.appendChild(heads());
    if (D.layer_grads) main.appendChild(layerGrads());
    if (D.lens) main.appendChild(lensPanel());
    if (D.attribution) main.appendChild(attributionPanel());
    app.appendChild(main);
    $("#lang-en").addEventListener("click", function () { setLang("en"); });
    $("#lang-zh").addEventListener("click", function () { setLang("zh"); });
  }

  function rerender(focusSel) {
    var active = document.activeElement, sel = focusSel || null;
    if (!sel && active && active.id) sel = "#" + active.id;
    else if (!sel && active && active.classList && active.classList.contains("head"))
      sel = 'button.head[data-stage="' + active.getAttribute("data-stage") + '"][data-head="' + active.getAttribute("data-head") + '"]';
    else if (!sel && active && active.getAttribute && active.getAttribute("data-stage") && active.classList.contains("stage-box")) {
      var sideEl = active.closest(".side");
      sel = (sideEl ? "#" + sideEl.id + " " : "") + '.stage-box[data-stage="' + state.stage + '"]';
    }
    render();
    if (sel) { var x = document.querySelector(sel); if (x) x.focus(); }
  }

  function setLang(l) { state.lang = l; rerender("#lang-" + l); }

  function select(name) {
    if (!anyEntry(name)) throw new Error("no stage " + name);
    state.stage = name;
    state.cursor = {};
    rerender();
  }

  document.addEventListener("keydown", function (ev) {
    var t = ev.target, tag = t && t.tagName;
    if (tag === "SELECT" || tag === "INPUT" || tag === "TEXTAREA" || (t.classList && t.classList.contains("heatmap"))) return;
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    var step = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 }[ev.key];
    if (!step) return;
    var order = allOrder(), i = order.indexOf(state.stage), j = Math.max(0, Math.min(order.length - 1, i + step));
    ev.preventDefault();
    var onBox = t.classList && t.classList.contains("stage-box");
    state.stage = order[j];
    state.cursor = {};
    if (onBox) {
      var sideEl = t.closest(".side");
      rerender((sideEl ? "#" + sideEl.id + " " : "") + '.stage-box[data-stage="' + order[j] + '"]');
    } else rerender();
  });

  var first = null;
  D.sides.forEach(function (sd) { sd.order.forEach(function (n) { if (!first && sd.stages[n].violation) first = n; }); });
  state.stage = first || allOrder()[0] || null;
  render();
  window.tracerPage = { ready: true, select: function (n) { select(n); }, data: D, pyRepr: pyRepr, language: function () { return state.lang; } };
})();
