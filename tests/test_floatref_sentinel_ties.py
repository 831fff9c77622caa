"""Outputs and log-sum-exps that a finite sentinel mask (−1e9, −5e4, float32's minimum) puts
within e^(−1e9) of a rounding midpoint: decided by the sign of the distance
(symattn.floatref.ties), checked against the sign argument done here with Fractions on
numbers crafted so that the dominant term is known."""

from fractions import Fraction

import mpmath
import pytest

from symattn import floatref
from symattn.floatref import binary, ties

np = pytest.importorskip("numpy")

F32_MIN = float(np.finfo(np.float32).min)
SENTINELS = (-1e9, -5e4, F32_MIN)
#: 54 < e^4 < 55 (e^4 = 54.598…): the dominance bound used below
E4_LOW = 54


def neighbours(dtype, a: float) -> tuple[Fraction, Fraction]:
    """a (a positive value of dtype) and the next value up, as Fractions (numpy's own nextafter)."""
    if dtype == "float16":
        b = float(np.nextafter(np.float16(a), np.float16(np.inf)))
    elif dtype == "float32":
        b = float(np.nextafter(np.float32(a), np.float32(np.inf)))
    else:                                    # bfloat16: the float32 bits' top half, plus one
        bits = int(np.float32(a).view(np.uint32)) >> 16
        b = float(np.array([(bits + 1) << 16], dtype=np.uint32).view(np.float32)[0])
    return Fraction(a), Fraction(b)


def is_even(dtype, x: Fraction) -> bool:
    """The last significand bit of x in dtype is 0 (read from numpy's bits)."""
    if dtype == "float16":
        return int(np.float16(float(x)).view(np.uint16)) & 1 == 0
    bits = int(np.float32(float(x)).view(np.uint32))
    return (bits >> 16 if dtype == "bfloat16" else bits) & 1 == 0


def crafted(dtype, sentinel):
    """Row 0 sees key 0 (t = 0, v_0 = m a midpoint) at full weight and keys 1..7 at
    t_j = a_j + sentinel, a = 4 for keys 1, 2 and 0 for keys 3..7.  Columns:
    0 v_1 > m (up), 1 v_1 < m (down), 2 m < 0 with v_1 above it, 3 keys 1 and 2 cancel
    exactly and keys 3..7 decide (below), 4 every lower term cancels (exactly m: ties to even)."""
    a, b = neighbours(dtype, 1.5)
    m = (a + b) / 2
    d = b - a
    cols = [
        [m, m + d, m, m - 3 * d, m, m, m, m],
        [m, m - d, m, m + 9 * d, m + d, m, m, m],
        [-m, -m + 2 * d, -m, -m - 5 * d, -m, -m, -m, -m],
        [m, m + 7 * d, m - 7 * d, m - d, m - d, m + d, m, m],
        [m, m + 7 * d, m - 7 * d, m - d, m + d, m, m, m],
    ]
    V = np.array([[float(c[j]) for c in cols] for j in range(8)], dtype=np.float64)
    K = np.zeros((8, 4))
    K[1, 0] = K[2, 0] = 4.0
    Q = np.zeros((8, 4))
    Q[:, 0] = 1.0
    mask = np.where(np.tril(np.ones((8, 8), bool)), 0.0, sentinel).astype(np.float32)
    scores = [Fraction(int(x)) for x in K[:, 0]]
    return Q, K, V, mask, scores, cols, (a, b)


def expected_row0(column, scores, dtype) -> Fraction:
    """RN of row 0's output by the sign argument: o − m has the sign of
    e^4·C4 + C0 (C_a = Σ over keys j ≥ 1 at score a of v_j − m; the sentinel is common)."""
    m = column[0]
    C4 = sum((column[j] - m for j in range(1, 8) if scores[j] == 4), Fraction(0))
    C0 = sum((column[j] - m for j in range(1, 8) if scores[j] == 0), Fraction(0))
    if C4 != 0:
        assert E4_LOW * abs(C4) > abs(C0)        # e^4·|C4| > |C0|: the crafted dominance
        sign = 1 if C4 > 0 else -1
    else:
        sign = (C0 > 0) - (C0 < 0)
    lo, hi = neighbours(dtype, 1.5)
    lo, hi = (lo, hi) if m > 0 else (-hi, -lo)  # the neighbours of m, in value order
    if sign == 0:
        return lo if is_even(dtype, abs(lo)) else hi
    return hi if sign > 0 else lo


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("sentinel", SENTINELS)
def test_output_on_a_midpoint_rounds_by_the_sign_of_the_masked_keys(dtype, sentinel):
    Q, K, V, mask, scores, cols, _ = crafted(dtype, sentinel)
    ref = floatref.correctly_rounded(Q[None, None], K[None, None], V[None, None], dtype=dtype,
                                     attn_mask=mask, scale=1.0)
    got = [Fraction(float(x)) for x in ref.output[0, 0, 0]]
    want = [expected_row0(c, scores, dtype) for c in cols]
    assert got == want
    assert got[0] > cols[0][0] and got[1] < cols[1][0] and got[2] > cols[2][0] and got[3] < cols[3][0]
    a, b = neighbours(dtype, 1.5)
    assert got[4] == (a if is_even(dtype, a) else b)          # 1.5 is even in all three


def test_the_exact_tie_branch_rounds_half_even():
    """Every group's sum of v − m is 0: the output is m exactly, rounded half to even."""
    a, b = neighbours("float16", 1.5)
    m = (a + b) / 2
    import flint

    fmt = binary.BINARY_FORMATS["float16"]
    tags = [0, 1, 1, 2]
    vals = [m, m + b - a, m - (b - a), m]

    def t_of(js):
        return [flint.arb(-1e9 * tags[j]) for j in js]

    got = ties.decide_by_sign(tags, t_of, vals, fmt)
    assert Fraction(got) == (a if is_even("float16", a) else b)


def test_boundary_near_refuses_a_ball_off_every_midpoint():
    import flint

    fmt = binary.BINARY_FORMATS["float16"]
    assert ties.boundary_near(flint.arb(1.5), fmt) is None           # a value, not a boundary
    got = ties.boundary_near(flint.arb(1.5 + 2.0 ** -11), fmt)
    assert got == (Fraction(3, 2) + Fraction(1, 2048), Fraction(1, 4096))


def test_the_reported_case_no_longer_refuses():
    """The issue's (1, 4, 512, 64) float16 case: output[0, 0, 0, 13] is V[0, 0, 0, 13] (a float16
    midpoint) plus the masked keys' e^(−1e9)-weighted pull; its sign is that of
    Σ_{j ≥ 1} e^(t_j)·(v_j − m), computed here in mpmath at 120 digits (the sentinel is common to
    every j ≥ 1, so nothing cancels but the terms themselves; the margin is asserted)."""
    rng = np.random.default_rng(1)
    shape = (1, 4, 512, 64)
    Q = rng.standard_normal(shape).astype(np.float32) * 3.0
    K = rng.standard_normal(shape).astype(np.float32)
    V = rng.standard_normal(shape).astype(np.float32)
    mask = np.where(np.tril(np.ones((512, 512), bool)), 0, -1e9).astype(np.float32)
    ref = floatref.correctly_rounded(Q, K, V, dtype="float16", attn_mask=mask)
    m = Fraction(float(V[0, 0, 0, 13]))
    lo, hi = sorted(Fraction(float(np.float16(x))) for x in (float(m) - 2.0 ** -15, float(m) + 2.0 ** -15))
    assert m == (lo + hi) / 2 and hi - lo == Fraction(1, 2 ** 14)   # m is a float16 midpoint
    with mpmath.workdps(120):
        q = [mpmath.mpf(float(x)) for x in Q[0, 0, 0]]
        total = mpmath.mpf(0)
        for j in range(1, 512):
            t = mpmath.fsum(a * mpmath.mpf(float(b)) for a, b in zip(q, K[0, 0, j])) / 8
            total += mpmath.exp(t) * (mpmath.mpf(float(V[0, 0, j, 13])) - mpmath.mpf(float(m)))
        assert abs(total) > mpmath.mpf(10) ** -30
        want = hi if total > 0 else lo
    assert Fraction(float(ref.output[0, 0, 0, 13])) == want


@pytest.mark.parametrize("lse_dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("negative", [False, True])
def test_lse_on_a_midpoint_rounds_up_by_the_masked_keys(lse_dtype, negative):
    """Row 0: one key at full weight with t_0 = m a midpoint of lse_dtype, the rest behind −1e9:
    lse = m + log1p(Σ e^(t_j − m)) > m, so it rounds to the neighbour above m."""
    a = Fraction(3, 2)
    b = {"float16": a + Fraction(1, 1024), "float32": a + Fraction(1, 2 ** 23),
         "float64": a + Fraction(1, 2 ** 52)}[lse_dtype]
    m = (a + b) / 2
    sign = -1 if negative else 1
    m = sign * m
    Q = np.ones((1, 1, 4, 2))
    K = np.zeros((1, 1, 4, 2))
    K[0, 0, 0] = [float(sign * a), float(m - sign * a)]   # t_00 = m exactly (scale 1; 54 bits for float64)
    K[0, 0, 1:, 0] = [0.5, -1.0, 2.0]
    V = np.ones((1, 1, 4, 1))
    mask = np.where(np.tril(np.ones((4, 4), bool)), 0, -1e9).astype(np.float32)
    ref = floatref.correctly_rounded(Q, K, V, dtype="float32", attn_mask=mask, scale=1.0,
                                     return_lse=True, lse_dtype=lse_dtype)
    above = -a if negative else b
    assert Fraction(float(ref.lse[0, 0, 0])) == above


@pytest.mark.parametrize("negative", [False, True])
def test_given_backward_dv_on_a_midpoint_rounds_by_the_masked_rows(negative):
    """The given-O-and-lse backward: each row sees only its own key (a −1e9 sentinel on the
    rest), so lse_i = t_ii, P_ii = e^0 = 1 exactly and dV_j = dO_j + Σ_{i≠j} e^(t_ij − 1e9 − t_ii)·dO_i.
    dO_j is a float16 midpoint and every dO_i has its sign: dV_j lies strictly beyond dO_j, away
    from 0, and rounds to the neighbour on that side (half a quantum, 2^-11 at 1.5, further)."""
    sign = -1.0 if negative else 1.0
    Q = np.zeros((1, 1, 4, 2), np.float32)
    Q[..., 0] = 1
    K = np.zeros((1, 1, 4, 2), np.float32)
    K[0, 0, :, 0] = [0.5, 1.0, -0.25, 2.0]
    V = (np.arange(4, dtype=np.float32) / 4).reshape(1, 1, 4, 1)
    mids = [Fraction(3, 2) + Fraction(2 * n + 1, 2 ** 11) for n in (0, 2, 0, 4)]
    dO = np.array([sign * float(x) for x in mids], np.float32).reshape(1, 1, 4, 1)
    allowed = np.eye(4, dtype=bool)
    fwd = floatref.correctly_rounded(Q, K, V, dtype="float32", attn_mask=allowed, mask_value=-1e9,
                                     scale=1.0, return_lse=True)
    assert fwd.lse.ravel().tolist() == [0.5, 1.0, -0.25, 2.0]          # lse_i = t_ii: P_ii = 1
    r = floatref.correctly_rounded_backward(Q, K, V, dO, dtype="float16", attn_mask=allowed,
                                            mask_value=-1e9, scale=1.0,
                                            given={"out": fwd.output, "lse": fwd.lse})
    want = [sign * float(x + Fraction(1, 2 ** 11)) for x in mids]
    assert r.dV.ravel().tolist() == want
