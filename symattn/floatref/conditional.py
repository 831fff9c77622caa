"""The gradient a kernel's backward should give from its *own* saved O and LSE, correctly rounded.

FlashAttention's backward does not recompute the softmax: it reads the forward's output O and
log-sum-exp lse, recomputes P_ij = e^(t_ij − lse_i) (t = s·q_i·k_j + m_ij, the scaled logit with
the mask added) and takes D_i = Σ_c dO_ic·O_ic.  Then dP = dO·Vᵀ, dS = P ∘ (dP − D),
dV = Pᵀ·dO, dQ = s·dS·K and dK = s·dSᵀ·Q.  When the kernel's O and lse carry rounding errors,
its gradients differ from the true ones by an amount set by the forward, not the backward; this
module gives the exact value of that recipe on the kernel's own O and lse, each entry correctly
rounded, so a backward can be judged apart from its forward (docs/floatref.md).

How an entry is proved: most entries by float64 enclosures first (:mod:`symattn.floatref.backfast`,
narrower targets than float64), the rest here, each from its own row or column of P.  Here the scores q·k, dP and D are exact (integers times powers of two, from the
floats' significands); P is an arb ball; each gradient entry is rounded when its whole ball rounds
to one value, the precision doubling to 8192 bits.  An entry no ball decides is a sum
Σ_k c_k·e^(a_k) (times s for dQ, dK) with rational c_k and algebraic exponents a_k; by
Lindemann–Weierstrass it is algebraic only when the coefficients of every nonzero exponent cancel,
and then it is c_0 (the coefficient of e^0), found exactly by grouping the exponents: a rational
c_0 is rounded exactly (an exact 0 when dP = D, as with V = ones), s·c_0 with an irrational s and
c_0 ≠ 0 is irrational and the balls go on.  An entry a finite mask puts within e^(−1e9) of a
boundary (c_0 itself a midpoint) is decided by the sign of its distance to it
(:func:`symattn.floatref.ties.sum_by_sign`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import flint

from symattn.floatref.binary import BinaryFormat, round_ball, round_fraction
from symattn.floatref.errors import FloatRefError
from symattn.floatref.rows import _scale_ball, _scale_parts, dyadic_matrix
from symattn.numbers.precision import precision

_PRECISIONS = (128, 256, 512, 1024, 2048, 4096, 8192)


def _np():
    import numpy

    return numpy


def kv_index(idx: tuple, group: int) -> tuple:
    """The K/V slice a query head reads: head h reads kv head h // group (torch's enable_gqa)."""
    return idx if group == 1 else idx[:-1] + (idx[-1] // group,)


class _Head:
    """One query head's exact parts: integer scores, dP − D as integers, the mask and the lse."""

    def __init__(self, pr: Any, idx: tuple, dO: Any, out: Any, lse: Any) -> None:
        np = _np()
        self.qn, self.gq = dyadic_matrix(pr.Q[idx])
        self.kn, self.gk = dyadic_matrix(pr.K[idx])
        vn, gv = dyadic_matrix(pr.V[idx])
        self.don, self.go = dyadic_matrix(dO[idx])
        on, g_out = dyadic_matrix(out[idx])
        self._vn, self._on = vn, on
        self._D: Any = None
        self._dP: Any = None
        self._full: Any = None
        self._rows: Any = None
        self.gr = min(self.go + gv, self.go + g_out)
        self._a, self._b = self.go + gv - self.gr, self.go + g_out - self.gr
        L, S = len(self.qn), len(self.kn)
        allowed = np.ones((L, S), dtype=bool) if pr.allowed is None else np.asarray(pr.allowed[idx])
        self.live = _Live(allowed)
        self.allowed = allowed
        self._mats: dict[tuple[str, int], flint.arb_mat] = {}
        self._mats_z: dict[str, Any] = {}
        self.add = None if pr.additive is None else np.asarray(pr.additive[idx], dtype=np.float64)
        self.lse = [float(x) for x in np.asarray(lse[idx], dtype=np.float64)]
        self.L, self.S = L, S

    @property
    def D(self) -> Any:
        """The exact scores: q·k = D·2^(gq+gk) (an fmpz_mat, made on first use)."""
        if self._D is None:
            self._D = flint.fmpz_mat(self.qn) * flint.fmpz_mat(self.kn).transpose()
        return self._D

    def r(self, i: int, j: int) -> int:
        """(dP − D)_ij·2^-gr as an exact integer (dP = dO·Vᵀ, D_i = dO_i·O_i; for the exact pass)."""
        if self._full is None:
            self._full = flint.fmpz_mat(self.don) * flint.fmpz_mat(self._vn).transpose()   # dO·Vᵀ·2^-(go+gv)
            self._line(0, True)
        return int(self._full[i, j]) * 2 ** self._a - self._rows[i] * 2 ** self._b

    def _fm(self, name: str) -> Any:
        """Q, K, dO or V as an exact fmpz_mat (made once)."""
        if name not in self._mats_z:
            self._mats_z[name] = flint.fmpz_mat({"Q": self.qn, "K": self.kn, "dO": self.don, "V": self._vn}[name])
        return self._mats_z[name]

    def _line(self, r: int, row: bool) -> tuple[list, list]:
        """(scores, (dP − D)·2^-gr) of row r (all keys) or of key column r (all queries), as ints."""
        if self._dP is None:
            self._rows = [sum(a * b for a, b in zip(x, o)) for x, o in zip(self.don, self._on)]
            self._dP = True
        if row:
            d = (flint.fmpz_mat([self.qn[r]]) * self._fm("K").transpose()).entries()
            p = (flint.fmpz_mat([self.don[r]]) * self._fm("V").transpose()).entries()
            base = [self._rows[r] * 2 ** self._b] * len(p)
        else:
            d = (self._fm("Q") * flint.fmpz_mat([[x] for x in self.kn[r]])).entries()
            p = (self._fm("dO") * flint.fmpz_mat([[x] for x in self._vn[r]])).entries()
            base = [x * 2 ** self._b for x in self._rows]
        scale = 2 ** self._a
        return [int(x) for x in d], [int(x) * scale - b for x, b in zip(p, base)]

    def _p(self, i: int, j: int, d: int, st: flint.arb) -> flint.arb:
        """The ball of P_ij = e^(t_ij − lse_i), d the integer score (st = s·2^(gq+gk))."""
        x = flint.arb(d) * st - flint.arb(self.lse[i])
        return (x if self.add is None else x + flint.arb(float(self.add[i, j]))).exp()

    def _mat(self, name: str, prec: int) -> flint.arb_mat:
        """K, Q or dO as an exact integer arb_mat (kept per precision)."""
        if (name, prec) not in self._mats:
            self._mats[(name, prec)] = flint.arb_mat(self._fm(name))
        return self._mats[(name, prec)]

    def row_ball(self, r: int, s: flint.arb, prec: int) -> flint.arb_mat:
        """Row r of dQ (1 × E) as balls: Σ_j P_rj·R_rj·K_j·s·2^(gr+gk), only row r of P."""
        two = flint.arb(2)
        st = s * two ** (self.gq + self.gk)
        d, R = self._line(r, True)
        dS = [flint.arb(0)] * self.S
        for j in self.live[r]:
            if R[j]:
                dS[j] = self._p(r, j, d[j], st) * R[j]
        return flint.arb_mat([dS]) * self._mat("K", prec) * (s * two ** (self.gr + self.gk))

    def column_ball(self, name: str, r: int, s: flint.arb, prec: int) -> flint.arb_mat:
        """Row r of dK or dV (1 × ·) as balls, from column r of P only."""
        two = flint.arb(2)
        st = s * two ** (self.gq + self.gk)
        d, R = self._line(r, False)
        col = [flint.arb(0)] * self.L
        for i in range(self.L):
            ri = 1 if name == "dV" else R[i]
            if self.allowed[i, r] and ri:
                col[i] = self._p(i, r, d[i], st) * ri
        if name == "dV":
            return flint.arb_mat([col]) * self._mat("dO", prec) * two ** self.go
        return flint.arb_mat([col]) * self._mat("Q", prec) * (s * two ** (self.gr + self.gq))

    def exponent(self, i: int, j: int, s_rational: Fraction | None) -> Any:
        """The exact exponent a_ij = t_ij − lse_i as a hashable key (equal keys, equal exponents):
        a Fraction for a rational scale, else (x, y) with a = s·x + y (1 and s independent)."""
        x = Fraction(int(self.D[i, j])) * Fraction(2) ** (self.gq + self.gk)
        y = (Fraction(0) if self.add is None else Fraction(float(self.add[i, j]))) - Fraction(self.lse[i])
        if s_rational is not None:
            return s_rational * x + y
        return (x, y) if x else (Fraction(0), y)

    def terms(self, step: str, r: int, c: int, s_rational: Fraction | None):
        """The (exponent, coefficient) terms of entry [r, c] of dQ, dK or dV (before the factor s)."""
        two = Fraction(2)
        if step == "dV":                      # Σ_i P_ir·dO_ic
            for i, keys in enumerate(self.live):
                if r in keys and self.don[i][c]:
                    yield self.exponent(i, r, s_rational), self.don[i][c] * two ** self.go
        elif step == "dQ":                    # Σ_j P_rj·R_rj·K_jc
            for j in self.live[r]:
                rj = self.r(r, j)
                if rj and self.kn[j][c]:
                    yield self.exponent(r, j, s_rational), rj * self.kn[j][c] * two ** (self.gr + self.gk)
        else:                                 # Σ_i P_ir·R_ir·Q_ic
            for i, keys in enumerate(self.live):
                ri = self.r(i, r) if r in keys else 0
                if ri and self.qn[i][c]:
                    yield self.exponent(i, r, s_rational), ri * self.qn[i][c] * two ** (self.gr + self.gq)


class _Live:
    """Each query row's allowed keys as a list, made when first read."""

    def __init__(self, allowed: Any) -> None:
        self.allowed = allowed
        self.rows: dict[int, list[int]] = {}

    def __getitem__(self, i: int) -> list[int]:
        if i not in self.rows:
            self.rows[i] = _np().nonzero(self.allowed[i])[0].tolist()
        return self.rows[i]

    def __iter__(self):
        return (self[i] for i in range(len(self.allowed)))


class _Heads(dict):
    """Each query head's :class:`_Head`, made when an entry first needs it."""

    def __init__(self, pr: Any, dO: Any, out: Any, lse: Any) -> None:
        super().__init__()
        self.args = (pr, dO, out, lse)

    def __missing__(self, idx: tuple) -> "_Head":
        pr, dO, out, lse = self.args
        head = self[idx] = _Head(pr, idx, dO, out, lse)
        return head


def _zero_key(key: Any) -> bool:
    return key == 0 if isinstance(key, Fraction) else key == (0, 0)


def algebraic_value(terms, scaled: bool, s_rational: Fraction | None) -> tuple[bool, Fraction | None]:
    """(algebraic, rational value): group Σ c·e^a by exponent; algebraic iff every nonzero
    exponent's coefficients cancel (Lindemann–Weierstrass); the value c_0 (times s when
    ``scaled``) is returned when it is rational, else None (s·c_0, s irrational, c_0 ≠ 0)."""
    groups: dict[Any, Fraction] = {}
    for key, coef in terms:
        groups[key] = groups.get(key, Fraction(0)) + coef
    c0 = Fraction(0)
    for key, total in groups.items():
        if _zero_key(key):
            c0 = total
        elif total:
            return False, None
    if not scaled or c0 == 0:
        return True, c0
    return True, (c0 * s_rational if s_rational is not None else None)


def conditional_backward(pr: Any, dO: Any, out: Any, lse: Any, fmt: BinaryFormat, group: int,
                         kv_batch: tuple, known: dict[str, tuple[Any, Any]] | None = None,
                         arb_cap: int = 1 << 20) -> tuple[Any, Any, Any, Any]:
    """dQ (batch…, L, E), dK and dV (kv_batch…, S, ·) of the recipe on the given O and lse, each
    entry correctly rounded to ``fmt`` (float64 arrays holding the format's values), and a
    function ``ball(name, index, prec)``: the arb ball of one exact entry (for certified reports).
    ``known``: {name: (values, decided)} entries already decided (the float64 enclosures of
    :mod:`symattn.floatref.backfast`); only the others are computed here, each from its own
    row (dQ) or column (dK, dV) of P."""
    np = _np()
    s_rational, s_exact = _scale_parts(pr)
    heads = _Heads(pr, dO, out, lse)
    L, E, S, Ev = pr.Q.shape[-2], pr.Q.shape[-1], pr.K.shape[-2], pr.V.shape[-1]
    result = {"dQ": np.zeros(pr.batch + (L, E)), "dK": np.zeros(kv_batch + (S, E)),
              "dV": np.zeros(kv_batch + (S, Ev))}
    todo = {}
    for name, a in result.items():
        ok = np.zeros(a.shape, dtype=bool)
        if known is not None:
            values, ok = known[name]
            a[ok] = values[ok]
        todo[name] = {(tuple(int(x) for x in k[:-2]), int(k[-2]), int(k[-1])) for k in np.argwhere(~ok)}
    members: dict[tuple, list[tuple]] = {}
    for idx in np.ndindex(*pr.batch):
        members.setdefault(kv_index(idx, group), []).append(idx)
    if known is not None:
        _check_arb_work(todo, S, L * group, arb_cap)
    for round_no, prec in enumerate(_PRECISIONS):
        if round_no:
            _exact_pass(todo, result, heads, members, s_rational, fmt)
        if not any(todo.values()):
            break
        with precision(prec):
            s = _scale_ball(s_exact)
            for name in ("dQ", "dK", "dV"):
                keys = sorted(todo[name])
                rows: dict[tuple, Any] = {}
                for idx, r, _c in keys:
                    if (idx, r) not in rows:
                        rows[(idx, r)] = (heads[idx].row_ball(r, s, prec) if name == "dQ" else
                                          _summed(heads, members[idx], name, r, s, prec))
                entries = [rows[(idx, r)][0, c] for idx, r, c in keys]
                left = set()
                for key, y in zip(keys, round_balls(entries, fmt)):
                    if y is None:
                        left.add(key)
                    else:
                        result[name][key[0] + key[1:]] = y + 0.0
                todo[name] = left
    _sign_pass(todo, result, heads, members, s_rational, s_exact, fmt)
    for name, left in todo.items():
        if left:
            idx, r, c = min(left)
            raise FloatRefError(f"{name}{list(idx + (r, c))} sits on a {fmt.name} rounding boundary as "
                                f"far as {_PRECISIONS[-1]} bits show: it cannot be rounded here")
    return result["dQ"], result["dK"], result["dV"], _ball_function(heads, members, s_exact)


def _check_arb_work(todo: dict, S: int, column: int, cap: int) -> None:
    """The arb balls the entries left need (a row of P per dQ row, a column per dK or dV row)
    under ``cap`` (``backward.MAX_CONDITIONAL_PAIRS``)."""
    rows = len({(idx, r) for idx, r, _ in todo["dQ"]})
    cols = len({(idx, r) for name in ("dK", "dV") for idx, r, _ in todo[name]})
    work = rows * S + cols * column
    if work > cap:
        raise FloatRefError(f"{work:,} arb balls of P are left after the float64 enclosures ({rows:,} rows of dQ, "
                            f"{cols:,} rows of dK and dV near a rounding boundary or exactly 0), over the cap of "
                            f"{cap:,} (MAX_CONDITIONAL_PAIRS): check fewer heads or rows at a time")


def _summed(heads: dict, owners: list, name: str, r: int, s: flint.arb, prec: int) -> flint.arb_mat:
    """Row r of dK or dV summed over the kv head's query heads."""
    total = heads[owners[0]].column_ball(name, r, s, prec)
    for h in owners[1:]:
        total = total + heads[h].column_ball(name, r, s, prec)
    return total


def _ball_function(heads: dict, members: dict, s_exact: Any):
    def ball(name: str, index: tuple, prec: int) -> flint.arb:
        """The ball of entry ``index`` of dQ, dK or dV at ``prec`` bits (call inside precision)."""
        idx, r, c = tuple(index[:-2]), index[-2], index[-1]
        s = _scale_ball(s_exact)
        if name == "dQ":
            return heads[idx].row_ball(r, s, prec)[0, c]
        return _summed(heads, members[idx], name, r, s, prec)[0, c]
    return ball


def round_balls(balls: list, fmt: BinaryFormat) -> list[float | None]:
    """:func:`round_ball` of many balls, most decided in float64 first (formats narrower than
    float64): each ball's midpoint and radius as floats, the radius widened by 2^-50 of the
    midpoint (the two conversions to float and the ends' own roundings) plus the least
    subnormal, and both ends rounded with numpy; where they agree, no rounding boundary of
    ``fmt`` lies in the ball.  The rest go through the exact :func:`round_ball`."""
    np = _np()
    out: list[float | None] = [None] * len(balls)
    rest = range(len(balls))
    if fmt.name != "float64" and balls:
        from symattn.floatref.binary import round_array

        mid = np.array([float(b.mid()) for b in balls])
        rad = np.array([float(b.rad()) for b in balls])
        with np.errstate(invalid="ignore", over="ignore"):
            wide = (rad + np.abs(mid) * 2.0 ** -50) * (1 + 2.0 ** -50) + 2.0 ** -1072
            lo, hi = round_array(mid - wide, fmt), round_array(mid + wide, fmt)
            ok = np.isfinite(mid) & np.isfinite(wide) & (lo == hi) & np.isfinite(hi)
        for i in np.nonzero(ok)[0].tolist():
            out[i] = float(hi[i]) + 0.0
        rest = np.nonzero(~ok)[0].tolist()
    for i in rest:
        y = round_ball(balls[i], fmt)
        out[i] = None if y is None else y + 0.0          # zeros are +0, as floatref's references
    return out


def _exact_pass(todo: dict, result: dict, heads: dict, members: dict, s_rational, fmt) -> None:
    """Round exactly the undecided entries whose value is rational (see the module docstring)."""
    for name, left in todo.items():
        done = set()
        for idx, r, c in left:
            owners = [idx] if name == "dQ" else members[idx]
            terms = [t for h in owners for t in heads[h].terms(name, r, c, s_rational)]
            algebraic, value = algebraic_value(terms, name != "dV", s_rational)
            if algebraic and value is not None:
                result[name][idx + (r, c)] = round_fraction(value, fmt) + 0.0
                done.add((idx, r, c))
        left -= done


def _sign_pass(todo: dict, result: dict, heads: dict, members: dict, s_rational, s_exact, fmt) -> None:
    """Round the entries a finite mask puts within e^(−1e9) of a boundary by the sign of their
    distance to it (:func:`symattn.floatref.ties.sum_by_sign`; dQ and dK need a rational scale)."""
    from symattn.floatref.ties import sum_by_sign

    def exponent(key: Any) -> flint.arb:
        if isinstance(key, Fraction):
            return flint.arb(flint.fmpq(key.numerator, key.denominator))
        x, y = (flint.arb(flint.fmpq(v.numerator, v.denominator)) for v in key)
        return _scale_ball(s_exact) * x + y

    for name, left in todo.items():
        if name != "dV" and s_rational is None:
            continue
        done = set()
        for idx, r, c in left:
            owners = [idx] if name == "dQ" else members[idx]
            terms = [t for h in owners for t in heads[h].terms(name, r, c, s_rational)]
            y = sum_by_sign(terms, exponent, Fraction(1) if name == "dV" else s_rational, fmt)
            if y is not None:
                result[name][idx + (r, c)] = y + 0.0
                done.add((idx, r, c))
        left -= done


def conditioning(pr: Any, dO: Any, P: Any, out: Any) -> tuple[Any, dict[str, Any]]:
    """Per-row condition numbers of the backward and each gradient entry's scale, in float64
    (estimates, not proved).  With |dP|_ij = Σ_c |dO_ic·V_jc| and |D|_i = Σ_c |dO_ic·O_ic| (the
    products dP − D is summed from), κ_i = Σ_j P_ij·(|dP|_ij + |D|_i) / Σ_j P_ij·|dP_ij − D_i|:
    how much row i's dP − D cancels (∞ when it cancels exactly, 1 when nothing does; a row with
    no key or dO = 0 is 1).  The scales are each entry's sum of the absolute values of its terms
    (s·Σ_j P_ij·(|dP|_ij + |D|_i)·|K_jc| for dQ, and so on), the size a float kernel's rounding
    errors have.  ``P``: the probabilities (0 where blocked), ``out``: the O that D is taken from."""
    np = _np()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        o = np.nan_to_num(out)
        T = np.swapaxes                                       # matmul, not einsum: BLAS
        dP = dO @ T(pr.V, -1, -2)
        D = np.einsum("...lc,...lc->...l", dO, o)
        absterm = np.abs(dO) @ T(np.abs(pr.V), -1, -2)       # in place below: fewer L × S passes
        absterm += np.einsum("...lc,...lc->...l", np.abs(dO), np.abs(o))[..., None]
        absterm *= P
        dP -= D[..., None]
        np.abs(dP, out=dP)
        dP *= P                                               # |P·(dP − D)| = P·|dP − D| (P ≥ 0)
        num, den = absterm.sum(axis=-1), dP.sum(axis=-1)
        kappa = np.where(num == 0, 1.0, np.where(den == 0, np.inf, num / np.where(den == 0, 1.0, den)))
        s = pr.scale_f
        scales = {"dQ": s * (absterm @ np.abs(pr.K)), "dK": s * (T(absterm, -1, -2) @ np.abs(pr.Q)),
                  "dV": T(P, -1, -2) @ np.abs(dO)}
    return kappa, scales


def probabilities(pr: Any, lse: Any) -> Any:
    """P = e^(t − lse) in float64 (0 where blocked), for :func:`conditioning`."""
    np = _np()
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        t = pr.scale_f * (pr.Q @ np.swapaxes(pr.K, -1, -2))
        if pr.additive is not None:
            t = t + pr.additive
        P = np.exp(t - np.asarray(lse, dtype=np.float64)[..., None])
        if pr.allowed is not None:
            P = np.where(pr.allowed, P, 0.0)
    return np.nan_to_num(P, nan=0.0, posinf=0.0)
