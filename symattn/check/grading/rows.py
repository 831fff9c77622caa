"""A student's graded row, and the report as the class summary reads it.

Why apart from :mod:`~symattn.check.grading.grade`: the class summary
(:mod:`~symattn.check.grading.class_summary`) is part of the report's JSON, so the report
imports it; what the summary reads of a report (its rows, their verdicts and points, and
how a mistake is shown) lives here, below both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from symattn.check.checker import FigureVerdict
from symattn.check.codes import MistakeCode

__all__ = ["ClassReport", "StudentRow", "mistake_name"]


@dataclass
class StudentRow:
    """One student's graded answers (or why the row could not be graded).

    ``note`` says why part of the row could not be graded (it counts as
    unreadable); ``warning`` is for the teacher only (the same student id on
    more than one line: every line is graded).  ``worth`` is what each column
    is worth for this student's version, ``earned`` what each answer earned."""

    line: int
    student: str
    version: str | None
    verdicts: list[FigureVerdict] = field(default_factory=list)
    note: str = ""
    warning: str = ""
    version_id: str | None = None
    worth: list[Fraction] = field(default_factory=list)
    earned: list[Fraction] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)     # each cell as the student wrote it

    @property
    def right(self) -> int:
        return sum(1 for v in self.verdicts if v.right)

    @property
    def points(self) -> Fraction:
        return sum(self.earned, Fraction(0))

    @property
    def max_points(self) -> Fraction:
        return sum(self.worth, Fraction(0))


def mistake_name(verdict: FigureVerdict) -> str:
    """The mistake as the report shows it: its code, and for ``other-version`` which one
    (``other-version: B``)."""
    if verdict.mistake == MistakeCode.OTHER_VERSION and verdict.mistake_detail:
        return f"other-version: {verdict.mistake_detail}"
    return verdict.mistake or ""


class ClassReport(Protocol):
    """What the class summary reads of a :class:`~symattn.check.grading.grade.GradeReport`."""

    targets: list[str]
    rows: list[StudentRow]
    carry: str
    points_source: str
