"""The log-sum-exp of each row of SDPA, base e and base 2, correctly rounded and proved with arb.

FlashAttention's forward saves, per query row i, lse_i = log Σ_j e^(t_ij) with
t_ij = s·q_i·k_j + m_ij over the keys the mask allows (the natural logarithm of
the softmax denominator, the scaled logits' maximum included); some kernels keep
it in base 2, lse2_i = lse_i / ln 2, for exp2-based softmax.  Mixing the two bases
is a bug that shipped in at least five projects (docs/floatref.md).

How a row is proved: the scores q·k are exact integers (one ``fmpz_mat`` product of
the floats' integer significands, :func:`symattn.floatref.rows.dyadic_matrix`).  At a
precision of the one loop, the t_j are arb balls; with c the largest midpoint,
lse = c + log Σ e^(t_j − c) and lse2 = lse / log 2, each rounded when its whole ball
rounds to one value of the format, else again at twice the precision.  A finite
additive mask is first shifted by the row's largest allowed value c_m (exactly, since
arb subtracts exact inputs with a relative rounding), so −1e9 or finfo.min masks cost
no precision: lse = c_m + lse(t − c_m).

Which values can sit on a rounding boundary (every boundary is rational; a rational
value never leaves the ball's boundary, so those are rounded exactly with integers):
by Lindemann–Weierstrass, log Σ_g n_g·e^(y_g) (groups of n_g keys with equal algebraic
t = y_g) is algebraic only for one key (lse = t, rational when the scale is); and by
Baker's theorem on linear forms in logarithms, (y + ln n)/ln 2 is rational only when
y = 0 and n is a power of two (lse2 = log2 n: every score 0 and 2^k keys).  Every
other value is irrational and the balls decide it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import flint

from symattn.floatref.binary import BinaryFormat, round_ball, round_fraction
from symattn.floatref.rows import _scale_ball, _scale_parts, dyadic_matrix
from symattn.numbers.precision import precision, precisions, undecided


def log_sum_exp(pr: Any, fmt: BinaryFormat) -> tuple[Any, Any]:
    """(lse, lse2): float64 arrays (batch…, L) holding the format's values; −inf where no
    key is allowed.  ``pr``: a normalised problem (:func:`symattn.floatref.sdpa.normalise`)."""
    import numpy as np

    L = pr.Q.shape[-2]
    lse = np.full(pr.batch + (L,), -np.inf)
    lse2 = np.full(pr.batch + (L,), -np.inf)
    s_rational, s_exact = _scale_parts(pr)
    digits = math.ceil(fmt.p * math.log10(2)) + 2
    for idx in np.ndindex(*pr.batch):
        _Rows(pr, idx, s_rational, s_exact, fmt).decide(lse[idx], lse2[idx], digits)
    return lse, lse2


class _Rows:
    """One head's rows: exact integer scores, then balls of rising precision."""

    def __init__(self, pr: Any, idx: tuple, s_rational: Fraction | None, s_exact: Any,
                 fmt: BinaryFormat) -> None:
        import numpy as np

        self.qn, gq = dyadic_matrix(pr.Q[idx])
        kn, gk = dyadic_matrix(pr.K[idx])
        self.KT = flint.fmpz_mat(kn).transpose()            # q·k = (qn·KT)·2^g exactly
        self.g = gq + gk
        self.s_rational, self.s_exact, self.fmt = s_rational, s_exact, fmt
        L, S = pr.Q.shape[-2], pr.K.shape[-2]
        allowed = np.ones((L, S), dtype=bool) if pr.allowed is None else np.asarray(pr.allowed[idx])
        self.live = [np.nonzero(row)[0].tolist() for row in allowed]
        self.add = None if pr.additive is None else np.asarray(pr.additive[idx])
        self.shift = [0.0] * L                              # c_m: the row's largest allowed mask value
        if self.add is not None:
            for i, keys in enumerate(self.live):
                if keys:
                    self.shift[i] = float(self.add[i, keys].max())

    def scores(self, rows: list[int]) -> flint.fmpz_mat:
        return flint.fmpz_mat([self.qn[i] for i in rows]) * self.KT

    def decide(self, lse: Any, lse2: Any, digits: int) -> None:
        import numpy as np

        self.ok = np.zeros((2, len(self.live)), dtype=bool)   # lse, lse2 decided
        todo = [i for i, keys in enumerate(self.live) if keys]
        first = True
        prec = 0
        for prec in precisions(digits):
            if not todo:
                return
            if not first:                                   # a row left after one round: maybe rational
                todo = [i for i in todo if not self._rational(i, lse, lse2)]
                if not todo:
                    return
            first = False
            with precision(prec):
                todo = self._round(todo, lse, lse2)
        if todo:
            raise undecided(f"lse[{todo[0]}]", f"the {self.fmt.name} rounding", prec,
                            "it may sit exactly on a rounding boundary")

    def _round(self, rows: list[int], lse: Any, lse2: Any) -> list[int]:
        """Round what the balls at the current precision decide; return the rows left."""
        T = (flint.arb_mat(self.scores(rows)) * (_scale_ball(self.s_exact) * flint.arb(2) ** self.g)).tolist()
        log2 = flint.arb.const_log2()
        rest = []
        for r, i in enumerate(rows):
            keys = self.live[i]
            t = T[r]
            if self.add is None:
                ts = [t[j] for j in keys]
            else:
                cm = flint.arb(self.shift[i])
                m = self.add[i]
                ts = [t[j] + (flint.arb(float(m[j])) - cm) for j in keys]
            c = max(x.mid() for x in ts)
            z = flint.arb(0)
            for x in ts:
                z += (x - c).exp()
            value = c + z.log()
            if self.add is not None:
                value = value + flint.arb(self.shift[i])
            for k, (out, ball) in enumerate(((lse, value), (lse2, value / log2))):
                if not self.ok[k, i]:
                    y = round_ball(ball, self.fmt)
                    if y is not None:
                        out[i], self.ok[k, i] = y + 0.0, True
            if not self.ok[:, i].all():
                rest.append(i)
        return rest

    def _rational(self, i: int, lse: Any, lse2: Any) -> bool:
        """Round the row's rational values exactly (see the module docstring); True when the
        row is then done, or when its values are irrational (the balls go on)."""
        keys = self.live[i]
        full = self.scores([i])
        drow = [int(full[0, j]) for j in keys]
        add = [0.0] * len(keys) if self.add is None else [float(self.add[i, j]) for j in keys]
        if self.s_rational is None:                         # s irrational: t equal iff d and m equal
            if len(set(zip(drow, add))) > 1:
                return False
            y = Fraction(add[0]) if drow[0] == 0 else None  # None: irrational
        else:
            s2 = self.s_rational * Fraction(2) ** self.g
            ts = {s2 * d + Fraction(m) for d, m in zip(drow, add)}
            if len(ts) > 1:
                return False
            y = ts.pop()
        n = len(keys)
        if not self.ok[0, i] and n == 1 and y is not None:
            lse[i], self.ok[0, i] = round_fraction(y, self.fmt) + 0.0, True
        if not self.ok[1, i] and y == 0 and n & (n - 1) == 0:
            lse2[i], self.ok[1, i] = round_fraction(Fraction(n.bit_length() - 1), self.fmt) + 0.0, True
        return bool(self.ok[:, i].all())
