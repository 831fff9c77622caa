"""The worksheet template ``backward`` (issue 20, scope 3): the sheet gives everything a student
needs (Q, K, V or X and the W's, and dO or the loss's target), asks for the gradients, and its
key's answers and common wrong answers agree with a float64 backward pass written for the tests
(tests/backward_numpy.py), mistake by mistake; seeded versions tell every mistake apart; the PDF
compiles with real TeX and reads back; ``grade`` names the backward mistakes of a class."""

from __future__ import annotations

import csv
import shutil
import subprocess
import tomllib
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import pytest

from backward_numpy import CHANGES, backward, sig, sig_grid
from clirun import cli
from symattn.check.checker import Checker
from symattn.classroom.worksheets.questions import default_questions
from symattn.classroom.worksheets.sheets import (
    WorksheetOptions, key_document, seeded_versions, single_version, worksheet_files,
)
from symattn.classroom.worksheets.templates import load_template, template_text
from symattn.classroom.worksheets.versions import spec_from_problem
from symattn.classroom.worksheets.wrong_answers import separates
from symattn.document.worksheet_blocks import KeyAnswer, WrongAnswers
from symattn.numbers.certify import CertifiedDecimal, Rounding
from symattn.problem.problem import Problem
from symattn.trace.trace import Trace

R3 = Rounding(digits=3)
BACKWARD = ("d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K")
TEMPLATE_QUESTIONS = ("scores", "weights", "output", *BACKWARD)

PROJECTED = """title = "Backward with projections"
tokens = ["a", "b"]
X = [[1, 0], [1, 1]]
W_q = [[1, 0], [0, 1]]
W_k = [[0, 1], [1, -1]]
W_v = [[1, 2], [0, 1]]
backward = { loss = "half-squared-error", target = [[1, 0], ["1/2", 2]] }
"""


def options(trace: Trace) -> WorksheetOptions:
    return WorksheetOptions(questions=default_questions(trace), rounding=R3)


def template_version():
    return single_version(load_template("backward"), template_text("backward"))[0]


def key_blocks(version, opts):
    doc = key_document(version, opts)
    answers = next(c for c in doc.children if getattr(c, "key", None) == "answers")
    shown = {b.step: b for b in answers.children if isinstance(b, KeyAnswer)}
    table = next(b for c in doc.children if getattr(c, "key", None) == "wrong-answers"
                 for b in c.children if isinstance(b, WrongAnswers))
    return shown, {step: {w.code: w for w in wrongs} for _, step, wrongs in table.rows}


def cell_value(cell) -> tuple[float, float]:
    """A key cell as (value, half a unit of its last place; 0 when exact)."""
    if cell.decimal is not None:
        d = cell.decimal.value
        assert isinstance(d, CertifiedDecimal)
        return float(d.as_fraction()), 0.5 * 10.0 ** d.exponent
    return float(cell.exact.value), 0.0


def assert_key_is_float64(version, opts) -> None:
    ref = backward(tomllib.loads(version.toml))
    shown, _ = key_blocks(version, opts)
    assert tuple(shown) == tuple(opts.questions)
    for step, block in shown.items():
        for i, row in enumerate(block.cells):
            for j, cell in enumerate(row):
                value, half = cell_value(cell)
                assert abs(value - ref[step][i, j]) <= half + 1e-12, (version.vid, step, i, j)


def test_the_template_sheet_gives_dO_and_asks_every_gradient():
    v = template_version()
    opts = options(v.trace)
    assert opts.questions == TEMPLATE_QUESTIONS
    files = worksheet_files([v], opts)
    sheet = files["version-A-sheet.tex"]
    given = sheet.split(r"\subsection*{Given}")[1].split(r"\subsection*{Instructions}")[0]
    # Q, K, V and dO = [[1, -1], [1, 0]], each with its token rows
    for name in ("Q", "K", "V", "dO"):
        assert f"{name} = \\begin{{array}}" in given
    assert "\\text{I} & 1 & -1 \\\\\n\\text{cats} & 1 & 0 \\\\" in given.split("dO = ")[1]
    assert r"\textbf{Backward:} dO = \ensuremath{\partial}L/\ensuremath{\partial}O" in sheet
    for n, words in enumerate(("the scores", "the attention weights", "the output", "the value gradient",
                               "the gradient of the attention weights", "the row dot products D",
                               "the gradient of the logits", "the gradient of the scores",
                               "the query gradient", "the key gradient"), start=1):
        assert f"\\textbf{{{n}.}} Compute {words}" in sheet
    assert "\\textbf{11.}" not in sheet
    assert "0.235" not in sheet and "1.35" not in sheet          # the sheet shows no answer
    key = files["version-A-key.tex"]
    for symbol in ("dV", "dP", "D", "dS", "dS'", "dQ", "dK"):  # each answer under its own symbol
        assert f"\n{symbol} \\approx \\begin{{array}}" in key or f"\n{symbol} = \\begin{{array}}" in key
    assert "d_weights =" not in key and "[U+2207]" not in key and "\\nabla" in key
    assert "\\textbf{4.} The value gradient, $dV = A^\\top dO$" in key
    assert "\\subsection*{The backward pass}" in key                 # the worked derivation
    assert_key_is_float64(v, opts)


def test_the_keys_wrong_answers_are_each_mistake_by_float64():
    """Every backward mistake is listed on every question it changes, with float64's values of
    that mistake rounded as the sheet asks (dk-not-transposed too: two of its entries are
    exactly 0 in a form certify alone cannot round)."""
    v = template_version()
    data = tomllib.loads(v.toml)
    _, table = key_blocks(v, options(v.trace))
    for code, steps in CHANGES.items():
        ref = backward(data, mistake=code)
        for step in steps:
            if code == "unscaled-forward" and step == "d_weights":
                continue
            shown = table[step][code].values
            assert tuple(tuple(Fraction(x) for x in row) for row in shown) == sig_grid(ref[step]), (code, step)


def test_check_names_the_mistake_with_exact_zeros():
    """dK = dS'·Q on the template has two entries exactly 0 (unsimplified); check names it."""
    v = template_version()
    ref = backward(tomllib.loads(v.toml), mistake="dk-not-transposed")["d_K"]
    text = "; ".join(", ".join(str(float(sig(x))) for x in row) for row in ref)
    assert Checker(v.trace).named_mistake("d_K", text) == "dk-not-transposed"


def test_seeded_versions_tell_every_backward_mistake_apart():
    """No two mistakes (nor a mistake and the right answer) give the same figure on a question,
    by float64 alone; and each version's key matches float64."""
    problem = load_template("backward")
    questions = default_questions(Trace(problem))
    versions = seeded_versions(spec_from_problem(problem), 7, 3, separate=(questions, R3))
    assert len({v.toml for v in versions}) == 3
    for v in versions:
        data = tomllib.loads(v.toml)
        assert data["backward"] == {"grad_output": [[1, -1], [1, 0]]}
        assert separates(v.trace, list(questions), R3)
        for step in BACKWARD:
            figures = {"right": sig_grid(backward(data)[step])}
            figures.update({code: sig_grid(backward(data, mistake=code)[step])
                            for code, steps in CHANGES.items() if step in steps
                            and not (code == "unscaled-forward" and step == "d_weights")})
            for (a, fa), (b, fb) in combinations(figures.items(), 2):
                assert fa != fb, (v.vid, step, a, b)
        assert_key_is_float64(v, options(v.trace))
    again = seeded_versions(spec_from_problem(problem), 7, 3, separate=(questions, R3))
    assert [v.toml for v in again] == [v.toml for v in versions]


def test_projections_and_a_loss_give_the_target_and_ask_dO_and_the_W_gradients():
    problem = Problem.from_toml_text(PROJECTED, source="test")
    [v] = single_version(problem, PROJECTED)
    opts = options(v.trace)
    assert opts.questions == ("Q", "K", "V", "scores", "weights", "output", "d_output", *BACKWARD,
                              "d_W_q", "d_W_k", "d_W_v")
    sheet = worksheet_files([v], opts)["version-A-sheet.tex"]
    given = sheet.split(r"\subsection*{Given}")[1].split(r"\subsection*{Instructions}")[0]
    for name in ("X = \\begin{array}", "W_{q} = ", "W_{k} = ", "W_{v} = ", "T = \\begin{array}"):
        assert name in given, name
    assert "\\frac{1}{2}" in given.split("T = ")[1]                   # the target, exact
    assert "dO = " not in given                                        # dO is asked, not given
    assert "L = \\ensuremath{\\tfrac12}\\ensuremath{\\|}O \\ensuremath{-} T" in sheet
    assert "Compute the gradient of the query projection" in sheet
    assert_key_is_float64(v, opts)


def test_sum_loss_says_dO_is_ones():
    text = PROJECTED.replace('backward = { loss = "half-squared-error", target = [[1, 0], ["1/2", 2]] }',
                             'backward = { loss = "sum" }')
    [v] = single_version(Problem.from_toml_text(text, source="test"), text)
    sheet = worksheet_files([v], options(v.trace))["version-A-sheet.tex"]
    assert "so dO = 1 in every entry" in sheet
    assert_key_is_float64(v, options(v.trace))


# -- the command line: versions, PDF, grade -------------------------------------------------------

def need_tex() -> None:
    missing = [p for p in ("pdflatex", "pdftotext") if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH (TeX Live and poppler-utils)")


def pdf_text(path: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def class_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("backward") / "sheets"
    done = cli("worksheet", "--template", "backward", "--versions", "3", "--seed", "7", "-o", str(folder))
    assert done.returncode == 0, done.stderr
    return folder


def test_the_pdf_compiles_and_reads_back(tmp_path):
    need_tex()
    folder = tmp_path / "pdf"
    done = cli("worksheet", "--template", "backward", "--pdf", "-o", str(folder))
    assert done.returncode == 0, done.stderr
    sheet = pdf_text(folder / "version-A-sheet.pdf")
    assert "dO =" in sheet and "Backward: dO = ∂L/∂O" in sheet
    assert "10. Compute the key gradient" in sheet
    key = pdf_text(folder / "version-A-key.pdf")
    for words in ("The value gradient", "dk-not-transposed", "forgot-row-dot", "(−∇L)", "−0.0983",
                  "Row dot products"):
        assert words in key, words


def test_grade_names_the_backward_mistakes_of_a_class(class_folder, tmp_path):
    """Three students of version B: right, dV = P·dO, and the −D term forgotten (on dS and dQ)."""
    data = tomllib.loads((class_folder / "version-B.toml").read_text(encoding="utf-8"))
    right, no_t, no_d = backward(data), backward(data, mistake="dv-not-transposed"), \
        backward(data, mistake="forgot-row-dot")

    def row(values, i):
        return ", ".join(str(float(sig(x))) for x in values[i])

    rows = [["student", "version", "d_V[I]", "d_logits[cats]", "d_Q[I]"],
            ["ann", "B", row(right["d_V"], 0), row(right["d_logits"], 1), row(right["d_Q"], 0)],
            ["bob", "B", row(no_t["d_V"], 0), row(right["d_logits"], 1), row(right["d_Q"], 0)],
            ["cy", "B", row(right["d_V"], 0), row(no_d["d_logits"], 1), row(no_d["d_Q"], 0)]]
    submissions = tmp_path / "class.csv"
    with open(submissions, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    report = tmp_path / "report.csv"
    done = cli("grade", str(class_folder), str(submissions), "-o", str(report))
    assert done.returncode in (0, 1), done.stderr
    graded = {r["student"]: r for r in csv.DictReader(open(report, encoding="utf-8"))}
    targets = ("d_V[I]", "d_logits[cats]", "d_Q[I]")
    assert all(graded["ann"][t] in ("rounded", "exact") for t in targets), graded["ann"]
    assert graded["bob"]["d_V[I]"] == "mistake" and graded["bob"]["d_V[I] mistake"] == "dv-not-transposed"
    assert graded["bob"]["d_Q[I]"] in ("rounded", "exact")
    for t in ("d_logits[cats]", "d_Q[I]"):
        assert graded["cy"][t] == "mistake" and graded["cy"][f"{t} mistake"] == "forgot-row-dot", graded["cy"]
