"""The offline self-check page: hashes instead of answers, judged in headless Chromium.

Unit tests check the canonical form of typed numbers and that no certified
decimal of the key, nor any mistake's value, at 1 to 6 places appears in a
page's source.  Browser tests (tests/browser.py, network off) type right
answers in several notations, a named mistake's value and a wrong value,
and read ``data-verdict`` and the visible message.  The right values typed
are computed independently in float64 from the lesson's inputs.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from browser import shared_browser
from symattn.numbers.certify import Rounding
from symattn.classroom.answers import load_versions
from symattn.cli import main
from symattn.document.support.page import CSS as PAGE_CSS
from symattn.classroom.selfcheck import CSS, SCRIPT, selfcheck_page
from symattn.classroom.selfcheck_data import MAX_PLACES, canonical, canonical_decimal

# The lesson, typed by hand, in float64 (independent of symattn)
X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], float)
W_q = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], float)
W_k = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], float)


def weights(scale: float) -> np.ndarray:
    z = (X @ W_q) @ (X @ W_k).T * scale
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


RIGHT = weights(1 / np.sqrt(3))
UNSCALED = weights(1.0)

NEGATIVE = """title = "Negative outputs"
tokens = ["a", "b"]
Q = [[1, 0], [0, 1]]
K = [[1, 0], [0, 1]]
V = [[-3, 2], [1, -4]]
"""


@pytest.mark.parametrize("typed, expected", [
    ("0.136", ("0.136", 3)), (" .136 ", ("0.136", 3)), ("00.136", ("0.136", 3)),
    ("0,136", ("0.136", 3)), ("13.6%", ("0.136", 3)), ("13,6 %", ("0.136", 3)),
    ("≈ 0.14", ("0.14", 2)), ("+0.14", ("0.14", 2)), ("1.36e-1", ("0.136", 3)),
    ("−1.15", ("-1.15", 2)), ("-0.00", ("0.00", 2)), ("16", ("16", 0)), ("16.0", ("16.0", 1)),
    ("5.", ("5", 0)), ("1e2", ("100", 0)),
    ("abc", None), ("", None), ("-", None), ("1/3", None), ("0.1.2", None), ("1,2,3", None),
])
def test_canonical(typed, expected):
    assert canonical(typed) == expected


def _decimals(page_versions, places_range=range(1, MAX_PLACES + 1)):
    """Every certified decimal a page must not contain: right values and mistakes' values."""
    found = set()
    for v in page_versions:
        for q in v.questions:
            for e in q.entries:
                for places in places_range:
                    for a in e.answers(Rounding(places=places)):
                        found.add(canonical_decimal(a.value))
    return found


def _source_without_style(html: str) -> str:
    """The page minus its stylesheet (the same constant text on every page: no answer in it)."""
    return re.sub(r"<style>.*?</style>", "", html, flags=re.S)


@pytest.mark.parametrize("example", ["i-love-cats", "soft-dictionary-sharpness-5", "i-love-cats-causal"])
def test_no_key_decimal_in_the_source(example):
    versions = load_versions(None, example, None, None)
    html = selfcheck_page(versions[0])
    assert CSS in html and PAGE_CSS in html         # the stylesheet is the shared constant
    source = _source_without_style(html)
    decimals = _decimals(versions)
    assert len(decimals) > 100
    leaks = [d for d in decimals if "." in d and re.search(rf"(?<![\d.]){re.escape(d)}(?!\d)", source)]
    assert leaks == []
    # and nothing readable: the data block is hex hashes, mistake names and the salt
    data = re.search(r'<script type="application/json" id="selfcheck-data">(.*?)</script>', html, re.S)
    assert not re.search(r"\d\.\d", re.sub(r'"(says|code)":"[^"]*"', "", data.group(1)))


def test_same_version_same_page():
    [v] = load_versions(None, "i-love-cats", None, None)
    assert selfcheck_page(v) == selfcheck_page(v)


# ------------------------------------------------------------------ in the browser

@pytest.fixture(scope="module")
def browser():
    yield shared_browser()


def _type(page, target: str, text: str, *, enter: bool = True) -> tuple[str | None, str]:
    box = page.locator(f'input[data-target="{target}"]')
    box.evaluate("e => { delete e.dataset.verdict; }")
    box.fill(text)
    if enter:
        box.press("Enter")
    page.wait_for_function("e => e.dataset.verdict !== undefined", arg=box.element_handle(), timeout=5000)
    message = page.locator(f'#{box.get_attribute("id")}-msg').text_content()
    return box.get_attribute("data-verdict"), message


def _open(browser, tmp_path: Path, html: str, name: str = "page.html"):
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    shown = browser.open(path)
    shown.page.wait_for_selector("body[data-ready=true]", timeout=5000)   # Web Crypto on file://
    return shown


def test_verdicts_in_chromium(browser, tmp_path):
    [v] = load_versions(None, "i-love-cats", None, None)
    shown = _open(browser, tmp_path, selfcheck_page(v))
    page = shown.page
    try:
        right = f"{RIGHT[0, 0]:.3f}"                          # 0.136, from float64
        assert _type(page, "weights[I, I]", right) == ("right", "Right (correctly rounded to 3 significant digits).")
        assert _type(page, "weights[I, I]", right.replace(".", ","))[0] == "right"
        assert _type(page, "weights[I, I]", f"{RIGHT[0, 0] * 100:.1f}%")[0] == "right"
        # the sheet asks for 3 significant digits: coarser is pointed out, finer is sent back
        assert _type(page, "weights[I, I]", f"{RIGHT[0, 0]:.2f}")[0] == "coarse"
        assert _type(page, "weights[cats, love]", f"{RIGHT[2, 1]:.3f}")[0] == "right"
        assert _type(page, "weights[cats, love]", f"{RIGHT[2, 1]:.6f}")[0] == "precision"
        verdict, message = _type(page, "weights[I, I]", f"{UNSCALED[0, 0]:.4f}")
        assert verdict == "mistake:unscaled" and "you did not divide by √d_k" in message
        verdict, message = _type(page, "weights[I, I]", "0.5")
        assert verdict == "not-right" and message.startswith("Not right")
        assert _type(page, "weights[I, I]", f"{RIGHT[0, 0]:.3f}".replace("6", "7"))[0] == "mistake:e-as-2.7"
        assert _type(page, "weights[I, I]", f"{RIGHT[0, 0] - 0.007:.3f}")[0] == "not-right"
        assert _type(page, "weights[I, I]", "two")[0] == "invalid"
        assert _type(page, "weights[I, I]", "0.1361234")[0] == "precision"   # finer than the sheet
        assert _type(page, "scores[love, love]", "16")[0] == "right"
        # the Check button judges every box of its question
        scores = (X @ W_q) @ (X @ W_k).T
        for i, a in enumerate(["I", "love", "cats"]):
            for j, b in enumerate(["I", "love", "cats"]):
                page.locator(f'input[data-target="scores[{a}, {b}]"]').fill(str(int(scores[i, j])))
        page.locator('button[data-question="q4"]').click()
        page.wait_for_function("() => document.querySelector('button[data-question=q4]').dataset.done")
        verdicts = page.locator("#q4 input").evaluate_all("es => es.map(e => e.dataset.verdict)")
        assert verdicts == ["right"] * 9
        # an emptied box loses its verdict and message on the next check
        page.locator('input[data-target="scores[I, I]"]').fill("")
        page.locator('button[data-question="q4"]').click()
        page.wait_for_function("() => document.querySelector('button[data-question=q4]').dataset.done === '2'")
        box = page.locator('input[data-target="scores[I, I]"]')
        assert box.get_attribute("data-verdict") is None
        assert page.locator(f'#{box.get_attribute("id")}-msg').text_content() == ""
        shown.assert_clean()
    finally:
        shown.close()


def test_page_reads_typed_text_as_python_does(browser, tmp_path):
    """The page's canonical() (JavaScript) and selfcheck_data.canonical (Python) agree on
    2,000 random strings of digits, points, commas, signs, %, e, spaces and ≈."""
    import random

    rng = random.Random(12)
    alphabet = list("0123456789") * 3 + list(".,%-+e ") + ["−", "≈", "\u00a0", "E", "0"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9))) for _ in range(2000)]
    [v] = load_versions(None, "soft-dictionary", None, ("weights",))
    shown = _open(browser, tmp_path, selfcheck_page(v))
    try:
        got = shown.page.evaluate("ts => ts.map(t => { const c = window.symattnCanonical(t); "
                                  "return c === null ? null : [c.text, c.places]; })", texts)
        expected = [None if (c := canonical(t)) is None else list(c) for t in texts]
        assert got == expected
        assert sum(1 for c in expected if c is not None) > 200     # plenty of readable numbers
        shown.assert_clean()
    finally:
        shown.close()


def test_negative_values_and_unicode_minus(browser, tmp_path):
    problem = tmp_path / "neg.toml"
    problem.write_text(NEGATIVE, encoding="utf-8")
    [v] = load_versions(problem, None, None, ("output",))
    Q = K = np.eye(2)
    z = Q @ K.T / np.sqrt(2)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    out = (e / e.sum(axis=1, keepdims=True)) @ np.array([[-3, 2], [1, -4]], float)
    shown = _open(browser, tmp_path, selfcheck_page(v))
    try:
        text = f"{out[0, 0]:#.3g}"                            # the sheet's 3 significant digits
        assert text.startswith("-")
        assert _type(shown.page, "output[a, 0]", "−" + text[1:])[0] == "right"
        assert _type(shown.page, "output[a, 0]", text[1:])[0] != "right"
        shown.assert_clean()
    finally:
        shown.close()


def test_worksheet_selfcheck_command(browser, tmp_path, capsys):
    """`worksheet --versions --selfcheck` writes one page per version and only those; each page
    accepts its own version's answers (from the teacher's problem files, in float64)."""
    import tomllib

    from symattn.classroom.answers import folder_codes

    out = tmp_path / "students"
    assert main(["worksheet", "--versions", "2", "--seed", "9", "--selfcheck", "-o", str(out)]) == 0
    teacher = tmp_path / "teacher"
    assert main(["worksheet", "--versions", "2", "--seed", "9", "-o", str(teacher)]) == 0
    codes = folder_codes(teacher)              # the codes the sheets print, where they print one
    names = {vid: codes.get(vid, vid) for vid in ("A", "B")}
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"selfcheck-{names['A']}.html", f"selfcheck-{names['B']}.html", "selfcheck.txt"])
    for vid in ("A", "B"):
        html = (out / f"selfcheck-{names[vid]}.html").read_text(encoding="utf-8")
        assert "seed" not in html.lower() and ".toml" not in html
        assert f"Version {names[vid]}" in html
        data = tomllib.loads((teacher / f"version-{vid}.toml").read_text(encoding="utf-8"))
        Xv, Wq, Wk = (np.array(data[k], float) for k in ("X", "W_q", "W_k"))
        z = (Xv @ Wq) @ (Xv @ Wk).T / np.sqrt(Wq.shape[1])
        e = np.exp(z - z.max(axis=1, keepdims=True))
        w = e / e.sum(axis=1, keepdims=True)
        shown = browser.open(out / f"selfcheck-{names[vid]}.html")
        try:
            shown.page.wait_for_selector("body[data-ready=true]", timeout=5000)
            token = data["tokens"][0]
            assert _type(shown.page, f"weights[{token}, {token}]", f"{w[0, 0]:#.3g}")[0] == "right"
            shown.assert_clean()
        finally:
            shown.close()
    # a second run replaces its own pages; a foreign file of the same name is refused
    assert main(["worksheet", "--versions", "2", "--seed", "9", "--selfcheck", "-o", str(out)]) == 0
    (out / "selfcheck.txt").unlink()
    capsys.readouterr()
    assert main(["worksheet", "--versions", "2", "--seed", "9", "--selfcheck", "-o", str(out)]) == 2
    assert "symattn did not write it" in capsys.readouterr().err
    assert main(["worksheet", "--selfcheck", "--pdf", "-o", str(tmp_path / "x")]) == 2


def test_script_has_no_network_and_no_answers():
    assert "fetch(" not in SCRIPT and "XMLHttpRequest" not in SCRIPT and "import(" not in SCRIPT
    assert "crypto.subtle.digest" in SCRIPT


def test_salt_does_not_depend_on_the_seed_line():
    """The salt is printed in the page: it comes from the problem's lines, not the comment
    naming the seed (two files that differ only there give the same salt)."""
    from symattn.classroom.selfcheck_data import salt_for

    [v] = load_versions(None, "i-love-cats", None, ("weights",))
    marked = type(v)(v.vid, "# symattn worksheet: version A of seed 1234\n" + v.toml, v.trace,
                     v.rounding, v.questions)
    assert salt_for(marked) == salt_for(v)
    other = type(v)("B", v.toml, v.trace, v.rounding, v.questions)
    assert salt_for(other) != salt_for(v)


TINY = "Q = [[{q}, 0]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\nscale = 1\n"


def test_small_weights_widen_the_page_to_their_places(browser, tmp_path):
    """3 significant digits of e^-12/(1 + e^-12) ≈ 6.14e-6 need 8 places: the page judges up
    to 8 (float64 gives the number typed); past MAX_PAGE_PLACES it is refused."""
    from symattn.classroom.answers import ClassroomError
    from symattn.classroom.selfcheck_data import MAX_PAGE_PLACES, page_data

    path = tmp_path / "tiny.toml"
    path.write_text(TINY.format(q=12), encoding="utf-8")
    [v] = load_versions(path, None, None, ("weights",))
    assert page_data(v).places == 8
    small = np.exp(-12.0) / (1 + np.exp(-12.0))
    shown = _open(browser, tmp_path, selfcheck_page(v))
    try:
        assert _type(shown.page, "weights[t0, k1]", f"{small:.8f}")[0] == "right"
        assert _type(shown.page, "weights[t0, k1]", f"{small:.9f}")[0] == "precision"   # finer than the sheet
        shown.assert_clean()
    finally:
        shown.close()
    path.write_text(TINY.format(q=30), encoding="utf-8")          # e^-30 ≈ 9.36e-14: 16 places
    [v] = load_versions(path, None, None, ("weights",))
    with pytest.raises(ClassroomError, match=f"at most {MAX_PAGE_PLACES}"):
        selfcheck_page(v)
