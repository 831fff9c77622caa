"""The LaTeX view: the lesson's derivation, its hand-written forms and its rules."""

import subprocess

import pytest

import symattn as sa
from symattn.document import step_text as forms
from symattn.document.trace_latex import LatexOptions, render_latex, step_repr_latex, trace_repr_latex
from clirun import cli


@pytest.fixture(scope="module")
def lesson():
    return sa.attend(sa.load_example("i-love-cats"))


def test_document_is_complete_and_fragment_is_its_body(lesson):
    doc = render_latex(lesson)
    body = render_latex(lesson, fragment=True)
    assert doc.startswith("\\documentclass") and doc.rstrip().endswith("\\end{document}")
    assert "\\documentclass" not in body and body in doc


def test_dot_products_in_index_order(lesson):
    body = render_latex(lesson, fragment=True)
    assert "1\\cdot 0 + 0\\cdot 1 + 2\\cdot 1 = 2" in body
    assert "2\\cdot 4 + 2\\cdot 4 + 2\\cdot 0 = 16" in body   # a 3×3 problem: every entry written out


def test_negatives_in_parentheses():
    problem = sa.Problem(Q=[[2, 1]], K=[[-3, 1], [1, 0]], V=[[1], [2]])
    body = render_latex(sa.attend(problem), fragment=True)
    assert "2\\cdot(-3) + 1\\cdot 1 = -5" in body
    assert "\\cdot -" not in body


def test_scaled_scores_as_written_by_hand(lesson):
    body = render_latex(lesson, fragment=True)
    assert "\\frac{2}{\\sqrt{3}}" in body and "\\approx 1.73" in body
    assert "\\left[1.15,\\ 2.31,\\ 2.31\\right]" in body
    assert "\\frac{2 \\sqrt{3}}{3}" not in body and "2\\sqrt{3}/3" not in body


def test_rational_scale_stays_a_fraction():
    problem = sa.Problem(Q=[[1, 0, 0, 1]], K=[[1, 1, 0, 0], [0, 0, 0, 3]], V=[[1], [0]])
    body = render_latex(sa.attend(problem), fragment=True)
    assert "\\frac{1}{2}" in body and "\\frac{3}{2}" in body and "\\sqrt{4}" in body
    assert "rational scale" in body


def test_softmax_with_max_subtraction(lesson):
    body = render_latex(lesson, fragment=True)
    assert "\\max &= \\frac{12}{\\sqrt{3}} \\approx 6.93" in body
    assert "\\left[-\\frac{8}{\\sqrt{3}},\\ 0,\\ -\\frac{2}{\\sqrt{3}}\\right] \\approx \\left[-4.62,\\ 0,\\ -1.15\\right]" in body
    assert "e^{-8/\\sqrt{3}} \\approx 0.00986" in body
    assert "\\text{row sum} &= e^{-8/\\sqrt{3}} + 1 + e^{-2/\\sqrt{3}} \\approx 1.33" in body
    assert "\\approx \\left[0.00744,\\ 0.755,\\ 0.238\\right]" in body
    assert "\\frac{e^{-8/\\sqrt{3}}}{e^{-8/\\sqrt{3}} + 1 + e^{-2/\\sqrt{3}}} \\approx 0.00744" in body


def test_heat_map_on_fixed_scale_with_labels(lesson):
    body = render_latex(lesson, fragment=True)
    assert "\\cellcolor{blue!14}$0.136$" in body             # 0.136 → 14 % on the fixed [0, 1] scale
    assert "\\cellcolor{blue!91}\\textcolor{white}{$0.909$}" in body
    assert "\\textbf{love} &" in body and "\\textbf{cats}" in body
    assert "scale:" in body and "blue!100" in body


def test_sanity_checks_are_stated_for_the_instance(lesson):
    body = render_latex(lesson, fragment=True)
    assert "sums to exactly 1" in body
    assert "\\frac{e^{-8/\\sqrt{3}} + 1 + e^{-2/\\sqrt{3}}}{e^{-8/\\sqrt{3}} + 1 + e^{-2/\\sqrt{3}}} = 1" in body
    assert "1 &\\le 1.86,\\ 2.00,\\ 1.99 \\le 2" in body
    assert "2 &\\le 6.32,\\ 7.81,\\ 7.48 \\le 8" in body


def test_places_and_scientific_for_values_that_round_to_zero(lesson):
    body = render_latex(lesson, LatexOptions(rounding=sa.Rounding(places=2)), fragment=True)
    assert "8.90 \\times 10^{-4}" in body      # weights[love, I] = 0.000890...
    assert "0.00" not in body.replace("0.001", "")  # never 0.00 for a value that is not 0
    assert "2 decimal places" in body
    body3 = render_latex(lesson, LatexOptions(rounding=sa.Rounding(places=3)), fragment=True)
    assert "$0.136$" in body3 and "$0.001$" in body3


def test_digits_are_significant(lesson):
    body = render_latex(lesson, LatexOptions(rounding=sa.Rounding(digits=6)), fragment=True)
    assert "0.136126" in body and "1.86387" in body


def test_masked_positions_and_exact_zero():
    trace = sa.attend(sa.load_example("i-love-cats-causal"))
    body = render_latex(trace, LatexOptions(rounding=sa.Rounding(places=3)), fragment=True)
    assert "-\\infty" in body and "Masking" in body
    assert "\\cellcolor{blue!0}$0$" in body     # blocked: exactly 0, not scientific
    assert "\\cellcolor{blue!100}\\textcolor{white}{$1.000$}" in body   # row 'I' sees only itself


def test_large_problem_elides_and_limits_worked_rows():
    n = 12
    Q = [[(i + j) % 3 for j in range(2)] for i in range(n)]
    K = [[(i * j) % 2 for j in range(2)] for i in range(n)]
    V = [[i % 4] for i in range(n)]
    trace = sa.attend(sa.Problem(Q=Q, K=K, V=V, tokens=[f"w{i}" for i in range(n)]))
    body = render_latex(trace, LatexOptions(rows=("w5", 7)), fragment=True)
    assert "\\cdots" in body and "\\vdots" in body and "\\ddots" in body
    assert "\\text{w11}" in body and "\\text{w6}" not in body.split("Scaled scores")[0].split("Each score")[0]
    assert "Row \\texttt{w5}" in body and "Row \\texttt{w7}" in body and "Row \\texttt{w0}" not in body


def test_token_names_are_escaped():
    problem = sa.Problem(Q=[[1], [0]], K=[[1], [0]], V=[[1], [2]], tokens=["a_b", "50%"])
    body = render_latex(sa.attend(problem), fragment=True)
    assert "a\\_b" in body and "50\\%" in body


def test_jupyter_display(lesson):
    step = step_repr_latex(lesson.scaled)
    assert step.startswith("$\\displaystyle") and step.endswith("$")
    assert "\\frac{2}{\\sqrt{3}}" in step and "1.15" in step
    whole = trace_repr_latex(lesson)
    assert whole.startswith("$$\\begin{aligned}") and whole.endswith("\\end{aligned}$$")
    assert "0.136" in whole and "1.86" in whole


def test_cli_latex_to_file_and_bad_rows(tmp_path):
    out = tmp_path / "lesson.tex"
    done = cli("explain", "--format", "latex", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "\\begin{document}" in out.read_text()
    bad = cli("explain", "--format", "latex", "--rows", "dogs")
    assert bad.returncode == 2 and "--rows dogs" in bad.stderr and "its rows are I, love, cats" in bad.stderr
    wrong = cli("explain", "--paper", "a4")           # --places and --rows apply to every format now
    assert wrong.returncode == 2 and "--paper applies to --format latex" in wrong.stderr


def test_forms_latex_helpers_keep_hand_forms(lesson):
    assert forms.scaled_latex(lesson, lesson.scores[0, 0]) == "\\frac{2}{\\sqrt{3}}"
    assert forms.weight_latex(lesson, 0, 1) == "\\frac{1}{e^{-2/\\sqrt{3}} + 2}"
    assert forms.output_latex(lesson, 0, 0) == "\\frac{e^{-2/\\sqrt{3}} + 4}{e^{-2/\\sqrt{3}} + 2}"
    assert forms.factor_latex(lesson.scores[0, 0] * -1) == "(-2)"


def test_trace_and_step_display_in_jupyter_without_ipython(lesson):
    assert lesson._repr_latex_() == trace_repr_latex(lesson)
    assert lesson.weights._repr_latex_().startswith("$\\displaystyle A = ")
    assert "0.432" in lesson.weights._repr_latex_()

    class Printer:  # the part of IPython's pretty printer that _repr_pretty_ uses
        def __init__(self):
            self.out = ""

        def text(self, s):
            self.out += s

    printer = Printer()
    lesson._repr_pretty_(printer, False)
    assert "I love cats" in printer.out and "≈ [1.86, 6.32, 1.70]" in printer.out


def test_symbols_render_exactly_without_decimals():
    p = sa.Problem(Q=sa.symbol_matrix("q", 1, 2), K=[[1, 0], [0, 1]], V=[[1], [2]], scale=1)
    trace = sa.attend(p)
    body = render_latex(trace, fragment=True)
    assert "e^{q_{00}}" in body and "left open by the symbols" in body
    assert "cellcolor" not in body          # no heat map without numbers
    assert "\\frac{e^{q_{00}} + 2 e^{q_{01}}}{e^{q_{00}} + e^{q_{01}}}" in trace._repr_latex_()


def test_long_rows_stay_short():
    n = 40
    Q = [[(3 * i + j) % 3 - 1 for j in range(2)] for i in range(n)]
    K = [[(i + 2 * j) % 3 - 1 for j in range(2)] for i in range(n)]
    V = [[i % 5] for i in range(n)]
    trace = sa.attend(sa.Problem(Q=Q, K=K, V=V, mask="causal"))
    doc = render_latex(trace)
    assert "\\text{row sum} &= \\sum_j e^{\\text{shifted}_j}" in doc   # 40 terms are not written out
    assert len(doc) < 30_000
    assert doc.count("\\cellcolor") <= 8 * 8


def test_cli_fragment_implies_latex_and_json_refuses_pdf(tmp_path):
    frag = cli("explain", "--fragment")
    assert frag.returncode == 0 and frag.stdout.startswith("\\section*{I love cats}")
    assert "\\documentclass" not in frag.stdout
    bad = cli("explain", "--format", "json", "--pdf", "-o", str(tmp_path / "x.pdf"))
    assert bad.returncode == 2 and "--pdf applies to --format latex" in bad.stderr
    assert not (tmp_path / "x.pdf").exists()


def test_odd_inputs_compile(tmp_path):
    from test_pdf import need_tex, pdf_text

    need_tex()
    from symattn.document.pdf import compile_tex

    problem = sa.Problem(Q=[["1/2", -1], [1, "sqrt(2)"]], K=[[1, 0], [-2, 1], ["1/4", 3]],
                         V=[["pi", 1], [0, -1], [2, "e"]], tokens=["a_b", "50%"],
                         key_tokens=["k{1}", "k\\2", "k~3"], scale="pi/4", mask=[[1, 0, 1], [1, 1, 1]],
                         title="Odd & ends #1")
    pdf = tmp_path / "odd.pdf"
    pdf.write_bytes(compile_tex(render_latex(sa.attend(problem)), "odd"))
    assert "Odd & ends #1" in pdf_text(pdf)


# -- issue 10 scope 5: typography, found by looking at the PDFs ---------------------------

def wide_causal(n: int) -> sa.Problem:
    """A causal problem whose weights span many orders of magnitude (cells like 1.4 × 10^{-21})."""
    Q = [[((5 * i + 3 * j) % 13) - 6 for j in range(3)] for i in range(n)]
    K = [[((2 * i + 5 * j) % 11) - 5 for j in range(3)] for i in range(n)]
    V = [[i % 5, (2 * i) % 3] for i in range(n)]
    return sa.Problem(Q=Q, K=K, V=V, mask="causal", tokens=[f"tok{i}" for i in range(n)])


def overfull_boxes(tex: str, folder) -> list[float]:
    """Compile with pdflatex and read every 'Overfull \\hbox (Xpt too wide)' from the log."""
    import re

    (folder / "doc.tex").write_text(tex, encoding="utf-8")
    done = subprocess.run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error",
                           "doc.tex"], cwd=folder, capture_output=True, text=True, timeout=300)
    log = (folder / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, log[-2000:]
    return [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]


@pytest.mark.parametrize("n, places", [(12, None), (16, None), (12, 3)])
def test_large_causal_problem_fits_the_page(tmp_path, n, places):
    from test_pdf import need_tex

    need_tex()
    trace = sa.attend(wide_causal(n))
    rounding = sa.Rounding(places=places) if places else sa.Rounding(digits=3)
    tex = render_latex(trace, LatexOptions(rounding=rounding))
    assert "10^{-" in tex                              # tiny weights in scientific notation are there
    assert "${1." in tex or "${2." in tex or "${9." in tex or "\\times" in tex
    wide = [x for x in overfull_boxes(tex, tmp_path) if x > 5]
    assert wide == [], f"lines run into the margin by {wide} pt"


def test_a_case_that_ran_off_the_page_is_caught_by_the_log_reader(tmp_path):
    from test_pdf import need_tex

    need_tex()   # the measuring stick itself: a line known to be too wide is reported
    doc = "\\documentclass{article}\\begin{document}\\[" + " + ".join(["x_{1234}"] * 60) + "\\]\\end{document}"
    assert max(overfull_boxes(doc, tmp_path)) > 100


def test_wide_rows_break_into_lines_and_heat_map_cells_do_not_wrap():
    body = render_latex(sa.attend(wide_causal(12)), fragment=True)
    assert "&\\approx \\left[\\begin{array}" in body           # decimals below a wide exact matrix
    assert "\\to {}&" in body and "\\approx {}&" in body        # a wide scaled row on three lines
    assert "\\text{weights} = \\frac{e^{\\text{shifted}}}{\\text{row sum}} &\\approx \\bigl[" in body
    assert "\\bigr]" in body
    assert "${9." in body or "${1." in body or "${2." in body   # ${a \times 10^{-k}}$: one unbreakable formula
    assert "p{\\dimexpr(\\linewidth-4em)/8-2\\tabcolsep\\relax}" in body   # 8 columns share the line


def test_fraction_rows_have_room_and_parentheses_grow():
    lesson = sa.attend(sa.load_example("i-love-cats"))
    body = render_latex(lesson, fragment=True)
    assert "\\frac{4}{\\sqrt{3}} & \\frac{16}{\\sqrt{3}} & \\frac{12}{\\sqrt{3}} \\\\[1ex]" in body
    assert "\\text{I} & 1 & 0 & 1 & 0 \\\\\n" in body             # integer rows keep their height
    problem = sa.Problem(Q=[["1/2", 1]], K=[["-3/2", 1], [1, 0]], V=[[1], [2]])
    half = render_latex(sa.attend(problem), fragment=True)
    assert "\\frac{1}{2}\\cdot\\left(- \\frac{3}{2}\\right) + 1\\cdot 1 = \\frac{1}{4}" in half
    assert "(- \\frac" not in half.replace("\\left(- \\frac", "")


def test_token_names_are_upright_in_running_text_and_i_j_are_math(lesson):
    body = render_latex(lesson, fragment=True)
    assert "\\emph{" not in body
    assert "\\paragraph{Row \\texttt{cats}.}" in body and "\\text{love} &" in body
    assert "how well query $i$ matches key $j$" in body


def test_long_sums_in_fractions_stack_on_lines():
    body = render_latex(sa.attend(wide_causal(16)), fragment=True)
    weight = body.split("A_{\\text{tok15},\\,\\text{tok0}} = ")[1].split("\\]")[0]
    assert weight.startswith("\\frac{e^{-") and "{\\begin{array}{c}" in weight and weight.count(" \\\\ ") >= 2
    assert "\\approx 2.42 \\times 10^{-18}" in weight      # float64: see test_wide_causal_weight_is_right


def test_wide_causal_weight_is_right():
    np = pytest.importorskip("numpy")
    Q = np.array([[((5 * i + 3 * j) % 13) - 6 for j in range(3)] for i in range(16)], dtype=float)
    K = np.array([[((2 * i + 5 * j) % 11) - 5 for j in range(3)] for i in range(16)], dtype=float)
    s = Q[15] @ K.T / np.sqrt(3)
    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    assert f"{w[0]:.2e}" == "2.42e-18"


def test_a_heading_is_never_left_without_its_display():
    body = render_latex(sa.attend(wide_causal(12)), fragment=True)
    lines = body.split("\n")
    for k, line in enumerate(lines):
        if line.startswith("\\subsection*") and k + 3 < len(lines) and lines[k + 1].startswith("$"):
            # the step's formula line runs straight into its display: no empty line (a paragraph
            # break TeX may put a page break into) between them
            assert lines[k + 2] != "" or not lines[k + 3].startswith(("\\[", "\\begin{align")), lines[k:k + 4]


def test_every_built_in_example_compiles_within_the_margins(tmp_path):
    """Each example's LaTeX (the variants too: windows, sinks, RoPE, KV cache, online softmax)."""
    from test_pdf import need_tex

    need_tex()
    from symattn.examples import example_names

    for name in example_names():
        folder = tmp_path / name
        folder.mkdir()
        tex = render_latex(sa.attend(sa.load_example(name)))
        wide = [x for x in overfull_boxes(tex, folder) if x > 5]
        assert wide == [], f"{name}: lines run into the margin by {wide} pt"


def test_prose_sets_the_lessons_notation_as_math():
    from symattn.document.support.texutil import prose_latex

    assert prose_latex("no division by √d_k") == r"no division by $\sqrt{d_{k}}$"
    assert prose_latex("K·Qᵀ instead of Q·Kᵀ, or W_q and W_k swapped") == (
        r"$K \cdot Q^\top$ instead of $Q \cdot K^\top$, or $W_{q}$ and $W_{k}$ swapped")
    assert prose_latex("each column sums to 1 & 50% of e") == r"each column sums to 1 \& 50\% of e"
