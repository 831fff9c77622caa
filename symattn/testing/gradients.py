"""``assert_attention_grads_close``: a kernel's dQ, dK, dV against the correctly rounded gradients.

What is measured: each entry's distance d = |y − RN(x)| / unit from the correctly rounded
gradient RN(x) (:func:`symattn.floatref.backward.correctly_rounded_backward`), within ½ unit of
its error against the exact x.  The unit is, by default (``ulp_scale="magnitude"``), one ulp of
the entry's *scale* — the sum of the absolute values of its terms (docs/floatref.md),
the size a float kernel's rounding errors have — because gradients cancel: a right float64
backward measured up to 6,024 ulps of a cancelling entry but at most 3 ulps of its scale
(20 random (2, 6, 5, 4) problems; docs/floatref.md).  ``ulp_scale="entry"`` measures in ulps of the entry itself.  The gate fails
when some d − ½ exceeds ``max_ulp``, naming the worst entries with their exact values
(certified decimals), the correctly rounded ones, a histogram and the rows' conditioning κ.

``given={"out": O, "lse": lse}`` judges the backward alone against FlashAttention's recipe on
the kernel's own saved forward (the conditional reference).  ``recipe=`` (an
:class:`symattn.floatref.fp8_backward.FP8BackwardRecipe`, with ``given``) judges an fp8 kernel
against the exact value of its own quantised algorithm instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from symattn.floatref.backward import BackwardReference, correctly_rounded_backward
from symattn.floatref.errors import FloatRefError
from symattn.floatref.ulp import BIN_EDGES
from symattn.testing.attention import DIGITS, _dtype_of, _histogram, _indices, _show, _ulp, to_numpy

NAMES = ("dQ", "dK", "dV")


class AttentionGradsMismatch(AssertionError):
    """The gate's failure: ``report`` holds the measured distances (None when shapes differ)."""

    def __init__(self, message: str, report: "GradsReport | None" = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class GradEntry:
    """One of a gradient's worst entries: the kernel's value, the exact one (a certified decimal),
    the correctly rounded one, the distance and the conditioning."""

    index: tuple
    got: float
    exact: str
    correctly_rounded: float
    distance: float
    kappa_entry: float
    kappa_row: float


@dataclass(frozen=True)
class GradSummary:
    """One gradient's distances: in ``ulp_scale`` units, and beside them the largest absolute
    distance relative to the gradient's largest |entry| (normwise) and to each entry's scale."""

    name: str
    entries: int
    max_ulps: float
    over: int
    histogram: list[int]
    max_abs: float              # max |y − RN(x)|
    normwise: float             # max |y − RN(x)| / max |RN(x)|
    of_scale: float             # max |y − RN(x)| / scale (the sum of |terms|)
    worst: tuple[GradEntry, ...] = ()


@dataclass(frozen=True)
class GradsReport:
    """Each gradient's distances from the correctly rounded one, in ``ulp_scale`` units."""

    fmt: str
    ulp_scale: str
    max_ulp: float
    grads: dict[str, GradSummary]
    reference: BackwardReference = field(repr=False)

    @property
    def max_ulps(self) -> dict[str, float]:
        return {n: g.max_ulps for n, g in self.grads.items()}

    @property
    def over(self) -> dict[str, int]:
        return {n: g.over for n, g in self.grads.items()}

    @property
    def histograms(self) -> dict[str, list[int]]:
        return {n: g.histogram for n, g in self.grads.items()}

    @property
    def passed(self) -> bool:
        return not any(self.over.values())

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` contract of ``symattn floatref --grad-output`` (key "backward")."""
        def number(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)
        cond = self.reference.condition
        return {"format": self.fmt, "ulp_scale": self.ulp_scale, "max_ulp": self.max_ulp,
                "conditional": self.reference.conditional, "passed": self.passed,
                "max_row_condition": None if cond is None or not cond.size else number(float(cond.max())),
                "histogram_edges": [number(x) for x in BIN_EDGES],
                "gradients": {n: {"entries": g.entries, "max_ulps": g.max_ulps, "over_max_ulp": g.over,
                                  "histogram": g.histogram, "max_abs_error": g.max_abs,
                                  "max_error_relative_to_max_abs": g.normwise,
                                  "max_error_relative_to_scale": g.of_scale,
                                  "worst": [{"index": list(w.index), "got": w.got, "exact": w.exact,
                                             "correctly_rounded": w.correctly_rounded, "distance": w.distance,
                                             "kappa_entry": number(w.kappa_entry),
                                             "kappa_row": number(w.kappa_row)} for w in g.worst]}
                              for n, g in self.grads.items()}}


def grads_report(dq: Any, dk: Any, dv: Any, Q: Any, K: Any, V: Any, dO: Any, *, attn_mask: Any = None,
                 is_causal: bool = False, causal_align: str = "top_left", scale: float | None = None,
                 enable_gqa: bool = False, mask_value: float | None = None,
                 given: dict[str, Any] | None = None, dtype: str | None = None, max_ulp: float = 8.0,
                 ulp_scale: str = "magnitude", worst: int = 5, recipe: Any = None) -> GradsReport:
    """The distances of a kernel's gradients from the correctly rounded ones, the ``worst``
    entries of each certified; shapes that differ and inf or NaN entries are refused
    (FloatRefError, one line).  What ``symattn floatref --grad-output`` prints."""
    import numpy as np

    ref, got, fmt, _, _ = _prepare(dq, dk, dv, Q, K, V, dO, attn_mask, is_causal, causal_align, scale,
                                   enable_gqa, mask_value, given, dtype, ulp_scale, recipe)
    problems = _shape_problems(got, ref)
    if problems:
        raise FloatRefError(problems[0])
    for name in NAMES:
        bad = ~np.isfinite(got[name])
        if bad.any():
            raise FloatRefError(f"the candidate {name} holds inf or NaN (first at {_indices(np.argwhere(bad))})")
    return _measure(got, ref, fmt, max_ulp, ulp_scale, worst, every=True)


def _prepare(dq, dk, dv, Q, K, V, dO, attn_mask, is_causal, causal_align, scale, enable_gqa, mask_value,
             given, dtype, ulp_scale, recipe=None):
    """(reference, candidates as float64 arrays, format, SDPA keywords, numpy inputs)."""
    import numpy as np

    if ulp_scale not in ("entry", "magnitude"):
        raise FloatRefError(f"ulp_scale is {ulp_scale!r}: use 'magnitude' (ulps of each entry's sum of "
                            "absolute terms, the default) or 'entry' (ulps of the exact entry)")
    fmt = _dtype_of(dq, dtype)
    sdpa: dict[str, Any] = dict(attn_mask=None if attn_mask is None else to_numpy(attn_mask, "attn_mask"),
                                is_causal=is_causal, causal_align=causal_align, scale=scale,
                                enable_gqa=enable_gqa, mask_value=mask_value)
    arrays = [to_numpy(x, n) for x, n in ((Q, "Q"), (K, "K"), (V, "V"), (dO, "dO"))]
    given_np = None if given is None else {k: to_numpy(v, f"given[{k!r}]") for k, v in given.items()}
    ref = (correctly_rounded_backward(*arrays, dtype=fmt, given=given_np, **sdpa) if recipe is None
           else recipe.reference(*arrays, dtype=fmt, given=given_np, **sdpa))
    got = dict(zip(NAMES, (to_numpy(x, n).astype(np.float64) for x, n in zip((dq, dk, dv), NAMES))))
    return ref, got, fmt, sdpa, (arrays, given_np)


def _measure(got: dict, ref: BackwardReference, fmt: str, max_ulp: float, ulp_scale: str, worst: int,
             every: bool) -> GradsReport:
    """Distances per gradient; the worst entries certified for every gradient (``every``) or
    only for those over ``max_ulp``."""
    import numpy as np

    grads = {}
    for name in NAMES:
        y, want = got[name], getattr(ref, name)
        err = np.abs(y - want)
        d = err / _unit(ref, name, want, fmt, ulp_scale)
        over = int((d - 0.5 > max_ulp).sum())
        top = float(np.abs(want).max()) if want.size else 0.0
        scale = np.maximum(ref.scales[name], np.abs(want)) if ref.scales is not None else np.abs(want)
        with np.errstate(invalid="ignore", divide="ignore"):
            of_scale = np.where(err == 0, 0.0, err / scale)
        worst_entries = _worst(name, y, d, ref, fmt, worst) if (every or over) else ()
        grads[name] = GradSummary(name, int(d.size), float(d.max()) if d.size else 0.0, over,
                                  np.histogram(d, bins=np.array(BIN_EDGES))[0].tolist(),
                                  float(err.max()) if err.size else 0.0,
                                  float(err.max()) / top if top else (0.0 if not err.any() else math.inf),
                                  float(of_scale.max()) if of_scale.size else 0.0, worst_entries)
    return GradsReport(fmt, ulp_scale, max_ulp, grads, ref)


def _worst(name: str, y, d, ref: BackwardReference, fmt: str, count: int) -> tuple[GradEntry, ...]:
    import numpy as np

    want = getattr(ref, name)
    out = []
    for k in np.argsort(-d.reshape(-1), kind="stable")[:max(0, count)].tolist():
        at = tuple(int(v) for v in np.unravel_index(k, d.shape))
        w = float(want[at])
        kappa = (math.nan if ref.scales is None else math.inf if w == 0
                 else float(ref.scales[name][at]) / abs(w))
        out.append(GradEntry(at, float(y[at]), _certified(ref, name, at, fmt), w, float(d[at]), kappa,
                             _row_kappa(ref, name, at)))
    return tuple(out)


def assert_attention_grads_close(dq: Any, dk: Any, dv: Any, Q: Any, K: Any, V: Any, dO: Any, *,
                                 attn_mask: Any = None, is_causal: bool = False,
                                 causal_align: str = "top_left", scale: float | None = None,
                                 enable_gqa: bool = False, mask_value: float | None = None,
                                 given: dict[str, Any] | None = None, dtype: str | None = None,
                                 max_ulp: float = 8.0, ulp_scale: str = "magnitude",
                                 worst: int = 5, recipe: Any = None) -> GradsReport:
    """Assert that a kernel's gradients of SDPA (numpy arrays or torch tensors) are within
    ``max_ulp`` units of the correctly rounded ones on every entry (see the module docstring).

    Arguments as torch's scaled_dot_product_attention plus ``causal_align``, ``mask_value`` and
    ``given`` (and ``recipe``, an fp8 backward recipe to judge against, with ``given``);
    ``dtype`` defaults to dq's.  Returns the GradsReport when the gate passes; raises
    :class:`AttentionGradsMismatch` (an AssertionError, so pytest shows the message)."""
    import numpy as np

    ref, got, fmt, sdpa, (arrays, given_np) = _prepare(
        dq, dk, dv, Q, K, V, dO, attn_mask, is_causal, causal_align, scale, enable_gqa, mask_value, given,
        dtype, ulp_scale, recipe)
    head = _head(fmt, sdpa, given, recipe)
    problems = _shape_problems(got, ref)
    if problems:
        raise AttentionGradsMismatch(head + "\n" + "\n".join(f"- {p}" for p in problems))
    for name in NAMES:
        bad = ~np.isfinite(got[name])
        if bad.any():
            problems.append(f"{name}: {int(bad.sum())} entries are inf or NaN, first at {_indices(np.argwhere(bad))}")
            got[name] = np.where(bad, getattr(ref, name), got[name])
    report = _measure(got, ref, fmt, max_ulp, ulp_scale, worst, every=False)
    lines: list[str] = []
    for name in NAMES:
        if report.over[name]:
            lines += grad_lines(report.grads[name], fmt, max_ulp, ulp_scale)
    if lines and recipe is None:
        hint = _alignment_hint(got, arrays, given_np, fmt, sdpa, max_ulp, ulp_scale)
        if hint:
            lines.append(f"  {hint}")
    if problems or lines:
        text = "\n".join([head] + [f"- {p}" for p in problems] + lines)
        raise AttentionGradsMismatch(text, report)
    return report


def _head(fmt: str, sdpa: dict, given: Any, recipe: Any = None) -> str:
    what = "the recipe on the kernel's saved O and lse (given=)" if given is not None else "the exact gradients"
    if recipe is not None:
        what = f"the fp8 recipe {recipe.name} on the kernel's saved O (given=)"
    return (f"attention backward ({fmt}; is_causal={sdpa['is_causal']}, causal_align={sdpa['causal_align']!r}, "
            f"mask_value={sdpa['mask_value']}) does not match the correctly rounded reference ({what}):")


def _shape_problems(got: dict, ref: BackwardReference) -> list[str]:
    out = []
    for name in NAMES:
        shape, want = got[name].shape, getattr(ref, name).shape
        if shape != want:
            note = (" (the transpose's shape: a missing or extra transpose?)"
                    if shape[:-2] + shape[-2:][::-1] == want else "")
            out.append(f"{name} has shape {shape}, but the gradient's is {want}{note}")
    return out


def _unit(ref: BackwardReference, name: str, want: Any, fmt: str, ulp_scale: str) -> Any:
    if ulp_scale == "magnitude" and ref.scales is not None:
        import numpy as np

        return _ulp(np.maximum(ref.scales[name], np.abs(want)), fmt)
    return _ulp(want, fmt)


def grad_lines(g: GradSummary, fmt: str, max_ulp: float, ulp_scale: str) -> list[str]:
    """The failure of one gradient: the count, the worst entries certified, the histogram."""
    unit = "ulp of its scale (the sum of absolute terms)" if ulp_scale == "magnitude" else "ulp"
    short, many = ("ulp", "ulps") if ulp_scale == "entry" else ("ulp of scale", "ulps of scale")
    lines = [f"- {g.name}: {g.over} of {g.entries} entries are more than {max_ulp:g} {unit} from the correctly "
             f"rounded value (max {g.max_ulps:.3g}, ±½ for the exact error)",
             "  worst entries (exact values certified; κ_entry = scale / |exact|; κ_row: the query "
             "rows' cancellation in dP − D):"]
    for w in g.worst:
        lines.append(f"    {g.name}{list(w.index)}: got {_show(w.got, fmt)}, exact {w.exact}, correctly rounded "
                     f"{_show(w.correctly_rounded, fmt)}; {w.distance:.3g} {short}; "
                     f"κ_entry = {w.kappa_entry:.3g}, κ_row = {w.kappa_row:.3g}")
    lines.append(f"  {g.name} |distance| in {many}: " + _histogram(g.histogram))
    return lines


def _row_kappa(ref: BackwardReference, name: str, at: tuple) -> float:
    """dQ: its query row's κ; dK, dV (a key): the largest κ of the query rows of its head(s)."""
    import numpy as np

    if ref.condition is None:
        return math.nan
    cond = np.asarray(ref.condition)
    if name == "dQ":
        return float(cond[at[:-1]])
    lead = at[:-2]
    q_batch, kv_batch = cond.shape[:-1], ref.dK.shape[:-2]
    if q_batch == kv_batch:
        return float(np.max(cond[lead]))
    group, h = q_batch[-1] // kv_batch[-1], lead[-1]          # GQA: the query heads of kv head h
    return float(np.max(cond[lead[:-1] + (slice(h * group, (h + 1) * group),)]))


def _certified(ref: BackwardReference, name: str, at: tuple, fmt: str) -> str:
    """The exact entry as a certified decimal (3 more digits than the format shows)."""
    from symattn.numbers.certify import Rounding, round_ball
    from symattn.numbers.precision import precision

    rounding = Rounding(digits=DIGITS[fmt] + 3)
    for prec in (128, 256, 512, 1024):
        with precision(prec):
            ball = ref.exact_ball(name, at, prec)
            if ball.is_zero():
                return "0"
            value = round_ball(ball, rounding)
        if value is not None:
            return str(value)
    return "(not certified within 1024 bits: it may be 0)"


def _alignment_hint(got: dict, arrays: list, given: Any, fmt: str, sdpa: dict, max_ulp: float,
                    ulp_scale: str) -> str | None:
    """When a causal candidate matches the other alignment's gradients, say so (L ≠ S only)."""
    import numpy as np

    if not sdpa["is_causal"] or arrays[0].shape[-2] == arrays[1].shape[-2]:
        return None
    other = "top_left" if sdpa["causal_align"] == "bottom_right" else "bottom_right"
    try:
        alt = correctly_rounded_backward(*arrays, dtype=fmt, given=given, **{**sdpa, "causal_align": other})
    except FloatRefError:
        return None
    for name in NAMES:
        want = getattr(alt, name)
        if (np.abs(got[name] - want) / _unit(alt, name, want, fmt, ulp_scale) - 0.5 > max_ulp).any():
            return None
    return (f"the gradients are within {max_ulp:g} ulp of the {other!r} causal mask's: the kernel aligns "
            f"the causal diagonal {other.replace('_', '-')} (pass causal_align={other!r} if that is what it means)")
