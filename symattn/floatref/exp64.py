"""The exponential of fast64.py: a table of exp(−m/1024) from arb, and e^x = table × a short
series in double-double (docs/floatref.md, "float64 targets", step 4)."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from symattn.floatref import dd

#: exp(x) for x ≥ X_TABLE comes from the table; x < X_ZERO gives a weight that rounds to 0
X_TABLE = -650.0
X_ZERO = -800.0
#: |exp(r) − computed| ≤ EXP_SERIES for |r| ≤ 2^-10.9 (the series and its float evaluation)
EXP_SERIES = 2.0 ** -83
#: relative error of a table entry exp(k/1024)
TABLE_REL = 2.0 ** -101


def _dd_of(value: Fraction) -> tuple[float, float, float]:
    """hi, lo and an upper bound on |value − hi − lo| for an exact rational."""
    hi = float(value)
    rest = value - Fraction(hi)
    lo = float(rest)
    err = abs(rest - Fraction(lo))
    return hi, lo, float(err) * 2 if err else 0.0


def _ball_dd(ball) -> tuple[float, float, float]:
    """hi, lo and an error bound for an arb ball: |x − hi − lo| ≤ err for every x in it."""
    from symattn.floatref.binary import _dyadic

    hi, lo, err = _dd_of(_dyadic(ball.mid()))
    return hi, lo, err + float(_dyadic(ball.rad())) * 2


@lru_cache(maxsize=1)
def exp_table():
    """(hi, lo) of exp(−m/1024) for m = 0 … 650·1024, relative error ≤ TABLE_REL.

    Built as exp(−i)·exp(j/1024) (m = 1024·i − j) from 1,675 arb values at 160 bits,
    each within 2^-104 relative, and one double-double product (≤ 7u²)."""
    import flint
    import numpy as np

    from symattn.numbers.precision import precision

    top = int(-X_TABLE)
    with precision(160):
        e1 = [_ball_dd(flint.arb(-i).exp()) for i in range(top + 1)]
        e0 = [_ball_dd((flint.arb(j) / 1024).exp()) for j in range(1024)]
    for hi, _lo, err in e1 + e0:
        assert err <= 2.0 ** -104 * abs(hi), "the exp table is not accurate enough"
    A, B = np.array(e1), np.array(e0)
    size = top * 1024 + 1
    hi, lo = np.empty(size), np.empty(size)
    for start in range(0, size, 1 << 16):          # in chunks: the temporaries stay near 0.5 MB
        m = np.arange(start, min(size, start + (1 << 16)))
        i = -(-m // 1024)
        a, b = A[i], B[i * 1024 - m]
        hi[m], lo[m] = dd.mul(a[:, 0], a[:, 1], b[:, 0], b[:, 1])
    return hi, lo


def _exp(Xh, Xl):
    """(hi, lo) of e^x for x = Xh + Xl ≤ 2^-40, and the masks of keys below X_TABLE (w̃ = 0,
    w < e^(X_TABLE + 1)) and below X_ZERO (w < e^(X_ZERO + 1))."""
    import numpy as np

    Th, Tl = exp_table()
    tiny = ~(Xh >= X_TABLE)
    zero = ~(Xh >= X_ZERO)
    # x > 2^-40 only in rows already refused (``bad``: scores past about 2^13, whose lo part
    # alone exceeds 2^-40): computed as 0 there so the table index stays in range
    x = np.where(tiny | ~(Xh <= 2.0 ** -40), 0.0, Xh)
    k = np.rint(x * 1024.0)                                 # ≤ 0: x ≤ 0
    r0 = x - k / 1024.0                                     # exact (Sterbenz), |r0| ≤ 2^-11
    rh, rl = dd.two_sum(r0, np.where(tiny, 0.0, Xl))
    qh, ql = dd.square(rh)                                   # = dd.two_prod(rh, rh)
    p = rh * rh * rh * (1 / 6 + rh * (1 / 24 + rh * (1 / 120 + rh * (1 / 720))))
    small = (rl + 0.5 * ql) + (rh * rl + p)
    s1h, s1l = dd.two_sum(rh, 0.5 * qh)
    eh, el = dd.fast_two_sum(1.0, s1h)
    eh, el = dd.fast_two_sum(eh, el + (s1l + small))
    m = (-k).astype(np.intp)
    Wh, Wl = dd.mul(np.take(Th, m), np.take(Tl, m), eh, el)
    Wh[tiny] = 0.0
    Wl[tiny] = 0.0
    return Wh, Wl, tiny & ~zero, zero
