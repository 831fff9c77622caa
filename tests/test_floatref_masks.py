"""Huge finite additive masks (−1e9, −1e4, −65504, finfo(dtype).min) in floatref: every entry
against an independent mpmath computation at a precision wide enough for the mask (the shared
mp_sdpa works at 60 digits, too few for s·d − 3.4·10^38), the enclosures of both fast paths
checked to hold the exact values, and the arb path not taken where the bounds can decide."""

import fractions

import mpmath
import pytest

from symattn import floatref as fr

np = pytest.importorskip("numpy")

from test_floatref_sdpa import assert_matches, mp_sdpa  # noqa: E402  (the mpmath reference)
from symattn.floatref import binary, fast, fast64, sdpa  # noqa: E402

F32_MIN = float(np.finfo(np.float32).min)
F64_MIN = float(np.finfo(np.float64).min)


def wide_sdpa(q, k, v, allowed, additive, scale=None):
    """One head in mpmath at 1,400 bits: every t_j = s·d_j + m_j and every t_j − max t is then
    exact to far below an ulp even for |m| = 1.8·10^308 (2^1024 needs 1,024 bits)."""
    return mp_sdpa(q, k, v, allowed, additive, scale, bits=1400)


def _split(mask):
    mask = np.asarray(mask, dtype=np.float64)
    return ~np.isneginf(mask), np.where(np.isneginf(mask), 0.0, mask)


def assert_every_entry(ref, q, k, v, mask, fmt, scale=None):
    allowed, additive = _split(mask)
    assert_matches(ref, q, k, v, fmt, allowed, additive, scale, bits=1400)


def hard_rows(L, S, rng, huge):
    """A mask whose rows are the cases that matter: causal with `huge`, all keys `huge` (a
    uniform-ish softmax of s·d: nothing negligible), huge mixed with moderate values, −inf
    and a positive value, and huge next to huge + a few float steps."""
    m = np.where(np.tril(np.ones((L, S), dtype=bool)), 0.0, huge)
    m[1] = huge                                              # every key hugely masked
    m[2] = [huge, -3.0, -1e4, -np.inf, 0.5, huge, -40.0][:S]  # mixed
    m[3] = huge
    m[3, 1] = -np.inf                                        # all huge but one blocked
    m[4] = [huge * (1 - 2.0 ** -20 * j) for j in range(S)]   # huge values a few steps apart
    m[5, :] = -1e4
    m[5, 0] = 7.0                                            # one key far above the rest
    return m


@pytest.mark.parametrize("fmt, huge", [
    ("float32", -1e9), ("float32", F32_MIN), ("bfloat16", -1e9), ("bfloat16", F32_MIN),
    ("float16", -1e4), ("float16", -65504.0), ("float64", -1e9), ("float64", F32_MIN),
    ("float64", F64_MIN)])
def test_every_entry_with_huge_masks(fmt, huge):
    rng = np.random.default_rng(1)
    L, S, E, Ev = 6, 7, 4, 3
    dtype = {"float16": np.float16, "float64": np.float64}.get(fmt, np.float32)
    Q, K, V = (rng.standard_normal((2, n, d)).astype(dtype) for n, d in ((L, E), (S, E), (S, Ev)))
    Q *= 2
    mask = hard_rows(L, S, rng, huge).astype(dtype)
    ref = fr.correctly_rounded(Q, K, V, dtype=fmt, attn_mask=mask)
    for h in range(2):
        sub = type(ref)(ref.output[h], ref.weights[h], fmt, None, 0, 0)
        assert_every_entry(sub, Q[h], K[h], V[h], mask, fmt)
    assert ref.weights[0, 0, 1] == 0 and ref.weights[0, 2, 0] == 0    # masked keys: proved 0
    assert ref.arb_entries <= 4                                       # the bounds decide the rest


def test_a_mask_whose_shift_is_inexact_keeps_its_residual():
    """c_m = 3 + 2^-50 and m = −10^-30: m − c_m is not a float, so TwoSum's residual ml ≠ 0
    on a kept key (float64: added by a second DWPlusFP; float32: counted in the bound)."""
    rng = np.random.default_rng(4)
    Q, K, V = (rng.standard_normal((3, 2)) for _ in range(3))
    mask = np.array([[3 + 2.0 ** -50, -1e-30, -1e9]] * 3)
    for fmt in ("float64", "float32"):
        ref = fr.correctly_rounded(Q, K, V, dtype=fmt, attn_mask=mask)
        assert_every_entry(ref, Q, K, V, mask, fmt)
        assert ref.arb_entries == 0


@pytest.mark.parametrize("fmt", ["float32", "float64"])
def test_enclosures_hold_the_exact_values_under_huge_masks(fmt):
    """The fast paths' own claim, |exact − mid| ≤ radius, on every entry they bound."""
    rng = np.random.default_rng(9)
    L, S, E = 6, 7, 5
    Q, K, V = rng.standard_normal((L, E)) * 3, rng.standard_normal((S, E)), rng.standard_normal((S, 2))
    for huge in (-1e9, F32_MIN, -1e4, -900.0, -700.0):
        mask = hard_rows(L, S, rng, huge)
        pr = sdpa.normalise(Q, K, V, attn_mask=mask)
        if fmt == "float32":
            enc = fast.enclose(pr.Q, pr.K, pr.V, pr.allowed, pr.additive, pr.scale_f, pr.scale_err)
            pairs = ((enc.weights, 0 * enc.weights, enc.weights_rad), (enc.output, 0 * enc.output, enc.output_rad))
        else:
            enc = fast64.enclose64(pr.Q, pr.K, pr.V, pr.allowed, pr.additive, fast64.scale_dd(pr.scale))
            pairs = ((*enc.weights, enc.weights_rad), (*enc.output, enc.output_rad))
        allowed, additive = _split(mask)
        W, O = wide_sdpa(Q, K, V, allowed, additive)
        bounded = 0
        with mpmath.workprec(1400):
            for exact, (hi, lo, rad) in zip((W, O), pairs):
                for i in range(L):
                    for c, x in enumerate(exact[i]):
                        if np.isfinite(rad[i, c]):
                            mid = mpmath.mpf(float(hi[i, c])) + mpmath.mpf(float(lo[i, c]))
                            assert abs(x - mid) <= rad[i, c], (huge, i, c)
                            bounded += 1
        if fmt == "float64":
            for i, j in zip(*np.nonzero(enc.weights_zero)):          # proved zeros: below 2^-1075
                assert W[i][j] < mpmath.mpf(2) ** -1075, (huge, i, j)
        if huge < -800:           # (weights between e^-800 and e^-650 are left to arb by design)
            assert bounded == L * (S + 2)                             # no row left to arb


@pytest.mark.parametrize("fmt, dtype, huge", [("float32", np.float32, -1e9), ("float32", np.float32, F32_MIN),
                                               ("float16", np.float16, -1e4), ("float64", np.float64, F64_MIN)])
def test_causal_huge_masks_take_the_arb_path_as_often_as_a_boolean_mask(fmt, dtype, huge):
    """Before the fix a float32 −1e9 causal mask sent 60% of the entries to arb (the row bound
    used max |m| = 10^9), float32-min masks every row, and finfo(float64).min every row."""
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((2, 48, 16)).astype(dtype) for _ in range(3))
    causal = np.tril(np.ones((48, 48), dtype=bool))
    ref = fr.correctly_rounded(Q, K, V, dtype=fmt, attn_mask=np.where(causal, 0, huge).astype(dtype))
    boolean = fr.correctly_rounded(Q, K, V, dtype=fmt, attn_mask=causal)
    assert ref.arb_entries == boolean.arb_entries == 0
    assert np.array_equal(ref.output, boolean.output)                 # e^(−10^9) changes no rounding
    assert np.array_equal(ref.weights, boolean.weights)


def test_the_arb_path_with_huge_masks(monkeypatch):
    """Every entry through rows.py: a weight 1/(1 + 6·e^(−3.4·10^38)) is a ball of radius
    2^(−4.9·10^38) around 1, which round_ball must not turn into a Fraction."""
    def nothing_decided(pr, idx, allowed, additive, fmt, out=None):
        L, S, Ev = pr.Q.shape[-2], pr.K.shape[-2], pr.V.shape[-1]
        empty = np.zeros(L, dtype=bool) if allowed is None else ~allowed.any(axis=1)
        return (np.full((L, S), np.nan), np.zeros((L, S), dtype=bool),
                np.full((L, Ev), np.nan), np.zeros((L, Ev), dtype=bool), empty)
    monkeypatch.setattr(sdpa, "_fast_slice", nothing_decided)
    monkeypatch.setattr(sdpa, "_refine64", lambda *args: None)      # no double-double either
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((7, 3)).astype(np.float32) for _ in range(3))
    mask = hard_rows(7, 7, rng, F32_MIN).astype(np.float32)
    ref = fr.correctly_rounded(Q, K, V, dtype="float32", attn_mask=mask)
    assert ref.arb_entries == ref.entries
    assert_every_entry(ref, Q, K, V, mask, "float32")
    assert float(ref.weights[0, 0]) == 1.0


def test_round_ball_of_an_astronomically_thin_ball():
    import flint

    one = flint.arb(1) / (1 + 6 * flint.arb(F32_MIN).exp())
    assert binary.round_ball(one, binary.BINARY_FORMATS["float32"]) == 1.0
    assert binary.round_ball(one * (1 + flint.arb(2) ** -23), binary.BINARY_FORMATS["float32"]) == 1 + 2.0 ** -23
    straddles = flint.arb(1 + 2.0 ** -24, 2.0 ** -60)                 # a float32 midpoint inside
    assert binary.round_ball(straddles, binary.BINARY_FORMATS["float32"]) is None


def test_masks_that_overflow_when_shifted_go_to_arb_and_stay_right():
    """+10^308 and −10^308 in one float64 row: m − c_m overflows, so that row is left whole
    to the arb path (exact), and the other rows are unaffected."""
    rng = np.random.default_rng(6)
    Q, K, V = (rng.standard_normal((3, 2)) for _ in range(3))
    mask = np.array([[1e308, -1e308, 0.0], [0.0, -1e9, 1.0], [-1e308, -1e308, -np.inf]])
    ref = fr.correctly_rounded(Q, K, V, dtype="float64", attn_mask=mask)
    assert_every_entry(ref, Q, K, V, mask, "float64")
    assert 0 < ref.arb_entries <= 5                                   # row 0 only


def test_ulp_report_of_weights_a_billion_bits_from_one():
    """A −1e9 mask makes a weight 1 − e^(−1e9·…): a kernel's 1.0 is off by about e^(−10^9)
    ulp, whose significant digits would take a billion bits and whose binade (just below 1,
    or 1 itself) no ball decides.  The report shows that error as 0 at 12 places (proved
    below half a unit there), and the other worst entries as usual."""
    import numpy as np

    rng = np.random.default_rng(7)
    Q, K, V = (rng.standard_normal((2, 4), dtype=np.float32) for _ in range(3))
    mask = np.array([[0, -1e9], [-1e9, 0]], dtype=np.float32)
    ref = fr.correctly_rounded(Q, K, V, attn_mask=mask, dtype="float32")
    assert ref.weights.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    report = fr.ulp_report(ref.weights, Q, K, V, attn_mask=mask, step="weights", worst=4)
    assert report.max_ulps == 0.0 and report.correctly_rounded == report.entries == 4
    ones = [w for w in report.worst if w.got == 1.0]
    assert len(ones) == 2 and all(w.ulps == "0.000000000000" and w.exact == "1.00000000" for w in ones)
    zeros = [w for w in report.worst if w.got == 0.0]
    for w in zeros:          # e^(−1e9 + …) ≈ 10^(−434,294,48x): far below float32's subnormals
        mantissa, exponent = w.exact.split("e")
        assert -434_294_490 < int(exponent) < -434_294_470 and float(mantissa) > 1
        assert float(w.ulps) <= 0 and abs(float(w.ulps)) < 1e-12 and w.relative == "-1.00"


def test_an_error_whose_binade_is_open_is_enclosed_over_both_ulps():
    """x a ball around 1 (1 − tiny or 1 + tiny): ulp(x) is 2^-24 or 2^-23 in float32; with
    y = 1 + 2^-22 the error is 4 or 2 ulps, no rounding of which is proved; with y = 1
    it is below 10^-12 either way."""
    import flint

    from symattn.numbers.certify import Rounding
    from symattn.errors import CertificationError

    def ball(prec):
        return flint.arb(1) + flint.arb(0, flint.arb(2) ** -200)

    ulps, rel = fr.errors_from_ball(ball, fractions.Fraction(1), "float32", Rounding(digits=3))
    assert str(ulps) == str(rel) == "0.000000000000"
    with pytest.raises(CertificationError):
        fr.errors_from_ball(ball, 1 + fractions.Fraction(1, 2 ** 22), "float32", Rounding(digits=3))
