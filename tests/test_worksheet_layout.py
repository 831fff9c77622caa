"""``worksheet --layout compact`` (issue 25): fewer pages for printing, compiled by real TeX.

Also the common-wrong-answers tables of the standard layout: consecutive mistake matrices
are spaced apart (they ran into each other, bracket against bracket)."""

from __future__ import annotations

import re
import subprocess

import pytest

from clirun import cli
from symattn.classroom.worksheets.layouts import LAYOUTS, layout
from symattn.document.support.latexdoc import PREAMBLE, preamble
from symattn.errors import WorksheetError
from test_pdf import need_tex, pdf_text


def _pages(pdf) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))


def _overfull(folder, name: str) -> list[float]:
    log = (folder / f"{name}.log").read_text(encoding="utf-8", errors="replace")
    return [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]


def test_the_layouts_are_data_and_the_standard_preamble_is_unchanged():
    assert list(LAYOUTS) == ["standard", "compact"]
    assert preamble(**layout("standard").preamble()) == PREAMBLE
    compact = preamble("a4", **layout("compact").preamble())
    assert compact.startswith("\\documentclass[10pt,a4paper]{article}")
    assert "\\usepackage[margin=1.5cm,vmargin=1.2cm]{geometry}" in compact
    assert "\\setlength{\\arraycolsep}{3pt}" in compact and "\\abovedisplayskip{4pt" in compact
    with pytest.raises(WorksheetError, match="no layout 'tiny'; the layouts are standard, compact"):
        layout("tiny")


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    need_tex()
    root = tmp_path_factory.mktemp("layouts")
    for name in LAYOUTS:
        done = cli("worksheet", "--example", "i-love-cats", "--pdf", "--layout", name, "-o", name, cwd=root)
        assert done.returncode == 0, done.stderr
    return root


def test_compact_takes_fewer_pages_and_says_everything(lesson):
    standard, compact = lesson / "standard", lesson / "compact"
    counts = {(d.name, kind): _pages(d / f"version-A-{kind}.pdf") for d in (standard, compact)
              for kind in ("sheet", "key")}
    assert counts == {("standard", "sheet"): 4, ("standard", "key"): 6,
                      ("compact", "sheet"): 2, ("compact", "key"): 5}
    sheet = pdf_text(compact / "version-A-sheet.pdf")
    for n, what in enumerate(("queries", "keys", "values", "scores", "scaled scores",
                              "attention weights", "output"), start=1):
        assert re.search(rf"{n}\. Compute the {what}", sheet), what
    key, full = pdf_text(compact / "version-A-key.pdf"), pdf_text(standard / "version-A-key.pdf")
    for text in ("Common wrong answers", "Worked derivation", "unscaled", "values-from-keys",
                 "0.136", "1.86"):
        assert text in key and text in full
    tex = (compact / "version-A-key.tex").read_text(encoding="utf-8")
    assert "mistake & what it gives & mistake & what it gives \\\\ \\midrule" in tex   # two per line
    sheet_tex = (compact / "version-A-sheet.tex").read_text(encoding="utf-8")
    assert "\\vspace{2.1cm}" in sheet_tex and "\\rule{0pt}{1.5em}" in sheet_tex    # weights: 6 cm × 0.35
    assert "\\vspace{6.0cm}" in (standard / "version-A-sheet.tex").read_text(encoding="utf-8")


@pytest.mark.parametrize("template", ["kv-cache", "online-softmax", "rope", "window"])
def test_compact_templates_compile_without_overfull_boxes(template, tmp_path):
    need_tex()
    done = cli("worksheet", "--template", template, "--layout", "compact", "-o", "w", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for name in ("version-A-sheet", "version-A-key"):
        run = subprocess.run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error",
                              f"{name}.tex"], cwd=tmp_path / "w", capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-2000:]
        assert _overfull(tmp_path / "w", name) == [], (template, name)


def test_mistake_matrices_are_spaced_apart(tmp_path):
    done = cli("worksheet", "--template", "window", "-o", "w", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    tex = (tmp_path / "w" / "version-A-key.tex").read_text(encoding="utf-8")
    table = tex[tex.index("\\textbf{Question 3} (weights)"):]
    table = table[:table.index("\\bottomrule")]
    rows = [line for line in table.splitlines() if "\\begin{bmatrix}" in line]
    assert len(rows) == 10
    assert all(r.endswith("\\\\ \\addlinespace[0.8ex]") for r in rows[:-1]) and rows[-1].endswith("$ \\\\")
    assert "\\begin{tabular}{@{}>{\\raggedright\\arraybackslash}m{6.2cm}l@{}}" in table


def test_html_compact_sheet_has_less_working_space(tmp_path):
    sizes = {}
    for name in LAYOUTS:
        done = cli("worksheet", "--example", "i-love-cats", "--format", "html", "--layout", name,
                   "-o", name, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        html = (tmp_path / name / "version-A-sheet.html").read_text(encoding="utf-8")
        sizes[name] = [float(x) for x in re.findall(r'class="work" style="height:([\d.]+)cm"', html)]
    assert sizes["standard"] == [3.0, 3.0, 3.0, 3.5, 2.5, 6.0, 3.5]
    assert sizes["compact"] == [round(x * 0.35, 1) for x in sizes["standard"]]
