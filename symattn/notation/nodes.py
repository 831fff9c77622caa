"""Written mathematics as data: the hand-form nodes every view prints.

``Frac(Int(2), Sqrt(Int(3)))`` is 2/√3, ``Exp(Neg(...))`` is e^(−8/√3),
``Factor(x)`` is a factor of a written product (a printer puts negatives and
sums in parentheses), ``Sum`` joins terms (a ``Neg`` term prints as ``− x``),
``SigmaSum`` stands for a sum too long to write, ``Approx`` is ``a ≈ b``
(a printer drops ``≈ b`` where both read the same), ``Decimal`` is a
certified decimal, ``Exact`` a SymPy value with no hand form.

Why this sits below ``facts/`` and ``document/``: a node only says how a value
is written, it prints nothing, so a result (a proof of a fact, a verdict) can
carry its formulas as nodes and every printer in ``document/printers`` typesets
them in its own format.  ``document.blocks`` re-exports every name here.
Every type is a frozen dataclass; this module only ever gains types and fields.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from symattn.numbers.certify import CertifiedDecimal

__all__ = ["Math", "Int", "Exact", "Decimal", "Sym", "Words", "Token", "Dots", "Neg", "Frac", "Sqrt",
           "Exp", "Func", "Mul", "Product", "Factor", "Sum", "SigmaSum", "Row", "Seq", "Sub", "Sup",
           "Approx", "Chain", "Group", "RELATIONS"]


# -- math nodes: hand forms -----------------------------------------------------------

class Math:
    """A piece of written mathematics (base class of the hand-form nodes)."""


@dataclass(frozen=True)
class Int(Math):
    """A whole number ≥ 0 written in digits (a negative one is ``Neg(Int(k))``)."""

    value: int


@dataclass(frozen=True)
class Exact(Math):
    """An exact SymPy value with no hand form (printed with the format's SymPy printer)."""

    value: sympy.Basic


@dataclass(frozen=True)
class Decimal(Math):
    """A certified decimal (``symattn.engine.engine.NEG_INF`` where a mask blocks).

    ``scientific``: written as 8.90 × 10⁻⁴ (a value that rounds to 0 at the
    chosen places, shown to more digits instead of a false ``0.00``)."""

    value: CertifiedDecimal | object
    scientific: bool = False


@dataclass(frozen=True)
class Sym(Math):
    """A named quantity in math italics: ``d_k``, ``S``, ``A``, ``q``; ``sub`` is its index."""

    name: str
    sub: str | None = None
    accent: str | None = None              # "tilde": S̃, the masked scores


@dataclass(frozen=True)
class Words(Math):
    """Upright words inside math: ``row sum``, ``shifted``, ``scaled``."""

    text: str


@dataclass(frozen=True)
class Token(Math):
    """A token name inside math (upright, escaped by the printer)."""

    name: str


@dataclass(frozen=True)
class Dots(Math):
    """An elided run: ⋯ in a row or a sum (``vertical``: ⋮)."""

    vertical: bool = False


@dataclass(frozen=True)
class Neg(Math):
    """−x."""

    operand: Math


@dataclass(frozen=True)
class Frac(Math):
    """numerator / denominator: stacked in LaTeX, ``a/b`` (``a/(2√2)``) in text and exponents."""

    numerator: Math
    denominator: Math


@dataclass(frozen=True)
class Sqrt(Math):
    """√x."""

    radicand: Math


@dataclass(frozen=True)
class Exp(Math):
    """e^(exponent), as the lesson writes it: e^(−8/√3)."""

    exponent: Math


@dataclass(frozen=True)
class Func(Math):
    """A named function applied to one argument: tanh(x) (the soft-cap's c·tanh(x/c))."""

    name: str
    argument: Math


@dataclass(frozen=True)
class Mul(Math):
    """An implicit product, juxtaposed: 2√2, 2 e^(…)."""

    factors: tuple[Math, ...]


@dataclass(frozen=True)
class Product(Math):
    """A written product with a dot: 1·0, 0.136·[1, 0, 2]; factors are usually ``Factor``s."""

    factors: tuple[Math, ...]


@dataclass(frozen=True)
class Factor(Math):
    """A factor of a written product: the printer puts negatives and sums in parentheses, 2·(−3)."""

    operand: Math


@dataclass(frozen=True)
class Sum(Math):
    """Terms joined by + (a ``Neg`` term prints as ``− x``); ``Dots`` marks left-out terms."""

    terms: tuple[Math, ...]


@dataclass(frozen=True)
class SigmaSum(Math):
    """Σ_index body: a sum too long to write out term by term."""

    body: Math
    index: str = "j"


@dataclass(frozen=True)
class Row(Math):
    """A row written as the lesson does: [a, b, c] (``Dots`` where elided)."""

    items: tuple[Math, ...]


@dataclass(frozen=True)
class Seq(Math):
    """Items separated by commas, no brackets: 1.86, 2.00, 1.99."""

    items: tuple[Math, ...]


@dataclass(frozen=True)
class Sub(Math):
    """An indexed entry: A_{cats, I}, S_{I, love}, O_{I, 0} (indices are math nodes)."""

    base: Math
    indices: tuple[Math, ...]


@dataclass(frozen=True)
class Approx(Math):
    """exact ≈ approx; printed as just ``exact`` when the two read the same."""

    exact: Math
    approx: Math


@dataclass(frozen=True)
class Chain(Math):
    """parts[0] rel[0] parts[1] rel[1] …: ``a = b = 1``, ``1 ≤ 1.86 ≤ 2``, ``[2, 4] → [..]``.

    Relations are spelled as in :data:`RELATIONS` (``=``, ``≈``, ``≤``, ``<``, ``≠``, ``⇒``, ``→``, …)."""

    parts: tuple[Math, ...]
    relations: tuple[str, ...]


@dataclass(frozen=True)
class Sup(Math):
    """A superscript that is not a power of e: pᵀ, J^(i) (``script`` is a math node)."""

    base: Math
    script: Math


@dataclass(frozen=True)
class Group(Math):
    """An operand in parentheses, whatever it is: (Σ_j P_ij)·dO_ic, (Q·Kᵀ)_ij."""

    operand: Math


#: the relations a :class:`Chain` may hold, with their LaTeX
RELATIONS = {"=": "=", "≈": r"\approx", "≤": r"\le", "≥": r"\ge", "→": r"\to", "<": "<", ">": ">",
             "≠": r"\ne", "≡": r"\equiv", "⇒": r"\Rightarrow", "∈": r"\in"}
