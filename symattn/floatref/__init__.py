"""An exact reference for float attention: error in ULPs, proved.

Kernels are usually tested against a float64 (or fp32) reference; here the
reference is the exact value.  Inputs come from numpy arrays, torch tensors
(if torch is importable; never required) or nested lists of floats, read
in one of two ways:

* ``mode="binary"`` (default): each float's exact binary value, via
  ``Fraction(float)``.  This is the one place symattn lets a float's binary
  value in, on purpose: the float IS the kernel's input, so its binary
  value is the intended number (0.1 in float32 is 13421773/134217728).
* ``mode="text"``: the shortest decimal text that round-trips in the
  array's own format (numpy's ``format_float_scientific(unique=True)``),
  read exactly: 0.1 is 1/10, the number a person meant.

The error of a float result y against the exact x is reported in units in
the last place of the float format at x — ulp(x) = 2^(max(e, e_min) − p + 1)
with 2^e ≤ |x| < 2^(e+1), p the precision (53 for float64, 24 for
float32) — and as the relative error (y − x)/|x| (signed like the ULP error).  Both are certified
decimals: proved with arb balls from the engine's own enclosures; an exact
value that is rational (a masked weight 0, a tied row's 1/3) is handled
exactly.

Masks: symattn's mask is 1 = may attend, the boolean convention of
PyTorch's ``scaled_dot_product_attention`` (``attn_mask`` True = attend).
``nn.MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask`` use the
opposite (True = blocked): convert them with :func:`blocked_to_attend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import reduce
from typing import Any

import flint

from symattn.numbers.certify import CertifiedDecimal, Rounding, effective_digits, round_ball, round_rational
from symattn.exact.coerce import DecimalText, to_exact
from symattn.numbers.precision import cap_bits, precision, precisions, undecided
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace
from symattn.floatref.errors import FloatRefError

#: precision p (bits, with the hidden bit) and minimum normal exponent of each format
FORMATS: dict[str, tuple[int, int]] = {
    "float64": (53, -1022), "float32": (24, -126), "float16": (11, -14), "bfloat16": (8, -126),
    "float8_e4m3fn": (4, -6), "float8_e5m2": (3, -14),
}
#: significant digits that tell neighbouring floats apart (shown in reports)
_SHOW_DIGITS = {"float64": 17, "float32": 9, "float16": 5, "bfloat16": 4, "float8_e4m3fn": 3,
                "float8_e5m2": 3}


def _numpy():
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is in the test extra
        raise FloatRefError("reading arrays needs numpy: pip install numpy") from None
    return numpy


def _as_array(value: Any):
    """A numpy array from a numpy array, a torch tensor or nested lists (floats)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch
        tensor = value.detach().cpu()
        if str(tensor.dtype) in ("torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2"):
            tensor = tensor.float()  # exact: every bfloat16 and fp8 value is a float32
        value = tensor.numpy()
    return _numpy().asarray(value)


def format_of(value: Any) -> str:
    """The float format name of an array or tensor ('float32', ...)."""
    if hasattr(value, "dtype") and str(value.dtype).startswith("torch."):
        name = str(value.dtype)[6:]
    else:
        name = str(_as_array(value).dtype)
    if name not in FORMATS:
        raise FloatRefError(f"the array is {name}; give float64, float32, float16, bfloat16 or "
                            "float8_e4m3fn/float8_e5m2 (ml_dtypes) values")
    return name


def exact_values(value: Any, mode: str = "binary", *, name: str = "array") -> list[list[Fraction]]:
    """A 2-D float array as exact rationals: by binary value or by shortest decimal text."""
    if mode not in ("binary", "text"):
        raise FloatRefError(f"mode is {mode!r}: use 'binary' (the float's exact value) or 'text' (its decimal text)")
    np = _numpy()
    array = _as_array(value)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise FloatRefError(f"{name} has shape {array.shape}: give a matrix; slice batches and heads "
                            "first, e.g. q[0, 0] of a (batch, heads, n, d) tensor")
    if not np.issubdtype(array.dtype, np.floating) and not np.issubdtype(array.dtype, np.integer):
        raise FloatRefError(f"{name} has dtype {array.dtype}: give floats or integers")
    if array.dtype.kind == "f" and array.dtype.itemsize > 8:
        raise FloatRefError(f"{name} has dtype {array.dtype} (long double), wider than float64, which "
                            "would be rounded: convert to float32 or float64")
    rows = []
    for i, row in enumerate(array):
        out = []
        for j, x in enumerate(row):
            if np.issubdtype(array.dtype, np.integer):
                out.append(Fraction(int(x)))
                continue
            if not np.isfinite(x):
                raise FloatRefError(f"{name}[{i}][{j}] is {x}: give finite numbers")
            if mode == "binary":
                out.append(Fraction(float(x)))  # exact: widening to float64 loses nothing
            else:
                text = np.format_float_scientific(x, unique=True)
                q = to_exact(DecimalText(text), where=f"{name}[{i}][{j}]")
                out.append(Fraction(int(q.p), int(q.q)))
        rows.append(out)
    return rows


def blocked_to_attend(mask: Any) -> list[list[int]]:
    """nn.MultiheadAttention's boolean mask (True = blocked) as symattn's (1 = may attend)."""
    array = _as_array(mask)
    if array.ndim != 2:
        raise FloatRefError(f"the mask has shape {array.shape}: give a 2-D (queries × keys) mask")
    return [[0 if bool(x) else 1 for x in row] for row in array]


def key_padding_to_attend(key_padding_mask: Any, n: int) -> list[list[int]]:
    """A key_padding_mask row (True = padding, blocked) as an n × m attend-mask."""
    array = _as_array(key_padding_mask).reshape(-1)
    return [[0 if bool(x) else 1 for x in array] for _ in range(n)]


def attend_mask(mask: Any) -> list[list[int]]:
    """PyTorch SDPA's boolean mask (True = attend) or additive float mask (0 / −inf) as 0/1."""
    np = _numpy()
    array = _as_array(mask)
    if array.ndim != 2:
        raise FloatRefError(f"the mask has shape {array.shape}: give a 2-D (queries × keys) mask")
    if array.dtype == bool:
        return [[int(x) for x in row] for row in array]
    if np.all((array == 0) | np.isneginf(array)):
        return [[0 if np.isneginf(x) else 1 for x in row] for row in array]
    raise FloatRefError("an additive float mask may only hold 0 and -inf here "
                        "(other values change the scores: add them to Q·Kᵀ yourself)")


def reference(Q: Any, K: Any, V: Any, *, mask: Any = None, scale: Any = None,
              mode: str = "binary", causal: bool = False) -> Trace:
    """The exact attention of float Q, K, V (2-D), through the one engine.

    ``mask`` uses symattn's convention (1/True = attend, as SDPA); for
    nn.MultiheadAttention masks pass ``blocked_to_attend(mask)``.  A float
    ``scale`` is read like the inputs (by ``mode``)."""
    inputs = {k: exact_values(v, mode, name=k) for k, v in (("Q", Q), ("K", K), ("V", V))}
    if scale is not None and isinstance(scale, float):
        scale = Fraction(scale) if mode == "binary" else to_exact(scale)
    if causal and mask is not None:
        raise FloatRefError("give causal=True or a mask, not both")
    if mask is not None and not isinstance(mask, (list, str)):
        mask = attend_mask(mask)
    return Trace(Problem(Q=inputs["Q"], K=inputs["K"], V=inputs["V"], scale=scale,
                         mask="causal" if causal else mask))


# ------------------------------------------------------------------ ULPs

def _binade(x: flint.arb) -> int | None:
    """e with 2^e ≤ |x| < 2^(e+1), when the ball decides it."""
    if not (x > 0 or x < 0):
        return None
    a = abs(x)
    mid = a.mid()
    man, exp = (int(v) for v in mid.man_exp())
    e = man.bit_length() - 1 + exp
    two = flint.arb(2)
    for guess in (e, e - 1, e + 1):
        if a >= two ** guess and a < two ** (guess + 1):
            return guess
    return None


def ulp_of(x: Fraction, fmt: str) -> Fraction:
    """ulp(x) in a float format: 2^(max(e, e_min) − p + 1), with ulp(0) the smallest subnormal."""
    p, e_min = FORMATS[fmt]
    if x == 0:
        return Fraction(2) ** (e_min - p + 1)
    e = abs(x.numerator).bit_length() - abs(x.denominator).bit_length()
    if Fraction(2) ** e > abs(x):
        e -= 1
    if Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    return Fraction(2) ** (max(e, e_min) - p + 1)


@dataclass(frozen=True)
class EntryError:
    """One entry: the float's value, the certified exact value, and the errors."""

    row: int
    col: int
    got: Fraction                        # the float's exact binary value
    exact: CertifiedDecimal              # the exact value, certified
    ulps: CertifiedDecimal               # (got − exact) / ulp(exact)
    relative: CertifiedDecimal | None    # (got − exact) / |exact|; None when exact = 0


@dataclass(frozen=True)
class FloatReport:
    """The per-entry error of a float result against the exact one."""

    step: str
    fmt: str
    mode: str
    entries: tuple[EntryError, ...]

    @property
    def max_ulps(self) -> Fraction:
        """The largest |error| in ULPs (its certified rounding, as a rational)."""
        return max(abs(e.ulps.as_fraction()) for e in self.entries)

    @property
    def max_relative(self) -> Fraction | None:
        rel = [abs(e.relative.as_fraction()) for e in self.entries if e.relative is not None]
        return max(rel) if rel else None

    def text(self, digits: int = 3) -> str:
        """A table: entry, float value, exact value, error in ULPs, relative error."""
        rounding = Rounding(digits=max(digits, _SHOW_DIGITS[self.fmt]))
        head = (f"{self.fmt} {self.step} vs the exact value (inputs by their "
                f"{'binary values' if self.mode == 'binary' else 'decimal text'}); errors certified")
        rows = [("entry", f"{self.fmt} value", "exact", "error (ulp)", "relative error")]
        for e in self.entries:
            rows.append((f"[{e.row}, {e.col}]", str(round_rational(e.got, rounding)), str(e.exact),
                         str(e.ulps), "—" if e.relative is None else str(e.relative)))
        widths = [max(len(r[k]) for r in rows) for k in range(5)]
        lines = [head] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        worst = max(self.entries, key=lambda e: abs(e.ulps.as_fraction()))
        tail = f"max |error| = {str(worst.ulps).lstrip('-')} ulp at [{worst.row}, {worst.col}]"
        rel = [(abs(e.relative.as_fraction()), e.relative) for e in self.entries if e.relative is not None]
        if rel:
            tail += f", max |relative error| = {str(max(rel, key=lambda r: r[0])[1]).lstrip('-')}"
        return "\n".join(lines + [tail]) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "format": self.fmt, "mode": self.mode,
                "entries": [{"row": e.row, "col": e.col, "float": str(e.got), "exact": str(e.exact),
                             "ulps": str(e.ulps),
                             "relative": None if e.relative is None else str(e.relative)}
                            for e in self.entries]}


def _certify_ball(make, rounding: Rounding, what: str, *, negligible: bool = False) -> CertifiedDecimal:
    """The rounding of the ball ``make(prec)`` builds, by the one precision loop.

    ``negligible`` (for errors, whose significant digits may sit a billion bits deep): a
    ball proved below half a unit of NEGLIGIBLE_PLACES places is that rounding of 0."""
    wanted = effective_digits(rounding)
    below = flint.arb(10) ** -NEGLIGIBLE_PLACES / 2 if negligible else None
    for prec in precisions(wanted):
        with precision(prec):
            ball = make(prec)
            if ball is None:
                continue
            d = round_ball(ball, rounding)
            if d is None and below is not None and abs(ball) < below:
                d = round_rational(0, Rounding(places=NEGLIGIBLE_PLACES))
        if d is not None:
            return d
    raise undecided(f"the {what}", f"the rounding to {rounding}", cap_bits(wanted),
                    "it may sit exactly on a rounding boundary")


def compare_float(result: Any, trace: Trace, *, step: str = "output", fmt: str | None = None,
                  digits: int = 3) -> FloatReport:
    """The error of a float attention result (weights or output) against the exact Trace."""
    if step not in ("output", "weights"):
        raise FloatRefError(f"step is {step!r}: compare the 'output' or the 'weights'")
    fmt = fmt or format_of(result)
    if fmt not in FORMATS:
        raise FloatRefError(f"format {fmt!r} is unknown; use {', '.join(FORMATS)}")
    got = exact_values(result, "binary", name=step)
    target = trace.step(step)
    if (len(got), len(got[0])) != target.shape:
        raise FloatRefError(f"the float {step} is {len(got)}×{len(got[0])} but the exact one is "
                            f"{target.shape[0]}×{target.shape[1]}")
    rounding = Rounding(digits=digits)
    exact_digits = target.decimals(Rounding(digits=max(digits, _SHOW_DIGITS[fmt])))
    entries = []
    for i, row in enumerate(got):
        for c, y in enumerate(row):
            known = trace.algebraic_value(step, i, c)
            if known is not None and known.is_Rational:
                x = Fraction(int(known.p), int(known.q))
                ulps = round_rational((y - x) / ulp_of(x, fmt), rounding)
                rel = None if x == 0 else round_rational((y - x) / abs(x), rounding)
            else:
                ulps, rel = _errors_from_balls(trace, step, i, c, y, fmt, rounding)
            shown = exact_digits[i][c]
            if not isinstance(shown, CertifiedDecimal):  # pragma: no cover - weights and outputs are never masked
                raise FloatRefError(f"{step}[{i}][{c}] has no value (masked)")
            entries.append(EntryError(i, c, y, shown, ulps, rel))
    return FloatReport(step, fmt, "binary", tuple(entries))


def _errors_from_balls(trace: Trace, step: str, i: int, c: int, y: Fraction, fmt: str,
                       rounding: Rounding) -> tuple[CertifiedDecimal, CertifiedDecimal]:
    """(y − x)/ulp(x) and (y − x)/|x| from arb balls of a transcendental x (never a tie)."""
    return errors_from_ball(lambda prec: trace.enclosure(step, i, prec)[c], y, fmt, rounding)


#: an error proved smaller than half a unit of this many decimal places is shown as
#: 0.000000000000 at those places: its digits may sit 10^9 bits deep (a weight
#: 1 − e^(−10^9) under a −1e9 mask, written 1.0 by a kernel: its error is e^(−10^9))
NEGLIGIBLE_PLACES = 12


def errors_from_ball(x_ball, y: Fraction, fmt: str,
                     rounding: Rounding) -> tuple[CertifiedDecimal, CertifiedDecimal]:
    """(y − x)/ulp(x) and (y − x)/|x| for a transcendental x given as ``x_ball(prec)``.

    When x may lie on either side of a power of two, (y − x)/ulp(x) is enclosed over both
    ulps; an error proved below half a unit of NEGLIGIBLE_PLACES places is that rounding
    of 0 (its significant digits could cost a billion bits)."""
    p, e_min = FORMATS[fmt]
    yq = flint.arb(flint.fmpq(y.numerator, y.denominator))

    def ulps(prec: int):
        x = x_ball(prec)
        binades = _binades(x)
        if not binades:
            return None
        balls = [(yq - x) / flint.arb(2) ** (max(e, e_min) - p + 1) for e in binades]
        return reduce(flint.arb.union, balls)

    def relative(prec: int):
        x = x_ball(prec)
        return (yq - x) / abs(x)

    return (_certify_ball(ulps, rounding, "error in ulps", negligible=True),
            _certify_ball(relative, rounding, "relative error", negligible=True))


def _binades(x: flint.arb) -> list[int]:
    """Every e with 2^e ≤ |t| < 2^(e+1) for some t in the ball (none if it holds 0)."""
    e = _binade(x)
    if e is not None:
        return [e]
    if not (x > 0 or x < 0):
        return []
    a = abs(x)
    man, exp = (int(v) for v in a.mid().man_exp())
    guess = man.bit_length() - 1 + exp
    two = flint.arb(2)
    return [g for g in (guess - 1, guess, guess + 1)
            if not (a < two ** g) and not (a >= two ** (g + 1))]


def float_report(Q: Any, K: Any, V: Any, result: Any, *, step: str = "output", mask: Any = None,
                 scale: Any = None, causal: bool = False, mode: str = "binary",
                 digits: int = 3) -> FloatReport:
    """One call: the exact reference of float Q, K, V and the error of ``result`` against it."""
    trace = reference(Q, K, V, mask=mask, scale=scale, mode=mode, causal=causal)
    report = compare_float(result, trace, step=step, fmt=format_of(result), digits=digits)
    return FloatReport(report.step, report.fmt, mode, report.entries)


from symattn.floatref.sdpa import SDPAReference as SDPAReference, correctly_rounded as correctly_rounded  # noqa: E402  (the SDPA oracle, public here)
from symattn.floatref.sdpa import causal_pattern as causal_pattern  # noqa: E402
from symattn.floatref.ulp import ULPReport as ULPReport, ulp_report as ulp_report  # noqa: E402
from symattn.floatref.hard import HardCase as HardCase, hard_cases as hard_cases  # noqa: E402
from symattn.floatref.backward import BackwardReference as BackwardReference  # noqa: E402  (gradients, public here)
from symattn.floatref.backward import correctly_rounded_backward as correctly_rounded_backward  # noqa: E402
