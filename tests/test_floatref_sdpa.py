"""floatref.correctly_rounded: every entry checked against an independent computation
(mpmath at 60 digits from the inputs' binary values, SDPA's rules written out here, and
round-to-nearest-even done here with integer shifts), for all four formats, masks, GQA,
broadcasting, crafted near-midpoint outputs and float16 subnormals."""

import mpmath
import pytest

import symattn as sa
from symattn import floatref as fr

np = pytest.importorskip("numpy")

# (precision with the hidden bit, e_min, e_max)
FMT = {"float64": (53, -1022, 1023), "float32": (24, -126, 127),
       "float16": (11, -14, 15), "bfloat16": (8, -126, 127)}


def rne(x: mpmath.mpf, fmt: str) -> float:
    """Round an mpf (an exact binary number man·2^exp) to the format, ties to even, with ints."""
    p, e_min, e_max = FMT[fmt]
    if x == 0:
        return 0.0
    sign, man, exp, _ = x._mpf_
    if exp + man.bit_length() < e_min - p:      # below half the least subnormal (e^-(2^700) too)
        return -0.0 if sign else 0.0
    # |x| = man·2^exp; its leading bit is at exp + bitlen − 1; the format's quantum is 2^q
    q = max(exp + man.bit_length() - 1, e_min) - p + 1
    shift = q - exp
    if shift <= 0:
        n = man << -shift
    else:
        n, rest = man >> shift, man & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and n & 1):
            n += 1
    if n * mpmath.mpf(2) ** q > (2 - mpmath.mpf(2) ** (1 - p)) * mpmath.mpf(2) ** e_max:
        return float("-inf") if sign else float("inf")
    value = float(mpmath.ldexp(mpmath.mpf(n), q))
    return -value if sign else value


def mp_sdpa(q, k, v, allowed=None, additive=None, scale=None, *, bits=None):
    """One (L, E) head: weights and output in mpmath at 60 digits, or ``bits`` bits (None for
    a fully masked row)."""
    with mpmath.workprec(bits) if bits else mpmath.workdps(60):
        L, E = q.shape
        S = k.shape[0]
        s = 1 / mpmath.sqrt(E) if scale is None else mpmath.mpf(float(scale))
        W, O = [], []
        for i in range(L):
            keys = [j for j in range(S) if allowed is None or allowed[i, j]]
            if not keys:
                W.append(None)
                O.append(None)
                continue
            t = {j: s * mpmath.fsum(mpmath.mpf(float(q[i, a])) * mpmath.mpf(float(k[j, a])) for a in range(E))
                 + (0 if additive is None else mpmath.mpf(float(additive[i, j]))) for j in keys}
            top = max(t.values())
            e = {j: mpmath.exp(t[j] - top) for j in keys}
            z = mpmath.fsum(e.values())
            W.append([e[j] / z if j in e else mpmath.mpf(0) for j in range(S)])
            O.append([mpmath.fsum(e[j] * mpmath.mpf(float(v[j, c])) for j in keys) / z
                      for c in range(v.shape[1])])
        return W, O


def assert_matches(ref, q, k, v, fmt, allowed=None, additive=None, scale=None, *, bits=None):
    """Every entry of ``ref`` is the format's rounding of the mpmath reference."""
    W, O = mp_sdpa(q, k, v, allowed, additive, scale, bits=bits)
    for i in range(q.shape[0]):
        if W[i] is None:
            assert np.isnan(ref.weights[i]).all() and np.isnan(ref.output[i]).all()
            continue
        for j, x in enumerate(W[i]):
            assert float(ref.weights[i, j]) == rne(x, fmt), (fmt, "weights", i, j)
        for c, x in enumerate(O[i]):
            assert float(ref.output[i, c]) == rne(x, fmt), (fmt, "output", i, c)


@pytest.fixture
def float64_via_arb(monkeypatch):
    """float64 targets with the double-double path switched off: every entry takes the arb
    path (rows.py), so the tests that exercise that path keep doing so."""
    from symattn.floatref import sdpa

    def nothing_decided(pr, idx, allowed, additive, out=None):
        L, S, Ev = pr.Q.shape[-2], pr.K.shape[-2], pr.V.shape[-1]
        empty = np.zeros(L, dtype=bool) if allowed is None else ~allowed.any(axis=1)
        return (np.full((L, S), np.nan), np.zeros((L, S), dtype=bool),
                np.full((L, Ev), np.nan), np.zeros((L, Ev), dtype=bool), empty)
    monkeypatch.setattr(sdpa, "_fast64_slice", nothing_decided)


def test_rne_helper_is_itself_right():
    assert rne(mpmath.mpf(1) + mpmath.mpf(2) ** -24, "float32") == 1.0            # tie → even
    assert rne(mpmath.mpf(1) + 3 * mpmath.mpf(2) ** -24, "float32") == 1 + 2.0 ** -22
    assert rne(mpmath.mpf(2) ** -150, "float32") == 0.0                           # tie with 0 → 0
    assert rne(mpmath.mpf(3) * mpmath.mpf(2) ** -151, "float32") == 2.0 ** -149
    assert rne(mpmath.mpf(2) ** -25 * 3, "float16") == 2.0 ** -23    # 1.5 subnormal units → 2
    assert rne(mpmath.mpf(2) ** -25 * 5, "float16") == 2.0 ** -23    # 2.5 units → 2 (even)
    assert rne(mpmath.mpf(2) ** -25 * 7, "float16") == 2.0 ** -22    # 3.5 units → 4 (even)
    assert rne(mpmath.mpf(65520), "float16") == float("inf")          # past max + half ulp
    assert rne(mpmath.mpf(65519), "float16") == 65504.0
    assert float(np.float32(rne(mpmath.mpf("0.1"), "float32"))) == float(np.float32(0.1))


def _shapes(rng, batch, heads, L, S, E, Ev, dtype):
    return (rng.standard_normal(batch + (heads, L, E)).astype(dtype),
            rng.standard_normal(batch + (heads, S, E)).astype(dtype),
            rng.standard_normal(batch + (heads, S, Ev)).astype(dtype))


@pytest.mark.parametrize("fmt", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_problems_every_entry(fmt, seed):
    rng = np.random.default_rng(seed)
    L, S, E, Ev = 3 + seed, 5 - seed, 4, 3
    Q, K, V = _shapes(rng, (2,), 2, L, S, E, Ev, np.float32)
    Q *= 2  # sharper softmax: small weights too
    causal = seed == 1
    ref = fr.correctly_rounded(Q, K, V, dtype=fmt, is_causal=causal)
    assert ref.output.shape == (2, 2, L, Ev) and ref.weights.shape == (2, 2, L, S)
    assert ref.output.dtype == {"float64": np.float64, "float16": np.float16}.get(fmt, np.float32)
    allowed = np.tril(np.ones((L, S), dtype=bool)) if causal else None
    for b in range(2):
        for h in range(2):
            sub = type(ref)(ref.output[b, h], ref.weights[b, h], fmt, None, 0, 0)
            assert_matches(sub, Q[b, h], K[b, h], V[b, h], fmt, allowed)
    assert ref.arb_entries < ref.entries / 10          # float64 too: double-double decides


def test_boolean_and_additive_masks_broadcast_with_a_fully_masked_row():
    rng = np.random.default_rng(5)
    Q, K, V = _shapes(rng, (), 2, 4, 5, 3, 2, np.float32)
    mask = rng.random((4, 5)) < 0.7
    mask[2] = False                                    # no key at all: NaN row
    ref = fr.correctly_rounded(Q, K, V, dtype="float32", attn_mask=mask)
    assert ref.fully_masked.tolist() == [[False, False, True, False]] * 2
    for h in range(2):
        sub = type(ref)(ref.output[h], ref.weights[h], "float32", None, 0, 0)
        assert_matches(sub, Q[h], K[h], V[h], "float32", mask)
    additive = rng.standard_normal((4, 5)).astype(np.float32) * 3
    additive[1, 2] = -np.inf
    ref = fr.correctly_rounded(Q, K, V, dtype="bfloat16", attn_mask=additive, scale=0.75)
    for h in range(2):
        sub = type(ref)(ref.output[h], ref.weights[h], "bfloat16", None, 0, 0)
        assert_matches(sub, Q[h], K[h], V[h], "bfloat16", ~np.isneginf(additive),
                       np.where(np.isneginf(additive), 0, additive), scale=0.75)
    assert ref.weights[0, 1, 2] == 0 and ref.weights[1, 1, 2] == 0


def test_additive_mask_through_the_arb_path_matches(float64_via_arb):
    """Every entry through arb, so the arb path's reading of a float mask is checked."""
    rng = np.random.default_rng(7)
    Q, K, V = (rng.standard_normal((3, 2)) for _ in range(3))
    additive = rng.standard_normal((3, 3))
    ref = fr.correctly_rounded(Q, K, V, dtype="float64", attn_mask=additive)
    assert ref.arb_entries == ref.entries
    assert_matches(ref, Q, K, V, "float64", None, additive)


def test_gqa_maps_query_head_h_to_kv_head_h_over_group():
    rng = np.random.default_rng(3)
    Q = rng.standard_normal((1, 4, 2, 3)).astype(np.float32)
    K = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    V = rng.standard_normal((1, 2, 3, 2)).astype(np.float32)
    ref = fr.correctly_rounded(Q, K, V, dtype="float32", enable_gqa=True)
    for h, kv in enumerate([0, 0, 1, 1]):              # repeat_interleave, not tile [0, 1, 0, 1]
        sub = type(ref)(ref.output[0, h], ref.weights[0, h], "float32", None, 0, 0)
        assert_matches(sub, Q[0, h], K[0, kv], V[0, kv], "float32")
    with pytest.raises(fr.FloatRefError, match="enable_gqa"):
        fr.correctly_rounded(Q, K, V)


def test_outputs_crafted_next_to_a_float32_midpoint():
    """Two keys with scores 0 and δ and values 1, 1 + 2^-23: the output is 1 + 2^-24 + ~δ·2^-25,
    a hair from the midpoint of two float32s (an exact tie when δ = 0)."""
    V = np.array([[0.3, -2.0, 1.0], [0.7, 5.0, 1.0 + 2.0 ** -23]], dtype=np.float32)  # column 2
    Q = np.array([[1.0]], dtype=np.float32)
    fast = 0
    for delta in [0.0, 2.0 ** -20, 2.0 ** -30, 2.0 ** -40, -2.0 ** -40, 2.0 ** -60, -2.0 ** -100]:
        K = np.array([[0.0], [delta]], dtype=np.float32)
        ref = fr.correctly_rounded(Q, K, V, dtype="float32", scale=1.0)
        assert_matches(ref, Q, K, V, "float32", scale=1.0)
        want = 1.0 if delta <= 0 else 1.0 + 2.0 ** -23      # the tie goes to the even 1.0
        assert float(ref.output[0, 2]) == want
        fast += ref.arb_entries == 0
    assert fast >= 1                                  # δ = 2^-20 is decided by float64 alone


def test_relative_distance_1e_minus_12_from_a_midpoint():
    """Random q, k and keys k1 = k0 + a small step: the exact output lies within about 1e-12
    (relative) of the float32 midpoint 1.5 + 2^-24, on either side; float64 must get it right."""
    rng = np.random.default_rng(11)
    V = np.array([[1.5], [1.5 + 2.0 ** -23]], dtype=np.float32)
    seen = []
    for sign in (1, -1):
        Q = rng.standard_normal((1, 2)).astype(np.float32)
        K = np.repeat(rng.standard_normal((1, 2)).astype(np.float32), 2, axis=0)
        K[1, 0] = np.float32(K[0, 0] + sign * 2.0 ** -13 / Q[0, 0])
        ref = fr.correctly_rounded(Q, K, V, dtype="float32")
        assert_matches(ref, Q, K, V, "float32")
        _, O = mp_sdpa(Q, K, V)
        mid = mpmath.mpf(1.5) + mpmath.mpf(2) ** -24
        distance = (O[0][0] - mid) / mid
        assert 1e-13 < abs(distance) < 1e-10
        seen.append(float(ref.output[0, 0]))
        assert float(ref.output[0, 0]) == (1.5 + 2.0 ** -23 if distance > 0 else 1.5)
    assert len(set(seen)) == 2


def test_float16_subnormal_outputs_and_weights():
    rng = np.random.default_rng(2)
    Q = (rng.standard_normal((3, 4)) * 4).astype(np.float32)
    K = rng.standard_normal((5, 4)).astype(np.float32)
    V = (rng.standard_normal((5, 3)) * 2e-6).astype(np.float32)   # outputs below 2^-14
    ref = fr.correctly_rounded(Q, K, V, dtype="float16")
    assert ref.output.dtype == np.float16
    assert (np.abs(ref.output[ref.output != 0]) < 2.0 ** -14).all()   # subnormal in float16
    assert (ref.output != 0).all()
    assert_matches(ref, Q, K, V, "float16")
    ref = fr.correctly_rounded(Q * 3, K, V * 1e5, dtype="float16")      # sharper: tiny weights
    w = ref.weights.astype(np.float64)
    assert ((w > 0) & (w < 2.0 ** -14)).any()                          # subnormal weights
    assert_matches(ref, Q * 3, K, V * 1e5, "float16")


@pytest.mark.parametrize("kwargs, words", [
    (dict(is_causal=True, attn_mask=np.ones((2, 2), dtype=bool)), "not both"),
    (dict(dtype="float8"), "dtype is 'float8'"),
    (dict(attn_mask=np.ones((3, 3), dtype=bool)), "does not broadcast"),
    (dict(attn_mask=np.full((2, 2), np.nan)), "NaN or \\+inf"),
    (dict(scale=float("inf")), "finite float"),
    (dict(attn_mask=np.array([[1, 0], [0, 1]])), "dtype int64"),
])
def test_bad_arguments_are_one_line_errors(kwargs, words):
    Q = K = V = np.eye(2, dtype=np.float32)
    with pytest.raises(sa.SymattnError, match=words):
        fr.correctly_rounded(Q, K, V, **kwargs)


def _numpy_sdpa(Q, K, V, causal=False):
    dt = Q.dtype.type
    S = (Q @ np.swapaxes(K, -1, -2)) / dt(np.sqrt(Q.shape[-1]))
    if causal:
        S = np.where(np.tril(np.ones(S.shape[-2:], dtype=bool)), S, dt(-np.inf))
    A = np.exp(S - S.max(axis=-1, keepdims=True))
    A = A / A.sum(axis=-1, keepdims=True)
    return A, A @ V


def mp_ulps(y, x, fmt):
    p, e_min, _ = FMT[fmt]
    with mpmath.workdps(60):
        e = e_min if x == 0 else max(int(mpmath.floor(mpmath.log(abs(x), 2))), e_min)
        return (mpmath.mpf(float(y)) - x) / mpmath.mpf(2) ** (e - p + 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ulp_report_against_mpmath(dtype):
    rng = np.random.default_rng(4)
    Q, K, V = _shapes(rng, (), 2, 4, 4, 3, 2, dtype)
    A, O = _numpy_sdpa(Q, K, V, causal=True)
    for step, got in (("output", O), ("weights", A)):
        report = fr.ulp_report(got, Q, K, V, step=step, is_causal=True, worst=3)
        assert report.fmt == dtype and report.entries == got.size
        assert report.resolution < 1e-3
        correct = 0
        for h in range(2):
            W, Ou = mp_sdpa(Q[h], K[h], V[h], np.tril(np.ones((4, 4), dtype=bool)))
            exact = W if step == "weights" else Ou
            for i in range(4):
                for c in range(got.shape[-1]):
                    want = mp_ulps(got[h, i, c], exact[i][c], dtype)
                    assert abs(report.errors[h, i, c] - float(want)) <= report.resolution + 1e-9
                    correct += float(got[h, i, c]) == rne(exact[i][c], dtype)
        assert report.correctly_rounded == correct
        assert report.max_ulps == pytest.approx(float(np.nanmax(np.abs(report.errors))))
        worst = report.worst[0]
        assert abs(float(worst.ulps)) == pytest.approx(report.max_ulps, rel=5e-3)
        assert report.exceeds(report.max_ulps / 2) and not report.exceeds(report.max_ulps + 1)
        text = str(report)
        assert "worst entries (certified)" in text and worst.exact in text
        assert sum(report.to_json()["histogram"].values()) == report.entries


def test_ulp_report_skips_fully_masked_rows_and_checks_shapes():
    Q = K = V = np.eye(2, dtype=np.float32)
    mask = np.array([[True, False], [False, False]])
    ref = fr.correctly_rounded(Q, K, V, attn_mask=mask)
    out = np.nan_to_num(ref.output)                    # a backend that gives 0 there
    report = fr.ulp_report(out, Q, K, V, attn_mask=mask)
    assert report.skipped_rows == 1 and report.entries == 2 and report.max_ulps == 0
    assert report.correctly_rounded == 2
    with pytest.raises(fr.FloatRefError, match="shape"):
        fr.ulp_report(out[:1], Q, K, V)


def test_a_head_past_the_arb_budget_is_a_clear_error_only_when_arb_is_needed(monkeypatch):
    from symattn.floatref import rows
    monkeypatch.setattr(rows, "MAX_KEY_ENTRIES", 7)      # S·(E + Ev) = 4·2 = 8 > 7
    V = np.array([[1.0], [1.0 + 2.0 ** -23], [1.0], [1.0 + 2.0 ** -23]], dtype=np.float32)
    Q = np.ones((1, 1), dtype=np.float32)
    K = np.zeros((4, 1), dtype=np.float32)                # an exact tie at a float32 midpoint
    with pytest.raises(fr.FloatRefError, match="at most 7 entries"):
        fr.correctly_rounded(Q, K, V)
    K = np.array([[0.0], [1.0], [2.0], [3.0]], dtype=np.float32)
    ref = fr.correctly_rounded(Q, K, V)                    # decided by float64 alone
    assert ref.arb_entries == 0
    assert_matches(ref, Q, K, V, "float32")


def test_the_assumed_exp_bound_holds_for_this_numpy():
    """The fast path assumes numpy's float64 exp and expm1 are within 8u (4 ulp) relative, plus
    2^-1070 absolute; checked here with arb balls on points across the range it uses."""
    import flint
    from symattn.floatref import fast

    rng = np.random.default_rng(12)
    xs = np.concatenate([-rng.random(3000) * 750, -rng.random(1000) * 1e-3, -rng.random(500) * 40,
                         np.array([0.0, -708.4, -709.8, -744.0, -745.1])])
    ys = np.exp(xs)
    es = rng.random(2000) * 1e-3
    ms = np.expm1(es)
    old = flint.ctx.prec
    flint.ctx.prec = 200
    try:
        for x, y in zip(xs.tolist(), ys.tolist()):
            exact = flint.arb(x).exp()
            assert abs(flint.arb(y) - exact) <= exact * fast.EXP_REL + fast.EXP_ABS, x
        for x, y in zip(es.tolist(), ms.tolist()):
            exact = flint.arb(x).exp() - 1
            assert abs(flint.arb(y) - exact) <= exact * fast.EXP_REL + fast.EXP_ABS, x
    finally:
        flint.ctx.prec = old


def test_batch_dimensions_broadcast_as_torch():
    rng = np.random.default_rng(9)
    Q = rng.standard_normal((2, 1, 3, 2)).astype(np.float32)
    K = rng.standard_normal((1, 3, 4, 2)).astype(np.float32)
    V = rng.standard_normal((4, 2)).astype(np.float32)          # no batch dims at all
    ref = fr.correctly_rounded(Q, K, V, dtype="float16")
    assert ref.output.shape == (2, 3, 3, 2) and ref.weights.shape == (2, 3, 3, 4)
    for b in range(2):
        for h in range(3):
            sub = type(ref)(ref.output[b, h], ref.weights[b, h], "float16", None, 0, 0)
            assert_matches(sub, Q[b, 0], K[0, h], V, "float16")


def test_ulp_report_of_bfloat16_values_in_float32_arrays():
    rng = np.random.default_rng(10)
    Q, K, V = _shapes(rng, (), 1, 3, 3, 2, 2, np.float32)
    ref = fr.correctly_rounded(Q, K, V, dtype="bfloat16")
    report = fr.ulp_report(ref.output, Q, K, V, dtype="bfloat16")
    assert report.correctly_rounded == report.entries == 6
    assert report.max_ulps <= 0.5
    bumped = ref.output.copy()
    bumped[0, 1, 1] = np.nextafter(bumped[0, 1, 1], np.float32(np.inf))  # not a bfloat16 step:
    report = fr.ulp_report(bumped, Q, K, V, dtype="bfloat16")            # 2^-16 of one
    assert report.correctly_rounded == 5
    assert report.worst[0].index == (0, 1, 1)


def test_integer_inputs_are_exact_and_huge_ones_refused():
    Q = np.array([[1, 2]], dtype=np.int64)
    K = np.array([[0, 1], [1, 0]], dtype=np.int64)
    V = np.array([[3], [5]], dtype=np.int64)
    ref = fr.correctly_rounded(Q, K, V)
    assert_matches(ref, Q.astype(float), K.astype(float), V.astype(float), "float32")
    with pytest.raises(fr.FloatRefError, match="beyond 2\\^53"):
        fr.correctly_rounded(Q, K, V * 2 ** 60)


def test_heads_sharing_k_and_v_share_one_trace_with_their_own_masks_and_rows(float64_via_arb):
    """Every entry through arb: grouped heads (one Trace per kv head) must keep
    each query row's own mask row and additive values."""
    rng = np.random.default_rng(13)
    Q = rng.standard_normal((4, 3, 2))
    K = rng.standard_normal((2, 3, 2))
    V = rng.standard_normal((2, 3, 2))
    additive = rng.standard_normal((4, 3, 3))
    additive[1, 0, 2] = additive[2, 2, 0] = -np.inf
    ref = fr.correctly_rounded(Q, K, V, dtype="float64", attn_mask=additive, enable_gqa=True)
    assert ref.arb_entries == ref.entries
    for h, kv in enumerate([0, 0, 1, 1]):
        sub = type(ref)(ref.output[h], ref.weights[h], "float64", None, 0, 0)
        assert_matches(sub, Q[h], K[kv], V[kv], "float64", ~np.isneginf(additive[h]),
                       np.where(np.isneginf(additive[h]), 0, additive[h]))


def test_groups_with_equal_mean_values_give_an_exact_midpoint_output():
    """Scores 0, 0, 1, 1 with values 1, 1 + 2^-23 in each pair: the weights are irrational but
    each score group's mean value is 1 + 2^-24, so the output is exactly that midpoint
    (Lindemann–Weierstrass: rows.py) and rounds to the even 1.0; one group's mean moved by
    2^-30 breaks the tie and the balls decide it."""
    V = np.array([[1.0], [1.0 + 2.0 ** -23], [1.0 + 2.0 ** -23], [1.0]], dtype=np.float32)
    Q = np.ones((1, 1), dtype=np.float32)
    K = np.array([[0.0], [0.0], [1.0], [1.0]], dtype=np.float32)
    ref = fr.correctly_rounded(Q, K, V, scale=1.0)
    assert float(ref.output[0, 0]) == 1.0 and ref.arb_entries >= 1
    assert_matches(ref, Q, K, V, "float32", scale=1.0)
    V2 = V.astype(np.float64)
    V2[3, 0] = 1.0 + 2.0 ** -30                                      # the e^1 group's mean moves up
    ref = fr.correctly_rounded(Q, K, V2, scale=1.0)
    assert float(ref.output[0, 0]) == 1.0 + 2.0 ** -23
    assert_matches(ref, Q, K, V2, "float32", scale=1.0)


def test_more_keys_than_the_engine_takes_go_through_the_arb_path(float64_via_arb):
    """S = 1,500 > MAX_SIDE (the engine's side limit) on a thin problem, every entry through
    the arb path; float32 with tied scores at a midpoint needs it too."""
    rng = np.random.default_rng(21)
    S = 1500
    Q = rng.standard_normal((1, 2, 2)).astype(np.float32)
    K = rng.standard_normal((1, S, 2)).astype(np.float32)
    V = rng.standard_normal((1, S, 1)).astype(np.float32)
    causal = np.tril(np.ones((2, S), dtype=bool), k=S - 2)           # row 0 misses the last key
    ref = fr.correctly_rounded(Q, K, V, dtype="float64", attn_mask=causal)
    assert ref.arb_entries == ref.entries
    assert_matches(type(ref)(ref.output[0], ref.weights[0], "float64", None, 0, 0),
                   Q[0], K[0], V[0], "float64", allowed=causal)
    Vt = np.where(np.arange(S)[:, None] % 2, 1.0 + 2.0 ** -23, 1.0).astype(np.float32)
    ref = fr.correctly_rounded(Q[0], np.zeros((S, 2), np.float32), Vt)   # every score 0: a tie
    assert ref.output[:, 0].tolist() == [1.0, 1.0] and ref.arb_entries == 2
    assert (ref.weights == np.float32(1 / S)).all()


def test_ulp_report_past_the_engine_side_limit_certifies_the_worst_entries():
    """S = 1,500: the worst entries' exact values and errors come from rows.py's balls;
    checked against mpmath (one candidate entry moved by one float32 step)."""
    rng = np.random.default_rng(22)
    Q, K, V = (rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 1500, 1500))
    ref = fr.correctly_rounded(Q, K, V)
    out = ref.output.copy()
    out[1, 2] = np.nextafter(out[1, 2], np.float32(np.inf))
    report = fr.ulp_report(out, Q, K, V, worst=2)
    assert report.correctly_rounded == 5 and report.worst[0].index == (1, 2)
    _, O = mp_sdpa(Q, K, V)
    want = mp_ulps(out[1, 2], O[1][2], "float32")
    assert abs(float(report.worst[0].ulps) - float(want)) < 1e-3
    assert abs(float(report.worst[0].exact) - float(O[1][2])) <= 1e-8 * abs(float(O[1][2]))


@pytest.mark.parametrize("spread", [4, 40, 400])
def test_inputs_of_wide_exponent_range_split_or_not(spread):
    """Entries scaled by 2^k, |k| ≤ spread: the exact split of the scores (fast.py step 1) holds
    when the per-row grids fit, the plain bound takes over when they do not (spread 400 in
    float64 inputs); every entry still matches mpmath."""
    rng = np.random.default_rng(30 + spread)
    dt = np.float32 if spread < 100 else np.float64
    Q, K, V = (np.ldexp(rng.standard_normal((n, 3)), rng.integers(-spread, spread + 1, (n, 3))).astype(dt)
               for n in (3, 5, 5))
    Q[0] /= np.abs(Q[0]).max() * 4                              # one row of moderate scores
    K = K / np.sqrt(np.abs(K).max(axis=1, keepdims=True) * np.abs(Q).max() + 1)
    if dt is np.float64:
        K[4] = np.ldexp(K[4], -1000)                            # a grid below 2^-1022: plain bound
        from symattn.floatref import fast
        h = fast._Head(K, V)
        assert fast._split(Q, h.beta)[2].min() + h.ek.min() - 2 * h.beta < -1022
    for fmt in ("float32", "float16"):
        ref = fr.correctly_rounded(Q, K, V, dtype=fmt)
        assert_matches(ref, Q, K, V, fmt)


def test_a_constant_value_column_at_a_midpoint_with_distinct_scores():
    """Every score distinct (no ties), each value column constant at a float32 midpoint:
    the outputs are exactly those midpoints (the weights sum to 1) and round to even,
    through rows.py's no-tie shortcut; a column that is not constant stays transcendental."""
    rng = np.random.default_rng(23)
    Q, K = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    V = np.empty((5, 3))
    V[:, 0] = 1.0 + 2.0 ** -24                          # between 1 and 1 + 2^-23: even is 1
    V[:, 1] = 1.0 + 3 * 2.0 ** -24                      # between 1 + 2^-23 and 1 + 2^-22
    V[:, 2] = rng.standard_normal(5)
    ref = fr.correctly_rounded(Q, K, V, dtype="float32")
    assert ref.output[:, 0].tolist() == [1.0] * 3
    assert ref.output[:, 1].tolist() == [1.0 + 2.0 ** -22] * 3
    assert ref.arb_entries >= 6
    assert_matches(ref, Q, K, V, "float32")


def test_rounding_boundaries_of_each_format():
    """binary.is_boundary: the midpoints between neighbours (subnormals too) and the overflow
    threshold are boundaries; format values and other points are not."""
    from symattn.floatref.binary import BINARY_FORMATS, is_boundary

    f32, f16, bf16 = (BINARY_FORMATS[n] for n in ("float32", "float16", "bfloat16"))
    cases = [(f32, 1 + 2.0 ** -24, True), (f32, 1 + 3 * 2.0 ** -24, True), (f32, -(1 + 2.0 ** -24), True),
             (f32, 1 + 2.0 ** -23, False), (f32, 1 + 2.0 ** -25, False), (f32, 1.0, False),
             (f32, 2.0 ** -150, True), (f32, 3 * 2.0 ** -150, True), (f32, 2.0 ** -149, False),
             (f32, (2 - 2.0 ** -24) * 2.0 ** 127, True), (f32, 0.0, False), (f32, np.inf, False),
             (f16, 1 + 2.0 ** -11, True), (f16, 2.0 ** -25, True), (f16, 65520.0, True),
             (f16, 65504.0, False), (bf16, 1 + 2.0 ** -8, True), (bf16, 1 + 2.0 ** -7, False)]
    got = [bool(is_boundary(np.array([x]), fmt)[0]) for fmt, x, _ in cases]
    assert got == [want for _, _, want in cases]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_double_double_decides_what_the_float64_bounds_leave(dtype, monkeypatch):
    """Outputs a hair (w_0·2^-48) above a midpoint of the target format: the float64
    enclosures cannot tell the side, the double-double ones can (no arb); the values match
    mpmath, and with the double-double step switched off the same entries go to arb.  At
    w_0·2^-52 the output's float64 rounding is the midpoint itself: that proves nothing
    about the side, and those entries go to arb too (and come out right)."""
    from symattn.floatref import sdpa

    p = {"float32": 24, "bfloat16": 8, "float16": 11}[dtype]
    mid = 1 + 2.0 ** -p                                   # halfway between 1 and 1 + 2^(1-p)
    rng = np.random.default_rng(31)
    Q, K = rng.standard_normal((4, 3)), rng.standard_normal((6, 3))
    V = np.full((6, 2), mid)
    V[:, 1] = rng.standard_normal(6)
    V[0, 0] = mid + 2.0 ** -48                            # output = mid + w_0·2^-48
    ref = fr.correctly_rounded(Q, K, V, dtype=dtype)
    assert ref.arb_entries == 0
    assert ref.output[:, 0].tolist() == [1 + 2.0 ** (1 - p)] * 4     # above the midpoint: up
    assert_matches(ref, Q, K, V, dtype)
    V[0, 0] = mid + 2.0 ** -52
    ref = fr.correctly_rounded(Q, K, V, dtype=dtype)
    assert ref.arb_entries >= 1
    assert_matches(ref, Q, K, V, dtype)
    V[0, 0] = mid + 2.0 ** -48
    monkeypatch.setattr(sdpa, "_refine64", lambda *args: None)
    assert fr.correctly_rounded(Q, K, V, dtype=dtype).arb_entries >= 4
