"""Grading a teacher can read (issue 12): the class summary, headers that are not targets,
spreadsheet CSVs (semicolons, decimal commas, BOM), other versions' keys, --json, points with
per-entry partial credit, and the carried-forward policy.

Every key value here is computed independently in float64 from the lesson's matrices
(plain Python, no symattn), and the points are worked by hand.
"""

import csv
import io
import json
import math
from fractions import Fraction
from importlib import resources
from pathlib import Path

import pytest

import symattn as sa
from symattn.check import spreadsheet
from symattn.check.grading.class_summary import summarise
from symattn.check.grading.credit import show_points
from symattn.check.grading.folder import parse_points
from symattn.check.grading.grade import GradeError, Versions, grade
from symattn.cli import main

LESSON = Path(str(resources.files("symattn.examples").joinpath("i-love-cats.toml")))
TOKENS = ["I", "love", "cats"]
X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
W_Q = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
W_K = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
W_V = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]


def matmul(a, b):
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def reference(x=X, w_q=W_Q, w_k=W_K, w_v=W_V, scaled=True):
    """scores, weights and output of the lesson in float64, without symattn."""
    q, k, v = matmul(x, w_q), matmul(x, w_k), matmul(x, w_v)
    scores = matmul(q, [list(c) for c in zip(*k)])
    scale = 1 / math.sqrt(len(w_q[0])) if scaled else 1.0
    weights = []
    for row in scores:
        e = [math.exp(scale * (s - max(row))) for s in row]
        weights.append([t / sum(e) for t in e])
    return scores, weights, matmul(weights, v)


SCORES, WEIGHTS, OUTPUT = reference()
_, UNSCALED, _ = reference(scaled=False)


def dec(values, places=3):
    return ", ".join(f"{x:.{places}f}" for x in values)


def comma(values, places=3):
    """A row as a spreadsheet in a decimal-comma locale writes it: 0,136; 0,432; 0,432."""
    return "; ".join(f"{x:.{places}f}".replace(".", ",") for x in values)


def test_the_reference_is_the_lesson():
    # the hand-worked numbers of the lesson (docs/checking.md): a check on the check
    assert SCORES[0] == [2, 4, 4] and SCORES[1] == [4, 16, 12]
    assert dec(WEIGHTS[0]) == "0.136, 0.432, 0.432"
    assert dec(OUTPUT[0], 2) == "1.86, 6.32, 1.70"


def cli(capsys, *argv):
    """Run symattn in-process: (status, stdout, stderr)."""
    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def rows_of(text: str, delimiter=",") -> list[dict]:
    return list(csv.DictReader(io.StringIO(text.lstrip("\ufeff")), delimiter=delimiter))


# --------------------------------------------------------------------- a constructed class

CLASS = [
    ["student", "weights[I]", "weights[love]", "output[I]"],
    ["ann", dec(WEIGHTS[0]), dec(WEIGHTS[1]), dec(OUTPUT[0], 2)],        # all right
    ["bob", dec(WEIGHTS[0]), dec(UNSCALED[1]), dec(OUTPUT[0], 2)],       # unscaled love row
    ["cy", dec(UNSCALED[0]), dec(UNSCALED[1]), "9, 9, 9"],               # unscaled twice, wrong
    ["dee", "0.136 0.432", dec(WEIGHTS[1]), ""],                         # two unreadable cells
    ["eve", dec(WEIGHTS[0]), "0.5, 0.5, 0", dec(OUTPUT[0], 2)],          # one wrong
]


def _csv(rows, delimiter=",") -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n", delimiter=delimiter).writerows(rows)
    return out.getvalue()


def test_the_unscaled_rows_are_not_the_right_ones():
    assert dec(UNSCALED[0]) != dec(WEIGHTS[0]) and dec(UNSCALED[1]) != dec(WEIGHTS[1])


def test_summary_counts_on_a_constructed_class(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)         # a short name: the summary shortens long paths with "…"
    subs = Path("class.csv")
    subs.write_text(_csv(CLASS), encoding="utf-8")
    out = Path("report.csv")
    status, stdout, stderr = cli(capsys, "grade", LESSON, subs, "-o", out)
    assert status == 1, stderr                         # dee's cells could not be read
    report = rows_of(out.read_text(encoding="utf-8"))
    assert [r["student"] for r in report] == ["ann", "bob", "cy", "dee", "eve"]
    lines = stdout.splitlines()
    assert lines[0].startswith(f"Class summary of {subs}: 5 students")
    table = {line.split()[0]: line.split() for line in lines[3:6]}
    # question: right, mistake, wrong, invalid, blank (a column only when a cell is empty),
    # points "n of m", then the mistakes
    assert lines[2].split()[:6] == ["question", "right", "mistake", "wrong", "invalid", "blank"]
    assert table["weights[I]"][1:6] == ["3", "1", "0", "1", "0"]
    assert table["weights[love]"][1:6] == ["2", "2", "1", "0", "0"]
    assert table["output[I]"][1:6] == ["3", "0", "1", "0", "1"]       # dee left it blank
    assert "unscaled ×2" in lines[4] and "unscaled ×1" in lines[3]
    assert "students with invalid cells (1): dee (line 5: weights[I])" in stdout
    assert "students with blank cells (1): dee (line 5: output[I])" in stdout
    assert "another version's key: none" in stdout
    # 1 point per column, shared by its entries: an unscaled row may still have right entries
    same = [sum(a == b for a, b in zip(dec(UNSCALED[i]).split(", "), dec(WEIGHTS[i]).split(", ")))
            for i in (0, 1)]
    # eve's "0.5, 0.5, 0" against 0.001, 0.909, 0.090: only "0" (0.090 to 0 places) is right
    expected = [Fraction(3), 2 + Fraction(same[1], 3), Fraction(same[0] + same[1], 3),
                Fraction(1), 2 + Fraction(1, 3)]
    assert [r["points"] for r in report] == [show_points(x) for x in expected]
    assert f"points: mean {show_points(sum(expected) / 5)} of 3 (1 point per column;" in stdout


def test_the_summary_as_data_matches_the_report():
    report = grade(Versions(single=sa.load_example("i-love-cats")), _csv(CLASS))
    s = summarise(report)
    assert s["students"] == 5 and s["student_ids"] == 5
    by_target = {q["target"]: q for q in s["questions"]}
    assert {k: by_target["weights[love]"][k] for k in ("right", "mistake", "wrong", "invalid")} == \
        {"right": 2, "mistake": 2, "wrong": 1, "invalid": 0}
    assert by_target["weights[love]"]["mistakes"] == [["unscaled", 2]]
    assert [x["student"] for x in s["invalid_students"]] == ["dee"]
    # every answer falls in exactly one of the five categories
    for q in s["questions"]:
        assert q["right"] + q["mistake"] + q["wrong"] + q["invalid"] + q["blank"] == 5
    assert [x["student"] for x in s["blank_students"]] == ["dee"]


def test_no_summary_when_the_report_goes_to_stdout(tmp_path, capsys):
    subs = tmp_path / "class.csv"
    subs.write_text(_csv(CLASS[:2]), encoding="utf-8")
    status, stdout, _ = cli(capsys, "grade", LESSON, subs)
    assert status == 0 and stdout.startswith("student,weights[I],")
    assert "Class summary" not in stdout


def test_summary_to_a_file(tmp_path, capsys):
    subs = tmp_path / "class.csv"
    subs.write_text(_csv(CLASS[:3]), encoding="utf-8")
    summary = tmp_path / "summary.txt"
    status, stdout, _ = cli(capsys, "grade", LESSON, subs, "--summary", summary)
    assert status == 0 and stdout.startswith("student,")        # the report on stdout
    text = summary.read_text(encoding="utf-8")
    assert "2 students" in text and "unscaled ×1" in text
    status, _, stderr = cli(capsys, "grade", LESSON, subs, "-o", summary, "--summary", summary)
    assert status == 2 and "--summary" in stderr and stderr.count("\n") == 1


def test_student_ids_are_printed_safely_in_the_summary(tmp_path, capsys):
    subs = tmp_path / "class.csv"
    subs.write_text(f"student,weights[I]\n\"\x1b[31mzed\",0.1 0.2\nok,{dec(WEIGHTS[0])}\n",
                    encoding="utf-8")
    status, stdout, _ = cli(capsys, "grade", LESSON, subs, "-o", tmp_path / "r.csv")
    assert status == 1
    assert "\x1b" not in stdout and "\\u001b[31mzed (line 2: weights[I])" in stdout


# --------------------------------------------------------------------- headers

def test_a_header_that_is_not_a_target_is_refused_with_the_closest(tmp_path, capsys):
    subs = tmp_path / "class.csv"
    subs.write_text(f"student,weigths[I],output[I]\nann,\"{dec(WEIGHTS[0])}\",1\n", encoding="utf-8")
    out = tmp_path / "report.csv"
    status, stdout, stderr = cli(capsys, "grade", LESSON, subs, "-o", out)
    assert status == 2 and stdout == ""
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert "'weigths[I]' is not a target (no step named 'weigths'); did you mean 'weights[I]'?" in stderr
    assert not out.exists()


@pytest.mark.parametrize("header, closest", [
    ("weights[cast]", "weights[cats]"),
    ("Weights[i, Cats]", "weights[I, cats]"),
    ("outptu", "output"),
    ("sqrt(dk)", "sqrt(d_k)"),
    ("scores[I]]", "scores[I]"),
])
def test_the_suggestion_is_the_closest_target(header, closest):
    lesson = Versions(single=sa.load_example("i-love-cats"))
    with pytest.raises(GradeError) as err:
        grade(lesson, _csv([["student", header], ["ann", "1"]]), source="c.csv")
    assert f"did you mean {closest!r}?" in str(err.value)
    assert str(err.value).startswith(f"c.csv: the header {header!r} is not a target")


def test_several_bad_headers_are_counted_and_a_large_target_still_warns(tmp_path, capsys):
    lesson = Versions(single=sa.load_example("i-love-cats"))
    with pytest.raises(GradeError, match=r"\(and 1 more header\)"):
        grade(lesson, "student,weigths[I],outptu\nann,1,2\n")
    # d_k^9999 names the problem's things: a column warning, the rest graded (as before)
    subs = tmp_path / "class.csv"
    subs.write_text("student,d_k^9999,weights[I, I]\nann,1,0.136\n", encoding="utf-8")
    status, _, stderr = cli(capsys, "grade", LESSON, subs)
    assert status == 1 and stderr.startswith("symattn: warning: column 'd_k^9999' cannot be graded")


# --------------------------------------------------------------------- spreadsheet CSVs

def test_semicolons_and_decimal_commas_grade_like_the_comma_file(tmp_path, capsys):
    plain = grade(Versions(single=sa.load_example("i-love-cats")), _csv(CLASS))
    rows = [CLASS[0]] + [[r[0]] + [c.replace(".", ",").replace(", ", "; ") for c in r[1:]]
                         for r in CLASS[1:]]
    assert rows[1][1] == comma(WEIGHTS[0])                   # "0,136; 0,432; 0,432"
    text = _csv(rows, ";").replace("\n", "\r\n")
    subs = tmp_path / "class.csv"
    subs.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))    # Excel's "CSV UTF-8": BOM, CRLF
    out = tmp_path / "report.csv"
    status, _, stderr = cli(capsys, "grade", LESSON, subs, "-o", out)
    assert status == 1, stderr
    written = out.read_text(encoding="utf-8")
    assert written.startswith("\ufeffstudent;weights[I];")     # the report as the class was
    report = rows_of(written, ";")
    for graded, row in zip(plain.rows, report):
        assert [row[t] for t in plain.targets] == [v.code for v in graded.verdicts]
        assert [row[f"{t} mistake"] for t in plain.targets] == [v.mistake or "" for v in graded.verdicts]
    assert report[0]["weights[I]"] == "rounded" and report[1]["weights[love] mistake"] == "unscaled"


def test_a_scalar_with_a_decimal_comma_in_a_comma_file():
    # Google Sheets in a decimal-comma locale quotes "0,136" in a comma-delimited file
    data = f'student,weights[I, I],weights[I]\nann,"0,136","{dec(WEIGHTS[0])}"\n'
    report = grade(Versions(single=sa.load_example("i-love-cats")), data)
    assert [v.code for v in report.rows[0].verdicts] == ["rounded", "rounded"]


@pytest.mark.parametrize("cell, size, semicolons, read", [
    ("0,136; 0,432; 0,432", 3, True, "0.136, 0.432, 0.432"),
    ("0,136; 0,432; 0,432", None, False, "0.136, 0.432, 0.432"),
    ("0,136", 1, False, "0.136"),
    ("0,5", 2, False, "0,5"),                  # a 1×2 row written with a comma
    ("0,5", None, True, "0.5"),
    ("0.136, 0.432, 0.432", 3, True, "0.136, 0.432, 0.432"),
    ("2,4,4", 3, True, "2,4,4"),               # integers separated by commas
    ("2, 4, 4", 3, True, "2, 4, 4"),
    ("[[0,1; 0,2]; [0,3; 0,4]]", 4, True, "[[0.1, 0.2], [0.3, 0.4]]"),
    ("13,6%", 1, True, "13.6%"),
    ("-2,94; 1,86", 2, True, "-2.94, 1.86"),
    ("2/√3", 1, True, "2/√3"),
    ("9; 9; 9", 3, True, "9, 9, 9"),          # integers in a semicolon locale
    ("0,136 0,432", 3, True, "0.136 0.432"),  # not '0', '136 0', '432': still a row of 2
])
def test_decimal_commas_are_read_only_where_they_cannot_be_separators(cell, size, semicolons, read):
    assert spreadsheet.decimal_comma(cell, size, semicolons) == read


@pytest.mark.parametrize("header, delimiter", [
    ("student,weights[I]", ","),
    ("student;weights[I, I];output[I]", ";"),
    ('student,"weights[love, cats]";x', ","),     # one comma and one semicolon: a tie is a comma
    ("student;\"a,b\";weights[I]", ";"),
    ("student\tweights[I, I]", "\t"),
    ("\n\nstudent;weights[I]", ";"),
    ("student", ","),
])
def test_the_delimiter_is_decided_from_the_header(header, delimiter):
    assert spreadsheet.header_delimiter(header + "\nann;1,2,3,4,5,6\n") == delimiter


def test_excel_sep_line_utf16_and_bom(tmp_path):
    lesson = Versions(single=sa.load_example("i-love-cats"))
    body = f"student;weights[I, I]\r\nann;0,136\r\n"
    for data in (("sep=;\r\n" + body).encode("utf-8"),
                 b"\xef\xbb\xbf" + body.encode("utf-8"),
                 "\ufeff".encode("utf-16-le").join([b"", body.encode("utf-16-le")]),
                 "\ufeff" + body):
        report = grade(lesson, data)
        assert report.targets == ["weights[I, I]"]
        assert report.rows[0].student == "ann" and report.rows[0].verdicts[0].code == "rounded"
    # a BOM before a comma file is no part of the 'student' header
    report = grade(lesson, b"\xef\xbb\xbfstudent,weights[I, I]\nann,0.136\n")
    assert report.rows[0].verdicts[0].code == "rounded" and report.bom is True


# --------------------------------------------------------------------- versions

W_V_B = [[1, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]     # version B: another first value row
_, WEIGHTS_B, OUTPUT_B = reference(w_v=W_V_B)


def _folder(tmp_path, meta: str | None = None, heads: tuple[str, str] = ("", "")) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    text = LESSON.read_text(encoding="utf-8")
    (folder / "version-A.toml").write_text(heads[0] + text, encoding="utf-8")
    (folder / "version-B.toml").write_text(heads[1] + text.replace("W_v = [[0, 2, 0]", "W_v = [[1, 2, 0]"),
                                           encoding="utf-8")
    if meta is not None:
        (folder / "worksheet.json").write_text(meta, encoding="utf-8")
    return folder


def test_an_answer_of_another_versions_key_is_named(tmp_path, capsys):
    assert dec(OUTPUT_B[0], 2) != dec(OUTPUT[0], 2)
    folder = _folder(tmp_path)
    subs = tmp_path / "class.csv"
    subs.write_text(_csv([["student", "version", "output[I]", "weights[I]"],
                          ["ann", "A", dec(OUTPUT_B[0], 2), dec(WEIGHTS[0])],   # B's output
                          ["bob", "B", dec(OUTPUT_B[0], 2), dec(WEIGHTS[0])],
                          ["cy", "B", dec(OUTPUT[0], 2), "0.9, 0.05, 0.05"]]), encoding="utf-8")
    out = tmp_path / "report.csv"
    status, stdout, stderr = cli(capsys, "grade", folder, subs, "-o", out)
    assert status == 0, stderr
    report = rows_of(out.read_text(encoding="utf-8"))
    assert (report[0]["output[I]"], report[0]["output[I] mistake"]) == ("mistake", "other-version: B")
    assert "right for version B, not for version A" in report[0]["output[I] message"]
    assert report[1]["output[I]"] == "rounded"
    assert (report[2]["output[I]"], report[2]["output[I] mistake"]) == ("mistake", "other-version: A")
    assert report[2]["weights[I]"] == "wrong"              # no version has 0.9, 0.05, 0.05
    assert "another version's key (2): ann (line 2, version A: 1 answer of version B), " \
           "cy (line 4, version B: 1 answer of version A)" in stdout
    assert "other-version: B ×1" in stdout


WORKSHEET_JSON = json.dumps({"format": "symattn worksheet 1", "versions": [
    {"id": "A", "code": "SET-DMP", "problem": "version-A.toml",
     "questions": [{"step": "weights", "points": 3}, {"step": "output", "points": "3/2"},
                   {"step": "scores", "points": None}]},
    {"id": "B", "code": "CLF-J79", "problem": "version-B.toml",
     "questions": [{"step": "weights", "points": 1}, {"step": "output", "points": 1}]}]})


def test_codes_and_points_from_worksheet_json(tmp_path):
    folder = _folder(tmp_path, WORKSHEET_JSON)
    data = _csv([["student", "code", "weights[I]", "weights[love]", "weights[cats]", "output[I]",
                  "scores[I]"],
                 ["ann", "set dmp", dec(WEIGHTS[0]), dec(WEIGHTS[1]), dec(WEIGHTS[2]),
                  dec(OUTPUT[0], 2), "2, 4, 4"],
                 ["bob", "clfj79", dec(WEIGHTS_B[0]), "0.5, 0.5, 0.5", dec(WEIGHTS_B[2]),
                  dec(OUTPUT_B[0], 2), "2, 4, 4"]])
    report = grade(Versions.from_path(folder), data)
    ann, bob = report.rows
    assert (ann.version_id, bob.version_id) == ("A", "B")
    # A: weights 3 points over 3 columns, output 3/2, scores none
    assert ann.worth == [1, 1, 1, Fraction(3, 2), 0] and ann.points == Fraction(9, 2)
    # B: weights 1 over 3 columns, output 1, scores not given for B: 0
    assert bob.worth == [Fraction(1, 3)] * 3 + [1, 0]
    assert bob.verdicts[1].code == "wrong" and bob.points == Fraction(2, 3) + 1


def test_codes_and_points_from_the_problem_files_and_the_manifest(tmp_path):
    folder = _folder(tmp_path, heads=("# symattn worksheet: version A (code K7Q-F2M) of seed 3\n"
                                      "# points: weights=2, output=4\n", ""))
    (folder / "worksheet.txt").write_text(
        "symattn worksheet: 2 version(s), seed 3\npoints: weights=1\n"
        "version A: version-A.toml code K7Q-F2M\nversion B: version-B.toml code ZZ9-ZZ9\n",
        encoding="utf-8")
    versions = Versions.from_path(folder)
    assert versions.resolve("k7qf2m") == "A" and versions.resolve("zz9 zz9") == "B"
    assert versions.resolve("b") == "B"
    assert versions.points("A") == {"weights": 2, "output": 4}
    assert versions.points("B") == {"weights": 1}          # the manifest's, for every version
    with pytest.raises(GradeError, match=r"no version 'Q' in .*the versions are A, B"):
        versions.resolve("Q")


def test_prose_comments_in_a_problem_file_are_not_points(tmp_path):
    problem = tmp_path / "lesson.toml"
    problem.write_text("# Points: the lesson's numbers, see the book\n# the code is in ch. 2\n"
                       + LESSON.read_text(encoding="utf-8"), encoding="utf-8")
    assert Versions.from_path(problem).points(None) is None
    problem.write_text("# points: weights=two\n" + LESSON.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(GradeError, match=r"'# points:' line.*write a number of points"):
        Versions.from_path(problem)


def test_given_points_override_the_folder(tmp_path, capsys):
    folder = _folder(tmp_path, WORKSHEET_JSON)
    subs = tmp_path / "class.csv"
    subs.write_text(_csv([["student", "version", "weights[I]"], ["ann", "A", dec(WEIGHTS[0])]]),
                    encoding="utf-8")
    status, stdout, stderr = cli(capsys, "grade", folder, subs, "-o", tmp_path / "r.csv",
                                 "--points", "weights=5")
    assert status == 0
    assert "points: mean 5 of 5 (points from --points;" in stdout
    # a key that no column answers is refused like a header typo (issue 25): exit 2, one line
    status, stdout, stderr = cli(capsys, "grade", folder, subs, "-o", tmp_path / "r2.csv",
                                 "--points", "weights=5, wieghts=1")
    assert status == 2 and stdout == "" and not (tmp_path / "r2.csv").exists()
    assert "--points gives points for 'wieghts'" in stderr and "did you mean 'weights'?" in stderr
    assert stderr.count("\n") == 1


# --------------------------------------------------------------------- points and JSON

def test_partial_credit_per_entry(tmp_path, capsys):
    # weights[I] worth 2: 2 of 3 entries right earns 2·2/3 = 4/3; output[I] worth 3, all right;
    # weights[I, I] named exactly: 1/2 point
    subs = tmp_path / "class.csv"
    right, half = dec(WEIGHTS[0]).split(", "), dec(OUTPUT[0], 2)
    subs.write_text(_csv([["student", "weights[I]", "output[I]", "weights[I, I]"],
                          ["ann", f"{right[0]}, {right[1]}, 0.5", half, "0.2"],
                          ["bob", "0.1 0.2", "9, 9, 9", right[0]]]), encoding="utf-8")
    out = tmp_path / "report.csv"
    status, stdout, _ = cli(capsys, "grade", LESSON, subs, "-o", out, "--json",
                            "--points", "weights=2, output=3, weights[I, I]=1/2")
    assert status == 1
    data = json.loads(out.read_text(encoding="utf-8"))
    ann, bob = data["students"]
    assert [a["points"] for a in ann["answers"]] == ["4/3", "3", "0"]
    assert [a["max_points"] for a in ann["answers"]] == ["2", "3", "1/2"]
    assert ann["points"] == "13/3" and ann["points_shown"] == "4.33" and ann["max_points"] == "11/2"
    assert [a["points"] for a in bob["answers"]] == ["0", "0", "1/2"]
    assert "points: mean 2.42 of 5.50" in stdout             # (13/3 + 1/2) / 2 = 29/12


def test_json_round_trip_matches_the_csv(tmp_path, capsys):
    subs = tmp_path / "class.csv"
    subs.write_text(_csv(CLASS), encoding="utf-8")
    status_csv, report_csv, _ = cli(capsys, "grade", LESSON, subs)
    status_json, report_json, _ = cli(capsys, "grade", LESSON, subs, "--json")
    assert status_csv == status_json == 1
    data = json.loads(report_json)
    rows = rows_of(report_csv)
    assert data["targets"] == ["weights[I]", "weights[love]", "output[I]"]
    assert data["carry_forward"] == "no-credit" and data["source"] == str(subs)
    assert len(data["students"]) == len(rows) == 5
    for student, row in zip(data["students"], rows):
        assert student["student"] == row["student"]
        for answer, target in zip(student["answers"], data["targets"]):
            assert answer["target"] == target
            assert answer["verdict"] == row[target]
            assert (answer["mistake_shown"] or "") == row[f"{target} mistake"]
            assert answer["message"] == row[f"{target} message"]
            assert show_points(Fraction(answer["points"])) == row[f"{target} points"]
        assert str(student["right"]) == row["right"] and student["points_shown"] == row["points"]
    report = grade(Versions(single=sa.load_example("i-love-cats")), _csv(CLASS), source=str(subs))
    assert data["summary"] == json.loads(json.dumps(summarise(report)))
    assert data == json.loads(report.to_json(str(subs)))


# --------------------------------------------------------------------- carried forward

def test_the_carried_forward_policy(tmp_path, capsys):
    # scaled[love] with 9.42 for 9.24: softmax of [2.31, 9.42, 6.93] is 0.001, 0.923, 0.077,
    # right for the student's own slip; the right weights[love] are 0.001, 0.909, 0.090
    scaled = [s / math.sqrt(3) for s in SCORES[1]]
    assert dec(WEIGHTS[1]) == "0.001, 0.909, 0.090" and dec(scaled, 2) == "2.31, 9.24, 6.93"
    slip = [2.31, 9.42, 6.93]
    own = [math.exp(s - max(slip)) for s in slip]
    assert dec([x / sum(own) for x in own]) == "0.001, 0.923, 0.077"
    subs = tmp_path / "class.csv"
    subs.write_text('student,scaled[love],weights[love]\n'
                    'ann,"2.31, 9.42, 6.93","0.001, 0.923, 0.077"\n', encoding="utf-8")
    points = {}
    for policy in ("no-credit", "credit", None):
        extra = ("--carry-forward", policy) if policy else ()
        status, stdout, _ = cli(capsys, "grade", LESSON, subs, "--json", *extra)
        assert status == 0
        answer = json.loads(stdout)["students"][0]["answers"]
        assert [a["verdict"] for a in answer] == ["wrong", "mistake"]
        assert answer[1]["mistake"] == "carried-forward"
        points[policy] = [a["points"] for a in answer]
    # scaled: 2 of 3 entries right; weights: only 0.001 right without credit, all with it
    assert points["no-credit"] == ["2/3", "1/3"] and points["credit"] == ["2/3", "1"]
    assert points[None] == points["no-credit"]                # the default: as before


@pytest.mark.parametrize("argv, words", [
    (("--points", "weights=two"), "write a number of points"),
    (("--points", ""), "--points is empty"),
    (("--points", "weights"), "write question=points"),
    (("--points", "weights=1, weights=2"), "given twice"),
    (("--carry-forward", "maybe"), "invalid choice"),
])
def test_bad_options_are_one_line_exit_2(tmp_path, capsys, argv, words):
    subs = tmp_path / "class.csv"
    subs.write_text(_csv(CLASS[:2]), encoding="utf-8")
    out = tmp_path / "report.csv"
    status, stdout, stderr = cli(capsys, "grade", LESSON, subs, "-o", out, *argv)
    assert status == 2 and words in stderr and stderr.count("\n") == 1
    assert not out.exists() and stdout == ""


def test_parse_points():
    assert parse_points("weights=2, output=1.5, weights[I, I]=1/2") == {
        "weights": 2, "output": Fraction(3, 2), "weights[I, I]": Fraction(1, 2)}
    with pytest.raises(GradeError, match="over 1,000,000"):
        parse_points("weights=1000001")


# --------------------------------------------------------------------- a teacher's run

def test_a_teacher_run_worksheet_class_grade_summary(tmp_path, capsys):
    """worksheet --versions 3 → a class CSV (by code when the folder records codes, else by
    id) with right answers, unscaled ones and another version's → grade -o, and its summary.
    The key is computed here in float64 from each version's problem file."""
    import tomllib

    folder = tmp_path / "ws"
    assert main(["worksheet", "--versions", "3", "--seed", "12", "-o", str(folder)]) == 0
    capsys.readouterr()
    meta = folder / "worksheet.json"
    codes = {v["id"]: v["code"] for v in json.loads(meta.read_text())["versions"]} \
        if meta.exists() else {}
    keys = {}
    for vid in ("A", "B", "C"):
        data = tomllib.loads((folder / f"version-{vid}.toml").read_text(encoding="utf-8"))
        assert "mask" not in data and "scale" not in data
        right = reference(data["X"], data["W_q"], data["W_k"], data["W_v"])
        wrong = reference(data["X"], data["W_q"], data["W_k"], data["W_v"], scaled=False)
        keys[vid] = (right[1][0], wrong[1][0])
    assert len({dec(k[0]) for k in keys.values()}) == 3          # the versions differ
    rows = [["student", "version", "weights[0]"]]
    plan = {"A": ["right", "right", "unscaled", "B"], "B": ["right", "C"], "C": ["unscaled"]}
    for vid, answers in plan.items():
        for k, kind in enumerate(answers):
            value = keys[vid][1] if kind == "unscaled" else keys[kind][0] if kind in keys else keys[vid][0]
            rows.append([f"{vid}{k}", codes.get(vid, vid).lower(), dec(value, 2)])
    subs = tmp_path / "class.csv"
    subs.write_text(_csv(rows), encoding="utf-8")
    out = tmp_path / "report.csv"
    status, stdout, stderr = cli(capsys, "grade", folder, subs, "-o", out)
    assert status == 0, stderr
    report = rows_of(out.read_text(encoding="utf-8"))
    shown = [(r["weights[0]"], r["weights[0] mistake"]) for r in report]
    assert shown == [("rounded", ""), ("rounded", ""), ("mistake", "unscaled"),
                     ("mistake", "other-version: B"), ("rounded", ""), ("mistake", "other-version: C"),
                     ("mistake", "unscaled")]
    assert "7 students; versions A ×4, B ×2, C ×1" in stdout
    line = next(x for x in stdout.splitlines() if x.startswith("weights[0]"))
    assert line.split()[1:5] == ["3", "4", "0", "0"]
    assert "unscaled ×2" in line and "other-version: B ×1" in line
