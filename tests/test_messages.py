"""Messages students read (issue 25): the lesson's notation, every wrong entry explained,
parse errors that say what was not a number, "blank" as its own verdict, the answer kept in
the CSV report, last-digit only where there was something to round, and a --points key that
answers nothing refused.

Values are computed here with mpmath (row 'I' of the lesson: scores 2, 4, 4 over √3)."""

import csv
import io
import json
from importlib import resources
from pathlib import Path

import mpmath
import pytest
from clirun import cli

import symattn as sa
from symattn.check import Checker
from symattn.check.grading.grade import Versions, grade

mpmath.mp.dps = 30
LESSON = Path(str(resources.files("symattn.examples").joinpath("i-love-cats.toml")))
Z = [mpmath.mpf(s) / mpmath.sqrt(3) for s in (2, 4, 4)]
W = [mpmath.e ** z / sum(mpmath.e ** y for y in Z) for z in Z]     # 0.136126, 0.431937, 0.431937


@pytest.fixture(scope="module")
def lesson():
    return Checker(sa.load_example("i-love-cats"))


def six(x) -> str:
    return mpmath.nstr(x, 6)


# ----------------------------------------------------------------------- the lesson's notation

def test_hand_text_writes_what_explain_writes():
    import sympy

    from symattn.exact.sympytext import hand_text

    a = sympy.exp(-2 * sympy.sqrt(3) / 3)
    assert hand_text(a / (a + 2)) == "e^(−2/√3)/(e^(−2/√3) + 2)"
    assert hand_text(-8 * sympy.sqrt(3) / 3) == "−8/√3"
    assert hand_text(4 * sympy.sqrt(3)) == "12/√3"
    assert hand_text(5 * sympy.sqrt(2) / 4) == "5/(2√2)"
    assert hand_text(sympy.sqrt(3)) == "√3" and hand_text(1 / sympy.sqrt(3)) == "1/√3"
    assert hand_text(sympy.Rational(-1, 4) + 2 * sympy.sqrt(3) / 3) == "2/√3 − 1/4"
    # the same as explain's text for weights[I, I] (explain spaces its top-level fraction)
    explained = cli("explain", "--row", "I").stdout
    assert "exactly: weights[I, I] = e^(−2/√3) / (e^(−2/√3) + 2)" in explained


def test_check_and_grade_messages_use_the_hand_forms(lesson, tmp_path):
    v = lesson.check("weights[I, I]", "0.2")
    assert "e^(−2/√3)/(e^(−2/√3) + 2)" in v.message and "exp(" not in v.message
    assert f"≈ {six(W[0])}" in v.message
    assert v.entries[0].exact == "exp(-2*sqrt(3)/3)/(exp(-2*sqrt(3)/3) + 2)"     # JSON: SymPy
    (tmp_path / "a.csv").write_text('student,weights[I]\nann,"0.5, 0.25, 0.25"\n')
    report = cli("grade", "--example", "i-love-cats", str(tmp_path / "a.csv"))
    assert "1/(e^(−2/√3) + 2)" in report.stdout and "sqrt(" not in report.stdout


def test_every_wrong_entry_of_a_row_is_explained(lesson):
    v = lesson.check("weights[I]", "0.137, 0.433, 0.432")
    assert v.code == "last-digit"
    assert v.message.startswith("2 of 3 entries are not right; weights[I, I]: 0.137 ")
    assert "weights[I, love]: 0.433 is one unit off" in v.message
    assert "weights[I, cats]" not in v.message                     # the right one is not
    w = lesson.check("output", "[[9, 9, 9], [9, 9, 9], [9, 9, 9]]")
    assert w.message.startswith("9 of 9 entries are not right")
    assert all(f"output[{r}, {c}]: 9 is " in w.message for r in ("I", "love", "cats") for c in range(3))


# ----------------------------------------------------------------------- what could not be read

def test_a_word_for_a_row_is_not_a_number(lesson):
    v = lesson.check("weights[I]", "banana")
    assert v.code == "invalid" and "'banana'" in v.message and "it is not a number" in v.message
    assert "shape" not in v.message
    assert "not a number" in lesson.check("weights[I, I]", "banana").message
    assert "shape 1×1" in lesson.check("weights[I]", "9^9^9^9").message   # a formula: shape first, never evaluated


def test_semicolons_in_a_row_are_told_to_be_commas(lesson):
    v = lesson.check("weights[I]", "0.136; 0.432; 0.432")
    assert v.code == "invalid"
    assert "separated by ';'" in v.message and "separate its entries with commas" in v.message
    assert "(0.136, 0.432, 0.432)" in v.message and "3×1" not in v.message
    assert lesson.check("weights", "0.14 0.43 0.43; 0 0.91 0.09; 0.01 0.75 0.24").code == "rounded"


def test_a_problem_file_given_as_figures_says_so(tmp_path):
    result = cli("check", str(LESSON))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "this looks like a problem file" in result.stderr
    assert "give it as the problem argument" in result.stderr and "unknown key" not in result.stderr


# ----------------------------------------------------------------------- last-digit

def test_one_unit_off_an_exact_value_is_wrong(lesson):
    assert [lesson.check(f"scores[I, {k}]", "4").code for k in ("love", "cats")] == ["exact", "exact"]
    v = lesson.check("scores[I, love]", "5")
    assert v.code == "wrong" and v.message == "5 is not scores[I, love]: it is exactly 4"
    assert lesson.check("scores[I, love]", "4.1").code == "wrong"     # 4 is 4.0 at 1 place
    # 16/√3 = 9.2376…: there were digits to round, so a slip stays a slip
    assert lesson.check("scaled[love, love]", "9.25").code == "last-digit"
    assert lesson.check("scaled[love, love]", "9.23").entries[0].truncation is True


# ----------------------------------------------------------------------- grading

def test_a_blank_cell_is_its_own_verdict(tmp_path):
    data = 'student,weights[I],"weights[I, I]"\nann,"0.136, 0.432, 0.432",\nbob,,0.136\n'
    report = grade(Versions(single=sa.load_example("i-love-cats")), data)
    assert [[v.code for v in r.verdicts] for r in report.rows] == [["rounded", "blank"], ["blank", "rounded"]]
    assert report.invalid_count == 0
    assert report.rows[0].verdicts[1].message == "no answer given"
    (tmp_path / "a.csv").write_text(data)
    done = cli("grade", "--example", "i-love-cats", str(tmp_path / "a.csv"), "--json")
    assert done.returncode == 0                     # blank cells are not unreadable ones
    s = json.loads(done.stdout)["summary"]
    assert [(q["blank"], q["invalid"]) for q in s["questions"]] == [(1, 0), (1, 0)]
    assert [x["student"] for x in s["blank_students"]] == ["ann", "bob"] and s["invalid_students"] == []


def test_the_csv_report_keeps_the_answer_beside_the_verdict():
    data = 'student,weights[I],"weights[I, I]"\nann,"0.137, 0.433, 0.432",=1+1\nbob,0.136 0.432 0.432,\n'
    text = grade(Versions(single=sa.load_example("i-love-cats")), data).to_csv()
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    assert header[1:4] == ["weights[I]", "weights[I] answer", "weights[I] mistake"]
    at = {name: k for k, name in enumerate(header)}
    assert rows[1][at["weights[I]"]] == "last-digit"
    assert rows[1][at["weights[I] answer"]] == "0.137, 0.433, 0.432"
    assert rows[1][at["weights[I, I] answer"]] == "'=1+1"               # still safe in a spreadsheet
    assert rows[2][at["weights[I] answer"]] == "0.136 0.432 0.432"
    assert rows[2][at["weights[I, I]"]] == "blank" and rows[2][at["weights[I, I] answer"]] == ""


def test_a_points_key_that_answers_nothing_is_refused(tmp_path):
    (tmp_path / "a.csv").write_text('student,weights[I]\nann,"0.136, 0.432, 0.432"\n')
    bad = cli("grade", "--example", "i-love-cats", "a.csv", "--points", "wieghts=2", "-o", "r.csv", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert "'wieghts'" in bad.stderr and "did you mean 'weights'?" in bad.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]
    good = cli("grade", "--example", "i-love-cats", "a.csv", "--points", "weights=2", "--json", cwd=tmp_path)
    assert good.returncode == 0 and json.loads(good.stdout)["students"][0]["points"] == "2"
