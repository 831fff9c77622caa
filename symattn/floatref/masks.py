"""Additive masks with huge finite values (−1e9, finfo.min): shifted, and their keys set aside.

Kernels and tests often mask with −1e9 or the format's minimum instead of −inf.
Two things keep such a mask from spoiling the fast paths' row bounds
(docs/floatref.md, "Huge finite masks"):

* :func:`shift` subtracts each row's largest allowed mask value c_m exactly
  (TwoSum: m − c_m = mh + ml), so a row masked by −1e9 everywhere computes
  s·d + 0, not s·d − 1e9 with its rounding error of u·1e9; softmax is
  unchanged by any constant per row.
* :func:`far_below` gives per row a float below which a computed score is
  proved to be more than 800 below the shift c (weight < e^-800, which the
  fast paths' absolute terms cover), so those keys are set aside like
  blocked ones and their size enters no error bound.
"""

from __future__ import annotations

from symattn.floatref import dd

U = dd.U

#: a key proved this far below the row's shift has e^x < e^-800 < 2^-1154
FAR = 800.0


def shift(additive, allowed):
    """(mh, ml, ok): mh + ml = m − c_m exactly, c_m the row's largest allowed value (0 when
    none); ml is None when every c_m is 0 (then mh = m).  ``ok`` is False for rows where
    m − c_m may overflow (m − c_m ≥ fl(m_min − c_m) by monotonic rounding)."""
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        if allowed is None:
            top, low = additive.max(axis=1), additive.min(axis=1)
        else:
            top = np.max(additive, axis=1, where=allowed, initial=-np.inf)
            low = np.min(additive, axis=1, where=allowed, initial=np.inf)
        top = np.where(np.isfinite(top), top, 0.0)
        low = np.where(np.isfinite(low), low, 0.0)
        ok = np.isfinite(low - top)
        if not top.any():
            return additive, None, ok
        return (*dd.two_sum(additive, np.broadcast_to(-top[:, None], additive.shape)), ok)


def far_below(c, E0, P):
    """Per row a float f such that a computed score t̃_j < f proves t_j − c < −FAR.

    The fast paths' per-entry bound |t̃_j − t_j| ≤ E0 + 3u·(|t̃_j| + P) (both paths, with
    their own E0 and P ≥ |s·d|; the double-double one is far smaller) gives, with
    y = c − t̃_j > 0 and |t̃_j| ≤ |c| + y: t_j − c ≤ −y(1 − 3u) + E0 + 3u(P + |c|), below −FAR
    once y > θ = FAR + 1 + 1.001·(E0 + 3u(P + |c|)).  f = fl(c − θ) moved one float down
    is ≤ c − θ exactly (rounding to nearest is within half the gap below, or above)."""
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        theta = (FAR + 1 + 1.001 * (E0 + 3 * U * (P + np.abs(c)))) * (1 + 2.0 ** -20)
        return np.nextafter(c - theta, -np.inf)
