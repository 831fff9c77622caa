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
