"""Certification cost does not grow with the magnitude of the scores (issue 9 item 2).

Before: a Q entry of 10^9 made the fixed-point rounding (the LaTeX heat map)
build 10^(3·10^8); scale = 10^12 crashed the process with SIGFPE building
10^(4·10^11) in the output check.  Here every step of such problems is
certified, and a spy on certify's power-of-ten maker asserts that no power
of ten larger than the digits asked for is built (the cost property, without
timing anything).  Values are checked against mpmath, whose exponent range
is unbounded, at the digits asked for plus the digits of the exponent plus a
guard; the reference asserts its rounding is not ambiguous.

The problem loader caps magnitudes (symattn.limits); the numbers layer is
tested here at and far beyond that cap by giving a small problem its large
entry after construction.
"""

from __future__ import annotations

import importlib
from fractions import Fraction

import mpmath
import pytest
import sympy

import symattn as sa
from symattn.numbers.certify import Rounding, certified_mpf, certify
from symattn.errors import CertificationError, SymattnError
from symattn.problem.matrix import ExactMatrix

# the module of the powers of ten (every one goes through its ``p10``)
decimals_module = importlib.import_module("symattn.numbers.decimals")


@pytest.fixture(autouse=True)
def no_giant_powers(monkeypatch):
    """Fail if certification builds a power of ten past 10^5000 (it used to build 10^(4·10^11))."""
    real = decimals_module._pow10_big

    def spy(k: int) -> int:
        assert k <= 5000, f"built 10**{k}"
        return real(k)
    monkeypatch.setattr(decimals_module, "_pow10_big", spy)


def ref(make, digits: int, magnitude_digits: int = 0) -> tuple[int, int]:
    """(mantissa, exponent) of the value ``make()`` builds in mpmath, rounded half away from zero."""
    with mpmath.workdps(digits + magnitude_digits + 40):
        x = make()
        sign = -1 if x < 0 else 1
        x = abs(x)
        e = int(mpmath.floor(mpmath.log10(x))) - digits + 1
        scaled = x / mpmath.power(10, e)
        m = int(mpmath.floor(scaled))
        frac = scaled - m
        assert mpmath.mpf("1e-20") < abs(frac - mpmath.mpf(0.5)), "the reference is ambiguous"
        m += 1 if frac > 0.5 else 0
        if m == 10**digits:
            m, e = m // 10, e + 1
    return sign * m, e


def parts(d) -> tuple[int, int]:
    return d.mantissa, d.exponent


def big_problem(k: int) -> sa.Trace:
    """Q = [[10^k, 1], [1, 2]], K = [[1, 0], [0, 1], [1, 1]], V = [[1, 0], [2, 0], [3, 5]], scale 1/√2.

    Row 0's scores are [10^k, 1, 10^k + 1]: weights[0, 1] is about e^(-10^k/√2),
    and output[0, 1] = 5·w[0, 2] is an exact-looking value next to 5."""
    p = sa.Problem(Q=[[1, 1], [1, 2]], K=[[1, 0], [0, 1], [1, 1]], V=[[1, 0], [2, 0], [3, 5]])
    p.inputs["Q"] = ExactMatrix.from_sympy(sympy.ImmutableMatrix([[sympy.Integer(10) ** k, 1], [1, 2]]))
    return sa.Trace(p)


def mp_row0(k: int):
    s2 = mpmath.sqrt(2)
    big = mpmath.mpf(10) ** k
    exps = [mpmath.exp(-1 / s2), mpmath.exp(-big / s2), mpmath.mpf(1)]
    total = sum(exps)
    return [x / total for x in exps]


@pytest.mark.parametrize("k", [6, 12, 100])
@pytest.mark.parametrize("digits", [3, 30])
def test_huge_scores_every_step(k, digits):
    trace = big_problem(k)
    for step in trace.step_names:          # nothing crashes, nothing is slow
        trace.step(step).decimals(digits)
        trace.step(step).decimals(Rounding(places=2))
    weights = trace.weights.decimals(digits)[0]
    for j in range(3):
        assert parts(weights[j]) == ref(lambda: mp_row0(k)[j], digits, k), j
    out = trace.output.decimals(digits)[0]
    assert parts(out[0]) == ref(lambda: sum(w * v for w, v in zip(mp_row0(k), [1, 2, 3])), digits, k)
    assert parts(out[1]) == ref(lambda: 5 * mp_row0(k)[2], digits, k)
    # the fixed-point rounding of a tiny weight is 0, decided without 10^(0.3·10^k)
    tiny = trace.weights.decimals(Rounding(places=2))[0][1]
    assert tiny.text == "0.00" and tiny.mantissa == 0 and not tiny.exact


def test_scale_1e12_on_the_lesson_output():
    """scale = 10^12 crashed with SIGFPE in the output step (10**(4·10^11) as an fmpz)."""
    p = sa.load_example("i-love-cats")
    p.scale = sympy.Integer(10) ** 12
    trace = sa.Trace(p)
    for step in trace.step_names:
        trace.step(step).decimals(3)
    scores = [[2, 4, 4], [4, 16, 12], [4, 12, 10]]          # the lesson's Q·Kᵀ
    V = [[1, 2, 3], [2, 8, 0], [2, 6, 3]]                     # the lesson's X·W_v

    def weights(i):
        top = max(scores[i])
        exps = [mpmath.exp((s - top) * mpmath.mpf(10) ** 12) for s in scores[i]]
        return [x / sum(exps) for x in exps]

    got_w, got_o = trace.weights.decimals(3), trace.output.decimals(3)
    for i in range(3):
        for j in range(3):
            assert parts(got_w[i][j]) == ref(lambda: weights(i)[j], 3, 13), (i, j)
            assert parts(got_o[i][j]) == ref(lambda: sum(w * V[k][j] for k, w in enumerate(weights(i))),
                                             3, 13), (i, j)
    assert got_w[0][1].text == "0.500" and not got_w[0][1].exact   # 1/(2 + e^(-2·10^12))
    assert got_o[1][2].exponent < -10**12                          # 3(e^(-4·10^12) + ...) / ...


@pytest.mark.parametrize("expr, make, mag", [
    (sympy.exp(-sympy.Integer(10) ** 12), lambda: mpmath.exp(-mpmath.mpf(10) ** 12), 12),
    (-sympy.exp(-sympy.Integer(10) ** 30) / 7, lambda: -mpmath.exp(-mpmath.mpf(10) ** 30) / 7, 30),
    (sympy.exp(sympy.Integer(10) ** 12), lambda: mpmath.exp(mpmath.mpf(10) ** 12), 12),
    (sympy.exp(-sympy.Integer(10) ** 100 * sympy.sqrt(2)), lambda: mpmath.exp(-mpmath.mpf(10) ** 100 * mpmath.sqrt(2)), 100),
])
@pytest.mark.parametrize("digits", [3, 50])
def test_certify_huge_and_tiny(expr, make, mag, digits):
    d = certify(expr, digits)
    assert parts(d) == ref(make, digits, mag)
    assert not d.exact
    assert d.text.startswith("-" if d.mantissa < 0 else tuple("123456789"))
    assert "e" in d.text


def test_places_of_tiny_and_huge_values():
    assert certify(sympy.exp(-sympy.Integer(10) ** 12), places=3).text == "0.000"
    assert certify(-sympy.exp(-sympy.Integer(10) ** 12), places=0).text == "0"
    with pytest.raises(CertificationError) as info:
        certify(sympy.exp(sympy.Integer(10) ** 12), places=2)   # 4·10^11 digits before the point
    assert "digits=" in str(info.value) and "\n" not in str(info.value)


def test_tiny_decimal_has_no_fraction_but_a_clear_error():
    d = certify(sympy.exp(-sympy.Integer(10) ** 12), 3)
    with pytest.raises(SymattnError) as info:
        d.as_fraction()
    assert "digits" in str(info.value)
    small = certify(sympy.exp(-sympy.Integer(1000)), 3)       # 10^-435: still a fraction
    assert small.as_fraction() == Fraction(small.mantissa, 10 ** -small.exponent)


def test_certified_mpf_of_a_tiny_value():
    v = certified_mpf(sympy.exp(-sympy.Integer(10) ** 12), 20)
    with mpmath.workdps(60):
        expected = mpmath.nstr(mpmath.exp(-mpmath.mpf(10) ** 12), 20)
    assert mpmath.nstr(v, 20) == expected
