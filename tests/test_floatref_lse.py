"""correctly_rounded's conventions (issue 21): causal alignment when L ≠ S, the log-sum-exp in
base e and base 2, finite mask sentinels, fully masked rows, and the fp8 formats; every value
against an independent computation written here (mpmath at 80 digits from the inputs' binary
values, round-to-nearest-even with integers), and hand-derived cases."""

from fractions import Fraction

import mpmath
import pytest

from symattn import floatref as fr
from symattn.floatref.binary import BINARY_FORMATS, round_array, round_fraction
from symattn.floatref.sdpa import causal_pattern

np = pytest.importorskip("numpy")

# (precision with the hidden bit, e_min, largest finite, what overflow gives)
FMT = {"float64": (53, -1022, (2 - Fraction(2) ** -52) * Fraction(2) ** 1023, "inf"),
       "float32": (24, -126, (2 - Fraction(2) ** -23) * Fraction(2) ** 127, "inf"),
       "float16": (11, -14, Fraction(65504), "inf"),
       "bfloat16": (8, -126, (2 - Fraction(2) ** -7) * Fraction(2) ** 127, "inf"),
       "float8_e4m3fn": (4, -6, Fraction(448), "nan"),
       "float8_e5m2": (3, -14, Fraction(57344), "inf")}


def rne(x, fmt: str) -> float:
    """Round an exact value (Fraction or mpf, binary) to the format, ties to even, with ints."""
    p, e_min, top, over = FMT[fmt]
    if isinstance(x, mpmath.mpf):
        man, exp = x.man_exp                            # |x| = man·2^exp (man_exp drops the sign)
        x = Fraction(int(man)) * Fraction(2) ** int(exp) * (-1 if x < 0 else 1)
    x = Fraction(x)
    if x == 0:
        return 0.0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    q = max(e, e_min) - p + 1
    n, rest = divmod(a, Fraction(2) ** q)
    n = int(n)
    half = Fraction(2) ** q / 2
    if rest > half or (rest == half and n % 2):
        n += 1
    value = n * Fraction(2) ** q
    if value > top:
        return float("nan") if over == "nan" else (float("inf") if x > 0 else float("-inf"))
    return float(value) if x > 0 else -float(value)


def mp_lse(q, k, allowed=None, additive=None, scale=None):
    """Per row (lse, lse2) in mpmath at 80 digits, None for a row with no key."""
    out = []
    with mpmath.workdps(80):
        L, E = q.shape
        s = 1 / mpmath.sqrt(E) if scale is None else mpmath.mpf(float(scale))
        for i in range(L):
            keys = [j for j in range(k.shape[0]) if allowed is None or allowed[i, j]]
            if not keys:
                out.append(None)
                continue
            t = [s * mpmath.fsum(mpmath.mpf(float(q[i, a])) * mpmath.mpf(float(k[j, a])) for a in range(E))
                 + (0 if additive is None else mpmath.mpf(float(additive[i, j]))) for j in keys]
            top = max(t)
            lse = top + mpmath.log(mpmath.fsum(mpmath.exp(x - top) for x in t))
            out.append((lse, lse / mpmath.log(2)))
    return out


def mp_output(q, k, v, allowed=None, additive=None):
    with mpmath.workdps(60):
        L, E = q.shape
        s = 1 / mpmath.sqrt(E)
        rows = []
        for i in range(L):
            keys = [j for j in range(k.shape[0]) if allowed is None or allowed[i, j]]
            if not keys:
                rows.append(None)
                continue
            t = {j: s * mpmath.fsum(mpmath.mpf(float(q[i, a])) * mpmath.mpf(float(k[j, a])) for a in range(E))
                 + (0 if additive is None else mpmath.mpf(float(additive[i, j]))) for j in keys}
            top = max(t.values())
            w = {j: mpmath.exp(t[j] - top) for j in keys}
            z = mpmath.fsum(w.values())
            rows.append([mpmath.fsum(w[j] * mpmath.mpf(float(v[j, c])) for j in keys) / z
                         for c in range(v.shape[1])])
        return rows


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


# ------------------------------------------------------------------ causal alignment

def test_causal_patterns_by_hand():
    # L = 2 queries, S = 4 keys: top-left sees j ≤ i; bottom-right j ≤ i + 2 (the last query sees all)
    assert causal_pattern(2, 4, "top_left").astype(int).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0]]
    assert causal_pattern(2, 4, "bottom_right").astype(int).tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    # L = 4, S = 2: bottom-right leaves the first two queries without a key
    assert causal_pattern(4, 2, "bottom_right").astype(int).tolist() == [[0, 0], [0, 0], [1, 0], [1, 1]]
    assert causal_pattern(4, 2, "top_left").astype(int).tolist() == [[1, 0], [1, 1], [1, 1], [1, 1]]
    assert (causal_pattern(3, 3, "top_left") == causal_pattern(3, 3, "bottom_right")).all()
    with pytest.raises(fr.FloatRefError, match="causal_align is 'bottom-right'.*bottom_right"):
        causal_pattern(2, 2, "bottom-right")


def test_bottom_right_output_by_hand():
    # one query, two keys with V = [[1], [3]]: top-left sees key 0 only (output 1); bottom-right
    # sees both with equal scores (output exactly 2)
    Q = np.zeros((1, 1), np.float32)
    K = np.zeros((2, 1), np.float32)
    V = np.array([[1.0], [3.0]], np.float32)
    top = fr.correctly_rounded(Q, K, V, is_causal=True)
    bottom = fr.correctly_rounded(Q, K, V, is_causal=True, causal_align="bottom_right")
    assert top.output.tolist() == [[1.0]] and bottom.output.tolist() == [[2.0]]
    assert top.weights.tolist() == [[1.0, 0.0]] and bottom.weights.tolist() == [[0.5, 0.5]]


@pytest.mark.parametrize("L,S", [(3, 5), (5, 3), (4, 4)])
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_causal_alignment_against_mpmath(L, S, align):
    rng = np.random.default_rng(L * 10 + S)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((L, 3), (S, 3), (S, 2)))
    allowed = np.tril(np.ones((L, S), bool), k=0 if align == "top_left" else S - L)
    ref = fr.correctly_rounded(q, k, v, is_causal=True, causal_align=align, return_lse=True)
    want = mp_output(q, k, v, allowed)
    lse = mp_lse(q, k, allowed)
    for i in range(L):
        if want[i] is None:
            assert ref.fully_masked[i] and np.isnan(ref.output[i]).all()
            assert ref.lse[i] == -np.inf and ref.lse2[i] == -np.inf
            continue
        assert [float(x) for x in ref.output[i]] == [rne(x, "float32") for x in want[i]]
        assert float(ref.lse[i]) == rne(lse[i][0], "float32")
        assert float(ref.lse2[i]) == rne(lse[i][1], "float32")


def test_fully_masked_zero_convention():
    q = np.ones((3, 2), np.float32)
    k = np.ones((1, 2), np.float32)
    v = np.full((1, 2), 5.0, np.float32)
    nan = fr.correctly_rounded(q, k, v, is_causal=True, causal_align="bottom_right")
    zero = fr.correctly_rounded(q, k, v, is_causal=True, causal_align="bottom_right", fully_masked="zero")
    assert nan.fully_masked.tolist() == [True, True, False] == zero.fully_masked.tolist()
    assert np.isnan(nan.output[:2]).all() and nan.output[2].tolist() == [5.0, 5.0]
    assert zero.output.tolist() == [[0.0, 0.0], [0.0, 0.0], [5.0, 5.0]]
    assert zero.weights.tolist() == [[0.0], [0.0], [1.0]]
    with pytest.raises(fr.FloatRefError, match="fully_masked is 'inf'"):
        fr.correctly_rounded(q, k, v, fully_masked="inf")


def test_mask_value_sentinel_is_added():
    # causal with a −5e4 sentinel: query 0 also gives key 1 the weight e^-5e4/(1 + e^-5e4); a
    # query with every key blocked averages V instead of being fully masked
    q = np.zeros((2, 1), np.float32)
    k = np.zeros((2, 1), np.float32)
    v = np.array([[1.0], [3.0]], np.float32)
    ref = fr.correctly_rounded(q, k, v, is_causal=True, mask_value=-5e4, dtype="float64", return_lse=True)
    assert not ref.fully_masked.any()
    with mpmath.workdps(40):
        tiny = mpmath.exp(-50000)
        assert float(ref.output[0, 0]) == rne(mpmath.mpf(1) + 2 * tiny / (1 + tiny), "float64") == 1.0
        assert float(ref.lse[0]) == rne(mpmath.log(1 + tiny), "float64") == 0.0   # 2^-72135: rounds to 0
    assert ref.output[1, 0] == 2.0 and ref.lse2[1] == 1.0               # two equal keys: log2 2 = 1, exact
    # all keys below the sentinel's rows: bottom-right with L > S, every key blocked for query 0
    r2 = fr.correctly_rounded(np.zeros((3, 1), np.float32), k, v, is_causal=True,
                              causal_align="bottom_right", mask_value=-5e4)
    assert r2.output[0, 0] == 2.0 and not r2.fully_masked.any()
    with pytest.raises(fr.FloatRefError, match="mask_value is inf"):
        fr.correctly_rounded(q, k, v, is_causal=True, mask_value=float("inf"))


# ------------------------------------------------------------------ the log-sum-exp

@pytest.mark.parametrize("dtype", list(FMT))
def test_lse_against_mpmath(dtype):
    rng = np.random.default_rng(21)
    q, k = rng.standard_normal((6, 4)) * 2, rng.standard_normal((5, 4))
    v = rng.standard_normal((5, 3))
    ref = fr.correctly_rounded(q, k, v, dtype=dtype, return_lse=True)
    assert ref.lse_dtype == dtype and ref.lse.shape == (6,)
    for i, (lse, lse2) in enumerate(mp_lse(q, k)):
        assert _same(float(ref.lse[i]), rne(lse, dtype)), (dtype, i)
        assert _same(float(ref.lse2[i]), rne(lse2, dtype)), (dtype, i)


def test_lse_base_two_is_base_e_over_ln2():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((4, 8)), rng.standard_normal((6, 8)), rng.standard_normal((6, 2))
    ref = fr.correctly_rounded(q, k, v, dtype="float64", return_lse=True)
    ratio = ref.lse2 / ref.lse
    assert np.allclose(ratio, 1 / np.log(2), rtol=1e-15)
    assert not np.allclose(ref.lse, ref.lse2, rtol=1e-2)      # the bases are told apart


def test_lse_batches_masks_gqa_and_lse_dtype():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 4, 3, 2)).astype(np.float16)
    k = rng.standard_normal((2, 2, 4, 2)).astype(np.float16)
    v = rng.standard_normal((2, 2, 4, 2)).astype(np.float16)
    add = np.where(rng.random((3, 4)) < 0.3, -1e9, rng.standard_normal((3, 4)))
    ref = fr.correctly_rounded(q, k, v, dtype="float16", attn_mask=add, enable_gqa=True,
                               return_lse=True, lse_dtype="float32")
    assert ref.lse.dtype == np.float32 and ref.lse.shape == (2, 4, 3)
    for b in range(2):
        for h in range(4):
            for i, (lse, lse2) in enumerate(mp_lse(q[b, h], k[b, h // 2], additive=add)):
                assert float(ref.lse[b, h, i]) == rne(lse, "float32")
                assert float(ref.lse2[b, h, i]) == rne(lse2, "float32")


def test_lse_huge_mask_everywhere():
    # every key at −1e9 plus a small score: lse ≈ −1e9 + log Σ e^(s·d), decided without 10^9 bits
    rng = np.random.default_rng(9)
    q, k = rng.standard_normal((2, 3)), rng.standard_normal((4, 3))
    add = np.full((2, 4), -1e9)
    ref = fr.correctly_rounded(q, k, np.ones((4, 1)), attn_mask=add, dtype="float64", return_lse=True)
    for i, (lse, lse2) in enumerate(mp_lse(q, k, additive=add)):
        assert float(ref.lse[i]) == rne(lse, "float64") and float(ref.lse2[i]) == rne(lse2, "float64")


def test_lse_exact_values():
    # one key: lse is its score exactly.  Scale 1/2, q·k = 3 + 2^-23 (a float32), so
    # t = 1.5 + 2^-24: the float32 midpoint of 1.5 and 1.5 + 2^-23 (quantum 2^-23 at 1.5), a tie
    q = np.array([[1.0]], np.float32)
    k = np.array([[3.0 + 2.0 ** -23]], np.float32)
    ref = fr.correctly_rounded(q, k, np.ones((1, 1), np.float32), scale=0.5, return_lse=True)
    assert ref.lse[0] == 1.5                                # 1.5 = 1.1000…0 (even) wins the tie
    assert rne(Fraction(3) / 2 + Fraction(1, 2 ** 24), "float32") == 1.5
    # 2^k tied keys with score 0: lse2 = k exactly; 512 keys in e5m2: 9 is the midpoint of 8 and 10
    for n, dtype, want in ((4, "float32", 2.0), (512, "float8_e5m2", 8.0), (8, "bfloat16", 3.0)):
        z = np.zeros((1, 2), np.float32)
        r = fr.correctly_rounded(z, np.zeros((n, 2), np.float32), np.ones((n, 1), np.float32),
                                 dtype=dtype, return_lse=True)
        assert r.lse2[0] == want, (n, dtype)
        with mpmath.workdps(50):
            assert r.lse[0] == rne(mpmath.log(n), dtype)
    # three tied keys: log2 3 is irrational: decided by the balls
    r = fr.correctly_rounded(np.zeros((1, 1)), np.zeros((3, 1)), np.ones((3, 1)), dtype="float64",
                             return_lse=True)
    with mpmath.workdps(50):
        assert r.lse2[0] == rne(mpmath.log(3) / mpmath.log(2), "float64")


# ------------------------------------------------------------------ fp8

@pytest.mark.parametrize("x,e4m3,e5m2", [
    (448, 448, 448), (464, 448, 448),          # e4m3fn: 464 is the midpoint of 448 and (NaN) 480: to 448
    (465, float("nan"), 448), (1e4, float("nan"), 10240),
    (17, 16, 16), (19, 20, 20),                # ties: 17 between 16 and 18 (e4m3), 19 between 18 and 20
    (61439, float("nan"), 57344), (61440, float("nan"), float("inf")),   # e5m2's overflow threshold
    (2.0 ** -10, 0.0, 2.0 ** -10), (3 * 2.0 ** -10, 2.0 ** -8, 3 * 2.0 ** -10),   # e4m3fn subnormal ties
    (2.0 ** -17, 0.0, 0.0), (3 * 2.0 ** -17, 0.0, 2.0 ** -15),          # e5m2 subnormal ties
    (-464, -448, -448), (-61440, float("nan"), float("-inf")),
])
def test_fp8_rounding_edges(x, e4m3, e5m2):
    for fmt, want in (("float8_e4m3fn", e4m3), ("float8_e5m2", e5m2)):
        assert _same(rne(Fraction(x), fmt), want), (fmt, x)
        assert _same(round_fraction(Fraction(x), BINARY_FORMATS[fmt]), want), (fmt, x)
        assert _same(float(round_array(np.array([float(x)]), BINARY_FORMATS[fmt])[0]), want), (fmt, x)


def test_fp8_rounding_matches_ml_dtypes():
    ml = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.standard_normal(20000) * 10.0 ** rng.integers(-6, 6, 20000),
                        np.arange(-600, 600) / 2.0]).astype(np.float32)
    for name in ("float8_e4m3fn", "float8_e5m2"):
        theirs = x.astype(getattr(ml, name)).astype(np.float64)
        ours = round_array(x.astype(np.float64), BINARY_FORMATS[name])
        both_nan = np.isnan(theirs) & np.isnan(ours)
        assert ((theirs == ours) | both_nan).all(), name


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_sdpa_against_mpmath(dtype):
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    ref = fr.correctly_rounded(q, k, v, dtype=dtype, is_causal=True)
    allowed = np.tril(np.ones((4, 5), bool))
    for i, row in enumerate(mp_output(q, k, v, allowed)):
        assert [float(x) for x in ref.output[i]] == [rne(x, dtype) for x in row], i


def test_fp8_inputs_via_ml_dtypes():
    ml = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal(s).astype(ml.float8_e4m3fn) for s in ((3, 4), (3, 4), (3, 2)))
    ref = fr.correctly_rounded(q, k, v, dtype="float8_e4m3fn", return_lse=True, lse_dtype="float32")
    f = [a.astype(np.float64) for a in (q, k, v)]
    for i, row in enumerate(mp_output(*f)):
        assert [float(x) for x in ref.output[i]] == [rne(x, "float8_e4m3fn") for x in row]
    assert fr.format_of(np.zeros(2, ml.float8_e5m2)) == "float8_e5m2"


def test_scores_near_float32_max_go_to_arb_without_an_index_error():
    # |q·k| ≈ 3·10^37: past the fast paths (fast64's exp table was once indexed out of range)
    q = np.array([[3e18, 1.0]], np.float32)
    k = np.array([[1e19, 0.0], [-1e19, 1.0], [1e19, 2.0 ** -10]], np.float32)
    v = np.array([[1.0], [2.0], [4.0]], np.float32)
    ref = fr.correctly_rounded(q, k, v, scale=1.0, return_lse=True)
    t = [Fraction(float(q[0, 0])) * Fraction(float(k[j, 0])) + Fraction(float(q[0, 1])) * Fraction(float(k[j, 1]))
         for j in range(3)]
    with mpmath.workprec(400):
        ts = [mpmath.mpf(x.numerator) / x.denominator for x in t]
        top = max(ts)
        w = [mpmath.exp(x - top) for x in ts]
        o = mpmath.fsum(a * b for a, b in zip(w, (1, 2, 4))) / mpmath.fsum(w)
        assert float(ref.output[0, 0]) == rne(o, "float32")
        assert float(ref.lse[0]) == rne(top + mpmath.log(mpmath.fsum(w)), "float32")
