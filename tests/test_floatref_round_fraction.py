"""``floatref.binary.round_fraction`` on rationals that are not dyadic (1/3, 5/7, 2/3): their
binade was taken one too high, rounding them at one bit less precision (1/3 to float64 gave
0.33333333333333337).  Checked against Python's true division (float64, correctly rounded)
and a rounding of the 60-digit mpmath value for the narrower formats."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest

from symattn.floatref.binary import BINARY_FORMATS, round_fraction

RATIONALS = [Fraction(1, 3), Fraction(2, 3), Fraction(5, 7), Fraction(-1, 3), Fraction(7, 5), Fraction(1, 10),
             Fraction(1000, 3), Fraction(1, 3 * 2 ** 130), Fraction(3, 4), Fraction(1, 1)]


def mp_round(x: Fraction, p: int, e_min: int) -> float:
    with mpmath.workdps(60):
        v = mpmath.mpf(x.numerator) / x.denominator
        e = int(mpmath.floor(mpmath.log(abs(v), 2)))
        q = mpmath.mpf(2) ** (max(e, e_min) - p + 1)
        return float(mpmath.nint(v / q) * q)


@pytest.mark.parametrize("x", RATIONALS, ids=str)
def test_float64_and_float32_as_numpy_rounds(x):
    assert round_fraction(x, BINARY_FORMATS["float64"]) == x.numerator / x.denominator   # Python's true division is RN
    if abs(x) > Fraction(1, 2 ** 100):                       # float64 holds x to 2^-53: no double rounding near here
        assert round_fraction(x, BINARY_FORMATS["float32"]) == mp_round(x, 24, -126)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_narrow_formats(fmt):
    f = BINARY_FORMATS[fmt]
    for x in RATIONALS[:8]:
        if abs(x) < f.max_finite:
            assert round_fraction(x, f) == mp_round(x, f.p, f.e_min), x
    assert round_fraction(Fraction(1, 3), BINARY_FORMATS["float8_e4m3fn"]) == 0.34375      # 11/32, not 5/16
