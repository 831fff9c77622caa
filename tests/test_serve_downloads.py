"""symattn serve's downloads over plain HTTP, against a real server: each file is compared
with what the CLI writes for the same problem (``explain --format latex|html|json``,
``explain --pdf`` read back with pdftotext, ``worksheet -o DIR`` file by file), its
Content-Type and Content-Disposition checked, and every refusal answered in one line
with the security headers (a 404 and a 500 too).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from urllib.parse import unquote

import pytest

from serve_server import LESSON, ROOT, free_port, start_server, stop_server

pytest.importorskip("starlette")

TEX = shutil.which("pdflatex") is not None or shutil.which("latexmk") is not None
SECURITY = ("content-security-policy", "x-content-type-options", "x-frame-options", "referrer-policy",
            "cache-control")


@pytest.fixture(scope="module")
def server():
    running = start_server("--budget", "20")
    yield running
    stop_server(running)


def cli(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "symattn", *argv], cwd=cwd, capture_output=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def download(server, kind: str, problem: dict, query: str = "") -> tuple[int, bytes, dict]:
    return server.request("POST", f"/download/{kind}{query}", json.dumps(problem).encode())


def pdf_text(data: bytes, tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def lesson_weights() -> list[list[float]]:
    """The lesson's attention weights in float64, written here for the test."""
    X, Wq, Wk = LESSON["X"], LESSON["W_q"], LESSON["W_k"]

    def mm(a, b):
        return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]

    Q, K = mm(X, Wq), mm(X, Wk)
    rows = []
    for q in Q:
        s = [sum(x * y for x, y in zip(q, k)) / math.sqrt(3) for k in K]
        e = [math.exp(v - max(s)) for v in s]
        rows.append([v / sum(e) for v in e])
    return rows


def sig3(x: float) -> str:
    """A float64 to 3 significant digits as a plain decimal (0.00089045 -> 0.000890)."""
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


@pytest.mark.parametrize("kind, fmt, media", [("latex", "latex", "application/x-tex; charset=utf-8"),
                                              ("html", "html", "text/html; charset=utf-8"),
                                              ("json", "json", "application/json; charset=utf-8")])
def test_the_derivation_is_the_file_explain_writes(server, kind, fmt, media):
    status, body, headers = download(server, kind, LESSON, "?digits=4")
    assert status == 200, body[:200]
    assert headers["content-type"] == media
    extension = {"latex": "tex"}.get(kind, kind)
    assert headers["content-disposition"] == (f'attachment; filename="I-love-cats.{extension}"; '
                                              f"filename*=UTF-8''I%20love%20cats.{extension}")
    assert body == cli("explain", "--format", fmt, "--digits", "4").stdout
    assert all(h in headers for h in SECURITY)


def test_the_json_holds_the_float64_weights(server):
    status, body, _ = download(server, "json", LESSON)
    shown = json.loads(body)["steps"]["weights"]["decimal"]
    assert shown[1][0] == "0.000890"                  # 0.00089045 to 3 digits, the zero kept
    assert [[float(x) for x in row] for row in shown] == [[float(f"{w:.3g}") for w in row]
                                                           for row in lesson_weights()]


@pytest.mark.skipif(not TEX or shutil.which("pdftotext") is None, reason="needs TeX and pdftotext")
def test_the_pdf_reads_back_as_explain_pdf(server, tmp_path):
    edited = {**LESSON, "W_q": [[3, 0, 1], *LESSON["W_q"][1:]]}
    status, body, headers = download(server, "pdf", edited)
    assert status == 200 and headers["content-type"] == "application/pdf" and body.startswith(b"%PDF-")
    assert headers["content-disposition"].startswith('attachment; filename="I-love-cats.pdf"')
    problem = tmp_path / "edited.toml"
    problem.write_bytes(server.request("POST", "/toml", json.dumps(edited).encode())[1])
    cli("explain", str(problem), "--pdf", "-o", str(tmp_path / "cli.pdf"))
    served = pdf_text(body, tmp_path, "served.pdf")
    assert served == pdf_text((tmp_path / "cli.pdf").read_bytes(), tmp_path, "again.pdf")
    assert "I love cats" in served and "3 significant digits" in served
    assert not list(tmp_path.glob("tex-*"))
    assert server.answering()


def unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        return {info.filename: archive.read(info) for info in archive.infolist()}


def folder(path: Path) -> dict[str, bytes]:
    return {f"worksheet/{p.name}": p.read_bytes() for p in sorted(path.iterdir())}


def test_the_worksheet_zip_is_the_folder_worksheet_writes(server, tmp_path):
    status, body, headers = download(server, "worksheet", LESSON)
    assert status == 200 and headers["content-type"] == "application/zip"
    assert headers["content-disposition"].startswith('attachment; filename="I-love-cats-worksheet.zip"')
    files = unzip(body)
    assert {"worksheet/version-A-sheet.tex", "worksheet/version-A-key.tex", "worksheet/version-A.toml",
            "worksheet/worksheet.json", "worksheet/worksheet.txt"} <= set(files)
    problem = tmp_path / "A.toml"                          # the version's own problem file
    problem.write_bytes(files["worksheet/version-A.toml"])
    cli("worksheet", str(problem), "-o", str(tmp_path / "cli"))
    assert files == folder(tmp_path / "cli")               # byte for byte, the manifest's hashes too
    manifest = files["worksheet/worksheet.txt"].decode()
    for name, data in files.items():
        if not name.endswith("worksheet.txt"):
            assert f"{name.split('/')[1]} sha256:{hashlib.sha256(data).hexdigest()}" in manifest


def test_random_versions_are_those_of_the_same_seed(server, tmp_path):
    status, body, _ = download(server, "worksheet", LESSON, "?versions=3&seed=7&digits=2")
    assert status == 200, body[:300]
    files = unzip(body)
    assert {f"worksheet/version-{v}-key.tex" for v in "ABC"} <= set(files)
    problem = tmp_path / "lesson.toml"
    problem.write_bytes(server.request("POST", "/toml", json.dumps(LESSON).encode())[1])
    cli("worksheet", str(problem), "--versions", "3", "--seed", "7", "--digits", "2", "-o", str(tmp_path / "cli"))
    assert files == folder(tmp_path / "cli")


@pytest.mark.skipif(not TEX or shutil.which("pdftotext") is None, reason="needs TeX and pdftotext")
def test_the_worksheet_zip_with_pdfs(server, tmp_path):
    status, body, _ = download(server, "worksheet", LESSON, "?pdf=1")
    assert status == 200
    files = unzip(body)
    code = json.loads(files["worksheet/worksheet.json"])["versions"][0]["code"]
    for name in ("version-A-sheet", "version-A-key", "all-sheets", "all-keys"):
        assert files[f"worksheet/{name}.pdf"].startswith(b"%PDF-")
    sheet = pdf_text(files["worksheet/version-A-sheet.pdf"], tmp_path, "sheet.pdf")
    assert code in sheet and "I love cats" in sheet
    key = pdf_text(files["worksheet/version-A-key.pdf"], tmp_path, "key.pdf")
    assert "0.000890" in key                              # the weight 0.00089045 (float64) to 3 digits
    assert round(lesson_weights()[1][0], 6) == 0.00089


@pytest.mark.parametrize("query, words", [
    ("?versions=11&seed=1", "versions must be a whole number from 1 to 10"),
    ("?versions=0&seed=1", "versions must be a whole number from 1 to 10"),
    ("?versions=2", "random versions need a seed"),
    ("?versions=2&seed=-1", "random versions need a seed"),
    ("?seed=3", "seed applies to random versions"),
    ("?digits=31", "digits must be a whole number from 1 to 30"),
])
def test_worksheet_options_are_refused_in_one_line(server, query, words):
    status, body, headers = download(server, "worksheet", LESSON, query)
    assert status == 422 and words in json.loads(body)["error"]
    assert all(h in headers for h in SECURITY)


def test_a_bad_problem_or_kind_or_origin_is_refused(server):
    status, body, headers = download(server, "latex", {**LESSON, "W_q": [["2^(10^9)", 0, 1], *LESSON["W_q"][1:]]})
    assert status == 422 and "MAX_POWER_EXPONENT" in json.loads(body)["error"]
    assert json.loads(body)["field"] == "W_q"
    status, body, headers = download(server, "exe", LESSON)
    assert status == 404 and all(h in headers for h in SECURITY)
    status, _, headers = server.request("POST", "/download/latex", json.dumps(LESSON).encode(),
                                        {"Origin": "http://evil.example"})
    assert status == 403 and all(h in headers for h in SECURITY)
    assert server.answering()


@pytest.mark.parametrize("title, plain, written", [
    ('a "quoted"\\ \u2028X-Evil: 1;', "a-quoted-X-Evil-1", 'a "quoted"\\ X-Evil: 1;'),
    ("../../etc/passwd", "etc-passwd", "../../etc/passwd"),
    ("Ünïcode ∑ 注意", "n-code", "Ünïcode ∑ 注意"),
    ("∑", "derivation", "∑"),
    ("plain_name-1.2", "plain_name-1.2", None),
])
def test_the_file_name_is_escaped(server, title, plain, written):
    status, body, headers = download(server, "latex", {**LESSON, "title": title})
    assert status == 200, body[:200]
    header = headers["content-disposition"]
    assert header.startswith(f'attachment; filename="{plain}.tex"')
    assert "\r" not in header and "\n" not in header and header.isascii()
    if written is None:
        assert "filename*" not in header
    else:
        assert unquote(header.split("filename*=UTF-8''")[1]) == f"{written}.tex"


def test_without_tex_the_pdf_is_refused_and_its_button_off(tmp_path):
    running = start_server(env={"PATH": str(tmp_path)})       # no pdflatex, no latexmk
    try:
        status, page, _ = running.request("GET", "/")
        assert b'data-download="pdf" disabled' in page and b'id="worksheet-pdf"' not in page
        status, body, headers = running.request("POST", "/download/pdf", json.dumps(LESSON).encode())
        assert status == 422 and "needs pdflatex or latexmk" in json.loads(body)["error"]
        status, body, _ = running.request("POST", "/download/worksheet?pdf=1", json.dumps(LESSON).encode())
        assert status == 422 and "needs pdflatex or latexmk" in json.loads(body)["error"]
        assert running.request("POST", "/download/latex", json.dumps(LESSON).encode())[0] == 200
    finally:
        stop_server(running)


def test_every_error_answer_carries_the_security_headers(server):
    """The refusals of the guard and of Starlette's router (404, 405) and the app's own."""
    answers = [server.request("GET", "/", headers={"Host": "evil.example"}),                   # 400
               server.request("POST", "/derive", json.dumps(LESSON).encode(), {"Origin": None}),  # 403
               server.request("GET", "/nowhere"),                                                # 404
               server.request("GET", "/derive"),                                                 # 405
               server.request("POST", "/derive", b"[" * 300_000),                                # 413
               server.request("POST", "/derive", b"{bad")]                                       # 422
    assert [a[0] for a in answers] == [400, 403, 404, 405, 413, 422]
    for status, _, headers in answers:
        assert all(h in headers for h in SECURITY), (status, headers)
        assert headers["content-security-policy"].startswith("default-src 'none'")


class Failing:
    """A pool whose every job hits a bug in symattn (the worker's answer "bug")."""

    async def derive(self, problem, digits=3):
        raise RuntimeError("the worker failed: a bug")


def test_a_500_carries_the_security_headers():
    """Through uvicorn on 127.0.0.1, the app as ``symattn serve`` builds it with a failing pool."""
    import http.client

    import uvicorn

    from symattn.serve.app import HEADERS, make_app

    port = free_port()
    app = make_app(LESSON, "<p>lesson</p>", hosts=frozenset({f"127.0.0.1:{port}"}), pool=Failing())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/derive", json.dumps(LESSON).encode(),
                     {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"})
        reply = conn.getresponse()
        body = reply.read()
        headers = {k.lower(): v for k, v in reply.getheaders()}
        assert reply.status == 500 and b"Traceback" not in body and b"a bug" not in body
        for name, value in HEADERS.items():
            assert headers[name.lower()] == value
        conn.close()                       # uvicorn closes a connection whose request raised
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/", headers={"Host": f"127.0.0.1:{port}"})   # still answering
        page = conn.getresponse()
        assert page.status == 200 and b"lesson" in page.read()
        conn.close()
    finally:
        server.should_exit = True
        thread.join(10)
