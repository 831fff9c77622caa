"""symattn serve's worksheet download takes ``symattn worksheet``'s options (the page's form).

Over plain HTTP against a real server: for each set of options the zip holds, byte for byte,
the folder ``symattn worksheet`` writes with the same flags (templates, random versions and
their knobs, questions, points, layout, paper, HTML, keys without the derivation, places);
choices that do not go together are refused with the CLI's own message, word for word, and
the page's caps (10 versions, short texts, the menus) hold.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_server import LESSON, ROOT, open_page, start_server, stop_server  # noqa: E402

pytest.importorskip("starlette")


@pytest.fixture(scope="module")
def server():
    running = start_server("--budget", "30")
    yield running
    stop_server(running)


def cli(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "symattn", *argv], cwd=ROOT, capture_output=True,
                          text=True, check=check, env={**os.environ, "PYTHONPATH": str(ROOT)})


def unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        return {info.filename: archive.read(info) for info in archive.infolist()}


def folder(path: Path) -> dict[str, bytes]:
    return {f"worksheet/{p.name}": p.read_bytes() for p in sorted(path.iterdir())}


def query_of(options: dict[str, str]) -> str:
    return "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in options.items())


def lesson_file(server, tmp_path: Path) -> Path:
    path = tmp_path / "lesson.toml"
    path.write_bytes(server.request("POST", "/toml", json.dumps(LESSON).encode())[1])
    return path


CASES = [   # (the download's query, the CLI's flags); "LESSON": the page's problem as a file
    ({"template": "rope", "versions": "2", "seed": "3", "questions": "Q_rot,K_rot,weights", "points": "2",
      "layout": "compact", "paper": "a4", "no-derivation": "1", "places": "2"},
     ["--template", "rope", "--versions", "2", "--seed", "3", "--questions", "Q_rot,K_rot,weights", "--points", "2",
      "--layout", "compact", "--paper", "a4", "--no-derivation", "--places", "2"]),
    ({"format": "html", "questions": "weights,output", "points": "weights=3,output=2"},
     ["LESSON", "--format", "html", "--questions", "weights,output", "--points", "weights=3,output=2"]),
    ({"versions": "2", "seed": "5", "square-dk": "1", "allow-ties": "1", "min-weight": "0.001",
      "no-separate": "1", "digits": "4"},
     ["LESSON", "--versions", "2", "--seed", "5", "--square-dk", "--allow-ties", "--min-weight", "0.001",
      "--no-separate", "--digits", "4"]),
    ({"template": "alibi"}, ["--template", "alibi"]),
]


@pytest.mark.parametrize("options, flags", CASES)
def test_the_zip_is_the_folder_worksheet_writes_for_the_same_flags(server, tmp_path, options, flags):
    status, body, headers = server.request("POST", "/download/worksheet" + query_of(options),
                                           json.dumps(LESSON).encode())
    assert status == 200, body[:300]
    argv = [str(lesson_file(server, tmp_path)) if f == "LESSON" else f for f in flags]
    cli("worksheet", *argv, "-o", str(tmp_path / "cli"))
    files = unzip(body)
    assert files == folder(tmp_path / "cli")
    if "template" in options:
        assert headers["content-disposition"].startswith(f'attachment; filename="{options["template"]}-worksheet.zip"')


def test_the_options_change_the_zip(server):
    """Not the default worksheet under another name: the options are in the files."""
    plain = unzip(server.request("POST", "/download/worksheet", json.dumps(LESSON).encode())[1])
    html = unzip(server.request("POST", "/download/worksheet?format=html", json.dumps(LESSON).encode())[1])
    assert "worksheet/version-A-sheet.tex" in plain and "worksheet/version-A-sheet.html" in html
    assert "worksheet/version-A-sheet.tex" not in html
    compact = unzip(server.request("POST", "/download/worksheet?layout=compact&paper=a4",
                                   json.dumps(LESSON).encode())[1])
    assert b"a4paper" in compact["worksheet/version-A-sheet.tex"]
    assert b"a4paper" not in plain["worksheet/version-A-sheet.tex"]
    asked = json.loads(unzip(server.request("POST", "/download/worksheet?questions=weights",
                                            json.dumps(LESSON).encode())[1])["worksheet/worksheet.json"])
    assert asked["questions"] == ["weights"]


@pytest.mark.parametrize("options, flags", [
    ({"format": "html", "pdf": "1"}, ["--format", "html", "--pdf"]),
    ({"square-dk": "1"}, ["--square-dk"]),
    ({"allow-ties": "1"}, ["--allow-ties"]),
    ({"no-separate": "1"}, ["--no-separate"]),
    ({"format": "html", "paper": "a4"}, ["--format", "html", "--paper", "a4"]),
    ({"questions": "Q,nope"}, ["--questions", "Q,nope"]),
    ({"questions": ","}, ["--questions", ","]),
    ({"points": "weights=x"}, ["--points", "weights=x"]),
    ({"points": "1,2"}, ["--points", "1,2"]),
    ({"min-weight": "2"}, ["--min-weight", "2"]),
    ({"min-weight": "a"}, ["--min-weight", "a"]),
])
def test_a_refusal_is_the_cli_message_word_for_word(server, tmp_path, options, flags):
    if "pdf" in options and not (os.path.exists("/usr/bin/pdflatex") or os.path.exists("/usr/bin/latexmk")):
        pytest.skip("needs TeX (without it the page refuses the PDF first)")
    status, body, _ = server.request("POST", "/download/worksheet" + query_of(options),
                                     json.dumps(LESSON).encode())
    assert status == 422
    error = json.loads(body)["error"]
    said = cli("worksheet", str(lesson_file(server, tmp_path)), *flags, "-o", str(tmp_path / "out"),
               check=False)
    assert said.returncode == 2 and not (tmp_path / "out").exists()
    message = said.stderr.strip().splitlines()[-1]
    message = message.removeprefix("symattn: error: ").split(" (see 'symattn worksheet --help')")[0]
    message = message.removeprefix("argument --min-weight: ")
    assert error == message
    assert server.answering()


@pytest.mark.parametrize("query, words", [
    ("?template=evil", "template must be one of plain, rope"),
    ("?layout=wide", "layout must be one of standard, compact"),
    ("?paper=a3", "paper must be one of letter, a4"),
    ("?format=pdf", "format must be one of latex, html"),
    ("?square-dk=yes", "square-dk is 1 (on) or 0 (off)"),
    ("?selfcheck=1", "no worksheet option 'selfcheck'"),
    ("?bogus=1", "no worksheet option 'bogus'"),
    ("?questions=" + "Q," * 150, "questions is 300 characters, over the page's 200"),
    ("?versions=11&seed=1", "versions must be a whole number from 1 to 10"),
    ("?places=2&digits=3", "give digits or places, not both"),
])
def test_the_page_caps_and_menus(server, query, words):
    status, body, _ = server.request("POST", "/download/worksheet" + query, json.dumps(LESSON).encode())
    assert status == 422 and words in json.loads(body)["error"], body
    assert server.answering()


@pytest.fixture()
def tab(server):
    yield from open_page(server, accept_downloads=True)


def fill_form(tab) -> None:
    """The form as a teacher fills it: template rope, 2 versions of seed 4, two questions,
    2 points each, the compact layout on A4, keys without the derivation, d_k a square."""
    tab.select_option('#worksheet-options select[data-option="template"]', "rope")
    tab.fill("#worksheet-versions", "2")
    tab.fill("#worksheet-seed", "4")
    tab.fill('#worksheet-options input[data-option="questions"]', "Q_rot, weights")
    tab.fill('#worksheet-options input[data-option="points"]', "2")
    tab.select_option('#worksheet-options select[data-option="layout"]', "compact")
    tab.select_option('#worksheet-options select[data-option="paper"]', "a4")
    tab.check("#worksheet-no-derivation")
    tab.check("#worksheet-square-dk")


def test_the_form_in_chromium_gives_the_folder_of_the_same_flags(tab, tmp_path):
    fill_form(tab)
    with tab.expect_download(timeout=120_000) as waiting:
        tab.click('[data-download="worksheet"]')
    assert waiting.value.suggested_filename == "rope worksheet.zip"
    path = tmp_path / "saved.zip"
    waiting.value.save_as(path)
    cli("worksheet", "--template", "rope", "--versions", "2", "--seed", "4", "--questions", "Q_rot, weights",
        "--points", "2", "--layout", "compact", "--paper", "a4", "--no-derivation", "--square-dk",
        "-o", str(tmp_path / "cli"))
    assert unzip(path.read_bytes()) == folder(tmp_path / "cli")


def test_a_refused_option_is_the_cli_message_on_the_page(tab):
    tab.select_option('#worksheet-options select[data-option="format"]', "html")
    tab.select_option('#worksheet-options select[data-option="paper"]', "a4")
    tab.click('[data-download="worksheet"]')
    tab.wait_for_function("() => document.body.dataset.downloadRefused === 'worksheet'", timeout=30_000)
    assert tab.text_content("#download-status") == ("--paper sets the LaTeX paper size: leave out --format "
                                                    "html (or --selfcheck), or --paper")


def screenshots(outdir: Path) -> None:
    """The download section with the worksheet form filled in (docs/serve.md)."""
    from browser import Browser, chromium_path

    server = start_server()
    browser = Browser(chromium_path() or "/usr/bin/chromium")
    try:
        tab = browser.browser.new_context(viewport={"width": 1100, "height": 1000}).new_page()
        tab.goto(server.origin + "/", wait_until="load")
        fill_form(tab)
        tab.locator("#downloads").screenshot(path=str(outdir / "serve-downloads.png"))
    finally:
        browser.close()
        stop_server(server)


if __name__ == "__main__":
    screenshots(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images")
