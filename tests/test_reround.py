"""certify.reround: a coarse rounding read off a finer certified one is the coarse rounding
itself, or None (never a wrong answer).

Cross-checked against a direct certification of the same value and against an
independent exact rational rounding (Python's decimal at 60 digits of a Fraction),
on random rationals and irrationals near coarse boundaries, ties, decade edges and
exact decimals.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.numbers.certify import Rounding, certify, reround

FINE = Rounding(digits=20)
COARSE = [Rounding(digits=d) for d in (1, 2, 3, 6, 19)] + [Rounding(places=p) for p in (0, 1, 2, 3, 5)]


def _independent(q: Fraction, r: Rounding) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 80
        x = Decimal(q.numerator) / Decimal(q.denominator)
        if r.places is not None:
            return x.quantize(Decimal(1).scaleb(-r.places), ROUND_HALF_UP)
        exp = x.adjusted() - r.digits + 1 if x else 0
        y = x.quantize(Decimal(1).scaleb(exp), ROUND_HALF_UP)
        if y and y.adjusted() > x.adjusted():          # 9.99 → 10.0: one digit fewer after
            y = x.quantize(Decimal(1).scaleb(exp + 1), ROUND_HALF_UP)
        return y


@settings(max_examples=300, deadline=None)
@given(st.integers(-10**9, 10**9), st.integers(1, 10**6), st.sampled_from(COARSE))
def test_rationals_agree_with_an_independent_rounding(num, den, coarse):
    q = Fraction(num, den)
    fine = certify(sympy.Rational(num, den), FINE)
    got = reround(fine, coarse)
    if got is None:
        return
    assert Decimal(got.mantissa).scaleb(got.exponent) == _independent(q, coarse)
    assert got == certify(sympy.Rational(num, den), coarse)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 400), st.integers(1, 50), st.sampled_from(COARSE))
def test_irrationals_agree_with_a_direct_certification(a, b, coarse):
    x = sympy.exp(sympy.Rational(a, b)) / (1 + sympy.sqrt(a))
    got = reround(certify(x, FINE), coarse)
    assert got is None or got == certify(x, coarse)


@pytest.mark.parametrize("value, coarse, expected", [
    (Fraction(1, 8), Rounding(places=2), "0.13"),      # an exact tie, rounded half away from 0
    (Fraction(-1, 8), Rounding(places=2), "-0.13"),
    (Fraction(9995, 1000), Rounding(digits=3), "10.0"),  # the decade carries
    (Fraction(1, 3), Rounding(digits=3), "0.333"),
])
def test_exact_fine_values_round_exactly(value, coarse, expected):
    fine = certify(sympy.Rational(value.numerator, value.denominator), FINE)
    got = reround(fine, coarse)
    assert got is not None and got.text == expected


def test_undecided_cases_are_none():
    # a value just below a coarse half-point whose 20-digit rounding IS the half-point
    x = sympy.Rational(1, 8) - sympy.Rational(1, 10**30)
    fine = certify(x, FINE)
    assert fine.text == "0.12500000000000000000" and not fine.exact
    assert reround(fine, Rounding(places=2)) is None          # the fine rounding cannot tell
    assert certify(x, Rounding(places=2)).text == "0.12"      # the direct path can
    # a coarse rounding finer than the fine one's unit
    assert reround(certify(sympy.sqrt(2) * 10**5, FINE), Rounding(places=18)) is None
