"""Exact numbers: every user value becomes an exact SymPy number.

Why: attention is computed exactly, so a value must never pass through a
binary float.  Floats (Python's, numpy's, TOML's) are read by their decimal
text: 0.1 is 1/10.  Strings go through symattn's own parser
(:mod:`symattn.exact.parser`), never ``eval`` or ``sympify``.
"""

from __future__ import annotations

import decimal
import fractions
import math
import numbers
import re
from collections.abc import Callable

import sympy

from symattn.errors import ParseError
from symattn.exact.parser import (_check_finite, _decimal_value, _fail, _failer, check_value,
                            parse_ast, parse_expression)

__all__ = ["DecimalText", "parse_ast", "parse_expression", "to_exact"]


class DecimalText(str):
    """Raw text of a TOML float, from ``tomllib.loads(s, parse_float=DecimalText)``.

    Why: keeping the text lets :func:`to_exact` read 0.3 as 3/10, never as the
    binary float nearest to it.
    """


# Plain numerals ("-2.7", "12") are the bulk of a problem file: read them directly.
_PLAIN_NUMERAL = re.compile(r"[+-]?[0-9]{1,60}(?:\.[0-9]{0,60})?")


_TEXT_FLOAT = re.compile(r"[+-]?[0-9](?:_?[0-9])*(?:\.(?:[0-9](?:_?[0-9])*)?)?"  # '5.' from SymPy
                         r"(?:[eE][+-]?[0-9](?:_?[0-9])*)?")


def _from_text(numeral: str, where: str) -> sympy.Rational:
    """Exact value of the text of a TOML float, a Decimal or a float's repr."""
    if numeral.lstrip("+-").lower() in ("inf", "nan", "infinity", "snan"):
        raise _fail(numeral, where, "it is not finite", None, "give a finite number")
    if not _TEXT_FLOAT.fullmatch(numeral):
        raise _fail(numeral, where, "it is not a decimal number", None,
                    "write digits such as 0.25 or 1e-3")
    return _decimal_value(numeral.replace("_", ""), _failer(numeral, where))


def _not_finite(kind: str, value: object, where: str) -> ParseError:
    return ParseError(f"cannot use the {kind} {value} in {where}: give a finite number")


def _python_fail(value: object, where: str) -> Callable[[str, str], ParseError]:
    kind = "SymPy value" if isinstance(value, sympy.Basic) else type(value).__name__
    def fail(problem: str, fix: str) -> ParseError:
        return ParseError(f"cannot use the {kind} in {where}: {problem}; {fix}")
    return fail


def to_exact(value: object, *, where: str = "input", symbols: bool = False,
             symbol_hint: bool = False) -> sympy.Expr:
    """Coerce a user value to an exact SymPy number; floats are read by their text.

    Values given in Python (ints, Fractions, SymPy expressions) meet the same
    digit and algebraic-degree caps as parsed text (symattn.limits).
    ``symbol_hint``: an unknown name's message says how to declare symbols."""
    if isinstance(value, bool):
        raise ParseError(f"cannot use the bool {value} in {where}: write 1 or 0")
    if isinstance(value, DecimalText):
        return _from_text(str.__str__(value), where)
    if isinstance(value, str):
        if _PLAIN_NUMERAL.fullmatch(value):
            return _decimal_value(value, _failer(value, where))
        return parse_expression(value, where=where, symbols=symbols, symbol_hint=symbol_hint)
    if isinstance(value, numbers.Integral):      # int, numpy integers, sympy.Integer
        return check_value(sympy.Integer(int(value)), _python_fail(value, where))
    if isinstance(value, float):                 # repr is the shortest round-trip text
        if not math.isfinite(value):
            raise _not_finite("float", value, where)
        return _from_text(float.__repr__(value), where)
    if isinstance(value, fractions.Fraction):
        return check_value(sympy.Rational(value.numerator, value.denominator),
                           _python_fail(value, where))
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise _not_finite("Decimal", value, where)
        return _from_text(str(value), where)
    if isinstance(value, sympy.Float):
        if not value.is_finite:
            raise _not_finite("Float", value, where)
        return _from_text(str(value), where)
    if isinstance(value, sympy.Rational):
        return check_value(value, _python_fail(value, where))
    if isinstance(value, sympy.Expr):
        floats = value.atoms(sympy.Float)
        expr = value.xreplace({f: to_exact(f, where=where) for f in floats})
        fail = _python_fail(expr, where)
        expr = _check_finite(expr, where, symbols, fail)
        if expr.is_real is False or (not expr.free_symbols and expr.is_real is not True):
            raise fail("it is not a finite real number", "only real numbers are allowed")
        return check_value(expr, fail)
    raise ParseError(f"cannot use a {type(value).__name__} in {where}: give an int, a "
                     "Fraction, a decimal or an expression string such as '1/sqrt(3)'")
