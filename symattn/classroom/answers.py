"""Questions and their answers, per version: the shared core of the exports and the self-check page.

For one problem (or each version of a worksheet folder) this lists the
questions a sheet asks (one per step, in computation order), each entry's
``check`` target (``weights[I, love]``), its certified right value at the
requested rounding, and what each named mistake gives there.  Mistakes are
:mod:`symattn.check.mistakes.catalog`: the same engine on a changed problem; only
values that differ from the right one at that rounding are kept, and
mistakes that give the same value are reported together.

Why one module: Moodle, Canvas, PrairieLearn and the self-check page must
agree on the targets, the numbers and the mistakes' names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import sympy

from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.check.checker import Checker
from symattn.check.targets import Cell
from symattn.check.verdict import MistakeCell
from symattn.check.codes import MistakeCode
from symattn.classroom.worksheets.backward_sheet import BACKWARD_ASK, BACKWARD_SAYS
from symattn.numbers.masked import NEG_INF, Masked
from symattn.errors import VALUE_FAILURES, SymattnError
from symattn.problem.problem import Problem
from symattn.vocab import StepName, StepKind
from symattn.trace.trace import Trace, attend

__all__ = ["ASK", "QUESTIONS", "Answer", "ClassroomError", "Entry", "MAX_BOXES", "MAX_TOTAL_BOXES", "check_total", "Question", "VersionAnswers",
           "describe", "feedback", "load_versions", "plausible", "version_answers"]

#: The questions a sheet can ask, in the order of the computation (as ``symattn worksheet``).
QUESTIONS = ("Q", "K", "V", "scores", "scaled", "weights", "output")
ASK = {"Q": "the queries", "K": "the keys", "V": "the values", "scores": "the scores",
       "scaled": "the scaled scores", "weights": "the attention weights (softmax of each row)",
       "output": "the output"}
MANIFEST = "worksheet.txt"
#: Steps whose value, given for another step, is a mistake worth naming per entry (an integer
#: input such as Q given for a weight would name a "mistake" for every 0 or 1 typed).
WRONG_STEPS = frozenset(("scaled", "shifted", "exp", "weights"))
MAX_VERSIONS = 702          # A to ZZ, as the worksheet command allows
MAX_BOXES = 400             # answer boxes of one version: a sheet worked by hand (7 steps of 3×3 is 63)
MAX_TOTAL_BOXES = 20_000    # answer boxes of all versions together (30 versions × 63 is 1,890;
                            # measured ~1 ms a box per export, ~7 ms for a self-check page)

#: What a student did, for each named mistake (the feedback a platform shows).
_SAYS: dict[str, str] = {
    MistakeCode.UNSCALED: "you did not divide by √d_k",
    MistakeCode.SCALED_BY_D_K: "you divided by d_k instead of √d_k",
    MistakeCode.SCALED_ANYWAY: "you divided by √d_k, which this problem leaves out",
    MistakeCode.TRANSPOSED_SCORES: "you computed K·Qᵀ instead of Q·Kᵀ (or swapped W_q and W_k)",
    MistakeCode.SOFTMAX_OVER_COLUMNS: "you took the softmax down each column instead of along each row",
    MistakeCode.SCALED_AFTER_SOFTMAX: "you scaled after the softmax instead of before it",
    MistakeCode.E_AS_2_7: "you used 2.7 for e",
    MistakeCode.VALUES_FROM_KEYS: "you used K where V belongs",
    MistakeCode.TRANSPOSED_OUTPUT: "you transposed the output",
    MistakeCode.MASK_AFTER_SOFTMAX: "you applied the mask after the softmax without renormalising",
    MistakeCode.MASKED_BY_ZERO: "you set blocked scores to 0 instead of −∞",
}


class ClassroomError(SymattnError):
    """A source that cannot be exported or turned into a self-check page."""


def feedback(m: MistakeCell) -> str:
    """One sentence naming what a student did, from the mistake's code and detail."""
    return describe(m.code, m.detail)


def describe(code: str, detail: str | None) -> str:
    """What a student did, for a mistake's code and detail (no value: feedback never shows one)."""
    if code == MistakeCode.WRONG_STEP:
        return f"you gave another step's value ({detail})"
    if code == MistakeCode.EARLY_ROUNDING:
        return f"you rounded too early ({detail})"
    if code == MistakeCode.WINDOW_OFF_BY_ONE:
        return f"your sliding window is off by one ({detail})"
    said = _SAYS.get(code) or BACKWARD_SAYS.get(code)
    return said if said else f"{code}: {detail}" if detail else code


def plausible(code: str, detail: str | None) -> bool:
    """Is this mistake worth naming for one entry?  Another step's value is, only for the
    softmax's steps (an integer input given for a weight would name a "mistake" for every
    0 or 1 typed), and only for a forward step (a weight given for a gradient is no slip
    worth a name)."""
    if code != MistakeCode.WRONG_STEP:
        return True
    given, _, target = (detail or "").partition(" given for ")
    return given in WRONG_STEPS and target.split("[")[0] not in BACKWARD_ASK


@dataclass(frozen=True)
class Answer:
    """A value a student may give for one entry: the right one, or what some mistakes give."""

    value: CertifiedDecimal
    mistakes: tuple[MistakeCell, ...] = ()     # empty: the right value

    @property
    def codes(self) -> tuple[str, ...]:
        """The mistakes' codes, each once, in report order."""
        return tuple(dict.fromkeys(m.code for m in self.mistakes))

    @property
    def feedback(self) -> str:
        """What the student did, naming every mistake that gives this value."""
        return "; or ".join(dict.fromkeys(feedback(m) for m in self.mistakes))


@dataclass
class Entry:
    """One answer box: its target, the exact cell and the mistakes' cells there."""

    target: str                 # check syntax: weights[I, love]
    row: int
    col: int
    cell: Cell
    checker: Checker = field(repr=False)
    step: str = ""

    def right(self, rounding: Rounding) -> CertifiedDecimal:
        """The certified right value at ``rounding``."""
        value = self.cell.rounded(rounding)
        if isinstance(value, Masked):   # NEG_INF, the one instance
            raise ClassroomError(f"{self.target} is −∞ (a masked position): not a question")
        return value

    def mistake_cells(self, places: int | None) -> list[MistakeCell]:
        """Every named mistake's cell here (early rounding at ``places`` besides 2 and 3)."""
        target = self.checker.target(self.step)
        return self.checker.mistake_cells(self.step, places)[self.row * target.shape[1] + self.col]

    def answers(self, rounding: Rounding) -> list[Answer]:
        """The right value first, then each distinct wrong value a named mistake gives
        at ``rounding`` (mistakes that round to the right value are left out)."""
        right = self.right(rounding)
        by_value: dict[tuple[int, int], list[MistakeCell]] = {}
        values: dict[tuple[int, int], CertifiedDecimal] = {}
        for m in self.mistake_cells(rounding.places):
            if not plausible(m.code, m.detail):
                continue
            try:
                got = m.cell.rounded(rounding)
            except VALUE_FAILURES:     # a variant that cannot be certified explains nothing
                continue
            if got is NEG_INF or not isinstance(got, CertifiedDecimal):
                continue
            key = _key(got)
            if key == _key(right):
                continue
            values.setdefault(key, got)
            by_value.setdefault(key, []).append(m)
        return [Answer(right)] + [Answer(values[k], tuple(ms)) for k, ms in by_value.items()]


def _key(d: CertifiedDecimal) -> tuple[int, int]:
    """A decimal's value as a hashable pair (mantissa, exponent) with trailing zeros removed."""
    m, e = d.mantissa, d.exponent
    if m == 0:
        return (0, 0)
    while m % 10 == 0:
        m //= 10
        e += 1
    return (m, e)


@dataclass
class Question:
    """One question of a sheet: a step, asked as a matrix of entries."""

    number: int
    step: str
    ask: str                    # "the scaled scores"
    formula_latex: str
    formula_text: str
    shape: tuple[int, int]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    entries: list[Entry]

    def entry(self, i: int, j: int) -> Entry:
        return self.entries[i * self.shape[1] + j]


@dataclass
class VersionAnswers:
    """One version: its id, problem file, trace, rounding and questions."""

    vid: str
    toml: str
    trace: Trace
    rounding: Rounding
    questions: list[Question]
    code: str | None = None     # the opaque code a sheet prints, where the worksheet has one
    points: dict[str, Fraction] | None = None   # per question (or per entry target), as grade reads them
    # (targets, points) → each target's share, computed once: an export asks per question and
    # column_points parses every target of the version (was ~20% of a 30-version export)
    _shares: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def entry_points(self, question: Question) -> list[Fraction]:
        """Each entry's points, as ``grade`` gives them to a cell-wise class CSV (one point an
        entry without points; a question's points shared equally among its entries)."""
        from symattn.check.grading.credit import column_points

        targets = tuple(e.target for q in self.questions for e in q.entries)
        key = (targets, None if self.points is None else tuple(self.points.items()))
        if self._shares is None or self._shares[0] != key:    # points may be set after building
            self._shares = (key, dict(zip(targets, column_points(targets, self.points))))
        shares = self._shares[1]
        return [shares[e.target] for e in question.entries]

    @property
    def total_points(self) -> Fraction:
        return sum((sum(self.entry_points(q), Fraction(0)) for q in self.questions), Fraction(0))

    @property
    def label(self) -> str:
        """How students know this version: the sheet's code, or its id."""
        return self.code or self.vid

    @property
    def problem(self) -> Problem:
        return self.trace.problem

    @property
    def boxes(self) -> int:
        return sum(len(q.entries) for q in self.questions)

    @property
    def title(self) -> str:
        return (self.problem.title or "Scaled dot-product attention").split(", version ")[0]


def version_answers(problem: Problem | Trace, rounding: Rounding, questions: tuple[str, ...] | None = QUESTIONS,
                    vid: str = "A", toml: str = "") -> VersionAnswers:
    """The questions of one version and their entries (values are certified on demand);
    ``questions`` None: the problem's own (a variant's steps, as ``symattn worksheet`` asks)."""
    from symattn.classroom.worksheets.questions import ask_text, asked_steps, default_questions

    trace = problem if isinstance(problem, Trace) else attend(problem)
    checker = Checker(trace)
    asked = asked_steps(trace, default_questions(trace) if questions is None else questions)
    if not asked:
        raise ClassroomError("no questions to ask: this problem gives Q, K and V directly; ask for "
                             "scores, scaled, weights or output")
    boxes = sum(trace.step(name).shape[0] * trace.step(name).shape[1] for name in asked)
    if boxes > MAX_BOXES:
        raise ClassroomError(f"{trace.problem.title or 'the problem'}: {', '.join(asked)} make {boxes:,} "
                             f"answer boxes, over the {MAX_BOXES} a sheet worked by hand has "
                             "(MAX_BOXES): ask fewer questions (--questions weights) or use a "
                             "smaller problem")
    out = []
    for k, name in enumerate(asked, start=1):
        step = trace.step(name)
        target = checker.target(name)
        entries = [Entry(cell.label, n // target.shape[1], n % target.shape[1], cell, checker, name)
                   for n, cell in enumerate(target.cells)]
        out.append(Question(k, name, ASK.get(name) or ask_text(name), step.info.latex, step.info.formula, target.shape, tuple(step.row_labels),
                            tuple(step.col_labels), entries))
    return VersionAnswers(vid, toml, trace, rounding, out)


def check_total(total: int, where: str) -> None:
    """Refuse a set of versions with more than MAX_TOTAL_BOXES answer boxes together."""
    if total > MAX_TOTAL_BOXES:
        raise ClassroomError(f"{where}: the versions have over {MAX_TOTAL_BOXES:,} answer boxes "
                             "together (MAX_TOTAL_BOXES): use fewer versions or ask fewer questions")


# -- sources: a problem file, an example, or a worksheet folder ------------------------

_ROUNDING = re.compile(r"rounding: (\d+) (significant digits?|decimal places?)")
_QUESTIONS = re.compile(r"^questions: ([A-Za-z0-9_, ]+?)(?:;|$)", re.MULTILINE)
_STEP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,40}$")
_VERSION_FILE = re.compile(r"^version-([A-Za-z0-9]+)\.toml$")


def read_folder_settings(folder: Path) -> tuple[Rounding | None, tuple[str, ...] | None]:
    """The rounding and questions a worksheet folder's manifest records (None where absent)."""
    path = folder / MANIFEST
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1 << 20)
    except OSError:
        raise ClassroomError(f"{folder}: not a worksheet folder (no {MANIFEST}); give a folder "
                             "written by 'symattn worksheet', a problem file or --example NAME") from None
    if not text.startswith("symattn worksheet:"):
        raise ClassroomError(f"{path}: not a manifest written by 'symattn worksheet'")
    rounding = None
    match = _ROUNDING.search(text)
    if match:
        n = int(match.group(1))
        rounding = Rounding(digits=n) if match.group(2).startswith("significant") else Rounding(places=n)
    questions = None
    match = _QUESTIONS.search(text)
    if match:
        questions = tuple(q.strip() for q in match.group(1).split(",") if _STEP_NAME.match(q.strip())) or None
    return rounding, questions


def folder_codes(folder: Path) -> dict[str, str]:
    """Version id → the code its sheet prints, from the folder's worksheet.json where there is one
    (written by worksheets that print opaque codes); {} otherwise."""
    import json

    from symattn.problem.tomlfile import read_text

    path = folder / "worksheet.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(read_text(str(path), what="a worksheet's metadata", limit=1 << 22))
        return {str(e["id"]): str(e["code"]) for e in data.get("versions", [])
                if isinstance(e, dict) and e.get("id") and e.get("code")}
    except (ValueError, SymattnError, AttributeError, TypeError):
        return {}      # metadata we cannot read: versions are named by their ids


def folder_versions(folder: Path) -> list[tuple[str, Path]]:
    """The (id, problem file) of every version in a worksheet folder, in id order (A … Z, AA …)."""
    found = []
    for path in folder.iterdir():
        match = _VERSION_FILE.match(path.name)
        if match and path.is_file():
            found.append((match.group(1), path))
    if not found:
        raise ClassroomError(f"{folder}: no version-ID.toml files; give a folder written by "
                             "'symattn worksheet'")
    if len(found) > MAX_VERSIONS:
        raise ClassroomError(f"{folder}: {len(found)} versions, over the {MAX_VERSIONS} a worksheet has")
    return sorted(found, key=lambda item: (len(item[0]), item[0]))


def load_versions(source: str | Path | None, example: str | None, rounding: Rounding | None,
                  questions: tuple[str, ...] | None,
                  points: str | None = None) -> list[VersionAnswers]:
    """The versions of a problem file, a built-in example or a worksheet folder.

    ``rounding``, ``questions`` and ``points`` (``--points``, as ``worksheet`` reads it)
    given on the command line win; a worksheet folder's files supply them otherwise (the
    points as ``grade`` reads them); the default is 3 significant digits, every question
    and a point an entry.
    """
    from symattn.check.grading.folder import Versions
    from symattn.examples import DEFAULT_EXAMPLE, example_text
    from symattn.problem.tomlfile import read_text

    if source is not None and Path(source).is_dir():
        folder = Path(source)
        saved_rounding, saved_questions = read_folder_settings(folder)
        rounding = rounding or saved_rounding or Rounding(digits=3)
        questions = questions or saved_questions
        out = []
        total = 0
        codes = folder_codes(folder)
        saved = None if points is not None else Versions(folder=folder)
        for vid, path in folder_versions(folder):
            text = read_text(str(path), what="a version's problem file")
            v = version_answers(Problem.from_toml_text(text, source=str(path)), rounding, questions,
                                vid, text)
            v.code = codes.get(vid)
            if saved is not None:
                v.points = saved.points(vid)
            elif points is not None:        # always: saved is None only when points are given
                v.points = _points(points, v)
            total += v.boxes
            check_total(total, str(folder))
            out.append(v)
        return out
    saved_points = None
    if source is not None:
        text = read_text(str(source), what="a problem TOML file")
        problem = Problem.from_toml_text(text, source=str(source))
        saved_points = Versions(single=problem, single_path=Path(source)).points(None)
    else:
        text = example_text(example or DEFAULT_EXAMPLE)
        problem = Problem.from_toml_text(text, source=f"example {example or DEFAULT_EXAMPLE!r}")
    v = version_answers(problem, rounding or Rounding(digits=3), questions or None, "A", text)
    v.points = _points(points, v) if points is not None else saved_points
    return [v]


def _points(text: str, v: VersionAnswers) -> dict[str, Fraction]:
    """``--points`` for one version's questions (``2``, ``1,1,2`` in order, or ``weights=3``)."""
    from symattn.classroom.worksheets.questions import parse_points

    return parse_points(text, tuple(q.step for q in v.questions))


def given_inputs(trace: Trace) -> list[tuple[str, sympy.Matrix, tuple[str, ...] | None]]:
    """The matrices a sheet gives (X and the W's, or Q, K and V; with a backward key dO or the
    loss's target T), with row labels for data rows."""
    from symattn.classroom.worksheets.backward_sheet import backward_givens

    names: list[str] = [n for n in StepName.of_kind(StepKind.EMBEDDING, StepKind.WEIGHT) if n in trace.step_names] \
        or list(StepName.of_kind(StepKind.PROJECTION))
    out: list[tuple[str, sympy.Matrix, tuple[str, ...] | None]] = []
    for name in names:
        step = trace.step(name)
        rows = tuple(step.row_labels) if name in StepName.of_kind(StepKind.EMBEDDING, StepKind.PROJECTION) else None
        out.append((name, step.matrix, rows))
    out += [(symbol, matrix, rows) for _, symbol, matrix, rows in backward_givens(trace)]
    return out
