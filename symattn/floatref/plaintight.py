"""The plain backward's second tier: the entries float64 left, from the first tier's own tight
row sums, as arb balls.

The first tier (:mod:`symattn.floatref.plainfast`) rounds P̃ = fl(w̃/Z̃) and pays u for it on
every entry, and D's radius carries every weight's.  But it also keeps, per row i, the shift
c_i, Z_i = Σ_j e^(t_ij − c_i) ∈ Zh + Zl ± R_Z and Σ_c dO_ic·N_ic ∈ Nh + Nl ± R_N (N_i = Σ_j
e^(t_ij − c_i)·V_j) within about u/8 of their size (the unrounded exp pair, EXP_PAIR = u/16, and
the split product W·V).  For a dK or dV entry (a key's column of P) or a dQ entry (a query's
row) the weights are computed again for that column or row as pairs W + W_lo ± R₂
(:func:`plainfast.weights`, the same c_i), and at 192 bits:

* P_ij = (W + W_lo ± R₂)/(Zh + Zl ± R_Z) (a blocked key exactly 0),
* D_i = (Nh + Nl ± R_N)/(Zh + Zl ± R_Z),
* dP exact from integer significands, dS = P∘(dP − D) (an exact 0 on constant rows), and the
  products with K, Q, dO as exact integer matrices (:class:`symattn.floatref.plainrest._Rows`'s),

each entry rounded when its whole ball rounds one way.  At (1, 8, 1024, 64) the ball of a dK
entry is about 13 times narrower than the first tier's exact-sum refinement; what is still left
goes on to the double-double forward (:mod:`symattn.floatref.plainrest`).
"""

from __future__ import annotations

import math
from typing import Any

import flint

from symattn.floatref.plainfast import weights
from symattn.floatref.plainrest import PREC, _decide_columns, _decide_rows, _Rows
from symattn.numbers.precision import precision


def _np():
    import numpy

    return numpy


class TightRows(_Rows):
    """One query head's balls of P and D from the first tier's row sums (P's rows and columns
    computed again on demand)."""

    def __init__(self, pr: Any, idx: tuple, dO: Any, zero: Any, tight: Any, sums: tuple, ds: float) -> None:
        np = _np()
        self.pr, self.idx, self.ds_err = pr, idx, ds
        c, self.live = sums[0], sums[-1]
        self.Q, self.K = pr.Q[idx], pr.K[idx]
        self.allowed = None if pr.allowed is None else np.asarray(pr.allowed[idx])
        self.c = c
        _, _, Zh, Zl, RZ, Nh, Nl, RN = tight
        self.Z = [None if not math.isfinite(r) else flint.arb(h) + lo + flint.arb(0, r)
                  for h, lo, r in zip(Zh.tolist(), Zl.tolist(), RZ.tolist())]
        self.N = list(zip(Nh.tolist(), Nl.tolist(), RN.tolist()))
        self.cols: dict[int, Any] = {}
        self.row_cache: dict[int, Any] = {}
        self.exact_inputs(self.Q, self.K, pr.V[idx], dO[idx], zero)

    def prefetch(self, rows: Any = (), cols: Any = ()) -> None:
        """Compute the weight pairs of these rows and key columns (one vectorised pass each)."""
        np = _np()
        s, ds = self.pr.scale_f, self.ds_err
        for i in rows:
            if i not in self.row_cache:
                a = None if self.allowed is None else self.allowed[i:i + 1]
                self.row_cache[i] = weights(self.Q[i:i + 1], self.K, a, s, ds, self.c[i:i + 1])
        want = [j for j in cols if j not in self.cols]
        if want:
            a = None if self.allowed is None else np.ascontiguousarray(self.allowed[:, want])
            got = weights(self.Q, self.K[want], a, s, ds, self.c)
            for n, j in enumerate(want):
                self.cols[j] = None if got is None else tuple(x[:, n] for x in got)

    def p(self, i: int, j: int) -> flint.arb | None:
        if self.allowed is not None and not self.allowed[i, j]:
            return flint.arb(0)
        if j in self.cols:
            got = self.cols[j]
            at = i
        else:
            got = self.row_cache.get(i)
            got = None if got is None else tuple(x[0] for x in got)
            at = j
        if got is None or self.Z[i] is None:
            return None
        W, lo, R = (float(x[at]) for x in got)
        if not math.isfinite(R):
            return None
        return (flint.arb(W) + lo + flint.arb(0, R)) / self.Z[i]

    def d(self, i: int) -> flint.arb | None:
        if not self.live[i]:                   # no key: D = 0 (it contributes nothing)
            return flint.arb(0)
        hi, lo, rad = self.N[i]
        if self.Z[i] is None or not math.isfinite(rad):
            return None
        return (flint.arb(hi) + lo + flint.arb(0, rad)) / self.Z[i]


def decide_tight(pr: Any, dO: Any, heads: dict, known: dict, kv: tuple, owners: list, fmt: Any,
                 ds: float) -> None:
    """Decide in place what the first tier left of one kv head's group (dQ, dS, D rows of each
    query head; dK, dV rows of the kv head), from :class:`TightRows` balls."""
    from symattn.floatref.rows import _scale_ball

    np = _np()
    kv_left = {n: np.argwhere(~known[n][1][kv]) for n in ("dK", "dV")}
    cols = sorted({int(j) for a in kv_left.values() for j in a[:, 0]})
    rows_of: dict[tuple, list[int]] = {}
    for idx in owners:
        rows: set[int] = set()
        for name in ("dQ", "dS", "D"):
            if name in known:
                ok = known[name][1][idx]
                rows |= set(np.nonzero(~(ok if ok.ndim == 1 else ok.all(axis=1)))[0].tolist())
        rows_of[idx] = sorted(rows)
    if not cols and not any(rows_of.values()):
        return
    with precision(PREC):
        s = _scale_ball(pr.scale)
        balls: dict[tuple, Any] = {}
        for idx in owners:
            h = heads[idx]
            t = TightRows(pr, idx, dO, h["zero"], h["tight"], h["sums"], ds)
            t.prefetch(rows_of[idx], cols)
            balls[idx] = t
        _decide_rows({idx: balls[idx] for idx in owners if rows_of[idx]}, known, fmt, s)
        for name, left in kv_left.items():
            _decide_columns(balls, owners, kv, name, left, known, fmt, s)
