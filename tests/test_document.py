"""The derivation as one document: built once from the Trace, printed per format.

Cross-checks: weights recomputed here with Fractions and math.exp (small,
mild problems, where float64 is a fair check), rounded independently.
"""

from __future__ import annotations

import html
import json
import math
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import sympy

import symattn as sa
from symattn.numbers.certify import Rounding
from symattn.document import handforms as hf
from symattn.document.blocks import (
    Decimal, Document, Exp, Factor, Frac, HeatMap, Int, LabelledMatrix, Math, Mul, Neg, Section,
    SoftmaxRow, SoftmaxRule, Sqrt, Sum,
)
from symattn.document.build.trace import DocumentOptions, build_document
from symattn.document.printers.base import Printer, PrinterError
from symattn.document.printers.json import document_json, document_json_text
from symattn.document.printers.latex import print_latex
from symattn.document.printers.text import print_text
from symattn.document.trace_latex import render_latex
from symattn.document.trace_text import render_text

from outlines import html_outline, latex_outline, text_outline

ROOT = Path(__file__).resolve().parent.parent

LESSON_OUTLINE = [(None, "Inputs"), ("1", "Queries"), ("2", "Keys"), ("3", "Values"), ("4", "Scores"),
                  ("5", "Scaled scores"), ("6", "Softmax, with the max-subtraction trick"),
                  ("7", "Attention weights"), ("8", "Output"), ("9", "Checks, proved for this instance")]


def cross_problem() -> sa.Problem:
    return sa.Problem(X=[[1, 0], [0, 1]], X_kv=[[1, 1], [2, 0], [0, 3]], W_q=[[1, 2], [0, 1]],
                      W_k=[[1, 0], [1, 1]], W_v=[[2, 1], [0, 1]], tokens=["a", "b"], key_tokens=["x", "y", "z"])


def symbolic_problem() -> sa.Problem:
    return sa.Problem(Q=sa.symbol_matrix("q", 1, 2), K=[[1, 0], [0, 1]], V=[[1], [2]], scale=1)


PROBLEMS = {
    "lesson": lambda: sa.load_example("i-love-cats"),
    "causal": lambda: sa.load_example("i-love-cats-causal"),
    "cross": cross_problem,
    "symbolic": symbolic_problem,
}


# -- the outline is the same in every format -------------------------------------------

@pytest.mark.parametrize("name", PROBLEMS)
def test_every_format_lists_the_same_sections(name):
    trace = sa.attend(PROBLEMS[name]())
    data = json.loads(document_json_text(build_document(trace)))
    from_json = [(s["number"], s["title"]) for s in data["sections"]]
    assert text_outline(render_text(trace)) == from_json
    assert latex_outline(render_latex(trace)) == from_json
    from symattn.document.printers.html import print_html
    assert html_outline(print_html(build_document(trace))) == from_json
    expected = list(LESSON_OUTLINE)
    if name == "causal":
        expected.insert(6, ("5a", "Masking"))
    if name == "symbolic":
        expected = expected[1:]           # Q, K, V given: no inputs
    assert from_json == expected


def test_section_numbers_come_from_the_tree():
    doc = Document("t", (Section("a", "A", ()), Section("b", "B", (), sub=True), Section("c", "C", (),
                                                                                          numbered=False),
                         Section("d", "D", ()), Section("e", "E", (), sub=True), Section("f", "F", (), sub=True)))
    assert [s["number"] for s in document_json(doc)["sections"]] == ["1", "1a", None, "2", "2a", "2b"]


# -- hand forms are nodes, printed by each printer --------------------------------------

def test_hand_forms_are_nodes():
    lesson = sa.attend(sa.load_example("i-love-cats"))
    two_over_root3 = hf.scaled(lesson, lesson.scores[0, 0])
    assert two_over_root3 == Frac(Int(2), Sqrt(Int(3)))
    assert print_text(two_over_root3) == "2/√3" and print_latex(two_over_root3) == r"\frac{2}{\sqrt{3}}"
    e = hf.exponential(lesson, 2, 0)                      # row cats, key I: e^(−8/√3)
    assert e == Exp(Neg(Frac(Int(8), Sqrt(Int(3)))))
    assert print_text(e) == "e^(−8/√3)" and print_latex(e) == r"e^{-8/\sqrt{3}}"
    assert hf.exponential(lesson, 2, 1) == Int(1)         # the maximum: e^0
    total = hf.row_sum(lesson, 0)                          # row I: love and cats tie, like terms collected
    assert print_text(total) == "e^(−2/√3) + 2"
    assert print_text(hf.weight(lesson, 0, 1)) == "1 / (e^(−2/√3) + 2)"
    assert print_text(Factor(hf.exact(lesson.scores[0, 0] * -3))) == "(−6)"
    assert print_latex(Factor(hf.exact(lesson.scores[0, 0] * -3))) == "(-6)"
    # a denominator with a coefficient: 9/(10√2) in text, \frac{9}{10\sqrt{2}} in LaTeX
    node = hf.surd(Fraction(-9, 10), 2)
    assert node == Neg(Frac(Int(9), Mul((Int(10), Sqrt(Int(2))))))
    assert print_text(node) == "−9/(10√2)" and print_latex(node) == r"-\frac{9}{10\sqrt{2}}"
    assert print_latex(Exp(node)) == r"e^{-9/(10\sqrt{2})}"
    # a negative term of a sum prints as a minus, never "+ −"
    assert print_text(Sum((Int(2), Neg(Int(3))))) == "2 − 3"
    assert print_latex(Sum((Int(2), Neg(Int(3))))) == "2 - 3"


def test_printer_dispatch_walks_the_class_hierarchy():
    class Half(Int):
        pass

    assert print_text(Half(1)) == "1"                    # a new subclass prints as its parent until taught

    class Unknown(Math):
        pass

    with pytest.raises(PrinterError, match="cannot print a Unknown"):
        Printer().doprint(Unknown())


# -- the tree says what the lesson says, and the numbers are the right ones ---------------

def _softmax_row_float(scores: list[Fraction], scale: float, allowed: list[int]) -> list[float]:
    top = max(float(scores[j]) * scale for j in allowed)
    exps = {j: math.exp(float(scores[j]) * scale - top) for j in allowed}
    total = sum(exps.values())
    return [exps[j] / total if j in exps else 0.0 for j in range(len(scores))]


def _q_k_scores(rows_q, rows_k) -> list[list[Fraction]]:
    return [[sum(Fraction(a) * Fraction(b) for a, b in zip(q, k)) for k in rows_k] for q in rows_q]


def test_lesson_softmax_row_matches_an_independent_computation():
    doc = build_document(sa.attend(sa.load_example("i-love-cats")))
    softmax = next(s for s in doc.sections if s.key == "softmax")
    assert isinstance(softmax.children[0], SoftmaxRule)
    row = softmax.children[1]
    assert isinstance(row, SoftmaxRow) and row.token == "cats"
    assert row.maximum_key == "love" and row.ties == ("love",) and row.blocked == ()
    # independent: X, W from the lesson, Fractions, float64 softmax of the scaled row
    X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
    Wq = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
    Wk = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
    Q = [[sum(x[k] * Wq[k][c] for k in range(4)) for c in range(3)] for x in X]
    K = [[sum(x[k] * Wk[k][c] for k in range(4)) for c in range(3)] for x in X]
    scores = _q_k_scores(Q, K)
    assert scores[2] == [4, 12, 10]
    weights = _softmax_row_float(scores[2], 1 / math.sqrt(3), [0, 1, 2])
    printed = [print_text(w) for w in row.weights.items]
    assert printed == [f"{w:.3g}" for w in weights] == ["0.00744", "0.755", "0.238"]
    assert print_text(row.maximum) == "12/√3 ≈ 6.93"
    assert print_text(row.row_sum) == "e^(−8/√3) + 1 + e^(−2/√3)"
    assert print_text(row.row_sum_decimal) == f"{sum(math.exp((s - 12) / math.sqrt(3)) for s in (4, 12, 10)):.3g}"


def test_causal_row_blocks_keys_and_heat_map_shades_are_certified_percents():
    doc = build_document(sa.attend(sa.load_example("i-love-cats-causal")), DocumentOptions(softmax_rows=("love",)))
    row = next(s for s in doc.sections if s.key == "softmax").children[1]
    assert row.token == "love" and row.blocked == ("cats",) and row.keys == ("I", "love")
    heat = next(s for s in doc.sections if s.key == "weights").children[0]
    assert isinstance(heat, HeatMap)
    # independent: row love of the causal lesson sees I and love only: scores 4 and 16 over √3
    w = _softmax_row_float([Fraction(4), Fraction(16), Fraction(12)], 1 / math.sqrt(3), [0, 1])
    assert heat.shades[1] == (round(w[0] * 100), round(w[1] * 100), 0) == (0, 100, 0)
    assert heat.shades[2] == tuple(round(x * 100) for x in _softmax_row_float(
        [Fraction(4), Fraction(12), Fraction(10)], 1 / math.sqrt(3), [0, 1, 2]))
    assert print_text(heat.decimals[0][1]) == "0" and heat.exact[1][2] == Int(0)


def test_symbolic_problem_leaves_the_maximum_open_and_shows_no_decimals():
    doc = build_document(sa.attend(symbolic_problem()))
    softmax = next(s for s in doc.sections if s.key == "softmax")
    assert not any(isinstance(c, SoftmaxRule) for c in softmax.children)   # nothing is subtracted
    row = softmax.children[0]
    assert row.maximum is None and row.ties == ()
    weights = next(s for s in doc.sections if s.key == "weights").children[0]
    assert isinstance(weights, LabelledMatrix) and weights.decimals is None
    assert print_text(weights.exact[0][0]) == "e^(q00)/(e^(q00) + e^(q01))"
    steps_of_symbols = [s for s in doc.sections if s.key in ("scores", "scaled", "softmax", "weights", "output")]
    assert not any(isinstance(n, Decimal) for n in _walk(steps_of_symbols))
    assert any(isinstance(n, Decimal) for n in _walk(doc.sections[1]))       # K has numbers


def _walk(node):
    import dataclasses

    yield node
    if dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            yield from _walk(getattr(node, f.name))
    elif isinstance(node, (tuple, list)):
        for x in node:
            yield from _walk(x)


def test_large_problem_elides_and_builds_no_elided_exact_forms():
    n = 12
    problem = sa.Problem(Q=[[(i + j) % 3 for j in range(2)] for i in range(n)],
                         K=[[(i * j) % 2 for j in range(2)] for i in range(n)],
                         V=[[i % 4] for i in range(n)], tokens=[f"w{i}" for i in range(n)])
    doc = build_document(sa.attend(problem))
    scores = next(s for s in doc.sections if s.key == "scores").children[0]
    assert scores.rows == (0, 1, 2, 3, None, 9, 10, 11) and scores.cols == scores.rows
    assert scores.exact[5] == (None,) * n and scores.exact[0][5] is None and scores.exact[0][0] == Int(0)


def test_json_outline_is_plain_data_that_reads_back():
    trace = sa.attend(sa.load_example("i-love-cats"))
    data = json.loads(document_json_text(build_document(trace, DocumentOptions(rounding=Rounding(digits=6)))))
    assert data["title"] == "I love cats" and data["summary"]["d_k"] == 3
    scores = data["sections"][4]
    assert scores["formula"]["text"] == "scores = Q·Kᵀ" and scores["formula"]["shape"] == [3, 3]
    heat = data["sections"][7]["blocks"][0]
    assert heat["type"] == "HeatMap"
    assert [c["value"] for c in heat["decimals"][0]] == ["0.136126", "0.431937", "0.431937"]


# -- the views print the document; the Trace is their only contract ------------------------

def test_readme_tour_is_what_explain_prints():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```\n4. Scores")
    excerpt = readme[start + 4:readme.index("```", start + 4)]
    out = render_text(sa.attend(sa.load_example("i-love-cats"))).splitlines()
    lines = [line for line in excerpt.splitlines() if line.strip() and line.strip() != "..."]
    assert len(lines) > 20 and [line for line in lines if line not in out] == []


def test_no_view_reads_the_engine():
    """No ``x.engine`` outside the engine, the Trace and stepcert (the Trace's certification loop,
    handed the engine by trace.py), and the step sources that build the Trace's steps from the
    engine's rows (the backward pass, each decode step's own engine): not an attribute read, not
    the engine passed along."""
    pattern = re.compile(r"(?<!symattn)(?<!symattn\.engine)\.engine\b(?!\.py)")
    allowed = {"engine.py", "trace.py", "stepcert.py", "trace/backward.py", "trace/backward_balls.py",
               "trace/decode.py"}
    readers = [f"{path.relative_to(ROOT)}:{k}" for path in sorted((ROOT / "symattn").rglob("*.py"))
               if path.name not in allowed and str(path.relative_to(ROOT / "symattn")) not in allowed
               for k, line in enumerate(path.read_text().splitlines(), 1)
               if pattern.search(line) and not line.lstrip().startswith(("#", '"""', "``"))
               and "``" not in line]
    assert readers == []


def test_trace_imports_no_view_at_module_level():
    """The Trace and what it imports (step table, hand forms, node types) name no view at
    module level: views import the Trace, never the other way round (display hooks import lazily)."""
    import ast

    views = ("symattn.document.printers", "symattn.document.build", "symattn.document.trace_", "symattn.document.support")
    for module in ("trace/trace.py", "trace/steps.py", "document/blocks.py", "document/handforms.py",
                   "exact/sympytext.py"):
        tree = ast.parse((ROOT / "symattn" / module).read_text())
        names = [a.name for node in tree.body if isinstance(node, ast.Import) for a in node.names]
        names += [node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module]
        assert not [n for n in names if n.startswith(views)], module
    for module in ("symattn.document.build.trace", "symattn.document.trace_latex", "symattn.document.step_text"):
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)   # no import cycle


def test_trace_public_api_for_views():
    t = sa.attend(sa.load_example("i-love-cats-causal"))
    assert t.allowed("love") == (0, 1) and t.is_allowed(0, 0) and not t.is_allowed("I", "cats")
    assert t.row_max("cats") == 1 and t.ties("cats") == frozenset({1})
    assert t.score_gap("cats", "I") == -8 and t.exponent(2, 0) == -8 / sympy.sqrt(3)
    assert t.masked_value == -sympy.oo and t.masked[0, 2] == t.masked_value
    assert t.V.is_rational and t.V.fraction("love", 1) == Fraction(8)
    sym = sa.attend(symbolic_problem())
    assert sym.row_max(0) is None and sym.ties(0) == frozenset() and {str(s) for s in sym.symbols_of("weights")} == {
        "q00", "q01"}
    assert sym.symbols_of("V") == frozenset()


def test_explain_html_writes_one_page_with_the_lesson_figures(tmp_path):
    pytest.importorskip("symattn.document.printers.html")
    from symattn import cli

    out = tmp_path / "lesson.html"
    assert cli.main(["explain", "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    assert page.lstrip().lower().startswith("<!doctype html>")
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    for figure in ("0.136", "0.432", "1.86", "6.32", "1.70"):
        assert figure in text
    assert html_outline(page) == LESSON_OUTLINE


def test_trace_gives_algebraic_values_and_enclosures_on_demand():
    tied = sa.attend(sa.Problem(Q=[[1, 0]], K=[[1, 0], [1, 0], [0, 1]], V=[[1], [2], [6]], scale=0))
    assert tied.algebraic_value("weights", 0, 1) == sympy.Rational(1, 3)      # scale 0: every score ties
    assert tied.algebraic_value("output", 0, 0) == 3                          # (1 + 2 + 6) / 3
    lesson = sa.attend(sa.load_example("i-love-cats"))
    assert lesson.algebraic_value("weights", "cats", "I") is None            # transcendental
    balls = lesson.enclosure("weights", "cats", 80)
    # independent: float64 softmax of [4, 12, 10]/√3 lies in each ball (within float error)
    for ball, w in zip(balls, _softmax_row_float([Fraction(4), Fraction(12), Fraction(10)], 1 / math.sqrt(3),
                                                 [0, 1, 2])):
        assert abs(float(ball.mid()) - w) < 1e-15 and float(ball.rad()) < 1e-20
    with pytest.raises(sa.SymattnError, match="substitute numbers"):
        sa.attend(symbolic_problem()).enclosure("weights", 0, 64)


def test_every_typeset_meaning_spells_its_steps_words():
    """document/meanings.py keys the math of a meaning by the step table's words: the parts,
    printed as text, must be those words exactly (else the LaTeX and HTML would say other things)."""
    from symattn.document.meanings import MEANING_MATH
    from symattn.trace import steps

    tables = (steps.STEPS, steps.SINK_STEPS, steps.LOGIT_STEPS, steps.ROPE_STEPS, steps.ONLINE_STEPS)
    meanings = {entry.meaning for table in tables for entry in table.values()}
    for meaning, parts in MEANING_MATH.items():
        assert meaning in meanings
        assert "".join(p if isinstance(p, str) else print_text(p) for p in parts) == meaning
