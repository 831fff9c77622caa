"""``symattn grade``: grade a class's answers; the report is written whole or not at all.

``--format`` chooses what is written: ``csv`` (the default: the report a spreadsheet
opens, one row per student), ``json`` (the same report as data; ``--json`` is the
same), or the class as a document to read, ``text``, ``latex`` or ``html`` (the
class at a glance, each question's counts, every student's points).  Without ``-o``
it goes to stdout; with ``-o FILE`` it goes to FILE, in that format whatever FILE's
name, and the class summary is printed on stdout (or written to ``--summary FILE``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from symattn.commands import Outcome
from symattn.commands.heads import FORMATS, add_format_arguments, chosen_format

ORDER = 35
MAX_WARNINGS = 5   # lines of warnings on stderr; the report's note column has them all


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "grade", help="grade a CSV of answers (student, [version], one column per target)")
    parser.add_argument("problem", nargs="?", help="a problem file, or a worksheet folder of "
                                                   "version-ID.toml (or ID.toml, ID/problem.toml) files")
    parser.add_argument("submissions", nargs="?", help="the answers: CSV with a header row")
    parser.add_argument("--example", metavar="NAME",
                        help="a built-in example as the problem (then give only SUBMISSIONS)")
    add_format_arguments(parser, json_help="the report as JSON (verdicts, points and the summary)",
                         latex_help="", formats=("csv", *FORMATS),
                         format_help="csv (default: the report, one row per student), json, or the class "
                                     "as a document: text, latex or html (one self-contained page)",
                         output_help="write the report to FILE in the --format chosen (and print the "
                                     "class summary)")
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
    from symattn.check.grading.grade import GradeError
    from symattn.problem.tomlfile import read_bytes

    return read_bytes(path, what="the submissions CSV", error=GradeError, limit=limit)


def warnings(report, points=None) -> list[str]:
    """What the teacher should know although every answer was graded: unusable columns and
    student ids on more than one line (points given for no column are refused by grade)."""
    lines = [f"column {target[:60]!r} cannot be graded: {why}"
             for target, why in report.column_errors.items()]
    for student, at in report.duplicates.items():
        lines.append(f"student id {student[:60]!r} is on lines {', '.join(map(str, at))}; "
                     "every line is graded (see the note column)")
    if len(lines) > MAX_WARNINGS:
        lines = lines[:MAX_WARNINGS] + [f"and {len(lines) - MAX_WARNINGS} more (see the note column)"]
    return lines


def run(args: argparse.Namespace) -> Outcome:
    from symattn.output import files
    from symattn.check.grading.class_summary import summary_text
    from symattn.check.grading.folder import parse_points
    from symattn.check.grading.grade import MAX_BYTES, GradeError, Versions, grade

    fmt = chosen_format(args, default="csv")
    problem = _problem_and_submissions(args)
    if args.summary is not None:
        summary_path = files.resolve_output(args.summary, GradeError)
        if args.output is not None and summary_path == files.resolve_output(args.output, GradeError):
            raise GradeError(f"--summary {args.summary} is the report's file too: give another name")
    points = parse_points(args.points) if args.points is not None else None
    versions = problem if problem is not None else Versions.from_path(args.problem)
    path = Path(args.submissions)
    report = grade(versions, read_submissions_file(path, MAX_BYTES), source=str(path),
                   carry=args.carry_forward, points=points)
    for line in warnings(report, points):
        print(f"symattn: warning: {line}", file=sys.stderr)
    # a CSV file is written from its encoded lines (a class of 100,000 never holds the report
    # as one string beside them)
    as_bytes = fmt == "csv" and args.output is not None and not args.pdf
    text = "" if as_bytes else _report_text(report, str(path), fmt, args)
    status = 1 if report.invalid_count else 0
    summary = summary_text(report, str(path)) if args.output or args.summary else ""
    if args.output is not None:
        data: str | bytes = report.csv_bytes() if as_bytes else text
        if args.pdf:
            from symattn.commands import compile_pdf

            data = compile_pdf(text, args.output)   # reruns TeX: the longtables need two passes
        files.write_atomically(data, args.output, error=GradeError)
        text = ""
    if args.summary is not None:
        files.write_atomically(summary, args.summary, error=GradeError)
    elif summary:
        sys.stdout.write(summary)
        sys.stdout.flush()
    return Outcome(text, status)


def _problem_and_submissions(args: argparse.Namespace):
    """``grade PROBLEM SUBMISSIONS`` or ``grade --example NAME SUBMISSIONS``: the example's
    Versions (None for a problem path), with ``args.submissions`` set."""
    from symattn.check.grading.grade import GradeError, Versions

    if args.example is None:
        if args.submissions is None:
            raise GradeError("grade needs a problem (or --example NAME) and the submissions CSV"
                             if args.problem is None else
                             f"grade {args.problem}: give the submissions CSV after the problem")
        return None
    if args.submissions is not None:
        raise GradeError(f"--example {args.example} is the problem: leave out {args.problem}, "
                         "or --example")
    if args.problem is None:
        raise GradeError(f"--example {args.example}: give the submissions CSV too")
    from symattn.examples import load_example

    args.submissions, args.problem = args.problem, None
    return Versions(single=load_example(args.example))


def _report_text(report, source: str, fmt: str, args: argparse.Namespace) -> str:
    """The report in the chosen format: the data files (CSV, JSON) or the class document."""
    if fmt == "csv":
        return report.to_csv()
    if fmt == "json":
        return report.to_json(source)
    from symattn.document.build.grade import build_grade_document
    from symattn.document.formats import print_document

    from symattn.commands import paper

    return print_document(build_grade_document(report, source), fmt, fragment=args.fragment,
                          paper=paper(args))
