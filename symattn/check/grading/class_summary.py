"""The class at a glance: what a teacher reads after ``symattn grade``.

Why apart from the report: the report has a row per student and four cells
per answer, which is what a spreadsheet wants and not what a person reads.
The summary counts, per question, how many answers were right, a named
mistake, wrong or unreadable (``invalid``), names the most common mistakes,
and lists the students whose rows need a look (unreadable cells, answers that
are another version's key).  It is computed from the report's verdicts and
never judges anything again.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from fractions import Fraction

from symattn.check.grading.credit import exact_points, show_points
from symattn.check.codes import MistakeCode, Verdict
from symattn.check.grading.rows import ClassReport, mistake_name

__all__ = ["CATEGORIES", "category", "summarise", "summary_text"]

#: The kinds of answer the summary counts (``last-digit`` counts as wrong; ``blank``: no answer).
CATEGORIES = ("right", "mistake", "wrong", "invalid", "blank")
TOP_MISTAKES = 3        # mistakes named per question
MAX_LISTED = 20         # students listed by name in the text summary


def category(code: str) -> str:
    if code in (Verdict.EXACT, Verdict.ROUNDED):
        return "right"
    if code == Verdict.LAST_DIGIT:
        return "wrong"
    return code


def summarise(report: ClassReport) -> dict:
    """The summary as data (the ``summary`` of ``grade --json``)."""
    questions = []
    for k, target in enumerate(report.targets):
        verdicts = [r.verdicts[k] for r in report.rows if k < len(r.verdicts)]
        counts = Counter(category(v.code) for v in verdicts)
        mistakes = Counter(mistake_name(v) for v in verdicts if v.code == Verdict.MISTAKE)
        earned = [r.earned[k] for r in report.rows if k < len(r.earned)]
        worth = [r.worth[k] for r in report.rows if k < len(r.worth)]
        questions.append({
            "target": target, **{c: counts[c] for c in CATEGORIES},
            "last_digit": sum(1 for v in verdicts if v.code == Verdict.LAST_DIGIT),
            "mistakes": [[name, n] for name, n in mistakes.most_common(TOP_MISTAKES)],
            "points": exact_points(sum(earned, Fraction(0))),
            "max_points": exact_points(sum(worth, Fraction(0)))})
    invalid = []
    for row in report.rows:
        bad = [t for t, v in zip(report.targets, row.verdicts) if v.code == Verdict.INVALID]
        if bad or row.note:
            invalid.append({"student": row.student, "line": row.line, "targets": bad,
                            "note": row.note})
    blanks = []
    for row in report.rows:
        empty = [t for t, v in zip(report.targets, row.verdicts) if v.code == Verdict.BLANK]
        if empty:
            blanks.append({"student": row.student, "line": row.line, "targets": empty})
    others = []
    for row in report.rows:
        hits = Counter(v.mistake_detail for v in row.verdicts if v.mistake == MistakeCode.OTHER_VERSION)
        if hits:
            vid, n = hits.most_common(1)[0]
            others.append({"student": row.student, "line": row.line, "version": row.version,
                           "matches": vid, "answers": n})
    totals = [r.points for r in report.rows]
    students = len(report.rows)
    versions = Counter(r.version_id for r in report.rows if r.version_id is not None)
    return {
        "students": students,
        "student_ids": len({r.student for r in report.rows if r.student}),
        "versions": dict(sorted(versions.items(), key=lambda kv: (len(kv[0]), kv[0]))),
        "questions": questions,
        "invalid_students": invalid,
        "blank_students": blanks,
        "other_version_students": others,
        "points": {"mean": exact_points(sum(totals, Fraction(0)) / students) if students else "0",
                   "max_points": exact_points(max((r.max_points for r in report.rows),
                                                  default=Fraction(0))),
                   "from": report.points_source},
        "carry_forward": report.carry,
        "columns_without_points": [t for k, t in enumerate(report.targets)
                                   if report.rows and all(r.worth[k] == 0 for r in report.rows
                                                          if k < len(r.worth))
                                   and report.points_source != "default"],
    }


def printable(text: str, limit: int = 60) -> str:
    """User text (a student id) safe to print on a terminal: controls and bidirectional
    overrides shown as escapes, cut at ``limit`` characters."""
    out = "".join(ch if unicodedata.category(ch)[0] != "C" else f"\\u{ord(ch):04x}" for ch in text)
    return out if len(out) <= limit else out[:limit - 1] + "…"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:-1], widths[1:-1])] + [r[-1]]
        lines.append("  ".join(cells).rstrip())
    return lines


_FROM = {"default": "1 point per column", "folder": "points from the worksheet folder",
         "given": "points from --points"}


def summary_text(report: ClassReport, source: str | None = None) -> str:
    """The summary a teacher reads on the terminal (``grade -o report.csv`` prints it)."""
    s = summarise(report)
    n = s["students"]
    head = f"{n} student{'s' if n != 1 else ''}"
    if s["student_ids"] != n:
        head += f" ({s['student_ids']} distinct ids: some are on more than one line)"
    if s["versions"]:
        shown = ", ".join(f"{v} ×{c}" for v, c in list(s["versions"].items())[:12])
        more = len(s["versions"]) - 12
        head += f"; versions {shown}" + (f" and {more} more" if more > 0 else "")
    lines = [f"{'Class summary' + (' of ' + printable(source, 80) if source else '')}: {head}", ""]
    blank = any(q["blank"] for q in s["questions"])     # the column only when a cell was left empty
    table = [["question", "right", "mistake", "wrong", "invalid", *(["blank"] if blank else []),
              "points", "most common mistakes"]]
    for q in s["questions"]:
        wrong = str(q["wrong"]) + (f" ({q['last_digit']} last-digit)" if q["last_digit"] else "")
        mistakes = ", ".join(f"{name} ×{k}" for name, k in q["mistakes"]) or "-"
        points = f"{show_points(Fraction(q['points']))} of {show_points(Fraction(q['max_points']))}"
        table.append([printable(q["target"], 40), str(q["right"]), str(q["mistake"]), wrong,
                      str(q["invalid"]), *([str(q["blank"])] if blank else []), points, mistakes])
    lines += _table(table)
    mean, top = Fraction(s["points"]["mean"]), Fraction(s["points"]["max_points"])
    policy = "carried-forward answers earn their points" if report.carry == "credit" else \
        "carried-forward answers earn only their right entries"
    lines += ["", f"points: mean {show_points(mean)} of {show_points(top)} "
                  f"({_FROM[s['points']['from']]}; "
                  f"{policy})"]
    if s["columns_without_points"]:
        lines.append("columns worth 0 points (no points given for them): "
                     + ", ".join(printable(t, 40) for t in s["columns_without_points"]))
    lines += _students("students with invalid cells", s["invalid_students"],
                       lambda x: f"{printable(x['student']) or '(no id)'} (line {x['line']}"
                                 + (f": {', '.join(printable(t, 40) for t in x['targets'])}"
                                    if x["targets"] else "") + ")")
    if s["blank_students"]:
        lines += _students("students with blank cells", s["blank_students"],
                           lambda x: f"{printable(x['student']) or '(no id)'} (line {x['line']}: "
                                     + ", ".join(printable(t, 40) for t in x["targets"]) + ")")
    lines += _students("students whose answers are another version's key",
                       s["other_version_students"],
                       lambda x: f"{printable(x['student']) or '(no id)'} (line {x['line']}, "
                                 f"version {printable(x['version'] or '')}: {x['answers']} "
                                 f"answer{'s' if x['answers'] != 1 else ''} of version {x['matches']})")
    return "\n".join(lines) + "\n"


def _students(title: str, items: list[dict], show) -> list[str]:
    if not items:
        return [f"{title}: none"]
    listed = ", ".join(show(x) for x in items[:MAX_LISTED])
    more = f", and {len(items) - MAX_LISTED} more (see the report)" if len(items) > MAX_LISTED else ""
    return [f"{title} ({len(items)}): {listed}{more}"]
