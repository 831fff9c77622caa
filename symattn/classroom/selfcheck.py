"""The offline self-check page: the sheet's questions with a box per entry, judged by hashes.

One self-contained HTML file per version (:func:`symattn.document.support.page.page`):
the given inputs typeset in MathML, the questions, and for every entry an
``<input data-target="weights[I, love]">``.  On Enter, or the question's
Check button, the page's script reduces the typed text to its canonical form
(decimal comma, percent, leading zeros, Unicode minus, as ``check`` reads
figures), hashes it with the page's salt through Web Crypto
(``crypto.subtle.digest``, available on file:// pages in Chromium and
Firefox) and looks the hash up (:mod:`symattn.classroom.selfcheck_data`).  The
input gets ``data-verdict`` = ``right``, ``mistake:CODE``, ``coarse`` (right, but rounded
more coarsely than the sheet asks), ``precision`` (rounded finer than the sheet asks, or far
coarser), ``not-right`` or ``invalid`` (neither a decimal nor a fraction) and a visible message.  No network,
no answer in the source.
"""

from __future__ import annotations

from symattn.classroom.answers import Question, VersionAnswers, given_inputs
from symattn.document.support import mathml as M
from symattn.document.support.mathml import escape
from symattn.output.escaping import script_json
from symattn.document.support.page import page, table
from symattn.classroom.selfcheck_data import page_data

__all__ = ["selfcheck_page", "selfcheck_pages"]

CSS = """
table.answers td { padding: .25rem .35rem; vertical-align: top; }
table.answers input { width: 6.5rem; font: inherit; padding: .2rem .3rem; border: 1px solid #888;
  border-radius: .2rem; text-align: right; }
input[data-verdict="right"] { border-color: #1a7f37; background: #e9f7ee; }
input[data-verdict^="mistake:"] { border-color: #b35900; background: #fff4e5; }
input[data-verdict="not-right"], input[data-verdict="invalid"] { border-color: #b3261e; background: #fdecea; }
input[data-verdict="coarse"], input[data-verdict="precision"] { border-color: #8a6d00; background: #fff8d6; }
table.answers output { display: block; max-width: 12rem; font-size: .8rem; color: #333; text-align: left;
  white-space: normal; }
button.check { font: inherit; padding: .25rem .9rem; margin: .2rem 0 1rem; }
.nocrypto { color: #b3261e; font-weight: 600; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("selfcheck-data").textContent);
  const enc = new TextEncoder();
  const NUMERAL = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,3}))?(%?)$/;
  const FRACTION = /^([+-]?)([0-9]+)\/([0-9]+)$/;
  const APPROX = /^(?:≈|~|≃|=|about\b|approx\.?)\s*/i;

  function join(sign, digits, places) {
    digits = digits.replace(/^0+/, "").padStart(places + 1, "0");
    const s = (sign === "-" && /[1-9]/.test(digits)) ? "-" : "";
    return s + (places ? digits.slice(0, -places) + "." + digits.slice(-places) : digits);
  }

  function canonical(text) {
    let t = text.trim().replace(/[−–]/g, "-").replace(APPROX, "");
    t = t.replace(/[\s\u00a0\u2009\u202f]/g, "");
    if (t.includes(",") && !t.includes(".") && t.split(",").length === 2) t = t.replace(",", ".");
    const m = NUMERAL.exec(t);
    if (!m || !(m[2] || m[3])) return null;
    const frac = m[3] || "";
    let digits = m[2] + frac;
    let places = frac.length - parseInt(m[4] || "0", 10) + (m[5] ? 2 : 0);
    if (places < 0) { digits += "0".repeat(-places); places = 0; }
    return { text: join(m[1], digits, places), places: places };
  }

  function gcd(a, b) { while (b) { [a, b] = [b, a % b]; } return a; }

  function fraction(num, den) {        // BigInts, den > 0: lowest terms as text
    const g = gcd(num < 0n ? -num : num, den) || 1n;
    num /= g; den /= g;
    return den === 1n ? num.toString() : num + "/" + den;
  }

  function exactForm(text) {           // a fraction or a decimal in lowest terms: −2/4 is "-1/2"
    const t = text.trim().replace(/[−–]/g, "-").replace(/[\s\u00a0\u2009\u202f]/g, "");
    const f = FRACTION.exec(t);
    if (f) {
      if (/^0+$/.test(f[3]) || f[2].length + f[3].length > 40) return null;
      const num = BigInt(f[2]) * (f[1] === "-" ? -1n : 1n);
      return fraction(num, BigInt(f[3]));
    }
    const c = canonical(text);
    if (c === null) return null;
    return fraction(BigInt(c.text.replace(".", "")), 10n ** BigInt(c.places));
  }

  async function digest(text) {
    const bytes = await crypto.subtle.digest("SHA-256", enc.encode(text));
    return Array.from(new Uint8Array(bytes), b => b.toString(16).padStart(2, "0")).join("")
      .slice(0, 16);
  }

  function say(input, verdict, message) {
    input.dataset.verdict = verdict;
    const out = document.getElementById(input.id + "-msg");
    out.textContent = message;
  }

  function places(n) { return n + " decimal place" + (n === 1 ? "" : "s"); }

  async function coarse(box, key, c) {  // the verdicts of the sheet's values that round to c
    const shift = box.p - c.places;
    if (box.a.includes(c.places)) {     // rounding the sheet's value again would mislead here
      const hit = box.h[await digest(key + "~" + c.text)];
      return hit === undefined ? [] : [hit];
    }
    const unit = 10n ** BigInt(shift), half = unit / 2n;
    const centre = BigInt(c.text.replace(".", "")) * unit;
    const texts = [];
    for (let m = centre - half; m <= centre + half; m++) {
      texts.push(join(m < 0n ? "-" : "", (m < 0n ? -m : m).toString(), box.p));
    }
    const found = [];
    for (let k = 0; k < texts.length; k += 1000) {
      const hashes = await Promise.all(texts.slice(k, k + 1000).map(t => digest(key + t)));
      for (const h of hashes) if (box.h[h] !== undefined) found.push(box.h[h]);
    }
    return found;
  }

  async function judge(input) {
    const typed = input.value;
    if (!typed.trim()) {                    // an empty box: no verdict, no message
      delete input.dataset.verdict;
      document.getElementById(input.id + "-msg").textContent = "";
      return;
    }
    const box = data.targets[input.dataset.target] || {h: {}, p: 0, x: 0, a: []};
    const key = data.salt + "|" + input.dataset.target + "|";
    const asked = "the sheet asks for " + data.rounding + (box.x ? " or the exact value" : "");
    const c = canonical(typed), exact = exactForm(typed);
    if (c === null && exact === null) {
      say(input, "invalid", "Type a decimal number or a fraction such as −1/2 (a decimal comma or "
          + "a percentage is fine)."); return;
    }
    const mistake = k => { const m = data.mistakes[k - 1];
                           say(input, "mistake:" + m.code, "Not right: " + m.says + "."); };
    if (exact !== null) {
      const hit = box.h[await digest(key + "=" + exact)];
      if (hit === 0) { say(input, "right", "Right (exactly)."); return; }
      if (hit !== undefined) { mistake(hit); return; }
    }
    if (c === null) { say(input, "not-right", "Not right. Check your working."); return; }
    const hit = box.h[await digest(key + c.text)];
    if (hit === 0) { say(input, "right", "Right (correctly rounded to " + data.rounding + ")."); return; }
    if (hit !== undefined) { mistake(hit); return; }
    if (c.places > box.p) {
      say(input, "precision", "Rounded to " + places(c.places) + ": " + asked + " (" + places(box.p)
          + " here). Round to that, then check."); return;
    }
    if (c.places < box.p) {
      if (box.p - c.places > data.coarse) {
        say(input, "precision", "Rounded to " + places(c.places) + ": " + asked + " (" + places(box.p)
            + " here). Give more digits, then check."); return;
      }
      const found = await coarse(box, key, c);
      if (found.includes(0)) {
        say(input, "coarse", "Right to " + places(c.places) + ", but " + asked + " (" + places(box.p)
            + " here)."); return;
      }
      if (found.length) { mistake(found[0]); return; }
      say(input, "not-right", "Not right at " + places(c.places) + " (and " + asked + ")."); return;
    }
    say(input, "not-right", "Not right at " + places(c.places) + ". Check your working, then your rounding.");
  }

  window.symattnCanonical = canonical;      // for tests: the same rules as selfcheck_data.canonical
  window.symattnExact = exactForm;          // and selfcheck_data.canonical_exact
  if (!(window.crypto && crypto.subtle)) {
    for (const p of document.querySelectorAll(".nocrypto")) p.hidden = false;
    return;
  }
  for (const input of document.querySelectorAll("input[data-target]")) {
    input.addEventListener("keydown", ev => { if (ev.key === "Enter") { ev.preventDefault(); judge(input); } });
  }
  for (const button of document.querySelectorAll("button.check")) {
    button.addEventListener("click", async () => {
      const q = document.getElementById(button.dataset.question);
      for (const input of q.querySelectorAll("input[data-target]")) await judge(input);
      button.dataset.done = String(Number(button.dataset.done || "0") + 1);
    });
  }
  document.body.dataset.ready = "true";
})();
"""


def _given(v: VersionAnswers) -> str:
    mats = []
    for name, matrix, rows in given_inputs(v.trace):
        cells = [[M.math(M.exact(matrix[i, j])) for j in range(matrix.cols)] for i in range(matrix.rows)]
        base, _, sub = name.partition("_")          # W_q → W with subscript q
        caption = M.math(M.msub(M.mi(base), M.mi(sub)) if sub else M.mi(base))
        mats.append(f'<div class="mat">{table(cells, rows, None, caption=caption, brackets=True)}</div>')
    return f'<div class="mats">{"".join(mats)}</div>\n'


def _intro(v: VersionAnswers) -> str:
    p = v.problem
    parts = [f"Here {M.math(M.msub(M.mi('d'), M.mi('k')), M.mo('='), M.mn(str(p.d_k)))}"]
    if p.default_scale:
        parts.append(" and the scores are divided by "
                     + M.math(M.msqrt(M.msub(M.mi("d"), M.mi("k")))) + ".")
    else:
        parts.append(" and the scores are multiplied by the scale " + M.math(M.exact(p.scale)) + ".")
    if p.mask is not None:
        description = p.mask_description
        assert description is not None, "a masked problem names its mask"
        parts.append(f" Mask: {escape(description)} (1 = may attend); a blocked position "
                     "gets weight 0.")
    if p.sink is not None:
        parts.append(f" Sink logit {M.math(M.mi('s'), M.mo('='), M.exact(p.sink))}: each row's "
                     "softmax denominator also adds e^(s − max), so the weights sum to less than 1.")
    return "<p>" + "".join(parts) + "</p>\n"


def _question(q: Question) -> str:
    qid = f"q{q.number}"
    cells = []
    for i in range(q.shape[0]):
        row = []
        for j in range(q.shape[1]):
            e = q.entry(i, j)
            iid = f"{qid}-{i}-{j}"
            row.append(f'<input id="{iid}" data-target="{escape(e.target)}" inputmode="decimal" '
                       f'autocomplete="off" spellcheck="false" aria-label="{escape(e.target)}" '
                       f'aria-describedby="{iid}-msg"><output id="{iid}-msg" for="{iid}" '
                       'aria-live="polite"></output>')
        cells.append(row)
    cols = q.col_labels if q.step in ("scores", "scaled", "weights") else None
    return (f'<section id="{qid}">\n<h2>{q.number}. Compute {escape(q.ask)}</h2>\n'
            f'<p class="formula">{escape(q.formula_text)} '
            f"({q.shape[0]}×{q.shape[1]})</p>\n"
            + table(cells, q.row_labels, cols, css="answers")
            + f'<button type="button" class="check" data-question="{qid}">Check question '
              f"{q.number}</button>\n</section>\n")


def selfcheck_page(v: VersionAnswers, code: str | None = None) -> str:
    """The self-check page of one version (``code``: the version's name on the sheet)."""
    shown = code or v.vid
    facts = page_data(v)
    data = script_json(facts.to_json(), separators=(",", ":"), sort_keys=True)
    body = [f"<h1>{escape(v.title)}: check yourself</h1>\n",
            f"<p><strong>Version {escape(shown)}</strong>. Type each answer as you wrote it on your "
            f"sheet, rounded as the sheet asks: to {escape(str(v.rounding))}, with whole numbers and "
            "short fractions exact (−1/2; a decimal comma or a percentage is fine), then press Enter "
            "or the question's Check button. The page says whether it is right at the sheet's "
            "rounding (a right answer rounded more coarsely is pointed out, not counted), and names "
            "the mistake when a known one gives your number. It does not contain the answers.</p>\n",
            '<p class="nocrypto" hidden>This browser cannot check answers here (no Web Crypto). '
            "Open the page in a current Firefox, Chrome, Edge or Safari.</p>\n",
            "<h2>Given</h2>\n", _given(v), _intro(v)]
    body += [_question(q) for q in v.questions]
    body.append(f'<script type="application/json" id="selfcheck-data">{data}</script>\n'
                f"<script>{SCRIPT}</script>\n")
    html = page(f"{v.title}, version {shown}: self-check", "".join(body),
                description="An offline self-check page made by symattn")
    return html.replace("</style>", CSS + "</style>", 1)


def selfcheck_pages(versions: list[VersionAnswers], codes: dict[str, str] | None = None) -> dict[str, str]:
    """File name → page, one per version (``selfcheck-CODE.html``)."""
    out = {}
    for v in versions:
        code = (codes or {}).get(v.vid) or v.vid
        out[f"selfcheck-{code}.html"] = selfcheck_page(v, code)
    return out


def write_selfcheck(versions: list, rounding, questions: tuple[str, ...], out_dir: str) -> str:
    """Write the self-check pages of a worksheet's versions into ``out_dir`` (a folder for
    students: no keys, no problem files, no seed); returns the line the command prints.

    ``versions`` are the worksheet command's versions (``vid``, ``toml``, ``trace``; a
    ``code`` attribute, where versions have one, names the page as the sheet does)."""
    from symattn.classroom.answers import check_total, version_answers
    from symattn.classroom.output import write_folder

    answers, codes = [], {}
    for v in versions:
        answers.append(version_answers(v.trace, rounding, questions, v.vid, v.toml))
        check_total(sum(a.boxes for a in answers), "--selfcheck")
        code = getattr(v, "code", None)
        if code:
            codes[v.vid] = str(code)
    pages = selfcheck_pages(answers, codes)
    write_folder(out_dir, pages, "selfcheck.txt")
    names = list(pages)
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} … {names[-1]}"
    return f"wrote {len(names)} self-check page(s) to {out_dir}: {shown}\n"
