"""Any digit count from 1 to 100,000 (issue 8 item 1: past 400 digits crashed).

Every value is checked against a reference written here that shares no code
with symattn: Python integers for rationals, integer square roots for
surds, e by binary splitting of Σ 1/k! (Python integers, with its error
bound), and mpmath at the target digits plus a guard for the lesson's
exponentials.  An irrational reference asserts that its rounding is not
ambiguous (both ends of its error interval round alike).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import flint
import mpmath
import pytest
import sympy

import symattn as sa
from symattn.numbers.certify import CertifiedDecimal, Rounding, certify

DIGITS = [401, 1000, 10_000, 100_000]


# ---------------------------------------------------------------- references

def _ratio(x: Fraction | tuple[int, int]) -> tuple[int, int]:
    return x if isinstance(x, tuple) else (x.numerator, x.denominator)


def _round_half_up(p: int, q: int) -> int:
    """p/q >= 0 rounded half away from zero, with integers.  The division is
    GMP's (flint.fmpz): Python's is quadratic, 6 s at 100,000 digits; no arb
    ball and no symattn code is involved."""
    m, r = (int(v) for v in divmod(flint.fmpz(p), flint.fmpz(q)))
    return m + 1 if 2 * r >= q else m


def ref_interval(lo, hi, digits: int) -> tuple[int, int]:
    """(mantissa, exponent) of every x in [lo, hi] (0 < lo <= hi; Fractions or
    (p, q) integer pairs, which skip Fraction's gcd on 300,000-bit numbers)
    rounded half away from zero to ``digits`` significant digits; fails if
    the ends round apart."""
    (lp, lq), (hp, hq) = _ratio(lo), _ratio(hi)
    assert 0 < lp and 0 < lq and lp * hq <= hp * lq
    e = int((lp.bit_length() - lq.bit_length()) * 0.30103)

    def below(p: int, q: int, k: int) -> bool:      # p/q < 10^k
        return p < q * 10**k if k >= 0 else p * 10**-k < q
    while not below(lp, lq, e + 1):
        e += 1
    while below(lp, lq, e):
        e -= 1
    t = e - digits + 1
    ends = []
    for p, q in ((lp, lq), (hp, hq)):
        m = _round_half_up(p * 10**-t, q) if t <= 0 else _round_half_up(p, q * 10**t)
        ends.append((m, t) if m < 10**digits else (m // 10, t + 1))
    assert ends[0] == ends[1], "the reference itself is ambiguous at this rounding"
    return ends[0]


def ref_rational(q: Fraction, digits: int) -> tuple[int, int]:
    sign = -1 if q < 0 else 1
    m, t = ref_interval(abs(q), abs(q), digits)
    return sign * m, t


def same(d: CertifiedDecimal, ref: tuple[int, int]) -> bool:
    """d is ref (mantissa, exponent), up to trailing zeros of an exact value."""
    m, t = d.mantissa, d.exponent
    rm, rt = ref
    while t < rt:
        if m % 10:
            return False
        m, t = m // 10, t + 1
    while rt < t:
        if rm % 10:
            return False
        rm, rt = rm // 10, rt + 1
    return m == rm


def e_bounds(digits: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """e in [lo, hi] as (p, q) pairs: Σ_{k<=N} 1/k! by binary splitting, tail < 2/(N+1)!."""
    def split(a: int, b: int) -> tuple[int, int]:   # Σ_{k=a+1}^{b} a!/k! = P/Q
        if b - a == 1:
            return 1, b
        m = (a + b) // 2
        p1, q1 = split(a, m)
        p2, q2 = split(m, b)
        return p1 * q2 + p2, q1 * q2
    n = 10
    while math.lgamma(n + 2) / math.log(10) < digits + 30:
        n *= 2
    p, q = split(0, n)
    return (p + q, q), ((p + q) * (n + 1) + 2, q * (n + 1))


def sqrt_bounds(k: int, digits: int) -> tuple[int, int, int]:
    """√k in [r/scale, (r + 1)/scale] with an integer square root: (r, r + 1, scale)."""
    scale = 10 ** (digits + 30)
    r = math.isqrt(k * scale * scale)
    return r, r + 1, scale


# ---------------------------------------------------------------- rationals

RATIONALS = [7, -12, 10**450 + 1, -(10**1200) // 7, Fraction(1, 4), Fraction(1, 2), Fraction(-1, 3),
             Fraction(2, 7), Fraction(1, 2**1500), Fraction(10**30_000 + 3, 10**30_000)]


@pytest.mark.parametrize("digits", DIGITS)
def test_rationals_at_many_digits(digits):
    limit = sys.get_int_max_str_digits()
    for q in RATIONALS:
        d = certify(q if isinstance(q, int) else sympy.Rational(q.numerator, q.denominator), digits)
        assert same(d, ref_rational(Fraction(q), digits)), (q, digits)
        assert d.exact == (d.as_fraction() == Fraction(q))
    assert sys.get_int_max_str_digits() == limit          # no global surprise
    assert certify(sympy.Rational(1, 4), digits).text == "0.25"
    assert certify(7, digits).text == "7"
    third = certify(sympy.Rational(-1, 3), digits).text
    assert third == "-0." + "3" * digits


@pytest.mark.parametrize("digits", DIGITS)
def test_places_at_many_digits(digits):
    d = certify(sympy.Rational(2, 7), places=digits)
    assert d.exponent == -digits and len(d.text) == digits + 2
    assert same(d, ref_interval(Fraction(2, 7), Fraction(2, 7), digits))   # 2/7 < 1: places = digits
    assert certify(sympy.Rational(1, 4), places=digits).text == "0.25" + "0" * (digits - 2)


# ---------------------------------------------------------------- steps of a trace

@pytest.fixture(scope="module")
def tied():
    """A tied row (weights 1/2, output the mean 3/2) and e^0 = 1."""
    return sa.attend(Q=[[1, 1]], K=[[1, 0], [0, 1]], V=[[1], [2]])


@pytest.mark.parametrize("digits", DIGITS)
def test_exact_steps_at_many_digits(tied, digits):
    assert [d.text for d in tied.weights.decimals(digits)[0]] == ["0.5", "0.5"]
    assert tied.output.decimals(digits)[0][0].text == "1.5"
    assert [d.text for d in tied.exp.decimals(digits)[0]] == ["1", "1"]
    assert tied.row_sum.decimals(digits)[0][0].text == "2"
    assert [d.text for d in tied.scores.decimals(digits)[0]] == ["1", "1"]
    assert all(d.exact for d in tied.weights.decimals(digits)[0])


def _lesson_reference(dps: int):
    """The lesson's weights and outputs in mpmath, from the inputs (not from symattn)."""
    X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
    Wq = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
    Wk = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
    Wv = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
    mul = lambda A, B: [[sum(a * b for a, b in zip(row, col)) for col in zip(*B)] for row in A]
    Q, K, V = mul(X, Wq), mul(X, Wk), mul(X, Wv)
    scores = [[sum(a * b for a, b in zip(q, k)) for k in K] for q in Q]
    with mpmath.workdps(dps):
        weights = []
        for row in scores:
            top = max(row)
            exps = [mpmath.exp((s - top) / mpmath.sqrt(3)) for s in row]
            weights.append([x / sum(exps) for x in exps])
        outputs = [[sum(w * V[j][c] for j, w in enumerate(row)) for c in range(3)] for row in weights]
    return weights, outputs


def _mp_bounds(v: mpmath.mpf, dps: int) -> tuple[Fraction, Fraction]:
    man, exp = v.man_exp
    x = Fraction(int(man)) * Fraction(2) ** int(exp)
    eps = x * Fraction(1, 10 ** (dps - 10))       # mpmath is good to a few ulps
    return x - eps, x + eps


@pytest.fixture(scope="module")
def lesson():
    return sa.attend(sa.load_example("i-love-cats"))


@pytest.mark.parametrize("digits", [401, 1000, 10_000])
def test_lesson_weights_and_outputs(lesson, digits):
    dps = digits + 40
    weights, outputs = _lesson_reference(dps)
    for step, ref in (("weights", weights), ("output", outputs)):
        got = lesson.step(step).decimals(digits)
        for i in range(3):
            for j in range(3):
                assert same(got[i][j], ref_interval(*_mp_bounds(ref[i][j], dps), digits)), (step, i, j)
    assert lesson.exp.decimals(digits)[0][1].text == "1"            # e^0 = 1, exact
    assert lesson.Q.decimals(digits)[0][0].text == "1"


# ---------------------------------------------------------------- 100,000 digits

@pytest.fixture(scope="module")
def e_trace():
    """weights = [1/(1+e), e/(1+e)], output = e/(1+e): scale 1, scores [0, 1]."""
    return sa.attend(Q=[[1]], K=[[0], [1]], V=[[0], [1]], scale=1)


def test_e_at_100000_digits(e_trace):
    digits = 100_000
    (lp, lq), (hp, hq) = e_bounds(digits)
    assert same(certify(sympy.E, digits), ref_interval((lp, lq), (hp, hq), digits))
    w = e_trace.weights.decimals(digits)[0]
    # 1/(1+e) falls and e/(1+e) rises with e
    assert same(w[0], ref_interval((hq, hq + hp), (lq, lq + lp), digits))
    assert same(w[1], ref_interval((lp, lq + lp), (hp, hq + hp), digits))
    assert e_trace.output.decimals(digits)[0][0] == w[1]
    assert len(w[0].text) == digits + 2 and w[0].text.startswith("0.2689414213699951")


@pytest.mark.parametrize("digits", [401, 100_000])
def test_algebraic_weights_at_many_digits(digits):
    """scale = log(2)/2: exps [2^(-1/2), 1], weights [√2 − 1, 2 − √2] (issue 8 item 11 too)."""
    trace = sa.attend(Q=[[1]], K=[[0], [1]], V=[[2], [4]], scale="log(2)/2")
    lo, hi, s = sqrt_bounds(2, digits)                              # √2 in [lo/s, hi/s]
    w = trace.weights.decimals(digits)[0]
    assert same(w[0], ref_interval((lo - s, s), (hi - s, s), digits))
    assert same(w[1], ref_interval((2 * s - hi, s), (2 * s - lo, s), digits))
    out = trace.output.decimals(digits)[0][0]                        # 2(√2−1) + 4(2−√2) = 6 − 2√2
    assert same(out, ref_interval((6 * s - 2 * hi, s), (6 * s - 2 * lo, s), digits))
    assert same(trace.exp.decimals(digits)[0][0], ref_interval((lo, 2 * s), (hi, 2 * s), digits))


def test_rounding_spec_allows_exactly_1_to_100000():
    assert certify(sympy.sqrt(2), 1).text == "1"
    with pytest.raises(sa.SymattnError):
        certify(sympy.sqrt(2), 100_001)
    with pytest.raises(sa.SymattnError):
        certify(sympy.sqrt(2), 0)
    assert Rounding(digits=100_000).digits == 100_000
