"""The double-double rows of the narrow targets decided in the target format itself
(sdpa._refine64 through heads.decide_dd_into): a small output from cancellation, whose
double-double radius is too wide for its float64 rounding, is decided for float32 and the
narrower formats without arb; an output exactly on a midpoint of the format still goes to
arb and comes out tied to even.  Values against Fractions (exact weights 1/4) and mpmath."""

from fractions import Fraction

import pytest

from symattn import floatref as fr

np = pytest.importorskip("numpy")
from test_floatref_blocks import rne  # noqa: E402
from test_floatref_sdpa import assert_matches  # noqa: E402

P = {"float32": 24, "bfloat16": 8, "float16": 11}


def cancelling(x: float):
    """Q = 0, so every weight is exactly 1/4; V's first column 1, −1, x, 0: output x/4."""
    Q, K = np.zeros((3, 2)), np.arange(8, dtype=np.float64).reshape(4, 2)
    V = np.array([[1.0, 0.5], [-1.0, 0.25], [x, 0.125], [0.0, 1.0]])
    return Q, K, V


@pytest.mark.parametrize("dtype", list(P))
@pytest.mark.parametrize("x", [3.3e-12, -7.1e-13, 2.0 ** -40 * 1.2345])
def test_a_small_cancelled_output_is_decided_without_arb(dtype, x):
    """|output| ≈ 1e-12 beside |v| = 1: the float64 bounds (about 1e-15 absolute) and the
    float64 rounding of the double-double ones (radius about 1e-25 against a half ulp near
    1e-28) decide nothing; the target's rounding (half ulp near 1e-19 for float32) does."""
    from symattn.floatref import fast64, sdpa

    Q, K, V = cancelling(x)
    exact = Fraction(x) / 4
    ref = fr.correctly_rounded(Q, K, V, dtype=dtype)
    assert ref.arb_entries == 0
    assert ref.output[:, 0].tolist() == [rne(float(exact), dtype)] * 3      # x/4 is a float64
    assert ref.weights.tolist() == [[0.25] * 4] * 3
    # the double-double enclosure alone does not decide the float64 rounding
    pr = sdpa.normalise(Q, K, V)
    scores, values = fast64.products(pr.K, pr.V, 2)
    _, (hi, lo, rad), _ = fast64._block(pr.Q, scores, values, None, None, fast64.scale_dd(pr.scale), 2)
    assert not fast64.decide64(hi, lo, rad)[1][:, 0].any()
    assert_matches(ref, Q, K, V, dtype)


@pytest.mark.parametrize("dtype", list(P))
def test_an_output_on_a_midpoint_still_goes_to_arb(dtype):
    """x/4 exactly halfway between 2^e and the format's next value above it (e = −40, or
    −12 for float16, whose range ends near 2^-24): no enclosure decides it; arb rounds it
    to even (2^e)."""
    p, e = P[dtype], (-12 if dtype == "float16" else -40)
    mid = Fraction(2) ** e * (1 + Fraction(2) ** -p)
    Q, K, V = cancelling(float(4 * mid))
    ref = fr.correctly_rounded(Q, K, V, dtype=dtype)
    assert ref.arb_entries == 3
    assert ref.output[:, 0].tolist() == [2.0 ** e] * 3
    assert rne(float(mid), dtype) == 2.0 ** e                      # mid is a float64


@pytest.mark.parametrize("dtype", list(P))
@pytest.mark.parametrize("k", [40, 52, 60])
def test_near_midpoint_cancellation_against_mpmath(dtype, k):
    """Random keys, queries near zero (scores about 2^-k), and V's first column cancelling
    to about 2^-k: every entry against mpmath, however it was decided."""
    rng = np.random.default_rng(k)
    K = rng.standard_normal((6, 3))
    Q = rng.standard_normal((4, 3)) * 2.0 ** -k
    V = rng.standard_normal((6, 2))
    V[1:, 0] = -V[0, 0] / 5 + 2.0 ** -k * rng.standard_normal(5)
    ref = fr.correctly_rounded(Q, K, V, dtype=dtype)
    assert_matches(ref, Q, K, V, dtype)


@pytest.mark.parametrize("undecided", ["weights only", "two output columns"])
def test_the_double_double_rows_compute_only_the_undecided_output_columns(undecided):
    """Entries the float64 bounds decided, marked undecided and overwritten: the double-double
    step decides them again to the same values, through the value columns that hold an
    undecided output only (none when only weights are left)."""
    from symattn.floatref.binary import BINARY_FORMATS
    from symattn.floatref.sdpa import _fast_slice, _refine64, normalise

    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((1, 1, n, 16)).astype(np.float32) for n in (40, 300, 300))
    pr, fmt = normalise(Q, K, V), BINARY_FORMATS["float32"]
    w, w_ok, o, o_ok, _ = _fast_slice(pr, (0, 0), None, None, fmt)
    assert w_ok.all() and o_ok.all()
    want_w, want_o = w.copy(), o.copy()
    w_ok[[2, 9], :5] = False
    w[[2, 9], :5] = 7.0
    if undecided == "two output columns":
        o_ok[[2, 30], [3, 11]] = False
        o[[2, 30], [3, 11]] = 7.0
    _refine64(pr, (0, 0), None, None, fmt, w, w_ok, o, o_ok)
    assert w_ok.all() and o_ok.all()
    assert (w == want_w).all() and (o == want_o).all()
