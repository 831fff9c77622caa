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
other value is irrational and the balls decide it, except an lse t₀ + log1p(e^(−1e9)·…)
whose t₀ is a boundary, decided by the sign of log1p (:func:`symattn.floatref.ties.lse_by_sign`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import flint

from symattn.floatref.binary import BINARY_FORMATS, BinaryFormat, round_ball, round_fraction
from symattn.floatref.errors import FloatRefError
from symattn.floatref.rows import _scale_ball, _scale_parts, dyadic_matrix
from symattn.numbers.precision import precision, precisions, undecided


def log_sum_exp(pr: Any, fmt: BinaryFormat, decided: Any = None) -> tuple[Any, Any]:
    """(lse, lse2): float64 arrays (batch…, L) holding the format's values; −inf where no
    key is allowed.  ``pr``: a normalised problem (:func:`symattn.floatref.sdpa.normalise`).
    ``decided(idx)``: (lse, lse2, decided (2, L)) of a head already enclosed (the plain
    backward's sums), used instead of :func:`symattn.floatref.lsefast.decide_lse`."""
    import numpy as np

    L = pr.Q.shape[-2]
    lse = np.full(pr.batch + (L,), -np.inf)
    lse2 = np.full(pr.batch + (L,), -np.inf)
    s_rational, s_exact = _scale_parts(pr)
    digits = math.ceil(fmt.p * math.log10(2)) + 2
    for idx in np.ndindex(*pr.batch):
        known = None
        if fmt.name != "float64":                           # float64 can decide the narrower formats
            from symattn.floatref.lsefast import decide_lse

            a, b, known = decide_lse(pr, idx, fmt) if decided is None else decided(idx)
            lse[idx] = np.where(known[0], a, lse[idx])
            lse2[idx] = np.where(known[1], b, lse2[idx])
            if known.all():
                continue
        _Rows(pr, idx, s_rational, s_exact, fmt).decide(lse[idx], lse2[idx], digits, known)
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

    def decide(self, lse: Any, lse2: Any, digits: int, known: Any = None) -> None:
        """Round every row with a key (``known``: (2, L) rows already decided, left alone)."""
        import numpy as np

        self.ok = np.zeros((2, len(self.live)), dtype=bool) if known is None else known.copy()
        todo = [i for i, keys in enumerate(self.live) if keys and not self.ok[:, i].all()]
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
        todo = [i for i in todo if not self._by_sign(i, lse)]
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

    def _by_sign(self, i: int, lse: Any) -> bool:
        """Round a row's lse that a finite mask puts within e^(−1e9) of a boundary, by the sign
        of its distance to it (:func:`symattn.floatref.ties.lse_by_sign`); True when done."""
        from symattn.floatref.ties import lse_by_sign

        if not self.ok[1, i]:
            return False                                    # only base e: lse2 is never this close
        keys = self.live[i]
        full = self.scores([i])
        drow = [int(full[0, j]) for j in keys]
        add = [0.0] * len(keys) if self.add is None else [float(self.add[i, j]) for j in keys]
        if self.s_rational is None:                         # s irrational: t equal iff d and m equal
            tags: list = list(zip(drow, add))
            exact = [Fraction(m) if d == 0 else None for d, m in zip(drow, add)]
        else:
            s2 = self.s_rational * Fraction(2) ** self.g
            tags = exact = [s2 * d + Fraction(m) for d, m in zip(drow, add)]

        def t_of(js: list[int]) -> list:
            sg = _scale_ball(self.s_exact) * flint.arb(2) ** self.g
            return [sg * drow[j] + flint.arb(add[j]) for j in js]

        y = lse_by_sign(tags, t_of, exact.__getitem__, self.fmt)
        if y is None:
            return False
        lse[i], self.ok[0, i] = y + 0.0, True
        return True

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


class LSEReport:
    """A candidate LSE (…, L) against the correctly rounded one, row by row.

    ``ulps``: each row's distance (got − RN(x))/ulp(RN(x)) in ``fmt`` from the correctly rounded
    value, within ½ ulp of its error against the exact x (0 on fully masked rows, which are
    skipped: torch stores −inf there, FlashAttention-2 +inf).  ``other_base_ulps``: the same
    against the other base's LSE, so a kernel that mixed up the bases is recognised."""

    def __init__(self, got: Any, ref: Any, base: str = "e") -> None:
        import numpy as np

        if base not in ("e", "2"):
            raise FloatRefError(f"the LSE base is {base!r}: use 'e' (natural, as FlashAttention) or '2'")
        if ref.lse is None:
            raise FloatRefError("the reference has no LSE: call correctly_rounded(..., return_lse=True)")
        want = ref.lse if base == "e" else ref.lse2
        other = ref.lse2 if base == "e" else ref.lse
        got = np.asarray(got)
        if got.shape != want.shape:
            raise FloatRefError(f"the candidate LSE has shape {got.shape}, but one per query row is "
                                f"{want.shape}")
        self.base, self.fmt = base, ref.lse_dtype
        fmt = BINARY_FORMATS[self.fmt]
        self.live = ~np.asarray(ref.fully_masked)
        g = got.astype(np.float64)
        self.nonfinite = ~np.isfinite(g) & self.live
        g = np.where(self.nonfinite, want, g)
        self.got, self.want = g, want.astype(np.float64)
        self.ulps = np.where(self.live, (g - self.want) / ulp_array(self.want, fmt), 0.0)
        o = other.astype(np.float64)
        self.other_base_ulps = np.where(self.live, (g - o) / ulp_array(o, fmt), 0.0)

    @property
    def max_ulps(self) -> float:
        import numpy as np

        return float(np.abs(self.ulps).max()) if self.ulps.size else 0.0

    def over(self, max_ulp: float):
        """Rows proved to be more than ``max_ulp`` ulps from the exact LSE (a boolean array)."""
        import numpy as np

        return (np.abs(self.ulps) - 0.5 > max_ulp) | self.nonfinite

    def matches_other_base(self, max_ulp: float) -> bool:
        import numpy as np

        return bool(self.other_base_ulps.size) and bool((np.abs(self.other_base_ulps) <= max_ulp + 0.5).all())

    def worst(self, count: int = 5) -> list[tuple[tuple[int, ...], float, float, float]]:
        """(index, got, correctly rounded, ulps) of the rows farthest from the reference."""
        import numpy as np

        order = np.argsort(-np.abs(self.ulps).reshape(-1), kind="stable")[:max(0, count)]
        out = []
        for k in order.tolist():
            at = tuple(int(v) for v in np.unravel_index(k, self.ulps.shape))
            if self.live[at]:
                out.append((at, float(self.got[at]), float(self.want[at]), float(self.ulps[at])))
        return out

    def to_json(self, max_ulp: float | None = None) -> dict[str, Any]:
        return {"base": self.base, "format": self.fmt, "rows": int(self.live.sum()),
                "max_ulps_from_correctly_rounded": self.max_ulps,
                "rows_over_max_ulp": None if max_ulp is None else int(self.over(max_ulp).sum()),
                "nonfinite_rows": int(self.nonfinite.sum()),
                "matches_other_base": self.matches_other_base(0.5 if max_ulp is None else max_ulp),
                "worst": [{"index": list(i), "got": g, "correctly_rounded": w, "ulps": u}
                          for i, g, w, u in self.worst()]}


def ulp_array(x: Any, fmt: BinaryFormat) -> Any:
    """ulp(x) in ``fmt`` for a float64 array: 2^(max(e, e_min) − p + 1), 2^e ≤ |x| < 2^(e+1)."""
    import numpy as np

    _, e = np.frexp(np.where(np.isfinite(x), x, 0.0))
    return np.ldexp(1.0, np.maximum(e - 1, fmt.e_min) - fmt.p + 1)
