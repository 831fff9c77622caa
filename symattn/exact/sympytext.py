"""One-line Unicode for exact SymPy values with no hand form: √3, e^(x), ·, −, π, −∞.

A leaf module (SymPy only), so the step table and the Trace can use it
without importing any view.
"""

from __future__ import annotations

import sympy


class _UnicodePrinter(sympy.printing.str.StrPrinter):
    """SymPy's str printer with the lesson's symbols."""

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


def unicode_text(expr: sympy.Basic) -> str:
    """A one-line Unicode rendering of an exact value."""
    text = _UnicodePrinter({"order": "none"}).doprint(expr)
    return text.replace("**", "^").replace("*", "·").replace("-", "−")


def latex_text(expr: sympy.Basic) -> str:
    """An exact value in LaTeX (SymPy's printer; −∞ as -\\infty)."""
    if expr is sympy.S.NegativeInfinity:
        return r"-\infty"
    return sympy.latex(expr)


class _HandPrinter(_UnicodePrinter):
    """The lesson's hand forms in one line: a rational times √n is written over √n, as
    ``explain`` writes the scaled scores (−2√3/3 is −2/√3, 4√3 is 12/√3), and a sum puts its
    plain numbers last (e^(−2/√3) + 2, 2/√3 − 1/4)."""

    def _print_Mul(self, expr: sympy.Mul) -> str:
        surd = _surd(expr)
        return surd if surd is not None else super()._print_Mul(expr)

    def _print_Add(self, expr: sympy.Add, order: str | None = None) -> str:
        terms = sorted(expr.args, key=lambda t: t.is_number and t.is_Rational)   # stable: numbers last
        text = self._print(terms[0])
        for term in terms[1:]:
            shown = self._print(term)
            text += f" - {shown[1:]}" if shown.startswith("-") else f" + {shown}"
        return text


def surd_parts(expr: sympy.Expr) -> tuple[bool, int, int, int] | None:
    """``c·√n`` (c rational ≠ ±1, n a whole number > 1) read as ``±(p/q)/√n`` with p/q = |c|·n:
    (negative, p, q, n), so 2√3 is 6/√3 and (5/4)√2 is 5/(2√2); None for any other value."""
    if not expr.is_Mul:
        return None
    c, rest = expr.as_coeff_Mul()
    if not c.is_Rational or c in (1, -1) or not (rest.is_Pow and rest.exp == sympy.S.Half
                                                  and rest.base.is_Integer and rest.base > 1):
        return None
    n = int(rest.base)
    top = sympy.Rational(c) * n
    return bool(top < 0), abs(int(top.p)), int(top.q), n


def _surd(expr: sympy.Mul) -> str | None:
    """``c·√n`` as ``(c·n)/√n`` in one line, or None for any other product."""
    parts = surd_parts(expr)
    if parts is None:
        return None
    negative, p, q, n = parts
    sign = "-" if negative else ""
    return f"{sign}{p}/√{n}" if q == 1 else f"{sign}{p}/({q}√{n})"


def hand_text(expr: sympy.Basic) -> str:
    """An exact value in one line as the lesson writes it by hand (``e^(−2/√3)/(e^(−2/√3) + 2)``
    where SymPy prints ``exp(-2*sqrt(3)/3)/(exp(-2*sqrt(3)/3) + 2)``): the notation of
    ``explain``, for messages a student reads.  Never parsed back: the JSON keeps SymPy's text."""
    text = _HandPrinter({"order": "none"}).doprint(expr)
    return text.replace("**", "^").replace("*", "·").replace("-", "−")
