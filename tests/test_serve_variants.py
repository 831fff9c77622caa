"""symattn serve in Chromium: the variant keys, the mask clicked cell by cell, the worked row
and the decimal places, and the address that holds them all.

The server is real (tests/serve_server.py) and the page is driven by Playwright on Debian's
Chromium (the fixtures of tests/test_serve_browser.py: every foreign request aborted, no
console error but a refused edit's 422).  The weights the page shows are compared with an
independent float64 computation written here (the sink's extra column, the soft-cap's tanh,
ALiBi's bias, RoPE's turned pairs), the derivation's text with the page ``symattn explain
--format html`` prints for the same problem and options, and a refusal with the message the
CLI prints for the same file.  Run as a script to write docs/images/serve-variants.png and
serve-cells.png: ``python3 tests/test_serve_variants.py [OUTDIR]``.
"""

# ruff: noqa: F811  (the fixtures page and server are test_serve_browser's, imported by name)
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_server import LESSON, ROOT, start_server, stop_server  # noqa: E402
from test_serve_browser import (edit, matmul, matrix, page, server, shown_weight,  # noqa: E402,F401
                                three_digits, value_toml, weight_titles)

pytest.importorskip("starlette")


# -- an independent float64 attention with the variants ------------------------------------
def weights(problem: dict, *, Q=None, K=None, scale=None, sees=None, sink=None, softcap=None, slope=None):
    """The softmax's weights in float64: scaled scores, ALiBi's −slope·(i − j), the cap
    c·tanh(z / c), the mask (``sees(i, j)``), and a sink column e^s in every denominator."""
    X = problem["X"]
    Q = Q or matmul(X, problem["W_q"])
    K = K or matmul(X, problem["W_k"])
    scale = scale or 1 / math.sqrt(len(Q[0]))
    A = []
    for i, q in enumerate(Q):
        z = [scale * sum(a * b for a, b in zip(q, k)) for k in K]
        if slope is not None:
            z = [v - slope * (i - j) for j, v in enumerate(z)]
        if softcap is not None:
            z = [softcap * math.tanh(v / softcap) for v in z]
        z = [v if sees is None or sees(i, j) else -math.inf for j, v in enumerate(z)]
        top = max(z)
        e = [math.exp(v - top) for v in z]
        extra = 0.0 if sink is None else math.exp(sink - top)
        A.append([v / (sum(e) + extra) for v in e])
    return A


def rope_rows(M, theta):
    """Each row turned pair by pair (interleaved: (0, 1), (2, 3)) by position·θ_i."""
    out = []
    for p, row in enumerate(M):
        turned = list(row)
        for i, t in enumerate(theta):
            x, y, phi = row[2 * i], row[2 * i + 1], p * t
            turned[2 * i], turned[2 * i + 1] = x * math.cos(phi) - y * math.sin(phi), x * math.sin(phi) + y * math.cos(phi)
        out.append(turned)
    return out


def flat(A, digits=3):
    return [three_digits(w, digits) for row in A for w in row]


def shown(tab) -> list[float]:
    return [shown_weight(t) for t in weight_titles(tab)]


def changed(tab, action, outcome: str = "derived") -> None:
    """Do something on the page and wait for the server's answer to it."""
    before = tab.evaluate(f"document.body.dataset.{outcome} || '0'")
    action()
    tab.wait_for_function(f"(b) => (document.body.dataset.{outcome} || '0') !== b", arg=before, timeout=30_000)


def cli(problem: dict, tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    toml = tmp_path / "problem.toml"
    toml.write_text("\n".join(f"{k} = {toml_value(v)}" for k, v in problem.items()) + "\n", encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "symattn", "explain", str(toml), *options], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def toml_value(v) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return value_toml(v)


def cli_text(tab, html: str) -> str:
    """The text of the ``<main>`` of a page explain printed, as Chromium reads it."""
    other = tab.context.new_page()
    other.route("**/*", lambda r: r.abort())
    other.set_content(html)
    text = other.text_content("main")
    other.close()
    return text.strip()


def derivation(tab) -> str:
    return tab.text_content("#derivation").strip()


def address(tab) -> dict:
    from urllib.parse import unquote

    return json.loads(unquote(tab.url.split("#p=", 1)[1].split("&", 1)[0]))


# -- the page offers the table's variant keys ---------------------------------------------
def test_every_variant_key_of_the_table_is_offered_with_its_help_line(page):
    from symattn.problem.keys.table import KEYS

    expected = [(k.name, k.doc) for k in KEYS
                if k.kind == "key" and k.name not in ("tokens", "key_tokens", "scale", "mask")]
    assert [name for name, _ in expected] == ["rope", "sink", "alibi", "softcap", "tiles", "decode", "backward"]
    offered = page.eval_on_selector_all("#grids [data-variant]", "bs => bs.map(b => [b.dataset.variant, "
                                        "b.querySelector('.help').textContent])")
    assert [tuple(x) for x in offered] == expected
    assert not any(page.is_checked(f'input[aria-label="{name} on"]') for name, _ in expected)


def test_a_sink_a_soft_cap_and_alibi_give_the_float64_weights(page):
    changed(page, lambda: page.check('input[aria-label="sink on"]'))
    assert page.input_value('input[aria-label="sink s"]') == "0"
    got = shown(page)
    assert got == flat(weights(LESSON, sink=0))
    assert sum(got[:3]) < 0.97              # row I: the sink takes the rest (float64: 0.9589)
    edit(page, "sink s", "-1", "derived")
    assert shown(page) == flat(weights(LESSON, sink=-1))
    assert address(page)["sink"] == -1
    changed(page, lambda: page.uncheck('input[aria-label="sink on"]'))
    assert "sink" not in address(page) and shown(page) == flat(weights(LESSON))

    changed(page, lambda: page.check('input[aria-label="softcap on"]'))
    assert shown(page) == flat(weights(LESSON, softcap=5))
    edit(page, "softcap c", "2", "derived")
    assert shown(page) == flat(weights(LESSON, softcap=2))
    changed(page, lambda: page.uncheck('input[aria-label="softcap on"]'))

    changed(page, lambda: page.check('input[aria-label="alibi on"]'))
    assert shown(page) == flat(weights(LESSON, slope=0.5))
    edit(page, "alibi slope", "1/4", "derived")
    assert shown(page) == flat(weights(LESSON, slope=0.25))
    changed(page, lambda: page.check('input[aria-label="alibi symmetric"]'))
    assert address(page)["alibi"] == {"slope": "1/4", "symmetric": True}
    Q, K = matmul(LESSON["X"], LESSON["W_q"]), matmul(LESSON["X"], LESSON["W_k"])
    z = [[sum(a * b for a, b in zip(q, k)) / math.sqrt(3) - 0.25 * abs(i - j) for j, k in enumerate(K)]
         for i, q in enumerate(Q)]
    sym = [[math.exp(v - max(r)) / sum(math.exp(u - max(r)) for u in r) for v in r] for r in z]
    assert shown(page) == flat(sym)


def test_a_refused_variant_shows_the_cli_message_beside_it_and_the_derivation_stays(page, tmp_path):
    before = shown(page)
    changed(page, lambda: page.check('input[aria-label="rope on"]'), "refused")   # d_k = 3 is odd
    message = page.text_content('.field-error[data-for="rope"]')
    run = cli({**LESSON, "rope": {"layout": "interleaved"}}, tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == f"symattn: error: {tmp_path / 'problem.toml'}: " + message.removeprefix("problem: ")
    assert message.startswith("problem: rope needs an even d_k")
    assert shown(page) == before                          # the last good derivation stays
    changed(page, lambda: page.uncheck('input[aria-label="rope on"]'))
    assert page.text_content('.field-error[data-for="rope"]') == ""
    changed(page, lambda: page.check('input[aria-label="tiles on"]'))
    edit(page, "tiles blocks", "0", "refused")             # a block holds at least one key
    assert page.text_content('.field-error[data-for="tiles"]').startswith("problem: tiles")
    edit(page, "tiles blocks", "1, 2", "derived")         # split before keys 1 and 2: the same weights
    assert address(page)["tiles"] == [1, 2] and shown(page) == before
    assert "running" in page.text_content("#derivation")


def test_rope_after_a_column_of_d_k_gives_the_turned_scores(page):
    changed(page, lambda: page.click('button[data-change="dk+"]'))
    edit(page, "W_q[1][3]", "1", "derived")
    edit(page, "W_k[0][3]", "2", "derived")
    changed(page, lambda: page.check('input[aria-label="rope on"]'))
    edit(page, "rope θ", "pi/2, pi/3", "derived")
    problem = address(page)
    assert problem["rope"] == {"theta": ["pi/2", "pi/3"]}             # the layout's default left out
    Q, K = matmul(problem["X"], problem["W_q"]), matmul(problem["X"], problem["W_k"])
    Qr, Kr = rope_rows(Q, [math.pi / 2, math.pi / 3]), rope_rows(K, [math.pi / 2, math.pi / 3])
    assert shown(page) == flat(weights(problem, Q=Qr, K=Kr))
    assert shown(page) != flat(weights(problem))          # the turn changed the weights
    changed(page, lambda: page.select_option('select[aria-label="rope layout"]', "half"))
    half = [[r[0], r[2], r[1], r[3]] for r in Q], [[r[0], r[2], r[1], r[3]] for r in K]   # pairs (0, 2), (1, 3)
    Qh, Kh = rope_rows(half[0], [math.pi / 2, math.pi / 3]), rope_rows(half[1], [math.pi / 2, math.pi / 3])
    assert shown(page) == flat(weights(problem, Q=Qh, K=Kh))
    edit(page, "rope positions", "0, 1, 5", "derived")       # the query cats at position 5, its key at 2
    Qp = rope_rows(half[0][:2] + [[0] * 4] * 3 + half[0][2:], [math.pi / 2, math.pi / 3])
    assert shown(page) == flat(weights(problem, Q=[Qp[0], Qp[1], Qp[5]], K=Kh))
    changed(page, lambda: page.click('button[data-change="token+"]'))    # a token: the next position
    assert address(page)["rope"] == {"layout": "half", "theta": ["pi/2", "pi/3"], "positions": [0, 1, 5, 6]}
    assert page.text_content("#status") == ""


def test_decode_and_backward_on_the_lesson(page, tmp_path):
    changed(page, lambda: page.check('input[aria-label="decode on"]'))
    assert address(page)["decode"] == {"prefill": 2}
    text = page.text_content("#derivation")
    assert "decode" in text.lower() and "cache" in text.lower()
    changed(page, lambda: page.uncheck('input[aria-label="decode on"]'))
    changed(page, lambda: page.check('input[aria-label="backward on"]'))
    assert address(page)["backward"] == {"loss": "sum"}
    A = weights(LESSON)                                     # dO all ones: dV = Aᵀ·1, each row A's column sum
    dV = matrix(page, "d_V")
    assert [[float(x) for x in r] for r in dV] == [[three_digits(sum(A[i][j] for i in range(3)))] * 3
                                                   for j in range(3)]
    assert not page.is_visible('input[aria-label="backward[0][0]"]')      # loss "sum" has no matrix
    changed(page, lambda: page.select_option('select[aria-label="backward loss"]', "grad_output"))
    edit(page, "backward[1][0]", "0", "derived")
    assert address(page)["backward"] == {"grad_output": [[1, 1, 1], [0, 1, 1], [1, 1, 1]]}
    dV = [[float(x) for x in r] for r in matrix(page, "d_V")]
    dO = [[1, 1, 1], [0, 1, 1], [1, 1, 1]]
    assert dV == [[three_digits(sum(A[i][j] * dO[i][c] for i in range(3))) for c in range(3)] for j in range(3)]
    run = cli({**LESSON, "backward": {"grad_output": dO}}, tmp_path, "--format", "html")
    assert cli_text(page, run.stdout) == derivation(page)     # explain's page, word for word
    changed(page, lambda: page.click('button[data-change="token+"]'))    # dO gains the new token's row
    assert address(page)["backward"] == {"grad_output": [*dO, [0, 0, 0]]}
    assert page.input_value('input[aria-label="backward[3][2]"]') == "0"


@pytest.mark.parametrize("name", ["alibi", "backward", "kv-cache", "off-by-one-softmax", "online-softmax", "rope",
                                  "sliding-window", "softcap", "soft-dictionary", "i-love-cats-causal"])
def test_an_example_goes_through_the_controls_unchanged(page, name):
    """Each example opened from its address, and the controls read back: the same table (so
    the first edit changes only what it edits), the right variant switched on."""
    from urllib.parse import quote

    from symattn.examples import example_text
    from symattn.serve.derive import problem_data

    data = problem_data(example_text(name), name)
    tab = page.context.new_page()
    tab.goto(page.url.split("#")[0] + "#p=" + quote(json.dumps(data)) + "&d=3", wait_until="load")
    tab.wait_for_function("() => Boolean(document.body.dataset.derived)", timeout=30_000)
    assert tab.text_content("#status") == ""
    on = [v for v in ("sink", "rope", "alibi", "softcap", "tiles", "decode", "backward")
          if tab.is_checked(f'input[aria-label="{v} on"]')]
    assert on == [v for v in ("sink", "rope", "alibi", "softcap", "tiles", "decode", "backward") if v in data]
    changed(tab, lambda: tab.dispatch_event('#grids input[aria-label="tokens[0]"]', "input"))
    assert address(tab) == data


def test_an_address_pasted_into_the_open_tab_is_followed(page, tmp_path):
    """Only the hash differs, so the browser does not load the page again: the page follows it."""
    from urllib.parse import quote

    from symattn.examples import example_text
    from symattn.serve.derive import problem_data

    data = problem_data(example_text("backward"), "backward")
    changed(page, lambda: page.goto(page.url.split("#")[0] + "#p=" + quote(json.dumps(data)) + "&pl=2&r=0"))
    assert page.is_checked('input[aria-label="backward on"]')
    assert page.input_value('input[aria-label="backward[2][0]"]') == "1"
    assert page.input_value('select[aria-label="places"]') == "2"
    assert [page.is_checked(f'input[aria-label="row {i}"]') for i in range(3)] == [True, False, False]
    assert shown(page)[:3] == [round(w, 2) for w in weights(data)[0]]   # 0.14, 0.43, 0.43
    run = cli(data, tmp_path, "--format", "html", "--places", "2", "--rows", "0")
    assert cli_text(page, run.stdout) == derivation(page)


# -- the mask as cells --------------------------------------------------------------------
def test_the_mask_is_clicked_cell_by_cell(page, tmp_path):
    changed(page, lambda: page.select_option('select[aria-label="mask"]', "causal"))
    changed(page, lambda: page.select_option('select[aria-label="mask"]', "cells"))
    cells = [[page.is_checked(f'input[aria-label="mask[{i}][{j}]"]') for j in range(3)] for i in range(3)]
    assert cells == [[True, False, False], [True, True, False], [True, True, True]]   # from causal
    assert address(page)["mask"] == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    changed(page, lambda: page.click('input[aria-label="mask[0][2]"]'))     # I sees cats too
    changed(page, lambda: page.click('input[aria-label="mask[2][1]"]'))     # cats does not see love
    mask = [[1, 0, 1], [1, 1, 0], [1, 0, 1]]
    assert address(page)["mask"] == mask
    assert shown(page) == flat(weights(LESSON, sees=lambda i, j: mask[i][j] == 1))
    assert shown(page)[1] == shown(page)[7] == 0
    changed(page, lambda: page.click('input[aria-label="mask[1][0]"]'))     # love sees only itself
    before = shown(page)
    assert before[3:6] == [0, 1, 0]
    changed(page, lambda: page.click('input[aria-label="mask[1][1]"]'), "refused")    # love sees nothing
    message = page.text_content('.field-error[data-for="mask"]')
    run = cli({**LESSON, "mask": [[1, 0, 1], [0, 0, 0], [1, 0, 1]]}, tmp_path)
    assert run.stderr.strip().endswith(message.removeprefix("problem: ")) and "blocks every key" in message
    assert shown(page) == before
    changed(page, lambda: page.click('input[aria-label="mask[1][1]"]'))
    with page.expect_download() as waiting:                 # the cells are the file's 0/1 matrix
        page.click("#download-toml")
    assert tomllib.loads(Path(waiting.value.path()).read_text(encoding="utf-8"))["mask"] == \
        [[1, 0, 1], [0, 1, 0], [1, 0, 1]]
    changed(page, lambda: page.click('button[data-change="token+"]'))       # a token: a row and a column
    assert address(page)["mask"] == [[1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]]
    assert page.is_checked('input[aria-label="mask[3][3]"]')


# -- the view: the worked row, the places; and the address ----------------------------------
def test_the_worked_row_and_the_places_are_explains(page, tmp_path):
    changed(page, lambda: page.check('input[aria-label="row 1"]'))
    run = cli(LESSON, tmp_path, "--format", "html", "--rows", "1")
    assert cli_text(page, run.stdout) == derivation(page)
    assert cli_text(page, cli(LESSON, tmp_path, "--format", "html").stdout) != derivation(page)
    changed(page, lambda: page.select_option('select[aria-label="rounding"]', "places"))
    changed(page, lambda: page.select_option('select[aria-label="places"]', "4"))
    assert page.url.endswith("&pl=4&r=1")
    run = cli(LESSON, tmp_path, "--format", "html", "--rows", "1", "--places", "4")
    assert cli_text(page, run.stdout) == derivation(page)
    titles = weight_titles(page)
    assert [t.rsplit(" ", 1)[-1] for t in titles] == [f"{w:.4f}" for row in weights(LESSON) for w in row]
    changed(page, lambda: page.select_option('select[aria-label="rounding"]', "digits"))
    assert page.input_value('select[aria-label="digits"]') == "3" and page.url.endswith("&d=3&r=1")
    assert shown(page) == flat(weights(LESSON))


def test_the_address_reopens_variants_cells_row_and_places(page):
    changed(page, lambda: page.select_option('select[aria-label="mask"]', "cells"))
    changed(page, lambda: page.click('input[aria-label="mask[2][0]"]'))
    changed(page, lambda: page.check('input[aria-label="softcap on"]'))
    edit(page, "softcap c", "3", "derived")
    changed(page, lambda: page.check('input[aria-label="row 2"]'))
    changed(page, lambda: page.select_option('select[aria-label="rounding"]', "places"))
    text = page.text_content("#derivation")
    fresh = page.context.new_page()
    fresh.goto(page.url, wait_until="load")
    fresh.wait_for_function("() => Boolean(document.body.dataset.derived)", timeout=30_000)
    assert fresh.is_checked('input[aria-label="softcap on"]')
    assert fresh.input_value('input[aria-label="softcap c"]') == "3"
    assert not fresh.is_checked('input[aria-label="mask[2][0]"]') and fresh.is_checked('input[aria-label="mask[2][1]"]')
    assert [fresh.is_checked(f'input[aria-label="row {i}"]') for i in range(3)] == [False, False, True]
    assert fresh.input_value('select[aria-label="rounding"]') == "places"
    assert fresh.text_content("#derivation") == text
    mask = [[1, 1, 1], [1, 1, 1], [0, 1, 1]]
    A = weights(LESSON, softcap=3, sees=lambda i, j: mask[i][j] == 1)
    assert [shown_weight(t) for t in weight_titles(fresh)] == [float(f"{w:.3f}") for row in A for w in row]


# -- the view's refusals over plain HTTP --------------------------------------------------
@pytest.mark.parametrize("query, starts", [
    ("places=31", "places must be a whole number from 0 to 30"),
    ("places=-1", "places must be a whole number"),
    ("digits=3&places=2", "give digits or places, not both"),
    ("row=abc", "row must be a query's 0-based index"),
    ("row=99999999", "row must be a query's 0-based index"),
    ("row=3", "row 3: scores has 3 rows; row 3 is out of range (0..2)"),
])
def test_the_view_is_refused_with_one_line(server, query, starts):
    status, body, _ = server.request("POST", "/derive?" + query, json.dumps(LESSON).encode())
    answer = json.loads(body)
    assert status == 422 and answer["error"].startswith(starts), answer
    assert "\n" not in answer["error"]
    assert server.answering()


def test_places_and_a_row_over_http_are_explains(server, tmp_path):
    status, body, _ = server.request("POST", "/derive?places=2&row=0", json.dumps(LESSON).encode())
    assert status == 200
    run = cli(LESSON, tmp_path, "--format", "html", "--places", "2", "--rows", "0")
    main = run.stdout[run.stdout.index("<main>\n") + 7:run.stdout.rindex("</main>")]
    assert json.loads(body)["html"] == main


def screenshots(outdir: Path) -> None:
    """The variants on (a sink, ALiBi) and the mask clicked cell by cell (docs/serve.md)."""
    from browser import Browser, chromium_path

    running = start_server()
    browser = Browser(chromium_path() or "/usr/bin/chromium")
    try:
        tab = browser.browser.new_context(viewport={"width": 1100, "height": 1000}).new_page()
        tab.goto(running.origin + "/", wait_until="load")
        changed(tab, lambda: tab.select_option('select[aria-label="mask"]', "cells"))
        changed(tab, lambda: tab.click('input[aria-label="mask[0][2]"]'))
        changed(tab, lambda: tab.click('input[aria-label="mask[1][0]"]'))
        changed(tab, lambda: tab.check('input[aria-label="row 1"]'))
        tab.locator('#grids .grid-row').first.screenshot(path=str(outdir / "serve-cells.png"))
        changed(tab, lambda: tab.check('input[aria-label="sink on"]'))
        changed(tab, lambda: tab.check('input[aria-label="alibi on"]'))
        changed(tab, lambda: tab.check('input[aria-label="rope on"]'), "refused")
        tab.locator("#grids .variants").screenshot(path=str(outdir / "serve-variants.png"))
    finally:
        browser.close()
        stop_server(running)


if __name__ == "__main__":
    screenshots(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images")
