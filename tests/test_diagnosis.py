"""A named mistake must explain the WHOLE answer (issue 8, item 3).

What each mistake gives is computed here independently (mpmath at 40 digits
from the lesson's integer matrices), never through symattn.
"""

import json
from decimal import ROUND_HALF_UP, Decimal

import mpmath
import pytest

import symattn as sa
from symattn.check import Checker

X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
W_Q = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
W_K = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
W_V = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
ROWS = {"I": 0, "love": 1, "cats": 2}


def _mul(A, B):
    return [[sum(a * b for a, b in zip(row, col)) for col in zip(*B)] for row in A]


def lesson(base=None, scale=None):
    """Weights and output of the lesson with exponentials base^x (e by default)."""
    mpmath.mp.dps = 40
    base = mpmath.e if base is None else base
    scale = 1 / mpmath.sqrt(3) if scale is None else scale
    Q, K, V = _mul(X, W_Q), _mul(X, W_K), _mul(X, W_V)
    scores = _mul(Q, list(zip(*K)))
    weights, output = [], []
    for row in scores:
        ex = [base ** (s * scale) for s in row]
        w = [x / sum(ex) for x in ex]
        weights.append(w)
        output.append([sum(w[k] * V[k][c] for k in range(3)) for c in range(3)])
    return weights, output


def fmt(x, places=2) -> str:
    d = Decimal(mpmath.nstr(x, 35, min_fixed=-40, max_fixed=40))
    return str(d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def cut(x, places=2) -> str:
    d = Decimal(mpmath.nstr(x, 35, min_fixed=-40, max_fixed=40))
    return str(d.quantize(Decimal(1).scaleb(-places), rounding="ROUND_DOWN"))


E_AS_27 = mpmath.mpf(27) / 10


@pytest.fixture(scope="module")
def checker():
    return Checker(sa.load_example("i-love-cats"))


def test_the_reproducer_a_mistake_that_misses_an_entry_is_not_named(checker):
    _, right = lesson()
    _, e27 = lesson(base=E_AS_27)
    assert [fmt(x) for x in right[0]] == ["1.86", "6.32", "1.70"]
    assert [fmt(x) for x in e27[0]] == ["1.86", "6.31", "1.71"]   # NOT 1.70: e-as-2.7 misses
    assert cut(right[0][1]) == "6.31" and fmt(right[0][1], 4) == "6.3194"
    v = checker.check("output[I]", "1.86, 6.31, 1.70")
    assert v.code == "last-digit" and v.mistake is None and v.also == []
    assert [e.code for e in v.entries] == ["rounded", "last-digit", "rounded"]
    slip = v.entries[1]
    assert slip.truncation is True and slip.mistake is None and slip.also == []
    assert "6.31 is 6.3194 truncated" in v.message
    assert "e-as-2.7" not in v.message


def test_the_reproducer_a_one_digit_slip_is_last_digit(checker):
    _, right = lesson()
    _, e27 = lesson(base=E_AS_27)
    assert [fmt(x) for x in right[1]] == ["2.00", "7.81", "0.27"]
    assert [fmt(x) for x in e27[1]] == ["2.00", "7.81", "0.28"]   # reproduces every entry...
    v = checker.check("output[love]", "2.00, 7.81, 0.28")
    assert v.code == "last-digit" and v.mistake is None               # ...but so does one slip
    assert v.entries[2].code == "last-digit" and v.entries[2].truncation is False
    assert v.also == ["e-as-2.7 (powers of 2.7 instead of e)"]       # the alternative, named
    assert "would also give every entry written" in v.message


def test_a_mistake_that_reproduces_every_entry_is_named(checker):
    w27, _ = lesson(base=E_AS_27)
    w, _ = lesson()
    assert [fmt(x, 3) for x in w27[0]] == ["0.137", "0.431", "0.431"]
    assert [fmt(x, 3) for x in w[0]] == ["0.136", "0.432", "0.432"]
    v = checker.check("weights[I]", "0.137, 0.431, 0.431")
    assert v.code == "mistake" and v.mistake == "e-as-2.7"
    assert all(e.code == "mistake" and e.mistake == "e-as-2.7" for e in v.entries)


def test_the_readme_unscaled_love_row_still_holds(checker):
    unscaled, _ = lesson(scale=1)
    scaled, _ = lesson()
    assert [fmt(x) for x in unscaled[1]] == ["0.00", "0.98", "0.02"]
    assert [fmt(x) for x in scaled[1]] == ["0.00", "0.91", "0.09"]
    v = checker.check("weights[love]", "0.00 / 0.98 / 0.02")
    assert v.code == "mistake" and v.mistake == "unscaled"
    assert v.message.startswith("every entry is what the mistake unscaled")


def test_a_single_entry_far_off_is_still_a_named_mistake(checker):
    unscaled, _ = lesson(scale=1)
    assert fmt(unscaled[1][2]) == "0.02"                    # the right value is 0.09
    v = checker.check("weights[love, cats]", "0.02")
    assert v.code == "mistake" and v.mistake == "unscaled"


def test_a_scalar_one_unit_off_is_last_digit_with_its_alternatives(checker):
    w27, _ = lesson(base=E_AS_27)
    assert fmt(w27[0][0], 3) == "0.137"
    v = checker.check("weights[I, I]", "0.137")
    assert v.code == "last-digit" and v.mistake is None and v.entries[0].truncation is False
    assert "e-as-2.7 (powers of 2.7 instead of e)" in v.also
    assert "would also give this figure" in v.message


def test_right_answers_carry_no_remark(checker):
    w27, _ = lesson(base=E_AS_27)
    assert [fmt(x) for x in w27[0]] == ["0.14", "0.43", "0.43"]     # e-as-2.7 agrees at 2 places
    for target, text in [("weights[I]", "0.14, 0.43, 0.43"), ("scaled[I, I]", "2/√3"),
                         ("scores", "[[2, 4, 4], [4, 16, 12], [4, 12, 10]]"),
                         ("exp[cats, I]", "0.010"), ("output[I]", "1.86, 6.32, 1.70")]:
        v = checker.check(target, text)
        assert v.right, (target, v.message)
        assert v.also == [] and all(e.also == [] for e in v.entries)
        assert "indistinguishable" not in v.message
        assert v.to_json()["indistinguishable_from"] == []


def test_two_mistakes_that_both_reproduce_the_answer_are_both_named():
    # scores Q·Kᵀ = [[1, 0], [2, 1]] at scale 1: the right weight (a, a) is e/(e + 1)
    p = sa.Problem(Q=[[1, 0], [0, 1]], K=[[1, 2], [0, 1]], V=[[1, 0], [0, 1]],
                   tokens=["a", "b"], scale=1)
    mpmath.mp.dps = 30
    right = mpmath.e / (mpmath.e + 1)
    # K·Qᵀ = [[1, 2], [0, 1]] and a softmax down the columns of Q·Kᵀ both give e/(e + e²)
    swapped = mpmath.e / (mpmath.e + mpmath.e ** 2)
    assert (fmt(right, 3), fmt(swapped, 3)) == ("0.731", "0.269")
    v = Checker(p).check("weights[a, a]", "0.269")
    assert v.code == "mistake"
    named = {v.mistake, *(a.split(" (")[0] for a in v.also)}
    assert named == {"transposed-scores", "softmax-over-columns"}
    assert "gives it too" in v.message


@pytest.mark.parametrize("target, written, truncated", [
    # 1.99999 + π·10⁻⁷ = 1.9999903…: rounds to 2.00 at 2 places and to 2.0000 at 4, so only
    # a rounding at 6 places shows it is below 2: 1.99 IS its truncation
    ("19999/10000 + pi/10^7", "1.99", True),
    ("2 - 1/10^9", "1.99", True),          # rational, just below 2
    # exactly 2: 1.99 is neither its rounding nor its cut, and it is wrong, not last-digit: an
    # exact value had nothing to round (tests/test_messages.py)
    ("2 + 1/10^9", "1.99", False),         # above 2: cutting gives 2.00
    ("2 + 1/10^9", "2.01", False),         # one unit AWAY from zero: never a truncation
    ("-(2 - 1/10^9)", "-1.99", True),      # negative: cut towards zero
])
def test_truncation_is_decided_exactly(checker, target, written, truncated):
    mpmath.mp.dps = 30
    x = {"19999/10000 + pi/10^7": mpmath.mpf(19999) / 10000 + mpmath.pi / 10**7,
         "2 - 1/10^9": 2 - mpmath.mpf(1) / 10**9, "2": mpmath.mpf(2),
         "2 + 1/10^9": 2 + mpmath.mpf(1) / 10**9,
         "-(2 - 1/10^9)": -(2 - mpmath.mpf(1) / 10**9)}[target]
    assert (cut(x) == written) is truncated
    v = checker.check(target, written)
    assert v.code == "last-digit", v.message
    assert v.entries[0].truncation is truncated
    assert ("truncated" in v.message) is truncated


def test_the_json_of_a_slip_names_no_mistake(checker):
    data = checker.check("output[I]", "1.86, 6.31, 1.70").to_json()
    assert data["verdict"] == "last-digit" and data["mistake"] is None
    assert [e["mistake"] for e in data["entries"]] == [None, None, None]
    assert json.dumps(data)
