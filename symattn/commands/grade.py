"""``symattn grade``: grade a class's answers; the report is written whole or not at all."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from symattn.commands import Outcome
from symattn.tomlfile import read_bytes

ORDER = 35
MAX_WARNINGS = 5   # lines of warnings on stderr; the report's note column has them all


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "grade", help="grade a CSV of answers (student, [version], one column per target)")
    parser.add_argument("problem", help="a problem file, or a worksheet folder of "
                                        "version-ID.toml (or ID.toml, ID/problem.toml) files")
    parser.add_argument("submissions", help="the answers: CSV with a header row")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report CSV to FILE")
    parser.set_defaults(run=run)


def read_submissions_file(path: Path, limit: int) -> bytes:
    """The submissions CSV's raw bytes (a bad byte spoils only its own cell)."""
    from symattn.check.grade import GradeError

    return read_bytes(path, what="the submissions CSV", error=GradeError, limit=limit)


def warnings(report) -> list[str]:
    """What the teacher should know although every answer was graded: unusable columns and
    student ids on more than one line."""
    lines = [f"column {target[:60]!r} cannot be graded: {why}"
             for target, why in report.column_errors.items()]
    for student, at in report.duplicates.items():
        lines.append(f"student id {student[:60]!r} is on lines {', '.join(map(str, at))}; "
                     "every line is graded (see the note column)")
    if len(lines) > MAX_WARNINGS:
        lines = lines[:MAX_WARNINGS] + [f"and {len(lines) - MAX_WARNINGS} more (see the note column)"]
    return lines


def run(args: argparse.Namespace) -> Outcome:
    from symattn.check.grade import MAX_BYTES, Versions, grade

    versions = Versions.from_path(args.problem)
    path = Path(args.submissions)
    report = grade(versions, read_submissions_file(path, MAX_BYTES), source=str(path))
    for line in warnings(report):
        print(f"symattn: warning: {line}", file=sys.stderr)
    return Outcome(report.to_csv(), 1 if report.invalid_count else 0)
