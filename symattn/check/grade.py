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
file per version: ``DIR/version-ID.toml`` (what the worksheet command
writes), ``DIR/ID.toml`` or ``DIR/ID/problem.toml``.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from symattn.check.carry import carry_forward
from symattn.check.checker import Checker, FigureVerdict, invalid
from symattn.errors import SymattnError
from symattn.problem import Problem

__all__ = ["GradeError", "GradeReport", "StudentRow", "Versions", "grade", "read_submissions"]

MAX_ROWS = 100_000                 # students (data rows; the header row is not counted)
MAX_COLUMNS = 1_000
MAX_BYTES = 16 * 1024 * 1024       # one submissions file
MAX_ANSWER_CHARS = 1_000_000       # one answer cell (a 128×128 matrix fits; as check reads figures)
MAX_ID_CHARS = 200                 # a student id or version shown in the report


class GradeError(SymattnError, ValueError):
    """A submissions file or problem source that cannot be graded at all."""


class Versions:
    """Problems by version id: one problem for everyone, or a folder of versions."""

    def __init__(self, single: Problem | None = None, folder: Path | None = None) -> None:
        self.single, self.folder = single, folder
        self._checkers: dict[str | None, Checker | SymattnError] = {}

    @classmethod
    def from_path(cls, path: str | Path) -> "Versions":
        """A problem file, or a worksheet folder of per-version problem files."""
        path = Path(path)
        if path.is_dir():
            if not cls._files(path):
                raise GradeError(f"{path}: no problem files in this folder; expected "
                                 "version-ID.toml, ID.toml or ID/problem.toml for each version")
            return cls(folder=path)
        return cls(single=Problem.from_toml(path))

    @staticmethod
    def _files(folder: Path) -> dict[str, Path]:
        """Version id -> problem file: ``version-ID.toml`` (as ``symattn worksheet --versions``
        writes them), ``ID.toml`` or ``ID/problem.toml``."""
        found: dict[str, Path] = {}
        for p in sorted(folder.glob("*.toml")):
            found[p.stem] = p
            if p.stem.startswith("version-") and len(p.stem) > 8:
                found.setdefault(p.stem[len("version-"):], p)
        for p in sorted(folder.glob("*/problem.toml")):
            found.setdefault(p.parent.name, p)
        from symattn.worksheet import read_versions   # the codes printed on the sheets (worksheet.json)
        for key, p in read_versions(folder).items():
            found.setdefault(key, p)
        return found

    @property
    def needs_version(self) -> bool:
        return self.folder is not None

    def checker(self, version: str | None) -> Checker:
        key = None if self.single is not None else version
        hit = self._checkers.get(key)
        if hit is None:
            try:
                hit = self._build(key)
            except SymattnError as exc:
                hit = exc
            except Exception as exc:  # noqa: BLE001 — a bug in one version must not stop the others
                where = "the problem" if key is None else f"version {key}"
                hit = GradeError(f"internal error while preparing {where} "
                                 f"({type(exc).__name__}: {str(exc)[:120]}); please report it")
            self._checkers[key] = hit
        if isinstance(hit, SymattnError):
            raise hit
        return hit

    def _build(self, version: str | None) -> Checker:
        if self.single is not None:
            return Checker(self.single)
        if not version:
            raise GradeError("no version given; the version column picks the problem")
        files = self._files(self.folder)
        if version not in files:
            from symattn.worksheet import normal_code
            version = normal_code(version) if normal_code(version) in files else version
        if version not in files:
            ids = sorted(k for k in files if not k.startswith("version-"))
            raise GradeError(f"no version {version!r} in {self.folder}; the versions are "
                             f"{', '.join(ids) or 'none'}")
        return Checker(Problem.from_toml(files[version]))


@dataclass
class StudentRow:
    """One student's graded answers (or why the row could not be graded).

    ``note`` says why part of the row could not be graded (it counts as
    unreadable); ``warning`` is for the teacher only (the same student id on
    more than one line: every line is graded)."""

    line: int
    student: str
    version: str | None
    verdicts: list[FigureVerdict] = field(default_factory=list)
    note: str = ""
    warning: str = ""

    @property
    def right(self) -> int:
        return sum(1 for v in self.verdicts if v.right)


@dataclass
class GradeReport:
    targets: list[str]
    rows: list[StudentRow]
    has_version: bool
    #: target -> why its column could not be graded (a bad header cell), per version
    column_errors: dict[str, str] = field(default_factory=dict)

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
        """The report: per answer its verdict, mistake and message; per student a total.

        Every text cell is made safe to open in a spreadsheet (:func:`spreadsheet_safe`)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        header = ["student"] + (["version"] if self.has_version else [])
        for t in self.targets:
            header += [t, f"{t} mistake", f"{t} message"]
        writer.writerow([spreadsheet_safe(c) for c in header + ["right", "total", "note"]])
        for row in self.rows:
            cells = [row.student] + ([row.version or ""] if self.has_version else [])
            for v in row.verdicts:
                cells += [v.code, v.mistake or "", v.message]
            note = "; ".join(x for x in (row.note, row.warning) if x)
            writer.writerow([spreadsheet_safe(c) for c in cells] +
                            [row.right, len(self.targets), spreadsheet_safe(note)])
        return out.getvalue()


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


def _rejoin(cells: list[str]) -> list[str]:
    """Header cells split inside brackets (``weights[I, I]`` left unquoted) joined again."""
    out: list[str] = []
    for cell in cells:
        if out and out[-1].count("[") > out[-1].count("]"):
            out[-1] += "," + cell
        else:
            out.append(cell)
    return [c.strip() for c in out]


def _csv_rows(text: str, source: str) -> list[list[str]]:
    """The non-blank rows of a CSV text; stops (with an error) past MAX_ROWS students.

    Why the field limit is raised: Python's csv module refuses a cell over 128 KiB with an
    error that would stop the whole class; such a cell is judged (invalid) on its own.
    Why strict first: a quote that is never closed swallows every later line into one cell,
    so it is refused with its line; other strict complaints (``"0.1" x``) are read leniently."""
    previous = csv.field_size_limit()
    csv.field_size_limit(max(previous, MAX_BYTES + 1))
    try:
        try:
            return _read_rows(text, source, strict=True)
        except _Unclosed as exc:
            raise GradeError(f"{source}: the quote opened on line {exc.line} is never closed; "
                             "close it (a quote inside a cell is written twice: \"\")") from None
        except csv.Error:
            return _read_rows(text, source, strict=False)
    except csv.Error as exc:
        raise GradeError(f"{source}: not a readable CSV ({exc})") from None
    finally:
        csv.field_size_limit(previous)


class _Unclosed(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


def _read_rows(text: str, source: str, strict: bool) -> list[list[str]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=strict)
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
    size = len(data.encode("utf-8", errors="replace") if isinstance(data, str) else data)
    if size > MAX_BYTES:
        raise GradeError(f"{source}: {size:,} bytes is over the {MAX_BYTES:,}-byte limit of a "
                         "submissions file; split the class into several files")
    text = data.decode("utf-8-sig", errors="replace") if isinstance(data, bytes) else data
    text = text.replace("\x00", "\ufffd")
    rows = _csv_rows(text, source)
    if not rows:
        raise GradeError(f"{source} is empty: give a header row with a 'student' column and "
                         "one column per target")
    header = _rejoin(rows[0])
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
    return header, rows[1:]


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


def grade(versions: Versions, data: bytes | str, source: str = "submissions") -> GradeReport:
    """Grade every answer in a submissions CSV."""
    header, rows = read_submissions(data, source)
    s_col = header.index("student")
    v_col = header.index("version") if "version" in header else None
    if versions.needs_version and v_col is None:
        raise GradeError(f"{source}: grading against a worksheet folder needs a 'version' column")
    targets = [(k, c) for k, c in enumerate(header) if k not in (s_col, v_col)]
    if not targets:
        raise GradeError(f"{source}: no answer columns; add one column per target, e.g. weights[I]")
    if not versions.needs_version:
        versions.checker(None)     # the one problem must be gradable, or nothing is graded
    report = GradeReport([t for _, t in targets], [], v_col is not None)
    carried: dict[int, dict] = {}     # per problem: (earlier, later) answer pairs judged
    columns: dict[int, dict[str, str | None]] = {}    # per problem: target -> why it cannot be graded
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
                row.verdicts.append(judge(checker, target, answer))
        if checker is not None:
            try:
                carry_forward(checker.trace, report.targets, row.verdicts,
                              carried.setdefault(id(checker), {}))
            except Exception:  # noqa: BLE001 — the verdicts stand as judged
                pass
        row.note = "; ".join(notes)
        report.rows.append(row)
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
