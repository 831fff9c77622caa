"""Certified decimals: correctly rounded digits, proved with ball arithmetic.

A number reaches a user only through this module.  Rationals are rounded
exactly with Python integers.  Anything else is evaluated in python-flint
``arb`` balls (a proved enclosure) and a rounding is accepted only when BOTH
ends of the ball round to the same decimal; otherwise the precision is
raised.  A value exactly on a rounding boundary (a tie such as 0.125 at two
places) never gets decided by a ball, so such values are recognised as exact
rationals (minimal polynomial of an algebraic expression) instead, and the
loop is capped with a clear error.

Rounding is half away from zero, as people round by hand.  arb's own
``str()`` is never trusted: it is a display, not a rounding proof.

This module is the loop (precisions, the exact-rational fallback, the inputs); the
decimals and the rounding of rationals are in :mod:`symattn.numbers.decimals`, the
rounding of one ball in :mod:`symattn.numbers.balls`.  The public names of both are
importable from here.
"""

from __future__ import annotations

from fractions import Fraction

import flint
import mpmath.libmp

import sympy
from sympy.polys.numberfields import minimal_polynomial

from symattn.exact.coerce import to_exact
from symattn.exact.parser import minimal_polynomial_affordable
from symattn.numbers.arb import SYMPY_FAILURES, _short, to_arb
from symattn.numbers.balls import _decide, _too_long, round_ball
from symattn.numbers.decimals import (
    MAX_DIGITS, CertifiedDecimal, Rounding, RoundingSpecError, _ndigits, effective_digits, p10,
    reround, round_ratio, round_rational,
)
from symattn.numbers.precision import cap_bits, precision, precisions, start_bits, undecided

__all__ = [
    "MAX_DIGITS", "Rounding", "RoundingSpecError", "CertifiedDecimal",
    "round_rational", "round_ratio", "round_ball", "reround", "to_arb", "certify", "certified_mpf",
    "guard_prec", "effective_digits",
]


def guard_prec(rounding: Rounding, magnitude_hint: int = 0) -> int:
    """Starting precision in bits (:func:`symattn.numbers.precision.start_bits`).
    arb's precision is relative, so for significant digits the magnitude
    does not matter (cancellation is left to the loop)."""
    return start_bits(effective_digits(rounding, magnitude_hint))


def _is_algebraic(expr: sympy.Basic) -> bool:
    if isinstance(expr, sympy.Rational):
        return True
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return all(_is_algebraic(a) for a in expr.args)
    if isinstance(expr, sympy.Pow):
        return isinstance(expr.exp, sympy.Rational) and _is_algebraic(expr.base)
    return False


def _rational_value(expr: sympy.Expr) -> Fraction | None:
    """The value as an exact rational, when the expression is algebraic and
    its minimal polynomial has degree 1; None otherwise or if SymPy fails."""
    if not _is_algebraic(expr) or not minimal_polynomial_affordable(expr):
        return None       # degree 10^20, or 735 digits beside a root: never ends, we know nothing
    try:
        poly = minimal_polynomial(expr, sympy.Dummy("x"), polys=True)
    except SYMPY_FAILURES:      # SymPy could not decide it: then we know nothing
        return None
    if poly.degree() != 1:
        return None
    a, b = poly.all_coeffs()
    r = sympy.Rational(-b, a)
    return Fraction(int(r.p), int(r.q))


def _contains(mid: int, rad: int, e: int, d: CertifiedDecimal) -> bool:
    """Is the decimal d inside [mid - rad, mid + rad] * 10**e?"""
    k = d.exponent - e
    if k >= 0:
        return abs(d.mantissa * p10(k) - mid) <= rad
    return abs(d.mantissa - mid * p10(-k)) <= rad * p10(-k)


def _near(x: flint.arb, rounding: Rounding, prec: int) -> bool:
    """Did the ball fail although it is far narrower than the rounding unit?
    Then the value sits on a boundary (or is 0): worth an exact check."""
    rad = x.rad()
    if rounding.places is not None:
        return rad * flint.arb(10) ** rounding.places * flint.arb(2) ** 64 < 1
    if x > 0 or x < 0:
        return rad * flint.arb(10) ** rounding.digits * flint.arb(2) ** 64 < abs(x.mid())
    return rad * flint.arb(2) ** (prec // 2) < 1


def _as_expr(expr: object) -> sympy.Expr | Fraction | int:
    """What Problem accepts, as an exact value: floats and Decimals by their
    text (0.1 is 1/10), strings through symattn's parser, SymPy values with
    their Floats read by text.  Bad input raises a SymattnError."""
    if isinstance(expr, (Fraction, sympy.Rational)) or type(expr) is int:
        return expr
    if isinstance(expr, sympy.Expr) and not expr.has(sympy.Float):
        return expr
    item = getattr(expr, "item", None)        # numpy scalars, as Problem reads them
    if callable(item) and not isinstance(expr, (sympy.Basic, str, bytes)):
        try:
            expr = item()
        except (TypeError, ValueError):
            pass
    return to_exact(expr, where="the value to certify")


def _as_rounding(rounding: Rounding | int | None, digits: int | None, places: int | None) -> Rounding:
    if rounding is None:
        return Rounding(digits=digits, places=places)
    if digits is not None or places is not None:
        raise RoundingSpecError("give the rounding once: a Rounding, an int, digits= or places=")
    if type(rounding) is int:
        return Rounding(digits=rounding)
    if not isinstance(rounding, Rounding):
        raise RoundingSpecError(f"rounding={rounding!r}: give a Rounding or a number of digits")
    return rounding


def _magnitude(expr: sympy.Expr) -> int:
    """About floor(log10|x|), from a cheap ball (0 when it does not tell)."""
    x = to_arb(expr, 64)
    if x > 0 or x < 0:
        mid, _, e = x.mid_rad_10exp(5)
        if int(mid):
            return _ndigits(abs(int(mid))) + int(e) - 1
    return 0


def certify(expr: object, rounding: Rounding | int | None = None, *,
            digits: int | None = None, places: int | None = None) -> CertifiedDecimal:
    """Round a real number half away from zero, with a proof.

    ``expr`` is anything :class:`~symattn.problem.problem.Problem` accepts as an
    entry: a SymPy number, an int, a Fraction, a float or Decimal (read by
    its text: 0.1 is 1/10), or a string (read by symattn's parser: "1/3",
    "e^(-2/sqrt(3))").  Bad input raises a SymattnError, never TypeError.

    Rationals are rounded exactly.  Otherwise a precision loop
    (:func:`symattn.numbers.precision.precisions`) raises the bits until the ball
    decides the rounding; a ball that keeps straddling a boundary while very
    narrow is checked for being an exact rational (minimal polynomial,
    algebraic expressions only).  Past the cap it raises CertificationError.
    An int ``rounding`` means digits.

    Text (``str``): places -> fixed with exactly that many decimals (also
    for exact values; "-0.000" is written "0.000").  Digits -> like
    ``%#.{d}g``: scientific when the exponent is < -4 or >= digits, written
    "1.23e4"/"4.54e-7"; trailing zeros kept, except for a proved exact
    value, which drops them and stays plain below 1e21 ("0.5", "100").
    The cost does not grow with the magnitude (e^(-10^12) takes
    milliseconds), only with the digits asked for.
    """
    rounding = _as_rounding(rounding, digits, places)
    expr = _as_expr(expr)
    if not isinstance(expr, sympy.Basic) or isinstance(expr, sympy.Rational):
        return round_rational(expr, rounding)
    hint = 0 if (places := rounding.places) is None else _magnitude(expr)  # fixed point: size first
    if places is not None and hint >= MAX_DIGITS:
        raise _too_long(hint + 1, places)
    wanted = effective_digits(rounding, hint)
    tried = False
    for prec in precisions(wanted):
        x = to_arb(expr, prec)
        d, mid, rad, e = _decide(x, rounding)
        if d is not None:
            if d.exact or d.mantissa == 0 or not _contains(mid, rad, e, d):
                return d
            # the ball holds the decimal itself: is the value exactly it?
            d2, mid, rad, e = _decide(to_arb(expr, 2 * prec), rounding)
            if d2 is not None and not _contains(mid, rad, e, d2):
                return d2
            q = _rational_value(expr)
            return round_rational(q, rounding) if q is not None else d
        if not tried and (prec >= cap_bits(wanted) or _near(x, rounding, prec)):
            tried = True
            q = _rational_value(expr)
            if q is not None:
                return round_rational(q, rounding)
    raise undecided(_short(expr), f"the rounding to {rounding}", cap_bits(wanted),
                    "the value may be exactly 0 or on a rounding boundary")


def certified_mpf(expr: sympy.Expr | Fraction | int, dps: int) -> mpmath.mpf:
    """An mpmath number for the certified ``dps``-digit rounding of expr.

    It is the binary number nearest the certified decimal, at dps digits'
    precision or mpmath's current one if higher (so printing at the current
    mp.dps shows no binary noise); ``mpmath.nstr(v, dps)`` shows exactly the
    certified digits."""
    d = certify(expr, Rounding(digits=dps))
    if d.mantissa == 0:
        return mpmath.mpf(0)
    prec = max(mpmath.libmp.dps_to_prec(dps), mpmath.mp.prec)
    if abs(d.exponent) <= 4 * MAX_DIGITS:     # exactly, with integers
        num, den = (d.mantissa * p10(d.exponent), 1) if d.exponent >= 0 else (d.mantissa, p10(-d.exponent))
        return mpmath.mp.make_mpf(mpmath.libmp.from_rational(num, den, prec, mpmath.libmp.round_nearest))
    return mpmath.mp.make_mpf(_nearest_binary(d.mantissa, d.exponent, prec))


def _nearest_binary(m: int, e: int, prec: int) -> tuple:
    """The prec-bit binary nearest m·10**e for a huge |e|, from arb balls
    whose two ends round alike (never a tie: for e < 0 the value is not
    dyadic, for e > 0 it is an integer), without the 10**|e| integer."""
    for bits in precisions(prec // 3 + 1, start=2 * prec + 64):
        with precision(bits):   # lower() and upper() round at the current precision too
            x = flint.arb(m) * flint.arb(10) ** e
            ends = [mpmath.libmp.from_man_exp(*(int(v) for v in end.man_exp()), prec,
                                              mpmath.libmp.round_nearest)
                    for end in (x.lower(), x.upper())]
        if ends[0] == ends[1]:
            return ends[0]
    raise undecided(f"{m}e{e}", "the nearest binary number", bits, "its ball stayed too wide")
