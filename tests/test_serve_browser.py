"""symattn serve in Chromium: edit an entry of W_q and watch Q, the scores and the weights follow.

The server is real (tests/serve_server.py); the page is driven by Playwright on Debian's
Chromium, with every request outside the server's origin aborted and recorded.  The values
the page shows after an edit are compared with an independent float64 computation written
here, to the printed digits, and with the page ``symattn explain --format html`` prints for
the edited problem.  Run as a script to write the screenshots of docs/serve.md:
``python3 tests/test_serve_browser.py [OUTDIR]``.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_server import LESSON, ROOT, open_page, start_server, stop_server  # noqa: E402

pytest.importorskip("starlette")


@pytest.fixture(scope="module")
def server():
    running = start_server()
    yield running
    stop_server(running)


@pytest.fixture()
def page(server):
    yield from open_page(server)


# -- an independent float64 attention, for the checks ------------------------------------
def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def sees(i: int, j: int, causal: bool, window: int | None, window_causal: bool) -> bool:
    """Whether query i may attend key j: causal j <= i; a window of W (Mistral's): the W keys
    i - W < j <= i, or |i - j| < W when the window is not causal."""
    if window is not None:
        return i - window < j <= i if window_causal else abs(i - j) < window
    return not causal or j <= i


def attention(problem, causal=False, window=None, window_causal=True):
    X = problem["X"]
    Q, K = matmul(X, problem["W_q"]), matmul(X, problem["W_k"])
    S = [[sum(q * k for q, k in zip(qi, kj)) for kj in K] for qi in Q]
    scale = 1 / math.sqrt(len(Q[0]))
    A = []
    for i, row in enumerate(S):
        z = [s * scale if sees(i, j, causal, window, window_causal) else -math.inf for j, s in enumerate(row)]
        top = max(z)
        e = [math.exp(v - top) for v in z]
        A.append([v / sum(e) for v in e])
    return Q, S, A


def three_digits(x: float, digits: int = 3) -> float:
    return float(f"{x:.{digits}g}")


# -- reading the page ----------------------------------------------------------------------
def matrix(tab, section: str) -> list[list[str]]:
    return tab.eval_on_selector(
        f"#derivation #sec-{section} table.matrix",
        "t => [...t.tBodies[0].rows].map(r => [...r.cells].filter(c => c.tagName === 'TD')"
        ".map(c => c.textContent.trim()))")


def weight_titles(tab) -> list[str]:
    return tab.eval_on_selector_all("#derivation table.heatmap td[title]", "cs => cs.map(c => c.title)")


def shown_weight(title: str) -> float:
    return float(re.split(r"[≈=]", title.rsplit(": ", 1)[1])[-1].strip())


def edit(tab, label: str, text: str, outcome: str) -> None:
    """Type into one input and wait until the page has the server's answer to that edit."""
    before = tab.evaluate(f"document.body.dataset.{outcome} || '0'")
    tab.fill(f'#grids input[aria-label="{label}"]', text)
    # a function, not a string: the page's CSP forbids eval, which a string predicate needs
    tab.wait_for_function(f"(before) => (document.body.dataset.{outcome} || '0') !== before",
                          arg=before, timeout=30_000)


def explain_page(problem: dict, tmp_path: Path) -> str:
    toml = tmp_path / "edited.toml"
    toml.write_text("\n".join(f"{k} = {value_toml(v)}" for k, v in problem.items()) + "\n", encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "symattn", "explain", str(toml), "--format", "html"],
                          cwd=ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout


def value_toml(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(value_toml(x) for x in v) + "]"
    return str(v)


def test_the_lesson_loads_with_its_grids(page):
    assert page.input_value('#grids input[aria-label="W_q[0][0]"]') == "1"
    assert page.input_value('#grids input[aria-label="tokens[2]"]') == "cats"
    assert matrix(page, "Q") == [["1", "0", "2"], ["2", "2", "2"], ["2", "1", "3"]]
    Q, S, A = attention(LESSON)
    assert [shown_weight(t) for t in weight_titles(page)] == [three_digits(w) for row in A for w in row]


def test_an_edit_of_w_q_changes_q_the_scores_and_the_weights(page, tmp_path):
    edit(page, "W_q[0][0]", "3", "derived")
    edited = {**LESSON, "W_q": [[3, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]}
    Q, S, A = attention(edited)
    assert matrix(page, "Q") == [[str(v) for v in row] for row in Q]
    assert matrix(page, "scores") == [[str(v) for v in row] for row in S]
    titles = weight_titles(page)
    assert [shown_weight(t) for t in titles] == [three_digits(w) for row in A for w in row]
    cli = explain_page(edited, tmp_path)                  # the same titles as explain prints
    cli_titles = re.findall(r'<td tabindex="0"[^>]* title="([^"]*)"', cli)
    assert titles == [t.replace("&quot;", '"') for t in cli_titles]
    assert "#p=" in page.url                              # the address holds the edited problem


def test_an_invalid_entry_shows_the_cli_message_and_keeps_the_derivation(page, tmp_path):
    before = weight_titles(page)
    edit(page, "W_q[1][1]", "2^(10^9)", "refused")
    message = page.text_content('.field-error[data-for="W_q"]')
    assert message == ("problem: cannot read '2^(10^9)' in W_q[1][1]: the exponent is over the cap of "
                       "10,000 (MAX_POWER_EXPONENT) at column 2; use a smaller exponent")
    assert page.is_visible('.field-error[data-for="W_q"]')
    assert weight_titles(page) == before                  # the last good derivation stays
    edit(page, "W_q[1][1]", "x", "refused")
    assert "unknown name 'x' in W_q[1][1]" in page.text_content('.field-error[data-for="W_q"]')
    edit(page, "W_q[1][1]", "1/2", "derived")             # a valid entry again: the message goes
    assert page.text_content('.field-error[data-for="W_q"]') == ""
    assert matrix(page, "Q")[1][0] == "2"


def test_a_bookmarked_address_opens_the_edited_problem(page, server):
    edit(page, "W_q[0][0]", "3", "derived")
    address = page.url
    fresh = page.context.new_page()
    fresh.goto(address, wait_until="load")
    fresh.wait_for_function("() => Boolean(document.body.dataset.derived)", timeout=30_000)
    assert fresh.input_value('#grids input[aria-label="W_q[0][0]"]') == "3"
    Q, S, A = attention({**LESSON, "W_q": [[3, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]})
    assert matrix(fresh, "Q") == [[str(v) for v in row] for row in Q]


def test_the_causal_mask_is_switched_on_and_off(page):
    before = page.evaluate("document.body.dataset.derived || '0'")
    page.select_option('#grids select[aria-label="mask"]', "causal")
    page.wait_for_function("(b) => (document.body.dataset.derived || '0') !== b", arg=before)
    Q, S, A = attention(LESSON, causal=True)
    shown = [shown_weight(t) for t in weight_titles(page)]
    assert shown == [three_digits(w) for row in A for w in row]
    assert shown[1] == shown[2] == shown[5] == 0            # above the diagonal: exactly 0
    assert "Mask: causal" in page.text_content("#derivation")
    before = page.evaluate("document.body.dataset.derived")
    page.select_option('#grids select[aria-label="mask"]', "")
    page.wait_for_function("(b) => document.body.dataset.derived !== b", arg=before)
    Q, S, A = attention(LESSON)
    assert [shown_weight(t) for t in weight_titles(page)] == [three_digits(w) for row in A for w in row]


def test_a_sliding_window_is_chosen_sized_and_made_two_sided(page):
    assert page.is_disabled('#grids input[aria-label="window"]')     # until the window is chosen
    before = page.evaluate("document.body.dataset.derived || '0'")
    page.select_option('#grids select[aria-label="mask"]', "window")
    page.wait_for_function("(b) => (document.body.dataset.derived || '0') !== b", arg=before)
    assert page.input_value('#grids input[aria-label="window"]') == "2"
    shown = [shown_weight(t) for t in weight_titles(page)]
    Q, S, A = attention(LESSON, window=2)                  # cats sees love and itself, not I
    assert shown == [three_digits(w) for row in A for w in row]
    assert shown[6] == 0 and shown[2] == 0 and shown[7] > 0
    assert shown != [three_digits(w) for row in attention(LESSON, causal=True)[2] for w in row]
    assert '"window":2' in page.url.replace("%22", '"').replace("%3A", ":")
    edit(page, "window", "0", "refused")                   # W >= 1: the CLI's message, beside the mask
    message = page.text_content('.field-error[data-for="mask"]')
    assert message.startswith("problem: mask window is 0: give the window width as a whole number")
    assert [shown_weight(t) for t in weight_titles(page)] == shown      # the last derivation stays
    edit(page, "window", "1", "derived")                   # each token sees only itself
    assert [shown_weight(t) for t in weight_titles(page)] == [1, 0, 0, 0, 1, 0, 0, 0, 1]
    before = page.evaluate("document.body.dataset.derived")
    page.uncheck('#grids input[aria-label="window causal"]')          # |i - j| < W, both sides
    page.wait_for_function("(b) => document.body.dataset.derived !== b", arg=before)
    assert [shown_weight(t) for t in weight_titles(page)] == [1, 0, 0, 0, 1, 0, 0, 0, 1]
    edit(page, "window", "2", "derived")
    Q, S, A = attention(LESSON, window=2, window_causal=False)
    shown = [shown_weight(t) for t in weight_titles(page)]
    assert shown == [three_digits(w) for row in A for w in row]
    assert shown[1] > 0 and shown[2] == 0 and shown[6] == 0
    with page.expect_download() as waiting:               # the window is in the problem file
        page.click("#download-toml")
    import tomllib
    assert tomllib.loads(Path(waiting.value.path()).read_text(encoding="utf-8"))["mask"] == \
        {"window": 2, "causal": False}
    fresh = page.context.new_page()                       # and in the address: it opens as it was
    fresh.goto(page.url, wait_until="load")
    fresh.wait_for_function("() => Boolean(document.body.dataset.derived)", timeout=30_000)
    assert fresh.input_value('#grids select[aria-label="mask"]') == "window"
    assert fresh.input_value('#grids input[aria-label="window"]') == "2"
    assert not fresh.is_checked('#grids input[aria-label="window causal"]')
    assert [shown_weight(t) for t in weight_titles(fresh)] == shown


def test_the_digits_are_chosen_on_the_page(page):
    before = page.evaluate("document.body.dataset.derived || '0'")
    page.select_option('#grids select[aria-label="digits"]', "6")
    page.wait_for_function("(b) => (document.body.dataset.derived || '0') !== b", arg=before)
    Q, S, A = attention(LESSON)
    assert [shown_weight(t) for t in weight_titles(page)] == [three_digits(w, 6) for row in A for w in row]
    assert page.url.endswith("&d=6")


def click_and_wait(tab, selector: str) -> None:
    before = tab.evaluate("document.body.dataset.derived || '0'")
    tab.click(selector)
    tab.wait_for_function("(b) => (document.body.dataset.derived || '0') !== b", arg=before)


def test_a_token_and_a_dimension_are_added_and_removed(page):
    click_and_wait(page, 'button[data-change="token+"]')
    assert page.input_value('#grids input[aria-label="tokens[3]"]') == "t3"
    edit(page, "X[3][1]", "1", "derived")
    grown = {**LESSON, "tokens": [*LESSON["tokens"], "t3"], "X": [*LESSON["X"], [0, 1, 0, 0]]}
    Q, S, A = attention(grown)
    assert matrix(page, "Q") == [[str(v) for v in row] for row in Q]
    assert [shown_weight(t) for t in weight_titles(page)] == [three_digits(w) for row in A for w in row]
    click_and_wait(page, 'button[data-change="dk+"]')
    edit(page, "W_q[1][3]", "2", "derived")
    edit(page, "W_k[3][3]", "1", "derived")
    wide = {**grown, "W_q": [[*r, 2 if i == 1 else 0] for i, r in enumerate(grown["W_q"])],
            "W_k": [[*r, 1 if i == 3 else 0] for i, r in enumerate(grown["W_k"])]}
    Q, S, A = attention(wide)                              # d_k = 4: the scale is 1/2
    assert matrix(page, "scores") == [[str(v) for v in row] for row in S]
    assert [shown_weight(t) for t in weight_titles(page)] == [three_digits(w) for row in A for w in row]
    click_and_wait(page, 'button[data-change="dk-"]')
    click_and_wait(page, 'button[data-change="token-"]')
    Q, S, A = attention(LESSON)
    assert [shown_weight(t) for t in weight_titles(page)] == [three_digits(w) for row in A for w in row]


def test_check_my_answers_right_unscaled_and_wrong(page):
    figures = [("weights[I]", "0.136, 0.432, 0.432"),       # right, rounded to 3 digits
               ("weights[I]", "0.0634, 0.468, 0.468"),      # the unscaled mistake (float64 below)
               ("scaled[love, love]", "6.1")]                # wrong: 16/√3 ≈ 9.24
    Q, S, A = attention(LESSON)
    unscaled = [math.exp(s - max(S[0])) for s in S[0]]
    assert [three_digits(v / sum(unscaled)) for v in unscaled] == [0.0634, 0.468, 0.468]
    assert [three_digits(w) for w in A[0]] == [0.136, 0.432, 0.432]
    page.click("#add-figure")
    for k, (target, text) in enumerate(figures):
        page.fill(f'input[aria-label="figure {k + 1} target"]', target)
        page.fill(f'input[aria-label="figure {k + 1} text"]', text)
    page.click("#check-figures")
    page.wait_for_function("() => document.body.dataset.checked === '1'")
    rows = page.eval_on_selector_all("#verdicts table.verdicts tbody tr", "rs => rs.map(r => ({cls: r.className, "
                                     "cells: [...r.cells].map(c => c.textContent.trim())}))")
    assert [r["cls"] for r in rows] == ["right", "not-right", "not-right"]
    assert rows[0]["cells"][2] == "✓ rounded"
    assert rows[1]["cells"][2] == "✗ mistake" and rows[1]["cells"][4] == "unscaled"
    assert rows[2]["cells"][2].startswith("✗") and rows[2]["cells"][2] != "✗ mistake"
    assert "9.24" in rows[2]["cells"][5] or "9.2" in rows[2]["cells"][3]


def test_the_downloaded_toml_reads_back_as_the_problem_derived(page, tmp_path):
    import tomllib

    from symattn.problem.problem import Problem

    edit(page, "W_q[0][0]", "3", "derived")
    edit(page, "W_q[2][1]", "1/2", "derived")
    edit(page, "W_q[3][1]", "2^(10^9)", "refused")        # not derived: the download leaves it out
    with page.expect_download() as waiting:
        page.click("#download-toml")
    saved = Path(waiting.value.path()).read_text(encoding="utf-8")
    lesson = tomllib.loads((ROOT / "symattn" / "examples" / "i-love-cats.toml").read_text(encoding="utf-8"))
    expected = {**lesson, "W_q": [[3, 0, 1], [1, 0, 0], [0, "1/2", 1], [0, 1, 1]]}
    assert tomllib.loads(saved) == expected
    assert waiting.value.suggested_filename == "problem.toml"
    Problem.from_toml_text(saved)                          # a problem the CLI reads


def test_hostile_token_names_stay_text(page):
    edit(page, "tokens[0]", "<img src=x onerror=alert(1)>", "derived")
    assert page.eval_on_selector_all("#derivation img", "xs => xs.length") == 0
    assert "<img src=x onerror=alert(1)>" in page.text_content("#derivation")


def screenshots(outdir: Path) -> None:
    """The page after an edit, and with an invalid entry (docs/serve.md)."""
    from browser import Browser, chromium_path

    server = start_server()
    browser = Browser(chromium_path() or "/usr/bin/chromium")
    try:
        tab = browser.browser.new_context(viewport={"width": 1100, "height": 1000}).new_page()
        tab.goto(server.origin + "/", wait_until="load")
        edit(tab, "W_q[0][0]", "3", "derived")
        tab.screenshot(path=str(outdir / "serve-edited.png"))
        tab.locator("#derivation #sec-weights").screenshot(path=str(outdir / "serve-weights.png"))
        edit(tab, "W_q[1][1]", "2^(10^9)", "refused")
        tab.screenshot(path=str(outdir / "serve-invalid.png"))
        tab = tab.context.new_page()                     # the lesson as it is, for the checks
        tab.goto(server.origin + "/", wait_until="load")
        tab.fill('input[aria-label="figure 1 text"]', "0.0634, 0.468, 0.468")
        tab.fill('input[aria-label="figure 2 target"]', "sqrt(d_k)")
        tab.fill('input[aria-label="figure 2 text"]', "1.73")
        tab.click("#check-figures")
        tab.wait_for_function("() => document.body.dataset.checked === '1'")
        tab.locator("#checker").screenshot(path=str(outdir / "serve-check.png"))
        tab.select_option('#grids select[aria-label="mask"]', "window")
        tab.wait_for_function("() => Boolean(document.body.dataset.derived)")
        tab.locator("#editor").screenshot(path=str(outdir / "serve-window.png"))
    finally:
        browser.close()
        stop_server(server)


if __name__ == "__main__":
    screenshots(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images")
