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

import csv
import io
import re
from dataclasses import dataclass, field
from fractions import Fraction

from symattn.check import spreadsheet
from symattn.check.grading.carry import carry_forward
from symattn.check.checker import Checker, FigureVerdict, invalid
from symattn.check.grading.credit import CARRY_POLICIES, answer_credit, column_points, exact_points
from symattn.check.grading.credit import show_points as _show_points
from symattn.check.grading.folder import GradeError, Versions
from symattn.check.grading.headers import refusal
from symattn.check.grading.othervers import mark_other_version
from symattn.errors import SymattnError
from symattn.escaping import csv_line

__all__ = ["GradeError", "GradeReport", "StudentRow", "Versions", "grade", "read_submissions"]

MAX_ROWS = 100_000                 # students (data rows; the header row is not counted)
MAX_COLUMNS = 1_000
MAX_BYTES = 16 * 1024 * 1024       # one submissions file
MAX_ANSWER_CHARS = 1_000_000       # one answer cell (a 128×128 matrix fits; as check reads figures)
MAX_ID_CHARS = 200                 # a student id or version shown in the report


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
    if verdict.mistake == "other-version" and verdict.mistake_detail:
        return f"other-version: {verdict.mistake_detail}"
    return verdict.mistake or ""


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
        return sum(1 for r in self.rows for v in r.verdicts if v.code == "invalid") + \
            sum(1 for r in self.rows if r.note)

    @property
    def duplicates(self) -> dict[str, list[int]]:
        """Student id -> the lines it is on, for ids on more than one line."""
        lines: dict[str, list[int]] = {}
        for row in self.rows:
            if row.student:
                lines.setdefault(row.student, []).append(row.line)
        return {k: v for k, v in lines.items() if len(v) > 1}

    def to_csv(self) -> str:
        """The report: per answer its verdict, mistake, message and points; per student the
        right answers, the points and a note.

        Every text cell is made safe to open in a spreadsheet (:func:`spreadsheet_safe`).
        It is written as the submissions were: with their delimiter (a semicolon file's
        points with a decimal comma) and, if they had one, a BOM."""
        out = io.StringIO()
        if self.bom:
            out.write("\ufeff")

        def writerow(cells: list) -> None:     # every CR or LF quoted: a row never splits
            out.write(csv_line(cells, self.delimiter))

        def show_points(value: Fraction) -> str:
            text = _show_points(value)
            return text.replace(".", ",") if self.delimiter == ";" else text

        header = ["student"] + (["version"] if self.has_version else [])
        for t in self.targets:
            header += [t, f"{t} mistake", f"{t} message", f"{t} points"]
        writerow([spreadsheet_safe(c) for c in
                         header + ["right", "total", "points", "max points", "note"]])
        for row in self.rows:
            cells = [row.student] + ([row.version or ""] if self.has_version else [])
            for k, v in enumerate(row.verdicts):
                cells += [v.code, mistake_name(v), v.message,
                          show_points(row.earned[k]) if k < len(row.earned) else ""]
            note = "; ".join(x for x in (row.note, row.warning) if x)
            writerow([spreadsheet_safe(c) for c in cells] +
                            [row.right, len(self.targets), show_points(row.points),
                             show_points(row.max_points), spreadsheet_safe(note)])
        return out.getvalue()

    def to_data(self, source: str | None = None) -> dict:
        """The report as JSON data: every answer's verdict (the ``check --json`` object)
        with its points, per student the totals, and the class summary.  Points are exact
        strings (``"4/3"``) beside their two-place form."""
        from symattn.check.grading.class_summary import summarise

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


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def spreadsheet_safe(cell: str) -> str:
    """A report cell that a spreadsheet shows as text, never runs as a formula (OWASP's
    advice against CSV injection): a cell starting with ``=``, ``+``, ``-``, ``@``, a tab
    or a carriage return (or their full-width forms) gets a leading ``'``, unless it is a
    plain number such as ``-0.5``."""
    if cell.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def _rejoin(cells: list[str], delimiter: str = ",") -> list[str]:
    """Header cells split inside brackets (``weights[I, I]`` left unquoted) joined again."""
    out: list[str] = []
    for cell in cells:
        if out and out[-1].count("[") > out[-1].count("]"):
            out[-1] += delimiter + cell
        else:
            out.append(cell)
    return [c.strip() for c in out]


def _csv_rows(text: str, source: str, delimiter: str = ",") -> list[list[str]]:
    """The non-blank rows of a CSV text; stops (with an error) past MAX_ROWS students.

    Why the field limit is raised: Python's csv module refuses a cell over 128 KiB with an
    error that would stop the whole class; such a cell is judged (invalid) on its own.
    Why strict first: a quote that is never closed swallows every later line into one cell,
    so it is refused with its line; other strict complaints (``"0.1" x``) are read leniently."""
    previous = csv.field_size_limit()
    csv.field_size_limit(max(previous, MAX_BYTES + 1))
    try:
        try:
            return _read_rows(text, source, strict=True, delimiter=delimiter)
        except _Unclosed as exc:
            raise GradeError(f"{source}: the quote opened on line {exc.line} is never closed; "
                             "close it (a quote inside a cell is written twice: \"\")") from None
        except csv.Error:
            return _read_rows(text, source, strict=False, delimiter=delimiter)
    except csv.Error as exc:
        raise GradeError(f"{source}: not a readable CSV ({exc})") from None
    finally:
        csv.field_size_limit(previous)


class _Unclosed(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


def _read_rows(text: str, source: str, strict: bool, delimiter: str = ",") -> list[list[str]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=strict, delimiter=delimiter)
    rows: list[list[str]] = []
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return rows
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                raise _Unclosed(start) from None
            raise
        if not any(c.strip() for c in row):
            continue
        rows.append(row)
        if len(rows) > MAX_ROWS + 1:      # the header row is not a student
            raise GradeError(f"{source}: over {MAX_ROWS:,} students; split the file")


def read_submissions(data: bytes | str, source: str = "submissions") -> tuple[list[str], list[list[str]]]:
    """The header and rows of a submissions CSV; undecodable bytes become U+FFFD in their cell."""
    header, rows, _, _ = _read(data, source)
    return header, rows


def _read(data: bytes | str, source: str) -> tuple[list[str], list[list[str]], str, bool]:
    """The header, the rows, the delimiter (decided from the header: see
    :mod:`symattn.check.spreadsheet`) of a submissions CSV, and whether it had a BOM."""
    size = len(data.encode("utf-8", errors="replace") if isinstance(data, str) else data)
    if size > MAX_BYTES:
        raise GradeError(f"{source}: {size:,} bytes is over the {MAX_BYTES:,}-byte limit of a "
                         "submissions file; split the class into several files")
    bom = data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")) if isinstance(data, bytes) \
        else data.startswith("\ufeff")
    text = spreadsheet.decode(data) if isinstance(data, bytes) else data.lstrip("\ufeff")
    text = text.replace("\x00", "\ufffd")
    text, delimiter = spreadsheet.sep_line(text)
    delimiter = delimiter or spreadsheet.header_delimiter(text)
    rows = _csv_rows(text, source, delimiter)
    if not rows:
        raise GradeError(f"{source} is empty: give a header row with a 'student' column and "
                         "one column per target")
    header = _rejoin(rows[0], delimiter)
    if "student" not in header:
        shown = ", ".join(repr(c[:40]) for c in header[:6])
        raise GradeError(f"{source}: the header has no 'student' column (it has "
                         f"{shown}); name the column of student ids 'student'")
    if len(header) > MAX_COLUMNS:
        raise GradeError(f"{source}: over {MAX_COLUMNS:,} columns; split the file")
    for k, cell in enumerate(header):
        if not cell:
            raise GradeError(f"{source}: header column {k + 1} is empty; name its target")
    seen: set[str] = set()
    for cell in header:
        if cell in seen:
            raise GradeError(f"{source}: the header names {cell[:60]!r} twice; give each column once")
        seen.add(cell)
    if len(rows) == 1:
        raise GradeError(f"{source}: a header row and no students; nothing to grade "
                         "(add one row per student)")
    return header, rows[1:], delimiter, bom


def _short(text: str, limit: int = MAX_ID_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _internal(exc: BaseException) -> str:
    """One line for an error symattn did not expect (a bug): named, so it can be reported."""
    detail = str(exc).splitlines()[0][:120] if str(exc) else ""
    return (f"internal error while judging this answer ({type(exc).__name__}"
            f"{': ' + detail if detail else ''}); it was not graded — please report it")


def judge(checker: Checker, target: str, answer: str) -> FigureVerdict:
    """One answer judged in isolation: any failure is this cell's ``invalid`` verdict."""
    if not answer.strip():
        return invalid(target, answer, "no answer given")
    if len(answer) > MAX_ANSWER_CHARS:
        return invalid(target, answer[:40] + "…",
                       f"the answer is {len(answer):,} characters; an answer is at most "
                       f"{MAX_ANSWER_CHARS:,}")
    try:
        return checker.check(target, answer)
    except SymattnError as exc:
        return invalid(target, answer, str(exc))
    except Exception as exc:  # noqa: BLE001 — one cell must not stop a class
        return invalid(target, answer, _internal(exc))


def _column_error(checker: Checker, target: str) -> str | None:
    """Why ``target`` cannot be graded against this checker's problem (None when it can)."""
    try:
        checker.target(target)
    except SymattnError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001
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
    header, rows, delimiter, bom = _read(data, source)
    s_col = header.index("student")
    v_col = next((header.index(c) for c in VERSION_COLUMNS if c in header), None)
    skip = {s_col} | {k for k, c in enumerate(header) if c in VERSION_COLUMNS}
    if versions.needs_version and v_col is None:
        raise GradeError(f"{source}: grading against a worksheet folder needs a 'version' column "
                         "(the version's id, e.g. B, or the code printed on the student's sheet)")
    targets = [(k, c) for k, c in enumerate(header) if k not in skip]
    if not targets:
        raise GradeError(f"{source}: no answer columns; add one column per target, e.g. weights[I]")
    if not versions.needs_version:
        versions.checker(None)     # the one problem must be gradable, or nothing is graded
    written = [_short(cells[v_col].strip()) if v_col is not None and v_col < len(cells) else None
               for cells in rows] if versions.needs_version else [None]
    _refused_headers(_usable_checkers(versions, written), [t for _, t in targets], source)
    source_of_points = "given" if points is not None else "default"
    report = GradeReport([t for _, t in targets], [], v_col is not None, carry=carry,
                         delimiter=delimiter, bom=bom)
    carried: dict[int, dict] = {}     # per problem: (earlier, later) answer pairs judged
    columns: dict[int, dict[str, str | None]] = {}    # per problem: target -> why it cannot be graded
    worth_of: dict[str | None, list[Fraction]] = {}
    semicolons = delimiter == ";"
    for n, cells in enumerate(rows, start=2):
        student = _short(cells[s_col].strip()) if s_col < len(cells) else ""
        version = _short(cells[v_col].strip()) if v_col is not None and v_col < len(cells) else None
        row = StudentRow(n, student, version)
        notes = []
        if len(cells) != len(header):
            notes.append(f"line {n} has {len(cells)} cells but the header has {len(header)}")
        if not student:
            notes.append(f"line {n} has no student id")
        try:
            checker = versions.checker(version)
            row.version_id = versions.resolve(version) if versions.needs_version else None
        except SymattnError as exc:
            checker, problem_error = None, str(exc)
            notes.append(f"line {n}: {exc}")
        bad = columns.setdefault(id(checker), {}) if checker is not None else {}
        for k, target in targets:
            answer = cells[k] if k < len(cells) else ""
            if checker is None:
                row.verdicts.append(invalid(target, answer, problem_error))
                continue
            if target not in bad:
                bad[target] = _column_error(checker, target)
                if bad[target] is not None:
                    where = f" (version {version})" if versions.needs_version else ""
                    report.column_errors.setdefault(target, bad[target] + where)
            if bad[target] is not None:
                row.verdicts.append(invalid(target, answer, bad[target]))
            else:
                answer = spreadsheet.decimal_comma(answer, _target_size(checker, target), semicolons)
                row.verdicts.append(judge(checker, target, answer))
        if checker is not None:
            try:
                carry_forward(checker.trace, report.targets, row.verdicts,
                              carried.setdefault(id(checker), {}))
            except Exception:  # noqa: BLE001 — the verdicts stand as judged
                pass
            if versions.needs_version and row.version_id is not None:
                for target, verdict in zip(report.targets, row.verdicts):
                    if verdict.code == "wrong":
                        try:
                            mark_other_version(versions.checker, versions.ids(), row.version_id,
                                               target, verdict)
                        except Exception:  # noqa: BLE001 — the verdict stands as judged
                            pass
        if row.version_id not in worth_of:
            own = points if points is not None else versions.points(row.version_id)
            if points is None and own is not None:
                source_of_points = "folder"
            worth_of[row.version_id] = column_points(report.targets, own)
        row.worth = list(worth_of[row.version_id])
        row.earned = [w * answer_credit(v, carry) for w, v in zip(row.worth, row.verdicts)]
        row.note = "; ".join(notes)
        report.rows.append(row)
    report.points_source = source_of_points
    if len(report.column_errors) == len(report.targets) and \
            not any(v.code != "invalid" for r in report.rows for v in r.verdicts):
        target, why = next(iter(report.column_errors.items()))
        more = len(report.column_errors) - 1
        raise GradeError(f"{source}: no column can be graded: {target!r}: {why}"
                         + (f" (and {more} more column{'s' if more > 1 else ''})" if more else ""))
    _mark_duplicates(report)
    return report


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
