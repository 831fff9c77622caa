"""The fast zero tests of the facts (symattn/facts/zerotest.py) give the slow test's verdict.

Each case is decided three ways: the fast path alone (formal zero, certified ball), the whole
``is_zero``/``same`` (fast path, then the old exact tests and simplify), and the slow test
alone (SymPy's simplify, ``simplifies_to_zero``); the expected verdict is written by hand.
The fast path may say "not shown" (a zero only simplify sees); it must never contradict.
"""

from __future__ import annotations

import mpmath
import pytest
import sympy

from symattn.errors import CertificationError
from symattn.facts.softmax_facts import same
from symattn.facts.symbolic import is_zero, simplifies_to_zero, softmax, symbol_vector
from symattn.facts.zerotest import ball_nonzero, formally_zero, rational_point

x, y = sympy.symbols("x y", real=True)
n = sympy.Symbol("n", integer=True, positive=True)
s = symbol_vector("s", 3)
w = softmax(s)
tiny = sympy.Rational(1, 10**40)
UNEVALUATED = dict(evaluate=False)

# (expression, is it exactly 0?)
CASES = [
    # exact zeros that only simplify (or the exact numeric tests) see: not formal zeros
    (sympy.Add(sympy.Mul(sympy.sqrt(2), sympy.sqrt(3), **UNEVALUATED), -sympy.sqrt(6), **UNEVALUATED), True),
    (sympy.Add(sympy.exp(sympy.log(2), **UNEVALUATED), -2, **UNEVALUATED), True),
    (sympy.sqrt(5 + 2 * sympy.sqrt(6)) - sympy.sqrt(2) - sympy.sqrt(3), True),
    (sympy.cos(1) ** 2 + sympy.sin(1) ** 2 - 1, True),
    (sympy.cos(x) ** 2 + sympy.sin(x) ** 2 - 1, True),
    (sympy.log(6) - sympy.log(2) - sympy.log(3), True),
    # formal zeros: the softmax identities and tanh as exponentials
    (sympy.Add(*w) - 1, True),
    (sympy.diff(w[0], s[1]) + w[0] * w[1], True),
    (sympy.exp(x / 2) ** 2 * sympy.exp(-x) - 1, True),
    (1 / (1 + sympy.exp(x)) + 1 / (1 + sympy.exp(-x)) - 1, True),
    (sympy.tanh(x) - (sympy.exp(2 * x) - 1) / (sympy.exp(2 * x) + 1), True),   # simplify misses it
    (sympy.exp(2 / sympy.sqrt(3)) / (sympy.exp(2 / sympy.sqrt(3)) + sympy.E)
     - 1 / (1 + sympy.exp(1 - 2 * sympy.sqrt(3) / 3)), True),
    # nonzero, some of them 1e-40 from 0
    (sympy.sqrt(2) - sympy.Rational(14142135623730950488016887242097, 10**31), False),
    (sympy.exp(tiny) - 1, False),
    (sympy.exp(x) * tiny, False),
    (sympy.Add(*w) - 1 + tiny, False),
    (sympy.exp(x) - 1 - x, False),
    (sympy.tanh(sympy.Rational(2, 5)) - sympy.Rational(2, 5), False),
    (sympy.cos(x) ** 2 - sympy.sin(x) ** 2 - 1, False),
]


def _mp(expr: sympy.Expr) -> mpmath.mpf:
    """The value at 80 digits (the symbols at 3/7 and 5/11), an independent evaluation."""
    point = {sym: sympy.Rational(3 + 2 * k, 7 + 4 * k) for k, sym in enumerate(sorted(expr.free_symbols, key=str))}
    with mpmath.workdps(80):
        return mpmath.mpf(sympy.N(expr.xreplace(point), 80))


@pytest.mark.parametrize("expr, zero", CASES, ids=[str(i) for i in range(len(CASES))])
def test_fast_path_agrees_with_the_slow_test(expr: sympy.Expr, zero: bool) -> None:
    assert (abs(_mp(expr)) < mpmath.mpf(10) ** -70) == zero      # the cases are what they say
    fast_zero, fast_nonzero = formally_zero(expr), ball_nonzero(expr)
    assert not (fast_zero and fast_nonzero)
    if fast_zero:
        assert zero
    if fast_nonzero:
        assert not zero
    assert is_zero(expr) == zero
    slow = simplifies_to_zero(expr)
    assert slow == zero or zero and fast_zero     # simplify never contradicts; the formal test
    if not expr.free_symbols:                     # may see a zero simplify does not
        assert same(expr, sympy.S.Zero) == zero


#: a zero that the numbers' exact tests cannot decide: Cardano's ∛(√5 + 2) − ∛(√5 − 2) = 1
#: (degree bound 18 past the cap, and no square roots to denest): same() refuses it
UNDECIDED = sympy.cbrt(sympy.sqrt(5) + 2) - sympy.cbrt(sympy.sqrt(5) - 2) - 1
#: a zero the bound over-counts (16 for a field of degree 4), decided once denested
DENESTED = sympy.sqrt(5 + 2 * sympy.sqrt(6)) - sympy.sqrt(2) - sympy.sqrt(3)


def test_a_zero_nothing_exact_decides_is_refused_not_answered() -> None:
    with mpmath.workdps(120):     # it is 0: checked independently
        assert abs(mpmath.cbrt(mpmath.sqrt(5) + 2) - mpmath.cbrt(mpmath.sqrt(5) - 2) - 1) < mpmath.mpf(10) ** -110
    assert not formally_zero(UNDECIDED) and not ball_nonzero(UNDECIDED)
    with pytest.raises(CertificationError, match="could not prove the sign"):
        same(UNDECIDED, sympy.S.Zero)


def test_a_nested_root_zero_is_decided_once_denested() -> None:
    assert not formally_zero(DENESTED) and not ball_nonzero(DENESTED)
    assert same(DENESTED, sympy.S.Zero)
    assert not same(DENESTED, sympy.Rational(1, 10**50))


def test_the_fast_path_decides_the_softmax_identities_itself() -> None:
    """The general proofs' zero tests are settled without simplify (the point of the module)."""
    dP = symbol_vector("dP", 4)
    s4 = symbol_vector("s", 4)
    p = softmax(s4)
    D = sympy.Add(*[a * b for a, b in zip(p, dP)])
    assert formally_zero(sympy.Add(*[p[j] * (dP[j] - D) for j in range(4)]))
    assert ball_nonzero(sympy.Add(*[p[j] * dP[j] for j in range(4)]))
    assert not formally_zero(sympy.Add(*[p[j] * dP[j] for j in range(4)]))


def test_a_soft_capped_softmax_is_a_rational_function_of_exponentials() -> None:
    """tanh inside an exponent stays a basis monomial (e^{5 tanh(2/5)}); outside, it becomes
    exponentials: both are formal zeros, as the soft-capped Jacobian entries need."""
    a, b = 5 * sympy.tanh(sympy.Rational(2, 5)), 5 * sympy.tanh(sympy.Rational(1, 5))
    weight = sympy.exp(a) / (sympy.exp(a) + sympy.exp(b))
    assert formally_zero(weight - 1 / (1 + sympy.exp(b - a)))
    assert formally_zero(sympy.diff(sympy.exp(x) / (sympy.exp(x) + sympy.exp(y)), x).xreplace({x: a, y: b})
                         - weight * (1 - weight))
    assert formally_zero(sympy.tanh(a) * (sympy.exp(2 * a) + 1) - sympy.exp(2 * a) + 1)
    assert ball_nonzero(weight - sympy.Rational(1, 2)) and same(weight, 1 / (1 + sympy.exp(b - a)))


def test_nonzero_by_a_ball_only_at_points_the_assumptions_allow() -> None:
    point = rational_point({n, x})
    assert point is not None and point[n].is_integer and point[n] > 0
    neg = sympy.Symbol("m", negative=True)
    assert rational_point({neg})[neg] < 0
    assert ball_nonzero(sympy.sqrt(neg ** 2) + neg) is False      # 0 for every negative m
    half = sympy.Add(sympy.Float("0.5") * x, -x / 2, evaluate=False)
    assert formally_zero(half) is False                            # floats never prove anything
