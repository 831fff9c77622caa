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

from symattn.classroom.worksheets.backward_sheet import BACKWARD_ASK, BACKWARD_ORDER, backward_questions
from symattn.numbers.certify import Rounding
from symattn.trace.trace import Trace
from symattn.errors import WorksheetError
from symattn.vocab import StepName, StepKind

__all__ = ["QUESTIONS", "SheetQuestion", "asked_steps", "askable_steps", "default_questions", "ask_text",
           "decode_part",
           "question_order", "sheet_questions", "parse_points", "entry_target", "rounding_words"]

#: The questions a sheet of plain attention asks, in the order of the computation.
QUESTIONS = ("Q", "K", "V", "scores", "scaled", "weights", "output")

#: Every step a sheet may ask, in the order a person computes them (a variant's steps where
#: they fall; ``decode_<t>_…`` and ``running_output_<b>`` are placed by their pattern).
_ORDER = ("Q", "K", "V", "Q_rot", "K_rot", "scores", "scaled", "bias", "biased", "capped", "masked",
          "running_max", "rescale", "running_sum", "running_output", "shifted", "exp", "row_sum",
          "weights", "output", *BACKWARD_ORDER, "decode", "decode_work")
_DECODE_PARTS = ("q", "k", "v", "K_cache", "V_cache", "scores", "weights", "output")
_INPUTS = StepName.of_kind(StepKind.EMBEDDING, StepKind.WEIGHT)
_DECODE_SHOWN = 2        # a KV-cache sheet asks about at most the last two decode steps

#: What a question asks for, in words (``Compute the rotated queries (RoPE), …``)
_ASK: dict[str, str] = {"Q": "the queries", "K": "the keys", "V": "the values", "scores": "the scores",
        "scaled": "the scaled scores", "weights": "the attention weights (the softmax of each row)",
        "output": "the output",
        "Q_rot": "the rotated queries (RoPE)", "K_rot": "the rotated keys (RoPE)",
        "bias": "the ALiBi bias of each query and key", "biased": "the biased scores (scaled + bias)",
        "capped": "the soft-capped logits", "masked": "the masked scores",
        "shifted": "the scores minus their row's maximum", "exp": "the exponentials",
        "row_sum": "the row sums (softmax denominators)",
        "running_max": "the running maximum after each block of keys",
        "rescale": "the rescale factor of each block",
        "running_sum": "the running sum after each block of keys",
        "decode_work": "the work counts of the decode steps, with and without the cache", **BACKWARD_ASK}
_DECODE_ASK: dict[str, str] = {"q": "the new token's query", "k": "the new token's key", "v": "the new token's value",
               "K_cache": "the key cache after appending", "V_cache": "the value cache after appending",
               "scores": "the new token's scores against the cache",
               "weights": "the new token's attention weights", "output": "the new token's output"}

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


def decode_part(step: str) -> tuple[int, str] | None:
    """(t, part) of a decode step's name (``decode_3_weights`` → (3, "weights")), else None."""
    found = re.fullmatch(r"decode_(\d+)_(\w+)", step)
    return (int(found.group(1)), found.group(2)) if found and found.group(2) in _DECODE_ASK else None


def ask_text(step: str) -> str:
    """What a question on ``step`` asks for, in words: ``the rotated queries (RoPE)``."""
    decode = decode_part(step)
    if decode is not None:
        return f"{_DECODE_ASK[decode[1]]} (token {decode[0]})"
    found = re.fullmatch(r"running_output_(\d+)", step)
    if found:
        return f"the running (unnormalised) output after block {found.group(1)}"
    return _ASK.get(step, f"the step {step}")


def question_order(step: str) -> tuple[int, int, int]:
    """Where a step falls in the computation (sorting key of a sheet's questions)."""
    found = re.fullmatch(r"decode_(\d+)_(\w+)", step)
    if found and found.group(2) in _DECODE_PARTS:
        return _ORDER.index("decode"), int(found.group(1)), _DECODE_PARTS.index(found.group(2))
    found = re.fullmatch(r"running_output_(\d+)", step)
    if found:
        return _ORDER.index("running_output"), int(found.group(1)), 0
    return (_ORDER.index(step) if step in _ORDER else len(_ORDER)), 0, 0


def askable_steps(trace: Trace) -> tuple[str, ...]:
    """Every step a sheet of this problem may ask: the computed ones (not the given inputs)."""
    given = () if trace.problem.projected else StepName.of_kind(StepKind.PROJECTION)
    names = [n for n in trace.step_names if n not in _INPUTS and n not in given]
    return tuple(sorted(names, key=question_order))


def default_questions(trace: Trace) -> tuple[str, ...]:
    """The questions a sheet asks when none are chosen: plain attention's, with each variant's
    own steps where they fall (RoPE's rotations, ALiBi's bias, the online softmax's running
    maximum, rescale and sum); a KV-cache sheet asks about its decode steps (the last two at
    most: the new query, the caches after appending, scores, weights, output) and the work; a
    backward sheet asks P, O and the gradients (``backward_sheet.backward_questions``)."""
    p = trace.problem
    names = set(trace.step_names)
    extra = set(StepName.of_kind(StepKind.ROTATION, StepKind.LOGIT, StepKind.ONLINE))
    if p.backward is not None:          # the backward sheet: P and O, then the gradients
        return backward_questions(trace)
    if p.prefill is None and not extra & names:
        return QUESTIONS                # plain attention: the sheet's questions as they always were
    if p.prefill is not None:
        positions = list(range(p.prefill, p.n))[-_DECODE_SHOWN:]
        asked = [f"decode_{t}_{part}" for t in positions
                 for part in ("q", "K_cache", "V_cache", "scores", "weights", "output")]
        return (*asked, "decode_work")
    askable = set(askable_steps(trace)) - ({"scaled"} if p.scale == 1 else set())  # scale 1: scaled = scores
    asked = [n for n in (*QUESTIONS, *sorted(extra & names)) if n in askable]
    return tuple(sorted(asked, key=question_order))


def asked_steps(trace: Trace, questions: tuple[str, ...]) -> list[str]:
    """The steps a version's sheet asks for: those its problem computes (Q, K, V only when they
    are computed, not given), in the order of the computation."""
    askable = set(askable_steps(trace))
    return sorted((q for q in questions if q in askable), key=question_order)


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
