"""symattn serve's download buttons in Chromium: edit the lesson, click each button, read the
saved file's bytes back.

The server is real (tests/serve_server.py) and the page is driven by Playwright on Debian's
Chromium (``executable_path``), every request outside the server's origin aborted and
recorded.  Each download is the last problem derived (the edited one, not a refused edit
after it): the LaTeX, HTML and JSON equal what ``symattn explain`` writes for the edited
problem, the PDF reads back with pdftotext as ``explain --pdf``'s does, and the worksheet zip
opens and holds the files ``symattn worksheet`` writes.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_server import LESSON, ROOT, open_page, start_server, stop_server  # noqa: E402

pytest.importorskip("starlette")

TEX = shutil.which("pdflatex") is not None or shutil.which("latexmk") is not None
EDITED = {**LESSON, "W_q": [[3, 0, 1], *LESSON["W_q"][1:]]}


@pytest.fixture(scope="module")
def server():
    running = start_server("--budget", "20")
    yield running
    stop_server(running)


@pytest.fixture()
def page(server):
    yield from open_page(server, accept_downloads=True)


def edit(tab, label: str, text: str, outcome: str) -> None:
    """Type into one input and wait until the page has the server's answer to that edit."""
    before = tab.evaluate(f"document.body.dataset.{outcome} || '0'")
    tab.fill(f'#grids input[aria-label="{label}"]', text)
    tab.wait_for_function(f"(before) => (document.body.dataset.{outcome} || '0') !== before",
                          arg=before, timeout=30_000)


def saved(tab, selector: str, tmp_path: Path) -> tuple[str, bytes]:
    """Click a download button; the file's suggested name and its bytes."""
    with tab.expect_download(timeout=60_000) as waiting:
        tab.click(selector)
    download = waiting.value
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    return download.suggested_filename, path.read_bytes()


def edited_file(tmp_path: Path) -> Path:
    """The edited lesson as a problem file, written here (not by the server)."""
    rows = ", ".join("[" + ", ".join(str(v) for v in row) + "]" for row in EDITED["W_q"])
    text = "\n".join([f'title = "{EDITED["title"]}"', 'tokens = ["I", "love", "cats"]',
                      *(f"{k} = [" + ", ".join("[" + ", ".join(str(v) for v in r) + "]" for r in EDITED[k]) + "]"
                        for k in ("X", "W_k", "W_v")), f"W_q = [{rows}]"]) + "\n"
    path = tmp_path / "edited.toml"
    path.write_text(text, encoding="utf-8")
    return path


def cli(*argv: str) -> bytes:
    return subprocess.run([sys.executable, "-m", "symattn", *argv], cwd=ROOT, capture_output=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout


def edited_weights() -> list[list[float]]:
    """The edited lesson's weights in float64, written here for the test."""
    def mm(a, b):
        return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]

    Q, K = mm(EDITED["X"], EDITED["W_q"]), mm(EDITED["X"], EDITED["W_k"])
    out = []
    for q in Q:
        s = [sum(x * y for x, y in zip(q, k)) / math.sqrt(3) for k in K]
        e = [math.exp(v - max(s)) for v in s]
        out.append([v / sum(e) for v in e])
    return out


def edit_then_refuse(tab) -> None:
    """W_q[0][0] becomes 3 (derived), then an entry the CLI refuses (the derivation stays)."""
    edit(tab, "W_q[0][0]", "3", "derived")
    edit(tab, "W_q[3][1]", "2^(10^9)", "refused")


def sig3(x: float) -> str:
    """A float64 to 3 significant digits as a plain decimal (0.00089045 -> 0.000890)."""
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


@pytest.mark.parametrize("kind, fmt, extension", [("latex", "latex", "tex"), ("html", "html", "html"),
                                                  ("json", "json", "json")])
def test_the_derivation_downloads_are_the_edited_problems(page, tmp_path, kind, fmt, extension):
    edit_then_refuse(page)
    name, data = saved(page, f'[data-download="{kind}"]', tmp_path)
    assert name == f"I love cats.{extension}"
    assert data == cli("explain", str(edited_file(tmp_path)), "--format", fmt)
    if kind == "json":
        shown = json.loads(data)["steps"]["weights"]["decimal"]
        assert [[float(x) for x in row] for row in shown] == [[float(f"{w:.3g}") for w in row]
                                                               for row in edited_weights()]


def test_the_digits_chosen_go_into_the_download(page, tmp_path):
    page.select_option('select[aria-label="digits"]', "4")
    page.wait_for_function("() => location.hash.endsWith('&d=4')", timeout=30_000)
    _, data = saved(page, '[data-download="latex"]', tmp_path)
    assert data == cli("explain", "--format", "latex", "--digits", "4")


@pytest.mark.skipif(not TEX or shutil.which("pdftotext") is None, reason="needs TeX and pdftotext")
def test_the_pdf_download_reads_back(page, tmp_path):
    edit_then_refuse(page)
    name, data = saved(page, '[data-download="pdf"]', tmp_path)
    assert name == "I love cats.pdf" and data.startswith(b"%PDF-")
    cli("explain", str(edited_file(tmp_path)), "--pdf", "-o", str(tmp_path / "cli.pdf"))

    def text(path: Path) -> str:
        return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                              check=True).stdout

    served = text(tmp_path / name)
    assert served == text(tmp_path / "cli.pdf")
    assert "I love cats" in served
    assert sig3(edited_weights()[1][1]) in served        # the weight of (love, love), float64


def test_the_worksheet_zip_opens_with_sheet_key_and_versions(page, tmp_path):
    edit_then_refuse(page)
    page.fill("#worksheet-versions", "2")
    page.fill("#worksheet-seed", "11")
    name, data = saved(page, '[data-download="worksheet"]', tmp_path)
    assert name == "I love cats worksheet.zip"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        files = {n: archive.read(n) for n in archive.namelist()}
    assert {f"worksheet/version-{v}-{part}" for v in "AB" for part in ("sheet.tex", "key.tex")} <= set(files)
    meta = json.loads(files["worksheet/worksheet.json"])
    assert meta["seed"] == 11 and [v["id"] for v in meta["versions"]] == ["A", "B"]
    cli("worksheet", str(edited_file(tmp_path)), "--versions", "2", "--seed", "11", "-o", str(tmp_path / "cli"))
    assert files == {f"worksheet/{p.name}": p.read_bytes() for p in (tmp_path / "cli").iterdir()}


def test_a_refused_download_says_why_on_the_page(page):
    page.fill("#worksheet-versions", "40")
    page.click('[data-download="worksheet"]')
    page.wait_for_function("() => document.body.dataset.downloadRefused === 'worksheet'", timeout=30_000)
    assert "versions must be a whole number from 1 to 10" in page.text_content("#download-status")
