"""Cross-checks of the exact engine against independent computations.

Nothing here reuses symattn's arithmetic to produce the expected values:
- small random problems are recomputed in numpy float64 by a separate,
  textbook implementation (Q = X·W, scores, scale, −∞ mask, stable softmax,
  weights·V) and compared at 12 significant digits;
- exact invariants (rows sum to exactly 1, masked weights exactly 0, outputs
  inside the value range, scale 0 gives exactly 1/count) are checked on the
  exact SymPy entries and rational inputs;
- peaked rows where float64 underflows are recomputed with mpmath at 250
  digits (rounded half away from zero by this file's own code);
- rounding ties that only an exact decision can settle, and the lesson's
  printed numbers.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symattn as sa
from symattn import CertifiedDecimal, Rounding

# ---------------------------------------------------------------- helpers

STEPS_COMPARED = ("Q", "K", "V", "scores", "scaled", "masked", "shifted",
                  "exp", "row_sum", "weights", "output")


def is_neg_inf(d: object) -> bool:
    """The masked sentinel: not a decimal, printed as -inf."""
    return not isinstance(d, CertifiedDecimal) and str(d) == "-inf"


def texts(rows) -> list[list[str]]:
    return [[str(d) for d in row] for row in rows]


def round_half_away(x: mpmath.mpf, digits: int, margin: int = 40) -> tuple[Fraction, bool]:
    """x rounded half away from zero to `digits` significant digits, computed
    here with mpmath at the current (high) precision, plus whether x is safely
    away (relative distance > 10**-margin) from a rounding boundary."""
    if x == 0:
        return Fraction(0), True
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = int(mpmath.floor(mpmath.log10(a)))
    while a >= mpmath.mpf(10) ** (e + 1):
        e += 1
    while a < mpmath.mpf(10) ** e:
        e -= 1
    t = e - digits + 1                      # unit of the last digit is 10**t
    scaled = a / mpmath.mpf(10) ** t        # in [10**(digits-1), 10**digits)
    whole = int(mpmath.floor(scaled))
    frac = scaled - whole
    safe = abs(frac - mpmath.mpf(1) / 2) / scaled > mpmath.mpf(10) ** -margin
    m = whole + 1 if frac >= mpmath.mpf(1) / 2 else whole
    value = Fraction(sign * m) * (Fraction(10) ** t)
    return value, safe


def mp_of(q: Fraction) -> mpmath.mpf:
    return mpmath.mpf(q.numerator) / q.denominator


def mp_attention(Q, K, V, scale) -> tuple[list[list[mpmath.mpf]], list[list[mpmath.mpf]]]:
    """Weights and output in mpmath at the current precision (no mask): a
    separate implementation from the engine's (stable softmax, plain sums)."""
    n, m, dv = len(Q), len(K), len(V[0])
    weights, outputs = [], []
    for i in range(n):
        s = [scale * mpmath.fsum(mp_of(Q[i][c]) * mp_of(K[j][c]) for c in range(len(Q[i])))
             for j in range(m)]
        top = max(s)
        e = [mpmath.exp(x - top) for x in s]
        total = mpmath.fsum(e)
        w = [x / total for x in e]
        weights.append(w)
        outputs.append([mpmath.fsum(w[j] * mp_of(V[j][c]) for j in range(m)) for c in range(dv)])
    return weights, outputs


# ---------------------------------------------------------------- random problems

# exact scale text -> its float64 value as a function of d_k
SCALES = {
    None: lambda dk: 1 / np.sqrt(dk),
    1: lambda dk: 1.0,
    2: lambda dk: 2.0,
    "1/2": lambda dk: 0.5,
    "3/sqrt(5)": lambda dk: 3 / np.sqrt(5),
    0: lambda dk: 0.0,
}


def entry():
    """An integer or a one-decimal number in [-3, 3], as an exact Fraction."""
    return st.one_of(st.integers(-3, 3).map(Fraction),
                     st.integers(-30, 30).map(lambda k: Fraction(k, 10)))


def spelled(q: Fraction, how: int) -> object:
    """The same exact number in one of the input forms symattn accepts."""
    if how == 0 and q.denominator == 1:
        return int(q)
    if how == 1:
        return q
    if q.denominator == 1:
        return str(q.numerator)
    tenths = abs(int(q * 10))
    return ("-" if q < 0 else "") + f"{tenths // 10}.{tenths % 10}"    # "-0.5", "2.3"


def matrix(draw, rows: int, cols: int) -> list[list[Fraction]]:
    return [[draw(entry()) for _ in range(cols)] for _ in range(rows)]


@st.composite
def problems(draw):
    """(Problem kwargs, float64 Q, K, V, scale, 0/1 mask array, exact V)."""
    n = draw(st.integers(1, 5))
    d_k = draw(st.integers(1, 4))
    d_v = draw(st.integers(1, 4))
    how = draw(st.integers(0, 2))
    form = draw(st.sampled_from(["XW", "XW-cross", "QKV"]))
    kwargs: dict = {}

    def spell(mat):
        return [[spelled(q, how) for q in row] for row in mat]

    if form == "QKV":
        m = draw(st.integers(1, 5))
        Q, K, V = matrix(draw, n, d_k), matrix(draw, m, d_k), matrix(draw, m, d_v)
        kwargs.update(Q=spell(Q), K=spell(K), V=spell(V))
    else:
        d_model = draw(st.integers(1, 4))
        X = matrix(draw, n, d_model)
        W_q, W_k = matrix(draw, d_model, d_k), matrix(draw, d_model, d_k)
        W_v = matrix(draw, d_model, d_v)
        kwargs.update(X=spell(X), W_q=spell(W_q), W_k=spell(W_k), W_v=spell(W_v))
        if form == "XW-cross":
            m = draw(st.integers(1, 5).filter(lambda k: k != n))
            X_kv = matrix(draw, m, d_model)
            kwargs["X_kv"] = spell(X_kv)
        else:
            m, X_kv = n, X
        # the exact projections, in Fractions (the independent reference)
        Q = (np.array(X, dtype=object) @ np.array(W_q, dtype=object)).tolist()
        K = (np.array(X_kv, dtype=object) @ np.array(W_k, dtype=object)).tolist()
        V = (np.array(X_kv, dtype=object) @ np.array(W_v, dtype=object)).tolist()
        Q = [[Fraction(x) for x in row] for row in Q]
        K = [[Fraction(x) for x in row] for row in K]
        V = [[Fraction(x) for x in row] for row in V]

    scale = draw(st.sampled_from(list(SCALES)))
    if scale is not None:
        kwargs["scale"] = scale
    mask_kind = draw(st.sampled_from(["none", "causal", "matrix"]))
    if mask_kind == "causal":
        kwargs["mask"] = "causal"
        mask = np.array([[1 if j <= i else 0 for j in range(m)] for i in range(n)])
    elif mask_kind == "matrix":
        rows = []
        for _ in range(n):
            row = draw(st.lists(st.integers(0, 1), min_size=m, max_size=m).filter(any))
            rows.append(row)
        kwargs["mask"] = rows
        mask = np.array(rows)
    else:
        mask = np.ones((n, m), dtype=int)
    return dict(kwargs=kwargs, Q=Q, K=K, V=V, scale=SCALES[scale](d_k), mask=mask,
                n=n, m=m, d_k=d_k, d_v=d_v, has_mask=mask_kind != "none",
                zero_scale=scale == 0)


def float64_attention(Q, K, V, scale, mask) -> dict[str, np.ndarray]:
    """Textbook attention in float64 (stable softmax, −∞ at blocked keys)."""
    Qf = np.array([[float(x) for x in r] for r in Q], dtype=np.float64)
    Kf = np.array([[float(x) for x in r] for r in K], dtype=np.float64)
    Vf = np.array([[float(x) for x in r] for r in V], dtype=np.float64)
    scores = Qf @ Kf.T
    scaled = scores * scale
    masked = np.where(mask.astype(bool), scaled, -np.inf)
    shifted = masked - masked.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        ex = np.exp(shifted)
    row_sum = ex.sum(axis=1, keepdims=True)
    weights = ex / row_sum
    output = weights @ Vf
    return dict(Q=Qf, K=Kf, V=Vf, scores=scores, scaled=scaled, masked=masked,
                shifted=shifted, exp=ex, row_sum=row_sum, weights=weights, output=output)


SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- 1. float64 cross-check

@SETTINGS
@given(problems())
def test_random_problems_match_float64(case):
    trace = sa.attend(sa.Problem(**case["kwargs"]))
    ref = float64_attention(case["Q"], case["K"], case["V"], case["scale"], case["mask"])
    names = [s for s in STEPS_COMPARED if s != "masked" or case["has_mask"]]
    assert ("masked" in trace.step_names) == case["has_mask"]
    for name in names:
        step = trace.step(name)
        expected = ref[name]
        assert step.shape == expected.shape, name
        got = step.decimals(Rounding(digits=12))
        for i, row in enumerate(got):
            for j, d in enumerate(row):
                want = float(expected[i, j])
                if want == -np.inf:
                    assert is_neg_inf(d), (name, i, j, d)
                    continue
                assert isinstance(d, CertifiedDecimal), (name, i, j, d)
                value = float(d.as_fraction())
                assert abs(value - want) <= 1e-9 * max(1.0, abs(want)), (name, i, j, str(d), want)


# ---------------------------------------------------------------- 2. exact invariants

def _sums_to_one(row: list[sympy.Expr]) -> bool:
    total = sum(row, sympy.S.Zero)
    return sympy.together(total) == 1 or sympy.simplify(total - 1) == 0


@SETTINGS
@given(problems())
def test_random_problems_exact_invariants(case):
    trace = sa.attend(sa.Problem(**case["kwargs"]))
    n, m, d_v, mask, V = case["n"], case["m"], case["d_v"], case["mask"], case["V"]
    W = trace.weights
    rounding = Rounding(digits=12)
    outputs = trace.output.decimals(rounding)
    weights = W.decimals(rounding)
    for i in range(n):
        allowed = [j for j in range(m) if mask[i, j]]
        row = [W[i, j] for j in range(m)]
        # every row of weights sums to exactly 1
        assert _sums_to_one(row), (i, row)
        for j in range(m):
            if not mask[i, j]:
                assert row[j] == 0                      # exactly, not just small
                assert weights[i][j].mantissa == 0 and weights[i][j].exact
            else:
                assert row[j] != 0 and weights[i][j].mantissa > 0   # tiny, never 0 at 12 digits
        if case["zero_scale"]:
            for j in allowed:
                assert row[j] == sympy.Rational(1, len(allowed)) and row[j].is_Rational
                want = sa.certify(Fraction(1, len(allowed)), rounding)
                assert (weights[i][j].mantissa, weights[i][j].exponent, weights[i][j].exact) == \
                    (want.mantissa, want.exponent, want.exact)
        # the output lies between the smallest and largest allowed value
        for c in range(d_v):
            lo = min(V[j][c] for j in allowed)
            hi = max(V[j][c] for j in allowed)
            d = outputs[i][c]
            half = Fraction(10) ** d.exponent / 2
            assert lo - half <= d.as_fraction() <= hi + half, (i, c, str(d), lo, hi)
            # rounding is monotone, so the same holds for the rounded bounds
            assert sa.certify(lo, rounding).as_fraction() <= d.as_fraction() \
                <= sa.certify(hi, rounding).as_fraction()
            if lo == hi:                                 # a constant column: exact
                assert d.exact and d.as_fraction() == lo


def test_scale_zero_gives_exact_uniform_weights():
    trace = sa.attend(sa.Problem(Q=[[1, 2], [3, -1]], K=[[5, 0], [0, 7], [-2, 3]],
                                 V=[[1], [2], [4]], scale=0, mask=[[1, 1, 1], [1, 0, 1]]))
    assert trace.weights.matrix == sympy.ImmutableMatrix(
        [[sympy.Rational(1, 3)] * 3, [sympy.Rational(1, 2), 0, sympy.Rational(1, 2)]])
    assert all(w.is_Rational for w in trace.weights.matrix)
    assert trace.output[0, 0] == sympy.Rational(7, 3)
    assert trace.output[1, 0] == sympy.Rational(5, 2)
    assert texts(trace.weights.decimals(Rounding(digits=3))) == [["0.333"] * 3, ["0.5", "0", "0.5"]]
    assert texts(trace.output.decimals(Rounding(places=0))) == [["2"], ["3"]]


# ---------------------------------------------------------------- 3. peaked rows (float64 underflows)

PEAKED_Q = [[60, 70], [-1, 2]]
PEAKED_K = [[50, 60], [-50, -60], ["49.9", 60], [50, "59.9"]]
PEAKED_V = [["5/8", -3, 1], [7, 2, "1/3"], [-1, "0.1", 2], [4, 4, -5]]


def _fractions(mat) -> list[list[Fraction]]:
    return [[Fraction(x) for x in row] for row in mat]


@pytest.fixture(scope="module")
def peaked():
    return sa.attend(sa.Problem(Q=PEAKED_Q, K=PEAKED_K, V=PEAKED_V))


def test_peaked_rows_underflow_in_float64(peaked):
    Q, K, V = _fractions(PEAKED_Q), _fractions(PEAKED_K), _fractions(PEAKED_V)
    ref = float64_attention(Q, K, V, 1 / np.sqrt(2), np.ones((2, 4), dtype=int))
    assert ref["scores"][0, 0] == 7200.0 and ref["scores"][0, 1] == -7200.0
    assert ref["weights"][0, 1] == 0.0                 # float64 loses it entirely
    with np.errstate(over="ignore", invalid="ignore"):  # and the naive softmax is nan
        naive = np.exp(ref["scaled"][0])
        assert np.isnan(naive / naive.sum()).any()
    tiny = peaked.weights.decimal(0, 1, Rounding(digits=30))
    assert tiny.mantissa > 0 and tiny.exponent < -4000  # ~ e^(-14400/sqrt 2) ~ 1e-4422


def test_peaked_rows_match_mpmath(peaked):
    Q, K, V = _fractions(PEAKED_Q), _fractions(PEAKED_K), _fractions(PEAKED_V)
    digits = 30
    with mpmath.workdps(250):
        weights, outputs = mp_attention(Q, K, V, 1 / mpmath.sqrt(2))
        for name, ref in (("weights", weights), ("output", outputs)):
            got = peaked.step(name).decimals(Rounding(digits=digits))
            compared = 0
            for i, row in enumerate(ref):
                for j, x in enumerate(row):
                    want, safe = round_half_away(x, digits)
                    if not safe:
                        continue
                    compared += 1
                    assert got[i][j].as_fraction() == want, (name, i, j, str(got[i][j]))
                    assert len(str(abs(got[i][j].mantissa))) == digits
            assert compared == len(ref) * len(ref[0])
        # the tiny weight really is beyond float64's range, and nonzero
        assert weights[0][1] < mpmath.mpf(10) ** -4000 and weights[0][1] > 0
    # to_mpmath gives the same certified numbers
    with mpmath.workdps(40):
        mp = peaked.weights.to_mpmath(30)
        assert mpmath.nstr(mp[0, 2], 30) == mpmath.nstr(mpmath.mpf(str(
            peaked.weights.decimal(0, 2, Rounding(digits=30)))), 30)


# ---------------------------------------------------------------- 4. hard certified roundings

def test_equal_scores_give_exact_thirds_and_halves():
    # row 0: three equal scores (1, 1, 1) -> exactly 1/3 each, with an irrational scale
    # row 1: keys 0 and 2 tie, key 1 is blocked -> exactly 1/2
    trace = sa.attend(sa.Problem(Q=[[1, 1], [2, 2]], K=[[1, 0], [0, 1], [2, -1]],
                                 V=[[1, 0], [0, 1], [1, 1]], mask=[[1, 1, 1], [1, 0, 1]]))
    W = trace.weights
    assert [W[0, j] for j in range(3)] == [sympy.Rational(1, 3)] * 3
    assert [W[1, j] for j in range(3)] == [sympy.Rational(1, 2), 0, sympy.Rational(1, 2)]
    third = W.decimal(0, 1, Rounding(digits=3))
    assert str(third) == "0.333" and not third.exact
    half = W.decimal(1, 2, Rounding(digits=3))
    assert str(half) == "0.5" and half.exact
    assert str(W.decimal(1, 0, Rounding(places=0))) == "1"      # 0.5 -> 1, away from zero
    assert texts(W.decimals(Rounding(digits=3))) == [["0.333"] * 3, ["0.5", "0", "0.5"]]
    # outputs: (1+0+1)/3 = 2/3, (0+1+1)/3 = 2/3; row 1 = mean of V rows 0 and 2
    assert texts(trace.output.decimals(Rounding(places=2))) == [["0.67", "0.67"], ["1.00", "0.50"]]
    out = trace.output.decimal(1, 1, Rounding(digits=5))
    assert str(out) == "0.5" and out.exact


def test_constant_value_column_is_exact_through_irrational_weights():
    # weights are irrational (scores 3, 1, 0, 4 under 1/sqrt 2) but the first
    # value column is 5/8 everywhere: the output is exactly 0.625, a true tie
    # at 2 places, which must round half away from zero.
    trace = sa.attend(sa.Problem(Q=[[1, 2], [-1, 1]], K=[[1, 1], [1, 0], [0, 0], [2, 1]],
                                 V=[["5/8", "-1/8", 1], ["5/8", "-1/8", 2],
                                    ["0.625", "-0.125", 3], ["5/8", "-1/8", 4]]))
    assert not trace.weights[0, 0].is_Rational
    for i in range(2):
        d = trace.output.decimal(i, 0, Rounding(places=2))
        assert str(d) == "0.63" and not d.exact
        assert str(trace.output.decimal(i, 1, Rounding(places=2))) == "-0.13"
        exact = trace.output.decimal(i, 0, Rounding(places=3))
        assert str(exact) == "0.625" and exact.exact
    assert [row[:2] for row in texts(trace.output.decimals(Rounding(places=2)))] == \
        [["0.63", "-0.13"], ["0.63", "-0.13"]]
    assert str(trace.output.decimal(0, 0, Rounding(digits=2))) == "0.63"
    assert str(trace.output.decimal(0, 1, Rounding(digits=1))) == "-0.1"


def test_tied_groups_with_equal_means_give_an_exact_half():
    # scores 1, 1, 0: keys 0 and 1 tie; values 0 and 1 average to 1/2, key 2's
    # value is 1/2, so the output is exactly 1/2 although e^(-1/sqrt 2) is in it.
    trace = sa.attend(sa.Problem(Q=[[1, 0]], K=[[1, 0], [1, 0], [0, 1]],
                                 V=[[0, -1], [1, 0], ["1/2", "-1/2"]]))
    assert not trace.weights[0, 2].is_Rational
    assert texts(trace.output.decimals(Rounding(places=0))) == [["1", "-1"]]
    assert texts(trace.output.decimals(Rounding(places=1))) == [["0.5", "-0.5"]]
    assert all(d.exact for d in trace.output.decimals(Rounding(digits=3))[0])


def test_lesson_weight_to_1000_digits_matches_mpmath():
    trace = sa.attend(sa.load_example("i-love-cats"))
    digits = 1000
    # the lesson's scores, written out by hand: row "love" is 4, 16, 12
    with mpmath.workdps(1100):
        s = [mpmath.mpf(x) / mpmath.sqrt(3) for x in (4, 16, 12)]
        e = [mpmath.exp(x - s[1]) for x in s]
        for j, key in enumerate(("I", "love", "cats")):
            # 1100 digits are good to ~1e-1095: demand 1e-1040 from a boundary
            want, safe = round_half_away(e[j] / mpmath.fsum(e), digits, margin=1040)
            assert safe
            got = trace.weights.decimal("love", key, Rounding(digits=digits))
            assert got.as_fraction() == want, key
            assert len(str(got.mantissa)) == digits


# ---------------------------------------------------------------- 5. the lesson's numbers

P2 = Rounding(places=2)


@pytest.fixture(scope="module")
def cats():
    return sa.attend(sa.load_example("i-love-cats"))


def test_lesson_exact_matrices(cats):
    I = sympy.ImmutableMatrix
    assert cats.Q.matrix == I([[1, 0, 2], [2, 2, 2], [2, 1, 3]])
    assert cats.K.matrix == I([[0, 1, 1], [4, 4, 0], [2, 3, 1]])
    assert cats.V.matrix == I([[1, 2, 3], [2, 8, 0], [2, 6, 3]])
    assert cats.scores.matrix == I([[2, 4, 4], [4, 16, 12], [4, 12, 10]])
    assert sympy.simplify(cats.scaled["love", "cats"] - 12 / sympy.sqrt(3)) == 0


def test_lesson_printed_two_decimal_matrices(cats):
    assert texts(cats.scaled.decimals(P2)) == [
        ["1.15", "2.31", "2.31"], ["2.31", "9.24", "6.93"], ["2.31", "6.93", "5.77"]]
    assert texts(cats.weights.decimals(P2)) == [
        ["0.14", "0.43", "0.43"], ["0.00", "0.91", "0.09"], ["0.01", "0.75", "0.24"]]
    assert texts(cats.output.decimals(P2)) == [
        ["1.86", "6.32", "1.70"], ["2.00", "7.81", "0.27"], ["1.99", "7.48", "0.74"]]
    assert [str(cats.weights.decimal("I", k, Rounding(places=3))) for k in ("I", "love", "cats")] \
        == ["0.136", "0.432", "0.432"]


def test_lesson_matches_numpy_as_printed(cats):
    # the lesson's own numpy computation, printed at 2 decimals
    X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=float)
    W_q = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=float)
    W_k = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=float)
    W_v = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=float)
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    scaled = Q @ K.T / np.sqrt(3)
    w = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    for name, ref in (("scaled", scaled), ("weights", w), ("output", w @ V)):
        printed = [[f"{x:.2f}" for x in row] for row in ref]
        assert texts(cats.step(name).decimals(P2)) == printed, name


def test_lesson_unscaled_love_row():
    trace = sa.attend(sa.load_example("i-love-cats-unscaled"))
    assert trace.scaled.matrix == trace.scores.matrix
    assert [str(trace.weights.decimal("love", k, P2)) for k in ("I", "love", "cats")] == \
        ["0.00", "0.98", "0.02"]


@pytest.mark.parametrize("name, weights, output", [
    ("soft-dictionary", ["0.41", "0.22", "0.37"], ["200", "117"]),
    ("soft-dictionary-sharpness-5", ["0.61", "0.03", "0.37"], ["249", "67"]),
    ("soft-dictionary-sharpness-25", ["0.92", "0.00", "0.08"], ["255", "13"]),
])
def test_soft_dictionary(name, weights, output):
    trace = sa.attend(sa.load_example(name))
    assert [str(trace.weights.decimal("query", k, P2)) for k in ("red", "green", "orange")] \
        == weights
    assert texts(trace.output.decimals(Rounding(places=0))) == [output]
    # and against float64 directly (mild problem: fair reference)
    sharp = {"soft-dictionary": 1, "soft-dictionary-sharpness-5": 5,
             "soft-dictionary-sharpness-25": 25}[name]
    q, K = np.array([1.0, 0.1]), np.array([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]])
    V = np.array([[255, 0], [0, 255], [255, 165]], dtype=float)
    s = sharp * (K @ q) / np.sqrt(2)
    w = np.exp(s - s.max())
    w /= w.sum()
    got = trace.weights.decimals(Rounding(digits=12))[0]
    assert np.allclose([float(d.as_fraction()) for d in got], w, rtol=1e-10, atol=1e-12)
    got = trace.output.decimals(Rounding(digits=12))[0]
    assert np.allclose([float(d.as_fraction()) for d in got], w @ V, rtol=1e-10)
