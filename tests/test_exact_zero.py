"""The exact zero test for sums of exponentials (Lindemann–Weierstrass), numbers/compare.py.

Zeros are identities written two ways (the facts' instance checks: a window's weights equal the
causal weights renormalised); non-zeros are checked independently with mpmath at 200 digits."""

from __future__ import annotations

import mpmath
import pytest
import sympy as s

from symattn.numbers.compare import equal, exp_sum_is_zero

r3 = s.sqrt(3)
A, B, C = 2 / r3, s.Rational(-4, 3), -8 / r3
total = s.exp(A) + s.exp(B) + s.exp(C)
wider = total + s.exp(s.Rational(1, 2))

ZEROS = [
    s.exp(A) / total - (s.exp(A) / wider) / (total / wider),        # renormalising a restriction
    s.exp(s.sqrt(8)) - s.exp(s.sqrt(2)) ** 2,                        # e^(2√2) = (e^√2)²
    s.E * s.exp(r3) - s.exp(1 + r3),
    (s.exp(A) - s.exp(B)) * (s.exp(A) + s.exp(B)) - s.exp(2 * A) + s.exp(2 * B),
]
NON_ZEROS = [
    s.exp(A) / total - s.exp(A) / wider,
    s.exp(A) / total - s.Rational(1, 3),
    s.exp(s.sqrt(2)) - s.exp(s.Rational(141421356237, 10**11)),      # exponents 10⁻¹² apart
    s.exp(A) / total - (s.exp(A) / wider) / (total / wider) + s.Rational(1, 10**40),
]


@pytest.mark.parametrize("expr", ZEROS)
def test_identities_are_proved_zero(expr):
    assert exp_sum_is_zero(expr) is True


@pytest.mark.parametrize("expr", NON_ZEROS)
def test_differences_are_proved_nonzero(expr):
    with mpmath.workdps(200):
        assert abs(mpmath.mpf(s.N(expr, 200))) > mpmath.mpf(10) ** -60   # independently not 0
    assert exp_sum_is_zero(expr) is False


@pytest.mark.parametrize("expr", [s.exp(s.pi) - 23, s.Symbol("x") * s.exp(1), s.cos(1) - s.exp(0)])
def test_other_forms_are_left_to_the_balls(expr):
    assert exp_sum_is_zero(expr) is None


def test_equal_decides_a_transcendental_tie_exactly():
    """Ball arithmetic alone can never separate these (their difference is exactly 0)."""
    a, b = s.exp(A) / total, s.expand(s.exp(A) * wider) / s.expand(total * wider)
    assert a != b and equal(a, b)


# -- nested roots: the degree bound over-counts, denesting decides -----------------------------

DENESTED_ZEROS = [
    (s.sqrt(5 + 2 * s.sqrt(6)), s.sqrt(2) + s.sqrt(3)),          # bound 16, field degree 4
    (s.sqrt(7 + 4 * s.sqrt(3)) + s.sqrt(5), 2 + r3 + s.sqrt(5)),
    (s.sqrt(3 - 2 * s.sqrt(2)), s.sqrt(2) - 1),                  # (√2 − 1)² = 3 − 2√2
]


@pytest.mark.parametrize("a, b", DENESTED_ZEROS)
def test_nested_roots_equal_to_their_denested_form_are_proved_equal(a, b):
    from symattn.numbers.compare import sign

    assert mpmath.almosteq(mpmath.mpf(s.N(a - b, 80)), 0, abs_eps=mpmath.mpf(10) ** -70)
    assert sign(a - b) == 0 and equal(a, b)


def test_a_nested_root_beside_a_near_miss_is_decided_by_its_sign():
    from symattn.numbers.compare import sign

    a = s.sqrt(5 + 2 * s.sqrt(6)) - s.sqrt(2) - s.sqrt(3)
    with mpmath.workdps(100):
        tiny = mpmath.mpf(1) / mpmath.mpf(10) ** 60
        assert mpmath.mpf(str(s.N(a, 100))) + tiny > 0
    assert sign(a + s.Rational(1, 10**60)) == 1 and sign(a - s.Rational(1, 10**60)) == -1
    assert sign(s.sqrt(5 + 2 * s.sqrt(7)) - s.sqrt(2) - s.sqrt(3)) == 1
