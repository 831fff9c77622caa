"""One grammar of flags (issue 25): -o/--output for every output, floatref's --candidate
(--out a deprecated alias), --places and --rows in every format of explain, --example
wherever a problem is read, and --pdf/--paper wherever LaTeX is written.

The values asserted are computed here with mpmath, independently of symattn.  The PDFs are
compiled by real TeX and read back with pdftotext (page sizes with pdfinfo).
"""

import json
import subprocess
from pathlib import Path

import mpmath
import pytest
from clirun import cli
from test_pdf import need_tex, pdf_text

np = pytest.importorskip("numpy")

mpmath.mp.dps = 40
SCORES_I = (2, 4, 4)         # row 'I' of the lesson's scores, by hand: q=[1,0,2], keys [0,1,1],[4,4,0],[2,3,1]


def _weights_row(scores):
    z = [mpmath.mpf(s) / mpmath.sqrt(3) for s in scores]
    e = [mpmath.e ** x for x in z]
    return [x / sum(e) for x in e]


def fixed(x, p: int) -> str:
    """x rounded to p decimal places, as text (no float in between)."""
    scaled = int(mpmath.nint(x * mpmath.mpf(10) ** p))
    sign = "-" if scaled < 0 else ""
    digits = str(abs(scaled)).rjust(p + 1, "0")
    return f"{sign}{digits[:-p]}.{digits[-p:]}" if p else f"{sign}{digits}"


def page_size(path: Path) -> str:
    done = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True)
    return next(line for line in done.stdout.splitlines() if line.startswith("Page size"))


# --------------------------------------------------------------- explain: --places, --rows

def test_places_in_text_rounds_to_places():
    w = _weights_row((4, 12, 10))      # the text view works the last row, 'cats', by default
    result = cli("explain", "--places", "2")
    assert result.returncode == 0, result.stderr
    expected = f"weights = exp / row_sum ≈ [{fixed(w[0], 2)}, {fixed(w[1], 2)}, {fixed(w[2], 2)}]"
    assert expected in result.stdout          # 0.14, 0.43, 0.43 (3 digits would say 0.136)
    assert "0.136" not in result.stdout


def test_rows_in_text_works_every_row_asked():
    result = cli("explain", "--rows", "I,cats")
    assert result.returncode == 0, result.stderr
    assert "The dot products of row 'I'" in result.stdout
    assert "The dot products of row 'cats'" in result.stdout
    assert "The dot products of row 'love'" not in result.stdout
    assert result.stdout.count("row maximum:") == 2
    assert cli("explain", "--rows", "dogs").returncode == 2


def test_places_and_rows_in_json():
    w = _weights_row(SCORES_I)
    result = cli("explain", "--format", "json", "--places", "4", "--rows", "cats,0")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["places"] == 4 and "digits" not in data
    assert data["worked_rows"] == ["cats", "I"]
    assert data["steps"]["weights"]["decimal"][0] == [fixed(x, 4) for x in w]
    plain = json.loads(cli("explain", "--format", "json").stdout)
    assert plain["digits"] == 3 and "places" not in plain and "worked_rows" not in plain


# --------------------------------------------------------------- floatref: --candidate

@pytest.fixture
def arrays(tmp_path):
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((1, 3, 4)).astype(np.float32) for _ in range(3))
    for name, a in zip("QKV", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", a)
    S = (Q @ np.swapaxes(K, 1, 2)) / np.float32(2)
    A = np.exp(S - S.max(-1, keepdims=True))
    np.save(tmp_path / "out.npy", (A / A.sum(-1, keepdims=True)) @ V)
    return tmp_path


def _qkv(tmp):
    return [str(tmp / f"{n}.npy") for n in "QKV"]


def test_candidate_is_the_kernels_result_and_out_is_a_deprecated_alias(arrays):
    new = cli("floatref", *_qkv(arrays), "--candidate", str(arrays / "out.npy"), "--json")
    old = cli("floatref", *_qkv(arrays), "--out", str(arrays / "out.npy"), "--json")
    assert new.returncode == old.returncode == 0
    assert new.stdout == old.stdout and json.loads(new.stdout)["entries"] == 12
    assert new.stderr == ""
    assert old.stderr.count("\n") == 1 and "--out is deprecated" in old.stderr and "--candidate" in old.stderr
    refused = cli("floatref", *_qkv(arrays))
    assert refused.returncode == 2 and "--candidate OUT.npy" in refused.stderr


def test_floatref_report_goes_to_output(arrays):
    result = cli("floatref", *_qkv(arrays), "--candidate", str(arrays / "out.npy"), "--json",
                 "-o", str(arrays / "report.json"))
    assert result.returncode == 0 and result.stdout == ""
    assert json.loads((arrays / "report.json").read_text())["entries"] == 12


# --------------------------------------------------------------- worksheet, export: -o/--output

def test_worksheet_and_export_write_to_output(tmp_path):
    result = cli("worksheet", "--output", "sheets", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert (tmp_path / "sheets" / "version-A-sheet.tex").exists()
    old = cli("worksheet", "--out", "old", cwd=tmp_path)
    assert old.returncode == 0 and "--out is deprecated" in old.stderr
    assert (tmp_path / "old" / "version-A-sheet.tex").read_text() == \
        (tmp_path / "sheets" / "version-A-sheet.tex").read_text()
    missing = cli("worksheet", cwd=tmp_path)
    assert missing.returncode == 2 and "-o DIR" in missing.stderr and missing.stderr.count("\n") == 1
    assert cli("export", "--example", "i-love-cats", "--to", "moodle", "--output", "q.xml",
               cwd=tmp_path).returncode == 0
    assert (tmp_path / "q.xml").read_text().startswith("<?xml")
    old = cli("export", "--example", "i-love-cats", "--to", "moodle", "--out", "q2.xml", cwd=tmp_path)
    assert old.returncode == 0 and "deprecated" in old.stderr
    assert (tmp_path / "q2.xml").read_bytes() == (tmp_path / "q.xml").read_bytes()


# --------------------------------------------------------------- grade: --example

def test_grade_reads_an_example(tmp_path):
    w = _weights_row(SCORES_I)
    answers = tmp_path / "a.csv"
    answers.write_text("student,weights[I]\n"
                       f"ann,\"{fixed(w[0], 3)}, {fixed(w[1], 3)}, {fixed(w[2], 3)}\"\n"
                       "bob,\"0.5, 0.25, 0.25\"\n")
    by_example = cli("grade", "--example", "i-love-cats", str(answers), "--format", "json")
    lesson = Path(__file__).resolve().parent.parent / "symattn" / "examples" / "i-love-cats.toml"
    by_file = cli("grade", str(lesson), str(answers), "--format", "json")
    assert by_example.returncode == by_file.returncode == 0, by_example.stderr
    a, b = json.loads(by_example.stdout), json.loads(by_file.stdout)
    assert [s["right"] for s in a["students"]] == [s["right"] for s in b["students"]] == [1, 0]
    both = cli("grade", "--example", "i-love-cats", str(lesson), str(answers))
    assert both.returncode == 2 and both.stderr.count("\n") == 1
    alone = cli("grade", "--example", "i-love-cats")
    assert alone.returncode == 2 and "submissions" in alone.stderr


# --------------------------------------------------------------- --pdf / --paper refusals

@pytest.mark.parametrize("argv, words", [
    (["check", "--example", "i-love-cats", "--pdf"], "needs -o FILE.pdf"),
    (["check", "--example", "i-love-cats", "--pdf", "-o", "c.tex"], "name it -o c.pdf"),
    (["facts", "--json", "--pdf", "-o", "f.pdf"], "leave out --format json"),
    (["heads", "--latex", "--pdf", "-o", "h.pdf"], "leave out --fragment"),
    (["heads", "--paper", "a4"], "--paper"),
    (["explain", "--format", "html", "--paper", "a4"], "--paper"),
    (["worksheet", "-o", "w", "--format", "html", "--paper", "a4"], "--paper"),
])
def test_pdf_and_paper_refusals_are_one_line(tmp_path, argv, words):
    result = cli(*argv, cwd=tmp_path)
    assert result.returncode == 2 and words in result.stderr
    assert result.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []


def test_paper_a4_changes_only_the_class_option():
    letter = cli("check", "--example", "i-love-cats", "--format", "latex").stdout
    a4 = cli("check", "--example", "i-love-cats", "--format", "latex", "--paper", "a4").stdout
    assert letter == cli("check", "--example", "i-love-cats", "--format", "latex", "--paper", "letter").stdout
    assert letter.startswith("\\documentclass[11pt]{article}")
    assert a4 == letter.replace("\\documentclass[11pt]{article}", "\\documentclass[11pt,a4paper]{article}", 1)


# --------------------------------------------------------------- --pdf compiled by real TeX

def test_check_pdf_on_a4(tmp_path):
    need_tex()
    w = _weights_row(SCORES_I)
    result = cli("check", "--example", "i-love-cats", "--pdf", "--paper", "a4", "-o", "check.pdf", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = pdf_text(tmp_path / "check.pdf")
    assert "Lesson 4.9" in text and fixed(w[0], 3) in text
    assert "(A4)" in page_size(tmp_path / "check.pdf")
    assert list(tmp_path.iterdir()) == [tmp_path / "check.pdf"]


def test_grade_pdf_with_its_longtables(tmp_path):
    need_tex()
    rows = ["student,weights[I]"] + [f"s{k:02d},\"0.136, 0.432, 0.432\"" for k in range(70)] + ["zed,\"0.5, 0.25, 0.25\""]
    (tmp_path / "a.csv").write_text("\n".join(rows) + "\n")
    result = cli("grade", "--example", "i-love-cats", "a.csv", "--pdf", "-o", "grades.pdf", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Class summary of a.csv: 71 students")
    text = pdf_text(tmp_path / "grades.pdf")
    assert "s00" in text and "s69" in text and "zed" in text
    assert "(letter)" in page_size(tmp_path / "grades.pdf")


def test_facts_pdf(tmp_path):
    need_tex()
    result = cli("facts", "--fact", "rows-sum-to-one", "--pdf", "-o", "facts.pdf", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = pdf_text(tmp_path / "facts.pdf")
    assert "Facts about attention" in text and "rows-sum-to-one" in text


def test_heads_pdf(tmp_path):
    need_tex()
    w = _weights_row(SCORES_I)           # the demo's head 0 is the lesson's attention
    result = cli("heads", "--pdf", "--paper", "a4", "-o", "heads.pdf", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = pdf_text(tmp_path / "heads.pdf")
    assert "two heads" in text and fixed(w[0], 3) in text and fixed(w[1], 3) in text
    assert "(A4)" in page_size(tmp_path / "heads.pdf")


def test_floatref_pdf(arrays):
    need_tex()
    result = cli("floatref", *_qkv(arrays), "--candidate", str(arrays / "out.npy"), "--pdf",
                 "-o", str(arrays / "floatref.pdf"))
    assert result.returncode == 0, result.stderr
    data = json.loads(cli("floatref", *_qkv(arrays), "--candidate", str(arrays / "out.npy"), "--json").stdout)
    text = pdf_text(arrays / "floatref.pdf")
    assert "float32" in text and str(data["entries"]) in text


def test_explain_and_worksheet_on_a4(tmp_path):
    need_tex()
    assert cli("explain", "--pdf", "--paper", "a4", "-o", "lesson.pdf", cwd=tmp_path).returncode == 0
    assert "(A4)" in page_size(tmp_path / "lesson.pdf")
    result = cli("worksheet", "-o", "ws", "--pdf", "--paper", "a4", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "(A4)" in page_size(tmp_path / "ws" / "version-A-sheet.pdf")
    assert "a4paper" in (tmp_path / "ws" / "version-A-key.tex").read_text()
