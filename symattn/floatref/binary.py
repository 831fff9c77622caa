"""Round-to-nearest-even into the float formats, decided exactly.

Three roundings of one rule (IEEE 754 roundTiesToEven, the format's own
precision p, minimum exponent e_min and maximum exponent e_max, subnormals
included, overflow to ±inf; to NaN in float8_e4m3fn, which has no infinities):

* :func:`round_array` — a float64 numpy array, vectorised: frexp gives the
  binade exactly, ldexp scales by a power of two exactly, and numpy's
  ``rint`` is round-half-even on an integer grid.  No cast between float
  formats is trusted (float64 → float32 → bfloat16 would round twice).
* :func:`round_fraction` — an exact rational, with Python integers.
* :func:`round_ball` — an arb ball: decided when both ends round alike.

A result is a Python/numpy float64 that holds the format's value exactly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import flint


class BinaryFormat(NamedTuple):
    """A binary floating-point format: precision (with the hidden bit) and exponent range."""

    name: str
    p: int
    e_min: int
    e_max: int
    #: the largest finite value when the format spends its top codes otherwise (e4m3fn: 448,
    #: the significand 1.111 at e_max is NaN); None: (2 − 2^(1−p))·2^e_max
    top: Fraction | None = None
    #: what a value rounded past ``max_finite`` becomes: "inf" (±inf) or "nan" (e4m3fn)
    overflow: str = "inf"

    @property
    def max_finite(self) -> Fraction:
        if self.top is not None:
            return self.top
        return Fraction(2 ** self.p - 1) * Fraction(2) ** (self.e_max - self.p + 1)

    def overflowed(self, positive: bool) -> float:
        """The value a rounding past ``max_finite`` gives: ±inf, or NaN (float8_e4m3fn)."""
        if self.overflow == "nan":
            return float("nan")
        return float("inf") if positive else float("-inf")


BINARY_FORMATS: dict[str, BinaryFormat] = {
    "float64": BinaryFormat("float64", 53, -1022, 1023),
    "float32": BinaryFormat("float32", 24, -126, 127),
    "float16": BinaryFormat("float16", 11, -14, 15),
    "bfloat16": BinaryFormat("bfloat16", 8, -126, 127),
    # OCP 8-bit formats (ml_dtypes' names): e4m3fn has no inf (S.1111.111 is NaN, so 448 is
    # the largest finite value and anything that rounds past it is NaN, as ml_dtypes' astype);
    # e5m2 is IEEE-like (largest 57344, overflow to ±inf)
    "float8_e4m3fn": BinaryFormat("float8_e4m3fn", 4, -6, 8, Fraction(448), "nan"),
    "float8_e5m2": BinaryFormat("float8_e5m2", 3, -14, 15),
}
#: the formats that need ml_dtypes to hold as numpy arrays (results come in float32 arrays)
FP8_FORMATS = ("float8_e4m3fn", "float8_e5m2")


def round_array(x, fmt: BinaryFormat):
    """RNE of every entry of a float64 array into ``fmt`` (a float64 array of format values)."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(x)                                   # |x| in [2^(e-1), 2^e)
        q = np.maximum(e - 1, fmt.e_min) - (fmt.p - 1)       # the quantum: 2^q
        y = np.ldexp(np.rint(np.ldexp(x, -q)), q)            # both ldexp exact here
        big = float(fmt.max_finite)
        over = np.nan if fmt.overflow == "nan" else np.copysign(np.inf, x)
        y = np.where(np.abs(y) > big, over, y)
    return y


def is_boundary(x, fmt: BinaryFormat):
    """Where a float64 array's entries are rounding boundaries of ``fmt``: odd multiples of
    half the format's quantum at that magnitude (the midpoints between neighbours, and the
    overflow threshold past the largest finite value).  Every such boundary is a float64."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(x)
        half = np.maximum(e - 1, fmt.e_min) - fmt.p          # half the quantum: 2^half
        t = np.ldexp(np.abs(x), -half)                       # exact: a power-of-two scaling
        return np.isfinite(x) & (x != 0) & (t == np.floor(t)) & (np.fmod(t, 2) == 1)


def round_float32(a, fmt: BinaryFormat):
    """RNE of a float32 array into ``fmt`` (p ≤ 24, e_min ≥ −126: float16, bfloat16, fp8) by
    the hardware's own float32 rounding: (the float32 array of format values, and where an
    entry is a rounding boundary of ``fmt``, as :func:`is_boundary`).  Why: float16 and
    bfloat16 weights decided through float32 (heads.decide_into) at a fraction of
    round_array's cost.

    With C = 2^(q + 23), 2^q the format's quantum at |a| (C = 2^(e − p + 24) from a's
    exponent e, at least the subnormals' 2^(e_min − p + 24)): |a| < C, so |a| + C lies in
    [C, 2C), where float32's spacing is 2^q, and fl(|a| + C) − C (exact) is |a| rounded to
    a multiple of 2^q, ties to even.  |a| is a boundary when it is half a quantum from that.
    Where C overflows (|a| ≥ 2^(104 + p)) or a is not finite the result is NaN or ±inf."""
    import numpy as np

    a = np.ascontiguousarray(a, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        bits = a.view(np.int32)
        C = (bits & np.int32(0x7F800000)).view(np.float32)          # 2^e (0 below the normals)
        C *= np.float32(2.0 ** (24 - fmt.p))
        np.maximum(C, np.float32(2.0 ** (fmt.e_min + 24 - fmt.p)), out=C)
        x = np.abs(a)
        y = x + C
        y -= C
        x -= y
        np.abs(x, out=x)
        C *= np.float32(2.0 ** -24)                                  # half the quantum
        boundary = x == C
        np.copyto(y, np.float32(np.nan if fmt.overflow == "nan" else np.inf),
                  where=y > np.float32(float(fmt.max_finite)))
        yb = y.view(np.int32)
        yb |= bits & np.int32(-0x80000000)                           # a's sign
    return y, boundary


def round_fraction(value: Fraction, fmt: BinaryFormat) -> float:
    """RNE of an exact rational into ``fmt``, with integers (a float holding the value)."""
    if value == 0:
        return 0.0
    a = abs(value)
    e = a.numerator.bit_length() - a.denominator.bit_length()   # 2^(e-1) < a < 2^(e+1)
    if a < Fraction(2) ** e:     # only when the denominator is not a power of two (1/3)
        e -= 1                   # now 2^e <= a < 2^(e+1)
    q = max(e, fmt.e_min) - fmt.p + 1
    scaled = a / Fraction(2) ** q
    n = round(scaled)            # Fraction.__round__: half to even
    result = n * Fraction(2) ** q
    if result > fmt.max_finite:
        return fmt.overflowed(value > 0)
    out = float(result)          # exact: every format value is a float64
    return out if value > 0 else -out


def _dyadic(x: flint.arb) -> Fraction:
    man, exp = (int(v) for v in x.man_exp())
    return Fraction(man) * Fraction(2) ** exp


def round_ball(x: flint.arb, fmt: BinaryFormat) -> float | None:
    """The RNE of the value a ball encloses, when both its ends round alike; else None."""
    if not x.is_finite():
        return None
    # far outside the format's range (e^-(2^700) is a valid weight): decide before any Fraction,
    # whose powers of two would have astronomically many digits
    if abs(x) < flint.arb(2) ** (fmt.e_min - fmt.p):           # below half the least subnormal
        return 0.0
    if x > flint.arb(2) ** (fmt.e_max + 1) or x < -flint.arb(2) ** (fmt.e_max + 1):
        return fmt.overflowed(bool(x > 0))
    # the ends rounded outward at the working precision: a radius like 2^-(4.9·10^38) (a weight
    # 1/(1 + e^-(3.4·10^38)) under a float32-min mask) would be a Fraction too big to build
    lo, hi = round_fraction(_dyadic(x.lower()), fmt), round_fraction(_dyadic(x.upper()), fmt)
    if lo != lo and hi != hi:                # both past e4m3fn's largest: NaN, decided
        return lo
    return hi if lo == hi else None
