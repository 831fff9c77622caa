"""Attention in float64 with a rigorous error bound on every entry.

Used by :func:`symattn.floatref.correctly_rounded` to decide most entries
without arb balls.  Each step computes a float64 value and a bound on its
distance from the exact real value; docs/floatref.md derives every bound.
u = 2^-53 is the unit roundoff, γ_n = n·u/(1 − n·u).  Assumed and stated:
numpy's float64 ``exp`` and ``expm1`` are within EXP_REL (8u, i.e. 4 ulp) of the
true value, plus EXP_ABS for subnormal results; IEEE + − × ÷ √ are correctly
rounded.  Every bound is computed in float64 from non-negative terms and
then passed through :func:`_up` (× (1 + 2^-20), + 2^-1000), which covers
the rounding of computing the bound itself (fewer than 2^20 operations of
relative error u each) and every underflow (each at most 2^-1075).
"""

from __future__ import annotations

from dataclasses import dataclass

from symattn.floatref import masks

U = 2.0 ** -53
EXP_REL = 8 * U          # assumed: |fl(exp(x)) − exp(x)| ≤ 8u·exp(x) + EXP_ABS (same for expm1)
EXP_ABS = 2.0 ** -1070   # 16 float64 subnormal units
TINY = 2.0 ** -1000      # absorbs every underflow (far below any float32/16 subnormal)
_INFLATE = 1 + 2.0 ** -20
#: keys per partial sum: sums and W·V carry γ_{B + S/B + 1} instead of γ_S (128: at S = 4,096,
#: γ_161 against 256's γ_273 leaves 131 rows to the double-double step instead of 184, and
#: BLAS is as fast; fast64 keeps its own 256)
SUM_BLOCK = 128
#: rows per block: keeps the (rows × S) float64 temporaries near 4 MB each (peak memory a few
#: times the inputs and the result; measured in tests/test_hostile_arrays.py)
BLOCK_ENTRIES = 1 << 19


def gamma(n: int) -> float:
    """γ_n = n·u / (1 − n·u), inflated (the bound of an n-term float sum or dot product)."""
    return _up(n * U / (1 - n * U))


def _up(x):
    """An upper bound of a non-negative quantity computed in float64 (see the module docstring)."""
    return x * _INFLATE + TINY


@dataclass
class Enclosures:
    """Midpoints and radii (float64) of the weights and output of one (L × S) head."""

    weights: object       # (L, S) midpoints
    weights_rad: object   # (L, S) radii: |exact − midpoint| ≤ radius
    output: object        # (L, Ev)
    output_rad: object    # (L, Ev)
    empty: object         # (L,) True where every key is blocked


def enclose(Q, K, V, allowed, additive, scale: float, scale_err: float) -> Enclosures:
    """Enclosures of softmax(scale·Q·Kᵀ + additive, blocked → −inf)·V for float64 arrays.

    ``allowed``: (L, S) bool or None; ``additive``: (L, S) finite float64 or None;
    ``scale``: the float64 used; ``scale_err``: a bound on |scale − exact scale|.
    Every radius already covers the rounding of mid ± radius (see docs/floatref.md)."""
    import numpy as np

    L, S, Ev = Q.shape[0], K.shape[0], V.shape[1]
    W = np.empty((L, S)), np.empty((L, S))
    Out = np.empty((L, Ev)), np.empty((L, Ev))
    empty = np.zeros(L, dtype=bool)
    step = max(1, BLOCK_ENTRIES // max(S, Ev, 1))
    head = _Head(K, V)
    for a in range(0, L, step):
        b = min(L, a + step)
        rows = _block(Q[a:b], head, None if allowed is None else allowed[a:b],
                      None if additive is None else additive[a:b], scale, scale_err)
        W[0][a:b], W[1][a:b], Out[0][a:b], Out[1][a:b], empty[a:b] = rows
    return Enclosures(W[0], W[1], Out[0], Out[1], empty)


def _beta(E: int) -> int:
    """Bits per split slice: E products of two β-bit integers sum below 2^53."""
    return (53 - max(1, E - 1).bit_length()) // 2


def _split(A, beta: int):
    """A = hi + lo exactly, hi on a per-row grid 2^(e_i − β) (|A_i| < 2^e_i); and the exponents e_i."""
    import numpy as np

    e = np.frexp(np.abs(A).max(axis=1))[1]
    hi = np.ldexp(np.rint(np.ldexp(A, (beta - e)[:, None])), (e - beta)[:, None])
    return hi, A - hi, e


class _Head:
    """What every block of one head reuses: K split for exact scores, [V | |V|] in key blocks."""

    def __init__(self, K, V) -> None:
        import numpy as np

        E = K.shape[1]
        self.S = K.shape[0]
        self.kn = np.sqrt(np.einsum("ij,ij->i", K, K))      # ‖k_j‖₂
        self.kn_max = float(self.kn.max()) if self.kn.size else 0.0
        self.beta = _beta(E)
        self.K = K
        self.Kh, Kl, self.ek = _split(K, self.beta)
        self.KlK = np.concatenate([Kl, K], axis=1)
        self.kln_max = float(np.sqrt(np.einsum("ij,ij->i", Kl, Kl)).max())
        VV = np.concatenate([V, np.abs(V)], axis=1)
        self.Ev = V.shape[1]
        self.VVb = np.ascontiguousarray(_blocks(VV.T).transpose(0, 2, 1))   # (nb, B, 2Ev)
        self.absV_sum = np.abs(V).sum(axis=0)


def _blocks(M):
    """(rows, S) → (nb, rows, SUM_BLOCK), the keys cut in blocks (zero-padded: zeros add no error)."""
    import numpy as np

    rows, S = M.shape
    nb = -(-S // SUM_BLOCK)
    if nb * SUM_BLOCK != S:
        M = np.concatenate([M, np.zeros((rows, nb * SUM_BLOCK - S))], axis=1)
    return np.ascontiguousarray(M.reshape(rows, nb, SUM_BLOCK).transpose(1, 0, 2))   # BLAS wants contiguous


def _scores(Q, h: _Head):
    """D̃ ≈ Q·Kᵀ and a per-row bound e_D on |D̃ − D| (docs/floatref.md, step 1)."""
    import numpy as np

    E = Q.shape[1]
    qn = np.sqrt(np.einsum("ij,ij->i", Q, Q))
    norm = (1 + gamma(E + 2)) ** 2                            # covers the rounding of the norms
    cs = _up(qn * h.kn_max * norm)                           # ≥ ‖q‖·max‖k‖ ≥ |q·k|
    Qh, Ql, eq = _split(Q, h.beta)
    lo_grid = int((eq.min() if eq.size else 0)) + int(h.ek.min()) - 2 * h.beta
    hi_grid = int((eq.max() if eq.size else 0)) + int(h.ek.max()) + E.bit_length()
    if lo_grid >= -1022 and hi_grid <= 1000:
        # Qh·Khᵀ is exact (every partial sum an integer below 2^53 on the grid 2^(eq+ek−2β));
        # the rest, [Qh | Ql]·[Kl | K]ᵀ, is small: γ_2E·(‖qh‖‖kl‖ + ‖ql‖‖k‖); then one addition
        D = Qh @ h.Kh.T
        D += np.concatenate([Qh, Ql], axis=1) @ h.KlK.T
        qhn = np.sqrt(np.einsum("ij,ij->i", Qh, Qh))
        qln = np.sqrt(np.einsum("ij,ij->i", Ql, Ql))
        e2 = _up(gamma(2 * E) * (qhn * h.kln_max + qln * h.kn_max) * norm)
        eD = _up(e2 + U * (1 + U) * (cs + e2))
    else:                                                    # exponents too far apart: the plain bound
        D = Q @ h.K.T
        eD = _up(gamma(E) * cs)
    return D, eD, cs


def _block(Q, h: _Head, allowed, additive, s, ds):
    """One block of rows; per-row bounds (docs/floatref.md has the derivation)."""
    import numpy as np

    rows = Q.shape[0]
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        X, eX, overflow = _shifted(Q, h, allowed, additive, s, ds)
        empty = np.zeros(rows, dtype=bool) if allowed is None else ~allowed.any(axis=1)
        Pm, Rp, Om, Ro = _normalised(X, eX, overflow, h)
    return Pm, Rp, Om, Ro, empty


def _shifted(Q, h: _Head, allowed, additive, s, ds):
    """x̃ = t̃ − c per entry (t = s·d + m, c the row's largest t̃; blocked keys −inf), a per-row
    bound e_x on |x̃ − x|, and the rows that overflow (they go to the arb path whole)."""
    import numpy as np

    D, eD, cs = _scores(Q, h)
    # t = s·d + m: |t̃ − t| ≤ |s̃|e_D + |s̃ − s|(|d̃| + e_D) + u|P| + u|t̃| per entry
    as_ = abs(s)
    Pmax = _up(as_ * (cs + eD) * (1 + U))
    E0 = _up(as_ * eD + ds * (cs + 2 * eD) + U * Pmax)
    T = D
    T *= s
    keep = allowed
    overflow = np.zeros(Q.shape[0], dtype=bool)
    if additive is not None:
        # m − c_m = mh + ml exactly (masks.shift); t̃ = fl(fl(s̃·d̃) + mh), ml only in the bound
        mh, ml, ok = masks.shift(additive, allowed)
        T += mh
        overflow |= ~ok | ~(Pmax < 2.0 ** 900)               # then fl(s̃·d̃ + mh) cannot overflow
    if allowed is not None:
        np.putmask(T, ~allowed, -np.inf)
    c = T.max(axis=1)
    overflow |= ~np.isfinite(c)                           # these rows go to the arb path whole
    c = np.where(np.isfinite(c), c, 0.0)
    if additive is None:
        Tmax = _up(Pmax * (1 + U))
        eT = _up(E0 + U * Tmax)
    else:
        # keys with t̃ below c − θ have t − c < −800 (docs/floatref.md, "Huge finite masks"):
        # set aside like blocked keys (w̃ = 0, w < e^-800 < EXP_ABS); the bound uses the rest
        far = T < masks.far_below(c, E0, Pmax)[:, None]
        keep = ~far if allowed is None else allowed & ~far
        np.putmask(T, far, -np.inf)
        tmin = np.min(T, axis=1, where=keep, initial=0.0)
        Tmax = np.maximum(np.abs(c), np.abs(tmin))        # every kept t̃ lies in [tmin, c]
        mlmax = 0.0 if ml is None else np.max(np.abs(ml), axis=1, where=keep, initial=0.0)
        eT = _up(E0 + U * Tmax + mlmax)
    overflow |= ~np.isfinite(eT)
    X = T
    X -= c[:, None]
    xmin = X.min(axis=1) if keep is None else np.min(X, axis=1, where=keep, initial=0.0)
    xm = np.minimum(-xmin, 800.0)                         # x̃ < −800: w̃ = 0 and w < 2^-1070
    return X, _up(eT + U * xm), overflow


def _normalised(X, eX, overflow, h: _Head):
    """The weights p = e^x / Z and the output o = Σ p·v from x̃ (overwritten), with radii;
    rows whose bounds fail get infinite radii."""
    import numpy as np

    S = h.S
    # w = e^x; |w − w̃| ≤ w̃·G + a(1 + G), G = (expm1(e_x) + ε)/(1 − ε)² per row
    G = _up((np.expm1(eX) + EXP_REL) / (1 - EXP_REL) ** 2)
    Aabs = _up(EXP_ABS * (1 + G))
    Wm = np.exp(X, out=X)
    Wb = _blocks(Wm)
    Z = Wb.sum(axis=2).sum(axis=0)
    gS = gamma(min(SUM_BLOCK, S) + Wb.shape[0] + 1)      # zero padding adds no error
    # Σ w̃ ≤ Z̃/(1 − gS); R_Z = (gS + G)·Z̃/(1 − gS) + S·a(1 + G)
    RZ = _up((gS + G) * Z / (1 - gS) + S * Aabs)
    denom = np.nextafter(Z - RZ, -np.inf)
    good = (denom > 0) & np.isfinite(RZ) & ~overflow & (eX < 0.5)
    denom = np.where(good, denom, np.nan)
    # output numerators and Σ w̃|v| in one blocked product
    NA = Wb[0] @ h.VVb[0]
    for b in range(1, Wb.shape[0]):                      # block by block: nb − 1 more additions
        NA += Wb[b] @ h.VVb[b]
    N, A = NA[:, :h.Ev], NA[:, h.Ev:]
    # p̃ = fl(w̃/Z̃): |p − p̃| ≤ p̃·[(Z̃G + R_Z)(1+2u)²/denom + u] + a(1+G)(1+2u)/denom;
    # 3u more (and _up) covers computing p̃ ± radius in round-to-nearest
    alpha = _up((Z * G + RZ) * (1 + 2 * U) ** 2 / denom + 4 * U)
    gam = _up(Aabs * (1 + 2 * U) / denom)
    Pm = Wm
    Pm /= Z[:, None]
    Rp = Pm * alpha[:, None]
    Rp += gam[:, None]
    # o = (Σ w·v)/Z: |Ñ − Σw̃v| ≤ gS·Σw̃|v|; |Σw̃v − Σwv| ≤ G·Σw̃|v| + a(1 + G)Σ|v|
    gA = 1 + 2 * gamma(S)
    RN = _up((gS + G[:, None]) * A * gA + Aabs[:, None] * h.absV_sum[None, :] * gA)
    Om = N / Z[:, None]
    aO = np.abs(Om)
    Ro = _up((RN + aO * (1 + 2 * U) * RZ[:, None]) / denom[:, None] * (1 + 2 * U) + 4 * U * aO)
    bad = ~good
    if bad.any():
        Rp[bad] = np.inf
        Ro[bad] = np.inf
    Ro = np.where(np.isfinite(Ro), Ro, np.inf)
    return Pm, Rp, Om, Ro
