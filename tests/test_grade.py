"""Grading a class: per-answer verdicts, per-student totals, bad rows in their own cells."""

import csv
import io
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

import symattn as sa
from symattn.check.grading.grade import GradeError, Versions, grade
from clirun import cli

LESSON = Path(str(resources.files("symattn.examples").joinpath("i-love-cats.toml")))

SUBMISSIONS = """student,weights[I],"weights[love, cats]",output[I],sqrt(d_k)
ann,"0.136, 0.432, 0.432",0.09,"1.86, 6.32, 1.70",1.73
bob,"0.14, 0.43, 0.43",0.02,"0.14, 0.43, 0.43",1.74
cy,9^9^9^9,"__import__('os').system('echo pwned')",,2/√3
dee,"0.136 0.432",0.0903
"""


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """The command line in-process (tests/clirun.py): no new interpreter to start."""
    return cli(*args, cwd=cwd)


def rows_of(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def report():
    return grade(Versions(single=sa.load_example("i-love-cats")), SUBMISSIONS)


def test_verdicts_and_totals(report):
    rows = {r["student"]: r for r in rows_of(report.to_csv())}
    ann, bob = rows["ann"], rows["bob"]
    assert [ann[t] for t in report.targets] == ["rounded", "rounded", "rounded", "rounded"]
    assert ann["right"] == "4" and ann["total"] == "4"
    assert bob["weights[I]"] == "rounded"
    assert bob["weights[love, cats]"] == "mistake" and bob["weights[love, cats] mistake"] == "unscaled"
    assert bob["output[I]"] == "mistake" and bob["output[I] mistake"] == "wrong-step"
    assert bob["sqrt(d_k)"] == "last-digit"
    assert bob["right"] == "1"


def test_hostile_and_malformed_answers_stay_in_their_cells(report):
    rows = {r["student"]: r for r in rows_of(report.to_csv())}
    cy, dee = rows["cy"], rows["dee"]
    assert cy["weights[I]"] == "invalid" and "1×3" in cy["weights[I] message"]   # 9^9^9^9: shape first
    assert "quotes are not allowed" in cy["weights[love, cats] message"]
    assert cy["weights[love, cats]"] == "invalid"
    assert cy["output[I]"] == "blank" and cy["output[I] message"] == "no answer given"   # its own verdict
    assert cy["sqrt(d_k)"] == "wrong"          # 2/√3 is not √3: still graded
    assert dee["weights[I]"] == "invalid" and "a row of 2" in dee["weights[I] message"]
    assert dee["weights[love, cats]"] == "rounded"
    assert "line 5 has 3 cells but the header has 5" in dee["note"]


def test_a_worksheet_folder_picks_each_students_version(tmp_path):
    (tmp_path / "v1.toml").write_text(LESSON.read_text())
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "problem.toml").write_text(LESSON.read_text().replace('W_v = [[0, 2, 0]',
                                                                             'W_v = [[1, 2, 0]'))
    data = ("student,version,output[I, 0]\n"
            "ann,v1,1.86\n"
            "bob,v2,1.86\n"
            "cy,v9,1.86\n")
    report = grade(Versions.from_path(tmp_path), data)
    rows = {r["student"]: r for r in rows_of(report.to_csv())}
    assert rows["ann"]["output[I, 0]"] == "rounded"
    assert rows["bob"]["output[I, 0]"] != "rounded"     # v2's first value column differs
    assert rows["cy"]["output[I, 0]"] == "invalid"
    assert "no version 'v9'" in rows["cy"]["note"]


@pytest.mark.parametrize("data, words", [
    ("", "is empty"),
    ("name,weights[I]\nann,0.1\n", "no 'student' column"),
    ("student\nann\n", "no answer columns"),
    ("student,Q,Q\nann,1,1\n", "names 'Q' twice"),
])
def test_files_that_cannot_be_graded(data, words):
    with pytest.raises(GradeError) as err:
        grade(Versions(single=sa.load_example("i-love-cats")), data, source="s.csv")
    assert words in str(err.value)


def test_invalid_utf8_and_nul_bytes_are_invalid_cells():
    data = b"student,weights[I,I]\nann,0.13\xff6\nbob,0.1\x0036\ncy,0.136\n"
    report = grade(Versions(single=sa.load_example("i-love-cats")), data)
    assert [r.verdicts[0].code for r in report.rows] == ["invalid", "invalid", "rounded"]


def test_an_unquoted_header_with_a_comma_is_rejoined():
    # weights[I, I] written without quotes splits into two header cells; the data does not
    report = grade(Versions(single=sa.load_example("i-love-cats")),
                   "student,weights[I, I],output[cats, 1]\nann,0.136,7.48\n")
    assert report.targets == ["weights[I, I]", "output[cats, 1]"]
    assert [v.code for v in report.rows[0].verdicts] == ["rounded", "rounded"]


def test_cli_writes_the_report_whole(tmp_path):
    subs = tmp_path / "subs.csv"
    subs.write_text(SUBMISSIONS, encoding="utf-8")
    out = tmp_path / "report.csv"
    result = run("grade", str(LESSON), str(subs), "-o", str(out))
    assert result.returncode == 1, result.stderr     # graded; some answers were unreadable
    rows = rows_of(out.read_text(encoding="utf-8"))
    assert [r["student"] for r in rows] == ["ann", "bob", "cy", "dee"]
    assert rows[0]["right"] == "4"


def test_cli_all_readable_exits_0(tmp_path):
    subs = tmp_path / "subs.csv"
    subs.write_text("student,weights[I, I]\nann,0.136\nbob,0.5\n", encoding="utf-8")
    result = run("grade", str(LESSON), str(subs))
    assert result.returncode == 0, result.stderr
    assert rows_of(result.stdout)[1]["weights[I, I]"] == "wrong"


def test_cli_errors_write_nothing(tmp_path):
    subs = tmp_path / "subs.csv"
    subs.write_text("name,weights[I]\nann,0.1\n", encoding="utf-8")
    out = tmp_path / "report.csv"
    result = run("grade", str(LESSON), str(subs), "-o", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith("symattn: error: ") and "student" in result.stderr
    assert not out.exists()
    result = run("grade", str(tmp_path / "nope.toml"), str(subs), "-o", str(out))
    assert result.returncode == 2 and "no such file" in result.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [subs]     # no temporary file left behind


def test_a_slip_carried_forward_is_one_mistake_not_three():
    # scaled[love] with 9.42 for 9.24; softmax of [2.31, 9.42, 6.93] is 0.001, 0.923, 0.077,
    # and that row times V is 2.00, 7.84, 0.23: right for the student's own slip
    data = ('student,scaled[love],weights[love],output[love]\n'
            'ann,"2.31, 9.42, 6.93","0.001, 0.923, 0.077","2.00, 7.84, 0.23"\n'
            'bob,"2.31, 9.42, 6.93","0.001, 0.900, 0.077","2.00, 7.84, 0.23"\n')
    report = grade(Versions(single=sa.load_example("i-love-cats")), data)
    ann, bob = ([(v.code, v.mistake) for v in r.verdicts] for r in report.rows)
    assert ann == [("wrong", None), ("mistake", "carried-forward"), ("mistake", "carried-forward")]
    assert "scaled[love] = 2.31, 9.42, 6.93" in report.rows[0].verdicts[1].message
    assert bob[1] == ("wrong", None)                      # 0.900 follows from nothing
    assert bob[2] == ("mistake", "carried-forward")


def test_weights_carried_into_the_output():
    # 0.30·[1, 2, 3] + 0.35·[2, 8, 0] + 0.35·[2, 6, 3] = [1.70, 5.50, 1.95]
    data = 'student,weights[I],output[I]\nann,"0.30, 0.35, 0.35","1.70, 5.50, 1.95"\n'
    report = grade(Versions(single=sa.load_example("i-love-cats")), data)
    assert [(v.code, v.mistake) for v in report.rows[0].verdicts] == [
        ("wrong", None), ("mistake", "carried-forward")]


def test_a_folder_written_by_symattn_worksheet(tmp_path):
    folder = tmp_path / "ws"
    result = run("worksheet", "--versions", "2", "--seed", "1", "-o", str(folder))
    if result.returncode != 0:
        pytest.skip(f"symattn worksheet is not available here: {result.stderr.strip()}")
    ids = sorted(p.stem[len("version-"):] for p in folder.glob("version-*.toml"))
    assert len(ids) == 2
    checker = Versions.from_path(folder).checker(ids[0])
    own = checker.trace.scores.decimal(0, 0, sa.Rounding(places=0)).text
    data = "student,version,scores[0, 0]\n" + "".join(f"s{k},{v},{own}\n" for k, v in enumerate(ids))
    report = grade(Versions.from_path(folder), data)
    assert report.rows[0].verdicts[0].code == "exact"
    assert report.rows[0].note == "" and report.rows[1].note == ""
