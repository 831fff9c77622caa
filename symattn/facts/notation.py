"""Shorthands for writing the formulas of proofs as math nodes (:mod:`symattn.notation.nodes`).

``rel(frac(e(s("j")), sigma(e(s("k")), "k")), "=", one)`` is e^(s_j)/Σ_k e^(s_k) = 1, in
every format its printer's own way.  These only build nodes; nothing here prints.
"""

from __future__ import annotations

import sympy

from symattn.notation.nodes import (Chain, Decimal, Exact, Exp, Frac, Func, Int, Math, Mul, Neg,
                                    Product, Row, SigmaSum, Sqrt, Sub, Sum, Sup, Sym, Token, Words)
from symattn.numbers.certify import certify

__all__ = ["sym", "s", "p", "e", "sigma", "frac", "rel", "fn", "num", "entry", "value", "row",
           "words", "plus", "minus", "times", "dot", "sup", "T", "one", "zero", "root", "token"]


def sym(name: str, sub: str | int | None = None, accent: str | None = None) -> Sym:
    """A named quantity: ``sym("p", "j")`` is p_j, ``sym("A", accent="hat")`` is Â."""
    return Sym(name, None if sub is None else str(sub), accent)


def s(sub: str | int | None = None) -> Sym:
    """A score s_j."""
    return sym("s", sub)


def p(sub: str | int | None = None) -> Sym:
    """A weight p_j."""
    return sym("p", sub)


def e(exponent: Math) -> Exp:
    return Exp(exponent)


def sigma(body: Math, index: str = "j") -> SigmaSum:
    return SigmaSum(body, index)


def frac(a: Math, b: Math) -> Frac:
    return Frac(a, b)


def rel(*items: Math | str) -> Chain:
    """A chain: parts at even positions, relations (=, <, ≤, ⇒, →, …) between them."""
    return Chain(tuple(items[0::2]), tuple(items[1::2]))          # type: ignore[arg-type]


def fn(name: str, argument: Math) -> Func:
    """softmax(x), diag(p), Var(x), lim: an upright name applied to one argument."""
    return Func(name, argument)


def num(x: int | sympy.Basic) -> Math:
    """An exact number as a node: 3, −2, and any other exact value as itself."""
    if isinstance(x, int):
        return Int(x) if x >= 0 else Neg(Int(-x))
    if isinstance(x, sympy.Integer):
        return num(int(x))
    return Exact(x)


def value(x: sympy.Expr, digits: int = 3) -> Math:
    """A value to show: its certified decimal; a formula in symbols as itself; an integer as one."""
    if x.free_symbols:
        return Exact(x)
    if x.is_Integer:
        return num(x)
    return Decimal(certify(x, digits))


def entry(name: str, *indices: str | int | Math, accent: str | None = None) -> Sub:
    """A_{ij}, V_{jc}, Â_{0j}: an indexed entry (ints print as numbers, strings as indices)."""
    idx = tuple(i if isinstance(i, Math) else Int(i) if isinstance(i, int) else Sym(i) for i in indices)
    return Sub(Sym(name, None, accent), idx)


def row(items) -> Row:
    return Row(tuple(items))


def words(text: str) -> Words:
    """Upright words inside a formula."""
    return Words(text)


def token(name: str) -> Token:
    return Token(name)


def plus(*terms: Math) -> Sum:
    return Sum(tuple(terms))


def minus(a: Math, b: Math) -> Sum:
    return Sum((a, Neg(b)))


def times(*factors: Math) -> Mul:
    """Juxtaposed: p_a p_b, e^c e^(s_j)."""
    return Mul(tuple(factors))


def dot(*factors: Math) -> Product:
    """With a dot: J·1, scale·q·k."""
    return Product(tuple(factors))


def sup(base: Math, script: Math) -> Sup:
    return Sup(base, script)


def T(base: Math) -> Sup:
    """The transpose pᵀ."""
    return Sup(base, Sym("T"))


def root(x: Math) -> Sqrt:
    return Sqrt(x)


one, zero = Int(1), Int(0)
