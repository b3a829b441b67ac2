/* The head explorer and the sortable, filterable heads table. No dependencies, no network: the
   page embeds its data as JSON (<script type="application/json" class="hx-data">). Everything the
   page shows without JavaScript (the grid, the tables, the figures) is plain HTML; this script adds
   the head detail, the colour choice, sorting and filtering. Safe to load more than once (Jupyter). */
(function () {
  "use strict";
  var VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
  function viridis(x) {
    if (x === null || x === undefined || isNaN(x)) return "#eeeeee";
    var i = Math.max(0, Math.min(VIRIDIS.length - 1, Math.floor(x * VIRIDIS.length)));
    return VIRIDIS[i];
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmt(x, d) {
    if (x === null || x === undefined || (typeof x === "number" && isNaN(x))) return "";
    return typeof x === "number" ? x.toFixed(d === undefined ? 3 : d) : String(x);
  }
  function decode(b64, n) {  // uint8 weights, 255 = 1.0
    var s = atob(b64), out = new Array(n);
    for (var i = 0; i < n; i++) out[i] = s.charCodeAt(i) / 255;
    return out;
  }

  function initExplorer(root) {
    if (root.getAttribute("data-ready")) return;
    root.setAttribute("data-ready", "1");
    var data = JSON.parse(root.querySelector("script.hx-data").textContent);
    var grid = root.querySelector("table.hx-grid");
    var detail = root.querySelector(".hx-detail");
    var colourBy = root.querySelector("select.hx-colour");
    var byKey = {};
    data.heads.forEach(function (h) { byKey[h.layer + "," + h.head] = h; });
    var state = {sentence: 0, weighting: "attention", key: null};

    var caption = root.querySelector(".hx-caption");
    var cat = data.catalogue || null;  // the head catalogue's rows (interp catalogue), where the folder has one
    var taskBy = root.querySelector("select.hx-task"), taskLabel = root.querySelector(".hx-task-label");
    var legend = root.querySelector(".hx-legend:not(.hx-legend-verdict)"), verdictLegend = root.querySelector(".hx-legend-verdict");
    function catalogueRow(key, task) {  // the head's row for the task, or null
      var rows = (cat && cat.heads[key]) || [];
      for (var i = 0; i < rows.length; i++) if (rows[i].task === task) return rows[i];
      return null;
    }
    grid.querySelectorAll("td.hx-cell").forEach(function (td) { td.setAttribute("data-title", td.title); });
    function recolour() {
      var what = colourBy ? colourBy.value : "primary";
      var task = taskBy ? taskBy.value : null;
      if (taskLabel) taskLabel.hidden = what !== "verdict";
      if (legend) legend.hidden = what === "verdict";
      if (verdictLegend) verdictLegend.hidden = what !== "verdict";
      if (caption) caption.textContent = what === "primary" ? "number: effect of the primary role, % of the way from baseline to ceiling; framed: a sink head" :
        what === "verdict" ? "colour: the catalogue's verdict on " + (cat.task_names[task] || task) + "; grey: no row for this task" :
        "colour, number: " + what + " score x 100";
      grid.querySelectorAll("td.hx-cell").forEach(function (td) {
        var key = td.getAttribute("data-layer") + "," + td.getAttribute("data-head");
        var h = byKey[key];
        td.title = td.getAttribute("data-title");
        td.removeAttribute("data-verdict");
        if (what === "verdict") {
          var row = catalogueRow(key, task);
          td.style.background = row ? (cat.colours[row.verdict] || cat.no_row) : cat.no_row;
          td.style.color = "#111";
          td.textContent = "";
          td.setAttribute("data-verdict", row ? row.verdict : "");
          td.title += "; " + task + ": " + (row ? row.verdict : "no row for this task");
        } else if (what === "primary") {
          td.style.background = data.colours[h.primary] || "#eeeeee";
          td.style.color = "#111";
          td.textContent = (h.relative === null || h.relative === undefined) ? "" : Math.round(100 * h.relative);
        } else {
          var s = data.role_scores[what] ? data.role_scores[what][h.layer][h.head] : null;
          td.style.background = viridis(s);
          td.style.color = s !== null && s > 0.6 ? "#111" : "#fff";
          td.textContent = s === null ? "" : Math.round(100 * s);
        }
      });
    }

    function matrix(ex, weights) {
      var n = ex.tokens.length, t = el("table", {"class": "hx-matrix"});
      var head = el("tr"); head.appendChild(el("th", null, ""));
      ex.tokens.forEach(function (tok) { head.appendChild(el("th", {"class": "hx-col"}, tok)); });
      t.appendChild(head);
      for (var q = 0; q < n; q++) {
        var tr = el("tr", {"data-query": q});
        tr.appendChild(el("th", {"class": "hx-row"}, ex.tokens[q]));
        for (var k = 0; k < n; k++) {
          var w = weights[q * n + k];
          var td = el("td", {"data-w": w.toFixed(3), title: ex.tokens[q] + " \u2192 " + ex.tokens[k] + ": " + w.toFixed(3)});
          var a = Math.round(255 * (1 - w));
          td.style.background = "rgb(" + a + "," + a + ",255)";
          if (w > 0) td.classList.add("hx-nz");
          tr.appendChild(td);
        }
        tr.addEventListener("mouseenter", function () { this.classList.add("hx-hover"); });
        tr.addEventListener("mouseleave", function () { this.classList.remove("hx-hover"); });
        t.appendChild(tr);
      }
      return t;
    }

    function labelText(s) {  // the row's own label in heads.csv, named as the map counts it
      if (!s.label) return "";
      var base = s.role.split(" ")[0];
      return s.map_role && s.map_role !== base ? "yes, as " + s.map_role : "yes";
    }

    function roleNotes(h) {  // what the head's roles mean (the page's role list, in one place)
      var roles = [h.primary].concat(h.secondary ? h.secondary.split(", ") : []);
      var dl = el("dl", {"class": "hx-roles"});
      roles.forEach(function (r) {
        dl.appendChild(el("dt", null, r));
        dl.appendChild(el("dd", null, (data.role_text || {})[r] || ""));
      });
      return dl;
    }

    function scoreTable(h) {
      var tbl = el("table", {"class": "hx-scores"}), hr = el("tr");
      ["role", "direction", "score", "95% CI", "baseline", "null", "p (Holm)", "label"].forEach(function (c) { hr.appendChild(el("th", null, c)); });
      tbl.appendChild(hr);
      h.scores.forEach(function (s) {
        var tr = el("tr", s.label ? {"class": "hx-lab"} : null);
        [s.role, s.direction, fmt(s.score), "[" + fmt(s.ci_low) + ", " + fmt(s.ci_high) + "]", fmt(s.baseline) + " (" + s.baseline_kind + ")",
         fmt(s.null_score), s.p_adjusted === null ? "" : s.p_adjusted.toExponential(1), labelText(s)].forEach(function (c) { tr.appendChild(el("td", null, c)); });
        tbl.appendChild(tr);
      });
      return tbl;
    }

    function table(columns, rows, cls) {  // a small table of text cells
      var tbl = el("table", {"class": cls}), hr = el("tr");
      columns.forEach(function (c) { hr.appendChild(el("th", null, c)); });
      tbl.appendChild(hr);
      rows.forEach(function (r) {
        var tr = el("tr");
        r.forEach(function (c) { tr.appendChild(c instanceof Node ? (function () { var td = el("td"); td.appendChild(c); return td; })() : el("td", null, c)); });
        tbl.appendChild(tr);
      });
      return tbl;
    }

    function sides(key) {  // the catalogue: what the head attends to beside what it does, per task
      var box = el("div", {"class": "hx-sides"});
      var pat = el("div", {"class": "hx-side hx-pattern"}), cau = el("div", {"class": "hx-side hx-causal"});
      pat.appendChild(el("h4", null, "Pattern: its labelled roles (heads.csv)"));
      var labs = cat.labels[key] || [];
      pat.appendChild(labs.length ? table(["role", "score", "baseline", "heuristic", "real text"], labs.map(function (l) {
        return [l.role, fmt(l.score), fmt(l.baseline), l.heuristic, l.real_text]; }), "hx-labels") :
        el("p", {"class": "hx-note"}, "No labelled role."));
      cau.appendChild(el("h4", null, "Causal: patched on each task (the catalogue)"));
      var rows = cat.heads[key] || [];
      cau.appendChild(rows.length ? table(["task (roles it tests)", "verdict", "effect [95% CI]", "min effect", "rank", "EAP-IG (rank)", "site", "powered"],
        rows.map(function (r) {
          var v = el("span", {"class": "hx-verdict", "data-verdict": r.verdict, title: r.reason});
          var sw = el("i"); sw.style.background = cat.colours[r.verdict] || cat.no_row;
          v.appendChild(sw); v.appendChild(document.createTextNode(r.verdict));
          var t = el("span", null, r.task);
          if (r.roles) { t.appendChild(el("br")); t.appendChild(el("span", {"class": "hx-note hx-tested"}, r.roles)); }
          return [t, v, r.effect === null ? "" : fmt(r.effect) + " [" + fmt(r.ci_low) + ", " + fmt(r.ci_high) + "]",
            fmt(r.min_effect), fmt(r.rank, 0), r.eap_ig === null ? "" : fmt(r.eap_ig) + " (" + fmt(r.eap_ig_rank, 0) + ")",
            r.site, [r.powered_verdict, r.powered_group_verdict ? "group: " + r.powered_group_verdict : ""]
              .filter(Boolean).join("; ")]; }), "hx-tasks") :
        el("p", {"class": "hx-note"}, "No row in the catalogue for this head."));
      box.appendChild(pat);
      box.appendChild(cau);
      return box;
    }

    function show(key) {
      state.key = key;
      var h = byKey[key];
      grid.querySelectorAll("td.hx-selected").forEach(function (td) { td.classList.remove("hx-selected"); });
      var cell = grid.querySelector('td[data-layer="' + h.layer + '"][data-head="' + h.head + '"]');
      if (cell) cell.classList.add("hx-selected");
      detail.innerHTML = "";
      var title = el("h3", {"class": "hx-title", "data-layer": h.layer, "data-head": h.head},
        "L" + h.layer + "H" + h.head + " (layer " + h.layer + ", head " + h.head + "): " + h.primary);
      detail.appendChild(title);
      if (h.secondary) detail.appendChild(el("p", {"class": "hx-also"}, "Also: " + h.secondary + "."));
      if (h.sink_weight !== null && h.sink_weight !== undefined) detail.appendChild(el("p", {"class": "hx-sink-note"},
        "Sink: " + (h.sink || "no sink label") + "; attention on the sink " + fmt(h.sink_weight, 3) +
        (h.sink_norm === null || h.sink_norm === undefined ? "" : " by weight, " + fmt(h.sink_norm, 3) + " by norm") + "."));
      detail.appendChild(roleNotes(h));
      if (cat) detail.appendChild(sides(key));
      var v = (data.verdicts[key] || []);
      if (!cat || data.has_validation) detail.appendChild(el("p", {"class": "hx-verdicts"}, v.length ?
        "Causal validation: " + v.map(function (x) {
          var why = (x.metric && x.metric !== "none" && x.effect !== null && x.effect !== undefined) ?
            " (" + x.metric + " " + fmt(x.effect, 3) + (x.p === null || x.p === undefined ? "" : ", p=" + fmt(x.p, 3)) +
            (x.n === null || x.n === undefined ? "" : ", " + x.n + " prompts") + ")" :
            (x.reason ? " (" + x.reason + ")" : "");
          return x.role + " " + x.verdict + why; }).join("; ") :
        "Causal validation: " + (data.has_validation ? "none of its labels was tested." : "not run.")));
      var circ = (data.circuits || {})[key] || [];
      if (circ.length) detail.appendChild(el("p", {"class": "hx-circuits"}, "Causal importance per task (interp circuit; 1 = patching this head alone from the corrupted run removes the whole gap): " +
        circ.map(function (x) { return x.task + " " + fmt(x.importance, 3) + (x.eap_ig === null ? "" : " (EAP-IG score " + fmt(x.eap_ig, 3) + ")"); }).join("; ") + "."));
      var qk = (data.qk || {})[key] || [];
      if (qk.length) detail.appendChild(el("p", {"class": "hx-qk"}, "Why it attends (interp qk; the largest terms of score(target) - score(rival) at the answer position): " +
        qk.map(function (x) { return x.task + ": the " + x.target + " beats the " + x.rival + " on " + fmt(100 * x.target_wins, 0) + "% of prompts (difference " + fmt(x.difference, 3) + "); query side " + x.top_query + "; key side " + x.top_key; }).join(". ") + "."));
      var exs = data.examples;
      if (!exs.length || !h.examples) {
        detail.appendChild(el("p", {"class": "hx-note"}, "No example patterns stored for this head."));
        detail.appendChild(scoreTable(h));
        return;
      }
      var tabs = el("div", {"class": "hx-tabs"});
      exs.forEach(function (ex, i) {
        var b = el("button", {type: "button", "data-sentence": i}, ex.name);
        if (i === state.sentence) b.classList.add("on");
        b.addEventListener("click", function () { state.sentence = i; show(state.key); });
        tabs.appendChild(b);
      });
      var ws = Object.keys(h.examples);
      if (ws.indexOf(state.weighting) < 0) state.weighting = ws[0];
      ws.forEach(function (w) {
        var b = el("button", {type: "button", "data-weighting": w}, w === "norm" ? "norm lens ||a v W_O||" : "attention weight");
        if (w === state.weighting) b.classList.add("on");
        b.addEventListener("click", function () { state.weighting = w; show(state.key); });
        tabs.appendChild(b);
      });
      detail.appendChild(tabs);
      var ex = exs[state.sentence], n = ex.tokens.length;
      detail.appendChild(el("p", {"class": "hx-note"}, "\u201c" + ex.text + "\u201d: row = query token, column = key token; hover a row to highlight it."));
      detail.appendChild(matrix(ex, decode(h.examples[state.weighting][state.sentence], n * n)));
      detail.appendChild(el("h4", null, "Scores per role (labelled rows in bold; label: this row\u2019s own, as heads.csv has it)"));
      detail.appendChild(scoreTable(h));
    }

    grid.querySelectorAll("td.hx-cell").forEach(function (td) {
      td.addEventListener("click", function () { show(td.getAttribute("data-layer") + "," + td.getAttribute("data-head")); });
    });
    if (colourBy) colourBy.addEventListener("change", recolour);
    if (taskBy) taskBy.addEventListener("change", recolour);
    var ctl = root.querySelector(".hx-controls");
    if (ctl) ctl.hidden = false;
    detail.hidden = false;
    recolour();
  }

  function initTable(table) {
    if (table.getAttribute("data-ready")) return;
    table.setAttribute("data-ready", "1");
    var body = table.tBodies[0], heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, i) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("asc");
        Array.prototype.forEach.call(heads, function (o) { o.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[i].getAttribute("data-v") || a.cells[i].textContent, y = b.cells[i].getAttribute("data-v") || b.cells[i].textContent;
          var nx = parseFloat(x), ny = parseFloat(y);
          var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
    var form = document.getElementById(table.getAttribute("data-filters"));
    if (!form) return;
    form.hidden = false;
    var count = form.querySelector(".hx-count");
    function apply() {
      var shown = 0;
      Array.prototype.forEach.call(body.rows, function (r) {
        var ok = true;
        form.querySelectorAll("select").forEach(function (s) {
          if (s.value && r.getAttribute("data-" + s.name) !== s.value) ok = false;
        });
        r.hidden = !ok;
        if (ok) shown++;
      });
      if (count) count.textContent = shown + " of " + body.rows.length + " rows";
    }
    form.querySelectorAll("select").forEach(function (s) { s.addEventListener("change", apply); });
    apply();
  }

  function initAll() {
    document.querySelectorAll(".hx-root").forEach(initExplorer);
    document.querySelectorAll("table.hx-sortable").forEach(initTable);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", initAll);
  else initAll();
})();
