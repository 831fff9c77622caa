"""A causal worksheet class graded end to end (issue 8, item 2).

``symattn worksheet --versions 3`` of the causal lesson → a class CSV whose
answers are computed here independently (integers for Q, K, V and the scores,
mpmath at 50 digits for the softmax; the causal mask applied by hand) →
``symattn grade FOLDER class.csv``.  Every verdict is asserted: right answers
with blocked weights written 0 and masked shifted scores written -inf, −∞ or
-oo, and wrong ones.
"""

import csv
import io
import subprocess
import sys
import tomllib
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import mpmath
import pytest
from clirun import cli

RIGHT = {"exact", "rounded"}
TOKENS = ["I", "love", "cats"]


def run(*args: str) -> subprocess.CompletedProcess:
    """The command line in-process (tests/clirun.py): no new interpreter to start."""
    return cli(*args)


def matmul(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def sig3(x: mpmath.mpf) -> str:
    """x correctly rounded to 3 significant digits (x is irrational here: never a tie)."""
    with mpmath.workdps(50):
        d = Decimal(mpmath.nstr(x, 45, strip_zeros=False, min_fixed=-50, max_fixed=50))
    step = Decimal(1).scaleb(d.adjusted() - 2)
    return format(d.quantize(step, rounding=ROUND_HALF_EVEN), "f")


def reference(path: Path) -> dict:
    """The key of one version, computed without symattn."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data["mask"] == "causal" and "scale" not in data
    X, W_q, W_k, W_v = (data[k] for k in ("X", "W_q", "W_k", "W_v"))
    assert all(isinstance(v, int) for M in (X, W_q, W_k, W_v) for row in M for v in row)
    Q, K, V = matmul(X, W_q), matmul(X, W_k), matmul(X, W_v)
    d_k = len(W_q[0])
    scores = matmul(Q, [list(c) for c in zip(*K)])
    with mpmath.workdps(50):   # the global precision is left as it was
        weights, output, shifted = [], [], []
        for i, row in enumerate(scores):
            allowed = list(range(i + 1))
            top = max(row[j] for j in allowed)
            shifted.append([(row[j] - top) / mpmath.sqrt(d_k) if j in allowed else None
                            for j in range(len(row))])
            e = [mpmath.exp(shifted[i][j]) if j in allowed else mpmath.mpf(0) for j in range(len(row))]
            total = sum(e)
            w = [x / total for x in e]
            weights.append(["1" if len(allowed) == 1 and j == 0 else "0" if j not in allowed
                            else sig3(w[j]) for j in range(len(row))])
            out = [sum(w[j] * V[j][c] for j in allowed) for c in range(len(V[0]))]
            output.append([str(V[0][c]) if i == 0 else sig3(out[c]) for c in range(len(V[0]))])
    return {"weights": weights, "output": output, "shifted": shifted, "V": V}


def slip(figure: str) -> str:
    """The same figure with its last digit one higher (or lower from 9)."""
    last = figure[-1]
    return figure[:-1] + (str(int(last) + 1) if last != "9" else "8")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("causal") / "ws"
    made = run("worksheet", "--versions", "3", "--seed", "7", "--example", "i-love-cats-causal",
               "-o", str(folder))
    assert made.returncode == 0, made.stderr
    ids = sorted(p.stem[len("version-"):] for p in folder.glob("version-*.toml"))
    assert ids == ["A", "B", "C"]
    keys = {v: reference(folder / f"version-{v}.toml") for v in ids}
    header = ["student", "version", "weights[I]", "weights[love]", "weights[cats]",
              "output[I]", "output[love]", "output[cats]", "weights[love, cats]",
              "shifted[I, love]", "shifted[I, cats]", "shifted[love, cats]"]
    rows, expected = [header], {}
    for v, key in keys.items():
        W, O = key["weights"], key["output"]
        right = [", ".join(W[0]), ", ".join(W[1]), ", ".join(W[2]),
                 ", ".join(O[0]), ", ".join(O[1]), ", ".join(O[2]), "0", "-inf", "−∞", "-oo"]
        rows.append([f"right-{v}", v, *right])
        expected[f"right-{v}"] = ["right"] * len(right)
        # the same, with blocked weights written to places and the output to 3 digits
        padded = list(right)
        padded[0] = ", ".join("1.00" if x == "1" else "0.00" for x in W[0])
        padded[6] = "0.000"
        rows.append([f"padded-{v}", v, *padded])
        expected[f"padded-{v}"] = ["right"] * len(right)
        # wrong ones: the mask ignored in row I (uniform over all keys is not the answer),
        # a blocked weight that is not 0, a slip in the last digit, a finite masked score
        wrong = list(right)
        wrong[0] = "0.333, 0.333, 0.333"
        wrong[1] = f"{W[1][0]}, {W[1][1]}, 0.5"
        wrong[5] = ", ".join([*O[2][:-1], slip(O[2][-1])])
        wrong[6] = "0.5"
        wrong[7] = "0"
        rows.append([f"wrong-{v}", v, *wrong])
        # a slip of one unit is last-digit only where the exact value has digits beyond the written
        # place: the cats row sees every key, so its last output entry is exactly V's value there
        # when V's last column is constant (then the slip is wrong: there was nothing to round)
        exact = len({row[-1] for row in key["V"]}) == 1
        expected[f"wrong-{v}"] = ["not right", "not right", "right", "right", "right",
                                  "wrong" if exact else "last-digit", "wrong", "not right", "right", "right"]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    subs = folder.parent / "class.csv"
    subs.write_text(out.getvalue(), encoding="utf-8")
    report_path = folder.parent / "report.csv"
    result = run("grade", str(folder), str(subs), "-o", str(report_path))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr       # every answer could be read
    report = list(csv.DictReader(io.StringIO(report_path.read_text(encoding="utf-8"))))
    return header[2:], report, expected, keys


def test_the_independent_key_matches_the_lesson_shape(graded):
    _, _, _, keys = graded
    for key in keys.values():
        W = key["weights"]
        assert W[0] == ["1", "0", "0"] and W[1][2] == "0"             # causal: exact 1 and 0s
        assert all(Decimal(x) > 0 for x in W[2])                      # cats sees every key
        assert abs(sum(Decimal(x) for x in W[1]) - 1) <= Decimal("0.0015")


def test_every_verdict_of_the_causal_class(graded):
    targets, report, expected, _ = graded
    assert [r["student"] for r in report] == list(expected)
    for row in report:
        want = expected[row["student"]]
        for target, kind in zip(targets, want):
            code = row[target]
            where = f"{row['student']} {target}: {code} ({row[target + ' message']})"
            if kind == "right":
                assert code in RIGHT, where
            elif kind == "not right":
                assert code not in RIGHT and code != "invalid", where
            else:
                assert code == kind, where
        right = sum(1 for k in want if k == "right")
        assert row["right"] == str(right) and row["total"] == str(len(targets))
        assert row["note"] == ""


def test_blocked_weights_and_masked_scores_are_judged_exactly(graded):
    _, report, _, _ = graded
    for row in report:
        if row["student"].startswith("right-"):
            assert row["weights[love, cats]"] == "exact"             # 0 is exactly 0
            assert row["shifted[I, love]"] == "exact"                # -inf is exactly −∞
            assert row["weights[I]"] == "exact"                      # 1, 0, 0
