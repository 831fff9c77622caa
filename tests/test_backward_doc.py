"""The backward pass explained (issue 20, item 2): every backward step as a section, one row of
dS worked by hand through the softmax's Jacobian, in text, JSON, HTML and LaTeX.

The numbers shown are compared with the Trace's certified decimals and with an independent
float64 computation of D and dS (numpy, written here from the formulas, not the engine)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from clirun import cli

import symattn as sa
from symattn.examples import example_names, example_text, load_example
from symattn.trace.backward import BACKWARD_STEP_ORDER
from symattn.trace.steps import spec

MINUS = "\u2212"
NUM = r"(−?\d+(?:\.\d+)?)"     # a decimal as the text view writes it


def numpy_backward():
    """The example's forward and backward in float64: P, dP, D, dS (rows: I, love, cats)."""
    X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], float)
    W_q = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], float)
    W_k = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], float)
    W_v = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], float)
    dO = np.array([[1, 0, -1], [0, 2, 0], [1, 1, 1]], float)
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    z = Q @ K.T / np.sqrt(3)
    P = np.exp(z - z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dP = dO @ V.T
    D = (P * dP).sum(axis=1)
    dS = P * (dP - D[:, None])
    # the Jacobian route, row by row: (diag(p) − p pᵀ)·dP_i
    jac = np.stack([(np.diag(P[i]) - np.outer(P[i], P[i])) @ dP[i] for i in range(3)])
    assert np.allclose(jac, dS, rtol=1e-13, atol=1e-15)
    return P, dP, D, dS, dO, P @ V


def number(text: str) -> float:
    return float(text.replace(MINUS, "-"))


def close(shown: str, value: float, digits: int = 3) -> bool:
    """The shown decimal is value rounded to `digits` significant digits (half a unit of the last place)."""
    x = number(shown)
    if value == 0:
        return x == 0
    unit = 10 ** (np.floor(np.log10(abs(value))) - digits + 1)
    return abs(x - value) <= unit / 2 * (1 + 1e-9)


@pytest.fixture(scope="module")
def trace():
    return sa.Trace(load_example("backward"))


@pytest.fixture(scope="module")
def text():
    result = cli("explain", "--example", "backward")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_example_is_built_in_and_listed():
    assert "backward" in example_names()
    listed = cli("examples")
    assert listed.returncode == 0 and re.search(r"^backward\s", listed.stdout, re.M), listed.stdout
    problem = load_example("backward")
    assert problem.title == "I love cats, backward"
    assert problem.backward is not None


def test_every_backward_step_has_a_section_with_formula_shape_and_matrix(trace, text):
    p = trace.problem
    names = [n for n in BACKWARD_STEP_ORDER if n in trace.step_names]
    assert names == ["lse", "d_output", "d_V", "d_weights", "row_dot", "d_logits", "d_scores", "d_Q", "d_K",
                     "d_W_q", "d_W_k", "d_W_v", "d_X"]
    heads = re.findall(r"^(\d+)\. ([^:\n]+): (.+?)    \((\d+)×(\d+)\)", text, re.M)
    by_title = {title: (int(num), formula, (int(r), int(c))) for num, title, formula, r, c in heads}
    last_forward = by_title["Checks, proved for this instance"][0] if "Checks, proved for this instance" in \
        by_title else 9
    numbers = []
    for name in names:
        entry, step = spec(name, p), trace.step(name)
        num, formula, shape = by_title[entry.title]
        assert formula == entry.formula and shape == step.shape, name
        assert entry.meaning in text
        numbers.append(num)
    assert numbers == sorted(numbers) and numbers[0] > last_forward      # after the forward, in order
    # each matrix: its certified decimals, row by row (d_output and d_weights exact integers)
    for name in ("d_V", "d_logits", "d_Q", "d_X"):
        section = text.split(f": {spec(name, p).formula}")[1].split("\n\n")[0]
        for row in trace.step(name).decimals(sa.Rounding(digits=3)):
            assert re.search(r"\s+".join(re.escape(str(d).replace("-", MINUS)) for d in row), section), name


def test_the_worked_row_is_the_forwards_softmax_row_with_the_right_numbers(trace, text):
    P, dP, D, dS, _dO, _out = numpy_backward()
    i = 2                                                     # the forward's default: the last row
    assert "Row 'cats' by hand, through the softmax's Jacobian" in text
    worked = text.split("Row 'cats' by hand")[1].split("\n\n")[0]
    flat = " ".join(worked.split())
    # dP written out from dO_cats = [1, 1, 1] and the value rows
    assert "dP[cats, I] = 1·1 + 1·2 + 1·3 = 6" in flat
    assert "dP[cats] = [6, 10, 11]" in flat and np.allclose(dP[i], [6, 10, 11])
    # D = Σ p_j dP_j with the rounded weights, and its certified value
    m = re.search(r"D\[cats\] = Σ_j p_j·dP_j = (.+?) ≈ " + NUM, flat)
    assert m and m.group(1) == "0.00744·6 + 0.755·10 + 0.238·11", flat
    certified_D = str(trace.step("row_dot").decimals(sa.Rounding(digits=3))[i][0])
    assert m.group(2) == certified_D and close(m.group(2), D[i])
    assert re.search(r"dO\[cats\]·O\[cats\] = 1·1\.99 \+ 1·7\.48 \+ 1·0\.736 ≈ " + re.escape(certified_D), flat)
    # every dS_j = p_j·(dP_j − D), and the certified dS
    certified = [str(d).replace("-", MINUS) for d in trace.step("d_logits").decimals(sa.Rounding(digits=3))[i]]
    found = re.findall(r"dS\[cats, (\w+)\] = (\S+)·\((\S+) − (\S+)\) ≈ " + NUM, flat)
    assert [f[0] for f in found] == ["I", "love", "cats"]
    for j, (_key, p_j, dP_j, D_shown, dS_j) in enumerate(found):
        assert close(p_j, P[i, j]) and number(dP_j) == dP[i, j] and D_shown == certified_D
        assert dS_j == certified[j] and close(dS_j, dS[i, j])
    # the why: the Jacobian and the algebra that turns it into p ∘ (dP − D)
    assert "∂p_j/∂z_k = p_j·(δ_jk − p_k)" in flat and "diag(p) − p·pᵀ" in flat
    assert "dS_j = Σ_k p_j·(δ_jk − p_k)·dP_k = p_j·dP_j − p_j·Σ_k p_k·dP_k = p_j·(dP_j − D)" in flat
    assert abs(dS[i].sum()) < 1e-12 and "Each row of dS sums to 0" in flat


def test_the_rows_flag_chooses_the_worked_row(trace):
    P, dP, D, dS, *_ = numpy_backward()
    result = cli("explain", "--example", "backward", "--rows", "love", "--digits", "5")
    assert result.returncode == 0, result.stderr
    flat = " ".join(result.stdout.split("Row 'love' by hand")[1].split("\n\n")[0].split())
    assert "Row 'cats' by hand" not in result.stdout
    found = re.findall(r"dS\[love, (\w+)\] = \S+·\(\S+ − (\S+)\) ≈ " + NUM, flat)
    certified = trace.step("d_logits").decimals(sa.Rounding(digits=5))[1]
    assert [k for k, _, _ in found] == ["I", "love", "cats"]
    for j, (_k, D_shown, shown) in enumerate(found):
        assert close(D_shown, D[1], 5) and shown == str(certified[j]).replace("-", MINUS)
        assert close(shown, dS[1, j], 5)


def test_a_masked_row_says_its_blocked_keys_have_zero_gradient():
    from symattn.document.trace_text import TextOptions, render_text
    from symattn.examples import example_text
    from symattn.problem.problem import Problem

    t = sa.Trace(Problem.from_toml_text(example_text("i-love-cats-causal") + 'backward = { loss = "sum" }\n'))
    out = render_text(t, TextOptions(rows=("I",)))
    flat = " ".join(out.split("Row 'I' by hand")[1].split("\n\n")[0].split())
    assert "The mask blocks love, cats: their weight is 0, so their dS is exactly 0." in flat
    assert "D[I] = Σ_j p_j·dP_j = 1·6 = 6" in flat and "dS[I, I] = 1·(6 − 6) = 0" in flat
    assert t.step("d_logits")[0, 1] == 0 and t.step("d_logits")[0, 2] == 0


def test_a_forward_only_problem_has_no_backward_sections():
    out = cli("explain").stdout
    assert "The backward pass" not in out and "Logit gradient" not in out


def test_a_grad_output_of_the_wrong_shape_is_one_line_naming_the_key_and_the_fix(tmp_path):
    bad = example_text("backward").replace(
        "grad_output = [[1, 0, -1], [0, 2, 0], [1, 1, 1]]", "grad_output = [[1, 0], [0, 2], [1, 1]]")
    path = tmp_path / "bad.toml"
    path.write_text(bad)
    for fmt in ("text", "json", "html", "latex"):
        result = cli("explain", str(path), "--format", fmt)
        assert result.returncode == 2 and result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert "backward grad_output is 3×2" in lines[0]
        assert "give one row per query and 3 columns" in lines[0]


def test_json_holds_the_backward_steps_like_the_forward_ones_at_30_digits(trace):
    import json

    import sympy

    result = cli("explain", "--example", "backward", "--format", "json", "--digits", "30")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    names = [n for n in BACKWARD_STEP_ORDER if n in trace.step_names]
    assert list(data["steps"])[-len(names):] == names
    _P, _dP, D, dS, *_ = numpy_backward()
    for name in names:
        entry, step = data["steps"][name], trace.step(name)
        assert entry["shape"] == list(step.shape) and entry["formula"] == spec(name, trace.problem).formula
        assert entry["decimal"] == [[str(d) for d in row] for row in step.decimals(sa.Rounding(digits=30))]
        assert sympy.sympify(entry["exact"][2][0]) == sympy.sympify(str(step[2, 0]))
    assert all(close(entry, D[i], 15) for i, (entry,) in enumerate(data["steps"]["row_dot"]["decimal"]))
    assert all(close(x, dS[i, j], 14) for i, row in enumerate(data["steps"]["d_logits"]["decimal"])
               for j, x in enumerate(row))


def test_the_document_json_carries_the_backward_sections_and_the_worked_row(trace):
    from symattn.document.build.trace import DocumentOptions, build_document
    from symattn.document.printers.json import document_json

    doc = document_json(build_document(trace, DocumentOptions(softmax_rows=("cats",))))
    keys = [s["key"] for s in doc["sections"]]
    assert keys[keys.index("checks") + 1:] == ["backward", *[n for n in BACKWARD_STEP_ORDER if n in trace.step_names]]
    logits = next(s for s in doc["sections"] if s["key"] == "d_logits")
    assert logits["formula"]["shape"] == [3, 3] and logits["blocks"][0]["type"] == "LabelledMatrix"
    assert [b["type"] for b in logits["blocks"][1:]] == ["Note"] * 5


@pytest.fixture(scope="module")
def html_page(tmp_path_factory):
    result = cli("explain", "--example", "backward", "--format", "html")
    assert result.returncode == 0, result.stderr
    path = tmp_path_factory.mktemp("backward") / "backward.html"
    path.write_text(result.stdout, encoding="utf-8")
    return path, result.stdout


def test_html_is_typeset_mathml_with_every_backward_section_in_chromium(trace, html_page, tmp_path):
    from browser import shared_browser

    path, html = html_page
    shown = shared_browser().open(path)
    try:
        page = shown.page
        shown.assert_clean()
        section = page.locator("#sec-d_logits")
        assert section.locator("h2").inner_text().endswith("Logit gradient")
        sizes = section.locator("math").evaluate_all(
            "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; })")
        assert len(sizes) >= 15 and all(w > 0 and h > 0 for w, h in sizes)
        # ∂p_j/∂z_k is stacked: a fraction laid out as MathML, not as unknown inline tags
        assert section.locator("mfrac").first.evaluate(
            "f => { const [a, b] = f.children; return a.getBoundingClientRect().bottom "
            "<= b.getBoundingClientRect().top + 1; }")
        # nothing of the section runs off the page (at 3 digits; at 30 it overflows as the forward's do)
        assert section.evaluate("s => s.scrollWidth <= s.clientWidth + 1")
        text = section.inner_text()
        for d in trace.step("d_logits").decimals(sa.Rounding(digits=3))[2]:
            assert str(d).lstrip("-") in text           # MathML: the minus is its own <mo>
        for name in (n for n in BACKWARD_STEP_ORDER if n in trace.step_names):
            assert page.locator(f"#sec-{name} h2").count() == 1, name
        section.screenshot(path=str(tmp_path / "d_logits.png"))
    finally:
        shown.close()
    wide = cli("explain", "--example", "backward", "--format", "html", "--digits", "30").stdout
    for name in ("d_logits", "d_Q", "row_dot"):
        for row in trace.step(name).decimals(sa.Rounding(digits=30)):
            assert all(f"<mn>{d}</mn>" in wide or f"<mn>{str(d).lstrip('-')}</mn>" in wide for d in row), name


def test_latex_compiles_and_the_pdf_shows_the_worked_row(trace, tmp_path):
    from test_pdf import need_tex, pdf_text

    need_tex()
    result = cli("explain", "--example", "backward", "--pdf", "-o", str(tmp_path / "backward.pdf"))
    assert result.returncode == 0, result.stderr
    text = " ".join(pdf_text(tmp_path / "backward.pdf").split())
    assert "Row 'cats' by hand, through the softmax's Jacobian" in text.replace("’", "'")
    for title in ("Logit gradient", "Value gradient", "Query gradient", "Embedding gradient"):
        assert title in text
    for d in trace.step("d_logits").decimals(sa.Rounding(digits=3))[2]:
        assert str(d).replace("-", MINUS) in text or str(d) in text
    tex = cli("explain", "--example", "backward", "--format", "latex", "--digits", "30").stdout
    assert r"\partial" in tex and "[U+" not in tex          # every character typeset, none shown as a code
