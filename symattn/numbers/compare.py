"""Exact decisions about real numbers: sign, order, equality.

The row maximum of the scaled scores must be *decided*, not guessed from
floats: two scores may differ in the 40th digit, or be equal in different
forms (2√2 and √8).  Rationals are compared directly; anything else is
enclosed in arb balls of growing precision until the sign is clear, and a
number whose balls keep straddling zero is tested for being exactly zero.
"""

from __future__ import annotations

import sympy
from sympy.polys.numberfields import minimal_polynomial

from symattn.exact.parser import minimal_polynomial_affordable
from symattn.numbers.certify import _short, to_arb
from symattn.numbers.precision import SIGN_DIGITS, cap_bits, precisions, undecided

#: past this many bits a ball still straddling 0 is tested for being exactly 0
_ZERO_TEST_BITS = 1 << 12


def _is_exactly_zero(expr: sympy.Expr) -> bool | None:
    """True/False when an exact test settles whether ``expr`` is 0, else None.

    Only algebraic numbers are tested (their minimal polynomial is x exactly
    when they are 0; the parser's degree cap keeps that cheap).  SymPy's
    ``equals`` is never asked: on a transcendental near-tie it runs its
    solver without bound, so such a number is refused instead."""
    if not expr.is_algebraic:   # cosines and sines of algebraic angles (RoPE scores)
        from symattn.problem.keys.rope import trig_is_zero

        return trig_is_zero(expr) if expr.has(sympy.cos, sympy.sin) else None
    if not minimal_polynomial_affordable(expr):
        return None       # a derived root of index 10^4 (e^(c·log b) = b^c): no minimal polynomial
    x = sympy.Dummy("x")
    try:
        return minimal_polynomial(expr, x) == x
    except Exception:  # noqa: BLE001 - SymPy fails in many ways (NotImplementedError, OverflowError, ...)
        return None


def sign(expr: sympy.Expr) -> int:
    """The exact sign (-1, 0 or 1) of a real number given as a SymPy expression."""
    if not isinstance(expr, sympy.Basic):
        expr = sympy.Rational(expr)  # ints and Fractions; strings never reach here
    if expr.is_Rational:
        return 1 if expr.p > 0 else (-1 if expr.p < 0 else 0)
    tried = False
    for prec in precisions(SIGN_DIGITS):
        ball = to_arb(expr, prec)
        if ball > 0:
            return 1
        if ball < 0:
            return -1
        if ball.is_exact() and ball.is_zero():
            return 0
        if not tried and prec >= _ZERO_TEST_BITS:
            tried = True
            if _is_exactly_zero(expr):
                return 0
    raise undecided(_short(expr), "the sign", cap_bits(SIGN_DIGITS),
                    "it is that close to 0 and could not be proved 0",
                    "write it so that SymPy can simplify it (e.g. combine the logarithms)")


def compare(a: sympy.Expr, b: sympy.Expr) -> int:
    """-1, 0 or 1 as a < b, a == b, a > b, decided exactly."""
    return sign(sympy.expand(a - b))


def equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Exact equality of two real numbers, whatever their written form."""
    return a == b or compare(a, b) == 0
