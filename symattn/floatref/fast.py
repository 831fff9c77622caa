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

import math
from dataclasses import dataclass

from symattn.floatref import masks

U = 2.0 ** -53
EXP_REL = 8 * U          # assumed: |fl(exp(x)) − exp(x)| ≤ 8u·exp(x) + EXP_ABS (same for expm1)
EXP_ABS = 2.0 ** -1070   # 16 float64 subnormal units
TINY = 2.0 ** -1000      # absorbs every underflow (far below any float32/16 subnormal)
_INFLATE = 1 + 2.0 ** -20
#: keys per partial sum: sums and W·V carry γ_{B + δ + 1} instead of γ_S, δ the additions
#: after a block (:func:`_depth`); 64: at S = 4,096, γ_75 where 32 blocks of 128 added in
#: turn gave γ_161 (with step 2's tighter e_x, 67 rows left to the double-double step
#: instead of 131), and BLAS is as fast; fast64 keeps its own 256)
SUM_BLOCK = 64
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
        self.Ev = V.shape[1]
        self.starts = np.arange(0, self.S, SUM_BLOCK)
        self.Vb = [np.ascontiguousarray(V[a:a + SUM_BLOCK]) for a in self.starts]   # key blocks
        absV = np.abs(V)
        self.absV_sum = absV.sum(axis=0)
        # Σ w̃|v| by a float32 product (half a float64 one) where nothing can overflow float32
        # (w̃ ≤ 1: every partial sum stays below 2·Σ|v|); else in float64
        small = self.S * 2.0 ** -24 < 0.5 and float(self.absV_sum.max(initial=0.0)) < 2.0 ** 125
        self.absV = absV.astype(np.float32) if small else absV


def _abs_sums(Wm, h: _Head):
    """A ≥ Σ_j w̃_j|v_jc| per row and column (docs/floatref.md, step 7).  In float32, with w' and
    a' the float32 roundings of w̃ ≤ 1 and |v| and the sums' γ_S (float32 u = 2^-24; every
    product and addition at most 2^-126 off when it underflows, flushed or not):
    Σ w̃|v| ≤ [(Ã + 2S·2^-126)/(1 − γ_S) + 2^-150(S + Σ|v|)]/(1 − 2^-24)²; in float64,
    Σ w̃|v| ≤ Ã/(1 − γ_S) (underflow inside _up's 2^-1000)."""
    import numpy as np

    S = h.S
    if h.absV.dtype == np.float64:
        return _up((Wm @ h.absV) / (1 - gamma(S)))
    u32 = 2.0 ** -24
    g32 = S * u32 / (1 - S * u32)
    A = (Wm.astype(np.float32) @ h.absV).astype(np.float64)
    A += 2 * S * 2.0 ** -126
    A /= 1 - g32
    A += (2.0 ** -150 * (S + h.absV_sum))[None, :]
    return _up(A / (1 - u32) ** 2)


def _tree_sum(parts):
    """Σ over axis 0 (overwriting ``parts``) as a balanced tree: each entry of the result is
    a sum in which every term went through at most ⌈log₂ n⌉ additions, where adding the n
    parts in turn puts the first through n − 1."""
    n = parts.shape[0]
    while n > 1:
        half = n // 2
        parts[:half] += parts[n - half:n]              # n odd: the middle part waits a level
        n -= half
    return parts[0]


def _group(nb: int) -> int:
    """Block products summed in turn per group (in cache), the groups then by a tree."""
    return max(1, math.isqrt(nb - 1) + 1) if nb > 1 else 1


def _depth(nb: int) -> int:
    """The additions any term goes through in :func:`_grouped_products` over nb blocks
    (also at least those of :func:`_tree_sum` over nb parts)."""
    g = _group(nb)
    return max(g - 1 + (-(-nb // g) - 1).bit_length(), (nb - 1).bit_length() if nb > 1 else 0)


def _grouped_products(Wm, h: _Head):
    """Σ_b W̃_b·V_b over the key blocks (views of W̃: BLAS takes the row stride): in turn
    within groups of :func:`_group` blocks, then a tree over the groups, so each entry
    carries γ_{B + _depth(nb)} (at S = 4,096 and B = 64: γ_74, where all 64 in turn give
    γ_127; a tree over all of them writes 64 partial products and is slower)."""
    import numpy as np

    B, nb = SUM_BLOCK, len(h.Vb)
    g = _group(nb)
    parts = np.empty((-(-nb // g), Wm.shape[0], h.Ev))
    for k, first in enumerate(range(0, nb, g)):
        np.matmul(Wm[:, first * B:(first + 1) * B], h.Vb[first], out=parts[k])
        for b in range(first + 1, min(nb, first + g)):
            parts[k] += Wm[:, b * B:(b + 1) * B] @ h.Vb[b]
    return _tree_sum(parts)


def _scores(Q, h: _Head):
    """D̃ ≈ Q·Kᵀ, a per-row bound e_D on |D̃ − D| and cs ≥ ‖q‖·max‖k‖ ≥ |d| (docs/floatref.md,
    step 1, with |d̃| ≤ (1 + u)(cs + e₂) for the last addition's rounding)."""
    D, e2, cs = _split_scores(Q, h)
    if e2 is None:
        return D, _up(gamma(Q.shape[1]) * cs), cs
    return D, _up(e2 + U * (1 + U) * (cs + e2)), cs


def _split_scores(Q, h: _Head):
    """D̃ = fl(Q_h·K_hᵀ + R̃) with Q_h·K_hᵀ exact and e₂ ≥ |R̃ − R| per row, and cs ≥ ‖q‖·max‖k‖
    (docs/floatref.md, step 1); e₂ is None where the exponents are too far apart for the
    split, and D̃ is then the plain product (error γ_E·cs)."""
    import numpy as np

    E = Q.shape[1]
    qn = np.sqrt(np.einsum("ij,ij->i", Q, Q))
    norm = (1 + gamma(E + 2)) ** 2                            # covers the rounding of the norms
    cs = _up(qn * h.kn_max * norm)                           # ≥ ‖q‖·max‖k‖ ≥ |q·k|
    Qh, Ql, eq = _split(Q, h.beta)
    lo_grid = int((eq.min() if eq.size else 0)) + int(h.ek.min()) - 2 * h.beta
    hi_grid = int((eq.max() if eq.size else 0)) + int(h.ek.max()) + E.bit_length()
    if not (lo_grid >= -1022 and hi_grid <= 1000):          # the plain product and bound
        return Q @ h.K.T, None, cs
    # Qh·Khᵀ is exact (every partial sum an integer below 2^53 on the grid 2^(eq+ek−2β));
    # the rest, [Qh | Ql]·[Kl | K]ᵀ, is small: γ_2E·(‖qh‖‖kl‖ + ‖ql‖‖k‖); then one addition
    D = Qh @ h.Kh.T
    D += np.concatenate([Qh, Ql], axis=1) @ h.KlK.T
    qhn = np.sqrt(np.einsum("ij,ij->i", Qh, Qh))
    qln = np.sqrt(np.einsum("ij,ij->i", Ql, Ql))
    return D, _up(gamma(2 * E) * (qhn * h.kln_max + qln * h.kn_max) * norm), cs


def _score_bounds(e2, cs, P, s: float, E: int):
    """(e_D, D_m) per row: |D̃ − D| ≤ e_D and |d̃| ≤ D_m, read off the row's largest |P̃| = P,
    P̃ = fl(s̃·d̃) (docs/floatref.md, step 2): |d̃| ≤ (P + 2^-1074)(1 + 2u)/|s̃|, where the
    Cauchy–Schwarz cs is often 4× the largest score; e_D = e₂ + u·D_m for the last addition."""
    import numpy as np

    if e2 is None:                                        # the plain product
        eD = _up(gamma(E) * cs)
        return eD, _up(cs + eD)
    Dm = _up((1 + U) * (cs + e2))
    if s != 0:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            read = _up((P + 2.0 ** -1074) * (1 + 2 * U) / abs(s))
        Dm = np.where(read < Dm, read, Dm)                # NaN or inf: keep cs
    return _up(e2 + U * Dm), Dm


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

    D, e2, cs = _split_scores(Q, h)
    T = D
    T *= s                                                # P̃ = fl(s̃·d̃)
    top, bottom = T.max(axis=1), T.min(axis=1)
    Pmax = np.maximum(np.abs(top), np.abs(bottom))       # the row's largest |P̃|, exactly
    eD, Dm = _score_bounds(e2, cs, Pmax, s, Q.shape[1])
    # t = s·d + m: |t̃ − t| ≤ |s̃|e_D + |s̃ − s|(|d̃| + e_D) + u|P̃| + u|t̃| per entry
    E0 = _up(abs(s) * eD + ds * (Dm + 2 * eD) + U * Pmax)
    keep = allowed
    overflow = np.zeros(Q.shape[0], dtype=bool)
    if additive is not None:
        # m − c_m = mh + ml exactly (masks.shift); t̃ = fl(fl(s̃·d̃) + mh), ml only in the bound
        mh, ml, ok = masks.shift(additive, allowed)
        T += mh
        overflow |= ~ok | ~(Pmax < 2.0 ** 900)               # then fl(s̃·d̃ + mh) cannot overflow
    if allowed is not None:
        np.putmask(T, ~allowed, -np.inf)
    c = top if additive is None and allowed is None else T.max(axis=1)
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
    # no mask: RN is monotonic, so min_j fl(t̃_j − c) = fl(min_j t̃_j − c), without a pass
    xmin = bottom - c if keep is None else np.min(X, axis=1, where=keep, initial=0.0)
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
    Z = _tree_sum(np.add.reduceat(Wm, h.starts, axis=1).T)    # block sums, then the tree
    gS = gamma(min(SUM_BLOCK, S) + _depth(len(h.starts)) + 1)
    # Σ w̃ ≤ Z̃/(1 − gS); R_Z = (gS + G)·Z̃/(1 − gS) + S·a(1 + G)
    RZ = _up((gS + G) * Z / (1 - gS) + S * Aabs)
    denom = np.nextafter(Z - RZ, -np.inf)
    good = (denom > 0) & np.isfinite(RZ) & ~overflow & (eX < 0.5)
    denom = np.where(good, denom, np.nan)
    # output numerators in key blocks; an upper bound on Σ w̃|v| in one product
    N = _grouped_products(Wm, h)
    A = _abs_sums(Wm, h)
    # p̃ = fl(w̃/Z̃): |p − p̃| ≤ p̃·[(Z̃G + R_Z)(1+2u)²/denom + u] + a(1+G)(1+2u)/denom;
    # 3u more (and _up) covers computing p̃ ± radius in round-to-nearest
    alpha = _up((Z * G + RZ) * (1 + 2 * U) ** 2 / denom + 4 * U)
    gam = _up(Aabs * (1 + 2 * U) / denom)
    Pm = Wm
    Pm /= Z[:, None]
    Rp = Pm * alpha[:, None]
    Rp += gam[:, None]
    # o = (Σ w·v)/Z: |Ñ − Σw̃v| ≤ gS·Σw̃|v|; |Σw̃v − Σwv| ≤ G·Σw̃|v| + a(1 + G)Σ|v|, with
    # Σw̃|v| ≤ A and Σ|v| ≤ absV_sum·(1 + 2γ_S)
    gA = 1 + 2 * gamma(S)
    RN = _up((gS + G[:, None]) * A + Aabs[:, None] * h.absV_sum[None, :] * gA)
    Om = N / Z[:, None]
    aO = np.abs(Om)
    Ro = _up((RN + aO * (1 + 2 * U) * RZ[:, None]) / denom[:, None] * (1 + 2 * U) + 4 * U * aO)
    bad = ~good
    if bad.any():
        Rp[bad] = np.inf
        Ro[bad] = np.inf
    Ro = np.where(np.isfinite(Ro), Ro, np.inf)
    return Pm, Rp, Om, Ro
