"""Screenshots of the HTML pages for docs/formats.md, taken in headless Chromium.

Run by hand (not a test): ``python3 tests/screenshots.py [OUTDIR]`` writes
PNGs (default docs/images/) of the lesson's page, its softmax and heat-map
sections with a focused cell's popup, the causal example's masked weights,
the pages of ``heads``, ``facts``, ``check``, ``floatref`` and ``grade``, and
(with pdflatex and pdftoppm) the first PDF page of the lesson, the float report
and the class.  It uses the same harness as tests/test_html.py (network off).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import symattn as sa  # noqa: E402
from browser import Browser, chromium_path  # noqa: E402
from symattn.document.build.trace import build_document  # noqa: E402
from symattn.document.formats import print_document  # noqa: E402
from symattn.document.printers.html import print_html  # noqa: E402

WIDTH = 1000
CLAIMS = "weights = [[0.14, 0.43, 0.48], [0.00089, 0.909, 0.0903], [0.00744, 0.755, 0.238]]\n"
HOMEWORK = """example = "i-love-cats"
[[figure]]
target = "weights[I]"
text = "0.136, 0.432, 0.432"
[[figure]]
target = "sqrt(d_k)"
text = "1.73"
[[figure]]
target = "scaled[love, love]"
text = "5.33"
[[figure]]
target = "weights[cats]"
text = "0.0074, 0.75, 0.24"
[[figure]]
target = "output[I]"
text = "1.86, 6.32, 1.71"
"""
CLASS = """student,weights[I],output[I],scaled[love, love]
ana,"0.136, 0.432, 0.432","1.86, 6.32, 1.70",2.31
ben,"0.14, 0.43, 0.43","1.86, 6.32, 1.71",5.33
cy,x,"1.86, 6.32, 1.70",9.24
dee,"0.136, 0.432, 0.432","1.86, 6.32, 1.70",9.24
"""


def result_documents(folder: Path) -> dict:
    """The documents of heads, facts, check, floatref and grade shown in docs/formats.md."""
    import numpy as np

    from symattn import floatref
    from symattn.check.figfile import load_figures
    from symattn.check.grading.grade import Versions, grade
    from symattn.document.build.check import build_check_document
    from symattn.document.build.facts import build_facts_document
    from symattn.document.build.floatref import build_floatref_document
    from symattn.document.build.grade import build_grade_document
    from symattn.document.build.heads import build_heads_document
    from symattn.heads.heads import DEMO_TOML, MultiHeadProblem, attend_heads

    claims = folder / "claims.toml"
    claims.write_text(CLAIMS, encoding="utf-8")
    homework = folder / "homework.toml"
    homework.write_text(HOMEWORK, encoding="utf-8")
    proofs = sa.facts.check_facts(sa.load_example("i-love-cats"), sa.facts.Claims.from_toml(claims))
    rng = np.random.default_rng(8)                   # the float32 kernel of tests/test_document_reports.py
    Q, K, V = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
    S = (Q @ np.swapaxes(K, 1, 2)) / np.float32(2)
    A = np.exp(S - S.max(-1, keepdims=True))
    A /= A.sum(-1, keepdims=True)
    lesson = Path(sa.__file__).parent / "examples" / "i-love-cats.toml"
    report = grade(Versions.from_path(str(lesson)), CLASS.encode(), source="class.csv")
    return {"heads": build_heads_document(attend_heads(MultiHeadProblem.from_toml_text(DEMO_TOML))),
            "facts": build_facts_document(proofs, "Facts: I love cats"),
            "check": build_check_document(load_figures(str(homework)).check()),
            "floatref": build_floatref_document(floatref.ulp_report(A @ V, Q, K, V), max_ulp=1),
            "grade": build_grade_document(report, "class.csv")}


def pdf_pages(tex: str, pages: dict[int, Path], folder: Path, resolution: int = 60) -> None:
    """Pages of a LaTeX document, compiled and rendered with pdftoppm (``{page: png}``)."""
    from symattn.document.pdf import compile_tex

    out = next(iter(pages.values()))
    pdf = folder / f"{out.stem}.pdf"
    pdf.write_bytes(compile_tex(tex, out.stem))
    for page, png in pages.items():
        subprocess.run(["pdftoppm", "-png", "-r", str(resolution), "-f", str(page), "-l", str(page), "-singlefile",
                        str(pdf), str(png.with_suffix(""))], check=True)
        print(png)


def _page(example: str, folder: Path) -> Path:
    path = folder / f"{example}.html"
    path.write_text(print_html(build_document(sa.attend(sa.load_example(example)))), encoding="utf-8")
    return path


def _section(shown, ident: str, out: Path, focus_cell: int | None = None) -> None:
    """A screenshot of one section (``sec-<key>``), optionally with a heat-map cell focused."""
    page = shown.page
    section = page.locator(f"#sec-{ident}")
    if focus_cell is not None:
        section.locator("table.heatmap td[tabindex='0']").nth(focus_cell).focus()
    x, y, w, h = section.evaluate(
        "e => { const r = e.getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, r.height]; }")
    extra = 60 if focus_cell is not None else 0          # room for the popup below the map
    page.screenshot(path=str(out), full_page=True,
                    clip={"x": x - 10, "y": y - 10, "width": w + 20, "height": h + 20 + extra})
    print(out)


def main(outdir: Path) -> None:
    executable = chromium_path()
    if executable is None:
        sys.exit("screenshots need Debian's chromium (apt-get install chromium)")
    outdir.mkdir(parents=True, exist_ok=True)
    browser = Browser(executable)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            lesson = browser.open(_page("i-love-cats", folder))
            lesson.assert_clean()
            lesson.page.set_viewport_size({"width": WIDTH, "height": 1000})
            lesson.page.screenshot(path=str(outdir / "lesson-html.png"))
            print(outdir / "lesson-html.png")
            _section(lesson, "scaled", outdir / "lesson-html-scaled.png")
            _section(lesson, "softmax", outdir / "lesson-html-softmax.png")
            _section(lesson, "weights", outdir / "lesson-html-heatmap.png", focus_cell=1)
            lesson.close()
            causal = browser.open(_page("i-love-cats-causal", folder))
            causal.assert_clean()
            causal.page.set_viewport_size({"width": WIDTH, "height": 1000})
            _section(causal, "weights", outdir / "causal-html-heatmap.png")
            causal.close()
            docs = result_documents(folder)
            for name, section in (("heads", "head-0"), ("facts", "fact-rows-sum-to-one"), ("check", None),
                                  ("floatref", None), ("grade", None)):
                path = folder / f"{name}.html"
                path.write_text(print_document(docs[name], "html"), encoding="utf-8")
                shown = browser.open(path)
                shown.assert_clean()
                shown.page.set_viewport_size({"width": WIDTH, "height": 1000})
                if section is None:
                    shown.page.locator("main").screenshot(path=str(outdir / f"{name}-html.png"))
                    print(outdir / f"{name}-html.png")
                else:
                    _section(shown, section, outdir / f"{name}-html.png")
                shown.close()
            if shutil.which("pdflatex") and shutil.which("pdftoppm"):
                from symattn.document.trace_latex import render_latex
                pdf_pages(render_latex(sa.attend(sa.load_example("i-love-cats"))),
                          {1: outdir / "lesson-derivation.png", 3: outdir / "lesson-softmax-heatmap.png"},
                          folder, resolution=80)
                for name in ("floatref", "grade"):
                    pdf_pages(print_document(docs[name], "latex"), {1: outdir / f"{name}-pdf.png"}, folder)
    finally:
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent / "docs" / "images")
