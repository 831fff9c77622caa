"""Which rows of a long head to check: all, or a seeded sample plus the structurally risky ones.

Why these rows (``--rows sample:N+risky``): kernels fail where their structure changes, not at
random.  The first and last rows (boundary tiles), rows with no key at all (fully masked:
0/0 or a sentinel), rows whose first key block is fully masked (a block skipped before the
running maximum is set), window edges (rows where a sliding window's first key starts to
move: the kernel begins to skip key blocks on the left), rows whose two largest scores nearly
tie (the running maximum changes hands late; cancellation in the rescale), and the row with
the largest |score| (overflow of exp without the max subtraction).  Each reason keeps at most
RISKY_PER_REASON rows.
"""

from __future__ import annotations

import re
from typing import Any

from symattn.floatref.errors import FloatRefError
from symattn.limits import MAX_SAMPLE

RISKY_PER_REASON = 8
#: the key block size whose being fully masked is a hard case (FlashAttention's tile width)
FIRST_BLOCK = 64
#: two scores this close (relative to the row's largest |score|) are a near-tie
NEAR_TIE = 2.0 ** -10
_RULE = re.compile(r"^sample:(\d{1,7})(\+risky)?$")


def parse_rows(text: str) -> str:
    """Check a --rows rule: 'all', 'sample:N' or 'sample:N+risky'."""
    m = _RULE.match(text)
    if text != "all" and (not m or not 1 <= int(m[1]) <= MAX_SAMPLE):
        raise FloatRefError(f"--rows {text!r}: give all, sample:N or sample:N+risky (1 ≤ N ≤ {MAX_SAMPLE:,}), "
                            "e.g. sample:256+risky")
    return text


def choose_rows(rule: str, seed: int, q: Any, k: Any, s: dict[str, Any]):
    """None for every row, else (sorted rows, {reason: rows}) for the rule."""
    import numpy as np

    parse_rows(rule)
    if rule == "all":
        return None
    m = _RULE.match(rule)
    assert m is not None
    L = q.shape[0]
    n = min(int(m[1]), L)
    sample = np.random.default_rng(seed).choice(L, size=n, replace=False) if n < L else np.arange(L)
    risky = risky_rows(q, k, s) if m[2] else {}
    chosen = sorted(set(int(i) for i in sample) | {i for rows in risky.values() for i in rows})
    if len(chosen) >= L:
        return None
    return chosen, risky


def _allowed(s: dict[str, Any], L: int, S: int) -> Any:
    from symattn.floatref import causal_pattern

    if s["causal"] is not None:
        return causal_pattern(L, S, s["causal"].replace("-", "_"))
    if s["mask"] is not None:
        import numpy as np

        return np.asarray(s["mask"], dtype=bool)
    return None


def _window_edges(allowed: Any) -> list[int]:
    """Rows where the first allowed key starts to move: keys begin to leave a sliding window
    (each start of such a run once; a causal mask has none, its first key never moves)."""
    import numpy as np

    some = allowed.any(axis=1)
    first = np.where(some, np.argmax(allowed, axis=1), -1)
    moved = np.zeros(len(first), dtype=bool)
    moved[1:] = (first[1:] > first[:-1]) & some[1:] & some[:-1]
    starts = moved.copy()
    starts[1:] &= ~moved[:-1]
    return [int(i) for i in np.nonzero(starts)[0]]


def risky_rows(q: Any, k: Any, s: dict[str, Any]) -> dict[str, list[int]]:
    """The structurally risky rows of one head, by reason (float64 scores, a block at a time)."""
    import numpy as np

    L, S = q.shape[0], k.shape[0]
    allowed = _allowed(s, L, S)
    out: dict[str, list[int]] = {"first and last": sorted({0, L - 1})}
    if allowed is not None:
        none = np.nonzero(~allowed.any(axis=1))[0]
        first = np.nonzero(~allowed[:, :FIRST_BLOCK].any(axis=1) & allowed.any(axis=1))[0]
        out["fully masked"] = none[:RISKY_PER_REASON].tolist()
        out["first key block masked"] = first[:RISKY_PER_REASON].tolist()
        out["window edge"] = _window_edges(allowed)[:RISKY_PER_REASON]
    scale = s["scale"] if s["scale"] is not None else 1 / np.sqrt(q.shape[1])
    kt = np.asarray(k, dtype=np.float64).T
    gaps, peaks = np.full(L, np.inf), np.zeros(L)
    for a in range(0, L, 256):
        t = np.asarray(q[a:a + 256], dtype=np.float64) @ kt * scale
        if allowed is not None:
            t = np.where(allowed[a:a + 256], t, -np.inf)
        if S >= 2:
            top = -np.sort(-t, axis=1)[:, :2]
            with np.errstate(invalid="ignore"):
                gaps[a:a + 256] = (top[:, 0] - top[:, 1]) / np.maximum(np.abs(top[:, 0]), 1e-300)
        peaks[a:a + 256] = np.max(np.where(np.isfinite(t), np.abs(t), 0.0), axis=1)
    ties = np.nonzero(np.nan_to_num(gaps, nan=np.inf) <= NEAR_TIE)[0]
    out["near-tie at the row maximum"] = ties[np.argsort(gaps[ties], kind="stable")][:RISKY_PER_REASON].tolist()
    out["largest |score|"] = [int(np.argmax(peaks))]
    return {reason: [int(i) for i in rows] for reason, rows in out.items() if rows}
