"""Rounding a ball: the proved decimal of every number in an arb ball, or None.

A rounding is accepted only when BOTH ends of the ball round to the same decimal, decided in
integers after one binary->decimal conversion (arb's ``mid_rad_10exp``, which includes its
own conversion error).  arb's ``str()`` is never trusted: it is a display, not a proof.
The precision loop that narrows a ball until it decides is :func:`symattn.numbers.certify.certify`.
"""

from __future__ import annotations

import flint

from symattn.errors import CertificationError
from symattn.numbers.decimals import (
    _POW10, MAX_DIGITS, CertifiedDecimal, Rounding, _make, _ndigits, _round_scaled,
    _round_terminating, _zero, effective_digits, new_decimal, p10,
)

__all__ = ["judge_enclosure", "round_ball", "round_balls"]


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
