"""Verdicts on written figures as a document: every figure with its verdict, the expected
value and the named mistake, then the counts.

The verdicts are data (``check.checker``); this module only decides what a
reader sees, so the terminal, LaTeX, JSON and HTML list the same sections and
nothing is re-judged.  The ``--json`` contract stays ``check.report.render_json``.
"""

from __future__ import annotations

from collections.abc import Sequence

from symattn.check.checker import FigureVerdict
from symattn.check.report import summary, summary_line
from symattn.document.build.check_math import expected_math, says
from symattn.document.blocks import Note, Report, Section, VerdictRow, Verdicts

__all__ = ["build_check_document", "verdict_row", "MARK"]

MARK = {"exact": "✓", "rounded": "✓", "last-digit": "✗", "mistake": "✗", "wrong": "✗", "invalid": "!",
        "blank": "–"}


def _expected(v: FigureVerdict) -> str | None:
    """The certified rounding at the written precision, entries joined (a row or matrix)."""
    if v.shape is None or v.shape == (1, 1):
        return v.entries[0].expected if v.entries else None
    values = [e.expected for e in v.entries if e.expected is not None]
    return None if len(values) < len(v.entries) else ", ".join(values)


def verdict_row(v: FigureVerdict) -> VerdictRow:
    """One verdict as a table row: its message and expected value also as math nodes
    (``check_math``), which LaTeX and HTML typeset."""
    return VerdictRow(target=v.target, variant=v.variant, text=v.text if isinstance(v.text, str) else repr(v.text),
                      code=v.code, mark=MARK[v.code], right=v.right, message=v.message,
                      expected=_expected(v), mistake=v.mistake, says=says(v), expected_math=expected_math(v))


def build_check_document(verdicts: Sequence[FigureVerdict], title: str | None = None) -> Report:
    """The check report: every verdict, then the counts.  The terminal prints it as the
    one-line-per-figure listing; LaTeX and HTML show the sections."""
    rows = tuple(verdict_row(v) for v in verdicts)
    sections = (Section("verdicts", "Verdicts", (Verdicts(rows),)),
                Section("summary", "Summary", (Note((summary_line(verdicts),)),)))
    return Report(title or "Check of written figures", sections,
                  meta={"kind": "check", "summary": summary(verdicts)}, show_title=title is not None)
