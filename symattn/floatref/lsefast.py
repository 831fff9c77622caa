"""The log-sum-exp of each row in float64 with a proved enclosure: most rows decided without arb.

lse_i = c_i + log Σ_j e^(t_ij − c_i) for any float c_i (the row's largest computed score).  The
weights w = e^(t − c) are enclosed as in :mod:`symattn.floatref.backfast` and summed:
Z ∈ [Z_lo, Z_hi] (γ_S of the float sum, plus the weights' radii).  No error bound on numpy's
``log`` is assumed: a candidate interval [ℓ_lo, ℓ_hi] is taken from ``log`` with a margin and
*checked* with exp (whose error fast.py bounds): e^(ℓ_lo − c) ≤ Z_lo and e^(ℓ_hi − c) ≥ Z_hi, each
exp bounded from the proper side with the subtraction's rounding, prove ℓ_lo ≤ lse ≤ ℓ_hi.  The
row is decided when both ends round to one value of the format (base 2: the ends divided by a
float ln 2, widened by 4u).  docs/floatref.md, "The fast backward", step 7.
"""

from __future__ import annotations

from typing import Any

from symattn.floatref import backfast, masks
from symattn.floatref.binary import BinaryFormat
from symattn.floatref.fast import EXP_ABS, EXP_REL, U, gamma

_up = backfast._up


def _np():
    import numpy

    return numpy


def _exp_bounds(x, shift):
    """(lower, upper) bounds of e^(x − shift) for float arrays x, shift (the subtraction rounded)."""
    np = _np()
    d = x - shift
    e = _up(U * np.abs(d))                                  # |fl(x − c) − (x − c)| ≤ u|fl(x − c)|
    G = _up((np.expm1(e) + EXP_REL) / (1 - EXP_REL) ** 2)
    w = np.exp(d)
    r = _up(w * G + EXP_ABS * (1 + G))
    return w - r, w + r


def decide_lse(pr: Any, idx: tuple, fmt: BinaryFormat) -> tuple[Any, Any, Any]:
    """(lse, lse2, decided (2, L)) of one head: float64 arrays of the format's values where decided."""
    np = _np()
    Q, K = pr.Q[idx], pr.K[idx]
    L = Q.shape[0]
    none = (np.zeros(L), np.zeros(L), np.zeros((2, L), dtype=bool))
    allowed = None if pr.allowed is None else np.asarray(pr.allowed[idx])
    additive = None if pr.additive is None else np.asarray(pr.additive[idx])
    if additive is not None:
        mh, ml, ok = masks.shift(additive, allowed)
        if ml is not None or not ok.all():                  # rows shifted by c_m ≠ 0: the arb path
            return none
        additive = mh
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        T, eT = backfast.exponents(Q, K, additive, pr.scale_f, pr.scale_err)
        c = np.max(T, axis=1, where=True if allowed is None else allowed, initial=-np.inf)
        live = np.isfinite(c)
        c = np.where(live, c, 0.0)
        X = T - c[:, None]
        W, R = backfast.exp_enclosure(X, _up(eT + U * np.abs(X)), allowed)
        Z = W.sum(axis=1)
        rz = _up(gamma(W.shape[1]) * Z + R.sum(axis=1))
    return decide_from_sums(c, Z, rz, live, fmt)


def decide_from_sums(c: Any, Z: Any, rz: Any, live: Any, fmt: BinaryFormat) -> tuple[Any, Any, Any]:
    """(lse, lse2, decided (2, L)) from each row's shift c (a float) and an enclosure Z ± rz of
    Σ_j e^(t_j − c) (the module docstring's checked logarithm)."""
    from symattn.floatref.binary import round_array

    np = _np()
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        zlo, zhi = np.nextafter(Z - rz, -np.inf), np.nextafter(Z + rz, np.inf)
        margin = 2.0 ** -40 * (1 + np.abs(c))
        lo = c + np.log(zlo) - margin
        hi = c + np.log(zhi) + margin
        ok = live & (zlo > 0) & np.isfinite(lo) & np.isfinite(hi)
        ok &= (_exp_bounds(lo, c)[1] <= zlo) & (_exp_bounds(hi, c)[0] >= zhi)
        out = []
        for a, b in ((lo, hi), (lo / np.log(2.0), hi / np.log(2.0))):
            a, b = a - 4 * U * np.abs(a), b + 4 * U * np.abs(b)   # ln 2 and the division: ≤ 2.5u
            ra, rb = round_array(a, fmt), round_array(b, fmt)
            out.append((np.where(ra == rb, rb, 0.0) + 0.0, ok & (ra == rb)))
    return out[0][0], out[1][0], np.stack([out[0][1], out[1][1]])
