"""HTML output: MathML Core markup (unit tests) and whole pages in headless Chromium.

The markup tests parse what the printers write as XML and assert its
structure; the browser tests open real pages offline (tests/browser.py).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from fractions import Fraction

import pytest
import sympy

import symattn as sa
from browser import shared_browser
from symattn.numbers.certify import Rounding, certify
from symattn.document.support import mathml as m
from symattn.document.support import page as pg

# MathML Core's elements (https://w3c.github.io/mathml-core/#mathml-elements-and-attributes)
CORE = {"math", "mrow", "mi", "mn", "mo", "mtext", "mspace", "ms", "mfrac", "msqrt", "mroot", "msup",
        "msub", "msubsup", "munder", "mover", "munderover", "mmultiscripts", "mprescripts",
        "mtable", "mtr", "mtd", "mpadded", "mphantom", "mstyle", "merror", "semantics", "annotation"}


def tree(markup: str) -> ET.Element:
    """Markup parsed as XML (it must be well formed), wrapped in a <math>."""
    return ET.fromstring(markup if markup.startswith("<math") else f"<math>{markup}</math>")


def shape(e: ET.Element) -> str:
    """A compact picture of an element tree: ``mfrac(mn:2,msqrt(mn:3))``."""
    kids = list(e)
    if not kids:
        return f"{e.tag}:{e.text or ''}"
    return f"{e.tag}(" + ",".join(shape(k) for k in kids) + ")"


def only_core(markup: str) -> None:
    for e in tree(markup).iter():
        assert e.tag in CORE, e.tag
        if "mathvariant" in e.attrib:
            assert e.tag == "mi" and e.attrib["mathvariant"] == "normal"


# -- escaping ------------------------------------------------------------------------

@pytest.mark.parametrize("raw, escaped", [
    ("<b>", "&lt;b&gt;"),
    ("a&b", "a&amp;b"),
    ('say "hi"', "say &quot;hi&quot;"),
    ("it's", "it&#x27;s"),
    ("tab\there", "tab\there"),
    ("nul\x00bell\x07", "nul\u2400bell\u2407"),
    ("del\x7fc1\x85", "del\ufffdc1\ufffd"),
    ("surrogate\ud800", "surrogate\ufffd"),
    ("chat 🐈 é", "chat 🐈 é"),
])
def test_escape(raw, escaped):
    assert m.escape(raw) == escaped
    m.escape(raw).encode("utf-8")          # writable as UTF-8 whatever came in


def test_token_names_are_escaped_and_upright():
    t = tree(m.token('<script>"x"&\'y\''))
    assert t[0].tag == "mi" and t[0].text == '<script>"x"&\'y\''
    assert "<script>" not in m.token("<script>")
    single = tree(m.token("I"))[0]
    assert single.attrib == {"mathvariant": "normal"}      # "I" is a word, not the variable I
    assert "mathvariant" not in tree(m.token("love"))[0].attrib   # several letters: upright already


# -- exact values ----------------------------------------------------------------------

@pytest.mark.parametrize("expr, expected", [
    (sympy.Integer(7), "mn:7"),
    (sympy.Integer(-3), "mrow(mo:\u2212,mn:3)"),
    (sympy.Rational(-2, 3), "mrow(mo:\u2212,mfrac(mn:2,mn:3))"),
    (sympy.sqrt(3), "msqrt(mn:3)"),
    (2 / sympy.sqrt(3), "mfrac(mrow(mn:2,mo:\u2062,msqrt(mn:3)),mn:3)"),   # SymPy's canonical 2√3/3
    (sympy.exp(sympy.Rational(-1, 2)), "msup(mi:e,mrow(mo:\u2212,mrow(mn:1,mo:/,mn:2)))"),
    (sympy.exp(-8 * sympy.sqrt(3) / 3),
     "msup(mi:e,mrow(mo:\u2212,mrow(mrow(mn:8,mo:\u2062,msqrt(mn:3)),mo:/,mn:3)))"),
    (-sympy.oo, "mrow(mo:\u2212,mi:\u221e)"),
    (sympy.Symbol("q01"), "msub(mi:q,mn:01)"),
    (sympy.Symbol("alpha"), "mi:\u03b1"),
    (sympy.Symbol("x") ** 2, "msup(mi:x,mn:2)"),
    (sympy.pi / 4, "mfrac(mi:\u03c0,mn:4)"),
])
def test_exact_markup(expr, expected):
    markup = m.exact(expr)
    only_core(markup)
    assert shape(tree(markup)[0]) == expected


def test_a_lesson_weight_is_a_stacked_fraction_over_a_sum():
    w = 1 / (sympy.exp(-2 * sympy.sqrt(3) / 3) + 2)     # weights[I, love]
    root = tree(m.exact(w))[0]
    assert root.tag == "mfrac"
    top, bottom = list(root)
    assert shape(top) == "mn:1"
    assert [k.tag for k in bottom] == ["msup", "mo", "mn"] and bottom[1].text == "+"


def test_negatives_are_parenthesised_as_factors_and_subtracted_in_sums():
    assert shape(tree(m.factor(sympy.Integer(-3)))[0]) == "mrow(mo:(,mrow(mo:\u2212,mn:3),mo:))"
    assert shape(tree(m.factor(sympy.Integer(3)))[0]) == "mn:3"
    assert shape(tree(m.factor(1 + sympy.sqrt(2)))[0]).startswith("mrow(mo:(,")
    two_times_minus_three = tree(m.product(m.factor(2), m.factor(-3)))[0]
    assert shape(two_times_minus_three) == "mrow(mn:2,mo:\u00b7,mrow(mo:(,mrow(mo:\u2212,mn:3),mo:)))"
    x = sympy.Symbol("x")
    difference = tree(m.exact(x - 2))[0]         # x − 2, not x + −2
    assert [(k.tag, k.text) for k in difference] == [("mi", "x"), ("mo", "\u2212"), ("mrow", None)]


def test_max_of_symbols():
    x, y = sympy.symbols("x y", real=True)
    assert shape(tree(m.exact(sympy.Max(x, y)))[0]) == "mrow(mi:max,mrow(mo:(,mrow(mi:x,mo:,,mi:y),mo:)))"


def test_a_float_never_reaches_the_page():
    with pytest.raises(TypeError, match="Float"):
        m.exact(sympy.Float("0.5"))


# -- certified decimals -------------------------------------------------------------------

def test_decimals_come_from_certify():
    w = 1 / (sympy.exp(-2 * sympy.sqrt(3) / 3) + 2)
    d = certify(w, 3)
    markup = m.approx(m.exact(w), d)
    only_core(markup)
    kids = list(tree(markup)[0])
    assert (kids[-2].text, kids[-1].tag, kids[-1].text) == ("\u2248", "mn", "0.432")
    # an exact rounding says so with "="
    assert tree(m.approx(m.exact(sympy.Rational(1, 2)), certify(sympy.Rational(1, 2), 3)))[0][1].text == "="


@pytest.mark.parametrize("value, text", [
    (sympy.Rational(-231, 50), "mrow(mo:\u2212,mn:4.62)"),
    (sympy.exp(-48), "mrow(mn:1.43,mo:\u00d7,msup(mn:10,mrow(mo:\u2212,mn:21)))"),
    (sympy.Integer(12345678), "mrow(mn:1.23,mo:\u00d7,msup(mn:10,mn:7))"),
])
def test_decimal_markup(value, text):
    assert shape(tree(m.decimal(certify(value, 3)))[0]) == text


def test_decimal_digits_agree_with_mpmath():
    import mpmath
    with mpmath.workdps(50):                  # an independent evaluation, far past 3 digits
        assert mpmath.nstr(mpmath.exp(-48), 3) == "1.43e-21"
        assert mpmath.nstr(1 / (mpmath.exp(-2 / mpmath.sqrt(3)) + 2), 3) == "0.432"


def test_matrix_and_row_vector():
    cells = [[m.mn("1"), m.mn("0")], [m.exact(sympy.Integer(-2)), m.mn("5")]]
    root = tree(m.matrix(cells))[0]
    assert [k.tag for k in root] == ["mo", "mtable", "mo"]
    assert len(root[1]) == 2 and all(len(r) == 2 for r in root[1])
    vec = tree(m.row_vector([m.mn("1"), m.mn("2"), m.mn("3")]))[0]
    assert [k.text for k in vec if k.tag == "mo"] == ["[", ",", ",", "]"]


def test_well_formed_whatever_the_token():
    nasty = "<i>&\"'\x00"
    markup = m.math(m.msub(m.mi("A"), m.mrow(m.token(nasty), m.mo(","), m.token("cats"))), label=nasty)
    root = tree(markup)
    assert root.attrib["aria-label"] == "<i>&\"'\u2400"


# -- page shell ---------------------------------------------------------------------------

def test_page_is_self_contained():
    html = pg.page('Title <&> "q"', "<p>body</p>")
    assert html.startswith("<!doctype html>\n<html lang=\"en\">")
    assert '<meta charset="utf-8">' in html
    assert "<title>Title &lt;&amp;&gt; &quot;q&quot;</title>" in html
    assert "@media print" in html
    for external in ("http://", "https://", "<script", "<link", "<img", "@import", "url("):
        assert external not in html, external


def test_heatmap_cells_shade_on_a_fixed_scale_and_carry_the_exact_value():
    w = 1 / (sympy.exp(-2 * sympy.sqrt(3) / 3) + 2)
    d, shade = certify(w, 3), certify(w, Rounding(places=2))
    cell = pg.HeatCell(m.decimal(d), pg.shade_percent(shade), m.math(m.approx(m.exact(w), d)), "A[I, love] \u2248 0.432")
    one = pg.HeatCell(m.mn("1"), pg.shade_percent(certify(1, Rounding(places=2))), m.mn("1"), "A = 1")
    html = pg.heatmap([[cell, one], [None, None]], ["I", None], ["love", "<c>"])
    assert html.count('tabindex="0"') == 2
    assert 'title="A[I, love] \u2248 0.432"' in html
    assert '<th scope="col">&lt;c&gt;</th>' in html and '<th scope="row">I</th>' in html
    # 0.43 of the way from white to (31, 78, 156), in integer steps; 1 is the darkest, with white ink
    # by hand: 255 - 224·43 // 100 = 159, 255 - 177·43 // 100 = 179, 255 - 99·43 // 100 = 213
    assert 'style="background:rgb(159 179 213)"' in html and 'class="ink-light"' not in html.split("</tr>")[1][:60]
    assert 'class="ink-light" style="background:rgb(31 78 156)"' in html


def test_shades_are_two_place_weights():
    with pytest.raises(ValueError, match="2 places"):
        pg.shade_percent(certify(Fraction(1, 3), 3))
    assert pg.shade_percent(certify(Fraction(1, 3), Rounding(places=2))) == 33


# -- the HTML printer on a hand-built document ---------------------------------------------

def test_printer_escapes_and_writes_hand_forms():
    from symattn.document import blocks as b
    from symattn.document.printers.html import HtmlPrinter
    p = HtmlPrinter()
    neg = b.Neg(b.Frac(b.Int(8), b.Sqrt(b.Int(3))))
    # e^(−8/√3): the exponent's fraction is written with a slash, as by hand
    assert shape(tree(p.print(b.Exp(neg)))[0]) == \
        "msup(mi:e,mrow(mo:\u2212,mrow(mn:8,mo:/,msqrt(mn:3))))"
    # outside an exponent it is stacked
    assert shape(tree(p.print(neg))[0]) == "mrow(mo:\u2212,mfrac(mn:8,msqrt(mn:3)))"
    # 1·4 + 0·(−3): the negative factor in parentheses; a Neg term of a sum is subtracted
    product = b.Product((b.Factor(b.Int(0)), b.Factor(b.Neg(b.Int(3)))))
    assert shape(tree(p.print(product))[0]) == "mrow(mn:0,mo:\u00b7,mrow(mo:(,mrow(mo:\u2212,mn:3),mo:)))"
    total = tree(p.print(b.Sum((b.Int(1), b.Neg(b.Int(2))))))[0]
    assert [(k.tag, k.text) for k in total] == [("mn", "1"), ("mo", "\u2212"), ("mn", "2")]
    # Approx drops "≈ b" where both read the same, and says "=" for a proved-exact decimal
    half = certify(sympy.Rational(1, 2), 3)
    assert p.print(b.Approx(b.Int(4), b.Decimal(certify(4, 3)))) == "<mn>4</mn>"
    assert tree(p.print(b.Approx(b.Frac(b.Int(1), b.Int(2)), b.Decimal(half))))[0][1].text == "="
    # token names are escaped wherever they go
    note = p.print(b.Note(("the key ", b.Token("<img src=x>"), " & more")))
    assert "<img" not in note and "&lt;img src=x&gt;" in note and "&amp; more" in note
    ET.fromstring(note)                                  # well formed
    for node in (b.Exp(neg), product, b.Sub(b.Sym("A"), (b.Token("I"), b.Token("love")))):
        only_core(p.print(node))


# -- whole pages in headless Chromium ---------------------------------------------------------

def test_a_missing_browser_skips_outside_ci_and_fails_in_ci(monkeypatch):
    import browser as harness
    monkeypatch.setattr(harness, "chromium_path", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        harness.need_browser()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but .*chromium"):
        harness.need_browser()


LESSON_FIGURES = ("0.136", "0.432", "1.86", "6.32", "1.70")

CROSS = dict(tokens=["le", "chat"], key_tokens=["the", "cat", "sat"], title="Cross-attention: le chat",
             X=[[1, 0, 1], [0, 1, -1]], X_kv=[[1, 1, 0], [0, 1, 1], [1, 0, 0]],
             W_q=[[1, 0], [0, 1], [1, 1]], W_k=[[1, 0], [0, 1], [0, 0]], W_v=[[1, 2], [0, -1], [3, 0]])


def problems() -> dict[str, sa.Problem]:
    return {
        "lesson": sa.load_example("i-love-cats"),
        "causal": sa.load_example("i-love-cats-causal"),
        "cross": sa.Problem(**CROSS),
        "symbolic": sa.Problem(Q=sa.symbol_matrix("q", 2, 2), K=[[1, 0], [0, 1]], V=[[1], [2]], scale=1,
                               title="Symbolic queries"),
    }


def build(problem: sa.Problem):
    """The document of a problem and its HTML page, as `explain --format html` writes them."""
    from symattn.document.build.trace import build_document
    from symattn.document.printers.html import print_html
    doc = build_document(sa.attend(problem))
    return doc, print_html(doc)


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (skip or, with CI=true, fail without one)."""
    yield shared_browser()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Each problem's document and the path of its written page, built once."""
    out = {}
    folder = tmp_path_factory.mktemp("html")
    for name, problem in problems().items():
        doc, html = build(problem)
        path = folder / f"{name}.html"
        path.write_text(html, encoding="utf-8")
        out[name] = (doc, path)
    return out


VISIBLE_MATH_SIZES = """els => els.map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; })"""
STACKED = """f => { const [a, b] = f.children; return a.getBoundingClientRect().bottom <= b.getBoundingClientRect().top + 1; }"""


@pytest.mark.parametrize("name", ["lesson", "causal", "cross", "symbolic"])
def test_page_renders_offline_with_typeset_math(browser, pages, name, tmp_path):
    doc, path = pages[name]
    shown = browser.open(path)
    try:
        page = shown.page
        shown.assert_clean()                      # nothing fetched, no console or page errors
        assert page.evaluate("document.documentElement.lang") == "en"
        assert page.evaluate("document.characterSet") == "UTF-8"
        sizes = page.eval_on_selector_all("math:not(.pop math)", VISIBLE_MATH_SIZES)
        assert len(sizes) >= 5
        assert all(w > 0 and h > 0 for w, h in sizes), sizes
        # MathML is laid out as math, not as unknown inline tags: a fraction's numerator sits above
        # its denominator
        fractions = page.locator("mfrac:not(.pop mfrac)")
        if fractions.count():
            assert fractions.first.evaluate(STACKED)
        # the page lists the document's sections, in order, as its h2 headings
        from symattn.document.printers.base import section_numbers
        numbers = section_numbers(doc)
        expected = [f"{numbers[id(s)]}. {s.title}" if id(s) in numbers else s.title for s in doc.sections]
        assert page.locator("h2").all_inner_texts() == expected
        assert page.locator("h1").count() == 1
        # every data table's headers say what they head
        assert page.locator("th:not([scope])").count() == 0
        page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    finally:
        shown.close()


def test_lesson_figures_are_in_the_rendered_text(browser, pages):
    _, path = pages["lesson"]
    shown = browser.open(path)
    try:
        text = shown.page.inner_text("body")
        for figure in LESSON_FIGURES + ("0.00744", "0.755", "0.238"):
            assert figure in text, figure
        assert "I love cats" in text
    finally:
        shown.close()


def test_lesson_reads_with_javascript_off(browser, pages):
    _, path = pages["lesson"]
    shown = browser.open(path, javascript=False)
    try:
        shown.assert_clean()
        text = shown.page.inner_text("body")
        for figure in LESSON_FIGURES:
            assert figure in text, figure
        cell = shown.page.locator("table.heatmap td[tabindex='0']").first
        cell.focus()
        assert cell.locator(".pop").is_visible()     # the popup is CSS: it needs no script
    finally:
        shown.close()


POPUP_ON_TOP = """p => { const r = p.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return r.width > 0 && r.height > 0 && hit !== null && p.contains(hit); }"""


def test_symbolic_formulas_are_equalities_not_approximations(browser, pages):
    """Where symbols leave no decimal, the page writes "=" between formulas, never "≈"."""
    _, path = pages["symbolic"]
    shown = browser.open(path)
    try:
        page = shown.page
        for section in ("#sec-softmax", "#sec-output"):
            text = page.inner_text(section)
            assert "\u2248" not in text and "=" in text, text
        assert page.locator("table.heatmap").count() == 0        # no numbers to shade
    finally:
        shown.close()


def test_hostile_names_show_as_text_and_nothing_runs(browser, tmp_path):
    """Token names and a title full of markup are escaped: they read literally, nothing executes."""
    names = ["<b>x</b>", "a&\"b'", "<img src=x onerror=alert(1)>"]
    problem = sa.Problem(Q=[[1, 0], [0, 1], [1, 1]], K=[[1, 0], [0, 1]], V=[[1], [2]], tokens=names,
                         key_tokens=["</td>", "<!--"], title="<script>alert(1)</script>")
    _, html = build(problem)
    assert "<script" not in html and "<b>" not in html and "<img" not in html and "<!--" not in html
    path = tmp_path / "hostile.html"
    path.write_text(html, encoding="utf-8")
    shown = browser.open(path)
    try:
        shown.assert_clean()
        page = shown.page
        assert page.locator("h1").inner_text() == "<script>alert(1)</script>"
        assert page.locator("b, img, script").count() == 0
        heads = page.locator("table.heatmap thead th").all_inner_texts()
        assert heads == ["</td>", "<!--"]
        rows = page.locator("table.heatmap tbody th").all_inner_texts()
        assert rows == names
        assert page.locator("table.heatmap td[tabindex='0']").count() == 6
    finally:
        shown.close()


def test_heat_map_cell_shows_its_exact_value_on_focus_and_hover(browser, pages):
    _, path = pages["lesson"]
    shown = browser.open(path)
    try:
        page = shown.page
        cells = page.locator("table.heatmap td[tabindex='0']")
        assert cells.count() == 9
        popups = page.locator("table.heatmap .pop")
        assert all(not popups.nth(k).is_visible() for k in range(9))
        # weights[I, love] = 1/(e^(−2/√3) + 2) ≈ 0.432 (mpmath: 0.43193710122...)
        cell = cells.nth(1)
        assert "0.432" in cell.get_attribute("title")
        page.locator("h1").click()                    # a starting point outside the map
        page.keyboard.press("Tab")                    # keyboard: the first cell is the first stop
        assert page.evaluate("document.activeElement.tagName") == "TD"
        page.keyboard.press("Tab")
        popup = cell.locator(".pop")
        assert popup.is_visible()
        assert popup.evaluate(POPUP_ON_TOP)           # drawn on top, not clipped or covered
        words = popup.inner_text()
        assert "0.432" in words and "love" in words
        assert popup.locator("mfrac").count() >= 1    # the exact value, typeset
        page.screenshot(path=str(path.with_suffix(".focus.png")))
        page.mouse.move(0, 0)
        page.locator("h1").click()
        assert not popup.is_visible()
        cells.nth(4).hover()
        assert cells.nth(4).locator(".pop").is_visible()
        assert "0.909" in cells.nth(4).locator(".pop").inner_text()
    finally:
        shown.close()


def test_print_stylesheet_hides_popups_and_keeps_the_shading(browser, pages):
    _, path = pages["lesson"]
    shown = browser.open(path)
    try:
        page = shown.page
        page.emulate_media(media="print")
        cell = page.locator("table.heatmap td[tabindex='0']").nth(4)
        cell.focus()
        assert not cell.locator(".pop").is_visible()
        adjust = cell.evaluate("c => getComputedStyle(c).printColorAdjust")
        assert adjust == "exact"
        assert cell.evaluate("c => getComputedStyle(c).backgroundColor") != "rgba(0, 0, 0, 0)"
    finally:
        shown.close()
