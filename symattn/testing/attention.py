"""``assert_attention_close``: a kernel's forward output (and LSE) against the correctly rounded one.

What is measured: every output entry's error (y − x)/ulp(x) against the exact value x
(:func:`symattn.floatref.ulp_report`: float64 or double-double enclosures, the worst entries
certified), and, when an LSE is given, every row's distance in ULPs from the correctly
rounded LSE (within ½ ulp of its error against the exact value).  The gate fails when some
error is *proved* to exceed the allowance: the output's max |error| less the report's
resolution, the LSE's distance less ½.

Conventions are the caller's to state, never guessed: ``causal_align`` ('top_left' as
PyTorch, 'bottom_right' as FlashAttention ≥ 2.1), ``lse_base`` ('e' as FlashAttention stores
it, or 2), ``mask_value`` (a finite sentinel such as −5e4, added where keys are blocked) and
``fully_masked`` (None: rows with no key are not judged; 'nan' or 'zero': demanded).  When a
failing candidate does match the neighbouring convention (the other alignment, the other
base), the message says so.
"""

from __future__ import annotations

import math
from typing import Any

from symattn.floatref import format_of
from symattn.floatref.errors import FloatRefError
from symattn.floatref.lse import LSEReport
from symattn.floatref.sdpa import correctly_rounded, normalise
from symattn.floatref.ulp import BIN_EDGES, ULPReport, ulp_report

#: significant digits shown per format (enough to tell neighbouring values apart)
DIGITS = {"float64": 17, "float32": 9, "float16": 5, "bfloat16": 4, "float8_e4m3fn": 3, "float8_e5m2": 3}
#: (precision with the hidden bit, minimum normal exponent), for ULP distances of the LSE
_FORMATS = {"float64": (53, -1022), "float32": (24, -126), "float16": (11, -14), "bfloat16": (8, -126),
            "float8_e4m3fn": (4, -6), "float8_e5m2": (3, -14)}


class AttentionMismatch(AssertionError):
    """The gate's failure: ``report`` is the output's ULPReport (None when shapes differ)."""

    def __init__(self, message: str, report: ULPReport | None = None) -> None:
        super().__init__(message)
        self.report = report


def to_numpy(x: Any, name: str):
    """A numpy array from a numpy array, a torch tensor on any device (duck-typed: torch is never
    imported), or nested lists.  bfloat16 and fp8 tensors are widened to float32, exactly."""
    import numpy as np

    if hasattr(x, "detach") and hasattr(x, "cpu") and hasattr(x, "numpy"):
        t = x.detach().cpu()
        if str(t.dtype) in ("torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2"):
            t = t.float()
        x = t.numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as err:
        raise FloatRefError(f"{name} is not an array ({err}); give a numpy array or a torch tensor") from None


def _dtype_of(x: Any, given: str | None) -> str:
    if given is not None:
        return given
    name = str(getattr(x, "dtype", ""))
    if name.startswith("torch."):
        name = name[6:]
    return name if name in _FORMATS else format_of(to_numpy(x, "the candidate"))


def _ulp(x, fmt: str):
    import numpy as np

    p, e_min = _FORMATS[fmt]
    _, e = np.frexp(np.where(np.isfinite(x), x, 0.0))
    return np.ldexp(1.0, np.maximum(e - 1, e_min) - p + 1)


def _show(x: float, fmt: str) -> str:
    return f"{x:.{DIGITS[fmt]}g}"


def assert_attention_close(out: Any, Q: Any, K: Any, V: Any, *, attn_mask: Any = None,
                           is_causal: bool = False, causal_align: str = "top_left",
                           scale: float | None = None, enable_gqa: bool = False,
                           mask_value: float | None = None, dtype: str | None = None,
                           max_ulp: float = 4.0, lse: Any = None, lse_base: Any = "e",
                           lse_max_ulp: float | None = None, fully_masked: str | None = None,
                           ulp_scale: str = "entry", worst: int = 5) -> ULPReport:
    """Assert that ``out`` (a kernel's SDPA output, (…, L, Ev)) is within ``max_ulp`` ulps of the
    exact value on every entry, and ``lse`` (…, L) if given within ``lse_max_ulp`` (default
    ``max_ulp``) of the correctly rounded log-sum-exp in ``lse_base`` ('e' or 2).

    ``ulp_scale``: 'entry' (default) measures each error in ulps of the exact entry; 'magnitude'
    in ulps of the entry's scale Σ_j p_j·|v_j| (≥ |o|), the size a float kernel's rounding
    errors have: an output near 0 that cancels (κ = Σ p|v| / |o| large) is then not held to
    its own tiny ulp.  Arguments as torch's scaled_dot_product_attention, plus the conventions
    above.  Returns
    the output's ULPReport when the gate passes; raises :class:`AttentionMismatch` (an
    AssertionError, so pytest shows the message) when it does not."""
    import numpy as np

    if fully_masked not in (None, "nan", "zero"):
        raise FloatRefError(f"fully_masked is {fully_masked!r}: use None (not judged), 'nan' or 'zero'")
    if ulp_scale not in ("entry", "magnitude"):
        raise FloatRefError(f"ulp_scale is {ulp_scale!r}: use 'entry' (ulps of each exact value) or "
                            "'magnitude' (ulps of Σ p·|v|, the entry's scale)")
    if lse_base not in ("e", 2, "2"):
        raise FloatRefError(f"lse_base is {lse_base!r}: use 'e' (natural, as FlashAttention) or 2")
    fmt = _dtype_of(out, dtype)
    sdpa: dict[str, Any] = dict(attn_mask=attn_mask, is_causal=is_causal, causal_align=causal_align,
                                scale=scale, enable_gqa=enable_gqa, mask_value=mask_value)
    y = to_numpy(out, "the candidate output").astype(np.float64)
    lse_fmt = None if lse is None else _dtype_of(lse, None)
    ref = correctly_rounded(Q, K, V, dtype=fmt, return_lse=lse is not None, lse_dtype=lse_fmt, **sdpa)
    want = ref.output.astype(np.float64)
    if y.shape != want.shape:
        raise AttentionMismatch(f"the candidate output has shape {y.shape}, but SDPA's is {want.shape} "
                                f"(Q {np.shape(to_numpy(Q, 'Q'))}, V {np.shape(to_numpy(V, 'V'))})")
    problems: list[str] = []
    masked = np.broadcast_to(ref.fully_masked[..., None], want.shape)
    if fully_masked is not None and masked.any():
        ok = np.isnan(y[masked]) if fully_masked == "nan" else (y[masked] == 0)
        if not ok.all():
            problems.append(f"{int((~ok).sum())} entries of fully masked rows are not {fully_masked} "
                            f"(fully_masked={fully_masked!r}; rows with no key: "
                            f"{_indices(np.argwhere(ref.fully_masked))})")
    bad = ~np.isfinite(y) & ~masked
    if bad.any():
        problems.append(f"{int(bad.sum())} entries are inf or NaN where the exact value is finite, "
                        f"first at {_indices(np.argwhere(bad))}")
        y = np.where(bad, want, y)
    report = ulp_report(y, Q, K, V, dtype=fmt, worst=worst, **sdpa)
    pr = normalise(Q, K, V, attn_mask, is_causal, scale, enable_gqa, causal_align=causal_align,
                   mask_value=mask_value)
    lines: list[str] = []
    if ulp_scale == "entry":
        over = report.exceeds(max_ulp)
        if over:
            lines += _output_lines(report, ref, y, max_ulp, fmt, pr)
    else:
        mass = np.einsum("...ls,...sc->...lc", np.nan_to_num(ref.weights.astype(np.float64)), np.abs(pr.V))
        d = np.where(masked, 0.0, np.abs(y - np.nan_to_num(want)) / _ulp(mass, fmt))
        over = bool((d - 0.5 > max_ulp).any())
        if over:
            lines += _magnitude_lines(d, mass, ref, y, max_ulp, fmt, worst)
    if over:
        hint = _alignment_hint(y, ref.output, Q, K, V, fmt, max_ulp, sdpa, ulp_scale)
        if hint:
            lines.append(f"  {hint}")
    if lse is not None:
        lines += _lse_lines(to_numpy(lse, "the candidate lse"), ref, lse_base,
                            max_ulp if lse_max_ulp is None else lse_max_ulp, problems)
    if over or problems:
        head = [f"attention forward ({fmt}; is_causal={is_causal}, causal_align={causal_align!r}, "
                f"mask_value={mask_value}) does not match the correctly rounded reference:"]
        raise AttentionMismatch("\n".join(head + [f"- {p}" for p in problems] + lines), report)
    return report


def _indices(where, limit: int = 3) -> str:
    items = [str(list(int(v) for v in row)) for row in where[:limit]]
    return ", ".join(items) + (" …" if len(where) > limit else "")


def _histogram(counts) -> str:
    bins = [f"[0, {hi:g}]" if lo == 0 else f"({lo:g}, {hi:g}]" for lo, hi in zip(BIN_EDGES, BIN_EDGES[1:])]
    return ", ".join(f"{b}: {n}" for b, n in zip(bins, counts) if n)


def _magnitude_lines(d, mass, ref, y, max_ulp: float, fmt: str, worst: int) -> list[str]:
    """The failure in ulps of Σ p·|v| (distance from the correctly rounded value, ±½)."""
    import numpy as np

    count = int((d - 0.5 > max_ulp).sum())
    lines = [f"- output: {count} of {int((~np.isnan(ref.output)).sum())} entries are more than {max_ulp:g} "
             f"ulp of their scale Σ_j p_j·|v_j| from the correctly rounded value (max {float(d.max()):.3g}, "
             "±½ for the exact error)", "  worst entries:"]
    for k in np.argsort(-d.reshape(-1), kind="stable")[:max(1, worst)].tolist():
        at = tuple(int(v) for v in np.unravel_index(k, d.shape))
        o = float(ref.output[at])
        kappa = math.inf if o == 0 else float(mass[at]) / abs(o)
        lines.append(f"    {list(at)}: got {_show(float(y[at]), fmt)}, correctly rounded {_show(o, fmt)}, "
                     f"Σ p·|v| = {_show(float(mass[at]), fmt)}; {float(d[at]):.3g} ulp of it; κ = {kappa:.3g}")
    counts = np.histogram(d[~np.isnan(ref.output)], bins=np.array(BIN_EDGES))[0]
    lines.append("  |error| in ulps of Σ p·|v|: " + _histogram(counts))
    return lines


def _output_lines(report: ULPReport, ref, y, max_ulp: float, fmt: str, pr) -> list[str]:
    import numpy as np

    errors = report.errors
    count = int((np.abs(np.nan_to_num(errors)) - report.resolution > max_ulp).sum())
    lines = [f"- output: {count} of {report.entries} entries are more than {max_ulp:g} ulp from the exact "
             f"value (max {report.max_ulps:.3g} ulp; {report.correctly_rounded} correctly rounded; "
             f"errors exact to ±{report.resolution:.2g} ulp)",
             "  worst entries (exact values certified; κ = Σ_j p_j·|v_j| / |o|, the row's cancellation: "
             "a float kernel's error grows with it):"]
    for w in report.worst:
        idx, i, c = w.index[:-2], w.index[-2], w.index[-1]
        p = np.nan_to_num(ref.weights[idx][i].astype(np.float64))
        mass = float(p @ np.abs(pr.V[idx][:, c]))
        o = float(ref.output[w.index])
        kappa = math.inf if o == 0 else mass / abs(o)
        lines.append(f"    {list(w.index)}: got {_show(w.got, fmt)}, exact {w.exact}, correctly rounded "
                     f"{_show(o, fmt)}; error {w.ulps} ulp (relative {w.relative}); κ = {kappa:.3g}")
    lines.append("  |error| in ulps: " + _histogram(report.histogram))
    return lines


def _alignment_hint(y, asked, Q, K, V, fmt: str, max_ulp: float, sdpa, ulp_scale: str) -> str | None:
    """When a causal candidate matches the other alignment's output, say so (L ≠ S only)."""
    import numpy as np

    if not sdpa["is_causal"]:
        return None
    other = "top_left" if sdpa["causal_align"] == "bottom_right" else "bottom_right"
    alt = correctly_rounded(Q, K, V, dtype=fmt, **{**sdpa, "causal_align": other}).output.astype(np.float64)
    if np.array_equal(alt, asked.astype(np.float64), equal_nan=True):   # L = S: the same mask
        return None
    live = ~np.isnan(alt)
    if ulp_scale == "magnitude":
        pr = normalise(Q, K, V, sdpa["attn_mask"], True, sdpa["scale"], sdpa["enable_gqa"],
                       causal_align=other, mask_value=sdpa["mask_value"])
        w = correctly_rounded(Q, K, V, dtype=fmt, **{**sdpa, "causal_align": other}).weights
        unit = _ulp(np.einsum("...ls,...sc->...lc", np.nan_to_num(w.astype(np.float64)), np.abs(pr.V)), fmt)
    else:
        unit = _ulp(alt, fmt)
    d = np.abs(y[live] - alt[live]) / unit[live]
    if d.size and float(d.max()) <= max_ulp + 0.5:
        return (f"the candidate is within {max_ulp:g} ulp of the {other!r} causal mask's output: "
                f"the kernel aligns the causal diagonal {other.replace('_', '-')} "
                f"(pass causal_align={other!r} if that is what it means)")
    return None


def _lse_lines(got, ref, base, max_ulp: float, problems: list[str]) -> list[str]:
    try:
        rep = LSEReport(got, ref, "e" if base == "e" else "2")
    except FloatRefError as err:
        problems.append(str(err))
        return []
    fmt = ref.lse_dtype
    if rep.nonfinite.any():
        problems.append(f"the lse is inf or NaN on {int(rep.nonfinite.sum())} rows with keys")
    over = rep.over(max_ulp) & ~rep.nonfinite
    if not over.any():
        return []
    name = "base e (natural)" if base == "e" else "base 2"
    problems.append(f"lse ({name}, {fmt}): {int(over.sum())} of {int(rep.live.sum())} rows are more than "
                    f"{max_ulp:g} ulp from the correctly rounded value (max {rep.max_ulps:.3g} ulp)")
    lines = ["  lse worst rows (distance from the correctly rounded value, within ½ ulp of the exact error):"]
    for at, g, w, u in rep.worst():
        lines.append(f"    {list(at)}: got {_show(g, fmt)}, correctly rounded {_show(w, fmt)}; {u:+.3g} ulp")
    if rep.matches_other_base(max_ulp):
        lines.append("  the candidate matches the " + ("base-2" if base == "e" else "natural (base e)")
                     + " LSE instead: the kernel mixes up the bases (lse2 = lse / ln 2); pass lse_base="
                     + ("2" if base == "e" else "'e'") + " if that is what it stores")
    return lines
