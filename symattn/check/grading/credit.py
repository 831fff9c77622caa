"""Points: per question, per column, and per entry (partial credit), in exact fractions.

Why fractions: a row answer with 2 of 3 entries right earns 2/3 of its
points, and a question answered in three columns gives each a third of its
points; sums of such shares are exact only as fractions.  They are shown
rounded to two places (a rounding of a known rational, not an estimate).

Which points a column gets:

- no points given: 1 point per column (so ``points`` equals ``right`` for a
  class of right-or-wrong answers);
- a key equal to the column's header (``weights[I, I]=2``): those points;
- otherwise the key of its question, the step the column names (``weights``
  for ``weights[I]``): the question's points shared equally among the
  columns that answer it;
- a column with neither gets 0 points (the summary names it).

An answer earns the column's points times its share of right entries; an
answer that is right as a whole (``exact``/``rounded``) earns them all; with
``--carry-forward credit`` a ``carried-forward`` answer (right for the
student's own earlier answer) earns them all too.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Sequence

from symattn.check.checker import FigureVerdict
from symattn.check.codes import MistakeCode, Verdict
from symattn.check.targets import parse_target
from symattn.errors import SymattnError

__all__ = ["CARRY_POLICIES", "answer_credit", "column_points", "exact_points", "question_of",
           "refuse_unused_points", "show_points", "unused_keys"]

CARRY_POLICIES = ("no-credit", "credit")


def question_of(target: str) -> str | None:
    """The step a column answers (``weights`` for ``weights[I, I]``), None for an expression."""
    try:
        ref = parse_target(target).step_ref
    except SymattnError:
        return None
    return None if ref is None else ref[0]


def _normal(key: str) -> str:
    return "".join(key.split())


def column_points(targets: Sequence[str], points: dict[str, Fraction] | None) -> list[Fraction]:
    """The points each column is worth (see the module's rules)."""
    if points is None:
        return [Fraction(1)] * len(targets)
    exact = {_normal(k): v for k, v in points.items()}
    questions = [None if _normal(t) in exact else question_of(t) for t in targets]
    share = {q: questions.count(q) for q in questions if q is not None}
    out = []
    for target, question in zip(targets, questions):
        if _normal(target) in exact:
            out.append(exact[_normal(target)])
        elif question is not None and question in points:
            out.append(points[question] / share[question])
        else:
            out.append(Fraction(0))
    return out


def unused_keys(targets: Sequence[str], points: dict[str, Fraction] | None) -> list[str]:
    """Keys of the points list that no column uses (a misspelt question, most likely)."""
    if points is None:
        return []
    used = {_normal(t) for t in targets} | {question_of(t) for t in targets}
    return [k for k in points if _normal(k) not in used and k not in used]


def refuse_unused_points(points: dict[str, Fraction] | None, targets: Sequence[str], source: str,
                         error: type[SymattnError]) -> None:
    """A points key that no column answers (``wieghts=3``) is refused like a header typo:
    graded anyway, the class would lose those points with no error."""
    import difflib

    unused = unused_keys(targets, points)
    if not unused:
        return
    key = unused[0]
    names = [n for n in dict.fromkeys([*(question_of(t) for t in targets), *targets]) if n]
    near = difflib.get_close_matches(key, names, n=1)
    hint = f"did you mean {near[0]!r}?" if near else \
        f"the columns are {', '.join(repr(t[:40]) for t in targets[:6])}"
    more = f" (and {len(unused) - 1} more)" if len(unused) > 1 else ""
    raise error(f"--points gives points for {key[:60]!r}{more}, which no column of {source} "
                f"answers; {hint} (fix the key or the header and grade again)")


def answer_credit(verdict: FigureVerdict, carry: str = "no-credit") -> Fraction:
    """The share of a column's points an answer earns: 1 when right, the share of right
    entries otherwise (0 for an invalid answer)."""
    if verdict.right:
        return Fraction(1)
    if verdict.mistake == MistakeCode.CARRIED_FORWARD and carry == "credit":
        return Fraction(1)
    if verdict.code in (Verdict.INVALID, Verdict.BLANK) or not verdict.entries:
        return Fraction(0)
    return Fraction(sum(1 for e in verdict.entries if e.right), len(verdict.entries))


def show_points(value: Fraction) -> str:
    """Points as a spreadsheet reads them: an integer as is, else rounded to 2 places
    (half away from zero, as a teacher rounds; the exact value is in ``--json``)."""
    if value.denominator == 1:
        return str(value.numerator)
    hundredths = (abs(value) * 100 + Fraction(1, 2)).__floor__()
    sign = "-" if value < 0 else ""
    return f"{sign}{hundredths // 100}.{hundredths % 100:02d}"


def exact_points(value: Fraction) -> str:
    """Points as an exact string for JSON: ``2``, ``4/3``."""
    return str(value)
