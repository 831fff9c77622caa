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

from collections.abc import Callable

import sympy

from symattn.errors import ParseError
# the caps: one table in symattn.limits and docs/limits.md
from symattn.limits import (MAX_TEXT_LENGTH)
from symattn.exact.grammar import (  # noqa: F401 (the parser's public names)
    Call, Name, Node, Num, Parser, Power, Product, Sum, Token, Unary, _decimal_value, _fail, _failer,
)
from symattn.exact.values import (  # noqa: F401
    algebraic_degree, check_value, minimal_polynomial_affordable,
)
from symattn.exact.evaluate import Evaluator  # noqa: F401

__all__ = ["Call", "Evaluator", "Name", "Node", "Num", "Parser", "Power", "Product", "Sum",
           "Unary", "algebraic_degree", "check_value", "minimal_polynomial_affordable", "parse_ast",
           "parse_expression"]


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
