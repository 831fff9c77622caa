"""Views of verdicts: one line per figure (text) and the ``--json`` contract.

Why separate from the checker: the verdicts are data; how they are shown
(terminal, JSON, a grade report) is a view that never re-judges anything.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Sequence

from symattn.check.checker import FigureVerdict
from symattn.check.verdict import CODES

__all__ = ["render_json", "render_text", "summary"]

_MARK = {"exact": "✓", "rounded": "✓", "last-digit": "✗", "mistake": "✗", "wrong": "✗",
         "invalid": "!"}


def summary(verdicts: Sequence[FigureVerdict]) -> dict:
    """Counts by verdict code, and whether every figure is right."""
    counts = Counter(v.code for v in verdicts)
    right = sum(1 for v in verdicts if v.right)
    return {"figures": len(verdicts), "right": right, "not_right": len(verdicts) - right,
            "counts": {code: counts[code] for code in CODES if counts[code]},
            "all_right": right == len(verdicts)}


def _one_line(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def summary_line(verdicts: Sequence[FigureVerdict]) -> str:
    s = summary(verdicts)
    parts = ", ".join(f"{n} {code}" for code, n in s["counts"].items())
    noun = "figure" if s['figures'] == 1 else "figures"
    return f"{s['figures']} {noun}: {s['right']} right, {s['not_right']} not ({parts})"


def render_text(verdicts: Sequence[FigureVerdict], title: str | None = None) -> str:
    """One line per figure (and its explanation when it is not right), then a summary."""
    lines = [title] if title else []
    width = max((len(v.target) + (len(v.variant) + 3 if v.variant else 0) for v in verdicts),
                default=0)
    for v in verdicts:
        name = v.target + (f" ({v.variant})" if v.variant else "")
        code = v.code + (f": {v.mistake}" if v.mistake else "")
        lines.append(f"{_MARK[v.code]} {name.ljust(width)}  {_one_line(v.text)!s:<40}  {code}")
        if not v.right:
            lines.append(f"    {v.message}")
    lines.append(summary_line(verdicts))
    return "\n".join(lines) + "\n"


def render_json(verdicts: Sequence[FigureVerdict], source: str | None = None) -> str:
    """The ``--json`` contract: {"figures": [...], "summary": {...}}."""
    data = {"source": source, "figures": [v.to_json() for v in verdicts],
            "summary": summary(verdicts)}
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"
