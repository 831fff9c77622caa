"""e^x with a proved error of 1.25u for the plain backward's weights, and compensated row sums.

numpy's ``exp`` is assumed within 8u (fast.py's EXP_REL); the plain backward's enclosures are
limited by that assumption, so the weights are computed here by a method whose error is proved:
x = k·(ln 2)/64 + ρ (Cody–Waite: C_hi with 36 bits, so k·C_hi is exact for |k| < 2^17), the
reduction done exactly by TwoSum, e^x = 2^m·T_j·e^ρ (k = 64m + j, T_j = 2^(j/64) as a double-double
from arb at 200 bits), e^ρ − 1 by a degree-6 Taylor polynomial (|ρ| ≤ 0.0055: truncation below
2^-68), and y = fl(Th + fl(fl(Th·q) + Tl)).  The error of y against T_j·e^ρ̃ is u|y| (the last
rounding) plus about 0.06u·Th from the small terms, below 1.07u|y|: EXP_OWN = 1.25u is used.
docs/floatref.md, "The fast plain backward", step 2.

Without that last rounding (``residual=True``): v = fl(fl(Th·q) + Tl) and y + y_lo = Th + v exactly
(Fast2Sum: |v| ≤ 0.00553·Th < Th).  With |r| ≤ 0.0055, |q| ≤ 0.00552:
|Th + v − T_j·e^r| ≤ |v − Th·q − Tl| + Th·|q − expm1 r| + |Tl·expm1 r| + |T_j − Th − Tl|·e^r
≤ Th·u·(0.00552 + 0.00553) + Th·u·0.0059 + Th·u·0.00552 + 2^-105·1.006·Th ≤ 0.0226u·Th, where
|q − expm1 r| ≤ u|q| (the last addition) + 3.2u·(r²/2 ≤ 1.52e-5) (the rest of Horner's rule)
+ |r|⁷/5040·1.01 ≤ 3.1e-20 (the truncation) ≤ 0.0059u.  As Th ≤ 1.0056·y, the pair is within
0.0228u·|y| of T_j·e^r: EXP_PAIR = u/16 is used (2.7 times that).
"""

from __future__ import annotations

from functools import lru_cache

from symattn.floatref import dd
from symattn.floatref.fast import TINY, U, gamma

#: the proved relative error of :func:`exp_dd` (before the argument's own error)
EXP_OWN = 1.25 * U
#: the proved error of exp_dd's unrounded pair W + W_lo (``residual=True``), relative to |W|
EXP_PAIR = U / 16
#: |x| below which the reduction's k stays below 2^17 (x ≥ X_MIN); below it the weight is 0 ± EXP_TINY
X_MIN = -790.0
EXP_TINY = 2.0 ** -1070


def _np():
    import numpy

    return numpy


@lru_cache(maxsize=1)
def constants():
    """(C_hi, C_lo, δC, T_hi[64], T_lo[64]): ln 2/64 = C_hi + C_lo ± δC with C_hi on 36 bits, and
    2^(j/64) = T_hi + T_lo within 2^-105 relative, from arb at 200 bits."""
    import flint

    from symattn.floatref.binary import _dyadic
    from symattn.numbers.precision import precision

    np = _np()
    with precision(200):
        c = flint.arb(2).log() / 64
        mid = _dyadic(c.mid())
        rad = _dyadic(c.rad())
        e = mid.numerator.bit_length() - mid.denominator.bit_length()
        grid = 2.0 ** (e - 36)
        c_hi = round(float(mid) / grid) * grid
        from fractions import Fraction

        rest = mid - Fraction(c_hi)
        c_lo = float(rest)
        dc = float(abs(rest - Fraction(c_lo)) + rad) * 2 + 2.0 ** -1000
        hi, lo = np.empty(64), np.empty(64)
        for j in range(64):
            t = (flint.arb(2) ** (flint.arb(j) / 64))
            m = _dyadic(t.mid())
            hi[j] = float(m)
            lo[j] = float(m - Fraction(float(hi[j])))
            err = abs(m - Fraction(float(hi[j])) - Fraction(float(lo[j]))) + _dyadic(t.rad())
            assert err <= Fraction(2) ** -105 * Fraction(float(hi[j])), "the 2^(j/64) table is not accurate"
    return c_hi, c_lo, dc, hi, lo


def exp_dd(Xh, Xl, eX, allowed, residual: bool = False):
    """(W, R): W̃ ≈ e^x and |e^x − W̃| ≤ R for every x with |x − (Xh + Xl)| ≤ eX (entrywise, x ≤ 2^-30):
    R = W̃·G + EXP_TINY·(1 + G), G = (expm1(e_ρ) + EXP_OWN)/(1 − EXP_OWN)², e_ρ the reduced
    argument's error.  Keys with Xh + Xl + eX < X_MIN are 0 ± EXP_TINY; blocked keys 0 ± 0; an
    entry whose bound fails (eX ≥ 2^-20, x > 2^-30) has R = ∞.

    ``residual``: (W, R, W_lo, R₂) with the same W̃ and |e^x − W̃ − W_lo| ≤ R₂ (G with EXP_PAIR,
    and 2^-1000 more for an underflow of W_lo), R = (R₂ + |W_lo|)(1 + 2^-40) (tighter than EXP_OWN's)."""
    np = _np()
    c_hi, c_lo, dc, Th, Tl = constants()
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        far = ~(Xh + Xl + eX >= X_MIN)
        x = np.where(far, 0.0, Xh)
        k = np.rint(x * (64 / np.log(2.0)))
        r1, e1 = dd.two_sum(x, -(k * c_hi))                   # k·C_hi exact: |k| < 2^17, 36 bits
        ak = np.abs(k)
        r = e1 - k * c_lo
        r += Xl
        r += r1
        # ρ = x − k·ln2/64 = r1 + e1 + Xl − k·c_lo − k·δC ± e_x; with |e1| ≤ u|r1| ≤ 0.0056u and
        # |r2| ≤ |e1| + |Xl| + |k·c_lo|: |ρ − r| ≤ e_x + |k|(δC + 6u|c_lo|) + 6u|Xl| + 0.05u
        er = ak * (dc + 6 * U * abs(c_lo))
        er += eX
        er += 6 * U * np.abs(Xl)
        er += 0.05 * U
        q = r * (1 / 120 + r * (1 / 720))
        q += 1 / 24
        q *= r
        q += 1 / 6
        q *= r
        q += 0.5
        q *= r * r
        q += r
        ki = k.astype(np.int64)
        j = ki & 63
        th = Th[j]
        y = th * q
        y += Tl[j]
        v = y.copy() if residual else None
        y += th
        m = ki >> 6                                         # k = 64m + j, m = k >> 6 (floor)
        scale = _pow2(m)
        W = np.ldexp(y, m) if scale is None else y * scale
        # G ≥ (expm1(e_ρ) + EXP_OWN)/(1 − EXP_OWN)² with e_ρ < 2^-20 (expm1(e) ≤ e(1 + 2^-20)), and
        # the rounding of computing R = W̃·G + 2·EXP_TINY
        own = EXP_PAIR if residual else EXP_OWN
        G = er * ((1 + 2.0 ** -19) / (1 - own) ** 2 * (1 + 2.0 ** -20))
        G += own / (1 - own) ** 2 * (1 + 2.0 ** -20)
        R = W * G
        R += 2 * EXP_TINY + TINY
        bad = ~((np.abs(r) <= 0.0055) & (er < 2.0 ** -20) & (Xh <= 2.0 ** -30)) & ~far
        pin(bad, (R, np.inf))
        pin(far, (W, 0.0), (R, EXP_TINY))
        if allowed is not None:
            pin(~allowed, (W, 0.0), (R, 0.0))
        if not (np.isfinite(W).all() and np.isfinite(R).all()):
            R = np.where(np.isfinite(R) & np.isfinite(W), R, np.inf)
        if not residual:
            return W, R
        v -= y - th                                         # Fast2Sum's tail: y + v = th + v₀ exactly
        lo = np.ldexp(v, m) if scale is None else v * scale
        R += TINY                                           # an underflow of W_lo (at most 2^-1074)
        pin(far | bad, (lo, 0.0))
        if allowed is not None:
            pin(~allowed, (lo, 0.0))
        Rhi = np.abs(lo)
        Rhi += R
        Rhi *= 1 + 2.0 ** -40                               # the addition's rounding
    return W, Rhi, lo, R


def _pow2(m):
    """2^m as floats when every m is a normal exponent (−1022 ≤ m ≤ 1023), else None: then
    y·2^m is one correctly rounded product, the same value as ``ldexp(y, m)`` (numpy's ldexp
    costs about ten passes)."""
    np = _np()
    if m.size == 0 or int(m.min()) < -1022 or int(m.max()) > 1023:
        return None
    bits = m + 1023
    bits <<= 52
    return bits.view(np.float64)


def pin(where, *pairs) -> None:
    """Set each (array, value) of ``pairs`` to its value where ``where`` holds (in place, once
    tested): the blocked, far and failed entries of the enclosures."""
    np = _np()
    if where is not None and where.any():
        for array, value in pairs:
            np.putmask(array, where, value)


def row_sum(A):
    """(S̃, bound): Σ_j A_ij per row by pairwise TwoSum (the rounding errors summed alongside) and
    one final rounding: |Σ_j A_ij − S̃_i| ≤ bound_i = u|S̃_i| + γ_d·u·d·Σ_j|A_ij| (d = ⌈log₂ n⌉)."""
    hi, lo, rest, _ = pairwise(A)
    total = hi + lo
    return total, (U * _np().abs(total) + rest + TINY) * (1 + 2.0 ** -20)


def pairwise(A):
    """(hi, lo, bound, absum) per row: |Σ_j A_ij − hi − lo| ≤ bound (before :func:`row_sum`'s
    last rounding and its inflation) and absum ≥ Σ_j |A_ij|: hi is the pairwise TwoSum tree's
    float sum, lo the sum of its exact errors (each level's at most u·Σ|A|; their float sum
    within γ_{2d+2} of that)."""
    np = _np()
    E = np.zeros_like(A)
    depth = 0
    n0 = A.shape[1]
    absum = np.abs(A).sum(axis=1) * (1 + gamma(n0 + 1))
    while A.shape[1] > 1:
        n = A.shape[1]
        h = n // 2
        s, e = dd.two_sum(A[:, :h], A[:, h:2 * h])
        e += E[:, :h]
        e += E[:, h:2 * h]
        if n % 2:
            s = np.concatenate([s, A[:, 2 * h:]], axis=1)
            e = np.concatenate([e, E[:, 2 * h:]], axis=1)
        A, E = s, e
        depth += 1
    # Σ|e| ≤ u·d·Σ|A| (each level's sums add to at most Σ|A|); E's own two additions per node: γ_2d
    return A[:, 0], E[:, 0], gamma(2 * depth + 2) * U * max(depth, 1) * absum, absum
