"""Worksheets as a teacher hands them out: no seed on the sheet, version codes, points, keys with
≈ and exact short values, the common-wrong-answers table (= check's mistake values), odd-page
starts in the combined PDFs, progress on stderr, versions whose mistakes are told apart."""

import json
import re
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

import symattn as sa
from symattn.numbers.certify import Rounding
from symattn.check.checker import Checker
from symattn.check.grading.grade import Versions, grade
from symattn.cli import main
from symattn.classroom.worksheets.sheets import (
    QUESTIONS, WorksheetOptions, find_version, key_body, questions_of, seeded_versions, sheet_body,
    single_version, version_code,
)
from symattn.classroom.worksheets.wrong_answers import PRECISION, SEPARATED, answer_texts, separates, wrong_answers
from symattn.classroom.worksheets.questions import parse_points
from symattn.classroom.worksheets.versions import RandomSpec, WorksheetError, spec_from_problem
from symattn.document.support.texutil import tex_escape
from test_pdf import need_tex, pdf_text

SEED = "987654"       # digits that appear nowhere else on a sheet


def cli(*argv: str, capsys=None) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr() if capsys else ("", "")
    return code, out, err


def pages(path: Path) -> list[str]:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    count = int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))
    return [subprocess.run(["pdftotext", "-layout", "-f", str(k), "-l", str(k), str(path), "-"],
                           capture_output=True, text=True, check=True).stdout for k in range(1, count + 1)]


def problem(text: str, tmp_path: Path, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- the sheet keeps the key secret ----------------------------------------------------------

@pytest.fixture(scope="module")
def class_folder(tmp_path_factory):
    need_tex()
    folder = tmp_path_factory.mktemp("class") / "ws"
    assert main(["worksheet", "--versions", "3", "--seed", SEED, "-o", str(folder), "--pdf",
                 "--points", "1,3,2", "--questions", "scores,weights,output"]) == 0
    return folder


def test_sheets_print_no_seed_and_no_file_name(class_folder):
    meta = json.loads((class_folder / "worksheet.json").read_text())
    for text in [pdf_text(class_folder / "all-sheets.pdf")] + [
            pdf_text(class_folder / f"version-{v}-sheet.pdf") for v in "ABC"]:
        assert SEED not in text and "seed" not in text.lower()
        assert ".toml" not in text and "version-" not in text
        assert "Version A" not in text and "Version B" not in text
    sheets = pdf_text(class_folder / "all-sheets.pdf")
    for entry in meta["versions"]:
        assert f"Version code {entry['code']}" in sheets
        key = pdf_text(class_folder / f"version-{entry['id']}-key.pdf")     # the teacher's side
        assert f"Version code {entry['code']}" in key and SEED in key and entry["problem"] in key
    # the problem files (teacher's folder) still say where they came from
    assert f"of seed {SEED}" in (class_folder / "version-B.toml").read_text()


def test_points_on_the_sheet_and_in_the_metadata(class_folder):
    sheet = pdf_text(class_folder / "version-A-sheet.pdf")
    assert "[3 points]" in sheet and "[1 point]" in sheet and "Total: 6 points" in sheet
    meta = json.loads((class_folder / "worksheet.json").read_text())
    first = meta["versions"][0]["questions"]
    assert [q["points"] for q in first] == [1, 3, 2] and [q["number"] for q in first] == [1, 2, 3]
    assert first[1]["target"] == "weights" and first[1]["shape"] == [3, 3]
    assert first[1]["entries"][0][1] == "weights[I, love]"
    assert first[2]["entries"][2][0] == "output[cats, 0]"
    assert meta["rounding"] == {"digits": 3}


def test_each_version_starts_on_an_odd_page(tmp_path):
    need_tex()
    folder = tmp_path / "ws"          # two questions: every key has an odd number of pages
    assert main(["worksheet", "--versions", "3", "--seed", SEED, "-o", str(folder), "--pdf",
                 "--questions", "scores,weights"]) == 0
    for combined, kind in (("all-sheets.pdf", "sheet"), ("all-keys.pdf", "key")):
        texts = pages(folder / combined)
        starts = [k + 1 for k, t in enumerate(texts) if "Version code" in t]
        assert len(starts) == 3 and all(p % 2 == 1 for p in starts), starts
        lengths = [len(pages(folder / f"version-{v}-{kind}.pdf")) for v in "ABC"]
        # the blank pages are there exactly where a version has an odd number of pages
        assert len(texts) == sum(n + n % 2 for n in lengths[:-1]) + lengths[-1]
    key_lengths = [len(pages(folder / f"version-{v}-key.pdf")) for v in "ABC"]
    assert any(n % 2 for n in key_lengths[:-1])     # so the test above had a blank page to insert


# -- version codes ---------------------------------------------------------------------------

def test_version_code_finds_the_version(tmp_path, capsys):
    folder = tmp_path / "ws"
    assert cli("worksheet", "--versions", "3", "--seed", "5", "-o", str(folder), capsys=capsys)[0] == 0
    meta = json.loads((folder / "worksheet.json").read_text())
    codes = {v["id"]: v["code"] for v in meta["versions"]}
    assert len(set(codes.values())) == 3
    for vid, code in codes.items():
        assert len(code) == 7 and code[3] == "-"
        assert find_version(folder, code) == folder / f"version-{vid}.toml"
        assert find_version(folder, code.lower().replace("-", "")) == folder / f"version-{vid}.toml"
        assert find_version(folder, vid) == folder / f"version-{vid}.toml"
        toml = (folder / f"version-{vid}.toml").read_text()
        assert version_code(vid, toml) == code                    # from the problem itself
    assert find_version(folder, "ZZZ-ZZZ") is None
    # grade reads the code column: a right answer in version B, found by its code
    trace = sa.attend(sa.Problem.from_toml(folder / "version-B.toml"))
    right = ", ".join(trace.weights.decimal(0, j, 3).text for j in range(3))
    csv = f'student,version,weights[I]\nann,{codes["B"].lower()},"{right}"\nbob,B,"{right}"\n'
    report = grade(Versions.from_path(folder), csv)
    assert [r.version for r in report.rows] == [codes["B"].lower(), "B"]
    assert all(v.right for r in report.rows for v in r.verdicts) and report.rows[0].verdicts, report.to_csv()


def test_same_seed_same_bytes_with_points_and_html(tmp_path, capsys):
    for name in ("a", "b"):
        assert cli("worksheet", "--versions", "2", "--seed", "3", "--points", "weights=3,output=2",
                   "--format", "html", "-o", str(tmp_path / name), capsys=capsys)[0] == 0
    a = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    b = {p.name: p.read_bytes() for p in (tmp_path / "b").iterdir()}
    assert a == b and "version-A-sheet.html" in a and "version-B-key.html" in a
    sheet = a["version-A-sheet.html"].decode()
    assert "seed" not in sheet.lower() and ".toml" not in sheet and "[3 points]" in sheet


# -- the key ---------------------------------------------------------------------------------

GIVEN = """\
title = "Fractions"
tokens = ["a", "b"]
Q = [["-3/4", 0, 0, 0], ["7/3", 0, 0, 0]]
K = [[1, 0, 0, 0], [0, 1, 0, 0]]
V = [[1, 2], [3, 4]]
"""


def test_key_writes_exact_short_values_and_approx(tmp_path):
    trace = sa.attend(sa.Problem.from_toml(problem(GIVEN, tmp_path)))
    v = single_version(trace.problem, GIVEN)[0]
    key3 = key_body(v, WorksheetOptions(questions=("scores", "scaled", "weights"),
                                        rounding=Rounding(digits=3), derivation=False))
    assert "-\\frac{3}{8} = -0.375" in key3                  # proved exact: "="
    assert "\\frac{7}{6} \\approx 1.17" in key3              # rounded: "≈"
    assert "\\sqrt{d_k} = \\sqrt{4} = 2" in key3.replace("$", "")
    key2 = key_body(v, WorksheetOptions(questions=("scaled",), rounding=Rounding(places=2),
                                        derivation=False))
    assert "-\\frac{3}{8} \\approx -0.38" in key2 and "= -0.38" not in key2
    weights = trace.weights.decimal(0, 0, 3).text
    assert f"A \\approx" in key3 and weights in key3        # irrational: the decimal after ≈
    # scores are whole or short: "=" and no decimals
    assert "S = " in key3


def test_lesson_key_integer_scores_and_numbering_matches_the_sheet():
    v = single_version(sa.load_example("i-love-cats"), sa.examples.example_text("i-love-cats"))[0]
    options = WorksheetOptions(questions=("scores", "weights", "output"), derivation=False)
    key, sheet = key_body(v, options), sheet_body(v, options)
    scores = key.split("\\textbf{1.}")[1].split("\\textbf{2.}")[0]
    assert "2 & 4 & 4" in scores and "." not in scores.split("\\[")[1]      # integers as integers
    for k, step in enumerate(("the scores", "the attention weights", "the output"), start=1):
        assert f"\\textbf{{{k}.}} Compute {step}" in sheet
        assert f"\\textbf{{{k}.}} {step[0].upper()}{step[1:]}" in key
    assert "0.136" in key and "0.432" in key and "1.86" in key and "6.32" in key


def test_square_dk_key_shows_the_root(tmp_path, capsys):
    out = tmp_path / "sq"
    assert cli("worksheet", "--versions", "1", "--seed", "2", "--square-dk", "-o", str(out),
               "--questions", "scaled", capsys=capsys)[0] == 0
    key = (out / "version-A-key.tex").read_text()
    assert "\\sqrt{d_k} = \\sqrt{4} = 2" in key.replace("$", "")
    sheet = (out / "version-A-sheet.tex").read_text()
    assert "\\sqrt{d_k} = \\sqrt{4} = 2" in sheet                   # the instruction says it too


def test_common_wrong_answers_are_checks_mistake_values():
    spec = spec_from_problem(sa.load_example("i-love-cats-causal"))
    rounding = Rounding(digits=3)
    versions = seeded_versions(spec, 11, 2, separate=(QUESTIONS, rounding))
    for v in versions:
        checker = Checker(sa.attend(sa.Problem.from_toml_text(v.toml)))   # read back: independent
        key = key_body(v, WorksheetOptions(rounding=rounding, derivation=False))
        assert "Common wrong answers" in key
        seen = set()
        for q in questions_of(v, WorksheetOptions(rounding=rounding)):
            right = answer_texts(v.trace, q.step, rounding)
            for wrong in wrong_answers(v.trace, q.step, rounding):
                assert f"\\textbf{{{tex_escape(wrong.code)}}}" in key
                if wrong.code not in SEPARATED or wrong.values == right:
                    continue          # e-as-2.7 is listed, not required; early rounding may be right
                seen.add(wrong.code)
                figure = "; ".join(", ".join(row) for row in wrong.values)
                verdict = checker.check(q.step, figure)
                assert verdict.mistake == wrong.code, (q.step, wrong, verdict.message)
                if wrong.code == "transposed-output":
                    continue          # a whole-matrix mistake: no single entry shows it
                for k, row in enumerate(wrong.values):      # entry by entry, the key's decimals
                    for j, text in enumerate(row):
                        cell = checker.check(q.entries[k][j], text)
                        assert cell.right or wrong.code in (cell.mistake or "") or any(
                            wrong.code in a for a in cell.also), (q.entries[k][j], text, cell.message)
        assert {"unscaled", "scaled-by-d_k", "softmax-over-columns", "mask-after-softmax"} <= seen


# -- versions that separate mistakes ---------------------------------------------------------

@pytest.mark.parametrize("example,rounding", [("i-love-cats", Rounding(digits=3)),
                                              ("i-love-cats-causal", Rounding(places=2))])
def test_generated_versions_separate_every_mistake(example, rounding):
    spec = spec_from_problem(sa.load_example(example))
    versions = seeded_versions(spec, 4, 4, separate=(QUESTIONS, rounding))
    for v in versions:
        trace = sa.attend(sa.Problem.from_toml_text(v.toml))
        for step in ("scores", "scaled", "weights", "output"):
            right = answer_texts(trace, step, rounding)
            grids = [w.values for w in wrong_answers(trace, step, rounding) if w.code in SEPARATED
                     and not (w.code in PRECISION and w.values == right)]
            assert right not in grids and len(set(grids)) == len(grids)
    # the filter is not vacuous: the lesson itself does not separate them (K·Qᵀ = Q·Kᵀ there)
    assert not separates(sa.attend(sa.load_example("i-love-cats")), ["scaled"], Rounding(digits=3))
    plain = seeded_versions(spec, 4, 8)
    assert not all(separates(v.trace, list(QUESTIONS[3:]), rounding) for v in plain)


def test_progress_on_stderr_for_long_runs(tmp_path, capsys):
    code, out, err = cli("worksheet", "--versions", "10", "--seed", "1", "--questions", "weights",
                         "--no-derivation", "-o", str(tmp_path / "w"), capsys=capsys)
    assert code == 0 and "version 7/10 (G)" in err and "version 10/10 (J)" in err
    code, out, err = cli("worksheet", "--versions", "2", "--seed", "1", "-o", str(tmp_path / "v"),
                         capsys=capsys)
    assert code == 0 and err == ""


def test_bad_points_are_one_line(tmp_path, capsys):
    cases = [("--points", "x"), ("--points", "1,2"), ("--points", "weights=2,3"),
             ("--points", "nope=2"), ("--points", "0"), ("--points", "")]
    for args in cases:
        code, out, err = cli("worksheet", *args, "-o", str(tmp_path / "w"), capsys=capsys)
        assert code == 2 and err.count("\n") == 1 and "--points" in err, (args, err)
    assert not (tmp_path / "w").exists()
    assert parse_points("2", ("scores", "weights")) == {"scores": 2, "weights": 2}
    assert parse_points("1.5,2", ("scores", "weights")) == {"scores": Fraction(3, 2), "weights": 2}
    with pytest.raises(WorksheetError):
        parse_points("weights=1001", ("weights",))


def test_html_sheet_and_key_open_offline_in_chromium(tmp_path, capsys):
    from browser import shared_browser

    out = tmp_path / "html"
    assert cli("worksheet", "--versions", "1", "--seed", SEED, "--points", "2", "--format", "html",
               "-o", str(out), capsys=capsys)[0] == 0
    trace = sa.attend(sa.Problem.from_toml(out / "version-A.toml"))
    browser = shared_browser()
    sheet = browser.open(out / "version-A-sheet.html")
    sheet.assert_clean()
    text = sheet.page.inner_text("body")
    assert "Version code" in text and SEED not in text and "seed" not in text.lower()
    assert sheet.page.locator("table.boxes").count() == 7
    sheet.close()
    key = browser.open(out / "version-A-key.html")
    key.assert_clean()
    text = key.page.inner_text("body")
    assert trace.weights.decimal(0, 0, 3).text in text and "Common wrong answers" in text
    assert SEED in text and "version-A.toml" in text
    box = key.page.locator("math").first.bounding_box()
    assert box and box["width"] > 0 and box["height"] > 0
    key.page.screenshot(path=str(tmp_path / "key.png"))
    key.close()


@pytest.mark.parametrize("template", ["plain", "rope", "alibi", "window", "sink", "kv-cache",
                                      "online-softmax"])
def test_every_template_prints_without_overfull_boxes(template, tmp_path, capsys):
    """Answer tables fit their headers (kv-cache's rows_recomputed, cache_elements ... printed
    over each other before): TeX reports no overfull box on any template's sheet or key."""
    need_tex()
    status, _, err = cli("worksheet", "--template", template, "-o", str(tmp_path / "w"), capsys=capsys)
    assert status == 0, err
    for name in ("version-A-sheet", "version-A-key"):
        done = subprocess.run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error",
                               f"{name}.tex"], cwd=tmp_path / "w", capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:]
        log = (tmp_path / "w" / f"{name}.log").read_text(encoding="utf-8", errors="replace")
        assert re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log) == [], (template, name)
    # no "Question N (step):" heading of the wrong-answer tables is the last line of a page
    for page in pages(tmp_path / "w" / "version-A-key.pdf"):
        lines = [line for line in page.splitlines() if line.strip() and not line.strip().isdigit()]
        assert lines and not re.fullmatch(r"Question \d+ \(.*\):", lines[-1].strip()), (template, lines[-1])


def test_no_common_wrong_answer_is_the_right_answer(tmp_path, capsys):
    """The lesson's scores are symmetric (checked here in integers), so transposing them gives
    the key itself: the key must not list transposed-scores as a wrong answer (issue 25)."""
    example = sa.load_example("i-love-cats")
    X, W_q, W_k = ([[int(x) for x in row] for row in example.inputs[name].to_sympy().tolist()]
                   for name in ("X", "W_q", "W_k"))
    Q = [[sum(X[i][t] * W_q[t][c] for t in range(4)) for c in range(3)] for i in range(3)]
    K = [[sum(X[i][t] * W_k[t][c] for t in range(4)) for c in range(3)] for i in range(3)]
    S = [[sum(Q[i][c] * K[j][c] for c in range(3)) for j in range(3)] for i in range(3)]
    assert S == [list(col) for col in zip(*S)]                     # symmetric
    status, _, err = cli("worksheet", "--example", "i-love-cats", "-o", str(tmp_path / "w"), capsys=capsys)
    assert status == 0, err
    key = (tmp_path / "w" / "version-A-key.tex").read_text(encoding="utf-8")
    assert "Common wrong answers" in key and "transposed-scores" not in key
