"""One head of the fast paths, a small block of rows at a time, decided as it goes.

Why small blocks: a head computed as one (L × S) piece streams some thirty float64
temporaries of L·S entries through memory; blocks of about 32K entries (256 KiB each) stay
in the L2 cache, where an elementwise pass costs about a third as much, and each block's
rounding decisions are taken while it is there (docs/benchmarks.md, Round 4).  The
arithmetic is fast.py's and fast64.py's, entry by entry, so the enclosures are the ones
:func:`fast.enclose` and :func:`fast64.enclose64` give, and the decisions the same.
"""

from __future__ import annotations

from typing import Any

from symattn.floatref import fast, fast64, fused32, fused64
from symattn.floatref.binary import BinaryFormat, round_array, round_float32

#: entries per block of rows: each (rows × S) float64 temporary is 512 KiB
ENTRIES = 1 << 16
#: rows per block at least (BLAS products of fewer rows run up to 2.5 times slower per entry)
MIN_ROWS = 64
#: entries per block of rows for fast64_head: its temporaries are fused (fused64.py), so
#: blocks of 128 rows at S = 1024 still fit L2 and halve the per-block call overhead
#: (about 6 % faster there; 256 rows fall out of L2 and run 45 % slower; docs/benchmarks.md)
ENTRIES64 = 1 << 17


def _rows(a: Any, lo: int, hi: int) -> Any:
    return None if a is None else a[lo:hi]


def fast_head(Q, K, V, allowed, additive, scale: float, scale_err: float, fmt: BinaryFormat,
              f32_cast: bool, out: tuple) -> None:
    """Float64 enclosures of one head (fast.py), rounded to ``fmt`` block by block into
    ``out`` = (w, w_ok, o, o_ok, empty): the rounded values (arrays of the format's numpy
    type; undecided entries hold anything), where they are decided, the empty rows.
    ``f32_cast``: the IEEE float64 → float32 conversion holds (sdpa.ieee_conversions_hold)."""
    w, w_ok, o, o_ok, empty = out
    L, S, Ev = Q.shape[0], K.shape[0], V.shape[1]
    head = fast._Head(K, V)
    step = max(MIN_ROWS, ENTRIES // max(S, Ev, 1))
    cast = f32_cast and fmt.name == "float32"
    for a in range(0, L, step):
        b = min(L, a + step)
        Pm, Rp, Om, Ro, emp = fast._block(Q[a:b], head, _rows(allowed, a, b), _rows(additive, a, b),
                                          scale, scale_err)
        decide_into(Pm, Rp, fmt, cast, w[a:b], w_ok[a:b])
        decide_into(Om, Ro, fmt, cast, o[a:b], o_ok[a:b])
        empty[a:b] = emp


def decide_into(mid, rad, fmt: BinaryFormat, cast: bool, values, ok) -> None:
    """Round both ends of [mid − rad, mid + rad] into ``fmt``; decided (``ok``) where they
    round alike to a finite value, and ``values`` then holds it (+0 for zero); ``rad`` is
    overwritten.  The same decisions as sdpa._decide (a radius that is infinite or NaN
    makes the ends differ or NaN).  ``cast``: float32 by the IEEE conversion (checked by
    the caller); the narrower formats through float32 (:func:`_narrow`)."""
    import numpy as np

    if cast and fused64.AVAILABLE and mid.ndim == 2:
        fused32.decide(mid, rad, values, ok)             # the same operations in one pass
        return
    with np.errstate(invalid="ignore", over="ignore"):
        lo = mid - rad
        hi = np.add(mid, rad, out=rad)
        if not cast:
            _narrow(lo, hi, fmt, values, ok)
            return
        rl = lo.astype(np.float32)
        np.copyto(values, hi, casting="unsafe")          # values is float32: the same conversion
        np.equal(rl, values, out=ok)
        ok &= np.isfinite(values)
        values += 0.0                                   # −0 → +0


def decide_dd_into(hi, lo, rad, fmt: BinaryFormat, cast: bool, values, ok) -> None:
    """:func:`decide_into` for a double-double enclosure [hi + lo − rad, hi + lo + rad]
    (fast64.py), into ``fmt`` (not float64); ``lo`` is overwritten.

    It is the interval hi ± r with r = |lo| + rad + 2u|hi| (computed in float64 and passed
    through fast64._up, which covers those three roundings), and hi ∓ r computed in round to
    nearest stays outside [hi + lo − rad, hi + lo + rad]: |fl(hi ∓ r) − (hi ∓ r)| ≤ u(|hi| + r)
    ≤ 2u|hi| + (r − |lo| − rad − 2u|hi|), the last term being at least 2^-20·r ≥ u·r
    (rounding to a subnormal is exact)."""
    import numpy as np

    r = np.abs(lo, out=lo)
    r += rad
    r += np.abs(hi) * (2 * fast64.U)
    decide_into(hi, fast64._up(r), fmt, cast, values, ok)


def _narrow(lo, hi, fmt: BinaryFormat, values, ok) -> None:
    """float16, bfloat16, fp8: a = RN32(lo), b = RN32(hi).  Where a = b and a is not a
    boundary of ``fmt``, RN_fmt(lo) = RN_fmt(hi) = RN_fmt(a): a boundary between x ∈ [lo, hi]
    and a would be a float32 (every boundary of these formats is) nearer to x than a, yet
    RN32(x) = a.  The other entries (a ≠ b, a boundary, no finite rounding: rare) by
    round_array on both ends, as sdpa._decide."""
    import numpy as np

    a, b = lo.astype(np.float32), hi.astype(np.float32)
    y, boundary = round_float32(b, fmt)
    np.equal(a, b, out=ok)
    redo = ~ok
    redo |= boundary
    finite = np.isfinite(y)
    redo |= ~finite                     # overflow, or |b| ≥ 2^(104 + p) where C overflows: exactly
    ok &= ~boundary
    ok &= finite
    y += np.float32(0)                                  # −0 → +0
    values[...] = y                                     # exact: format values
    where = np.flatnonzero(redo)
    if where.size:
        rl, rh = round_array(lo.reshape(-1)[where], fmt), round_array(hi.reshape(-1)[where], fmt)
        ok.reshape(-1)[where] = (rl == rh) & np.isfinite(rh)
        values.reshape(-1)[where] = rh + 0.0


def fast64_head(Q, K, V, allowed, additive, scale: tuple[float, float, float], out: tuple) -> None:
    """Double-double enclosures of one head (fast64.py), decided in float64 block by block
    into ``out`` = (w, w_ok, o, o_ok, empty) as :func:`fast_head`; blocked weights and those
    proved to round to 0 are +0."""
    import numpy as np

    w, w_ok, o, o_ok, empty = out
    L, S, Ev = Q.shape[0], K.shape[0], V.shape[1]
    scores, values = fast64.products(K, V, Q.shape[1])
    step = max(MIN_ROWS, ENTRIES64 // max(S, Ev, 1))
    for a in range(0, L, step):
        b = min(L, a + step)
        block = _rows(allowed, a, b)
        weights, (Oh, Ol, Or), zeros = fast64._block(Q[a:b], scores, values, block,
                                                     _rows(additive, a, b), scale, Ev,
                                                     into=(w[a:b], w_ok[a:b]))
        o[a:b], o_ok[a:b] = fast64.decide64(Oh, Ol, Or)
        if weights is not None:          # numpy's path: decided here, the known zeros set
            w[a:b], w_ok[a:b] = fast64.decide64(*weights)
            if block is not None:
                zeros |= ~block
            np.putmask(w[a:b], zeros, 0.0)
            np.putmask(w_ok[a:b], zeros, True)
        empty[a:b] = np.zeros(b - a, dtype=bool) if block is None else ~block.any(axis=1)
