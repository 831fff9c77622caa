"""The HTML printer: a document as one self-contained page, math as MathML Core.

One ``_print_<ClassName>`` method per block and hand-form node of
:mod:`symattn.document.blocks`.  Math nodes print to MathML fragments
(:mod:`symattn.document.support.mathml`); blocks print to HTML and wrap their math in
``<math>``; the document is wrapped in the page shell (:mod:`symattn.document.support.page`),
which needs no network and no JavaScript.  Every string from the problem
(titles, token names) is escaped on its way out.
"""

from __future__ import annotations

from typing import Any

from symattn.numbers.certify import CertifiedDecimal
from symattn.document import blocks as b
from symattn.document.printers.base import Printer
from symattn.document.printers.html_math import HtmlMath, _relation
from symattn.document.support import mathml as m
from symattn.document.support import page as pg

__all__ = ["HtmlPrinter", "print_html"]


class HtmlPrinter(HtmlMath, Printer):
    """Prints a :class:`~symattn.document.blocks.Document` as a complete HTML page."""

    format = "html"

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._script = 0                 # > 0 inside an exponent: fractions use a slash

    # -- helpers ---------------------------------------------------------------------
    def math(self, node: b.Math, *, display: bool = False) -> str:
        """A math node as a ``<math>`` element."""
        return m.math(self.print(node), display=display)

    def inline(self, parts: tuple[str | b.Math, ...]) -> str:
        """Running text: strings escaped, token names set apart as code, math nodes inline."""
        return "".join(m.escape(p) if isinstance(p, str) else m.code_token(p.name)
                       if isinstance(p, b.Token) else self.math(p) for p in parts)

    def _cell(self, exact: b.Math | None, decimal: b.Math | None) -> str:
        """A matrix cell: the exact value, its decimal beneath when the two read differently."""
        if exact is None:
            return "" if decimal is None else self.math(decimal)
        top = self.print(exact)
        if decimal is None:
            return m.math(top)
        low = self.print(decimal)
        if low == top:
            return m.math(top)
        return f'{m.math(top)}<span class="dec">{m.math(m.mrow(m.mo(_relation(decimal)), low))}</span>'

    def _grid(self, cells: b.Cells, decimals: b.Cells | None, rows: b.Indices, cols: b.Indices
              ) -> list[list[str]]:
        """The shown part of a matrix: ⋯ and ⋮ where runs are elided."""
        grid: list[list[str]] = []
        for i in rows:
            if i is None:
                grid.append(["\u22f1" if j is None else "\u22ee" for j in cols])
                continue
            grid.append(["\u22ef" if j is None else self._cell(
                cells[i][j], decimals[i][j] if decimals is not None else None) for j in cols])
        return grid

    def approx(self, exact: b.Math | str, value: b.Math | None) -> list[str]:
        """``exact ≈ value`` as mrow parts: nothing added where the two read the same, ``=``
        where ``value`` is exact (a formula of symbols, or a decimal proved exact)."""
        left = exact if isinstance(exact, str) else self.print(exact)
        if value is None:
            return [left]
        right = self.print(value)
        if right == left:
            return [left]
        return [left, m.mo(_relation(value)), right]

    @staticmethod
    def _labels(labels: tuple[str, ...] | None, shown: b.Indices, *, vertical: bool = False
                ) -> list[str] | None:
        if labels is None:
            return None
        return [("\u22ee" if vertical else "\u22ef") if k is None else labels[k] for k in shown]

    # -- the document ------------------------------------------------------------------
    def _print_Document(self, doc: b.Document) -> str:
        body = [f"<header><h1>{m.escape(doc.title)}</h1></header>\n"]
        body += [self.print(child) for child in doc.children]
        return pg.page(doc.title, "".join(body), description="A derivation by symattn: exact values, "
                       "certified decimals")

    def _print_Summary(self, s: b.Summary) -> str:
        kinds = {"self-attention": "Self-attention", "cross-attention": "Cross-attention",
                 "given": "Attention from Q, K, V given directly"}
        kind = kinds.get(s.kind, s.kind[:1].upper() + s.kind[1:])
        n, k = len(s.tokens), len(s.key_tokens)
        queries = ", ".join(s.tokens)
        keys = ", ".join(s.key_tokens)
        dk = m.msub(m.mi("d"), m.mi("k"))
        dims = [m.mrow(dk, m.mo("="), m.mn(str(s.d_k))),
                m.mrow(m.msub(m.mi("d"), m.mi("v")), m.mo("="), m.mn(str(s.d_v)))]
        if s.d_model:
            dims.append(m.mrow(m.msub(m.mi("d"), m.mi("model")), m.mo("="), m.mn(str(s.d_model))))
        one_over_root = m.mfrac(m.mn("1"), m.msqrt(dk))
        by_root = m.mfrac(m.mn("1"), m.msqrt(m.mn(str(s.d_k))))     # 1/√3, as text and LaTeX write it
        scale = (m.math(m.mrow(one_over_root, m.mo("="), by_root)) if s.default_scale
                 else self.math(s.scale) + " (instead of " + m.math(one_over_root) + ")")
        out = [f'<p class="summary">{m.escape(kind)}: {n} quer{"y" if n == 1 else "ies"} '
               f'({m.escape(queries)}) × {k} key{"" if k == 1 else "s"} ({m.escape(keys)}); '
               f'{", ".join(m.math(d) for d in dims)}; scale {scale}.</p>']
        if s.mask_kind:
            out.append(f"<p>Mask: {m.escape(s.mask_kind)} (1 = may attend, as PyTorch SDPA's boolean mask); "
                       "a blocked position gets −∞ and weight exactly 0.</p>")
        if s.symbols:
            out.append(f"<p>Symbols: {m.escape(', '.join(s.symbols))}. Where they leave a value open "
                       "the entry is a formula, with no decimal.</p>")
        r = s.rounding
        if r.digits is not None:
            phrase = f"{r.digits} significant digit{'s' if r.digits != 1 else ''}"
        else:
            phrase = (f"{r.places} decimal place{'s' if r.places != 1 else ''}; a value that rounds to 0 "
                      f"at that precision is shown in scientific notation to {s.sci_digits} digits")
        out.append(f"<p>Exact values throughout; every decimal is correctly rounded to {m.escape(phrase)}, "
                   "certified with ball arithmetic.</p>")
        return "\n".join(out) + "\n"

    def _print_Section(self, s: b.Section) -> str:
        number = self.number(s)
        title = f"{number}. {s.title}" if number else s.title
        ident = f"sec-{s.key}"
        out = [f'<section id="{m.escape(ident)}" aria-labelledby="{m.escape(ident)}-h">',
               f'<h2 id="{m.escape(ident)}-h">{m.escape(title)}</h2>']
        if s.formula is not None:
            out.append(self.print(s.formula))
        run: list[str] = []                  # consecutive matrices sit side by side where they fit
        for child in s.children:
            if isinstance(child, b.LabelledMatrix):
                run.append(f'<div class="mat">{self.print(child)}</div>')
                continue
            if run:
                out.append(f'<div class="mats">{"".join(run)}</div>')
                run = []
            out.append(self.print(child))
        if run:
            out.append(f'<div class="mats">{"".join(run)}</div>')
        out.append("</section>\n")
        return "\n".join(out)

    def _print_Formula(self, f: b.Formula) -> str:
        r, c = f.shape
        product = (" = " + "·".join(f"({a}×{b_})" for a, b_ in f.factors)) if f.factors else ""
        parts = tuple(getattr(f, "meaning_parts", ()) or (f.meaning,))
        if parts and isinstance(parts[0], str):
            parts = (parts[0][:1].upper() + parts[0][1:], *parts[1:])
        return (f'<p class="formula"><span class="keep">{m.escape(f.text)}</span> '
                f"(shape {r}×{c}{m.escape(product)}): {self.inline(parts)}.</p>")

    def _print_Note(self, n: b.Note) -> str:
        return f"<p>{self.inline(n.parts)}</p>\n"

    def _print_LabelledMatrix(self, lm: b.LabelledMatrix) -> str:
        r, c = lm.shape
        only_decimals = lm.exact is None              # the cells are the decimals themselves
        rel = _relation(lm.decimals) if only_decimals else "="   # ≈ unless every decimal is exact
        caption = (m.math(m.mrow(self.print(lm.symbol), m.mo(rel)))
                   + f" <span class=\"note\">({r}×{c}"
                   + ("; certified decimals" if only_decimals else
                      "" if lm.integers or lm.decimals is None else "; certified decimals beneath")
                   + ")</span>")
        lead = f"<p>{m.escape(lm.caption[:1].upper() + lm.caption[1:])}:</p>\n" if lm.caption else ""
        exact = lm.exact if lm.exact is not None else lm.decimals
        assert exact is not None            # a LabelledMatrix shows exact cells, decimals or both
        decimals = None if (lm.integers or lm.exact is None) else lm.decimals
        grid = self._grid(exact, decimals, lm.rows, lm.cols)
        return lead + pg.table(grid, self._labels(lm.row_labels, lm.rows, vertical=True),
                               self._labels(lm.col_labels, lm.cols), caption=caption, brackets=True)

    def _print_WorkedProjection(self, w: b.WorkedProjection) -> str:
        lhs = m.msub(m.mi("q"), m.token(w.token))
        terms = m.sum_of(self.print(t) for t in w.terms)
        return (f"<p>By hand, the query of <span class=\"token\">{m.escape(w.token)}</span> is its "
                "embedding times W<sub>q</sub>, a combination of the rows of W<sub>q</sub>:</p>\n"
                + m.math(m.mrow(lhs, m.mo("="), terms, m.mo("="), self.print(w.result)), display=True) + "\n")

    def _print_DotProducts(self, d: b.DotProducts) -> str:
        out = ["<p>" + ("Each score is a dot product, a sum of products in index order:" if d.every
                        else "The dot products of the worked rows:") + "</p>"]
        for token, query, products in d.rows:
            out.append(f'<p>Row {m.code_token(token)}, query '
                       f"{m.math(m.mrow(m.mi('q'), m.mo('='), self.print(query)))}:</p>")
            items = []
            for p in products:
                if p is None:
                    items.append("<li>⋮</li>")
                    continue
                lhs = m.msub(m.mi("S"), m.mrow(m.token(p.token), m.mo(","), m.token(p.key_token)))
                items.append("<li>" + m.math(m.mrow(lhs, m.mo("="), self.print(p.products), m.mo("="),
                                                    self.print(p.value))) +
                             f' <span class="note">(key of {m.code_token(p.key_token)}: '
                             f"{self.math(p.key)})</span></li>")
            out.append('<ul class="steps">' + "".join(items) + "</ul>")
        return "\n".join(out) + "\n"

    def _print_ScaleNote(self, s: b.ScaleNote) -> str:
        root = m.math(m.mrow(m.msqrt(m.mn(str(s.d_k))), m.mo("="), self.print(s.root))) if s.rational \
            else m.math(self.print(b.Approx(b.Sqrt(b.Int(s.d_k)), s.root)))
        tail = " (a rational scale: the scores stay fractions)." if s.rational else \
            ", written as a person writes it:"
        return (f"<p>{m.math(m.mrow(m.msub(m.mi('d'), m.mi('k')), m.mo('='), m.mn(str(s.d_k))))}, "
                f"so every score is divided by {root}{tail}</p>\n")

    def _print_ScaledRow(self, s: b.ScaledRow) -> str:
        chain = m.mrow(self.print(s.scores), m.mo("\u2192"), *self.approx(s.scaled, s.decimals))
        return f'<p>Row {m.code_token(s.token)}: {m.math(chain)}.</p>\n'

    def _print_SoftmaxRule(self, s: b.SoftmaxRule) -> str:
        z = lambda idx: m.msub(m.mi("z"), m.mi(idx))  # noqa: E731
        zmax = m.mrow(m.mo("max", form="prefix"), m.mi("z"))
        shifted = lambda idx: m.msup(m.mi("e"), m.mrow(z(idx), m.mo("\u2212"), zmax))  # noqa: E731
        sigma = m.msub(m.mo("\u2211"), m.mi("k"))
        rule = m.mrow(m.msub(m.mrow(m.mi("softmax"), m.paren(m.mi("z"))), m.mi("j")), m.mo("="),
                      m.mfrac(m.msup(m.mi("e"), z("j")), m.mrow(sigma, m.msup(m.mi("e"), z("k")))),
                      m.mo("="), m.mfrac(shifted("j"), m.mrow(sigma, shifted("k"))))
        return ("<p>Subtracting the row maximum changes no weight (the factor e<sup>−max</sup> cancels "
                "above and below the fraction bar) but keeps every exponent ≤ 0:</p>\n"
                + m.math(rule, display=True) + "\n")

    def _print_SoftmaxRow(self, s: b.SoftmaxRow) -> str:
        out = [f'<h3>Row {m.code_token(s.token)}</h3>']
        if s.blocked:
            out.append(f"<p>The mask blocks {', '.join(map(m.code_token, s.blocked))}: weight exactly 0.</p>")
        rows: list[tuple[str, str | None]] = [
            (s.logit, m.mrow(*self.approx(s.scaled, s.scaled_decimals)))]
        if s.maximum is not None:
            ties = [k for k in s.ties if k != s.maximum_key]
            where = f" (key “{s.maximum_key}”" + (f"; tied with “{'”, “'.join(ties)}”" if ties else "") + ")"
            rows.append(("maximum", m.mrow(self.print(s.maximum), '<mspace width="0.5em"></mspace>',
                                           m.mtext(where.strip()))))
        else:
            rows.append(("maximum", m.mtext("left open by the symbols, so nothing is subtracted")))
        rows += [
            (f"shifted = {s.logit} − max", m.mrow(*self.approx(s.shifted, s.shifted_decimals))),
            ("exponentials", None),
            ("row sum", m.mrow(*self.approx(s.row_sum, s.row_sum_decimal))),
            ("weights = exp / row sum", m.mrow(m.mo(_relation(s.weights)), self.print(s.weights))),
        ]
        # the exponentials are separate formulas, so a long row wraps between them
        exps = ", ".join(self.math(e) for e in s.exponentials)
        body = "".join(f'<tr><th scope="row">{m.escape(label)}</th><td class="left">'
                       f'{exps if math is None else m.math(math)}</td></tr>' for label, math in rows)
        out.append(f'<div class="scroll"><table class="softmax" aria-label="softmax of row '
                   f'{m.escape(s.token)}"><tbody>{body}</tbody></table></div>')
        if s.exact_weight is not None and s.exact_key is not None:
            lhs = m.msub(m.mi("A"), m.mrow(m.token(s.token), m.mo(","), m.token(s.exact_key)))
            out.append(f'<p>Exactly, the weight of {m.code_token(s.exact_key)} is a '
                       "fraction of exponentials:</p>")
            out.append(m.math(m.mrow(lhs, m.mo("="), *self.approx(s.exact_weight, s.exact_weight_decimal)),
                              display=True))
        return "\n".join(out) + "\n"

    def _print_HeatMap(self, h: b.HeatMap) -> str:
        cells: list[list[pg.HeatCell | None]] = []
        for i in h.rows:
            if i is None:
                cells.append([None for _ in h.cols])
                continue
            row: list[pg.HeatCell | None] = []
            for j in h.cols:
                if j is None:
                    row.append(None)
                    continue
                row.append(self._heat_cell(h, i, j))
            cells.append(row)
        rows = [None if i is None else h.row_labels[i] for i in h.rows]
        cols = [None if j is None else h.col_labels[j] for j in h.cols]
        intro = ("<p>Each row of the heat map is one query; shading runs on the fixed scale 0 (white) to "
                 "1 (darkest), the certified weight in each cell. Hover over a cell, or move to it with "
                 "the Tab key, to see its exact value.</p>\n")
        return intro + pg.heatmap(cells, rows, cols, caption="Attention weights (rows: queries, "
                                                            "columns: keys)")

    def _heat_cell(self, h: b.HeatMap, i: int, j: int) -> pg.HeatCell:
        decimal = h.decimals[i][j]
        shown = self.math(decimal)
        where = m.msub(m.mi("A"), m.mrow(m.token(h.row_labels[i]), m.mo(","), m.token(h.col_labels[j])))
        exact = h.exact[i][j] if h.exact is not None else None
        if exact is not None and self.print(exact) != self.print(decimal):
            proved = isinstance(decimal, b.Decimal) and isinstance(decimal.value, CertifiedDecimal) \
                and decimal.value.exact
            rel = "=" if proved else "\u2248"
            popup = m.mrow(where, m.mo("="), self.print(exact), m.mo(rel), self.print(decimal))
            words = f"{self.plain(exact)} {rel} {self.plain(decimal)}"
        else:
            popup = m.mrow(where, m.mo("="), self.print(decimal))
            words = self.plain(decimal)
        title = f"weight of query “{h.row_labels[i]}” on key “{h.col_labels[j]}”: {words}"
        return pg.HeatCell(shown, h.shades[i][j] or 0, m.math(popup), title)

    def plain(self, node: b.Math) -> str:
        """A math node as plain text (the heat map's ``title`` attribute), from the text printer."""
        from symattn.document.printers.text import print_text
        return print_text(node)

    def _print_Blend(self, bl: b.Blend) -> str:
        out = [f'<p>Row {m.code_token(bl.token)} blends the value rows with its '
               "weights:</p>",
               m.math(m.mrow(*self.approx(m.sum_of(self.print(t) for t in bl.terms), bl.result)),
                      display=True)]
        if bl.exact_entry is not None:
            lhs = m.msub(m.mi("O"), m.mrow(m.token(bl.token), m.mo(","), m.mn("0")))
            out += ["<p>Exactly, its first entry is</p>",
                    m.math(m.mrow(lhs, m.mo("="), *self.approx(bl.exact_entry, bl.exact_decimal)),
                           display=True)]
        return "\n".join(out) + "\n"

    def _print_Check(self, c: b.Check) -> str:
        items = "".join(f"<li>{m.escape(line.label)}{': ' if line.label else ''}{self.math(line.math)}</li>"
                        for line in c.lines)
        because = getattr(c, "because", ())
        reason = self.inline(because) if because else m.escape(c.reason)
        return (f'<div class="check" id="check-{m.escape(c.name)}"><p><strong>{m.escape(c.statement)}</strong> '
                f"{reason}</p>\n<ul class=\"checks\">{items}</ul></div>\n")

    # -- results other than a Trace ---------------------------------------------------
    def _print_ProofLines(self, p: b.ProofLines) -> str:
        def shown(line: b.ProofLine) -> str:
            return self.inline(line.parts) if line.parts else m.escape(line.text)

        if not p.heading:
            return "".join(f'<p class="statement">{shown(line)}</p>\n' for line in p.lines)
        items = "".join(f"<li>{shown(line)}</li>" for line in p.lines)
        return f'<p>{m.escape(p.heading)}:</p>\n<ul class="steps">{items}</ul>\n'

    def _print_Verdicts(self, v: b.Verdicts) -> str:
        words = {"✓": "right", "✗": "not right", "!": "unreadable", "–": "no answer"}
        head = "".join(f'<th scope="col">{h}</th>' for h in
                       ("Figure", "Written", "Verdict", "Expected", "Mistake", "Why"))
        rows = []
        for r in v.rows:
            name = r.target + (f" ({r.variant})" if r.variant else "")
            verdict = f"{r.mark} {r.code}"
            expected = self.math(r.expected_math) if r.expected_math is not None else m.escape(r.expected or "")
            rows.append(f'<tr class="{"right" if r.right else "not-right"}">'
                        f'<th scope="row"><code>{m.escape(name)}</code></th>'
                        f"<td><code>{m.escape(' '.join(r.text.split()))}</code></td>"
                        f'<td aria-label="{words.get(r.mark, r.mark)}: {m.escape(r.code)}">{m.escape(verdict)}</td>'
                        f"<td>{expected}</td><td>{m.escape(r.mistake or '')}</td>"
                        f'<td class="left">{self.inline(r.says) if r.says else m.escape(r.message)}</td></tr>')
        return (f'<div class="scroll"><table class="verdicts"><thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(rows)}</tbody></table></div>\n')

    def _print_Table(self, t: b.Table) -> str:
        """A results table: column headers and each row's first cell as ``th`` with a ``scope``;
        numbers on the right in tabular figures, the prose column on the left."""
        def cell(c) -> str:
            return m.escape(c) if isinstance(c, str) else self.math(c)

        def css(k: int) -> str:
            if k == t.prose:
                return ' class="left"'
            return ' class="num"' if k < len(t.numeric) and t.numeric[k] else ""

        def td(r: int, k: int, c) -> str:
            shade = t.shades[r][k] if t.shades is not None and k < len(t.shades[r]) else None
            return f"<td{css(k) if shade is None else pg.shaded(shade)}>{cell(c)}</td>"

        head = "".join(f'<th scope="col"{css(k)}>{m.escape(h)}</th>' for k, h in enumerate(t.header))
        rows = "".join("<tr>" + "".join(f'<th scope="row"{css(0)}>{cell(c)}</th>' if k == 0
                                        else td(r, k, c) for k, c in enumerate(row))
                       + "</tr>" for r, row in enumerate(t.rows))
        caption = f"<caption>{m.escape(t.caption)}</caption>" if t.caption else ""
        kind = "results heat" if t.shades is not None else "results"
        legend = f'<p class="legend">{m.escape(t.legend)}</p>\n' if t.legend else ""
        return (f'<div class="scroll"><table class="{kind}">{caption}<thead><tr>{head}</tr></thead>'
                f"<tbody>{rows}</tbody></table></div>\n{legend}")


def print_html(doc: b.Document) -> str:
    """A document as a complete, self-contained HTML page."""
    return HtmlPrinter().doprint(doc)
