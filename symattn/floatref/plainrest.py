"""The entries of the plain backward that the float64 enclosures leave: double-double P and O,
then one arb ball per entry.

For each head with entries left, :func:`symattn.floatref.fast64.enclose64` encloses the weights
and the output of the rows they need (every row when a dK or dV entry of its kv head is left: a
key's column of P reads every query's softmax) to about 2^-80 relative.  Then, at 192 bits:

* P_ij = Ph + Pl ± P_rad (a blocked key exactly 0; a key ``weights_zero`` proves below
  e^(X_ZERO + 1)/Z < 2^-1150 is 0 ± 2^-1100; an unbounded weight leaves the entry to the engine),
* D_i = Σ_c dO_ic·O_ic from TwoProduct pieces summed by ``math.fsum`` twice (hi, then the
  remainder lo) plus Σ|dO|·O_rad and the rounding of dO·Ol,
* dP_ij exact (integer significands, ``fmpz_mat``), dS = P∘(dP − D) (an exact 0 on the rows
  :func:`symattn.floatref.plainfast.constant_rows` proves), and the products with K, Q and dO as
  exact integer matrices,

and each entry is rounded when its whole ball rounds to one value (``conditional.round_balls``).
What is still left (an exact nonzero value on a boundary, unbounded weights) is returned for
the engine's exact trace.
"""

from __future__ import annotations

import math
from typing import Any

import flint

from symattn.floatref import dd
from symattn.floatref.fast import TINY, U
from symattn.numbers.precision import precision


def _np():
    import numpy

    return numpy


class _Rows:
    """One query head's double-double enclosures of some rows, as arb balls on demand."""

    def __init__(self, pr: Any, idx: tuple, dO: Any, rows: Any, zero: Any) -> None:
        from symattn.floatref import fast64

        np = _np()
        self.rows = rows
        self.local = {int(i): r for r, i in enumerate(rows.tolist())}
        Q, K, V = pr.Q[idx], pr.K[idx], pr.V[idx]
        self.allowed = None if pr.allowed is None else np.asarray(pr.allowed[idx])
        enc = fast64.enclose64(Q[rows], K, V, None if self.allowed is None else self.allowed[rows], None,
                               fast64.scale_dd(pr.scale))
        (self.Ph, self.Pl), self.Pr, self.zeros = enc.weights, enc.weights_rad, enc.weights_zero
        self.D = _row_dots(dO[idx][rows], *enc.output, enc.output_rad)
        self.exact_inputs(Q, K, V, dO[idx], zero)

    def exact_inputs(self, Q: Any, K: Any, V: Any, dO: Any, zero: Any) -> None:
        """The head's inputs as integer matrices (dP exactly, the products with Q, K, dO)."""
        from symattn.floatref.rows import dyadic_matrix

        self.zero = zero
        self.don, self.go = dyadic_matrix(dO)
        self.vn, self.gv = dyadic_matrix(V)
        self.qn, self.gq = dyadic_matrix(Q)
        self.kn, self.gk = dyadic_matrix(K)
        self._mats: dict[str, Any] = {}

    def mat(self, name: str) -> Any:
        """Q, K or dO as an exact integer arb_mat."""
        if name not in self._mats:
            self._mats[name] = flint.arb_mat(flint.fmpz_mat({"Q": self.qn, "K": self.kn, "dO": self.don}[name]))
        return self._mats[name]

    def p(self, i: int, j: int) -> flint.arb | None:
        """The ball of P_ij (None: not bounded here)."""
        if self.allowed is not None and not self.allowed[i, j]:
            return flint.arb(0)
        r = self.local[i]
        if self.zeros[r, j]:
            return flint.arb(0, 2.0 ** -1100)
        rad = float(self.Pr[r, j])
        if not math.isfinite(rad):
            return None
        return flint.arb(float(self.Ph[r, j])) + float(self.Pl[r, j]) + flint.arb(0, rad)

    def d(self, i: int) -> flint.arb | None:
        hi, lo, rad = (float(a[self.local[i]]) for a in self.D)
        return None if not math.isfinite(rad) else flint.arb(hi) + lo + flint.arb(0, rad)

    def dp_row(self, i: int) -> list[int]:
        return (flint.fmpz_mat([self.don[i]]) * flint.fmpz_mat(self.vn).transpose()).entries()

    def dp_column(self, j: int) -> list[int]:
        return (flint.fmpz_mat(self.don) * flint.fmpz_mat([[x] for x in self.vn[j]])).entries()

    def ds(self, i: int, j: int, dp: Any) -> flint.arb | None:
        """dS_ij = P_ij·(dP_ij − D_i) (dp: the exact integer dP_ij·2^-(go+gv))."""
        if self.zero[i] or (self.allowed is not None and not self.allowed[i, j]):
            return flint.arb(0)
        p, d = self.p(i, j), self.d(i)
        if p is None or d is None:
            return None
        return p * (flint.arb(dp) * flint.arb(2) ** (self.go + self.gv) - d)


def _row_dots(dO, Oh, Ol, Orad):
    """(hi, lo, rad) per row with |Σ_c dO_ic·O_ic − hi − lo| ≤ rad for every O within Orad of Oh + Ol."""
    np = _np()
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        p, e = dd.two_prod(dO, Oh)
        q = dO * Ol
        pieces = np.concatenate([p, e, q], axis=1).tolist()
        hi = np.array([math.fsum(row) for row in pieces])
        lo = np.array([math.fsum(row + [-h]) for row, h in zip(pieces, hi.tolist())])
        rad = (np.abs(dO) * Orad).sum(axis=1) * (1 + 2.0 ** -20) + U * np.abs(q).sum(axis=1) * 2 \
            + U * np.abs(lo) + dO.shape[1] * 3 * TINY
        ok = np.isfinite(p).all(axis=1) & np.isfinite(e).all(axis=1) & np.isfinite(rad) \
            & (np.abs(dO).max(axis=1, initial=0) < 2.0 ** 900) & (np.abs(Oh).max(axis=1, initial=0) < 2.0 ** 90)
    return hi, lo, np.where(ok, rad * (1 + 2.0 ** -20) + TINY, np.inf)


#: the precision of the balls: the double-double enclosures give about 2^-80, so more buys nothing
PREC = 192


def finish(pr: Any, dO: Any, fmt: Any, group: int, kv_batch: tuple, known: dict, zero: Any) -> None:
    """Decide in place (``known``: {name: (values, decided)}) what the float64 enclosures left, a
    kv head's group at a time; dP exactly (its entries are rational)."""
    from symattn.floatref.rows import _scale_ball

    np = _np()
    if "dP" in known:
        exact_dp(pr, dO, known["dP"], fmt)
    with precision(PREC):
        s = _scale_ball(pr.scale)
        for kv in np.ndindex(*kv_batch):
            owners = [kv] if group == 1 else [kv[:-1] + (kv[-1] * group + k,) for k in range(group)]
            kv_left = {n: np.argwhere(~known[n][1][kv]) for n in ("dK", "dV")}
            every = any(a.size for a in kv_left.values())
            heads: dict[tuple, _Rows] = {}
            for idx in owners:
                rows: set[int] = set()
                for name in ("dQ", "dS", "D"):
                    if name in known:
                        ok = known[name][1][idx]
                        rows |= set(np.nonzero(~(ok if ok.ndim == 1 else ok.all(axis=1)))[0].tolist())
                if every:
                    rows = set(range(pr.Q.shape[-2]))
                if rows:
                    heads[idx] = _Rows(pr, idx, dO, np.array(sorted(rows)), zero[idx])
            if heads:
                _decide_rows(heads, known, fmt, s)
                for name, left in kv_left.items():
                    _decide_columns(heads, owners, kv, name, left, known, fmt, s)


def _decide_rows(heads: dict, known: dict, fmt: Any, s: Any) -> None:
    """dQ, dS and D entries left, row by row of one query head."""
    from symattn.floatref.conditional import round_balls

    np = _np()
    for idx, h in heads.items():
        for name in ("dQ", "dS", "D"):
            if name not in known:
                continue
            values, ok = known[name][0][idx], known[name][1][idx]
            left = np.argwhere(~ok)
            if left.size == 0:
                continue
            keys: list[tuple] = []
            balls: list = []
            if name == "D":
                keys = [(int(i),) for (i,) in left]
                balls = [h.d(i) for (i,) in keys]
            else:
                for i in sorted({int(i) for i in left[:, 0]}):
                    cols = [int(c) for c in left[left[:, 0] == i][:, 1]]
                    got = _row(h, i, cols, name, s)
                    keys += [(i, c) for c in cols]
                    balls += got
            _store(keys, balls, values, ok, fmt, round_balls)


def _row(h: _Rows, i: int, cols: list, name: str, s: Any) -> list:
    """Balls of dS[i, cols] or dQ[i, cols] (None where a ball is unbounded)."""
    dp = h.dp_row(i)
    S = len(dp)
    want = cols if name == "dS" else range(S)
    dS = {j: h.ds(i, j, dp[j]) for j in want}
    if name == "dS":
        return [dS[j] for j in cols]
    if any(b is None for b in dS.values()):
        return [None] * len(cols)
    row = flint.arb_mat([[dS[j] for j in range(S)]]) * h.mat("K")
    scale = s * flint.arb(2) ** h.gk
    return [row[0, c] * scale for c in cols]


def _decide_columns(heads: dict, owners: list, kv: tuple, name: str, left: Any, known: dict, fmt: Any,
                    s: Any) -> None:
    """dK or dV entries left (rows j of a kv head): Σ over the owners' columns j of dS or P."""
    from symattn.floatref.conditional import round_balls

    if left.size == 0:
        return
    values, ok = known[name][0][kv], known[name][1][kv]
    keys: list[tuple] = []
    balls: list = []
    for j in sorted({int(j) for j in left[:, 0]}):
        cols = [int(c) for c in left[left[:, 0] == j][:, 1]]
        total: Any = None
        for idx in owners:
            part = _column(heads[idx], j, cols, name, s)
            if part is None:
                total = None
                break
            total = part if total is None else [a + b for a, b in zip(total, part)]
        keys += [(j, c) for c in cols]
        balls += total if total is not None else [None] * len(cols)
    _store(keys, balls, values, ok, fmt, round_balls)


def _column(h: _Rows, j: int, cols: list, name: str, s: Any) -> list | None:
    """Balls of dK[j, cols] or dV[j, cols] of one query head (None: a ball is unbounded)."""
    L = len(h.don)
    if name == "dV":
        col = [h.p(i, j) for i in range(L)]
        mat, scale = h.mat("dO"), flint.arb(2) ** h.go
    else:
        dp = h.dp_column(j)
        col = [h.ds(i, j, dp[i]) for i in range(L)]
        mat, scale = h.mat("Q"), s * flint.arb(2) ** h.gq
    if any(b is None for b in col):
        return None
    part = flint.arb_mat([col]) * mat
    return [part[0, c] * scale for c in cols]


def entry_ball(h: _Rows, name: str, r: int, c: int, s: Any) -> Any:
    """One query head's ball of dQ, dK or dV at [r, c] (h holds every row; None: unbounded)."""
    if name == "dQ":
        return _row(h, r, [c], "dQ", s)[0]
    got = _column(h, r, [c], name, s)
    return None if got is None else got[0]


def _store(keys: list, balls: list, values: Any, ok: Any, fmt: Any, round_balls: Any) -> None:
    """Round the bounded balls; decided entries into ``values`` and ``ok``."""
    have = [k for k, b in zip(keys, balls) if b is not None]
    for key, y in zip(have, round_balls([b for b in balls if b is not None], fmt)):
        if y is not None:
            values[key], ok[key] = y + 0.0, True


def exact_dp(pr: Any, dO: Any, dP: tuple, fmt: Any) -> None:
    """dP entries left, in place: Σ_c dO_ic·V_jc exactly (Fractions), rounded exactly."""
    from fractions import Fraction

    from symattn.floatref.binary import round_fraction

    np = _np()
    values, ok = dP
    for key in np.argwhere(~ok):
        at = tuple(int(x) for x in key)
        idx, i, j = at[:-2], at[-2], at[-1]
        exact = sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(dO[idx][i], pr.V[idx][j])),
                    Fraction(0))
        values[at], ok[at] = round_fraction(exact, fmt) + 0.0, True
