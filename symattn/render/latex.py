"""The LaTeX view: the derivation as a compilable document, a fragment, or Jupyter math.

The sections follow the terminal view (render/text.py): inputs, Q K V,
scores with the dot products written out, the scaled scores as written by
hand (``\\frac{2}{\\sqrt{3}} \\approx 1.15``), the softmax with the
max-subtraction trick, the weights as a heat map, the output, and the
lesson's sanity checks proved for the instance.  Nothing is recomputed:
exact values come from the Trace, every number from its certified decimals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from symattn.certify import CertifiedDecimal, Rounding, certify
from symattn.engine import NEG_INF
from symattn.render import forms
from symattn.render.heatmap import heatmap
from symattn.render.jupyter import step_math, step_repr_latex, trace_repr_latex  # noqa: F401 (re-exported)
from symattn.render.texutil import (
    decimal_latex, elide, matrix_latex, row_latex, tex_escape,
)
from symattn.trace import Step, Trace

__all__ = ["LatexOptions", "LatexRenderer", "document", "render_latex",
           "step_math", "step_repr_latex", "trace_repr_latex"]

SMALL_SCORES = 9      # at most this many scores: every dot product is written out
SMALL_EXACT = 16      # at most this many entries: exact softmax entries are shown


@dataclass(frozen=True)
class LatexOptions:
    """What the LaTeX view shows and how numbers are rounded."""

    rounding: Rounding = field(default_factory=lambda: Rounding(digits=3))
    rows: tuple[int | str, ...] | None = None   # worked rows (default: first for sums, last for softmax)
    limit: int = 8                               # larger matrices elide their middle
    sci_digits: int = 3                          # a value that rounds to 0 at the places: shown to these digits


PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage[margin=2cm]{geometry}
\usepackage{amsmath,amssymb}
\usepackage[table]{xcolor}
\usepackage{array,booktabs}
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.7ex}
\allowdisplaybreaks
\pagestyle{plain}
"""


def document(body: str, title: str | None = None) -> str:
    """A complete LaTeX document around a body (the packages are in texlive-latex-base/-recommended)."""
    head = f"\\title{{{tex_escape(title)}}}\n" if title else ""
    return f"{PREAMBLE}{head}\\begin{{document}}\n{body}\\end{{document}}\n"


class LatexRenderer:
    """Renders a Trace as LaTeX; one method per section, as TextRenderer does."""

    def __init__(self, trace: Trace, options: LatexOptions | None = None) -> None:
        self.trace = trace
        self.options = options = options or LatexOptions()
        self.rounding = options.rounding
        p = trace.problem
        first = trace.step("scores")
        if options.rows:
            chosen = list(dict.fromkeys(first.row_index(r) for r in options.rows))
            self.dot_rows = self.softmax_rows = self.output_rows = chosen
        else:
            self.dot_rows, self.softmax_rows, self.output_rows = [0], [p.n - 1], [0]
        self._decimals: dict[str, list[list[str]]] = {}
        self._raw: dict[str, list[list[object]]] = {}

    # -- numbers: every one certified ----------------------------------------------
    def raw(self, name: str) -> list[list[object]]:
        if name not in self._raw:
            self._raw[name] = self.trace.step(name).decimals(self.rounding)
        return self._raw[name]

    def dec(self, name: str) -> list[list[str]]:
        """A step's certified decimals in LaTeX (scientific where the places round to 0)."""
        if name not in self._decimals:
            step = self.trace.step(name)
            if self.trace.engine.symbols_of(name):  # symbols: no decimals, the exact entries
                self._decimals[name] = self.exact_cells(step)
                return self._decimals[name]
            self._decimals[name] = [[self._number(step, i, j, d) for j, d in enumerate(row)]
                                    for i, row in enumerate(self.raw(name))]
        return self._decimals[name]

    def _number(self, step: Step, i: int, j: int, d: object) -> str:
        if d is NEG_INF:
            return r"-\infty"
        assert isinstance(d, CertifiedDecimal)
        if d.mantissa == 0:
            if d.exact:  # exactly 0 (a masked weight, the shifted maximum)
                return "0"
            finer = step.decimal(i, j, Rounding(digits=self.options.sci_digits))  # never 0.000
            return decimal_latex(finer, scientific=True)
        return decimal_latex(d)

    def _precision_phrase(self) -> str:
        r = self.rounding
        if r.digits is not None:
            return f"{r.digits} significant digit{'s' if r.digits != 1 else ''}"
        return (f"{r.places} decimal place{'s' if r.places != 1 else ''}; a value that rounds to 0 at "
                f"that precision is shown in scientific notation to {self.options.sci_digits} digits")

    def visible(self, count: int) -> set[int]:
        """The indices a matrix of this size shows (the middle of a large one is elided)."""
        return {k for k in elide(list(range(count)), self.options.limit) if k is not None}

    def row_sum(self, i: int) -> str:
        """Row i's softmax denominator: the terms when few, Σ notation when many."""
        if len(self.trace.engine.rows[i].allowed) <= SMALL_EXACT:
            return forms.row_sum_latex(self.trace, i)
        return r"\sum_j e^{\text{shifted}_j}"

    def exact_cells(self, step: Step) -> list[list[str]]:
        return [[forms.latex_text(v) for v in row] for row in step.rows()]

    def labelled(self, step: Step, cells: list[list[str]], col_header: bool = True) -> str:
        cols = step.col_labels if col_header else None
        return matrix_latex(cells, step.row_labels, cols, limit=self.options.limit)

    def show_matrix(self, step: Step, symbol: str, col_header: bool = False) -> str:
        """``symbol = exact ≈ decimals`` (the decimals only when they add something)."""
        exact = self.exact_cells(step)
        left = self.labelled(step, exact, col_header)
        if all(v.is_Integer for row in step.rows() for v in row) or exact == self.dec(step.name):
            return display(f"{symbol} = {left}")
        right = matrix_latex(self.dec(step.name), None, None, limit=self.options.limit)
        return display(f"{symbol} = {left} \\approx {right}")

    def heading(self, number: str, step: Step, title: str = "") -> list[str]:
        r, c = step.shape
        words = title or tex_escape(step.info.meaning[:1].upper() + step.info.meaning[1:])
        return [f"\\subsection*{{{number}. {words}}}",
                f"${step.info.latex}$ \\quad (shape ${r} \\times {c}$)", ""]

    # -- sections ------------------------------------------------------------------
    def body(self, header: bool = True) -> str:
        """The derivation without the document around it (for pasting into a lesson)."""
        sections = [self.header() if header else [], self.inputs(), self.projections(), self.scores(), self.scaled(),
                    self.masked(), self.softmax(), self.weights(), self.output(), self.checks()]
        return "\n".join(line for section in sections for line in section) + "\n"

    def render(self) -> str:
        return document(self.body())

    def header(self) -> list[str]:
        p = self.trace.problem
        title = tex_escape(p.title or "Scaled dot-product attention")
        kind = ("cross-attention" if "X_kv" in p.inputs else
                "attention from $Q$, $K$, $V$ given directly" if not p.projected else "self-attention")
        queries = ", ".join(tex_escape(t) for t in p.tokens)
        keys = ", ".join(tex_escape(t) for t in p.key_tokens)
        scale = (f"$\\frac{{1}}{{\\sqrt{{d_k}}}} = \\frac{{1}}{{\\sqrt{{{p.d_k}}}}}$" if p.default_scale
                 else f"${forms.latex_text(p.scale)}$ (instead of $1/\\sqrt{{d_k}}$)")
        dims = f"$d_k = {p.d_k}$, $d_v = {p.d_v}$" + (f", $d_{{\\text{{model}}}} = {p.d_model}$"
                                                    if p.d_model else "")
        lines = [f"\\section*{{{title}}}",
                 f"{kind.capitalize() if kind[0] != 'a' else kind[0].upper() + kind[1:]}: "
                 f"{p.n} quer{'y' if p.n == 1 else 'ies'} ({queries}) $\\times$ "
                 f"{p.m} key{'' if p.m == 1 else 's'} ({keys}); {dims}; scale {scale}.", ""]
        if p.mask is not None:
            lines += [f"Mask: {p.mask_kind} (1 = may attend, as PyTorch SDPA's boolean mask); "
                      "a blocked position gets $-\\infty$ and weight exactly 0.", ""]
        lines += [f"Exact values throughout; every decimal is correctly rounded to "
                  f"{self._precision_phrase()}, certified with ball arithmetic.", ""]
        return lines

    def inputs(self) -> list[str]:
        t = self.trace
        names = [n for n in ("X", "X_kv", "W_q", "W_k", "W_v") if n in t.step_names]
        if not names:
            return []
        lines = ["\\subsection*{Inputs}"]
        for name in names:
            step = t.step(name)
            rows = step.row_labels if name in ("X", "X_kv") else None
            cells = self.exact_cells(step)
            mat = matrix_latex(cells, rows, None, limit=self.options.limit)
            lines += [f"{tex_escape(step.info.meaning[:1].upper() + step.info.meaning[1:])} "
                      f"(${step.shape[0]} \\times {step.shape[1]}$):",
                      display(f"{step.info.latex} = {mat}")]
        return lines

    def projections(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        lines: list[str] = []
        for k, name in enumerate(("Q", "K", "V"), start=1):
            step = t.step(name)
            lines += self.heading(str(k), step)
            lines.append(self.show_matrix(step, name))
        if p.projected:
            lines += self.worked_projection()
        return lines

    def worked_projection(self) -> list[str]:
        """The query of a worked row as a combination of the rows of W_q."""
        t = self.trace
        lines = []
        W = t.step("W_q")
        for i in self.dot_rows[:3]:
            x = list(t.step("X").rows())[i]
            terms = [product_latex(forms.factor_latex(a), row_latex([forms.latex_text(v) for v in W[k]]))
                     for k, a in enumerate(x)]
            result = row_latex([forms.latex_text(v) for v in t.step("Q")[i]])
            token = tex_escape(t.problem.tokens[i])
            lines += [f"By hand, the query of \\emph{{{token}}} is its embedding times $W_q$:",
                      display(f"q_{{\\text{{{token}}}}} = " + " + ".join(_shorten(terms)) + f" = {result}")]
        return lines

    def scores(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        step = t.step("scores")
        lines = self.heading("4", step)
        lines.append(self.show_matrix(step, "S", col_header=True))
        every = p.n * p.m <= SMALL_SCORES
        rows = range(p.n) if every else self.dot_rows
        Q, K = list(t.step("Q").rows()), list(t.step("K").rows())
        lines.append("Each score is a dot product, a sum of products in index order:"
                     if every else "The dot products of the worked rows:")
        eqs = []
        for i in rows:
            for j in range(p.m) if p.m <= self.options.limit else elide(list(range(p.m)), self.options.limit):
                if j is None:
                    eqs.append(r"&\;\;\vdots")
                    continue
                products = _shorten([product_latex(forms.factor_latex(a), forms.factor_latex(b))
                                     for a, b in zip(Q[i], K[j])])
                eqs.append(f"S_{{\\text{{{tex_escape(p.tokens[i])}}},\\,\\text{{{tex_escape(p.key_tokens[j])}}}}}"
                           f" &= {' + '.join(products)} = {forms.latex_text(step[i, j])}")
        lines.append(aligned(eqs))
        return lines

    def scaled(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        step = t.step("scaled")
        lines = self.heading("5", step, "Scaled scores")
        if p.default_scale:
            root = decimal_latex(certify(sympy.sqrt(p.d_k), self.rounding))
            lines.append(f"$d_k = {p.d_k}$, so every score is divided by "
                         f"$\\sqrt{{{p.d_k}}} \\approx {root}$"
                         + (" (a rational scale: the scores stay fractions)." if sympy.sqrt(p.d_k).is_Rational
                            else ", written as a person writes it:"))
        scores = t.step("scores")
        rows, cols = self.visible(p.n) | set(self.dot_rows), self.visible(p.m)
        cells = [[forms.scaled_latex(t, scores[i, j]) if i in rows and j in cols else ""
                  for j in range(p.m)] for i in range(p.n)]
        right = matrix_latex(self.dec("scaled"), None, None, limit=self.options.limit)
        lines.append(display(f"\\frac{{S}}{{\\sqrt{{d_k}}}} = {self.labelled(step, cells)} \\approx {right}"
                             if p.default_scale else f"{step.info.latex} = {self.labelled(step, cells)} "
                             f"\\approx {right}"))
        for i in self.dot_rows:
            token = tex_escape(p.tokens[i])
            shown = elide(list(range(p.m)), self.options.limit)
            pick = lambda values: [r"\cdots" if j is None else values[j] for j in shown]  # noqa: E731
            raw = row_latex(pick([forms.latex_text(scores[i, j]) if j in cols else "" for j in range(p.m)]))
            lines.append(f"Row \\emph{{{token}}}: " + inline(f"{raw} \\to {row_latex(pick(cells[i]))} \\approx "
                                                            f"{row_latex(pick(self.dec('scaled')[i]))}") + ".")
        return lines

    def masked(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        if "masked" not in t.step_names:
            return []
        step = t.step("masked")
        scores = t.step("scores")
        rows, cols = self.visible(p.n), self.visible(p.m)
        cells = [[("" if i not in rows or j not in cols else forms.scaled_latex(t, scores[i, j])
                   if t.engine.is_allowed(i, j) else r"-\infty") for j in range(p.m)] for i in range(p.n)]
        right = matrix_latex(self.dec("masked"), None, None, limit=self.options.limit)
        return [*self.heading("5a", step, "Masking"), tex_escape(step.info.meaning[:1].upper()
                                                                 + step.info.meaning[1:]) + ".",
                display(f"\\tilde S = {self.labelled(step, cells)} \\approx {right}")]

    def softmax(self) -> list[str]:
        lines = ["\\subsection*{6. Softmax, with the max-subtraction trick}",
                 "Subtracting the row maximum changes no weight (the factor $e^{-\\max}$ cancels above "
                 "and below the fraction bar) but keeps every exponent $\\le 0$:",
                 display(r"\operatorname{softmax}(z)_j = \frac{e^{z_j}}{\sum_k e^{z_k}}"
                         r" = \frac{e^{z_j - \max z}}{\sum_k e^{z_k - \max z}}")]
        for i in self.softmax_rows:
            lines += self.softmax_row(i)
        return lines

    def softmax_row(self, i: int) -> list[str]:
        t, p = self.trace, self.trace.problem
        e = t.engine
        allowed = list(e.rows[i].allowed)
        r = e.rows[i].argmax
        token = tex_escape(p.tokens[i])
        scores = t.step("scores")
        shown = allowed if len(allowed) <= self.options.limit else [
            j for j in elide(allowed, self.options.limit)]
        pick = lambda values: [r"\cdots" if j is None else values[j] for j in shown]  # noqa: E731
        needed = {j for j in shown if j is not None} | {r}
        scaled = {j: forms.scaled_latex(t, scores[i, j]) for j in needed if j is not None}
        shifted = {j: forms.shifted_latex(t, i, j) for j in needed if j is not None}
        exps = {j: forms.exp_entry_latex(t, i, j) for j in needed if j is not None}
        dec = lambda name: pick(self.dec(name)[i])  # noqa: E731
        blocked = [p.key_tokens[j] for j in range(p.m) if j not in allowed]
        lines = [f"\\paragraph{{Row \\emph{{{token}}}.}}"]
        if blocked:
            lines.append("The mask blocks " + ", ".join(f"\\emph{{{tex_escape(b)}}}" for b in blocked)
                         + ": weight exactly 0.")
        exp_terms = [f"{x} \\approx {d}" if x not in ("1", "0") else ("e^{0} = 1" if x == "1" else "0")
                     for x, d in zip(pick(exps), dec("exp")) if x != r"\cdots"]
        eqs = [f"\\text{{scaled}} &= {row_latex(pick(scaled))} \\approx {row_latex(dec('scaled'))}",
               (f"\\max &= {scaled[r]} \\approx {self.dec('scaled')[i][r]}"
                f" \\quad (\\text{{key {tex_escape(p.key_tokens[r])}}})") if r is not None else
               "\\max &: \\text{left open by the symbols, so nothing is subtracted}",
               f"\\text{{shifted}} = \\text{{scaled}} - \\max &= {row_latex(pick(shifted))} \\approx "
               f"{row_latex(dec('shifted'))}",
               "e^{\\text{shifted}} &: \\quad " + ",\\quad ".join(exp_terms),
               f"\\text{{row sum}} &= {self.row_sum(i)} \\approx {self.dec('row_sum')[i][0]}",
               f"\\text{{weights}} = \\frac{{e^{{\\text{{shifted}}}}}}{{\\text{{row sum}}}} &\\approx "
               f"{row_latex(dec('weights'))}"]
        lines.append(aligned(eqs))
        if len(allowed) <= SMALL_EXACT:
            j = allowed[0]
            lines.append(f"Exactly, the weight of \\emph{{{tex_escape(p.key_tokens[j])}}} is a fraction of "
                         "exponentials:")
            lines.append(display(f"A_{{\\text{{{token}}},\\,\\text{{{tex_escape(p.key_tokens[j])}}}}} = "
                                 f"{forms.weight_latex(t, i, j)} \\approx {self.dec('weights')[i][j]}"))
        return lines

    def weights(self) -> list[str]:
        t = self.trace
        step = t.step("weights")
        lines = self.heading("7", step, "Attention weights")
        if t.engine.symbols_of("weights"):
            return [*lines, display(f"A = {self.labelled(step, self.dec('weights'))}")]
        shade = t.step("weights").decimals(Rounding(places=2))
        lines += ["Each row of the heat map is one query; shading runs on the fixed scale 0 (white) "
                  "to 1 (darkest), the certified weight in each cell.", "",
                  heatmap(self.dec("weights"), shade, step.row_labels, step.col_labels,
                          limit=self.options.limit), ""]
        return lines

    def output(self) -> list[str]:
        t, p = self.trace, self.trace.problem
        step = t.step("output")
        lines = self.heading("8", step, "Output")
        lines.append(display(f"O = AV \\approx {self.labelled(step, self.dec('output'), col_header=False)}"))
        V = list(t.step("V").rows())
        for i in self.output_rows:
            token = tex_escape(p.tokens[i])
            w = self.dec("weights")[i]
            allowed = list(t.engine.rows[i].allowed)
            terms = _shorten([product_latex(w[j], row_latex([forms.latex_text(v) for v in V[j]]))
                              for j in allowed])
            lines += [f"Row \\emph{{{token}}} blends the value rows with its weights:",
                      display(f"{' + '.join(terms)} \\approx {row_latex(self.dec('output')[i])}")]
            if len(allowed) <= SMALL_EXACT:
                lines += ["Exactly, its first entry is",
                          display(f"O_{{\\text{{{token}}},0}} = {forms.output_latex(t, i, 0)}"
                                  f" \\approx {self.dec('output')[i][0]}")]
        return lines

    def checks(self) -> list[str]:
        """The lesson's sanity checks, stated and proved for this instance."""
        t, p = self.trace, self.trace.problem
        i = self.softmax_rows[0]
        token = tex_escape(p.tokens[i])
        lines = ["\\subsection*{9. Checks, proved for this instance}",
                 "\\textbf{Each row of weights sums to exactly 1.} Row $i$ is $e^{\\text{shifted}_{ij}}$ "
                 "divided by their own sum, so the numerators add up to the denominator. For row "
                 f"\\emph{{{token}}}:",
                 display(f"\\sum_j A_{{\\text{{{token}}},j}} = \\frac{{{self.row_sum(i)}}}"
                         f"{{{self.row_sum(i)}}} = 1"),
                 "\\textbf{Each output lies between the smallest and largest entry of its $V$ column.} "
                 "Every weight is $\\ge 0$ (an exponential over a positive sum, or 0 where masked) and each "
                 "row sums to 1, so $O_{ic} = \\sum_j A_{ij} V_{jc}$ is a weighted average of column $c$:"]
        Vcols = list(zip(*t.step("V").rows()))
        out = self.dec("output")
        eqs = []
        for c in elide(list(range(p.d_v)), self.options.limit):
            if c is None:
                eqs.append(r"&\;\;\vdots")
                continue
            low, high = min(Vcols[c]), max(Vcols[c])
            values = [out[r][c] if r is not None else r"\dots"
                      for r in elide(list(range(p.n)), self.options.limit)]
            listed = ",\\ ".join(values)
            eqs.append(f"\\text{{column }}{c}:\\quad {self.bound(low)} &\\le "
                       f"{listed} \\le {self.bound(high)}")
        lines.append(aligned(eqs))
        return lines


    def bound(self, value) -> str:
        """A bound of the convex-hull check with its decimal (``\\frac{7}{6} \\approx 1.17``)
        when the two differ, so ``1.17 \\le \\frac{7}{6}`` never reads as false."""
        exact = forms.latex_text(value)
        if value.free_symbols or not value.is_number:
            return exact
        d = certify(value, self.options.rounding)
        return exact if d.exact else f"{exact} \\approx {decimal_latex(d)}"


# -- small LaTeX builders ----------------------------------------------------------

def display(math: str) -> str:
    return f"\\[\n{math}\n\\]"


def inline(math: str) -> str:
    return f"${math}$"


def aligned(equations: list[str]) -> str:
    return "\\begin{align*}\n" + " \\\\\n".join(equations) + "\n\\end{align*}"


def product_latex(a: str, b: str) -> str:
    """``2\\cdot 1``, ``2\\cdot(-3)``: a written product, negatives already in parentheses."""
    if "\\times" in a:
        a = f"({a})"
    return f"{a}\\cdot{b}" if b.startswith(("(", "\\")) else f"{a}\\cdot {b}"


def _shorten(terms: list[str], limit: int = 10) -> list[str]:
    if len(terms) <= limit:
        return terms
    return [*terms[:3], r"\cdots", *terms[-2:]]


def render_latex(trace: Trace, options: LatexOptions | None = None, *, fragment: bool = False) -> str:
    """The whole derivation: a complete document, or with ``fragment`` just its body."""
    renderer = LatexRenderer(trace, options)
    return renderer.body() if fragment else renderer.render()
