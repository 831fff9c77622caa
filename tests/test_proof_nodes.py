"""Proofs are document nodes (issue 19): each printer typesets a proof's math in its format.

The facts page in HTML carries MathML for the general proofs (no raw ``e^{s_j}`` text), the
LaTeX compiles with a real TeX engine, and the text view reads as Unicode math.  Values are
asserted against independent computations, not against the printers' own output.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import symattn as sa
from symattn.cli import main
from symattn.document.blocks import Frac, ProofLines, SigmaSum
from symattn.document.build.facts import build_facts_document
from symattn.document.formats import print_document
from symattn.facts import Line, check_facts
from symattn.facts.notation import e, frac, rel, s, sigma
from browser import shared_browser
from symattn.examples import example_names, heads_example_names

RAW_TEX = re.compile(r"\^\{|\\frac|\\sum|\\operatorname")


@pytest.fixture(scope="module")
def lesson_proofs():
    return check_facts(sa.load_example("i-love-cats"))


def test_a_proof_line_is_words_and_math_nodes():
    line = Line("so ", rel(frac(e(s("j")), sigma(e(s("k")), "k")), "<", s("j")), " here")
    assert line.parts[0] == "so " and isinstance(line.parts[1].parts[0], Frac)
    assert line.text == "so e^(s_j) / Σ_k e^(s_k) < s_j here"
    assert line.latex == r"so $\frac{e^{s_{j}}}{\sum_k e^{s_{k}}} < s_{j}$ here"
    with pytest.raises(TypeError, match="words and math nodes"):
        Line("x", 3)                                   # a number is not a node


def test_the_general_proofs_carry_math_nodes(lesson_proofs):
    doc = build_facts_document(lesson_proofs)
    rows = next(s for s in doc.sections if s.key == "fact-rows-sum-to-one")
    general = next(b for b in rows.children if isinstance(b, ProofLines) and b.heading.startswith("In general"))
    nodes = [p for line in general.lines for p in line.parts if not isinstance(p, str)]
    assert any(isinstance(n, SigmaSum) for x in nodes for n in getattr(x, "parts", (x,)))


def test_facts_html_typesets_the_proofs_in_mathml(lesson_proofs, tmp_path):
    page = print_document(build_facts_document(lesson_proofs), "html")
    # every general proof line of the softmax facts has a <math> element, and no raw TeX
    for key in ("rows-sum-to-one", "shift-invariance", "softmax-jacobian", "convex-hull"):
        section = page[page.index(f'id="sec-fact-{key}"'):]
        section = section[:section.index("</section>")]
        items = re.findall(r'<ul class="steps">(.*?)</ul>', section, re.S)[0]
        lines = re.findall(r"<li>(.*?)</li>", items, re.S)
        assert lines and all("<math" in x for x in lines), key
        assert not RAW_TEX.search(re.sub(r"<[^>]+>", "", section)), key
    assert page.count("<math") >= 40
    # the page renders in Chromium with the network off, the math laid out as MathML
    path = tmp_path / "facts.html"
    path.write_text(page, encoding="utf-8")
    rendered = shared_browser().open(path)
    try:
        rendered.assert_clean()
        boxes = rendered.page.eval_on_selector_all(
            "#sec-fact-rows-sum-to-one ul.steps math mfrac",
            "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; })")
        assert boxes and all(w > 10 and h > 20 for w, h in boxes)    # stacked: taller than a line
        shots = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
        if shots.is_dir():
            rendered.page.locator("#sec-fact-rows-sum-to-one").screenshot(path=str(tmp_path / "rows.png"))
    finally:
        rendered.close()


def test_facts_text_reads_as_unicode_math(lesson_proofs):
    text = print_document(build_facts_document(lesson_proofs), "text")
    assert "Σ_j (e^(s_j) / Σ_k e^(s_k)) = (Σ_j e^(s_j)) / Σ_k e^(s_k) = 1" in text
    assert "J = diag(p) − p·pᵀ" in text
    assert not RAW_TEX.search(text) and "\\" not in text     # no fact's line is TeX any more
    # the instance check shows the certified weights of row 'I', which sum to 1
    weights = [math.exp(x) for x in (1 / math.sqrt(3) * v for v in (2, 4, 4))]   # scores 2, 4, 4
    shown = ["%.3g" % (w / sum(weights)) for w in weights]
    assert f"row 'I': {' + '.join(shown)} → Σ = 1 exactly" in text


def test_facts_json_keeps_text_lines(capsys):
    assert main(["facts", "--json", "--fact", "shift-invariance"]) == 0
    (fact,) = json.loads(capsys.readouterr().out)
    assert fact["general"][0].startswith("e^(s_j + c) / Σ_k e^(s_k + c) = ")
    assert fact["checks"][0].startswith("row 'I': scores + 5/2 (recomputed by the engine) give the same")


#: what a proof line written as TeX leaves in a page: a fraction, braces, an index written Σ_x
RAW_MARKERS = re.compile(r"\\frac|_\{|\^\{|Σ_")
#: the facts whose proofs were strings written twice (text, LaTeX) before they were nodes
CONVERTED = ("window-is-a-mask", "sink-forms-agree", "online-softmax-equals-softmax", "kv-cache-equals-causal-row",
             "rope-relative-position", "gqa-equals-repeated-heads", "d-logits-rows-sum-to-zero", "d-V-column-sums",
             "row-dot-is-dO-dot-O", "finite-difference-converges", "temperature-limits", "variance-d_k")


def _problem(name: str):
    if name in heads_example_names():
        from importlib import resources

        from symattn.heads.heads import MultiHeadProblem
        return MultiHeadProblem.from_toml(str(resources.files("symattn.examples") / "heads" / f"{name}.toml"))
    return sa.load_example(name)


@pytest.mark.parametrize("name", [*example_names(), *heads_example_names()])
def test_no_facts_page_prints_raw_math(name):
    """Every example's facts page: outside the <math> elements no TeX-like formula is left (the words
    may say Σ, the formulas are MathML), the proofs of the converted facts carry MathML, and the text
    view has no TeX in it."""
    doc = build_facts_document(check_facts(_problem(name)))
    page = print_document(doc, "html")
    body = page[page.index("<main"):]
    words = re.sub(r"<[^>]+>", "", re.sub(r"<math.*?</math>", "", body, flags=re.S))
    found = [line.strip()[:120] for line in words.splitlines() if RAW_MARKERS.search(line)]
    assert found == [], found
    for key in CONVERTED:
        section = body[body.index(f'id="sec-fact-{key}"'):]
        section = section[:section.index("</section>")]
        assert "<math" in section, key
    text = print_document(doc, "text")
    assert "\\" not in text and not RAW_MARKERS.search(text.replace("Σ_", "Σ"))
    # and the LaTeX sets every character: none falls back to a [U+2192] code (τ → ∞ did)
    tex = print_document(doc, "latex")
    assert re.findall(r"\[U\+[0-9A-F]{4}\]", tex) == []


def test_variant_and_backward_proofs_render_as_mathml_in_chromium(tmp_path):
    """The online-softmax and backward proofs laid out by Chromium: their fractions stacked, their
    sums with a visible Σ, offline and without errors."""
    page = print_document(build_facts_document(check_facts(sa.load_example("online-softmax"))), "html")
    path = tmp_path / "facts.html"
    path.write_text(page, encoding="utf-8")
    rendered = shared_browser().open(path)
    try:
        rendered.assert_clean()
        measure = "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; })"
        for key in ("online-softmax-equals-softmax", "kv-cache-equals-causal-row", "d-V-column-sums"):
            fractions = rendered.page.eval_on_selector_all(f"#sec-fact-{key} math mfrac", measure)
            sums = rendered.page.eval_on_selector_all(f"#sec-fact-{key} math msub > mo", measure)
            assert fractions or key == "d-V-column-sums", key
            assert all(w > 5 and h > 15 for w, h in fractions), (key, fractions)
            assert sums and all(w > 3 and h > 5 for w, h in sums), (key, sums)
    finally:
        rendered.close()


def test_variance_names_its_quantities_as_math_not_typed_words():
    """Cov(q_i k_i, q_j k_j), √d_k, d_k, i = 1, …, d_k, Normal(0, 1), Uniform(−√3, √3) are math nodes:
    typeset in LaTeX and MathML, and Unicode math in text (d_k, not d\\_k)."""
    proof = check_facts(sa.load_example("i-love-cats-unscaled"), names=["variance-d_k"])
    page = print_document(build_facts_document(proof), "latex")
    body = page[page.index(r"\subsection*{1. variance-d\_k"):]
    body = body[body.index("\n"):]                   # past the heading, whose fact name is a name
    assert r"d\_k" not in body and r"\surd" not in body and "Cov(" not in body
    for tex in (r"\operatorname{Cov}\left(q_{i} k_{i},\ q_{j} k_{j}\right) = 0", r"(the reason for $\sqrt{d_k}$)",
                r"$i = 1,\ \text{\ldots{}},\ d_k$", r"for $d_k = 2$", r"the scores grow with $d_k$)",
                r"\operatorname{Uniform}\left(-\sqrt{3},\ \sqrt{3}\right)", r"\operatorname{Normal}\left(0,\ 1\right)"):
        assert tex in body, tex
    html = print_document(build_facts_document(proof), "html")
    assert "<mi>Cov</mi>" in html and "Cov(" not in html and "√d_k" not in html
    text = print_document(build_facts_document(proof), "text")
    assert "so Cov(q_i·k_i, q_j·k_j) = 0 (E of" in text and "(the reason for √d_k)" in text
    assert "(summed over i = 1, …, d_k; checked directly for d_k = 2)" in text
    assert "Var(scale·q·k) = 3 (not 1: the scores grow with d_k)" in text     # d_k = 3, scale 1
