"""The LaTeX printer's math: one ``_print_<ClassName>`` per hand-form node, as LaTeX math.

``\\frac{2}{\\sqrt{3}}``, ``e^{-8/\\sqrt{3}}`` with slashed fractions in exponents,
``2\\cdot(-3)``; token names and words escaped with ``texutil``.  The base of
:class:`~symattn.document.printers.latex.LatexPrinter`, kept apart so each module stays small
(as ``html_math`` is for the HTML printer).
"""

from __future__ import annotations

from symattn.document.blocks import (
    Approx, Chain, Decimal, Dots, Exact, Exp, Factor, Frac, Func, Group, Int, Mul, Neg, Product,
    Row, Seq, SigmaSum, Sqrt, Sub, Sum, Sup, Sym, Token, Words,
)
from symattn.document.printers.base import Printer
from symattn.document.support.texutil import decimal_latex, tex_escape
from symattn.exact.sympytext import latex_text
from symattn.notation.nodes import RELATIONS as _RELATIONS

__all__ = ["LONG_SUM", "LatexMath", "PER_LINE", "aligned", "chunks", "display", "fenced", "inline",
           "product_latex"]


def display(math: str) -> str:
    return f"\\[\n{math}\n\\]"


def inline(math: str) -> str:
    return f"${math}$"


def aligned(equations: list[str]) -> str:
    return "\\begin{align*}\n" + " \\\\\n".join(equations) + "\n\\end{align*}"


def product_latex(a: str, b: str) -> str:
    """``2\\cdot 1``, ``2\\cdot(-3)``: a written product, negatives already in parentheses."""
    if "\\times" in a:
        a = fenced(a)
    return f"{a}\\cdot{b}" if b.startswith(("(", "\\")) else f"{a}\\cdot {b}"


def fenced(text: str) -> str:
    """``(x)``, or ``\\left( x \\right)`` when x holds a stacked fraction (the parentheses grow with it)."""
    return f"\\left({text}\\right)" if "\\frac" in text else f"({text})"


#: Terms per line when a long sum or list is broken over lines.
PER_LINE = 4
#: A fraction whose numerator or denominator sums more terms than this stacks them on lines.
LONG_SUM = 6


def chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[k:k + size] for k in range(0, len(items), size)] or [[]]


class LatexMath(Printer):
    """LaTeX math for every math node, and running text with math in it."""

    def _print_Int(self, node: Int, **ctx) -> str:
        return str(node.value)

    def _print_Exact(self, node: Exact, **ctx) -> str:
        return latex_text(node.value)

    def _print_Decimal(self, node: Decimal, **ctx) -> str:
        return decimal_latex(node.value, scientific=node.scientific)

    def _print_Sym(self, node: Sym, **ctx) -> str:
        name = node.name if node.name.isascii() else tex_escape(node.name)   # θ: \theta
        name = rf"\{node.accent}{{{name}}}" if node.accent in ("tilde", "hat", "bar") else name
        return f"{name}_{{{node.sub if node.sub.isascii() else tex_escape(node.sub)}}}" if node.sub else name

    def _print_Words(self, node: Words, **ctx) -> str:
        return f"\\text{{{tex_escape(node.text)}}}"

    def _print_Token(self, node: Token, **ctx) -> str:
        return f"\\text{{{tex_escape(node.name)}}}"

    def _print_Dots(self, node: Dots, **ctx) -> str:
        return r"\vdots" if node.vertical else r"\cdots"

    def _print_Neg(self, node: Neg, **ctx) -> str:
        return "-" + self.print(node.operand, **ctx)

    def _print_Frac(self, node: Frac, exponent: bool = False, **ctx) -> str:
        num = self.print(node.numerator, exponent=exponent)
        den = self.print(node.denominator, exponent=exponent)
        if exponent:   # e^{-8/\sqrt{3}}: a stacked fraction in an exponent is too small to read
            return f"{num}/({den})" if isinstance(node.denominator, (Mul, Product, Sum)) else f"{num}/{den}"
        if isinstance(node.numerator, Sum) and len(node.numerator.terms) > LONG_SUM:
            num = self._stacked(node.numerator)
        if isinstance(node.denominator, Sum) and len(node.denominator.terms) > LONG_SUM:
            den = self._stacked(node.denominator)
        return f"\\frac{{{num}}}{{{den}}}"

    def _signed_terms(self, node: Sum) -> list[str]:
        """A sum's terms as printed, each after the first with its own + or −."""
        parts = [self.print(t) for t in node.terms] or ["0"]
        return parts[:1] + [f"- {x[1:]}" if x.startswith("-") else f"+ {x}" for x in parts[1:]]

    def _stacked(self, node: Sum) -> str:
        """A long sum on several centred lines (a numerator or denominator wider than the page)."""
        lines = [" ".join(part) for part in chunks(self._signed_terms(node), PER_LINE)]
        return "\\begin{array}{c}" + " \\\\ ".join(lines) + "\\end{array}"

    def _print_Sqrt(self, node: Sqrt, **ctx) -> str:
        return f"\\sqrt{{{self.print(node.radicand, **ctx)}}}"

    def _print_Func(self, node: Func, **ctx) -> str:
        if node.name == "abs":
            return f"\\left|{self.print(node.argument, **ctx)}\\right|"
        name = f"\\{node.name}" if node.name in ("tanh", "cos", "sin", "exp", "log") \
            else f"\\operatorname{{{node.name}}}"
        return f"{name}\\left({self.print(node.argument, **ctx)}\\right)"

    def _print_Exp(self, node: Exp, **ctx) -> str:
        return f"e^{{{self.print(node.exponent, exponent=True)}}}"

    def _print_Mul(self, node: Mul, **ctx) -> str:
        text = ""
        for k, f in enumerate(node.factors):
            if k:
                text += "" if isinstance(f, Sqrt) else (r"\," if isinstance(f, (Exp, Exact)) else " ")
            part = self.print(f, **ctx)
            text += fenced(part) if k and isinstance(f, (Sum, Neg)) else part
        return text

    def _print_Product(self, node: Product, **ctx) -> str:
        parts = [self.print(f, **ctx) for f in node.factors]
        text = parts[0]
        for part in parts[1:]:
            text = product_latex(text, part)
        return text

    def _print_Group(self, node: Group, **ctx) -> str:
        return fenced(self.print(node.operand, **ctx))

    def _print_Factor(self, node: Factor, **ctx) -> str:
        text = self.print(node.operand, **ctx)
        if text.startswith("-") or any(op in text[1:] for op in ("+", "-")):
            return fenced(text)
        return text

    def _print_Sum(self, node: Sum, **ctx) -> str:
        parts = [self.print(t, **ctx) for t in node.terms]
        text = parts[0] if parts else "0"
        for part in parts[1:]:
            text += f" - {part[1:]}" if part.startswith("-") else f" + {part}"
        return text

    def _print_SigmaSum(self, node: SigmaSum, **ctx) -> str:
        index = node.index if len(node.index) == 1 else \
            "{" + "".join(f" {_RELATIONS[c]} " if c in _RELATIONS else c for c in node.index) + "}"
        body = self.print(node.body, **ctx)
        if isinstance(node.body, Sum):
            body = fenced(body)
        return f"\\sum_{index} {body}"

    def _print_Row(self, node: Row, **ctx) -> str:
        return r"\left[" + ",\\ ".join(self.print(x, **ctx) for x in node.items) + r"\right]"

    def _print_Seq(self, node: Seq, **ctx) -> str:
        return ",\\ ".join(self.print(x, **ctx) for x in node.items)

    def _print_Sub(self, node: Sub, **ctx) -> str:
        indices = [self.print(x, **ctx) for x in node.indices]
        if all(len(x) == 1 for x in indices):     # A_{ij}, shifted_j
            index = "".join(indices) if len(indices) == 1 else "{" + "".join(indices) + "}"
        else:
            index = "{" + ",\\,".join(indices) + "}"
        return f"{self.print(node.base, **ctx)}_{index}"

    def _print_Sup(self, node: Sup, **ctx) -> str:
        base = self.print(node.base, **ctx)
        if isinstance(node.base, (Sum, Neg, Frac, Product, Mul)):
            base = fenced(base)
        return f"{{{base}}}^{{{self.print(node.script, **ctx)}}}"

    def _print_Approx(self, node: Approx, **ctx) -> str:
        exact, approx = self.print(node.exact, **ctx), self.print(node.approx, **ctx)
        return exact if exact == approx else f"{exact} \\approx {approx}"

    def _print_Chain(self, node: Chain, align: bool = False, **ctx) -> str:
        text = self.print(node.parts[0], **ctx)
        for k, (rel, part) in enumerate(zip(node.relations, node.parts[1:])):
            amp = "&" if align and k == 0 else ""
            text += f" {amp}{_RELATIONS[rel]} {self.print(part, **ctx)}"
        return text

    def words(self, parts) -> str:
        """Running text: strings escaped, token names set apart (typewriter), other math inline."""
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(tex_escape(part))
            elif isinstance(part, Token):
                out.append(f"\\texttt{{{tex_escape(part.name)}}}")
            elif isinstance(part, Row):   # in a sentence: plain brackets, a line may break after a comma
                out.append(inline("[" + ",\\allowbreak\\ ".join(self.print(x) for x in part.items) + "]"))
            else:
                out.append(inline(self.print(part)))
        return "".join(out)
