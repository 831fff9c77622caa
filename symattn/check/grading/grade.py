"""Grade a class: a CSV of answers against one problem (or one per version).

The submissions CSV has a header row with a ``student`` column, an optional
``version`` column and one column per target (the header cell is the
target, e.g. ``weights[I]``).  Every answer is judged by a
:class:`~symattn.check.checker.Checker`; one checker per problem, so targets,
mistake variants and certified roundings are computed once per problem,
never once per student.

Why cells and not exceptions: a malformed row or answer is reported in its
own cells and every other answer is still graded; only a file that cannot
be read at all (no header, no ``student`` column, no students) is an error.
Each answer is judged in isolation: whatever goes wrong while judging one
cell (a symattn error, or an internal one) makes that cell ``invalid`` with
the reason, and the class is still graded.

The report is opened in spreadsheets, so every text cell that a spreadsheet
would run as a formula (one starting with ``=``, ``+``, ``-``, ``@``, a tab or
a carriage return, unless it is a plain number) is written with a leading
``'``, as OWASP recommends against CSV injection.

A worksheet folder (``symattn worksheet --versions``) is read as one problem
file per version (:mod:`symattn.check.grading.folder`: ids, codes, points).  Around
the verdicts: header cells that are not targets are refused before grading
(:mod:`~symattn.check.grading.headers`), spreadsheet CSVs are read as spreadsheets
write them (:mod:`~symattn.check.spreadsheet`), a wrong answer that is another
version's key is named (:mod:`~symattn.check.grading.othervers`), answers earn points
with per-entry partial credit (:mod:`~symattn.check.grading.credit`), and the class
summary is a view of the report (:mod:`~symattn.check.grading.class_summary`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from symattn.check import spreadsheet
from symattn.check.grading.carry import carry_forward
from symattn.check.grading.class_summary import summarise
from symattn.check.checker import Checker, FigureVerdict, invalid
from symattn.check.codes import Verdict
from symattn.check.verdict import blank
from symattn.check.grading.credit import (CARRY_POLICIES, answer_credit, column_points, exact_points,
                                         refuse_unused_points)
from symattn.check.grading.credit import show_points as _show_points
from symattn.check.grading.folder import GradeError, Versions
from symattn.check.grading.headers import refusal
from symattn.check.grading.othervers import OtherVersions
from symattn.check.grading.rows import StudentRow, mistake_name
from symattn.errors import VALUE_FAILURES, SymattnError
from symattn.output.escaping import csv_line
from symattn.check.grading.submissions import (  # noqa: F401 (read_submissions: public here too)
    MAX_BYTES, MAX_COLUMNS, MAX_ROWS, read_submission_table, read_submissions, spreadsheet_safe,
)

__all__ = ["GradeError", "GradeReport", "StudentRow", "Versions", "grade", "read_submissions"]

MAX_ANSWER_CHARS = 1_000_000       # one answer cell (a 128×128 matrix fits; as check reads figures)
MAX_ID_CHARS = 200                 # a student id or version shown in the report


@dataclass
class GradeReport:
    targets: list[str]
    rows: list[StudentRow]
    has_version: bool
    #: target -> why its column could not be graded (a bad header cell), per version
    column_errors: dict[str, str] = field(default_factory=dict)
    #: the carried-forward policy the points were given under (``--carry-forward``)
    carry: str = "no-credit"
    #: where the points came from: "default" (1 per column), "folder" or "given"
    points_source: str = "default"
    #: the submissions file's delimiter and BOM: the report is written the same way (a
    #: semicolon file gets a semicolon report with decimal commas in its points)
    delimiter: str = ","
    bom: bool = False

    @property
    def invalid_count(self) -> int:
        return sum(1 for r in self.rows for v in r.verdicts if v.code == Verdict.INVALID) + \
            sum(1 for r in self.rows if r.note)

    @property
    def duplicates(self) -> dict[str, list[int]]:
        """Student id -> the lines it is on, for ids on more than one line."""
        lines: dict[str, list[int]] = {}
        for row in self.rows:
            if row.student:
                lines.setdefault(row.student, []).append(row.line)
        return {k: v for k, v in lines.items() if len(v) > 1}

    def csv_lines(self) -> list[str]:
        """The report: per answer its verdict, the answer as the student wrote it (beside the
        verdict, not replaced by it), mistake, message and points; per student the right
        answers, the points and a note.

        Every text cell is made safe to open in a spreadsheet (:func:`spreadsheet_safe`).
        It is written as the submissions were: with their delimiter (a semicolon file's
        points with a decimal comma) and, if they had one, a BOM."""
        # lines joined once, not a StringIO: its buffer holds 4 bytes a character, and a
        # class of 100,000 has a report of about 110 million characters
        out: list[str] = ["\ufeff"] if self.bom else []

        def writerow(cells: list) -> None:     # every CR or LF quoted: a row never splits
            out.append(csv_line(cells, self.delimiter))

        def show_points(value: Fraction) -> str:
            text = _show_points(value)
            return text.replace(".", ",") if self.delimiter == ";" else text

        header = ["student"] + (["version"] if self.has_version else [])
        for t in self.targets:
            header += [t, f"{t} answer", f"{t} mistake", f"{t} message", f"{t} points"]
        writerow([spreadsheet_safe(c) for c in
                         header + ["right", "total", "points", "max points", "note"]])
        for row in self.rows:
            cells = [row.student] + ([row.version or ""] if self.has_version else [])
            for k, v in enumerate(row.verdicts):
                written = row.answers[k] if k < len(row.answers) else v.text
                cells += [v.code, written, mistake_name(v), v.message,
                          show_points(row.earned[k]) if k < len(row.earned) else ""]
            note = "; ".join(x for x in (row.note, row.warning) if x)
            writerow([spreadsheet_safe(c) for c in cells] +
                            [row.right, len(self.targets), show_points(row.points),
                             show_points(row.max_points), spreadsheet_safe(note)])
        return out

    def to_csv(self) -> str:
        """The report (see :meth:`csv_lines`) as one string."""
        return "".join(self.csv_lines())

    def csv_bytes(self) -> bytes:
        """The report as the UTF-8 file ``grade -o`` writes: encoded line by line, so a class
        of 100,000 never holds its report as a string of 2 bytes a character beside it."""
        return b"".join([line.encode("utf-8") for line in self.csv_lines()])

    def to_data(self, source: str | None = None) -> dict:
        """The report as JSON data: every answer's verdict (the ``check --json`` object)
        with its points, per student the totals, and the class summary.  Points are exact
        strings (``"4/3"``) beside their two-place form."""
        students = []
        for row in self.rows:
            answers = []
            for k, v in enumerate(row.verdicts):
                data = v.to_json()
                data["mistake_shown"] = mistake_name(v) or None
                if k < len(row.earned):
                    data["points"] = exact_points(row.earned[k])
                    data["max_points"] = exact_points(row.worth[k])
                answers.append(data)
            students.append({
                "line": row.line, "student": row.student, "version": row.version,
                "version_id": row.version_id, "answers": answers, "right": row.right,
                "total": len(self.targets), "points": exact_points(row.points),
                "points_shown": _show_points(row.points), "max_points": exact_points(row.max_points),
                "note": row.note, "warning": row.warning})
        return {"source": source, "targets": list(self.targets), "carry_forward": self.carry,
                "points_from": self.points_source, "students": students,
                "column_errors": dict(self.column_errors), "summary": summarise(self)}

    def to_json(self, source: str | None = None) -> str:
        import json

        return json.dumps(self.to_data(source), ensure_ascii=False, indent=1) + "\n"


def _short(text: str, limit: int = MAX_ID_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _internal(exc: BaseException) -> str:
    """One line for an error symattn did not expect (a bug): named, so it can be reported."""
    detail = str(exc).splitlines()[0][:120] if str(exc) else ""
    return (f"internal error while judging this answer ({type(exc).__name__}"
            f"{': ' + detail if detail else ''}); it was not graded — please report it")


def judge(checker: Checker, target: str, answer: str) -> FigureVerdict:
    """One answer judged in isolation: any failure is this cell's ``invalid`` verdict (an
    empty cell is ``blank``: no answer, not an unreadable one)."""
    if not answer.strip():
        return blank(target, answer)
    if len(answer) > MAX_ANSWER_CHARS:
        return invalid(target, answer[:40] + "…",
                       f"the answer is {len(answer):,} characters; an answer is at most "
                       f"{MAX_ANSWER_CHARS:,}")
    try:
        return checker.check(target, answer)
    except SymattnError as exc:
        return invalid(target, answer, str(exc))
    except Exception as exc:  # noqa: BLE001 — the last resort, kept on purpose: one cell must
        # not stop a class, and the bug is not hidden: the cell says "internal error", the
        # error's type and message, and "please report it" (Checker.check has its own)
        return invalid(target, answer, _internal(exc))


def _column_error(checker: Checker, target: str) -> str | None:
    """Why ``target`` cannot be graded against this checker's problem (None when it can)."""
    try:
        checker.target(target)
    except SymattnError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 — the last resort, kept on purpose: the column's
        # error names the bug (type and message, "please report it"); the other columns are graded
        return _internal(exc).replace("judging this answer", "reading this target")
    return None


#: Header names of the column that picks each student's version (the first one present).
VERSION_COLUMNS = ("version", "Version", "version code", "code", "Code")


def _refused_headers(checkers: list[Checker], targets: list[str], source: str) -> None:
    """Refuse header cells that are not targets of any version in the class, before grading."""
    if not checkers:
        return          # no usable version: every row says why in its note
    bad = []
    for target in targets:
        reasons = [refusal(c, target) for c in checkers]
        if all(r is not None for r in reasons):
            bad.append(reasons[0])
    if bad:
        more = f" (and {len(bad) - 1} more header{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
        raise GradeError(f"{source}: the header {bad[0]}{more}; fix the header cell and grade again")


def _usable_checkers(versions: Versions, written: list[str | None]) -> list[Checker]:
    """The distinct checkers of the versions the class names (those that can be built)."""
    found: dict[int, Checker] = {}
    for version in dict.fromkeys(written):
        try:
            checker = versions.checker(version)
        except SymattnError:
            continue
        found.setdefault(id(checker), checker)
    return list(found.values())


def _target_size(checker: Checker, target: str) -> int | None:
    try:
        rows, cols = checker.target(target).shape
    except SymattnError:
        return None
    return rows * cols


def grade(versions: Versions, data: bytes | str, source: str = "submissions", *,
          carry: str = "no-credit", points: dict[str, Fraction] | None = None) -> GradeReport:
    """Grade every answer in a submissions CSV.

    ``carry`` is the carried-forward policy (``no-credit``: a carried-forward answer earns
    only its right entries; ``credit``: all its points); ``points`` (question or column ->
    points) overrides the points a worksheet folder gives (see :mod:`symattn.check.grading.credit`)."""
    if carry not in CARRY_POLICIES:
        raise GradeError(f"--carry-forward {carry!r}: choose {' or '.join(CARRY_POLICIES)}")
    header, rows, delimiter, bom = read_submission_table(data, source)
    columns = _Columns.of(header, versions, source)
    refuse_unused_points(points, columns.names, source, GradeError)
    if not versions.needs_version:
        versions.checker(None)     # the one problem must be gradable, or nothing is graded
    written: list[str | None] = [columns.version(cells) for cells in rows] if versions.needs_version else [None]
    _refused_headers(_usable_checkers(versions, written), columns.names, source)
    report = GradeReport(columns.names, [], columns.v_col is not None, carry=carry,
                         delimiter=delimiter, bom=bom)
    grader = _ClassGrader(versions, report, columns, points, semicolons=delimiter == ";")
    for n, cells in enumerate(rows, start=2):
        report.rows.append(grader.row(n, cells))
    report.points_source = grader.source_of_points
    _refuse_when_no_column_grades(report, source)
    _mark_duplicates(report)
    return report


@dataclass(frozen=True)
class _Columns:
    """Where the student id, the version and each answer are in the submissions' header."""

    width: int
    s_col: int
    v_col: int | None
    targets: list[tuple[int, str]]          # (column, target) of every answer column

    @classmethod
    def of(cls, header: list[str], versions: Versions, source: str) -> _Columns:
        s_col = header.index("student")
        v_col = next((header.index(c) for c in VERSION_COLUMNS if c in header), None)
        skip = {s_col} | {k for k, c in enumerate(header) if c in VERSION_COLUMNS}
        if versions.needs_version and v_col is None:
            raise GradeError(f"{source}: grading against a worksheet folder needs a 'version' column "
                             "(the version's id, e.g. B, or the code printed on the student's sheet)")
        targets = [(k, c) for k, c in enumerate(header) if k not in skip]
        if not targets:
            raise GradeError(f"{source}: no answer columns; add one column per target, e.g. weights[I]")
        return cls(len(header), s_col, v_col, targets)

    @property
    def names(self) -> list[str]:
        return [t for _, t in self.targets]

    def student(self, cells: list[str]) -> str:
        return _short(cells[self.s_col].strip()) if self.s_col < len(cells) else ""

    def version(self, cells: list[str]) -> str | None:
        v_col = self.v_col
        return _short(cells[v_col].strip()) if v_col is not None and v_col < len(cells) else None


class _ClassGrader:
    """The state one class is graded with, row after row: per problem the columns that
    cannot be graded and the carried-forward pairs already judged, per version the points,
    and the verdicts and points shared between students (see :func:`_share`)."""

    def __init__(self, versions: Versions, report: GradeReport, columns: _Columns,
                 points: dict[str, Fraction] | None, *, semicolons: bool) -> None:
        self.versions, self.report, self.columns, self.points = versions, report, columns, points
        self.semicolons = semicolons
        self.source_of_points = "given" if points is not None else "default"
        self.carried: dict[int, dict] = {}      # per problem: (earlier, later) answer pairs judged
        self.unusable: dict[int, dict[str, str | None]] = {}   # per problem: target -> why not
        self.worth_of: dict[str | None, list[Fraction]] = {}
        self.others = OtherVersions(versions.checker, versions.ids) if versions.needs_version else None
        self.shared: dict[tuple, FigureVerdict] = {}
        self.shared_points: dict[tuple[int, int], Fraction] = {}

    def row(self, n: int, cells: list[str]) -> StudentRow:
        """Line ``n`` of the submissions graded: its verdicts, points and notes."""
        columns, versions = self.columns, self.versions
        row = StudentRow(n, columns.student(cells), columns.version(cells))
        notes = []
        if len(cells) != columns.width:
            notes.append(f"line {n} has {len(cells)} cells but the header has {columns.width}")
        if not row.student:
            notes.append(f"line {n} has no student id")
        checker: Checker | None = None
        problem_error = ""
        try:
            checker = versions.checker(row.version)
            row.version_id = versions.resolve(row.version) if versions.needs_version else None
        except SymattnError as exc:
            checker, problem_error = None, str(exc)   # every answer of the row says why
            notes.append(f"line {n}: {exc}")
        for k, target in columns.targets:
            answer = cells[k] if k < len(cells) else ""
            row.answers.append(answer if len(answer) <= MAX_ANSWER_CHARS else answer[:40] + "…")
            row.verdicts.append(invalid(target, answer, problem_error) if checker is None
                                else self._judge(checker, row.version, target, answer))
        if checker is not None:
            self._after_judging(checker, row)
        self._give_points(row)
        row.note = "; ".join(notes)
        _share(row, self.shared, self.shared_points)
        return row

    def _judge(self, checker: Checker, version: str | None, target: str, answer: str) -> FigureVerdict:
        """One answer, unless its column cannot be graded against this problem."""
        bad = self.unusable.setdefault(id(checker), {})
        if target not in bad:
            bad[target] = unusable = _column_error(checker, target)
            if unusable is not None:
                where = f" (version {version})" if self.versions.needs_version else ""
                self.report.column_errors.setdefault(target, unusable + where)
        unusable = bad[target]
        if unusable is not None:
            return invalid(target, answer, unusable)
        answer = spreadsheet.decimal_comma(answer, _target_size(checker, target), self.semicolons)
        return judge(checker, target, answer)

    def _after_judging(self, checker: Checker, row: StudentRow) -> None:
        """Carried-forward answers, and wrong answers that are another version's key."""
        targets = self.report.targets
        try:
            carry_forward(checker.trace, targets, row.verdicts, self.carried.setdefault(id(checker), {}))
        except VALUE_FAILURES:     # not followable: the verdicts stand as judged (a bug surfaces)
            pass
        if self.others is not None and row.version_id is not None:
            for target, verdict in zip(targets, row.verdicts):
                if verdict.code == Verdict.WRONG:
                    try:
                        self.others.mark(row.version_id, target, verdict)
                    except VALUE_FAILURES:     # not comparable: the verdict stands as judged
                        pass

    def _give_points(self, row: StudentRow) -> None:
        """What each column is worth for the row's version, and what each answer earned."""
        if row.version_id not in self.worth_of:
            own = self.points if self.points is not None else self.versions.points(row.version_id)
            if self.points is None and own is not None:
                self.source_of_points = "folder"
            self.worth_of[row.version_id] = column_points(self.report.targets, own)
        row.worth = list(self.worth_of[row.version_id])
        carry = self.report.carry
        row.earned = [w * answer_credit(v, carry) for w, v in zip(row.worth, row.verdicts)]


def _refuse_when_no_column_grades(report: GradeReport, source: str) -> None:
    """A class none of whose columns can be graded is an error, not a report of invalids."""
    if len(report.column_errors) == len(report.targets) and \
            not any(v.code != Verdict.INVALID for r in report.rows for v in r.verdicts):
        target, why = next(iter(report.column_errors.items()))
        more = len(report.column_errors) - 1
        raise GradeError(f"{source}: no column can be graded: {target!r}: {why}"
                         + (f" (and {more} more column{'s' if more > 1 else ''})" if more else ""))


MAX_SHARED = 500_000    # distinct verdicts and points shared between students


def _share(row: StudentRow, verdicts: dict[tuple, FigureVerdict],
           points: dict[tuple[int, int], Fraction]) -> None:
    """Students who wrote the same answer get the same verdict: one object for all of them,
    not a copy each (a class of 100,000 held 600,000 copies).  Only verdicts alike in every
    field (their entries the very same list) are shared, after carry-forward and the
    other-version mark have been made, and nothing changes a verdict after grading."""
    for k, v in enumerate(row.verdicts):
        key = (v.target, v.text, v.code, v.message, v.variant, v.mistake, v.mistake_detail,
               id(v.entries), v.shape, tuple(v.also))
        hit = verdicts.get(key)
        if hit is not None:
            row.verdicts[k] = hit
        elif len(verdicts) < MAX_SHARED:
            verdicts[key] = v
    for k, e in enumerate(row.earned):
        pkey = (e.numerator, e.denominator)
        same = points.get(pkey)
        if same is not None:
            row.earned[k] = same
        elif len(points) < MAX_SHARED:
            points[pkey] = e


def _mark_duplicates(report: GradeReport) -> None:
    """Every line of a student id that appears more than once is graded, and says so:
    the teacher decides which submission counts."""
    duplicates = report.duplicates
    for row in report.rows:
        lines = duplicates.get(row.student)
        if lines:
            others = ", ".join(str(x) for x in lines if x != row.line)
            row.warning = (f"student id {row.student!r} is also on line"
                           f"{'s' if len(lines) > 2 else ''} {others}; every line is graded")
