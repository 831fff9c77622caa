"""``symattn grade``: grade a class's answers; the report is written whole or not at all."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

from symattn.commands import Outcome

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
    """At most ``limit`` bytes of a regular file (never a FIFO, a device or /dev/zero)."""
    from symattn.check.grade import GradeError

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise GradeError(f"{path}: no such file; give the path of the submissions CSV") from None
    except OSError as exc:
        raise GradeError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise GradeError(f"{path}: not a regular file; give the path of the submissions CSV")
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise GradeError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise GradeError(f"{path}: over the {limit:,}-byte limit of a submissions file; "
                         "split the class into several files")
    return data


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
