"""Reading a class's submissions CSV, and writing cells a spreadsheet will not run.

The file is decoded and split as a spreadsheet saved it (comma or semicolon, a BOM, a
``sep=`` line); a row that cannot be read is refused with its line number."""

from __future__ import annotations

import csv
import io
import re

from symattn.check import spreadsheet
from symattn.check.grading.folder import GradeError

MAX_ROWS = 100_000                 # students (data rows; the header row is not counted)
MAX_COLUMNS = 1_000
MAX_BYTES = 16 * 1024 * 1024       # one submissions file


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
    header, rows, _, _ = read_submission_table(data, source)
    return header, rows


def read_submission_table(data: bytes | str, source: str) -> tuple[list[str], list[list[str]], str, bool]:
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
