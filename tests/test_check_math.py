"""The check report typesets its math (issue 19): exact values in their hand forms, the certified
roundings and the mistakes' formulas are MathML in HTML and math in LaTeX, while the terminal
listing and ``--json`` stay the verdicts' own strings.

The hand forms are read back by an evaluator written here (nodes → SymPy) and compared with the
exact values; the page is opened in Chromium and its fractions measured.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import sympy

from symattn.check.figfile import example_figures, load_figures
from symattn.check.report import render_json
from symattn.document.blocks import Verdicts
from symattn.document.build.check import build_check_document
from symattn.document.build.check_math import FORMULAS, says
from symattn.document.formats import print_document
from symattn.document.printers.text import print_text
from symattn.notation import nodes as n
from symattn.notation.hand import hand
from browser import shared_browser

ROOT = Path(__file__).resolve().parents[1]

FIGURES = """title = "Wrong answers"
example = "i-love-cats"
[variant.causal]
example = "i-love-cats-causal"
[[figure]]
target = "weights[love]"
text = "0.00 / 0.98 / 0.02"
[[figure]]
target = "exp[cats, cats]"
text = "0.31"
[[figure]]
target = "weights[I, I]"
text = "0.137"
[[figure]]
target = "scaled[cats, love]"
text = "4*sqrt(2)"
[[figure]]
target = "output[I]"
text = "[1.86, 6.31, 1.70]"
[[figure]]
target = "masked[I, love]"
text = "0"
variant = "causal"
[[figure]]
target = "weights"
text = "[[0.33 0.33 0.33] [0. 0.98 0.02] [0. 0.88 0.12]]"
"""


def value(node: n.Math) -> sympy.Expr:
    """What a hand-form node means, written for the test (not the printers' code)."""
    if isinstance(node, n.Int):
        return sympy.Integer(node.value)
    if isinstance(node, n.Neg):
        return -value(node.operand)
    if isinstance(node, n.Frac):
        return value(node.numerator) / value(node.denominator)
    if isinstance(node, n.Sqrt):
        return sympy.sqrt(value(node.radicand))
    if isinstance(node, n.Exp):
        return sympy.exp(value(node.exponent))
    if isinstance(node, n.Sum):
        return sympy.Add(*(value(t) for t in node.terms))
    if isinstance(node, n.Mul):
        return sympy.Mul(*(value(f) for f in node.factors))
    if isinstance(node, n.Sup):
        return value(node.base) ** value(node.script)
    if isinstance(node, n.Sym):
        return sympy.Symbol(node.name)
    if isinstance(node, n.Exact):
        return node.value
    raise AssertionError(f"not a hand form: {node!r}")


@pytest.fixture(scope="module")
def wrong(tmp_path_factory):
    path = tmp_path_factory.mktemp("figs") / "wrong.toml"
    path.write_text(FIGURES, encoding="utf-8")
    return load_figures(str(path)).check()


@pytest.fixture(scope="module")
def lesson():
    return example_figures("i-love-cats").check()


def test_hand_forms_mean_the_exact_values(lesson, wrong):
    s3 = sympy.sqrt(3)
    node = hand(sympy.exp(-2 * s3 / 3) / (sympy.exp(-2 * s3 / 3) + 2))
    # e^(−2/√3) over (e^(−2/√3) + 2): the exponential stays whole, its exponent over √3
    assert node == n.Frac(n.Exp(n.Neg(n.Frac(n.Int(2), n.Sqrt(n.Int(3))))),
                          n.Sum((n.Exp(n.Neg(n.Frac(n.Int(2), n.Sqrt(n.Int(3))))), n.Int(2))))
    assert hand(4 * s3) == n.Frac(n.Int(12), n.Sqrt(n.Int(3)))
    cells = [e.cell for v in (*lesson, *wrong) for e in v.entries if e.cell is not None]
    assert len(cells) > 100
    for cell in cells:
        if not cell.neg_inf:
            assert sympy.simplify(value(hand(cell.exact)) - cell.exact) == 0, cell.label


def test_the_formula_table_prints_as_the_catalogue_writes():
    catalogue = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "symattn/check/mistakes").glob("*.py"))
    catalogue += (ROOT / "symattn/check/verdict.py").read_text(encoding="utf-8")
    for text, node in FORMULAS.items():
        assert print_text(node) == text
        assert text in catalogue, f"{text!r} is in no mistake's description: drop it from FORMULAS"


def test_messages_keep_their_words_and_gain_nodes(wrong):
    by = {(v.target, v.variant): v for v in wrong}
    unscaled = says(by[("weights[love]", None)])
    assert unscaled[0] == "every entry is what the mistake unscaled (no division by "
    assert unscaled[1] == n.Sqrt(n.Sym("d_k"))
    assert unscaled[-1] == n.Seq(tuple(unscaled[-1].items)) and len(unscaled[-1].items) == 3
    early = says(by[("exp[cats, cats]", None)])
    approx = next(p for p in early if isinstance(p, n.Approx))
    assert value(approx.exact) == sympy.exp(-2 * sympy.sqrt(3) / 3)
    # the node's decimal is the certified one: e^(−2/√3) = 0.3151515…
    assert approx.approx.value.text == "0.315152"
    masked = says(by[("masked[I, love]", "causal")])
    assert n.Neg(n.Sym("∞")) in masked and " (a masked position); wrong-step" in "".join(
        p for p in masked if isinstance(p, str))
    # nothing of the words is lost: the words between the nodes are the message's, in order
    for v in wrong:
        words = [p for p in says(v) if isinstance(p, str)]
        at = 0
        for w in words:
            at = v.message.index(w, at) + len(w)


def test_html_typesets_the_values_and_latex_too(wrong):
    doc = build_check_document(wrong, "Wrong answers")
    page = print_document(doc, "html")
    rows = re.findall(r'<tr class="not-right">(.*?)</tr>', page, re.S)
    assert len(rows) == 7
    for row in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        expected, why = cells[2], cells[-1]      # Written, Verdict, Expected, Mistake, Why
        assert expected.startswith("<math") or "sqrt(2)" in cells[0], expected   # exact: none
        prose = re.sub(r"<math.*?</math>", "", why, flags=re.S)
        assert "<math" in why and not re.search(r"e\^\(|√|≈", prose), prose
    assert page.count("<mfrac>") >= 10
    tex = print_document(doc, "latex")
    assert r"\frac{e^{-2/\sqrt{3}}}{e^{-2/\sqrt{3}} + 2} \approx 0.136126" in tex
    assert r"no division by $\sqrt{d_k}$" in tex


def test_text_and_json_are_the_verdicts_strings(wrong, lesson):
    for verdicts in (wrong, lesson):
        doc = build_check_document(verdicts, "t")
        plain = dataclasses.replace(doc, children=tuple(
            dataclasses.replace(s, children=tuple(
                Verdicts(tuple(dataclasses.replace(r, says=(), expected_math=None) for r in c.rows))
                if isinstance(c, Verdicts) else c for c in s.children)) for s in doc.sections))
        assert print_document(doc, "text") == print_document(plain, "text")
        for v in verdicts:
            if not v.right:
                assert f"    {v.message}\n" in print_document(doc, "text")
    assert '"message": "every entry is what the mistake unscaled (no division by √d_k) gives' in render_json(wrong)


def test_check_page_renders_its_math_in_chromium(wrong, tmp_path):
    page = print_document(build_check_document(wrong, "Wrong answers"), "html")
    path = tmp_path / "check.html"
    path.write_text(page, encoding="utf-8")
    rendered = shared_browser().open(path)
    try:
        rendered.assert_clean()
        boxes = rendered.page.eval_on_selector_all(
            "table.verdicts tr.not-right td.left math mfrac",
            "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; })")
        assert len(boxes) >= 10 and all(w > 10 and h > 20 for w, h in boxes)   # stacked fractions
        sqrt = rendered.page.eval_on_selector_all(
            "table.verdicts td.left math msqrt", "els => els.map(e => e.getBoundingClientRect().width)")
        assert sqrt and all(w > 5 for w in sqrt)
    finally:
        rendered.close()
