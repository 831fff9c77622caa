"""symattn serve's downloads follow the view, and the page has an icon.

The derivation downloads (LaTeX, HTML, JSON, PDF) take the page's decimal places and worked
rows (``/download/KIND?places=N&row=I,J``, what the address holds after ``&pl=`` and ``&r=``)
and are, byte for byte, what ``symattn explain --places N --rows I,J`` writes (the PDF: its
text, read back with pdftotext).  In Chromium, the buttons read the view from the address.
``/favicon.ico`` and the icon the page links are a vendored SVG, under the same headers.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import quote

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_server import LESSON, ROOT, open_page, start_server, stop_server  # noqa: E402

pytest.importorskip("starlette")

TEX = shutil.which("pdflatex") is not None or shutil.which("latexmk") is not None
SECURITY = ("content-security-policy", "x-content-type-options", "x-frame-options", "referrer-policy",
            "cache-control")


@pytest.fixture(scope="module")
def server():
    running = start_server("--budget", "20")
    yield running
    stop_server(running)


def cli(*argv: str) -> bytes:
    return subprocess.run([sys.executable, "-m", "symattn", *argv], cwd=ROOT, capture_output=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout


def download(server, kind: str, query: str, problem: dict = LESSON) -> tuple[int, bytes, dict]:
    return server.request("POST", f"/download/{kind}{query}", json.dumps(problem).encode())


def weights() -> list[list[float]]:
    """The lesson's attention weights in float64, written here for the test."""
    X, Wq, Wk = LESSON["X"], LESSON["W_q"], LESSON["W_k"]

    def mm(a, b):
        return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]

    rows = []
    for q in mm(X, Wq):
        s = [sum(x * y for x, y in zip(q, k)) / math.sqrt(3) for k in mm(X, Wk)]
        e = [math.exp(v - max(s)) for v in s]
        rows.append([v / sum(e) for v in e])
    return rows


@pytest.mark.parametrize("query, flags", [
    ("?places=4&row=1", ("--places", "4", "--rows", "1")),
    ("?digits=5&row=0,2", ("--digits", "5", "--rows", "0,2")),
    ("?places=0&row=2,1", ("--places", "0", "--rows", "2,1")),
])
@pytest.mark.parametrize("kind", ["latex", "html", "json"])
def test_a_download_is_the_file_explain_writes_for_the_view(server, kind, query, flags):
    status, body, headers = download(server, kind, query)
    assert status == 200, body[:300]
    assert body == cli("explain", "--format", kind, *flags)
    assert all(h in headers for h in SECURITY)


def test_the_view_changes_the_file(server):
    """Not the default file under another name: the places and rows are in it."""
    plain = download(server, "json", "")[1]
    viewed = json.loads(download(server, "json", "?places=4&row=0,2")[1])
    assert plain != json.dumps(viewed)
    assert viewed["worked_rows"] == ["I", "cats"]
    shown = viewed["steps"]["weights"]["decimal"]
    assert all(len(x.split(".")[1]) == 4 for row in shown for x in row)
    assert [[float(x) for x in row] for row in shown] == [[round(w, 4) for w in row] for row in weights()]
    latex = download(server, "latex", "?places=4&row=1")[1].decode()
    assert latex != download(server, "latex", "")[1].decode()
    assert "4 decimal places" in latex


@pytest.mark.parametrize("query, words", [
    ("?row=7", "row 7: "),
    ("?row=1,", "row must be a query's 0-based index"),
    ("?row=a", "row must be a query's 0-based index"),
    ("?row=" + ",".join(["0"] * 65), "row lists 65 rows, over the page's 64"),        # the page's cap on worked rows
    ("?places=31", "places must be a whole number from 0 to 30"),
    ("?places=2&digits=3", "give digits or places, not both"),
])
@pytest.mark.parametrize("kind", ["latex", "json"])
def test_a_bad_view_is_refused_in_one_line(server, kind, query, words):
    status, body, headers = download(server, kind, query)
    assert status == 422 and words in json.loads(body)["error"], body
    assert "\n" not in json.loads(body)["error"]
    assert all(h in headers for h in SECURITY)
    assert server.answering()


@pytest.mark.skipif(not TEX or shutil.which("pdftotext") is None, reason="needs TeX and pdftotext")
def test_the_pdf_follows_the_view(server, tmp_path):
    status, body, _ = download(server, "pdf", "?places=4&row=1")
    assert status == 200 and body.startswith(b"%PDF-")
    cli("explain", "--pdf", "--places", "4", "--rows", "1", "-o", str(tmp_path / "cli.pdf"))
    (tmp_path / "served.pdf").write_bytes(body)

    def text(name: str) -> str:
        return subprocess.run(["pdftotext", "-layout", str(tmp_path / name), "-"], capture_output=True,
                              text=True, check=True).stdout

    assert text("served.pdf") == text("cli.pdf")
    assert "4 decimal places" in text("served.pdf")


def test_the_favicon(server):
    status, body, headers = server.request("GET", "/favicon.ico")
    assert status == 200 and headers["content-type"] == "image/svg+xml"
    assert all(h in headers for h in SECURITY)
    root = ET.fromstring(body)                 # well-formed, an SVG, nothing that runs
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert not [e for e in root.iter() if e.tag.endswith("script") or e.tag.endswith("foreignObject")]
    assert not [a for e in root.iter() for a in e.attrib if a.startswith("on") or "href" in a]
    assert server.request("GET", "/static/favicon.svg")[1] == body
    assert server.request("HEAD", "/favicon.ico")[0] == 200
    page = server.request("GET", "/")[1].decode()
    head = page[:page.index("</head>")]
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in head


@pytest.fixture()
def tab(server):
    yield from open_page(server, accept_downloads=True)


def test_the_icon_loads_under_the_policy(tab):
    size = tab.evaluate("""() => new Promise((done) => {
        const img = new Image();
        img.onload = () => done([img.naturalWidth, img.naturalHeight]);
        img.onerror = () => done(null);
        img.src = document.querySelector('link[rel=icon]').href; })""")
    assert size == [48, 48]


def test_the_buttons_take_the_view_from_the_address(server, tab, tmp_path):
    """The address a page wrote (places 4, row love): each download is explain's file for it."""
    address = "#p=" + quote(json.dumps(LESSON)) + "&pl=4&r=1"
    tab.goto(server.origin + "/" + address, wait_until="load")
    tab.wait_for_function("() => document.body.dataset.derived !== undefined", timeout=30_000)
    for kind, extension in (("latex", "tex"), ("json", "json"), ("html", "html")):
        with tab.expect_download(timeout=60_000) as waiting:
            tab.click(f'[data-download="{kind}"]')
        path = tmp_path / f"saved.{extension}"
        waiting.value.save_as(path)
        assert path.read_bytes() == cli("explain", "--format", kind, "--places", "4", "--rows", "1"), kind
