// symattn serve: the inputs as grids; every edit is posted to /derive and the derivation
// the server worked exactly replaces the old one. No library, no inline script (CSP).
"use strict";
(function () {
  const MATRIX_KEYS = JSON.parse(document.getElementById("matrix-keys").textContent);
  const VARIANT_KEYS = JSON.parse(document.getElementById("variant-keys").textContent);
  const Keys = window.SymattnKeys;
  const el = Keys.el, entry = Keys.entry;
  const grids = document.getElementById("grids");
  const status = document.getElementById("status");
  const derivation = document.getElementById("derivation");
  let problem = JSON.parse(document.getElementById("problem-data").textContent);   // last derived
  let draft = problem;       // what the grids show (its shape; the inputs hold the values)
  let sequence = 0;          // the latest request; older answers are dropped
  let timer = null;

  // the view of the derivation: significant digits or decimal places, and the worked row
  let digits = "3";
  let places = "";           // "" : digits are used
  let rows = [];             // the worked rows (0-based, ascending); none: explain's own choice
                             // (the first row for the sums, the last for the softmax)
  let figures = [];          // the figures last checked, [[target, text], ...], kept in the address

  // the address: #p=<the problem as JSON, URI-encoded>&d=<digits> or &pl=<places>, &r=<rows>
  // (0,2) and &f=<the figures checked, as JSON, URI-encoded>; what does not parse is left out
  function fromAddress() {
    const hash = location.hash.startsWith("#p=") ? location.hash.slice(3) : "";
    if (!hash) return null;
    const [text, ...rest] = hash.split("&");
    digits = "3"; places = ""; rows = []; figures = [];
    for (const part of rest) {
      const [name, value] = part.split("=");
      if (name === "f") figures = figuresOf(value || "");
      else if (name === "r" && /^[0-9]{1,4}(,[0-9]{1,4}){0,63}$/.test(value || "")) {
        rows = [...new Set(value.split(",").map(Number))].sort((a, b) => a - b).map(String);
      } else if (!/^[0-9]{1,4}$/.test(value || "")) continue;
      else if (name === "d") digits = value;
      else if (name === "pl") places = value;
    }
    try {
      const data = JSON.parse(decodeURIComponent(text));
      return data && typeof data === "object" && !Array.isArray(data) ? data : null;
    } catch (e) {
      return null;
    }
  }

  function cellInput(value, label, dataset) {
    const input = el("input", { type: "text", "aria-label": label, spellcheck: "false",
                                autocomplete: "off", size: "6" });
    input.value = String(value);
    Object.assign(input.dataset, dataset);
    return input;
  }

  function rowLabels(key, rows) {
    const queries = draft.tokens || [];
    const keys = draft.key_tokens || queries;
    if (key === "X" || key === "Q") return queries;
    if (key === "X_kv" || key === "K" || key === "V") return keys;
    return Array.from({ length: rows }, (_, i) => String(i));
  }

  function matrixBlock(key, rows) {
    const block = el("div", { class: "grid", "data-key": key });
    const head = el("h3", {}, key);
    head.appendChild(el("span", { class: "dims" }, ` ${rows.length} × ${(rows[0] || []).length}`));
    block.appendChild(head);
    const table = el("table", { class: "entries" });
    const labels = rowLabels(key, rows.length);
    rows.forEach((row, i) => {
      const tr = el("tr");
      tr.appendChild(el("th", { scope: "row" }, labels[i] !== undefined ? String(labels[i]) : String(i)));
      row.forEach((value, j) => {
        const td = el("td");
        td.appendChild(cellInput(value, `${key}[${i}][${j}]`, { key: key, i: i, j: j }));
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
    block.appendChild(table);
    block.appendChild(el("p", { class: "field-error", "data-for": key, role: "alert" }));
    return block;
  }

  function listBlock(key, values, help) {
    const block = el("div", { class: "grid", "data-key": key });
    block.appendChild(el("h3", {}, key));
    const line = el("p", { class: "tokens" });
    const dim = key === "tokens" ? "token" : "key";      // a token (or a key) removed by its ×
    values.forEach((value, i) => {
      const one = el("span", { class: "token" });
      one.appendChild(cellInput(value, `${key}[${i}]`, { key: key, i: i }));
      if (values.length > 1) {
        const name = key === "tokens" ? "token" : "key";
        const cut = el("button", { type: "button", class: "remove", "aria-label": `remove ${name} ${i}`,
                                   title: `remove ${name} ${value} (its rows and columns too)` }, "×");
        cut.addEventListener("click", () => reshape(dim + "-", i));
        one.appendChild(cut);
      }
      line.appendChild(one);
    });
    block.appendChild(line);
    block.appendChild(el("p", { class: "help" }, help));
    block.appendChild(el("p", { class: "field-error", "data-for": key, role: "alert" }));
    return block;
  }

  function scalarBlock(key, value, help) {
    const block = el("div", { class: "grid", "data-key": key });
    block.appendChild(el("h3", {}, key));
    block.appendChild(cellInput(value === undefined ? "" : value, key, { key: key }));
    block.appendChild(el("p", { class: "help" }, help));
    block.appendChild(el("p", { class: "field-error", "data-for": key, role: "alert" }));
    return block;
  }

  function isWindow(mask) {
    return mask !== null && typeof mask === "object" && !Array.isArray(mask) && "window" in mask;
  }

  function maskBlock() {
    const block = el("div", { class: "grid", "data-key": "mask" });
    block.appendChild(el("h3", {}, "mask"));
    const select = el("select", { "aria-label": "mask", "data-key": "mask" });
    const choices = [["", "none"], ["causal", "causal"], ["window", "sliding window"], ["cells", "cells clicked"]];
    for (const [value, label] of choices) select.appendChild(el("option", { value: value }, label));
    const mask = draft.mask;
    select.value = mask === undefined ? "" : mask === "causal" ? "causal" : isWindow(mask) ? "window" : "cells";
    block.appendChild(select);
    // the window's width W and its side: { window = W } (causal) or { window = W, causal = false }
    const line = el("span", { class: "window" });
    const width = el("input", { type: "text", "aria-label": "window", spellcheck: "false", autocomplete: "off",
                                size: "3", inputmode: "numeric", "data-mask": "window" });
    width.value = isWindow(mask) ? String(mask.window) : "2";
    const causal = el("input", { type: "checkbox", "aria-label": "window causal", "data-mask": "causal" });
    causal.checked = !isWindow(mask) || mask.causal !== false;
    const label = el("label", {}, " causal");
    label.prepend(causal);
    line.append(" W = ", width, label);
    const toggle = () => { width.disabled = causal.disabled = select.value !== "window"; };
    toggle();
    // the cells are shown from the mask chosen before, and back: the page is built again
    select.addEventListener("change", () => restructure(select));
    block.appendChild(line);
    if (Array.isArray(mask)) {
      const { n, m } = Keys.shape(draft);
      block.appendChild(Keys.maskCells(Keys.effectiveMask(mask, n, m), draft.tokens || [],
                                       draft.key_tokens || draft.tokens || []));
    }
    block.appendChild(el("p", { class: "help" }, "causal: each token sees itself and the ones before it; " +
                         "window W: itself and W − 1 before (not causal: on each side); cells: tick the keys " +
                         "each query (a row) may attend"));
    block.appendChild(el("p", { class: "field-error", "data-for": "mask", role: "alert" }));
    return block;
  }

  function choice(label, values, value) {
    const select = el("select", { "aria-label": label, "data-view": label });
    for (const [v, text] of values) select.appendChild(el("option", { value: v }, text));
    if (![...select.options].some(o => o.value === value)) select.appendChild(el("option", { value: value }, value));
    select.value = value;
    return select;
  }

  function viewBlock() {
    const block = el("div", { class: "grid", "data-key": "view" });
    block.appendChild(el("h3", {}, "shown"));
    const counts = n => n.map(d => [d, d]);
    const kind = choice("rounding", [["digits", "significant digits"], ["places", "decimal places"]],
                        places === "" ? "digits" : "places");
    const count = places === "" ? choice("digits", counts(["2", "3", "4", "6", "10", "20"]), digits)
      : choice("places", counts(["0", "1", "2", "3", "4", "6", "10", "20"]), places);
    kind.addEventListener("change", () => restructure(kind));
    const { n } = Keys.shape(draft);
    const names = draft.tokens || [];
    rows = rows.filter(r => Number(r) < n);
    const line = el("p", { class: "view" });
    line.append(kind, " ", count);
    block.appendChild(line);
    // the worked rows: one box per query; none ticked is explain's choice (first, last)
    const worked = el("p", { class: "view rows" }, "worked rows ");
    for (let i = 0; i < n; i++) {
      const box = el("input", { type: "checkbox", "aria-label": `row ${i}`, "data-row": String(i) });
      box.checked = rows.includes(String(i));
      const label = el("label", {}, " " + String(names[i] ?? i));
      label.prepend(box);
      worked.appendChild(label);
    }
    block.appendChild(worked);
    block.appendChild(el("p", { class: "help" }, "every decimal is certified to what is shown; the rows ticked " +
                         "are worked by hand (explain --rows 0,2); none: the first row's sums, the last's softmax"));
    block.appendChild(el("p", { class: "field-error", "data-for": "view", role: "alert" }));
    return block;
  }

  // a token, a key or a dimension added or removed: every matrix it sizes, and the keys that
  // follow it (the mask's cells, backward's dO, RoPE's positions, the names), change together
  function reshape(change, at) {
    const next = collect();
    if (!Keys.resize(next, change, at)) return;
    clearTimeout(timer);
    draft = next;
    render();
    derive(next);
  }

  // a choice that changes which controls are shown: the page is built again from what it holds
  function restructure(control) {
    const label = control.getAttribute("aria-label");
    clearTimeout(timer);
    draft = collect();
    render();
    const again = grids.querySelector(`[aria-label="${CSS.escape(label)}"]`);
    if (again) again.focus();
    derive(draft);
  }

  function shapeButtons() {
    const line = el("p", { class: "shape" });
    for (const [dim, name, size] of Keys.dimensions(draft)) {
      const group = el("span", { class: "dimension", "data-dimension": dim });
      group.append(el("span", { class: "size" }, `${name} = ${size}`), " ");
      const what = dim === "token" ? (Keys.isCross(draft) ? "query" : "token") : dim === "key" ? "key"
        : dim === "dmodel" ? "d_model" : dim === "dk" ? "d_k" : "d_v";
      for (const [sign, text] of [["+", "+ "], ["-", "− "]]) {
        const button = el("button", { type: "button", "data-change": dim + sign }, text + what);
        button.disabled = sign === "-" && size <= 1;
        button.addEventListener("click", () => reshape(dim + sign));
        group.appendChild(button);
      }
      line.appendChild(group);
    }
    line.appendChild(el("span", { class: "help" }, "new rows and columns start at 0; − removes the last, " +
                         "a name's × that token"));
    return line;
  }

  function render() {
    grids.replaceChildren();
    const names = el("div", { class: "grid-row" });
    if (Array.isArray(draft.tokens)) names.appendChild(listBlock("tokens", draft.tokens, "the query tokens' names"));
    if (Array.isArray(draft.key_tokens)) names.appendChild(listBlock("key_tokens", draft.key_tokens, "the keys' names"));
    names.appendChild(scalarBlock("scale", draft.scale, "empty: 1/√d_k"));
    names.appendChild(maskBlock());
    names.appendChild(viewBlock());
    grids.appendChild(names);
    const mats = el("div", { class: "grid-row" });
    for (const key of MATRIX_KEYS) {
      if (Array.isArray(draft[key])) mats.appendChild(matrixBlock(key, draft[key]));
    }
    grids.appendChild(mats);
    grids.appendChild(shapeButtons());
    grids.appendChild(el("h3", { class: "variants-h" }, "variants"));
    grids.appendChild(Keys.variantsBlock(VARIANT_KEYS, draft));
  }

  function collect() {
    const next = JSON.parse(JSON.stringify(draft));
    for (const input of grids.querySelectorAll("input[data-key]")) {
      const { key, i, j } = input.dataset;
      const text = input.value.trim();
      if (j !== undefined) next[key][Number(i)][Number(j)] = entry(text);
      else if (i !== undefined) next[key][Number(i)] = input.value;
      else if (text === "") delete next[key];
      else next[key] = entry(text);       // scale = 1 stays the integer 1
    }
    // digits or places: the count shown is the kind's until the kind is changed (then kept)
    const count = grids.querySelector("select[data-view=digits], select[data-view=places]");
    if (grids.querySelector("select[data-view=rounding]").value === "digits") {
      if (count.dataset.view === "digits") digits = count.value;
      places = "";
    } else places = count.dataset.view === "places" ? count.value : digits;
    rows = [...grids.querySelectorAll("input[data-row]")].filter(b => b.checked).map(b => b.dataset.row);
    const mask = grids.querySelector('select[data-key="mask"]').value;
    if (mask === "") delete next.mask;
    else if (mask === "cells") {
      const { n, m } = Keys.shape(next);
      next.mask = Keys.readMaskCells(grids) || Keys.effectiveMask(draft.mask, n, m);
    }
    else if (mask === "window") {
      const width = entry(grids.querySelector('input[data-mask="window"]').value.trim());
      next.mask = grids.querySelector('input[data-mask="causal"]').checked ? { window: width }
        : { window: width, causal: false };
    } else next.mask = "causal";
    Keys.readVariants(grids, next);
    return next;
  }

  function showError(message, field) {
    for (const p of grids.querySelectorAll(".field-error")) p.textContent = "";
    const where = field || (/^(problem: )?(row|digits|places|give digits)\b/.test(message) ? "view" : null);
    const spot = where && grids.querySelector(`.field-error[data-for="${CSS.escape(where)}"]`);
    if (spot) spot.textContent = message;
    status.textContent = message + " (the derivation below is the last valid one)";
    status.className = "error";
  }

  function viewQuery() {
    const shown = places === "" ? "digits=" + encodeURIComponent(digits) : "places=" + encodeURIComponent(places);
    return shown + (rows.length === 0 ? "" : "&row=" + rows.join(","));
  }

  // the address of a problem, with the view and the figures last checked (when they fit)
  function addressOf(next) {
    const view = (places === "" ? "&d=" + digits : "&pl=" + places) + (rows.length === 0 ? "" : "&r=" + rows.join(","));
    const checked = figuresText(figures);
    return "#p=" + encodeURIComponent(JSON.stringify(next)) + view + (checked === "" ? "" : "&f=" + checked);
  }

  async function derive(next) {
    const mine = ++sequence;
    status.textContent = "working…";
    status.className = "busy";
    let reply, answer;
    try {
      reply = await fetch("/derive?" + viewQuery(), { method: "POST", headers: { "Content-Type": "application/json" },
                                                       body: JSON.stringify(next) });
      answer = await reply.json();
    } catch (e) {
      if (mine === sequence) showError("the server did not answer: is symattn serve still running?", null);
      return;
    }
    if (mine !== sequence) return;
    if (reply.ok && typeof answer.html === "string") {
      problem = next;
      derivation.innerHTML = answer.html;        // the server's printer escaped every name
      for (const p of grids.querySelectorAll(".field-error")) p.textContent = "";
      status.textContent = "";
      status.className = "";
      history.replaceState(null, "", addressOf(next));
      document.body.dataset.derived = String(mine);
    } else {
      showError(answer.error || `the server answered ${reply.status}`, answer.field);
      document.body.dataset.refused = String(mine);
    }
  }

  async function download() {
    const reply = await fetch("/toml", { method: "POST", headers: { "Content-Type": "application/json" },
                                         body: JSON.stringify(problem) });
    if (!reply.ok) {
      const answer = await reply.json();
      showError(answer.error || `the server answered ${reply.status}`, answer.field);
      return;
    }
    const link = el("a", { href: URL.createObjectURL(await reply.blob()), download: "problem.toml" });
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  }

  document.getElementById("download-toml").addEventListener("click", download);

  // -- check my answers: figures judged as `symattn check` judges them -----------------------
  const figureRows = document.getElementById("figure-rows");
  const verdicts = document.getElementById("verdicts");

  // the figures in the address: JSON [[target, text], ...], URI-encoded, at most
  // FIGURES_IN_ADDRESS characters (a longer set is checked but left out of the address); read
  // back with JSON.parse and kept only as strings, which go into the inputs' values (never HTML)
  const FIGURES_IN_ADDRESS = 4000, MAX_FIGURES = 50;

  function figuresText(list) {
    if (list.length === 0) return "";
    const text = encodeURIComponent(JSON.stringify(list));
    return text.length <= FIGURES_IN_ADDRESS ? text : "";
  }

  function figuresOf(value) {
    if (value.length === 0 || value.length > FIGURES_IN_ADDRESS) return [];
    let list;
    try {
      list = JSON.parse(decodeURIComponent(value));
    } catch (e) {
      return [];
    }
    const pair = f => Array.isArray(f) && f.length === 2 && f.every(v => typeof v === "string");
    return Array.isArray(list) && list.length <= MAX_FIGURES && list.every(pair) ? list : [];
  }

  function addFigure(target, text) {
    const k = figureRows.rows.length;
    const tr = el("tr");
    for (const [name, value] of [["target", target], ["text", text]]) {
      const td = el("td");
      const input = el("input", { type: "text", "aria-label": `figure ${k + 1} ${name}`, spellcheck: "false",
                                  autocomplete: "off", "data-figure": name });
      input.value = value;
      td.appendChild(input);
      tr.appendChild(td);
    }
    figureRows.appendChild(tr);
  }

  // the figure rows shown: the ones given, and empty rows up to three
  function showFigures(list) {
    figureRows.replaceChildren();
    for (const [target, text] of list) addFigure(target, text);
    while (figureRows.rows.length < 3) addFigure("", "");
  }

  async function checkFigures() {
    const typed = [...figureRows.rows].map(tr => ({
      target: tr.querySelector('[data-figure="target"]').value.trim(),
      text: tr.querySelector('[data-figure="text"]').value.trim(),
    })).filter(f => f.target || f.text);
    if (typed.length === 0) {
      verdicts.textContent = "write a target and a figure first";
      return;
    }
    figures = typed.slice(0, MAX_FIGURES).map(f => [f.target, f.text]);
    const fits = figuresText(figures) !== "";
    history.replaceState(null, "", addressOf(problem));        // a shared link checks them again
    verdicts.textContent = "checking…";
    let reply, answer;
    try {
      reply = await fetch("/check", { method: "POST", headers: { "Content-Type": "application/json" },
                                      body: JSON.stringify({ problem: problem, figures: typed }) });
      answer = await reply.json();
    } catch (e) {
      verdicts.textContent = "the server did not answer: is symattn serve still running?";
      return;
    }
    if (reply.ok && typeof answer.html === "string") verdicts.innerHTML = answer.html;   // escaped by the printer
    else verdicts.textContent = answer.error || `the server answered ${reply.status}`;
    if (!fits) {
      verdicts.prepend(el("p", { class: "help", id: "figures-not-kept" }, "these figures are over " +
                          `${FIGURES_IN_ADDRESS} characters in the address: a link to this page does not hold them`));
    }
    document.body.dataset.checked = String(Number(document.body.dataset.checked || "0") + 1);
  }

  document.getElementById("add-figure").addEventListener("click", () => addFigure("", ""));
  document.getElementById("check-figures").addEventListener("click", checkFigures);

  // a token renamed: the rows of the grids it names follow (in place: the focus stays)
  function relabel() {
    for (const block of grids.querySelectorAll(".grid[data-key]")) {
      const key = block.dataset.key;
      if (!MATRIX_KEYS.includes(key) || !Array.isArray(draft[key])) continue;
      const labels = rowLabels(key, draft[key].length);
      block.querySelectorAll('table.entries th[scope="row"]').forEach((th, i) => {
        th.textContent = labels[i] !== undefined ? String(labels[i]) : String(i);
      });
    }
  }

  grids.addEventListener("input", () => {
    clearTimeout(timer);
    draft = collect();         // kept in step, so a choice that rebuilds the page starts from it
    relabel();
    const next = draft;
    timer = setTimeout(() => derive(next), 200);
  });

  const saved = fromAddress();
  if (saved) problem = draft = saved;
  render();
  showFigures(figures.length ? figures : [["weights[" + ((problem.tokens || ["0"])[0]) + "]", ""]]);
  if (saved) derive(draft);
  if (figures.length) checkFigures();
  // an address pasted into this tab changes only the hash: the page follows it (the page's own
  // history.replaceState fires no hashchange)
  window.addEventListener("hashchange", () => {
    const opened = fromAddress();
    if (!opened) return;
    problem = draft = opened;
    render();
    if (figures.length) showFigures(figures);
    derive(draft);
    if (figures.length) checkFigures();
  });
})();
