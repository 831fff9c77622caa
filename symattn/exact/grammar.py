"""The grammar of the safe parser: the AST, numerals, the tokenizer and the parser.

Text in, a tree of frozen dataclasses out; no SymPy value is built here (that is
``exact.evaluate``).  The grammar itself is described in ``exact.parser``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy

from symattn.errors import ParseError
# the caps: one table in symattn.limits and docs/limits.md
from symattn.exact.values import _VALUE_LIMIT, _over, _too_many_digits
from symattn.limits import (MAX_DECIMAL_EXPONENT, MAX_DEPTH, MAX_NUMERAL_DIGITS)

_HELP = "use numbers, sqrt(...), exp(...), log(...), pi or e"


# ---------------------------------------------------------------- the AST

@dataclass(frozen=True)
class Node:
    """Base of the AST; every node has ``pos``, its 0-based offset in the text."""
    if TYPE_CHECKING:      # each node declares the field last (its own constructor order)
        @property
        def pos(self) -> int: ...


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
        assert kind is not None     # every alternative of _TOKEN is a named group
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


