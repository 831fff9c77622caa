"""Differential test: every JSON decimal of ``symattn explain`` against an independent reference.

The reference (``tests/reference.py``) shares no code with symattn: Python
fractions for the exact steps, integer square roots for the scaled scores,
a private mpmath context at digits + 30 with a boundary guard for the
softmax side, and exact rationals wherever the exponentials cancel (ties,
outputs equal to a tie group's mean, masked zeros).

Random problems (seeded, so every run checks the same ones): causal and
random masks, cross-attention (n ≠ m, Q/K/V given or X with X_kv), scales
1/√d_k, 1, rational, √rational, c·√r, negative and zero, tied scores, exact
halfway outputs (0.125 at 2 digits), terminating values, and score gaps
wide enough that weights fall far below float64's range.  Half go through
the command line (a TOML file, ``explain --format json --decimal-only``),
half through ``Problem(...)`` and the JSON view; every decimal text is
compared, at 1-60 digits and at 1,000 and 10,000.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest
import sympy

import symattn as sa
from symattn import cli
from symattn.document.trace_json import trace_to_json

from reference import (NEG_INF, RefProblem, Transcendental, decimal_table, format_rounded,
                       round_fraction, solve)

KINDS = ("plain", "causal", "random-mask", "cross", "projected", "cross-projected",
         "scale", "ties", "halfway", "terminating", "gap")
SEEDS = range(330)

# ---------------------------------------------------------------- generating problems


@dataclass
class Case:
    """A reference problem plus how to hand the same inputs to symattn."""

    ref: RefProblem
    inputs: dict           # Problem(...) keyword arguments (entries as written)
    toml: str              # the same problem as a file
    digits: int
    kind: str


def _digits_for(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.4:
        return rng.randint(1, 5)
    if roll < 0.8:
        return rng.randint(6, 20)
    return rng.randint(21, 60)


def _entry(rng: random.Random, big: int = 5) -> Fraction:
    roll = rng.random()
    if roll < 0.55:
        return Fraction(rng.randint(-big, big))
    if roll < 0.8:
        return Fraction(rng.randint(-9, 9), rng.randint(2, 7))
    return Fraction(rng.randint(-999, 999), 10 ** rng.randint(1, 3))


def _matrix(rng: random.Random, rows: int, cols: int, big: int = 5) -> list[list[Fraction]]:
    return [[_entry(rng, big) for _ in range(cols)] for _ in range(rows)]


def _written(q: Fraction, rng: random.Random, *, toml: bool, texts: dict | None = None):
    """One entry as a user writes it: an int, a decimal, "p/q", or (Python) a Fraction
    (``texts``: expressions for values whose numerals would pass the parser's caps)."""
    if texts and q in texts:
        return texts[q]
    if q.denominator == 1:
        return int(q) if rng.random() < 0.8 else str(q.numerator)
    den = q.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    if den == 1 and rng.random() < 0.5:       # terminating: a decimal string or float text
        k = 0
        while (q * 10**k).denominator != 1:
            k += 1
        text = f"{'-' if q < 0 else ''}{abs(q.numerator) * 10**k // q.denominator // 10**k}." \
               f"{str(abs(q.numerator) * 10**k // q.denominator % 10**k).rjust(k, '0')}"
        return float(text) if (rng.random() < 0.5 and len(text) < 12) else text
    if not toml and rng.random() < 0.3:
        return q
    return f"{q.numerator}/{q.denominator}"


def _toml_value(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))


def _boundary(rng: random.Random, digits: int) -> Fraction:
    """A value exactly halfway between two decimals of ``digits`` digits."""
    n = rng.randint(10 ** (digits - 1), 10**digits - 1)
    t = rng.randint(-digits - 3, 2)
    b = Fraction(2 * n + 1, 2) * Fraction(10) ** t
    return -b if rng.random() < 0.3 else b


def _long_boundary(digits: int) -> tuple[Fraction, str]:
    """2^-a with 5^a of digits + 1 digits: 2^-a = 5^a·10^-a ends in a 5 one place past
    ``digits`` significant digits, so it is halfway.  Written as 1/(2^1000·2^…) to keep
    every exponent and value within the parser's caps (a 1,001-digit numeral is past them;
    so is any input halfway at 10,000 digits)."""
    a = math.ceil(digits / math.log10(5))
    while len(str(5**a)) < digits + 1:
        a += 1
    assert len(str(5**a)) == digits + 1
    powers = "*".join(f"2^{min(1000, a - k)}" for k in range(0, a, 1000))
    return Fraction(1, 2**a), f"1/({powers})"


def _short_decimal(rng: random.Random) -> Fraction:
    return Fraction(rng.choice([1, 25, 5, 125, 375, 75, 2, 3]), rng.choice([1, 10, 100, 1000, 8]))


def _scale(rng: random.Random, kind: str) -> tuple[Fraction | None, Fraction, object]:
    """(c, r, as written) for scale = c·√r; c None for the default 1/√d_k."""
    if kind != "scale" and rng.random() < 0.6:
        return None, Fraction(1), None
    choice = rng.randrange(7) if kind == "scale" else rng.randrange(4)
    if choice == 0:
        return Fraction(1), Fraction(1), rng.choice([1, "1"])
    if choice == 1:
        c = Fraction(rng.randint(1, 9), rng.randint(1, 9))
        return c, Fraction(1), f"{c.numerator}/{c.denominator}"
    if choice == 2:
        r = Fraction(rng.randint(1, 12), rng.randint(1, 12))
        return Fraction(1), r, rng.choice([f"sqrt({r.numerator}/{r.denominator})",
                                          f"√({r.numerator}/{r.denominator})"])
    if choice == 3:
        c, r = Fraction(rng.randint(1, 5), rng.randint(1, 4)), Fraction(rng.randint(2, 7))
        return c, r, f"{c.numerator}*sqrt({r.numerator})/{c.denominator}"
    if choice == 4:
        c = Fraction(rng.randint(1, 5), rng.randint(1, 3))
        return c, Fraction(1, 3), f"{c.numerator}/({c.denominator}*√3)"
    if choice == 5:
        c = -Fraction(rng.randint(1, 5), rng.randint(1, 3))
        return c, Fraction(1), f"-{-c.numerator}/{c.denominator}"
    return Fraction(0), Fraction(1), 0


def make_case(seed: int, digits: int | None = None) -> Case:
    """The seeded random problem number ``seed`` (its kind cycles through KINDS)."""
    rng = random.Random(seed * 7919 + 17)
    kind = KINDS[seed % len(KINDS)]
    digits = digits if digits is not None else _digits_for(rng)
    n = rng.randint(1, 4)
    m = n if kind not in ("cross", "cross-projected") else rng.choice([k for k in range(1, 5) if k != n])
    d_k, d_v = rng.randint(1, 3), rng.randint(1, 3)
    big = 40 if kind == "gap" else 5
    ref = RefProblem()
    written: dict = {}
    texts: dict[Fraction, str] = {}
    if kind in ("projected", "cross-projected"):
        d_model = rng.randint(1, 3)
        ref.X = _matrix(rng, n, d_model, 3)
        ref.W_q, ref.W_k = _matrix(rng, d_model, d_k, 3), _matrix(rng, d_model, d_k, 3)
        ref.W_v = _matrix(rng, d_model, d_v, 3)
        names = ["X", "W_q", "W_k", "W_v"]
        if kind == "cross-projected":
            ref.X_kv = _matrix(rng, m, d_model, 3)
            names.append("X_kv")
    else:
        ref.Q, ref.K, ref.V = _matrix(rng, n, d_k, big), _matrix(rng, m, d_k, big), _matrix(rng, m, d_v)
        names = ["Q", "K", "V"]
        if kind == "ties":                     # a zero query row, and duplicate keys
            ref.Q[rng.randrange(n)] = [Fraction(0)] * d_k
            if m > 1:
                ref.K[rng.randrange(1, m)] = list(ref.K[0])
        if kind in ("halfway", "terminating"):
            value = _boundary(rng, digits) if kind == "halfway" else _short_decimal(rng)
            if kind == "halfway" and digits > 60:
                value, texts[value] = _long_boundary(digits)
            c = rng.randrange(d_v)
            if rng.random() < 0.5 or texts:             # a constant value column: every output is the value
                for row in ref.V:
                    row[c] = value
            else:                              # all keys tied, values averaging to the value
                ref.Q = [[Fraction(0)] * d_k for _ in range(n)]
                col = [_entry(rng) for _ in range(m - 1)]
                col.append(m * value - sum(col, Fraction(0)))
                for row, v in zip(ref.V, col):
                    row[c] = v
    ref.scale_c, ref.scale_r, scale_text = _scale(rng, kind)
    if kind == "gap":
        ref.scale_c, ref.scale_r, scale_text = Fraction(1), Fraction(1), 1
    mask_written = None
    if kind == "causal" or (kind not in ("random-mask",) and rng.random() < 0.15):
        ref.mask = [[j <= i for j in range(m)] for i in range(n)]
        mask_written = "causal"
    elif kind == "random-mask" or rng.random() < 0.1:
        ref.mask = []
        for _ in range(n):
            row = [rng.random() < 0.6 for _ in range(m)]
            if not any(row):
                row[rng.randrange(m)] = True
            ref.mask.append(row)
        mask_written = [[int(b) for b in row] for row in ref.mask]
    for name in names:
        written[name] = [[_written(q, rng, toml=False, texts=texts) for q in row] for row in getattr(ref, name)]
    if scale_text is not None:
        written["scale"] = scale_text
    if mask_written is not None:
        written["mask"] = mask_written
    toml = "".join(f"{k} = {_toml_value(_toml_entries(v))}\n" for k, v in written.items())
    return Case(ref, written, toml, digits, kind)


def _toml_entries(v):
    """Python-only entry forms (Fraction) written as TOML strings."""
    if isinstance(v, list):
        return [_toml_entries(x) for x in v]
    if isinstance(v, Fraction):
        return f"{v.numerator}/{v.denominator}"
    return v


# ---------------------------------------------------------------- running symattn


def json_via_cli(case: Case, tmp_path: Path, capsys) -> dict:
    path = tmp_path / "problem.toml"
    path.write_text(case.toml, encoding="utf-8")
    status = cli.main(["explain", str(path), "--format", "json", "--digits", str(case.digits),
                       "--decimal-only"])
    out, err = capsys.readouterr()
    assert status == 0, f"exit {status}: {err}\n{case.toml}"
    return json.loads(out)


def json_via_api(case: Case) -> dict:
    trace = sa.attend(sa.Problem(**case.inputs))
    return trace_to_json(trace, case.digits)


def compare(case: Case, got: dict) -> None:
    steps = solve(case.ref)
    expected = decimal_table(steps, case.digits)
    assert list(got["steps"]) == list(expected), "the steps and their order"
    wrong = []
    for name, rows in expected.items():
        entry = got["steps"][name]
        assert entry["shape"] == [len(rows), len(rows[0])], name
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                if entry["decimal"][i][j] != text:
                    wrong.append(f"{name}[{i}][{j}]: symattn {entry['decimal'][i][j]!r}, "
                                 f"reference {text!r}")
        if "exact" in entry and name in ("X", "W_q", "W_k", "W_v", "X_kv", "Q", "K", "V", "scores"):
            values = [[sympy.Rational(t) for t in r] for r in entry["exact"]]
            assert values == [[sympy.Rational(q.numerator, q.denominator) for q in r]
                              for r in steps[name]], f"exact {name}"
        if "exact" in entry and name in ("masked", "shifted"):
            for i, row in enumerate(steps[name]):
                for j, v in enumerate(row):
                    assert (entry["exact"][i][j] == "-oo") == (v is NEG_INF), f"exact {name}[{i}][{j}]"
    assert not wrong, (f"{case.kind} at {case.digits} digits, {len(wrong)} decimals differ:\n"
                       + "\n".join(wrong[:12]) + f"\nproblem:\n{case.toml}")


def _id(seed: int) -> str:
    case = make_case(seed)
    return f"{seed}-{case.kind}-{case.digits}d"


@pytest.mark.parametrize("seed", SEEDS, ids=[_id(s) for s in SEEDS])
def test_every_json_decimal_matches_the_reference(seed, tmp_path, capsys):
    case = make_case(seed)
    got = json_via_cli(case, tmp_path, capsys) if seed % 2 == 0 else json_via_api(case)
    compare(case, got)


# A few at 1,000 and 10,000 digits, each with 8 or more transcendental
# entries beside its exact ones: halfway outputs (1,000 digits only: an input
# halfway at 10,000 digits is past the parser's value caps), terminating ones,
# ties, masks, a wide score gap, cross-attention and a c·√r scale.
LONG = [(8, 1000), (19, 1000), (64, 1000), (18, 1000), (23, 1000), (2, 1000), (21, 1000),
        (16, 1000), (39, 1000), (141, 10_000), (3, 10_000), (2, 10_000), (21, 10_000)]


@pytest.mark.parametrize("seed,digits", LONG, ids=[f"{s}-{KINDS[s % len(KINDS)]}-{d}d" for s, d in LONG])
def test_long_decimals_match_the_reference(seed, digits, tmp_path, capsys):
    case = make_case(seed, digits)
    values = [v for rows in solve(case.ref).values() for row in rows for v in row]
    assert sum(isinstance(v, Transcendental) for v in values) >= 8
    got = json_via_cli(case, tmp_path, capsys) if seed % 2 == 0 else json_via_api(case)
    compare(case, got)


# ---------------------------------------------------------------- the reference itself


def test_the_reference_rounds_and_writes_as_the_readme_says():
    """The reference's own rules on values whose text is known by hand, so a
    wrong reference cannot make the differential test agree with a wrong engine."""
    cases = [(Fraction(1, 8), 2, "0.13"), (Fraction(-1, 8), 2, "-0.13"), (Fraction(1, 2), 3, "0.5"),
             (Fraction(12345), 3, "1.23e4"), (Fraction(12300), 3, "12300"), (Fraction(4), 1, "4"),
             (Fraction(9995, 1000), 3, "10.0"), (Fraction(1, 3), 3, "0.333"),
             (Fraction(1, 10**7), 3, "1e-7"), (Fraction(114, 10**9), 3, "1.14e-7"),
             (Fraction(1, 4), 1, "0.3"), (Fraction(10**22), 5, "1e22"), (Fraction(0), 7, "0")]
    for q, digits, text in cases:
        assert format_rounded(round_fraction(q, digits), digits) == text, (q, digits)


def test_the_reference_agrees_with_the_lessons_printed_numbers():
    """The lesson "I love cats" prints its weights and output at 2 places
    (numpy); the reference at 2 significant digits must give the same where
    the two coincide, and its 30-digit weight is the README's."""
    X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
    W_q = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
    W_k = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
    W_v = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
    f = lambda m: [[Fraction(v) for v in row] for row in m]  # noqa: E731
    ref = RefProblem(X=f(X), W_q=f(W_q), W_k=f(W_k), W_v=f(W_v))
    table = decimal_table(solve(ref), 30)
    assert table["weights"][0][1] == "0.431937101221533261311675948813"
    assert decimal_table(solve(ref), 50)["weights"][0][0] == \
        "0.13612579755693347737664810237457766612628390902729"
    assert decimal_table(solve(ref), 3)["output"][0] == ["1.86", "6.32", "1.70"]
    assert decimal_table(solve(ref), 3)["scores"][1] == ["4", "16", "12"]
