"""The self-check page holds the student to the sheet's rounding (issue 25): only the sheet's
precision is hashed, a coarser right answer is "right, but the sheet asks for 3 significant
digits", the exact forms the sheet asks for (−1/2) are accepted, and PrairieLearn follows the
same rule.  Values are computed here with mpmath and float64, independently of symattn; the
page is judged in Debian's chromium (tests/browser.py)."""

from __future__ import annotations

import hashlib
import json
import random
import re

import mpmath
import pytest

from browser import shared_browser
from symattn.classroom.answers import load_versions
from symattn.classroom.selfcheck import selfcheck_page
from symattn.classroom.selfcheck_data import canonical_exact, page_data

mpmath.mp.dps = 30
Z = [mpmath.mpf(s) / mpmath.sqrt(3) for s in (2, 4, 4)]
W_I = [mpmath.e ** z / sum(mpmath.e ** y for y in Z) for z in Z]        # 0.136126, 0.431937, ...

# one query, two tied keys: the weights are exactly 1/2 and the outputs exactly −1/2
TIE = """title = "A tie"
tokens = ["a"]
key_tokens = ["x", "y"]
Q = [[1, 0]]
K = [[1, 0], [1, 0]]
V = [[1, -2], [-2, 1]]
scale = 1
"""


def fixed(x, p: int) -> str:
    scaled = int(mpmath.nint(x * mpmath.mpf(10) ** p))
    digits = str(abs(scaled)).rjust(p + 1, "0")
    return ("-" if scaled < 0 else "") + (f"{digits[:-p]}.{digits[-p:]}" if p else digits)


def sha(salt: str, target: str, text: str) -> str:
    return hashlib.sha256(f"{salt}|{target}|{text}".encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def lesson():
    [v] = load_versions(None, "i-love-cats", None, ("scaled", "weights", "output"))
    return v


def test_only_the_sheets_precision_is_hashed(lesson):
    data = page_data(lesson).to_json()
    box = data["targets"]["weights[I, I]"]
    assert box["p"] == 3 and data["rounding"] == "3 significant digits"
    hashes = box["h"]
    assert hashes[sha(data["salt"], "weights[I, I]", fixed(W_I[0], 3))] == 0       # 0.136
    for places in (0, 1, 2, 4, 5, 6):                                             # 0, 0.1, 0.14, 0.1361, …
        assert sha(data["salt"], "weights[I, I]", fixed(W_I[0], places)) not in hashes
    # no box holds a hash at any precision other than its own: a search for a key entry
    # must try every value with the sheet's digits (hundreds), not 10 per place
    every = sum(len(b["h"]) for b in data["targets"].values())
    assert every < 20 * len(data["targets"])


def test_the_exact_forms_are_hashed_canonically(tmp_path):
    problem = tmp_path / "tie.toml"
    problem.write_text(TIE, encoding="utf-8")
    [v] = load_versions(problem, None, None, ("weights", "output"))
    data = page_data(v).to_json()
    salt = data["salt"]
    assert data["targets"]["weights[a, x]"]["h"][sha(salt, "weights[a, x]", "=1/2")] == 0
    assert data["targets"]["output[a, 1]"]["h"][sha(salt, "output[a, 1]", "=-1/2")] == 0
    assert data["targets"]["output[a, 1]"]["x"] == 1
    assert [canonical_exact(t) for t in ("-1/2", "−2/4", "-0.5", "-0.500", "- 1 / 2", "16", "0.136", "1/0", "x")] \
        == ["-1/2", "-1/2", "-1/2", "-1/2", "-1/2", "16", "17/125", None, None]


# ------------------------------------------------------------------ in the browser

@pytest.fixture(scope="module")
def browser():
    yield shared_browser()


def _open(browser, tmp_path, html: str):
    path = tmp_path / "page.html"
    path.write_text(html, encoding="utf-8")
    shown = browser.open(path)
    shown.page.wait_for_selector("body[data-ready=true]", timeout=5000)
    return shown


def _type(page, target: str, text: str) -> tuple[str | None, str]:
    box = page.locator(f'input[data-target="{target}"]')
    box.evaluate("e => { delete e.dataset.verdict; }")
    box.fill(text)
    box.press("Enter")
    page.wait_for_function("e => e.dataset.verdict !== undefined", arg=box.element_handle(), timeout=10000)
    return box.get_attribute("data-verdict"), page.locator(f'#{box.get_attribute("id")}-msg').text_content()


def test_a_coarser_right_answer_is_not_right(browser, tmp_path, lesson):
    """The issue's cases: 0 for a weight of 0.136 and 6 for 6.32 were "Right." Now they are
    right only to their own places, and the page says what the sheet asks for."""
    out_I1 = (2 * mpmath.e ** (-2 / mpmath.sqrt(3)) + 14) / (mpmath.e ** (-2 / mpmath.sqrt(3)) + 2)   # 6.31937
    shown = _open(browser, tmp_path, selfcheck_page(lesson))
    page = shown.page
    try:
        verdict, message = _type(page, "weights[I, I]", "0")
        assert verdict == "coarse"
        assert message == ("Right to 0 decimal places, but the sheet asks for 3 significant digits "
                           "(3 decimal places here).")
        assert _type(page, "output[I, 1]", fixed(out_I1, 0)) == (
            "coarse", "Right to 0 decimal places, but the sheet asks for 3 significant digits "
                      "(2 decimal places here).")
        assert _type(page, "output[I, 1]", fixed(out_I1, 2))[0] == "right"            # 6.32
        assert _type(page, "weights[I, I]", fixed(W_I[0], 1))[0] == "coarse"          # 0.1
        assert _type(page, "weights[I, I]", fixed(W_I[0], 2))[0] == "coarse"          # 0.14
        assert _type(page, "weights[I, I]", "0.13")[0] != "coarse"                    # 0.136 is not 0.13
        assert _type(page, "weights[I, I]", fixed(W_I[0], 4))[0] == "precision"       # 0.1361
        # 2/√3 = 1.1547: the sheet's 1.15 is a tie at 1 place, but the exact value rounds to 1.2
        two = 2 / mpmath.sqrt(3)
        assert (fixed(two, 2), fixed(two, 1)) == ("1.15", "1.2")
        assert _type(page, "scaled[I, I]", "1.2")[0] == "coarse"
        assert _type(page, "scaled[I, I]", "1.1")[0] == "not-right"
        assert _type(page, "scaled[I, I]", "1.15")[0] == "right"
        shown.assert_clean()
    finally:
        shown.close()


def test_the_exact_fractions_the_sheet_asks_for(browser, tmp_path):
    problem = tmp_path / "tie.toml"
    problem.write_text(TIE, encoding="utf-8")
    [v] = load_versions(problem, None, None, ("scores", "weights", "output"))
    shown = _open(browser, tmp_path, selfcheck_page(v))
    page = shown.page
    try:
        for typed in ("-1/2", "−1/2", "-2/4", "-0.5", "-0.500", "−0,5"):
            assert _type(page, "output[a, 1]", typed) == ("right", "Right (exactly)."), typed
        assert _type(page, "output[a, 1]", "1/2")[0] == "mistake:wrong-step"      # the weights given for it
        assert _type(page, "output[a, 1]", "1/3")[0] == "not-right"
        assert _type(page, "output[a, 1]", "-1/0")[0] == "invalid"
        assert _type(page, "weights[a, y]", "1/2")[0] == "right"
        assert _type(page, "scores[a, x]", "1")[0] == "right"                 # a whole number, exactly
        verdict, message = _type(page, "output[a, 1]", "-1")
        assert verdict == "coarse" and "or the exact value" in message
        shown.assert_clean()
    finally:
        shown.close()


def test_page_reads_exact_forms_as_python_does(browser, tmp_path, lesson):
    rng = random.Random(25)
    alphabet = list("0123456789") * 3 + list("/.,-+ %") + ["−", "0"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(1500)]
    shown = _open(browser, tmp_path, selfcheck_page(lesson))
    try:
        got = shown.page.evaluate("ts => ts.map(t => window.symattnExact(t))", texts)
        assert got == [canonical_exact(t) for t in texts]
        assert sum(1 for g in got if g is not None and "/" in g) > 50
    finally:
        shown.close()


# ------------------------------------------------------------------ PrairieLearn

def test_prairielearn_allows_fractions_and_holds_to_the_sheet(tmp_path):
    from symattn.classroom.plruntime import grade
    from symattn.classroom.prairielearn import prairielearn_files

    problem = tmp_path / "tie.toml"
    problem.write_text(TIE, encoding="utf-8")
    versions = load_versions(problem, None, None, ("output",))
    files = prairielearn_files(versions)
    assert 'allow-fractions="true"' in files["question.html"]
    assert 'allow-fractions="false"' not in files["question.html"]
    scope: dict = {}
    exec(compile(files["server.py"].split("from symattn.classroom import plruntime")[1], "server", "exec"), scope)
    settings, table = scope["SETTINGS"], scope["VERSIONS"]
    # PrairieLearn's own comparison has graded; symattn's rule sets each question's score
    data = {"variant_seed": 0, "params": {}, "correct_answers": {},
            "raw_submitted_answers": {"output1": "-1/2", "output2": "-0.5"},
            "partial_scores": {"output": {"score": 0.5, "weight": 1}}, "score": 0.5}
    grade(data, table, settings)
    assert data["partial_scores"]["output"]["score"] == 1 and data["score"] == 1
    data = {"variant_seed": 0, "params": {}, "correct_answers": {},
            "raw_submitted_answers": {"output1": "-1", "output2": "-0.500"},
            "partial_scores": {"output": {"score": 1, "weight": 1}}, "score": 1}
    grade(data, table, settings)
    assert data["partial_scores"]["output"]["score"] == 0.5 and data["score"] == 0.5
    assert "but the sheet asks for 3 significant digits" in data["feedback"]["symattn"]


def test_prairielearn_lesson_coarse_answer_gets_feedback():
    from symattn.classroom.plruntime import grade
    from symattn.classroom.prairielearn import prairielearn_files

    versions = load_versions(None, "i-love-cats", None, ("weights",))
    files = prairielearn_files(versions)
    scope: dict = {}
    exec(compile(files["server.py"].split("from symattn.classroom import plruntime")[1], "server", "exec"), scope)
    typed = {f"weights{k + 1}": "0" for k in range(9)}
    typed["weights1"] = fixed(W_I[0], 3)
    data = {"variant_seed": 0, "params": {}, "correct_answers": {}, "raw_submitted_answers": typed,
            "partial_scores": {"weights": {"score": 0.0, "weight": 1}}, "score": 0.0}
    grade(data, scope["VERSIONS"], scope["SETTINGS"])
    feedback = data["feedback"]["symattn"]
    assert re.search(r"weights\[love, I\]</code>: right to 0 decimal places, but the sheet asks for "
                     r"3 significant digits", feedback)
    # 0.136 right, love's 0.000890 and cats' 0.00744 round to 0 (coarse, not right): 1 of 9
    assert data["partial_scores"]["weights"]["score"] == pytest.approx(1 / 9)
    assert json.dumps(data)


def test_an_exact_tie_at_the_sheets_precision_accepts_either_neighbour(tmp_path):
    """1/8 at 2 significant digits is halfway between 0.12 and 0.13: check accepts either,
    and so do the page and PrairieLearn."""
    from symattn.classroom.plruntime import sheet_verdict
    from symattn.numbers.certify import Rounding

    problem = tmp_path / "eighth.toml"
    problem.write_text(TIE.replace('V = [[1, -2], [-2, 1]]', 'V = [["1/4", 0], [0, "-1/4"]]'), encoding="utf-8")
    [v] = load_versions(problem, None, Rounding(digits=2), ("output",))
    data = page_data(v).to_json()
    for target, pair in (("output[a, 0]", ("0.12", "0.13")), ("output[a, 1]", ("-0.12", "-0.13"))):
        hashes = data["targets"][target]["h"]
        assert all(hashes.get(sha(data["salt"], target, text)) == 0 for text in pair), target
        assert sha(data["salt"], target, "0.1" if "-" not in pair[0] else "-0.1") not in hashes
    e = v.questions[0].entries[0]
    for typed, expected in (("0.12", "right"), ("0.13", "right"), ("1/8", "right"), ("0.1", "coarse"),
                            ("0.125", "right"), ("0.14", "not-right")):
        assert sheet_verdict(v, e, typed, e.checker.check(e.target, typed)) == expected, typed
