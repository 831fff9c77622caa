"""Which hard-case pattern every row of a head matches, and which rows fail the gate.

Why every row: a kernel developer fixing a failure wants to know whether the failing rows are
the fully masked ones, a window's edge or near-ties, not only which pattern the worst few
entries' rows had.  The classification is vectorised over the whole head (one float64 pass
over the scores, 256 query rows at a time, the pass :func:`.sampling.risky_rows` needed
anyway), so it costs no more per head than before.

Query rows (the output, the LSE, dQ) and key rows (dK, dV) have their own patterns: a key
row's gradient sums over the queries that see it, so what makes it hard is a key no query
attends to, the tail of a partial last key block or the largest score's key.

A shard keeps every row whose largest |error| less its resolution exceeds :data:`FLOOR` ulps
(with its largest error); the report picks the rows over ``--max-ulp`` from these, so any gate
of at least FLOOR gets every failing row without running the shard again (a gate below FLOOR
gets the rows over FLOOR, and says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the query-row patterns, in the order the report lists them
QUERY = ("first and last", "fully masked", "first key block masked", "window edge",
         "near-tie at the row maximum", "largest |score|")
#: the key-row patterns (dK, dV)
KEY = ("first and last", "attended by no query", "partial last key block", "largest |score|")
NONE = "no pattern"
#: rows kept by a shard: largest |error| less the resolution over this many ulps (½: correct rounding)
FLOOR = 0.5
#: the key block size whose being fully masked is a hard case (FlashAttention's tile width)
FIRST_BLOCK = 64
#: two scores this close (relative to the row's largest |score|) are a near-tie
NEAR_TIE = 2.0 ** -10
_STRIDE = 256


def allowed_keys(s: dict[str, Any], L: int, S: int) -> Any:
    """The (L, S) boolean of allowed keys, or None when every key is allowed."""
    from symattn.floatref import causal_pattern

    if s["causal"] is not None:
        return causal_pattern(L, S, s["causal"].replace("-", "_"))
    if s["mask"] is not None:
        import numpy as np

        return np.asarray(s["mask"], dtype=bool)
    return None


def window_edges(allowed: Any) -> Any:
    """Rows where the first allowed key starts to move: keys begin to leave a sliding window
    (each start of such a run once; a causal mask has none, its first key never moves)."""
    import numpy as np

    some = allowed.any(axis=1)
    first = np.where(some, np.argmax(allowed, axis=1), -1)
    moved = np.zeros(len(first), dtype=bool)
    moved[1:] = (first[1:] > first[:-1]) & some[1:] & some[:-1]
    starts = moved.copy()
    starts[1:] &= ~moved[:-1]
    return starts


@dataclass(frozen=True)
class Scan:
    """One float64 pass over a head's scores: what the patterns need from them."""

    allowed: Any            # (L, S) bool, or None (every key allowed)
    gaps: Any               # (L,) (largest − second largest score) / |largest|; inf when undefined
    peaks: Any              # (L,) the row's largest |score| over its allowed keys
    key_peaks: Any          # (S,) the key's largest |score| over the queries that see it


def scan(q: Any, k: Any, s: dict[str, Any]) -> Scan:
    """The scores in float64, a block of query rows at a time (never the whole L × S at once)."""
    import numpy as np

    L, S = q.shape[0], k.shape[0]
    allowed = allowed_keys(s, L, S)
    scale = s["scale"] if s["scale"] is not None else 1 / np.sqrt(q.shape[1])
    kt = np.asarray(k, dtype=np.float64).T
    gaps, peaks, key_peaks = np.full(L, np.inf), np.zeros(L), np.zeros(S)
    for a in range(0, L, _STRIDE):
        t = np.asarray(q[a:a + _STRIDE], dtype=np.float64) @ kt * scale
        if allowed is not None:
            t = np.where(allowed[a:a + _STRIDE], t, -np.inf)
        if S >= 2:
            top = -np.sort(-t, axis=1)[:, :2]
            with np.errstate(invalid="ignore"):
                gaps[a:a + _STRIDE] = (top[:, 0] - top[:, 1]) / np.maximum(np.abs(top[:, 0]), 1e-300)
        size = np.where(np.isfinite(t), np.abs(t), 0.0)
        peaks[a:a + _STRIDE] = np.max(size, axis=1)
        key_peaks = np.maximum(key_peaks, np.max(size, axis=0))
    return Scan(allowed, np.nan_to_num(gaps, nan=np.inf), peaks, key_peaks)


def classify(q: Any, k: Any, s: dict[str, Any], found: Scan | None = None) -> dict[str, dict[str, Any]]:
    """{"query": {pattern: (L,) bool}, "key": {pattern: (S,) bool}} for every row of one head."""
    import numpy as np

    found = found or scan(q, k, s)
    L, S = q.shape[0], k.shape[0]
    ends_q, ends_k = np.zeros(L, dtype=bool), np.zeros(S, dtype=bool)
    ends_q[[0, L - 1]] = True
    ends_k[[0, S - 1]] = True
    rows: dict[str, Any] = {"first and last": ends_q}
    keys: dict[str, Any] = {"first and last": ends_k}
    allowed = found.allowed
    if allowed is not None:
        some = allowed.any(axis=1)
        rows["fully masked"] = ~some
        rows["first key block masked"] = ~allowed[:, :FIRST_BLOCK].any(axis=1) & some
        rows["window edge"] = window_edges(allowed)
        keys["attended by no query"] = ~allowed.any(axis=0)
    rows["near-tie at the row maximum"] = found.gaps <= NEAR_TIE
    rows["largest |score|"] = np.arange(L) == int(np.argmax(found.peaks))
    if S > FIRST_BLOCK and S % FIRST_BLOCK:
        keys["partial last key block"] = np.arange(S) >= S - S % FIRST_BLOCK
    keys["largest |score|"] = np.arange(S) == int(np.argmax(found.key_peaks))
    return {"query": {n: rows[n] for n in QUERY if n in rows and rows[n].any()},
            "key": {n: keys[n] for n in KEY if n in keys and keys[n].any()}}


def ranges(rows: Any) -> list[list[int]]:
    """Sorted row numbers (or a boolean per row) as inclusive [first, last] runs: compact JSON."""
    import numpy as np

    r = np.asarray(rows)
    if r.dtype == bool:
        r = np.nonzero(r)[0]
    if r.size == 0:
        return []
    r = np.unique(r)
    cut = np.nonzero(np.diff(r) != 1)[0]
    starts = np.concatenate(([r[0]], r[cut + 1]))
    stops = np.concatenate((r[cut], [r[-1]]))
    return [[int(a), int(b)] for a, b in zip(starts.tolist(), stops.tolist())]


def in_ranges(rows: Any, runs: list[list[int]]) -> Any:
    """For each row, whether it lies in one of the inclusive runs (vectorised: searchsorted)."""
    import numpy as np

    r = np.asarray(rows, dtype=np.int64)
    if not runs:
        return np.zeros(r.shape, dtype=bool)
    starts, stops = (np.array(c, dtype=np.int64) for c in zip(*runs))
    at = np.searchsorted(starts, r, side="right") - 1
    return (at >= 0) & (r <= stops[np.maximum(at, 0)])


def described(classes: dict[str, dict[str, Any]], L: int, S: int) -> dict[str, Any]:
    """A head's classification as JSON data: each pattern's rows as runs, and the row counts."""
    return {"rows": int(L), "keys": int(S),
            "query": {n: ranges(m) for n, m in classes["query"].items()},
            "key": {n: ranges(m) for n, m in classes["key"].items()}}


def rows_over(errors: Any, resolution: float, axis: str, row_ids: Any = None) -> dict[str, Any]:
    """The rows of a tensor whose largest |error| less ``resolution`` exceeds FLOOR, with that
    error (``errors``: one row per query or key row, NaN or 0 where there is no entry)."""
    import numpy as np

    a = np.abs(np.asarray(errors, dtype=np.float64))
    a = np.where(np.isnan(a), 0.0, a)
    top = a.max(axis=1) if a.ndim == 2 and a.shape[1] else a.reshape(a.shape[0], -1).max(axis=1, initial=0.0)
    ids = np.arange(a.shape[0]) if row_ids is None else np.asarray(row_ids, dtype=np.int64)
    keep = top - resolution > FLOOR
    return {"axis": axis, "floor": FLOOR, "rows": [int(i) for i in ids[keep].tolist()],
            "max_ulp": [float(x) for x in top[keep].tolist()]}


def merge_over(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One tensor's kept rows over a head's row blocks (each row is in exactly one block)."""
    pairs = sorted((r, m) for p in parts for r, m in zip(p["rows"], p["max_ulp"]))
    return {"axis": parts[0]["axis"], "floor": max(p["floor"] for p in parts),
            "rows": [r for r, _ in pairs], "max_ulp": [m for _, m in pairs]}


def _group(rows: Any, worst: Any, member: Any, of: int) -> dict[str, Any]:
    return {"count": int(member.sum()), "of": int(of), "rows": ranges(rows[member]),
            "max_ulp": float(worst[member].max())}


def failing_rows(over: dict[str, Any], resolution: float, classes: dict[str, Any] | None,
                 gate: float) -> dict[str, Any]:
    """The tensor's rows over the gate, grouped by the patterns each matches (a row matching
    several is in each; ``no pattern`` holds the rest); ``of``: the head's rows with the pattern."""
    import numpy as np

    rows = np.asarray(over["rows"], dtype=np.int64)
    worst = np.asarray(over["max_ulp"], dtype=np.float64)
    fail = worst - resolution > gate
    rows, worst = rows[fail], worst[fail]
    axis = over["axis"]
    out: dict[str, Any] = {"axis": axis, "count": int(rows.size), "complete": gate >= over["floor"],
                           "rows": ranges(rows), "patterns": {}}
    if classes is None or not rows.size:
        return out
    runs = classes.get(axis, {})
    total = int(classes["rows" if axis == "query" else "keys"])
    covered = np.zeros(rows.shape, dtype=bool)
    some = np.zeros(total, dtype=bool)
    for name in (QUERY if axis == "query" else KEY):
        if name not in runs:
            continue
        member = in_ranges(rows, runs[name])
        having = in_ranges(np.arange(total), runs[name])
        some |= having
        if member.any():
            out["patterns"][name] = _group(rows, worst, member, int(having.sum()))
        covered |= member
    if (~covered).any():
        out["patterns"][NONE] = _group(rows, worst, ~covered, int((~some).sum()))
    return out
