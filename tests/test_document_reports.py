"""Float error reports (``floatref``) and graded classes (``grade``) as documents: text,
LaTeX, JSON and HTML from one tree (issue 10, scope 2).

The values are cross-checked independently: the worst float entry's exact value and
error in ulps against a separate mpmath computation, the class's counts and points
against answers worked by hand for the lesson (scaled[love, love] = 16/√3 ≈ 9.24,
5.33 is 16/3, the scores divided by d_k).  The LaTeX compiles with pdflatex (no
overfull line over 5 pt) and reads back; the HTML opens offline in headless Chromium.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest

from symattn.cli import main
from symattn.document.blocks import Report, Table
from symattn.document.formats import print_document
from symattn.document.printers.json import document_json
from symattn.document.support.texutil import tex_escape

from browser import shared_browser
from test_pdf import need_tex

np = pytest.importorskip("numpy")

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "symattn" / "examples" / "i-love-cats.toml"


# -- helpers -------------------------------------------------------------------------------

def _split(title: str) -> tuple[str | None, str]:
    m = re.match(r"^(\d+[a-z]?)\. (.+)$", title)
    return (m.group(1), m.group(2)) if m else (None, title)


def json_outline(doc) -> list[tuple[str | None, str]]:
    return [(s["number"], s["title"]) for s in json.loads(json.dumps(document_json(doc)))["sections"]]


def latex_outline(tex: str) -> list[tuple[str | None, str]]:
    return [_split(t) for t in re.findall(r"^\\subsection\*\{(.*)\}$", tex, flags=re.M)]


def html_outline(page: str) -> list[tuple[str | None, str]]:
    return [_split(html.unescape(re.sub(r"<[^>]+>", "", raw)).strip())
            for raw in re.findall(r"<h2[^>]*>(.*?)</h2>", page, flags=re.S)]


def text_outline(text: str) -> list[tuple[str | None, str]]:
    return [_split(line) for line in text.splitlines()[2:] if line and not line.startswith(" ")]


def compile_and_read(tex: str, folder: Path) -> tuple[str, list[float]]:
    """pdflatex (twice: a longtable's widths settle on the second pass); the PDF's text and
    every overfull box's width in pt."""
    need_tex()
    (folder / "doc.tex").write_text(tex, encoding="utf-8")
    for _ in range(2):
        done = subprocess.run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error",
                               "doc.tex"], cwd=folder, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (folder / "doc.log").read_text(errors="replace")[-2000:]
    log = (folder / "doc.log").read_text(encoding="utf-8", errors="replace")
    text = subprocess.run(["pdftotext", "-layout", str(folder / "doc.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    return text, [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]


@pytest.fixture(scope="module")
def browser():
    yield shared_browser()


# -- floatref ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """float32 SDPA computed naively in numpy (2 heads, 3 queries, 3 keys, E = 4): its errors
    are a few ulps, so the report has a histogram, two heads and worst entries."""
    tmp = tmp_path_factory.mktemp("floatref")
    rng = np.random.default_rng(8)
    Q, K, V = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
    for name, a in zip("QKV", (Q, K, V)):
        np.save(tmp / f"{name}.npy", a)
    S = (Q @ np.swapaxes(K, 1, 2)) / np.float32(2)
    A = np.exp(S - S.max(-1, keepdims=True))
    A /= A.sum(-1, keepdims=True)
    np.save(tmp / "out.npy", A @ V)
    from symattn import floatref
    report = floatref.ulp_report(A @ V, Q, K, V)
    return tmp, (Q, K, V, A @ V), report


def _floatref(tmp: Path, *extra: str) -> list[str]:
    return ["floatref", *(str(tmp / f"{n}.npy") for n in "QKV"), "--candidate", str(tmp / "out.npy"), *extra]


def _mp_entry(Q, K, V, out, b, i, c):
    """The exact output entry and the candidate's error in ulps (float32), in mpmath at 50 digits."""
    with mpmath.workdps(50):
        s = [mpmath.fsum(mpmath.mpf(float(Q[b, i, t])) * mpmath.mpf(float(K[b, j, t])) for t in range(4)) / 2
             for j in range(3)]
        e = [mpmath.exp(x - max(s)) for x in s]
        x = mpmath.fsum(e[j] * mpmath.mpf(float(V[b, j, c])) for j in range(3)) / mpmath.fsum(e)
        ex = int(mpmath.floor(mpmath.log(abs(x), 2)))
        return x, (mpmath.mpf(float(out[b, i, c])) - x) / mpmath.mpf(2) ** (ex - 23)


def test_floatref_document_values_are_the_reports_and_agree_with_mpmath(kernel):
    from symattn.document.build.floatref import build_floatref_document

    _, (Q, K, V, out), report = kernel
    doc = build_floatref_document(report, max_ulp=1.0)
    tables = {s.key: next(b for b in s.children if isinstance(b, Table)) for s in doc.sections
              if any(isinstance(b, Table) for b in s.children)}
    assert [s.key for s in doc.sections] == ["summary", "histogram", "heads", "worst", "gate"]
    assert sum(int(n) for _, n in tables["histogram"].rows) == report.entries == out.size
    assert len(tables["heads"].rows) == 2 and len(tables["worst"].rows) == 5
    index, shown, exact, ulps, _ = tables["worst"].rows[0]
    b, i, c = json.loads(index)
    x, err = _mp_entry(Q, K, V, out, b, i, c)
    assert abs(Fraction(exact) - Fraction(str(mpmath.nstr(x, 30)))) < Fraction(1, 10 ** 9)   # 9 digits shown
    assert abs(float(ulps) - float(err)) < 0.01 * abs(float(err)) + 0.01
    assert float(shown) == pytest.approx(float(out[b, i, c]), rel=1e-8)
    assert abs(float(ulps)) == pytest.approx(report.max_ulps, rel=5e-3)
    gate = doc.sections[-1].children[0].parts[0]
    assert gate.startswith("FAIL") == report.exceeds(1.0) and report.max_ulps > 1.0 + report.resolution


@pytest.mark.parametrize("fmt", ["text", "json", "latex", "html"])
def test_floatref_takes_format_and_o_and_keeps_the_gate(kernel, fmt, tmp_path, capsys):
    tmp, _, report = kernel
    target = tmp_path / f"report.{fmt}"
    low, high = f"{report.max_ulps / 2:g}", f"{report.max_ulps + 1:g}"
    assert main(_floatref(tmp, "--format", fmt, "--max-ulp", low, "-o", str(target))) == 1
    assert capsys.readouterr().out == ""
    written = target.read_text(encoding="utf-8")
    assert main(_floatref(tmp, "--format", fmt, "--max-ulp", low)) == 1
    assert capsys.readouterr().out == written
    assert main(_floatref(tmp, "--format", fmt, "--max-ulp", high)) == 0
    passed = capsys.readouterr().out
    if fmt == "json":       # the old contract, exactly: ULPReport.to_json, no verdict text
        assert json.loads(written) == json.loads(json.dumps(report.to_json())) == json.loads(passed)
        assert main(_floatref(tmp, "--json", "--max-ulp", low)) == 1
        assert capsys.readouterr().out == written
        return
    if fmt == "latex":
        assert r"FAIL: max \textbar{}error\textbar{}" in written and "PASS: no entry" in passed
    else:
        assert "FAIL: max |error|" in written and "PASS: no entry" in passed
    assert report.worst[0].exact in written
    if fmt == "text":
        assert written.splitlines()[0].startswith("float32 output vs the exact values: 24 entries")
        assert "worst entries (certified)" in written and str(report) in written
    if fmt == "html":
        assert written.startswith("<!doctype html>") and "<script" not in written
    if fmt == "latex":
        assert written.startswith(r"\documentclass") and r"\begin{longtable}" in written


def test_floatref_formats_list_the_same_sections(kernel):
    from symattn.document.build.floatref import build_floatref_document

    doc = build_floatref_document(kernel[2], max_ulp=3)
    outline = json_outline(doc)
    assert [t for _, t in outline] == ["Summary", "Errors in ulps", "Per head", "Worst entries", "Verdict"]
    assert latex_outline(print_document(doc, "latex")) == [(n, tex_escape(t)) for n, t in outline]
    assert html_outline(print_document(doc, "html")) == outline
    assert isinstance(doc, Report)     # the terminal keeps its listing: no heading lines
    assert not any(line in {t for _, t in outline} for line in print_document(doc, "text").splitlines())


def test_floatref_write_reference_in_every_format(kernel, tmp_path, capsys):
    tmp = kernel[0]
    base = ["floatref", *(str(tmp / f"{n}.npy") for n in "QKV"), "--write-reference", str(tmp_path / "r.npz")]
    assert main([*base, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["output_shape"] == [2, 3, 4] and data["entries"] == 2 * 3 * 4 + 2 * 3 * 3
    assert main([*base, "--format", "html"]) == 0
    assert "correctly rounded" in capsys.readouterr().out
    for argv in ([*base, "--format", "html", "--fragment"], [*base, "--json", "--format", "text"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("symattn: error:")


def test_floatref_latex_compiles_and_reads_back(kernel, tmp_path):
    from symattn.document.build.floatref import build_floatref_document

    report = kernel[2]
    text, overfull = compile_and_read(print_document(build_floatref_document(report, max_ulp=1), "latex"), tmp_path)
    assert [w for w in overfull if w > 5] == []
    assert report.worst[0].exact in text and "FAIL: max |error|" in text and "--max-ulp" in text
    assert "Worst entries" in text and "[0, 0.5]" in text


def test_floatref_html_renders_offline_with_the_worst_value_visible(browser, kernel, tmp_path):
    from symattn.document.build.floatref import build_floatref_document

    report = kernel[2]
    doc = build_floatref_document(report, max_ulp=1)
    path = tmp_path / "floatref.html"
    path.write_text(print_document(doc, "html"), encoding="utf-8")
    shown = browser.open(path)
    try:
        shown.assert_clean()
        page = shown.page
        assert [_split(t) for t in page.locator("h2").all_inner_texts()] == json_outline(doc)
        assert page.locator("th:not([scope])").count() == 0
        worst = page.locator("#sec-worst table.results tbody tr").first
        assert worst.is_visible() and report.worst[0].exact in worst.inner_text()
        box = page.locator(f"#sec-worst td:has-text('{report.worst[0].exact}')").first.bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0
        assert page.locator("#sec-histogram tbody tr").count() == 10
        page.screenshot(path=str(tmp_path / "floatref.png"), full_page=True)
        assert (tmp_path / "floatref.png").stat().st_size > 10_000
    finally:
        shown.close()


# -- grade ---------------------------------------------------------------------------------

#: The lesson's answers, worked by hand: weights[I] ≈ 0.136, 0.432, 0.432; output[I] ≈ 1.86,
#: 6.32, 1.70; scaled[love, love] = 16/√3 ≈ 9.24 (5.33 = 16/3 is the scores divided by d_k).
SUBMISSIONS = """student,weights[I],output[I],scaled[love, love]
ana,"0.136, 0.432, 0.432","1.86, 6.32, 1.70",2.31
ben,"0.14, 0.43, 0.43","1.86, 6.32, 1.71",5.33
cy,x,"1.86, 6.32, 1.70",9.24
<b onmouseover=alert(1)>dee</b>,"0.136, 0.432, 0.432","1.86, 6.32, 1.70",9.24
"""


@pytest.fixture()
def subs(tmp_path):
    path = tmp_path / "class.csv"
    path.write_text(SUBMISSIONS, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from symattn.check.grading.grade import Versions, grade
    from symattn.document.build.grade import build_grade_document

    report = grade(Versions.from_path(str(LESSON)), SUBMISSIONS.encode(), source="class.csv")
    return report, build_grade_document(report, "class.csv")


def test_grade_document_counts_are_the_hand_worked_ones(graded):
    report, doc = graded
    assert doc.title == "Grades: class.csv"
    assert [s.key for s in doc.sections] == ["class", "questions", "students"]
    questions = doc.sections[1].children[0]
    by_target = {row[0]: row for row in questions.rows}
    # question, right, mistake, wrong, unreadable, points, most common mistakes
    assert by_target["weights[I]"][1:5] == ("3", "0", "0", "1")          # ben's 2-place rounding is right
    # ben's output, one unit off, is what his weights rounded to 2 places give: early rounding
    assert by_target["output[I]"][1:5] == ("3", "1", "0", "0")
    assert by_target["scaled[love, love]"][1:5] == ("2", "1", "1", "0")
    assert by_target["scaled[love, love]"][6] == "scaled-by-d_k ×1"
    students = {row[0]: row for row in doc.sections[2].children[0].rows}
    assert set(students) == {"ana", "ben", "cy", "<b onmouseover=alert(1)>dee</b>"}
    assert students["ana"][1:4] == ("2", "2 of 3", "2 of 3") and students["ana"][4] == "scaled[love, love]: wrong"
    assert "scaled[love, love]: mistake (scaled-by-d_k)" in students["ben"][4]
    assert "weights[I]: invalid" in students["cy"][4]
    # points by hand, one per column: ben's last-digit slip earns its 2 right entries of 3
    assert {k: row[3] for k, row in students.items()} == {
        "ana": "2 of 3", "ben": "1.67 of 3", "cy": "2 of 3", "<b onmouseover=alert(1)>dee</b>": "3 of 3"}
    assert students["<b onmouseover=alert(1)>dee</b>"][4] == "—"
    assert sum(row.points for row in report.rows) == Fraction(2) + Fraction(5, 3) + 2 + 3


def test_grade_formats_list_the_same_sections(graded):
    doc = graded[1]
    outline = json_outline(doc)
    assert outline == [("1", "The class"), ("2", "Questions"), ("3", "Students")]
    assert text_outline(print_document(doc, "text")) == outline
    assert latex_outline(print_document(doc, "latex")) == outline
    assert html_outline(print_document(doc, "html")) == outline


def test_grade_format_and_o(subs, tmp_path, capsys):
    from symattn.check.grading.class_summary import summary_text
    from symattn.check.grading.grade import Versions, grade

    report = grade(Versions.from_path(str(LESSON)), subs.read_bytes(), source=str(subs))
    argv = ["grade", str(LESSON), str(subs)]
    # the default stays the CSV report, and --format csv names it
    assert main(argv) == 1                                      # an unreadable cell: exit 1, as before
    csv = capsys.readouterr().out
    assert csv == report.to_csv()
    assert main([*argv, "--format", "csv"]) == 1 and capsys.readouterr().out == csv
    assert main([*argv, "--json"]) == 1
    as_json = capsys.readouterr().out
    assert main([*argv, "--format", "json"]) == 1 and capsys.readouterr().out == as_json
    # a document on stdout has the summary in it; with -o FILE the summary goes to stdout
    assert main([*argv, "--format", "text"]) == 1
    text = capsys.readouterr().out
    assert text.startswith("Grades: class.csv\n") and "Points: mean 2.17 of 3" in text
    page = tmp_path / "class.html"
    assert main([*argv, "--format", "html", "-o", str(page)]) == 1
    assert capsys.readouterr().out == summary_text(report, str(subs))
    written = page.read_text(encoding="utf-8")
    assert written.startswith("<!doctype html>") and "<b onmouseover" not in written
    assert "&lt;b onmouseover=alert(1)&gt;dee&lt;/b&gt;" in written
    # -o writes the chosen format whatever the file is called: -o report.csv stays CSV
    assert main([*argv, "-o", str(tmp_path / "report.csv")]) == 1
    capsys.readouterr()
    assert (tmp_path / "report.csv").read_text(encoding="utf-8") == csv
    assert main([*argv, "--format", "latex", "--fragment"]) == 1
    assert r"\documentclass" not in capsys.readouterr().out
    for bad in (["--format", "csv", "--fragment"], ["--json", "--format", "html"], ["--format", "pdf"]):
        assert main([*argv, *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("symattn: error:")


def test_grade_latex_compiles_and_a_long_class_breaks_across_pages(tmp_path):
    from symattn.check.grading.grade import Versions, grade
    from symattn.document.build.grade import build_grade_document

    rows = [SUBMISSIONS.splitlines()[0]] + [
        f"student-{k:03d},\"0.136, 0.432, 0.432\",\"1.86, 6.32, 1.{70 + k % 3}\",{'9.24' if k % 2 else '5.33'}"
        for k in range(90)]
    report = grade(Versions.from_path(str(LESSON)), "\n".join(rows).encode(), source="big.csv")
    text, overfull = compile_and_read(print_document(build_grade_document(report, "big.csv"), "latex"), tmp_path)
    assert [w for w in overfull if w > 5] == []
    assert "student-000" in text and "student-089" in text and "scaled-by-d_k ×45" in text
    pages = subprocess.run(["pdfinfo", str(tmp_path / "doc.pdf")], capture_output=True, text=True).stdout
    assert int(re.search(r"Pages:\s+(\d+)", pages).group(1)) >= 2


def test_grade_html_renders_offline(browser, graded, tmp_path):
    doc = graded[1]
    path = tmp_path / "grade.html"
    path.write_text(print_document(doc, "html"), encoding="utf-8")
    shown = browser.open(path)
    try:
        shown.assert_clean()
        page = shown.page
        assert [_split(t) for t in page.locator("h2").all_inner_texts()] == json_outline(doc)
        assert page.locator("th:not([scope])").count() == 0
        students = page.locator("#sec-students table.results tbody tr")
        assert students.count() == 4
        assert "<b onmouseover=alert(1)>dee</b>" in page.inner_text("#sec-students")    # shown as text
        assert page.locator("#sec-students b").count() == 0
        assert "scaled-by-d_k ×1" in page.inner_text("#sec-questions")
        page.screenshot(path=str(tmp_path / "grade.png"), full_page=True)
    finally:
        shown.close()
