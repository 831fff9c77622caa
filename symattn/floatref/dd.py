"""Double-double (float64 pair) arithmetic on numpy arrays, with its proved error bounds.

A double-double is an unevaluated sum hi + lo of two float64 arrays with
hi = RN(hi + lo).  The algorithms are those of Joldes, Muller and Popescu,
"Tight and rigorous error bounds for basic building blocks of double-word
arithmetic" (ACM TOMS 44(2), 2017), written without FMA (numpy has none):
TwoSum and Fast2Sum are exact, TwoProduct by Dekker's splitting is exact;
DWPlusFP (their Algorithm 4) has relative error at most 2u², DWTimesFP1
(Algorithm 7) at most 1.5u² + 4u³ and DWTimesDW1 (Algorithm 10) at most
7u², u = 2^-53, in the absence of underflow and overflow.  fast64.py uses
:data:`OP_REL` = 8u² for every one of them and covers underflow with an
absolute term.  Dekker's splitting needs |a| < 2^996.
"""

from __future__ import annotations

U = 2.0 ** -53
#: relative error bound used for DWPlusFP, DWTimesFP1 and DWTimesDW1 (≥ 7u²)
OP_REL = 8 * U * U
_SPLITTER = 134217729.0   # 2^27 + 1


def two_sum(a, b):
    """s + t = a + b exactly, s = RN(a + b) (Knuth; any magnitudes)."""
    import numpy as np

    s = a + b
    bb = s - a
    t = _into(np.subtract, a, s - bb)                  # a − (s − bb)
    return s, _into(np.add, t, _into(np.subtract, b, bb), first=True)


def fast_two_sum(a, b):
    """s + t = a + b exactly, s = RN(a + b), when |a| ≥ |b| or a = 0 (Dekker)."""
    import numpy as np

    s = a + b
    return s, _into(np.subtract, b, s - a)


def split(a):
    """a = hi + lo exactly, hi and lo of at most 26 bits each (Veltkamp; |a| < 2^996)."""
    import numpy as np

    c = _SPLITTER * a
    hi = _into(np.subtract, c, c - a)
    return hi, a - hi


def two_prod(a, b):
    """p + e = a·b exactly, p = RN(a·b) (Dekker; exact unless e underflows)."""
    import numpy as np

    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = _into(np.subtract, ah * bh, p, first=True)
    e = _into(np.add, e, ah * bl, first=True)
    e = _into(np.add, e, al * bh, first=True)
    return p, _into(np.add, e, al * bl, first=True)    # ((ah·bh − p) + ah·bl + al·bh) + al·bl


def square(a):
    """p + e = a² exactly, p = RN(a²): :func:`two_prod` (a, a) with a split once and its two
    cross products as one, 2·ah·al (exact: a power of two times an exact product).  Each
    operation of Dekker's algorithm is exact, so ((ah·ah − p) + ah·al) + al·ah, an exact float,
    equals (ah·ah − p) + 2·ah·al, which is then computed exactly: the same p and e (exact
    unless e underflows, as two_prod; each of its 3 operations then errs by ≤ 2^-1075)."""
    import numpy as np

    p = a * a
    ah, al = split(a)
    e = _into(np.subtract, ah * ah, p, first=True)
    e = _into(np.add, e, 2.0 * ah * al, first=True)
    return p, _into(np.add, e, al * al, first=True)


def add_fp(xh, xl, y):
    """(xh + xl) + y, relative error ≤ 2u² (DWPlusFP)."""
    import numpy as np

    sh, sl = two_sum(xh, y)
    return fast_two_sum(sh, _into(np.add, xl, sl))


def mul_fp(xh, xl, y):
    """(xh + xl)·y, relative error ≤ 1.5u² + 4u³ (DWTimesFP1)."""
    import numpy as np

    ch, cl1 = two_prod(xh, y)
    th, tl1 = fast_two_sum(ch, xl * y)
    return fast_two_sum(th, _into(np.add, tl1, cl1, first=True))


def mul(xh, xl, yh, yl):
    """(xh + xl)·(yh + yl), relative error ≤ 7u² (DWTimesDW1)."""
    import numpy as np

    ch, cl1 = two_prod(xh, yh)
    cl2 = _into(np.add, xh * yl, xl * yh, first=True)
    return fast_two_sum(ch, _into(np.add, cl1, cl2, first=True))


def _into(op, a, b, first: bool = False):
    """op(a, b), written over the operand this module just made (``b``, or ``a`` when
    ``first``) when it is an array of the result's shape: the same IEEE operation, without a
    new temporary (which, out of cache, costs as much as the operation)."""
    import numpy as np

    out = a if first else b
    if isinstance(out, np.ndarray) and out.ndim and out.shape == np.broadcast_shapes(np.shape(a), np.shape(b)):
        return op(a, b, out=out)
    return op(a, b)
