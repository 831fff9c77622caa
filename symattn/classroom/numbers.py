"""Decimal text and tolerances for the platforms, from certified decimals (never floats).

A platform compares a typed number with an answer and a tolerance.  The
answer is the certified rounding; the tolerance is half a unit in its last
place (so every number that rounds to it is accepted), or 0 when the
rounding is proved to be the exact value (an integer score is exactly 16).
"""

from __future__ import annotations

from fractions import Fraction

from symattn.numbers.certify import CertifiedDecimal, Rounding, round_rational

__all__ = ["plain", "plain_points", "tolerance", "value"]


def value(d: CertifiedDecimal) -> Fraction:
    """The rounded value exactly."""
    return d.as_fraction()


def tolerance(d: CertifiedDecimal) -> Fraction:
    """Half a unit in the last place of ``d``; 0 when ``d`` is the exact value."""
    if d.exact:
        return Fraction(0)
    return Fraction(1, 2) * (Fraction(10) ** d.exponent)


def plain(x: Fraction | CertifiedDecimal) -> str:
    """A terminating fraction as a plain decimal numeral (no exponent, no float):
    ``0.136``, ``-1.15``, ``16``, ``0.0005``.  Trailing zeros are dropped."""
    if isinstance(x, CertifiedDecimal):
        x = x.as_fraction()
    sign = "-" if x < 0 else ""
    x = abs(x)
    places = 0
    while (x * 10**places).denominator != 1:
        places += 1
        if places > 10_000:
            raise ValueError(f"{x} is not a terminating decimal")
    digits = str((x * 10**places).numerator).rjust(places + 1, "0")
    text = digits if places == 0 else f"{digits[:-places]}.{digits[-places:]}".rstrip("0").rstrip(".")
    return sign + text if text != "0" else "0"


POINTS_PLACES = 7   # points that do not terminate (a third of a question) are written to 7 places


def plain_points(x: Fraction) -> str:
    """Points as a platform's decimal: exact when they terminate (``1.5``), else rounded half
    away from zero to 7 places (``0.3333333``: a platform stores points as a float)."""
    d = x.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1:
        return plain(x)
    return plain(round_rational(x, Rounding(places=POINTS_PLACES)))
