// symattn serve: the variant keys' controls and the mask's cells, for serve.js (loaded first).
// The controls only write a problem table's plain values; the server reads them with the
// CLI's parser and caps, and its one-line message shows beside the key when one is refused.
"use strict";
window.SymattnKeys = (function () {
  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // a typed whole number goes as a number (a TOML integer); anything else as its text, which
  // the server reads exactly (0.1 is 1/10)
  function entry(text) {
    return /^-?[0-9]{1,15}$/.test(text) ? Number(text) : text;
  }

  function list(text) {
    return text.replace(/^\[|\]$/g, "").split(",").map(s => s.trim()).filter(s => s !== "").map(entry);
  }

  function shown(value) {
    if (value === undefined || value === null) return "";
    if (Array.isArray(value)) return value.map(v => (typeof v === "object" ? JSON.stringify(v) : String(v))).join(", ");
    return typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  // the sizes of a problem table: n queries, m keys, d_v value columns
  function shape(p) {
    const rows = k => (Array.isArray(p[k]) ? p[k].length : 0);
    const cols = k => (Array.isArray(p[k]) && Array.isArray(p[k][0]) ? p[k][0].length : 0);
    const n = rows("X") || rows("Q") || (p.tokens || []).length;
    const m = rows("X_kv") || rows("K") || n;
    return { n: n, m: m, dv: cols("W_v") || cols("V") };
  }

  // what each variant's controls write: "field" null is the key's value itself; kinds text,
  // list (a, b, c), one-or-list (tiles: 2, or 2, 5), check (true or left out), select, matrix
  const SPECS = {
    sink: { start: () => 0, hint: "s, the sink's logit (0: the off-by-one softmax); every row then sums to less than 1",
            fields: [{ field: null, label: "s", kind: "text" }] },
    rope: { start: () => ({}),
            hint: "d_k must be even; θ_i = base^(−2i/d_k) (default 10000) or θ given, one per pair (pi/2, pi/3); " +
                  "positions default to 0 … n − 1",
            fields: [{ field: "layout", label: "layout", kind: "select", choices: ["interleaved", "half"] },
                     { field: "base", label: "base", kind: "text" },
                     { field: "theta", label: "θ", kind: "list" },
                     { field: "positions", label: "positions", kind: "list" },
                     { field: "key_positions", label: "key positions", kind: "list" }] },
    alibi: { start: () => ({ slope: "1/2" }), hint: "bias −slope·(i − j) added to the scaled scores; symmetric: −slope·|i − j|",
             fields: [{ field: "slope", label: "slope", kind: "text" },
                      { field: "symmetric", label: "symmetric", kind: "check" }] },
    softcap: { start: () => 5, hint: "c > 0: capped = c·tanh(logit / c) before the softmax",
               fields: [{ field: null, label: "c", kind: "text" }] },
    tiles: { start: () => 2, hint: "a block size (2), or the keys to split before (2, 5); numbers only",
             fields: [{ field: null, label: "blocks", kind: "one-or-list" }] },
    decode: { start: p => ({ prefill: Math.max(1, shape(p).n - 1) }),
              hint: "P, the prompt's length: every later token is one step against the cache (self-attention from X)",
              fields: [{ field: "prefill", label: "P", kind: "text" }] },
    backward: { start: () => ({ loss: "sum" }),
                hint: "sum: L = Σ O (dO all ones); dO given; or ½‖O − T‖² against a target T (n × d_v)",
                fields: [{ field: "loss", label: "loss", kind: "select",
                           choices: [["sum", "sum"], ["grad_output", "dO given"], ["half-squared-error", "½‖O − T‖²"]] },
                         { field: "matrix", label: "dO / T", kind: "matrix" }] },
  };
  const GENERIC = { start: () => "", hint: "", fields: [{ field: null, label: "value", kind: "text" }] };

  function backwardLoss(value) {
    if (value && typeof value === "object" && "grad_output" in value) return "grad_output";
    return value && typeof value === "object" && typeof value.loss === "string" ? value.loss : "sum";
  }

  function backwardMatrix(value, p) {
    const given = value && typeof value === "object" ? value.grad_output || value.target : undefined;
    if (Array.isArray(given)) return given;
    const { n, dv } = shape(p);
    return Array.from({ length: n }, () => Array.from({ length: dv }, () => 1));
  }

  function fieldControl(name, spec, value, p) {
    const label = `${name} ${spec.label}`;
    const part = spec.field === null ? value : value && typeof value === "object" ? value[spec.field] : undefined;
    if (spec.kind === "select") {
      const first = Array.isArray(spec.choices[0]) ? spec.choices[0][0] : spec.choices[0];
      const select = el("select", { "aria-label": label, "data-field": spec.field });
      if (name !== "backward") select.dataset.default = first;      // left out while it is the default
      for (const c of spec.choices) {
        const [v, text] = Array.isArray(c) ? c : [c, c];
        select.appendChild(el("option", { value: v }, text));
      }
      select.value = name === "backward" ? backwardLoss(value) : part === undefined ? spec.choices[0] : String(part);
      return select;
    }
    if (spec.kind === "check") {
      const box = el("input", { type: "checkbox", "aria-label": label, "data-field": spec.field });
      box.checked = part === true;
      return box;
    }
    if (spec.kind === "matrix") return matrixControl(name, backwardMatrix(value, p), p.tokens || []);
    const input = el("input", { type: "text", "aria-label": label, spellcheck: "false", autocomplete: "off",
                                size: spec.kind === "text" ? "5" : "12", "data-field": spec.field === null ? "" : spec.field,
                                "data-kind": spec.kind });
    input.value = shown(part);
    return input;
  }

  function matrixControl(name, rows, labels) {
    const table = el("table", { class: "entries", "data-field": "matrix" });
    rows.forEach((row, i) => {
      const tr = el("tr");
      tr.appendChild(el("th", { scope: "row" }, String(labels[i] ?? i)));
      (Array.isArray(row) ? row : [row]).forEach((v, j) => {
        const td = el("td");
        const input = el("input", { type: "text", "aria-label": `${name}[${i}][${j}]`, spellcheck: "false",
                                    autocomplete: "off", size: "4", "data-vi": String(i), "data-vj": String(j) });
        input.value = String(v);
        td.appendChild(input);
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
    return table;
  }

  function variantBlock(key, p) {
    const name = key.name;
    const spec = SPECS[name] || GENERIC;
    const on = p[name] !== undefined;
    const value = on ? p[name] : spec.start(p);
    const block = el("div", { class: on ? "grid variant on" : "grid variant", "data-variant": name });
    const head = el("h3");
    const box = el("input", { type: "checkbox", "aria-label": `${name} on`, "data-on": "" });
    box.checked = on;
    const label = el("label", {}, " " + name);
    label.prepend(box);
    head.appendChild(label);
    block.appendChild(head);
    block.appendChild(el("p", { class: "help" }, key.doc));
    const fields = el("div", { class: "fields" });
    for (const f of spec.fields) {
      const line = f.kind === "matrix" ? el("div", { class: "field" }) : el("label", { class: "field" }, f.label + " ");
      line.appendChild(fieldControl(name, f, value, p));
      fields.appendChild(line);
    }
    if (spec.hint) fields.appendChild(el("p", { class: "help" }, spec.hint));
    block.appendChild(fields);
    block.appendChild(el("p", { class: "field-error", "data-for": name, role: "alert" }));
    const matrix = fields.querySelector('table[data-field="matrix"]');
    const loss = fields.querySelector('select[data-field="loss"]');
    const sync = () => {
      block.classList.toggle("on", box.checked);
      if (matrix && loss) matrix.parentElement.hidden = loss.value === "sum";
    };
    box.addEventListener("change", sync);
    if (loss) loss.addEventListener("change", sync);
    sync();
    return block;
  }

  function variantsBlock(keys, p) {
    const row = el("div", { class: "grid-row variants" });
    for (const key of keys) row.appendChild(variantBlock(key, p));
    return row;
  }

  function readField(control, old) {
    if (control.type === "checkbox") return control.checked ? true : undefined;
    if (control.tagName === "SELECT") return control.value;
    const text = control.value.trim();
    if (text === "") return undefined;
    const kind = control.dataset.kind;
    if (kind === "list") return list(text);
    if (kind === "one-or-list") return /[,[]/.test(text) ? list(text) : entry(text);
    if (old !== undefined && /^[[{]/.test(text)) {        // a generic key's table or list, as JSON
      try { return JSON.parse(text); } catch (e) { return text; }
    }
    return entry(text);
  }

  function readVariant(block, old) {
    const name = block.dataset.variant;
    const controls = [...block.querySelectorAll(".fields [data-field]")];
    const whole = controls.find(c => c.dataset.field === "");
    if (whole) return readField(whole, typeof old === "object" ? old : undefined);
    // a table: the fields the page shows, and any other key the problem gave kept as it was
    const value = old && typeof old === "object" && !Array.isArray(old) ? { ...old } : {};
    for (const c of controls) {
      const field = c.dataset.field;
      if (field === "matrix") continue;
      const part = readField(c, undefined);
      const defaulted = c.dataset.default !== undefined && part === c.dataset.default && !(old && field in old);
      if (part === undefined || defaulted) delete value[field]; else value[field] = part;
    }
    if (name === "backward") {
      delete value.grad_output; delete value.target;
      const matrix = [...block.querySelectorAll("input[data-vi]")].reduce((rows, input) => {
        const i = Number(input.dataset.vi);
        (rows[i] = rows[i] || [])[Number(input.dataset.vj)] = entry(input.value.trim());
        return rows;
      }, []);
      if (value.loss === "grad_output") { delete value.loss; value.grad_output = matrix; }
      else if (value.loss === "half-squared-error") value.target = matrix;
    }
    return value;
  }

  // the variants the page shows, read into the problem table `next` (switched off: left out)
  function readVariants(root, next) {
    for (const block of root.querySelectorAll("[data-variant]")) {
      const name = block.dataset.variant;
      const on = block.querySelector("input[data-on]").checked;
      const value = on ? readVariant(block, next[name]) : undefined;
      if (value === undefined) delete next[name]; else next[name] = value;
    }
  }

  // -- the mask as cells: 1 where query i may attend key j ------------------------------------
  function effectiveMask(mask, n, m) {
    const sees = (i, j) => {
      if (mask === "causal") return j <= i;
      if (mask && typeof mask === "object" && !Array.isArray(mask) && Number.isInteger(mask.window)) {
        return mask.causal === false ? Math.abs(i - j) < mask.window : i - mask.window < j && j <= i;
      }
      if (Array.isArray(mask) && Array.isArray(mask[i]) && mask[i][j] !== undefined) return Number(mask[i][j]) !== 0;
      return true;
    };
    return Array.from({ length: n }, (_, i) => Array.from({ length: m }, (_, j) => (sees(i, j) ? 1 : 0)));
  }

  function maskCells(matrix, queries, keys) {
    const table = el("table", { class: "mask-cells", "aria-label": "mask cells" });
    const head = el("tr");
    head.appendChild(el("th"));
    matrix[0].forEach((_, j) => head.appendChild(el("th", { scope: "col" }, String(keys[j] ?? j))));
    table.appendChild(head);
    matrix.forEach((row, i) => {
      const tr = el("tr");
      tr.appendChild(el("th", { scope: "row" }, String(queries[i] ?? i)));
      row.forEach((v, j) => {
        const td = el("td");
        const box = el("input", { type: "checkbox", "aria-label": `mask[${i}][${j}]`, "data-mi": String(i),
                                  "data-mj": String(j) });
        box.checked = Number(v) !== 0;
        td.appendChild(box);
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
    return table;
  }

  function readMaskCells(root) {
    const boxes = [...root.querySelectorAll("input[data-mi]")];
    if (boxes.length === 0) return null;
    return boxes.reduce((rows, box) => {
      const i = Number(box.dataset.mi);
      (rows[i] = rows[i] || [])[Number(box.dataset.mj)] = box.checked ? 1 : 0;
      return rows;
    }, []);
  }

  // -- the shape: a token, a key or a dimension added or removed -----------------------------
  // A problem is projected (X, W_q, W_k, W_v; X_kv for cross-attention) or direct (Q, K, V).
  // It is cross-attention when its keys are its own (X_kv or key_tokens given): then the
  // queries (n) and the keys (m) are sized apart; otherwise a token is a query and a key.
  function isCross(p) {
    return "X_kv" in p || Array.isArray(p.key_tokens);
  }

  // the sides each dimension sizes: [matrix key, 0 (its rows) or 1 (its columns)]
  function sides(p) {
    const cross = isCross(p);
    if ("X" in p) {
      return { token: [["X", 0]], key: cross ? [["X_kv", 0]] : [],
               dmodel: [["X", 1], ["X_kv", 1], ["W_q", 0], ["W_k", 0], ["W_v", 0]],
               dk: [["W_q", 1], ["W_k", 1]], dv: [["W_v", 1]] };
    }
    return { token: cross ? [["Q", 0]] : [["Q", 0], ["K", 0], ["V", 0]], key: cross ? [["K", 0], ["V", 0]] : [],
             dmodel: [], dk: [["Q", 1], ["K", 1]], dv: [["V", 1]] };
  }

  function width(m) {
    return Array.isArray(m) && Array.isArray(m[0]) ? m[0].length : 0;
  }

  // the dimensions the page offers: [change, its name, its size] (a dimension the problem has)
  function dimensions(p) {
    const s = sides(p), size = ([key, axis]) => (axis === 0 ? (p[key] || []).length : width(p[key]));
    const out = [["token", isCross(p) ? "queries n" : "tokens n", size(s.token[0])]];
    if (s.key.length) out.push(["key", "keys m", size(s.key[0])]);
    if (s.dmodel.length) out.push(["dmodel", "d_model", size(s.dmodel[0])]);
    out.push(["dk", "d_k", size(s.dk[0])], ["dv", "d_v", size(s.dv[0])]);
    return out.filter(([, , n]) => n > 0);
  }

  // `at`: the row or column removed (undefined: the last); what is added goes last
  function resizeMatrix(m, axis, add, fill, at) {
    if (!Array.isArray(m) || !Array.isArray(m[0])) return;
    const cut = list => list.splice(at === undefined ? list.length - 1 : at, 1);
    if (axis === 0 && add) m.push(m[0].map(() => fill));
    else if (axis === 0) cut(m);
    else for (const row of m) if (add) row.push(fill); else cut(row);
  }

  function resizeList(list, add, next, at) {
    if (!Array.isArray(list)) return;
    if (add) list.push(next(list)); else list.splice(at === undefined ? list.length - 1 : at, 1);
  }

  // t3, or t4 when t3 is taken: every token needs its own name
  function freshName(prefix, names) {
    let i = names.length;
    while (names.includes(prefix + i)) i++;
    return prefix + i;
  }

  const nextPosition = ps => (ps.length ? Math.max(...ps.map(Number)) + 1 : 0);

  // the other keys that hold one entry per query, per key or per value column follow
  function follow(next, dim, add, cross, at) {
    const queries = dim === "token", keys = dim === "key" || (dim === "token" && !cross);
    if (Array.isArray(next.mask)) {
      if (keys) resizeMatrix(next.mask, 1, add, cross ? 1 : 0, at);   // a new key: unseen by the earlier
      if (queries) resizeMatrix(next.mask, 0, add, 1, at);              // queries of self-attention
    }
    const b = next.backward && typeof next.backward === "object" ? next.backward : {};
    for (const k of ["grad_output", "target"]) {
      if (queries) resizeMatrix(b[k], 0, add, 0, at);
      if (dim === "dv") resizeMatrix(b[k], 1, add, 0);
    }
    for (const table of [next.rope, next.alibi]) {
      if (!table || typeof table !== "object") continue;
      if (queries) resizeList(table.positions, add, nextPosition, at);
      if (keys) resizeList(table.key_positions, add, nextPosition, at);
    }
    if (queries) resizeList(next.tokens, add, l => freshName("t", l), at);
    if (dim === "key") resizeList(next.key_tokens, add, l => freshName("k", l), at);
  }

  // a change such as "token+" or "dv-" made to the table `next` (`at`: the token or key
  // removed, else the last); false: it would leave a dimension empty, so nothing changed
  function resize(next, change, at) {
    const dim = change.slice(0, -1), add = change.endsWith("+");
    const found = dimensions(next).find(([d]) => d === dim);
    if (!found || (!add && found[2] <= 1)) return false;
    if (at !== undefined && !(Number.isInteger(at) && at >= 0 && at < found[2])) return false;
    const cross = isCross(next);
    for (const [key, axis] of sides(next)[dim]) resizeMatrix(next[key], axis, add, 0, at);
    follow(next, dim, add, cross, at);
    return true;
  }

  return { el: el, entry: entry, shape: shape, variantsBlock: variantsBlock, readVariants: readVariants,
           effectiveMask: effectiveMask, maskCells: maskCells, readMaskCells: readMaskCells,
           dimensions: dimensions, resize: resize, isCross: isCross };
})();
