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
from symattn.floatrun.patterns import FIRST_BLOCK, NEAR_TIE, Scan, scan, window_edges
from symattn.limits import MAX_SAMPLE

RISKY_PER_REASON = 8
_RULE = re.compile(r"^sample:(\d{1,7})(\+risky)?$")


def parse_rows(text: str) -> str:
    """Check a --rows rule: 'all', 'sample:N' or 'sample:N+risky'."""
    m = _RULE.match(text)
    if text != "all" and (not m or not 1 <= int(m[1]) <= MAX_SAMPLE):
        raise FloatRefError(f"--rows {text!r}: give all, sample:N or sample:N+risky (1 ≤ N ≤ {MAX_SAMPLE:,}), "
                            "e.g. sample:256+risky")
    return text


def choose_rows(rule: str, seed: int, q: Any, k: Any, s: dict[str, Any], found: Scan | None = None):
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
    risky = risky_rows(q, k, s, found) if m[2] else {}
    chosen = sorted(set(int(i) for i in sample) | {i for rows in risky.values() for i in rows})
    if len(chosen) >= L:
        return None
    return chosen, risky


def risky_rows(q: Any, k: Any, s: dict[str, Any], found: Scan | None = None) -> dict[str, list[int]]:
    """The structurally risky rows of one head, by reason (at most RISKY_PER_REASON each; from
    the float64 scan of :func:`.patterns.scan`, which the report's row patterns share)."""
    import numpy as np

    L = q.shape[0]
    found = found or scan(q, k, s)
    allowed = found.allowed
    out: dict[str, list[int]] = {"first and last": sorted({0, L - 1})}
    if allowed is not None:
        none = np.nonzero(~allowed.any(axis=1))[0]
        first = np.nonzero(~allowed[:, :FIRST_BLOCK].any(axis=1) & allowed.any(axis=1))[0]
        out["fully masked"] = none[:RISKY_PER_REASON].tolist()
        out["first key block masked"] = first[:RISKY_PER_REASON].tolist()
        out["window edge"] = np.nonzero(window_edges(allowed))[0][:RISKY_PER_REASON].tolist()
    gaps = found.gaps
    ties = np.nonzero(gaps <= NEAR_TIE)[0]
    out["near-tie at the row maximum"] = ties[np.argsort(gaps[ties], kind="stable")][:RISKY_PER_REASON].tolist()
    out["largest |score|"] = [int(np.argmax(found.peaks))]
    return {reason: [int(i) for i in rows] for reason, rows in out.items() if rows}
