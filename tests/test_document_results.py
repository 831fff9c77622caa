"""Results other than a Trace print through the document model: multi-head results,
proofs of facts and check reports, as text, LaTeX, JSON and HTML (issue 10, scope 2).

Each format lists the same sections; the values are real (cross-checked with
float64 on the small mild demo, or against each other's JSON contract); the LaTeX
compiles with pdflatex and reads back; the HTML opens offline in headless Chromium
with nothing fetched and no console errors; the Jupyter fragment's CSS cannot
restyle the page around it.
"""

from __future__ import annotations

import html
import json
import math
import re
import subprocess

import pytest

import symattn as sa
from symattn import cli
from symattn.document.blocks import Document, LabelledMatrix, ProofLines, Report, Verdicts
from symattn.document.build.check import build_check_document
from symattn.document.build.facts import build_facts_document
from symattn.document.build.heads import build_heads_document
from symattn.document.formats import WRAPPER, print_document, scoped_css
from symattn.document.printers.json import document_json
from symattn.document.support.texutil import tex_escape
from symattn.heads.heads import DEMO_TOML, MultiHeadProblem, attend_heads

from browser import shared_browser
from test_pdf import need_tex

CLAIMS = "weights = [[0.14, 0.43, 0.48], [0.00089, 0.909, 0.0903], [0.00744, 0.755, 0.238]]\n"


# -- the three documents, built once ----------------------------------------------------

@pytest.fixture(scope="module")
def heads():
    result = attend_heads(MultiHeadProblem.from_toml_text(DEMO_TOML))
    return result, build_heads_document(result)


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    path = tmp_path_factory.mktemp("claims") / "claims.toml"
    path.write_text(CLAIMS, encoding="utf-8")
    proofs = sa.facts.check_facts(sa.load_example("i-love-cats"), sa.facts.Claims.from_toml(path))
    return proofs, build_facts_document(proofs, "Facts: I love cats")


@pytest.fixture(scope="module")
def check():
    from symattn.check.figfile import example_figures
    figures = example_figures("i-love-cats")
    verdicts = figures.check()
    return verdicts, build_check_document(verdicts, figures.title)


@pytest.fixture(scope="module")
def docs(heads, facts, check) -> dict[str, Document]:
    return {"heads": heads[1], "facts": facts[1], "check": check[1]}


# -- outlines ----------------------------------------------------------------------------

def json_outline(doc: Document) -> list[tuple[str | None, str]]:
    data = json.loads(json.dumps(document_json(doc), ensure_ascii=False))
    return [(s["number"], s["title"]) for s in data["sections"]]


def _split(title: str) -> tuple[str | None, str]:
    m = re.match(r"^(\d+[a-z]?)\. (.+)$", title)
    return (m.group(1), m.group(2)) if m else (None, title)


def text_outline(text: str) -> list[tuple[str | None, str]]:
    """Section headings are the lines at column 0 after the title and its rule."""
    lines = text.splitlines()[2:]
    return [_split(line) for line in lines if line and not line.startswith(" ")]


def latex_outline(tex: str) -> list[tuple[str | None, str]]:
    return [_split(t) for t in re.findall(r"^\\subsection\*\{(.*)\}$", tex, flags=re.M)]


def html_outline(page: str) -> list[tuple[str | None, str]]:
    return [_split(html.unescape(re.sub(r"<[^>]+>", "", raw)).strip())
            for raw in re.findall(r"<h2[^>]*>(.*?)</h2>", page, flags=re.S)]


@pytest.mark.parametrize("name", ["heads", "facts", "check"])
def test_every_format_lists_the_same_sections(docs, name):
    doc = docs[name]
    outline = json_outline(doc)
    assert len(outline) >= 2
    assert latex_outline(print_document(doc, "latex")) == [(n, tex_escape(t)) for n, t in outline]
    assert html_outline(print_document(doc, "html")) == outline
    if isinstance(doc, Report):
        # check: the terminal keeps its one-line-per-figure listing (docs/checking.md, grep, CI logs):
        # the sections' blocks in order, with no heading lines
        lines = print_document(doc, "text").splitlines()
        assert not any(line in {t for _, t in outline} or re.match(r"^\d+\. ", line) for line in lines)
        assert lines[0] == doc.title and lines[-1].startswith("48 figures")
    else:
        assert text_outline(print_document(doc, "text")) == outline


# -- the values are the results' own ----------------------------------------------------

def _float_attention(X, Wq, Wk, Wv):
    """Attention in float64 with math.exp (the demo is small and mild), row by row."""
    mul = lambda A, B: [[sum(a * b for a, b in zip(row, col)) for col in zip(*B)] for row in A]  # noqa: E731
    Q, K, V = mul(X, Wq), mul(X, Wk), mul(X, Wv)
    weights = []
    for q in Q:
        s = [sum(a * b for a, b in zip(q, k)) / math.sqrt(len(q)) for k in K]
        e = [math.exp(x - max(s)) for x in s]
        weights.append([x / sum(e) for x in e])
    return weights, mul(weights, V)


def _floats(block: LabelledMatrix) -> list[list[float]]:
    return [[float(str(c.value)) for c in row] for row in block.decimals]


def test_heads_document_values_agree_with_float64_and_the_json(heads):
    result, doc = heads
    X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
    Wq = [[1, 0, 1, 0, 1, 0], [1, 0, 0, 0, 0, 1], [0, 0, 1, 1, 0, 0], [0, 1, 1, 0, 1, 1]]
    Wk = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
    Wv = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
    per_head = [_float_attention(X, [r[3 * h:3 * h + 3] for r in Wq], Wk, Wv) for h in range(2)]
    blocks = {s.key: [c for c in s.children if isinstance(c, LabelledMatrix)] for s in doc.sections}
    for h in range(2):
        weights, output = blocks[f"head-{h}"]
        for got, want in ((weights, per_head[h][0]), (output, per_head[h][1])):
            for row_got, row_want in zip(_floats(got), want):
                assert row_got == pytest.approx(row_want, rel=6e-3)
    assert [str(c.value) for c in blocks["head-0"][0].decimals[0]] == ["0.136", "0.432", "0.432"]
    (out,) = blocks["output"]                       # W_o averages the two heads
    mean = [[(a + b) / 2 for a, b in zip(r0, r1)] for r0, r1 in zip(per_head[0][1], per_head[1][1])]
    for row_got, row_want in zip(_floats(out), mean):
        assert row_got == pytest.approx(row_want, rel=6e-3)
    (avg,) = blocks["average"]
    avg_want = [[(a + b) / 2 for a, b in zip(r0, r1)] for r0, r1 in zip(per_head[0][0], per_head[1][0])]
    for row_got, row_want in zip(_floats(avg), avg_want):
        assert row_got == pytest.approx(row_want, rel=6e-3)
    # the document's decimals are the JSON contract's, entry for entry
    from symattn.document.build.heads import heads_json
    data = heads_json(result)
    assert [[str(c.value) for c in r] for r in out.decimals] == data["output"]["decimal"]
    assert [[str(c.value) for c in r] for r in avg.decimals] == data["average_weights"]["decimal"]


def test_facts_holds_flags_agree_with_the_json(facts):
    proofs, doc = facts
    flags = [p.to_json()["holds"] for p in proofs]
    assert False in flags and True in flags               # the claimed 0.48 breaks rows-sum-to-one
    titles = [s.title for s in doc.sections if s.key.startswith("fact-")]
    assert [t.endswith("✓ holds") for t in titles] == flags
    assert [t.endswith("✗ FAILS") for t in titles] == [not f for f in flags]
    assert [s.key for s in doc.sections if s.key.startswith("fact-")] == [f"fact-{p.fact}" for p in proofs]
    held = sum(flags)
    page = print_document(doc, "html")
    assert f"{held} of {len(proofs)} facts hold" in page
    rows = next(s for s in doc.sections if s.key == "fact-rows-sum-to-one")
    assert rows.title == "rows-sum-to-one: ✗ FAILS"
    lines = [line.text for b in rows.children if isinstance(b, ProofLines) for line in b.lines]
    assert any(x.startswith("claimed row 'I': 0.14 + 0.43 + 0.48 = 1.05 ≠ 1") for x in lines)
    assert "Counterexample: " in print_document(doc, "text")


def test_lesson_check_report_has_48_verdicts_in_every_format(check):
    verdicts, doc = check
    (table,) = [b for s in doc.sections for b in s.children if isinstance(b, Verdicts)]
    assert len(table.rows) == 48 == len(verdicts) and all(r.right for r in table.rows)
    assert [r.target for r in table.rows] == [v.target for v in verdicts]
    first = next(r for r in table.rows if r.target == "weights[I]" and r.variant is None)
    assert first.expected == "0.136, 0.432, 0.432" and first.code == "rounded"
    data = document_json(doc)
    (block,) = [b for s in data["sections"] for b in s["blocks"] if b["type"] == "Verdicts"]
    assert len(block["rows"]) == 48
    page = print_document(doc, "html")
    assert page.count('<tr class="right">') == 48
    text = print_document(doc, "text")
    assert text.count("\n✓ ") == 48 and text.endswith("48 figures: 48 right, 0 not (16 exact, 32 rounded)\n")
    assert print_document(doc, "latex").count(r"\item[$\checkmark$]") == 48


def test_a_wrong_figure_shows_expected_value_and_mistake(tmp_path):
    from symattn.check.figfile import load_figures
    path = tmp_path / "homework.toml"
    path.write_text('example = "i-love-cats"\n'
                    '[[figure]]\ntarget = "weights[I]"\ntext = "0.136, 0.432, 0.432"\n'
                    '[[figure]]\ntarget = "scaled[love, love]"\ntext = "5.33"\n', encoding="utf-8")
    verdicts = load_figures(str(path)).check()
    doc = build_check_document(verdicts, "Homework")
    assert [v.code for v in verdicts] == ["rounded", "mistake"]     # 16/3: d_k instead of √d_k
    page = print_document(doc, "html")
    row = re.search(r'<tr class="not-right">(.*?)</tr>', page).group(1)
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
    assert cells[0] == "scaled[love, love]" and cells[1] == "5.33" and cells[2] == "✗ mistake"
    assert cells[3] == "9.24" and cells[4] == verdicts[1].mistake and cells[4]
    # the Why column is the message with its values typeset: √d_k, 16/√3 ≈ 9.23760 and 9.24 in MathML
    why = re.findall(r'<td class="left">(.*?)</td>', row)[0]
    words = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<math.*?</math>", "|", why)))
    assert verdicts[1].message.startswith(words.split("|")[0]) and words.count("|") == 3
    assert words.endswith("gives at 2 decimal places; scaled[love, love] = | rounds to |")
    assert "<mfrac><mn>16</mn><msqrt><mn>3</mn></msqrt></mfrac><mo>≈</mo><mn>9.23760</mn>" in why


# -- the command line --------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["heads"], ["facts", "--fact", "rows-sum-to-one"],
                                  ["check", "--example", "i-love-cats"]])
@pytest.mark.parametrize("fmt", ["text", "latex", "html", "json"])
def test_every_command_takes_format_and_o(argv, fmt, tmp_path, capsys):
    target = tmp_path / f"out.{fmt}"
    assert cli.main([*argv, "--format", fmt, "-o", str(target)]) == 0
    assert capsys.readouterr().out == ""
    written = target.read_text(encoding="utf-8")
    assert cli.main([*argv, "--format", fmt]) == 0
    assert capsys.readouterr().out == written
    if fmt == "html":
        assert written.startswith("<!doctype html>") and "<h2" in written
    if fmt == "latex":
        assert written.startswith(r"\documentclass") and written.rstrip().endswith(r"\end{document}")
    if fmt == "json":
        json.loads(written)
        alias = ["--json"]
        assert cli.main([*argv, *alias]) == 0
        assert capsys.readouterr().out == written            # --json is --format json


def test_latex_alias_and_conflicting_flags(capsys):
    assert cli.main(["facts", "--fact", "rows-sum-to-one", "--latex"]) == 0
    latex = capsys.readouterr().out
    assert cli.main(["facts", "--fact", "rows-sum-to-one", "--format", "latex", "--fragment"]) == 0
    assert capsys.readouterr().out == latex and r"\documentclass" not in latex     # --latex: the body, as before
    assert cli.main(["facts", "--fact", "rows-sum-to-one", "--format", "latex"]) == 0
    assert capsys.readouterr().out.startswith(r"\documentclass")
    for argv in (["heads", "--json", "--format", "latex"], ["facts", "--latex", "--json"],
                 ["check", "--example", "i-love-cats", "--fragment"], ["heads", "--fragment"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("symattn: error:")


# -- LaTeX compiles ------------------------------------------------------------------------

def test_latex_of_each_result_compiles_and_reads_back(docs, tmp_path):
    need_tex()
    from symattn.document.pdf import compile_tex
    expected = {"heads": ["0.136", "0.432", "1.92", "6.97", "Averaged weights"],
                "facts": ["rows-sum-to-one", "FAILS", "Counterexample"],
                "check": ["48 figures: 48 right", "weights[I]", "rounded"]}
    for name, doc in docs.items():
        pdf = tmp_path / f"{name}.pdf"
        pdf.write_bytes(compile_tex(print_document(doc, "latex"), name))
        text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
        for words in expected[name]:
            assert words in text, (name, words)


# -- HTML in a real browser ---------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    yield shared_browser()


@pytest.mark.parametrize("name", ["heads", "facts", "check"])
def test_html_page_renders_offline(browser, docs, name, tmp_path):
    doc = docs[name]
    path = tmp_path / f"{name}.html"
    path.write_text(print_document(doc, "html"), encoding="utf-8")
    shown = browser.open(path)
    try:
        shown.assert_clean()
        page = shown.page
        assert page.locator("h1").inner_text() == doc.title
        assert [_split(t) for t in page.locator("h2").all_inner_texts()] == json_outline(doc)
        assert page.locator("th:not([scope])").count() == 0
        body = page.inner_text("body")
        if name == "heads":
            assert all(x in body for x in ("0.136", "0.432", "1.92", "6.97"))
            sizes = page.eval_on_selector_all("math", "els => els.map(e => e.getBoundingClientRect().width)")
            assert sizes and all(w > 0 for w in sizes)
        if name == "check":
            assert page.locator("table.verdicts tbody tr").count() == 48
            assert "48 figures: 48 right" in body
        if name == "facts":
            assert "rows-sum-to-one: ✗ FAILS" in body and "✓ holds" in body
        page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    finally:
        shown.close()


HOST = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>notebook</title>
<style>body { font-family: serif; color: rgb(10, 20, 30); } h2 { font-size: 40px; }</style></head>
<body><h2 id="host-h">A notebook cell</h2><p id="host-p">text of the notebook</p>{fragment}
<table id="host-t"><tr><td>host cell</td></tr></table></body></html>"""

STYLE = """sel => { const s = getComputedStyle(document.querySelector(sel));
  return [s.fontFamily, s.color, s.fontSize, s.padding, s.borderBottomWidth, s.maxWidth]; }"""


def test_jupyter_fragments_are_scoped(browser, heads, tmp_path):
    """Trace._repr_html_ and MultiHeadResult._repr_html_: fragments whose CSS styles only their
    own wrapper; the host page's headings, paragraphs and tables look the same with them."""
    trace = sa.attend(sa.load_example("i-love-cats"))
    fragments = {"trace": trace._repr_html_(), "heads": heads[0]._repr_html_(),
                 "proof": sa.facts.prove("rows-sum-to-one", trace)._repr_html_()}
    for name, fragment in fragments.items():
        assert "<html" not in fragment and "<body" not in fragment and "<head" not in fragment
        assert fragment.startswith(f'<div class="{WRAPPER}"')
        css = re.search(r"<style>(.*?)</style>", fragment, flags=re.S).group(1)
        selectors = [sel.strip() for rule in re.findall(r"([^{}]+)\{[^{}]*\}", css) for sel in rule.split(",")]
        assert selectors and all(sel.startswith(f".{WRAPPER}") for sel in selectors), selectors
    assert "0.136" in fragments["trace"] and "1.92" in fragments["heads"]
    bare = tmp_path / "bare.html"
    bare.write_text(HOST.replace("{fragment}", ""), encoding="utf-8")
    shown = browser.open(bare)
    try:
        before = {sel: shown.page.evaluate(STYLE, sel) for sel in ("#host-h", "#host-p", "#host-t td", "body")}
    finally:
        shown.close()
    for name, fragment in fragments.items():
        path = tmp_path / f"{name}.html"
        path.write_text(HOST.replace("{fragment}", fragment), encoding="utf-8")
        shown = browser.open(path)
        try:
            shown.assert_clean()
            after = {sel: shown.page.evaluate(STYLE, sel) for sel in before}
            assert after == before, name
            inner = shown.page.evaluate(STYLE, f".{WRAPPER} h2:not(.{WRAPPER}-title)")
            assert inner != before["#host-h"]               # the fragment's own style applies inside
        finally:
            shown.close()


def test_scoped_css_drops_print_rules_and_scopes_the_root():
    css = scoped_css("html { color: red; }\nh1, p { margin: 0; }\n@media print { h1 { color: blue; } }\n")
    assert css == ".symattn-doc { color: red; }\n.symattn-doc h1, .symattn-doc p { margin: 0; }"
