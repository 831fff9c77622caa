"""Pedagogical forms: how a person writes a value, separate from the value.

SymPy rewrites 2/√3 as 2√3/3 the moment it is built.  The lesson writes
2/√3, and so do students.  These helpers recover the hand-written shape of
the scaled and shifted scores (a rational over √d_k) and of the softmax
entries (exponentials of those), for the text and LaTeX views.  Equality and
evaluation never use these forms; they only decide how a value is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from typing import TYPE_CHECKING

import sympy

from symattn.problem import Problem

if TYPE_CHECKING:
    from symattn.trace import Trace


@dataclass(frozen=True)
class Surd:
    """The value ``coefficient / √radicand`` (``radicand`` None means a plain rational)."""

    coefficient: Fraction
    radicand: int | None = None

    @property
    def is_zero(self) -> bool:
        return self.coefficient == 0

    def text(self) -> str:
        """Unicode, as written by hand: ``2/√3``, ``−8/√3``, ``5/(2√2)``, ``3/4``."""
        c = self.coefficient
        sign = "−" if c < 0 else ""
        num, den = abs(c.numerator), c.denominator
        if self.radicand is None or c == 0:
            return f"{sign}{num}" if den == 1 else f"{sign}{num}/{den}"
        root = f"√{self.radicand}"
        return f"{sign}{num}/{root}" if den == 1 else f"{sign}{num}/({den}{root})"

    def latex(self) -> str:
        """LaTeX, as written by hand: ``\\frac{2}{\\sqrt{3}}``."""
        c = self.coefficient
        sign = "-" if c < 0 else ""
        num, den = abs(c.numerator), c.denominator
        if self.radicand is None or c == 0:
            return f"{sign}{num}" if den == 1 else rf"{sign}\frac{{{num}}}{{{den}}}"
        root = rf"\sqrt{{{self.radicand}}}"
        bottom = root if den == 1 else f"{den}{root}"
        return rf"{sign}\frac{{{num}}}{{{bottom}}}"

    def latex_slash(self) -> str:
        """LaTeX with a slash, for exponents: ``-8/\\sqrt{3}``, ``5/(2\\sqrt{2})``."""
        c = self.coefficient
        sign = "-" if c < 0 else ""
        num, den = abs(c.numerator), c.denominator
        if self.radicand is None or c == 0:
            return f"{sign}{num}" if den == 1 else f"{sign}{num}/{den}"
        root = rf"\sqrt{{{self.radicand}}}"
        return f"{sign}{num}/{root}" if den == 1 else f"{sign}{num}/({den}{root})"


def _rational(x: sympy.Expr) -> Fraction | None:
    return Fraction(int(x.p), int(x.q)) if x.is_Rational else None


def scale_form(problem: Problem) -> tuple[Fraction, int | None] | None:
    """The scale as ``c/√d_k`` (c rational), or a rational; None if neither."""
    p = problem
    if p.scale.is_Rational:
        return _rational(p.scale), None
    c = sympy.expand(p.scale * sympy.sqrt(p.d_k))
    if c.is_Rational:
        return _rational(c), p.d_k
    return None


def _as_rational(x: sympy.Expr) -> Fraction | None:
    return _rational(x) if isinstance(x, sympy.Basic) else None


def scale_formula(problem: Problem) -> str:
    """How the scaling step is written: ``scores / √d_k``, ``5 · scores / √d_k``, ``scores``."""
    if problem.default_scale:
        return "scores / √d_k"
    form = scale_form(problem)
    if form is None:
        return f"{unicode_text(problem.scale)} · scores"
    c, radicand = form
    factor = "" if c == 1 else f"{Surd(c).text()} · "
    if radicand is None:
        return f"{factor}scores" if factor else "scores (no scaling)"
    return f"{factor}scores / √d_k"


def scaled_form(trace: Trace, score: sympy.Expr) -> Surd | None:
    """``scale · score`` in hand form, when the score is rational."""
    form = scale_form(trace.problem)
    s = _as_rational(score)
    if form is None or s is None:
        return None
    c, radicand = form
    return Surd(c * s, radicand)


def scaled_text(trace: Trace, score: sympy.Expr) -> str:
    """``scale · score`` as a person writes it (falls back to SymPy's form)."""
    form = scaled_form(trace, score)
    return form.text() if form is not None else unicode_text(trace.problem.scale * score)


def shifted_form(trace: Trace, i: int, j: int) -> Surd | None:
    """The shifted score of row i, key j, in hand form."""
    return scaled_form(trace, trace.engine.delta(i, j))


def exp_text(form: Surd | None, fallback: sympy.Expr) -> str:
    """``e^(−8/√3)``, ``1`` for e^0."""
    if form is not None:
        if form.is_zero:
            return "1"
        return f"e^({form.text()})"
    return unicode_text(sympy.exp(fallback))


def exp_latex(form: Surd | None, fallback: sympy.Expr) -> str:
    if form is not None:
        return "1" if form.is_zero else f"e^{{{form.latex()}}}"
    return sympy.latex(sympy.exp(fallback))


class _UnicodePrinter(sympy.printing.str.StrPrinter):
    """One-line Unicode: √3, e^(x), ·, −; for exact values with no hand form."""

    def _print_Pow(self, expr: sympy.Pow, rational: bool = False) -> str:
        base, ex = expr.as_base_exp()
        if ex == sympy.S.Half:
            inner = self._print(base)
            return f"√{inner}" if base.is_Atom else f"√({inner})"
        if ex == -sympy.S.Half:
            inner = self._print(base)
            return f"1/√{inner}" if base.is_Atom else f"1/√({inner})"
        return super()._print_Pow(expr, rational).replace("**", "^")

    def _print_exp(self, expr: sympy.Expr) -> str:
        return f"e^({self._print(expr.args[0])})"

    def _print_Exp1(self, expr: sympy.Expr) -> str:
        return "e"

    def _print_Pi(self, expr: sympy.Expr) -> str:
        return "π"

    def _print_NegativeInfinity(self, expr: sympy.Expr) -> str:
        return "−∞"


def unicode_text(expr: sympy.Expr) -> str:
    """A one-line Unicode rendering of an exact value."""
    text = _UnicodePrinter({"order": "none"}).doprint(expr)
    return text.replace("**", "^").replace("*", "·").replace("-", "−")


def softmax_terms(trace: Trace, i: int) -> list[tuple[str, int, list[int]]]:
    """Row i's distinct exponentials: (text, multiplicity, keys), in key order."""
    return _distinct_terms(trace, i, lambda j: exp_text(shifted_form(trace, i, j),
                                                        trace.engine.exponent(i, j)))


def _distinct_terms(trace: Trace, i: int, written) -> list[tuple[str, int, list[int]]]:
    """Row i's allowed keys grouped by how their exponential is written, in key order."""
    terms: dict[str, tuple[int, list[int]]] = {}
    for j in trace.engine.rows[i].allowed:
        text = written(j)
        count, keys = terms.get(text, (0, []))
        terms[text] = (count + 1, [*keys, j])
    return [(t, c, k) for t, (c, k) in terms.items()]


def _times(count: sympy.Expr, text: str) -> str:
    if text == "1":
        return unicode_text(count)
    if count == 1:
        return text
    c = unicode_text(count)
    return f"({c})·{text}" if c.startswith("−") or " " in c else f"{c}·{text}"


def row_sum_text(trace: Trace, i: int) -> str:
    """The softmax denominator of row i, like terms collected: ``e^(−2/√3) + 2``."""
    parts = [_times(sympy.Integer(c), t) for t, c, _ in softmax_terms(trace, i)]
    return _join_sum(parts)


def _join_sum(parts: list[str]) -> str:
    text = parts[0] if parts else "0"
    for part in parts[1:]:
        text += f" − {part[1:]}" if part.startswith("−") else f" + {part}"
    return text


def weight_text(trace: Trace, i: int, j: int) -> str:
    """A weight as the fraction of exponentials it is: ``e^(−2/√3) / (e^(−2/√3) + 2)``."""
    if not trace.engine.is_allowed(i, j):
        return "0"
    top = exp_text(shifted_form(trace, i, j), trace.engine.exponent(i, j))
    terms = softmax_terms(trace, i)
    if len(terms) == 1:
        return unicode_text(sympy.Rational(1, terms[0][1]))
    return f"{top} / ({row_sum_text(trace, i)})"


def output_text(trace: Trace, i: int, c: int) -> str:
    """An output entry as Σ v·e^(…) over the row sum, like terms collected."""
    terms = softmax_terms(trace, i)
    V = trace.engine.V
    parts = []
    for text, _count, keys in terms:
        coefficient = sympy.Add(*[V.exact(j, c) for j in keys])
        if coefficient != 0:
            parts.append(_times(coefficient, text))
    if len(terms) == 1:
        return unicode_text(trace.engine.output(i, c))
    return f"({_join_sum(parts)}) / ({row_sum_text(trace, i)})"


# -- LaTeX forms (the same hand-written shapes, for render/latex.py) ---------------

def latex_text(expr: sympy.Expr) -> str:
    """An exact value in LaTeX when it has no hand form (SymPy's printer, −∞ as -\\infty)."""
    if expr is sympy.S.NegativeInfinity:
        return r"-\infty"
    return sympy.latex(expr)


def factor_latex(value: sympy.Expr) -> str:
    """A factor in a written product: ``(-3)``, ``(1 + \\sqrt{2})``, as by hand."""
    text = latex_text(value)
    if text.startswith("-") or any(op in text[1:] for op in ("+", "-")):
        return f"({text})"
    return text


def scaled_latex(trace: Trace, score: sympy.Expr) -> str:
    """``scale · score`` in LaTeX as a person writes it: ``\\frac{2}{\\sqrt{3}}``."""
    form = scaled_form(trace, score)
    return form.latex() if form is not None else latex_text(trace.problem.scale * score)


def shifted_latex(trace: Trace, i: int, j: int) -> str:
    """The shifted score of row i, key j, in LaTeX (``-\\infty`` where masked)."""
    if not trace.engine.is_allowed(i, j):
        return r"-\infty"
    form = shifted_form(trace, i, j)
    return form.latex() if form is not None else latex_text(trace.engine.shifted(i, j))


def exp_entry_latex(trace: Trace, i: int, j: int) -> str:
    """``e^{-\\frac{8}{\\sqrt{3}}}``, ``1`` for e^0, ``0`` where masked."""
    if not trace.engine.is_allowed(i, j):
        return "0"
    form = shifted_form(trace, i, j)
    if form is not None:
        return "1" if form.is_zero else f"e^{{{form.latex_slash()}}}"
    return exp_latex(None, trace.engine.exponent(i, j))


def softmax_terms_latex(trace: Trace, i: int) -> list[tuple[str, int, list[int]]]:
    """Row i's distinct exponentials in LaTeX: (latex, multiplicity, keys), in key order."""
    return _distinct_terms(trace, i, lambda j: exp_entry_latex(trace, i, j))


def _times_latex(count: sympy.Expr, text: str) -> str:
    if text == "1":
        return latex_text(count)
    if count == 1:
        return text
    return f"{factor_latex(count)}\\,{text}"


def _join_sum_latex(parts: list[str]) -> str:
    text = parts[0] if parts else "0"
    for part in parts[1:]:
        text += f" - {part[1:]}" if part.startswith("-") else f" + {part}"
    return text


def row_sum_latex(trace: Trace, i: int) -> str:
    """The softmax denominator of row i in LaTeX, like terms collected."""
    return _join_sum_latex([_times_latex(sympy.Integer(c), t)
                            for t, c, _ in softmax_terms_latex(trace, i)])


def weight_latex(trace: Trace, i: int, j: int) -> str:
    """A weight as the fraction of exponentials it is: ``\\frac{e^{…}}{e^{…} + 2}``."""
    if not trace.engine.is_allowed(i, j):
        return "0"
    terms = softmax_terms_latex(trace, i)
    if len(terms) == 1:
        return latex_text(sympy.Rational(1, terms[0][1]))
    return rf"\frac{{{exp_entry_latex(trace, i, j)}}}{{{row_sum_latex(trace, i)}}}"


def output_latex(trace: Trace, i: int, c: int) -> str:
    """An output entry as Σ v·e^{…} over the row sum, like terms collected."""
    terms = softmax_terms_latex(trace, i)
    if len(terms) == 1:
        return latex_text(trace.engine.output(i, c))
    V = trace.engine.V
    parts = []
    for text, _count, keys in terms:
        coefficient = sympy.Add(*[V.exact(j, c) for j in keys])
        if coefficient != 0:
            parts.append(_times_latex(coefficient, text))
    return rf"\frac{{{_join_sum_latex(parts)}}}{{{row_sum_latex(trace, i)}}}"
