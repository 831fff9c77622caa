"""The float32 target's rounding decisions in one compiled pass (numba, when installed).

heads.decide_into rounds both ends of every enclosure [mid − rad, mid + rad] to float32 and
compares them: seven numpy passes over each block (the two ends, two conversions, the
comparison, the finiteness test, −0 → +0), about a quarter of the float32 target's CPU at
(1, 1, 4096, 128).  Here the same IEEE operations run entry by entry in one loop: the same
float64 subtraction and addition, the same float64 → float32 conversion (the hardware's, in
the mode sdpa.ieee_conversions_hold checks), so the values and decisions equal numpy's bit
for bit (tests/test_floatref_fused.py).  Used when fused64.AVAILABLE (numba importable).
"""

from __future__ import annotations

from typing import Any

from symattn.floatref import fused64

np: Any
try:  # pragma: no cover - numpy comes with numba (the ``fast`` extra)
    import numpy as np
except ImportError:  # pragma: no cover
    np = None


@fused64.jit
def _decide(mid, rad, values, ok):
    rows, cols = mid.shape
    zero = np.float32(0.0)
    for i in range(rows):
        m_, r_, v_, ok_ = mid[i], rad[i], values[i], ok[i]
        for j in range(cols):
            m, r = m_[j], r_[j]
            lo = np.float32(m - r)
            hi = np.float32(m + r)
            v_[j] = hi + zero                                # −0 → +0
            ok_[j] = (lo == hi) & np.isfinite(hi)


def decide(mid, rad, values, ok) -> None:
    """heads.decide_into's float32 branch: ``values`` (float32) = RN32(mid + rad), ``ok`` where
    RN32(mid − rad) equals it and it is finite (2-D arrays of one shape)."""
    _decide(mid, rad, values, ok)
