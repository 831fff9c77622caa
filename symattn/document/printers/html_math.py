"""The HTML printer's math: one ``_print_<ClassName>`` per hand-form node, as MathML Core.

A mixin of :class:`~symattn.document.printers.html.HtmlPrinter` (kept apart so each module
stays small); ``self._script`` > 0 inside an exponent or superscript, where fractions use a
slash.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from symattn.document import blocks as b
from symattn.document.support import mathml as m
from symattn.numbers.certify import CertifiedDecimal

__all__ = ["HtmlMath"]


class HtmlMath:
    """MathML for every math node; mixed into a :class:`~symattn.document.printers.base.Printer`
    (its ``print`` dispatches here) that also has ``approx``."""

    _script = 0

    if TYPE_CHECKING:                   # provided by Printer and HtmlPrinter
        def print(self, node: Any, **context: Any) -> Any: ...

        def approx(self, exact: b.Math | str, value: b.Math | None) -> list[str]: ...

    # -- math nodes --------------------------------------------------------------------
    def _print_Int(self, n: b.Int) -> str:
        return m.mn(str(n.value))

    def _print_Exact(self, n: b.Exact) -> str:
        return m.exact(n.value, script=self._script > 0)

    def _print_Decimal(self, n: b.Decimal) -> str:
        if not isinstance(n.value, CertifiedDecimal):       # the engine's NEG_INF (a masked entry)
            return m.mrow(m.mo(m.MINUS, form="prefix"), m.mi("\u221e"))
        return m.decimal(n.value, scientific=n.scientific)

    def _print_Sym(self, n: b.Sym) -> str:
        base = m.mi(n.name)
        accent = _ACCENTS.get(getattr(n, "accent", None) or "")
        if accent:
            base = f'<mover accent="true">{base}{m.mo(accent, stretchy=False)}</mover>'
        sub = n.sub
        if sub is None and "_" in n.name.strip("_"):     # d_k, d_model: the name carries its index
            head, _, sub = n.name.partition("_")
            base = m.mi(head) if not accent else base
        return m.msub(base, m.mi(sub)) if sub else base

    def _print_Words(self, n: b.Words) -> str:
        return m.mtext(n.text)

    def _print_Token(self, n: b.Token) -> str:
        return m.token(n.name)

    def _print_Dots(self, n: b.Dots) -> str:
        return m.mo("\u22ee" if n.vertical else "\u22ef")

    def _print_Neg(self, n: b.Neg) -> str:
        inner = self.print(n.operand)
        if isinstance(n.operand, (b.Sum, b.Neg)):
            inner = m.paren(inner)
        return m.mrow(m.mo(m.MINUS, form="prefix"), inner)

    def _print_Frac(self, n: b.Frac) -> str:
        top, bottom = self.print(n.numerator), self.print(n.denominator)
        if not self._script:
            return m.mfrac(top, bottom)
        if isinstance(n.numerator, (b.Sum, b.Neg)):
            top = m.paren(top)
        if isinstance(n.denominator, (b.Sum, b.Mul, b.Product, b.Frac, b.Neg)):
            bottom = m.paren(bottom)
        return m.mrow(top, m.mo("/", stretchy=False, tight=True), bottom)

    def _print_Sqrt(self, n: b.Sqrt) -> str:
        return m.msqrt(self.print(n.radicand))

    def _print_Func(self, n: b.Func) -> str:
        if n.name == "abs":
            return m.mrow(m.mo("|", stretchy=False), self.print(n.argument), m.mo("|", stretchy=False))
        return m.mrow(m.mi(n.name, upright=True), m.paren(self.print(n.argument)))

    def _print_Exp(self, n: b.Exp) -> str:
        self._script += 1
        try:
            exponent = self.print(n.exponent)
        finally:
            self._script -= 1
        return m.msup(m.mi("e"), exponent)

    def _print_Mul(self, n: b.Mul) -> str:
        parts: list[str] = []
        for f in n.factors:
            text = self.print(f)
            if isinstance(f, (b.Sum, b.Neg)) and parts:
                text = m.paren(text)
            if parts:
                parts.append(m.mo(m.INVISIBLE_TIMES))
                if isinstance(f, b.Func):   # 5 tanh(…): a thin space before the name
                    parts.append('<mspace width="0.17em"></mspace>')
            parts.append(text)
        return m.mrow(*parts)

    def _print_Product(self, n: b.Product) -> str:
        parts: list[str] = []
        for f in n.factors:
            if parts:
                parts.append(m.mo("\u00b7"))
            parts.append(self.print(f))
        return m.mrow(*parts)

    def _print_Group(self, n: b.Group) -> str:
        return m.paren(self.print(n.operand))

    def _print_Factor(self, n: b.Factor) -> str:
        inner = self.print(n.operand)
        return m.paren(inner) if _needs_parentheses(n.operand) else inner

    def _print_Sum(self, n: b.Sum) -> str:
        parts: list[str] = []
        for term in n.terms:
            if parts:
                if isinstance(term, b.Neg):
                    parts += [m.mo(m.MINUS), self._operand(term.operand)]
                    continue
                parts.append(m.mo("+"))
            parts.append(self.print(term))
        return m.mrow(*parts) if parts else m.mn("0")

    def _operand(self, node: b.Math) -> str:
        text = self.print(node)
        return m.paren(text) if isinstance(node, b.Sum) else text

    def _print_SigmaSum(self, n: b.SigmaSum) -> str:
        return m.mrow(m.msub(m.mo("\u2211"), m.mi(n.index)), self.print(n.body))

    def _print_Row(self, n: b.Row) -> str:
        return m.row_vector([self.print(item) for item in n.items])

    def _print_Seq(self, n: b.Seq) -> str:
        parts: list[str] = []
        for item in n.items:
            if parts:
                parts.append(m.mo(","))
            parts.append(self.print(item))
        return m.mrow(*parts)

    def _print_Sub(self, n: b.Sub) -> str:
        parts: list[str] = []
        for index in n.indices:
            if parts:
                parts.append(m.mo(","))
            parts.append(self.print(index))
        return m.msub(self.print(n.base), m.mrow(*parts))

    def _print_Sup(self, n: b.Sup) -> str:
        base = self.print(n.base)
        if isinstance(n.base, (b.Sum, b.Neg, b.Frac, b.Product, b.Mul)):
            base = m.paren(base)
        self._script += 1
        try:
            script = self.print(n.script)
        finally:
            self._script -= 1
        return m.msup(base, script)

    def _print_Approx(self, n: b.Approx) -> str:
        parts = self.approx(n.exact, n.approx)
        return parts[0] if len(parts) == 1 else m.mrow(*parts)

    def _print_Chain(self, n: b.Chain) -> str:
        parts = [self.print(n.parts[0])]
        for rel, part in zip(n.relations, n.parts[1:]):
            parts += [m.mo(rel), self.print(part)]
        return m.mrow(*parts)


def _relation(node: object) -> str:
    """``≈`` when a node holds a rounded decimal, ``=`` when all it holds is exact
    (formulas of symbols, integers, decimals proved to be the exact value)."""
    if isinstance(node, b.Decimal):
        return "=" if isinstance(node.value, CertifiedDecimal) and node.value.exact else "\u2248"
    if dataclasses.is_dataclass(node):
        children = [getattr(node, f.name) for f in dataclasses.fields(node)]
    elif isinstance(node, tuple):
        children = list(node)
    else:
        return "="
    return "\u2248" if any(_relation(c) == "\u2248" for c in children) else "="


_ACCENTS = {"tilde": "\u02dc", "hat": "^", "bar": "\u00af"}


def _needs_parentheses(node: b.Math) -> bool:
    """Whether a factor of a written product is bracketed: negatives and sums, as by hand."""
    if isinstance(node, (b.Neg, b.Sum)):
        return True
    if isinstance(node, b.Exact):
        v = node.value
        return bool(v.is_Add or (v.could_extract_minus_sign() if hasattr(v, "could_extract_minus_sign")
                                 else False))
    if isinstance(node, b.Decimal) and isinstance(node.value, CertifiedDecimal):
        return node.value.mantissa < 0
    return False
