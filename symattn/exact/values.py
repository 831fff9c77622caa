"""The caps on every exact value the parser builds: digits per rational, roots and their
degree, the height of an algebraic number (docs/limits.md)."""

from __future__ import annotations

from math import gcd, prod
from collections.abc import Callable, Iterator

import sympy

from symattn.errors import ParseError
# the caps: one table in symattn.limits and docs/limits.md
from symattn.limits import (MAX_ALGEBRAIC_DEGREE, MAX_ALGEBRAIC_DIGITS, MAX_VALUE_DIGITS)


# ------------------------------------------------------------ value caps

_VALUE_LIMIT = 10**MAX_VALUE_DIGITS          # a rational's |numerator| and denominator stay below
_VALUE_BITS = _VALUE_LIMIT.bit_length()
_ALGEBRAIC_LIMIT = 10**MAX_ALGEBRAIC_DIGITS  # the same, in a value that has a root
_ALGEBRAIC_BITS = _ALGEBRAIC_LIMIT.bit_length()
_ALGEBRAIC_HEIGHT = 4 * _ALGEBRAIC_BITS     # all of them once multiplied out: about 120 digits


def _too_many_digits() -> str:
    return (f"a number in it has over {MAX_VALUE_DIGITS:,} digits "
            "(MAX_VALUE_DIGITS, the most symattn shows or checks)")


def _over(r: sympy.Rational, limit: int) -> bool:
    """Does a numerator or denominator reach ``limit`` (10^k: more than k digits)?"""
    return abs(r.p) >= limit or r.q >= limit


def _rationals(expr: sympy.Expr) -> Iterator[sympy.Rational]:
    """Every rational in ``expr`` except the exponents of powers (capped on their own)."""
    stack = [expr]
    while stack:
        item = stack.pop()
        if item.is_Rational:
            yield item
        elif item.is_Pow:
            stack.append(item.base)
        else:
            stack.extend(item.args)


def _roots(expr: sympy.Expr) -> dict[sympy.Expr, int]:
    """base -> lcm of the root indices q over the powers base^(p/q) in ``expr``."""
    found: dict[sympy.Expr, int] = {}
    for atom in expr.atoms(sympy.Pow):
        if atom.exp.is_Rational and not atom.exp.is_Integer:
            q = int(atom.exp.q)
            found[atom.base] = q * found.get(atom.base, 1) // gcd(q, found.get(atom.base, 1))
    return found


def algebraic_degree(*values: sympy.Expr) -> int:
    """An upper bound on the degree of the field the roots of ``values`` generate.

    Why: deciding an exact tie or a hidden rational computes a minimal
    polynomial, whose cost explodes with the degree (√ nested 55 times is
    degree 2^55).  The bound multiplies the root index of every distinct
    root (roots of one base share the lcm): √2+√3 gives 4, √√2 gives 4."""
    found: dict[sympy.Expr, int] = {}
    for value in values:
        for base, q in _roots(value).items():
            found[base] = q * found.get(base, 1) // gcd(q, found.get(base, 1))
    return prod(found.values())


def minimal_polynomial_affordable(value: sympy.Expr) -> bool:
    """Whether SymPy's minimal polynomial of ``value`` stays cheap: degree at most
    MAX_ALGEBRAIC_DEGREE, and with a root, coefficients of at most about 240 digits once
    multiplied out (twice what the inputs' own caps allow, so products of capped inputs,
    such as projected scores, keep their exact tests).

    Why: exact tests (is it 0? is it rational?) ask for one, and values the engine builds
    can pass the input caps: e^(1540.8·log 3) = 3^1540·3^(4/5), a 735-digit number beside
    a fifth root, took 9 s per call (120 digits: 0.8 s), minutes per view.  Past the bound
    the test answers "not known" and the precision loop decides."""
    degree = algebraic_degree(value)
    if degree > MAX_ALGEBRAIC_DEGREE:
        return False
    return degree == 1 or _height_bits(value) <= 2 * _ALGEBRAIC_HEIGHT


def _height_bits(expr: sympy.Expr) -> int:
    """A rough bound on the bits of the coefficients of ``expr`` once expanded."""
    if expr.is_Rational:
        return max(abs(expr.p).bit_length(), expr.q.bit_length())
    if expr.is_Pow:
        base = _height_bits(expr.base)
        return base * abs(int(expr.exp)) if expr.exp.is_Integer else base
    if expr.is_Mul:
        return sum(_height_bits(a) for a in expr.args)
    if expr.is_Add:
        return max(_height_bits(a) for a in expr.args) + len(expr.args).bit_length()
    return max((_height_bits(a) for a in expr.args), default=1)


def _value_problem(value: sympy.Expr, whole: bool = True) -> tuple[str, str] | None:
    """Why a built value is over a cap (problem, fix), or None when it is within them.

    ``whole``: the value is a finished input (not a part of one, nor a value a
    checker derived from a trace), so the digits beside its roots are capped too."""
    for r in _rationals(value):
        if _over(r, _VALUE_LIMIT):
            return _too_many_digits(), "use smaller numbers or exponents"
    if _height_bits(value) > 2 * _VALUE_BITS:
        return _too_many_digits() + " once multiplied out", "use smaller exponents"
    degree = algebraic_degree(value)
    if degree > MAX_ALGEBRAIC_DEGREE:
        return (f"its roots have algebraic degree up to {degree:,}, over the cap of "
                f"{MAX_ALGEBRAIC_DEGREE} (MAX_ALGEBRAIC_DEGREE)",
                "use fewer or simpler roots, such as sqrt(2) or 2^(1/3)")
    if whole and degree > 1 and (_height_bits(value) > _ALGEBRAIC_HEIGHT
                       or any(_over(r, _ALGEBRAIC_LIMIT) for r in _rationals(value))):
        return (f"a number beside or under a root has over {MAX_ALGEBRAIC_DIGITS} digits "
                "(MAX_ALGEBRAIC_DIGITS)", "use shorter numbers with roots")
    return None


def check_value(value: sympy.Expr, fail: Callable[[str, str], ParseError]) -> sympy.Expr:
    """Refuse a value over the digit or algebraic-degree caps (for values not parsed here,
    such as SymPy expressions and ints given in Python); returns it unchanged."""
    problem = _value_problem(value)
    if problem:
        raise fail(*problem)
    return value


