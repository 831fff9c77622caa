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


def jit(fn):
    """Compiled on first use, cached on disk when numba finds a writable place (else it compiles
    once per process)."""
    if numba is None:  # pragma: no cover
        return fn
    try:
        return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)
    except RuntimeError:  # pragma: no cover - no cache locator (a read-only installation)
        return numba.njit(nogil=True, error_model="numpy")(fn)


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


@jit
def _weights(P, R, sh, sl, allowed, masked, table_hi, table_lo, x_table, x_zero,
             Wh, Wl, tiny, zero, cmax, counts, wmax):
    """Steps 1 (the scores' double-double from the slice products P = [X1; X2]·[Y1 | Y2] and
    the remainder R: A, B, C as fast64.split_products), 2 (t = s·d), 3 (x = t − c)
    and 4 (w = e^x) of fast64._block without an additive mask; per row the c, the numbers of
    tiny and zero keys, and max w̃.  Selects where numpy has where/putmask (a blocked key runs
    the steps on t̃ = −inf, x̃ = nan, and is then set to w̃ = 0).  Each row in four loops: the
    arithmetic ones have no reduction and no table look-up, so LLVM vectorizes them (a
    look-up or a float maximum in a loop keeps it scalar, 3–4 times slower)."""
    rows, S = R.shape
    ninf = -1.0 / 0.0
    everyone = np.ones(S, dtype=np.bool_)
    index = np.empty(S, dtype=np.int64)
    eh_, el_ = np.empty(S), np.empty(S)
    gone = np.empty(S, dtype=np.bool_)
    for i in range(rows):
        top_, low_, r, wh_, wl_ = P[i], P[rows + i], R[i], Wh[i], Wl[i]
        al = allowed[i] if masked else everyone
        for j in range(S):                                 # 1.–2.
            h, lo = _two_sum(top_[j], top_[S + j] + low_[j])
            h, lo = _add_fp(h, lo, low_[S + j])
            h, lo = _add_fp(h, lo, r[j])
            th, tl = _mul(h, lo, sh, sl)
            wh_[j] = th if al[j] else ninf
            wl_[j] = tl
        c = ninf
        for j in range(S):                                 # 3. the row's largest t̃
            th = wh_[j]
            c = th if th > c else c
        if not (c - c == 0.0):          # ±inf (a row with every key blocked) or nan
            c = 0.0
        cmax[i] = c
        ti_, ze_ = tiny[i], zero[i]
        ntiny = 0
        nzero = 0
        for j in range(S):                                 # 4. the series, and the table's index
            blocked = not al[j]
            xh, xl = _add_fp(wh_[j], wl_[j], -c)
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
            index[j] = np.int64(-k)
            eh_[j] = eh
            el_[j] = el
            gone[j] = is_tiny
            t = is_tiny and not is_zero and not blocked
            z = is_zero and not blocked
            ti_[j] = t
            ze_[j] = z
            ntiny += t
            nzero += z
        top = 0.0
        for j in range(S):                                 # 4. w̃ = table × series
            m = index[j]
            wh, wl = _mul(table_hi[m], table_lo[m], eh_[j], el_[j])
            wh = 0.0 if gone[j] else wh
            wh_[j] = wh
            wl_[j] = 0.0 if gone[j] else wl
            top = wh if wh > top else top
        counts[i, 0] = ntiny
        counts[i, 1] = nzero
        wmax[i] = top


@jit
def _w_slices(Wh, Wl, up1, down1, up2, down2, block, full, X, X3abs, Rin):
    """W = X1 + X2 + X3 (fast64._slices per row, its ldexp as products by the exact powers of
    two up1 = 2^(β−e), down1 = 2^(e−β), up2 = 2^(2β−e), down2 = 2^(e−2β): the same roundings)
    written as the products use them: X = [X1; X2] (2·rows × S) and the remainder's input in
    Rin: per key block of ``block``, [X1 + X2 | X3 + Wl] (rows × 2S) when ``full``, else
    X3 + Wl alone (rows × S); per row Σ|X3| (in a loop of its own, so the slicing loop
    vectorizes)."""
    rows, S = Wh.shape
    x3_ = np.empty(S)
    for i in range(rows):
        u1, d1, u2, d2 = up1[i], down1[i], up2[i], down2[i]
        w_, l_, x1_, x2_, rin = Wh[i], Wl[i], X[i], X[rows + i], Rin[i]
        for a in range(0, S, block):
            b = min(S, a + block)
            n = b - a
            for j in range(a, b):
                w = w_[j]
                x1 = np.rint(w * u1) * d1
                r = w - x1
                x2 = np.rint(r * u2) * d2
                x3 = r - x2
                x1_[j] = x1
                x2_[j] = x2
                if full:
                    rin[a + j] = x1 + x2
                    rin[a + n + j] = x3 + l_[j]
                else:
                    rin[j] = x3 + l_[j]
                x3_[j] = x3
        total = 0.0
        for j in range(S):
            total += abs(x3_[j])
        X3abs[i] = total


@jit
def _normalise(Wh, Wl, Yh, Yl, factor, tiny, zero, bad, allowed, masked, inflate, tiny_abs, P, ok):
    """Step 7 for the weights and their rounding (fast64._normalised, then decide64): p = w·(1/Z)
    in double-double, radius |p̃|·factor (per row), inf where the weight is tiny; the known
    zeros (blocked keys; x̃ < X_ZERO in a row whose bounds hold) +0, decided.

    First a sufficient test, vectorized: both half gaps around a float64 hi are at least
    |hi|·2^-54 (exact for |hi| ≥ 2^-960), and fl(|lo| + r) below it proves |lo| + r below it
    (rounding is monotonic).  The entries it leaves get decide64's own test (nextafter)."""
    rows, S = Wh.shape
    inf = 1.0 / 0.0
    nan = np.nan
    everyone = np.ones(S, dtype=np.bool_)
    hi_, lo_, rad_ = np.empty(S), np.empty(S), np.empty(S)
    for i in range(rows):
        yh, yl, f, row_bad = Yh[i], Yl[i], factor[i], bad[i]
        wh_, wl_, p_, ok_, ti_, ze_ = Wh[i], Wl[i], P[i], ok[i], tiny[i], zero[i]
        al = allowed[i] if masked else everyone
        left = 0
        for j in range(S):              # & and | rather than and/or: no branches, so it vectorizes
            ph, pl = _mul(wh_[j], wl_[j], yh, yl)
            rad = abs(ph) * f * inflate + tiny_abs
            rad = inf if ti_[j] else rad
            a = abs(ph)
            good = (a >= 2.0 ** -960) & (abs(pl) + rad < a * 2.0 ** -54)
            known = (ze_[j] & (not row_bad)) | (not al[j])
            p_[j] = 0.0 if known else (ph + 0.0 if good else nan)
            done = known | good
            ok_[j] = done
            hi_[j] = ph
            lo_[j] = pl
            rad_[j] = rad
            left += not done
        if left == 0:
            continue
        for j in range(S):
            if ok_[j]:
                continue
            ph, lo, rad = hi_[j], lo_[j], rad_[j]
            up = (np.nextafter(ph, inf) - ph) * 0.5
            down = (ph - np.nextafter(ph, -inf)) * 0.5
            finite = (rad - rad == 0.0) and (ph - ph == 0.0)
            good = (lo + rad < up) and (lo - rad > -down) and finite
            p_[j] = ph + 0.0 if good else nan
            ok_[j] = good


def weights(parts: tuple, scale: tuple[float, float], allowed: Any, table: tuple, limits: tuple):
    """fast64 steps 1–4 for a block of rows without an additive mask, from the scores' (P, R)
    (fast64._scores): (Wh, Wl, tiny, zero, c, ntiny, nzero, max w̃ per row)."""
    import numpy as np

    P, R = (np.ascontiguousarray(x) for x in parts)
    rows, S = R.shape
    Wh, Wl = np.empty((rows, S)), np.empty((rows, S))
    tiny, zero = np.empty((rows, S), dtype=bool), np.empty((rows, S), dtype=bool)
    c, counts, wmax = np.empty(rows), np.empty((rows, 2), dtype=np.int64), np.empty(rows)
    masked = allowed is not None
    mask = np.ascontiguousarray(allowed) if masked else np.ones((1, 1), dtype=bool)
    _weights(P, R, float(scale[0]), float(scale[1]), mask, masked, table[0], table[1],
             float(limits[0]), float(limits[1]), Wh, Wl, tiny, zero, c, counts, wmax)
    return Wh, Wl, tiny, zero, c, counts[:, 0], counts[:, 1], wmax


def w_slices(Wh, Wl, e, beta: int, block: int, full: bool):
    """The slices of W for the values product: ([X1; X2], Σ|X3| per row, the remainder's input
    laid out in key blocks, with X1 + X2 when ``full``)."""
    import numpy as np

    rows, S = Wh.shape
    powers = [np.ascontiguousarray(np.ldexp(1.0, k), dtype=np.float64)
              for k in (beta - e, e - beta, 2 * beta - e, e - 2 * beta)]
    X, X3abs, Rin = np.empty((2 * rows, S)), np.empty(rows), np.empty((rows, (1 + full) * S))
    _w_slices(np.ascontiguousarray(Wh), np.ascontiguousarray(Wl), *powers, block, full, X, X3abs,
              Rin)
    return X, X3abs, Rin


def normalise(Wh, Wl, Yh, Yl, factor, tiny, zero, bad, allowed, inflate: float, tiny_abs: float,
              into: tuple) -> None:
    """The decided weights (nan where undecided) and the mask into ``into`` = (values, mask),
    as decide64 of fast64's (Ph, Pl, Pr) with the known zeros set."""
    import numpy as np

    masked = allowed is not None
    mask = np.ascontiguousarray(allowed) if masked else np.ones((1, 1), dtype=bool)
    _normalise(Wh, Wl, np.ascontiguousarray(Yh), np.ascontiguousarray(Yl),
               np.ascontiguousarray(factor), tiny, zero, bad, mask, masked, inflate, tiny_abs, *into)
