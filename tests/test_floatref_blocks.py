"""floatref's forward decided in small blocks of rows (heads.py) and narrow formats decided
through float32 (binary.round_float32): a moderately sized head (several row blocks, more
keys than one summation block) with a causal mask, float16 subnormal weights included,
checked on a sample of entries against mpmath written out here; round_float32 against an
integer rounding written here; block sizes that change nothing."""

import mpmath
import pytest

from symattn import floatref as fr

np = pytest.importorskip("numpy")

FMT = {"float64": (53, -1022, 1023), "float32": (24, -126, 127),
       "float16": (11, -14, 15), "bfloat16": (8, -126, 127)}


def rne(x, fmt: str) -> float:
    """An exact binary number (mpf or float) rounded to the format, ties to even, with ints."""
    p, e_min, e_max = FMT[fmt]
    x = mpmath.mpf(x)
    if x == 0:
        return 0.0
    sign, man, exp, _ = x._mpf_
    if exp + man.bit_length() < e_min - p:
        return -0.0 if sign else 0.0
    q = max(exp + man.bit_length() - 1, e_min) - p + 1
    shift = q - exp
    if shift <= 0:
        n = man << -shift
    else:
        n, rest = man >> shift, man & ((1 << shift) - 1)
        if rest > (1 << (shift - 1)) or (rest == 1 << (shift - 1) and n & 1):
            n += 1
    if n * mpmath.mpf(2) ** q > (2 - mpmath.mpf(2) ** (1 - p)) * mpmath.mpf(2) ** e_max:
        return float("-inf") if sign else float("inf")
    value = float(mpmath.ldexp(mpmath.mpf(n), q))
    return -value if sign else value


def mp_row(q, K, V, keys, E):
    """One query row at 50 digits: its weights over all S keys (0 where blocked) and output."""
    with mpmath.workdps(50):
        s = 1 / mpmath.sqrt(E)
        t = {j: s * mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(q, K[j]))
             for j in keys}
        top = max(t.values())
        e = {j: mpmath.exp(t[j] - top) for j in keys}
        z = mpmath.fsum(e.values())
        w = [e[j] / z if j in e else mpmath.mpf(0) for j in range(K.shape[0])]
        o = [mpmath.fsum(e[j] * mpmath.mpf(float(V[j, c])) for j in keys) / z for c in range(V.shape[1])]
        return w, o


@pytest.fixture(scope="module")
def head():
    """L = S = 300 (ten blocks of 32 rows; S > the 256-key summation block), E = 24, Q
    scaled by 3 so that many weights are float16 subnormals or round to 0."""
    rng = np.random.default_rng(2026)
    L, E = 300, 24
    Q = (3 * rng.standard_normal((1, 2, L, E))).astype(np.float32)
    K, V = (rng.standard_normal((1, 2, L, E)).astype(np.float32) for _ in range(2))
    return Q, K, V


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_a_sample_of_entries_against_mpmath(head, dtype):
    Q, K, V = head
    ref = fr.correctly_rounded(Q, K, V, dtype=dtype, is_causal=True)
    rng = np.random.default_rng(7)
    L, E = Q.shape[2], Q.shape[3]
    rows = sorted({0, 31, 32, 255, 256, L - 1} | set(rng.choice(L, 6, replace=False).tolist()))
    tiny = 0
    for h in (0, 1):
        for i in rows:
            keys = list(range(i + 1))                   # causal, top-left: keys j ≤ i
            w, o = mp_row(Q[0, h, i], K[0, h], V[0, h], keys, E)
            cols = sorted({0, i, L - 1} | set(rng.choice(L, 12).tolist()))
            for j in cols:
                got = float(ref.weights[0, h, i, j])
                assert got == rne(w[j], dtype), (dtype, "weights", h, i, j)
                assert not np.signbit(got)
                tiny += 0 < abs(got) < 2.0 ** -14
            for c in range(E):
                assert float(ref.output[0, h, i, c]) == rne(o[c], dtype), (dtype, "output", h, i, c)
    if dtype == "float16":
        assert tiny > 0                                  # subnormal weights were among those checked


def test_block_sizes_change_nothing(head, monkeypatch):
    """One row per block and the default blocks give the same bits in every format."""
    from symattn.floatref import heads

    Q, K, V = head
    mask = np.where(np.tril(np.ones((300, 300), dtype=bool)), 0.0, -1e9).astype(np.float32)
    want = {d: fr.correctly_rounded(Q, K, V, dtype=d, attn_mask=mask) for d in ("float16", "float32", "float64")}
    monkeypatch.setattr(heads, "ENTRIES", 1)
    monkeypatch.setattr(heads, "MIN_ROWS", 1)
    for d, ref in want.items():
        got = fr.correctly_rounded(Q, K, V, dtype=d, attn_mask=mask)
        assert got.weights.tobytes() == ref.weights.tobytes() and got.output.tobytes() == ref.output.tobytes()
        assert got.arb_entries == ref.arb_entries


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_round_float32_against_integer_rounding(fmt):
    """binary.round_float32 (the hardware's float32 rounding at a chosen quantum) on float32
    bit patterns near every binade, the subnormals of both formats and the overflow edge:
    against round_array on all of them and the integer rounding above on a sample."""
    from symattn.floatref.binary import BINARY_FORMATS, is_boundary, round_array, round_float32

    f = BINARY_FORMATS[fmt]
    rng = np.random.default_rng(11)
    # past max_finite into overflow, but below 2^(104 + p), where C = 2^(q + 23) overflows
    top = int(np.float32(min(float(f.max_finite) * 1.01, 2.0 ** (103 + f.p))).view(np.int32))
    edges = np.arange(0, 0x7F800000, 1 << 19, dtype=np.int64)[:, None] + np.arange(-3, 4)
    bits = np.concatenate([rng.integers(0, top, 200_000), np.arange(0, 5000), edges.ravel(),
                           np.arange(top - 70_000, top)])
    bits = bits[(bits >= 0) & (bits < top)].astype(np.int32)
    a = np.concatenate([bits, bits | np.int32(-0x80000000)]).view(np.float32)
    y, boundary = round_float32(a, f)
    x = a.astype(np.float64)
    want = round_array(x, f)
    assert ((y.astype(np.float64) == want) | (np.isnan(y) & np.isnan(want))).all()
    assert (np.signbit(y) == np.signbit(a)).all()
    assert (boundary == is_boundary(x, f)).all()
    if fmt in FMT:
        for k in rng.choice(a.size, 300, replace=False):
            assert float(y[k]) == rne(float(a[k]), fmt), float(a[k])
