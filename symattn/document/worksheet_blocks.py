"""The blocks of a worksheet and its key: header, instructions, questions with answer boxes,
key answers, the wrong-answer table and the worked derivation.

Document vocabulary, printed by ``document.printers.worksheet``; the classroom builds them
(``classroom.worksheets.document``) from its questions and the engine's wrong answers."""

from __future__ import annotations

from dataclasses import dataclass

from symattn.document.blocks import Block, Decimal, Document, Math
from symattn.numbers.certify import Rounding

#: a question's answer, row by row, as the rounded entries' texts
Grid = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class WrongAnswer:
    """What one named mistake gives for a whole question: its rounded entries, row by row."""

    code: str
    detail: str
    values: Grid


@dataclass(frozen=True)
class SheetHeader(Block):
    """The top of a sheet or key: the sheet shows only ``code``; the key adds the teacher's facts."""

    title: str
    kind: str                          # "worksheet" or "answer key"
    code: str
    teacher: tuple[str, ...] = ()      # key only: version id, seed, problem file
    name_line: bool = False
    total_points: str | None = None


@dataclass(frozen=True)
class Instruction(Block):
    """One instruction of the template: ``label`` (Scaling, Causal, Rounding) and its sentence."""

    label: str
    parts: tuple[str | Math, ...]
    latex: str | None = None           # the sentence as LaTeX, where it was written as LaTeX (RoPE)


@dataclass(frozen=True)
class Question(Block):
    """A question of the sheet: what to compute, its points, working space, empty answer boxes."""

    number: int
    step: str
    what: str
    formula: str                       # LaTeX of the step's formula
    shape: tuple[int, int]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...] | None
    points: str | None
    box_chars: int                     # the widest answer, in characters
    work_cm: float
    box_em: float = 2.1                # the height of an answer box (the layout's)
    after: str = r"\bigskip"           # the space after the question (the layout's)


@dataclass(frozen=True)
class KeyValue(Math):
    """One answer of a key: ``exact`` where short (an integer, −3/8), the certified ``decimal``
    after it (``7/6 ≈ 1.17``; ``=`` when the decimal is proved exact), or the decimal alone."""

    exact: Math | None
    decimal: Decimal | None
    exact_decimal: bool = False


@dataclass(frozen=True)
class KeyAnswer(Block):
    """A key's answer to question ``number``: ``symbol`` = (or ≈) the matrix of ``KeyValue``s."""

    number: int
    step: str
    what: str
    formula: str
    points: str | None
    symbol: Math
    approx: bool                       # some entry is only a rounded decimal: "≈"
    cells: tuple[tuple[KeyValue, ...], ...]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...] | None
    note: tuple[str | Math, ...] = ()  # said before the matrix: √d_k = √4 = 2


@dataclass(frozen=True)
class WrongAnswers(Block):
    """Per question, what each modelled mistake gives (the values ``check`` names)."""

    rows: tuple[tuple[int, str, tuple[WrongAnswer, ...]], ...]   # (number, step, mistakes)
    rounding: Rounding
    gap: str = "0.8ex"                 # between two answers (the layout's)
    per_line: int = 1                  # answers side by side (the layout's)
    words_width: str = "6.2cm"         # the width of a mistake's name and description


@dataclass(frozen=True)
class Derivation(Block):
    """The worked derivation of the version: the derivation document, embedded."""

    doc: Document


# -- builders ------------------------------------------------------------------------
