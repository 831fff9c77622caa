"""The exact reference for float attention: ULP errors checked against an
independent mpmath computation, for float32 and float64 inputs."""

from fractions import Fraction

import mpmath
import pytest

import symattn as sa
from symattn import floatref as fr

np = pytest.importorskip("numpy")


def numpy_attention(Q, K, V, mask=None):
    dt = Q.dtype.type
    S = (Q @ K.T) / dt(np.sqrt(Q.shape[1]))
    if mask is not None:
        S = np.where(mask, S, dt(-np.inf))
    S = S - S.max(axis=1, keepdims=True)
    A = np.exp(S)
    A = A / A.sum(axis=1, keepdims=True)
    return A, A @ V


def mp_attention(Q, K, V, mask=None):
    """Attention in mpmath at 60 digits from the floats' exact binary values (independent)."""
    with mpmath.workdps(60):
        q, k, v = (mpmath.matrix([[mpmath.mpf(float(x)) for x in row] for row in M]) for M in (Q, K, V))
        d = q.cols
        n, m = q.rows, k.rows
        A = mpmath.matrix(n, m)
        for i in range(n):
            s = [sum(q[i, t] * k[j, t] for t in range(d)) / mpmath.sqrt(d) for j in range(m)]
            e = [mpmath.exp(x) if (mask is None or mask[i][j]) else mpmath.mpf(0) for j, x in enumerate(s)]
            total = sum(e)
            for j in range(m):
                A[i, j] = e[j] / total
        return A, A * v


def mp_ulps(y, x, p, e_min):
    with mpmath.workdps(60):
        if x == 0:
            unit = mpmath.mpf(2) ** (e_min - p + 1)
        else:
            e = int(mpmath.floor(mpmath.log(abs(x), 2)))
            unit = mpmath.mpf(2) ** (max(e, e_min) - p + 1)
        return (mpmath.mpf(float(y)) - x) / unit


@pytest.mark.parametrize("dtype, p, e_min", [("float32", 24, -126), ("float64", 53, -1022)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ulp_report_agrees_with_mpmath(dtype, p, e_min, seed):
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.standard_normal((3, 4)).astype(dtype) for _ in range(3))
    mask = [[j <= i for j in range(3)] for i in range(3)] if seed == 2 else None
    A, O = numpy_attention(Q, K, V, None if mask is None else np.array(mask))
    mpA, mpO = mp_attention(Q, K, V, mask)
    for step, got, want in (("output", O, mpO), ("weights", A, mpA)):
        report = fr.float_report(Q, K, V, got, step=step, digits=4, causal=seed == 2)
        assert report.fmt == dtype
        for e in report.entries:
            expected = mp_ulps(got[e.row, e.col], want[e.row, e.col], p, e_min)
            # the certified 4-digit rounding is within half a unit of its last digit
            assert abs(mpmath.mpf(e.ulps.as_fraction().numerator) / e.ulps.as_fraction().denominator
                       - expected) <= mpmath.mpf(10) ** (e.ulps.exponent) / 2
            if want[e.row, e.col] != 0:
                rel = (mpmath.mpf(float(got[e.row, e.col])) - want[e.row, e.col]) / abs(want[e.row, e.col])
                r = e.relative.as_fraction()
                assert abs(mpmath.mpf(r.numerator) / r.denominator - rel) <= \
                    mpmath.mpf(10) ** e.relative.exponent / 2
        if dtype == "float64":
            assert report.max_ulps < 8
    if seed == 2:  # masked weights: exactly 0 in both, so 0 ulp and no relative error
        masked = [e for e in fr.float_report(Q, K, V, A, step="weights", causal=True).entries
                  if e.col > e.row]
        assert all(e.ulps.mantissa == 0 and e.relative is None for e in masked)


def test_binary_and_text_modes():
    x = np.array([[0.1, 0.5]], dtype=np.float32)
    binary = fr.exact_values(x, "binary")
    text = fr.exact_values(x, "text")
    assert binary[0][0] == Fraction(13421773, 134217728)  # float32(0.1) exactly
    assert text[0][0] == Fraction(1, 10)  # the shortest text that round-trips in float32
    assert binary[0][1] == text[0][1] == Fraction(1, 2)
    assert fr.exact_values([[0.1]], "text")[0][0] == Fraction(1, 10)


def test_a_tied_row_is_judged_exactly():
    Q = np.zeros((1, 2), dtype=np.float32)
    K = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
    V = np.eye(3, dtype=np.float32)
    A, O = numpy_attention(Q, K, V)
    report = fr.float_report(Q, K, V, A, step="weights")
    third = Fraction(1, 3)
    got = Fraction(float(A[0, 0]))
    want = (got - third) / fr.ulp_of(third, "float32")
    assert report.entries[0].ulps == sa.certify(want, 3)
    assert str(report.entries[0].exact) == "0.333333333"


def test_ulp_of():
    assert fr.ulp_of(Fraction(1), "float64") == Fraction(1, 2 ** 52)
    assert fr.ulp_of(Fraction(3, 4), "float32") == Fraction(1, 2 ** 24)
    assert fr.ulp_of(Fraction(0), "float32") == Fraction(1, 2 ** 149)
    assert Fraction(float(np.spacing(np.float32(0.75)))) == fr.ulp_of(Fraction(3, 4), "float32")


def test_mask_conventions():
    blocked = np.array([[False, True], [False, False]])  # nn.MultiheadAttention: True = blocked
    assert fr.blocked_to_attend(blocked) == [[1, 0], [1, 1]]
    assert fr.attend_mask(~blocked) == [[1, 0], [1, 1]]  # SDPA: True = attend
    assert fr.attend_mask(np.array([[0.0, -np.inf], [0.0, 0.0]])) == [[1, 0], [1, 1]]
    assert fr.key_padding_to_attend(np.array([False, True]), 2) == [[1, 0], [1, 0]]
    with pytest.raises(fr.FloatRefError, match="only hold 0 and -inf"):
        fr.attend_mask(np.array([[0.0, 1.5]]))


@pytest.mark.parametrize("value, words", [
    (np.array([[np.nan]]), "is nan: give finite numbers"),
    (np.zeros((1, 1, 2)), "slice batches and heads first"),
])
def test_bad_arrays_are_one_line_errors(value, words):
    with pytest.raises(sa.SymattnError, match=words):
        fr.exact_values(value)


def test_torch_tensors_when_torch_is_installed():
    torch = pytest.importorskip("torch")
    q = torch.tensor([[0.1, 0.2]], dtype=torch.float32)
    assert fr.exact_values(q)[0][0] == Fraction(13421773, 134217728)
    assert fr.format_of(q) == "float32"
    k = v = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    out = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]
    assert fr.float_report(q, k, v, out).max_ulps < 4


def test_text_mode_reads_the_inputs_as_a_person_meant_them():
    Q = np.array([[0.1, 0.2]], dtype=np.float32)
    K = np.array([[0.3, 0.0], [0.0, 0.3]], dtype=np.float32)
    V = np.array([[1.0], [2.0]], dtype=np.float32)
    by_text = fr.reference(Q, K, V, mode="text")
    assert by_text.Q.matrix.tolist() == [[sa.to_exact("1/10"), sa.to_exact("1/5")]]
    by_binary = fr.reference(Q, K, V)
    assert by_binary.Q[0, 0] == sa.to_exact("13421773/134217728")
    A, O = numpy_attention(Q, K, V)
    report = fr.float_report(Q, K, V, O, mode="text")
    assert report.mode == "text" and "decimal text" in report.text()
    assert report.to_json()["entries"][0]["exact"] == str(report.entries[0].exact)
