"""symattn serve in Chromium: the shape edited (a query, a key, d_model, d_k, d_v), several
worked rows, and the checked figures kept in the address.

The fixtures are tests/test_serve_browser.py's (a real server; Chromium with every foreign
request aborted).  After each shape edit the weights and the output the page shows are
compared with an independent float64 attention written here, and the whole derivation with
the one ``symattn explain --format html`` prints for the table the address holds.  Run as a
script to write docs/images/serve-shapes.png: ``python3 tests/test_serve_shapes.py [OUTDIR]``.
"""

# ruff: noqa: F811  (the fixtures page and server are test_serve_browser's, imported by name)
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_server import LESSON, ROOT, start_server, stop_server  # noqa: E402
from test_serve_browser import matmul, matrix, page, server, three_digits  # noqa: E402,F401
from test_serve_variants import address, changed, cli, cli_text, derivation, shown  # noqa: E402

pytest.importorskip("starlette")

#: cross-attention from embeddings: 2 queries, 3 keys; d_model 4, d_k 2, d_v 3
CROSS = {"title": "Cross", "tokens": ["a", "b"], "key_tokens": ["x", "y", "z"],
         "X": [[1, 0, 1, 0], [0, 1, 0, 1]], "X_kv": [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]],
         "W_q": [[1, 0], [0, 1], [1, 1], [0, 0]], "W_k": [[1, 0], [1, 1], [0, 1], [1, 0]],
         "W_v": [[1, 0, 2], [0, 1, 0], [1, 1, 1], [0, 2, 0]]}


# -- an independent float64 attention: Q, K, V from X (and X_kv) or given ---------------------
def qkv(p: dict):
    if "X" in p:
        keys = p.get("X_kv", p["X"])
        return matmul(p["X"], p["W_q"]), matmul(keys, p["W_k"]), matmul(keys, p["W_v"])
    return p["Q"], p["K"], p["V"]


def attend(p: dict):
    """(weights, output) in float64, the scale 1/√d_k unless the problem gives it."""
    Q, K, V = qkv(p)
    scale = float(p.get("scale", 1 / math.sqrt(len(Q[0]))))
    A = []
    for q in Q:
        z = [scale * sum(a * b for a, b in zip(q, k)) for k in K]
        e = [math.exp(v - max(z)) for v in z]
        A.append([v / sum(e) for v in e])
    return A, matmul(A, V)


def flat(M, digits: int = 3) -> list[float]:
    return [three_digits(v, digits) for row in M for v in row]


def output(tab) -> list[float]:
    return [float(v) for row in matrix(tab, "output") for v in row]


def opened(tab, data: dict, view: str = "&d=3"):
    """A new tab on the address of ``data``, once its derivation is shown."""
    fresh = tab.context.new_page()
    fresh.goto(tab.url.split("#")[0] + "#p=" + quote(json.dumps(data)) + view, wait_until="load")
    fresh.wait_for_function("() => Boolean(document.body.dataset.derived)", timeout=30_000)
    return fresh


def fill(tab, label: str, text: str, outcome: str = "derived") -> None:
    changed(tab, lambda: tab.fill(f'#grids input[aria-label="{label}"]', text), outcome)


def click(tab, change: str, outcome: str = "derived") -> None:
    changed(tab, lambda: tab.click(f'button[data-change="{change}"]'), outcome)


def agrees(tab, expected: dict, tmp_path: Path) -> None:
    """The address holds ``expected``; the weights and the output are float64's; the page is explain's."""
    assert address(tab) == expected
    A, out = attend(expected)
    assert shown(tab) == flat(A)
    assert output(tab) == flat(out)
    run = cli(expected, tmp_path, "--format", "html")
    assert run.returncode == 0, run.stderr
    assert cli_text(tab, run.stdout) == derivation(tab)


# -- the shape -------------------------------------------------------------------------------
def test_cross_attention_from_x_kv_takes_a_key_a_query_and_each_dimension(page, tmp_path):
    tab = opened(page, CROSS)
    sizes = tab.eval_on_selector_all(".shape .dimension .size", "xs => xs.map(x => x.textContent)")
    assert sizes == ["queries n = 2", "keys m = 3", "d_model = 4", "d_k = 2", "d_v = 3"]
    p = json.loads(json.dumps(CROSS))
    click(tab, "key+")                                       # X_kv gains a row, key_tokens a name
    p["key_tokens"].append("k3")
    p["X_kv"].append([0, 0, 0, 0])
    assert address(tab) == p
    fill(tab, "X_kv[3][0]", "2")
    fill(tab, "key_tokens[3]", "w")
    p["X_kv"][3][0], p["key_tokens"][3] = 2, "w"
    agrees(tab, p, tmp_path)
    assert tab.eval_on_selector_all('#grids [data-key="X_kv"] th[scope="row"]', "hs => hs.map(h => h.textContent)") \
        == ["x", "y", "z", "w"]
    click(tab, "token+")                                     # a query: X only, not X_kv
    fill(tab, "X[2][1]", "1")
    p["tokens"].append("t2")
    p["X"].append([0, 1, 0, 0])
    agrees(tab, p, tmp_path)
    click(tab, "dmodel+")                                    # X and X_kv a column; each W a row
    fill(tab, "X[0][4]", "2")
    fill(tab, "X_kv[1][4]", "1")
    fill(tab, "W_q[4][0]", "1")
    fill(tab, "W_k[4][1]", "1")
    fill(tab, "W_v[4][2]", "3")
    p["X"] = [[*r, 2 if i == 0 else 0] for i, r in enumerate(p["X"])]
    p["X_kv"] = [[*r, 1 if i == 1 else 0] for i, r in enumerate(p["X_kv"])]
    p["W_q"].append([1, 0])
    p["W_k"].append([0, 1])
    p["W_v"].append([0, 0, 3])
    agrees(tab, p, tmp_path)
    click(tab, "dk+")                                        # W_q and W_k a column: the scale 1/√3
    fill(tab, "W_q[1][2]", "1")
    fill(tab, "W_k[2][2]", "1")
    p["W_q"] = [[*r, 1 if i == 1 else 0] for i, r in enumerate(p["W_q"])]
    p["W_k"] = [[*r, 1 if i == 2 else 0] for i, r in enumerate(p["W_k"])]
    agrees(tab, p, tmp_path)
    assert "dk=3, dv=3, dmodel=5" in derivation(tab)
    click(tab, "dv+")                                        # W_v a column: the output a column
    fill(tab, "W_v[3][3]", "1/2")
    p["W_v"] = [[*r, "1/2" if i == 3 else 0] for i, r in enumerate(p["W_v"])]
    assert address(tab) == p
    A, out = attend({**p, "W_v": [[*r[:3], 0.5 if i == 3 else 0] for i, r in enumerate(p["W_v"])]})
    assert output(tab) == flat(out) and len(matrix(tab, "output")[0]) == 4
    for change in ("dv-", "dk-", "dmodel-", "token-", "key-"):   # back to where it started
        click(tab, change)
    assert address(tab) == CROSS
    A, out = attend(CROSS)
    assert shown(tab) == flat(A) and output(tab) == flat(out)


def test_direct_cross_attention_takes_a_key_and_columns_of_d_k_and_d_v(page, tmp_path):
    from symattn.examples import example_text
    from symattn.serve.derive import problem_data

    data = problem_data(example_text("online-softmax"), "online-softmax")   # Q 2×2, K, V 3×2, tiles
    tab = opened(page, data)
    assert tab.is_disabled('button[data-change="token-"]') is False
    assert tab.locator('button[data-change="dmodel+"]').count() == 0       # no X: no d_model
    p = json.loads(json.dumps(data))
    click(tab, "key+")                                       # K and V a row; Q does not change
    fill(tab, "K[3][0]", "4")
    fill(tab, "V[3][1]", "2")
    p["key_tokens"].append("k4")                             # k3 is taken
    p["K"].append([4, 0])
    p["V"].append([0, 2])
    agrees(tab, p, tmp_path)
    assert shown(tab)[3] > 0.5                               # q1 · k3 = 4: the new key wins row q1
    click(tab, "dk+")
    fill(tab, "Q[1][2]", "1")
    fill(tab, "K[0][2]", "-1")
    click(tab, "dv+")
    fill(tab, "V[1][2]", "3")
    p["Q"] = [[*r, 1 if i == 1 else 0] for i, r in enumerate(p["Q"])]
    p["K"] = [[*r, -1 if i == 0 else 0] for i, r in enumerate(p["K"])]
    p["V"] = [[*r, 3 if i == 1 else 0] for i, r in enumerate(p["V"])]
    agrees(tab, p, tmp_path)                                 # scale = 1 stays as given
    click(tab, "token-")
    p["tokens"].pop()
    p["Q"].pop()
    agrees(tab, p, tmp_path)
    assert tab.is_disabled('button[data-change="token-"]')   # one query left: it stays


def test_the_lessons_d_model_and_d_v_follow_with_backwards_d_o(page, tmp_path):
    tab = opened(page, {**LESSON, "backward": {"grad_output": [[1, 0, 2], [0, 1, 0], [1, 1, 1]]}})
    click(tab, "dmodel+")
    click(tab, "dv+")
    fill(tab, "X[1][4]", "1")
    fill(tab, "W_k[4][0]", "2")
    fill(tab, "W_v[0][3]", "1")
    got = address(tab)
    assert [len(r) for r in got["X"]] == [5, 5, 5] and len(got["W_q"]) == len(got["W_v"]) == 5
    assert got["backward"]["grad_output"] == [[1, 0, 2, 0], [0, 1, 0, 0], [1, 1, 1, 0]]   # dO: n × d_v
    p = {**LESSON, "X": [[1, 0, 1, 0, 0], [0, 2, 0, 2, 1], [1, 1, 1, 1, 0]],
         "W_q": [*LESSON["W_q"], [0, 0, 0]], "W_k": [*LESSON["W_k"], [2, 0, 0]],
         "W_v": [[0, 2, 0, 1], [0, 3, 0, 0], [1, 0, 3, 0], [1, 1, 0, 0], [0, 0, 0, 0]]}
    assert got == {**p, "backward": {"grad_output": [[1, 0, 2, 0], [0, 1, 0, 0], [1, 1, 1, 0]]}}
    A, out = attend(p)
    assert shown(tab) == flat(A) and output(tab) == flat(out)
    run = cli(got, tmp_path, "--format", "html")
    assert run.returncode == 0 and cli_text(tab, run.stdout) == derivation(tab)
    click(tab, "token+")                                     # dO gains the new token's row
    assert address(tab)["backward"]["grad_output"][3] == [0, 0, 0, 0]


def test_a_token_or_a_key_is_removed_by_its_name(page, tmp_path):
    """The × beside a name removes that token: its row of X, and its row and column of the mask."""
    mask = [[1, 0, 1], [1, 1, 0], [0, 1, 1]]
    tab = opened(page, {**LESSON, "mask": mask, "backward": {"grad_output": [[1, 2, 3], [4, 5, 6], [7, 8, 9]]}})
    changed(tab, lambda: tab.click('button[aria-label="remove token 1"]'))      # love
    p = {**LESSON, "tokens": ["I", "cats"], "X": [LESSON["X"][0], LESSON["X"][2]], "mask": [[1, 1], [0, 1]],
         "backward": {"grad_output": [[1, 2, 3], [7, 8, 9]]}}
    assert address(tab) == p
    Q, K = matmul(p["X"], p["W_q"]), matmul(p["X"], p["W_k"])
    e = [math.exp(sum(a * b for a, b in zip(Q[0], k)) / math.sqrt(3)) for k in K]
    assert shown(tab) == [three_digits(e[0] / sum(e)), three_digits(e[1] / sum(e)), 0, 1]   # cats: only itself
    run = cli(p, tmp_path, "--format", "html")
    assert run.returncode == 0 and cli_text(tab, run.stdout) == derivation(tab)
    tab = opened(page, CROSS)
    changed(tab, lambda: tab.click('button[aria-label="remove key 1"]'))       # key y: its row of X_kv
    p = {**CROSS, "key_tokens": ["x", "z"], "X_kv": [CROSS["X_kv"][0], CROSS["X_kv"][2]]}
    agrees(tab, p, tmp_path)
    changed(tab, lambda: tab.click('button[aria-label="remove token 0"]'))     # query a: its row of X
    p = {**p, "tokens": ["b"], "X": [CROSS["X"][1]]}
    agrees(tab, p, tmp_path)
    assert tab.locator('button[aria-label="remove token 0"]').count() == 0     # the last query stays


def test_a_shape_the_cli_refuses_shows_its_message_and_the_derivation_stays(page, tmp_path):
    from symattn.examples import example_text
    from symattn.serve.derive import problem_data

    data = problem_data(example_text("rope"), "rope")      # d_k = 4, θ for its two pairs
    tab = opened(page, data)
    before = derivation(tab)
    click(tab, "dk+", "refused")                             # d_k = 5: RoPE needs it even
    message = tab.text_content('.field-error[data-for="rope"]')
    odd = {**data, "Q": [[*r, 0] for r in data["Q"]], "K": [[*r, 0] for r in data["K"]]}
    run = cli(odd, tmp_path)
    assert run.returncode == 2 and run.stderr.strip().endswith(message.removeprefix("problem: ")), (run.stderr, message)
    assert "rope" in message
    assert "\n" not in message and tab.is_visible('.field-error[data-for="rope"]')
    assert derivation(tab) == before                         # the last good derivation stays
    click(tab, "dk+", "refused")                             # d_k = 6: three pairs, two angles
    assert tab.text_content('.field-error[data-for="rope"]') == \
        "problem: rope theta has 2 entries but d_k = 6 has 3 pairs: give one frequency per pair"
    assert derivation(tab) == before
    click(tab, "dk-", "refused")
    click(tab, "dk-")
    assert tab.text_content('.field-error[data-for="rope"]') == ""
    assert address(tab) == data and derivation(tab) == before
    kv = problem_data(example_text("kv-cache"), "kv-cache")   # 6 tokens, a prompt of 3
    tab = opened(page, kv)
    for i in (5, 4):
        changed(tab, lambda i=i: tab.click(f'button[aria-label="remove token {i}"]'))
    before = derivation(tab)
    changed(tab, lambda: tab.click('button[aria-label="remove token 0"]'), "refused")
    assert tab.text_content('.field-error[data-for="decode"]') == ("problem: decode prefill is 3 but there are 3 "
                                                                   "tokens: nothing is left to decode; use a prefill below 3")
    assert derivation(tab) == before


# -- several worked rows -----------------------------------------------------------------------
def test_several_worked_rows_are_explains_rows(page, tmp_path):
    changed(page, lambda: page.check('input[aria-label="row 0"]'))
    changed(page, lambda: page.check('input[aria-label="row 2"]'))
    assert page.url.endswith("&d=3&r=0,2")
    run = cli(LESSON, tmp_path, "--format", "html", "--rows", "0,2")
    assert cli_text(page, run.stdout) == derivation(page)
    assert cli_text(page, cli(LESSON, tmp_path, "--format", "html", "--rows", "0").stdout) != derivation(page)
    assert cli_text(page, cli(LESSON, tmp_path, "--format", "html", "--rows", "0,1,2").stdout) != derivation(page)
    fresh = page.context.new_page()                          # the address reopens both rows
    fresh.goto(page.url, wait_until="load")
    fresh.wait_for_function("() => Boolean(document.body.dataset.derived)", timeout=30_000)
    assert [fresh.is_checked(f'input[aria-label="row {i}"]') for i in range(3)] == [True, False, True]
    assert derivation(fresh) == derivation(page)
    changed(page, lambda: page.uncheck('input[aria-label="row 0"]'))
    changed(page, lambda: page.uncheck('input[aria-label="row 2"]'))   # none: explain's own choice
    assert page.url.endswith("&d=3")
    assert cli_text(page, cli(LESSON, tmp_path, "--format", "html").stdout) == derivation(page)


def test_worked_rows_in_an_address_that_do_not_parse_are_left_out(page):
    fresh = opened(page, LESSON, "&d=3&r=0,,2")
    assert [fresh.is_checked(f'input[aria-label="row {i}"]') for i in range(3)] == [False] * 3
    fresh = opened(page, LESSON, "&d=3&r=2,0,2,7")           # sorted, once each; 7 is past n
    assert [fresh.is_checked(f'input[aria-label="row {i}"]') for i in range(3)] == [True, False, True]
    assert fresh.url.endswith("&r=0,2")


@pytest.mark.parametrize("query, starts", [
    ("row=0,,2", "row must be a query's 0-based index such as 0 or 2, or several such as 0,2"),
    ("row=0,2,", "row must be a query's 0-based index"),
    ("row=" + ",".join(["1"] * 65), "row lists 65 rows, over the page's 64: use explain's --rows"),
    ("row=0,3", "row 0, 3: scores has 3 rows; row 3 is out of range (0..2)"),
])
def test_several_rows_over_http_are_refused_with_one_line(server, query, starts):
    status, body, _ = server.request("POST", "/derive?" + query, json.dumps(LESSON).encode())
    answer = json.loads(body)
    assert status == 422 and answer["error"].startswith(starts), answer
    assert server.answering()


def test_several_rows_over_http_are_explains(server, tmp_path):
    status, body, _ = server.request("POST", "/derive?places=2&row=2,0", json.dumps(LESSON).encode())
    assert status == 200
    run = cli(LESSON, tmp_path, "--format", "html", "--places", "2", "--rows", "2,0")
    assert json.loads(body)["html"] == run.stdout[run.stdout.index("<main>\n") + 7:run.stdout.rindex("</main>")]


# -- the figures checked, in the address ----------------------------------------------------------
FIGURES = [("weights[I]", "0.136, 0.432, 0.432"),            # right, rounded
           ("weights[I]", "0.0634, 0.468, 0.468"),           # the unscaled mistake
           ("scaled[love, love]", "6.1"),                     # wrong: 16/√3 ≈ 9.24
           ('"><img src=x onerror=alert(1)>&f=%zz#', "1 & 2")]   # no such target: text all the way


def verdict_rows(tab) -> list[tuple[str, str]]:
    return tab.eval_on_selector_all("#verdicts table.verdicts tbody tr",
                                    "rs => rs.map(r => [r.className, r.cells[2].textContent.trim()])")


def typed(tab, figures) -> None:
    while tab.locator("#figure-rows tr").count() < len(figures):
        tab.click("#add-figure")
    for k, (target, text) in enumerate(figures):
        tab.fill(f'input[aria-label="figure {k + 1} target"]', target)
        tab.fill(f'input[aria-label="figure {k + 1} text"]', text)


def checked(tab) -> None:
    before = tab.evaluate("document.body.dataset.checked || '0'")
    tab.click("#check-figures")
    tab.wait_for_function("(b) => (document.body.dataset.checked || '0') !== b", arg=before, timeout=30_000)


def test_the_figures_checked_are_in_the_address_and_checked_again(page):
    typed(page, FIGURES)
    checked(page)
    verdicts = verdict_rows(page)
    assert [v[0] for v in verdicts[:3]] == ["right", "not-right", "not-right"]
    assert verdicts[1][1] == "✗ mistake" and len(verdicts) == 4
    part = page.url.split("&f=", 1)[1]
    assert "&" not in part and "#" not in part and "<" not in part       # escaped, one part
    from urllib.parse import unquote
    assert json.loads(unquote(part)) == [list(f) for f in FIGURES]
    changed(page, lambda: page.fill('#grids input[aria-label="W_q[0][0]"]', "1"))   # an edit keeps them
    assert "&f=" + part in page.url
    errors: list[str] = []
    fresh = page.context.new_page()
    fresh.on("pageerror", lambda e: errors.append(str(e)))
    fresh.goto(page.url, wait_until="load")
    fresh.wait_for_function("() => document.body.dataset.checked === '1'", timeout=30_000)
    assert [(fresh.input_value(f'input[aria-label="figure {k + 1} target"]'),
             fresh.input_value(f'input[aria-label="figure {k + 1} text"]')) for k in range(4)] == FIGURES
    assert verdict_rows(fresh) == verdicts                   # the same figures, judged the same
    assert fresh.eval_on_selector_all("img", "xs => xs.length") == 0 and errors == []
    other = page.url.split("&f=")[0] + "&f=" + quote(json.dumps([["sqrt(d_k)", "1.73"]]))
    before = page.evaluate("document.body.dataset.checked")
    page.goto(other)                                         # pasted into the open tab: followed
    page.wait_for_function("(b) => document.body.dataset.checked !== b", arg=before, timeout=30_000)
    assert page.input_value('input[aria-label="figure 1 target"]') == "sqrt(d_k)"
    assert page.input_value('input[aria-label="figure 2 target"]') == ""
    assert [v[0] for v in verdict_rows(page)] == ["right"]


def test_figures_over_the_cap_are_checked_but_left_out_of_the_address(page):
    long = ", ".join(["0.432"] * 700)                         # over 4,000 characters once escaped
    typed(page, [("weights[I]", "0.136, 0.432, 0.432"), ("weights[love]", long)])
    checked(page)
    assert "&f=" not in page.url
    assert "a link to this page does not hold them" in page.text_content("#verdicts")
    assert verdict_rows(page)[0][0] == "right"


@pytest.mark.parametrize("figures", ["alert(1)", "%E0%A4%A", quote('{"a": 1}'), quote("[[1, 2]]"),
                                     quote(json.dumps([["weights[I]", "1"]] * 51)), "x" * 5000])
def test_figures_in_an_address_that_do_not_parse_are_left_out(page, figures):
    errors: list[str] = []
    fresh = page.context.new_page()
    fresh.on("pageerror", lambda e: errors.append(str(e)))
    fresh.goto(page.url.split("#")[0] + "#p=" + quote(json.dumps(LESSON)) + "&d=3&f=" + figures, wait_until="load")
    fresh.wait_for_function("() => Boolean(document.body.dataset.derived)", timeout=30_000)
    assert fresh.input_value('input[aria-label="figure 1 target"]') == "weights[I]"
    assert fresh.input_value('input[aria-label="figure 1 text"]') == ""
    assert fresh.evaluate("document.body.dataset.checked") is None and errors == []
    assert "&f=" not in fresh.url


def screenshots(outdir: Path) -> None:
    """Cross-attention after a key and a column of d_model were added (docs/serve.md)."""
    from browser import Browser, chromium_path

    running = start_server()
    browser = Browser(chromium_path() or "/usr/bin/chromium")
    try:
        tab = browser.browser.new_context(viewport={"width": 1100, "height": 1000}).new_page()
        tab.goto(running.origin + "/#p=" + quote(json.dumps(CROSS)) + "&d=3", wait_until="load")
        tab.wait_for_function("() => Boolean(document.body.dataset.derived)", timeout=30_000)
        click(tab, "key+")
        fill(tab, "X_kv[3][0]", "2")
        fill(tab, "key_tokens[3]", "w")
        click(tab, "dv+")
        fill(tab, "W_v[1][3]", "1")
        changed(tab, lambda: tab.check('input[aria-label="row 0"]'))
        changed(tab, lambda: tab.check('input[aria-label="row 1"]'))
        tab.locator("#grids").screenshot(path=str(outdir / "serve-shapes.png"))
    finally:
        browser.close()
        stop_server(running)


if __name__ == "__main__":
    screenshots(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images")
