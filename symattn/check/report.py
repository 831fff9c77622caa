"""The counts of a check and the ``--json`` contract; every other view of verdicts is the
check document (``document.build_check``) printed in the format asked for.

Why separate from the checker: the verdicts are data; how they are shown
(terminal, JSON, LaTeX, HTML, a grade report) is a view that never re-judges anything.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Sequence

from symattn.check.checker import FigureVerdict
from symattn.check.verdict import CODES

__all__ = ["render_json", "summary", "summary_line"]


def summary(verdicts: Sequence[FigureVerdict]) -> dict:
    """Counts by verdict code, and whether every figure is right."""
    counts = Counter(v.code for v in verdicts)
    right = sum(1 for v in verdicts if v.right)
    return {"figures": len(verdicts), "right": right, "not_right": len(verdicts) - right,
            "counts": {code: counts[code] for code in CODES if counts[code]},
            "all_right": right == len(verdicts)}


def summary_line(verdicts: Sequence[FigureVerdict]) -> str:
    s = summary(verdicts)
    parts = ", ".join(f"{n} {code}" for code, n in s["counts"].items())
    noun = "figure" if s['figures'] == 1 else "figures"
    return f"{s['figures']} {noun}: {s['right']} right, {s['not_right']} not ({parts})"


def render_json(verdicts: Sequence[FigureVerdict], source: str | None = None) -> str:
    """The ``--json`` contract: {"figures": [...], "summary": {...}}."""
    data = {"source": source, "figures": [v.to_json() for v in verdicts],
            "summary": summary(verdicts)}
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"
