"""The questions of one worksheet version, as data: what a sheet asks, a key answers, ``grade``
reads and a self-check page judges.

A question is a step of the Trace (``scores``, ``weights``, …) with its number on the sheet,
its shape, its labels, the rounding asked for, its points, and the ``check`` target of the
whole answer (``weights``) and of each entry (``weights[I, love]``), so every consumer names
the same cells the same way.  Nothing here computes or shows a number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from symattn.certify import Rounding
from symattn.trace import Trace
from symattn.worksheet_random import WorksheetError

__all__ = ["QUESTIONS", "SheetQuestion", "asked_steps", "sheet_questions", "parse_points",
           "entry_target", "rounding_words"]

#: The questions a sheet can ask, in the order of the computation.
QUESTIONS = ("Q", "K", "V", "scores", "scaled", "weights", "output")

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class SheetQuestion:
    """One question of a version's sheet (numbered as printed)."""

    number: int
    step: str                                # the step asked for: its ``check`` target
    shape: tuple[int, int]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    entries: tuple[tuple[str, ...], ...]     # the check target of each entry: weights[I, love]
    rounding: Rounding
    points: Fraction | None = None

    @property
    def target(self) -> str:
        return self.step

    def as_json(self) -> dict:
        r = self.rounding
        return {"number": self.number, "step": self.step, "target": self.target,
                "shape": list(self.shape), "row_labels": list(self.row_labels),
                "col_labels": list(self.col_labels), "entries": [list(row) for row in self.entries],
                "rounding": {"digits": r.digits} if r.digits is not None else {"places": r.places},
                "points": None if self.points is None else _points_text(self.points)}


def _points_text(p: Fraction) -> str | int:
    return int(p) if p.denominator == 1 else str(p)


def _index(labels: tuple[str, ...], k: int) -> str:
    """An entry's index as ``check`` reads it: the token's name when it names one position only."""
    label = labels[k]
    if _PLAIN.match(label) and labels.count(label) == 1:
        return label
    return str(k)


def entry_target(step: str, row_labels: tuple[str, ...], col_labels: tuple[str, ...],
                 i: int, j: int) -> str:
    """``weights[I, love]``: the ``check`` target of one entry."""
    return f"{step}[{_index(row_labels, i)}, {_index(col_labels, j)}]"


def asked_steps(trace: Trace, questions: tuple[str, ...]) -> list[str]:
    """The steps a version's sheet asks for: Q, K, V only when they are computed (not given)."""
    projected = trace.problem.projected
    return [q for q in questions if projected or q not in ("Q", "K", "V")]


def parse_points(text: str, questions: tuple[str, ...]) -> dict[str, Fraction]:
    """``--points``: ``2`` (every question), ``1,1,2,3`` (in the sheet's order) or
    ``weights=3,output=2`` (the others get none)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise WorksheetError("--points is empty: give 2, or 1,2,3 in question order, or weights=3,output=2")
    out: dict[str, Fraction] = {}
    named = any("=" in t for t in items)
    if named and not all("=" in t for t in items):
        raise WorksheetError("--points: give every question by name (weights=3,output=2) or none")
    if not named and len(items) not in (1, len(questions)):
        raise WorksheetError(f"--points gives {len(items)} numbers for {len(questions)} questions "
                             f"({', '.join(questions)}): give one number, or one per question")
    for k, item in enumerate(items):
        name, _, value = item.rpartition("=") if named else ("", "", item)
        name = name.strip()
        if named and name not in questions:
            raise WorksheetError(f"--points: {name!r} is not a question of this sheet; "
                                 f"the questions are {', '.join(questions)}")
        if len(value) > 12:
            raise WorksheetError(f"--points: {value[:20]!r}… is too long for a number of points")
        try:
            points = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise WorksheetError(f"--points: {value.strip()!r} is not a number of points "
                                 "(such as 2 or 1.5)") from None
        if not 0 < points <= 1000:
            raise WorksheetError(f"--points: {value.strip()} must be above 0 and at most 1000")
        if named:
            out[name] = points
        elif len(items) == 1:
            return {q: points for q in questions}
        else:
            out[questions[k]] = points
    return out


def sheet_questions(trace: Trace, questions: tuple[str, ...], rounding: Rounding,
                    points: dict[str, Fraction] | None = None) -> list[SheetQuestion]:
    """The questions of one version, numbered as its sheet and its key number them."""
    out = []
    for number, step in enumerate(asked_steps(trace, questions), start=1):
        s = trace.step(step)
        rows, cols = tuple(s.row_labels), tuple(s.col_labels)
        entries = tuple(tuple(entry_target(step, rows, cols, i, j) for j in range(s.shape[1]))
                        for i in range(s.shape[0]))
        out.append(SheetQuestion(number, step, s.shape, rows, cols, entries, rounding,
                                 (points or {}).get(step)))
    return out


def rounding_words(rounding: Rounding) -> str:
    """``3 significant digits``, ``2 decimal places``."""
    if rounding.digits is not None:
        return f"{rounding.digits} significant digit{'s' if rounding.digits != 1 else ''}"
    return f"{rounding.places} decimal place{'s' if rounding.places != 1 else ''}"
