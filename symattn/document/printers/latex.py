"""The LaTeX printer: a document as a LaTeX body (``render.latex`` wraps it in a preamble).

Blocks print to lists of lines; math nodes print to LaTeX math in
:mod:`symattn.document.printers.latex_math` (``\\frac{2}{\\sqrt{3}}``, ``e^{-8/\\sqrt{3}}``
with slashed fractions in exponents, ``2\\cdot(-3)``).  Token names and words are escaped
with ``render.texutil``.
"""

from __future__ import annotations

from symattn.document.blocks import (
    Approx, Blend, Chain, Check, Document, DotProducts, HeatMap, Int, LabelledMatrix, Math,
    Note, ProofLines, Row, ScaleNote, ScaledRow, Section, SoftmaxRow, SoftmaxRule, Sum, Summary,
    Table, Verdicts, WorkedProjection,
)
from symattn.document.printers.base import section_numbers
from symattn.document.printers.latex_math import (  # noqa: F401 (product_latex: re-exported)
    PER_LINE, LatexMath, aligned, chunks, display, inline, product_latex,
)
from symattn.document.support.heatmap import heatmap
from symattn.document.support.texutil import matrix_latex, tex_escape

#: A row with more entries than this has its decimals on a line of their own (a 12-token
#: row of fractions and its decimals do not fit one line of the page).
WIDE = 4
LONG_ROW_SOURCE = 160   # characters of LaTeX source past which a row's decimals move below it


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


class LatexPrinter(LatexMath):
    """Prints a document as LaTeX (the body; the preamble is the caller's); the math
    nodes print in :class:`~symattn.document.printers.latex_math.LatexMath`."""

    format = "latex"

    # -- blocks -----------------------------------------------------------------------
    def _print_Document(self, doc: Document, header: bool = True) -> str:
        children = [c for c in doc.children if header or not isinstance(c, Summary)]
        return "\n".join(line for child in children for line in self.print(child)) + "\n"

    def _print_Summary(self, s: Summary) -> list[str]:
        kind = {"given": "attention from $Q$, $K$, $V$ given directly"}.get(s.kind, s.kind)
        queries = ", ".join(tex_escape(t) for t in s.tokens)
        keys = ", ".join(tex_escape(t) for t in s.key_tokens)
        scale = (f"$\\frac{{1}}{{\\sqrt{{d_k}}}} = \\frac{{1}}{{\\sqrt{{{s.d_k}}}}}$" if s.default_scale
                 else f"${self.print(s.scale)}$ (instead of $1/\\sqrt{{d_k}}$)")
        dims = f"$d_k = {s.d_k}$, $d_v = {s.d_v}$" + (f", $d_{{\\text{{model}}}} = {s.d_model}$"
                                                    if s.d_model else "")
        n, m = len(s.tokens), len(s.key_tokens)
        lines = [f"\\section*{{{tex_escape(s.title)}}}",
                 f"{kind[0].upper() + kind[1:]}: {n} quer{'y' if n == 1 else 'ies'} ({queries}) $\\times$ "
                 f"{m} key{'' if m == 1 else 's'} ({keys}); {dims}; scale {scale}.", ""]
        if s.mask_kind is not None:
            lines += [f"Mask: {tex_escape(s.mask_kind)} (1 = may attend, as PyTorch SDPA's boolean mask); "
                      "a blocked position gets $-\\infty$ and weight exactly 0.", ""]
        r = s.rounding
        if r.digits is not None:
            phrase = f"{r.digits} significant digit{'s' if r.digits != 1 else ''}"
        else:
            phrase = (f"{r.places} decimal place{'s' if r.places != 1 else ''}; a value that rounds to 0 at "
                      f"that precision is shown in scientific notation to {s.sci_digits} digits")
        lines += [f"Exact values throughout; every decimal is correctly rounded to {phrase}, "
                  "certified with ball arithmetic.", ""]
        return lines

    def _print_Section(self, section: Section) -> list[str]:
        number = self.number(section)
        title = tex_escape(section.title)
        lines = [f"\\subsection*{{{number}. {title}}}" if number else f"\\subsection*{{{title}}}"]
        f = section.formula
        if f is not None:
            meaning = self.words(f.meaning_parts) if f.meaning_parts else tex_escape(f.meaning)
            lines += [f"${f.latex}$ \\quad (shape ${f.shape[0]} \\times {f.shape[1]}$): {meaning}.", ""]
        for child in section.children:
            printed = self.print(child)
            if lines[-1] == "" and printed and printed[0].startswith(("\\[", "\\begin{align")):
                lines.pop()   # no paragraph break before a display: the heading and its line stay with it
            lines += printed
        return lines

    def _print_Note(self, note: Note) -> list[str]:
        return [self.words(note.parts), ""]

    def matrix(self, cells, rows, cols, row_labels, col_labels) -> str:
        r_shown = {r for r in rows if r is not None}
        c_shown = {c for c in cols if c is not None}
        text = [[self.print(cells[i][j]) if i in r_shown and j in c_shown else "" for j in range(len(cells[i]))]
                for i in range(len(cells))]
        return matrix_latex(text, row_labels, col_labels, rows=list(rows), cols=list(cols))

    def _print_LabelledMatrix(self, m: LabelledMatrix) -> list[str]:
        symbol = self.print(m.symbol)
        if m.exact is None:
            math = f"{symbol} \\approx {self.matrix(m.decimals, m.rows, m.cols, m.row_labels, m.col_labels)}"
        else:
            left = self.matrix(m.exact, m.rows, m.cols, m.row_labels, m.col_labels)
            right = (self.matrix(m.decimals, m.rows, m.cols, None, None) if m.decimals is not None else None)
            plain = (m.decimals is None or m.integers
                     or self.matrix(m.exact, m.rows, m.cols, None, None) == right)
            if plain:
                math = f"{symbol} = {left}"
            elif len(m.cols) > WIDE:     # side by side they run off the page: the decimals go below
                block = aligned([f"{symbol} &= {left}", f"&\\approx {right}"])
                return ([] if m.caption is None else
                        [f"{tex_escape(_sentence(m.caption))} (${m.shape[0]} \\times {m.shape[1]}$):"]) + [block]
            else:
                math = f"{symbol} = {left} \\approx {right}"
        if m.caption is None:
            return [display(math)]
        return [f"{tex_escape(_sentence(m.caption))} (${m.shape[0]} \\times {m.shape[1]}$):", display(math)]

    def _print_WorkedProjection(self, w: WorkedProjection) -> list[str]:
        token = tex_escape(w.token)
        terms = " + ".join(self.print(t) for t in w.terms)
        return [f"By hand, the query of \\texttt{{{token}}} is its embedding times $W_q$:",
                display(f"q_{{\\text{{{token}}}}} = {terms} = {self.print(w.result)}")]

    def _print_DotProducts(self, d: DotProducts) -> list[str]:
        eqs = []
        for token, _query, products in d.rows:
            for dp in products:
                if dp is None:
                    eqs.append(r"&\;\;\vdots")
                    continue
                eqs.append(f"S_{{\\text{{{tex_escape(token)}}},\\,\\text{{{tex_escape(dp.key_token)}}}}}"
                           f" &= {self.print(dp.products)} = {self.print(dp.value)}")
        return ["Each score is a dot product, a sum of products in index order:" if d.every
                else "The dot products of the worked rows:", aligned(eqs)]

    def _print_ScaleNote(self, s: ScaleNote) -> list[str]:
        relation = "=" if s.rational else "\\approx"
        return [f"$d_k = {s.d_k}$, so every score is divided by $\\sqrt{{{s.d_k}}} {relation} {self.print(s.root)}$"
                + (" (a rational scale: the scores stay fractions)." if s.rational
                   else ", written as a person writes it:")]

    def _print_ScaledRow(self, r: ScaledRow) -> list[str]:
        if len(r.scores.items) > WIDE:   # three lines: the scores, scaled, their decimals
            return [f"Row \\texttt{{{tex_escape(r.token)}}}:",
                    aligned([f"&{self.print(r.scores)}", f"\\to {{}}&{self.print(r.scaled)}",
                             f"\\approx {{}}&{self.print(r.decimals)}"])]
        return [f"Row \\texttt{{{tex_escape(r.token)}}}: "
                + inline(f"{self.print(r.scores)} \\to {self.print(Approx(r.scaled, r.decimals))}") + "."]

    def _print_SoftmaxRule(self, rule: SoftmaxRule) -> list[str]:
        return ["Subtracting the row maximum changes no weight (the factor $e^{-\\max}$ cancels above "
                "and below the fraction bar) but keeps every exponent $\\le 0$:",
                display(r"\operatorname{softmax}(z)_j = \frac{e^{z_j}}{\sum_k e^{z_k}}"
                        r" = \frac{e^{z_j - \max z}}{\sum_k e^{z_k - \max z}}")]

    def _exponential(self, e: Math) -> str | None:
        if not isinstance(e, Approx):
            return None        # an elided run: the row above shows where
        if e.exact == Int(1):
            return "e^{0} = 1"
        if e.exact == Int(0):
            return "0"
        return self.print(e)

    def _print_SoftmaxRow(self, r: SoftmaxRow) -> list[str]:
        p = self.print
        token = tex_escape(r.token)
        lines = [f"\\paragraph{{Row \\texttt{{{token}}}.}}"]
        if r.blocked:
            lines.append("The mask blocks " + ", ".join(f"\\texttt{{{tex_escape(b)}}}" for b in r.blocked)
                         + ": weight exactly 0.")
        terms = [r"\cdots" if t is None else t for t in (self._exponential(e) for e in r.exponentials)]
        terms = [t for k, t in enumerate(terms) if t != r"\cdots" or k == 0 or terms[k - 1] != r"\cdots"]
        # many keys, or long entries (tanh of surds): decimals go on a line of their own
        wide = len(r.scaled.items) > WIDE or len(p(r.shifted)) > LONG_ROW_SOURCE
        eqs = self._approx_lines(f"\\text{{{r.logit}}}", r.scaled, r.scaled_decimals, wide)
        eqs.append(f"\\max &= {p(r.maximum)} \\quad (\\text{{key \\texttt{{{tex_escape(r.maximum_key)}}}}})"
                   if r.maximum is not None and r.maximum_key is not None else
                   "\\max &: \\text{left open by the symbols, so nothing is subtracted}")
        eqs += self._approx_lines(f"\\text{{shifted}} = \\text{{{r.logit}}} - \\max", r.shifted, r.shifted_decimals, wide)
        long_entries = len(p(r.shifted)) > LONG_ROW_SOURCE
        per = 1 if long_entries else 3 if wide else max(len(terms), 1)
        parts = chunks(terms, per)
        eqs.append("e^{\\text{shifted}} &: \\quad " + ",\\quad ".join(parts[0]) + ("," if len(parts) > 1 else ""))
        eqs += ["&\\phantom{:}\\quad " + ",\\quad ".join(part) + ("," if k < len(parts) - 2 else "")
                for k, part in enumerate(parts[1:])]
        eqs += self._sum_lines("\\text{row sum}", r.row_sum, r.row_sum_decimal)
        weights = p(r.weights)
        if wide and isinstance(r.weights, Row):
            items = [p(x) for x in r.weights.items]
            rows = chunks(items, PER_LINE)
            eqs.append("\\text{weights} = \\frac{e^{\\text{shifted}}}{\\text{row sum}} &\\approx \\bigl["
                       + ",\\ ".join(rows[0]) + ("," if len(rows) > 1 else "\\bigr]"))
            eqs += ["&\\phantom{{}\\approx{}}\\quad " + ",\\ ".join(part) + ("," if k < len(rows) - 2 else "\\bigr]")
                    for k, part in enumerate(rows[1:])]
        else:
            eqs.append(f"\\text{{weights}} = \\frac{{e^{{\\text{{shifted}}}}}}{{\\text{{row sum}}}} &\\approx {weights}")
        lines.append(aligned(eqs))
        if r.exact_weight is not None and r.exact_key is not None and r.exact_weight_decimal is not None:
            key = tex_escape(r.exact_key)
            lines += [f"Exactly, the weight of \\texttt{{{key}}} is a fraction of exponentials:",
                      display(f"A_{{\\text{{{token}}},\\,\\text{{{key}}}}} = "
                              f"{p(Approx(r.exact_weight, r.exact_weight_decimal))}")]
        return lines

    def _approx_lines(self, name: str, exact: Math, decimals: Math, wide: bool) -> list[str]:
        """``name = exact ≈ decimals`` on one line, or two when the row is wide."""
        if not wide:
            return [f"{name} &= {self.print(Approx(exact, decimals))}"]
        left, right = self.print(exact), self.print(decimals)
        if isinstance(exact, Row) and len(left) > LONG_ROW_SOURCE:   # long entries: a few per line
            items = [self.print(x) for x in exact.items]
            per = max(1, LONG_ROW_SOURCE * len(items) // len(left))
            parts = chunks(items, per)
            lines = [f"{name} &= \\bigl[" + ",\\ ".join(parts[0]) + ("," if len(parts) > 1 else "\\bigr]")]
            lines += ["&\\phantom{{}={}}\\quad " + ",\\ ".join(part) + ("," if k < len(parts) - 2 else "\\bigr]")
                      for k, part in enumerate(parts[1:])]
            return lines + [f"&\\approx {right}"]
        return [f"{name} &= {left}"] if left == right else [f"{name} &= {left}", f"&\\approx {right}"]

    def _sum_lines(self, name: str, total: Math, decimal: Math) -> list[str]:
        """A long sum broken after every few terms (each line begins with its +)."""
        whole = self.print(Approx(total, decimal))
        if not isinstance(total, Sum) or (len(total.terms) <= PER_LINE and len(whole) <= LONG_ROW_SOURCE):
            return [f"{name} &= {whole}"]
        terms = self._signed_terms(total)
        per = min(PER_LINE, max(1, LONG_ROW_SOURCE * len(terms) // len(whole)))
        lines = chunks(terms, per)
        out = [f"{name} &= " + " ".join(lines[0])]
        out += ["&\\quad " + " ".join(part) for part in lines[1:]]
        out[-1] += f" \\approx {self.print(decimal)}"
        return out

    def _print_HeatMap(self, h: HeatMap) -> list[str]:
        r_shown = {r for r in h.rows if r is not None}
        c_shown = {c for c in h.cols if c is not None}
        cells = [[self.print(h.decimals[i][j]) if i in r_shown and j in c_shown else ""
                  for j in range(len(h.decimals[i]))] for i in range(len(h.decimals))]
        shades = [[s if s is not None else 0 for s in row] for row in h.shades]
        return ["Each row of the heat map is one query; shading runs on the fixed scale 0 (white) "
                "to 1 (darkest), the certified weight in each cell.", "",
                heatmap(cells, shades, h.row_labels, h.col_labels, rows=list(h.rows), cols=list(h.cols)), ""]

    def _print_Blend(self, b: Blend) -> list[str]:
        token = tex_escape(b.token)
        lines = [f"Row \\texttt{{{token}}} blends the value rows with its weights:",
                 display(f"{' + '.join(self.print(t) for t in b.terms)} \\approx {self.print(b.result)}")]
        if b.exact_entry is not None and b.exact_decimal is not None:
            lines += ["Exactly, its first entry is",
                      display(f"O_{{\\text{{{token}}},0}} = {self.print(Approx(b.exact_entry, b.exact_decimal))}")]
        return lines

    def _print_Check(self, c: Check) -> list[str]:
        reason = self.words(c.because) if c.because else tex_escape(c.reason)
        lines = [f"\\textbf{{{tex_escape(c.statement)}}} {reason}"]
        if len(c.lines) == 1:
            line = c.lines[0]
            label = f"\\text{{{tex_escape(line.label)}}}:\\quad " if line.label else ""
            lines.append(display(label + self.print(line.math)))
            return lines
        eqs = [(f"\\text{{{tex_escape(line.label)}}}:\\quad " if line.label else "")
               + (self.print(line.math, align=True) if isinstance(line.math, Chain) else
                  "&\\;\\;" + self.print(line.math)) for line in c.lines]
        lines.append(aligned(eqs))
        return lines

    # -- results other than a Trace ---------------------------------------------------
    def _proof_line(self, line) -> str:
        if line.parts:
            return self.words(line.parts)
        return f"${line.latex}$" if line.latex else tex_escape(line.text)

    def _print_ProofLines(self, p: ProofLines) -> list[str]:
        if not p.heading:
            return [" ".join(self._proof_line(line) for line in p.lines), ""]
        return [f"\\par {tex_escape(p.heading)}:", r"\begin{itemize}",
                *(f"  \\item {self._proof_line(line)}" for line in p.lines), r"\end{itemize}"]

    def _print_Verdicts(self, v: Verdicts) -> list[str]:
        marks = {"✓": r"$\checkmark$", "✗": r"$\times$", "!": r"\textbf{!}"}
        lines = [r"\begin{itemize}"]
        for r in v.rows:
            name = f"\\texttt{{{tex_escape(r.target)}}}" + (f" ({tex_escape(r.variant)})" if r.variant else "")
            code = f"\\textbf{{{tex_escape(r.code)}}}" + (f": {tex_escape(r.mistake)}" if r.mistake else "")
            written = tex_escape(" ".join(r.text.split()))
            item = f"  \\item[{marks.get(r.mark, tex_escape(r.mark))}] {name}: {written} --- {code}"
            if r.expected is not None and not r.right:   # the rounding and the message typeset as math
                item += f"; expected {inline(self.print(r.expected_math)) if r.expected_math else tex_escape(r.expected)}"
            if not r.right:
                item += f"\\\\\n  {{\\small {self.words(r.says) if r.says else tex_escape(r.message)}}}"
            lines.append(item)
        lines.append(r"\end{itemize}")
        return lines

    def _print_Table(self, t: Table) -> list[str]:
        """A ``longtable`` (a class of forty students breaks across pages, its header repeated);
        numbers on the right, the prose column a ragged paragraph, the caption kept with it."""
        spec = []
        for k in range(len(t.header)):
            if k == t.prose:
                spec.append(r">{\raggedright\arraybackslash}p{5.5cm}")
            else:
                spec.append("r" if k < len(t.numeric) and t.numeric[k] else "l")

        def cell(c, k: int) -> str:
            if isinstance(c, str) and k < len(t.numeric) and t.numeric[k]:
                c = c.replace("-", "−")                       # a negative number's minus, not a hyphen
            text = tex_escape(c) if isinstance(c, str) else inline(self.print(c))
            return "{}" + text if text.startswith("[") else text   # not read as \\[…] after a row's end

        head = " & ".join(f"\\textbf{{{tex_escape(h)}}}" for h in t.header) + r" \\"
        lines = [f"\\par\\textbf{{{tex_escape(t.caption)}}}\\nopagebreak"] if t.caption else []
        lines += [r"{\small\setlength{\tabcolsep}{4pt}",
                  f"\\begin{{longtable}}[l]{{@{{}}{' '.join(spec)}@{{}}}}", r"\toprule", head, r"\midrule",
                  r"\endhead", *(" & ".join(cell(c, k) for k, c in enumerate(row)) + r" \\" for row in t.rows),
                  r"\bottomrule", r"\end{longtable}}", ""]
        return lines + ([f"{{\\small {tex_escape(t.legend)}}}\\par", ""] if t.legend else [])


def print_latex(node: Document | Math, *, header: bool = True) -> str:
    """A document's LaTeX body (``header``: with its title and summary), or one math node."""
    printer = LatexPrinter()
    if isinstance(node, Document):
        printer.numbers = section_numbers(node)
        return printer.print(node, header=header)
    return printer.print(node)
