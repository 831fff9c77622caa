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
  let row = "";              // "" : explain's own choice (the first row for sums, the last for softmax)

  // the address: #p=<the problem as JSON, URI-encoded>&d=<digits> or &pl=<places>, and &r=<row>
  function fromAddress() {
    const hash = location.hash.startsWith("#p=") ? location.hash.slice(3) : "";
    if (!hash) return null;
    const [text, ...rest] = hash.split("&");
    digits = "3"; places = ""; row = "";
    for (const part of rest) {
      const [name, value] = part.split("=");
      if (!/^[0-9]{1,4}$/.test(value || "")) continue;
      if (name === "d") digits = value;
      else if (name === "pl") places = value;
      else if (name === "r") row = value;
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
    block.appendChild(el("h3", {}, key));
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
    values.forEach((value, i) => line.appendChild(cellInput(value, `${key}[${i}]`, { key: key, i: i })));
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
    if (row !== "" && Number(row) >= n) row = "";
    const rows = [["", "explain's (first, last)"],
                  ...Array.from({ length: n }, (_, i) => [String(i), `${i}: ${names[i] ?? i}`])];
    const line = el("p", { class: "view" });
    line.append(kind, " ", count, " worked row ", choice("row", rows, row));
    block.appendChild(line);
    block.appendChild(el("p", { class: "help" }, "every decimal is certified to what is shown; the row worked " +
                         "by hand in the dot products, the softmax and the output (explain --rows)"));
    block.appendChild(el("p", { class: "field-error", "data-for": "view", role: "alert" }));
    return block;
  }

  // the matrices that grow by a row with a token, and by a column with d_k (self-attention)
  function tokenRows(p) { return "X" in p ? ["X"] : ["Q", "K", "V"]; }
  function keyColumns(p) { return "X" in p ? ["W_q", "W_k"] : ["Q", "K"]; }

  function reshape(change) {
    const next = collect();
    const names = next.tokens;
    if (change === "token+") {
      names.push("t" + names.length);
      for (const key of tokenRows(next)) next[key].push(next[key][0].map(() => 0));
    } else if (change === "token-" && names.length > 1) {
      names.pop();
      for (const key of tokenRows(next)) next[key].pop();
    }
    if (change === "token+" || (change === "token-" && names.length < draft.tokens.length)) {
      Keys.grow(next, change);        // the mask's cells, backward's dO, RoPE's positions follow
    } else if (change === "dk+") {
      for (const key of keyColumns(next)) for (const row of next[key]) row.push(0);
    } else if (change === "dk-" && next[keyColumns(next)[0]][0].length > 1) {
      for (const key of keyColumns(next)) for (const row of next[key]) row.pop();
    }
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
    const selfAttention = Array.isArray(draft.tokens) && !("X_kv" in draft) && !("key_tokens" in draft);
    const buttons = [["token+", "+ token"], ["token-", "− token"], ["dk+", "+ d_k"], ["dk-", "− d_k"]];
    for (const [change, label] of buttons) {
      const button = el("button", { type: "button", "data-change": change }, label);
      button.disabled = !selfAttention;
      button.addEventListener("click", () => reshape(change));
      line.appendChild(button);
    }
    line.appendChild(el("span", { class: "help" }, " a new token's row and a new column start at 0"));
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
    row = grids.querySelector("select[data-view=row]").value;
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
    return shown + (row === "" ? "" : "&row=" + encodeURIComponent(row));
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
      history.replaceState(null, "", "#p=" + encodeURIComponent(JSON.stringify(next)) +
                           (places === "" ? "&d=" + digits : "&pl=" + places) + (row === "" ? "" : "&r=" + row));
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

  async function checkFigures() {
    const figures = [...figureRows.rows].map(tr => ({
      target: tr.querySelector('[data-figure="target"]').value.trim(),
      text: tr.querySelector('[data-figure="text"]').value.trim(),
    })).filter(f => f.target || f.text);
    if (figures.length === 0) {
      verdicts.textContent = "write a target and a figure first";
      return;
    }
    verdicts.textContent = "checking…";
    let reply, answer;
    try {
      reply = await fetch("/check", { method: "POST", headers: { "Content-Type": "application/json" },
                                      body: JSON.stringify({ problem: problem, figures: figures }) });
      answer = await reply.json();
    } catch (e) {
      verdicts.textContent = "the server did not answer: is symattn serve still running?";
      return;
    }
    if (reply.ok && typeof answer.html === "string") verdicts.innerHTML = answer.html;   // escaped by the printer
    else verdicts.textContent = answer.error || `the server answered ${reply.status}`;
    document.body.dataset.checked = String(Number(document.body.dataset.checked || "0") + 1);
  }

  addFigure("weights[" + ((problem.tokens || ["0"])[0]) + "]", "");
  addFigure("", "");
  addFigure("", "");
  document.getElementById("add-figure").addEventListener("click", () => addFigure("", ""));
  document.getElementById("check-figures").addEventListener("click", checkFigures);

  grids.addEventListener("input", () => {
    clearTimeout(timer);
    draft = collect();         // kept in step, so a choice that rebuilds the page starts from it
    const next = draft;
    timer = setTimeout(() => derive(next), 200);
  });

  const saved = fromAddress();
  if (saved) problem = draft = saved;
  render();
  if (saved) derive(draft);
  // an address pasted into this tab changes only the hash: the page follows it (the page's own
  // history.replaceState fires no hashchange)
  window.addEventListener("hashchange", () => {
    const opened = fromAddress();
    if (!opened) return;
    problem = draft = opened;
    render();
    derive(draft);
  });
})();
