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

U = 2.0 ** -53
EXP_REL = 8 * U          # assumed: |fl(exp(x)) − exp(x)| ≤ 8u·exp(x) + EXP_ABS (same for expm1)
EXP_ABS = 2.0 ** -1070   # 16 float64 subnormal units
TINY = 2.0 ** -1000      # absorbs every underflow (far below any float32/16 subnormal)
_INFLATE = 1 + 2.0 ** -20
#: keys per partial sum: sums and W·V carry γ_{B + S/B + 1} instead of γ_S
SUM_BLOCK = 64
#: rows per block: keeps the (rows × S) float64 temporaries near 16 MB each
BLOCK_ENTRIES = 1 << 21


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
    ``scale``: the float64 used; ``scale_err``: a bound on |scale − exact scale|."""
    import numpy as np

    L, S, Ev = Q.shape[0], K.shape[0], V.shape[1]
    W = np.empty((L, S)), np.empty((L, S))
    O = np.empty((L, Ev)), np.empty((L, Ev))
    empty = np.zeros(L, dtype=bool)
    step = max(1, BLOCK_ENTRIES // max(S, Ev, 1))
    qn = np.sqrt(np.einsum("ij,ij->i", Q, Q))     # ‖q_i‖₂, ‖k_j‖₂: Σ|q||k| ≤ ‖q‖·‖k‖
    kn = np.sqrt(np.einsum("ij,ij->i", K, K))
    absV = np.abs(V)
    for a in range(0, L, step):
        b = min(L, a + step)
        rows = _block(Q[a:b], K, V, absV, qn[a:b], kn,
                      None if allowed is None else allowed[a:b],
                      None if additive is None else additive[a:b], scale, scale_err)
        W[0][a:b], W[1][a:b], O[0][a:b], O[1][a:b], empty[a:b] = rows
    return Enclosures(W[0], W[1], O[0], O[1], empty)


def _blocks(M):
    """(rows, S) → (nb, rows, SUM_BLOCK), the keys cut in blocks (zero-padded: zeros add no error)."""
    import numpy as np

    rows, S = M.shape
    nb = -(-S // SUM_BLOCK)
    if nb * SUM_BLOCK != S:
        M = np.concatenate([M, np.zeros((rows, nb * SUM_BLOCK - S))], axis=1)
    return M.reshape(rows, nb, SUM_BLOCK).transpose(1, 0, 2)


def _block(Q, K, V, absV, qn, kn, allowed, additive, s, ds):
    import numpy as np

    E, S = Q.shape[1], K.shape[0]
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        # scores d = q·k: |d̃ − d| ≤ γ_E Σ|q||k| ≤ γ_E ‖q‖‖k‖ (any order, FMA or not)
        D = Q @ K.T
        eD = _up(gamma(E) * np.multiply.outer(qn, kn) * (1 + gamma(E + 2)))
        # t = s·d + m; t̃ = fl(fl(s̃·d̃) + m)
        P = s * D
        T = P if additive is None else P + additive
        eT = _up(abs(s) * eD + ds * (np.abs(D) + eD) + U * np.abs(P) + U * np.abs(T))
        if allowed is not None:
            T = np.where(allowed, T, -np.inf)
            eT = np.where(allowed, eT, 0.0)
        # the shift c = max t̃ (any float is a valid shift; x = t − c exactly, x̃ = fl(t̃ − c))
        empty = np.zeros(T.shape[0], dtype=bool) if allowed is None else ~allowed.any(axis=1)
        finite = np.isfinite(T) if allowed is None else np.isfinite(np.where(allowed, T, 0.0))
        overflow = ~finite.all(axis=1)          # these rows go to the arb path whole
        T = np.where(finite | (T == -np.inf), T, 0.0)
        c = T.max(axis=1, keepdims=True)
        c = np.where(np.isfinite(c), c, 0.0)
        X = T - c
        eX = _up(eT + U * np.abs(np.where(np.isfinite(X), X, 0.0)))
        # w = e^x; w̃ = fl(exp(x̃)); |w − w̃| ≤ w̃·G + EXP_ABS·(1 + G), G ≥ e^eX/(1 − ε) − 1
        Wm = np.exp(X)
        G = _up((np.expm1(eX) + EXP_REL) / (1 - EXP_REL) ** 2)
        Rw = _up(Wm * G + EXP_ABS * (1 + G))
        if allowed is not None:
            Rw = np.where(allowed, Rw, 0.0)      # blocked: exactly 0
        # Z = Σ w, summed in blocks of SUM_BLOCK keys then over the blocks:
        # |Z − Z̃| ≤ γ_{B+nb+1}·Z̃/(1 − γ) + Σ R_w (two-level sum of non-negative terms)
        Wb = _blocks(Wm)
        Z = Wb.sum(axis=2).sum(axis=0)[:, None]
        gS = gamma(SUM_BLOCK + Wb.shape[0] + 1)
        RZ = _up(gS * Z / (1 - gS) + Rw.sum(axis=1, keepdims=True))
        denom = Z - RZ                          # a lower bound of Z (after the outward step)
        denom = np.nextafter(denom, -np.inf)
        good = (denom > 0) & np.isfinite(RZ)
        denom = np.where(good, denom, np.nan)
        # p = w/Z; |p − p̃| ≤ (R_w + p̃(1+u)·R_Z)/(Z̃ − R_Z)·(1+u) + u·p̃
        Pm = Wm / Z
        Rp = _up((Rw + Pm * (1 + 2 * U) * RZ) / denom * (1 + 2 * U) + U * Pm)
        # o = (Σ w·v)/Z; Ñ in blocks: |Ñ − Σ w̃v| ≤ γ_{B+nb+1} Σ w̃|v|; |Σ w̃v − Σ wv| ≤ max_j G_j·Σ w̃|v| + EXP_ABS(1+G)Σ|v|
        N = np.matmul(Wb, _blocks(V.T).transpose(0, 2, 1)).sum(axis=0)   # Σ over blocks of W_b·V_b
        A = Wm @ absV
        Gmax = G.max(axis=1, keepdims=True) if allowed is None else \
            np.where(allowed, G, 0.0).max(axis=1, keepdims=True)
        gA = 1 + 2 * gamma(S)                    # Σ w̃|v| ≤ A·(1 + 2γ_S): A is a plain product
        RN = _up(gS * A * gA + Gmax * A * gA + EXP_ABS * (1 + Gmax) * absV.sum(axis=0)[None, :] * gA)
        Om = N / Z
        Ro = _up((RN + np.abs(Om) * (1 + 2 * U) * RZ) / denom * (1 + 2 * U) + U * np.abs(Om))
        bad = ~good[:, 0] | overflow
        Rp = np.where(bad[:, None] | ~np.isfinite(Rp), np.inf, Rp)
        Ro = np.where(bad[:, None] | ~np.isfinite(Ro), np.inf, Ro)
    return Pm, Rp, Om, Ro, empty
