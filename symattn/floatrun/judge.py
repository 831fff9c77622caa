"""Each tensor of a shard against floatref, summarised as JSON data.

Every summary has the same keys: ``entries``, ``max_ulp``, ``mean_ulp``, ``resolution``
(each error is exact to within it), ``correctly_rounded``, ``histogram`` (counts per
:data:`symattn.floatref.ulp.BIN_EDGES` bin), ``skipped_rows`` and ``worst`` (index, the
kernel's float, the exact value and the errors as certified decimals).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from symattn.floatref.errors import FloatRefError
from symattn.floatrun.patterns import rows_over


#: significant digits that tell neighbouring values of a format apart (the kernel's value as shown)
SHOW_DIGITS = {"float64": 17, "float32": 9, "float16": 5, "bfloat16": 4, "float8_e4m3fn": 3, "float8_e5m2": 3}


def shown(x: float, fmt: str) -> str:
    """A kernel's float as a decimal at its format's digits (rounded by the certified path)."""
    from symattn.numbers.certify import Rounding, round_rational

    return str(round_rational(Fraction(float(x)), Rounding(digits=SHOW_DIGITS.get(fmt, 17))))


def _np():
    import numpy

    return numpy


def _mask_args(s: dict[str, Any], L: int, S: int, rows: Any) -> dict[str, Any]:
    """SDPA's mask arguments for the chosen rows (a causal row subset becomes a boolean mask)."""
    from symattn.floatref import causal_pattern

    mask, causal = s["mask"], s["causal"]
    if rows is None:
        if causal is not None:
            return {"is_causal": True, "causal_align": causal.replace("-", "_")}
        return {"attn_mask": mask}
    picked = rows[0]
    if causal is not None:
        return {"attn_mask": causal_pattern(L, S, causal.replace("-", "_"))[picked]}
    return {"attn_mask": None if mask is None else _np().asarray(mask, dtype=bool)[picked]}


def forward(arrays: dict[str, Any], s: dict[str, Any], rows: Any, worst: int) -> dict[str, Any]:
    """The kernel's output against the exact values (floatref.ulp_report), rows as chosen."""
    from symattn import floatref

    q, k, v, out = arrays["q"], arrays["k"], arrays["v"], arrays["out"]
    if out.shape != (q.shape[0], v.shape[-1]):
        raise FloatRefError(f"out has shape {tuple(out.shape)} but SDPA's output is {(q.shape[0], v.shape[-1])}")
    picked = None if rows is None else rows[0]
    qs, outs = (q, out) if picked is None else (q[picked], out[picked])
    report = floatref.ulp_report(outs, qs, k, v, dtype=s["dtype"], worst=worst, scale=s["scale"],
                                 **_mask_args(s, q.shape[0], k.shape[0], rows))
    back = (lambda i: i) if picked is None else (lambda i: int(picked[i]))
    return {"entries": report.entries, "max_ulp": report.max_ulps, "mean_ulp": report.mean_ulps,
            "resolution": report.resolution, "correctly_rounded": report.correctly_rounded,
            "histogram": list(report.histogram), "skipped_rows": report.skipped_rows,
            "reference": "exact", "rows_over": rows_over(report.errors, report.resolution, "query", picked),
            "worst": [{"index": [back(w.index[0]), int(w.index[1])], "float": repr(float(w.got)),
                       "shown": report.shown(w),
                       "exact": w.exact, "ulps": w.ulps, "relative": w.relative} for w in report.worst]}


def ulps_of(y: Any, x: Any, fmt_name: str) -> Any:
    """(y − x) / ulp(x) in the format, elementwise (x a correctly rounded value: exact)."""
    from symattn.floatref.binary import BINARY_FORMATS

    np = _np()
    fmt = BINARY_FORMATS[fmt_name]
    _, e = np.frexp(np.where(np.isfinite(x), x, 0.0))
    unit = np.ldexp(1.0, np.maximum(e - 1, fmt.e_min) - fmt.p + 1)
    return (np.asarray(y, dtype=np.float64) - x) / unit


def _summary(err: Any, y: Any, want: Any, live: Any, worst_rows: list[dict], skipped: int,
             axis: str = "query", row_ids: Any = None) -> dict[str, Any]:
    from symattn.floatref.ulp import BIN_EDGES

    np = _np()
    a = np.abs(err[live])
    over = rows_over(np.where(live, err, 0.0).reshape(err.shape[0], -1), 0.5, axis, row_ids)
    hist = np.histogram(a, bins=np.array(BIN_EDGES))[0] if a.size else np.zeros(len(BIN_EDGES) - 1, int)
    return {"entries": int(live.sum()), "max_ulp": float(a.max()) if a.size else 0.0,
            "mean_ulp": float(a.mean()) if a.size else 0.0, "resolution": 0.5,
            "correctly_rounded": int(((y == want) & live).sum()), "histogram": [int(n) for n in hist],
            "skipped_rows": skipped, "reference": "correctly rounded", "worst": worst_rows, "rows_over": over}


def _worst_indices(err: Any, live: Any, worst: int) -> list[tuple[int, ...]]:
    np = _np()
    flat = np.where(live, np.abs(err), -1.0).reshape(-1)
    order = np.argsort(-flat, kind="stable")[:max(0, worst)]
    return [tuple(int(i) for i in np.unravel_index(k, err.shape)) for k in order.tolist() if flat[k] >= 0]


def lse(arrays: dict[str, Any], s: dict[str, Any], rows: Any, worst: int) -> dict[str, Any]:
    """The kernel's LSE (natural, per row) against the correctly rounded one, in its own format."""
    from symattn import floatref

    np = _np()
    q, k, v, got = arrays["q"], arrays["k"], arrays["v"], arrays["lse"]
    if got.shape != (q.shape[0],):
        raise FloatRefError(f"lse has shape {tuple(got.shape)}: give one value per query row, ({q.shape[0]},)")
    picked = None if rows is None else rows[0]
    qs, ys = (q, got) if picked is None else (q[picked], got[picked])
    fmt = s.get("lse_format") or floatref.format_of(ys)
    if fmt not in floatref.FORMATS:
        raise FloatRefError(f"lse is {fmt}; give float32, bfloat16, float16 or float64 values")
    ref = floatref.correctly_rounded(qs, k, v, dtype=s["dtype"], scale=s["scale"], return_lse=True,
                                     lse_dtype=fmt, **_mask_args(s, q.shape[0], k.shape[0], rows))
    want = ref.lse.astype(np.float64)
    live = np.isfinite(want)
    y = ys.astype(np.float64)
    if not np.isfinite(y[live]).all():
        raise FloatRefError("lse holds inf or NaN on a row that has keys")
    err = np.where(live, ulps_of(y, np.where(live, want, 0.0), fmt), 0.0)
    back = (lambda i: i) if picked is None else (lambda i: int(picked[i]))
    chosen = [{"index": [back(i)], "float": repr(float(y[i])), "shown": shown(y[i], fmt), "exact": repr(float(want[i])) + " (RN)",
               "ulps": f"{err[i]:+.3g}", "relative": None} for (i,) in _worst_indices(err, live, worst)]
    return _summary(err, y, want, live, chosen, int((~live).sum()), "query", picked)


def backward(arrays: dict[str, Any], s: dict[str, Any], grads: list[str], worst: int) -> dict[str, Any]:
    """dQ, dK, dV against the correctly rounded gradients (the exact backward, floatref)."""
    from symattn.floatref import causal_pattern
    from symattn.floatref.backward import correctly_rounded_backward

    np = _np()
    q, k, v, do = arrays["q"], arrays["k"], arrays["v"], arrays["do"]
    causal, mask = s["causal"], s["mask"]
    kwargs: dict[str, Any] = {"scale": s["scale"]}
    if causal == "top-left":
        kwargs["is_causal"] = True
    elif causal is not None:
        kwargs["attn_mask"] = causal_pattern(q.shape[0], k.shape[0], causal.replace("-", "_"))
    elif mask is not None:
        kwargs["attn_mask"] = np.asarray(mask, dtype=bool)
    # the engine path: the worst entries' certified decimals read its exact trace (ref.traces)
    ref = correctly_rounded_backward(q, k, v, do, dtype=s["dtype"], fast_path=False, **kwargs)
    trace = ref.traces[0]
    out = {}
    for g in grads:
        want = np.asarray(getattr(ref, {"dq": "dQ", "dk": "dK", "dv": "dV"}[g]), dtype=np.float64)
        y = np.asarray(arrays[g], dtype=np.float64)
        if y.shape != want.shape:
            raise FloatRefError(f"{g} has shape {tuple(y.shape)} but the gradient is {tuple(want.shape)}")
        live = np.isfinite(want)
        if not np.isfinite(y[live]).all():
            raise FloatRefError(f"{g} holds inf or NaN where the gradient is finite")
        err = np.where(live, ulps_of(y, np.where(live, want, 0.0), s["dtype"]), 0.0)
        step = {"dq": "d_Q", "dk": "d_K", "dv": "d_V"}[g]
        chosen = [_certified(trace, step, i, j, y[i, j], s["dtype"])
                  for i, j in _worst_indices(err, live, worst)]
        out[g] = _summary(err, y, want, live, chosen, 0, "query" if g == "dq" else "key")
    return out


def _certified(trace: Any, step: str, i: int, j: int, got: float, fmt: str) -> dict[str, Any]:
    """One gradient entry's exact value and errors as certified decimals, from the exact trace."""
    from symattn.floatref import errors_from_ball
    from symattn.numbers.certify import Rounding, round_ball, round_rational
    from symattn.numbers.precision import precision, precisions

    exact = trace.step(step)[i, j]
    nine = Rounding(digits=9)
    if exact.is_Rational:
        x = Fraction(int(exact.p), int(exact.q))
        text = str(round_rational(x, nine))
        from symattn.floatref import ulp_of

        ulps = str(round_rational((Fraction(got) - x) / ulp_of(x, fmt), Rounding(digits=3)))
        rel = None if x == 0 else str(round_rational((Fraction(got) - x) / abs(x), Rounding(digits=3)))
        return {"index": [i, j], "float": repr(float(got)), "shown": shown(got, fmt), "exact": text,
                "ulps": ulps, "relative": rel}

    def ball(prec: int):
        return trace.enclosure(step, i, prec)[j]

    decided = None
    for prec in precisions(20):
        with precision(prec):
            decided = round_ball(ball(prec), nine)
        if decided is not None:
            break
    u, rel_d = errors_from_ball(ball, Fraction(got), fmt, Rounding(digits=3))
    return {"index": [i, j], "float": repr(float(got)), "shown": shown(got, fmt), "exact": str(decided), "ulps": str(u),
            "relative": str(rel_d)}
