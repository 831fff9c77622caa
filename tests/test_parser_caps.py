"""The caps on input (symattn.limits, docs/limits.md): issue 8 item 6, issue 9 items 1-3 and 7.

Every cap is tried at its edge: the largest accepted input goes through
``attend`` and certified decimals, checked against an independent mpmath
computation; one past it is refused with one line naming the input and the
position.  The table in docs/limits.md is checked against the constants.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import mpmath
import pytest
import sympy

import symattn as sa
from symattn import limits
from symattn.numbers.certify import Rounding
from symattn.errors import ParseError, ProblemError, SymattnError
from symattn.exact.parser import algebraic_degree, parse_expression

ROOT = Path(__file__).resolve().parent.parent
K2, V2 = [[1, 0], [0, 1]], [[1, 2], [3, 4]]


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message and "\x1b" not in message and len(message) < 500
    return message


def _refused(fragment: str, **problem) -> str:
    with pytest.raises(SymattnError) as info:
        sa.Problem(**problem)
    message = _one_line(info.value)
    assert fragment in message, message
    return message


# ----------------------------------------------------- independent reference

def _reference(Q, K, V, scale):
    """Weights and outputs by mpmath at 60 digits from mpf inputs (no symattn code)."""
    with mpmath.workdps(60):
        weights, outputs = [], []
        for q in Q:
            scores = [scale * mpmath.fsum(a * b for a, b in zip(q, k)) for k in K]
            top = max(scores)
            exps = [mpmath.exp(s - top) for s in scores]
            total = mpmath.fsum(exps)
            row = [e / total for e in exps]
            weights.append(row)
            outputs.append([mpmath.fsum(w * v[c] for w, v in zip(row, V)) for c in range(len(V[0]))])
        return weights, outputs


def _agrees(certified, reference) -> None:
    """A 3-significant-digit certified decimal is within half a unit of the reference."""
    with mpmath.workdps(60):
        value, ref = mpmath.mpf(str(certified)), reference
        if ref == 0:
            assert value == 0
            return
        unit = mpmath.mpf(10) ** (mpmath.floor(mpmath.log10(abs(ref))) - 2)
        assert abs(value - ref) <= unit / 2 * (1 + mpmath.mpf(10) ** -20), (certified, ref)


def _check_against_reference(problem: sa.Problem, Q, K, V, scale) -> None:
    trace = sa.attend(problem)
    weights, outputs = _reference(Q, K, V, scale)
    got_w = trace.weights.decimals(Rounding(digits=3))
    got_o = trace.output.decimals(Rounding(digits=3))
    for i, row in enumerate(weights):
        for j, ref in enumerate(row):
            _agrees(got_w[i][j], ref)
        for c, ref in enumerate(outputs[i]):
            _agrees(got_o[i][c], ref)


M = mpmath.mpf
IDENTITY = [[M(1), M(0)], [M(0), M(1)]]
V2_REF = [[M(1), M(2)], [M(3), M(4)]]


# --------------------------------------------------- issue 9 item 1 and 3

REPRODUCERS = [
    ("√" * 64 + "2", "MAX_ALGEBRAIC_DEGREE"),          # OverflowError before
    ("√" * 55 + "2", "MAX_ALGEBRAIC_DEGREE"),          # degree 2^55: hung at 2.4 GB
    ("√" * 4 + "2", "MAX_ALGEBRAIC_DEGREE"),           # degree 16: the first refused
    ("(7^(1/4914))^(1/9441)^(1/4806)", "MAX_ALGEBRAIC_DEGREE"),   # OverflowError before
    ("(1/7244)^(1/9827)", "MAX_ALGEBRAIC_DEGREE"),     # SymPy factored 7244^9826 for minutes
    ("10^2200", "MAX_VALUE_DIGITS"),                   # issue 8 item 6: 4,300-digit str crash
    ("1e-9999", "MAX_DECIMAL_EXPONENT"),               # int/str conversion crash
    ("1/" + "7" * 1000 + "0", "MAX_NUMERAL_DIGITS"),
]


@pytest.mark.parametrize(("text", "cap"), REPRODUCERS, ids=lambda x: str(x)[:24])
def test_reproducers_are_refused_by_the_parser(text: str, cap: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_expression(text, where="the answer")
    message = _one_line(info.value)
    assert cap in message and "the answer" in message and "at column" in message


@pytest.mark.parametrize(("text", "cap"), REPRODUCERS, ids=lambda x: str(x)[:24])
def test_reproducers_are_refused_as_problem_entries(text: str, cap: str) -> None:
    _refused(cap, Q=[[1, text]], K=K2, V=V2)
    toml = f'Q = [[1, "{text}"]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n'
    with pytest.raises(ProblemError) as info:
        sa.Problem.from_toml_text(toml, source="p.toml")
    message = _one_line(info.value)
    assert message.startswith("p.toml: ") and "Q[0][1]" in message and cap in message


def test_a_451_digit_two_is_read_exactly_and_certified() -> None:
    text = "2." + "0" * 450 + "e0"
    assert parse_expression(text) == 2
    problem = sa.Problem(Q=[[text, 1]], K=K2, V=V2)
    assert problem.Q_given[0, 0] == 2
    assert str(sa.certify(problem.Q_given[0, 0], 3)) == "2"
    _check_against_reference(problem, [[M(2), M(1)]], IDENTITY, V2_REF, 1 / mpmath.sqrt(2))


# ------------------------------------------------------------ value digits

def test_numeral_digits_at_the_cap() -> None:
    digits = "7" * limits.MAX_NUMERAL_DIGITS
    assert parse_expression(digits) == int(digits)
    with pytest.raises(ParseError, match="MAX_NUMERAL_DIGITS"):
        parse_expression(digits + "7")
    text = "0." + "7" * (limits.MAX_NUMERAL_DIGITS - 1)
    problem = sa.Problem(Q=[[text, 1]], K=K2, V=V2)
    with mpmath.workdps(1100):
        q = M(text)
    _check_against_reference(problem, [[q, M(1)]], IDENTITY, V2_REF, 1 / mpmath.sqrt(2))


def test_value_digits_at_the_cap() -> None:
    cap = limits.MAX_VALUE_DIGITS
    assert parse_expression("1e-999") == sympy.Rational(1, 10**999)   # 1,000 digits
    assert parse_expression(f"10^{cap - 1}") == 10 ** (cap - 1)
    for past in ("1e-1000", f"10^{cap}", "2^3400", f"(10^{cap // 2})^2", "1/" + "7" * 999 + "/100"):
        with pytest.raises(ParseError, match="MAX_VALUE_DIGITS"):
            parse_expression(past)
    # the same cap for values given in Python
    with pytest.raises(ParseError, match="MAX_VALUE_DIGITS"):
        sa.to_exact(10**cap, where="Q[0][0]")
    text = "1/" + "7" * (cap - 1)
    problem = sa.Problem(Q=[[text, 1]], K=K2, V=V2)
    with mpmath.workdps(1100):
        q = 1 / M(int("7" * (cap - 1)))
    _check_against_reference(problem, [[q, M(1)]], IDENTITY, V2_REF, 1 / mpmath.sqrt(2))


def test_exact_score_digits_at_the_cap() -> None:
    half = limits.MAX_EXACT_DIGITS // 2
    q, k = "1/" + "7" * (half - 1), "1/" + "3" * half        # a 999-digit denominator
    problem = sa.Problem(Q=[[q, 1]], K=[[k, 0], [0, 1]], V=V2, scale=1)
    with mpmath.workdps(1100):
        qv, kv = 1 / M(int("7" * (half - 1))), 1 / M(int("3" * half))
    _check_against_reference(problem, [[qv, M(1)]], [[kv, M(0)], [M(0), M(1)]], V2_REF, M(1))
    _refused("MAX_EXACT_DIGITS", Q=[["1/" + "7" * (half + 1), 1]], K=[[k, 0], [0, 1]], V=V2,
             scale=1)


# ------------------------------------------------------- algebraic degree

@pytest.mark.parametrize(("text", "degree"), [
    ("sqrt(2)", 2), ("1/sqrt(3)", 2), ("√√2", 4), ("2^(1/8)", 8), ("2^(1/2) + 2^(1/4)", 4),
    ("sqrt(2)*3^(1/3)", 6), ("sqrt(2)+sqrt(3)+sqrt(5)", 8), ("sqrt(1+sqrt(2))", 4), ("exp(1)", 1),
])
def test_algebraic_degree_bound(text: str, degree: int) -> None:
    assert algebraic_degree(parse_expression(text)) == degree


def test_degree_per_value_at_the_cap() -> None:
    for past in ("2^(1/16)", "√√√√2", "sqrt(2)+sqrt(3)+sqrt(5)+sqrt(7)", "2^(1/3)*3^(1/5)"):
        with pytest.raises(ParseError, match="MAX_ALGEBRAIC_DEGREE"):
            parse_expression(past)
    problem = sa.Problem(Q=[["2^(1/8)", 1]], K=K2, V=V2, scale=1)
    _check_against_reference(problem, [[mpmath.root(2, 8), M(1)]], IDENTITY, V2_REF, M(1))


def test_degree_per_problem_at_the_cap() -> None:
    """√2, √3 and √5 across the entries (degree 8) pass; a fourth root of another number,
    or the default scale 1/√d_k adding √2, goes past."""
    Q = [["0.12345678901234567890123456789*sqrt(2)", "sqrt(3)"]]
    K = [["sqrt(5)", 0], [0, 1]]
    problem = sa.Problem(Q=Q, K=K, V=V2, scale=1)
    with mpmath.workdps(60):
        q = [[M("0.12345678901234567890123456789") * mpmath.sqrt(2), mpmath.sqrt(3)]]
        k = [[mpmath.sqrt(5), M(0)], [M(0), M(1)]]
    _check_against_reference(problem, q, k, V2_REF, M(1))
    message = _refused("MAX_ALGEBRAIC_DEGREE", Q=Q, K=[["sqrt(7)", 0], [0, 1]], V=V2,
                       X=None, scale="sqrt(5)")
    assert "together" in message
    # √2 and √3 in Q and √7 in K: the default scale 1/√2 shares √2, still degree 8
    sa.Problem(Q=[["sqrt(2)", "sqrt(3)"]], K=[["sqrt(7)", 0], [0, 1]], V=V2)


def test_digits_beside_roots_at_the_cap() -> None:
    cap = limits.MAX_ALGEBRAIC_DIGITS
    parse_expression("sqrt(" + "9" * cap + ")")
    parse_expression("0." + "1" * (cap - 1) + "*sqrt(2)")
    for past in ("sqrt(" + "9" * (cap + 1) + ")", "0." + "1" * cap + "*sqrt(2)",
                 "(1+sqrt(2))^200"):
        with pytest.raises(ParseError, match="MAX_ALGEBRAIC_DIGITS"):
            parse_expression(past)
    problem = sa.Problem(Q=[["sqrt(" + "9" * cap + ")/10^15", 1]], K=K2, V=V2, scale=1)
    with mpmath.workdps(60):
        q = mpmath.sqrt(M(int("9" * cap))) / M(10) ** 15
    _check_against_reference(problem, [[q, M(1)]], IDENTITY, V2_REF, M(1))


# -------------------------------------------------------------- magnitude

@pytest.mark.parametrize("entry", ["1e12", 10**12, 1e30, "10^100", "1000000.000001",
                                   "1e6 + 1e-9", "exp(14)", sympy.Integer(10) ** 7])
def test_entries_over_the_magnitude_cap_are_refused_with_their_position(entry) -> None:
    message = _refused("MAX_ENTRY_MAGNITUDE", Q=[[1, 0], [0, entry]], K=K2, V=V2)
    assert "Q[1][1]" in message
    message = _refused("MAX_ENTRY_MAGNITUDE", Q=[[1, 0]], K=[[1, 0], [0, entry]], V=V2)
    assert "K[1][1]" in message
    message = _refused("MAX_ENTRY_MAGNITUDE", X=[[1, entry]], W_q=K2, W_k=K2, W_v=K2)
    assert "X[0][1]" in message


def test_values_are_capped_by_digits_not_magnitude() -> None:
    """V (and W_v) only scale the outputs: a value of 10^51 costs nothing more to certify."""
    big = "1.65e51"
    problem = sa.Problem(Q=[[1, 0]], K=K2, V=[[1, 2], [3, big]])
    _check_against_reference(problem, [[M(1), M(0)]], IDENTITY,
                             [[M(1), M(2)], [M(3), M("1.65e51")]], 1 / mpmath.sqrt(2))
    _refused("MAX_VALUE_DIGITS", Q=[[1, 0]], K=K2, V=[[1, 2], [3, "1e1000"]])


def test_magnitude_from_a_toml_file() -> None:
    for entry in ("1e12", "1e30", '"10^100"', "1000000000000"):
        with pytest.raises(ProblemError) as info:
            sa.Problem.from_toml_text(f"Q = [[{entry}, 1]]\nK = [[1, 0], [0, 1]]\n"
                                      "V = [[1, 2], [3, 4]]\n", source="big.toml")
        message = _one_line(info.value)
        assert "big.toml" in message and "Q[0][0]" in message and (
            "MAX_ENTRY_MAGNITUDE" in message or "MAX_VALUE_DIGITS" in message)
    with pytest.raises(ProblemError, match="scale .*MAX_ENTRY_MAGNITUDE"):
        sa.Problem.from_toml_text('Q = [[1]]\nK = [[1]]\nV = [[1]]\nscale = "1e12"\n')


def test_magnitude_at_the_cap() -> None:
    top = limits.MAX_ENTRY_MAGNITUDE
    problem = sa.Problem(Q=[[top, 1]], K=K2, V=[[-top, 2], [3, top]], scale="1e-6")
    _check_against_reference(problem, [[M(top), M(1)]], IDENTITY,
                             [[M(-top), M(2)], [M(3), M(top)]], M(10) ** -6)
    sa.Problem(Q=[[1]], K=[[1]], V=[[1]], scale=top)
    _refused("MAX_ENTRY_MAGNITUDE", Q=[[1]], K=[[1]], V=[[1]], scale=top + 1)


def test_score_bound_at_the_cap() -> None:
    """Scores of exactly ±10^12: accepted, and weights like e^(-2·10^12) are certified."""
    top = 10**6
    problem = sa.Problem(Q=[[top], [-top]], K=[[top], [-top]], V=[[1], [2]], scale=1)
    _check_against_reference(problem, [[M(top)], [M(-top)]], [[M(top)], [M(-top)]],
                             [[M(1)], [M(2)]], M(1))
    message = _refused("MAX_SCORE_MAGNITUDE", Q=[[top]], K=[[top]], V=[[1]], scale="1.000001")
    assert "d_k·max|Q|·max|K|·|scale|" in message
    # through a projection: Q = X·W_q and K = X·W_k reach 10^6 each
    sa.Problem(X=[[1000]], W_q=[[1000]], W_k=[[1000]], W_v=[[1]], scale=1)
    _refused("MAX_SCORE_MAGNITUDE", X=[[1000]], W_q=[[1001]], W_k=[[1000]], W_v=[[1]], scale=1)


def test_small_values_stay_fine() -> None:
    problem = sa.Problem(Q=[["1e-9", 1]], K=K2, V=V2)
    assert problem.Q_given[0, 0] == sympy.Rational(1, 10**9)


# ------------------------------------------------------------------ sizes

def test_a_flat_list_cannot_bypass_the_side_cap() -> None:
    message = _refused("MAX_SIDE", Q=list(range(1, 100_001)), K=K2, V=V2)
    assert "list of rows" in message
    with pytest.raises(ProblemError, match="MAX_SIDE"):
        sa.Problem.from_toml_text("Q = [" + ", ".join(["1"] * 2000) + "]\nK = [[1]]\nV = [[1]]\n")
    _refused("MAX_SIDE", Q=[[1] * (limits.MAX_SIDE + 1)], K=[[1] * (limits.MAX_SIDE + 1)],
             V=[[1]])
    problem = sa.Problem(Q=[[1] * limits.MAX_SIDE], K=[[1] * limits.MAX_SIDE], V=[[1]])
    assert problem.d_k == limits.MAX_SIDE


def test_entry_count_caps() -> None:
    rows, cols = 257, 1021                      # 262,397 entries, each side under 1,024
    assert rows * cols > limits.MAX_ENTRIES
    _refused("MAX_ENTRIES", Q=[[0] * cols] * rows, K=[[0] * cols], V=[[1]])
    side = 513                                  # 513 queries × 513 keys
    _refused("MAX_ENTRIES", Q=[[1]] * side, K=[[1]] * side, V=[[1]] * side)
    problem = sa.Problem(Q=[[1]] * 512, K=[[1]] * 512, V=[[1]] * 512)
    assert problem.n * problem.m == limits.MAX_ENTRIES


def test_non_rational_problems_are_hand_sized() -> None:
    side = limits.MAX_SYMBOLIC_SIDE
    Q = [["sqrt(2)"]] + [[k] for k in range(1, side)]          # 16 queries, one a surd
    problem = sa.Problem(Q=Q, K=[[1], [-1]], V=[[1], [2]], scale=1)
    with mpmath.workdps(60):
        q = [[mpmath.sqrt(2)]] + [[M(k)] for k in range(1, side)]
    _check_against_reference(problem, q, [[M(1)], [M(-1)]], [[M(1)], [M(2)]], M(1))
    message = _refused("MAX_SYMBOLIC_SIDE", Q=Q + [[side]], K=[[1], [-1]], V=[[1], [2]])
    assert "queries is 17" in message
    _refused("MAX_SYMBOLIC_SIDE", Q=[[1]], K=[["exp(1/2)"]] * (side + 1), V=[[1]] * (side + 1))
    # rational inputs with an irrational scale stay on the fast path, any size up to the caps
    sa.Problem(Q=[[1]] * 100, K=[[1]] * 100, V=[[1]] * 100, scale="1/sqrt(3)")


# ---------------------------------------------- names, titles and symbols

@pytest.mark.parametrize("bad", ["lo\x1bve", "lo\nve", "\x07", "lo\u202eve", "a\tb"])
def test_control_characters_in_names_and_titles_are_refused(bad: str) -> None:
    message = _refused("control character", Q=[[1], [2]], K=[[1], [2]], V=[[1], [2]],
                       tokens=["I", bad])
    assert "tokens[1]" in message and "position" in message
    _refused("key_tokens[0]", Q=[[1]], K=[[1], [2]], V=[[1], [2]], key_tokens=[bad, "x"])
    _refused("title", Q=[[1]], K=[[1]], V=[[1]], title=f"My {bad} title")
    with pytest.raises(ProblemError, match="about .*control character"):
        sa.Problem.from_dict({"Q": [[1]], "K": [[1]], "V": [[1]], "about": bad})


def test_printable_names_stay_fine() -> None:
    problem = sa.Problem(Q=[[1], [2]], K=[[1], [2]], V=[[1], [2]], tokens=["chat 🐱", "Ünïcode"],
                         title="Attention — “quoted” ∑")
    assert problem.tokens == ("chat 🐱", "Ünïcode")


def test_an_undeclared_name_says_how_to_declare_it() -> None:
    message = _refused('symbols = ["a"]', Q=[["a", 1]], K=K2, V=V2)
    assert 'symbols=["a"]' in message and "Q[0][0]" in message
    with pytest.raises(ProblemError) as info:
        sa.Problem.from_toml_text('symbols = ["a"]\nQ = [["a + b", 1]]\nK = [[1, 0], [0, 1]]\n'
                                  "V = [[1, 2], [3, 4]]\n", source="sym.toml")
    message = _one_line(info.value)
    assert 'symbols = ["a", "b"]' in message and "Q[0][0]" in message
    assert sa.Problem(Q=[["a", 1]], K=K2, V=V2, symbols=["a"]).free_symbols


# --------------------------------------------------------------- TOML text

def test_toml_integers_beyond_python_conversion_are_one_line() -> None:
    with pytest.raises(ProblemError) as info:
        sa.Problem.from_toml_text("Q = [[1" + "0" * 5000 + "]]\nK = [[1]]\nV = [[1]]\n",
                                  source="huge.toml")
    assert "huge.toml" in _one_line(info.value)
    with pytest.raises(ProblemError, match="MAX_ENTRY_MAGNITUDE"):   # under 4,300 digits
        sa.Problem.from_toml_text("Q = [[1" + "0" * 2000 + "]]\nK = [[1]]\nV = [[1]]\n")
    with pytest.raises(ProblemError, match="MAX_DECIMAL_EXPONENT"):
        sa.Problem.from_toml_text("Q = [[1e-9999]]\nK = [[1]]\nV = [[1]]\n")


def test_a_utf8_bom_is_accepted() -> None:
    problem = sa.Problem.from_toml_text("\ufeffQ = [[1]]\nK = [[1]]\nV = [[2]]\n")
    assert problem.V_given[0, 0] == 2


# ------------------------------------------------- docs/limits.md is current

def _number(text: str) -> int:
    text = text.strip()
    if m := re.fullmatch(r"10\^(\d+)", text):
        return 10 ** int(m[1])
    if m := re.fullmatch(r"(\d+) (KiB|MiB|GiB)", text):
        return int(m[1]) * 1024 ** (1 + ("KiB", "MiB", "GiB").index(m[2]))
    return int(text.replace(",", ""))


def test_docs_limits_table_matches_the_code() -> None:
    rows = [line for line in (ROOT / "docs" / "limits.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and "`symattn." in line]
    assert len(rows) >= 20
    seen = set()
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        cap, constant = cells[1], cells[2].strip("`")
        module, name = constant.rsplit(".", 1)
        assert getattr(importlib.import_module(module), name) == _number(cap), row
        seen.add(constant)
    # every cap in symattn.limits is in the table
    assert {f"symattn.limits.{n}" for n in limits.__all__} <= seen


# ------------------------------------------- every view at the caps (issue 8 item 6)

AT_THE_CAPS = {
    "fraction": ('Q = [["1/' + "7" * 999 + '", 1]]', "7" * 999),
    "numeral": ('Q = [["0.' + "7" * 999 + '", 1]]', "7" * 999),
    "roots": ('Q = [["0.12345678901234567890123456789*sqrt(2)", "sqrt(3)"]]\n'
              'K = [["sqrt(5)", 0], [0, 1]]\nscale = 1', "12345678901234567890123456789"),
    "magnitude": ("Q = [[1000000], [-1000000]]\nK = [[1000000], [-1000000]]\nscale = 1",
                  "1000000"),   # scaled scores of ±10^12, weights near e^(-2·10^12)
}


@pytest.mark.parametrize("name", sorted(AT_THE_CAPS))
@pytest.mark.parametrize("fmt", ["text", "json", "latex"])
def test_explain_works_at_the_caps_and_refuses_past_them(tmp_path, capsys, name, fmt) -> None:
    from symattn import cli

    body, shown = AT_THE_CAPS[name]
    if "K = " not in body:
        body += "\nK = [[1, 0], [0, 1]]"
    path = tmp_path / f"{name}.toml"
    path.write_text(body + "\nV = [[1, 2], [3, 4]]\n", encoding="utf-8")
    assert cli.main(["explain", str(path), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert shown in out      # the exact value at the cap is shown whole
    past = tmp_path / "past.toml"
    past.write_text('Q = [["10^2200", 2]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n',
                    encoding="utf-8")
    assert cli.main(["explain", str(past), "--format", fmt]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MAX_VALUE_DIGITS" in err and "Q[0][0]" in err
