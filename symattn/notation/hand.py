"""An exact SymPy value as the lesson writes it by hand, as math nodes: e^(−2/√3)/(e^(−2/√3) + 2).

The node form of ``symattn.exact.sympytext.hand_text`` (the one-line text a check's message
shows a student): a rational times √n is written over √n (−2√3/3 is −2/√3, 4√3 is 12/√3), a
sum puts its plain numbers last, a quotient is a fraction.  Why nodes: a result (a verdict, a
proof) can carry the value as math, and each printer typesets it in its own format (MathML,
LaTeX) where the text stays one line.  Only the shape is decided here; equality and evaluation
never read these forms, and any value this does not know stays an ``Exact`` node.
"""

from __future__ import annotations

import sympy

from symattn.exact.sympytext import surd_parts
from symattn.notation.nodes import Exact, Exp, Frac, Func, Int, Math, Mul, Neg, Sqrt, Sum, Sup, Sym

__all__ = ["hand"]

_DEPTH = 200        # deeper than any value a lesson writes: the rest stays one Exact node


def hand(expr: sympy.Basic) -> Math:
    """``expr`` as the lesson writes it, as nodes (``Exact`` where it has no hand form)."""
    return _hand(expr, _DEPTH)


def _hand(x: sympy.Basic, depth: int) -> Math:
    if depth <= 0 or not isinstance(x, sympy.Expr):
        return Exact(x)
    if x.is_Integer:
        return Int(int(x)) if x >= 0 else Neg(Int(-int(x)))
    if x.is_Rational:
        node: Math = Frac(Int(abs(int(x.p))), Int(int(x.q)))
        return Neg(node) if x < 0 else node
    if isinstance(x, sympy.Symbol):
        return Sym(x.name)
    if isinstance(x, sympy.exp):
        return Exp(_hand(x.args[0], depth - 1))
    if x.is_Add:
        return _sum(x, depth)
    if x.is_Mul:
        return _mul(x, depth)
    if x.is_Pow:
        return _pow(x, depth)
    if isinstance(x, sympy.Function) and len(x.args) == 1 and not x.is_Piecewise:
        return Func(type(x).__name__, _hand(x.args[0], depth - 1))
    return Exact(x)


def _sum(x: sympy.Add, depth: int) -> Math:
    """Terms in SymPy's order, plain numbers last; a negative term as ``− t``."""
    terms = sorted(x.args, key=lambda t: bool(t.is_number and t.is_Rational))
    return Sum(tuple(Neg(_hand(-t, depth - 1)) if t.could_extract_minus_sign() else _hand(t, depth - 1)
                     for t in terms))


def _mul(x: sympy.Mul, depth: int) -> Math:
    if x.could_extract_minus_sign():
        return Neg(_mul_body(-x, depth))
    return _mul_body(x, depth)


def _mul_body(x: sympy.Expr, depth: int) -> Math:
    surd = _surd(x)
    if surd is not None:
        return surd
    top, bottom = _fraction(x)
    if bottom != 1:
        return Frac(_hand(top, depth - 1), _hand(bottom, depth - 1))
    if not x.is_Mul:
        return _hand(x, depth - 1)
    return Mul(tuple(_hand(f, depth - 1) for f in x.as_ordered_factors()))


def _fraction(x: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    """Numerator and denominator, as written: a factor to a negative power goes below, an
    exponential stays whole (e^(−2/√3) is not 1/e^(2/√3))."""
    if not x.is_Mul:
        return (x, sympy.S.One) if not (x.is_Pow and x.exp.is_Rational and x.exp < 0) \
            else (sympy.S.One, x.base ** (-x.exp))
    top: list[sympy.Expr] = []
    bottom: list[sympy.Expr] = []
    for f in x.args:
        if f.is_Rational and not f.is_Integer:
            top.append(sympy.Integer(f.p))
            bottom.append(sympy.Integer(f.q))
        elif f.is_Pow and f.exp.is_Rational and f.exp < 0:
            bottom.append(f.base ** (-f.exp))
        else:
            top.append(f)
    return sympy.Mul(*top, evaluate=True), sympy.Mul(*bottom, evaluate=True)


def _surd(x: sympy.Expr) -> Math | None:
    """``c·√n`` (c rational ≠ ±1, n a whole number > 1) as ``(c·n)/√n``: 2/√3, 5/(2√2)."""
    parts = surd_parts(x)
    if parts is None:
        return None
    negative, p, q, n = parts
    root = Sqrt(Int(n))
    node: Math = Frac(Int(p), root if q == 1 else Mul((Int(q), root)))
    return Neg(node) if negative else node


def _pow(x: sympy.Pow, depth: int) -> Math:
    base, ex = x.as_base_exp()
    if ex == sympy.S.Half:
        return Sqrt(_hand(base, depth - 1))
    if ex.is_Rational and ex < 0:
        return Frac(Int(1), _hand(base ** (-ex), depth - 1))
    return Sup(_hand(base, depth - 1), _hand(ex, depth - 1))
