"""``symattn grade``: grade a class's answers; the report is written whole or not at all."""

from __future__ import annotations

import argparse
from pathlib import Path

from symattn.commands import Outcome

ORDER = 35


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "grade", help="grade a CSV of answers (student, [version], one column per target)")
    parser.add_argument("problem", help="a problem file, or a worksheet folder of "
                                        "version-ID.toml (or ID.toml, ID/problem.toml) files")
    parser.add_argument("submissions", help="the answers: CSV with a header row")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report CSV to FILE")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> Outcome:
    from symattn.check.grade import GradeError, Versions, grade

    versions = Versions.from_path(args.problem)
    path = Path(args.submissions)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise GradeError(f"{path}: no such file; give the path of the submissions CSV") from None
    except OSError as exc:
        raise GradeError(f"{path}: cannot read the file ({exc})") from None
    report = grade(versions, data, source=str(path))
    return Outcome(report.to_csv(), 1 if report.invalid_count else 0)
