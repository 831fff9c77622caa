"""SymPy → arb: an exact expression enclosed in a python-flint ball at a given precision.

The one conversion every certified number goes through (certify, compare, the engine).
Past Python's and flint's own limits (huge root indices, unsupported functions) it
raises CertificationError with the expression named, never a traceback."""

from __future__ import annotations

import operator
from functools import reduce

import flint

import sympy
from sympy.polys.polyerrors import BasePolynomialError

from symattn.errors import VALUE_FAILURES, CertificationError
from symattn.numbers.precision import precision

__all__ = ["SYMPY_FAILURES", "to_arb"]

#: What asking SymPy for a minimal polynomial (or a similar exact decision) can raise besides
#: :data:`symattn.errors.VALUE_FAILURES`: its polynomial errors (``NotAlgebraic``,
#: ``PolificationFailed``, ... derive from Exception alone) and TypeError (a relational's
#: undecidable truth value).  Then the exact test knows nothing; anything else is a bug.
SYMPY_FAILURES: tuple[type[Exception], ...] = (*VALUE_FAILURES, TypeError, BasePolynomialError)


# ---------------------------------------------------------------- SymPy -> arb

class _Unsupported(Exception):
    def __init__(self, node: sympy.Basic, reason: str) -> None:
        super().__init__(reason)
        self.node, self.reason = node, reason


def _short(expr: object, limit: int = 80) -> str:
    text = sympy.sstr(expr) if isinstance(expr, sympy.Basic) else repr(expr)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


#: root indices below this go to flint's root; larger ones through exp and log
_ARB_ROOT_INDEX = 1 << 32


def _pow(node: sympy.Pow, base: flint.arb, ex: sympy.Expr, cache: dict) -> flint.arb:
    if isinstance(ex, sympy.Integer):
        return base ** int(ex)                   # exact power of the ball
    if base < 0:
        raise _Unsupported(node, "a negative number to a non-integer power is not real "
                                 "(SymPy takes the complex principal value)")
    if isinstance(ex, sympy.Rational):
        if ex.q < _ARB_ROOT_INDEX:
            return base.root(int(ex.q)) ** int(ex.p)
        # flint's root takes a C unsigned long (32 bits on some platforms): e^((p/q)·log b)
        if base.is_exact() and base.is_zero():
            return base
        return (flint.arb(flint.fmpq(int(ex.p), int(ex.q))) * base.log()).exp()
    return (_arb(ex, cache) * base.log()).exp()  # needs base > 0 (else nan)


_CONSTANTS = {sympy.pi: flint.arb.pi, sympy.E: flint.arb.const_e}
_FUNCS = {sympy.exp: flint.arb.exp, sympy.log: flint.arb.log, sympy.Abs: abs,
          sympy.tanh: flint.arb.tanh, sympy.cos: flint.arb.cos, sympy.sin: flint.arb.sin}
_NARY = {sympy.Add: operator.add, sympy.Mul: operator.mul,
         sympy.Max: flint.arb.max, sympy.Min: flint.arb.min}


def _arb(node: sympy.Basic, cache: dict) -> flint.arb:
    """Evaluate one node (cached: exp(2/sqrt(3)) may appear twice)."""
    hit = cache.get(node)
    if hit is not None:
        return hit
    if isinstance(node, sympy.Rational):
        v = flint.arb(flint.fmpq(int(node.p), int(node.q))) if node.q != 1 else flint.arb(int(node.p))
    elif node in _CONSTANTS:
        v = _CONSTANTS[node]()
    elif node.func in _NARY:
        v = reduce(_NARY[node.func], [_arb(a, cache) for a in node.args])
    elif isinstance(node, sympy.Pow):
        v = _pow(node, _arb(node.base, cache), node.exp, cache)
    elif node.func in _FUNCS and len(node.args) == 1:
        v = _FUNCS[node.func](_arb(node.args[0], cache))
    elif node is sympy.I:
        raise _Unsupported(node, "I is not a real number")
    elif isinstance(node, sympy.Symbol):
        raise _Unsupported(node, f"it contains the symbol {node}; substitute a number first")
    elif node.is_number and node.is_infinite or node in (sympy.nan, sympy.zoo):
        raise _Unsupported(node, f"{node} is not a finite real number")
    elif isinstance(node, sympy.Float):
        raise _Unsupported(node, "floats are not exact; write the number as a fraction")
    else:
        raise _Unsupported(node, f"{_short(node, 40)} is not supported here "
                                 "(exact numbers, + * ** exp log tanh cos sin Abs Max Min pi E only)")
    cache[node] = v
    return v


def to_arb(expr: sympy.Expr, prec: int) -> flint.arb:
    """A proved enclosure of a real SymPy number at ``prec`` bits.

    Walks the tree itself (no evalf/sympify/lambdify), so the result is a
    genuine ball; raises CertificationError for symbols, infinities and
    unsupported functions.  flint's context is global (so this is not
    thread-safe); it is always restored."""
    if not isinstance(expr, sympy.Basic):
        raise TypeError(f"to_arb needs a SymPy expression, not {type(expr).__name__}")
    with precision(prec):
        try:
            return _arb(expr, {})
        except _Unsupported as err:
            where = "" if err.node == expr else f" (in {_short(err.node, 40)})"
            raise CertificationError(
                f"cannot certify {_short(expr)}: {err.reason}{where}") from None
