"""ULP report of any kernel's SDPA result against the exact values.

Every entry's error (y − x)/ulp(x) is computed from an enclosure of the
exact x: float64 enclosures for float32/float16/bfloat16 results,
double-double ones (fast64.py) for float64 results; their width in ulps is
reported as the resolution: errors are exact to within it.  Whether an entry is correctly
rounded is proved (it is compared with :func:`correctly_rounded`), and the
worst entries are certified through the Trace: their exact value and their
error in ulps as certified decimals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from symattn.numbers.certify import Rounding, round_rational
from symattn.floatref.binary import BINARY_FORMATS
from symattn.floatref.errors import FloatRefError
from symattn.trace.display import Displayable

#: histogram bins of |error| in ulps: (low, high]; the first is [0, 0.5]
BIN_EDGES = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, 1024.0, float("inf"))
_SHOW_DIGITS = {"float64": 17, "float32": 9, "float16": 5, "bfloat16": 4, "float8_e4m3fn": 3,
                "float8_e5m2": 3}


@dataclass(frozen=True)
class WorstEntry:
    """One of the worst entries: where, the candidate, the exact value and the errors (certified)."""

    index: tuple
    got: float
    exact: str            # certified decimal of the exact value
    ulps: str             # certified (y − x)/ulp(x)
    relative: str | None  # certified (y − x)/|x|; None when x = 0


@dataclass(frozen=True)
class HeadSummary:
    head: tuple
    max_ulps: float
    mean_ulps: float
    max_relative: float
    correctly_rounded: int
    entries: int


@dataclass(frozen=True)
class ULPReport(Displayable):
    """Errors in ULPs of a candidate SDPA result (step 'output' or 'weights') in one format."""

    step: str
    fmt: str
    max_ulps: float
    mean_ulps: float
    max_relative: float
    correctly_rounded: int
    entries: int
    skipped_rows: int                 # fully masked rows: no exact value to compare with
    resolution: float                 # every error is exact to within this many ulps
    histogram: tuple                  # counts per BIN_EDGES bin
    heads: tuple = field(default_factory=tuple)
    worst: tuple = field(default_factory=tuple)
    errors: Any = None                # every entry's (y − x)/ulp(x), float64 (NaN: fully masked)
    #: max |y − x| / max |x|: the error relative to the largest entry (normwise), which does not
    #: explode at an output near 0 as the relative error does
    max_error_of_max_abs: float = 0.0
    #: max |y − x| / Σ_j w_j·|v_j|: each output entry's error relative to its scale, the size a
    #: float kernel's rounding errors have (weights: relative to the row's Σ w = 1, so absolute)
    max_error_of_scale: float = 0.0

    def exceeds(self, max_ulp: float) -> bool:
        """True when some entry's |error| is proved to exceed ``max_ulp`` ulps."""
        return self.max_ulps - self.resolution > max_ulp

    def to_json(self) -> dict[str, Any]:
        bins = [f"({lo:g}, {hi:g}]" if lo else f"[0, {hi:g}]" for lo, hi in zip(BIN_EDGES, BIN_EDGES[1:])]
        return {"step": self.step, "format": self.fmt, "entries": self.entries,
                "correctly_rounded": self.correctly_rounded, "max_ulps": self.max_ulps,
                "mean_ulps": self.mean_ulps, "max_relative": self.max_relative,
                "max_error_relative_to_max_abs": self.max_error_of_max_abs,
                "max_error_relative_to_scale": self.max_error_of_scale,
                "resolution_ulps": self.resolution, "fully_masked_rows_skipped": self.skipped_rows,
                "histogram": dict(zip(bins, self.histogram)),
                "heads": [{"head": list(h.head), "max_ulps": h.max_ulps, "mean_ulps": h.mean_ulps,
                           "max_relative": h.max_relative, "correctly_rounded": h.correctly_rounded,
                           "entries": h.entries} for h in self.heads],
                "worst": [{"index": list(w.index), "float": repr(w.got), "exact": w.exact, "ulps": w.ulps,
                           "relative": w.relative} for w in self.worst]}

    def shown(self, entry: WorstEntry) -> str:
        """A worst entry's candidate value as a decimal at its format's digits (rounded by certify)."""
        return str(round_rational(Fraction(entry.got), Rounding(digits=_SHOW_DIGITS[self.fmt])))

    def __str__(self) -> str:
        """The report as the terminal shows it (the document ``symattn floatref`` prints)."""
        return self._shown("text") or repr(self)


def ulp_report(out: Any, Q: Any, K: Any, V: Any, *, step: str = "output", dtype: str | None = None,
               worst: int = 5, attn_mask: Any = None, is_causal: bool = False,
               scale: float | None = None, enable_gqa: bool = False, causal_align: str = "top_left",
               mask_value: float | None = None) -> ULPReport:
    """The error of ``out`` (a kernel's SDPA output, or its weights with step='weights')."""
    import numpy as np

    from symattn.floatref import fast, fast64, format_of
    from symattn.floatref.sdpa import _array, correctly_rounded, normalise

    if step not in ("output", "weights"):
        raise FloatRefError(f"step is {step!r}: compare the 'output' or the 'weights'")
    fmt_name = dtype or format_of(out)
    if fmt_name not in BINARY_FORMATS:
        raise FloatRefError(f"dtype is {fmt_name!r}: use {', '.join(BINARY_FORMATS)}")
    fmt = BINARY_FORMATS[fmt_name]
    kwargs: dict[str, Any] = dict(attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa,
                                  causal_align=causal_align, mask_value=mask_value)
    y = _array(out, step).astype(np.float64)
    pr = normalise(Q, K, V, attn_mask, is_causal, scale, enable_gqa, causal_align=causal_align,
                   mask_value=mask_value)
    ref = correctly_rounded(Q, K, V, dtype=fmt_name, **kwargs)
    want = getattr(ref, step).astype(np.float64)
    if y.shape != want.shape:
        raise FloatRefError(f"the candidate {step} has shape {y.shape} but SDPA's is {want.shape}")
    if not np.isfinite(y[~np.isnan(want)]).all():
        raise FloatRefError(f"the candidate {step} holds inf or NaN where the exact value is finite")
    ulps = np.zeros(want.shape)
    rel = np.zeros(want.shape)
    resolution = 0.0
    for idx in np.ndindex(*pr.batch):
        allowed = None if pr.allowed is None else pr.allowed[idx]
        additive = None if pr.additive is None else pr.additive[idx]
        if fmt_name == "float64":      # double-double enclosures: mid = hi + lo
            enc = fast64.enclose64(pr.Q[idx], pr.K[idx], pr.V[idx], allowed, additive,
                                   fast64.scale_dd(pr.scale))
            (hi, lo), rad = (enc.output, enc.output_rad) if step == "output" else (enc.weights, enc.weights_rad)
            if step == "weights":
                hi, lo, rad = (np.where(enc.weights_zero, 0.0, a) for a in (hi, lo, rad))
            diff = (y[idx] - hi) - lo
            mid = hi
        else:
            enc32 = fast.enclose(pr.Q[idx], pr.K[idx], pr.V[idx], allowed, additive, pr.scale_f, pr.scale_err)
            mid, rad = ((enc32.output, enc32.output_rad) if step == "output"
                        else (enc32.weights, enc32.weights_rad))
            diff = y[idx] - mid
        unit = _ulp(mid, fmt)
        with np.errstate(invalid="ignore", divide="ignore"):
            ulps[idx] = diff / unit
            rel[idx] = np.where(mid != 0, np.abs(diff) / np.abs(mid), 0.0)
            r = np.where(np.isnan(want[idx]), 0.0, rad / unit)
        # an entry whose enclosure is wide is not usable for ulps: the correctly rounded
        # value is exact, and |x − RN(x)| ≤ 1/2 ulp, so use it with resolution 0.5
        wide = ~(r < 1e-3)
        ulps[idx] = np.where(wide, (y[idx] - want[idx]) / _ulp(want[idx], fmt), ulps[idx])
        r = np.where(wide, 0.5, r)
        resolution = max(resolution, float(np.nanmax(r)) if r.size else 0.0)
    live = ~np.isnan(want)
    skipped = int(np.isnan(ref.output).all(axis=-1).sum())
    a = np.abs(ulps)[live]
    hist = np.histogram(a, bins=np.array(BIN_EDGES))[0] if a.size else np.zeros(len(BIN_EDGES) - 1)
    exact = int(((y == want) & live).sum())
    heads = []
    for idx in np.ndindex(*pr.batch):
        m = live[idx]
        h = np.abs(ulps[idx])[m]
        heads.append(HeadSummary(idx, float(h.max()) if h.size else 0.0, float(h.mean()) if h.size else 0.0,
                                 float(rel[idx][m].max()) if h.size else 0.0,
                                 int(((y[idx] == want[idx]) & m).sum()), int(m.sum())))
    order = np.argsort(-np.where(live, np.abs(ulps), -1).reshape(-1), kind="stable")[:max(0, worst)]
    flat_live = live.reshape(-1)
    chosen = [np.unravel_index(k, want.shape) for k in order.tolist() if flat_live[k]]
    report = ULPReport(step, fmt_name, float(a.max()) if a.size else 0.0, float(a.mean()) if a.size else 0.0,
                       float(rel[live].max()) if a.size else 0.0, exact, int(live.sum()), skipped,
                       resolution, tuple(int(n) for n in hist), tuple(heads),
                       tuple(_certify_worst(pr, step, fmt_name, y, chosen)), np.where(live, ulps, np.nan))
    return _scaled_errors(report, want, live, pr, fmt)


def _scaled_errors(report: ULPReport, want, live, pr, fmt) -> ULPReport:
    """The report with its errors relative to max |x| and to each entry's scale Σ_j w_j·|v_j|.

    |y − x| is taken as |error in ulps|·ulp(RN(x)) (x and RN(x) share their binade but at a
    power of two, where this is within a factor 2), and the scale from a float64 softmax: both
    are float64 estimates for reading errors, not proved figures."""
    import dataclasses

    import numpy as np

    if not live.any():
        return report
    err = np.where(live, np.abs(np.nan_to_num(report.errors)) * _ulp(np.nan_to_num(want), fmt), 0.0)
    top = float(np.abs(want[live]).max())
    if report.step == "output":
        scale = np.einsum("...ls,...sc->...lc", _weights64(pr), np.abs(pr.V))
    else:
        scale = np.ones(want.shape)
    scale = np.maximum(scale, np.abs(np.nan_to_num(want)))
    with np.errstate(invalid="ignore", divide="ignore"):
        of_scale = np.where(err == 0, 0.0, err / scale)
    return dataclasses.replace(report, max_error_of_max_abs=float(err.max()) / top if top else
                               (0.0 if not err.any() else float("inf")),
                               max_error_of_scale=float(of_scale[live].max()))


def _weights64(pr):
    """The softmax weights in float64 (0 on blocked keys and fully masked rows), for the scale."""
    import numpy as np

    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        t = pr.scale_f * np.einsum("...le,...se->...ls", pr.Q, pr.K)
        if pr.additive is not None:
            t = t + pr.additive
        if pr.allowed is not None:
            t = np.where(pr.allowed, t, -np.inf)
        top = t.max(axis=-1, keepdims=True)
        w = np.exp(t - np.where(np.isfinite(top), top, 0.0))
        z = w.sum(axis=-1, keepdims=True)
        return np.where(z > 0, w / np.where(z > 0, z, 1.0), 0.0)


def _ulp(x, fmt):
    import numpy as np

    _, e = np.frexp(np.where(np.isfinite(x), x, 0.0))
    return np.ldexp(1.0, np.maximum(e - 1, fmt.e_min) - fmt.p + 1)


def _certify_worst(pr, step: str, fmt_name: str, y, chosen: list) -> list[WorstEntry]:
    """The chosen entries' exact values and errors as certified decimals (arb path of rows.py)."""
    from symattn.numbers.certify import Rounding, round_rational
    from symattn.floatref import _certify_ball, errors_from_ball, ulp_of
    from symattn.floatref.rows import enclosures, rational_entry

    out = []
    shown = Rounding(digits=_SHOW_DIGITS[fmt_name])
    rounding = Rounding(digits=3)
    for e in chosen:
        e = tuple(int(v) for v in e)
        idx, i, c = e[:-2], e[-2], e[-1]
        got = Fraction(float(y[e]))
        x = rational_entry(pr, idx, i, step, c)
        if x is not None:
            exact = round_rational(x, shown)
            u = round_rational((got - x) / ulp_of(x, fmt_name), rounding)
            rel = None if x == 0 else round_rational((got - x) / abs(x), rounding)
        else:
            def ball(prec: int, idx=idx, i=i, c=c):
                return enclosures(pr, idx, [i], step, prec)[0][c]
            exact = _certify_ball(ball, shown, "exact value")
            u, rel = errors_from_ball(ball, got, fmt_name, rounding)
        out.append(WorstEntry(e, float(y[e]), str(exact), str(u), None if rel is None else str(rel)))
    out.sort(key=lambda w: -abs(float(w.ulps)))
    return out
