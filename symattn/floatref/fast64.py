"""Attention in double-double with a rigorous bound on every entry: the float64 targets' fast path.

A float64 computation cannot decide float64 roundings (its own error is an
ulp or more), so :mod:`symattn.floatref.fast` leaves float64 targets to the
arb path.  Here every step carries about 106 bits: exact slice products
(Ozaki's scheme) for the scores and for W·[V | 1], the double-double
operations of :mod:`symattn.floatref.dd`, and an exp built from a table of
exp(k/1024) (from arb) times a short series.  Each weight and output gets a
midpoint hi + lo and a radius; the relative radius is about 2^-80 on mild
problems, so nearly every entry's enclosure lies inside one float64's
rounding interval.  docs/floatref.md ("float64 targets") derives each bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from symattn.floatref import dd, fused64, masks
from symattn.floatref.exp64 import (EXP_SERIES, TABLE_REL, X_TABLE, X_ZERO, _ball_dd, _dd_of,
                                    _exp)
from symattn.floatref.exp64 import exp_table as exp_table

U = dd.U
#: absolute term of every bound: covers each underflow (≤ 2^-1075) of fewer than 2^30 operations
TINY = 2.0 ** -1040
_INFLATE = 1 + 2.0 ** -20
#: keys per block of the remainder products (error γ_{parts·B + blocks + 1})
SUM_BLOCK = 256
#: rows per block: (rows × S) double-double temporaries near 2 MB each
BLOCK_ENTRIES = 1 << 18


def _up(x):
    """An upper bound of a non-negative float64 quantity (covers computing it, fast.py)."""
    return x * _INFLATE + TINY


def gamma(n: int) -> float:
    return _up(n * U / (1 - n * U))


@dataclass
class Enclosures64:
    """Double-double midpoints and float64 radii of the weights and output of one head."""

    weights: tuple[Any, Any]   # (hi, lo), (L, S)
    weights_rad: Any
    output: tuple[Any, Any]    # (hi, lo), (L, Ev)
    output_rad: Any
    weights_zero: Any   # (L, S) weights proved to round to +0 (blocked, or e^x far below 2^-1074)
    empty: Any          # (L,) every key blocked


def scale_dd(exact) -> tuple[float, float, float]:
    """hi, lo and an error bound of the exact scale (a Fraction or SymPy's 1/√E)."""
    from symattn.floatref.rows import _scale_ball
    from symattn.numbers.precision import precision

    if isinstance(exact, Fraction):
        return _dd_of(exact)
    with precision(200):
        return _ball_dd(_scale_ball(exact))


def _exponent(rows_max, low: int):
    """e with |x| < 2^e for each row (or column), at least ``low``."""
    import numpy as np

    return np.maximum(np.frexp(rows_max)[1], low)


def _beta(n: int) -> int:
    """Bits per slice: n products of two β-bit integers (plus as many again) sum below 2^53."""
    return (53 - max(1, n - 1).bit_length()) // 2


def _slices(A, e, beta: int, axis: int):
    """A = A1 + A2 + A3 exactly: A1 on the grid 2^(e−β), A2 on 2^(e−2β), |A3| ≤ 2^(e−2β−1)
    (e per row for axis=1, per column for axis=0)."""
    import numpy as np

    e = np.expand_dims(e, axis)
    a1 = np.ldexp(np.rint(np.ldexp(A, beta - e)), e - beta)
    r = A - a1
    a2 = np.ldexp(np.rint(np.ldexp(r, 2 * beta - e)), e - 2 * beta)
    return a1, a2, r - a2


class _Product:
    """X·Y to about 2^-4β·Σ|x||y| with exact slice products, in double-double.

    X (rows × n) is split per row, Y (n × cols) per column; [X1; X2]·[Y1 | Y2] is exact (every
    partial sum an integer multiple of one unit below 2^53), which gives X1·Y1, X1·Y2 + X2·Y1
    and X2·Y2 (:func:`split_products`), and the remainder [X12 | X3 + Xl]·[Y3; Y] is a float
    product in key blocks, X12·Y3 left out where Y3 is 0 (float32 and narrower inputs)."""

    def __init__(self, Y, beta: int, low: int = -300) -> None:
        import numpy as np

        self.beta, self.low = beta, low
        self.ey = _exponent(np.abs(Y).max(axis=0), low)
        self.Y1, self.Y2, self.Y3 = _slices(Y, self.ey, beta, 0)
        self.y3_rows = np.flatnonzero(self.Y3.any(axis=1))   # inner indices where Y3 is not 0
        self.Y = Y
        # one product of [X1; X2] (2·rows) by [Y1 | Y2] (2·cols): wider than four, so BLAS runs
        # it about 30 % faster at 64 rows and S = 4096 (docs/benchmarks.md, Round 8)
        self.Y12 = np.concatenate([self.Y1, self.Y2], axis=1)
        self.Yabs_sum = np.abs(Y).sum(axis=0)             # Σ_j |y_jc| (rounded: inflated below)
        self.Yabs_max = np.abs(Y).max(axis=0)
        self.n = Y.shape[0]
        # the remainder's right side cut in the key blocks of _block_sum and stacked per block:
        # [Y3; Y], or Y alone when Y3 is 0 (X12·Y3 is then exactly 0)
        self.full_rest = self.y3_rows.size > 0
        self.rest = [np.concatenate([self.Y3[a:a + SUM_BLOCK], Y[a:a + SUM_BLOCK]], axis=0)
                     if self.full_rest else Y[a:a + SUM_BLOCK]
                     for a in range(0, max(self.n, 1), SUM_BLOCK)]

    def ok(self, ex) -> bool:
        """The slice products are exact: no unit below 2^-1022, nothing near overflow."""
        import numpy as np

        if ex.size == 0:
            return True
        lo = int(ex.min()) + int(self.ey.min()) - 4 * self.beta
        hi = int(ex.max()) + int(self.ey.max()) + self.n.bit_length() + 2
        return lo >= -1022 and hi <= 900 and bool(np.isfinite(self.Yabs_sum).all())

    def __call__(self, Xh, Xl, ex):
        """(hi, lo) of X·Y, X1 + X2, X3 and the n of the remainder's γ_n."""
        P, R, X12, X3, m = self.parts(Xh, Xl, ex)
        h, lo = assemble(*split_products(P, Xh.shape[0], self.Y.shape[1]), R)
        return h, lo, X12, X3, m

    def parts(self, Xh, Xl, ex):
        """The exact slice products P = [X1; X2]·[Y1 | Y2] and the remainder product R, with
        X1 + X2, X3 and R's n."""
        import numpy as np

        X1, X2, X3 = _slices(Xh, ex, self.beta, 1)
        P = np.concatenate([X1, X2], axis=0) @ self.Y12
        X12 = X1 + X2                                       # exact: 2β + 1 bits on one grid
        if Xl is None and self.n <= SUM_BLOCK:
            R = self._sparse_rest(X12, X3)
            if R is not None:
                return P, R, X12, X3, 2 * self.n
        # with a low part, X3 + Xl rounded once (≤ u|X3 + Xl|): γ_m becomes γ_(m+1)
        low = X3 if Xl is None else X3 + Xl
        R, m = _blocked([X12, low] if self.full_rest else [low], self.rest, self.n)
        return P, R, X12, X3, m + (Xl is not None)

    def _sparse_rest(self, X12, X3):
        """X12·Y3 + X3·Y over the inner indices where Y3 (or X3) has a nonzero only: a zero
        column adds exact zeros, and a sum of fewer terms keeps the γ_(2n) bound.  Inputs of
        fewer bits than float64 (float32 and below) leave X3 and Y3 almost empty; None when
        more than half the indices are needed (the full product is as fast)."""
        import numpy as np

        rows_y3, cols_x3 = self.y3_rows, np.flatnonzero(X3.any(axis=0))
        if rows_y3.size + cols_x3.size > self.n:
            return None
        if rows_y3.size + cols_x3.size == 0:
            return np.zeros((X12.shape[0], self.Y.shape[1]))
        return (np.concatenate([X12[:, rows_y3], X3[:, cols_x3]], axis=1)
                @ np.concatenate([self.Y3[rows_y3], self.Y[cols_x3]], axis=0))

    def of_weights(self, Wh, Wl, ex):
        """(hi, lo) of W·Y, Σ|W3| per row (rounded) and R's n: :meth:`__call__` with the slices of
        W cut in fused loops (fused64.w_slices), the same products on the same matrices."""
        rows, S = Wh.shape
        X, X3abs, Rin = fused64.w_slices(Wh, Wl, ex, self.beta, SUM_BLOCK, self.full_rest)
        R, m = _block_sum(Rin, self.rest, S, 2 if self.full_rest else 1)
        m += 1                                              # X3 + Wl rounded once, as parts()
        h, lo = assemble(*split_products(X @ self.Y12, rows, self.Y.shape[1]), R)
        return h, lo, X3abs, m


def split_products(P, rows: int, cols: int) -> tuple[Any, Any, Any]:
    """A = X1·Y1, B = X1·Y2 + X2·Y1 and C = X2·Y2 from P = [X1; X2]·[Y1 | Y2]: each block is
    exact, and so is B's sum (its exact value is a multiple of the unit below 2^53, _beta)."""
    return P[:rows, :cols], P[:rows, cols:] + P[rows:, :cols], P[rows:, cols:]


def assemble(A, B, C, R):
    """A + B + C + R in double-double: TwoSum, then two DWPlusFP."""
    h, lo = dd.two_sum(A, B)
    h, lo = dd.add_fp(h, lo, C)
    return dd.add_fp(h, lo, R)


def _blocked(X: list, Ys: list, n: int):
    """[X_1 | … | X_parts]·[Y_1; …; Y_parts] (each X_k of n columns; ``Ys`` those rows cut in
    key blocks of SUM_BLOCK and stacked per block), by :func:`_block_sum` on the X_k laid out
    block by block.  Returns the product and the n of its γ_n bound."""
    import numpy as np

    laid = np.concatenate([Xk[:, a:a + SUM_BLOCK] for a in range(0, max(n, 1), SUM_BLOCK) for Xk in X],
                          axis=1)
    return _block_sum(laid, Ys, n, len(X))


def _block_sum(laid, Ys: list, n: int, parts: int):
    """Σ over key blocks of laid[:, block]·Ys[block], ``laid`` holding per block of SUM_BLOCK keys
    the ``parts`` pieces side by side: each block product has ≤ parts·B terms, then one
    addition per block.  Returns the product and the n of its γ_n bound."""
    if n <= SUM_BLOCK:
        return laid @ Ys[0], parts * n
    R = None
    for nb, a in enumerate(range(0, n, SUM_BLOCK)):
        P = laid[:, parts * a:parts * min(n, a + SUM_BLOCK)] @ Ys[nb]
        if R is None:
            R = P
        else:
            R += P
    return R, parts * SUM_BLOCK + len(Ys) + 1


def enclose64(Q, K, V, allowed, additive, scale: tuple[float, float, float]) -> Enclosures64:
    """Enclosures of the weights and output of one head (float64 arrays; see fast.enclose)."""
    import numpy as np

    L, S, Ev = Q.shape[0], K.shape[0], V.shape[1]
    Wh, Wl, Wr = np.empty((L, S)), np.empty((L, S)), np.empty((L, S))
    Oh, Ol, Or = np.empty((L, Ev)), np.empty((L, Ev)), np.empty((L, Ev))
    zeros = np.empty((L, S), dtype=bool)
    empty = np.zeros(L, dtype=bool) if allowed is None else ~allowed.any(axis=1)
    scores, values = products(K, V, Q.shape[1])
    step = max(1, BLOCK_ENTRIES // max(S, Ev, 1))
    for a in range(0, L, step):
        b = min(L, a + step)
        rows = _block(Q[a:b], scores, values, None if allowed is None else allowed[a:b],
                      None if additive is None else additive[a:b], scale, Ev)
        (Wh[a:b], Wl[a:b], Wr[a:b]), (Oh[a:b], Ol[a:b], Or[a:b]), zeros[a:b] = rows
    return Enclosures64((Wh, Wl), Wr, (Oh, Ol), Or, zeros, empty)


def products(K, V, E: int) -> tuple[_Product, _Product]:
    """What every block of rows of one head reuses: K sliced for the scores, [V | 1] for the sums."""
    import numpy as np

    VV = np.concatenate([V, np.ones((K.shape[0], 1))], axis=1)
    return _Product(K.T, _beta(E)), _Product(VV, _beta(K.shape[0]))


def _block(Q, scores: _Product, values: _Product, allowed, additive, scale, Ev: int,
           into: tuple | None = None):
    """One block of rows: weights and output as hi + lo with radii, and the known zeros.
    With ``into`` = (values, mask) views (and fused64 available) the weights are decided into
    them instead, known zeros included, and the weights come back as None.  The steps are
    numbered as in docs/floatref.md ("float64 targets"); without an additive mask steps 1–4,
    W's slices and step 7's weights run in fused64's loops when numba is installed (the same
    operations)."""
    import numpy as np

    rows, S = Q.shape[0], scores.Y.shape[1]
    fused = fused64.AVAILABLE and additive is None
    bad = np.zeros(rows, dtype=bool)     # rows whose bounds do not hold: every radius is inf
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        found = _scores(Q, scores)
        if found is None:
            return _undecided(rows, S, Ev, into if fused else None)
        D, cs, eD = found
        if fused:
            P, E0 = _product_bounds(cs, eD, scale, bad)
            Wh, Wl, tiny, zero, c, ntiny, nzero, wmax = fused64.weights(
                D, scale[:2], allowed, exp_table(), (X_TABLE, X_ZERO))
            eX = _up(E0 + dd.OP_REL * (P + np.abs(c)))
            bad |= ~(eX < 2.0 ** -40)
        else:
            Dh, Dl = assemble(*split_products(D[0], rows, S), D[1])
            Xh, Xl, eX = _shifted(Dh, Dl, cs, eD, scale, allowed, additive, bad)
            # 4. w = e^x = exp(k/1024)·exp(r): table times a series; keys below X_TABLE: w̃ = 0
            Wh, Wl, tiny, zero = _exp(Xh, Xl)
            if allowed is not None:
                Wh[~allowed] = 0.0
                Wl[~allowed] = 0.0
                tiny &= allowed
                zero &= allowed
            ntiny, nzero, wmax = tiny.sum(axis=1), zero.sum(axis=1), Wh.max(axis=1)
        # |w − w̃| ≤ w̃·εw + a: εw from the x error, the series, the table and one product
        ew = _up(np.expm1(eX) * 1.001 + EXP_SERIES * 1.01 + TABLE_REL + dd.OP_REL)
        aw = math.exp(X_TABLE + 1)                          # a tiny key's w < e^(−649)
        # Σ over a row of the absolute parts; a zero key (x̃ < X_ZERO, or set aside) has w < e^(−799)
        Aw = _up(ntiny * aw + nzero * math.exp(X_ZERO + 1))
        sums = _sums(Wh, Wl, wmax, ew, Aw, values, Ev, fused)
        if sums is None:
            return _undecided(rows, S, Ev, into if fused else None)
        Nh, Nl, eN = sums
        Yh, Yl, rel = _reciprocal_rows(Nh, Nl, eN, Ev, bad)
        output = _output(Nh, Nl, eN, Ev, Yh, Yl, rel, bad)
        factor = (ew + rel) * 1.0001                    # radius of p̃: _up(|p̃|·factor)
        if fused and into is not None:
            fused64.normalise(Wh, Wl, Yh, Yl, np.where(bad, np.inf, factor), tiny, zero, bad,
                              allowed, _INFLATE, TINY, into)
            weights = zeros = None
        else:
            weights = _weights_enclosed(Wh, Wl, Yh, Yl, factor, tiny)
            weights[2][bad] = np.inf
            # known zeros: blocked keys, and keys with x̃ < X_ZERO in a row whose bounds hold
            # (w < e^(X_ZERO + 1)/Z < 2^-1150 with Z ≥ 1/4: the float64 rounding is +0)
            zeros = zero & ~bad[:, None]
            if allowed is not None:
                zeros |= ~allowed
        output[2][bad] = np.inf
    return weights, output, zeros


def _scores(Q, scores: _Product):
    """1. The slice products of the scores d = q·k ((P, R): d̃ = A + B + C + R in double-double,
    A, B, C from P by :func:`split_products`), a bound on |d| and e_d, the remainder product's error (None when the
    exponents are out of the exact products' range)."""
    import numpy as np

    eq = _exponent(np.abs(Q).max(axis=1), scores.low)
    if not scores.ok(eq):
        return None
    P, R, Q12, Q3, m = scores.parts(Q, None, eq)
    norm = (1 + gamma(scores.Y.shape[1] + Q.shape[1] + 2)) ** 2
    n12 = np.sqrt(np.einsum("ij,ij->i", Q12, Q12))
    n3 = np.sqrt(np.einsum("ij,ij->i", Q3, Q3))
    nq = np.sqrt(np.einsum("ij,ij->i", Q, Q))
    k3 = float(np.sqrt(np.einsum("ij,ij->j", scores.Y3, scores.Y3)).max())
    kn = float(np.sqrt(np.einsum("ij,ij->j", scores.Y, scores.Y)).max())
    cs = _up(nq * kn * norm)                            # ≥ ‖q‖·max‖k‖ ≥ |d|
    eR = _up(gamma(m) * (n12 * k3 + n3 * kn) * norm)
    # the remainder is ≤ ‖q12‖‖k3‖ + ‖q3‖‖k‖ + e_R; every partial sum of the slice
    # products is ≤ 16·‖q‖‖k‖ (|q1|, |q2| ≤ 2|q| entrywise)
    parts = _up(16 * cs + (n12 * k3 + n3 * kn) * norm + eR)
    eD = _up(eR + 2 * dd.OP_REL * parts)
    return (P, R), cs, eD


def _product_bounds(cs, eD, scale, bad):
    """2. P ≥ |s̃·d̃| and E0, the error of t = s·d (DWTimesDW, 8u²; |s − s̃| ≤ s_err); rows past
    2^900 are marked in ``bad``."""
    sh, sl, s_err = scale
    as_ = _up(abs(sh) + abs(sl))
    P = _up(as_ * (cs + eD))
    E0 = _up(as_ * eD + s_err * cs + 2 * dd.OP_REL * P)
    bad |= ~(P < 2.0 ** 900)
    return P, E0


def _shifted(Dh, Dl, cs, eD, scale, allowed, additive, bad):
    """2.–3. x = s·d + m − c in double-double and its bound e_x, c the row's largest allowed
    hi (an exact float); rows whose bounds fail are marked in ``bad``."""
    import numpy as np

    sh, sl, _ = scale
    # 2. t = s·d + m: DWTimesDW (8u²) then DWPlusFP (8u²); |s − s̃| ≤ s_err
    Th, Tl = dd.mul(Dh, Dl, np.float64(sh), np.float64(sl))   # as full arrays of sh, sl: the same
    P, E0 = _product_bounds(cs, eD, scale, bad)
    if additive is not None:
        # m − c_m = mh + ml exactly (masks.shift), added by one or two DWPlusFP
        mh, ml, ok = masks.shift(additive, allowed)
        bad |= ~ok
        Th, Tl = dd.add_fp(Th, Tl, mh)
        if ml is not None:
            Th, Tl = dd.add_fp(Th, Tl, ml)
    # 3. x = t − c, c the row's largest hi over allowed keys (an exact float)
    if allowed is not None:
        np.putmask(Th, ~allowed, -np.inf)
    c = Th.max(axis=1)
    c = np.where(np.isfinite(c), c, 0.0)
    if additive is None:
        Tmax, eT = P, E0                                # E0 holds the product's ε₂·P
    else:
        # keys with t_hi below c − θ have t − c < −800 (docs/floatref.md, "Huge finite
        # masks"): set aside like blocked keys, proved zeros; the bounds use the rest
        far = Th < masks.far_below(c, E0, P)[:, None]
        keep = ~far if allowed is None else allowed & ~far
        np.putmask(Th, far, -np.inf)
        tmin = np.min(Th, axis=1, where=keep, initial=0.0)
        Tmax = _up(np.maximum(np.abs(c), np.abs(tmin)) * (1 + 2 * U))   # ≥ |t̃| of kept keys
        # the additions' errors ≤ 2.2·8u²·|t̃| per entry (two DWPlusFP); the product's in E0
        eT = _up(E0 + 3 * dd.OP_REL * Tmax)
    bad |= ~(Tmax < 2.0 ** 900)
    Xh, Xl = dd.add_fp(Th, Tl, -c[:, None])
    eX = _up(eT + dd.OP_REL * (Tmax + np.abs(c)))
    bad |= ~(eX < 2.0 ** -40)
    return Xh, Xl, eX


def _sums(Wh, Wl, wmax, ew, Aw, values: _Product, Ev: int, fused: bool):
    """5. [N | Z] = W·[V | 1] in double-double (exact slice products + a remainder) and the
    bound e_N per row and column (None when the exponents are out of range)."""
    import numpy as np

    S = Wh.shape[1]
    ew_row = _exponent(wmax, values.low)
    if not values.ok(ew_row):
        return None
    if fused:
        Nh, Nl, w3abs, m2 = values.of_weights(Wh, Wl, ew_row)
    else:
        Nh, Nl, _, W3, m2 = values(Wh, Wl, ew_row)
        w3abs = np.abs(W3).sum(axis=1)
    Zt = _up(np.abs(Nh[:, Ev]) + np.abs(Nl[:, Ev]))     # ≥ Σ w̃ (up to the bounds below)
    # remainder error: γ_m·(Σ W12|V3| + Σ |W3||V| + Σ |Wl||V|), per row and column
    g3 = np.ldexp(1.0, values.ey - 2 * values.beta - 1)  # |V3| bound per column
    w3 = np.ldexp(1.0, ew_row - 2 * values.beta - 1)     # |W3| bound per row
    w3sum = _up(w3abs * (1 + gamma(S)))
    vabs = _up(values.Yabs_sum * (1 + gamma(S)))
    vmax = values.Yabs_max
    wsum = _up(Zt * 1.0001 + Aw)                         # ≥ Σ w̃ (docs/floatref.md)
    t12 = 2 * wsum[:, None] * g3[None, :]               # W12 ≤ 2w̃ entrywise
    t3 = np.minimum(w3[:, None] * vabs[None, :], w3sum[:, None] * vmax[None, :])
    tl = (U * wsum)[:, None] * vmax[None, :]
    eN = _up(gamma(m2) * (t12 + t3 + tl) + 48 * dd.OP_REL * (wsum[:, None] * vmax[None, :]))
    # and the weights' own errors: Σ|w − w̃||v| ≤ εw·Σw̃|v| + a·max|v|
    eN = _up(eN + (ew * wsum)[:, None] * vmax[None, :] + Aw[:, None] * vmax[None, :])
    return Nh, Nl, eN


def _reciprocal_rows(Nh, Nl, eN, Ev: int, bad):
    """6. 1/Z by one Newton step in double-double, and the relative bound of 1/Z̃ with Z's own
    error (rows past the bounds marked in ``bad``)."""
    import numpy as np

    Zh, Zl, eZ = Nh[:, Ev], Nl[:, Ev], eN[:, Ev]
    Yh, Yl, eY = _reciprocal(Zh, Zl)
    zrel = _up(eZ / np.nextafter(Zh - eZ - np.abs(Zl), -np.inf))
    bad |= ~(zrel < 2.0 ** -40) | ~(Zh > 0.25)
    return Yh, Yl, _up((eY + zrel + dd.OP_REL) * 1.0001)


def _output(Nh, Nl, eN, Ev: int, Yh, Yl, rel, bad):
    """7. o = N·(1/Z) as (hi, lo, radius)."""
    import numpy as np

    Nh, Nl, eN = Nh[:, :Ev], Nl[:, :Ev], eN[:, :Ev]
    Oh, Ol = dd.mul(Nh, Nl, Yh[:, None], Yl[:, None])     # broadcast: 1/Z split once per row
    Or = _up((np.abs(Oh) * rel[:, None] + eN * (np.abs(Yh) * 1.0001)[:, None]) * 1.0001)
    bad |= ~np.isfinite(Or).all(axis=1)
    return Oh, Ol, Or


def _weights_enclosed(Wh, Wl, Yh, Yl, factor, tiny):
    """7. p = w·(1/Z) as (hi, lo, radius), the radius _up(|p̃|·factor), inf for a tiny weight."""
    import numpy as np

    Ph, Pl = dd.mul(Wh, Wl, Yh[:, None], Yl[:, None])
    Pr = _up(np.abs(Ph) * factor[:, None])
    if tiny.any():
        Pr = np.where(tiny, np.inf, Pr)                  # a tiny weight: only bounded, not known
    return Ph, Pl, Pr


def _undecided(rows: int, S: int, Ev: int, into: tuple | None = None):
    import numpy as np

    def nothing(n):
        return np.zeros((rows, n)), np.zeros((rows, n)), np.full((rows, n), np.inf)
    if into is None:
        return nothing(S), nothing(Ev), np.zeros((rows, S), dtype=bool)
    into[0][...] = np.nan
    into[1][...] = False
    return None, nothing(Ev), None


def _reciprocal(Zh, Zl):
    """(hi, lo) of 1/(Zh + Zl) and its relative error bound, for Zh ≥ 1/4 (one Newton step:
    y = y0 + y0·e with e = 1 − Z·y0, so 1/Z = y0/(1 − e) = y0(1 + e + e²/(1 − e)))."""
    import numpy as np

    y0 = 1.0 / Zh
    ph, pl = dd.two_prod(Zh, y0)                            # Zh·y0 exactly
    e = ((1.0 - ph) - pl) - Zl * y0                         # 1 − ph exact (Sterbenz)
    ae = np.abs(e)
    Yh, Yl = dd.fast_two_sum(y0, y0 * e)
    # e's error: u(|1 − ph − pl| ...) ≤ 2u(|e| + |Zl·y0|) + u|Zl y0|; y0·e and the sum: 2u|y0 e|
    ee = _up(3 * U * (ae + 2 * np.abs(Zl * y0)))
    rel = _up((ae + ee) ** 2 / (1 - ae - ee) + ee + 3 * U * (ae + ee))
    return Yh, Yl, rel


def decide64(hi, lo, rad):
    """Where [hi + lo − rad, hi + lo + rad] rounds to the single float64 hi: hi, and the mask.

    hi = RN(hi + lo) (a double-double); every point of the interval rounds to hi when it
    lies strictly between hi's midpoints with its neighbours (gaps to nextafter, exact).
    fl(lo + rad) < gap/2 implies lo + rad < gap/2 (rounding is monotonic; gap/2 is a float
    or, below the subnormals, rounds to 0, which only makes the test stricter)."""
    import numpy as np

    with np.errstate(invalid="ignore", over="ignore"):
        up = (np.nextafter(hi, np.inf) - hi) * 0.5
        down = (hi - np.nextafter(hi, -np.inf)) * 0.5
        ok = (lo + rad < up) & (lo - rad > -down) & np.isfinite(rad) & np.isfinite(hi)
    return np.where(ok, hi + 0.0, np.nan), ok
