"""A graded class (``symattn grade --format text|latex|html``) as a document: the class at
a glance, each question's counts and common mistakes, then every student's points and
the answers that were not right.

The verdicts and points are the :class:`~symattn.check.grading.grade.GradeReport`'s, and the
counts come from its summary (``check.class_summary.summarise``); nothing is judged
again here.  The CSV report (``-o report.csv``) and ``--json`` stay the data files.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from symattn.document.blocks import Document, Note, Section, Table

if TYPE_CHECKING:
    from symattn.check.grading.grade import GradeReport

__all__ = ["build_grade_document"]

_FROM = {"default": "1 point per column", "folder": "points from the worksheet folder",
         "given": "points from --points"}


def _plural(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


def _class_notes(report: "GradeReport", s: dict, source: str | None) -> list[Note]:
    from symattn.check.grading.class_summary import printable
    from symattn.check.grading.credit import show_points

    n = s["students"]
    head = (f"{_plural(n, 'student')}" + (f" answered in {printable(source, 80)}" if source else "")
            + (f" ({s['student_ids']} distinct ids: some are on more than one line)" if s["student_ids"] != n
               else "") + ".")
    if s["versions"]:
        head += " Versions: " + ", ".join(f"{printable(v, 40)} ×{c}" for v, c in s["versions"].items()) + "."
    policy = ("carried-forward answers earn their points" if report.carry == "credit" else
              "carried-forward answers earn only their right entries")
    notes = [Note((head,)),
             Note((f"Points: mean {show_points(Fraction(s['points']['mean']))} of "
                   f"{show_points(Fraction(s['points']['max_points']))} ({_FROM[s['points']['from']]}; {policy}).",))]
    if s["columns_without_points"]:
        notes.append(Note(("Columns worth 0 points (no points given for them): "
                           + ", ".join(printable(t, 40) for t in s["columns_without_points"]) + ".",)))
    for title, items, show in (
            ("Students with unreadable cells", s["invalid_students"],
             lambda x: f"{printable(x['student']) or '(no id)'} (line {x['line']}"
                       + (f": {', '.join(printable(t, 40) for t in x['targets'])}" if x["targets"] else "") + ")"),
            ("Students whose answers are another version's key", s["other_version_students"],
             lambda x: f"{printable(x['student']) or '(no id)'} (line {x['line']}, version "
                       f"{printable(x['version'] or '')}: {_plural(x['answers'], 'answer')} of version "
                       f"{printable(x['matches'] or '', 40)})")):
        notes.append(Note((f"{title}: none." if not items else
                           f"{title} ({len(items)}): " + ", ".join(show(x) for x in items) + ".",)))
    if s["blank_students"]:
        items = s["blank_students"]
        notes.append(Note((f"Students with blank cells ({len(items)}): " + ", ".join(
            f"{printable(x['student']) or '(no id)'} (line {x['line']}: "
            + ", ".join(printable(t, 40) for t in x["targets"]) + ")" for x in items) + ".",)))
    return notes


def _questions(s: dict) -> Table:
    from symattn.check.grading.class_summary import printable
    from symattn.check.grading.credit import show_points

    rows = []
    blank = any(q["blank"] for q in s["questions"])     # the column only when a cell was left empty
    for q in s["questions"]:
        wrong = str(q["wrong"]) + (f" ({q['last_digit']} last digit)" if q["last_digit"] else "")
        mistakes = ", ".join(f"{name} ×{k}" for name, k in q["mistakes"]) or "—"
        points = f"{show_points(Fraction(q['points']))} of {show_points(Fraction(q['max_points']))}"
        rows.append((printable(q["target"], 40), str(q["right"]), str(q["mistake"]), wrong, str(q["invalid"]),
                     *([str(q["blank"])] if blank else []), points, mistakes))
    return Table("Answers per question", ("question", "right", "mistake", "wrong", "unreadable",
                                          *(["blank"] if blank else []), "points", "most common mistakes"),
                 tuple(rows), numeric=(False, True, True, True, True, *([True] if blank else []), True, False),
                 prose=7 if blank else 6)


def _students(report: "GradeReport") -> Table:
    from symattn.check.grading.class_summary import printable
    from symattn.check.grading.credit import show_points
    from symattn.check.grading.grade import mistake_name

    rows = []
    for row in report.rows:
        missed = []
        for target, v in zip(report.targets, row.verdicts):
            if v.right:
                continue
            name = mistake_name(v)
            missed.append(f"{printable(target, 40)}: {v.code}" + (f" ({printable(name, 60)})" if name else ""))
        missed += [printable(x, 200) for x in (row.note, row.warning) if x]
        cells = [printable(row.student) or "(no id)", str(row.line)]
        if report.has_version:
            cells.append(printable(row.version or "", 40))
        cells += [f"{row.right} of {len(report.targets)}",
                  f"{show_points(row.points)} of {show_points(row.max_points)}", "; ".join(missed) or "—"]
        rows.append(tuple(cells))
    header = ("student", "line", *(("version",) if report.has_version else ()), "right", "points",
              "answers not right")
    numeric = (False, True, *((False,) if report.has_version else ()), True, True, False)
    return Table("Every student", header, tuple(rows), numeric=numeric, prose=len(header) - 1)


def build_grade_document(report: "GradeReport", source: str | None = None, title: str | None = None) -> Document:
    """The graded class as a document: the class, the questions, the students."""
    from symattn.check.grading.class_summary import summarise

    s = summarise(report)
    sections = (Section("class", "The class", tuple(_class_notes(report, s, source))),
                Section("questions", "Questions", (_questions(s),)),
                Section("students", "Students", (_students(report),)))
    if title is None:
        from pathlib import PurePath

        from symattn.check.grading.class_summary import printable
        title = f"Grades: {printable(PurePath(source).name, 80)}" if source else "Grades"
    return Document(title, sections, meta={"kind": "grade", "summary": s})
