"""Certified decimals as data, and the exact rounding of rationals.

:class:`Rounding` (digits or places), :class:`CertifiedDecimal` (a proved rounding and its
text), powers of ten and the integer rounding of num/den half away from zero: no Decimal
context, no float.  Balls are rounded in :mod:`symattn.numbers.balls`, and any real number
is certified by :mod:`symattn.numbers.certify`, which re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import flint

import sympy

from symattn.errors import CertificationError, SymattnError

__all__ = [
    "MAX_DIGITS", "Rounding", "RoundingSpecError", "CertifiedDecimal", "new_decimal", "p10",
    "round_rational", "round_ratio", "reround", "effective_digits",
]

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


def effective_digits(rounding: Rounding, magnitude_hint: int = 0) -> int:
    """The decimal digits a rounding asks for: ``digits``, or for places the
    digits in front of the point (``magnitude_hint`` = floor(log10|x|)) plus
    the places.  The precision policy (:mod:`symattn.numbers.precision`) is a
    function of this number."""
    if rounding.digits is not None:
        return rounding.digits
    assert rounding.places is not None   # a Rounding holds exactly one of digits and places
    return max(1, rounding.places + magnitude_hint + 1)
