"""fused64's loops (numba) against fast64's numpy code: the same double-double midpoints bit
for bit, radii equal but for the order of one row sum (Σ|W3|, inflated by γ_S either way),
and the same decided weights, on problems with and without boolean masks, key blocks of
several SUM_BLOCKs, tiny and zero weights, fully masked rows and rows past the bounds' range;
and correctly_rounded with and without the loops gives the same float64 references."""

from fractions import Fraction

import pytest

from symattn import floatref as fr

np = pytest.importorskip("numpy")
pytest.importorskip("numba")

from symattn.floatref import fast64, fused64  # noqa: E402

CASES = [  # (L, S, E, Ev, magnitude of Q and K, scale); magnitude -1: float32 values
    (12, 40, 5, 3, 1.0, Fraction(1, 3)),
    (40, 300, 16, 8, 1.0, None),               # S past SUM_BLOCK: the remainder in key blocks
    (24, 600, 16, 8, -1, None),                # float32 V: Y3 = 0, the remainder without X12·Y3
    (64, 1030, 64, 64, 3.0, None),             # a short last key block
    (20, 200, 8, 4, 12.0, Fraction(1)),        # scores spread over hundreds: tiny and zero weights
    (16, 100, 4, 2, 0.002, None),              # weights all near 1/S
    (6, 30, 3, 2, 2.0 ** 300, Fraction(1)),    # scores near 2^600: rows past the bounds
]


def _problem(seed, L, S, E, Ev, mag):
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((L, E)) * abs(mag), rng.standard_normal((S, E)) * abs(mag)
    V = rng.standard_normal((S, Ev)) * 3
    if mag < 0:
        Q, K, V = (x.astype(np.float32).astype(np.float64) for x in (Q, K, V))
    return Q, K, V


def _both(monkeypatch, Q, K, V, allowed, scale, decided):
    out = []
    for use in (True, False):
        monkeypatch.setattr(fused64, "AVAILABLE", use)
        scores, values = fast64.products(K, V, Q.shape[1])
        into = (np.empty((Q.shape[0], K.shape[0])), np.empty((Q.shape[0], K.shape[0]), dtype=bool))
        got = fast64._block(Q, scores, values, allowed, None, scale, V.shape[1],
                            into=into if decided else None)
        out.append((into, got[1], got[2]) if decided and use else got)
    return out


def _same(a, b):
    return np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("masked", [False, True])
def test_fused_enclosures_equal_numpy(monkeypatch, case, masked):
    L, S, E, Ev, mag, s = CASES[case]
    Q, K, V = _problem(case, L, S, E, Ev, mag)
    allowed = None
    if masked:
        allowed = np.random.default_rng(50 + case).random((L, S)) < 0.6
        allowed[1] = False                      # a fully masked row
    scale = fast64.scale_dd(s if s is not None else fr.sdpa._scale(None, E)[0])
    assert fast64.products(K, V, E)[1].full_rest == (mag > 0)
    (w1, o1, z1), (w0, o0, z0) = _both(monkeypatch, Q, K, V, allowed, scale, decided=False)
    assert _same(w1[0], w0[0]) and _same(w1[1], w0[1]) and _same(o1[0], o0[0]) and _same(o1[1], o0[1])
    assert _same(z1, z0)
    for r1, r0 in ((w1[2], w0[2]), (o1[2], o0[2])):
        assert _same(np.isfinite(r1), np.isfinite(r0))
        fin = np.isfinite(r0)
        assert np.allclose(r1[fin], r0[fin], rtol=1e-12, atol=0)
    if case == len(CASES) - 1:
        assert not np.isfinite(o0[2]).any()     # every row past the bounds: nothing decided
    else:
        assert np.isfinite(o0[2]).mean() > 0.5
    (d1, _, _), (wn, _, zn) = _both(monkeypatch, Q, K, V, allowed, scale, decided=True)
    d0 = fast64.decide64(*wn)                   # as heads.fast64_head decides numpy's path
    d0[0][zn], d0[1][zn] = 0.0, True
    assert _same(d1[1], d0[1]) and _same(d1[0], d0[0])
    assert d1[1].mean() > (0.5 if case < len(CASES) - 1 else -1)


def test_correctly_rounded_float64_is_the_same_with_the_loops(monkeypatch):
    """The public entry point, both ways, on a batch with GQA-free heads and a causal mask."""
    rng = np.random.default_rng(7)
    Q, K, V = (rng.standard_normal((1, 2, 70, 16)) for _ in range(3))
    refs = []
    for use in (True, False):
        monkeypatch.setattr(fused64, "AVAILABLE", use)
        refs.append(fr.correctly_rounded(Q, K, V, dtype="float64", is_causal=True, return_lse=True))
    assert _same(refs[0].output, refs[1].output) and _same(refs[0].lse, refs[1].lse)
    # and against float64 attention: within a few ulps (the reference is the exact rounding)
    s = Q @ np.swapaxes(K, -1, -2) / 4.0
    s = np.where(np.tril(np.ones((70, 70), dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    o = (w / w.sum(axis=-1, keepdims=True)) @ V
    assert np.allclose(refs[0].output, o, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("tiny_entries,S", [(False, 9), (True, 9), (False, 300)])
def test_float32_inputs_float64_target_match_mpmath(tiny_entries, S):
    """float32 inputs leave the score slices' X3 and Y3 (almost) empty: the remainder product
    runs over the nonzero inner indices only (fast64._Product._sparse_rest); with a few entries
    2^-30 below their row's largest, some of them are nonzero.  V's Y3 is empty too, so W·[V | 1]'s
    remainder leaves out X12·Y3 (in key blocks at S = 300).  Every weight and output is the
    float64 rounding of mpmath's value at 60 digits."""
    from test_floatref_sdpa import assert_matches

    rng = np.random.default_rng(11)
    Q = rng.standard_normal((9, 12)).astype(np.float32)
    K, V = (rng.standard_normal((S, 12)).astype(np.float32) for _ in range(2))
    if tiny_entries:
        Q[2, 3], K[4, 5], K[7, 0] = np.float32(3e-10), np.float32(-2e-10), np.float32(1.5e-9)
    scores, values = fast64.products(K.astype(np.float64), V.astype(np.float64), 12)
    assert (scores.Y3 != 0).any() == tiny_entries
    assert not values.full_rest
    ref = fr.correctly_rounded(Q, K, V, dtype="float64")
    assert ref.arb_entries == 0
    assert_matches(ref, Q.astype(np.float64), K.astype(np.float64), V.astype(np.float64), "float64")


def test_fused_float32_decisions_equal_numpy(monkeypatch):
    """fused32.decide against heads.decide_into's numpy branch, bit for bit, on enclosures that
    straddle float32 midpoints, sit exactly on one, round to −0, to float32 subnormals, past
    float32's range, or have infinite or NaN radii; and the decided values against Python's
    own float32 rounding (struct)."""
    import struct

    from symattn.floatref import binary, fused32, heads

    rng = np.random.default_rng(3)
    mid = rng.standard_normal((40, 50)) * np.exp2(rng.integers(-140, 130, (40, 50)))
    rad = np.abs(mid) * np.exp2(rng.integers(-60, -20, (40, 50)).astype(float))
    mid[0, :4] = [1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, -(2.0 ** -160), 3.5e38]   # ties, −0, overflow
    rad[0, :4] = 0.0
    mid[1, :3], rad[1, :3] = [1.0, np.nan, 2.0], [np.inf, 0.0, np.nan]
    mid[2, :2], rad[2, :2] = [1 + 2.0 ** -24, 2.0 ** -140 + 2.0 ** -150], [2.0 ** -40, 2.0 ** -170]  # straddle
    got = (np.empty(mid.shape, dtype=np.float32), np.empty(mid.shape, dtype=bool))
    fused32.decide(mid, rad.copy(), *got)
    monkeypatch.setattr(fused64, "AVAILABLE", False)
    want = (np.empty(mid.shape, dtype=np.float32), np.empty(mid.shape, dtype=bool))
    heads.decide_into(mid, rad.copy(), binary.BINARY_FORMATS["float32"], True, *want)
    assert np.array_equal(got[1], want[1])
    assert np.array_equal(got[0].view(np.uint32)[got[1]], want[0].view(np.uint32)[want[1]])
    assert 0.6 < got[1].mean() < 1 and not got[1][1, :3].any() and not got[1][2, :2].any()
    assert not got[1][0, 3]                                         # past float32's range
    assert got[0][0, 2] == 0 and not np.signbit(got[0][0, 2])       # −2^-160 → +0
    for x, v, ok in zip(mid.ravel(), got[0].ravel(), got[1].ravel()):
        if ok:
            assert struct.unpack("f", struct.pack("f", x))[0] + 0.0 == float(v)
