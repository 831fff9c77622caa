"""Hostile classes: one bad cell never stops the class, and the report is safe to open.

Each test is a reproducer from issue 9 (items 1, 5 and 7, the grading side).
"""

import csv
import io
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

import symattn as sa
from symattn.check.grading import grade as grading
from symattn.check.grading.grade import GradeError, Versions, grade, read_submissions, spreadsheet_safe
from clirun import cli

LESSON = Path(str(resources.files("symattn.examples").joinpath("i-love-cats.toml")))

NESTED = "√" * 64 + "2"                         # OverflowError in the parser before the caps
ZEROS = "2." + "0" * 450 + "e0"                  # IndexError in certify beyond 400 digits
TOWER = "(7^(1/4914))^(1/9441)^(1/4806)"         # OverflowError in the parser
PRIMES = "(1/7244)^(1/9827)"                     # past 60 s in SymPy's prime testing
HOSTILE = [NESTED, ZEROS, TOWER, PRIMES]


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """The command line in-process (tests/clirun.py): no new interpreter to start."""
    return cli(*args, cwd=cwd)


def rows_of(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def lesson():
    return Versions(single=sa.load_example("i-love-cats"))


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


# ------------------------------------------------------------------ item 1: one cell, one verdict

def test_every_other_student_has_one_hostile_cell_and_every_good_cell_is_graded(tmp_path):
    """The issue's 'done': a class where every other student has one hostile cell (and a
    formula for an id) is graded for every good cell, through the command line.

    The lesson: scores[I] = [2, 4, 4], weights[I, I] = e^(-2/√3) / (e^(-2/√3) + 2) ≈ 0.1361,
    √d_k = √3 ≈ 1.7321; d_k^9999 is a column no problem can grade (a 15,849-bit number)."""
    right = ["2", "0.136", "1.73"]
    rows = [["student", "scores[I, I]", "weights[I, I]", "sqrt(d_k)", "d_k^9999"]]
    for k, bad in enumerate(HOSTILE * 3):
        rows.append([f"good{k}", *right, "1"])
        hostile = list(right)
        hostile[k % 3] = bad
        rows.append([f"=bad{k}+1", *hostile, "1"])
    subs = tmp_path / "class.csv"
    subs.write_text(_csv(rows), encoding="utf-8")
    out = tmp_path / "report.csv"
    try:   # a hang guard, not a speed assertion: one hostile cell once ran past 60 s
        result = subprocess.run([sys.executable, "-m", "symattn", "grade", str(LESSON), str(subs),
                                 "-o", str(out)], capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("grading hung on a hostile cell: a cell must be refused or judged quickly")
    assert result.returncode == 1, result.stderr        # the d_k^9999 column is unusable
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("symattn: warning: column 'd_k^9999' cannot be graded")
    report = rows_of(out.read_text(encoding="utf-8"))
    assert len(report) == 24
    targets = ["scores[I, I]", "weights[I, I]", "sqrt(d_k)"]
    for k, row in enumerate(report):
        assert row["d_k^9999"] == "invalid"
        codes = [row[t] for t in targets]
        if k % 2 == 0:
            assert row["student"] == f"good{k // 2}"
            assert codes == ["exact", "rounded", "rounded"] and row["right"] == "3"
            continue
        bad = k // 2
        assert row["student"] == f"'=bad{bad}+1"           # neutralised for the spreadsheet
        assert [c for j, c in enumerate(codes) if j != bad % 3] == \
            [c for j, c in enumerate(["exact", "rounded", "rounded"]) if j != bad % 3]
        hostile_message = row[f"{targets[bad % 3]} message"]
        assert "internal error" not in hostile_message, hostile_message


@pytest.mark.parametrize("answer, target, allowed", [
    (NESTED, "sqrt(d_k)", {"invalid"}),
    (ZEROS, "scores[I, I]", {"exact", "rounded"}),    # 2 is 2.000… to 451 significant digits
    (ZEROS, "sqrt(d_k)", {"wrong"}),
    (TOWER, "sqrt(d_k)", {"wrong", "invalid"}),       # ≈ 1.0000000000: not √3, or refused
])
def test_each_reproducer_gets_its_own_honest_verdict(lesson, answer, target, allowed):
    """Not only isolated: judged (or refused with a reason), never an internal error."""
    verdict = grade(lesson, _csv([["student", target], ["ann", answer]])).rows[0].verdicts[0]
    assert verdict.code in allowed, verdict.message
    assert "internal error" not in verdict.message


def test_an_unexpected_exception_in_one_cell_is_that_cells_invalid_verdict(lesson, monkeypatch):
    checker = lesson.checker(None)
    real = checker.check

    def flaky(target, text, variant=None):
        if text == "0.137":
            raise ZeroDivisionError("a bug")
        return real(target, text, variant)

    monkeypatch.setattr(checker, "check", flaky)
    report = grade(lesson, "student,weights[I, I]\nann,0.136\nbob,0.137\ncy,0.136\n")
    ann, bob, cy = (r.verdicts[0] for r in report.rows)
    assert ann.code == cy.code == "rounded"
    assert bob.code == "invalid"
    assert "internal error" in bob.message and "ZeroDivisionError: a bug" in bob.message
    assert report.invalid_count == 1


def test_a_cell_over_128_kib_is_invalid_and_the_rest_is_graded(lesson):
    huge = "0.1, " * 40_000                         # 200,000 characters: over csv's 131,072
    data = f'student,weights[I],weights[I, I]\nann,"{huge}",0.136\nbob,"0.136, 0.432, 0.432",0.14\n'
    report = grade(lesson, data)
    ann, bob = report.rows
    assert ann.verdicts[0].code == "invalid" and "1×3" in ann.verdicts[0].message
    assert ann.verdicts[1].code == "rounded"
    assert [v.code for v in bob.verdicts] == ["rounded", "rounded"]


def test_an_answer_over_the_cell_cap_is_refused_without_reading_it(lesson):
    long = "1" * (grading.MAX_ANSWER_CHARS + 1)
    verdict = grade(lesson, f"student,weights[I, I]\nann,{long}\n").rows[0].verdicts[0]
    assert verdict.code == "invalid"
    assert f"{grading.MAX_ANSWER_CHARS + 1:,} characters" in verdict.message
    assert len(verdict.text) < 100


# ------------------------------------------------------------------ item 5: CSV injection

@pytest.mark.parametrize("cell, safe", [
    ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
    ("@SUM(1+1)", "'@SUM(1+1)"),
    ("+1+2", "'+1+2"),
    ("-2+3", "'-2+3"),
    ("\t=1", "'\t=1"),
    ("\r=1", "'\r=1"),
    ("＝1+1", "'＝1+1"),          # full-width equals sign: some spreadsheets convert it
    ("-0.5", "-0.5"),             # a plain number stays a number
    ("-12", "-12"),
    ("1e-3", "1e-3"),
    ("ann", "ann"),
    ("a=b", "a=b"),
    ("", ""),
])
def test_spreadsheet_safe(cell, safe):
    assert spreadsheet_safe(cell) == safe


def test_the_report_is_safe_to_open_in_a_spreadsheet(lesson):
    # a header that is a target and starts like a formula: -scores[I, I] is −2
    data = _csv([["student", "-scores[I, I]", "weights[I, I]"],
                 ["=cmd|' /C calc'!A0", "1", "=HYPERLINK(\"http://x\")"],
                 ["@SUM(1+1)", "-2", "-1+1"],
                 ["-7", "3", "0.136"]])
    report = grade(lesson, data)
    text = report.to_csv()
    cells = [c for row in csv.reader(io.StringIO(text)) for c in row]
    dangerous = [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")
                 or (c.startswith("-") and c not in ("-7", "-2"))]   # plain numbers stay numbers
    assert dangerous == []
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][1] == "'-scores[I, I]" and rows[0][2] == "'-scores[I, I] answer"
    assert rows[0][3] == "'-scores[I, I] mistake"
    assert rows[2][2] == "-2"                              # the answer as written, beside its verdict
    assert rows[1][rows[0].index("weights[I, I] answer")] == "'=HYPERLINK(\"http://x\")"
    assert rows[2][1] == "exact"
    assert [r[0] for r in rows[1:]] == ["'=cmd|' /C calc'!A0", "'@SUM(1+1)", "-7"]
    # the echoed answer text in a message is neutralised too
    assert rows[2][rows[0].index("weights[I, I] message")].startswith("'-1+1")
    assert rows[3][rows[0].index("weights[I, I]")] == "rounded"


# ------------------------------------------------------------------ item 7: the CSV itself

def test_a_header_only_csv_is_nothing_graded():
    with pytest.raises(GradeError, match="no students"):
        read_submissions("student,weights[I]\n", "s.csv")
    with pytest.raises(GradeError, match="no students"):
        read_submissions("student,weights[I]\n , \n\n", "s.csv")


def test_the_row_cap_counts_students_not_the_header(lesson):
    cap = grading.MAX_ROWS
    assert cap == 100_000
    head = "student,weights[I, I]\n"
    at_cap = head + "".join(f"s{k},0.136\n" for k in range(cap))
    header, rows = read_submissions(at_cap)
    assert len(rows) == cap
    with pytest.raises(GradeError, match="over 100,000 students"):
        read_submissions(at_cap + "one,0.136\n")
    report = grade(lesson, at_cap)
    assert len(report.rows) == cap and report.invalid_count == 0
    assert report.rows[-1].student == f"s{cap - 1}" and report.rows[-1].right == 1


def test_duplicate_students_are_all_graded_and_noted(lesson):
    data = ("student,weights[I, I]\n"
            "ann,0.136\nbob,0.5\nann,0.14\ncy,0.136\nann,0.5\n")
    report = grade(lesson, data)
    assert [(r.student, r.verdicts[0].code) for r in report.rows] == [
        ("ann", "rounded"), ("bob", "wrong"), ("ann", "rounded"), ("cy", "rounded"), ("ann", "wrong")]
    assert report.duplicates == {"ann": [2, 4, 6]}
    notes = [r["note"] for r in rows_of(report.to_csv())]
    assert notes[0] == "student id 'ann' is also on lines 4, 6; every line is graded"
    assert notes[1] == ""
    assert notes[4] == "student id 'ann' is also on lines 2, 4; every line is graded"
    assert report.invalid_count == 0      # a duplicate is graded, not unreadable


def test_cli_duplicates_warn_on_stderr_and_exit_0(tmp_path):
    subs = tmp_path / "subs.csv"
    subs.write_text("student,weights[I, I]\nann,0.136\nann,0.14\n", encoding="utf-8")
    result = run("grade", str(LESSON), str(subs))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ("symattn: warning: student id 'ann' is on lines 2, 3; every line is "
                             "graded (see the note column)\n")
    assert [r["weights[I, I]"] for r in rows_of(result.stdout)] == ["rounded", "rounded"]


def test_cli_header_only_exits_2(tmp_path):
    subs = tmp_path / "subs.csv"
    subs.write_text("student,weights[I, I]\n", encoding="utf-8")
    out = tmp_path / "report.csv"
    result = run("grade", str(LESSON), str(subs), "-o", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith("symattn: error: ") and "no students" in result.stderr
    assert result.stderr.count("\n") == 1 and not out.exists()


def test_cli_a_bad_column_is_reported_and_the_others_graded(tmp_path):
    subs = tmp_path / "subs.csv"
    subs.write_text("student,d_k^9999,weights[I, I]\nann,1,0.136\n", encoding="utf-8")
    result = run("grade", str(LESSON), str(subs))
    assert result.returncode == 1, result.stderr          # a column could not be graded
    assert result.stderr.startswith("symattn: warning: column 'd_k^9999' cannot be graded: ")
    row = rows_of(result.stdout)[0]
    assert row["d_k^9999"] == "invalid" and row["weights[I, I]"] == "rounded"
    assert "Traceback" not in result.stderr


def test_cli_reads_only_regular_files_and_at_most_the_byte_limit(tmp_path):
    result = run("grade", str(LESSON), "/dev/zero")
    assert result.returncode == 2 and "not a regular file" in result.stderr
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    # a real process with a timeout: in-process, a regression would block the suite forever
    result = subprocess.run([sys.executable, "-m", "symattn", "grade", str(LESSON), str(fifo)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "not a regular file" in result.stderr
    big = tmp_path / "big.csv"
    with big.open("wb") as handle:                    # sparse: no disk used
        handle.write(b"student,weights[I, I]\n")
        handle.truncate(grading.MAX_BYTES + 1)
    result = run("grade", str(LESSON), str(big))
    assert result.returncode == 2 and "over 16.0 MiB" in result.stderr
    assert result.stderr.count("\n") == 1


def test_in_memory_data_has_the_same_byte_limit():
    with pytest.raises(GradeError, match="byte limit"):
        read_submissions(b"student,x\n" + b"a" * grading.MAX_BYTES)


def test_a_quote_never_closed_is_refused_with_its_line():
    # leniently read, the quote would swallow bob's and cy's lines into ann's cell
    with pytest.raises(GradeError, match="the quote opened on line 3 is never closed"):
        read_submissions('student,weights[I, I]\nann,0.136\nbob,"0.14\ncy,0.136\n')
    # a stray character after a closed quote is still read (as Excel and LibreOffice do)
    header, rows = read_submissions('student,x\nann,"0.1, 0.2" x\nbob,"a""b"\n')
    assert rows == [["ann", "0.1, 0.2 x"], ["bob", 'a"b']]


def test_no_gradable_column_is_nothing_graded(lesson):
    with pytest.raises(GradeError, match=r"no column can be graded: 'd_k\^9999': "):
        grade(lesson, "student,d_k^9999\nann,1\n")
    with pytest.raises(GradeError, match=r"\(and 1 more column\)"):
        grade(lesson, "student,d_k^9999,weights[7]\nann,1,2\n")
    # a header that names nothing the problem has is refused before grading (issue 12)
    with pytest.raises(GradeError, match=r"'nonsense\[9\]' is not a target .*\(and 1 more header\)"):
        grade(lesson, "student,nonsense[9],weights[dog]\nann,1,2\n")
    with pytest.raises(GradeError, match=r"the header '=1\+1' is not a target"):
        grade(lesson, "student,=1+1,weights[I, I]\nann,1,2\n")
