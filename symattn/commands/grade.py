"""``symattn grade``: grade a class's answers; the report is written whole or not at all.

With ``-o REPORT`` the class summary is printed on stdout (or written to
``--summary FILE``); ``--json`` writes the same report as JSON.
"""

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
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the report to FILE (and print the class summary)")
    parser.add_argument("--json", action="store_true",
                        help="write the report as JSON (verdicts, points and the summary)")
    parser.add_argument("--summary", metavar="FILE",
                        help="write the class summary to FILE (default with -o: stdout)")
    parser.add_argument("--carry-forward", choices=("no-credit", "credit"), default="no-credit",
                        help="points for an answer right for the student's own earlier slip "
                             "(default no-credit: only its right entries earn points)")
    parser.add_argument("--points", metavar="SPEC",
                        help='points per question, e.g. "weights=2, output=3" (overrides the '
                             "worksheet folder's; default 1 per column)")
    parser.set_defaults(run=run)


def read_submissions_file(path: Path, limit: int) -> bytes:
    """The submissions CSV's raw bytes (a bad byte spoils only its own cell)."""
    from symattn.check.grade import GradeError

    return read_bytes(path, what="the submissions CSV", error=GradeError, limit=limit)


def warnings(report, points=None) -> list[str]:
    """What the teacher should know although every answer was graded: unusable columns,
    points given for no column, and student ids on more than one line."""
    from symattn.check.credit import unused_keys

    lines = [f"column {target[:60]!r} cannot be graded: {why}"
             for target, why in report.column_errors.items()]
    lines += [f"--points gives points for {key[:60]!r}, which no column answers"
              for key in unused_keys(report.targets, points)]
    for student, at in report.duplicates.items():
        lines.append(f"student id {student[:60]!r} is on lines {', '.join(map(str, at))}; "
                     "every line is graded (see the note column)")
    if len(lines) > MAX_WARNINGS:
        lines = lines[:MAX_WARNINGS] + [f"and {len(lines) - MAX_WARNINGS} more (see the note column)"]
    return lines


def run(args: argparse.Namespace) -> Outcome:
    from symattn import files
    from symattn.check.class_summary import summary_text
    from symattn.check.folder import parse_points
    from symattn.check.grade import MAX_BYTES, GradeError, Versions, grade

    if args.summary is not None:
        summary_path = files.resolve_output(args.summary, GradeError)
        if args.output is not None and summary_path == files.resolve_output(args.output, GradeError):
            raise GradeError(f"--summary {args.summary} is the report's file too: give another name")
    points = parse_points(args.points) if args.points is not None else None
    versions = Versions.from_path(args.problem)
    path = Path(args.submissions)
    report = grade(versions, read_submissions_file(path, MAX_BYTES), source=str(path),
                   carry=args.carry_forward, points=points)
    for line in warnings(report, points):
        print(f"symattn: warning: {line}", file=sys.stderr)
    text = report.to_json(str(path)) if args.json else report.to_csv()
    status = 1 if report.invalid_count else 0
    summary = summary_text(report, str(path)) if args.output or args.summary else ""
    if args.output is not None:
        files.write_atomically(text, args.output, error=GradeError)
        text = ""
    if args.summary is not None:
        files.write_atomically(summary, args.summary, error=GradeError)
    elif summary:
        sys.stdout.write(summary)
        sys.stdout.flush()
    return Outcome(text, status)
