"""A worksheet's choices, checked and turned into versions once, for ``symattn worksheet``
and for the page's worksheet download (``symattn serve``).

Why one place: the page offers the CLI's options, and its zip must be the folder the CLI
writes for the same flags, refused in the same words when the flags do not go together.
The choices are named after the flags (``--versions``, ``--square-dk``, …) and so are the
messages; what reads a flag's own text (argparse, the page's query) stays with its reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from symattn.errors import SymattnError
from symattn.numbers.certify import Rounding

if TYPE_CHECKING:
    from symattn.classroom.worksheets.sheets import Version, WorksheetOptions
    from symattn.problem.problem import Problem

__all__ = ["SheetChoices", "min_weight_value", "refuse_combinations", "sheet_plan"]


@dataclass(frozen=True)
class SheetChoices:
    """What ``symattn worksheet`` is asked for beside the problem (its flags, parsed)."""

    template: str | None = None
    versions: int | None = None
    seed: int | None = None
    digits: int | None = None
    places: int | None = None
    questions: str | None = None
    points: str | None = None
    square_dk: bool = False
    allow_ties: bool = False
    min_weight: Fraction = field(default_factory=lambda: Fraction(1, 100))
    no_derivation: bool = False
    no_separate: bool = False
    format: str = "latex"
    paper: str | None = None
    layout: str = "standard"
    pdf: bool = False
    selfcheck: bool = False

    @property
    def rounding(self) -> Rounding:
        """The answers' rounding: ``--places`` if given, else ``--digits`` (default 3)."""
        return Rounding(places=self.places) if self.places is not None else Rounding(digits=self.digits or 3)


def min_weight_value(text: str) -> Fraction:
    """``--min-weight W``: a number from 0 to below 1 (a ``ValueError`` naming the flag)."""
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--min-weight must be a number such as 0.01, got {text!r}") from None
    if not 0 <= value < 1:
        raise ValueError(f"--min-weight must be from 0 to below 1, got {text}")
    return value


def refuse_combinations(c: SheetChoices) -> None:
    """Refuse, in one line naming the flags, choices that do not go together (before any work)."""
    random = c.versions is not None
    if random and c.seed is None:
        raise SymattnError("--versions needs --seed S, so the same versions can be made again")
    if not random:
        for flag, given in (("--seed", c.seed is not None), ("--square-dk", c.square_dk),
                            ("--allow-ties", c.allow_ties)):
            if given:
                raise SymattnError(f"{flag} applies to random versions: add --versions N")
    if c.no_separate and not random:
        raise SymattnError("--no-separate applies to random versions: add --versions N")
    if c.pdf and c.format == "html":
        raise SymattnError("--pdf compiles the LaTeX sheets: leave out --format html, or --pdf")
    if c.selfcheck and c.pdf:
        raise SymattnError("--selfcheck writes HTML pages: leave out --pdf")
    if c.paper and (c.format == "html" or c.selfcheck):
        raise SymattnError("--paper sets the LaTeX paper size: leave out --format html (or --selfcheck), "
                           "or --paper")


def sheet_plan(problem: Problem, toml: str, c: SheetChoices) -> tuple[list[Version], WorksheetOptions]:
    """The versions and the options of a worksheet of ``problem`` (``toml``: its file's text,
    version A's problem file when no versions are drawn)."""
    from symattn.classroom.worksheets.questions import (
        askable_steps, asked_steps, default_questions, parse_points,
    )
    from symattn.classroom.worksheets.sheets import WorksheetOptions, parse_questions, seeded_versions, single_version
    from symattn.classroom.worksheets.versions import spec_from_problem
    from symattn.trace.trace import Trace

    template = Trace(problem)
    questions = (parse_questions(c.questions, askable_steps(template)) if c.questions
                 else default_questions(template))
    asked = tuple(asked_steps(template, questions))
    points = parse_points(c.points, asked) if c.points is not None else None
    options = WorksheetOptions(questions=questions, rounding=c.rounding, derivation=not c.no_derivation,
                               points=points, format=c.format, paper=c.paper or "letter",
                               layout=c.layout)
    if c.versions is None:
        return single_version(problem, toml), options
    spec = spec_from_problem(problem, square_dk=c.square_dk, allow_ties=c.allow_ties,
                             min_weight=c.min_weight)
    separate = None if c.no_separate else (questions, c.rounding)
    return seeded_versions(spec, c.seed or 0, c.versions, separate=separate), options
