"""Claims are judged at the precision they are written (issue 8, item 4).

A figure written to p places stands for any value within ½·10^−p of it, so a
claim fails a fact only when no values that round to the written ones could
satisfy it.  The lesson's weights and outputs are computed here without
symattn (integers, then mpmath at 50 digits), rounded every way a person
writes them, and must satisfy every fact; claims just past the slack fail,
with a counterexample that shows the numbers as written.
"""

import tomllib
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from importlib import resources
from pathlib import Path

import mpmath
import pytest

import symattn as sa
from symattn import facts
from symattn.facts import Claims

LESSON = Path(str(resources.files("symattn.examples").joinpath("i-love-cats.toml")))
CLAIM_FACTS = ("rows-sum-to-one", "weights-in-open-interval", "convex-hull")


def matmul(a, b):
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def lesson_values() -> tuple[list[list[mpmath.mpf]], list[list[mpmath.mpf]]]:
    """The lesson's weights and output, independently: softmax(QKᵀ/√3)·V in mpmath."""
    data = tomllib.loads(LESSON.read_text(encoding="utf-8"))
    X = data["X"]
    Q, K, V = (matmul(X, data[w]) for w in ("W_q", "W_k", "W_v"))
    with mpmath.workdps(50):   # the global precision is left as it was
        weights, output = [], []
        for row in matmul(Q, [list(c) for c in zip(*K)]):
            e = [mpmath.exp((s - max(row)) / mpmath.sqrt(3)) for s in row]
            w = [x / sum(e) for x in e]
            weights.append(w)
            output.append([sum(w[j] * V[j][c] for j in range(3)) for c in range(3)])
    return weights, output


def text(x: mpmath.mpf, *, places: int | None = None, digits: int | None = None) -> str:
    """x correctly rounded (irrational here, so never a tie), as a person writes it."""
    with mpmath.workdps(50):
        d = Decimal(mpmath.nstr(x, 45, strip_zeros=False, min_fixed=-50, max_fixed=50))
    exponent = -places if places is not None else d.adjusted() - digits + 1
    return format(d.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_EVEN), "f")


@pytest.fixture(scope="module")
def lesson():
    return sa.attend(sa.load_example("i-love-cats"))


@pytest.fixture(scope="module")
def values():
    return lesson_values()


def test_the_issue_reproducer_holds(lesson):
    # the lesson's weights to 3 significant digits: row 'love' sums to 1.00019, within
    # ½·10⁻⁶ + ½·10⁻³ + ½·10⁻⁴ = 0.0005505 of 1
    claims = Claims.from_mapping({"weights": [["0.136", "0.432", "0.432"],
                                              ["0.000890", "0.909", "0.0903"],
                                              ["0.00744", "0.755", "0.238"]]})
    row = [Fraction(x) for x in ("0.000890", "0.909", "0.0903")]
    assert sum(row) == Fraction(100019, 100000)
    assert abs(sum(row) - 1) <= Fraction(1, 2 * 10**6) + Fraction(1, 2000) + Fraction(1, 20000)
    proof = facts.prove("rows-sum-to-one", lesson, claims)
    assert proof.holds is True, proof.text()
    assert ("claimed row 'love': 0.000890 + 0.909 + 0.0903 = 1.000190, within ±0.0005505 of 1"
            in proof.text())
    assert "100019/100000" not in proof.text()


@pytest.mark.parametrize("how", [{"places": p} for p in range(1, 7)] +
                                [{"digits": d} for d in range(1, 7)])
def test_correctly_rounded_figures_satisfy_every_fact(lesson, values, how):
    weights, output = values
    claims = Claims.from_mapping({"weights": [[text(x, **how) for x in row] for row in weights],
                                  "output": [[text(x, **how) for x in row] for row in output]})
    for name in CLAIM_FACTS:
        proof = facts.prove(name, lesson, claims)
        assert proof.holds is True, proof.text()


def test_to_three_places_as_the_issue_wrote_them(lesson):
    # a TOML file keeps 0.090 as written (3 places), where a Python float would be 0.09
    claims = Claims.from_mapping(dict(_toml(
        "weights = [[0.136, 0.432, 0.432], [0.001, 0.909, 0.090], [0.007, 0.755, 0.238]]")))
    assert [e.text for e in claims.entries("weights")[1]] == ["0.001", "0.909", "0.090"]
    for name in ("rows-sum-to-one", "weights-in-open-interval"):
        assert facts.prove(name, lesson, claims).holds is True


def _toml(source: str) -> dict:
    from symattn.exact.coerce import DecimalText
    return tomllib.loads(source, parse_float=DecimalText)


@pytest.mark.parametrize("row, holds, shown, within", [
    (["0.5", "0.5", "0.1", "0.1"], True, None, None),        # Σ 1.2: exactly 4·0.05 off (0.45+0.45+0.05+0.05)
    (["0.5", "0.5", "0.2", "0.1"], False, "1.3", "0.2"),     # Σ 1.3: past the slack
    (["0.34", "0.34", "0.34"], False, "1.02", "0.015"),
    (["0.335", "0.335", "0.331"], True, None, None),         # Σ 1.001, slack 0.0015
    (["0.335", "0.335", "0.3315"], False, "1.0015", "0.00105"),   # the 4th place shrinks the slack
])
def test_the_slack_is_the_half_units_added_up(row, holds, shown, within):
    claims = Claims.from_mapping({"weights": [row]})
    proof = facts.prove("rows-sum-to-one", None, claims)
    total = sum(Fraction(x) for x in row)
    slack = sum(Fraction(1, 2 * 10 ** len(x.split(".")[1])) for x in row)
    assert proof.holds is (abs(total - 1) <= slack) is holds
    if not holds:
        assert proof.counterexample["sum"] == shown and proof.counterexample["within"] == within
        assert proof.counterexample["claimed"] == row


def test_exact_entries_have_no_slack():
    def holds(row):
        return facts.prove("rows-sum-to-one", None, Claims.from_mapping({"weights": [row]})).holds

    assert holds(["1/4", "1/4", "1/2"]) and holds([1, 0, 0]) and holds(["1/3", "1/3", "1/3"])
    assert not holds(["1/3", "1/3", "1/4"])
    assert holds(["1/3", "1/3", "0.33"])           # Σ = 299/300: within the 0.005 of 0.33
    assert not holds(["1/3", "1/3", "0.32"])       # Σ = 0.98667: past it
    proof = facts.prove("rows-sum-to-one", None, Claims.from_mapping({"weights": [["1/3", "1/3", "0.32"]]}))
    assert proof.counterexample["sum"] == "74/75"   # not a decimal: the exact sum


@pytest.mark.parametrize("claim, holds", [
    ("0.000", True),      # a weight of 0.0001 rounds to 0.000
    ("0", False),         # exactly 0 is not in (0, 1)
    ("1.000", True),
    ("1.001", False),     # 1.0005 is already ≥ 1
    ("-0.0004", False),
    ("0.5", True),
])
def test_open_interval_at_written_precision(claim, holds):
    claims = Claims.from_mapping({"weights": [[claim, "0.5"]]})
    proof = facts.prove("weights-in-open-interval", None, claims)
    assert proof.holds is holds, proof.text()
    if not holds:
        assert proof.counterexample["claimed"] == claim
    elif claim in ("0.000", "1.000"):
        assert f"[0, 0] = {claim} only as a rounding as written" in proof.text()


@pytest.mark.parametrize("claims, holds, claimed", [
    ([["1", "0", "0"], ["0.0010", "0.999", "0"], ["0.007", "0.755", "0.238"]], True, None),
    ([["1.00", "0.000", "0"], ["0.001", "0.999", "0.00"], ["0.007", "0.755", "0.238"]], True, None),
    ([["0.999", "0", "0"], ["0.001", "0.999", "0"], ["0.007", "0.755", "0.238"]], False, "0.999"),
    ([["1", "0", "0"], ["0.001", "0.998", "0.001"], ["0.007", "0.755", "0.238"]], False, "0.001"),
    ([["1", "0", "0"], ["0.001", "0.999", "0.0004"], ["0.007", "0.755", "0.238"]], False, "0.0004"),
])
def test_masked_and_sole_weights_at_written_precision(claims, holds, claimed):
    trace = sa.attend(sa.load_example("i-love-cats-causal"))
    proof = facts.prove("weights-in-open-interval", trace, Claims.from_mapping({"weights": claims}))
    assert proof.holds is holds, proof.text()
    if claimed is not None:
        assert proof.counterexample["claimed"] == claimed


@pytest.mark.parametrize("entry, holds", [
    ("8.0", True),        # row 'love', column 1 is 7.99…: 8.0 at 1 place is its rounding
    ("8.", True),
    ("8.04", False),      # 8.035 > 8 = max V[:, 1]
    ("8.004", False),
    ("8.004e0", False),
    ("9", False),
    ("1.95", False),      # below min V[:, 1] = 2 by more than 0.005
    ("2.0", True),
])
def test_convex_hull_at_written_precision(lesson, values, entry, holds):
    _, output = values
    rows = [[text(x, places=2) for x in row] for row in output]
    rows[1][1] = entry
    proof = facts.prove("convex-hull", lesson, Claims.from_mapping({"output": rows}))
    assert proof.holds is holds, proof.text()
    if not holds:
        assert proof.counterexample["claimed"] == entry
        assert (proof.counterexample["row"], proof.counterexample["column"]) == ("love", 1)
        assert "does NOT lie (column 1)" in proof.text()
