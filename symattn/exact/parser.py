"""The one safe expression parser: text typed by people to exact SymPy numbers.

Why: attention is computed exactly, so every input must become an exact SymPy
number without passing through a binary float, and text typed by people must
be read without ``eval`` (SymPy's own parser runs Python ``eval``).  Strings
are tokenized and parsed here into a small AST of frozen dataclasses; an
:class:`Evaluator` then builds SymPy objects directly.  Hard caps (symattn.limits,
docs/limits.md) keep hostile input from exhausting time or memory, and keep
what is accepted cheap for every later step (printing, minimal polynomials).

Grammar, loosest binding first::

    expr    := term (('+' | '-') term)*
    term    := implied (('*' | '/') implied)*
    implied := unary [unary]                  # juxtaposition, see below
    unary   := ('+' | '-' | '√') unary | postfix [('^' | '**') unary]
    postfix := atom                           # hook: Parser.postfix (x[i])
    atom    := number | name | name '(' [expr (',' expr)*] ')' | '(' expr ')'

* A power binds tighter than a sign and is right-associative: ``-2^2`` is -4,
  ``2^-1`` is 1/2, ``2^3^2`` is 2^9.  ``√`` takes the following unary, like a
  sign: ``√3^2`` is √(3^2), ``2/√3`` is 2/√3.
* Juxtaposition only for a bare numeral followed by ``√``, ``π`` or ``(``:
  ``2√3``, ``2π``, ``2(3+1)``, ``-2π``.  It binds tighter than ``*`` and ``/``
  (``1/2π`` is 1/(2π)).  Anything else (``2pi``, ``2x``, ``√2π``, ``(1)(2)``,
  ``2π√3``) is an error that asks for ``*``: guessing is worse than asking.
* Unicode: ``−`` minus, ``·`` ``×`` ``⋅`` times, ``÷`` divide, ``√``, ``π``.
* Numbers: ``12``, ``0.3``, ``.5``, ``5.``, ``-2.5e-3``, ``1E10``; no
  underscores, no ``%``.  ``2e3`` is 2000; ``e`` alone is Euler's number.
* Exponents: any rational p/q with |p| within MAX_POWER_EXPONENT and a root
  index q within MAX_ALGEBRAIC_DEGREE (``2^(1/2)``, ``8^(2/3)``); a fractional
  power needs a non-negative base.  Irrational exponents (``2^√2``,
  ``e^(2/sqrt(3))``) need a positive base and a result of at most
  e^MAX_POWER_EXPONENT.
* Domains are checked as each node is built (square root of a negative, log
  of a non-positive, division by zero).  Signs come from python-flint balls,
  never from SymPy's assumptions (which may primality-test a huge integer);
  a sign the balls cannot decide, as for the hidden zero √(3+2√2)-1-√2, is
  refused rather than guessed.
* Every value built stays within MAX_VALUE_DIGITS digits per rational, and
  its roots within an algebraic degree of MAX_ALGEBRAIC_DEGREE (the product of
  the root indices of its distinct roots); a finished value with roots keeps
  its rationals within MAX_ALGEBRAIC_DIGITS digits.  Deciding a tie computes a
  minimal polynomial, whose cost explodes past these (docs/limits.md).
"""

from __future__ import annotations

import functools
import operator
import re
from math import gcd
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import sympy
from flint import arb, ctx, fmpq

from symattn.errors import ParseError
# the caps: one table in symattn.limits and docs/limits.md
from symattn.limits import (MAX_ALGEBRAIC_DEGREE, MAX_ALGEBRAIC_DIGITS, MAX_BITS,
                            MAX_DECIMAL_EXPONENT, MAX_DEPTH, MAX_NUMERAL_DIGITS,
                            MAX_POWER_EXPONENT, MAX_ROOT_BITS, MAX_TEXT_LENGTH, MAX_VALUE_DIGITS)

__all__ = ["Call", "Evaluator", "Name", "Node", "Num", "Parser", "Power", "Product", "Sum",
           "Unary", "algebraic_degree", "check_value", "minimal_polynomial_affordable", "parse_ast",
           "parse_expression"]

_HELP = "use numbers, sqrt(...), exp(...), log(...), pi or e"


# ---------------------------------------------------------------- the AST

@dataclass(frozen=True)
class Node:
    """Base of the AST; every node has ``pos``, its 0-based offset in the text."""


@dataclass(frozen=True)
class Num(Node):
    text: str
    value: sympy.Rational
    pos: int


@dataclass(frozen=True)
class Name(Node):
    name: str   # normalized: 'π' is 'pi'
    pos: int


@dataclass(frozen=True)
class Call(Node):
    name: str   # '√x' is Call('sqrt', (x,))
    args: tuple[Node, ...]
    pos: int


@dataclass(frozen=True)
class Unary(Node):
    op: str     # '+' or '-'
    operand: Node
    pos: int


@dataclass(frozen=True)
class Power(Node):
    base: Node
    exponent: Node
    pos: int


@dataclass(frozen=True)
class Sum(Node):
    terms: tuple[tuple[str, Node], ...]    # ('+' | '-', term); the first is '+'
    pos: int


@dataclass(frozen=True)
class Product(Node):
    factors: tuple[tuple[str, Node], ...]  # ('*' | '/', factor); the first is '*'
    pos: int
    implicit: bool = False                 # written by juxtaposition, as in 2√3


# ------------------------------------------------------ errors and numerals

def _fail(text: str, where: str, problem: str, pos: int | None, fix: str) -> ParseError:
    shown = repr(text if len(text) <= 40 else text[:37] + "...")
    at = "" if pos is None else f" at column {pos + 1}"
    return ParseError(f"cannot read {shown} in {where}: {problem}{at}; {fix}")


def _failer(text: str, where: str, pos: int | None = None) -> Callable[[str, str], ParseError]:
    """``_fail`` with the text and place bound, for helpers that only know the problem."""
    def fail(problem: str, fix: str) -> ParseError:
        return _fail(text, where, problem, pos, fix)
    return fail


_DECIMAL = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?")


def _digits_to_int(digits: str) -> int:
    """int(digits) in chunks, below Python's 4,300-digit str->int limit."""
    value = 0
    for i in range(0, len(digits), 4000):
        chunk = digits[i:i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


def _decimal_value(numeral: str, fail: Callable[[str, str], ParseError]) -> sympy.Rational:
    """The exact value of decimal text such as '-2.5e-3', within the caps."""
    match = _DECIMAL.fullmatch(numeral)
    if not match or not (match[2] or match[3]):
        raise fail("it is not a decimal number", "write digits such as 0.25 or 1e-3")
    sign, whole, frac, exp = match[1], match[2], match[3] or "", match[4] or "0"
    if len(whole) + len(frac) > MAX_NUMERAL_DIGITS:
        raise fail(f"a numeral has {len(whole) + len(frac):,} digits, over the "
                   f"{MAX_NUMERAL_DIGITS:,}-digit cap (MAX_NUMERAL_DIGITS)", "write fewer digits")
    exp_digits = exp.lstrip("+-").lstrip("0")
    if len(exp_digits) > 6 or int(exp_digits or "0") > MAX_DECIMAL_EXPONENT:
        raise fail(f"its exponent is over the cap of {MAX_DECIMAL_EXPONENT:,} "
                   "(MAX_DECIMAL_EXPONENT)", "use a smaller exponent")
    shift = int(exp) - len(frac)
    value = _digits_to_int(whole + frac or "0")
    value = value * 10**shift if shift >= 0 else sympy.Rational(value, 10**-shift)
    value = sympy.Rational(-value if sign == "-" else value)
    if _over(value, _VALUE_LIMIT):
        raise fail(_too_many_digits(), "write fewer digits or a smaller exponent")
    return value


# ------------------------------------------------------------ value caps

_VALUE_LIMIT = 10**MAX_VALUE_DIGITS          # a rational's |numerator| and denominator stay below
_VALUE_BITS = _VALUE_LIMIT.bit_length()
_ALGEBRAIC_LIMIT = 10**MAX_ALGEBRAIC_DIGITS  # the same, in a value that has a root
_ALGEBRAIC_BITS = _ALGEBRAIC_LIMIT.bit_length()
_ALGEBRAIC_HEIGHT = 4 * _ALGEBRAIC_BITS     # all of them once multiplied out: about 120 digits


def _too_many_digits() -> str:
    return (f"a number in it has over {MAX_VALUE_DIGITS:,} digits "
            "(MAX_VALUE_DIGITS, the most symattn shows or checks)")


def _over(r: sympy.Rational, limit: int) -> bool:
    """Does a numerator or denominator reach ``limit`` (10^k: more than k digits)?"""
    return abs(r.p) >= limit or r.q >= limit


def _rationals(expr: sympy.Expr) -> Iterator[sympy.Rational]:
    """Every rational in ``expr`` except the exponents of powers (capped on their own)."""
    stack = [expr]
    while stack:
        item = stack.pop()
        if item.is_Rational:
            yield item
        elif item.is_Pow:
            stack.append(item.base)
        else:
            stack.extend(item.args)


def _roots(expr: sympy.Expr) -> dict[sympy.Expr, int]:
    """base -> lcm of the root indices q over the powers base^(p/q) in ``expr``."""
    found: dict[sympy.Expr, int] = {}
    for atom in expr.atoms(sympy.Pow):
        if atom.exp.is_Rational and not atom.exp.is_Integer:
            q = int(atom.exp.q)
            found[atom.base] = q * found.get(atom.base, 1) // gcd(q, found.get(atom.base, 1))
    return found


def algebraic_degree(*values: sympy.Expr) -> int:
    """An upper bound on the degree of the field the roots of ``values`` generate.

    Why: deciding an exact tie or a hidden rational computes a minimal
    polynomial, whose cost explodes with the degree (√ nested 55 times is
    degree 2^55).  The bound multiplies the root index of every distinct
    root (roots of one base share the lcm): √2+√3 gives 4, √√2 gives 4."""
    found: dict[sympy.Expr, int] = {}
    for value in values:
        for base, q in _roots(value).items():
            found[base] = q * found.get(base, 1) // gcd(q, found.get(base, 1))
    degree = 1
    for q in found.values():
        degree *= q
    return degree


def minimal_polynomial_affordable(value: sympy.Expr) -> bool:
    """Whether SymPy's minimal polynomial of ``value`` stays cheap: degree at most
    MAX_ALGEBRAIC_DEGREE, and with a root, coefficients of at most about 240 digits once
    multiplied out (twice what the inputs' own caps allow, so products of capped inputs,
    such as projected scores, keep their exact tests).

    Why: exact tests (is it 0? is it rational?) ask for one, and values the engine builds
    can pass the input caps: e^(1540.8·log 3) = 3^1540·3^(4/5), a 735-digit number beside
    a fifth root, took 9 s per call (120 digits: 0.8 s), minutes per view.  Past the bound
    the test answers "not known" and the precision loop decides."""
    degree = algebraic_degree(value)
    if degree > MAX_ALGEBRAIC_DEGREE:
        return False
    return degree == 1 or _height_bits(value) <= 2 * _ALGEBRAIC_HEIGHT


def _height_bits(expr: sympy.Expr) -> int:
    """A rough bound on the bits of the coefficients of ``expr`` once expanded."""
    if expr.is_Rational:
        return max(abs(expr.p).bit_length(), expr.q.bit_length())
    if expr.is_Pow:
        base = _height_bits(expr.base)
        return base * abs(int(expr.exp)) if expr.exp.is_Integer else base
    if expr.is_Mul:
        return sum(_height_bits(a) for a in expr.args)
    if expr.is_Add:
        return max(_height_bits(a) for a in expr.args) + len(expr.args).bit_length()
    return max((_height_bits(a) for a in expr.args), default=1)


def _value_problem(value: sympy.Expr, whole: bool = True) -> tuple[str, str] | None:
    """Why a built value is over a cap (problem, fix), or None when it is within them.

    ``whole``: the value is a finished input (not a part of one, nor a value a
    checker derived from a trace), so the digits beside its roots are capped too."""
    for r in _rationals(value):
        if _over(r, _VALUE_LIMIT):
            return _too_many_digits(), "use smaller numbers or exponents"
    if _height_bits(value) > 2 * _VALUE_BITS:
        return _too_many_digits() + " once multiplied out", "use smaller exponents"
    degree = algebraic_degree(value)
    if degree > MAX_ALGEBRAIC_DEGREE:
        return (f"its roots have algebraic degree up to {degree:,}, over the cap of "
                f"{MAX_ALGEBRAIC_DEGREE} (MAX_ALGEBRAIC_DEGREE)",
                "use fewer or simpler roots, such as sqrt(2) or 2^(1/3)")
    if whole and degree > 1 and (_height_bits(value) > _ALGEBRAIC_HEIGHT
                       or any(_over(r, _ALGEBRAIC_LIMIT) for r in _rationals(value))):
        return (f"a number beside or under a root has over {MAX_ALGEBRAIC_DIGITS} digits "
                "(MAX_ALGEBRAIC_DIGITS)", "use shorter numbers with roots")
    return None


def check_value(value: sympy.Expr, fail: Callable[[str, str], ParseError]) -> sympy.Expr:
    """Refuse a value over the digit or algebraic-degree caps (for values not parsed here,
    such as SymPy expressions and ints given in Python); returns it unchanged."""
    problem = _value_problem(value)
    if problem:
        raise fail(*problem)
    return value


# -------------------------------------------------------------- tokenizer

@dataclass(frozen=True)
class Token:
    kind: str    # 'num' | 'name' | 'op' | 'end'
    value: str   # normalized: '−' is '-', '×' is '*', '**' is '^', 'π' is 'pi'
    text: str    # as written
    pos: int


_GREEK = "\u0391-\u03a9\u03b1-\u03bf\u03c1-\u03c9"  # Greek letters except π
_TOKEN = re.compile(rf"""(?P<space>[^\S\x0b\x0c\x1c-\x1f\x85]+)   # no control characters
    | (?P<num>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
    | (?P<name>[A-Za-z_{_GREEK}][A-Za-z0-9_{_GREEK}]*)
    | (?P<op>\*\*|[-+*/^(),\[\]√π−·×⋅÷])""", re.VERBOSE)
_NORMAL = {"−": "-", "·": "*", "×": "*", "⋅": "*", "÷": "/", "**": "^", "π": "pi"}
_CHAR_HINTS = {"%": "percent is not supported; write 0.5 or 50/100",
               ".": "write a number such as 0.5", "'": "quotes are not allowed",
               '"': "quotes are not allowed"}


def _tokenize(text: str, where: str) -> list[Token]:
    tokens, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            fix = _CHAR_HINTS.get(text[pos], "use digits, names, + - * / ^ ( ) √ and π")
            raise _fail(text, where, f"unexpected character {text[pos]!r}", pos, fix)
        kind, raw = match.lastgroup, match.group()
        if kind == "num" and text.startswith("_", match.end()):
            raise _fail(text, where, "underscores are not allowed in numbers",
                        match.end(), "write 1000, not 1_000")
        if kind != "space":
            tokens.append(Token("name" if raw == "π" else kind, _NORMAL.get(raw, raw), raw, pos))
        pos = match.end()
    tokens.append(Token("end", "", "", len(text)))
    return tokens


# ----------------------------------------------------------------- parser

class Parser:
    """Recursive descent over the grammar in the module docstring.

    Subclass and override :meth:`postfix` to add syntax such as ``x[i]``
    (the tokenizer already yields '[' and ']'); wrap any new recursion in
    ``with self.deeper(pos):`` so nesting stays capped.
    """

    def __init__(self, text: str, where: str = "input") -> None:
        self.text, self.where = text, where
        self.tokens = _tokenize(text, where)
        self.index = self.depth = 0

    def fail(self, problem: str, pos: int | None, fix: str) -> ParseError:
        return _fail(self.text, self.where, problem, pos, fix)

    def peek(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        self.index += 1
        return self.tokens[self.index - 1]

    @contextmanager
    def deeper(self, pos: int) -> Iterator[None]:
        """One level deeper; refuse long before Python's own stack would overflow."""
        if self.depth >= MAX_DEPTH:
            raise self.fail(f"it nests deeper than {MAX_DEPTH} levels (MAX_DEPTH)",
                            pos, "simplify the expression")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def parse(self) -> Node:
        node = self.expr()
        if self.peek().kind != "end":
            raise self.unexpected(self.peek())
        return node

    def unexpected(self, token: Token) -> ParseError:
        if token.kind == "end":
            return self.fail("it ends too early", token.pos, "finish the last operation")
        if token.value == ")":
            return self.fail("unbalanced ')'", token.pos, "remove it or add a '('")
        if token.kind in ("num", "name") or token.value in ("(", "√"):
            return self.fail(f"unexpected {token.text!r}", token.pos,
                             "write '*' between factors, e.g. 2*pi or (1)*(2)")
        return self.fail(f"unexpected {token.text!r}", token.pos,
                         "expected a number, a name or '('")

    def expr(self) -> Node:
        start = self.peek().pos
        terms = [("+", self.term())]
        while self.peek().value in ("+", "-"):
            terms.append((self.advance().value, self.term()))
        return terms[0][1] if len(terms) == 1 else Sum(tuple(terms), start)

    def term(self) -> Node:
        start = self.peek().pos
        factors = [("*", self.implied())]
        while self.peek().value in ("*", "/"):
            factors.append((self.advance().value, self.implied()))
        return factors[0][1] if len(factors) == 1 else Product(tuple(factors), start)

    def implied(self) -> Node:
        """A unary, or a bare numeral juxtaposed with √, π or '(' (2√3, 2π)."""
        start = self.peek().pos
        node = self.unary()
        bare = node.operand if isinstance(node, Unary) else node
        after_numeral = self.tokens[self.index - 1].kind == "num"
        if isinstance(bare, Num) and after_numeral and self.peek().text in ("√", "π", "("):
            return Product((("*", node), ("*", self.unary())), start, implicit=True)
        return node

    def unary(self) -> Node:
        """Prefix signs and √, then an atom with an optional right-assoc power."""
        token = self.peek()
        if token.value in ("+", "-", "√"):
            self.advance()
            with self.deeper(token.pos):
                operand = self.unary()
            if token.value == "√":
                return Call("sqrt", (operand,), token.pos)
            return Unary(token.value, operand, token.pos)
        base = self.postfix(self.atom())
        token = self.peek()
        if token.value != "^":
            return base
        self.advance()
        with self.deeper(token.pos):
            return Power(base, self.unary(), token.pos)

    def postfix(self, node: Node) -> Node:
        """Hook for subclasses (indexing and the like); the base grammar has none."""
        return node

    def atom(self) -> Node:
        token = self.advance()
        if token.kind == "num":
            fail = _failer(self.text, self.where, token.pos)
            return Num(token.text, _decimal_value(token.text, fail), token.pos)
        if token.kind == "name" and self.peek().value != "(":
            return Name(token.value, token.pos)
        if token.kind == "name" or token.value == "(":
            call = token.kind == "name"
            opening = self.advance() if call else token
            with self.deeper(opening.pos):
                items = [] if call and self.peek().value == ")" else [self.expr()]
                while call and self.peek().value == ",":
                    self.advance()
                    items.append(self.expr())
            self.close(opening)
            return Call(token.value, tuple(items), token.pos) if call else items[0]
        self.index -= 1
        raise self.unexpected(token)

    def close(self, opening: Token) -> None:
        token = self.peek()
        if token.kind == "end":
            raise self.fail("unbalanced '('", opening.pos, "add the missing ')'")
        if token.value != ")":
            raise self.unexpected(token)
        self.advance()


# -------------------------------------------------------------- evaluator

def _bits(expr: sympy.Expr) -> int:
    """A generous estimate of the bits of the rationals in ``expr`` (not its exponents)."""
    total, stack = 0, [expr]
    while stack:
        item = stack.pop()
        if item.is_Rational:
            total += abs(item.p).bit_length() + item.q.bit_length()
        else:
            stack.extend([item.base] if item.is_Pow else item.args)
    return max(1, total)


def _ball(x: sympy.Expr) -> arb | None:
    """An arb ball around an expression the Evaluator built (None if it cannot)."""
    if x.is_Rational:
        return arb(fmpq(x.p, x.q))
    if x in _ARB_CONSTANTS:
        return _ARB_CONSTANTS[x]()
    args = [_ball(a) for a in x.args]
    if not args or None in args:
        return None
    if x.is_Add or x.is_Mul:
        return functools.reduce(operator.add if x.is_Add else operator.mul, args)
    if x.is_Pow:
        base, exponent = args
        return base ** int(x.exp) if x.exp.is_Integer else (base ** exponent if base > 0 else None)
    function = _ARB_FUNCTIONS.get(type(x))
    return function(args[0]) if function and len(args) == 1 else None


_ARB_CONSTANTS = {sympy.pi: arb.pi, sympy.E: arb.const_e}
_ARB_FUNCTIONS = {sympy.exp: arb.exp, sympy.log: arb.log, sympy.tanh: arb.tanh,
                  sympy.cos: arb.cos, sympy.sin: arb.sin}


def _approx(x: sympy.Expr, decide_sign: bool = False) -> arb | None:
    """A certified ball around a number, narrow enough to show its sign if asked.

    Why not ``x.is_positive``: SymPy's assumption system may, in random
    order, run a primality test on a big integer (minutes), and ``evalf``
    is slow on huge rationals; flint's balls are fast and rigorous.
    """
    if x.free_symbols:
        return None
    for prec in (64, 256, 1024, 4096):
        with ctx.workprec(prec):
            ball = _ball(x)
        if ball is None or not ball.is_finite():
            return None
        if not decide_sign or ball.is_exact() or not ball.contains(0):
            return ball
    return None


def _sign(x: sympy.Expr) -> int | None:
    """-1, 0 or 1 for a number; None when symbolic or not decided (see _approx)."""
    if x.is_Rational:
        return (x.p > 0) - (x.p < 0)
    ball = _approx(x, decide_sign=True)
    return None if ball is None else (ball > 0) - (ball < 0)


class Evaluator:
    """Turn an AST into a SymPy expression, checking domains and caps.

    Names and calls resolve through the ``constants`` and ``functions``
    tables; a subclass may extend them or add ``eval_<NodeClass>`` methods.
    """

    constants: ClassVar[dict[str, sympy.Expr]] = {"pi": sympy.pi, "e": sympy.E}
    # name: (SymPy function, signs a numeric argument may have (() = any), problem, guard)
    functions: ClassVar[dict[str, tuple[Callable[..., sympy.Expr], tuple[int, ...], str, str]]] = {
        "sqrt": (sympy.sqrt, (0, 1), "the square root of a negative number", "guard_root"),
        "exp": (sympy.exp, (), "", "guard_exp"),
        "log": (sympy.log, (1,), "the logarithm of a number that is not positive", "guard_root"),
        "ln": (sympy.log, (1,), "the logarithm of a number that is not positive", "guard_root"),
        # soft-capping (tanh) and RoPE rotations (cos, sin); arguments are bounded as e^x's
        "tanh": (sympy.tanh, (), "", "guard_argument"),
        "cos": (sympy.cos, (), "", "guard_argument"),
        "sin": (sympy.sin, (), "", "guard_argument"),
    }

    def __init__(self, text: str, where: str = "input", symbols: bool = False,
                 symbol_hint: bool = False) -> None:
        self.text, self.where, self.symbols = text, where, symbols
        self.symbol_hint = symbol_hint   # say how to declare an unknown name as a symbol
        self.bits = self.root_bits = 0

    def __call__(self, node: Node) -> sympy.Expr:
        return getattr(self, f"eval_{type(node).__name__}")(node)

    def fail(self, problem: str, node: Node, fix: str) -> ParseError:
        return _fail(self.text, self.where, problem, node.pos, fix)

    def spend(self, bits: int, node: Node) -> None:
        self.bits += bits
        if self.bits > MAX_BITS:
            raise self.fail(f"its numbers would exceed {MAX_BITS:,} bits (MAX_BITS)",
                            node, "use smaller numbers or exponents")

    def guard_root(self, base: sympy.Expr, node: Node) -> None:
        self.root_bits += _bits(base)
        if self.root_bits > MAX_ROOT_BITS:
            raise self.fail(f"the numbers under roots, logs and fractional powers exceed "
                            f"{MAX_ROOT_BITS:,} bits (MAX_ROOT_BITS)", node,
                            "use smaller numbers there")

    def guard_fraction(self, base: sympy.Expr, q: int, node: Node) -> None:
        """Before SymPy builds base^(p/q): it factors the base (a 120,000-bit integer for
        (1/7244)^(1/9827)), so the degree and the numbers under the root are capped first."""
        degree = algebraic_degree(base) * q
        if degree > MAX_ALGEBRAIC_DEGREE:
            raise self.fail(f"a root of index {q:,} here makes its algebraic degree "
                            f"{degree:,}, over the cap of {MAX_ALGEBRAIC_DEGREE} "
                            "(MAX_ALGEBRAIC_DEGREE)", node,
                            "use fewer or simpler roots, such as sqrt(2) or 2^(1/3)")
        if _height_bits(base) > _ALGEBRAIC_HEIGHT or any(
                _over(r, _ALGEBRAIC_LIMIT) for r in _rationals(base)):
            raise self.fail(f"a number under a root has over {MAX_ALGEBRAIC_DIGITS} digits "
                            "(MAX_ALGEBRAIC_DIGITS)", node, "use shorter numbers under roots")
        self.guard_root(base, node)

    def checked(self, value: sympy.Expr, node: Node) -> sympy.Expr:
        """``value`` when within the digit and degree caps (see check_value)."""
        problem = _value_problem(value, whole=False)
        if problem:
            raise self.fail(problem[0], node, problem[1])
        return value

    def guard_exp(self, x: sympy.Expr, node: Node) -> None:
        if not x.free_symbols:
            self.guard_size(_approx(x), node)

    def guard_argument(self, x: sympy.Expr, node: Node) -> None:
        """tanh, cos, sin of a bounded number: cos(10^999) would need 1,000 digits of π."""
        if x.free_symbols:
            return
        size = _approx(x)
        if size is None or not size.is_finite() or size.abs_upper() > MAX_POWER_EXPONENT:
            raise self.fail(f"its argument is over {MAX_POWER_EXPONENT:,} in size or cannot be "
                            "bounded (MAX_POWER_EXPONENT)", node, "use a smaller argument")

    def guard_size(self, log_size: arb | None, node: Node) -> None:
        """Refuse e^x for huge |x|: SymPy could take minutes to compare the result."""
        bounded = log_size is not None and log_size.is_finite()
        if not bounded or log_size.abs_upper() > MAX_POWER_EXPONENT:
            problem = "its size cannot be bounded" if log_size is None else "it exceeds"
            raise self.fail(f"{problem} e^{MAX_POWER_EXPONENT:,} (MAX_POWER_EXPONENT)",
                            node, "use a smaller exponent")

    def eval_Num(self, node: Num) -> sympy.Expr:
        self.spend(_bits(node.value), node)
        return node.value

    def eval_Name(self, node: Name) -> sympy.Expr:
        if node.name in self.constants:
            return self.constants[node.name]
        if node.name in self.functions:
            raise self.fail(f"{node.name} needs an argument", node, f"write {node.name}(...)")
        if self.symbols:
            return sympy.Symbol(node.name, real=True)
        if self.symbol_hint:
            raise ParseError(
                f"unknown name {node.name!r} in {self.where}: declare it as a symbol "
                f"(symbols = [\"{node.name}\"] in the problem file, symbols=[\"{node.name}\"] "
                f"in Python) or {_HELP}")
        raise ParseError(f"unknown name {node.name!r} in {self.where}: {_HELP}")

    def eval_Call(self, node: Call) -> sympy.Expr:
        if node.name not in self.functions:
            raise ParseError(f"unknown function {node.name!r} in {self.where}: {_HELP}")
        function, signs, problem, guard = self.functions[node.name]
        if len(node.args) != 1:
            raise self.fail(f"{node.name} takes 1 argument, not {len(node.args)}", node,
                            f"write {node.name}(x)")
        arg = self(node.args[0])
        if signs and not arg.free_symbols and _sign(arg) not in signs:
            raise self.fail(problem, node, "only real numbers are allowed")
        if guard:
            getattr(self, guard)(arg, node)
        if function is sympy.sqrt:
            self.guard_fraction(arg, 2, node)
        return self.checked(function(arg), node)

    def eval_Unary(self, node: Unary) -> sympy.Expr:
        value = self(node.operand)
        return -value if node.op == "-" else value

    def eval_Sum(self, node: Sum) -> sympy.Expr:
        return self.checked(sympy.Add(*[self(t) if op == "+" else -self(t)
                                        for op, t in node.terms]), node)

    def eval_Product(self, node: Product) -> sympy.Expr:
        factors = []
        for op, child in node.factors:
            value = self(child)
            if op == "/":
                self.check_divisor(value, child)
                value = sympy.Pow(value, -1)
            factors.append(value)
        return self.checked(sympy.Mul(*factors), node)

    def check_divisor(self, value: sympy.Expr, node: Node) -> None:
        # with symbols only a literal 0 is known to be zero
        sign = (0 if value == 0 else 1) if value.free_symbols else _sign(value)
        if sign == 0:
            raise self.fail("division by zero", node, "change the divisor")
        if sign is None:
            raise self.fail("the divisor cannot be shown to be non-zero", node,
                            "simplify the divisor")

    def eval_Power(self, node: Power) -> sympy.Expr:
        base, exponent = self(node.base), self(node.exponent)
        if exponent.is_Rational:
            self.check_rational_power(base, exponent, node)
        elif not (base.free_symbols or exponent.free_symbols):
            self.check_irrational_power(base, exponent, node)
        if exponent.is_Rational and not exponent.is_Integer:
            self.guard_fraction(base, int(exponent.q), node)
        elif not exponent.is_Integer:
            self.guard_root(base, node)   # SymPy factors the base of b^x
        return self.checked(sympy.Pow(base, exponent), node)

    def check_rational_power(self, base: sympy.Expr, exponent: sympy.Rational, node: Node) -> None:
        p, q = exponent.p, exponent.q
        if q > MAX_ALGEBRAIC_DEGREE:
            raise self.fail(f"a root of index {q:,} is over the algebraic-degree cap of "
                            f"{MAX_ALGEBRAIC_DEGREE} (MAX_ALGEBRAIC_DEGREE)", node,
                            "use a simpler root, such as x^(1/2) or x^(1/3)")
        if abs(p) > MAX_POWER_EXPONENT:
            raise self.fail(f"the exponent is over the cap of {MAX_POWER_EXPONENT:,} "
                            "(MAX_POWER_EXPONENT)", node, "use a smaller exponent")
        self.spend(_bits(base) * abs(p), node)
        if q == 1 and _height_bits(base) * abs(p) > 2 * _VALUE_BITS:
            raise self.fail(_too_many_digits(), node, "use a smaller exponent")
        sign = None if base.free_symbols else _sign(base)
        if sign == 0 and p < 0:
            raise self.fail("division by zero (0 to a negative power)", node,
                            "change the base or the exponent")
        if q != 1 and not base.free_symbols and sign not in (0, 1):
            raise self.fail("a fractional power of a negative number is not real", node,
                            "take the root of a positive number, e.g. -(8^(1/3))")

    def check_irrational_power(self, base: sympy.Expr, exponent: sympy.Expr, node: Node) -> None:
        if _sign(base) != 1:
            raise self.fail("an irrational power needs a positive base", node,
                            "only real numbers are allowed")
        size, base_ball = _approx(exponent), _approx(base)
        self.guard_size(None if size is None or base_ball is None else size * base_ball.log(), node)


# ------------------------------------------------------------- public API

def parse_ast(text: str, *, where: str = "input") -> Node:
    """Parse ``text`` into the AST without evaluating it, for reuse by checkers."""
    if not isinstance(text, str):
        raise ParseError(f"cannot read a {type(text).__name__} in {where}: give a string")
    if len(text) > MAX_TEXT_LENGTH:
        raise _fail(text, where, f"it is {len(text):,} characters, over the "
                    f"{MAX_TEXT_LENGTH:,}-character cap (MAX_TEXT_LENGTH)", None, "shorten it")
    if not text.strip():
        raise _fail(text, where, "it is empty", None, "write a number such as 0")
    return Parser(text, where).parse()


def _check_finite(value: sympy.Expr, where: str, symbols: bool,
                  fail: Callable[[str, str], ParseError]) -> sympy.Expr:
    """Refuse infinities, NaN, I and (unless allowed) symbols in a result."""
    if value.free_symbols and not symbols:
        names = ", ".join(sorted(str(s) for s in value.free_symbols))
        raise fail(f"it contains the symbols {names}", "pass symbols=True to allow them")
    if value.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo, sympy.I):
        raise fail("it is not a finite real number", "only real numbers are allowed")
    return value


def parse_expression(text: str, *, where: str = "input", symbols: bool = False,
                     symbol_hint: bool = False) -> sympy.Expr:
    """Read a typed expression exactly and safely: no eval, no sympify, capped sizes.

    Every operation checks its domain as it is built, so a numeric result is
    real by construction.  ``symbol_hint``: an unknown name's message says how
    to declare symbols (for problem inputs, where symbols are allowed).
    """
    value = Evaluator(text, where, symbols, symbol_hint)(parse_ast(text, where=where))
    fail = _failer(text, where)
    return check_value(_check_finite(value, where, symbols, fail), fail)
