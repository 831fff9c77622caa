"""Sheets and keys printed: the LaTeX and HTML printers, taught the worksheet's blocks.

Subclasses of the derivation's printers (so every math node and the embedded
derivation print exactly as ``explain`` prints them), with one ``_print_<Block>``
method per block of :mod:`symattn.document.worksheet_blocks`.
"""

from __future__ import annotations

import re

from symattn.document import blocks as b
from symattn.document.worksheet_blocks import (
    Derivation, Instruction, KeyAnswer, KeyValue, Question, SheetHeader, WrongAnswers,
)
from symattn.document.printers.base import section_numbers
from symattn.document.printers.html import HtmlPrinter
from symattn.document.printers.latex import LatexPrinter, display
from symattn.document.support import mathml as m
from symattn.document.support import page as pg
from symattn.document.support.texutil import matrix_latex, prose_latex, tex_escape

__all__ = ["WorksheetLatexPrinter", "WorksheetHtmlPrinter", "sheet_latex", "sheet_html",
           "ODD_PAGE", "combined_latex"]

_SCI = re.compile(r"^(-?[0-9.]+)e([+-]?[0-9]+)$")

#: Starts the next version on an odd page (a blank page in between when needed), so a
#: combined PDF prints double-sided with every version on its own sheets of paper.
ODD_PAGE = r"\clearpage\ifodd\value{page}\else\hbox{}\thispagestyle{empty}\clearpage\fi"


def _value_latex(text: str) -> str:
    """A rounded value as check reads it (``6.03e-6``) written for a reader: 6.03 × 10⁻⁶."""
    if text == "-inf":
        return r"-\infty"
    hit = _SCI.match(text)
    if hit:
        return f"{hit.group(1)} \\times 10^{{{int(hit.group(2))}}}"
    return text


def _value_text(text: str) -> str:
    if text == "-inf":
        return "−∞"
    hit = _SCI.match(text)
    if hit:
        return f"{hit.group(1)} × 10^{int(hit.group(2))}".replace("-", "−")
    return text.replace("-", "−")


class WorksheetLatexPrinter(LatexPrinter):
    """A sheet or key as a LaTeX body."""

    def _print_Document(self, doc: b.Document, header: bool = True) -> str:
        return "\n".join(line for child in doc.children for line in self.print(child)) + "\n"

    def _print_SheetHeader(self, h: SheetHeader) -> list[str]:
        lines = [f"\\section*{{{tex_escape(h.title)} --- {h.kind}}}"]
        code = f"\\textbf{{Version code {tex_escape(h.code)}}}"
        if h.name_line:
            lines.append(f"{code} \\hfill Name: \\rule{{6.5cm}}{{0.4pt}}")
        else:
            lines.append(code + "".join(f" \\hfill {tex_escape(f)}" for f in h.teacher))
        if h.total_points is not None:
            lines.append(f"\\par Total: {tex_escape(h.total_points)} points")
        return lines + [""]

    def _print_Section(self, section: b.Section) -> list[str]:
        if section.key != "given":
            return super()._print_Section(section)
        maths = []
        for child in section.children:
            assert isinstance(child, b.LabelledMatrix)
            maths.append(f"{self.print(child.symbol)} = "
                         f"{self.matrix(child.exact, child.rows, child.cols, child.row_labels, None)}")
        lines = ["\\subsection*{Given}"]
        for k in range(0, len(maths), 2):
            lines.append(display(" \\qquad ".join(maths[k:k + 2])))
        return lines

    def _print_Instruction(self, i: Instruction) -> list[str]:
        text = i.latex if i.latex is not None else self.words(i.parts)
        return [f"\\textbf{{{tex_escape(i.label)}:}} {text}\\par"]

    @staticmethod
    def _points(points: str | None) -> str:
        return f" \\hfill [{tex_escape(points)}]" if points else ""

    def _print_Question(self, q: Question) -> list[str]:
        # wide enough for the answer and for the longest piece of a header (a header such as
        # rows_recomputed breaks after its underscores, so its pieces never print over each other)
        pieces = [len(piece) for c in q.col_labels or () for piece in c.split("_")]
        width = max(1.2, 0.24 * q.box_chars + 0.5, 0.2 * max(pieces, default=0) + 0.3)
        spec = "r|" + f">{{\\raggedright\\arraybackslash}}p{{{width:.2f}cm}}|" * q.shape[1]
        head = (" & " + " & ".join(f"\\textbf{{\\small {_breakable(c)}}}" for c in q.col_labels) + r" \\ \hline"
                if q.col_labels else r"\multicolumn{1}{r}{} \\ \cline{2-" + str(q.shape[1] + 1) + "}")
        body = [f"\\textbf{{{tex_escape(label)}}} & " + " & ".join([f"\\rule{{0pt}}{{{q.box_em:g}em}}"] * q.shape[1])
                + r" \\ \hline" for label in q.row_labels]
        return [r"\par\noindent\begin{minipage}{\linewidth}",
                f"\\textbf{{{q.number}.}} Compute {tex_escape(q.what)}, ${q.formula}$ "
                f"(${q.shape[0]} \\times {q.shape[1]}$).{self._points(q.points)}\\par",
                f"{{\\small\\color{{gray}} Working:}}\\par\\vspace{{{q.work_cm:.1f}cm}}",
                "{\\small Answer:}\\par",
                "\\begin{center}", f"\\begin{{tabular}}{{{spec}}}", head, *body, "\\end{tabular}",
                "\\end{center}", f"\\end{{minipage}}\\par{q.after}", ""]

    def _print_KeyValue(self, v: KeyValue, **ctx) -> str:
        if v.exact is None:
            return self.print(v.decimal) if v.decimal is not None else ""
        exact = self.print(v.exact)
        if v.decimal is None:
            return exact
        dec = self.print(v.decimal)
        if dec == exact:
            return exact
        relation = "=" if v.exact_decimal else "\\approx"
        return f"{exact} {relation} {dec}"

    def _print_KeyAnswer(self, a: KeyAnswer) -> list[str]:
        cells = [[self.print(c) for c in row] for row in a.cells]
        matrix = matrix_latex(cells, a.row_labels, a.col_labels, limit=max(len(cells), len(cells[0])))
        lines = [f"\\textbf{{{a.number}.}} {tex_escape(a.what[:1].upper() + a.what[1:])}, ${a.formula}$"
                 f"{self._points(a.points)}\\par"]
        if a.note:
            lines.append(self.words(a.note) + "\\par")
        relation = "\\approx" if a.approx else "="
        lines.append(display(f"{self.print(a.symbol)} {relation} {matrix}"))
        return lines

    def _print_WrongAnswers(self, w: WrongAnswers) -> list[str]:
        lines = []
        per = max(1, w.per_line)
        words = f">{{\\raggedright\\arraybackslash}}m{{{w.words_width}}}"   # no stretched gaps
        spec = "@{}" + r"@{\qquad}".join([f"{words}l"] * per) + "@{}"
        head = " & ".join(["mistake & what it gives"] * per)
        for number, step, wrongs in w.rows:
            # \nopagebreak: a "Question N" heading never stands alone at the foot of a page
            lines += [f"\\par\\medskip\\textbf{{Question {number}}} ({tex_escape(step)}):\\par\\nopagebreak", "{\\small",
                      r"\renewcommand{\arraystretch}{1.25}",
                      f"\\begin{{tabular}}{{{spec}}}", r"\toprule", head + r" \\ \midrule"]
            groups = [wrongs[k:k + per] for k in range(0, len(wrongs), per)]
            for g, group in enumerate(groups):
                cells = []
                for wrong in group:
                    rows = r" \\ ".join(" & ".join(_value_latex(t) for t in row) for row in wrong.values)
                    cells.append(f"\\textbf{{{tex_escape(wrong.code)}}}: {prose_latex(wrong.detail)} & "
                                 f"$\\begin{{bmatrix}} {rows} \\end{{bmatrix}}\\rule[-1.2ex]{{0pt}}{{4ex}}$")
                cells += [" & "] * (per - len(group))
                # space between two answers, so tall matrices do not run together
                lines.append(" & ".join(cells) + r" \\"
                             + ("" if g == len(groups) - 1 else f" \\addlinespace[{w.gap}]"))
            lines += [r"\bottomrule", r"\end{tabular}}\par", ""]
        return lines

    def _print_Derivation(self, d: Derivation) -> list[str]:
        self.numbers.update(section_numbers(d.doc))
        return [line for child in d.doc.children if not isinstance(child, b.Summary)
                for line in self.print(child)]


_CSS = """
.sheet-head { display: flex; flex-wrap: wrap; justify-content: space-between; gap: .5rem 2rem; }
.code { font-weight: 700; letter-spacing: .05em; }
.nameline { display: inline-block; min-width: 16rem; border-bottom: 1px solid var(--ink); }
.question { break-inside: avoid; margin: 1.2rem 0 1.6rem; }
.points { float: right; color: var(--muted); }
.work { border: 1px dashed var(--rule); margin: .4rem 0; }
table.boxes td { border: 1px solid var(--ink); height: 2.3rem; }
table.wrong td, table.wrong th { border-bottom: 1px solid var(--rule); text-align: left; }
@media print { .work { border-color: #ddd; } }
"""


class WorksheetHtmlPrinter(HtmlPrinter):
    """A sheet or key as one self-contained HTML page."""

    def _print_Document(self, doc: b.Document) -> str:
        body = [f"<style>{_CSS}</style>\n"] + [self.print(child) for child in doc.children]
        return pg.page(doc.title, "".join(body), description=f"A symattn {doc.meta.get('kind', 'worksheet')}")

    def _print_SheetHeader(self, h: SheetHeader) -> str:
        right = ('Name: <span class="nameline">&nbsp;</span>' if h.name_line
                 else " · ".join(m.escape(f) for f in h.teacher))
        total = f"<p>Total: {m.escape(h.total_points)} points</p>" if h.total_points else ""
        return (f"<header><h1>{m.escape(h.title)} — {m.escape(h.kind)}</h1>\n"
                f'<p class="sheet-head"><span class="code">Version code {m.escape(h.code)}</span>'
                f"<span>{right}</span></p>{total}</header>\n")

    def _print_Instruction(self, i: Instruction) -> str:
        return f"<p><strong>{m.escape(i.label)}:</strong> {self.inline(i.parts)}</p>\n"

    def _print_Question(self, q: Question) -> str:
        width = max(4.0, q.box_chars * 0.75 + 1.5)
        cells = [[""] * q.shape[1] for _ in q.row_labels]
        table = pg.table(cells, list(q.row_labels), list(q.col_labels) if q.col_labels else None, css="boxes")
        table = table.replace("<td>", f'<td style="width:{width:.1f}ch">')
        points = f'<span class="points">[{m.escape(q.points)}]</span>' if q.points else ""
        return (f'<div class="question" id="q{q.number}">{points}<p><strong>{q.number}.</strong> Compute '
                f"{m.escape(q.what)} ({q.shape[0]}×{q.shape[1]}).</p>\n"
                f'<div class="work" style="height:{q.work_cm:.1f}cm" aria-label="working space"></div>\n'
                f"<p>Answer:</p>\n{table}</div>\n")

    def _print_KeyValue(self, v: KeyValue) -> str:
        if v.exact is None:
            return self.print(v.decimal) if v.decimal is not None else ""
        exact = self.print(v.exact)
        if v.decimal is None:
            return exact
        dec = self.print(v.decimal)
        if dec == exact:
            return exact
        return m.mrow(exact, m.mo("=" if v.exact_decimal else "\u2248"), dec)

    def _print_KeyAnswer(self, a: KeyAnswer) -> str:
        grid = [[m.math(self.print(c)) for c in row] for row in a.cells]
        points = f'<span class="points">[{m.escape(a.points)}]</span>' if a.points else ""
        note = f"<p>{self.inline(a.note)}</p>\n" if a.note else ""
        caption = m.math(m.mrow(self.print(a.symbol), m.mo("\u2248" if a.approx else "=")))
        return (f'<div class="question" id="q{a.number}">{points}<p><strong>{a.number}.</strong> '
                f"{m.escape(a.what[:1].upper() + a.what[1:])}</p>\n{note}"
                + pg.table(grid, list(a.row_labels), list(a.col_labels) if a.col_labels else None,
                           caption=caption, brackets=True) + "</div>\n")

    def _print_WrongAnswers(self, w: WrongAnswers) -> str:
        out = []
        for number, step, wrongs in w.rows:
            rows = "".join(f'<tr><th scope="row">{m.escape(x.code)}<br><span class="note">'
                           f"{m.escape(x.detail)}</span></th><td>"
                           + "; ".join(", ".join(m.escape(_value_text(t)) for t in row) for row in x.values)
                           + "</td></tr>" for x in wrongs)
            out.append(f"<h3>Question {number} ({m.escape(step)})</h3>\n"
                       f'<div class="scroll"><table class="wrong"><thead><tr><th scope="col">Mistake</th>'
                       f'<th scope="col">What it gives (row by row)</th></tr></thead><tbody>{rows}'
                       "</tbody></table></div>\n")
        return "".join(out)

    def _print_Derivation(self, d: Derivation) -> str:
        self.numbers.update(section_numbers(d.doc))
        return "".join(self.print(child) for child in d.doc.children if not isinstance(child, b.Summary))


def sheet_latex(doc: b.Document) -> str:
    """A sheet's or key's LaTeX body."""
    return WorksheetLatexPrinter().doprint(doc)


def sheet_html(doc: b.Document) -> str:
    """A sheet or key as one self-contained HTML page."""
    return WorksheetHtmlPrinter().doprint(doc)


def combined_latex(bodies: list[str]) -> str:
    """Several sheets (or keys) in one body, each starting on an odd page."""
    return f"\n{ODD_PAGE}\n".join(bodies)


def _breakable(label: str) -> str:
    """A column label for a narrow header cell: escaped, with a break allowed after each ``_``."""
    return r"\_\allowbreak{}".join(tex_escape(piece) for piece in label.split("_"))
