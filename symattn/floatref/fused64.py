"""fast64's elementwise steps as fused loops, compiled by numba when it is installed.

fast64.py writes each step as whole-array numpy operations: about 150 passes
over (rows × S) arrays that do not fit in cache, which cost 80 % of the float64
target's CPU.  Here the same IEEE operations, in the same order, run entry by
entry in a few loops (one pass to the row's maximum, one to the weights, one to
the slices of W, one to the normalised weights and their rounding), so the
enclosures equal numpy's bit for bit (tests/test_floatref_fused.py).  Nothing
is contracted into an FMA: numba leaves LLVM's fast-math flags off unless asked,
and Dekker's and Knuth's algorithms need every product and sum rounded on its own.

numba is optional (the ``fast`` extra); without it :data:`AVAILABLE` is False
and fast64.py runs its numpy code.  Set SYMATTN_FUSED=0 to use numpy anyway.
"""

from __future__ import annotations

import os
from typing import Any

numba: Any
try:  # pragma: no cover - which branch runs depends on the installation
    import numba
    import numpy as np
except ImportError:  # pragma: no cover
    numba = None

#: the fused loops are used (numba importable and not switched off)
AVAILABLE = numba is not None and os.environ.get("SYMATTN_FUSED", "1") != "0"

_SPLITTER = 134217729.0   # 2^27 + 1, as dd.py


def _jit(fn):
    if numba is None:  # pragma: no cover
        return fn
    return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)


def _inline(fn):
    if numba is None:  # pragma: no cover
        return fn
    return numba.njit(inline="always", error_model="numpy")(fn)


@_inline
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@_inline
def _fast_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


@_inline
def _split(a):
    c = _SPLITTER * a
    hi = c - (c - a)
    return hi, a - hi


@_inline
def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ah * bh - p
    e = e + ah * bl
    e = e + al * bh
    return p, e + al * bl


@_inline
def _square(a):
    p = a * a
    ah, al = _split(a)
    e = ah * ah - p
    e = e + 2.0 * ah * al
    return p, e + al * al


@_inline
def _add_fp(xh, xl, y):
    sh, sl = _two_sum(xh, y)
    return _fast_two_sum(sh, xl + sl)


@_inline
def _mul(xh, xl, yh, yl):
    ch, cl1 = _two_prod(xh, yh)
    cl2 = xh * yl + xl * yh
    return _fast_two_sum(ch, cl1 + cl2)


@_jit
def _weights(A, B, C, R, sh, sl, allowed, masked, table_hi, table_lo, x_table, x_zero,
             Wh, Wl, tiny, zero, cmax, counts, wmax):
    """Steps 1 (the scores' double-double from the slice products), 2 (t = s·d), 3 (x = t − c)
    and 4 (w = e^x) of fast64._block without an additive mask; per row the c, the numbers of
    tiny and zero keys, and max w̃."""
    rows, S = A.shape
    for i in range(rows):
        c = -1.0 / 0.0
        for j in range(S):
            h, lo = _two_sum(A[i, j], B[i, j])
            h, lo = _add_fp(h, lo, C[i, j])
            h, lo = _add_fp(h, lo, R[i, j])
            th, tl = _mul(h, lo, sh, sl)
            if masked and not allowed[i, j]:
                th = -1.0 / 0.0
            Wh[i, j] = th
            Wl[i, j] = tl
            if th > c:
                c = th
        if not (c - c == 0.0):          # ±inf (a row with every key blocked) or nan
            c = 0.0
        cmax[i] = c
        ntiny = 0
        nzero = 0
        top = 0.0
        for j in range(S):
            if masked and not allowed[i, j]:
                Wh[i, j] = 0.0
                Wl[i, j] = 0.0
                tiny[i, j] = False
                zero[i, j] = False
                continue
            xh, xl = _add_fp(Wh[i, j], Wl[i, j], -c)
            is_tiny = not (xh >= x_table)
            is_zero = not (xh >= x_zero)
            x = 0.0 if (is_tiny or not (xh <= 2.0 ** -40)) else xh
            k = np.rint(x * 1024.0)
            r0 = x - k / 1024.0
            rh, rl = _two_sum(r0, 0.0 if is_tiny else xl)
            qh, ql = _square(rh)
            p = rh * rh * rh * (1 / 6 + rh * (1 / 24 + rh * (1 / 120 + rh * (1 / 720))))
            small = (rl + 0.5 * ql) + (rh * rl + p)
            s1h, s1l = _two_sum(rh, 0.5 * qh)
            eh, el = _fast_two_sum(1.0, s1h)
            eh, el = _fast_two_sum(eh, el + (s1l + small))
            m = int(-k)
            wh, wl = _mul(table_hi[m], table_lo[m], eh, el)
            if is_tiny:
                wh = 0.0
                wl = 0.0
            Wh[i, j] = wh
            Wl[i, j] = wl
            tiny[i, j] = is_tiny and not is_zero
            zero[i, j] = is_zero
            ntiny += is_tiny and not is_zero
            nzero += is_zero
            if wh > top:
                top = wh
        counts[i, 0] = ntiny
        counts[i, 1] = nzero
        wmax[i] = top


@_jit
def _w_slices(Wh, Wl, up1, down1, up2, down2, block, X12, X3abs, Rin):
    """W = X1 + X2 + X3 (fast64._slices per row, its ldexp as products by the exact powers of
    two up1 = 2^(β−e), down1 = 2^(e−β), up2 = 2^(2β−e), down2 = 2^(e−2β): the same roundings)
    written as the products use them: X12 = [X1 | X2] (rows × 2S) and, per key block of
    ``block``, [X1 + X2 | X3 | Wl] in Rin (rows × 3S); per row Σ|X3|."""
    rows, S = Wh.shape
    for i in range(rows):
        u1, d1, u2, d2 = up1[i], down1[i], up2[i], down2[i]
        total = 0.0
        for a in range(0, S, block):
            b = min(S, a + block)
            n = b - a
            for j in range(a, b):
                w = Wh[i, j]
                x1 = np.rint(w * u1) * d1
                r = w - x1
                x2 = np.rint(r * u2) * d2
                x3 = r - x2
                X12[i, j] = x1
                X12[i, S + j] = x2
                Rin[i, 3 * a + (j - a)] = x1 + x2
                Rin[i, 3 * a + n + (j - a)] = x3
                Rin[i, 3 * a + 2 * n + (j - a)] = Wl[i, j]
                total += abs(x3)
        X3abs[i] = total


@_inline
def _decided(hi, lo, rad):
    up = (np.nextafter(hi, np.inf) - hi) * 0.5
    down = (hi - np.nextafter(hi, -np.inf)) * 0.5
    finite = (rad - rad == 0.0) and (hi - hi == 0.0)
    return (lo + rad < up) and (lo - rad > -down) and finite


@_jit
def _normalise(Wh, Wl, Yh, Yl, factor, tiny, inflate, tiny_abs, P, ok):
    """Step 7 for the weights and their rounding (fast64._normalised, then decide64): p = w·(1/Z)
    in double-double, radius |p̃|·factor (per row), inf where the weight is tiny."""
    rows, S = Wh.shape
    inf = 1.0 / 0.0
    for i in range(rows):
        yh, yl, f = Yh[i], Yl[i], factor[i]
        for j in range(S):
            ph, pl = _mul(Wh[i, j], Wl[i, j], yh, yl)
            rad = abs(ph) * f * inflate + tiny_abs
            if tiny[i, j]:
                rad = inf
            good = _decided(ph, pl, rad)
            P[i, j] = ph + 0.0 if good else np.nan
            ok[i, j] = good


def weights(parts: tuple, scale: tuple[float, float], allowed: Any, table: tuple, limits: tuple):
    """fast64 steps 1–4 for a block of rows without an additive mask: (Wh, Wl, tiny, zero, c,
    ntiny, nzero, max w̃ per row)."""
    import numpy as np

    A, B, C, R = (np.ascontiguousarray(x) for x in parts)
    rows, S = A.shape
    Wh, Wl = np.empty((rows, S)), np.empty((rows, S))
    tiny, zero = np.empty((rows, S), dtype=bool), np.empty((rows, S), dtype=bool)
    c, counts, wmax = np.empty(rows), np.empty((rows, 2), dtype=np.int64), np.empty(rows)
    masked = allowed is not None
    mask = np.ascontiguousarray(allowed) if masked else np.ones((1, 1), dtype=bool)
    _weights(A, B, C, R, float(scale[0]), float(scale[1]), mask, masked, table[0], table[1],
             float(limits[0]), float(limits[1]), Wh, Wl, tiny, zero, c, counts, wmax)
    return Wh, Wl, tiny, zero, c, counts[:, 0], counts[:, 1], wmax


def w_slices(Wh, Wl, e, beta: int, block: int):
    """The slices of W for the values product: ([X1 | X2], Σ|X3| per row, the remainder's
    input, its key blocks as column ranges)."""
    import numpy as np

    rows, S = Wh.shape
    powers = [np.ascontiguousarray(np.ldexp(1.0, k), dtype=np.float64)
              for k in (beta - e, e - beta, 2 * beta - e, e - 2 * beta)]
    X12, X3abs, Rin = np.empty((rows, 2 * S)), np.empty(rows), np.empty((rows, 3 * S))
    _w_slices(np.ascontiguousarray(Wh), np.ascontiguousarray(Wl), *powers, block, X12, X3abs, Rin)
    return X12, X3abs, Rin


def normalise(Wh, Wl, Yh, Yl, factor, tiny, inflate: float, tiny_abs: float):
    """The decided weights (nan where undecided) and the mask, as decide64 of fast64's (Ph, Pl, Pr)."""
    import numpy as np

    P, ok = np.empty(Wh.shape), np.empty(Wh.shape, dtype=bool)
    _normalise(Wh, Wl, np.ascontiguousarray(Yh), np.ascontiguousarray(Yl),
               np.ascontiguousarray(factor), tiny, inflate, tiny_abs, P, ok)
    return P, ok
