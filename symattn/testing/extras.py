"""A kernel's dS, dP and D against the correctly rounded ones (``symattn floatref --ds --dp --delta``).

The references are :func:`symattn.floatref.backward.correctly_rounded_backward`'s ``extras``
(dS = P∘(dP − D) (…, L, S), 0 on blocked keys; dP = dO·Vᵀ (…, L, S); D = rowsum(dO∘O) (…, L)),
each entry correctly rounded and proved.  Each candidate entry's distance d = |y − RN(x)| / unit
is within ½ unit of its error against the exact x, as for dQ, dK, dV
(:mod:`symattn.testing.gradients`).  The unit is one ulp of the entry's *scale* by default
(``ulp_scale="magnitude"``), the sum of the absolute values of its terms, because these cancel
as the gradients do: dP's is |dO|·|V|ᵀ, D's is rowsum(|dO|∘|O|), dS's is P∘(that of dP + that
of D).  P and O in those sums are the correctly rounded forward's (floatref's own, in the
target format: a scale is only the size of a unit, so its rounding does not matter).
``ulp_scale="entry"``: ulps of the entry itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from symattn.floatref.errors import FloatRefError
from symattn.floatref.ulp import BIN_EDGES
from symattn.testing.attention import _histogram, _indices, _show, _ulp, to_numpy

NAMES = ("dS", "dP", "D")

__all__ = ["NAMES", "ExtraEntry", "ExtraSummary", "ExtrasReport", "extras_report"]


@dataclass(frozen=True)
class ExtraEntry:
    """One of the worst entries: the kernel's value, the correctly rounded one, the distance."""

    index: tuple
    got: float
    correctly_rounded: float
    distance: float


@dataclass(frozen=True)
class ExtraSummary:
    """One intermediate's distances from the correctly rounded values, in ``ulp_scale`` units."""

    name: str
    entries: int
    max_ulps: float
    over: int
    histogram: list[int]
    max_abs: float
    worst: tuple[ExtraEntry, ...] = ()


@dataclass(frozen=True)
class ExtrasReport:
    """dS, dP and D (those given) against the correctly rounded ones."""

    fmt: str
    ulp_scale: str
    max_ulp: float
    extras: dict[str, ExtraSummary]

    @property
    def passed(self) -> bool:
        return not any(g.over for g in self.extras.values())

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` contract of ``symattn floatref --ds/--dp/--delta`` (key "extras")."""
        def number(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)
        return {"format": self.fmt, "ulp_scale": self.ulp_scale, "max_ulp": self.max_ulp, "passed": self.passed,
                "histogram_edges": [number(x) for x in BIN_EDGES],
                "intermediates": {n: {"entries": g.entries, "max_ulps": g.max_ulps, "over_max_ulp": g.over,
                                      "histogram": g.histogram, "max_abs_error": g.max_abs,
                                      "worst": [{"index": list(w.index), "got": w.got,
                                                 "correctly_rounded": w.correctly_rounded,
                                                 "distance": w.distance} for w in g.worst]}
                                  for n, g in self.extras.items()}}

    def gate_line(self) -> str:
        """The ``--max-ulp`` verdict."""
        short = "ulps of scale" if self.ulp_scale == "magnitude" else "ulps"
        bad = {n: g.over for n, g in self.extras.items() if g.over}
        if bad:
            return (f"FAIL: entries proved more than {self.max_ulp:g} {short} away "
                    f"({', '.join(f'{n} {k}' for n, k in bad.items())})")
        return f"PASS: no dS, dP or D entry is proved more than {self.max_ulp:g} {short} away"

    def lines(self) -> list[str]:
        """The report as text lines (what the command prints after the gradients)."""
        short = "ulps of scale" if self.ulp_scale == "magnitude" else "ulps"
        out = [f"dS, dP, D ({self.fmt}) against the correctly rounded values, in {short} "
               "(the exact error is within ½ of it)"]
        for g in self.extras.values():
            out.append(f"  {g.name}: {g.entries} entries, max {g.max_ulps:.4g}, max |error| {g.max_abs:.3g}; "
                       f"{g.over} over {self.max_ulp:g}")
            for w in g.worst:
                out.append(f"    {g.name}{list(w.index)}: got {_show(w.got, self.fmt)}, correctly rounded "
                           f"{_show(w.correctly_rounded, self.fmt)}; {w.distance:.3g} {short}")
            out.append(f"    |distance| in {short}: " + _histogram(g.histogram))
        return out


def extras_report(got: dict[str, Any], Q: Any, K: Any, V: Any, dO: Any, *, dtype: str,
                  attn_mask: Any = None, is_causal: bool = False, causal_align: str = "top_left",
                  scale: float | None = None, enable_gqa: bool = False, max_ulp: float = 8.0,
                  ulp_scale: str = "magnitude", worst: int = 5) -> ExtrasReport:
    """The distances of a kernel's dS, dP and D (``got``: name → array, any of the three) from
    the correctly rounded ones; shapes that differ and inf or NaN entries are refused
    (FloatRefError, one line)."""
    import numpy as np

    from symattn.floatref.backward import correctly_rounded_backward

    if ulp_scale not in ("entry", "magnitude"):
        raise FloatRefError(f"ulp_scale is {ulp_scale!r}: use 'magnitude' or 'entry'")
    sdpa: dict[str, Any] = dict(attn_mask=attn_mask, is_causal=is_causal, causal_align=causal_align, scale=scale,
                                enable_gqa=enable_gqa)
    arrays = [to_numpy(x, n) for x, n in ((Q, "Q"), (K, "K"), (V, "V"), (dO, "dO"))]
    ref = correctly_rounded_backward(*arrays, dtype=dtype, extras=tuple(n for n in NAMES if n in got), **sdpa)
    values = {n: to_numpy(a, n).astype(np.float64) for n, a in got.items()}
    for name, y in values.items():
        want = getattr(ref, name)
        if y.shape != want.shape:
            raise FloatRefError(f"the candidate {name} has shape {y.shape}, but the reference's is {want.shape}")
        bad = ~np.isfinite(y)
        if bad.any():
            raise FloatRefError(f"the candidate {name} holds inf or NaN (first at {_indices(np.argwhere(bad))})")
    scales = _scales(arrays, dtype, sdpa, set(values)) if ulp_scale == "magnitude" else {}
    summaries = {}
    for name in NAMES:
        if name not in values:
            continue
        y, want = values[name], getattr(ref, name)
        err = np.abs(y - want)
        size = np.maximum(scales[name], np.abs(want)) if name in scales else np.abs(want)
        d = err / _ulp(size, dtype)
        order = np.argsort(-d.reshape(-1), kind="stable")[:max(0, worst)].tolist()
        top = []
        for k in order:
            at = tuple(int(v) for v in np.unravel_index(k, d.shape))
            top.append(ExtraEntry(at, float(y[at]), float(want[at]), float(d[at])))
        summaries[name] = ExtraSummary(name, int(d.size), float(d.max()) if d.size else 0.0,
                                       int((d - 0.5 > max_ulp).sum()),
                                       np.histogram(d, bins=np.array(BIN_EDGES))[0].tolist(),
                                       float(err.max()) if err.size else 0.0, tuple(top))
    return ExtrasReport(dtype, ulp_scale, max_ulp, summaries)


def _scales(arrays: list, dtype: str, sdpa: dict, names: set) -> dict[str, Any]:
    """Each entry's sum of |terms| (float64): dP's |dO|·|V|ᵀ, D's rowsum(|dO|∘|O|), dS's P∘(both)."""
    import numpy as np

    from symattn.floatref.sdpa import correctly_rounded

    Q, K, V, dO = (np.asarray(a, dtype=np.float64) for a in arrays)
    if sdpa["enable_gqa"] and V.ndim >= 3 and Q.shape[-3] != V.shape[-3]:
        V = np.repeat(V, Q.shape[-3] // V.shape[-3], axis=-3)
    dp = np.abs(dO) @ np.swapaxes(np.abs(V), -1, -2)
    out: dict[str, Any] = {"dP": dp}
    if names & {"D", "dS"}:
        ref = correctly_rounded(*arrays[:3], dtype=dtype, **sdpa)
        O = np.nan_to_num(np.asarray(ref.output, dtype=np.float64))  # noqa: E741 (rows with no key: 0)
        out["D"] = (np.abs(dO) * np.abs(O)).sum(axis=-1)
        out["dS"] = np.nan_to_num(np.asarray(ref.weights, dtype=np.float64)) * (dp + out["D"][..., None])
    return out
