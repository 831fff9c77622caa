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
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import flint
import mpmath.libmp
from typing import NamedTuple

import sympy
from sympy.polys.numberfields import minimal_polynomial

from symattn.errors import CertificationError, SymattnError
from symattn.exact.coerce import to_exact
from symattn.exact.parser import minimal_polynomial_affordable
from symattn.numbers.precision import cap_bits, precision, precisions, start_bits, undecided

__all__ = [
    "MAX_DIGITS", "Rounding", "RoundingSpecError", "CertifiedDecimal",
    "round_rational", "round_ratio", "round_ball", "reround", "to_arb", "certify", "certified_mpf",
    "guard_prec", "effective_digits",
]
from symattn.numbers.arb import _Unsupported, _short, to_arb  # noqa: F401 (public here too)

MAX_DIGITS = 100_000
SCI_LOW = -4             # Python's %g: scientific below 1e-4 ...
EXACT_PLAIN_MAX = 21     # ... exact values stay plain up to 1e21 (like JS)


class RoundingSpecError(SymattnError, ValueError):
    """A rounding request is malformed (both/neither of digits and places,
    or out of range).  Lives here because only this module validates it."""


@dataclass(frozen=True)
class Rounding:
    """How to round: ``digits`` significant digits OR ``places`` decimals."""

    digits: int | None = None
    places: int | None = None

    def __post_init__(self) -> None:
        d, p = self.digits, self.places
        if (d is None) == (p is None):
            raise RoundingSpecError("give exactly one of digits= or places= for a rounding")
        name, value, low = ("digits", d, 1) if p is None else ("places", p, 0)
        if type(value) is not int or not low <= value <= MAX_DIGITS:
            raise RoundingSpecError(
                f"{name}={value!r} is not allowed: use a whole number from {low} to {MAX_DIGITS:,}")

    def __str__(self) -> str:
        if self.digits is not None:
            return f"{self.digits} significant digit" + ("s" if self.digits != 1 else "")
        return f"{self.places} decimal place" + ("s" if self.places != 1 else "")


# ---------------------------------------------------------------- integers

_SMALL = 400
_POW10 = [10**k for k in range(_SMALL)]   # the hot paths: a list index


@lru_cache(maxsize=64)
def _pow10_big(k: int) -> int:
    return int(flint.fmpz(10) ** k)   # GMP: 10**10**6 in 9 ms (Python's ** takes 0.3 s)


def p10(k: int) -> int:
    """10**k for any k >= 0 (a table below 400, cached above: 100,000 digits
    ask for 10**100003 many times).  Every power of ten goes through here."""
    return _POW10[k] if k < _SMALL else _pow10_big(k)


def _ndigits(v: int) -> int:
    """Number of decimal digits of v > 0, without int->str (slow, capped)."""
    d = ((v.bit_length() - 1) * 1233 >> 12) + 1   # 1233/4096 < log10(2): d <= digits
    while v >= p10(d):
        d += 1
    return d


def _digit_str(v: int) -> str:
    """Decimal digits of v >= 0; flint converts fast and has no 4300 cap."""
    return str(v) if v < _POW10[300] else str(flint.fmpz(v))   # < 4300 digits: str is fine


def _round_scaled(num: int, den: int, t: int) -> tuple[int, bool]:
    """Round num/den (>= 0) to a multiple of 10**t, half away from zero:
    (how many multiples, whether exact).  Integers only: no context traps."""
    if t >= 0:
        den *= p10(t)
    else:
        num *= p10(-t)
    q, r = divmod(num, den)
    return (q + 1 if 2 * r >= den else q), r == 0


# ---------------------------------------------------------------- results

class CertifiedDecimal(NamedTuple):
    """A proved rounding: the value ``mantissa * 10**exponent``.

    Significant digits: ``mantissa`` has exactly ``digits`` digits (trailing
    zeros are significant) unless it is 0.  Places: ``exponent == -places``.
    ``exact`` is True only when it is PROVED that the rounded value equals
    the exact value; a ball result says False when not proved.  (A named
    tuple: matrices make hundreds of thousands of these.)
    """

    mantissa: int
    exponent: int
    exact: bool
    rounding: Rounding

    @property
    def text(self) -> str:
        """The formatted digits (see :func:`certify` for the rules)."""
        return _format(self.mantissa, self.exponent, self.exact, self.rounding)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:  # the default repr would int->str the mantissa
        return f"CertifiedDecimal({self.text!r}, {self.rounding}, exact={self.exact})"

    def as_fraction(self) -> Fraction:
        """The rounded value exactly (never a float).

        Its size grows with |exponent|: a weight of 3.18e-434294481903 has
        no fraction to give, so past 10**7 digits this refuses (compare
        ``mantissa`` and ``exponent`` instead)."""
        if abs(self.exponent) > _FRACTION_MAX_DIGITS:
            raise CertificationError(
                f"{self.text} as an exact fraction would have {abs(self.exponent):,} digits "
                f"(at most {_FRACTION_MAX_DIGITS:,}): compare its mantissa and exponent instead")
        if self.exponent >= 0:
            return Fraction(self.mantissa * p10(self.exponent))
        return Fraction(self.mantissa, p10(-self.exponent))


_FRACTION_MAX_DIGITS = 10**7
new_decimal = tuple.__new__


def _make(m: int, t: int, exact: bool, rounding: Rounding) -> CertifiedDecimal:
    """Fast constructor for the hot path; the fields are the same, nothing is validated."""
    return new_decimal(CertifiedDecimal, (m, t, exact, rounding))


def _zero(rounding: Rounding) -> CertifiedDecimal:
    return CertifiedDecimal(0, -(rounding.places or 0), True, rounding)


def _format(m: int, t: int, exact: bool, rounding: Rounding) -> str:
    """The text rules are listed in ``certify``'s docstring."""
    sign = "-" if m < 0 else ""
    s = _digit_str(abs(m))
    if (p := rounding.places) is not None:
        if p == 0:
            return sign + s if m else "0"
        s = s.rjust(p + 1, "0")
        return (sign if m else "") + s[:-p] + "." + s[-p:]
    if m == 0:
        return "0"
    limit = effective_digits(rounding)
    if exact:                         # the exact value terminates: no padding
        stripped = s.rstrip("0")
        t += len(s) - len(stripped)
        s = stripped
        limit = max(limit, EXACT_PLAIN_MAX)
    x = t + len(s) - 1                # decimal exponent of the leading digit
    if x < SCI_LOW or x >= limit:
        return sign + s[0] + ("." + s[1:] if len(s) > 1 else "") + f"e{x}"
    if x < 0:
        return sign + "0." + "0" * (-x - 1) + s
    whole, frac = s[:x + 1].ljust(x + 1, "0"), s[x + 1:]
    return sign + whole + ("." + frac if frac else "")


def round_rational(q: Fraction | sympy.Rational | int, rounding: Rounding) -> CertifiedDecimal:
    """Round an exact rational half away from zero, decided with integers
    (no Decimal context, so no precision traps and no float anywhere)."""
    if isinstance(q, sympy.Rational):
        num, den = int(q.p), int(q.q)
    elif isinstance(q, (Fraction, int)) and not isinstance(q, bool):
        num, den = q.numerator, q.denominator
    else:
        raise TypeError(f"round_rational needs an exact rational, not {type(q).__name__}")
    return round_ratio(num, den, rounding)


_REROUND_MAX_EXPONENT = 400   # past it, certify directly (the fractions grow with the exponent)


def reround(fine: CertifiedDecimal, rounding: Rounding) -> CertifiedDecimal | None:
    """The rounding of x at ``rounding`` read off a finer certified rounding of x, or None
    when the finer one does not decide it (then certify x itself).

    Why it is a proof: every boundary of the coarse rounding (a half unit) lies on the fine
    grid when the coarse unit is coarser; x lies within half a fine unit of ``fine``, and
    a grid point other than ``fine`` is a whole fine unit away, so x and ``fine`` are on the
    same side of every coarse boundary that ``fine`` is not itself.  Undecided (None): ``fine``
    on a coarse boundary, a coarse rounding equal to ``fine`` (is x exactly it?), or a coarse
    unit no coarser than the fine one.  An exact ``fine`` is x itself: rounded exactly."""
    m, e = fine.mantissa, fine.exponent
    if abs(e) > _REROUND_MAX_EXPONENT:
        return None
    coarse = round_ratio(m, p10(-e), rounding) if e < 0 else round_ratio(m * p10(e), 1, rounding)
    if fine.exact:
        return coarse
    shift = coarse.exponent - e          # the coarse unit in fine units is 10**shift
    if shift <= 0:
        return None
    gap = m - coarse.mantissa * p10(shift)
    if gap == 0 or 2 * abs(gap) == p10(shift):
        return None
    return coarse


@lru_cache(maxsize=4096)
def _decimal_shift(den: int) -> int | None:
    """The k with den | 10**k when num/den terminates (k <= 60), else None."""
    for k in range(61):
        if _POW10[k] % den == 0:
            return k
    return None


def _round_terminating(n: int, k: int, digits: int, rounding: Rounding) -> CertifiedDecimal:
    """Round n / 10**k to significant digits: the common case of decimal inputs."""
    a = -n if n < 0 else n
    length = _ndigits(a)
    cut = length - digits
    if cut <= 0:  # it fits: exact, padded to ``digits`` digits
        return _make(n * p10(-cut), -k + cut, True, rounding)
    unit = p10(cut)
    m, r = divmod(a, unit)
    if 2 * r >= unit:
        m += 1
        if m == p10(digits):  # 9.995 -> 10.0 at 3 digits
            m, cut = m // 10, cut + 1
    return _make(-m if n < 0 else m, cut - k, r == 0, rounding)


def round_ratio(num: int, den: int, rounding: Rounding) -> CertifiedDecimal:
    """:func:`round_rational` of num/den (den > 0), for hot loops over matrices."""
    if num == 0:
        return _zero(rounding)
    if rounding.digits is not None and den < _POW10[60]:
        k = _decimal_shift(den)
        if k is not None:
            return _round_terminating(num * (_POW10[k] // den), k, rounding.digits, rounding)
    sign, num = (-1 if num < 0 else 1), abs(num)
    if rounding.places is not None:
        m, exact = _round_scaled(num, den, -rounding.places)
        return _make(sign * m, -rounding.places, exact, rounding)
    decade = _ndigits(num) - _ndigits(den)          # floor(log10) is this ...
    if (num * p10(-decade) if decade < 0 else num) < (den * p10(decade) if decade > 0 else den):
        decade -= 1                                  # ... or one less
    digits = effective_digits(rounding)
    t = decade - digits + 1
    m, exact = _round_scaled(num, den, t)
    if m == p10(digits):                            # 9.995 -> 10.0 at 3 digits
        m, t = m // 10, t + 1
    return _make(sign * m, t, exact, rounding)


# ---------------------------------------------------------------- balls

def _round_int(n: int, e: int, rounding: Rounding) -> CertifiedDecimal:
    """Round the decimal n·10**e (any sign) with integers, never building
    10**|e|: e may be -4·10**11 for a weight of e^(-10**12)."""
    if n == 0:
        return _zero(rounding)
    if (p := rounding.places) is None:
        return _round_terminating(n, -e, effective_digits(rounding), rounding)
    shift = -p - e                       # cut this many digits off n
    if shift <= 0:
        return _make(n * p10(-shift), -p, True, rounding)
    a = -n if n < 0 else n
    if _ndigits(a) < shift:              # |n·10**e| < unit/10: rounds to 0
        return _make(0, -p, False, rounding)
    m, exact = _round_scaled(a, 1, shift)
    return _make(-m if n < 0 else m, -p, exact, rounding)


def _too_long(front: int, places: int) -> CertificationError:
    """Refuse a fixed-point rounding with ``front`` digits before the point."""
    return CertificationError(
        f"a number with about {front:,} digits before the point, rounded to {places} decimal "
        f"places, needs more than the {MAX_DIGITS:,} digits symattn shows: ask for significant "
        "digits (digits=) instead")


def _enclose(x: flint.arb, n: int, places: int | None) -> tuple[int, int, int]:
    """x in [mid - rad, mid + rad] * 10**e, mid with about n digits (proved
    by arb, including the binary->decimal conversion error).  Never more
    than MAX_DIGITS + n digits: a fixed-point rounding of a huge number is
    refused instead of converting it whole."""
    if x.is_exact():                     # exact dyadic: exact decimal, no error ...
        man, ex = (int(v) for v in x.man_exp())
        if -4 * n - 64 <= ex <= 4 * n + 64:   # ... when that decimal is short
            return (man * 5**-ex, 0, ex) if ex < 0 else (man << ex, 0, 0)
    mid, rad, e = x.mid_rad_10exp(n)
    e = int(e)
    if places is not None and e > -(places + 2):   # |x| >= 100: more digits
        if e + n > MAX_DIGITS:
            raise _too_long(e + n, places)
        mid, rad, e = x.mid_rad_10exp(n + e + places + 2)
        e = int(e)
    return int(mid), int(rad), e


def judge_enclosure(mid: int, rad: int, e: int, rounding: Rounding) -> CertifiedDecimal | None:
    """The rounding of all of [mid - rad, mid + rad] * 10**e if it is one
    decimal, else None.  Rounds |mid| once and checks that both ends stay in
    that decimal's rounding cell, in integers (the hot path).  The cost does
    not depend on e: no power of ten larger than mid is built."""
    neg = mid < 0
    a = -mid if neg else mid             # |x| lies in [a - rad, a + rad] * 10**e
    if a <= rad:                         # the ends reach 0
        return None
    if (p := rounding.places) is None:
        digits = effective_digits(rounding)
        shift, edge = _ndigits(a) - digits, p10(digits - 1)
    else:
        shift, edge = -p - e, -1
        if shift > 0 and _ndigits(a + rad) < shift:   # all of it below unit/10: 0
            return _make(0, -p, False, rounding)
    if shift <= 0:                       # short (exact) values: round both ends
        d = _round_int(mid - rad, e, rounding)
        if rad == 0:
            return d
        d2 = _round_int(mid + rad, e, rounding)
        same = (d.mantissa, d.exponent) == (d2.mantissa, d2.exponent)
        return _make(d.mantissa, d.exponent, False, rounding) if same else None
    unit = p10(shift)
    q, r = divmod(a, unit)
    m = q + 1 if 2 * r >= unit else q
    # cell of m: [(m - 1/2) unit, (m + 1/2) unit), except at the bottom of a
    # decade, where values down to (m - 1/20) unit (finer unit) round to m.
    if m == edge:
        inside = 20 * (a - rad) >= (20 * m - 1) * unit
    else:
        inside = 2 * (a - rad) >= (2 * m - 1) * unit
    if not (inside and 2 * (a + rad) < (2 * m + 1) * unit):
        return None
    t = e + shift
    if m == 10 * edge:                   # 9.996 -> 10.0: carried a decade up
        m, t = edge, t + 1
    return _make(-m if neg else m, t, rad == 0 and r == 0, rounding)


def _decide(x: flint.arb, rounding: Rounding):
    """(decimal or None, mid, rad, e) with x in [mid -+ rad] * 10**e.

    First a short decimal conversion (a few digits more than asked: enough
    unless x is close to a boundary), then, if that fails, one with all the
    digits the ball holds."""
    if not (x > 0 or x < 0):
        if x.is_zero():
            return _zero(rounding), 0, 0, 0
        return None, 0, 0, 0             # contains 0, or nan/inf
    p = rounding.places
    n = effective_digits(rounding) + 3 if p is None else p + 5
    mid, rad, e = _enclose(x, n, p)
    d = judge_enclosure(mid, rad, e, rounding)
    if d is None and rad:
        full = int(x.rel_accuracy_bits() * 0.30103) + 5
        if full > n:
            mid, rad, e = _enclose(x, full, p)
            d = judge_enclosure(mid, rad, e, rounding)
    return d, mid, rad, e


def round_ball(x: flint.arb, rounding: Rounding) -> CertifiedDecimal | None:
    """The proved rounding of every number in the ball x, or None when the
    ball does not decide it (its two ends round differently, it contains 0,
    or it is not finite).  Cheap: one binary->decimal step, integer work."""
    digits = rounding.digits
    if digits is not None and digits < 300:
        # The hot path of matrix certification: an inexact ball well inside
        # one rounding cell, away from the edges of a decade.  Anything else
        # takes the general path below.
        mid, rad, e = x.mid_rad_10exp(digits + 3)
        mid, rad = int(mid), int(rad)
        a = -mid if mid < 0 else mid
        if rad and a > rad:
            shift = _ndigits(a) - digits
            if shift > 0:
                unit = p10(shift)
                q, r = divmod(a, unit)
                m = q + 1 if 2 * r >= unit else q
                if (_POW10[digits - 1] < m < _POW10[digits]
                        and 2 * (a - rad) >= (2 * m - 1) * unit
                        and 2 * (a + rad) < (2 * m + 1) * unit):
                    return _make(-m if mid < 0 else m, int(e) + shift, False, rounding)
    return _decide(x, rounding)[0]


def round_balls(balls: list, rounding: Rounding) -> list[tuple[CertifiedDecimal | None, bool]]:
    """:func:`round_ball` of many balls (a matrix row), with one more fact per ball: whether
    it may contain its rounded decimal itself (False is proved; True means "not ruled out").

    The hot path of :func:`round_ball`, inlined: one binary→decimal conversion per ball
    (arb's ``mid_rad_10exp``, which encloses the ball in [mid ± rad]·10^e), then the
    rounding cell in integers.  That enclosure contains the ball, so when the decimal
    m·10^t lies outside it the ball cannot equal the decimal: the exact test (stepcert's
    ``_may_equal``, an arb product per entry) is left for the rare ball near its own
    rounded value.  Balls the hot path does not decide go through :func:`round_ball`."""
    digits = rounding.digits
    if digits is None or digits >= 300:
        return [(d, True) for d in (round_ball(x, rounding) for x in balls)]
    n = digits + 3
    pow10, low, high = _POW10, _POW10[digits - 1], _POW10[digits]
    new, cls = new_decimal, CertifiedDecimal
    out: list[tuple[CertifiedDecimal | None, bool]] = []
    append = out.append
    for x in balls:
        mid, rad, e = x.mid_rad_10exp(n)
        mid, rad = int(mid), int(rad)
        a = -mid if mid < 0 else mid
        if rad and a > rad:
            d = ((a.bit_length() - 1) * 1233 >> 12) + 1     # digits of a: d or d + 1
            if a >= pow10[d]:
                d += 1
            shift = d - digits
            if shift > 0:
                unit = pow10[shift]
                q, r = divmod(a, unit)
                if 2 * r >= unit:
                    q, r = q + 1, r - unit                   # a = q·unit + r, |r| ≤ unit/2
                if (low < q < high and 2 * (a - rad) >= (2 * q - 1) * unit
                        and 2 * (a + rad) < (2 * q + 1) * unit):
                    append((new(cls, (-q if mid < 0 else q, int(e) + shift, False, rounding)),
                            -rad <= r <= rad))
                    continue
        append((round_ball(x, rounding), True))
    return out


# ---------------------------------------------------------------- certify

def effective_digits(rounding: Rounding, magnitude_hint: int = 0) -> int:
    """The decimal digits a rounding asks for: ``digits``, or for places the
    digits in front of the point (``magnitude_hint`` = floor(log10|x|)) plus
    the places.  The precision policy (:mod:`symattn.numbers.precision`) is a
    function of this number."""
    if rounding.digits is not None:
        return rounding.digits
    assert rounding.places is not None   # a Rounding holds exactly one of digits and places
    return max(1, rounding.places + magnitude_hint + 1)


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
    except Exception:  # noqa: BLE001 - SymPy may fail in many ways; then we know nothing
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
