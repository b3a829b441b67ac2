// The explorer page: asks the local server (/api/...) to run the model on the typed text and draws
// what comes back. Everything the user typed or the model produced is put in the page with
// textContent, never as HTML. Exact values sit in data-v attributes (String(x) of the float the
// server sent), the colours are only a picture of them.
(function () {
  "use strict";
  const info = JSON.parse(document.getElementById("info").textContent);
  const $ = (id) => document.getElementById(id);
  const state = { text: null, run: null, layer: null, head: null, detail: null, query: null, ablate: [], seq: {}, busy: 0 };

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function message(text, kind) { const m = $("message"); m.textContent = text || ""; m.className = kind || ""; }
  function fmt(v, digits) { return v === null || v === undefined ? "" : Number(v).toFixed(digits === undefined ? 3 : digits); }
  // a p-value that underflowed to 0 in heads.csv is tiny, not zero
  function pValue(p) {
    if (p === null || p === undefined) return "";
    if (p === 0) return "< 1e-300";
    return p < 0.001 ? Number(p).toExponential(2) : Number(p).toPrecision(3);
  }
  const lens = () => ($("lens-norm").checked ? "norm" : "pattern");
  const level = () => ($("level-words").checked ? "words" : "tokens");

  async function post(url, body, signal) {
    const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal: signal });
    let data = null;
    try { data = await r.json(); } catch (e) { data = { error: "the server answered " + r.status }; }
    if (!r.ok) throw new Error(data.error || "the server answered " + r.status);
    return data;
  }
  // per view, only the newest request counts: a reply to an older request of the same view is dropped
  // (each view has its own counter, so an ablation does not cancel the layer view it does not touch),
  // and the older request itself is aborted: its connection closes, so the server skips its work if
  // it is still waiting for the model
  const pending = {};
  async function guarded(what, fn) {
    const seq = (state.seq[what] = (state.seq[what] || 0) + 1);
    const current = () => seq === state.seq[what];
    if (pending[what]) pending[what].abort();
    const control = (pending[what] = new AbortController());
    state.busy = (state.busy || 0) + 1;
    document.body.classList.add("busy");
    try {
      const out = await fn(control.signal);
      return current() ? out : null;
    } catch (e) {
      if (current()) message(what + ": " + e.message, "error");
      return null;
    } finally {
      if (pending[what] === control) delete pending[what];
      if (--state.busy === 0) document.body.classList.remove("busy");
    }
  }

  function roleOf(l, h) { return info.heads ? info.heads[l + "." + h] || null : null; }
  // the report page's colours for the map's primary roles (idle and unclassified included)
  function roleColour(role) { return info.colours[role || "unclassified"] || info.colours.unclassified; }
  function heat(v) {  // white (0) to dark blue (1)
    const x = Math.max(0, Math.min(1, Number(v) || 0));
    return "rgb(" + Math.round(255 - 225 * x) + "," + Math.round(255 - 190 * x) + "," + Math.round(255 - 95 * x) + ")";
  }

  // -- the layer x head grid --------------------------------------------------------------------
  function buildGrid() {
    const grid = $("grid");
    const head = el("tr");
    head.appendChild(el("th", ""));
    for (let h = 0; h < info.n_heads; h++) head.appendChild(el("th", h));
    grid.appendChild(head);
    const used = new Set();
    for (let l = 0; l < info.n_layers; l++) {
      const tr = el("tr");
      tr.appendChild(el("th", "L" + l));
      for (let h = 0; h < info.n_heads; h++) {
        const r = roleOf(l, h);
        const primary = r ? r.primary : null;
        if (primary) used.add(primary);
        const b = el("button", "", "head");
        b.type = "button";
        b.dataset.layer = l;
        b.dataset.head = h;
        b.style.background = info.heads ? roleColour(primary) : "#f4f4f4";
        b.title = "L" + l + "H" + h + (primary ? ": " + primary + (r.secondary.length ? " (also " + r.secondary.join(", ") + ")" : "") : "");
        b.setAttribute("aria-label", b.title);
        b.addEventListener("click", (ev) => (ev.shiftKey ? toggleAblate(l, h) : selectHead(l, h)));
        const td = el("td");
        td.appendChild(b);
        tr.appendChild(td);
      }
      grid.appendChild(tr);
    }
    $("grid-caption").textContent = info.heads
      ? "Colour: each head's primary role in the probe's heads.csv. Click a head for its pattern; shift-click to add it to the ablation."
      : "No role map (start with --heads DIR/heads.csv, written by interp probe): heads are uncoloured. Click a head for its pattern.";
    const legend = $("legend");
    for (const role of info.primary_roles) {  // the map's order: idle and unclassified last
      if (!used.has(role)) continue;
      const s = el("span");
      const i = el("i");
      i.style.background = roleColour(role);
      s.appendChild(i);
      s.appendChild(document.createTextNode(role));
      legend.appendChild(s);
    }
  }
  function markGrid() {
    for (const b of document.querySelectorAll("#grid button.head")) {
      const l = Number(b.dataset.layer), h = Number(b.dataset.head);
      b.classList.toggle("selected", l === state.layer && h === state.head);
      b.classList.toggle("ablate", state.ablate.some((p) => p[0] === l && p[1] === h));
    }
  }

  // -- running a text -----------------------------------------------------------------------------
  async function runText() {
    const text = $("text").value;
    if (!text.trim()) { message("Type a sentence first: the text is empty.", "error"); return; }
    const run = await guarded("run", (signal) => post("/api/run", { text: text }, signal));
    if (!run) return;
    message(run.notes.join(" "), run.notes.length ? "note" : "");
    state.text = text;
    state.run = run;
    state.seq.ablate = (state.seq.ablate || 0) + 1;  // an ablation still in flight belongs to the old text
    state.query = run.tokens.length - 1;
    drawTokens(run);
    fillSelect($("query"), run.labels, state.query);
    fillSelect($("position"), run.labels, run.tokens.length - 1);
    clear($("ablation-result"));
    document.body.dataset.ran = String(Number(document.body.dataset.ran || 0) + 1);
    if (state.layer === null) await selectHead(0, 0); else await selectHead(state.layer, state.head);
  }
  function drawTokens(run) {
    const ran = $("ran");  // the text the views below belong to (the box may have been edited since)
    clear(ran);
    ran.appendChild(document.createTextNode(run.tokens.length + " tokens of: "));
    ran.appendChild(el("q", state.text, "ran-text"));
    const box = $("tokens");
    clear(box);
    run.labels.forEach((t, i) => {
      const w = run.token_to_word[i];
      const s = el("span", t, w < 0 ? "special" : "");
      s.title = "token " + i + (w < 0 ? " (special)" : ", word " + w + ": " + run.words[w]);
      box.appendChild(s);
    });
    const next = $("next");
    clear(next);
    if (run.next_token) {
      next.appendChild(el("p", "Most likely next tokens:"));
      const ol = el("ol");
      for (const t of run.next_token) ol.appendChild(el("li", t.label + "  " + fmt(t.p)));
      next.appendChild(ol);
    } else if (!info.causal) {
      next.appendChild(el("p", "Bidirectional model: every token sees the whole text, so there is no next-token view.", "caption"));
    }
  }
  function fillSelect(select, tokens, chosen) {
    clear(select);
    tokens.forEach((t, i) => {
      const o = el("option", i + ": " + t);
      o.value = String(i);
      select.appendChild(o);
    });
    select.value = String(chosen);
  }

  // -- one head ---------------------------------------------------------------------------------------
  async function selectHead(l, h) {
    state.layer = l;
    state.head = h;
    markGrid();
    $("detail-title").textContent = "L" + l + "H" + h;
    drawRoles(l, h);
    drawCatalogue(l, h);  // needs no text: not awaited, so the pattern does not wait for it
    if (state.text === null) { message("Type a text and press Run to see this head's attention.", ""); return; }
    const d = await guarded("head", (signal) => post("/api/head", { text: state.text, layer: l, head: h }, signal));
    if (!d) return;
    state.detail = d;
    $("lens-norm").disabled = d.norm === null;
    drawPattern();
    await drawLayer();
  }
  function drawRoles(l, h) {
    const box = $("roles");
    clear(box);
    const r = roleOf(l, h);
    if (!info.heads) { box.appendChild(el("p", "No heads.csv given: no roles to show.", "caption")); return; }
    if (!r || r.primary === "unclassified") { box.appendChild(el("p", "Unclassified: no labelled role in heads.csv.")); return; }
    box.appendChild(el("p", "Primary role: " + r.primary + (r.secondary.length ? "; also " + r.secondary.join(", ") : "")));
    const t = el("table", null, "evidence");
    const hr = el("tr");
    for (const c of ["role", "direction", "weighting", "source", "subset", "metric", "score", "baseline", "p (adjusted)", "n", "real text"]) hr.appendChild(el("th", c));
    t.appendChild(hr);
    for (const e of r.evidence) {
      const tr = el("tr");
      for (const v of [e.role, e.direction, e.weighting, e.source, e.subset, e.metric, fmt(e.score), fmt(e.baseline),
        pValue(e.p_adjusted), e.n, e.real_text]) tr.appendChild(el("td", v));
      t.appendChild(tr);
    }
    box.appendChild(t);
  }
  // -- the head's catalogue verdicts (--catalogue) ----------------------------------------------------
  function interval(r) {  // "effect [low, high]": the exact values in data-v
    const s = el("span");
    if (r.effect === null) return s;
    const add = (cls, v) => { const x = el("span", fmt(v), cls); x.dataset.v = String(v); s.appendChild(x); };
    add("effect", r.effect);
    if (r.ci_low !== null && r.ci_high !== null) {
      s.appendChild(document.createTextNode(" ["));
      add("ci-low", r.ci_low);
      s.appendChild(document.createTextNode(", "));
      add("ci-high", r.ci_high);
      s.appendChild(document.createTextNode("]"));
    }
    return s;
  }
  async function drawCatalogue(l, h) {
    const box = $("catalogue");
    clear(box);
    delete box.dataset.layer;
    delete box.dataset.head;
    if (!info.catalogue) { box.appendChild(el("p", "No catalogue given (--catalogue): no verdicts to show.", "caption")); return; }
    const d = await guarded("catalogue", (signal) => post("/api/catalogue", { layer: l, head: h }, signal));
    if (!d || d.layer !== state.layer || d.head !== state.head) return;
    box.appendChild(el("h3", "Catalogue verdicts"));
    if (!d.rows.length) {
      box.appendChild(el("p", "L" + l + "H" + h + " has no rows in the catalogue (" + d.source + ").", "none"));
    } else {
      const t = el("table", null, "evidence verdicts");
      const hr = el("tr");
      for (const c of ["task", "verdict", "effect [95% CI]", "min effect", "site", "labelled roles", "other labels"]) hr.appendChild(el("th", c));
      t.appendChild(hr);
      for (const r of d.rows) {
        const tr = el("tr");
        tr.dataset.task = r.task;
        tr.appendChild(el("td", r.no_task ? "- (no solved task tests these roles)" : r.task));
        const v = el("td", r.verdict, "verdict");
        v.dataset.verdict = r.verdict;
        v.title = r.reason;
        tr.appendChild(v);
        const e = el("td");
        e.appendChild(interval(r));
        tr.appendChild(e);
        const m = el("td", r.min_effect === null ? "" : "\u00b1" + fmt(r.min_effect), "min-effect");
        if (r.min_effect !== null) m.dataset.v = String(r.min_effect);
        tr.appendChild(m);
        for (const x of [r.site, r.roles.join(", ") || "-", r.other_roles.join(", ") || "-"]) tr.appendChild(el("td", x));
        t.appendChild(tr);
      }
      box.appendChild(t);
      box.appendChild(el("p", "A verdict's reason shows when the pointer rests on it. Effect: the task's score change when the head is patched (an encoder: ablated), with its 95% interval over pairs; it counts when the interval clears \u00b1min effect.", "caption"));
    }
    box.dataset.layer = l;
    box.dataset.head = h;
  }

  function drawPattern() {
    const d = state.detail;
    if (!d) return;
    const words = level() === "words";
    const key = lens() === "norm" && d.norm !== null ? "norm" : "pattern";
    const m = words ? d[key + "_words"] : d[key];
    const labels = words ? d.word_labels : d.labels;
    const table = $("pattern");
    clear(table);
    const thead = el("thead"), hr = el("tr");
    hr.appendChild(el("th", ""));
    labels.forEach((t) => hr.appendChild(el("th", t)));
    thead.appendChild(hr);
    table.appendChild(thead);
    const body = el("tbody");
    m.forEach((row, q) => {
      const tr = el("tr");
      const th = el("th", labels[q], !words && q === state.query ? "current" : "");
      if (!words) th.addEventListener("click", () => { state.query = q; $("query").value = String(q); drawPattern(); drawLayer(); });
      tr.appendChild(th);
      row.forEach((v, k) => {
        const td = el("td");
        td.dataset.q = q;
        td.dataset.k = k;
        td.dataset.v = String(v);
        td.style.background = heat(v);
        td.title = labels[q] + " \u2192 " + labels[k] + ": " + fmt(v, 4);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    table.dataset.layer = d.layer;
    table.dataset.head = d.head;
    table.dataset.lens = key;
    table.dataset.level = words ? "words" : "tokens";
    $("pattern-caption").textContent = (key === "norm"
      ? "Norm lens: a_ij ||v_j W_O|| renormalised per row (Kobayashi et al. 2020), as the probe scores it. "
      : "Attention weights (hook_pattern). ") + (words
      ? "Word level: to a word, the sum over its tokens; from a word, the mean over its tokens; special tokens dropped."
      : "Rows: query (from), columns: key (to). Click a row's token for the layer view.");
  }

  // -- one query token across a layer's heads ----------------------------------------------------------
  async function drawLayer() {
    if (state.text === null || state.layer === null) return;
    const l = state.layer, q = state.query;
    const d = await guarded("layer", (signal) => post("/api/layer", { text: state.text, layer: l, query: q }, signal));
    if (!d) return;
    $("layer-name").textContent = "layer " + l + " (query token " + q + ": " + d.labels[q] + ")";
    const m = lens() === "norm" && d.norm !== null ? d.norm : d.pattern;
    const table = $("layerview");
    clear(table);
    const thead = el("thead"), hr = el("tr");
    hr.appendChild(el("th", ""));
    d.labels.forEach((t) => hr.appendChild(el("th", t)));
    thead.appendChild(hr);
    table.appendChild(thead);
    const body = el("tbody");
    m.forEach((row, h) => {
      const tr = el("tr");
      const th = el("th", "H" + h);
      const r = roleOf(l, h);
      if (r) th.style.borderLeft = "6px solid " + roleColour(r.primary);
      th.addEventListener("click", () => selectHead(l, h));
      tr.appendChild(th);
      row.forEach((v, k) => {
        const td = el("td");
        td.dataset.h = h;
        td.dataset.k = k;
        td.dataset.v = String(v);
        td.style.background = heat(v);
        td.title = "H" + h + ": " + d.labels[q] + " \u2192 " + d.labels[k] + ": " + fmt(v, 4);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    table.dataset.layer = l;
    table.dataset.query = q;
  }

  // -- ablation -----------------------------------------------------------------------------------------
  function toggleAblate(l, h) {
    const i = state.ablate.findIndex((p) => p[0] === l && p[1] === h);
    if (i >= 0) state.ablate.splice(i, 1); else state.ablate.push([l, h]);
    $("ablate-heads").textContent = state.ablate.length ? state.ablate.map((p) => "L" + p[0] + "H" + p[1]).join(", ") : "none";
    markGrid();
  }
  async function ablate() {
    if (state.text === null) { message("Run a text first.", "error"); return; }
    if (!state.ablate.length && state.layer !== null) toggleAblate(state.layer, state.head);
    if (!state.ablate.length) { message("Choose a head to ablate (click one, then 'add').", "error"); return; }
    const body = { text: state.text, heads: state.ablate, mode: $("mode").value, position: Number($("position").value) };
    const target = $("target");
    if (target && target.value.trim()) body.target = target.value;  // as typed: a leading space is part of a token
    const r = await guarded("ablate", (signal) => post("/api/ablate", body, signal));
    if (r) drawAblation(r);
  }
  function valueSpan(id, v) { const s = el("span", fmt(v, 4)); s.id = id; s.dataset.v = String(v); return s; }
  function drawAblation(r) {
    const box = $("ablation-result");
    clear(box);
    const heads = r.heads.map((p) => "L" + p[0] + "H" + p[1]).join(", ");
    box.appendChild(el("p", (r.mode === "zero" ? "Zero-ablated " : "Mean-ablated ") + heads + " at token " + r.position + " (" + r.labels[r.position] + ")."));
    for (const n of r.notes) box.appendChild(el("p", n, "caption note"));
    if (r.reference) box.appendChild(el("p", "Mean over every real token of " + r.reference + ".", "caption"));
    if ("logit_change" in r) {
      const p = el("p");
      const typed = r.target_typed !== null && r.target_typed !== r.target_label ? "; you typed \u201c" + r.target_typed + "\u201d" : "";
      p.appendChild(document.createTextNode("Logit of " + r.target_label + " (token " + r.target_token + ", id " + r.target_id + typed + "): clean "));
      p.id = "target-line";
      p.appendChild(valueSpan("clean-logit", r.clean_logit));
      p.appendChild(document.createTextNode(", ablated "));
      p.appendChild(valueSpan("ablated-logit", r.ablated_logit));
      p.appendChild(document.createTextNode(", change "));
      p.appendChild(valueSpan("logit-change", r.logit_change));
      p.appendChild(document.createTextNode(" (probability " + fmt(r.clean_p) + " \u2192 " + fmt(r.ablated_p) + "; KL(clean || ablated) = " + fmt(r.kl, 4) + ")."));
      box.appendChild(p);
      const t = el("table", null, "evidence");
      const hr = el("tr");
      for (const c of ["next token", "clean p", "ablated p", "change"]) hr.appendChild(el("th", c));
      t.appendChild(hr);
      for (const row of r.top) {
        const tr = el("tr");
        for (const v of [row.label, fmt(row.clean_p), fmt(row.ablated_p), fmt(row.ablated_p - row.clean_p)]) tr.appendChild(el("td", v));
        t.appendChild(tr);
      }
      box.appendChild(t);
    } else {
      const p = el("p");
      p.appendChild(document.createTextNode("Final hidden state of this token: relative change "));
      p.appendChild(valueSpan("token-change", r.token_change));
      p.appendChild(document.createTextNode(", cosine " + fmt(r.token_cosine, 4) + "; mean-pooled sentence embedding cosine "));
      p.appendChild(valueSpan("sentence-cosine", r.sentence_cosine));
      box.appendChild(p);
      const t = el("table", null, "evidence");
      const top = Math.max(...r.relative_change, 1e-9);
      r.labels.forEach((tok, i) => {  // the tokens of the text this ablation ran on
        const tr = el("tr");
        tr.appendChild(el("td", tok));
        const td = el("td");
        const bar = el("span", "", "bar");
        bar.style.width = Math.round(120 * r.relative_change[i] / top) + "px";
        td.appendChild(bar);
        td.appendChild(document.createTextNode(" " + fmt(r.relative_change[i], 4)));
        tr.appendChild(td);
        t.appendChild(tr);
      });
      box.appendChild(t);
    }
    box.dataset.done = String(Number(box.dataset.done || 0) + 1);
  }

  buildGrid();
  $("run").addEventListener("click", runText);
  $("text").addEventListener("keydown", (ev) => { if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) runText(); });
  for (const id of ["lens-pattern", "lens-norm", "level-tokens", "level-words"]) $(id).addEventListener("change", () => { drawPattern(); drawLayer(); });
  $("query").addEventListener("change", () => { state.query = Number($("query").value); drawPattern(); drawLayer(); });
  $("add-head").addEventListener("click", () => { if (state.layer !== null) toggleAblate(state.layer, state.head); });
  $("clear-heads").addEventListener("click", () => { state.ablate = []; toggleAblate(-1, -1); toggleAblate(-1, -1); });
  $("ablate").addEventListener("click", ablate);
  document.body.dataset.ready = "1";
})();
