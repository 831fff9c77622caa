"""float64 targets: the double-double enclosures (fast64.py) hold the exact values, and the
references they decide match an independent mpmath computation (60 digits, from the inputs'
binary values, rounded here with integer shifts) — on random problems, masks, GQA, tiny
weights, many keys, and entries crafted next to a float64 rounding boundary."""

from fractions import Fraction

import mpmath
import pytest

from symattn import floatref as fr

np = pytest.importorskip("numpy")

from test_floatref_sdpa import assert_matches, mp_sdpa, rne  # noqa: E402  (shared helpers)
from symattn.floatref import dd, fast64  # noqa: E402


def _enclose(Q, K, V, allowed=None, additive=None, scale=None):
    pr = fr.sdpa.normalise(Q, K, V, attn_mask=additive if additive is not None else allowed, scale=scale)
    a = None if pr.allowed is None else pr.allowed
    m = None if pr.additive is None else pr.additive
    return fast64.enclose64(pr.Q, pr.K, pr.V, a, m, fast64.scale_dd(pr.scale))


@pytest.mark.parametrize("seed", range(6))
def test_every_enclosure_holds_the_exact_value(seed):
    """|exact − (hi + lo)| ≤ radius for every weight and output (mpmath at 60 digits), and the
    radii are tiny: below 2^-70 relative except the few entries the path leaves open."""
    rng = np.random.default_rng(100 + seed)
    L, S, E = 4, 6, 3 + seed
    Q = rng.standard_normal((L, E)) * [0.3, 1, 4, 12, 1, 2][seed]
    K, V = rng.standard_normal((S, E)), rng.standard_normal((S, 2)) * 10.0 ** (seed - 3)
    allowed = additive = None
    if seed % 3 == 1:
        allowed = rng.random((L, S)) < 0.7
        allowed[:, 0] = True
    if seed % 3 == 2:
        additive = rng.standard_normal((L, S)) * 5
        additive[1, 2] = -1e9                                  # a key far below: weight 0
    enc = _enclose(Q, K, V, allowed, additive, scale=0.37 if seed == 5 else None)
    W, O = mp_sdpa(Q, K, V, allowed, additive, scale=0.37 if seed == 5 else None)
    tight = 0
    with mpmath.workdps(60):
        for exact, (hi, lo), rad in ((W, enc.weights, enc.weights_rad), (O, enc.output, enc.output_rad)):
            for i in range(L):
                for c, x in enumerate(exact[i]):
                    if not np.isfinite(rad[i, c]):
                        continue
                    mid = mpmath.mpf(float(hi[i, c])) + mpmath.mpf(float(lo[i, c]))
                    assert abs(x - mid) <= rad[i, c], (i, c)
                    tight += rad[i, c] <= 2.0 ** -70 * abs(float(x)) or x == 0
    assert tight >= 0.9 * L * (S + 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float64_references_match_mpmath_with_masks_and_gqa(seed):
    rng = np.random.default_rng(200 + seed)
    Q = rng.standard_normal((2, 4, 5, 3)) * 3
    K = rng.standard_normal((2, 2, 6, 3))
    V = rng.standard_normal((2, 2, 6, 2))
    kwargs = [dict(is_causal=True), dict(attn_mask=rng.random((5, 6)) < 0.6),
              dict(attn_mask=np.where(rng.random((5, 6)) < 0.2, -np.inf, rng.standard_normal((5, 6))))][seed]
    ref = fr.correctly_rounded(Q, K, V, dtype="float64", enable_gqa=True, **kwargs)
    mask = kwargs.get("attn_mask")
    allowed = np.tril(np.ones((5, 6), dtype=bool)) if seed == 0 else (
        mask if seed == 1 else ~np.isneginf(mask))
    additive = np.where(np.isneginf(mask), 0.0, mask) if seed == 2 else None
    for b in range(2):
        for h in range(4):
            sub = type(ref)(ref.output[b, h], ref.weights[b, h], "float64", None, 0, 0)
            assert_matches(sub, Q[b, h], K[b, h // 2], V[b, h // 2], "float64", allowed, additive)
    assert ref.arb_entries <= 2                               # double-double decides the rest


def test_outputs_and_weights_crafted_next_to_a_float64_midpoint():
    """Scores 0 and δ with values 1 and 1 + 2^-52: the output is 1 + 2^-53 + ~δ·2^-54, next to
    the midpoint of two float64s (an exact tie at δ = 0, rational: decided exactly, to the even
    1.0).  δ = 2^-20 sits 2^-21 ulp from the boundary and double-double decides it alone;
    smaller δ go to the arb path.  The weights 1/(1 + e^±δ) sit next to 1/2 ∓ δ/4: with
    δ = 2^-53 that is 2^-164 from the midpoint 1/2 − 2^-55."""
    V = np.array([[1.0], [1.0 + 2.0 ** -52]])
    Q = np.array([[1.0]])
    for delta in [0.0, 2.0 ** -20, 2.0 ** -45, -2.0 ** -45, 2.0 ** -70, -2.0 ** -200]:
        K = np.array([[0.0], [delta]])
        ref = fr.correctly_rounded(Q, K, V, dtype="float64", scale=1.0)
        assert_matches(ref, Q, K, V, "float64", scale=1.0)
        assert float(ref.output[0, 0]) == (1.0 if delta <= 0 else 1.0 + 2.0 ** -52)
        if delta == 2.0 ** -20:
            assert ref.arb_entries == 0
        if 0 < abs(delta) < 2.0 ** -40:
            assert ref.arb_entries >= 1                       # too close for 2^-80 radii
    K = np.array([[0.0], [2.0 ** -53]])
    ref = fr.correctly_rounded(Q, K, V, dtype="float64", scale=1.0)
    assert_matches(ref, Q, K, V, "float64", scale=1.0)
    assert ref.weights[0].tolist() == [0.5, 0.5]               # just above / below the midpoints
    assert ref.arb_entries >= 2


def test_random_outputs_within_1e_minus_22_of_a_midpoint():
    """Random q and k with the second key moved so the output lies about 1e-22 (relative) from
    the float64 midpoint 1.5 + 2^-53, either side: near enough that the double-double radius
    may or may not decide it; the reference must be right either way."""
    rng = np.random.default_rng(11)
    V = np.array([[1.5], [1.5 + 2.0 ** -52]])
    for sign in (1, -1):
        Q = rng.standard_normal((1, 2))
        K = np.repeat(rng.standard_normal((1, 2)), 2, axis=0)
        K[1, 0] = K[0, 0] + sign * 2.0 ** -20 / Q[0, 0]
        ref = fr.correctly_rounded(Q, K, V, dtype="float64")
        assert_matches(ref, Q, K, V, "float64")
        _, O = mp_sdpa(Q, K, V)
        with mpmath.workdps(60):
            mid = mpmath.mpf(1.5) + mpmath.mpf(2) ** -53
            assert 1e-24 < abs((O[0][0] - mid) / mid) < 1e-20


def test_tiny_weights_rounded_to_zero_or_left_to_arb():
    """Scores spread so that e^x falls below e^-800 (proved +0 by the fast path), between
    e^-800 and e^-650 (only bounded: the arb path decides them, subnormal or 0), and in the
    normal range; every entry against mpmath."""
    Q = np.array([[1.0], [-1.0]])
    K = np.array([[0.0], [-300.0], [-700.0], [-744.0], [-760.0], [-1000.0], [-2.5]])
    V = np.array([[1.0, -2.0], [3.0, 0.5], [2.0, 2.0], [1.0, 1.0], [5.0, 1.0], [7.0, 0.0], [0.25, 8.0]])
    ref = fr.correctly_rounded(Q, K, V, dtype="float64", scale=1.0)
    assert_matches(ref, Q, K, V, "float64", scale=1.0)
    assert ref.weights[0, 5] == 0.0 and 0 < ref.weights[0, 3] < 2.0 ** -1022   # subnormal
    enc = _enclose(Q, K, V, scale=1.0)
    assert enc.weights_zero[0, 5] and not enc.weights_zero[0, 3]
    assert not np.isfinite(enc.weights_rad[0, 3])             # left to the arb path


def test_many_keys_sum_in_blocks(monkeypatch):
    """S = 600 > the 256-key summation block: the remainder product is summed per block;
    and one query row per block of rows (a causal mask cut with them)."""
    rng = np.random.default_rng(31)
    Q, K = rng.standard_normal((3, 8)), rng.standard_normal((600, 8))
    V = rng.standard_normal((600, 2))
    monkeypatch.setattr(fast64, "BLOCK_ENTRIES", 700)
    causal = np.tril(np.ones((3, 600), dtype=bool), k=597)
    ref = fr.correctly_rounded(Q, K, V, dtype="float64", attn_mask=causal)
    assert_matches(ref, Q, K, V, "float64", allowed=causal)
    assert ref.arb_entries == 0


def test_exp_within_its_stated_bound():
    """The table-and-series exp against mpmath (200 bits) on 3,000 points of [−650, 0], with
    a low part: within EXP_SERIES + TABLE_REL + OP_REL relative (docs/floatref.md)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([-rng.random(2500) * 650, -rng.random(300) * 1e-3,
                        -np.ldexp(rng.random(200), -rng.integers(1, 60, 200))])
    xl = x * rng.standard_normal(x.size) * 2.0 ** -54
    hi, lo, tiny, zero = fast64._exp(x, xl)
    assert not tiny.any() and not zero.any()
    bound = fast64.EXP_SERIES + fast64.TABLE_REL + dd.OP_REL
    with mpmath.workprec(200):
        for i in range(x.size):
            t = mpmath.exp(mpmath.mpf(x[i]) + mpmath.mpf(xl[i]))
            assert abs(mpmath.mpf(hi[i]) + mpmath.mpf(lo[i]) - t) <= bound * t


def test_error_free_transformations_are_exact():
    rng = np.random.default_rng(8)
    a = np.ldexp(rng.standard_normal(500), rng.integers(-300, 300, 500))
    b = np.ldexp(rng.standard_normal(500), rng.integers(-300, 300, 500))
    s, t = dd.two_sum(a, b)
    p, e = dd.two_prod(a, b)
    for k in range(500):
        A, B = Fraction(float(a[k])), Fraction(float(b[k]))
        assert Fraction(float(s[k])) + Fraction(float(t[k])) == A + B
        assert Fraction(float(p[k])) + Fraction(float(e[k])) == A * B
    hi, lo = dd.mul(a, a * 2.0 ** -60, b, b * 2.0 ** -61)
    for k in range(500):
        x = Fraction(float(a[k])) * (1 + Fraction(1, 2 ** 60)) * Fraction(float(b[k])) * (1 + Fraction(1, 2 ** 61))
        assert abs(Fraction(float(hi[k])) + Fraction(float(lo[k])) - x) <= 7 * Fraction(1, 2 ** 106) * abs(x)


def test_decide64_takes_only_intervals_inside_one_rounding_interval():
    one = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 2.0])
    lo = np.array([2.0 ** -54, 2.0 ** -54, -2.0 ** -55, 2.0 ** -53, -2.0 ** -55, -2.0 ** -54])
    rad = np.array([2.0 ** -60, 2.0 ** -54, 2.0 ** -57, 0.0, 2.0 ** -60, 2.0 ** -60])
    value, ok = fast64.decide64(one, lo, rad)
    # 1 + 2^-54 ± 2^-60 rounds to 1; ± 2^-54 touches the midpoint 1 + 2^-53; 1 − 2^-55 − 2^-57
    # is still above 1 − 2^-54 (the midpoint below 1); lo = 2^-53 is the midpoint itself; below
    # 2 the gap is 2^-52, so 2 − 2^-54 is past the midpoint 2 − 2^-53 only when lo < −2^-53
    assert ok.tolist() == [True, False, True, False, True, True]
    assert value[ok].tolist() == [1.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_torch_sdpa_against_mpmath_through_ulp_report(dtype):
    """With torch installed (never required): its SDPA output, in each format, is judged
    by ulp_report from the tensors themselves; the count of correctly rounded entries and
    every error in ulps agree with mpmath (GQA and a causal mask on the way)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(41)
    q, k, v = (rng.standard_normal(s) for s in ((1, 4, 5, 3), (1, 2, 5, 3), (1, 2, 5, 2)))
    tdt = getattr(torch, dtype)
    Q, K, V = (torch.from_numpy(x).to(tdt) for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True, enable_gqa=True)
    report = fr.ulp_report(out, Q, K, V, is_causal=True, enable_gqa=True, worst=1)
    assert report.fmt == dtype and report.entries == 40
    exact_in = [x.float().numpy().astype(np.float64) if dtype == "bfloat16" else x.numpy().astype(np.float64)
                for x in (Q, K, V)]
    got = out.float().numpy() if dtype == "bfloat16" else out.numpy()
    causal = np.tril(np.ones((5, 5), dtype=bool))
    correct = 0
    p, e_min = {"float64": (53, -1022), "float32": (24, -126), "bfloat16": (8, -126)}[dtype]
    for h in range(4):
        _, O = mp_sdpa(exact_in[0][0, h], exact_in[1][0, h // 2], exact_in[2][0, h // 2], causal)
        for i in range(5):
            for c in range(2):
                x, y = O[i][c], float(got[0, h, i, c])
                correct += y == rne(x, dtype)
                with mpmath.workdps(60):
                    unit = mpmath.mpf(2) ** (max(int(mpmath.floor(mpmath.log(abs(x), 2))), e_min) - p + 1)
                    want = float((mpmath.mpf(y) - x) / unit)
                assert abs(report.errors[0, h, i, c] - want) <= report.resolution + 1e-9
    assert report.correctly_rounded == correct
