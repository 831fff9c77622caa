"""The plain backward's gradients from the enclosures of P, dP and D, a block of rows at a time.

The arithmetic and the bounds are :func:`symattn.floatref.backfast.grads`' (docs/floatref.md,
"Error analysis of the fast backward", steps 3–5), entry by entry: X = dP̃ − D̃ (R_X = u|X̃| +
e_dP + R_D), dS = P̃∘X̃ (R_S = P̃·R_X + R_P·(|X̃| + R_X) + u|dS̃|), dQ = s·dS·K row by row.  What
changes is the order: every (rows × S) pass runs on a block that stays in the L2 cache, and
dK = s·dSᵀ·Q and dV = Pᵀ·dO are summed over the blocks (M += dS_bᵀ·Q_b).  A sum over L rows
done as BLAS sums of b rows added up block by block has depth at most b + L/b ≤ L + 1, so its
error is within γ_{L+1}·|A|ᵀ·|B|, the bound used (backfast's γ_L for one product); the radius
products are summed the same way, and their own rounding is inside ``_upi``'s 2^-20.
"""

from __future__ import annotations

from typing import Any

from symattn.floatref.backfast import _product, _up, _upi
from symattn.floatref.fast import U, gamma

#: rows × S entries per block (each float64 temporary 256 KiB)
BLOCK_ENTRIES = 1 << 15


def _np():
    import numpy

    return numpy


def grads(Q, K, V, dO, P, RP, Dm, RD, s: float, ds: float, dP: tuple, zero_rows: Any, out_mid: Any) -> dict:
    """Midpoints and radii of dQ, dK, dV and dS of one head, as backfast.grads (``dP`` = (dP̃,
    e_dP per entry) is overwritten with X̃), and "condition": (κ, scales) as
    :func:`symattn.floatref.conditional.conditioning` from the same blocks (``out_mid``: the output's
    midpoints; dP − D from X̃, so a row proved constant has κ = ∞ exactly)."""
    np = _np()
    L, S = P.shape
    X, edP = dP
    dS, RS = np.empty((L, S)), np.empty((L, S))
    dQ = [np.empty((L, K.shape[1])), np.empty((L, K.shape[1]))]
    MK, NK = np.zeros((S, Q.shape[1])), np.zeros((S, Q.shape[1]))
    MV, NV = np.zeros((S, dO.shape[1])), np.zeros((S, dO.shape[1]))
    aQ, aO, aV, aK = np.abs(Q), np.abs(dO), np.abs(V), np.abs(K)
    Dabs = np.einsum("lc,lc->l", aO, np.abs(np.nan_to_num(out_mid)))
    num, den = np.empty(L), np.empty(L)
    scales = {"dQ": np.empty((L, K.shape[1])), "dK": np.zeros((S, Q.shape[1])), "dV": np.zeros((S, dO.shape[1]))}
    g = gamma(L + 1)
    step = max(1, BLOCK_ENTRIES // max(S, 1))
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for a in range(0, L, step):
            b = min(L, a + step)
            x, p, rp = X[a:b], P[a:b], RP[a:b]
            x -= Dm[a:b, None]
            aX = np.abs(x)
            RX = aX * U                                     # dP̃ − D̃ and its rounding
            RX += edP[a:b]
            RX += RD[a:b, None]
            _upi(RX)
            if zero_rows is not None:
                z = zero_rows[a:b]
                if z.any():
                    x[z], aX[z], RX[z] = 0.0, 0.0, 0.0
            ds_b = np.multiply(p, x, out=dS[a:b])
            aS = np.abs(ds_b)
            rs = np.multiply(p, RX, out=RS[a:b])
            aX += RX
            aX *= rp
            rs += aX
            rs += U * aS
            _upi(rs)
            dQ[0][a:b], dQ[1][a:b] = _product(ds_b, K, rs, gamma(S), s, ds, aS)
            den[a:b] = aS.sum(axis=1)                       # Σ_j P·|dP − D|
            absterm = aO[a:b] @ aV.T                        # |dP|_ij + |D|_i, times P
            absterm += Dabs[a:b, None]
            absterm *= p
            num[a:b] = absterm.sum(axis=1)
            scales["dQ"][a:b] = absterm @ aK
            scales["dK"] += absterm.T @ aQ[a:b]
            scales["dV"] += p.T @ aO[a:b]
            MK += ds_b.T @ Q[a:b]
            aS *= g
            aS += rs
            NK += aS.T @ aQ[a:b]
            MV += p.T @ dO[a:b]
            t = p * g
            t += rp
            NV += t.T @ aO[a:b]
        kappa = np.where(num == 0, 1.0, np.where(den == 0, np.inf, num / np.where(den == 0, 1.0, den)))
        scales["dQ"] *= s
        scales["dK"] *= s
    return {"dV": _finish(MV, NV, 1.0, 0.0), "dS": (dS, RS), "P": (P, RP), "dQ": tuple(dQ),
            "dK": _finish(MK, NK, s, ds), "condition": (kappa, scales)}


def _finish(M, N, s: float, ds: float) -> tuple[Any, Any]:
    """s̃·M and its radius from the summed product M and its summed radius product N (backfast._product's tail)."""
    np = _np()
    _upi(N)
    if s == 1.0 and ds == 0.0:
        mid, rad = M, N
    else:
        mid = M * s
        rad = _up((abs(s) + ds) * N + ds * np.abs(M) + U * np.abs(mid))
    rad = _up(rad + 4 * U * np.abs(mid))
    return mid, np.where(np.isfinite(rad) & np.isfinite(mid), rad, np.inf)
