"""Grade a class: a CSV of answers against one problem (or one per version).

The submissions CSV has a header row with a ``student`` column, an optional
``version`` column and one column per target (the header cell is the
target, e.g. ``weights[I]``).  Every answer is judged by a
:class:`~symattn.check.checker.Checker`; one checker per problem, so targets,
mistake variants and certified roundings are computed once per problem,
never once per student.

Why cells and not exceptions: a malformed row or answer is reported in its
own cells and every other answer is still graded; only a file that cannot
be read at all (no header, no ``student`` column) is an error.

A worksheet folder (``symattn worksheet --versions``) is read as one problem
file per version: ``DIR/version-ID.toml`` (what the worksheet command
writes), ``DIR/ID.toml`` or ``DIR/ID/problem.toml``.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from symattn.check.carry import carry_forward
from symattn.check.checker import Checker, FigureVerdict, invalid
from symattn.errors import SymattnError
from symattn.problem import Problem

__all__ = ["GradeError", "GradeReport", "StudentRow", "Versions", "grade", "read_submissions"]

MAX_ROWS = 100_000
MAX_COLUMNS = 1_000


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
            ids = sorted(k for k in files if not k.startswith("version-"))
            raise GradeError(f"no version {version!r} in {self.folder}; the versions are "
                             f"{', '.join(ids) or 'none'}")
        return Checker(Problem.from_toml(files[version]))


@dataclass
class StudentRow:
    """One student's graded answers (or why the row could not be graded)."""

    line: int
    student: str
    version: str | None
    verdicts: list[FigureVerdict] = field(default_factory=list)
    note: str = ""

    @property
    def right(self) -> int:
        return sum(1 for v in self.verdicts if v.right)


@dataclass
class GradeReport:
    targets: list[str]
    rows: list[StudentRow]
    has_version: bool

    @property
    def invalid_count(self) -> int:
        return sum(1 for r in self.rows for v in r.verdicts if v.code == "invalid") + \
            sum(1 for r in self.rows if r.note)

    def to_csv(self) -> str:
        """The report: per answer its verdict, mistake and message; per student a total."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        header = ["student"] + (["version"] if self.has_version else [])
        for t in self.targets:
            header += [t, f"{t} mistake", f"{t} message"]
        writer.writerow(header + ["right", "total", "note"])
        for row in self.rows:
            cells = [row.student] + ([row.version or ""] if self.has_version else [])
            for v in row.verdicts:
                cells += [v.code, v.mistake or "", v.message]
            writer.writerow(cells + [row.right, len(self.targets), row.note])
        return out.getvalue()


def _rejoin(cells: list[str]) -> list[str]:
    """Header cells split inside brackets (``weights[I, I]`` left unquoted) joined again."""
    out: list[str] = []
    for cell in cells:
        if out and out[-1].count("[") > out[-1].count("]"):
            out[-1] += "," + cell
        else:
            out.append(cell)
    return [c.strip() for c in out]


def read_submissions(data: bytes | str, source: str = "submissions") -> tuple[list[str], list[list[str]]]:
    """The header and rows of a submissions CSV; undecodable bytes become U+FFFD in their cell."""
    text = data.decode("utf-8-sig", errors="replace") if isinstance(data, bytes) else data
    text = text.replace("\x00", "\ufffd")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise GradeError(f"{source}: not a readable CSV ({exc})") from None
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise GradeError(f"{source} is empty: give a header row with a 'student' column and "
                         "one column per target")
    header = _rejoin(rows[0])
    if "student" not in header:
        raise GradeError(f"{source}: the header has no 'student' column (it has "
                         f"{', '.join(header[:6])}); name the column of student ids 'student'")
    if len(header) > MAX_COLUMNS or len(rows) > MAX_ROWS:
        raise GradeError(f"{source}: over {MAX_COLUMNS:,} columns or {MAX_ROWS:,} rows; split the file")
    for k, cell in enumerate(header):
        if not cell:
            raise GradeError(f"{source}: header column {k + 1} is empty; name its target")
    dup = next((c for c in header if header.count(c) > 1), None)
    if dup is not None:
        raise GradeError(f"{source}: the header names {dup!r} twice; give each column once")
    return header, rows[1:]


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
    report = GradeReport([t for _, t in targets], [], v_col is not None)
    carried: dict[int, dict] = {}     # per problem: (earlier, later) answer pairs judged
    for n, cells in enumerate(rows, start=2):
        student = cells[s_col].strip() if s_col < len(cells) else ""
        version = cells[v_col].strip() if v_col is not None and v_col < len(cells) else None
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
        for k, target in targets:
            answer = cells[k] if k < len(cells) else ""
            if checker is None:
                row.verdicts.append(invalid(target, answer, problem_error))
            elif not answer.strip():
                row.verdicts.append(invalid(target, answer, "no answer given"))
            else:
                row.verdicts.append(checker.check(target, answer))
        if checker is not None:
            carry_forward(checker.trace, report.targets, row.verdicts,
                          carried.setdefault(id(checker), {}))
        row.note = "; ".join(notes)
        report.rows.append(row)
    return report
