"""Exact sums of exponentials: how the backward steps keep their entries exact and see exact zeros.

Every gradient entry of attention is built from one row's softmax or from a sum over rows:
in row i, with the exponents x_ij of the allowed keys (and the sink's), the weights are
e^(x_ij) / Z_i with Z_i = Σ_j e^(x_ij), so every row-local quantity (dP, D, dS, dQ) is
a polynomial in the e^(x_ij) over a power of Z_i, and every cross-row one (dV, dK,
dW) a sum of such fractions over the rows.  Written that way, products of exponentials
add their exponents and like terms combine, so a gradient that is exactly zero (a
causal first row, where dS = 1·(dP − dP); a constant row of dP; ``loss = "sum"`` over
value rows with equal sums) is the empty sum, exactly 0, and a uniform row's entries are
rationals.  Formal zero implies zero, so a zero found here is proved; a sum that is not
formally zero is left to the balls, which prove it nonzero (or, if it were a zero no
formal identity shows, give up honestly at the precision cap).

An exponent is kept as a pair (a, b) meaning ``unit·a + b``: a a Fraction, ``unit`` the
problem's scale when the scores are rational (b is then 0, or the sink), else a in 0 and
b the exponent as SymPy writes it.  Adding pairs adds exponents without SymPy in the common
case.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable

import sympy

Key = tuple[Fraction, sympy.Expr]
ZERO_KEY: Key = (Fraction(0), sympy.S.Zero)


def add_keys(k1: Key, k2: Key) -> Key:
    b1, b2 = k1[1], k2[1]
    b = b1 if b2 is sympy.S.Zero else b2 if b1 is sympy.S.Zero else b1 + b2
    return k1[0] + k2[0], b


def _is_zero(c: sympy.Expr) -> bool:
    if c.is_Number:
        return bool(c == 0)
    return sympy.expand(c) == 0


class ExpSum:
    """Σ_k c_k·e^(key_k), like terms combined, no zero coefficient kept."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict[Key, sympy.Expr] | None = None) -> None:
        self.terms = {k: c for k, c in (terms or {}).items() if not _is_zero(c)}

    @classmethod
    def constant(cls, c: sympy.Expr) -> "ExpSum":
        return cls({ZERO_KEY: sympy.Integer(c) if isinstance(c, int) else c})   # never parses text

    @classmethod
    def of(cls, pairs: Iterable[tuple[Key, sympy.Expr]]) -> "ExpSum":
        terms: dict[Key, sympy.Expr] = {}
        for key, c in pairs:
            terms[key] = terms[key] + c if key in terms else c
        return cls(terms)

    @property
    def is_zero(self) -> bool:
        return not self.terms

    def __add__(self, other: "ExpSum") -> "ExpSum":
        return ExpSum.of([*self.terms.items(), *other.terms.items()])

    def times(self, c: sympy.Expr) -> "ExpSum":
        return ExpSum({k: v * c for k, v in self.terms.items()})

    def __mul__(self, other: "ExpSum") -> "ExpSum":
        return ExpSum.of([(add_keys(k1, k2), c1 * c2) for k1, c1 in self.terms.items()
                          for k2, c2 in other.terms.items()])

    def signature(self) -> frozenset:
        return frozenset(self.terms.items())

    def to_sympy(self, unit: sympy.Expr) -> sympy.Expr:
        return sympy.Add(*[c * sympy.exp(unit * sympy.Rational(a.numerator, a.denominator) + b)
                           for (a, b), c in self.terms.items()])


class RowFrac:
    """num / Z^power for one row's softmax denominator Z."""

    __slots__ = ("Z", "num", "power")

    def __init__(self, Z: ExpSum, num: ExpSum, power: int) -> None:
        self.Z, self.num, self.power = Z, num, power

    def lifted(self, power: int) -> ExpSum:
        num = self.num
        for _ in range(power - self.power):
            num = num * self.Z
        return num

    def __add__(self, other: "RowFrac") -> "RowFrac":
        power = max(self.power, other.power)
        return RowFrac(self.Z, self.lifted(power) + other.lifted(power), power)

    def __mul__(self, other: "RowFrac") -> "RowFrac":
        return RowFrac(self.Z, self.num * other.num, self.power + other.power)

    def times(self, c: sympy.Expr) -> "RowFrac":
        return RowFrac(self.Z, self.num.times(c), self.power)

    def constant(self) -> sympy.Expr | None:
        """The value when it is formally a constant (0, or a uniform row's rational), else None."""
        if self.num.is_zero:
            return sympy.S.Zero
        if self.power == 0 and set(self.num.terms) == {ZERO_KEY}:
            return self.num.terms[ZERO_KEY]
        if len(self.Z.terms) == 1 and len(self.num.terms) == 1:
            (zk, zc), = self.Z.terms.items()
            (nk, nc), = self.num.terms.items()
            if nk == (zk[0] * self.power, zk[1] * self.power):
                return nc / zc ** self.power
        return None

    def to_sympy(self, unit: sympy.Expr) -> sympy.Expr:
        value = self.constant()
        if value is not None:
            return value
        return self.num.to_sympy(unit) / self.Z.to_sympy(unit) ** self.power


class Grad:
    """A sum over rows of row fractions: a gradient entry, exactly (one row for a row-local one)."""

    __slots__ = ("parts",)

    def __init__(self, parts: dict[int, RowFrac]) -> None:
        self.parts = parts

    def __add__(self, other: "Grad") -> "Grad":
        parts = dict(self.parts)
        for row, frac in other.parts.items():
            parts[row] = parts[row] + frac if row in parts else frac
        return Grad(parts)

    def __sub__(self, other: "Grad") -> "Grad":
        return self + other.times(sympy.S.NegativeOne)

    def __mul__(self, other: "Grad") -> "Grad":
        """The product of two row-local values of the same row (an empty one is exactly 0:
        a masked weight, or a dP entry against a zero value row)."""
        if not self.parts or not other.parts:
            return Grad({})
        (row, a), = self.parts.items()
        (other_row, b), = other.parts.items()
        assert row == other_row, "only values of one row multiply"
        return Grad({row: a * b})

    def times(self, c: sympy.Expr) -> "Grad":
        if c == 0:
            return Grad({})
        return Grad({row: frac.times(c) for row, frac in self.parts.items()})

    def merged(self) -> list[RowFrac]:
        """The parts with equal denominators added (rows with the same softmax denominator)."""
        by_den: dict[tuple[frozenset, int], RowFrac] = {}
        for frac in self.parts.values():
            key = (frac.Z.signature(), 0)
            by_den[key] = by_den[key] + frac if key in by_den else frac
        return [f for f in by_den.values() if not f.num.is_zero]

    def to_sympy(self, unit: sympy.Expr) -> sympy.Expr:
        return sympy.Add(*[frac.to_sympy(unit) for frac in self.merged()])


def total(values: Iterable[Grad]) -> Grad:
    out = Grad({})
    for value in values:
        out = out + value
    return out
