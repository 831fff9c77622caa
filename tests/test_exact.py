"""Tests of symattn.exact.coerce: exact coercion and the one safe expression parser."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import sys
import time
import tomllib
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import ClassVar

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy import E, Integer, Rational, Symbol, exp, log, pi, sqrt

from symattn.exact import coerce as exact

from symattn.exact import parser
from symattn.errors import ParseError, SymattnError
from symattn.exact.coerce import DecimalText, to_exact
from symattn.exact.parser import (
    Call,
    Evaluator,
    Name,
    Node,
    Num,
    Parser,
    Power,
    Product,
    Sum,
    Unary,
    parse_ast,
    parse_expression,
)


def _short(value: object) -> str:
    """Readable test ids for very long inputs."""
    text = str(value)
    return text if len(text) <= 24 else f"{text[:16]}...({len(text)} chars)"


EXACT = [
    # numerals
    ("12", Integer(12)),
    ("0.3", Rational(3, 10)),
    (".5", Rational(1, 2)),
    ("5.", Integer(5)),
    ("-2.5e-3", Rational(-1, 400)),
    ("1E10", Integer(10**10)),
    ("2e3", Integer(2000)),
    ("2.50E+1", Integer(25)),
    ("0007", Integer(7)),
    ("  3  ", Integer(3)),
    # operators and precedence
    ("1+2*3", Integer(7)),
    ("(1+2)*3", Integer(9)),
    ("7-2-1", Integer(4)),
    ("12/3/2", Integer(2)),
    ("2^3", Integer(8)),
    ("2**3", Integer(8)),
    ("-2^2", Integer(-4)),
    ("-2**2", Integer(-4)),
    ("(-2)^2", Integer(4)),
    ("2^3^2", Integer(512)),
    ("2^-1", Rational(1, 2)),
    ("2^-2^2", Rational(1, 16)),
    ("--3", Integer(3)),
    ("+3", Integer(3)),
    ("3*-2", Integer(-6)),
    ("1/2+1/3", Rational(5, 6)),
    # unicode
    ("3 − 1", Integer(2)),
    ("2·3", Integer(6)),
    ("2×3", Integer(6)),
    ("2⋅3", Integer(6)),
    ("6÷4", Rational(3, 2)),
    ("√3", sqrt(3)),
    ("√(2+1)", sqrt(3)),
    ("2/√3", 2 / sqrt(3)),
    ("√3^2", Integer(3)),
    ("√√16", Integer(2)),
    ("-√2", -sqrt(2)),
    ("π", pi),
    ("π/2", pi / 2),
    # implicit multiplication: a bare numeral before √, π or (
    ("2√3", 2 * sqrt(3)),
    ("2π", 2 * pi),
    ("2 π", 2 * pi),
    ("2(3+1)", Integer(8)),
    ("-2π", -2 * pi),
    ("1/2π", 1 / (2 * pi)),
    ("2/3√3", 2 / (3 * sqrt(3))),
    ("0.5√2", sqrt(2) / 2),
    ("2(3)^2", Integer(18)),
    # functions and constants
    ("sqrt(2)", sqrt(2)),
    ("1/sqrt(3)", 1 / sqrt(3)),
    ("exp(1)", E),
    ("exp(-2/3)", exp(Rational(-2, 3))),
    ("log(8)", log(8)),
    ("ln(e)", Integer(1)),
    ("log(exp(2))", Integer(2)),
    ("pi", pi),
    ("e", E),
    ("e^2", exp(2)),
    ("e^(2/sqrt(3))", exp(2 / sqrt(3))),
    ("2*e", 2 * E),
    ("sqrt(sqrt(16))", Integer(2)),
    # rational and irrational exponents
    ("2^(1/2)", sqrt(2)),
    ("8^(2/3)", Integer(4)),
    ("4^-0.5", Rational(1, 2)),
    ("2^√2", sympy.Pow(2, sqrt(2))),
    ("0^0", Integer(1)),
    ("(-2)^3", Integer(-8)),
    ("2^1000", Integer(2) ** 1000),
    ("1e-999", Rational(1, 10**999)),
]


@pytest.mark.parametrize(("text", "expected"), EXACT, ids=_short)
def test_exact_values(text: str, expected: sympy.Expr) -> None:
    value = parse_expression(text)
    assert isinstance(value, sympy.Expr)
    assert value == expected
    assert sympy.simplify(value - expected) == 0


def test_signs_are_decided_rigorously() -> None:
    """Domain checks use certified balls: tiny differences are decided, hidden zeros refused."""
    root2 = "1.41421356237309504880168872420"   # 30 digits, the cap beside a root
    assert parse_expression(f"sqrt(sqrt(2) - {root2})").is_positive
    above = root2[:-3] + "421"    # the first 29 decimals of sqrt(2), rounded up
    with pytest.raises(ParseError, match="square root of a negative number"):
        parse_expression(f"sqrt(sqrt(2) - {above})")
    with pytest.raises(ParseError, match="cannot be shown to be non-zero"):
        parse_expression("1/(sqrt(3+2*sqrt(2))-1-sqrt(2))")   # it is exactly 0
    assert parse_expression("exp((1e300)^(-3))") == exp(Rational(1, 10**900))
    assert parse_expression("log(1 - e^(-1000))") == log(1 - exp(-1000))


def test_one_over_sqrt3_is_canonical_sqrt3_over_3() -> None:
    assert parse_expression("1/sqrt(3)") == sqrt(3) / 3 == 1 / sqrt(3)


def test_decimals_never_pass_through_binary_floats() -> None:
    assert parse_expression("0.1") + parse_expression("0.2") == Rational(3, 10)
    assert parse_expression("0." + "3" * 60) == Rational(int("3" * 60), 10**60)
    assert not parse_expression("0.1 * sqrt(2)").atoms(sympy.Float)


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize(("text", "fragment"), [
    ("3/(4", "unbalanced '(' at column 3"),
    ("(1+2))", "unbalanced ')' at column 6"),
    ("3*", "ends too early"),
    ("*3", "unexpected '*' at column 1"),
    ("sqrt(-3)", "square root of a negative number"),
    ("√-1", "square root of a negative number"),
    ("sqrt(1-sqrt(2))", "square root of a negative number"),
    ("log(0)", "logarithm of a number that is not positive"),
    ("ln(-2)", "logarithm of a number that is not positive"),
    ("1/0", "division by zero at column 3"),
    ("1/(2-2)", "division by zero"),
    ("1/(sqrt(2)^2-2)", "division by zero"),
    ("0^-1", "division by zero"),
    ("(-8)^(1/3)", "fractional power of a negative number"),
    ("(-2)^π", "irrational power needs a positive base"),
    ("2 3", "write '*' between factors"),
    ("2pi", "write '*' between factors"),
    ("2e", "write '*' between factors"),
    ("√2π", "write '*' between factors"),
    ("(1)(2)", "write '*' between factors"),
    ("2π√3", "write '*' between factors"),
    ("2^2π", "write '*' between factors"),
    ("1.2.3", "unexpected '.3'"),
    ("1_000", "underscores are not allowed"),
    ("50%", "percent is not supported"),
    ("1,5", "unexpected ','"),
    ("x[1]", "unexpected '['"),
    ("sqrt", "sqrt needs an argument"),
    ("sqrt()", "sqrt takes 1 argument, not 0"),
    ("sqrt(1,2)", "sqrt takes 1 argument, not 2"),
    ("f(2)", "unknown function 'f'"),
    ("1 = 1", "unexpected character '='"),
])
def test_errors_are_one_line_and_name_where(text: str, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_expression(text, where="W_q[1][2]")
    message = str(info.value)
    assert fragment in message
    assert "W_q[1][2]" in message
    assert "\n" not in message


def test_error_message_shape() -> None:
    with pytest.raises(ParseError) as info:
        parse_expression("3/(4", where="X[0][1]")
    assert str(info.value) == (
        "cannot read '3/(4' in X[0][1]: unbalanced '(' at column 3; add the missing ')'")


def test_unknown_name_message() -> None:
    with pytest.raises(ParseError) as info:
        parse_expression("2*foo", where="W_q[1][2]")
    assert str(info.value) == (
        "unknown name 'foo' in W_q[1][2]: use numbers, sqrt(...), exp(...), log(...), pi or e")


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text(text: str) -> None:
    with pytest.raises(ParseError, match="empty"):
        parse_expression(text)


def test_parse_error_is_in_the_family() -> None:
    assert issubclass(ParseError, SymattnError)
    assert issubclass(ParseError, ValueError)


# ----------------------------------------------------------------- symbols

def test_symbols_are_real_and_constants_stay_constants() -> None:
    x_1, theta, q00 = (Symbol(n, real=True) for n in ("x_1", "theta", "q00"))
    value = parse_expression("2*x_1 + theta*q00 - e + pi", symbols=True)
    assert value == 2 * x_1 + theta * q00 - E + pi
    assert all(s.is_real for s in value.free_symbols)


@pytest.mark.parametrize(("text", "expected"), [
    ("sqrt(a)", sqrt(Symbol("a", real=True))),
    ("exp(-x)/y", exp(-Symbol("x", real=True)) / Symbol("y", real=True)),
    ("x^2 - 2x", None),   # juxtaposition with a name is refused even with symbols
    ("θ^2", Symbol("θ", real=True) ** 2),
    ("log(x)", log(Symbol("x", real=True))),
])
def test_symbolic_expressions(text: str, expected: sympy.Expr | None) -> None:
    if expected is None:
        with pytest.raises(ParseError, match=r"write '\*'"):
            parse_expression(text, symbols=True)
    else:
        assert parse_expression(text, symbols=True) == expected


def test_symbol_errors() -> None:
    with pytest.raises(ParseError, match="unknown function 'f'"):
        parse_expression("f(x)", symbols=True)
    with pytest.raises(ParseError, match="division by zero"):
        parse_expression("1/(x-x)", symbols=True)
    with pytest.raises(ParseError, match="unknown name 'x'"):
        parse_expression("x + 1")


# ----------------------------------------------------------------- to_exact

@pytest.mark.parametrize(("value", "expected"), [
    (3, Integer(3)),
    (-(10**40), Integer(-(10**40))),
    ("1/sqrt(3)", 1 / sqrt(3)),
    (Fraction(2, 6), Rational(1, 3)),
    (Decimal("0.30"), Rational(3, 10)),
    (Decimal("-1.5E+3"), Integer(-1500)),
    (Decimal("1e-7"), Rational(1, 10**7)),
    (0.1, Rational(1, 10)),
    (0.3, Rational(3, 10)),
    (1e-7, Rational(1, 10**7)),
    (-2.5e-3, Rational(-1, 400)),
    (1e300, Integer(10) ** 300),
    (5e-324, Rational(5, 10**324)),
    (-0.0, Integer(0)),
    (DecimalText("1_000.5"), Rational(2001, 2)),
    (DecimalText("0.3"), Rational(3, 10)),
    (DecimalText("-2.5e-3"), Rational(-1, 400)),
    (DecimalText("6.02e+2_3"), Integer(602) * 10**21),
    (Integer(7), Integer(7)),
    (Rational(2, 3), Rational(2, 3)),
    (sympy.Float(0.1), Rational(1, 10)),
    (sympy.Float("1e100"), Integer(10) ** 100),
    (sqrt(2), sqrt(2)),
    (sympy.Float(0.5) * sqrt(2), sqrt(2) / 2),
    (exp(2 / sqrt(3)), exp(2 / sqrt(3))),
])
def test_to_exact_values(value: object, expected: sympy.Expr) -> None:
    result = to_exact(value)
    assert result == expected
    assert not result.atoms(sympy.Float)


@pytest.mark.parametrize(("value", "fragment"), [
    (True, "bool"),
    (False, "bool"),
    (None, "NoneType"),
    ([1, 2], "list"),
    ({"a": 1}, "dict"),
    (1 + 2j, "complex"),
    (object(), "object"),
    (float("nan"), "finite"),
    (float("inf"), "finite"),
    (-float("inf"), "finite"),
    (Decimal("NaN"), "finite"),
    (Decimal("-Infinity"), "finite"),
    (Decimal("1e-99999"), "MAX_DECIMAL_EXPONENT"),
    (DecimalText("inf"), "finite"),
    (DecimalText("-inf"), "finite"),
    (DecimalText("nan"), "finite"),
    (DecimalText("+nan"), "finite"),
    (DecimalText("1__0.5"), "not a decimal number"),
    (DecimalText("1e99999"), "MAX_DECIMAL_EXPONENT"),
    (sympy.I, "not a finite real number"),
    (sympy.oo, "not a finite real number"),
    (sympy.zoo, "not a finite real number"),
    (sympy.nan, "not a finite real number"),
    (sqrt(-2), "not a finite real number"),
    (Symbol("x"), "symbols=True"),
    ("sqrt(-1)", "square root of a negative number"),
])
def test_to_exact_rejects(value: object, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        to_exact(value, where="W_v[2][0]")
    assert fragment in str(info.value)
    assert "W_v[2][0]" in str(info.value)


def test_to_exact_symbols() -> None:
    x = Symbol("x", real=True)
    assert to_exact("x/2", symbols=True) == x / 2
    assert to_exact(x + sympy.Float(0.25), symbols=True) == x + Rational(1, 4)


def test_toml_floats_through_decimal_text() -> None:
    doc = tomllib.loads("a = [0.3, 1_000.5, -2.5e-3, 1e10, 7, 5e+0_2]", parse_float=DecimalText)
    assert [to_exact(v) for v in doc["a"]] == [
        Rational(3, 10), Rational(2001, 2), Rational(-1, 400), Integer(10**10), 7, 500]
    doc = tomllib.loads("x = inf\ny = nan", parse_float=DecimalText)
    for key in ("x", "y"):
        with pytest.raises(ParseError, match="finite"):
            to_exact(doc[key], where=key)


def test_numpy_scalars() -> None:
    np = pytest.importorskip("numpy")
    assert to_exact(np.float64(0.1)) == Rational(1, 10)
    assert to_exact(np.int64(-4)) == -4
    with pytest.raises(ParseError):
        to_exact(np.bool_(True))


# ---------------------------------------------------------- caps and hostility

def _refused_quickly(text: str, fragment: str = "") -> str:
    """Parse hostile text; it must be refused with a ParseError, and not hang."""
    start = time.perf_counter()
    with pytest.raises(ParseError) as info:
        parse_expression(text, where="hostile")
    assert time.perf_counter() - start < 20.0, "guard against hangs, not a benchmark"
    assert fragment in str(info.value)
    return str(info.value)


@pytest.mark.parametrize(("text", "fragment"), [
    ("__import__('os').system('x')", "unexpected character"),
    ("().__class__", "unexpected character"),
    ("().__class__.__bases__[0].__subclasses__()", "unexpected character"),
    ("lambda: 1", "unexpected character ':'"),
    ("exec", "unknown name 'exec'"),
    ("eval(1)", "unknown function 'eval'"),
    ("9**9**9**9", "MAX_POWER_EXPONENT"),
    ("9^9^9", "MAX_POWER_EXPONENT"),
    ("2^100000", "MAX_POWER_EXPONENT"),
    ("2^3400", "MAX_VALUE_DIGITS"),
    ("2^(1/100001)", "MAX_ALGEBRAIC_DEGREE"),
    ("(" * 10000 + "1" + ")" * 10000, "MAX_TEXT_LENGTH"),
    ("1" * 20000, "MAX_TEXT_LENGTH"),
    ("1+" * 10000 + "1", "MAX_TEXT_LENGTH"),
    ("1e999999", "MAX_DECIMAL_EXPONENT"),
    ("1e-999999", "MAX_DECIMAL_EXPONENT"),
    ("1e" + "9" * 3000, "MAX_DECIMAL_EXPONENT"),
    ("7" * 1001, "MAX_NUMERAL_DIGITS"),
    ("0." + "1" * 6000, "MAX_NUMERAL_DIGITS"),
    ("1e-1000", "MAX_VALUE_DIGITS"),
    ("10^1000", "MAX_VALUE_DIGITS"),
    ("(" * 101 + "1" + ")" * 101, "MAX_DEPTH"),
    ("-" * 101 + "1", "MAX_DEPTH"),
    ("√" * 101 + "1", "MAX_DEPTH"),
    ("2^" * 101 + "1", "MAX_DEPTH"),
    ("sqrt(" * 101 + "1" + ")" * 101, "MAX_DEPTH"),
    ("(2^999)^100", "MAX_BITS"),
    ("(2^999)^4", "MAX_VALUE_DIGITS"),
    ("2^999*" * 120 + "1", "MAX_BITS"),
    ("1/3^999+" * 100 + "1", "MAX_BITS"),
    ("sqrt(" + "7" * 700 + ")", "MAX_ROOT_BITS"),
    ("sqrt(" + "7" * 31 + ")", "MAX_ALGEBRAIC_DIGITS"),
    ("*".join(f"sqrt({10**200 + 7 * i})" for i in range(4)), "MAX_ALGEBRAIC_DIGITS"),
    ("exp(20000)", "MAX_POWER_EXPONENT"),
    ("exp(1e999)", "MAX_POWER_EXPONENT"),
    ("exp(10001)", "MAX_POWER_EXPONENT"),
    ("e^(e^(e^3))", "MAX_POWER_EXPONENT"),
    ("(10^999)^(10^√2)", "MAX_POWER_EXPONENT"),
    # found by fuzzing: SymPy's assumptions would primality-test these (minutes)
    ("sqrt((-3127)^(464))", "MAX_VALUE_DIGITS"),
    ("log(-((-3109)^(-289)))", "MAX_VALUE_DIGITS"),
    ("log((3109)^(-200))", "MAX_ROOT_BITS"),
    ("(3^999)^(sqrt(2))", "MAX_ALGEBRAIC_DIGITS"),
    ("((1e-300)^(-3))^(√(2π))", "MAX_ROOT_BITS"),
    # issue 9: roots of huge degree hung in SymPy (minimal polynomial, factoring)
    ("√" * 64 + "2", "MAX_ALGEBRAIC_DEGREE"),
    ("√" * 4 + "2", "MAX_ALGEBRAIC_DEGREE"),
    ("(7^(1/4914))^(1/9441)^(1/4806)", "MAX_ALGEBRAIC_DEGREE"),
    ("(1/7244)^(1/9827)", "MAX_ALGEBRAIC_DEGREE"),
    ("sqrt(2)+sqrt(3)+sqrt(5)+sqrt(7)", "MAX_ALGEBRAIC_DEGREE"),
], ids=_short)
def test_hostile_inputs_are_refused_quickly(text: str, fragment: str) -> None:
    message = _refused_quickly(text, fragment)
    assert len(message) < 400


@pytest.mark.parametrize("text", [
    "(" * 100 + "1" + ")" * 100,
    "-" * 100 + "1",
    "√" * 3 + "16",
    "sqrt(" * 3 + "4" + ")" * 3,
    "-(" * 50 + "1" + ")" * 50,
    "1^" * 99 + "2",
    "1+" * 4999 + "1",
    "1*" * 4999 + "1",
    "2^1000*3^600",
    "sqrt(2)+sqrt(3)+sqrt(5)",
    "2^(1/8)",
    "1e-999",
], ids=_short)
def test_limits_that_are_allowed(text: str) -> None:
    start = time.perf_counter()
    assert isinstance(parse_expression(text), sympy.Expr)
    assert time.perf_counter() - start < 20.0  # a hang guard, not a benchmark


def test_max_depth_is_safe_deep_in_a_call_stack() -> None:
    """At the depth cap the parser must not hit RecursionError, even when called
    from code that is itself a few hundred frames deep."""
    def descend(levels: int) -> sympy.Expr:
        if levels:
            return descend(levels - 1)
        return parse_expression("(" * 98 + "-(2)" + ")" * 98)   # 100 levels
    assert descend(250) == -2


def test_caps_are_documented_module_constants() -> None:
    """The parser uses symattn.limits' caps (docs/limits.md is checked against them)."""
    from symattn import limits
    for name in ("MAX_TEXT_LENGTH", "MAX_DEPTH", "MAX_NUMERAL_DIGITS", "MAX_DECIMAL_EXPONENT",
                 "MAX_POWER_EXPONENT", "MAX_BITS", "MAX_VALUE_DIGITS", "MAX_ALGEBRAIC_DEGREE"):
        from symattn.exact import evaluate, grammar, values
        bound = [getattr(m, name) for m in (parser, grammar, values, evaluate) if hasattr(m, name)]
        assert bound and all(b == getattr(limits, name) for b in bound), name
    assert limits.MAX_TEXT_LENGTH == 10_000 and limits.MAX_DEPTH == 100


@pytest.mark.parametrize("module", [exact, parser], ids=lambda m: m.__name__)
def test_module_never_calls_a_string_evaluator(module) -> None:
    """No eval/exec/compile/sympify/parse_expr/S(...) anywhere in the parser or coercion."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    forbidden = {"eval", "exec", "sympify", "parse_expr", "S", "__import__", "literal_eval"}
    called = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                called.append(func.id)
            elif isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else ""
                called.append(func.attr if (owner, func.attr) != ("re", "compile") else "")
    assert "compile" not in called and not set(called) & forbidden


def test_no_string_reaches_sympy_or_python_evaluators(monkeypatch: pytest.MonkeyPatch) -> None:
    """At run time, nothing hands a string to eval, exec or sympify."""
    def guard(original):
        def wrapper(arg, *args, **kwargs):
            assert not isinstance(arg, str), f"string evaluated: {arg!r}"
            return original(arg, *args, **kwargs)
        return wrapper
    for name in ("eval", "exec"):
        monkeypatch.setattr(builtins, name, guard(getattr(builtins, name)))
    sympify_module = sys.modules["sympy.core.sympify"]
    monkeypatch.setattr(sympify_module, "sympify", guard(sympify_module.sympify))
    monkeypatch.setattr(sympy, "sympify", guard(sympy.sympify))
    for text in ["1/sqrt(3)", "e^(2/sqrt(3))", "2√3 + 0.25", "log(2)*x", "theta^2"]:
        assert isinstance(parse_expression(text, symbols=True), sympy.Expr)


# ---------------------------------------------------------------- the AST

def test_ast_shape_and_positions() -> None:
    tree = parse_ast("1/2π")
    assert tree == Product((("*", Num("1", Integer(1), 0)),
                            ("/", Product((("*", Num("2", Integer(2), 2)),
                                           ("*", Name("pi", 3))), 2, implicit=True))), 0)
    assert parse_ast("-2^2") == Unary("-", Power(Num("2", 2, 1), Num("2", 2, 3), 2), 0)
    assert parse_ast("√3") == Call("sqrt", (Num("3", 3, 1),), 0)
    assert parse_ast("a - b + c") == Sum(
        (("+", Name("a", 0)), ("-", Name("b", 4)), ("+", Name("c", 8))), 0)
    assert parse_ast("foo") == Name("foo", 0)   # parsing alone never resolves names
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.pos = 3  # type: ignore[misc]


def test_parser_and_evaluator_are_extensible() -> None:
    """A checker can add indexing such as weights[I] by subclassing."""
    @dataclasses.dataclass(frozen=True)
    class Index(Node):
        target: Node
        index: Node
        pos: int

    class IndexParser(Parser):
        def postfix(self, node: Node) -> Node:
            while self.peek().value == "[":
                opening = self.advance()
                with self.deeper(opening.pos):
                    index = self.expr()
                if self.advance().value != "]":
                    raise self.fail("unbalanced '['", opening.pos, "add ']'")
                node = Index(node, index, opening.pos)
            return node

    class IndexEvaluator(Evaluator):
        tables: ClassVar[dict[str, list[sympy.Expr]]] = {"weights": [Rational(1, 3), Rational(2, 3)]}

        def eval_Index(self, node: Index) -> sympy.Expr:
            return self.tables[node.target.name][int(self(node.index))]

    text = "weights[1] - weights[0] + sqrt(4)"
    value = IndexEvaluator(text)(IndexParser(text).parse())
    assert value == Rational(7, 3)


# --------------------------------------------------------------- hypothesis

@given(st.fractions(max_denominator=10**30).filter(lambda f: abs(f.numerator) < 10**60))
def test_fractions_round_trip_as_p_over_q(value: Fraction) -> None:
    text = f"{value.numerator}/{value.denominator}"
    assert parse_expression(text) == Rational(value.numerator, value.denominator)
    assert to_exact(value) == Rational(value.numerator, value.denominator)


def _plain_decimal(mantissa: int, exponent: int) -> str:
    """mantissa * 10**exponent as plain decimal text, built from digits (exactly)."""
    sign, digits = ("-" if mantissa < 0 else ""), str(abs(mantissa))
    if exponent >= 0:
        return sign + digits + "0" * exponent
    digits = digits.rjust(1 - exponent, "0")
    return f"{sign}{digits[:exponent]}.{digits[exponent:]}"


@given(st.integers(-(10**40), 10**40), st.integers(-60, 60))
def test_finite_decimals_round_trip(mantissa: int, exponent: int) -> None:
    expected = Rational(mantissa) * Rational(10) ** exponent
    plain = _plain_decimal(mantissa, exponent)
    for text in (plain, f"{mantissa}e{exponent}", f"{mantissa}E{exponent:+d}"):
        assert parse_expression(text) == expected, text
    assert to_exact(Decimal(plain)) == expected
    assert to_exact(DecimalText(plain)) == expected


@given(st.integers(-(10**30), 10**30), st.integers(0, 40), st.integers(0, 40))
def test_fractions_with_finite_decimals_round_trip(numerator: int, twos: int, fives: int) -> None:
    value = Fraction(numerator, 2**twos * 5**fives)
    places = max(twos, fives)
    text = _plain_decimal(int(value * 10**places), -places)
    assert parse_expression(text) == Rational(value.numerator, value.denominator)
    assert parse_expression(f"{value.numerator}/{value.denominator}") == parse_expression(text)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_are_read_by_their_shortest_text(value: float) -> None:
    assert to_exact(value) == Rational(Fraction(repr(value)))


_GRAMMAR = "0123456789.eE+-*/^()√π−·×÷ ,sqrtlogexpinx_"


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), st.text(alphabet=_GRAMMAR, max_size=40)),
       st.booleans())
def test_fuzz_only_parse_errors(text: str, symbols: bool) -> None:
    try:
        value = parse_expression(text, symbols=symbols)
    except ParseError as error:
        assert "\n" not in str(error)
    else:
        assert isinstance(value, sympy.Expr)


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.one_of(st.integers(-50, 50).map(str), st.sampled_from(["pi", "e", "0.5", "√2", "2π"])),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "^"]), inner)
        .map(lambda t: f"({t[0]}){t[1]}({t[2]})"),
        st.tuples(st.sampled_from(["sqrt", "exp", "log", "-"]), inner)
        .map(lambda t: f"{t[0]}({t[1]})")),
    max_leaves=12))
def test_fuzz_well_formed_expressions(text: str) -> None:
    try:
        value = parse_expression(text)
    except ParseError:
        return
    assert value.is_real and not value.free_symbols
