"""Checking's closed vocabularies as enums: the verdict codes.

A member is its string (``Verdict.MISTAKE == "mistake"``; JSON, ``str``, ``format`` and
``repr`` give the string), so ``--json``, the CSV reports and every page read as before; the
enum is what the code compares against, so a misspelt code is an error, not a silent miss.
"""

from __future__ import annotations

from symattn.vocab import Vocabulary

__all__ = ["Verdict"]


class Verdict(Vocabulary):
    """A verdict code, from best to worst (the order :func:`symattn.check.verdict.worst` uses)."""

    EXACT = "exact"             # the exact value itself
    ROUNDED = "rounded"         # the certified rounding at the written precision
    LAST_DIGIT = "last-digit"   # off in the last digit only (a truncation, or rounded the wrong way)
    MISTAKE = "mistake"         # wrong, and reproduced by a named mistake
    WRONG = "wrong"             # wrong, and no named mistake reproduces it
    INVALID = "invalid"         # unreadable, or for a target that does not exist
    BLANK = "blank"             # no answer given (grading)

    @property
    def right(self) -> bool:
        """Exact or rounded: the codes that count as right."""
        return self in (Verdict.EXACT, Verdict.ROUNDED)

